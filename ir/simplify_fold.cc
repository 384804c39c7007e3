// Constant folding for the simplifier, with the exact semantics of ir/expr.h and the reference
// interpreter: floor division, int32 wrap-around, float32 rounding of every operation.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/simplify_internal.h"

namespace tilesearch::ir::simplify_internal {
namespace {

constexpr ScalarType kI64 = ScalarType::kInt64;
constexpr ScalarType kI32 = ScalarType::kInt32;
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// Value of a float node of type `t` computed in double: float32 arithmetic rounds every
// operation, and +,-,*,/ computed in double then rounded once give the float32 result exactly.
// float16 / bfloat16 arithmetic runs in float32 and is rounded only when stored, so a result is
// folded only when the type can hold it exactly.
std::optional<Expr> FloatResult(ScalarType t, double v) {
  if (std::isnan(v)) return std::nullopt;
  double f32 = static_cast<float>(v);
  if (t != ScalarType::kFloat32 && RoundToType(f32, t) != f32) return std::nullopt;
  return FloatImmNode::Make(t, f32);
}

// Both operands float constants x and y of type t.
std::optional<Expr> FoldFloat(ExprKind kind, ScalarType t, double x, double y) {
  switch (kind) {
    case ExprKind::kAdd:
      return FloatResult(t, x + y);
    case ExprKind::kSub:
      return FloatResult(t, x - y);
    case ExprKind::kMul:
      return FloatResult(t, x * y);
    case ExprKind::kDiv:
      return FloatResult(t, x / y);
    case ExprKind::kMin:
    case ExprKind::kMax:
      // NaN and signed-zero ties depend on how min/max is implemented: left alone.
      if (std::isnan(x) || std::isnan(y) || x == y) return std::nullopt;
      return FloatImmNode::Make(t, kind == ExprKind::kMin ? std::min(x, y) : std::max(x, y));
    case ExprKind::kEQ:
      return BoolConst(x == y);
    case ExprKind::kNE:
      return BoolConst(x != y);
    case ExprKind::kLT:
      return BoolConst(x < y);
    case ExprKind::kLE:
      return BoolConst(x <= y);
    case ExprKind::kGT:
      return BoolConst(x > y);
    case ExprKind::kGE:
      return BoolConst(x >= y);
    default:
      return std::nullopt;  // float Mod: the evaluator's rounding steps are its own
  }
}

// Add, Sub, Mul, Div (floor), Mod (floor) of int constants of type t; nullopt for other kinds,
// division by zero and int64 overflow.
std::optional<int64_t> IntArithmetic(ExprKind kind, ScalarType t, int64_t x, int64_t y) {
  std::optional<int64_t> r;
  if (t == kI32) {
    // int32 operands fit easily in int64; IntImmNode::Make wraps the result to int32.
    switch (kind) {
      case ExprKind::kAdd:
        r = x + y;
        break;
      case ExprKind::kSub:
        r = x - y;
        break;
      case ExprKind::kMul:
        r = x * y;
        break;
      case ExprKind::kDiv:
        if (y != 0) r = FloorDiv(x, y);
        break;
      case ExprKind::kMod:
        if (y != 0) r = FloorMod(x, y);
        break;
      default:
        break;
    }
  } else if (t == kI64) {
    switch (kind) {
      case ExprKind::kAdd:
        r = CheckedAdd(x, y);
        break;
      case ExprKind::kSub:
        r = CheckedSub(x, y);
        break;
      case ExprKind::kMul:
        r = CheckedMul(x, y);
        break;
      case ExprKind::kDiv:
        r = CheckedFloorDiv(x, y);
        break;
      case ExprKind::kMod:
        if (y != 0) r = y == -1 ? 0 : FloorMod(x, y);
        break;
      default:
        break;
    }
  }
  return r;
}

}  // namespace

std::optional<Expr> FoldBinary(ExprKind kind, const Expr& a, const Expr& b) {
  ScalarType t = a.type();
  if (auto fa = a.as<FloatImmNode>()) {
    const auto* fb = b.as<FloatImmNode>();
    if (!fb) return std::nullopt;
    return FoldFloat(kind, t, fa->value, fb->value);
  }
  auto ia = AsConstInt(a), ib = AsConstInt(b);
  if (!ia || !ib) return std::nullopt;
  int64_t x = *ia, y = *ib;
  switch (kind) {
    case ExprKind::kEQ:
      return BoolConst(x == y);
    case ExprKind::kNE:
      return BoolConst(x != y);
    case ExprKind::kLT:
      return BoolConst(x < y);
    case ExprKind::kLE:
      return BoolConst(x <= y);
    case ExprKind::kGT:
      return BoolConst(x > y);
    case ExprKind::kGE:
      return BoolConst(x >= y);
    case ExprKind::kAnd:
      return BoolConst(x && y);
    case ExprKind::kOr:
      return BoolConst(x || y);
    case ExprKind::kMin:
      return IntImmNode::Make(t, std::min(x, y));
    case ExprKind::kMax:
      return IntImmNode::Make(t, std::max(x, y));
    default:
      break;
  }
  std::optional<int64_t> r = IntArithmetic(kind, t, x, y);
  if (!r) return std::nullopt;
  return IntImmNode::Make(t, *r);
}

std::optional<Expr> FoldCast(ScalarType t, const Expr& v) {
  if (auto i = AsConstInt(v)) {
    if (IsInt(t) || IsBool(t)) return IntImmNode::Make(t, *i);
    // Beyond 2^53 int -> double -> float could round twice.
    if (Magnitude(*i) > (uint64_t{1} << 53)) return std::nullopt;
    double d = static_cast<double>(*i);
    if (t == ScalarType::kFloat32) return FloatImmNode::Make(t, d);
    if (RoundToType(d, t) != d) return std::nullopt;
    return FloatImmNode::Make(t, d);
  }
  if (const auto* f = v.as<FloatImmNode>()) {
    double d = f->value;
    if (std::isnan(d)) return std::nullopt;
    if (IsBool(t)) return BoolConst(d != 0);
    if (IsInt(t)) {
      double tr = std::trunc(d);
      double lo = t == kI32 ? -2147483648.0 : -9223372036854775808.0;
      double hi = t == kI32 ? 2147483647.0 : 9223372036854774784.0;
      if (!(tr >= lo && tr <= hi)) return std::nullopt;
      return IntImmNode::Make(t, static_cast<int64_t>(tr));
    }
    // float -> float: fold only what the target holds exactly.
    if (RoundToType(d, t) != d) return std::nullopt;
    return FloatImmNode::Make(t, d);
  }
  return std::nullopt;
}

std::optional<Expr> FoldCall(CallOp op, const std::vector<Expr>& args) {
  if (op == CallOp::kAbs) {
    if (auto i = AsConstInt(args[0])) {
      if (*i == kInt64Min) return std::nullopt;
      return IntImmNode::Make(args[0].type(), *i < 0 ? -*i : *i);
    }
  }
  const auto* f = args[0].as<FloatImmNode>();
  if (!f) return std::nullopt;
  ScalarType t = args[0].type();
  // abs and floor are exact; a correctly rounded double sqrt rounded to float32 is the correctly
  // rounded float32 sqrt. Transcendentals depend on the evaluator's libm and are not folded.
  switch (op) {
    case CallOp::kAbs:
      return FloatResult(t, std::fabs(f->value));
    case CallOp::kFloor:
      return FloatResult(t, std::floor(f->value));
    case CallOp::kSqrt:
      if (f->value < 0) return std::nullopt;
      return FloatResult(t, std::sqrt(f->value));
    default:
      return std::nullopt;
  }
}

}  // namespace tilesearch::ir::simplify_internal
