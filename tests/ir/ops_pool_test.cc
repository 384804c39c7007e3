// max_pool2d and avg_pool2d: the reference (naive loop nest run by the interpreter) and float64
// point evaluation against hand-written naive loops in double (PyTorch semantics: padding never
// wins a max, the mean divides by the full kernel area), on random inputs; output extents worked
// out by hand; every input error.
#include <limits>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/pool.h"
#include "ir/ops/registry.h"
#include "tests/ir/ops_test_util.h"

namespace tilesearch::ir {
namespace {

using ops_test::CheckOperator;
using ::testing::HasSubstr;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// Max or mean (over R·S, padding counted as zeros) of each window; only in-bounds elements are
// read.
std::vector<double> RefPool(const HostBuffer& x, const Pool2dParams& p, int64_t oh, int64_t ow,
                            bool max) {
  const std::array<int64_t, 2> stride = p.stride.value_or(p.kernel);
  std::vector<double> out;
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t c = 0; c < x.shape[1]; ++c)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double best = -std::numeric_limits<double>::infinity();
          double sum = 0;
          for (int64_t ry = 0; ry < p.kernel[0]; ++ry)
            for (int64_t rx = 0; rx < p.kernel[1]; ++rx) {
              int64_t ih = y * stride[0] - p.padding[0] + ry * p.dilation[0];
              int64_t iw = xo * stride[1] - p.padding[1] + rx * p.dilation[1];
              if (ih < 0 || ih >= x.shape[2] || iw < 0 || iw >= x.shape[3]) continue;
              double v = x.at({n, c, ih, iw});
              best = std::max(best, v);
              sum += v;
            }
          out.push_back(max ? best : sum / static_cast<double>(p.kernel[0] * p.kernel[1]));
        }
  return out;
}

Pool2dParams Pool(std::array<int64_t, 2> kernel, std::optional<std::array<int64_t, 2>> stride,
                  std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation = {1, 1}) {
  return Pool2dParams{kernel, stride, padding, dilation};
}

// oh / ow worked out by hand from floor((H + 2p − d(R − 1) − 1) / s) + 1.
struct PoolCase {
  std::string name;
  int64_t n, c, h, w;
  Pool2dParams p;
  int64_t oh, ow;
};
void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

std::vector<PoolCase> PoolCases() {
  return {
      {"Kernel2DefaultStride", 1, 3, 13, 11, Pool({2, 2}, std::nullopt, {0, 0}), 6, 5},
      {"Kernel3Stride2Pad1", 1, 3, 13, 11, Pool({3, 3}, {{2, 2}}, {1, 1}), 7, 6},
      {"Kernel3Stride1Pad1", 2, 2, 13, 11, Pool({3, 3}, {{1, 1}}, {1, 1}), 13, 11},
      {"NonSquare", 1, 2, 13, 11, Pool({3, 2}, {{2, 1}}, {1, 1}), 7, 12},
      {"AllOnes", 1, 1, 1, 1, Pool({1, 1}, std::nullopt, {0, 0}), 1, 1},
      {"KernelIsInput", 1, 2, 7, 5, Pool({7, 5}, std::nullopt, {0, 0}), 1, 1},
      {"Stride3Pad1", 2, 1, 7, 7, Pool({3, 3}, std::nullopt, {1, 1}), 3, 3},
  };
}

class PoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolTest, MaxMatchesNaiveLoops) {
  const PoolCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = MaxPool2dDAG({c.n, c.c, c.h, c.w}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.n, c.c, c.oh, c.ow},
                [&](const BufferMap& in) { return RefPool(in.at("X"), c.p, c.oh, c.ow, true); });
}

TEST_P(PoolTest, AvgMatchesNaiveLoops) {
  const PoolCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = AvgPool2dDAG({c.n, c.c, c.h, c.w}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.n, c.c, c.oh, c.ow},
                [&](const BufferMap& in) { return RefPool(in.at("X"), c.p, c.oh, c.ow, false); });
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolTest, ::testing::ValuesIn(PoolCases()),
                         [](const auto& info) { return info.param.name; });

TEST(MaxPool, DilationMatchesNaiveLoops) {
  const Pool2dParams p = Pool({3, 3}, {{1, 1}}, {1, 1}, {2, 2});
  absl::StatusOr<ComputeDAG> dag = MaxPool2dDAG({1, 3, 13, 11}, ScalarType::kFloat32, p);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {1, 3, 11, 9},
                [&](const BufferMap& in) { return RefPool(in.at("X"), p, 11, 9, true); });
}

TEST(MaxPool, PaddingNeverWinsOnNegativeInputs) {
  // All inputs negative: a zero-padded max would return 0 at the borders.
  absl::StatusOr<ComputeDAG> dag =
      MaxPool2dDAG({1, 1, 4, 4}, ScalarType::kFloat32, Pool({3, 3}, {{1, 1}}, {1, 1}));
  ASSERT_THAT(dag, IsOk());
  BufferMap inputs = MakeRandomInputs(*dag, 3);
  HostBuffer& x = inputs.at("X");
  for (double& v : x.data) v = -1.0 - std::abs(v);
  absl::StatusOr<BufferMap> out = RunReference(*dag, inputs);
  ASSERT_THAT(out, IsOk());
  const std::vector<double> expected = RefPool(x, Pool({3, 3}, {{1, 1}}, {1, 1}), 4, 4, true);
  ASSERT_EQ(out->at("Y").data.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_LT(out->at("Y").data[i], -0.5);
    EXPECT_TRUE(ops_test::Close(out->at("Y").data[i], expected[i])) << i;
  }
}

TEST(AvgPool, CountsPaddingInTheDivisor) {
  // A constant input of 1 with padding: the corner window of a 3×3 kernel sees 4 real elements,
  // so count_include_pad gives 4/9 there and 1 in the interior.
  absl::StatusOr<ComputeDAG> dag =
      AvgPool2dDAG({1, 1, 5, 5}, ScalarType::kFloat32, Pool({3, 3}, {{1, 1}}, {1, 1}));
  ASSERT_THAT(dag, IsOk());
  BufferMap inputs = MakeRandomInputs(*dag, 1);
  for (double& v : inputs.at("X").data) v = 1.0;
  absl::StatusOr<BufferMap> out = RunReference(*dag, inputs);
  ASSERT_THAT(out, IsOk());
  const HostBuffer& y = out->at("Y");
  EXPECT_TRUE(ops_test::Close(y.at({0, 0, 0, 0}), 4.0 / 9.0)) << y.at({0, 0, 0, 0});
  EXPECT_TRUE(ops_test::Close(y.at({0, 0, 0, 2}), 6.0 / 9.0)) << y.at({0, 0, 0, 2});
  EXPECT_TRUE(ops_test::Close(y.at({0, 0, 2, 2}), 1.0)) << y.at({0, 0, 2, 2});
}

TEST(PoolStages, NamesKindsAndTags) {
  absl::StatusOr<ComputeDAG> max =
      MaxPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({2, 2}, std::nullopt, {0, 0}));
  ASSERT_THAT(max, IsOk());
  const Tensor& y = max->stage(max->output_ids()[0]);
  EXPECT_EQ(y->reduce, ReduceKind::kMax);
  EXPECT_EQ(y->tag, "max_pool2d");
  ASSERT_EQ(y->reduce_axes.size(), 2u);
  EXPECT_EQ(y->reduce_axes[0].name, "ry");
  EXPECT_EQ(y->axes[1].name, "c");

  absl::StatusOr<ComputeDAG> avg =
      AvgPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({2, 2}, std::nullopt, {0, 0}));
  ASSERT_THAT(avg, IsOk());
  ASSERT_EQ(avg->num_stages(), 3);
  const int sum = avg->StageId("pool_sum");
  ASSERT_GE(sum, 0);
  EXPECT_EQ(avg->Kind(sum), StageKind::kReduction);
  EXPECT_EQ(avg->Kind(avg->output_ids()[0]), StageKind::kElementwise);
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(PoolErrors, WrongRankAndExtent) {
  const Pool2dParams p = Pool({2, 2}, std::nullopt, {0, 0});
  EXPECT_THAT(MaxPool2dDAG({1, 13, 11}, ScalarType::kFloat32, p),
              StatusIs(kInvalid, HasSubstr("max_pool2d: X must have rank 4 ([N, C, H, W]), got "
                                           "[1, 13, 11]")));
  EXPECT_THAT(AvgPool2dDAG({1, 2, 0, 11}, ScalarType::kFloat32, p),
              StatusIs(kInvalid, HasSubstr("avg_pool2d: X has non-positive extent 0 in "
                                           "dimension 2")));
}

TEST(PoolErrors, KernelStrideDilationBelowOne) {
  EXPECT_THAT(MaxPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({0, 2}, std::nullopt, {0, 0})),
              StatusIs(kInvalid, HasSubstr("max_pool2d: kernel height 0 must be at least 1")));
  EXPECT_THAT(AvgPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({2, 2}, {{2, 0}}, {0, 0})),
              StatusIs(kInvalid, HasSubstr("avg_pool2d: width stride 0 must be at least 1")));
  EXPECT_THAT(
      MaxPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({2, 2}, std::nullopt, {0, 0}, {0, 1})),
      StatusIs(kInvalid, HasSubstr("max_pool2d: height dilation 0 must be at least 1")));
}

TEST(PoolErrors, NegativePaddingAndPaddingOverHalfKernel) {
  EXPECT_THAT(MaxPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({3, 3}, std::nullopt, {-1, 0})),
              StatusIs(kInvalid, HasSubstr("max_pool2d: height padding -1 is negative")));
  EXPECT_THAT(MaxPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({3, 3}, std::nullopt, {1, 2})),
              StatusIs(kInvalid, HasSubstr("max_pool2d: width padding 2 is more than half the "
                                           "kernel width 3")));
  EXPECT_THAT(AvgPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({2, 2}, std::nullopt, {2, 0})),
              StatusIs(kInvalid, HasSubstr("avg_pool2d: height padding 2 is more than half")));
}

TEST(PoolErrors, KernelLargerThanPaddedInput) {
  EXPECT_THAT(MaxPool2dDAG({1, 2, 5, 8}, ScalarType::kFloat32, Pool({6, 2}, std::nullopt, {0, 0})),
              StatusIs(kInvalid, HasSubstr("max_pool2d: kernel height 6 (dilation 1, effective 6) "
                                           "is larger than the padded input height 5 (input 5, "
                                           "padding 0)")));
  // Dilation 3 stretches a 3-wide kernel to 7 > 4 + 2·1.
  EXPECT_THAT(
      MaxPool2dDAG({1, 2, 8, 4}, ScalarType::kFloat32, Pool({3, 3}, std::nullopt, {1, 1}, {1, 3})),
      StatusIs(kInvalid, HasSubstr("kernel width 3 (dilation 3, effective 7)")));
}

TEST(PoolErrors, Dtypes) {
  const Pool2dParams p = Pool({2, 2}, std::nullopt, {0, 0});
  EXPECT_THAT(
      AvgPool2dDAG({1, 2, 8, 8}, ScalarType::kInt32, p),
      StatusIs(kInvalid, HasSubstr("avg_pool2d: X has dtype int32; a float dtype is needed")));
  EXPECT_THAT(MaxPool2dDAG({1, 2, 8, 8}, ScalarType::kBool, p),
              StatusIs(kInvalid, HasSubstr("max_pool2d: X has dtype bool")));
}

TEST(PoolErrors, AvgHasNoDilation) {
  EXPECT_THAT(
      AvgPool2dDAG({1, 2, 8, 8}, ScalarType::kFloat32, Pool({2, 2}, std::nullopt, {0, 0}, {2, 2})),
      StatusIs(kInvalid, HasSubstr("avg_pool2d: dilation 2,2 is not supported")));
}

// ---------------------------------------------------------------------------------------------
// Through the registry.

TEST(PoolRegistry, StrideDefaultsToKernel) {
  OpArgs args;
  args.shapes = {{1, 2, 13, 11}};
  args.attrs = {{"kernel", "3"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("max_pool2d", args);
  ASSERT_THAT(dag, IsOk());
  // floor((13 − 3) / 3) + 1 = 4, floor((11 − 3) / 3) + 1 = 3.
  const Pool2dParams p = Pool({3, 3}, {{3, 3}}, {0, 0});
  CheckOperator(*dag, {1, 2, 4, 3},
                [&](const BufferMap& in) { return RefPool(in.at("X"), p, 4, 3, true); });
}

TEST(PoolRegistry, AvgWithPerDimensionAttributes) {
  OpArgs args;
  args.shapes = {{1, 2, 13, 11}};
  args.attrs = {{"kernel", "3,2"}, {"stride", "2,1"}, {"padding", "1"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("avg_pool2d", args);
  ASSERT_THAT(dag, IsOk());
  const Pool2dParams p = Pool({3, 2}, {{2, 1}}, {1, 1});
  CheckOperator(*dag, {1, 2, 7, 12},
                [&](const BufferMap& in) { return RefPool(in.at("X"), p, 7, 12, false); });
}

TEST(PoolRegistry, KernelIsRequiredAndAvgTakesNoDilation) {
  OpArgs args;
  args.shapes = {{1, 2, 13, 11}};
  EXPECT_THAT(BuildOp("max_pool2d", args),
              StatusIs(kInvalid, HasSubstr("max_pool2d: attribute 'kernel' is required")));
  args.attrs = {{"kernel", "2"}, {"dilation", "2"}};
  EXPECT_THAT(BuildOp("avg_pool2d", args),
              StatusIs(kInvalid, HasSubstr("avg_pool2d: unknown attribute 'dilation'")));
}

}  // namespace
}  // namespace tilesearch::ir
