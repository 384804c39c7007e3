// The magnitude program of a compute DAG: a second DAG whose outputs are M, the magnitude of the
// terms of each float output element (the cancellation allowance of the precision rule,
// measure/precision_rule.h), computed by ordinary stages so that any backend that runs the
// reference (the interpreter, a naive GPU kernel) also computes M for every element at once,
// instead of one float64 point evaluation per element (ir::EvaluatePointWithMagnitude).
//
// Construction: for every float compute stage S of the DAG, in topological order, a float32 stage
// S_magnitude with S's axes (and reduce axes) whose body is M(S's body) by the propagation rules of
// EvaluatePointWithMagnitude, written as expressions: a Load of S inside a body becomes a Load of
// S_magnitude at the same indices; a Load of an input x becomes |x|; the values the rules need (the
// x of |f'(x)| · M(x) + |f(x)|, the divisor of a / b) are the original expressions, so the
// original stages they read stay in the magnitude DAG. A sum (product) reduction sums (multiplies)
// the terms' M from M(init). min, max and max / min reductions take the largest M of their
// operands (and of a finite init), as does a select whose condition reads float values (a
// relu-like kink: a tiny error may flip the choice, and |max(a', b') − max(a, b)| is at most the
// larger error); a select on indices (padding) takes the taken branch's M, since the other branch
// may read out of bounds.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"

namespace tilesearch::ir {

/// The magnitude program of `dag` and which output of `dag` each of its outputs measures.
struct MagnitudeProgram {
  ComputeDAG dag;
  /// For each output of `dag` (in order): the index of the output of `source` it is the
  /// magnitude of (float outputs only; integer and bool outputs have none).
  std::vector<int> source_output;
};

/// Whether `e` has a float-typed subexpression (a condition on computed values rather than on
/// indices alone): the select rule above.
bool ReadsFloatValues(const Expr& e);

/// The magnitude program's outputs (`computed`, by their own names, as a run of program.dag
/// returns them) keyed by the name of the `source` output each measures.
BufferMap KeyedBySource(const MagnitudeProgram& program, const ComputeDAG& source,
                        BufferMap computed);

/// Suffix of a magnitude stage's name: stage "C" has magnitude stage "C_magnitude".
inline constexpr char kMagnitudeSuffix[] = "_magnitude";

/// The magnitude program of `source` (see the file comment): one float32 output per float output
/// of `source`, of the same shape, named by kMagnitudeSuffix. Errors: kInvalidArgument when
/// `source` has no float output, or when a magnitude stage's name is already a stage of `source`;
/// the errors of Compute / Reduce / ComputeDAG::Create on the built stages.
absl::StatusOr<MagnitudeProgram> BuildMagnitudeProgram(const ComputeDAG& source);

}  // namespace tilesearch::ir
