#include "ir/tensor.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
using Axes = std::vector<Expr>;

TEST(PlaceholderTest, KeepsNameShapeAndType) {
  auto a = Placeholder("A", {4, 8}, ScalarType::kFloat16);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->name(), "A");
  EXPECT_THAT(a->shape(), ElementsAre(4, 8));
  EXPECT_EQ(a->dtype(), ScalarType::kFloat16);
  EXPECT_EQ(a->ndim(), 2);
  EXPECT_EQ(a->NumElements(), 32);
  EXPECT_TRUE((*a)->is_placeholder);
  EXPECT_FALSE((*a)->body.defined());
}

TEST(PlaceholderTest, RejectsNonPositiveExtents) {
  EXPECT_THAT(Placeholder("A", {4, 0}),
              StatusIs(kInvalid, HasSubstr("extent 0 of dimension 1 of tensor 'A'")));
  EXPECT_THAT(Placeholder("B", {-3}),
              StatusIs(kInvalid, HasSubstr("extent -3 of dimension 0 of tensor 'B'")));
}

TEST(PlaceholderTest, RejectsEmptyName) {
  EXPECT_THAT(Placeholder("", {4}), StatusIs(kInvalid, HasSubstr("without a name")));
}

TEST(TensorTest, CallMakesLoadPointingAtProducer) {
  Tensor a = *Placeholder("A", {4, 8});
  Expr load = a(MakeVar("i"), 3);
  const auto* l = load.as<LoadNode>();
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->buffer, "A");
  EXPECT_EQ(l->producer.get(), a.node().get());
  EXPECT_EQ(load.type(), ScalarType::kFloat32);
  EXPECT_EQ(AsConstInt(l->indices[1]), 3);
}

TEST(ComputeTest, BodyIndexingWithWrongRankIsAnError) {
  // operator() builds the Load; Compute's body check reports the wrong index count.
  Tensor a = *Placeholder("A", {4, 8});
  EXPECT_THAT(Compute("C", {4}, [&](const std::vector<Expr>& i) { return a(i[0]); }).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("indexes tensor 'A' with 1 indices; it has 2 dimensions")));
}

TEST(ComputeTest, BuildsAxesBodyAndType) {
  Tensor a = *Placeholder("A", {4, 8});
  ComputeOptions options;
  options.axis_names = {"x", "y"};
  options.tag = "transpose";
  auto t = Compute(
      "T", {8, 4}, [&](const Axes& ax) { return Cast(ScalarType::kFloat16, a(ax[1], ax[0])); },
      options);
  ASSERT_THAT(t, IsOk());
  const TensorNode& n = *t->node();
  EXPECT_FALSE(n.is_placeholder);
  ASSERT_EQ(n.axes.size(), 2u);
  EXPECT_EQ(n.axes[0].name, "x");
  EXPECT_EQ(n.axes[0].extent, 8);
  EXPECT_EQ(n.axes[1].name, "y");
  EXPECT_EQ(n.axes[1].extent, 4);
  EXPECT_EQ(n.dtype, ScalarType::kFloat16);
  EXPECT_EQ(n.reduce, ReduceKind::kNone);
  EXPECT_TRUE(n.reduce_axes.empty());
  EXPECT_EQ(n.tag, "transpose");
  Expr expected = Cast(ScalarType::kFloat16, a(MakeVar("y"), MakeVar("x")));
  EXPECT_TRUE(StructurallyEqual(n.body, expected)) << n.body;
}

TEST(ComputeTest, DefaultAxisNames) {
  auto t =
      Compute("Z", {2, 3, 4}, [](const Axes& ax) { return Cast(ScalarType::kFloat32, ax[2]); });
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ((*t)->axes[0].name, "i0");
  EXPECT_EQ((*t)->axes[2].name, "i2");
}

TEST(ComputeTest, RejectsNonPositiveExtent) {
  auto fn = [](const Axes&) { return FloatConst(0); };
  EXPECT_THAT(Compute("C", {3, 0}, fn),
              StatusIs(kInvalid, HasSubstr("extent 0 of dimension 1 of tensor 'C'")));
  EXPECT_THAT(Compute("C", {-1}, fn), StatusIs(kInvalid, HasSubstr("extent -1")));
}

TEST(ComputeTest, RejectsWrongNumberOfAxisNames) {
  ComputeOptions options;
  options.axis_names = {"i"};
  EXPECT_THAT(Compute(
                  "C", {3, 4}, [](const Axes&) { return FloatConst(0); }, options),
              StatusIs(kInvalid, HasSubstr("tensor 'C' has 2 i axes but 1 axis names")));
}

TEST(ComputeTest, RejectsDuplicateAxisNames) {
  ComputeOptions options;
  options.axis_names = {"i", "i"};
  EXPECT_THAT(Compute(
                  "C", {3, 4}, [](const Axes&) { return FloatConst(0); }, options),
              StatusIs(kInvalid, HasSubstr("tensor 'C' has two axes named 'i'")));
}

TEST(ComputeTest, RejectsUnknownVariable) {
  Tensor a = *Placeholder("A", {4});
  auto t = Compute("C", {4}, [&](const Axes& ax) {
    return a(ax[0]) + Cast(ScalarType::kFloat32, MakeVar("n"));
  });
  EXPECT_THAT(t, StatusIs(kInvalid, HasSubstr("tensor 'C' uses variable 'n'")));
}

TEST(ComputeTest, RejectsLoadWithWrongRank) {
  // Tensor::operator() CHECKs the rank, so build the Load by hand as a careless caller could.
  Tensor a = *Placeholder("A", {4, 4});
  auto t = Compute("C", {4}, [&](const Axes& ax) {
    return LoadNode::Make(ScalarType::kFloat32, "A", {ax[0]}, a.node());
  });
  EXPECT_THAT(t, StatusIs(kInvalid, HasSubstr("indexes tensor 'A' with 1 indices; it has 2")));
}

TEST(ComputeTest, RejectsLoadOfNonTensor) {
  auto t = Compute("C", {4}, [&](const Axes& ax) {
    return LoadNode::Make(ScalarType::kFloat32, "buf", {ax[0]});
  });
  EXPECT_THAT(t, StatusIs(kInvalid, HasSubstr("reads buffer 'buf' that is not a tensor")));
}

TEST(ComputeTest, RejectsUndefinedBody) {
  EXPECT_THAT(Compute("C", {4}, [](const Axes&) { return Expr(); }),
              StatusIs(kInvalid, HasSubstr("tensor 'C' has no body")));
}

// ----- reductions -----

ReduceFn RowSum(const Tensor& a) {
  return [a](const Axes& ax, const Axes& r) { return a(ax[0], r[0]); };
}

TEST(ReduceTest, SumDefaultsInitToZero) {
  Tensor a = *Placeholder("A", {4, 16});
  ComputeOptions options;
  options.axis_names = {"i"};
  options.reduce_axis_names = {"k"};
  auto s = Reduce("S", {4}, ReduceKind::kSum, {16}, RowSum(a), Expr(), options);
  ASSERT_THAT(s, IsOk());
  const TensorNode& n = *s->node();
  EXPECT_EQ(n.reduce, ReduceKind::kSum);
  ASSERT_EQ(n.reduce_axes.size(), 1u);
  EXPECT_EQ(n.reduce_axes[0].name, "k");
  EXPECT_EQ(n.reduce_axes[0].extent, 16);
  EXPECT_TRUE(StructurallyEqual(n.body, a(MakeVar("i"), MakeVar("k"))));
  ASSERT_NE(n.init.as<FloatImmNode>(), nullptr);
  EXPECT_EQ(n.init.as<FloatImmNode>()->value, 0.0);
}

TEST(ReduceTest, IdentitiesOfEachKind) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(*AsConstNumber(ReduceIdentity(ReduceKind::kSum, ScalarType::kFloat32)), 0.0);
  EXPECT_EQ(*AsConstNumber(ReduceIdentity(ReduceKind::kProd, ScalarType::kFloat32)), 1.0);
  EXPECT_EQ(*AsConstNumber(ReduceIdentity(ReduceKind::kMax, ScalarType::kFloat16)), -kInf);
  EXPECT_EQ(*AsConstNumber(ReduceIdentity(ReduceKind::kMin, ScalarType::kFloat32)), kInf);
  EXPECT_EQ(*AsConstInt(ReduceIdentity(ReduceKind::kMax, ScalarType::kInt32)),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(*AsConstInt(ReduceIdentity(ReduceKind::kMin, ScalarType::kInt64)),
            std::numeric_limits<int64_t>::max());
}

TEST(ReduceTest, CombineBuildsTheRightNode) {
  Expr acc = MakeVar("acc", ScalarType::kFloat32), x = MakeVar("x", ScalarType::kFloat32);
  EXPECT_EQ(ReduceCombine(ReduceKind::kSum, acc, x).kind(), ExprKind::kAdd);
  EXPECT_EQ(ReduceCombine(ReduceKind::kProd, acc, x).kind(), ExprKind::kMul);
  EXPECT_EQ(ReduceCombine(ReduceKind::kMax, acc, x).kind(), ExprKind::kMax);
  EXPECT_EQ(ReduceCombine(ReduceKind::kMin, acc, x).kind(), ExprKind::kMin);
}

TEST(ReduceTest, ExplicitInitMayUseOutputAxes) {
  Tensor a = *Placeholder("A", {4, 16});
  Tensor bias = *Placeholder("bias", {4});
  auto s = Reduce("S", {4}, ReduceKind::kSum, {16}, RowSum(a), bias(MakeVar("i0")));
  ASSERT_THAT(s, IsOk());
  EXPECT_TRUE(StructurallyEqual((*s)->init, bias(MakeVar("i0"))));
}

TEST(ReduceTest, RejectsKindNone) {
  Tensor a = *Placeholder("A", {4, 16});
  EXPECT_THAT(Reduce("S", {4}, ReduceKind::kNone, {16}, RowSum(a)),
              StatusIs(kInvalid, HasSubstr("reduce stage 'S' has kind none")));
}

TEST(ReduceTest, RejectsNoReduceAxes) {
  Tensor a = *Placeholder("A", {4, 16});
  EXPECT_THAT(Reduce("S", {4}, ReduceKind::kSum, {},
                     [&](const Axes& ax, const Axes&) { return a(ax[0], 0); }),
              StatusIs(kInvalid, HasSubstr("reduce stage 'S' has no reduce axes")));
}

TEST(ReduceTest, RejectsNonPositiveReduceExtent) {
  Tensor a = *Placeholder("A", {4, 16});
  EXPECT_THAT(Reduce("S", {4}, ReduceKind::kSum, {0}, RowSum(a)),
              StatusIs(kInvalid, HasSubstr("reduce extent 0 of dimension 0 of tensor 'S'")));
}

TEST(ReduceTest, RejectsInitTypeMismatch) {
  Tensor a = *Placeholder("A", {4, 16});
  EXPECT_THAT(
      Reduce("S", {4}, ReduceKind::kSum, {16}, RowSum(a), IntConst(0)),
      StatusIs(kInvalid, HasSubstr("init of reduce stage 'S' is int64 but its body is float32")));
}

TEST(ReduceTest, RejectsInitUsingReduceAxis) {
  Tensor a = *Placeholder("A", {4, 16});
  EXPECT_THAT(Reduce("S", {4}, ReduceKind::kSum, {16}, RowSum(a), a(MakeVar("i0"), MakeVar("r0"))),
              StatusIs(kInvalid, HasSubstr("uses variable 'r0'")));
}

TEST(ReduceTest, RejectsAxisNameSharedByOutputAndReduceAxes) {
  Tensor a = *Placeholder("A", {4, 16});
  ComputeOptions options;
  options.axis_names = {"i"};
  options.reduce_axis_names = {"i"};
  EXPECT_THAT(Reduce("S", {4}, ReduceKind::kSum, {16}, RowSum(a), Expr(), options),
              StatusIs(kInvalid, HasSubstr("two axes named 'i'")));
}

TEST(ReduceTest, RejectsBoolBody) {
  Tensor a = *Placeholder("A", {4, 16});
  EXPECT_THAT(Reduce("S", {4}, ReduceKind::kMax, {16},
                     [&](const Axes& ax, const Axes& r) { return a(ax[0], r[0]) > 0; }),
              StatusIs(kInvalid, HasSubstr("combines bool values")));
}

}  // namespace
}  // namespace tilesearch::ir
