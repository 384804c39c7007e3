// Golden text of the printer. Each expected string is written from the printer's rules (binary
// operators parenthesized, `*` and `/` without spaces, min/max/select/casts as calls, int32 with an
// `i32` suffix, float constants shortest-round-trip with f/h/bf suffixes, two-space indentation).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/expr.h"
#include "ir/stmt.h"
#include "ir/type.h"

namespace tilesearch::ir {
namespace {

constexpr ScalarType kF32 = ScalarType::kFloat32;
constexpr ScalarType kF16 = ScalarType::kFloat16;
constexpr ScalarType kBF16 = ScalarType::kBFloat16;
constexpr ScalarType kI32 = ScalarType::kInt32;

TEST(PrinterTest, Expressions) {
  Expr i = MakeVar("i"), j = MakeVar("j");
  Expr x = MakeVar("x", kF32);
  EXPECT_EQ(ToString(i * 4 + j), "((i*4) + j)");
  EXPECT_EQ(ToString(i / 2 - j % 3), "((i/2) - (j % 3))");
  EXPECT_EQ(ToString(IntConst(-3)), "-3");
  EXPECT_EQ(ToString(IntConst(7, kI32)), "7i32");
  EXPECT_EQ(ToString(BoolConst(true)), "true");
  EXPECT_EQ(ToString(!(i < j) || (i >= 0 && j != 1)), "(!(i < j) || ((i >= 0) && (j != 1)))");
  EXPECT_EQ(ToString(Select(x > 0, x, FloatConst(0))), "select((x > 0.0f), x, 0.0f)");
  EXPECT_EQ(ToString(Min(x, FloatConst(1.5))), "min(x, 1.5f)");
  EXPECT_EQ(ToString(Max(i, j)), "max(i, j)");
  EXPECT_EQ(ToString(Cast(kF16, x)), "float16(x)");
  EXPECT_EQ(ToString(Pow(Exp(x), x)), "pow(exp(x), x)");
  EXPECT_EQ(ToString(LoadNode::Make(kF32, "A", {i, j + 1})), "A[i, (j + 1)]");
  EXPECT_EQ(ToString(Expr()), "<undefined>");
}

TEST(PrinterTest, FloatConstantsPrintShortestTextOfTheirType) {
  EXPECT_EQ(ToString(FloatConst(0.1)), "0.1f");
  EXPECT_EQ(ToString(FloatConst(1.0 / 3.0)), "0.33333334f");
  EXPECT_EQ(ToString(FloatConst(-1.5)), "-1.5f");
  EXPECT_EQ(ToString(FloatConst(2)), "2.0f");
  EXPECT_EQ(ToString(FloatConst(16777216)), "16777216.0f");
  EXPECT_EQ(ToString(FloatConst(1e10)), "1e+10f");
  EXPECT_EQ(ToString(FloatConst(1.0 / 3.0, kF16)), "0.3333h");   // 0.333251953125
  EXPECT_EQ(ToString(FloatConst(1.0 / 3.0, kBF16)), "0.334bf");  // 0.333984375
  EXPECT_EQ(ToString(FloatConst(INFINITY)), "inff");
  EXPECT_EQ(ToString(FloatConst(-INFINITY, kF16)), "-infh");
}

// Reads back a printed float constant as the parser of a test would: strip the type suffix, parse
// the decimal, round to the type.
double ParseBack(std::string text, ScalarType t) {
  const char* suffix = t == kF32 ? "f" : t == kF16 ? "h" : "bf";
  size_t n = std::strlen(suffix);
  EXPECT_GE(text.size(), n);
  EXPECT_EQ(text.substr(text.size() - n), suffix);
  text.resize(text.size() - n);
  return RoundToType(std::strtod(text.c_str(), nullptr), t);
}

TEST(PrinterTest, FloatConstantsRoundTrip) {
  for (double v : {0.1, 1e-7, 3.4028234663852886e38, 1.401298464324817e-45, -2.5e-3, 123456.789}) {
    Expr c = FloatConst(v);
    double stored = c.as<FloatImmNode>()->value;
    EXPECT_EQ(ParseBack(ToString(c), kF32), stored) << ToString(c);
  }
  // Random float32 bit patterns (finite ones), and the same values stored as float16 / bfloat16.
  std::mt19937 rng(1234);
  for (int n = 0; n < 2000; ++n) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    if (!std::isfinite(f)) continue;
    for (ScalarType t : {kF32, kF16, kBF16}) {
      Expr c = FloatConst(f, t);
      double stored = c.as<FloatImmNode>()->value;
      if (!std::isfinite(stored)) continue;
      ASSERT_EQ(ParseBack(ToString(c), t), stored) << ToString(c) << " for " << TypeName(t);
    }
  }
}

TEST(PrinterTest, LoopNestGolden) {
  Expr bx = MakeVar("bx"), tx = MakeVar("tx"), k = MakeVar("k"), v = MakeVar("v");
  Expr shared0 = LoadNode::Make(kF32, "S", {IntConst(0)});
  Stmt fill = ForNode::Make(
      k, IntConst(0), IntConst(4), ForKind::kUnrolled,
      StoreNode::Make("S", {tx * 4 + k}, LoadNode::Make(kF32, "A", {bx * 2 + tx, k})));
  Stmt then_case = StoreNode::Make(
      "C", {bx * 2},
      Select(shared0 > FloatConst(0.1), Cast(kF32, IntConst(5, kI32)), FloatConst(-1.5)));
  Stmt else_case =
      ForNode::Make(v, IntConst(2), IntConst(2), ForKind::kVectorized,
                    StoreNode::Make("C", {v}, Max(LoadNode::Make(kF32, "S", {v}), FloatConst(0))));
  Stmt body = SeqNode::Make(
      {fill, BarrierNode::Make(), IfThenElseNode::Make(tx == 0, then_case, else_case)});
  BufferDecl shared{"S", kF32, {8}, MemoryScope::kShared};
  Stmt nest = ForNode::Make(bx, IntConst(0), IntConst(2), ForKind::kBlockIdxX,
                            ForNode::Make(tx, IntConst(0), IntConst(2), ForKind::kThreadIdxX,
                                          AllocateNode::Make(shared, body)));
  LoopNest kernel;
  kernel.name = "demo";
  kernel.params = {BufferDecl{"A", kF32, {4, 8}, MemoryScope::kGlobal},
                   BufferDecl{"C", kF32, {4}, MemoryScope::kGlobal}};
  kernel.num_inputs = 1;
  kernel.body = nest;

  const std::string expected =
      "kernel demo(in A: float32[4, 8] global, out C: float32[4] global) {\n"
      "  for bx in [0, 2) blockIdx.x {\n"
      "    for tx in [0, 2) threadIdx.x {\n"
      "      allocate S: float32[8] shared\n"
      "      for k in [0, 4) unroll {\n"
      "        S[((tx*4) + k)] = A[((bx*2) + tx), k]\n"
      "      }\n"
      "      barrier\n"
      "      if (tx == 0) {\n"
      "        C[(bx*2)] = select((S[0] > 0.1f), float32(5i32), -1.5f)\n"
      "      } else {\n"
      "        for v in [2, 2 + 2) vectorize {\n"
      "          C[v] = max(S[v], 0.0f)\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(ToString(kernel), expected);
}

TEST(PrinterTest, StatementsWithoutKernel) {
  Stmt s = SeqNode::Make({EvaluateNode::Make(MakeVar("x", kF32) + 1),
                          IfThenElseNode::Make(BoolConst(false), BarrierNode::Make())});
  EXPECT_EQ(ToString(s), "(x + 1.0f)\nif false {\n  barrier\n}\n");
}

}  // namespace
}  // namespace tilesearch::ir
