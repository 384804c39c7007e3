// The pattern matcher behind the simplifier's rewrite(lhs, rhs, predicate) tables.
#include <limits>

#include "base/status.h"
#include "ir/simplify_internal.h"

namespace tilesearch::ir::simplify_internal {
namespace {

bool IsComparisonKind(ExprKind k) {
  return k == ExprKind::kEQ || k == ExprKind::kNE || k == ExprKind::kLT || k == ExprKind::kLE ||
         k == ExprKind::kGT || k == ExprKind::kGE;
}

bool BindConst(int slot, int64_t v, Match* m) {
  if (m->cst[slot]) return *m->cst[slot] == v;
  m->cst[slot] = v;
  return true;
}

// Type of the operands of a pattern, from its first bound wildcard.
std::optional<ScalarType> InferType(const Pattern& p, const Match& m) {
  switch (p.tag) {
    case Pattern::Tag::kWild:
      if (m.wild[p.slot].defined()) return m.wild[p.slot].type();
      return std::nullopt;
    case Pattern::Tag::kConst:
      return p.const_type;
    case Pattern::Tag::kConstWild:
      return std::nullopt;
    case Pattern::Tag::kNode:
      if (IsComparisonKind(p.op) || p.op == ExprKind::kAnd || p.op == ExprKind::kOr ||
          p.op == ExprKind::kNot) {
        return ScalarType::kBool;
      }
      // A Select's type is its branches' type, the other kinds' their operands' type.
      for (size_t i = p.op == ExprKind::kSelect ? 1 : 0; i < p.kids.size(); ++i) {
        if (auto t = InferType(p.kids[i], m)) return t;
      }
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

bool MatchPattern(const Pattern& p, const Expr& e, Match* m) {
  switch (p.tag) {
    case Pattern::Tag::kWild: {
      Expr& slot = m->wild[p.slot];
      if (slot.defined()) return CompareExpr(slot, e) == 0;
      slot = e;
      return true;
    }
    case Pattern::Tag::kConstWild: {
      auto v = AsConstInt(e);
      if (!v || !IsInt(e.type())) return false;
      return BindConst(p.slot, *v, m);
    }
    case Pattern::Tag::kConst: {
      auto v = AsConstInt(e);
      if (!v || *v != p.value) return false;
      return p.const_type ? e.type() == *p.const_type : IsInt(e.type());
    }
    case Pattern::Tag::kNode:
      break;
  }
  if (p.op == ExprKind::kAdd && p.kids[1].tag == Pattern::Tag::kConstWild) {
    if (const auto* sub = e.as<SubNode>()) {
      auto k = AsConstInt(sub->b);
      if (!k || *k == std::numeric_limits<int64_t>::min()) return false;
      return MatchPattern(p.kids[0], sub->a, m) && BindConst(p.kids[1].slot, -*k, m);
    }
  }
  if (e.kind() != p.op) return false;
  if (IsBinaryKind(p.op)) {
    auto [a, b] = BinaryOperands(e);
    return MatchPattern(p.kids[0], a, m) && MatchPattern(p.kids[1], b, m);
  }
  if (const auto* n = e.as<NotNode>()) return MatchPattern(p.kids[0], n->a, m);
  if (const auto* s = e.as<SelectNode>()) {
    return MatchPattern(p.kids[0], s->cond, m) && MatchPattern(p.kids[1], s->true_value, m) &&
           MatchPattern(p.kids[2], s->false_value, m);
  }
  return false;
}

Expr BuildPattern(const Pattern& p, const Match& m, ScalarType type, const NodeBuilder& build) {
  switch (p.tag) {
    case Pattern::Tag::kWild:
      return m.wild[p.slot];
    case Pattern::Tag::kConstWild:
      if (!m.cst[p.slot] || !IsInt(type)) return Expr();
      return IntConst(*m.cst[p.slot], type);
    case Pattern::Tag::kConst:
      if (p.const_type) return IntImmNode::Make(*p.const_type, p.value);
      if (!IsInt(type)) return Expr();
      return IntConst(p.value, type);
    case Pattern::Tag::kNode:
      break;
  }
  ScalarType operand_type = type;
  if (IsComparisonKind(p.op)) {
    operand_type = ScalarType::kInt64;
    for (const Pattern& k : p.kids) {
      if (auto t = InferType(k, m)) {
        operand_type = *t;
        break;
      }
    }
  } else if (p.op == ExprKind::kAnd || p.op == ExprKind::kOr || p.op == ExprKind::kNot) {
    operand_type = ScalarType::kBool;
  }
  std::vector<Expr> kids;
  for (size_t i = 0; i < p.kids.size(); ++i) {
    ScalarType t = (p.op == ExprKind::kSelect && i == 0) ? ScalarType::kBool : operand_type;
    Expr k = BuildPattern(p.kids[i], m, t, build);
    if (!k.defined()) return Expr();
    kids.push_back(std::move(k));
  }
  return build(p.op, std::move(kids));
}

Expr ApplyRules(const std::vector<Rule>& rules, const Expr& e, const NodeBuilder& build) {
  for (const Rule& r : rules) {
    Match m;
    if (!MatchPattern(r.lhs, e, &m)) continue;
    if (r.pred && !r.pred(m)) continue;
    Expr out = BuildPattern(r.rhs, m, e.type(), build);
    if (out.defined()) return out;
  }
  return Expr();
}

namespace pattern {

Pattern Wild(int slot) {
  CHECK(slot >= 0 && slot < Match::kSlots) << "wildcard slot " << slot;
  Pattern p;
  p.tag = Pattern::Tag::kWild;
  p.slot = slot;
  return p;
}

Pattern ConstWild(int slot) {
  CHECK(slot >= 0 && slot < Match::kSlots) << "constant wildcard slot " << slot;
  Pattern p;
  p.tag = Pattern::Tag::kConstWild;
  p.slot = slot;
  return p;
}

Pattern Const(int64_t v) {
  Pattern p;
  p.tag = Pattern::Tag::kConst;
  p.value = v;
  return p;
}

Pattern True() {
  Pattern p = Const(1);
  p.const_type = ScalarType::kBool;
  return p;
}

Pattern False() {
  Pattern p = Const(0);
  p.const_type = ScalarType::kBool;
  return p;
}

Pattern Node(ExprKind op, std::vector<Pattern> kids) {
  Pattern p;
  p.tag = Pattern::Tag::kNode;
  p.op = op;
  p.kids = std::move(kids);
  return p;
}

Pattern operator+(Pattern a, Pattern b) { return Node(ExprKind::kAdd, {a, b}); }
Pattern operator-(Pattern a, Pattern b) { return Node(ExprKind::kSub, {a, b}); }
Pattern operator*(Pattern a, Pattern b) { return Node(ExprKind::kMul, {a, b}); }
Pattern operator/(Pattern a, Pattern b) { return Node(ExprKind::kDiv, {a, b}); }
Pattern operator%(Pattern a, Pattern b) { return Node(ExprKind::kMod, {a, b}); }
Pattern operator<(Pattern a, Pattern b) { return Node(ExprKind::kLT, {a, b}); }
Pattern operator<=(Pattern a, Pattern b) { return Node(ExprKind::kLE, {a, b}); }
Pattern operator==(Pattern a, Pattern b) { return Node(ExprKind::kEQ, {a, b}); }
Pattern operator!=(Pattern a, Pattern b) { return Node(ExprKind::kNE, {a, b}); }
Pattern operator&&(Pattern a, Pattern b) { return Node(ExprKind::kAnd, {a, b}); }
Pattern operator||(Pattern a, Pattern b) { return Node(ExprKind::kOr, {a, b}); }
Pattern operator!(Pattern a) { return Node(ExprKind::kNot, {a}); }
Pattern min(Pattern a, Pattern b) { return Node(ExprKind::kMin, {a, b}); }
Pattern max(Pattern a, Pattern b) { return Node(ExprKind::kMax, {a, b}); }
Pattern select(Pattern c, Pattern t, Pattern f) { return Node(ExprKind::kSelect, {c, t, f}); }

}  // namespace pattern

}  // namespace tilesearch::ir::simplify_internal
