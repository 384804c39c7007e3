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

/// Tasks of at most this many NaiveOps get a float64 reference (InterpreterReference): about one
/// second of point evaluation on one core, and its memo's memory.
inline constexpr double kFloat64ReferenceMaxOps = 1 << 22;

/// The check's reference for tasks small enough for the interpreter. Up to
/// kFloat64ReferenceMaxOps: every output element evaluated in float64 from the definitions
/// (ir::EvaluateStage) and rounded once to its dtype, so that the cheap screen of the check
/// (|got − ref| <= atol + rtol·|ref|, CompareElement) never accepts an element the precision rule
/// (measure/precision_rule.h) rejects: |ref − ref64| <= u·|ref64| <= u·M, inside c·u·M. Above it,
/// the naive program in float32 (ir::RunReference; the interpreter's float64 mode would not help:
/// it rounds every store of a reduction's accumulator), whose error the arbitration covers
/// (ArbitrateMismatches). Errors: those of ir::EvaluateStage / ir::RunReference.
absl::StatusOr<ir::BufferMap> InterpreterReference(const ir::ComputeDAG& dag,
                                                   const ir::BufferMap& inputs);

/// The naive GPU kernel of `dag` for `target` (schedule::NaiveGpuSchedule, lowered, compiled to
/// PTX for target.arch, sm_90 when empty) with its float32 sums compensated
/// (ir::CompensateFloatSums) and fma contraction off, so that it rounds every operation separately
/// as the interpreter does (and the compensation works). Errors: those of the schedule, the
/// lowering and the compilation, with the message prefixed "reference kernel: ".
[[nodiscard]] absl::StatusOr<codegen::GpuModule> BuildGpuReference(const ir::ComputeDAG& dag,
                                                                   const Target& target);

}  // namespace tilesearch::measure
