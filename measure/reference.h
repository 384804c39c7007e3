// The reference a candidate is checked against: the unscheduled program of the task, run by the
// interpreter (ir::RunReference) for small tasks, otherwise compiled for the target itself. This
// header holds the choice between the two and the build of the GPU reference kernel.
#pragma once

#include "absl/status/statusor.h"
#include "base/target.h"
#include "codegen/codegen.h"
#include "ir/compute_dag.h"

namespace tilesearch::measure {

/// Interpreted operations of the naive program of `dag`: 2 · FLOPs + stores (one per element of
/// every computed stage). Tasks above MeasureOptions::interpreter_reference_max_ops get a compiled
/// reference.
double NaiveOps(const ir::ComputeDAG& dag);

/// The naive GPU kernel of `dag` for `target` (schedule::NaiveGpuSchedule, lowered, compiled to
/// PTX for target.arch, sm_90 when empty) with its float32 sums compensated
/// (ir::CompensateFloatSums) and fma contraction off, so that it rounds every operation separately
/// as the interpreter does (and the compensation works). Errors: those of the schedule, the
/// lowering and the compilation, with the message prefixed "reference kernel: ".
[[nodiscard]] absl::StatusOr<codegen::GpuModule> BuildGpuReference(const ir::ComputeDAG& dag,
                                                                   const Target& target);

}  // namespace tilesearch::measure
