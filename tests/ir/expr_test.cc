#include "ir/expr.h"

#include <cmath>
#include <limits>
#include <string>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/type.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr ScalarType kF32 = ScalarType::kFloat32;
constexpr ScalarType kF16 = ScalarType::kFloat16;
constexpr ScalarType kBF16 = ScalarType::kBFloat16;
constexpr ScalarType kI32 = ScalarType::kInt32;
constexpr ScalarType kI64 = ScalarType::kInt64;
constexpr ScalarType kBool = ScalarType::kBool;

// ----- builders and promotion -----

TEST(ExprBuilderTest, AddingIntLiteralToFloatVarMakesFloatConstant) {
  Expr x = MakeVar("x", kF32);
  Expr e = x + 1;
  const auto* add = e.as<AddNode>();
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(e.type(), kF32);
  EXPECT_TRUE(add->a.same_as(x));
  const auto* c = add->b.as<FloatImmNode>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type, kF32);
  EXPECT_EQ(c->value, 1.0);
}

TEST(ExprBuilderTest, LiteralOnTheLeftTakesTheExprType) {
  Expr x = MakeVar("x", kF16);
  Expr e = 2.5 * x;
  const auto* mul = e.as<MulNode>();
  ASSERT_NE(mul, nullptr);
  const auto* c = mul->a.as<FloatImmNode>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type, kF16);
  EXPECT_EQ(c->value, 2.5);
}

TEST(ExprBuilderTest, IndexArithmeticStaysInt64) {
  Expr i = MakeVar("i");
  Expr e = i * 4 + 3;
  EXPECT_EQ(e.type(), kI64);
  const auto* add = e.as<AddNode>();
  ASSERT_NE(add, nullptr);
  ASSERT_NE(add->b.as<IntImmNode>(), nullptr);
  EXPECT_EQ(add->b.as<IntImmNode>()->value, 3);
  EXPECT_EQ(add->b.type(), kI64);
}

TEST(ExprBuilderTest, ConstantExprOperandIsPromotedToOtherSide) {
  Expr x = MakeVar("x", kF32);
  Expr e = IntConst(2) * x;  // int64 constant meets a float32 variable
  const auto* mul = e.as<MulNode>();
  ASSERT_NE(mul, nullptr);
  ASSERT_NE(mul->a.as<FloatImmNode>(), nullptr);
  EXPECT_EQ(mul->a.type(), kF32);
  EXPECT_EQ(mul->a.as<FloatImmNode>()->value, 2.0);

  Expr m = Max(x, IntConst(0));
  ASSERT_NE(m.as<MaxNode>(), nullptr);
  EXPECT_EQ(m.as<MaxNode>()->b.type(), kF32);
}

TEST(ExprBuilderTest, ComparisonsProduceBool) {
  Expr x = MakeVar("x", kF32);
  EXPECT_EQ((x > 0).type(), kBool);
  EXPECT_EQ((x == 1).type(), kBool);
  EXPECT_EQ((MakeVar("i") != IntConst(3)).type(), kBool);
  Expr ne = MakeVar("i") != 3;  // a literal on the right, as for ==
  EXPECT_EQ(ne.kind(), ExprKind::kNE);
  EXPECT_EQ(AsConstInt(ne.as<NENode>()->b), 3);
  Expr both = (x > 0) && (x < 1);
  EXPECT_EQ(both.kind(), ExprKind::kAnd);
  EXPECT_EQ((!both).type(), kBool);
}

TEST(ExprBuilderTest, SelectPromotesConstantBranch) {
  Expr x = MakeVar("x", kBF16);
  Expr s = Select(x > 0, x, IntConst(0));
  EXPECT_EQ(s.type(), kBF16);
  ASSERT_NE(s.as<SelectNode>(), nullptr);
  EXPECT_NE(s.as<SelectNode>()->false_value.as<FloatImmNode>(), nullptr);
}

TEST(ExprBuilderTest, CastToSameTypeIsIdentity) {
  Expr x = MakeVar("x", kF32);
  EXPECT_TRUE(Cast(kF32, x).same_as(x));
  Expr c = Cast(kI32, x);
  EXPECT_EQ(c.kind(), ExprKind::kCast);
  EXPECT_EQ(c.type(), kI32);
}

TEST(ExprBuilderTest, MathCallsKeepArgumentType) {
  Expr x = MakeVar("x", kF16);
  EXPECT_EQ(Exp(x).type(), kF16);
  EXPECT_EQ(Pow(x, FloatConst(2, kF16)).as<CallNode>()->args.size(), 2u);
  EXPECT_EQ(Abs(MakeVar("n", kI32)).type(), kI32);
  EXPECT_EQ(Exp(x).as<CallNode>()->op, CallOp::kExp);
}

TEST(ExprBuilderTest, BinaryHelpersRoundTrip) {
  Expr a = MakeVar("a"), b = MakeVar("b");
  Expr e = MakeBinary(ExprKind::kMod, a, b);
  EXPECT_EQ(e.kind(), ExprKind::kMod);
  EXPECT_TRUE(IsBinaryKind(ExprKind::kOr));
  EXPECT_FALSE(IsBinaryKind(ExprKind::kSelect));
  auto [x, y] = BinaryOperands(e);
  EXPECT_TRUE(x.same_as(a));
  EXPECT_TRUE(y.same_as(b));
}

TEST(ExprBuilderTest, AsConstHelpers) {
  EXPECT_EQ(AsConstInt(IntConst(7)), 7);
  EXPECT_EQ(AsConstInt(FloatConst(7)), std::nullopt);
  EXPECT_EQ(AsConstNumber(FloatConst(0.5)), 0.5);
  EXPECT_EQ(AsConstNumber(MakeVar("v")), std::nullopt);
}

// ----- type checks (CHECK deaths: internal invariants) -----

TEST(ExprDeathTest, MismatchedOperandTypesAbort) {
  Expr f = MakeVar("x", kF32);
  Expr i = MakeVar("i", kI64);
  EXPECT_DEATH(AddNode::Make(f, i), "mismatched types float32 and int64");
  EXPECT_DEATH(f + i, "mismatched types");
  EXPECT_DEATH(MakeVar("h", kF16) * f, "mismatched types float16 and float32");
}

TEST(ExprDeathTest, LogicOnNonBoolAborts) {
  Expr i = MakeVar("i");
  EXPECT_DEATH(AndNode::Make(i, i), "non-bool");
  EXPECT_DEATH(NotNode::Make(i), "non-bool");
}

TEST(ExprDeathTest, ArithmeticOnBoolAborts) {
  Expr b = BoolConst(true);
  EXPECT_DEATH(AddNode::Make(b, b), "on bool");
}

TEST(ExprDeathTest, SelectNeedsBoolConditionAndOneType) {
  Expr x = MakeVar("x", kF32);
  EXPECT_DEATH(SelectNode::Make(x, x, x), "condition");
  EXPECT_DEATH(SelectNode::Make(x > 0, x, MakeVar("i")), "mismatched types");
}

TEST(ExprDeathTest, FloatCallOnIntAborts) {
  EXPECT_DEATH(Exp(MakeVar("i")), "non-float");
  EXPECT_DEATH(CallNode::Make(CallOp::kPow, {MakeVar("x", kF32)}), "takes 2 arguments");
}

TEST(ExprDeathTest, LoadIndicesMustBeInt64) {
  EXPECT_DEATH(LoadNode::Make(kF32, "A", {MakeVar("i", kI32)}), "not int64");
}

TEST(ExprDeathTest, ImmediateTypesAreChecked) {
  EXPECT_DEATH(IntImmNode::Make(kF32, 1), "IntImm of type float32");
  EXPECT_DEATH(FloatImmNode::Make(kI64, 1), "FloatImm of type int64");
}

// ----- immediates -----

TEST(ExprImmTest, Int32ImmediateWrapsAround) {
  EXPECT_EQ(IntConst(2147483648LL, kI32).as<IntImmNode>()->value, -2147483648LL);
  EXPECT_EQ(IntConst(4294967297LL, kI32).as<IntImmNode>()->value, 1);
  EXPECT_EQ(IntConst(-2147483649LL, kI32).as<IntImmNode>()->value, 2147483647LL);
  EXPECT_EQ(IntConst(4294967297LL, kI64).as<IntImmNode>()->value, 4294967297LL);
}

TEST(ExprImmTest, BoolImmediateIsZeroOrOne) {
  EXPECT_EQ(IntImmNode::Make(kBool, 5).as<IntImmNode>()->value, 1);
  EXPECT_EQ(BoolConst(false).as<IntImmNode>()->value, 0);
}

TEST(ExprImmTest, FloatImmediateIsRoundedToItsType) {
  EXPECT_EQ(FloatConst(0.1).as<FloatImmNode>()->value, static_cast<double>(0.1f));
  EXPECT_EQ(FloatConst(1.0 / 3.0, kF16).as<FloatImmNode>()->value, 0.333251953125);
}

// ----- RoundToType against known values -----

TEST(RoundToTypeTest, Float16KnownValues) {
  EXPECT_EQ(RoundToType(1.0 / 3.0, kF16), 0.333251953125);  // 0x3555
  EXPECT_EQ(RoundToType(65504.0, kF16), 65504.0);           // largest finite
  EXPECT_EQ(RoundToType(65519.0, kF16), 65504.0);
  EXPECT_EQ(RoundToType(65520.0, kF16), std::numeric_limits<double>::infinity());
  EXPECT_EQ(RoundToType(-65520.0, kF16), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(RoundToType(0.1, kF16), 0.0999755859375);  // 0x2E66
  EXPECT_EQ(RoundToType(-2.0, kF16), -2.0);
}

TEST(RoundToTypeTest, Float16TiesGoToEven) {
  // The spacing just above 1 is 2^-10.
  EXPECT_EQ(RoundToType(1.0 + std::ldexp(1.0, -11), kF16), 1.0);
  EXPECT_EQ(RoundToType(1.0 + 3 * std::ldexp(1.0, -11), kF16), 1.0 + std::ldexp(1.0, -9));
  // Just above the tie rounds up; rounding through float32 first would lose the 2^-40.
  EXPECT_EQ(RoundToType(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), kF16),
            1.0 + std::ldexp(1.0, -10));
}

TEST(RoundToTypeTest, Float16Subnormals) {
  const double tiny = std::ldexp(1.0, -24);  // smallest positive subnormal
  EXPECT_EQ(RoundToType(tiny, kF16), tiny);
  EXPECT_EQ(RoundToType(tiny / 2, kF16), 0.0);  // tie to even (zero)
  EXPECT_EQ(RoundToType(tiny * 0.75, kF16), tiny);
  EXPECT_EQ(RoundToType(tiny * 2.5, kF16), tiny * 2);                        // tie to even
  EXPECT_EQ(RoundToType(std::ldexp(1.0, -14), kF16), std::ldexp(1.0, -14));  // smallest normal
}

TEST(RoundToTypeTest, BFloat16KnownValues) {
  EXPECT_EQ(RoundToType(1.00390625, kBF16), 1.0);         // 1 + 2^-8: tie, to even
  EXPECT_EQ(RoundToType(1.01171875, kBF16), 1.015625);    // 1 + 3*2^-8: tie, to even
  EXPECT_EQ(RoundToType(1.0 / 3.0, kBF16), 0.333984375);  // 0x3EAB
  EXPECT_EQ(RoundToType(3.140625, kBF16), 3.140625);      // exactly representable
  EXPECT_EQ(RoundToType(static_cast<double>(std::numeric_limits<float>::max()), kBF16),
            std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(RoundToType(std::nan(""), kBF16)));
}

TEST(RoundToTypeTest, IntegerAndBool) {
  EXPECT_EQ(RoundToType(-7.9, kI32), -7);
  EXPECT_EQ(RoundToType(2147483648.0, kI32), -2147483648.0);
  EXPECT_EQ(RoundToType(1e20, kI32), 1661992960.0);  // 10^20 mod 2^32
  EXPECT_EQ(RoundToType(-7.9, kI64), -7);
  EXPECT_EQ(RoundToType(0.25, kBool), 1);
  EXPECT_EQ(RoundToType(0.0, kBool), 0);
  EXPECT_EQ(RoundToType(0.1, kF32), static_cast<double>(0.1f));
}

// ----- type names -----

TEST(ScalarTypeTest, ParsesNamesAndAliases) {
  EXPECT_EQ(*ParseType("float32"), kF32);
  EXPECT_EQ(*ParseType("fp16"), kF16);
  EXPECT_EQ(*ParseType("BF16"), kBF16);
  EXPECT_EQ(*ParseType("i32"), kI32);
  EXPECT_EQ(*ParseType("int64"), kI64);
  EXPECT_EQ(*ParseType("bool"), kBool);
  for (ScalarType t : {kF32, kF16, kBF16, kI32, kI64, kBool}) {
    auto parsed = ParseType(TypeName(t));
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, t);
  }
}

TEST(ScalarTypeTest, UnknownNameIsAnError) {
  EXPECT_THAT(ParseType("float8"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown dtype 'float8'")));
  EXPECT_THAT(ParseType(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown dtype")));
}

TEST(ScalarTypeTest, BytesOf) {
  EXPECT_EQ(BytesOf(kF32), 4);
  EXPECT_EQ(BytesOf(kF16), 2);
  EXPECT_EQ(BytesOf(kBF16), 2);
  EXPECT_EQ(BytesOf(kI32), 4);
  EXPECT_EQ(BytesOf(kI64), 8);
  EXPECT_EQ(BytesOf(kBool), 1);
}

// ----- structural equality -----

TEST(StructurallyEqualTest, SameShapeBuiltTwiceIsEqual) {
  auto build = [] {
    Expr i = MakeVar("i"), x = MakeVar("x", kF32);
    return Select(x > 0, Exp(x) * 2, Cast(kF32, i % 3)) + LoadNode::Make(kF32, "A", {i + 1});
  };
  Expr a = build(), b = build();
  EXPECT_FALSE(a.same_as(b));
  EXPECT_TRUE(StructurallyEqual(a, b));
}

TEST(StructurallyEqualTest, DifferencesAreDetected) {
  Expr x = MakeVar("x", kF32);
  EXPECT_FALSE(StructurallyEqual(x + 1, x + 2));
  EXPECT_FALSE(StructurallyEqual(x + 1, MakeVar("y", kF32) + 1));
  EXPECT_FALSE(StructurallyEqual(x + 1, x - 1));
  EXPECT_FALSE(StructurallyEqual(FloatConst(1, kF32), FloatConst(1, kF16)));
  EXPECT_FALSE(StructurallyEqual(IntConst(1, kI32), IntConst(1, kI64)));
  EXPECT_FALSE(StructurallyEqual(Exp(x), Log(x)));
  EXPECT_FALSE(StructurallyEqual(LoadNode::Make(kF32, "A", {IntConst(0)}),
                                 LoadNode::Make(kF32, "B", {IntConst(0)})));
  EXPECT_FALSE(StructurallyEqual(Cast(kI32, x), Cast(kI64, x)));
  EXPECT_FALSE(StructurallyEqual(x, Expr()));
  EXPECT_TRUE(StructurallyEqual(Expr(), Expr()));
}

TEST(StructurallyEqualTest, NanConstantsAreEqual) {
  EXPECT_TRUE(StructurallyEqual(FloatConst(std::nan("")), FloatConst(std::nan(""))));
}

// ----- substitution and mutators -----

TEST(SubstituteTest, ReplacesVariablesByName) {
  Expr i = MakeVar("i"), j = MakeVar("j");
  Expr e = i * 4 + j;
  Expr r = Substitute(e, {{"i", MakeVar("io") * 8 + MakeVar("ii")}});
  Expr expected = (MakeVar("io") * 8 + MakeVar("ii")) * 4 + MakeVar("j");
  EXPECT_TRUE(StructurallyEqual(r, expected)) << r;
  // The untouched operand is shared, not copied.
  EXPECT_TRUE(r.as<AddNode>()->b.same_as(j));
}

TEST(SubstituteTest, IsSimultaneous) {
  Expr e = MakeVar("a") - MakeVar("b");
  Expr r = Substitute(e, {{"a", MakeVar("b")}, {"b", MakeVar("a")}});
  EXPECT_TRUE(StructurallyEqual(r, MakeVar("b") - MakeVar("a"))) << r;
}

TEST(SubstituteTest, UnchangedExpressionIsReturnedAsIs) {
  Expr e = LoadNode::Make(kF32, "A", {MakeVar("i") + 1}) * 2;
  EXPECT_TRUE(Substitute(e, {{"k", IntConst(0)}}).same_as(e));
  EXPECT_TRUE(Substitute(e, {}).same_as(e));
}

TEST(SubstituteTest, ReachesIntoLoadIndicesAndKeepsProducer) {
  Expr load = LoadNode::Make(kF32, "A", {MakeVar("i"), MakeVar("j")});
  Expr r = Substitute(load, {{"j", IntConst(5)}});
  const auto* l = r.as<LoadNode>();
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->buffer, "A");
  EXPECT_EQ(AsConstInt(l->indices[1]), 5);
}

class IdentityMutator : public ExprMutator {};

// Replaces int64 constant 1 by 2 and leaves everything else alone.
class OneToTwo : public ExprMutator {
 protected:
  Expr MutateIntImm(const IntImmNode* op, const Expr& e) override {
    return op->value == 1 && op->type == kI64 ? IntConst(2) : e;
  }
};

TEST(ExprMutatorTest, ReturnsSameNodeWhenNothingChanges) {
  Expr x = MakeVar("x", kF32), i = MakeVar("i");
  Expr e = Select(x > 0, Sqrt(x), -x) + Cast(kF32, LoadNode::Make(kI32, "N", {i % 3})) +
           Max(x, FloatConst(0));
  IdentityMutator m;
  EXPECT_TRUE(m.Mutate(e).same_as(e));
}

TEST(ExprMutatorTest, RebuildsOnlyThePathToAChange) {
  Expr left = MakeVar("a") * MakeVar("b");
  Expr right = MakeVar("c") + 1;
  Expr e = left - right;
  OneToTwo m;
  Expr r = m.Mutate(e);
  EXPECT_FALSE(r.same_as(e));
  EXPECT_TRUE(r.as<SubNode>()->a.same_as(left));
  EXPECT_TRUE(StructurallyEqual(r, left - (MakeVar("c") + 2)));
}

TEST(ExprVisitorTest, VisitsEveryNodeOnce) {
  class Counter : public ExprVisitor {
   public:
    int vars = 0, loads = 0;

   protected:
    void VisitVar(const VarNode*, const Expr&) override { ++vars; }
    void VisitLoad(const LoadNode* op, const Expr& e) override {
      ++loads;
      ExprVisitor::VisitLoad(op, e);
    }
  };
  Expr i = MakeVar("i");
  Expr e =
      Select(i > 0, LoadNode::Make(kF32, "A", {i, i + 1}), FloatConst(0)) + Exp(MakeVar("x", kF32));
  Counter c;
  c.Visit(e);
  EXPECT_EQ(c.vars, 4);
  EXPECT_EQ(c.loads, 1);
}

}  // namespace
}  // namespace tilesearch::ir
