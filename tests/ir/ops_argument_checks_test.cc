// Operator entry points reject undefined tensors, out-of-range enum values and non-finite scalars
// with kInvalidArgument (never a crash).
#include <cmath>
#include <limits>
#include <string>

#include "base/status.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/layout.h"
#include "ir/ops/linear.h"
#include "ir/ops/norm.h"
#include "ir/ops/reduce.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor Input(const std::string& name, std::vector<int64_t> shape) {
  absl::StatusOr<Tensor> t = Placeholder(name, std::move(shape));
  CHECK(t.ok()) << t.status();
  return *t;
}

TEST(UndefinedTensor, SoftmaxAndLogSoftmax) {
  EXPECT_THAT(Softmax(Tensor(), -1).status(),
              StatusIs(kInvalid, HasSubstr("softmax: X is undefined")));
  EXPECT_THAT(LogSoftmax(Tensor(), -1).status(),
              StatusIs(kInvalid, HasSubstr("log_softmax: X is undefined")));
}

TEST(UndefinedTensor, LayerNormXGammaBeta) {
  const Tensor x = Input("X", {2, 8});
  const Tensor g = Input("gamma", {8});
  const Tensor b = Input("beta", {8});
  EXPECT_THAT(LayerNorm(Tensor(), g, b, 1, 1e-5).status(),
              StatusIs(kInvalid, HasSubstr("layernorm: X is undefined")));
  EXPECT_THAT(LayerNorm(x, Tensor(), b, 1, 1e-5).status(),
              StatusIs(kInvalid, HasSubstr("layernorm: gamma is undefined")));
  EXPECT_THAT(LayerNorm(x, g, Tensor(), 1, 1e-5).status(),
              StatusIs(kInvalid, HasSubstr("layernorm: beta is undefined")));
  EXPECT_THAT(LayerNorm(x, g, b, 1, 1e-5).status(), IsOk());
}

TEST(UndefinedTensor, RmsNormXGamma) {
  const Tensor x = Input("X", {2, 8});
  EXPECT_THAT(RmsNorm(Tensor(), Input("gamma", {8}), 1, 1e-6).status(),
              StatusIs(kInvalid, HasSubstr("rmsnorm: X is undefined")));
  EXPECT_THAT(RmsNorm(x, Tensor(), 1, 1e-6).status(),
              StatusIs(kInvalid, HasSubstr("rmsnorm: gamma is undefined")));
}

TEST(UndefinedTensor, UnaryBinaryScale) {
  const Tensor a = Input("A", {4});
  EXPECT_THAT(Unary(UnaryOp::kRelu, Tensor()).status(),
              StatusIs(kInvalid, HasSubstr("relu: X is undefined")));
  EXPECT_THAT(Binary(BinaryOp::kAdd, Tensor(), a).status(),
              StatusIs(kInvalid, HasSubstr("add: A is undefined")));
  EXPECT_THAT(Binary(BinaryOp::kAdd, a, Tensor()).status(),
              StatusIs(kInvalid, HasSubstr("add: B is undefined")));
  EXPECT_THAT(Scale(Tensor(), 2.0).status(),
              StatusIs(kInvalid, HasSubstr("scale: X is undefined")));
}

TEST(UndefinedTensor, TransposeAndReduceAxes) {
  EXPECT_THAT(Transpose(Tensor(), {}).status(),
              StatusIs(kInvalid, HasSubstr("transpose: X is undefined")));
  EXPECT_THAT(ReduceAxes(ReduceOp::kSum, Tensor(), {}).status(),
              StatusIs(kInvalid, HasSubstr("reduce_sum: X is undefined")));
  EXPECT_THAT(ReduceAxes(ReduceOp::kMean, Tensor(), {0}).status(),
              StatusIs(kInvalid, HasSubstr("reduce_mean: X is undefined")));
}

TEST(OutOfRangeEnum, ReduceUnaryBinaryAndDtype) {
  EXPECT_THAT(ReduceDAG(static_cast<ReduceOp>(99), {4}, {}, false, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, HasSubstr("unknown reduce op 99")));
  EXPECT_THAT(UnaryDAG(static_cast<UnaryOp>(99), {4}, {}, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, HasSubstr("unknown operator 99")));
  EXPECT_THAT(BinaryDAG(static_cast<BinaryOp>(99), {4}, {4}, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, HasSubstr("unknown operator 99")));
  EXPECT_THAT(MatmulDAG({2, 2}, {2, 2}, static_cast<ScalarType>(77)).status(),
              StatusIs(kInvalid, HasSubstr("unknown dtype 77")));
  EXPECT_THAT(
      DenseDAG({2, 2}, {2, 2}, std::nullopt, ScalarType::kFloat32, static_cast<Activation>(9))
          .status(),
      StatusIs(kInvalid, HasSubstr("unknown activation 9")));
}

TEST(NonFiniteScalars, NormEpsMustBeFinite) {
  EXPECT_THAT(LayerNormDAG({2, 8}, 1, kNaN, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, HasSubstr("eps nan is not finite")));
  EXPECT_THAT(LayerNormDAG({2, 8}, 1, kNaN, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, Not(HasSubstr("negative"))));
  EXPECT_THAT(RmsNormDAG({2, 8}, 1, kInf, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, HasSubstr("eps inf is not finite")));
  EXPECT_THAT(RmsNormDAG({2, 8}, 1, -1.0, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, HasSubstr("eps -1 is negative")));
}

TEST(NonFiniteScalars, ScaleMustBeFinite) {
  EXPECT_THAT(ScaleDAG({4}, kNaN, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, HasSubstr("scale nan is not finite")));
  EXPECT_THAT(ScaleDAG({4}, -kInf, ScalarType::kFloat32).status(),
              StatusIs(kInvalid, HasSubstr("scale -inf is not finite")));
  EXPECT_THAT(ScaleDAG({4}, 0.5, ScalarType::kFloat32).status(), IsOk());
}

}  // namespace
}  // namespace tilesearch::ir
