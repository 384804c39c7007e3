// softmax, log_softmax, layernorm and rmsnorm against naive float64 loops.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/norm.h"
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

// Naive softmax / log_softmax along `axis` of `x` in float64.
std::vector<double> NaiveSoftmax(const HostBuffer& x, int axis, bool log) {
  const std::vector<int64_t>& s = x.shape;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t n = s[axis];
  std::vector<double> out(x.data.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) { return (o * n + k) * inner + in; };
      double m = x.data[at(0)];
      for (int64_t k = 1; k < n; ++k) m = std::max(m, x.data[at(k)]);
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(x.data[at(k)] - m);
      for (int64_t k = 0; k < n; ++k) {
        out[at(k)] = log ? x.data[at(k)] - m - std::log(sum) : std::exp(x.data[at(k)] - m) / sum;
      }
    }
  }
  return out;
}

// Naive layernorm (beta != nullptr) or rmsnorm over the trailing `k` axes.
std::vector<double> NaiveNorm(const HostBuffer& x, int k, double eps, const HostBuffer& gamma,
                              const HostBuffer* beta) {
  int64_t n = 1;
  for (size_t d = x.shape.size() - k; d < x.shape.size(); ++d) n *= x.shape[d];
  const int64_t rows = x.NumElements() / n;
  std::vector<double> out(x.data.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* v = &x.data[r * n];
    double mean = 0, sq = 0;
    for (int64_t j = 0; j < n; ++j) mean += v[j] / n;
    for (int64_t j = 0; j < n; ++j) {
      double c = beta ? v[j] - mean : v[j];
      sq += c * c / n;
    }
    for (int64_t j = 0; j < n; ++j) {
      out[r * n + j] = beta ? (v[j] - mean) / std::sqrt(sq + eps) * gamma.data[j] + beta->data[j]
                            : v[j] / std::sqrt(sq + eps) * gamma.data[j];
    }
  }
  return out;
}

TEST(SoftmaxTest, MatchesNaiveLoopsAlongEveryAxis) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (const Case& c : std::vector<Case>{{{7, 127}, -1},
                                         {{7, 127}, 0},
                                         {{3, 1, 9}, 1},
                                         {{2, 5, 7}, -2},
                                         {{127}, 0},
                                         {{1, 1}, -1}}) {
    for (bool log : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (log ? "log_softmax" : "softmax") << " axis " << c.axis
                                        << " rank " << c.shape.size());
      absl::StatusOr<ComputeDAG> dag =
          log ? LogSoftmaxDAG(c.shape, c.axis) : SoftmaxDAG(c.shape, c.axis);
      ASSERT_THAT(dag, IsOk());
      BufferMap inputs = MakeRandomInputs(*dag, 7);
      const int axis = static_cast<int>(c.axis < 0 ? c.axis + c.shape.size() : c.axis);
      ExpectMatches(*dag, inputs, NaiveSoftmax(inputs.at("X"), axis, log));
    }
  }
}

TEST(SoftmaxTest, StaysFiniteForInputsWhoseExpOverflowsFloat32) {
  // exp(100) overflows float32; subtracting the maximum first keeps every term ≤ 1.
  absl::StatusOr<ComputeDAG> dag = SoftmaxDAG({4, 33});
  ASSERT_THAT(dag, IsOk());
  BufferMap inputs = MakeRandomInputs(*dag, 1);
  FillRandom(inputs.at("X"), 99, -100.0, 100.0);
  ExpectMatches(*dag, inputs, NaiveSoftmax(inputs.at("X"), 1, false));
}

TEST(SoftmaxTest, HasMaxExpSumAndNormalizeStages) {
  absl::StatusOr<ComputeDAG> dag = SoftmaxDAG({8, 16});
  ASSERT_THAT(dag, IsOk());
  ASSERT_EQ(dag->num_stages(), 4);
  EXPECT_EQ(dag->stage(1).name(), "softmax_max");
  EXPECT_EQ(dag->stage(1)->reduce, ReduceKind::kMax);
  EXPECT_EQ(dag->stage(2).name(), "softmax_expsum");
  EXPECT_EQ(dag->stage(2)->reduce, ReduceKind::kSum);
  EXPECT_EQ(dag->stage(3).name(), "softmax");
  EXPECT_EQ(dag->stage(3).shape(), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(dag->stage(1).shape(), (std::vector<int64_t>{8}));
}

TEST(SoftmaxTest, RejectsAxisOutOfRange) {
  EXPECT_THAT(SoftmaxDAG({4, 5}, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("softmax: axis 3 out of range for rank 2")));
  EXPECT_THAT(LogSoftmaxDAG({4, 5}, -3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("log_softmax: axis -3 out of range for rank 2")));
}

TEST(SoftmaxTest, RejectsIntegerDtypeAndZeroExtent) {
  EXPECT_THAT(SoftmaxDAG({4, 5}, -1, ScalarType::kInt64),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("softmax: dtype int64 of 'X' is not a float type")));
  EXPECT_THAT(SoftmaxDAG({0, 5}, -1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("softmax: input X has extent 0 in dimension 0")));
}

TEST(LayerNormTest, MatchesNaiveLoops) {
  struct Case {
    std::vector<int64_t> shape;
    int k;
    double eps;
  };
  for (const Case& c : std::vector<Case>{{{7, 127}, 1, 1e-5},
                                         {{3, 5, 7}, 2, 1e-5},
                                         {{2, 9}, 2, 1e-3},
                                         {{1, 1, 13}, 1, 1e-5},
                                         {{6, 1}, 1, 1e-5}}) {
    SCOPED_TRACE(::testing::Message() << "rank " << c.shape.size() << " k " << c.k);
    absl::StatusOr<ComputeDAG> dag = LayerNormDAG(c.shape, c.k, c.eps);
    ASSERT_THAT(dag, IsOk());
    BufferMap inputs = MakeRandomInputs(*dag, 17);
    ExpectMatches(*dag, inputs,
                  NaiveNorm(inputs.at("X"), c.k, c.eps, inputs.at("gamma"), &inputs.at("beta")));
  }
}

TEST(LayerNormTest, HasMeanVarianceAndNormalizeStages) {
  absl::StatusOr<ComputeDAG> dag = LayerNormDAG({4, 8});
  ASSERT_THAT(dag, IsOk());
  std::vector<std::string> names;
  for (const Tensor& t : dag->stages()) {
    if (!t->is_placeholder) names.push_back(t.name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"layernorm_mean", "layernorm_var", "layernorm"}));
}

TEST(LayerNormTest, RejectsBadNormalizedNdimAndParamShapes) {
  EXPECT_THAT(LayerNormDAG({4, 5}, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layernorm: normalized_ndim 3 out of range 1..2 for rank 2")));
  EXPECT_THAT(RmsNormDAG({4, 5}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rmsnorm: normalized_ndim 0 out of range")));
  OpArgs args;
  args.shapes = {{4, 5}, {4}, {5}};
  EXPECT_THAT(BuildOp("layernorm", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layernorm: gamma shape [4] does not match the trailing 1 axes "
                                 "[5] of X [4, 5]")));
  args.shapes = {{2, 4, 5}, {4, 5}, {4, 5}};
  args.attrs = {{"normalized_ndim", "1"}};
  EXPECT_THAT(BuildOp("layernorm", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gamma shape [4, 5] does not match the trailing 1 axes [5]")));
  args.attrs = {};
  args.shapes = {{4, 5}, {5}, {4}};
  EXPECT_THAT(BuildOp("layernorm", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layernorm: beta shape [4] does not match the trailing 1 axes "
                                 "[5] of X [4, 5]")));
  args.shapes = {{4, 5}, {4, 5}};
  EXPECT_THAT(BuildOp("rmsnorm", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rmsnorm: gamma shape [4, 5] does not match")));
  args.shapes = {{4, 5}, {5}};
  args.attrs = {{"eps", "-1"}};
  EXPECT_THAT(BuildOp("rmsnorm", args),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rmsnorm: eps -1")));
  args.attrs = {{"normalized_ndim", "5"}};
  EXPECT_THAT(BuildOp("rmsnorm", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rmsnorm: normalized_ndim 5 out of range 1..2 for rank 2")));
}

TEST(RmsNormTest, MatchesNaiveLoops) {
  for (const auto& [shape, k] :
       std::vector<std::pair<std::vector<int64_t>, int>>{{{7, 127}, 1}, {{3, 5, 7}, 2}, {{1}, 1}}) {
    SCOPED_TRACE(::testing::Message() << "rank " << shape.size() << " k " << k);
    absl::StatusOr<ComputeDAG> dag = RmsNormDAG(shape, k);
    ASSERT_THAT(dag, IsOk());
    BufferMap inputs = MakeRandomInputs(*dag, 29);
    ExpectMatches(*dag, inputs, NaiveNorm(inputs.at("X"), k, 1e-6, inputs.at("gamma"), nullptr));
  }
}

TEST(RmsNormTest, RegistryBuildReadsEps) {
  OpArgs args;
  args.shapes = {{3, 8}, {8}};
  args.attrs = {{"eps", "0.5"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("rmsnorm", args);
  ASSERT_THAT(dag, IsOk());
  BufferMap inputs = MakeRandomInputs(*dag, 31);
  ExpectMatches(*dag, inputs, NaiveNorm(inputs.at("X"), 1, 0.5, inputs.at("gamma"), nullptr));
}

}  // namespace
}  // namespace tilesearch::ir
