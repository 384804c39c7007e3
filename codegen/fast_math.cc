#include "codegen/fast_math.h"

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"

namespace tilesearch::codegen::internal {
namespace {

namespace arith = mlir::arith;
using mlir::Value;

// Coefficients, lowest degree first, from bench/scripts/fit_fast_math.py (Remez fits rounded to
// float32; the script prints them and the float32 evaluation's error).
// erf(x) = x + x P(x^2) on |x| < 1: P ~ erf(x) / x - 1, 1.28 ulp evaluated in float32.
constexpr float kErfSmall[] = {0.128379121f,   -0.37612325f,  0.112801798f,
                               -0.0267113112f, 0.0049175513f, -0.000563142239f};
// erf(x) = 1 - 2^Q(|x|) on [1, kErfClamp]: Q ~ log2(erfc), 1.21 ulp with an exact 2^x.
constexpr float kErfLarge[] = {-0.00377866277f, -1.6123867f,   -0.943868876f,
                               -0.12811093f,    0.0213978328f, -0.00166951714f};
// Above this erfc(|x|) < 2^-25, so float32 erf(x) is +-1: Q is evaluated at min(|x|, kErfClamp).
constexpr float kErfClamp = 3.91992188f;
// log1p(y) = y + y^2 R(y) on [-0.25, 1/3): 0.76 ulp in float32.
constexpr float kLog1pSmall[] = {-0.49999994f,  0.333334923f, -0.250010431f, 0.199861303f,
                                 -0.166037142f, 0.146095499f, -0.139096558f, 0.0942011848f};
// The small range of log1p as |y - center| < radius (one compare).
constexpr double kLog1pCenter = (1.0 / 3.0 - 0.25) / 2.0;
constexpr double kLog1pRadius = (1.0 / 3.0 + 0.25) / 2.0;
// log2(e) as float32 high part + low part (the low part is log2(e) - high, to float32).
constexpr float kLog2eHi = 1.44269502f;
constexpr float kLog2eLo = 1.92596303e-08f;
constexpr double kLn2 = 0.69314718055994531;
// exp's argument clamp: exp(89) overflows to +inf, exp(-104) is below the smallest subnormal, and
// the clamp keeps t and its residual finite (an infinite t would make the residual NaN).
constexpr double kExpMax = 89.0;
constexpr double kExpMin = -104.0;

// Emits the expansions for one op's type (f32 or a 1-D vector of f32) before that op.
class Expander {
 public:
  Expander(mlir::Operation* op, Exp2Log2Source source)
      : b_(op), loc_(op->getLoc()), type_(op->getResult(0).getType()), source_(source) {}

  Value Erf(Value x) {
    Value a = mlir::math::AbsFOp::create(b_, loc_, x);
    Value t = Mul(x, x);
    Value small = Fma(x, Horner(t, kErfSmall), x);
    Value clamped = arith::MinimumFOp::create(b_, loc_, a, C(kErfClamp));  // NaN stays NaN
    Value tail = arith::SubFOp::create(b_, loc_, C(1.0), Exp2(Horner(clamped, kErfLarge)));
    Value large = mlir::math::CopySignOp::create(b_, loc_, tail, x);
    Value is_small = arith::CmpFOp::create(b_, loc_, arith::CmpFPredicate::OLT, a, C(1.0));
    return arith::SelectOp::create(b_, loc_, is_small, small, large);
  }

  Value Exp(Value x) {
    Value xc = arith::MaximumFOp::create(
        b_, loc_, arith::MinimumFOp::create(b_, loc_, x, C(kExpMax)), C(kExpMin));
    // x log2(e) = t + e exactly up to x * (log2(e) - hi - lo): fma gives the product's rounding
    // error, so 2^t carries ex2's error only, not |t| ulp of t's rounding.
    Value t = Mul(xc, C(kLog2eHi));
    Value e = Fma(xc, C(kLog2eHi), arith::NegFOp::create(b_, loc_, t));
    e = Fma(xc, C(kLog2eLo), e);
    Value r = Exp2(t);
    return Fma(r, Mul(e, C(kLn2)), r);  // 2^e = 1 + e ln 2 to 2^-35 for |e| <= 2^-17
  }

  // 1 + y is never subnormal (it is 0 or at least 2^-24 in magnitude), so log2 may flush
  // subnormal inputs: on the GPU that saves lg2.approx's rescaling of them (three instructions).
  Value Log1p(Value y) {
    return LogOfOnePlus(y, arith::AddFOp::create(b_, loc_, C(1.0), y), /*u_normal=*/true);
  }

  // x - 1 is exact for x in [0.5, 2] (Sterbenz), which covers log1p's small range.
  Value Log(Value x) {
    return LogOfOnePlus(arith::SubFOp::create(b_, loc_, x, C(1.0)), x, /*u_normal=*/false);
  }

 private:
  // log(u) where u = 1 + f (f exact, u possibly rounded): the polynomial near u = 1, where
  // log2's absolute error would be a large relative one; log2(u) ln 2 elsewhere (|log u| >= 0.28
  // there). NaN fails the compare and takes log2, which also handles 0, negatives and +inf.
  // u_normal: u is never subnormal.
  Value LogOfOnePlus(Value f, Value u, bool u_normal) {
    Value off = arith::SubFOp::create(b_, loc_, f, C(kLog1pCenter));
    Value is_small =
        arith::CmpFOp::create(b_, loc_, arith::CmpFPredicate::OLT,
                              mlir::math::AbsFOp::create(b_, loc_, off), C(kLog1pRadius));
    Value small = Fma(Mul(f, f), Horner(f, kLog1pSmall), f);
    Value large = Mul(Log2(u, /*flush_subnormals=*/u_normal), C(kLn2));
    return arith::SelectOp::create(b_, loc_, is_small, small, large);
  }

  Value C(double v) {
    const mlir::Type f32 = b_.getF32Type();
    const mlir::FloatAttr attr = b_.getFloatAttr(f32, v);
    if (auto vt = mlir::dyn_cast<mlir::VectorType>(type_)) {
      return arith::ConstantOp::create(b_, loc_, mlir::DenseElementsAttr::get(vt, attr));
    }
    return arith::ConstantOp::create(b_, loc_, attr);
  }
  Value Mul(Value a, Value b) { return arith::MulFOp::create(b_, loc_, a, b); }
  Value Fma(Value a, Value b, Value c) { return mlir::math::FmaOp::create(b_, loc_, a, b, c); }

  // c[0] + v c[1] + ... + v^n c[n] by fma steps.
  Value Horner(Value v, absl::Span<const float> c) {
    Value acc = C(c.back());
    for (size_t i = c.size() - 1; i-- > 0;) acc = Fma(acc, v, C(c[i]));
    return acc;
  }

  Value Exp2(Value v) {
    if (source_ == Exp2Log2Source::kMathOps) return mlir::math::Exp2Op::create(b_, loc_, v);
    // ftz: the erf and exp arguments never need a subnormal result to stay within their error.
    return PerLane(v, "llvm.nvvm.ex2.approx.ftz.f32");
  }

  Value Log2(Value v, bool flush_subnormals) {
    if (source_ == Exp2Log2Source::kMathOps) return mlir::math::Log2Op::create(b_, loc_, v);
    // Not ftz unless the caller knows v is normal: log of a subnormal input is finite.
    return PerLane(v, flush_subnormals ? "llvm.nvvm.lg2.approx.ftz.f" : "llvm.nvvm.lg2.approx.f");
  }

  // The NVVM intrinsics are scalar: one call per lane of a vector.
  Value PerLane(Value v, const char* intrinsic) {
    const mlir::Type f32 = b_.getF32Type();
    auto call = [&](Value s) -> Value {
      return mlir::LLVM::CallIntrinsicOp::create(b_, loc_, f32, b_.getStringAttr(intrinsic),
                                                 mlir::ValueRange{s})
          .getResult(0);
    };
    auto vt = mlir::dyn_cast<mlir::VectorType>(v.getType());
    if (!vt) return call(v);
    Value out = v;
    for (int64_t i = 0; i < vt.getNumElements(); ++i) {
      Value lane = mlir::vector::ExtractOp::create(b_, loc_, v, i);
      out = mlir::vector::InsertOp::create(b_, loc_, call(lane), out, i);
    }
    return out;
  }

  mlir::OpBuilder b_;
  mlir::Location loc_;
  mlir::Type type_;
  Exp2Log2Source source_;
};

bool IsF32ScalarOrVector(mlir::Type type) {
  if (auto vt = mlir::dyn_cast<mlir::VectorType>(type)) {
    return vt.getRank() == 1 && !vt.isScalable() && vt.getElementType().isF32();
  }
  return type.isF32();
}

// The constant 1.0, or (in a vectorized kernel, before canonicalization folds it) its broadcast.
bool IsOne(Value v) {
  if (auto splat = v.getDefiningOp<mlir::vector::BroadcastOp>()) v = splat.getSource();
  return mlir::matchPattern(v, mlir::m_OneFloat());
}

// log(1 + y) (either operand order) becomes log1p(y); the sum stays for its other users.
void FormLog1p(mlir::Operation* root) {
  std::vector<mlir::math::LogOp> logs;
  root->walk([&](mlir::math::LogOp op) {
    if (IsF32ScalarOrVector(op.getType())) logs.push_back(op);
  });
  for (mlir::math::LogOp log : logs) {
    auto add = log.getOperand().getDefiningOp<arith::AddFOp>();
    if (!add) continue;
    for (int i = 0; i < 2; ++i) {
      if (!IsOne(add.getOperand(i))) continue;
      mlir::OpBuilder b(log);
      Value y = add.getOperand(1 - i);
      Value log1p = mlir::math::Log1pOp::create(b, log.getLoc(), y);
      log.getResult().replaceAllUsesWith(log1p);
      log.erase();
      if (add->use_empty()) add.erase();
      break;
    }
  }
}

}  // namespace

void ExpandFastMath(mlir::Operation* root, Exp2Log2Source source) {
  FormLog1p(root);
  std::vector<mlir::Operation*> ops;
  root->walk([&](mlir::Operation* op) {
    if (mlir::isa<mlir::math::ErfOp, mlir::math::ExpOp, mlir::math::LogOp, mlir::math::Log1pOp>(
            op) &&
        IsF32ScalarOrVector(op->getResult(0).getType())) {
      ops.push_back(op);
    }
  });
  for (mlir::Operation* op : ops) {
    Expander ex(op, source);
    const Value x = op->getOperand(0);
    Value r;
    if (mlir::isa<mlir::math::ErfOp>(op)) {
      r = ex.Erf(x);
    } else if (mlir::isa<mlir::math::ExpOp>(op)) {
      r = ex.Exp(x);
    } else if (mlir::isa<mlir::math::LogOp>(op)) {
      r = ex.Log(x);
    } else {
      r = ex.Log1p(x);
    }
    op->getResult(0).replaceAllUsesWith(r);
    op->erase();
  }
}

}  // namespace tilesearch::codegen::internal
