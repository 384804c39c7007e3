// Symbolic bounds and access regions over lowered statements (TVM InferBound's box regions,
// computed on the loop nest itself so that nested compute_at chains are handled in absolute
// coordinates).
#include <algorithm>
#include <set>

#include "base/status.h"
#include "schedule/lower_internal.h"

namespace tilesearch::schedule::lower_internal {
namespace {

using ir::Expr;
using ir::ExprKind;
using ir::RangeMap;
using ir::Stmt;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) { return a - b * FloorDiv(a, b); }

class VarCollector : public ir::ExprVisitor {
 public:
  std::vector<std::string> names;

 protected:
  void VisitVar(const ir::VarNode* op, const Expr&) override {
    if (std::find(names.begin(), names.end(), op->name) == names.end()) names.push_back(op->name);
  }
};

// Linear decomposition of an expression that does not vary: sums and constant multiples are
// split so that equal parts cancel; anything else is one opaque term.
LinearForm FixedForm(const Expr& e) {
  if (auto c = ir::AsConstInt(e)) return LinearForm::Const(*c);
  switch (e.kind()) {
    case ExprKind::kAdd: {
      const auto* op = e.as<ir::AddNode>();
      return FixedForm(op->a) + FixedForm(op->b);
    }
    case ExprKind::kSub: {
      const auto* op = e.as<ir::SubNode>();
      return FixedForm(op->a) - FixedForm(op->b);
    }
    case ExprKind::kMul: {
      const auto* op = e.as<ir::MulNode>();
      if (auto c = ir::AsConstInt(op->b)) return FixedForm(op->a) * *c;
      if (auto c = ir::AsConstInt(op->a)) return FixedForm(op->b) * *c;
      break;
    }
    default:
      break;
  }
  return LinearForm::Term(e);
}

std::optional<LinearForm> DivForm(const LinearForm& f, int64_t c) {
  LinearForm out;
  for (const auto& [key, term] : f.terms) {
    if (term.second % c != 0) return std::nullopt;
    out.terms[key] = {term.first, term.second / c};
  }
  out.constant = FloorDiv(f.constant, c);
  return out;
}

bool TermsDivisible(const LinearForm& f, int64_t c) {
  for (const auto& [key, term] : f.terms) {
    if (term.second % c != 0) return false;
  }
  return true;
}

// Smaller (want_min) or larger of two forms when they differ by a constant.
std::optional<LinearForm> Pick(const LinearForm& a, const LinearForm& b, bool want_min) {
  auto d = ConstDiff(a, b);
  if (!d) return std::nullopt;
  if (want_min) return *d <= 0 ? a : b;
  return *d >= 0 ? a : b;
}

std::optional<int64_t> ConstValue(const SymbolicBound& b) {
  if (b.lo.is_constant() && b.hi.is_constant() && b.lo.constant == b.hi.constant) {
    return b.lo.constant;
  }
  return std::nullopt;
}

std::optional<SymbolicBound> Bound(const Expr& e, const RangeMap& v) {
  if (!e.defined() || e.type() != ir::ScalarType::kInt64) return std::nullopt;
  if (!UsesAnyVar(e, v)) {
    LinearForm f = FixedForm(e);
    return SymbolicBound{f, f};
  }
  switch (e.kind()) {
    case ExprKind::kVar: {
      const auto& iv = v.at(e.as<ir::VarNode>()->name);
      return SymbolicBound{LinearForm::Const(iv.min), LinearForm::Const(iv.max)};
    }
    case ExprKind::kAdd:
    case ExprKind::kSub: {
      auto [a, b] = ir::BinaryOperands(e);
      auto ba = Bound(a, v);
      auto bb = Bound(b, v);
      if (!ba || !bb) return std::nullopt;
      if (e.kind() == ExprKind::kAdd) return SymbolicBound{ba->lo + bb->lo, ba->hi + bb->hi};
      return SymbolicBound{ba->lo - bb->hi, ba->hi - bb->lo};
    }
    case ExprKind::kMul: {
      auto [a, b] = ir::BinaryOperands(e);
      auto ba = Bound(a, v);
      auto bb = Bound(b, v);
      if (!ba || !bb) return std::nullopt;
      std::optional<int64_t> c = ConstValue(*bb);
      const SymbolicBound* other = &*ba;
      if (!c) {
        c = ConstValue(*ba);
        other = &*bb;
      }
      if (!c) return std::nullopt;
      if (*c >= 0) return SymbolicBound{other->lo * *c, other->hi * *c};
      return SymbolicBound{other->hi * *c, other->lo * *c};
    }
    case ExprKind::kDiv:
    case ExprKind::kMod: {
      auto [a, b] = ir::BinaryOperands(e);
      auto bb = Bound(b, v);
      if (!bb) return std::nullopt;
      std::optional<int64_t> c = ConstValue(*bb);
      if (!c || *c <= 0) return std::nullopt;
      auto ba = Bound(a, v);
      if (e.kind() == ExprKind::kDiv) {
        if (!ba) return std::nullopt;
        auto lo = DivForm(ba->lo, *c);
        auto hi = DivForm(ba->hi, *c);
        if (!lo || !hi) return std::nullopt;
        return SymbolicBound{*lo, *hi};
      }
      SymbolicBound full{LinearForm::Const(0), LinearForm::Const(*c - 1)};
      if (!ba || !TermsDivisible(ba->lo, *c) || !TermsDivisible(ba->hi, *c)) return full;
      auto d = ConstDiff(ba->hi, ba->lo);
      if (!d) return full;
      int64_t lo = ba->lo.constant;
      int64_t hi = ba->hi.constant;
      if (FloorDiv(lo, *c) != FloorDiv(hi, *c)) return full;
      return SymbolicBound{LinearForm::Const(FloorMod(lo, *c)),
                           LinearForm::Const(FloorMod(hi, *c))};
    }
    case ExprKind::kMin:
    case ExprKind::kMax: {
      auto [a, b] = ir::BinaryOperands(e);
      auto ba = Bound(a, v);
      auto bb = Bound(b, v);
      if (!ba || !bb) return std::nullopt;
      bool is_min = e.kind() == ExprKind::kMin;
      // min(a, b) ≥ min(lo_a, lo_b) and ≤ either upper bound; max symmetric.
      std::optional<LinearForm> lo = Pick(ba->lo, bb->lo, /*want_min=*/true);
      std::optional<LinearForm> hi = Pick(ba->hi, bb->hi, /*want_min=*/false);
      if (is_min) {
        hi = Pick(ba->hi, bb->hi, /*want_min=*/true);
        if (!hi) hi = ba->hi;
        if (!lo) return std::nullopt;
      } else {
        lo = Pick(ba->lo, bb->lo, /*want_min=*/false);
        if (!lo) lo = ba->lo;
        if (!hi) return std::nullopt;
      }
      return SymbolicBound{*lo, *hi};
    }
    case ExprKind::kSelect: {
      const auto* op = e.as<ir::SelectNode>();
      auto bt = Bound(op->true_value, v);
      auto bf = Bound(op->false_value, v);
      if (!bt || !bf) return std::nullopt;
      auto lo = Pick(bt->lo, bf->lo, true);
      auto hi = Pick(bt->hi, bf->hi, false);
      if (!lo || !hi) return std::nullopt;
      return SymbolicBound{*lo, *hi};
    }
    case ExprKind::kCast: {
      const auto* op = e.as<ir::CastNode>();
      if (op->value.type() != ir::ScalarType::kInt64) return std::nullopt;
      return Bound(op->value, v);
    }
    default:
      return std::nullopt;
  }
}

// Collects, for every Load of one buffer, the bounds of its indices under the loops around it.
class RegionCollector {
 public:
  RegionCollector(const std::string& buffer, size_t ndim, RangeMap relaxed)
      : buffer_(buffer), ndim_(ndim), varying_(std::move(relaxed)), dims_(ndim) {}

  void VisitStmt(const Stmt& s) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case ir::StmtKind::kFor: {
        const auto* op = s.as<ir::ForNode>();
        VisitExpr(op->min);
        VisitExpr(op->extent);
        auto min = ir::AsConstInt(op->min);
        auto extent = ir::AsConstInt(op->extent);
        const std::string& name = op->var_name();
        auto saved = varying_.find(name) != varying_.end()
                         ? std::optional<ir::Interval>(varying_[name])
                         : std::nullopt;
        if (min && extent && *extent >= 1) {
          varying_[name] = ir::Interval{*min, *min + *extent - 1};
        } else {
          // Unknown range: any Load using it becomes unanalyzable.
          varying_[name] = ir::Interval{INT64_MIN / 4, INT64_MAX / 4};
          unbounded_.insert(name);
        }
        VisitStmt(op->body);
        if (saved) {
          varying_[name] = *saved;
        } else {
          varying_.erase(name);
        }
        break;
      }
      case ir::StmtKind::kSeq:
        for (const Stmt& c : s.as<ir::SeqNode>()->stmts) VisitStmt(c);
        break;
      case ir::StmtKind::kStore: {
        const auto* op = s.as<ir::StoreNode>();
        for (const Expr& i : op->indices) VisitExpr(i);
        VisitExpr(op->value);
        break;
      }
      case ir::StmtKind::kAllocate:
        VisitStmt(s.as<ir::AllocateNode>()->body);
        break;
      case ir::StmtKind::kIfThenElse: {
        const auto* op = s.as<ir::IfThenElseNode>();
        VisitExpr(op->cond);
        VisitStmt(op->then_case);
        VisitStmt(op->else_case);
        break;
      }
      case ir::StmtKind::kBarrier:
      case ir::StmtKind::kAsyncGroup:
      case ir::StmtKind::kWarpMma:  // made after regions are inferred (tensor_core kernels)
      case ir::StmtKind::kWgmma:
      case ir::StmtKind::kTmaLoad:
      case ir::StmtKind::kMbarrier:
      case ir::StmtKind::kSetMaxNReg:
        break;
      case ir::StmtKind::kEvaluate:
        VisitExpr(s.as<ir::EvaluateNode>()->value);
        break;
    }
  }

  void VisitExpr(const Expr& e) {
    class LoadFinder : public ir::ExprVisitor {
     public:
      explicit LoadFinder(RegionCollector* c) : c_(c) {}

     protected:
      void VisitLoad(const ir::LoadNode* op, const Expr& e) override {
        ir::ExprVisitor::VisitLoad(op, e);
        if (op->buffer == c_->buffer_) c_->AddAccess(op->indices);
      }

     private:
      RegionCollector* c_;
    };
    LoadFinder f(this);
    f.Visit(e);
  }

  AccessRegion Finish(const std::vector<int64_t>& shape) const {
    AccessRegion r;
    r.accessed = accessed_;
    for (size_t d = 0; d < ndim_; ++d) {
      const DimState& ds = dims_[d];
      std::optional<int64_t> extent;
      if (ds.ok && ds.lo && ds.hi) extent = ConstDiff(*ds.hi, *ds.lo);
      // A region as large as the dimension is the whole dimension (accesses outside it are
      // never evaluated: Select branches not taken).
      if (accessed_ && extent && *extent >= 0 && *extent + 1 < shape[d]) {
        r.min.push_back(ds.lo->ToExpr());
        r.extent.push_back(*extent + 1);
      } else {
        r.min.push_back(ir::IntConst(0));
        r.extent.push_back(shape[d]);
      }
    }
    return r;
  }

 private:
  struct DimState {
    bool ok = true;
    std::optional<LinearForm> lo;
    std::optional<LinearForm> hi;
  };

  void AddAccess(const std::vector<Expr>& indices) {
    accessed_ = true;
    for (size_t d = 0; d < ndim_ && d < indices.size(); ++d) {
      DimState& ds = dims_[d];
      if (!ds.ok) continue;
      std::optional<SymbolicBound> b;
      bool uses_unbounded = false;
      for (const std::string& n : VarsOf(indices[d])) uses_unbounded |= unbounded_.count(n) > 0;
      if (!uses_unbounded) b = Bound(indices[d], varying_);
      if (!b) {
        ds.ok = false;
        continue;
      }
      if (!ds.lo) {
        ds.lo = b->lo;
        ds.hi = b->hi;
        continue;
      }
      auto lo = Pick(*ds.lo, b->lo, true);
      auto hi = Pick(*ds.hi, b->hi, false);
      if (!lo || !hi) {
        ds.ok = false;
        continue;
      }
      ds.lo = lo;
      ds.hi = hi;
    }
  }

  const std::string& buffer_;
  size_t ndim_;
  RangeMap varying_;
  std::set<std::string> unbounded_;
  std::vector<DimState> dims_;
  bool accessed_ = false;
};

class LoadRewriter : public ir::ExprMutator {
 public:
  LoadRewriter(const std::string& buffer,
               const std::function<std::vector<Expr>(const std::vector<Expr>&)>& rewrite)
      : buffer_(buffer), rewrite_(rewrite) {}

 protected:
  Expr MutateLoad(const ir::LoadNode* op, const Expr& e) override {
    Expr m = ir::ExprMutator::MutateLoad(op, e);
    const auto* load = m.as<ir::LoadNode>();
    if (load->buffer != buffer_) return m;
    return ir::LoadNode::Make(load->type, load->buffer, rewrite_(load->indices), nullptr);
  }

 private:
  const std::string& buffer_;
  const std::function<std::vector<Expr>(const std::vector<Expr>&)>& rewrite_;
};

class StmtLoadRewriter : public ir::StmtMutator {
 public:
  explicit StmtLoadRewriter(LoadRewriter* r) : r_(r) {}
  Expr MutateExpr(const Expr& e) override { return r_->Mutate(e); }

 private:
  LoadRewriter* r_;
};

}  // namespace

LinearForm LinearForm::Const(int64_t c) {
  LinearForm f;
  f.constant = c;
  return f;
}

LinearForm LinearForm::Term(const Expr& e) {
  LinearForm f;
  f.terms[ir::ToString(e)] = {e, 1};
  return f;
}

Expr LinearForm::ToExpr() const {
  Expr out;
  for (const auto& [key, term] : terms) {
    Expr t = term.second == 1 ? term.first : term.first * ir::IntConst(term.second);
    out = out.defined() ? out + t : t;
  }
  if (!out.defined()) return ir::IntConst(constant);
  if (constant != 0) out = out + ir::IntConst(constant);
  return out;
}

LinearForm operator+(const LinearForm& a, const LinearForm& b) {
  LinearForm out = a;
  for (const auto& [key, term] : b.terms) {
    auto it = out.terms.find(key);
    if (it == out.terms.end()) {
      out.terms[key] = term;
    } else {
      it->second.second += term.second;
      if (it->second.second == 0) out.terms.erase(it);
    }
  }
  out.constant += b.constant;
  return out;
}

LinearForm operator*(const LinearForm& a, int64_t c) {
  if (c == 0) return LinearForm::Const(0);
  LinearForm out = a;
  for (auto& [key, term] : out.terms) term.second *= c;
  out.constant *= c;
  return out;
}

LinearForm operator-(const LinearForm& a, const LinearForm& b) { return a + b * -1; }

std::optional<int64_t> ConstDiff(const LinearForm& a, const LinearForm& b) {
  LinearForm d = a - b;
  if (!d.is_constant()) return std::nullopt;
  return d.constant;
}

std::optional<SymbolicBound> BoundOver(const Expr& e, const RangeMap& varying) {
  return Bound(e, varying);
}

std::optional<ir::Interval> ConstBound(const Expr& e, const RangeMap& ranges) {
  auto b = Bound(e, ranges);
  if (!b || !b->lo.is_constant() || !b->hi.is_constant()) return std::nullopt;
  return ir::Interval{b->lo.constant, b->hi.constant};
}

bool UsesAnyVar(const Expr& e, const RangeMap& names) {
  if (names.empty()) return false;
  for (const std::string& n : VarsOf(e)) {
    if (names.count(n)) return true;
  }
  return false;
}

std::vector<std::string> VarsOf(const Expr& e) {
  VarCollector c;
  c.Visit(e);
  return std::move(c.names);
}

AccessRegion InferAccessRegion(const std::string& buffer, const std::vector<int64_t>& shape,
                               const std::vector<Stmt>& stmts, const RangeMap& outer_relaxed) {
  RegionCollector c(buffer, shape.size(), outer_relaxed);
  for (const Stmt& s : stmts) c.VisitStmt(s);
  return c.Finish(shape);
}

Stmt RewriteLoads(const Stmt& s, const std::string& buffer,
                  const std::function<std::vector<Expr>(const std::vector<Expr>&)>& rewrite) {
  LoadRewriter r(buffer, rewrite);
  StmtLoadRewriter m(&r);
  return m.Mutate(s);
}

}  // namespace tilesearch::schedule::lower_internal
