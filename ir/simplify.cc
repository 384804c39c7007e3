// The simplifier (ir/simplify.h): a bottom-up rewriter in the style of Halide's Simplify_*.cpp.
//
// Each node is rebuilt from simplified operands by Simplifier::Simp, which applies, in order:
// constant folding with the exact semantics of ir/expr.h; for int64, canonical linear forms
// (Add / Sub / Mul by constants), the procedural div/mod decomposition by constant divisors and
// comparisons decided from bounds of the difference; then the rewrite(lhs, rhs, predicate)
// tables; and finally, for int64, replacement by a constant when BoundOf proves a
// single value.
//
// Soundness: every rule is an identity of floor-division integer arithmetic for all values in the
// known ranges; rules may remove an integer division by zero (the original had no value there)
// but never introduce one. Termination: every table rule strictly shrinks the expression or moves
// it to a form no rule maps back (noted per rule), the linear-form rules are applied at most a
// fixed number of rounds, and a depth limit stops any remaining recursion.
#include "ir/simplify.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ir/simplify_internal.h"

namespace tilesearch::ir {
namespace {

using simplify_internal::ApplyRules;
using simplify_internal::CheckedAdd;
using simplify_internal::CheckedFloorDiv;
using simplify_internal::CheckedMul;
using simplify_internal::CheckedSub;
using simplify_internal::CompareExpr;
using simplify_internal::FloorDiv;
using simplify_internal::FloorMod;
using simplify_internal::FoldBinary;
using simplify_internal::FoldCall;
using simplify_internal::FoldCast;
using simplify_internal::LinearForm;
using simplify_internal::Magnitude;
namespace rules = simplify_internal::rules;

constexpr ScalarType kI64 = ScalarType::kInt64;
constexpr ScalarType kI32 = ScalarType::kInt32;
constexpr ScalarType kBool = ScalarType::kBool;
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Rewrites nest through NodeBuilder callbacks; past this depth nodes are built as they are.
constexpr int kMaxDepth = 256;

bool IsComparison(ExprKind k) {
  return k == ExprKind::kEQ || k == ExprKind::kNE || k == ExprKind::kLT || k == ExprKind::kLE ||
         k == ExprKind::kGT || k == ExprKind::kGE;
}

// ---------------------------------------------------------------------------------------------

bool IsEmptyStmt(const Stmt& s) {
  if (!s.defined()) return true;
  const auto* seq = s.as<SeqNode>();
  return seq && seq->stmts.empty();
}

Stmt EmptyStmt() { return SeqNode::Make({}); }

class StmtSubstituter : public StmtMutator {
 public:
  StmtSubstituter(std::string name, Expr value) : repl_{{std::move(name), std::move(value)}} {}
  Expr MutateExpr(const Expr& e) override { return Substitute(e, repl_); }

 private:
  std::vector<std::pair<std::string, Expr>> repl_;
};

class Simplifier {
 public:
  explicit Simplifier(const RangeMap& ranges) : ranges_(ranges) {}

  // Memoized per node while the ranges stay the same: shared subexpressions are simplified once.
  Expr Mutate(const Expr& e);
  Stmt MutateStmt(const Stmt& s);

 private:
  // Loops of extent 1 substituted, empty loops removed, the body simplified with the loop
  // variable's range known.
  Stmt MutateFor(const Stmt& s);
  // Constant conditions pick their branch; each branch is simplified knowing the condition.
  Stmt MutateIfThenElse(const Stmt& s);
  // Saves ranges on construction and restores them on destruction.
  class RangeScope {
   public:
    explicit RangeScope(Simplifier* s) : s_(s) {}
    ~RangeScope() {
      if (!saved_.empty()) s_->InvalidateCaches();
      for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
        if (it->second) {
          s_->ranges_[it->first] = *it->second;
        } else {
          s_->ranges_.erase(it->first);
        }
      }
    }
    void Set(const std::string& name, Interval r) {
      auto it = s_->ranges_.find(name);
      saved_.emplace_back(
          name, it == s_->ranges_.end() ? std::nullopt : std::optional<Interval>(it->second));
      s_->ranges_[name] = r;
      s_->InvalidateCaches();
    }
    // Narrows a variable's range; leaves it when the intersection is empty (unreachable code).
    void Narrow(const std::string& name, int64_t lo, int64_t hi) {
      Interval cur{kInt64Min, kInt64Max};
      if (auto it = s_->ranges_.find(name); it != s_->ranges_.end()) cur = it->second;
      Interval r{std::max(cur.min, lo), std::min(cur.max, hi)};
      if (r.min <= r.max) Set(name, r);
    }

   private:
    Simplifier* s_;
    std::vector<std::pair<std::string, std::optional<Interval>>> saved_;
  };

  std::optional<Interval> Bounds(const Expr& e) const { return bounds_.Bound(e); }

  void InvalidateCaches() {
    bounds_.Clear();
    memo_.clear();
  }

  Expr MutateImpl(const Expr& e);

  // What is known about int64 variables where `cond` has the value `truth`.
  void Refine(const Expr& cond, bool truth, RangeScope* scope);

  // Top-level simplification of a node whose operands are simplified.
  Expr Simp(ExprKind kind, std::vector<Expr> ops);
  Expr SimpImpl(ExprKind kind, std::vector<Expr>& ops);
  Expr Simp2(ExprKind kind, Expr a, Expr b) { return Simp(kind, {std::move(a), std::move(b)}); }
  simplify_internal::NodeBuilder Builder() {
    return [this](ExprKind k, std::vector<Expr> ops) { return Simp(k, std::move(ops)); };
  }

  Expr SimpInt64Arith(ExprKind kind, const Expr& a, const Expr& b);
  Expr SimpMul64(const Expr& a, const Expr& b);
  Expr SimpDiv64(const Expr& a, const Expr& b);
  Expr SimpMod64(const Expr& a, const Expr& b);
  Expr SimpMinMax64(ExprKind kind, Expr a, Expr b);
  Expr SimpCompare64(ExprKind kind, const Expr& a, const Expr& b);
  std::optional<bool> DecideCompare(ExprKind kind, const LinearForm& d) const;
  Expr SimpInt32Arith(ExprKind kind, const Expr& a, const Expr& b);
  // Linear form → expression, after merging div/mod pairs.
  Expr FromLinear(LinearForm f);
  void CombineDivMod(LinearForm* f);

  RangeMap ranges_;
  // Both caches are keyed by node and valid for the current ranges_ only; entries keep their key
  // node alive so an address cannot be reused while cached.
  mutable simplify_internal::BoundCache bounds_{&ranges_};
  std::unordered_map<const ExprNode*, std::pair<Expr, Expr>> memo_;
  int depth_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Recursion over expressions.

Expr Simplifier::Mutate(const Expr& e) {
  if (!e.defined()) return e;
  // Constants are their own simplification: a memo entry would cost more than it saves.
  if (e.kind() == ExprKind::kIntImm || e.kind() == ExprKind::kFloatImm) return e;
  if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second.second;
  Expr out = MutateImpl(e);
  // MutateImpl may have changed scopes and back (Select branches), which clears the memo.
  memo_.emplace(e.get(), std::make_pair(e, out));
  return out;
}

Expr Simplifier::MutateImpl(const Expr& e) {
  Expr out;
  if (IsBinaryKind(e.kind())) {
    auto [a, b] = BinaryOperands(e);
    out = Simp2(e.kind(), Mutate(a), Mutate(b));
  } else {
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return e;
      case ExprKind::kVar:
        out = Simp(ExprKind::kVar, {e});
        break;
      case ExprKind::kNot:
        out = Simp(ExprKind::kNot, {Mutate(e.as<NotNode>()->a)});
        break;
      case ExprKind::kSelect: {
        const auto* s = e.as<SelectNode>();
        Expr c = Mutate(s->cond);
        if (auto v = AsConstInt(c)) return Mutate(*v ? s->true_value : s->false_value);
        Expr t, f;
        {
          RangeScope scope(this);
          Refine(c, true, &scope);
          t = Mutate(s->true_value);
        }
        {
          RangeScope scope(this);
          Refine(c, false, &scope);
          f = Mutate(s->false_value);
        }
        out = Simp(ExprKind::kSelect, {c, t, f});
        break;
      }
      case ExprKind::kCast: {
        Expr v = Mutate(e.as<CastNode>()->value);
        if (auto folded = FoldCast(e.type(), v)) {
          out = *folded;
        } else if (v.type() == e.type()) {
          out = v;
        } else {
          out = CastNode::Make(e.type(), v);
        }
        break;
      }
      case ExprKind::kCall: {
        const auto* c = e.as<CallNode>();
        std::vector<Expr> args;
        for (const Expr& a : c->args) args.push_back(Mutate(a));
        if (auto folded = FoldCall(c->op, args)) {
          out = *folded;
        } else {
          out = CallNode::Make(c->op, std::move(args));
        }
        break;
      }
      case ExprKind::kLoad: {
        const auto* l = e.as<LoadNode>();
        std::vector<Expr> idx;
        for (const Expr& i : l->indices) idx.push_back(Mutate(i));
        out = LoadNode::Make(l->type, l->buffer, std::move(idx), l->producer);
        break;
      }
      default:
        return e;
    }
  }
  // Mutators return the original node when nothing changed.
  return CompareExpr(out, e) == 0 ? e : out;
}

void Simplifier::Refine(const Expr& cond, bool truth, RangeScope* scope) {
  if (const auto* n = cond.as<NotNode>()) return Refine(n->a, !truth, scope);
  if (const auto* a = cond.as<AndNode>()) {
    if (truth) {
      Refine(a->a, true, scope);
      Refine(a->b, true, scope);
    }
    return;
  }
  if (const auto* o = cond.as<OrNode>()) {
    if (!truth) {
      Refine(o->a, false, scope);
      Refine(o->b, false, scope);
    }
    return;
  }
  if (!IsComparison(cond.kind())) return;
  auto [a, b] = BinaryOperands(cond);
  ExprKind k = cond.kind();
  // Normalize to `var op const`.
  const VarNode* v = a.as<VarNode>();
  std::optional<int64_t> c = AsConstInt(b);
  if (!v || !c) {
    v = b.as<VarNode>();
    c = AsConstInt(a);
    if (!v || !c) return;
    switch (k) {
      case ExprKind::kLT:
        k = ExprKind::kGT;
        break;
      case ExprKind::kLE:
        k = ExprKind::kGE;
        break;
      case ExprKind::kGT:
        k = ExprKind::kLT;
        break;
      case ExprKind::kGE:
        k = ExprKind::kLE;
        break;
      default:
        break;
    }
  }
  if (v->type != kI64) return;
  if (!truth) {
    switch (k) {
      case ExprKind::kLT:
        k = ExprKind::kGE;
        break;
      case ExprKind::kLE:
        k = ExprKind::kGT;
        break;
      case ExprKind::kGT:
        k = ExprKind::kLE;
        break;
      case ExprKind::kGE:
        k = ExprKind::kLT;
        break;
      case ExprKind::kEQ:
        k = ExprKind::kNE;
        break;
      case ExprKind::kNE:
        k = ExprKind::kEQ;
        break;
      default:
        break;
    }
  }
  int64_t x = *c;
  switch (k) {
    case ExprKind::kLT:
      if (x != kInt64Min) scope->Narrow(v->name, kInt64Min, x - 1);
      break;
    case ExprKind::kLE:
      scope->Narrow(v->name, kInt64Min, x);
      break;
    case ExprKind::kGT:
      if (x != kInt64Max) scope->Narrow(v->name, x + 1, kInt64Max);
      break;
    case ExprKind::kGE:
      scope->Narrow(v->name, x, kInt64Max);
      break;
    case ExprKind::kEQ:
      scope->Narrow(v->name, x, x);
      break;
    default:
      break;
  }
}

Expr Simplifier::Simp(ExprKind kind, std::vector<Expr> ops) {
  if (depth_ >= kMaxDepth) {
    if (kind == ExprKind::kVar) return ops[0];
    if (kind == ExprKind::kNot) return NotNode::Make(ops[0]);
    if (kind == ExprKind::kSelect) return SelectNode::Make(ops[0], ops[1], ops[2]);
    return MakeBinary(kind, ops[0], ops[1]);
  }
  ++depth_;
  Expr r = SimpImpl(kind, ops);
  --depth_;
  // Last rule for int64: a value proven to be one point is that constant.
  if (r.type() == kI64 && !r.as<IntImmNode>()) {
    if (auto b = Bounds(r); b && b->min == b->max) return IntConst(b->min);
  }
  return r;
}

Expr Simplifier::SimpImpl(ExprKind kind, std::vector<Expr>& ops) {
  if (kind == ExprKind::kVar) return ops[0];
  if (kind == ExprKind::kNot) {
    if (Expr r = ApplyRules(rules::NotRules(), NotNode::Make(ops[0]), Builder()); r.defined()) {
      return r;
    }
    return NotNode::Make(ops[0]);
  }
  if (kind == ExprKind::kSelect) {
    if (auto c = AsConstInt(ops[0])) return *c ? ops[1] : ops[2];
    Expr node = SelectNode::Make(ops[0], ops[1], ops[2]);
    if (Expr r = ApplyRules(rules::SelectRules(), node, Builder()); r.defined()) return r;
    return node;
  }
  const Expr& a = ops[0];
  const Expr& b = ops[1];
  if (auto folded = FoldBinary(kind, a, b)) return *folded;
  ScalarType t = a.type();
  if (kind == ExprKind::kAnd || kind == ExprKind::kOr) {
    Expr node = MakeBinary(kind, a, b);
    const auto& table = kind == ExprKind::kAnd ? rules::AndRules() : rules::OrRules();
    if (Expr r = ApplyRules(table, node, Builder()); r.defined()) return r;
    return node;
  }
  if (t == kI64) {
    switch (kind) {
      case ExprKind::kAdd:
      case ExprKind::kSub:
        return SimpInt64Arith(kind, a, b);
      case ExprKind::kMul:
        return SimpMul64(a, b);
      case ExprKind::kDiv:
        return SimpDiv64(a, b);
      case ExprKind::kMod:
        return SimpMod64(a, b);
      case ExprKind::kMin:
      case ExprKind::kMax:
        return SimpMinMax64(kind, a, b);
      default:
        return SimpCompare64(kind, a, b);
    }
  }
  if (t == kI32) return SimpInt32Arith(kind, a, b);
  if (t == kBool && (kind == ExprKind::kEQ || kind == ExprKind::kNE)) {
    // b == true is b; b != false is b.
    if (auto c = AsConstInt(b)) {
      if ((kind == ExprKind::kEQ) == (*c != 0)) return a;
      return Simp(ExprKind::kNot, {a});
    }
  }
  return MakeBinary(kind, a, b);
}

// ---------------------------------------------------------------------------------------------
// int32: wrap-around arithmetic, so only identities that hold modulo 2^32.

Expr Simplifier::SimpInt32Arith(ExprKind kind, const Expr& a, const Expr& b) {
  auto ca = AsConstInt(a), cb = AsConstInt(b);
  switch (kind) {
    case ExprKind::kAdd:
      if (cb == 0) return a;
      if (ca == 0) return b;
      break;
    case ExprKind::kSub:
      if (cb == 0) return a;
      if (CompareExpr(a, b) == 0) return IntConst(0, kI32);
      break;
    case ExprKind::kMul:
      if (cb == 1) return a;
      if (ca == 1) return b;
      if (cb == 0 || ca == 0) return IntConst(0, kI32);
      break;
    case ExprKind::kDiv:
      if (cb == 1) return a;
      break;
    case ExprKind::kMod:
      if (cb == 1) return IntConst(0, kI32);
      break;
    case ExprKind::kMin:
    case ExprKind::kMax:
      if (CompareExpr(a, b) == 0) return a;
      break;
    case ExprKind::kEQ:
    case ExprKind::kLE:
    case ExprKind::kGE:
      if (CompareExpr(a, b) == 0) return BoolConst(true);
      break;
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kGT:
      if (CompareExpr(a, b) == 0) return BoolConst(false);
      break;
    default:
      break;
  }
  return MakeBinary(kind, a, b);
}

// ---------------------------------------------------------------------------------------------
// int64 linear arithmetic.

Expr Simplifier::FromLinear(LinearForm f) {
  CombineDivMod(&f);
  return f.ToExpr();
}

// (u/c)*(k*c) + (u%c)*k = u*k, and u*m - (u/c)*(m*c) = (u%c)*m (floor semantics, c != 0).
// Each round removes a Div atom; at most a few rounds run.
void Simplifier::CombineDivMod(LinearForm* f) {
  for (int round = 0; round < 4; ++round) {
    bool changed = false;
    for (const LinearForm::Term& t : f->terms()) {
      const auto* div = t.atom.as<DivNode>();
      if (!div) continue;
      auto c = AsConstInt(div->b);
      if (!c || *c == 0) continue;
      const Expr& u = div->a;
      LinearForm lu = LinearForm::Of(u);
      if (!lu.ok()) continue;
      Expr div_atom = t.atom;
      int64_t k1 = t.coef;
      Expr mod_atom = ModNode::Make(u, div->b);
      int64_t k2 = f->CoefOf(mod_atom);
      if (auto kc = CheckedMul(k2, *c); k2 != 0 && kc && *kc == k1) {
        LinearForm g = *f;
        g.AddScaled(LinearForm::Atom(div_atom, k1), -1);
        g.AddScaled(LinearForm::Atom(mod_atom, k2), -1);
        g.AddScaled(lu, k2);
        if (g.ok()) {
          *f = std::move(g);
          changed = true;
          break;
        }
      }
      if (*c != -1 && k1 % *c == 0) {
        int64_t m = -(k1 / *c);
        LinearForm g = *f;
        g.AddScaled(LinearForm::Atom(div_atom, k1), -1);
        g.AddScaled(lu, -m);
        // Only when m*u was present: the result must have fewer terms.
        if (g.ok() && g.terms().size() + 1 < f->terms().size()) {
          Expr mod = Simp2(ExprKind::kMod, u, div->b);
          g.AddScaled(LinearForm::Of(mod), m);
          if (g.ok() && g.terms().size() < f->terms().size()) {
            *f = std::move(g);
            changed = true;
            break;
          }
        }
      }
    }
    if (!changed) return;
  }
}

Expr Simplifier::SimpInt64Arith(ExprKind kind, const Expr& a, const Expr& b) {
  LinearForm f = LinearForm::Of(a);
  f.AddScaled(LinearForm::Of(b), kind == ExprKind::kAdd ? 1 : -1);
  if (!f.ok()) return MakeBinary(kind, a, b);
  return FromLinear(std::move(f));
}

Expr Simplifier::SimpMul64(const Expr& a, const Expr& b) {
  auto ca = AsConstInt(a), cb = AsConstInt(b);
  if (ca || cb) {
    LinearForm f = LinearForm::Of(ca ? b : a);
    f.Scale(ca ? *ca : *cb);
    if (!f.ok()) return MulNode::Make(a, b);
    return FromLinear(std::move(f));
  }
  // A product of two non-constants is an atom; coefficients of single terms move outside:
  // (x*2)*(y*3) = (x*y)*6.
  auto split = [](const Expr& e) -> std::pair<Expr, int64_t> {
    LinearForm f = LinearForm::Of(e);
    if (f.ok() && f.constant() == 0 && f.terms().size() == 1) {
      return {f.terms()[0].atom, f.terms()[0].coef};
    }
    return {e, 1};
  };
  auto [ta, ka] = split(a);
  auto [tb, kb] = split(b);
  auto k = CheckedMul(ka, kb);
  if (!k) return MulNode::Make(a, b);
  Expr atom = CompareExpr(ta, tb) <= 0 ? MulNode::Make(ta, tb) : MulNode::Make(tb, ta);
  return LinearForm::Atom(atom, *k).ToExpr();
}

namespace {
// gcd of the magnitudes of a form's coefficients (and constant when `with_constant`) and `c`;
// 0 when some magnitude is 2^63.
uint64_t FormGcd(const LinearForm& f, int64_t c, bool with_constant) {
  uint64_t g = Magnitude(c);
  auto add = [&g](int64_t v) {
    if (v == kInt64Min) {
      g = 0;
      return false;
    }
    g = std::gcd(g, Magnitude(v));
    return true;
  };
  if (c == kInt64Min) return 0;
  for (const auto& t : f.terms()) {
    if (!add(t.coef)) return 0;
  }
  if (with_constant && !add(f.constant())) return 0;
  return g;
}

LinearForm DivideExact(const LinearForm& f, int64_t g) {
  LinearForm out = LinearForm::Constant(f.constant() / g);
  for (const auto& t : f.terms()) out.AddScaled(LinearForm::Atom(t.atom, t.coef / g), 1);
  return out;
}
}  // namespace

// Division by a constant c != 0 (floor semantics, any sign of c):
//   (g*u)/(g*d) = u/d for g > 0, and (q*c + r)/c = q + r/c for any integers q, r.
Expr Simplifier::SimpDiv64(const Expr& a, const Expr& b) {
  Expr node = DivNode::Make(a, b);
  auto cb = AsConstInt(b);
  if (!cb) {
    // x / y with 0 <= x < y: 0 (Simp's final bounds check finds it).
    return node;
  }
  int64_t c = *cb;
  if (c == 0) return node;  // division by zero is the evaluator's error: left as it is
  if (c == -1) {
    // x / -1 = -x exactly (and INT64_MIN % -1 below would trap).
    LinearForm neg = LinearForm::Of(a);
    neg.Scale(-1);
    return neg.ok() ? FromLinear(std::move(neg)) : node;
  }
  if (Expr r = ApplyRules(rules::DivRules(), node, Builder()); r.defined()) return r;
  LinearForm f = LinearForm::Of(a);
  if (!f.ok()) return node;
  uint64_t g = FormGcd(f, c, /*with_constant=*/true);
  if (g > 1) {
    int64_t gi = static_cast<int64_t>(g);
    return Simp2(ExprKind::kDiv, FromLinear(DivideExact(f, gi)), IntConst(c / gi));
  }
  // With g | every coefficient, g | c > 0 and 0 <= k < g: floor((g*T + k)/c) = floor(g*T/c),
  // because g*T mod c is a multiple of g, at most c - g.
  if (uint64_t gt = FormGcd(f, c, /*with_constant=*/false); c > 0 && gt > 1) {
    int64_t k = FloorMod(f.constant(), static_cast<int64_t>(gt));
    if (k != 0) {
      LinearForm n = f;
      n.AddConstant(-k);
      return Simp2(ExprKind::kDiv, FromLinear(n), b);
    }
  }
  LinearForm q = LinearForm::Constant(0), r = LinearForm::Constant(0);
  for (const auto& t : f.terms()) {
    if (t.coef % c == 0) {
      q.AddScaled(LinearForm::Atom(t.atom, t.coef / c), 1);
    } else {
      r.AddScaled(LinearForm::Atom(t.atom, t.coef), 1);
    }
  }
  q.AddConstant(FloorDiv(f.constant(), c));
  r.AddConstant(FloorMod(f.constant(), c));
  if (!q.ok() || !r.ok()) return node;
  if (q.IsConstant() && q.constant() == 0) {
    // Nothing to take out: r is f. Decide by bounds or leave.
    if (auto bf = Bounds(a)) {
      int64_t lo = FloorDiv(bf->min, c), hi = FloorDiv(bf->max, c);
      if (lo == hi) return IntConst(lo);
    }
    return node;
  }
  Expr rest = r.IsConstant() ? IntConst(FloorDiv(r.constant(), c))
                             : Simp2(ExprKind::kDiv, FromLinear(r), b);
  q.AddScaled(LinearForm::Of(rest), 1);
  if (!q.ok()) return node;
  return FromLinear(std::move(q));
}

// Modulo by a constant c != 0: the result depends only on the numerator modulo c, and
// (g*u) % (g*d) = g*(u % d) for g > 0.
Expr Simplifier::SimpMod64(const Expr& a, const Expr& b) {
  Expr node = ModNode::Make(a, b);
  auto cb = AsConstInt(b);
  if (!cb) {
    // x % y with 0 <= x < y is x.
    auto bx = Bounds(a);
    auto by = bx ? Bounds(b) : std::nullopt;
    if (by && bx->min >= 0 && by->min > 0 && bx->max < by->min) return a;
    return node;
  }
  int64_t c = *cb;
  if (c == 0) return node;
  if (c == 1 || c == -1) return IntConst(0);
  if (Expr r = ApplyRules(rules::ModRules(), node, Builder()); r.defined()) return r;
  LinearForm f = LinearForm::Of(a);
  if (!f.ok()) return node;
  bool changed = false;
  LinearForm r = LinearForm::Constant(FloorMod(f.constant(), c));
  changed |= r.constant() != f.constant();
  for (const auto& t : f.terms()) {
    if (t.coef % c == 0) {
      changed = true;
      continue;
    }
    // A term k*(u % (m*c)) differs from k*u by a multiple of c.
    if (const auto* inner = t.atom.as<ModNode>()) {
      if (auto ci = AsConstInt(inner->b); ci && *ci != 0 && *ci % c == 0) {
        r.AddScaled(LinearForm::Of(inner->a), t.coef);
        changed = true;
        continue;
      }
    }
    r.AddScaled(LinearForm::Atom(t.atom, t.coef), 1);
  }
  if (!r.ok()) return node;
  if (r.IsConstant()) return IntConst(FloorMod(r.constant(), c));
  if (changed) return Simp2(ExprKind::kMod, FromLinear(r), b);
  // Same reasoning as for division: (g*T + k) % c = (g*T) % c + k for 0 <= k < g, g | c > 0.
  if (uint64_t gt = FormGcd(f, c, /*with_constant=*/false); c > 0 && gt > 1) {
    int64_t k = FloorMod(f.constant(), static_cast<int64_t>(gt));
    if (k != 0) {
      LinearForm n = f;
      n.AddConstant(-k);
      return Simp2(ExprKind::kAdd, Simp2(ExprKind::kMod, FromLinear(n), b), IntConst(k));
    }
  }
  uint64_t g = FormGcd(f, c, /*with_constant=*/true);
  if (g > 1) {
    int64_t gi = static_cast<int64_t>(g);
    Expr inner = Simp2(ExprKind::kMod, FromLinear(DivideExact(f, gi)), IntConst(c / gi));
    return Simp2(ExprKind::kMul, inner, IntConst(gi));
  }
  // One period: a % c = a - k*c.
  if (auto bf = Bounds(a)) {
    int64_t lo = FloorDiv(bf->min, c), hi = FloorDiv(bf->max, c);
    if (lo == hi) {
      LinearForm out = f;
      if (auto kc = CheckedMul(lo, c); kc && *kc != kInt64Min) {
        out.AddConstant(-*kc);
        if (out.ok()) return FromLinear(std::move(out));
      }
    }
  }
  return node;
}

Expr Simplifier::SimpMinMax64(ExprKind kind, Expr a, Expr b) {
  bool is_min = kind == ExprKind::kMin;
  if (CompareExpr(a, b) == 0) return a;
  // Decide from bounds: of each side, and of their difference (where common terms cancel).
  auto ba = Bounds(a), bb = Bounds(b);
  if (ba && bb) {
    if (ba->max <= bb->min) return is_min ? a : b;
    if (bb->max <= ba->min) return is_min ? b : a;
  }
  LinearForm d = LinearForm::Of(a);
  d.AddScaled(LinearForm::Of(b), -1);
  if (d.ok()) {
    std::optional<Interval> bd;
    if (d.IsConstant()) {
      bd = Interval{d.constant(), d.constant()};
    } else {
      bd = Bounds(d.ToExpr());
    }
    if (bd && bd->max <= 0) return is_min ? a : b;
    if (bd && bd->min >= 0) return is_min ? b : a;
  }
  // Canonical operand order: a constant last, otherwise by CompareExpr.
  bool swap = AsConstInt(b) ? false : (AsConstInt(a) || CompareExpr(a, b) > 0);
  if (swap) std::swap(a, b);
  Expr node = MakeBinary(kind, a, b);
  const auto& table = is_min ? rules::MinRules() : rules::MaxRules();
  if (Expr r = ApplyRules(table, node, Builder()); r.defined()) return r;
  return node;
}

// The value of `d kind 0` when d's bounds decide it.
std::optional<bool> Simplifier::DecideCompare(ExprKind kind, const LinearForm& d) const {
  std::optional<Interval> bd;
  if (d.IsConstant()) {
    bd = Interval{d.constant(), d.constant()};
  } else {
    bd = Bounds(d.ToExpr());
  }
  if (!bd) return std::nullopt;
  switch (kind) {
    case ExprKind::kLT:
      if (bd->max < 0) return true;
      if (bd->min >= 0) return false;
      break;
    case ExprKind::kLE:
      if (bd->max <= 0) return true;
      if (bd->min > 0) return false;
      break;
    case ExprKind::kEQ:
    case ExprKind::kNE: {
      bool eq = kind == ExprKind::kEQ;
      if (bd->min == 0 && bd->max == 0) return eq;
      if (bd->min > 0 || bd->max < 0) return !eq;
      break;
    }
    default:
      break;
  }
  return std::nullopt;
}

// Comparisons as d = a - b against 0: decided from d's bounds, else written canonically as
// (positive terms [+ c]) op (negative terms [+ c]) after dividing by the gcd of d's
// coefficients. GT and GE become LT and LE with swapped operands.
Expr Simplifier::SimpCompare64(ExprKind kind, const Expr& a, const Expr& b) {
  if (kind == ExprKind::kGT) return Simp2(ExprKind::kLT, b, a);
  if (kind == ExprKind::kGE) return Simp2(ExprKind::kLE, b, a);
  LinearForm d = LinearForm::Of(a);
  d.AddScaled(LinearForm::Of(b), -1);
  Expr node = MakeBinary(kind, a, b);
  if (!d.ok()) return node;
  CombineDivMod(&d);
  if (auto decided = DecideCompare(kind, d)) return BoolConst(*decided);
  if (d.IsConstant()) return node;  // unreachable: a constant difference is decided
  // Divide by the gcd g of the coefficients. With T = d'/g and constant k:
  //   g*T + k < 0  <=>  T + floor(k/g) < 0;   g*T + k <= 0  <=>  T + ceil(k/g) <= 0;
  //   g*T + k == 0 <=>  k % g == 0 && T + k/g == 0.
  uint64_t g = FormGcd(d, 0, /*with_constant=*/false);
  if (g > 1) {
    int64_t gi = static_cast<int64_t>(g);
    int64_t k = d.constant();
    LinearForm t = LinearForm::Constant(0);
    for (const auto& term : d.terms()) t.AddScaled(LinearForm::Atom(term.atom, term.coef / gi), 1);
    if (k == kInt64Min) return node;
    switch (kind) {
      case ExprKind::kLT:
        t.AddConstant(FloorDiv(k, gi));
        break;
      case ExprKind::kLE:
        t.AddConstant(-FloorDiv(-k, gi));
        break;
      default:
        if (k % gi != 0) return BoolConst(kind == ExprKind::kNE);
        t.AddConstant(k / gi);
        break;
    }
    if (!t.ok()) return node;
    d = std::move(t);
    // Bounds of the reduced form may be known where g*T overflowed.
    if (auto decided = DecideCompare(kind, d)) return BoolConst(*decided);
  }
  // One quotient against a constant: floor(u/c) < m <=> u < m*c for c > 0, which lets guards
  // such as f/17 < 33 and f < 561 meet as the same comparison.
  if (d.terms().size() == 1 && (kind == ExprKind::kLT || kind == ExprKind::kLE)) {
    const LinearForm::Term& t = d.terms()[0];
    const auto* div = t.atom.as<DivNode>();
    auto c = div ? AsConstInt(div->b) : std::nullopt;
    if (c && *c > 0 && (t.coef == 1 || t.coef == -1)) {
      int64_t k = d.constant();
      // coef 1:  u/c + k < 0 <=> u < -k*c;        u/c + k <= 0 <=> u < (1-k)*c.
      // coef -1: k - u/c < 0 <=> (k+1)*c <= u;    k - u/c <= 0 <=> k*c <= u.
      std::optional<int64_t> m =
          t.coef == 1 ? (kind == ExprKind::kLT ? CheckedSub(0, k) : CheckedSub(1, k))
                      : (kind == ExprKind::kLT ? CheckedAdd(k, 1) : std::optional(k));
      std::optional<int64_t> mc = m ? CheckedMul(*m, *c) : std::nullopt;
      if (mc) {
        if (t.coef == 1) return Simp2(ExprKind::kLT, div->a, IntConst(*mc));
        return Simp2(ExprKind::kLE, IntConst(*mc), div->a);
      }
    }
  }
  // For == and != the sign of d is free: make the first term positive.
  if ((kind == ExprKind::kEQ || kind == ExprKind::kNE) && d.terms()[0].coef < 0) {
    d.Scale(-1);
    if (!d.ok()) return node;
  }
  LinearForm pos = LinearForm::Constant(0), neg = LinearForm::Constant(0);
  for (const auto& term : d.terms()) {
    if (term.coef > 0) {
      pos.AddScaled(LinearForm::Atom(term.atom, term.coef), 1);
    } else {
      neg.AddScaled(LinearForm::Atom(term.atom, term.coef), -1);
    }
  }
  // The constant joins the side with no terms, else the side where it is positive:
  // x + 1 <= 0 reads x <= -1, 5 - j < 0 reads 5 < j, x - y - 3 < 0 reads x < y + 3.
  int64_t k = d.constant();
  bool to_pos = pos.IsConstant() || (!neg.IsConstant() && k > 0);
  if (to_pos) {
    pos.AddConstant(k);
  } else {
    neg.AddScaled(LinearForm::Constant(k), -1);
  }
  if (!pos.ok() || !neg.ok()) return node;
  return MakeBinary(kind, pos.ToExpr(), neg.ToExpr());
}

// ---------------------------------------------------------------------------------------------
// Statements.

Stmt Simplifier::MutateStmt(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
    case StmtKind::kFor:
      return MutateFor(s);
    case StmtKind::kSeq: {
      const auto* op = s.as<SeqNode>();
      std::vector<Stmt> stmts;
      bool changed = false;
      for (const Stmt& c : op->stmts) {
        Stmt n = MutateStmt(c);
        changed |= !n.same_as(c);
        if (!IsEmptyStmt(n)) stmts.push_back(n);
      }
      if (!changed) return s;
      return SeqNode::Make(std::move(stmts));
    }
    case StmtKind::kStore: {
      const auto* op = s.as<StoreNode>();
      std::vector<Expr> idx;
      bool changed = false;
      for (const Expr& i : op->indices) {
        idx.push_back(Mutate(i));
        changed |= !idx.back().same_as(i);
      }
      Expr value = Mutate(op->value);
      changed |= !value.same_as(op->value);
      if (!changed) return s;
      // A copy whose value folded (e.g. a padding condition that never holds: a constant 0)
      // becomes a plain store, which completes before any wait for it.
      const bool async = op->async_copy && AsyncCopySource(value) != nullptr;
      return StoreNode::Make(op->buffer, std::move(idx), std::move(value), async);
    }
    case StmtKind::kAllocate: {
      const auto* op = s.as<AllocateNode>();
      Stmt body = MutateStmt(op->body);
      if (IsEmptyStmt(body)) return EmptyStmt();
      if (body.same_as(op->body)) return s;
      return AllocateNode::Make(op->buffer, body);
    }
    case StmtKind::kIfThenElse:
      return MutateIfThenElse(s);
    case StmtKind::kBarrier:
    case StmtKind::kAsyncGroup:
      return s;
    case StmtKind::kWarpMma: {
      const auto* op = s.as<WarpMmaNode>();
      auto simplify_all = [&](const std::vector<Expr>& in) {
        std::vector<Expr> out;
        for (const Expr& e : in) out.push_back(Mutate(e));
        return out;
      };
      return WarpMmaNode::Make(op->kind, op->m_frags, op->n_frags, op->k_steps, op->acc, op->a,
                               simplify_all(op->a_origin), op->a_k_inner, op->b,
                               simplify_all(op->b_origin), op->b_k_inner, Mutate(op->lane));
    }
    case StmtKind::kWgmma: {
      const auto* op = s.as<WgmmaNode>();
      return WgmmaNode::Make(op->kind, op->m_tiles, op->n, op->k_steps, op->acc, op->a,
                             Mutate(op->a_offset), op->a_layout, op->b, Mutate(op->b_offset),
                             op->b_layout, Mutate(op->thread), op->pending, op->proxy_fence);
    }
    case StmtKind::kTmaLoad: {
      const auto* op = s.as<TmaLoadNode>();
      std::vector<Expr> coords;
      for (const Expr& c : op->coords) coords.push_back(Mutate(c));
      return TmaLoadNode::Make(op->tensor_map, std::move(coords), op->dst, Mutate(op->dst_offset),
                               op->barrier, Mutate(op->barrier_index), op->multicast,
                               op->issuer.defined() ? Mutate(op->issuer) : op->issuer);
    }
    case StmtKind::kMbarrier: {
      const auto* op = s.as<MbarrierNode>();
      switch (op->op) {
        case MbarrierNode::Op::kInit:
          return MbarrierNode::Init(op->buffer, Mutate(op->index), op->count);
        case MbarrierNode::Op::kArriveExpectTx:
          return MbarrierNode::ArriveExpectTx(op->buffer, Mutate(op->index), op->count);
        case MbarrierNode::Op::kWait:
          return MbarrierNode::Wait(op->buffer, Mutate(op->index), Mutate(op->parity));
        case MbarrierNode::Op::kArrive:
          return MbarrierNode::Arrive(op->buffer, Mutate(op->index),
                                      std::max<int64_t>(op->count, 1));
      }
      return s;
    }
    case StmtKind::kSetMaxNReg:
      return s;
    case StmtKind::kEvaluate: {
      const auto* op = s.as<EvaluateNode>();
      Expr v = Mutate(op->value);
      // Expressions have no side effects: a constant evaluates to nothing.
      if (v.as<IntImmNode>() || v.as<FloatImmNode>()) return EmptyStmt();
      return v.same_as(op->value) ? s : EvaluateNode::Make(v);
    }
  }
  return s;
}

Stmt Simplifier::MutateFor(const Stmt& s) {
  const auto* op = s.as<ForNode>();
  Expr min = Mutate(op->min);
  Expr extent = Mutate(op->extent);
  // Thread- and block-bound loops define the launch shape: never removed.
  bool removable = !IsThreadBound(op->for_kind) && !IsBlockBound(op->for_kind);
  auto ext = AsConstInt(extent);
  if (removable && ext && *ext <= 0) return EmptyStmt();
  if (removable && ext && *ext == 1) {
    StmtSubstituter sub(op->var_name(), min);
    return MutateStmt(sub.Mutate(op->body));
  }
  Stmt body;
  {
    RangeScope scope(this);
    auto bmin = Bounds(min);
    auto bext = Bounds(extent);
    // var in [min, min + extent - 1] inside the body (thread loops skip indices >= extent).
    if (bmin && bext) {
      __int128 hi = static_cast<__int128>(bmin->max) + bext->max - 1;
      if (bext->max >= 1 && hi <= kInt64Max && hi >= bmin->min) {
        scope.Set(op->var_name(), Interval{bmin->min, static_cast<int64_t>(hi)});
      }
    }
    body = MutateStmt(op->body);
  }
  if (removable && IsEmptyStmt(body)) return EmptyStmt();
  if (!body.defined()) body = EmptyStmt();
  if (min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body)) return s;
  return ForNode::Make(op->var, min, extent, op->for_kind, body);
}

Stmt Simplifier::MutateIfThenElse(const Stmt& s) {
  const auto* op = s.as<IfThenElseNode>();
  Expr cond = Mutate(op->cond);
  if (auto c = AsConstInt(cond)) {
    Stmt taken = *c ? op->then_case : op->else_case;
    if (!taken.defined()) return EmptyStmt();
    return MutateStmt(taken);
  }
  Stmt then_case, else_case;
  {
    RangeScope scope(this);
    Refine(cond, true, &scope);
    then_case = MutateStmt(op->then_case);
  }
  if (op->else_case.defined()) {
    RangeScope scope(this);
    Refine(cond, false, &scope);
    else_case = MutateStmt(op->else_case);
  }
  if (IsEmptyStmt(else_case)) else_case = Stmt();
  if (IsEmptyStmt(then_case)) {
    if (!else_case.defined()) return EmptyStmt();
    return IfThenElseNode::Make(Simp(ExprKind::kNot, {cond}), else_case);
  }
  if (cond.same_as(op->cond) && then_case.same_as(op->then_case) &&
      else_case.same_as(op->else_case)) {
    return s;
  }
  return IfThenElseNode::Make(cond, then_case, else_case);
}

}  // namespace

Expr Simplify(const Expr& e, const RangeMap& ranges) {
  Simplifier s(ranges);
  return s.Mutate(e);
}

Stmt Simplify(const Stmt& s, const RangeMap& ranges) {
  Simplifier simp(ranges);
  return simp.MutateStmt(s);
}

}  // namespace tilesearch::ir
