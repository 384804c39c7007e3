// Limits that keep shape, window and byte arithmetic away from int64 overflow: rank ≤ 32 and
// ≤ 2^40 elements per tensor and per reduction domain, integer attributes within ±(2^31 − 1),
// overflow-safe window extents and buffer element counts; identifier names for placeholders; and a
// body that indexes a tensor with the wrong number of indices reported as a Status.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "ir/ops/conv.h"
#include "ir/ops/linear.h"
#include "ir/ops/pool.h"
#include "ir/ops/registry.h"
#include "ir/stmt.h"
#include "ir/tensor.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

TEST(ShapeLimits, RankAbove32IsRejected) {
  EXPECT_THAT(Placeholder("X", std::vector<int64_t>(2000, 1)).status(),
              StatusIs(kInvalid, HasSubstr("rank 2000 of tensor 'X' exceeds the maximum 32")));
  EXPECT_THAT(Placeholder("X", std::vector<int64_t>(64, 2)).status(),
              StatusIs(kInvalid, HasSubstr("exceeds the maximum 32")));
  EXPECT_THAT(Compute("C", std::vector<int64_t>(33, 1),
                      [](const std::vector<Expr>&) { return FloatConst(1.0); })
                  .status(),
              StatusIs(kInvalid, HasSubstr("rank 33 of tensor 'C'")));
}

TEST(ShapeLimits, Rank32OfTwosHasPositiveCounts) {
  absl::StatusOr<Tensor> x = Placeholder("X", std::vector<int64_t>(32, 2));
  ASSERT_THAT(x.status(), IsOk());
  EXPECT_EQ(x->NumElements(), int64_t{1} << 32);
  absl::StatusOr<Tensor> y =
      Compute("Y", x->shape(), [&](const std::vector<Expr>& i) { return (*x)(i) + 1.0; });
  ASSERT_THAT(y.status(), IsOk());
  absl::StatusOr<ComputeDAG> dag = ComputeDAG::Create({*y});
  ASSERT_THAT(dag.status(), IsOk());
  EXPECT_EQ(dag->InputBytes(), (int64_t{1} << 32) * 4);
}

TEST(ShapeLimits, MoreThan2To40ElementsIsRejectedWithoutOverflow) {
  EXPECT_THAT(Placeholder("X", {int64_t{1} << 20, int64_t{1} << 20}).status(), IsOk());
  EXPECT_THAT(Placeholder("X", {int64_t{1} << 21, int64_t{1} << 21}).status(),
              StatusIs(kInvalid, HasSubstr("tensor 'X' has more than")));
  // 2^32 · 2^32 wraps to 0 in int64; it must still be rejected.
  EXPECT_THAT(Placeholder("X", {int64_t{1} << 32, int64_t{1} << 32}).status(),
              StatusIs(kInvalid, HasSubstr("more than 1099511627776 (2^40) elements")));
  EXPECT_THAT(Placeholder("X", {kInt64Max, kInt64Max, 2}).status(),
              StatusIs(kInvalid, HasSubstr("elements")));
}

TEST(ShapeLimits, ReduceDomainAbove2To40IsRejected) {
  absl::StatusOr<Tensor> a = Placeholder("A", {int64_t{1} << 21});
  ASSERT_THAT(a.status(), IsOk());
  auto body = [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
    return (*a)(r[0]) * (*a)(i[0]);
  };
  EXPECT_THAT(Reduce("R", {int64_t{1} << 21}, ReduceKind::kSum, {int64_t{1} << 21}, body).status(),
              StatusIs(kInvalid, HasSubstr("iteration domain of tensor 'R' has more than")));
  EXPECT_THAT(Reduce("R", {4}, ReduceKind::kSum, {4}, body).status(), IsOk());
}

TEST(ShapeLimits, HugeOperatorShapesAreErrors) {
  EXPECT_THAT(
      MatmulDAG({99999999999, 99999999999}, {99999999999, 99999999999}, ScalarType::kFloat32)
          .status(),
      StatusIs(kInvalid, HasSubstr("elements")));
  OpArgs args;
  args.shapes = {{4294967296, 4294967296}};
  EXPECT_THAT(BuildOp("reduce_mean", args).status(), StatusIs(kInvalid, HasSubstr("elements")));
}

TEST(AttributeLimits, IntegerAttributesOutside31BitsAreRejected) {
  OpArgs args;
  args.shapes = {{1, 3, 8, 8}, {4, 3, 3, 3}};
  args.attrs = {{"dilation", "9223372036854775807"}};
  EXPECT_THAT(BuildOp("conv2d_nchw", args).status(),
              StatusIs(kInvalid, HasSubstr("attribute 'dilation' of conv2d_nchw: "
                                           "9223372036854775807 is out of range")));
  args.attrs = {{"stride", "1,-2147483648"}};
  EXPECT_THAT(BuildOp("conv2d_nchw", args).status(), StatusIs(kInvalid, HasSubstr("out of range")));
  args.attrs = {{"padding", "2147483647"}};
  // In range as an attribute; the window check then sees a huge padding but no overflow.
  EXPECT_THAT(BuildOp("conv2d_nchw", args).status(), StatusIs(kInvalid, HasSubstr("elements")));
  OpArgs conv1d;
  conv1d.shapes = {{1, 3, 8}, {4, 3, 3}};
  conv1d.attrs = {{"stride", "4294967296"}};
  EXPECT_THAT(BuildOp("conv1d", conv1d).status(), StatusIs(kInvalid, HasSubstr("out of range")));
}

TEST(WindowLimits, HugeDilationIsAnErrorNotAnOverflow) {
  Conv2dParams p;
  p.dilation = {kInt64Max, 1};
  EXPECT_THAT(Conv2dNchwDAG({1, 3, 8, 8}, {4, 3, 3, 3}, ScalarType::kFloat32, p).status(),
              StatusIs(kInvalid, HasSubstr("dilation 9223372036854775807 exceeds the maximum")));
  p.dilation = {(int64_t{1} << 31) - 1, 1};
  EXPECT_THAT(Conv2dNchwDAG({1, 3, 8, 8}, {4, 3, 3, 3}, ScalarType::kFloat32, p).status(),
              StatusIs(kInvalid, HasSubstr("is larger than the padded input height 8")));
  // kernel 2^35 with dilation 2^31 − 1: dilation·(kernel − 1) would be ~2^66.
  Pool2dParams pool;
  pool.kernel = {int64_t{1} << 35, 1};
  pool.stride = std::array<int64_t, 2>{1, 1};
  pool.dilation = {(int64_t{1} << 31) - 1, 1};
  EXPECT_THAT(MaxPool2dDAG({1, 1, 8, 8}, ScalarType::kFloat32, pool).status(),
              StatusIs(kInvalid, HasSubstr("is larger than the padded input height 8")));
  pool.kernel = {kInt64Max, 1};
  EXPECT_THAT(MaxPool2dDAG({1, 1, 8, 8}, ScalarType::kFloat32, pool).status(),
              StatusIs(kInvalid, HasSubstr("is outside [1, 1099511627776]")));
}

TEST(BufferLimits, ElementCountDoesNotWrap) {
  HostBuffer b;
  b.shape = {int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_EQ(b.NumElements(), -1);
  b.shape = {3, 5};
  EXPECT_EQ(b.NumElements(), 15);
}

TEST(BufferLimits, InterpreterRejectsAWrappingParameterShape) {
  // A parameter of shape [2^32, 2^32] with an empty caller buffer: a wrapping count would be 0.
  LoopNest nest;
  nest.name = "huge";
  nest.params = {BufferDecl{"A", ScalarType::kFloat32, {int64_t{1} << 32, int64_t{1} << 32}}};
  nest.num_inputs = 1;
  BufferMap buffers;
  HostBuffer a;
  a.dtype = ScalarType::kFloat32;
  a.shape = {int64_t{1} << 32, int64_t{1} << 32};
  buffers["A"] = a;
  EXPECT_THAT(Interpret(nest, buffers), StatusIs(kInvalid, HasSubstr("more than 2^40 elements")));
}

TEST(PlaceholderNames, MustBeIdentifiers) {
  for (const char* bad : {"1x", "a b", "a-b", "x[0]", ".x"}) {
    EXPECT_THAT(Placeholder(bad, {2}).status(),
                StatusIs(kInvalid, HasSubstr("is not an identifier")))
        << bad;
  }
  for (const char* good : {"x", "_x1", "conv.w", "A_b.c9"}) {
    EXPECT_THAT(Placeholder(good, {2}).status(), IsOk()) << good;
  }
}

TEST(BodyIndexCount, WrongNumberOfIndicesIsAStatusFromCompute) {
  absl::StatusOr<Tensor> a = Placeholder("A", {4});
  ASSERT_THAT(a.status(), IsOk());
  // Through the public operator(): two indices into a rank-1 tensor.
  absl::StatusOr<Tensor> c =
      Compute("C", {4}, [&](const std::vector<Expr>& i) { return (*a)(i[0], i[0]); });
  EXPECT_THAT(c.status(),
              StatusIs(kInvalid, HasSubstr("indexes tensor 'A' with 2 indices; it has 1")));
}

TEST(ReduceKindValues, UnknownKindIsInvalidArgument) {
  absl::StatusOr<Tensor> a = Placeholder("A", {4});
  ASSERT_THAT(a.status(), IsOk());
  EXPECT_THAT(
      Reduce("R", {1}, static_cast<ReduceKind>(42), {4},
             [&](const std::vector<Expr>&, const std::vector<Expr>& r) { return (*a)(r[0]); })
          .status(),
      StatusIs(kInvalid, HasSubstr("unknown kind 42")));
}

}  // namespace
}  // namespace tilesearch::ir
