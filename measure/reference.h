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

/// M, the magnitude of the terms of every element of each float output of `dag` on `inputs`
/// (the precision rule's cancellation allowance, measure/precision_rule.h), keyed by the output's
/// name: the magnitude program (ir::BuildMagnitudeProgram) run by the interpreter in float32 with
/// compensated sums, within about 1e-6 relative of ir::EvaluatePointWithMagnitude's float64 M.
/// Errors: those of BuildMagnitudeProgram (no float output) and of ir::RunCompensatedReference.
absl::StatusOr<ir::BufferMap> InterpreterMagnitudes(const ir::ComputeDAG& dag,
                                                    const ir::BufferMap& inputs);

/// BuildGpuReference of the magnitude program of `dag`: a kernel that reads `dag`'s inputs (some
/// of them, by name) and writes M of each float output `C` to a float32 argument named
/// "C" + ir::kMagnitudeSuffix. Errors: BuildMagnitudeProgram's, BuildGpuReference's.
[[nodiscard]] absl::StatusOr<codegen::GpuModule> BuildGpuMagnitudes(const ir::ComputeDAG& dag,
                                                                    const Target& target);

}  // namespace tilesearch::measure
