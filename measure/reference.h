// The reference a candidate is checked against: the unscheduled program of the task, run by the
// interpreter (ir::RunReference) for small tasks, otherwise compiled for the target itself. This
// header holds the choice between the two and the build of the GPU reference kernel.
#pragma once

#include "absl/status/statusor.h"
#include "base/target.h"
#include "codegen/codegen.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"

namespace tilesearch::measure {

/// Interpreted operations of the naive program of `dag`: 2 · FLOPs + stores (one per element of
/// every computed stage). Tasks above MeasureOptions::interpreter_reference_max_ops get a compiled
/// reference.
double NaiveOps(const ir::ComputeDAG& dag);

/// The check's reference for tasks small enough for the interpreter: the naive program with
/// float64 arithmetic (ir::Precision::kFloat64: every stage's stores rounded to its dtype), so that
/// the cheap screen of the check (|got − ref| <= atol + rtol·|ref|, CompareElement) never accepts
/// an element the precision rule (measure/precision_rule.h) rejects: the reference is off from the
/// exact value by one rounding of each materialized stage, at most u·|ref| for the output and, to
/// first order, u times the stage's share of M for each intermediate, which c·u·M (c = 16) covers
/// for DAGs of fewer than 16 stages on a path. A float32 reference summed in one order is off by up
/// to sqrt(K)/3 · u · M instead. Errors: those of ir::RunReference.
absl::StatusOr<ir::BufferMap> InterpreterReference(const ir::ComputeDAG& dag,
                                                   const ir::BufferMap& inputs);

/// The naive GPU kernel of `dag` for `target` (schedule::NaiveGpuSchedule, lowered, compiled to
/// PTX for target.arch, sm_90 when empty) with fma contraction off, so that it rounds every
/// operation separately as the interpreter does. Errors: those of the schedule, the lowering and
/// the compilation, with the message prefixed "reference kernel: ".
[[nodiscard]] absl::StatusOr<codegen::GpuModule> BuildGpuReference(const ir::ComputeDAG& dag,
                                                                   const Target& target);

}  // namespace tilesearch::measure
