// The correctness rule of the tuner's check and of bench/harness/score.py (one definition; the
// scorer mirrors it and both are tested on one table, bench/harness/testdata/precision_cases.json):
// an output element passes when
//
//   |got − ref64| <= atol + rtol · |ref64| + c · u · M
//
// where ref64 is the element's exact value computed in float64, M the float64 magnitude of the
// terms it is made of (propagated through the DAG, below), u the unit roundoff of the arithmetic
// the kernel may use and c = kCancellationFactor. Non-finite values: a NaN ref64 needs a NaN got,
// an infinite ref64 the same infinity, a finite ref64 a finite got, except the overflow of the
// output's type: an infinite got passes where a value within the allowed error of ref64, of the
// same sign, rounds to that infinity in the output's type (|ref64| + allowed >= the type's
// overflow threshold: 65520 for float16). A float16 result whose float64 value is 65515 may be
// computed as 65530 by a float32 sum within tolerance, and stored, it is +inf.
//
// M, the cancellation allowance. A float32 kernel's error in a sum is bounded by its terms'
// magnitudes, not by the result's: sum(x) − sum(x) is 0 but each sum may be off by u · Σ|x_i|
// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §4.2 and §4.3). M carries
// that bound through the DAG, one more double beside the value (ir::EvaluatePointWithMagnitude):
//   - an input element or a constant x: |x|;
//   - a + b, a − b, a sum reduction: the sum of the operands' M (a matmul element: Σ|a_k||b_k|);
//   - a · b, a product reduction: the product of the operands' M;
//   - a / b: M(a) · M(1/b) with the unary rule for 1/b, i.e. M(a) · (M(b)/b² + 1/|b|); a / c
//     for a constant c is the product with its reciprocal, M(a) / |c| (a mean, an average pool);
//   - a unary function f (exp, log, sqrt, rsqrt, tanh, erf, sigmoid, 1/x) at x, to first order:
//     |f'(x)| · M(x) + |f(x)| (the input's error carried through the slope, plus f's own rounding);
//     abs: M(x); floor: M(x) + |floor(x)| (a slope of 1: a tiny input error may move the step);
//     pow(x, y): |y x^(y−1)| M(x) + |x^y ln x| M(y) + |x^y|;
//   - max, min, a max / min reduction: the largest M of the operands (a tiny error near a tie or
//     a kink may flip the choice, and |max(a', b') − max(a, b)| is at most the larger error: relu
//     at a slightly negative x is allowed x's error, not the constant 0's none); a select whose
//     condition reads float values the same; a select on indices alone (padding, bounds): the M of
//     the branch taken;
//   - casts and loads keep M; an integer converted to float: its |value|.
// Every rule gives M >= |value|. A non-finite M (an overflow in a discarded intermediate) gives no
// allowance: the element must then pass atol + rtol · |ref64| alone, so M can never widen the
// tolerance to everything.
//
// c = 16, from the error analysis of float32 sums of K terms with magnitude M:
//   - a pairwise or tree sum (warp shuffles, block trees, split-K) is off by at most
//     ceil(log2 K) · u · M: c = 16 covers that worst case up to K = 65536, and the typical error,
//     about sqrt(log2 K) · u · M, far beyond;
//   - a sequential sum's bound is (K − 1) · u · M, but that bound is reached only when the partial
//     sums grow like the terms (all of one sign); then |ref64| ≈ M and rtol · |ref64| (1e-4 · M,
//     about 1700 u · M) is the larger allowance. Where the terms cancel (zero-mean products, as in
//     a matmul of inputs uniform in [−1, 1)), the partial sums are a random walk and the rounding
//     errors add up to about u · M in standard deviation (their variance is u²/3 · Σ partial²,
//     and Σ partial² ≈ K² σ²/2 against M = K · E|ab|; for uniform inputs the ratio is 0.94): the
//     largest of 10^8 elements is about 6 u · M;
//   - so a kernel as accurate as PyTorch's float32 (blocked or tree sums) passes with a margin of
//     3x; a dropped or doubled term of average size (M / K) is still caught where it exceeds
//     16 · u · M, i.e. for K < 2^20 in float32.
// A sequential float32 sum of 65536 cancelling terms stays within it; one of positive terms is
// within the rtol term. A long sequential sum of same-sign terms that is cancelled afterwards
// (sum(x) − sum(x), x − mean over a long row) is off by about sqrt(K)/3 · u · M and can fail:
// such a kernel is less accurate than PyTorch's tree sums, and tree / split reductions fix it.
//
// u per arithmetic: float32 2^-24, float16 2^-11, bfloat16 2^-8, TF32 2^-11 (10 explicit mantissa
// bits, as float16). A float16 / bfloat16 result is judged with the u of the arithmetic it was
// computed in (ArithmeticUnitRoundoff): float32 for the library's operators, which convert their
// half inputs and accumulate in float32, so that a bfloat16 matmul off by 2% still fails (with
// bfloat16's u, 16 u M is M/16); the half type's u only where intermediate results are stored in
// it. A float32 problem under the `tf32` precision is judged with TF32's u: a TF32
// MMA rounds each operand to 10 mantissa bits, so a product a·b is off by up to 2u|ab| and the
// sum of K of them by up to 2 u · M before accumulation; PyTorch's own TF32 path
// (allow_tf32 = True) needs 2 u · M on the same inputs, which c · u · M covers 8 times.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "ir/type.h"

namespace tilesearch::measure {

/// How float32 problems may compute: `ieee` (float32 arithmetic, or 3xTF32 tensor-core products
/// no less accurate than it) or `tf32` (one TF32 MMA per product, opt-in as PyTorch's allow_tf32).
enum class Fp32Precision : uint8_t { kIeee, kTf32 };

/// "ieee" / "tf32".
const char* Fp32PrecisionName(Fp32Precision precision);
/// Inverse of Fp32PrecisionName. Errors: kInvalidArgument "unknown precision 'x' (ieee, tf32)".
absl::StatusOr<Fp32Precision> ParseFp32Precision(const std::string& name);

/// The workload key of a task tuned under `precision`: `dag_key` (ir::ComputeDAG::WorkloadKey)
/// itself for ieee, so that logs written before the option existed keep their keys, and
/// `dag_key` + "-tf32" for tf32, so that a record of one precision never matches a task or a
/// replay of the other.
std::string PrecisionWorkloadKey(const std::string& dag_key, Fp32Precision precision);

/// c of the rule (the header comment says why 16).
inline constexpr double kCancellationFactor = 16;

/// u of outputs of `dtype` computed under `precision`: float32 2^-24 (2^-11 under kTf32), float16
/// 2^-11, bfloat16 2^-8; 0 for integers and bool (exact).
double UnitRoundoff(ir::ScalarType dtype, Fp32Precision precision = Fp32Precision::kIeee);

/// u of the arithmetic a result of `dtype` is computed in, the u of the rule: float32's (TF32's
/// under kTf32) for float32 results and for float16 / bfloat16 results computed in float32 (the
/// library's half-precision operators convert their inputs and accumulate in float32; the final
/// rounding to the half type, at most 2^-9 relative, is inside rtol = 1e-2); the half type's own u
/// when `rounded_intermediates` (intermediate results stored in it, as in a chain of operators
/// each rounding to the half type). 0 for integers and bool.
double ArithmeticUnitRoundoff(ir::ScalarType dtype, bool rounded_intermediates,
                              Fp32Precision precision = Fp32Precision::kIeee);

/// The parameters of the rule for one output: atol, rtol, u (c is kCancellationFactor) and the
/// output's type, whose overflow threshold decides where an infinite got may pass.
struct PrecisionRule {
  double atol = 0;
  double rtol = 0;
  double unit_roundoff = 0;
  ir::ScalarType output = ir::ScalarType::kFloat32;
};

/// The smallest magnitude that rounds to infinity in `dtype` (round to nearest, ties to even):
/// float16 65520, bfloat16 (2 − 2^-8) · 2^127, float32 (2 − 2^-24) · 2^127; +inf for integers and
/// bool (they do not overflow to infinity).
double OverflowThreshold(ir::ScalarType dtype);

/// The allowed |got − ref64| of a finite ref64 with magnitude `magnitude`:
/// atol + rtol · |ref64| + c · u · M (the last term 0 when M is not finite).
double AllowedError(const PrecisionRule& rule, double ref64, double magnitude);

/// |got − ref64| / AllowedError: <= 1 passes. 0 when both are equal (also 0 / 0); +inf when the
/// allowance is 0 and they differ, or when one of them is not finite and the other differs, except
/// an infinite got that the output type's overflow allows (the rule above): then the distance from
/// |ref64| to the overflow threshold over AllowedError (<= 1).
double ErrorRatio(const PrecisionRule& rule, double got, double ref64, double magnitude);

/// The rule for one element: NaN ref64 needs NaN got; ±Inf ref64 the same infinity; otherwise got
/// finite and |got − ref64| <= AllowedError(rule, ref64, magnitude), or got the infinity of
/// ref64's sign where |ref64| + AllowedError reaches OverflowThreshold(rule.output).
bool PassesPrecisionRule(const PrecisionRule& rule, double got, double ref64, double magnitude);

}  // namespace tilesearch::measure
