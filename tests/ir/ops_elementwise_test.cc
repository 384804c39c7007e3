// Unary activations, broadcasting binary operators and scale against direct float64 formulas.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "tests/ir/ops_expect_matches.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using testing_ops::ExpectMatches;
using testing_ops::Unflatten;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

struct UnaryCase {
  UnaryOp op;
  UnaryParams params;
  std::function<double(double)> f;
};

std::vector<UnaryCase> UnaryCases() {
  const double pi = std::acos(-1.0);
  UnaryParams leaky;
  leaky.leaky_alpha = 0.2;
  UnaryParams gelu_tanh;
  gelu_tanh.gelu_tanh = true;
  UnaryParams softplus;  // beta 2, threshold 3: both branches hit for x in [-4, 4)
  softplus.softplus_beta = 2.0;
  softplus.softplus_threshold = 3.0;
  UnaryParams elu;
  elu.elu_alpha = 0.5;
  UnaryParams hardtanh;
  hardtanh.min_val = -0.5;
  hardtanh.max_val = 2.0;
  auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  return {
      {UnaryOp::kRelu, {}, [](double x) { return x > 0 ? x : 0.0; }},
      {UnaryOp::kLeakyRelu, {}, [](double x) { return x >= 0 ? x : 0.01 * x; }},
      {UnaryOp::kLeakyRelu, leaky, [](double x) { return x >= 0 ? x : 0.2 * x; }},
      {UnaryOp::kGelu, {}, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {UnaryOp::kGelu, gelu_tanh,
       [pi](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
       }},
      {UnaryOp::kSigmoid, {}, sigmoid},
      {UnaryOp::kTanh, {}, [](double x) { return std::tanh(x); }},
      {UnaryOp::kSwish, {}, [sigmoid](double x) { return x * sigmoid(x); }},
      {UnaryOp::kSoftplus, {}, [](double x) { return std::log1p(std::exp(x)); }},
      {UnaryOp::kSoftplus, softplus,
       [](double x) { return 2 * x > 3 ? x : std::log1p(std::exp(2 * x)) / 2; }},
      {UnaryOp::kElu, {}, [](double x) { return x > 0 ? x : std::expm1(x); }},
      {UnaryOp::kElu, elu, [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); }},
      {UnaryOp::kHardtanh, {}, [](double x) { return std::clamp(x, -1.0, 1.0); }},
      {UnaryOp::kHardtanh, hardtanh, [](double x) { return std::clamp(x, -0.5, 2.0); }},
  };
}

TEST(UnaryTest, EveryActivationMatchesItsFormula) {
  for (const UnaryCase& c : UnaryCases()) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{1}, {7, 127}, {3, 1, 5}}) {
      SCOPED_TRACE(::testing::Message() << UnaryOpName(c.op) << " rank " << shape.size());
      absl::StatusOr<ComputeDAG> dag = UnaryDAG(c.op, shape, c.params);
      ASSERT_THAT(dag, IsOk());
      BufferMap inputs = MakeRandomInputs(*dag, 5);
      FillRandom(inputs.at("X"), 41, -4.0, 4.0);
      std::vector<double> want;
      for (double x : inputs.at("X").data) want.push_back(c.f(x));
      ExpectMatches(*dag, inputs, want);
    }
  }
}

TEST(UnaryTest, SoftplusIsLinearAboveTheDefaultThreshold) {
  absl::StatusOr<ComputeDAG> dag = UnaryDAG(UnaryOp::kSoftplus, {64});
  ASSERT_THAT(dag, IsOk());
  BufferMap inputs = MakeRandomInputs(*dag, 5);
  FillRandom(inputs.at("X"), 43, -30.0, 30.0);
  std::vector<double> want;
  for (double x : inputs.at("X").data) want.push_back(x > 20 ? x : std::log1p(std::exp(x)));
  ExpectMatches(*dag, inputs, want);
}

TEST(UnaryTest, HalfPrecisionStorageRoundsOnStore) {
  // relu and hardtanh of float16 values are float16 values again: exact.
  for (UnaryOp op : {UnaryOp::kRelu, UnaryOp::kHardtanh}) {
    absl::StatusOr<ComputeDAG> dag = UnaryDAG(op, {7, 9}, {}, ScalarType::kFloat16);
    ASSERT_THAT(dag, IsOk());
    EXPECT_EQ(dag->stage(dag->output_ids()[0]).dtype(), ScalarType::kFloat16);
    BufferMap inputs = MakeRandomInputs(*dag, 8);
    FillRandom(inputs.at("X"), 9, -3.0, 3.0);
    std::vector<double> want;
    for (double x : inputs.at("X").data) {
      want.push_back(op == UnaryOp::kRelu ? std::max(x, 0.0) : std::clamp(x, -1.0, 1.0));
    }
    ExpectMatches(*dag, inputs, want);
  }
}

TEST(UnaryTest, RejectsBadParameters) {
  UnaryParams p;
  p.softplus_beta = 0;
  EXPECT_THAT(
      UnaryDAG(UnaryOp::kSoftplus, {4}, p),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("softplus: beta 0 is not positive")));
  p = UnaryParams();
  p.min_val = 2;
  EXPECT_THAT(UnaryDAG(UnaryOp::kHardtanh, {4}, p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("hardtanh: min_val 2 is greater than max_val 1")));
  EXPECT_THAT(UnaryDAG(UnaryOp::kRelu, {4}, {}, ScalarType::kInt32),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("relu: dtype int32 of 'X' is not a float type")));
  EXPECT_THAT(UnaryDAG(UnaryOp::kTanh, {4, 0, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tanh: input X has extent 0 in dimension 1")));
}

TEST(UnaryTest, RegistryParsesGeluApproximate) {
  OpArgs args;
  args.shapes = {{9}};
  args.attrs = {{"approximate", "tanh"}};
  absl::StatusOr<ComputeDAG> tanh_dag = BuildOp("gelu", args);
  ASSERT_THAT(tanh_dag, IsOk());
  args.attrs = {};
  absl::StatusOr<ComputeDAG> erf_dag = BuildOp("gelu", args);
  ASSERT_THAT(erf_dag, IsOk());
  EXPECT_NE(tanh_dag->WorkloadKey(), erf_dag->WorkloadKey());
  args.attrs = {{"approximate", "fast"}};
  EXPECT_THAT(BuildOp("gelu", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attribute 'approximate' of gelu: 'fast' is not one of")));
}

// Naive numpy broadcasting: the element of `x` that output index `i` reads.
double BroadcastAt(const HostBuffer& x, const std::vector<int64_t>& i) {
  const size_t offset = i.size() - x.shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    flat = flat * x.shape[d] + (x.shape[d] == 1 ? 0 : i[offset + d]);
  }
  return x.data[flat];
}

TEST(BinaryTest, EveryOperatorBroadcastsLikeNumpy) {
  struct ShapeCase {
    std::vector<int64_t> a, b, out;
  };
  const std::vector<ShapeCase> shapes = {
      {{7, 127}, {7, 127}, {7, 127}}, {{7, 1, 5}, {3, 1}, {7, 3, 5}}, {{1}, {127}, {127}},
      {{4, 1}, {1, 6}, {4, 6}},       {{2, 3, 4}, {4}, {2, 3, 4}},
  };
  const std::vector<std::pair<BinaryOp, std::function<double(double, double)>>> ops = {
      {BinaryOp::kAdd, [](double a, double b) { return a + b; }},
      {BinaryOp::kSub, [](double a, double b) { return a - b; }},
      {BinaryOp::kMul, [](double a, double b) { return a * b; }},
      {BinaryOp::kDiv, [](double a, double b) { return a / b; }},
      {BinaryOp::kMaximum, [](double a, double b) { return std::max(a, b); }},
      {BinaryOp::kMinimum, [](double a, double b) { return std::min(a, b); }},
  };
  for (const auto& [op, f] : ops) {
    for (const ShapeCase& s : shapes) {
      SCOPED_TRACE(::testing::Message() << BinaryOpName(op) << " out rank " << s.out.size());
      absl::StatusOr<ComputeDAG> dag = BinaryDAG(op, s.a, s.b);
      ASSERT_THAT(dag, IsOk());
      const Tensor& out = dag->stage(dag->output_ids()[0]);
      EXPECT_EQ(out.shape(), s.out);
      BufferMap inputs = MakeRandomInputs(*dag, 13);
      // Keep divisors away from zero so the relative tolerance means something.
      if (op == BinaryOp::kDiv) FillRandom(inputs.at("B"), 47, 0.5, 2.0);
      std::vector<double> want;
      for (int64_t flat = 0; flat < out.NumElements(); ++flat) {
        std::vector<int64_t> i = Unflatten(flat, s.out);
        want.push_back(f(BroadcastAt(inputs.at("A"), i), BroadcastAt(inputs.at("B"), i)));
      }
      ExpectMatches(*dag, inputs, want);
    }
  }
}

TEST(BinaryTest, RejectsShapesThatCannotBroadcast) {
  EXPECT_THAT(BinaryDAG(BinaryOp::kAdd, {2, 3}, {4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("add: shapes [2, 3] and [4] cannot be broadcast")));
  EXPECT_THAT(BroadcastShape("mul", {5, 2, 3}, {4, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("mul: shapes [5, 2, 3] and [4, 1] cannot be broadcast")));
}

TEST(BinaryTest, RejectsMismatchedAndUnsupportedDtypes) {
  absl::StatusOr<Tensor> a = Placeholder("A", {4}, ScalarType::kFloat32);
  absl::StatusOr<Tensor> b = Placeholder("B", {4}, ScalarType::kFloat16);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT(Binary(BinaryOp::kSub, *a, *b),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sub: dtypes float32 of 'A' and float16 of 'B' differ")));
  EXPECT_THAT(BinaryDAG(BinaryOp::kDiv, {4}, {4}, ScalarType::kInt32),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("div: dtype int32 of 'A' is not a float type")));
  EXPECT_THAT(BinaryDAG(BinaryOp::kAdd, {4}, {4}, ScalarType::kBool),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("add: dtype bool")));
}

TEST(ScaleTest, MultipliesByTheConstant) {
  OpArgs args;
  args.shapes = {{7, 13}};
  args.attrs = {{"scale", "-2.5"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("scale", args);
  ASSERT_THAT(dag, IsOk());
  BufferMap inputs = MakeRandomInputs(*dag, 3);
  std::vector<double> want;
  for (double x : inputs.at("X").data) want.push_back(-2.5 * x);
  ExpectMatches(*dag, inputs, want);

  args.attrs = {{"scale", "two"}};
  EXPECT_THAT(BuildOp("scale", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attribute 'scale' of scale: 'two' is not a finite number")));
}

}  // namespace
}  // namespace tilesearch::ir
