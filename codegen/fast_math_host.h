// The GPU target's float32 math expansions (codegen/fast_math.h) compiled for the host, one
// function per call, so their arithmetic can be checked against float64 where no GPU is: the same
// MLIR rewrite, with the C library's exp2f / log2f in place of the hardware's ex2.approx /
// lg2.approx (whose own error only the device can show: bench/scripts/h200_fast_math_check.sh).
#pragma once

#include <memory>

#include "absl/status/statusor.h"

namespace tilesearch::codegen {

/// The expansions ExpandFastMath emits, as the op each one replaces.
enum class FastMathFunction {
  kErf,         ///< math.erf
  kExp,         ///< math.exp
  kLog,         ///< math.log
  kLog1p,       ///< math.log1p
  kLogOnePlus,  ///< math.log(1 + y), which the rewrite turns into log1p(y)
};

/// One compiled expansion: float32 in, float32 out.
class FastMathHostFunction {
 public:
  virtual ~FastMathHostFunction() = default;
  /// The expansion at x.
  virtual float operator()(float x) const = 0;
};

/// JIT-compiles `f(x)` for the host CPU through the MLIR -> LLVM path of the host target, with the
/// GPU expansion in place of the host's math approximations. Errors: kInternal when MLIR or the
/// JIT fails.
absl::StatusOr<std::unique_ptr<FastMathHostFunction>> CompileFastMathForHost(FastMathFunction f);

}  // namespace tilesearch::codegen
