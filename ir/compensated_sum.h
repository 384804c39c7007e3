// Compensated (Kahan) summation of the float32 sums of a loop nest: the accurate reference of the
// correctness check. A naive program adds a reduction's terms one by one into a float32
// accumulator, so its error grows with the reduction's length (about K·u·Σ|terms| at worst, u =
// 2^-24): at K = 65536 about 1% of a matmul's outputs under uniform [-1, 1) inputs are farther
// from the exact value than the 1e-4 check tolerance, and correct blocked or tensor-core kernels
// were rejected against it. Kahan's compensation bounds the error by 2u·Σ|terms| +
// O(K·u²)·Σ|terms|, independent of K to first order (W. Kahan, "Further remarks on reducing
// truncation errors", CACM 8(1), 1965; N. J. Higham, Accuracy and Stability of Numerical
// Algorithms, 2nd ed., §4.3).
#pragma once

#include "ir/stmt.h"

namespace tilesearch::ir {

/// Rewrites every float32 accumulation of `nest` into Kahan summation and returns the new nest
/// (same name and parameters). An accumulation is a chain of serial or unrolled loops whose
/// innermost body is the single store `X[idx] = X[idx] + t` (or `t + X[idx]`) of a float32
/// buffer whose indices use none of the chain's loop variables: the naive lowering's reduction
/// loops (ir/lower_naive.h, schedule/naive_gpu.h). Each becomes, per execution of the chain,
///   c = 0; for ...: { y = t − c; s = X[idx] + y; c = (s − X[idx]) − y; X[idx] = s }
/// with c, y, s one-element local float32 buffers allocated around the chain (fresh names). The
/// compensation is only as good as its separate roundings: run the result with float32 rounding
/// of each operation (the interpreter's Precision::kNative, GPU code with fma contraction off);
/// no compiler may reassociate it (no fast-math). Other statements are left as they are (max /
/// min / prod reductions, integer and half-precision buffers, accumulations inside parallel or
/// thread-bound loops).
LoopNest CompensateFloatSums(const LoopNest& nest);

}  // namespace tilesearch::ir
