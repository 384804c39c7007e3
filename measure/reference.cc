#include "measure/reference.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/compensated_sum.h"
#include "ir/magnitude_dag.h"
#include "ir/reference.h"
#include "schedule/lower.h"
#include "schedule/naive_gpu.h"

namespace tilesearch::measure {

double NaiveOps(const ir::ComputeDAG& dag) {
  double stores = 0;
  for (int id = 0; id < dag.num_stages(); ++id) {
    if (dag.Kind(id) != ir::StageKind::kPlaceholder) {
      stores += static_cast<double>(dag.stage(id).NumElements());
    }
  }
  return 2 * dag.Flops() + stores;
}

absl::StatusOr<ir::BufferMap> InterpreterReference(const ir::ComputeDAG& dag,
                                                   const ir::BufferMap& inputs) {
  if (NaiveOps(dag) > kFloat64ReferenceMaxOps) return ir::RunCompensatedReference(dag, inputs);
  ir::BufferMap outputs;
  for (int id : dag.output_ids()) {
    const ir::Tensor& t = dag.stage(id);
    ASSIGN_OR_RETURN(std::vector<double> values, ir::EvaluateStage(dag, id, inputs));
    ir::HostBuffer b = ir::HostBuffer::Zeros(t.dtype(), t.shape());
    for (size_t i = 0; i < values.size(); ++i) b.data[i] = ir::RoundToType(values[i], t.dtype());
    outputs.emplace(t.name(), std::move(b));
  }
  return outputs;
}

absl::StatusOr<codegen::GpuModule> BuildGpuReference(const ir::ComputeDAG& dag,
                                                     const Target& target) {
  auto wrap = [](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("reference kernel: ", s.message()));
  };
  absl::StatusOr<schedule::State> state = schedule::NaiveGpuSchedule(dag, target);
  if (!state.ok()) return wrap(state.status());
  // The reference's one lowering: the naive schedule is no search candidate.
  absl::StatusOr<schedule::LoweredKernel> lowered = schedule::Lower(dag, *state, target);
  if (!lowered.ok()) return wrap(lowered.status());
  // Kahan-compensated sums: the reference stays within about 2u·Σ|terms| of the exact value
  // however long a reduction is (a plain float32 sum over k = 65536 is not within 1e-4).
  lowered->nest = ir::CompensateFloatSums(lowered->nest);
  codegen::GpuCompileOptions compile;
  compile.arch = target.arch.empty() ? "sm_90" : target.arch;
  compile.fma_contraction = false;
  absl::StatusOr<codegen::GpuModule> module =
      codegen::CompileToPtx(lowered->nest, lowered->launches, compile);
  if (!module.ok()) return wrap(module.status());
  return module;
}

absl::StatusOr<ir::BufferMap> InterpreterMagnitudes(const ir::ComputeDAG& dag,
                                                    const ir::BufferMap& inputs) {
  ASSIGN_OR_RETURN(ir::MagnitudeProgram program, ir::BuildMagnitudeProgram(dag));
  ASSIGN_OR_RETURN(ir::BufferMap computed, ir::RunCompensatedReference(program.dag, inputs));
  return ir::KeyedBySource(program, dag, std::move(computed));
}

absl::StatusOr<codegen::GpuModule> BuildGpuMagnitudes(const ir::ComputeDAG& dag,
                                                      const Target& target) {
  ASSIGN_OR_RETURN(ir::MagnitudeProgram program, ir::BuildMagnitudeProgram(dag));
  return BuildGpuReference(program.dag, target);
}

}  // namespace tilesearch::measure
