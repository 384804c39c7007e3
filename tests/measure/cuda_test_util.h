// Tasks and hand-written GPU candidates for the CUDA runtime tests: C = A + B on [M, N] float32
// and candidates that compute it (or a scaled value, or store far out of bounds), compiled to PTX.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/codegen.h"
#include "ir/compute_dag.h"
#include "ir/lower_naive.h"
#include "ir/tensor.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "tests/codegen/nest_builders.h"

namespace tilesearch::measure::testing_util {

/// A kernel argument of `kind` over buffer `name` (dtype, shape), as codegen lists them.
inline codegen::KernelArg KernelArgOf(const std::string& name, ir::ScalarType dtype,
                                      std::vector<int64_t> shape, codegen::KernelArg::Kind kind) {
  codegen::KernelArg a;
  a.buffer.name = name;
  a.buffer.dtype = dtype;
  a.buffer.shape = std::move(shape);
  a.kind = kind;
  return a;
}

/// C[i, j] = A[i, j] + B[i, j], float32, [m, n].
inline absl::StatusOr<ir::ComputeDAG> AddDag(int64_t m, int64_t n) {
  absl::StatusOr<ir::Tensor> a = ir::Placeholder("A", {m, n});
  if (!a.ok()) return a.status();
  absl::StatusOr<ir::Tensor> b = ir::Placeholder("B", {m, n});
  if (!b.ok()) return b.status();
  absl::StatusOr<ir::Tensor> c = ir::Compute("C", {m, n}, [&](const std::vector<ir::Expr>& i) {
    return (*a)({i[0], i[1]}) + (*b)({i[0], i[1]});
  });
  if (!c.ok()) return c.status();
  return ir::ComputeDAG::Create({*c});
}

/// A GPU nest for AddDag's task: rows on blockIdx.x, columns on threadIdx.x, storing
/// (A + B) · scale into C at row i + row_offset (row_offset far beyond M: an illegal address).
inline absl::StatusOr<ir::LoopNest> AddNest(const ir::ComputeDAG& dag, double scale,
                                            int64_t row_offset = 0) {
  using codegen::testing::C;
  using codegen::testing::Ld;
  using codegen::testing::Loop;
  using codegen::testing::St;
  using codegen::testing::V;
  absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(dag);
  if (!naive.ok()) return naive.status();
  const int64_t m = naive->params[0].shape[0];
  const int64_t n = naive->params[0].shape[1];
  ir::Expr value = Ld("A", {V("i"), V("j")}) + Ld("B", {V("i"), V("j")});
  if (scale != 1.0) value = value * ir::FloatConst(scale);
  ir::Expr row = row_offset == 0 ? V("i") : V("i") + C(row_offset);
  ir::LoopNest nest;
  nest.name = "add_candidate";
  nest.params = naive->params;
  nest.num_inputs = naive->num_inputs;
  nest.body = Loop("i", m, Loop("j", n, St("C", {row, V("j")}, value), ir::ForKind::kThreadIdxX),
                   ir::ForKind::kBlockIdxX);
  return nest;
}

/// A measure candidate from a GPU nest (launches derived from the loop extents).
inline absl::StatusOr<BuildResult> CandidateFromNest(ir::LoopNest nest) {
  absl::StatusOr<codegen::GpuModule> module = codegen::CompileToPtx(nest, {});
  if (!module.ok()) return module.status();
  BuildResult c;
  c.compile_ms = module->compile_ms;
  for (const codegen::GpuKernelInfo& k : module->kernels) {
    c.launches.push_back(LaunchConfig{k.grid, k.block, k.static_shared_bytes});
  }
  c.nest = std::make_shared<const ir::LoopNest>(std::move(nest));
  c.gpu_module = std::make_shared<const codegen::GpuModule>(*std::move(module));
  return c;
}

inline absl::StatusOr<BuildResult> AddCandidate(const ir::ComputeDAG& dag, double scale,
                                                int64_t row_offset = 0) {
  absl::StatusOr<ir::LoopNest> nest = AddNest(dag, scale, row_offset);
  if (!nest.ok()) return nest.status();
  return CandidateFromNest(*std::move(nest));
}

}  // namespace tilesearch::measure::testing_util
