// Simplifier for index arithmetic: constant folding, canonical linear forms, div/mod by constants
// with known ranges, min/max and comparisons with known bounds.
//
// Rules are written as a table of rewrite(lhs, rhs, predicate) (Halide's Simplify_*.cpp design)
// and fuzzed against direct evaluation with random expressions (tests/ir/simplify_fuzz_test.cc).
// Every rewrite preserves the value under the floor-division semantics of ir/expr.h for all
// variable values inside the given ranges.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ir/expr.h"
#include "ir/stmt.h"

namespace tilesearch::ir {

/// Closed integer interval [min, max] a variable is known to lie in.
struct Interval {
  int64_t min = 0;
  int64_t max = 0;
};

/// Known ranges by variable name.
using RangeMap = std::map<std::string, Interval>;

/// Returns an expression equal to `e` for every assignment of the variables within `ranges`
/// (variables absent from `ranges` are unbounded). Never changes float arithmetic other than
/// folding constants exactly as the evaluator would.
Expr Simplify(const Expr& e, const RangeMap& ranges = {});

/// Simplifies every expression of `s`, using each For's range [min, min+extent-1] inside its body
/// (when min and extent simplify to constants); removes loops of extent 1 (substituting the
/// variable by its min), IfThenElse with a constant condition and empty Seqs.
Stmt Simplify(const Stmt& s, const RangeMap& ranges = {});

/// Bounds of an int64 expression given variable ranges, or nullopt-like {false} when unbounded.
/// `ok` is false when some variable has no range or an operation's bound is not known.
struct BoundResult {
  bool ok = false;
  Interval range;
};
BoundResult BoundOf(const Expr& e, const RangeMap& ranges);

namespace simplify_internal {
class BoundCache;
}

/// BoundOf for many expressions under one RangeMap: the bound of a node (a subexpression shared
/// by several of them included) is computed once. Of(e) equals BoundOf(e, ranges). `ranges` must
/// outlive the object and not change while it is used.
class BoundMemo {
 public:
  explicit BoundMemo(const RangeMap& ranges);
  ~BoundMemo();
  BoundMemo(const BoundMemo&) = delete;
  BoundMemo& operator=(const BoundMemo&) = delete;
  /// BoundOf(e, ranges).
  BoundResult Of(const Expr& e);

 private:
  std::unique_ptr<simplify_internal::BoundCache> cache_;
};

}  // namespace tilesearch::ir
