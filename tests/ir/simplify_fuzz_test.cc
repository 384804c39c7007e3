// Property test of the simplifier (Halide's fuzzing approach): random int64 and bool expressions
// over a few variables with random ranges are simplified, and the original and the simplified
// expression are evaluated by an independent evaluator (written here, floor division semantics)
// at random points inside the ranges. They must agree wherever the original has a value.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/expr.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "ir/simplify.h"
#include "ir/stmt.h"

namespace tilesearch::ir {
namespace {

constexpr ScalarType kI64 = ScalarType::kInt64;
constexpr ScalarType kBool = ScalarType::kBool;

using Env = std::map<std::string, int64_t>;

// Direct evaluation; nullopt where the expression has no value (division by zero, overflow).
// And / Or evaluate both operands; Select only the branch taken (ir/expr.h).
std::optional<int64_t> Eval(const Expr& e, const Env& env) {
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return e.as<IntImmNode>()->value;
    case ExprKind::kVar:
      return env.at(e.as<VarNode>()->name);
    case ExprKind::kNot: {
      auto a = Eval(e.as<NotNode>()->a, env);
      if (!a) return std::nullopt;
      return *a ? 0 : 1;
    }
    case ExprKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      auto c = Eval(s->cond, env);
      if (!c) return std::nullopt;
      return Eval(*c ? s->true_value : s->false_value, env);
    }
    default:
      break;
  }
  if (!IsBinaryKind(e.kind())) {
    ADD_FAILURE() << "unexpected node in " << e;
    return std::nullopt;
  }
  auto [ea, eb] = BinaryOperands(e);
  auto a = Eval(ea, env);
  auto b = Eval(eb, env);
  if (!a || !b) return std::nullopt;
  int64_t x = *a, y = *b, r = 0;
  switch (e.kind()) {
    case ExprKind::kAdd:
      if (__builtin_add_overflow(x, y, &r)) return std::nullopt;
      return r;
    case ExprKind::kSub:
      if (__builtin_sub_overflow(x, y, &r)) return std::nullopt;
      return r;
    case ExprKind::kMul:
      if (__builtin_mul_overflow(x, y, &r)) return std::nullopt;
      return r;
    case ExprKind::kDiv: {
      if (y == 0 || (x == INT64_MIN && y == -1)) return std::nullopt;
      // floor(x / y) from the truncating quotient.
      int64_t q = x / y;
      if (q * y != x && ((x < 0) != (y < 0))) --q;
      return q;
    }
    case ExprKind::kMod: {
      if (y == 0 || (x == INT64_MIN && y == -1)) return std::nullopt;
      int64_t q = x / y;
      if (q * y != x && ((x < 0) != (y < 0))) --q;
      return x - q * y;
    }
    case ExprKind::kMin:
      return x < y ? x : y;
    case ExprKind::kMax:
      return x < y ? y : x;
    case ExprKind::kEQ:
      return x == y;
    case ExprKind::kNE:
      return x != y;
    case ExprKind::kLT:
      return x < y;
    case ExprKind::kLE:
      return x <= y;
    case ExprKind::kGT:
      return x > y;
    case ExprKind::kGE:
      return x >= y;
    case ExprKind::kAnd:
      return x && y;
    case ExprKind::kOr:
      return x || y;
    default:
      break;
  }
  ADD_FAILURE() << "unexpected node in " << e;
  return std::nullopt;
}

int64_t Size(const Expr& e) {
  if (IsBinaryKind(e.kind())) {
    auto [a, b] = BinaryOperands(e);
    return 1 + Size(a) + Size(b);
  }
  if (const auto* n = e.as<NotNode>()) return 1 + Size(n->a);
  if (const auto* s = e.as<SelectNode>()) {
    return 1 + Size(s->cond) + Size(s->true_value) + Size(s->false_value);
  }
  return 1;
}

const char* const kVars[] = {"x", "y", "z", "w"};

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  Expr Leaf() {
    if (!vars_.empty() && Chance(0.6)) {
      return MakeVar(vars_[Uniform(0, static_cast<int64_t>(vars_.size()) - 1)]);
    }
    return IntConst(Uniform(-10, 10));
  }

  // Variables leaves are drawn from; whether divisors may be zero or non-constant.
  void set_vars(std::vector<std::string> vars) { vars_ = std::move(vars); }
  void set_safe_division(bool safe) { safe_division_ = safe; }

  Expr SmallDivisor() {
    if (!safe_division_ && Chance(0.03)) return IntConst(0);
    int64_t c = Uniform(1, 8);
    if (Chance(0.2)) c = -c;
    return IntConst(c);
  }

  Expr Int(int depth) {
    if (depth == 0 || Chance(0.2)) return Leaf();
    switch (Uniform(0, 13)) {
      case 0:
        return Int(depth - 1) + Int(depth - 1);
      case 1:
        return Int(depth - 1) - Int(depth - 1);
      case 2:
        return Int(depth - 1) * (Chance(0.7) ? IntConst(Uniform(-6, 6)) : Int(depth - 1));
      case 3:
        return Int(depth - 1) / (Chance(0.8) || safe_division_ ? SmallDivisor() : Int(depth - 1));
      case 4:
        return Int(depth - 1) % (Chance(0.8) || safe_division_ ? SmallDivisor() : Int(depth - 1));
      case 5:
        return Min(Int(depth - 1), Int(depth - 1));
      case 6:
        return Max(Int(depth - 1), Int(depth - 1));
      case 7:
        return Select(Bool(depth - 1), Int(depth - 1), Int(depth - 1));
      case 8: {
        // Split index: (e*c + f) / c or % c.
        Expr c = SmallDivisor();
        Expr n = Int(depth - 1) * c + Int(depth - 1);
        return Chance(0.5) ? n / c : n % c;
      }
      case 9: {
        // Fuse / split round trip: (e/c)*c + e%c, or e - (e/c)*c.
        Expr e = Int(depth - 1);
        Expr c = SmallDivisor();
        if (Chance(0.5)) return (e / c) * c + e % c + (Chance(0.5) ? Leaf() : IntConst(0));
        return e - (e / c) * c;
      }
      case 10: {
        // Nested division and modulo by constants.
        Expr e = Int(depth - 1);
        Expr a = SmallDivisor(), b = SmallDivisor();
        switch (Uniform(0, 3)) {
          case 0:
            return (e / a) / b;
          case 1:
            return (e % a) / b;
          case 2:
            return (e % a) % b;
          default:
            return (e / a + IntConst(Uniform(-5, 5))) / b;
        }
      }
      case 11: {
        Expr c = IntConst(Uniform(-4, 4));
        Expr a = Int(depth - 1), b = Int(depth - 1);
        return Chance(0.5) ? Min(a * c, b * c) : Max(a + c, b + c);
      }
      case 12:
        return Min(Min(Int(depth - 1), Leaf()), Leaf());
      default:
        return Max(Int(depth - 1), Min(Int(depth - 1), Int(depth - 1)));
    }
  }

  Expr Bool(int depth) {
    if (depth == 0 || Chance(0.1)) return BoolConst(Chance(0.5));
    switch (Uniform(0, 9)) {
      case 0:
        return Int(depth - 1) < Int(depth - 1);
      case 1:
        return Int(depth - 1) <= Int(depth - 1);
      case 2:
        return Int(depth - 1) > Int(depth - 1);
      case 3:
        return Int(depth - 1) >= Int(depth - 1);
      case 4:
        return Int(depth - 1) == Int(depth - 1);
      case 5:
        return Int(depth - 1) != Int(depth - 1);
      case 6:
        return Bool(depth - 1) && Bool(depth - 1);
      case 7:
        return Bool(depth - 1) || Bool(depth - 1);
      case 8:
        return !Bool(depth - 1);
      default:
        return Select(Bool(depth - 1), Bool(depth - 1), Bool(depth - 1));
    }
  }

  // Random ranges: most variables bounded (some negative), some unbounded.
  RangeMap Ranges() {
    RangeMap r;
    for (const char* v : kVars) {
      if (Chance(0.8)) {
        int64_t lo = Uniform(-20, 20);
        r[v] = Interval{lo, lo + (Chance(0.1) ? 0 : Uniform(0, 40))};
      }
    }
    return r;
  }

  Env Point(const RangeMap& r) {
    Env env;
    for (const char* v : kVars) {
      auto it = r.find(v);
      env[v] = it == r.end() ? Uniform(-60, 60) : Uniform(it->second.min, it->second.max);
    }
    return env;
  }

 private:
  std::mt19937_64 rng_;
  std::vector<std::string> vars_ = {"x", "y", "z", "w"};
  bool safe_division_ = false;
};

std::string RangesText(const RangeMap& r) {
  std::ostringstream os;
  for (const auto& [name, iv] : r) os << name << " in [" << iv.min << ", " << iv.max << "] ";
  return os.str();
}

TEST(SimplifyFuzzTest, SimplifiedExpressionsEvaluateLikeTheOriginal) {
  Generator gen(20261129);
  constexpr int kExprs = 24000;
  constexpr int kPoints = 24;
  int failures = 0;
  int64_t compared = 0, original_size = 0, simplified_size = 0;
  for (int n = 0; n < kExprs && failures < 5; ++n) {
    RangeMap ranges = gen.Ranges();
    Expr e = (n % 4 == 3) ? gen.Bool(4) : gen.Int(5);
    Expr s = Simplify(e, ranges);
    ASSERT_EQ(s.type(), e.type()) << e;
    original_size += Size(e);
    simplified_size += Size(s);
    for (int p = 0; p < kPoints; ++p) {
      Env env = gen.Point(ranges);
      auto want = Eval(e, env);
      if (!want) continue;  // the original has no value here
      auto got = Eval(s, env);
      ++compared;
      if (!got || *got != *want) {
        std::ostringstream point;
        for (const auto& [name, v] : env) point << name << "=" << v << " ";
        ADD_FAILURE() << "expression " << e << "\nsimplified " << s << "\nranges "
                      << RangesText(ranges) << "\nat " << point.str() << "\noriginal " << *want
                      << ", simplified " << (got ? std::to_string(*got) : std::string("no value"));
        ++failures;
        break;
      }
    }
  }
  // Most points have values, and the simplifier shrinks these expressions on average.
  EXPECT_GT(compared, int64_t{kExprs} * kPoints / 2);
  EXPECT_LT(simplified_size, original_size);
}

TEST(SimplifyFuzzTest, SimplifyingTwiceDoesNotGrow) {
  Generator gen(7);
  int grew = 0, changed = 0;
  constexpr int kExprs = 20000;
  for (int n = 0; n < kExprs; ++n) {
    RangeMap ranges = gen.Ranges();
    Expr e = (n % 4 == 3) ? gen.Bool(4) : gen.Int(5);
    Expr once = Simplify(e, ranges);
    Expr twice = Simplify(once, ranges);
    if (Size(twice) > Size(once)) {
      if (++grew <= 5) ADD_FAILURE() << "grew: " << once << " -> " << twice;
    }
    if (!StructurallyEqual(once, twice)) ++changed;
  }
  // A second pass may still find something (a rule enabled by the first pass's result), but
  // rarely: the first pass reaches a fixed point almost always.
  EXPECT_LE(changed, kExprs / 1000) << changed << " of " << kExprs << " changed on a second pass";
}

// Random loop nests over one int64 output buffer: loops (extents 0..5, several kinds), guards and
// accumulating stores at in-bounds indices. The simplified nest must leave the same buffer in
// the reference interpreter.
class NestGenerator {
 public:
  static constexpr int64_t kSize = 64;

  explicit NestGenerator(uint64_t seed) : gen_(seed) { gen_.set_safe_division(true); }

  Stmt Nest(int depth) {
    std::vector<Stmt> stmts;
    int n = static_cast<int>(gen_.Uniform(1, 2));
    for (int k = 0; k < n; ++k) stmts.push_back(One(depth));
    return SeqNode::Make(std::move(stmts));
  }

 private:
  Stmt One(int depth) {
    gen_.set_vars(scope_);
    int64_t choice = gen_.Uniform(0, 9);
    if (depth > 0 && choice < 5) {
      static constexpr ForKind kKinds[] = {ForKind::kSerial, ForKind::kUnrolled,
                                           ForKind::kVectorized, ForKind::kParallel,
                                           ForKind::kVThread};
      std::string name = "l" + std::to_string(scope_.size());
      Expr min = IntConst(gen_.Uniform(-3, 3));
      Expr extent = IntConst(gen_.Uniform(0, 5));
      if (!scope_.empty() && gen_.Chance(0.2)) min = min + MakeVar(scope_.back());
      ForKind kind = kKinds[gen_.Uniform(0, 4)];
      scope_.push_back(name);
      Stmt body = Nest(depth - 1);
      scope_.pop_back();
      return ForNode::Make(MakeVar(name), min, extent, kind, body);
    }
    if (depth > 0 && choice < 7) {
      Expr cond = gen_.Bool(2);
      Stmt then_case = Nest(depth - 1);
      Stmt else_case = gen_.Chance(0.5) ? Nest(depth - 1) : Stmt();
      return IfThenElseNode::Make(cond, then_case, else_case);
    }
    Expr raw = gen_.Int(3);
    Expr index = ((raw % kSize) + kSize) % kSize;  // in bounds for every value of raw
    Expr value = gen_.Int(2);
    return StoreNode::Make("out", {index},
                           LoadNode::Make(kI64, "out", {index}) + value * (store_count_++ + 1));
  }

  Generator gen_;
  std::vector<std::string> scope_;
  int64_t store_count_ = 0;
};

absl::StatusOr<std::vector<double>> RunNest(const Stmt& body) {
  LoopNest nest;
  nest.name = "fuzz";
  nest.params = {BufferDecl{"out", kI64, {NestGenerator::kSize}, MemoryScope::kGlobal}};
  nest.num_inputs = 0;
  nest.body = body;
  BufferMap buffers;
  buffers["out"] = HostBuffer::Zeros(kI64, {NestGenerator::kSize});
  absl::Status st = Interpret(nest, buffers);
  if (!st.ok()) return st;
  return buffers["out"].data;
}

TEST(SimplifyFuzzTest, SimplifiedLoopNestsComputeTheSameBuffers) {
  NestGenerator gen(99);
  int failures = 0, compared = 0;
  for (int n = 0; n < 1500 && failures < 3; ++n) {
    Stmt s = gen.Nest(3);
    Stmt simplified = Simplify(s);
    auto want = RunNest(s);
    ASSERT_TRUE(want.ok()) << want.status() << "\n" << s;
    auto got = RunNest(simplified);
    ++compared;
    if (!got.ok() || *got != *want) {
      ADD_FAILURE() << "nest\n"
                    << s << "simplified\n"
                    << simplified << (got.ok() ? "different buffer" : got.status().ToString());
      ++failures;
    }
  }
  EXPECT_EQ(compared, 1500);
}

// int32 wraps (two's complement): only constant folding and identities that hold modulo 2^32
// may apply. Values near the wrap-around points are chosen often.
int64_t Wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

std::optional<int64_t> Eval32(const Expr& e, const Env& env) {
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return e.as<IntImmNode>()->value;
    case ExprKind::kVar:
      return env.at(e.as<VarNode>()->name);
    case ExprKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      auto c = Eval32(s->cond, env);
      if (!c) return std::nullopt;
      return Eval32(*c ? s->true_value : s->false_value, env);
    }
    default:
      break;
  }
  auto [ea, eb] = BinaryOperands(e);
  auto a = Eval32(ea, env);
  auto b = Eval32(eb, env);
  if (!a || !b) return std::nullopt;
  int64_t x = *a, y = *b;  // int32 values: sums and products fit in int64
  switch (e.kind()) {
    case ExprKind::kAdd:
      return Wrap32(x + y);
    case ExprKind::kSub:
      return Wrap32(x - y);
    case ExprKind::kMul:
      return Wrap32(x * y);
    case ExprKind::kDiv:
    case ExprKind::kMod: {
      if (y == 0) return std::nullopt;
      int64_t q = x / y;
      if (q * y != x && ((x < 0) != (y < 0))) --q;
      return Wrap32(e.kind() == ExprKind::kDiv ? q : x - q * y);
    }
    case ExprKind::kMin:
      return std::min(x, y);
    case ExprKind::kMax:
      return std::max(x, y);
    case ExprKind::kLT:
      return x < y;
    case ExprKind::kEQ:
      return x == y;
    default:
      break;
  }
  ADD_FAILURE() << "unexpected node in " << e;
  return std::nullopt;
}

TEST(SimplifyFuzzTest, Int32ArithmeticWrapsLikeTheEvaluator) {
  constexpr ScalarType kI32 = ScalarType::kInt32;
  std::mt19937_64 rng(32);
  auto pick = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t kEdges[] = {
      0, 1, -1, 2, -2, 3, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1, 65536, 46341};
  auto value = [&]() -> int64_t {
    if (pick(0, 1)) return kEdges[pick(0, std::size(kEdges) - 1)];
    return pick(INT32_MIN, INT32_MAX);
  };
  std::function<Expr(int)> gen = [&](int depth) -> Expr {
    if (depth == 0 || pick(0, 4) == 0) {
      if (pick(0, 1)) return MakeVar(pick(0, 1) ? "a" : "b", kI32);
      return IntConst(value(), kI32);
    }
    Expr x = gen(depth - 1), y = gen(depth - 1);
    switch (pick(0, 8)) {
      case 0:
        return x + y;
      case 1:
        return x - y;
      case 2:
        return x * y;
      case 3:
        return x / y;
      case 4:
        return x % y;
      case 5:
        return Min(x, y);
      case 6:
        return Max(x, y);
      case 7:
        return Select(x < y, x, y);
      default:
        return Select(x == y, y, x);
    }
  };
  int failures = 0;
  for (int n = 0; n < 4000 && failures < 5; ++n) {
    Expr e = gen(4);
    Expr s = Simplify(e);
    ASSERT_EQ(s.type(), kI32) << e;
    for (int p = 0; p < 8; ++p) {
      Env env{{"a", value()}, {"b", value()}};
      auto want = Eval32(e, env);
      if (!want) continue;
      auto got = Eval32(s, env);
      if (!got || *got != *want) {
        ADD_FAILURE() << "expression " << e << "\nsimplified " << s << "\nat a=" << env["a"]
                      << " b=" << env["b"] << ": original " << *want << ", simplified "
                      << (got ? std::to_string(*got) : std::string("no value"));
        ++failures;
        break;
      }
    }
  }
}

}  // namespace
}  // namespace tilesearch::ir
