// Interval arithmetic over int64 expressions (BoundOf in ir/simplify.h).
//
// Every bound is sound under the floor-division semantics of ir/expr.h: for all variable values
// inside `ranges`, the expression's value lies inside the returned interval (points where the
// expression divides by zero have no value and are not constrained). Intermediate products are
// computed in 128 bits; a bound outside int64 is reported as unknown.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>

#include "ir/simplify.h"
#include "ir/simplify_internal.h"

namespace tilesearch::ir {
namespace {

using simplify_internal::FloorDiv;
using simplify_internal::FloorMod;
using I128 = __int128;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::optional<Interval> Fit(I128 lo, I128 hi) {
  if (lo < kInt64Min || hi > kInt64Max || lo > hi) return std::nullopt;
  return Interval{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

// floor(a / b) in 128 bits, b != 0.
I128 FloorDiv128(I128 a, I128 b) {
  I128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

class Bounder {
 public:
  using Memo = simplify_internal::BoundCache::Memo;

  // `memo` remembers bounds per node, so shared subexpressions are bounded once.
  Bounder(const RangeMap& ranges, Memo* memo) : ranges_(ranges), memo_(memo) {}

  std::optional<Interval> Bound(const Expr& e) const {
    if (!e.defined()) return std::nullopt;
    // Leaves cost less to bound than to look up, and most nodes are leaves: not memoized.
    if (e.kind() == ExprKind::kIntImm || e.kind() == ExprKind::kVar) return Compute(e);
    if (auto it = memo_->find(e.get()); it != memo_->end()) return it->second.second;
    std::optional<Interval> r = Compute(e);
    // The entry holds `e`, so its address cannot be reused by another node while cached.
    memo_->emplace(e.get(), std::make_pair(e, r));
    return r;
  }

 private:
  std::optional<Interval> Compute(const Expr& e) const {
    if (!e.defined()) return std::nullopt;
    if (e.type() == ScalarType::kBool) return BoundBool(e);
    if (e.type() != ScalarType::kInt64) {
      if (auto c = AsConstInt(e)) return Interval{*c, *c};
      return std::nullopt;
    }
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        int64_t v = e.as<IntImmNode>()->value;
        return Interval{v, v};
      }
      case ExprKind::kVar: {
        auto it = ranges_.find(e.as<VarNode>()->name);
        if (it == ranges_.end() || it->second.min > it->second.max) return std::nullopt;
        return it->second;
      }
      case ExprKind::kAdd: {
        auto a = Bound(e.as<AddNode>()->a);
        auto b = a ? Bound(e.as<AddNode>()->b) : std::nullopt;
        if (!b) return std::nullopt;
        return Fit(I128(a->min) + b->min, I128(a->max) + b->max);
      }
      case ExprKind::kSub: {
        auto a = Bound(e.as<SubNode>()->a);
        auto b = a ? Bound(e.as<SubNode>()->b) : std::nullopt;
        if (!b) return std::nullopt;
        return Fit(I128(a->min) - b->max, I128(a->max) - b->min);
      }
      case ExprKind::kMul: {
        auto a = Bound(e.as<MulNode>()->a);
        auto b = a ? Bound(e.as<MulNode>()->b) : std::nullopt;
        if (!b) return std::nullopt;
        I128 p[4] = {I128(a->min) * b->min, I128(a->min) * b->max, I128(a->max) * b->min,
                     I128(a->max) * b->max};
        return Fit(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
      }
      case ExprKind::kDiv:
        return BoundDiv(e.as<DivNode>());
      case ExprKind::kMod:
        return BoundMod(e.as<ModNode>());
      case ExprKind::kMin: {
        auto a = Bound(e.as<MinNode>()->a);
        auto b = a ? Bound(e.as<MinNode>()->b) : std::nullopt;
        if (!b) return std::nullopt;
        return Interval{std::min(a->min, b->min), std::min(a->max, b->max)};
      }
      case ExprKind::kMax: {
        auto a = Bound(e.as<MaxNode>()->a);
        auto b = a ? Bound(e.as<MaxNode>()->b) : std::nullopt;
        if (!b) return std::nullopt;
        return Interval{std::max(a->min, b->min), std::max(a->max, b->max)};
      }
      case ExprKind::kSelect: {
        const auto* s = e.as<SelectNode>();
        if (auto c = AsConstInt(s->cond)) return Bound(*c ? s->true_value : s->false_value);
        auto t = Bound(s->true_value);
        auto f = t ? Bound(s->false_value) : std::nullopt;
        if (!f) return std::nullopt;
        return Interval{std::min(t->min, f->min), std::max(t->max, f->max)};
      }
      case ExprKind::kCast: {
        const Expr& v = e.as<CastNode>()->value;
        if (v.type() == ScalarType::kBool) return BoundBool(v);
        if (v.type() == ScalarType::kInt32) {
          if (auto c = AsConstInt(v)) return Interval{*c, *c};
          return Interval{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
        }
        return std::nullopt;
      }
      case ExprKind::kCall: {
        const auto* c = e.as<CallNode>();
        if (c->op != CallOp::kAbs) return std::nullopt;
        auto a = Bound(c->args[0]);
        if (!a) return std::nullopt;
        I128 lo = a->min, hi = a->max;
        if (lo >= 0) return Fit(lo, hi);
        if (hi <= 0) return Fit(-hi, -lo);
        return Fit(0, std::max(-lo, hi));
      }
      default:
        return std::nullopt;
    }
  }

  std::optional<Interval> BoundBool(const Expr& e) const {
    if (auto c = AsConstInt(e)) return Interval{*c, *c};
    return Interval{0, 1};
  }

  std::optional<Interval> BoundDiv(const DivNode* op) const {
    auto a = Bound(op->a);
    auto b = a ? Bound(op->b) : std::nullopt;
    if (!b || (b->min == 0 && b->max == 0)) return std::nullopt;  // always divides by zero
    if (b->min > 0 || b->max < 0) {
      // floor(a / b) is monotone in a and in b while b keeps one sign: extremes at corners.
      I128 q[4] = {FloorDiv128(a->min, b->min), FloorDiv128(a->min, b->max),
                   FloorDiv128(a->max, b->min), FloorDiv128(a->max, b->max)};
      return Fit(*std::min_element(q, q + 4), *std::max_element(q, q + 4));
    }
    // b may be 0 (no value) or any nonzero integer, so |a / b| <= |a|.
    I128 m = std::max(-I128(a->min), I128(a->max));
    m = std::max<I128>(m, 0);
    return Fit(-m, m);
  }

  std::optional<Interval> BoundMod(const ModNode* op) const {
    auto b = Bound(op->b);
    if (!b || (b->min == 0 && b->max == 0)) return std::nullopt;  // always divides by zero
    auto a = Bound(op->a);
    if (b->min == b->max && b->min != 0) {
      int64_t c = b->min;
      if (c == 1 || c == -1) return Interval{0, 0};
      if (a && FloorDiv(a->min, c) == FloorDiv(a->max, c)) {
        // One period: a % c = a - k*c is monotone.
        return Interval{FloorMod(a->min, c), FloorMod(a->max, c)};
      }
      if (c > 0) return Interval{0, c - 1};
      return Interval{c + 1, 0};
    }
    if (b->min > 0) {
      if (a && a->min >= 0) {
        if (a->max < b->min) return a;
        return Interval{0, std::min(a->max, b->max - 1)};
      }
      return Interval{0, b->max - 1};
    }
    if (b->max < 0) return Interval{b->min + 1, 0};
    // The result has the sign of b and |result| < |b|.
    return Interval{std::min<int64_t>(0, b->min + 1), std::max<int64_t>(0, b->max - 1)};
  }

  const RangeMap& ranges_;
  Memo* memo_;
};

}  // namespace

BoundResult BoundOf(const Expr& e, const RangeMap& ranges) {
  Bounder::Memo memo;
  Bounder b(ranges, &memo);
  auto r = b.Bound(e);
  if (!r) return BoundResult{};
  return BoundResult{true, *r};
}

BoundMemo::BoundMemo(const RangeMap& ranges)
    : cache_(std::make_unique<simplify_internal::BoundCache>(&ranges)) {}

BoundMemo::~BoundMemo() = default;

BoundResult BoundMemo::Of(const Expr& e) {
  std::optional<Interval> r = cache_->Bound(e);
  if (!r) return BoundResult{};
  return BoundResult{true, *r};
}

namespace simplify_internal {

std::optional<Interval> BoundCache::Bound(const Expr& e) {
  Bounder b(*ranges_, &memo_);
  return b.Bound(e);
}

}  // namespace simplify_internal

}  // namespace tilesearch::ir
