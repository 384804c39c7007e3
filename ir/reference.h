// Reference results for a ComputeDAG: random inputs, the naive program run by the interpreter, and
// point evaluation of one output element straight from the definition in float64.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"

namespace tilesearch::ir {

/// One random buffer per placeholder (values in [-1, 1), seeded), keyed by tensor name.
BufferMap MakeRandomInputs(const ComputeDAG& dag, uint64_t seed);

/// Lowers naively and interprets; returns the output buffers keyed by tensor name.
/// Errors: missing / mis-shaped inputs, a generated input (HostBuffer::source: interpretation needs
/// its values in memory), interpreter errors.
absl::StatusOr<BufferMap> RunReference(const ComputeDAG& dag, const BufferMap& inputs,
                                       Precision precision = Precision::kNative);

/// RunReference of the naive program with every float32 sum compensated
/// (ir/compensated_sum.h: Kahan summation, error about 2u·Σ|terms| whatever the reduction's
/// length), each operation rounded to float32: the correctness check's reference. Errors as
/// RunReference.
absl::StatusOr<BufferMap> RunCompensatedReference(const ComputeDAG& dag, const BufferMap& inputs);

/// Value of stage `stage_id` at `index`, computed from the definitions in float64 (producers are
/// evaluated pointwise, memoized). `steps`, when given, receives the number of stage bodies
/// evaluated (one per element computed, one per reduce iteration; inputs are not counted): a
/// deterministic measure of the call's work (a matmul element: K). Inputs may be generated
/// (HostBuffer::source): only the elements the point reads are computed. Errors: bad stage id,
/// index rank or range, missing or mis-shaped input.
absl::StatusOr<double> EvaluatePoint(const ComputeDAG& dag, int stage_id,
                                     const std::vector<int64_t>& index, const BufferMap& inputs,
                                     int64_t* steps = nullptr);

/// Every element of stage `stage_id` computed from the definitions in float64 (EvaluatePoint's
/// values, row-major, one evaluator whose memo every element shares: each producer element is
/// computed once). Memory grows with the elements of every stage evaluated. Errors: as
/// EvaluatePoint.
absl::StatusOr<std::vector<double>> EvaluateStage(const ComputeDAG& dag, int stage_id,
                                                  const BufferMap& inputs);

/// A float64 value and the float64 magnitude of the terms it is made of.
struct PointValue {
  double value = 0;
  double magnitude = 0;
};

/// EvaluatePoint that also carries M, the magnitude of the terms, through the evaluation (the
/// cancellation allowance of measure/precision_rule.h, which states the rules): inputs and
/// constants |x|; +, − and sum reductions add M; ·, product reductions multiply it; a / b is
/// M(a) · (M(b)/b² + 1/|b|) (by a constant c: M(a)/|c|); a unary f is |f'(x)| · M(x) + |f(x)| (abs
/// M(x), floor M(x) + |floor x|); max, min and max / min reductions take the largest M of their
/// operands, a select on float values too, a select on indices the taken branch's; casts keep it;
/// an integer converted to float, and an integer stage's result, is its |value|. A matmul element's
/// M is Σ|a||b|; sum(x) − sum(x) has value 0 and M 2·Σ|x|. Same errors and `steps` as
/// EvaluatePoint.
absl::StatusOr<PointValue> EvaluatePointWithMagnitude(const ComputeDAG& dag, int stage_id,
                                                      const std::vector<int64_t>& index,
                                                      const BufferMap& inputs,
                                                      int64_t* steps = nullptr);

/// The value the naive program computes at `index` of stage `stage_id`: every float operation
/// rounded to its type (float32 arithmetic without FMA, as the interpreter's kNative precision and
/// the reference kernels), each reduction summed in definition order and every stage element
/// rounded to its dtype; transcendental functions from the host's libm (the kernels' polynomial
/// approximations differ by a few ulp). A plain float32 kernel's result at one point, for
/// comparing a candidate's accuracy with it without running the whole program. Same errors and
/// `steps` as EvaluatePoint.
absl::StatusOr<double> EvaluatePointRounded(const ComputeDAG& dag, int stage_id,
                                            const std::vector<int64_t>& index,
                                            const BufferMap& inputs, int64_t* steps = nullptr);

}  // namespace tilesearch::ir
