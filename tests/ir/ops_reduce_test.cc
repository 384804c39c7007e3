// reduce_sum / reduce_mean / reduce_max / reduce_min against naive float64 loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/reduce.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "tests/ir/ops_expect_matches.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using testing_ops::Unflatten;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

// Naive reduction of `x` (float64) over `axes` (normalized), returned flat in the keepdim layout,
// which has the same row-major order as the keepdim=false layout.
std::vector<double> NaiveReduce(ReduceOp op, const HostBuffer& x, const std::vector<int>& axes) {
  std::vector<int64_t> out_shape = x.shape;
  for (int a : axes) out_shape[a] = 1;
  int64_t out_n = 1;
  for (int64_t e : out_shape) out_n *= e;
  const double init = op == ReduceOp::kMax   ? -std::numeric_limits<double>::infinity()
                      : op == ReduceOp::kMin ? std::numeric_limits<double>::infinity()
                                             : 0.0;
  std::vector<double> acc(out_n, init);
  std::vector<int64_t> count(out_n, 0);
  for (int64_t flat = 0; flat < x.NumElements(); ++flat) {
    std::vector<int64_t> index = Unflatten(flat, x.shape);
    int64_t out = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      out = out * out_shape[d] + (out_shape[d] == 1 ? 0 : index[d]);
    }
    double v = x.data[flat];
    if (op == ReduceOp::kMax)
      acc[out] = std::max(acc[out], v);
    else if (op == ReduceOp::kMin)
      acc[out] = std::min(acc[out], v);
    else
      acc[out] += v;
    ++count[out];
  }
  if (op == ReduceOp::kMean) {
    for (int64_t i = 0; i < out_n; ++i) acc[i] /= static_cast<double>(count[i]);
  }
  return acc;
}

struct Case {
  ReduceOp op;
  std::vector<int64_t> shape;
  std::vector<int64_t> axes;  // as given (may be negative, empty = all)
  bool keepdim;
  std::vector<int64_t> expected_shape;
};

void CheckCase(const Case& c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << ReduceOpName(c.op) << " shape " << c.shape.size() << "-d seed " << seed);
  absl::StatusOr<ComputeDAG> dag = ReduceDAG(c.op, c.shape, c.axes, c.keepdim);
  ASSERT_THAT(dag, IsOk());
  const Tensor& out = dag->stage(dag->output_ids()[0]);
  EXPECT_EQ(out.shape(), c.expected_shape);

  BufferMap inputs = MakeRandomInputs(*dag, seed);
  const HostBuffer& x = inputs.at("X");
  std::vector<int> axes;
  for (int64_t a : c.axes) axes.push_back(static_cast<int>(a < 0 ? a + x.shape.size() : a));
  if (axes.empty()) {
    for (size_t d = 0; d < x.shape.size(); ++d) axes.push_back(static_cast<int>(d));
  }
  std::vector<double> want = NaiveReduce(c.op, x, axes);
  // Rounding of a float32 sum grows with the sum of magnitudes, not with the result.
  double scale = 1.0;
  if (c.op == ReduceOp::kSum) {
    int64_t n = x.NumElements() / static_cast<int64_t>(want.size());
    scale = std::max(1.0, std::sqrt(static_cast<double>(n)));
  }

  absl::StatusOr<BufferMap> got = RunReference(*dag, inputs);
  ASSERT_THAT(got, IsOk());
  const HostBuffer& y = got->at(out.name());
  ASSERT_EQ(y.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(y.data[i], want[i], 1e-5 * std::max(scale, std::abs(want[i]))) << "element " << i;
  }
  // Point evaluation in float64 at a spread of elements, first and last included.
  const int id = dag->output_ids()[0];
  for (int64_t flat :
       {int64_t{0}, static_cast<int64_t>(want.size()) / 3, static_cast<int64_t>(want.size()) - 1}) {
    absl::StatusOr<double> v = EvaluatePoint(*dag, id, Unflatten(flat, out.shape()), inputs);
    ASSERT_THAT(v, IsOk());
    EXPECT_NEAR(*v, want[flat], 1e-9 * std::max(1.0, std::abs(want[flat]))) << "point " << flat;
  }
}

TEST(ReduceTest, SumMatchesNaiveLoopsOverAxisSets) {
  const std::vector<Case> cases = {
      {ReduceOp::kSum, {7, 127}, {1}, false, {7}},
      {ReduceOp::kSum, {7, 127}, {0}, false, {127}},
      {ReduceOp::kSum, {7, 127}, {-1}, true, {7, 1}},
      {ReduceOp::kSum, {3, 1, 5, 7}, {1, 2}, false, {3, 7}},
      {ReduceOp::kSum, {3, 1, 5, 7}, {-2, 0}, true, {1, 1, 1, 7}},
      {ReduceOp::kSum, {1}, {}, false, {1}},
      {ReduceOp::kSum, {5, 9, 2}, {}, false, {1}},
      {ReduceOp::kSum, {5, 9, 2}, {}, true, {1, 1, 1}},
  };
  for (const Case& c : cases) CheckCase(c, 11);
}

TEST(ReduceTest, MeanMatchesNaiveLoops) {
  CheckCase({ReduceOp::kMean, {7, 127}, {1}, false, {7}}, 3);
  CheckCase({ReduceOp::kMean, {4, 6, 9}, {0, 2}, true, {1, 6, 1}}, 4);
  CheckCase({ReduceOp::kMean, {13}, {}, false, {1}}, 5);
}

TEST(ReduceTest, MaxAndMinMatchNaiveLoops) {
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    CheckCase({op, {7, 127}, {-1}, false, {7}}, 21);
    CheckCase({op, {2, 3, 1, 5}, {0, 3}, false, {3, 1}}, 22);
    CheckCase({op, {1, 1}, {0}, true, {1, 1}}, 23);
  }
}

TEST(ReduceTest, MeanIsASumStageFollowedByADivideStage) {
  absl::StatusOr<ComputeDAG> dag = ReduceDAG(ReduceOp::kMean, {4, 8}, {1});
  ASSERT_THAT(dag, IsOk());
  ASSERT_EQ(dag->num_stages(), 3);
  EXPECT_EQ(dag->Kind(1), StageKind::kReduction);
  EXPECT_EQ(dag->stage(1).name(), "reduce_mean_sum");
  EXPECT_NE(dag->Kind(2), StageKind::kReduction);
  EXPECT_EQ(dag->stage(2).name(), "reduce_mean");
}

TEST(ReduceTest, IntegerSumIsExact) {
  absl::StatusOr<Tensor> x = Placeholder("X", {3, 4}, ScalarType::kInt32);
  ASSERT_THAT(x, IsOk());
  absl::StatusOr<Tensor> y = ReduceAxes(ReduceOp::kSum, *x, {1});
  ASSERT_THAT(y, IsOk());
  absl::StatusOr<ComputeDAG> dag = ComputeDAG::Create({*y});
  ASSERT_THAT(dag, IsOk());
  BufferMap inputs;
  inputs["X"] = HostBuffer::Zeros(ScalarType::kInt32, {3, 4});
  for (int i = 0; i < 12; ++i) inputs["X"].data[i] = i * (i % 2 ? -1 : 1);
  absl::StatusOr<BufferMap> got = RunReference(*dag, inputs);
  ASSERT_THAT(got, IsOk());
  // Rows: 0-1+2-3, 4-5+6-7, 8-9+10-11.
  EXPECT_EQ(got->at("reduce_sum").data, (std::vector<double>{-2, -2, -2}));
}

TEST(ReduceTest, RejectsAxisOutOfRange) {
  EXPECT_THAT(ReduceDAG(ReduceOp::kSum, {4, 5}, {2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("reduce_sum: axis 2 out of range for rank 2")));
  EXPECT_THAT(ReduceDAG(ReduceOp::kMax, {4, 5}, {-3}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("reduce_max: axis -3 out of range for rank 2")));
}

TEST(ReduceTest, RejectsDuplicateAxes) {
  EXPECT_THAT(
      ReduceDAG(ReduceOp::kMin, {4, 5, 6}, {1, -2}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reduce_min: axis 1 given twice")));
}

TEST(ReduceTest, RejectsNonPositiveExtents) {
  EXPECT_THAT(ReduceDAG(ReduceOp::kSum, {4, 0}, {1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("reduce_sum: input X has extent 0 in dimension 1")));
  EXPECT_THAT(ReduceDAG(ReduceOp::kSum, {-3}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extent -3")));
}

TEST(ReduceTest, MeanRejectsIntegerDtype) {
  EXPECT_THAT(ReduceDAG(ReduceOp::kMean, {4, 5}, {1}, false, ScalarType::kInt32),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("reduce_mean: dtype int32 of 'X' is not a float type")));
}

TEST(ReduceTest, RegistryParsesAxesAndKeepdim) {
  OpArgs args;
  args.shapes = {{2, 3, 4}};
  args.attrs = {{"axes", "0,-1"}, {"keepdim", "true"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("reduce_mean", args);
  ASSERT_THAT(dag, IsOk());
  EXPECT_EQ(dag->stage(dag->output_ids()[0]).shape(), (std::vector<int64_t>{1, 3, 1}));

  args.attrs = {{"axes", "all"}};
  dag = BuildOp("reduce_sum", args);
  ASSERT_THAT(dag, IsOk());
  EXPECT_EQ(dag->stage(dag->output_ids()[0]).shape(), (std::vector<int64_t>{1}));

  args.attrs = {{"axes", "0,x"}};
  EXPECT_THAT(BuildOp("reduce_sum", args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attribute 'axes' of reduce_sum: '0,x'")));
}

TEST(ReduceTest, RejectsUnknownDtypeName) {
  EXPECT_THAT(ParseType("float33"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown dtype 'float33'")));
}

}  // namespace
}  // namespace tilesearch::ir
