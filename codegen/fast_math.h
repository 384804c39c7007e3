// Internal to codegen: float32 expansions of math.erf, math.exp, math.log and math.log1p built on
// a fast 2^x and log2(x) (on the cuda target the hardware's ex2.approx / lg2.approx), for
// memory-bound elementwise kernels whose issue slots the piecewise polynomial approximations of
// ApproximateMath would fill. Each expansion is branch-free (at most two ranges joined by one
// select), keeps NaN, infinities and signed zeros, and is a few ulp from the correctly rounded
// result; the coefficients are fitted by bench/scripts/fit_fast_math.py.
#pragma once

#include "mlir/IR/Operation.h"

namespace tilesearch::codegen::internal {

/// Where the expansions take 2^x and log2(x) from.
enum class Exp2Log2Source {
  /// llvm.nvvm.ex2.approx.ftz.f32 and llvm.nvvm.lg2.approx.f (the cuda target).
  kNvvmApprox,
  /// math.exp2 and math.log2, lowered to the C library's exp2f / log2f by the host JIT: the
  /// expansions' own arithmetic, testable where no GPU is.
  kMathOps,
};

/// Rewrites `log(1 + y)` into `log1p(y)` (the float32 sum 1 + y loses y's low bits), then replaces
/// every float32 (scalar or 1-D vector) math.erf, math.exp, math.log and math.log1p under `root` by
/// its expansion:
///   erf(x)   = x + x P(x^2) for |x| < 1, else copysign(1 - 2^Q(min(|x|, 3.92)), x)
///   exp(x)   = 2^t (1 + e ln 2), t = x log2(e) rounded, e its residual (two-constant log2(e))
///   log1p(y) = y + y^2 R(y) for -0.25 <= y < 1/3, else log2(1 + y) ln 2
///   log(x)   = log1p(x - 1) near 1 (x - 1 exact there), else log2(x) ln 2
/// Ops of other types are left alone (ApproximateMath expands them).
void ExpandFastMath(mlir::Operation* root, Exp2Log2Source source);

}  // namespace tilesearch::codegen::internal
