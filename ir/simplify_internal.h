// Internals shared by the simplifier's source files; not part of the public interface (that is
// ir/simplify.h).
//
// Three pieces:
// - CompareExpr: a total order on expressions, so sums and commutative operands are ordered
//   deterministically.
// - LinearForm: sum(coef * atom) + constant over int64, the canonical form of index arithmetic
//   (Halide's and TVM's canonical simplifiers use the same idea). Atoms are any expressions that
//   are not Add, Sub or a Mul by a constant; coefficients are merged per structurally equal atom.
// - A small pattern matcher for rewrite(lhs, rhs, predicate) tables (Halide's IRMatch, reduced):
//   wildcards x, y, z, w match any expression (a repeated wildcard must match structurally equal
//   expressions), c0, c1, c2 match integer constants, and the right-hand side is rebuilt
//   bottom-up through a callback that simplifies each new node.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/expr.h"
#include "ir/simplify.h"

namespace tilesearch::ir::simplify_internal {

/// |v| as an unsigned value (defined for INT64_MIN).
inline uint64_t Magnitude(int64_t v) {
  return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

/// Total order on expressions: kind, type, then constants, names and operands in order.
/// Returns -1, 0 or 1; 0 exactly when StructurallyEqual (NaN constants compare by bits).
int CompareExpr(const Expr& a, const Expr& b);

/// floor(a / b) and a - b * floor(a / b) for b != 0 (ir/expr.h semantics). CHECKs b != 0.
/// INT64_MIN / -1 is not representable: callers check with CheckedFloorDiv.
int64_t FloorDiv(int64_t a, int64_t b);
int64_t FloorMod(int64_t a, int64_t b);
/// FloorDiv, or nullopt when b == 0 or the result overflows int64.
std::optional<int64_t> CheckedFloorDiv(int64_t a, int64_t b);
std::optional<int64_t> CheckedAdd(int64_t a, int64_t b);
std::optional<int64_t> CheckedSub(int64_t a, int64_t b);
std::optional<int64_t> CheckedMul(int64_t a, int64_t b);

/// BoundOf with memory: bounds per expression node for one RangeMap, so expressions that share
/// subexpressions (a DAG) are bounded in time linear in their number of distinct nodes. Clear()
/// whenever the ranges change.
class BoundCache {
 public:
  /// Entries keep their node alive, so a cached address is never reused by another node.
  using Memo = std::unordered_map<const ExprNode*, std::pair<Expr, std::optional<Interval>>>;

  explicit BoundCache(const RangeMap* ranges) : ranges_(ranges) {}
  std::optional<Interval> Bound(const Expr& e);
  void Clear() { memo_.clear(); }

 private:
  const RangeMap* ranges_;
  Memo memo_;
};

/// sum(coef_i * atom_i) + constant over int64 (mathematical integers: ir/expr.h promises that
/// int64 index arithmetic does not overflow). Terms are kept sorted by CompareExpr of the atom,
/// with no zero coefficients. Any coefficient overflow marks the form not ok(); callers then
/// leave the expression as it was.
class LinearForm {
 public:
  struct Term {
    Expr atom;
    int64_t coef = 0;
  };

  LinearForm() = default;
  static LinearForm Constant(int64_t c);
  static LinearForm Atom(const Expr& atom, int64_t coef = 1);
  /// Reads an int64 expression: Add and Sub of forms, Mul by an IntImm scales, IntImm is the
  /// constant; anything else (including a Mul of two non-constants) is one atom.
  static LinearForm Of(const Expr& e);

  bool ok() const { return ok_; }
  const std::vector<Term>& terms() const { return terms_; }
  int64_t constant() const { return constant_; }
  bool IsConstant() const { return terms_.empty(); }

  /// this += k * other.
  void AddScaled(const LinearForm& other, int64_t k);
  void AddConstant(int64_t c);
  void Scale(int64_t k);
  /// Coefficient of `atom` (0 when absent).
  int64_t CoefOf(const Expr& atom) const;

  /// Canonical expression: positive terms by descending coefficient (then atom order), then
  /// the negative terms subtracted, then the constant; "0 - x" is written x*-1.
  Expr ToExpr() const;

 private:
  void AddTerm(const Expr& atom, int64_t coef);

  std::vector<Term> terms_;
  int64_t constant_ = 0;
  bool ok_ = true;
};

// ---------------------------------------------------------------------------------------------
// Patterns.

/// A pattern tree. kWild / kConstWild bind slot `slot`; kConst matches one integer constant
/// (of type `const_type` when set); kNode matches a node of kind `op` with matching operands.
struct Pattern {
  enum class Tag : uint8_t { kWild, kConstWild, kConst, kNode };
  Tag tag = Tag::kWild;
  int slot = 0;
  int64_t value = 0;
  std::optional<ScalarType> const_type;
  ExprKind op = ExprKind::kAdd;
  std::vector<Pattern> kids;
};

/// Bindings of one match: wildcards (expressions) and constant wildcards (values).
struct Match {
  static constexpr int kSlots = 4;
  Expr wild[kSlots];
  std::optional<int64_t> cst[kSlots];
  int64_t c(int i) const { return *cst[i]; }
};

/// Matches `e` against `p`, extending `m`. A pattern `x + c0` also matches `x - k` (binding
/// c0 = -k), since canonical sums write negative constants as a subtraction.
bool MatchPattern(const Pattern& p, const Expr& e, Match* m);

/// Builds a node of `kind` from operands that are already simplified (Select takes three, Not
/// one, binary kinds two); the simplifier passes its top-level rewriter here.
using NodeBuilder = std::function<Expr(ExprKind kind, std::vector<Expr> operands)>;

/// Instantiates `p` with the bindings of `m`. Constants take `type` unless a sibling operand
/// fixes another type. Returns an undefined Expr when a constant slot is unbound.
Expr BuildPattern(const Pattern& p, const Match& m, ScalarType type, const NodeBuilder& build);

/// One rewrite(lhs, rhs, predicate) rule; `pred` sees the bindings (null: always).
struct Rule {
  Pattern lhs;
  Pattern rhs;
  bool (*pred)(const Match&) = nullptr;
};

/// Tries `rules` in order on `e`; the first whose lhs matches and whose predicate holds is
/// instantiated. Returns an undefined Expr when none applies.
Expr ApplyRules(const std::vector<Rule>& rules, const Expr& e, const NodeBuilder& build);

// ---------------------------------------------------------------------------------------------
// Constant folding with the exact semantics of ir/expr.h; nullopt where a fold is not allowed:
// integer division by zero, int64 overflow, float results the node's type cannot hold exactly
// (float16 / bfloat16 arithmetic runs in float32), float Mod, NaN results, min/max of NaN or
// equal values (signed zeros), and transcendental calls (their value is the evaluator's libm).

/// A binary node of two constants (any type; comparisons and And/Or give bool).
std::optional<Expr> FoldBinary(ExprKind kind, const Expr& a, const Expr& b);
/// Cast of a constant to `t`.
std::optional<Expr> FoldCast(ScalarType t, const Expr& v);
/// abs, floor and sqrt of constants.
std::optional<Expr> FoldCall(CallOp op, const std::vector<Expr>& args);

// ---------------------------------------------------------------------------------------------
// Rule tables (defined with the rules), applied by the simplifier after its procedural steps.
namespace rules {
/// int64 min / max with operands ordered (a constant last).
const std::vector<Rule>& MinRules();
const std::vector<Rule>& MaxRules();
/// int64 division / modulo by a constant.
const std::vector<Rule>& DivRules();
const std::vector<Rule>& ModRules();
/// Any type.
const std::vector<Rule>& SelectRules();
const std::vector<Rule>& AndRules();
const std::vector<Rule>& OrRules();
const std::vector<Rule>& NotRules();
}  // namespace rules

namespace pattern {
/// Wildcards and constant wildcards for rule tables.
Pattern Wild(int slot);
Pattern ConstWild(int slot);
Pattern Const(int64_t v);
Pattern True();
Pattern False();
Pattern Node(ExprKind op, std::vector<Pattern> kids);
Pattern operator+(Pattern a, Pattern b);
Pattern operator-(Pattern a, Pattern b);
Pattern operator*(Pattern a, Pattern b);
Pattern operator/(Pattern a, Pattern b);
Pattern operator%(Pattern a, Pattern b);
Pattern operator<(Pattern a, Pattern b);
Pattern operator<=(Pattern a, Pattern b);
Pattern operator==(Pattern a, Pattern b);
Pattern operator!=(Pattern a, Pattern b);
Pattern operator&&(Pattern a, Pattern b);
Pattern operator||(Pattern a, Pattern b);
Pattern operator!(Pattern a);
Pattern min(Pattern a, Pattern b);
Pattern max(Pattern a, Pattern b);
Pattern select(Pattern c, Pattern t, Pattern f);
}  // namespace pattern

}  // namespace tilesearch::ir::simplify_internal
