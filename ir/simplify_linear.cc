// Expression order, checked int64 arithmetic and linear forms for the simplifier.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>

#include "base/status.h"
#include "ir/simplify_internal.h"

namespace tilesearch::ir::simplify_internal {
namespace {

template <typename T>
int Cmp(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int CompareLists(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (int c = Cmp(a.size(), b.size())) return c;
  for (size_t i = 0; i < a.size(); ++i) {
    if (int c = CompareExpr(a[i], b[i])) return c;
  }
  return 0;
}

}  // namespace

int CompareExpr(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return 0;
  if (!a.defined() || !b.defined()) return a.defined() ? 1 : -1;
  if (int c = Cmp(a.kind(), b.kind())) return c;
  if (int c = Cmp(a.type(), b.type())) return c;
  if (IsBinaryKind(a.kind())) {
    auto [a0, a1] = BinaryOperands(a);
    auto [b0, b1] = BinaryOperands(b);
    if (int c = CompareExpr(a0, b0)) return c;
    return CompareExpr(a1, b1);
  }
  switch (a.kind()) {
    case ExprKind::kIntImm:
      return Cmp(a.as<IntImmNode>()->value, b.as<IntImmNode>()->value);
    case ExprKind::kFloatImm:
      return Cmp(std::bit_cast<uint64_t>(a.as<FloatImmNode>()->value),
                 std::bit_cast<uint64_t>(b.as<FloatImmNode>()->value));
    case ExprKind::kVar:
      return Cmp(a.as<VarNode>()->name, b.as<VarNode>()->name);
    case ExprKind::kNot:
      return CompareExpr(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case ExprKind::kSelect: {
      const auto* x = a.as<SelectNode>();
      const auto* y = b.as<SelectNode>();
      if (int c = CompareExpr(x->cond, y->cond)) return c;
      if (int c = CompareExpr(x->true_value, y->true_value)) return c;
      return CompareExpr(x->false_value, y->false_value);
    }
    case ExprKind::kCast:
      return CompareExpr(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case ExprKind::kCall: {
      const auto* x = a.as<CallNode>();
      const auto* y = b.as<CallNode>();
      if (int c = Cmp(x->op, y->op)) return c;
      return CompareLists(x->args, y->args);
    }
    case ExprKind::kLoad: {
      const auto* x = a.as<LoadNode>();
      const auto* y = b.as<LoadNode>();
      if (int c = Cmp(x->buffer, y->buffer)) return c;
      return CompareLists(x->indices, y->indices);
    }
    default:
      return 0;
  }
}

int64_t FloorDiv(int64_t a, int64_t b) {
  CHECK(b != 0) << "FloorDiv by zero";
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  CHECK(b != 0) << "FloorMod by zero";
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

std::optional<int64_t> CheckedFloorDiv(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (a == std::numeric_limits<int64_t>::min() && b == -1) return std::nullopt;
  return FloorDiv(a, b);
}

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> CheckedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// ---------------------------------------------------------------------------------------------
// LinearForm

LinearForm LinearForm::Constant(int64_t c) {
  LinearForm f;
  f.constant_ = c;
  return f;
}

LinearForm LinearForm::Atom(const Expr& atom, int64_t coef) {
  LinearForm f;
  f.AddTerm(atom, coef);
  return f;
}

LinearForm LinearForm::Of(const Expr& e) {
  if (auto c = AsConstInt(e); c && e.type() == ScalarType::kInt64) return Constant(*c);
  if (e.type() == ScalarType::kInt64) {
    if (const auto* add = e.as<AddNode>()) {
      LinearForm f = Of(add->a);
      f.AddScaled(Of(add->b), 1);
      return f;
    }
    if (const auto* sub = e.as<SubNode>()) {
      LinearForm f = Of(sub->a);
      f.AddScaled(Of(sub->b), -1);
      return f;
    }
    if (const auto* mul = e.as<MulNode>()) {
      if (auto k = AsConstInt(mul->b)) {
        LinearForm f = Of(mul->a);
        f.Scale(*k);
        return f;
      }
      if (auto k = AsConstInt(mul->a)) {
        LinearForm f = Of(mul->b);
        f.Scale(*k);
        return f;
      }
    }
  }
  return Atom(e, 1);
}

void LinearForm::AddTerm(const Expr& atom, int64_t coef) {
  if (coef == 0) return;
  auto it = std::lower_bound(terms_.begin(), terms_.end(), atom, [](const Term& t, const Expr& a) {
    return CompareExpr(t.atom, a) < 0;
  });
  if (it != terms_.end() && CompareExpr(it->atom, atom) == 0) {
    auto sum = CheckedAdd(it->coef, coef);
    if (!sum) {
      ok_ = false;
      return;
    }
    it->coef = *sum;
    if (it->coef == 0) terms_.erase(it);
    return;
  }
  terms_.insert(it, Term{atom, coef});
}

void LinearForm::AddScaled(const LinearForm& other, int64_t k) {
  if (!other.ok_) ok_ = false;
  for (const Term& t : other.terms_) {
    auto c = CheckedMul(t.coef, k);
    if (!c) {
      ok_ = false;
      return;
    }
    AddTerm(t.atom, *c);
  }
  auto c = CheckedMul(other.constant_, k);
  if (!c) {
    ok_ = false;
    return;
  }
  AddConstant(*c);
}

void LinearForm::AddConstant(int64_t c) {
  auto sum = CheckedAdd(constant_, c);
  if (!sum) {
    ok_ = false;
    return;
  }
  constant_ = *sum;
}

void LinearForm::Scale(int64_t k) {
  if (k == 0) {
    terms_.clear();
    constant_ = 0;
    return;
  }
  for (Term& t : terms_) {
    auto c = CheckedMul(t.coef, k);
    if (!c) {
      ok_ = false;
      return;
    }
    t.coef = *c;
  }
  auto c = CheckedMul(constant_, k);
  if (!c) {
    ok_ = false;
    return;
  }
  constant_ = *c;
}

int64_t LinearForm::CoefOf(const Expr& atom) const {
  for (const Term& t : terms_) {
    if (CompareExpr(t.atom, atom) == 0) return t.coef;
  }
  return 0;
}

Expr LinearForm::ToExpr() const {
  CHECK(ok_) << "ToExpr of an overflowed linear form";
  auto scaled = [](const Expr& atom, int64_t k) {
    return k == 1 ? atom : MulNode::Make(atom, IntConst(k));
  };
  std::vector<Term> pos, neg;
  for (const Term& t : terms_) (t.coef > 0 ? pos : neg).push_back(t);
  // Larger coefficients first reads like a row-major index (i*64 + j*4 + k); ties keep the atom
  // order. Both are total, so the output is a function of the form alone.
  auto by_magnitude = [](const Term& a, const Term& b) {
    // |coef| cannot overflow here: a negative coefficient came from negating or summing values
    // that were checked, but INT64_MIN is still possible, so compare as unsigned magnitudes.
    uint64_t ma = a.coef < 0 ? 0 - static_cast<uint64_t>(a.coef) : static_cast<uint64_t>(a.coef);
    uint64_t mb = b.coef < 0 ? 0 - static_cast<uint64_t>(b.coef) : static_cast<uint64_t>(b.coef);
    if (ma != mb) return ma > mb;
    return CompareExpr(a.atom, b.atom) < 0;
  };
  std::sort(pos.begin(), pos.end(), by_magnitude);
  std::sort(neg.begin(), neg.end(), by_magnitude);

  Expr acc;
  for (const Term& t : pos) {
    Expr term = scaled(t.atom, t.coef);
    acc = acc.defined() ? AddNode::Make(acc, term) : term;
  }
  size_t first_neg = 0;
  if (!acc.defined()) {
    if (constant_ != 0 || neg.empty()) {
      acc = IntConst(constant_);
      for (const Term& t : neg) {
        if (t.coef == std::numeric_limits<int64_t>::min()) {
          acc = AddNode::Make(acc, scaled(t.atom, t.coef));
        } else {
          acc = SubNode::Make(acc, scaled(t.atom, -t.coef));
        }
      }
      return acc;
    }
    acc = MulNode::Make(neg[0].atom, IntConst(neg[0].coef));
    first_neg = 1;
  }
  for (size_t i = first_neg; i < neg.size(); ++i) {
    const Term& t = neg[i];
    if (t.coef == std::numeric_limits<int64_t>::min()) {
      acc = AddNode::Make(acc, scaled(t.atom, t.coef));
    } else {
      acc = SubNode::Make(acc, scaled(t.atom, -t.coef));
    }
  }
  if (constant_ > 0) {
    acc = AddNode::Make(acc, IntConst(constant_));
  } else if (constant_ < 0) {
    if (constant_ == std::numeric_limits<int64_t>::min()) {
      acc = AddNode::Make(acc, IntConst(constant_));
    } else {
      acc = SubNode::Make(acc, IntConst(-constant_));
    }
  }
  return acc;
}

}  // namespace tilesearch::ir::simplify_internal
