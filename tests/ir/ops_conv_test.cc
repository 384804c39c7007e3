// conv1d, conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw and conv2d_nchw_padded: the reference
// (naive loop nest run by the interpreter) and float64 point evaluation against hand-written
// naive loops in double, on random inputs with strides, padding, dilation and groups; output
// extents checked against values worked out by hand; FLOPs; every input error.
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/conv.h"
#include "ir/ops/registry.h"
#include "tests/ir/ops_test_util.h"

namespace tilesearch::ir {
namespace {

using ops_test::CheckOperator;
using ops_test::Close;
using ::testing::HasSubstr;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

// ---------------------------------------------------------------------------------------------
// Independent references: direct loops in double, bounds checked explicitly.

std::vector<double> RefConv2dNchw(const HostBuffer& x, const HostBuffer& w, const Conv2dParams& p,
                                  int64_t oh, int64_t ow) {
  const int64_t n_ = x.shape[0], c_ = x.shape[1], h_ = x.shape[2], w_ = x.shape[3];
  const int64_t k_ = w.shape[0], cg = w.shape[1], r_ = w.shape[2], s_ = w.shape[3];
  const int64_t kg = k_ / p.groups;
  EXPECT_EQ(cg * p.groups, c_);
  std::vector<double> out;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t k = 0; k < k_; ++k)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = 0;
          const int64_t g = k / kg;
          for (int64_t rc = 0; rc < cg; ++rc)
            for (int64_t ry = 0; ry < r_; ++ry)
              for (int64_t rx = 0; rx < s_; ++rx) {
                int64_t ih = y * p.stride[0] - p.padding[0] + ry * p.dilation[0];
                int64_t iw = xo * p.stride[1] - p.padding[1] + rx * p.dilation[1];
                if (ih < 0 || ih >= h_ || iw < 0 || iw >= w_) continue;
                acc += x.at({n, g * cg + rc, ih, iw}) * w.at({k, rc, ry, rx});
              }
          out.push_back(acc);
        }
  return out;
}

// X[N, H, W, C], W[R, S, C/groups, K] → Y[N, OH, OW, K].
std::vector<double> RefConv2dNhwc(const HostBuffer& x, const HostBuffer& w, const Conv2dParams& p,
                                  int64_t oh, int64_t ow) {
  const int64_t n_ = x.shape[0], h_ = x.shape[1], w_ = x.shape[2];
  const int64_t r_ = w.shape[0], s_ = w.shape[1], cg = w.shape[2], k_ = w.shape[3];
  const int64_t kg = k_ / p.groups;
  std::vector<double> out;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo)
        for (int64_t k = 0; k < k_; ++k) {
          double acc = 0;
          const int64_t g = k / kg;
          for (int64_t ry = 0; ry < r_; ++ry)
            for (int64_t rx = 0; rx < s_; ++rx)
              for (int64_t rc = 0; rc < cg; ++rc) {
                int64_t ih = y * p.stride[0] - p.padding[0] + ry * p.dilation[0];
                int64_t iw = xo * p.stride[1] - p.padding[1] + rx * p.dilation[1];
                if (ih < 0 || ih >= h_ || iw < 0 || iw >= w_) continue;
                acc += x.at({n, ih, iw, g * cg + rc}) * w.at({ry, rx, rc, k});
              }
          out.push_back(acc);
        }
  return out;
}

// X[N, C, H, W], W[C·m, 1, R, S] → Y[N, C·m, OH, OW]; output channel k reads input channel k/m.
std::vector<double> RefDepthwise(const HostBuffer& x, const HostBuffer& w, const Conv2dParams& p,
                                 int64_t oh, int64_t ow) {
  const int64_t n_ = x.shape[0], c_ = x.shape[1], h_ = x.shape[2], w_ = x.shape[3];
  const int64_t k_ = w.shape[0], r_ = w.shape[2], s_ = w.shape[3];
  const int64_t m = k_ / c_;
  std::vector<double> out;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t k = 0; k < k_; ++k)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = 0;
          for (int64_t ry = 0; ry < r_; ++ry)
            for (int64_t rx = 0; rx < s_; ++rx) {
              int64_t ih = y * p.stride[0] - p.padding[0] + ry * p.dilation[0];
              int64_t iw = xo * p.stride[1] - p.padding[1] + rx * p.dilation[1];
              if (ih < 0 || ih >= h_ || iw < 0 || iw >= w_) continue;
              acc += x.at({n, k / m, ih, iw}) * w.at({k, 0, ry, rx});
            }
          out.push_back(acc);
        }
  return out;
}

std::vector<double> RefConv1d(const HostBuffer& x, const HostBuffer& w, const Conv1dParams& p,
                              int64_t ol) {
  const int64_t n_ = x.shape[0], l_ = x.shape[2];
  const int64_t k_ = w.shape[0], cg = w.shape[1], s_ = w.shape[2];
  const int64_t kg = k_ / p.groups;
  std::vector<double> out;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t k = 0; k < k_; ++k)
      for (int64_t o = 0; o < ol; ++o) {
        double acc = 0;
        for (int64_t rc = 0; rc < cg; ++rc)
          for (int64_t rx = 0; rx < s_; ++rx) {
            int64_t il = o * p.stride - p.padding + rx * p.dilation;
            if (il < 0 || il >= l_) continue;
            acc += x.at({n, (k / kg) * cg + rc, il}) * w.at({k, rc, rx});
          }
        out.push_back(acc);
      }
  return out;
}

Conv2dParams Params(std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                    std::array<int64_t, 2> dilation, int64_t groups) {
  return Conv2dParams{stride, padding, dilation, groups};
}

// ---------------------------------------------------------------------------------------------
// conv2d_nchw and conv2d_nchw_padded share the cases; oh / ow were worked out by hand from
// floor((H + 2p − d(R − 1) − 1) / s) + 1.

struct Conv2dCase {
  std::string name;
  int64_t n, c, h, w, k, r, s;
  Conv2dParams p;
  int64_t oh, ow;
};
void PrintTo(const Conv2dCase& c, std::ostream* os) { *os << c.name; }

std::vector<Conv2dCase> Conv2dCases() {
  return {
      {"Basic", 1, 4, 13, 11, 6, 3, 3, Params({1, 1}, {0, 0}, {1, 1}, 1), 11, 9},
      {"Stride2Pad1", 1, 4, 13, 11, 6, 3, 3, Params({2, 2}, {1, 1}, {1, 1}, 1), 7, 6},
      {"Dilation2", 1, 4, 13, 11, 6, 3, 3, Params({1, 1}, {0, 0}, {2, 2}, 1), 9, 7},
      {"Groups2Pad1", 1, 4, 13, 11, 6, 3, 3, Params({1, 1}, {1, 1}, {1, 1}, 2), 13, 11},
      {"MixedPerDimension", 2, 4, 13, 11, 4, 3, 2, Params({2, 1}, {1, 0}, {1, 2}, 2), 7, 9},
      {"AllOnes", 1, 1, 1, 1, 1, 1, 1, Params({1, 1}, {0, 0}, {1, 1}, 1), 1, 1},
      {"KernelFillsPaddedInput", 1, 2, 3, 3, 3, 5, 5, Params({1, 1}, {1, 1}, {1, 1}, 1), 1, 1},
      {"StrideAboveKernelBigPad", 1, 3, 13, 11, 2, 2, 2, Params({3, 3}, {2, 2}, {1, 1}, 1), 6, 5},
      {"Depthwise4Groups", 1, 4, 7, 7, 8, 3, 3, Params({2, 2}, {1, 1}, {1, 1}, 4), 4, 4},
  };
}

class Conv2dNchwTest : public ::testing::TestWithParam<Conv2dCase> {};

TEST_P(Conv2dNchwTest, ReferenceAndPointsMatchNaiveLoops) {
  const Conv2dCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = Conv2dNchwDAG(
      {c.n, c.c, c.h, c.w}, {c.k, c.c / c.p.groups, c.r, c.s}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.n, c.k, c.oh, c.ow}, [&](const BufferMap& in) {
    return RefConv2dNchw(in.at("X"), in.at("W"), c.p, c.oh, c.ow);
  });
}

TEST_P(Conv2dNchwTest, PaddedTwoStageFormMatchesNaiveLoops) {
  const Conv2dCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = Conv2dNchwPaddedDAG(
      {c.n, c.c, c.h, c.w}, {c.k, c.c / c.p.groups, c.r, c.s}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  ASSERT_EQ(dag->num_stages(), 4);
  const int pad = dag->StageId("pad");
  ASSERT_GE(pad, 0);
  // A copy indexed by the output axes when there is no padding; shifted reads otherwise.
  const bool padded = c.p.padding[0] > 0 || c.p.padding[1] > 0;
  EXPECT_EQ(dag->Kind(pad), padded ? StageKind::kInjective : StageKind::kElementwise);
  EXPECT_EQ(dag->stage(pad).shape(),
            (std::vector<int64_t>{c.n, c.c, c.h + 2 * c.p.padding[0], c.w + 2 * c.p.padding[1]}));
  EXPECT_EQ(dag->Consumers(pad), std::vector<int>{dag->output_ids()[0]});
  BufferMap inputs = CheckOperator(*dag, {c.n, c.k, c.oh, c.ow}, [&](const BufferMap& in) {
    return RefConv2dNchw(in.at("X"), in.at("W"), c.p, c.oh, c.ow);
  });
  // The pad stage itself: the input inside, zeros in the border.
  const HostBuffer& x = inputs.at("X");
  const int64_t ph = c.p.padding[0], pw = c.p.padding[1];
  for (int64_t i : {int64_t{0}, c.h + 2 * ph - 1, ph}) {
    for (int64_t j : {int64_t{0}, c.w + 2 * pw - 1, pw}) {
      const bool inside = i >= ph && i < c.h + ph && j >= pw && j < c.w + pw;
      const double expected = inside ? x.at({c.n - 1, c.c - 1, i - ph, j - pw}) : 0.0;
      absl::StatusOr<double> v = EvaluatePoint(*dag, pad, {c.n - 1, c.c - 1, i, j}, inputs);
      ASSERT_THAT(v, IsOk());
      EXPECT_EQ(*v, expected) << "pad[" << i << ", " << j << "]";
    }
  }
}

TEST_P(Conv2dNchwTest, FlopsAreTwoNKOHOWCgRS) {
  const Conv2dCase c = GetParam();
  const double expected = 2.0 * c.n * c.k * c.oh * c.ow * (c.c / c.p.groups) * c.r * c.s;
  absl::StatusOr<ComputeDAG> dag = Conv2dNchwDAG(
      {c.n, c.c, c.h, c.w}, {c.k, c.c / c.p.groups, c.r, c.s}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  EXPECT_DOUBLE_EQ(dag->Flops(), expected);
  absl::StatusOr<ComputeDAG> padded = Conv2dNchwPaddedDAG(
      {c.n, c.c, c.h, c.w}, {c.k, c.c / c.p.groups, c.r, c.s}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(padded, IsOk());
  EXPECT_DOUBLE_EQ(padded->StageFlops(padded->output_ids()[0]), expected);
}

INSTANTIATE_TEST_SUITE_P(Cases, Conv2dNchwTest, ::testing::ValuesIn(Conv2dCases()),
                         [](const auto& info) { return info.param.name; });

TEST(Conv2dNchwStage, AxisNamesTagAndLazyPadding) {
  absl::StatusOr<ComputeDAG> dag = Conv2dNchwDAG({1, 4, 13, 11}, {6, 4, 3, 3}, ScalarType::kFloat32,
                                                 Params({1, 1}, {1, 1}, {1, 1}, 1));
  ASSERT_THAT(dag, IsOk());
  ASSERT_EQ(dag->num_stages(), 3);  // X, W, Y: no padded copy
  const Tensor& y = dag->stage(dag->output_ids()[0]);
  EXPECT_EQ(y->tag, "conv2d_nchw");
  std::vector<std::string> axes, raxes;
  for (const IterVar& iv : y->axes) axes.push_back(iv.name);
  for (const IterVar& iv : y->reduce_axes) raxes.push_back(iv.name);
  EXPECT_EQ(axes, (std::vector<std::string>{"n", "k", "h", "w"}));
  EXPECT_EQ(raxes, (std::vector<std::string>{"rc", "ry", "rx"}));
  // Padding is a Select in the body, taken lazily.
  EXPECT_THAT(ToString(y->body), HasSubstr("select("));
  EXPECT_TRUE(dag->NeedsMultiLevelTiling(dag->output_ids()[0]));
}

// ---------------------------------------------------------------------------------------------
// conv2d_nhwc

class Conv2dNhwcTest : public ::testing::TestWithParam<Conv2dCase> {};

TEST_P(Conv2dNhwcTest, ReferenceAndPointsMatchNaiveLoops) {
  const Conv2dCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = Conv2dNhwcDAG(
      {c.n, c.h, c.w, c.c}, {c.r, c.s, c.c / c.p.groups, c.k}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.n, c.oh, c.ow, c.k}, [&](const BufferMap& in) {
    return RefConv2dNhwc(in.at("X"), in.at("W"), c.p, c.oh, c.ow);
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, Conv2dNhwcTest, ::testing::ValuesIn(Conv2dCases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// depthwise_conv2d_nchw

struct DepthwiseCase {
  std::string name;
  int64_t n, c, h, w, multiplier, r, s;
  Conv2dParams p;
  int64_t oh, ow;
};
void PrintTo(const DepthwiseCase& c, std::ostream* os) { *os << c.name; }

class DepthwiseTest : public ::testing::TestWithParam<DepthwiseCase> {};

TEST_P(DepthwiseTest, ReferenceAndPointsMatchNaiveLoops) {
  const DepthwiseCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = DepthwiseConv2dNchwDAG(
      {c.n, c.c, c.h, c.w}, {c.c * c.multiplier, 1, c.r, c.s}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.n, c.c * c.multiplier, c.oh, c.ow}, [&](const BufferMap& in) {
    return RefDepthwise(in.at("X"), in.at("W"), c.p, c.oh, c.ow);
  });
}

TEST_P(DepthwiseTest, FlopsAreTwoNKOHOWRS) {
  const DepthwiseCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = DepthwiseConv2dNchwDAG(
      {c.n, c.c, c.h, c.w}, {c.c * c.multiplier, 1, c.r, c.s}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  EXPECT_DOUBLE_EQ(dag->Flops(), 2.0 * c.n * c.c * c.multiplier * c.oh * c.ow * c.r * c.s);
}

INSTANTIATE_TEST_SUITE_P(Cases, DepthwiseTest,
                         ::testing::Values(DepthwiseCase{"Basic", 1, 4, 13, 11, 1, 3, 3,
                                                         Params({1, 1}, {1, 1}, {1, 1}, 1), 13, 11},
                                           DepthwiseCase{"Multiplier2Stride2", 2, 3, 13, 11, 2, 3,
                                                         3, Params({2, 2}, {1, 1}, {1, 1}, 1), 7,
                                                         6},
                                           DepthwiseCase{"Dilation2NoPad", 1, 5, 9, 7, 3, 3, 2,
                                                         Params({1, 1}, {0, 0}, {2, 2}, 1), 5, 5},
                                           DepthwiseCase{"OneChannel", 1, 1, 1, 1, 1, 1, 1,
                                                         Params({1, 1}, {0, 0}, {1, 1}, 1), 1, 1}),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// conv1d

struct Conv1dCase {
  std::string name;
  int64_t n, c, l, k, s;
  Conv1dParams p;
  int64_t ol;
};
void PrintTo(const Conv1dCase& c, std::ostream* os) { *os << c.name; }

class Conv1dTest : public ::testing::TestWithParam<Conv1dCase> {};

TEST_P(Conv1dTest, ReferenceAndPointsMatchNaiveLoops) {
  const Conv1dCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag =
      Conv1dDAG({c.n, c.c, c.l}, {c.k, c.c / c.p.groups, c.s}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.n, c.k, c.ol},
                [&](const BufferMap& in) { return RefConv1d(in.at("X"), in.at("W"), c.p, c.ol); });
  EXPECT_DOUBLE_EQ(dag->Flops(), 2.0 * c.n * c.k * c.ol * (c.c / c.p.groups) * c.s);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, Conv1dTest,
    ::testing::Values(Conv1dCase{"Basic", 1, 4, 127, 6, 3, {1, 0, 1, 1}, 125},
                      Conv1dCase{"Stride2Pad2Dilation2", 2, 4, 33, 5, 3, {2, 2, 2, 1}, 17},
                      Conv1dCase{"Groups2Pad1", 1, 6, 7, 4, 5, {1, 1, 1, 2}, 5},
                      Conv1dCase{"AllOnes", 1, 1, 1, 1, 1, {1, 0, 1, 1}, 1}),
    [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// Errors.

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(Conv2dErrors, WrongRank) {
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13}, {6, 4, 3, 3}),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: X must have rank 4 ([N, C, H, W]), "
                                           "got [1, 4, 13]")));
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13, 11}, {6, 4, 3}),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: W must have rank 4 ([K, C/groups, R, "
                                           "S]), got [6, 4, 3]")));
  EXPECT_THAT(Conv2dNhwcDAG({1, 13, 11}, {3, 3, 4, 6}),
              StatusIs(kInvalid, HasSubstr("conv2d_nhwc: X must have rank 4 ([N, H, W, C])")));
  EXPECT_THAT(Conv1dDAG({1, 4, 13, 1}, {6, 4, 3}),
              StatusIs(kInvalid, HasSubstr("conv1d: X must have rank 3 ([N, C, L])")));
}

TEST(Conv2dErrors, NonPositiveExtent) {
  EXPECT_THAT(Conv2dNchwDAG({1, 0, 13, 11}, {6, 4, 3, 3}),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: X has non-positive extent 0 in "
                                           "dimension 1 ([1, 0, 13, 11])")));
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13, 11}, {6, 4, -3, 3}),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: W has non-positive extent -3")));
}

TEST(Conv2dErrors, StrideAndDilationBelowOne) {
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13, 11}, {6, 4, 3, 3}, ScalarType::kFloat32,
                            Params({0, 1}, {0, 0}, {1, 1}, 1)),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: height stride 0 must be at least 1")));
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13, 11}, {6, 4, 3, 3}, ScalarType::kFloat32,
                            Params({1, 1}, {0, 0}, {1, 0}, 1)),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: width dilation 0 must be at least 1")));
  EXPECT_THAT(Conv1dDAG({1, 4, 13}, {6, 4, 3}, ScalarType::kFloat32, {-1, 0, 1, 1}),
              StatusIs(kInvalid, HasSubstr("conv1d: length stride -1 must be at least 1")));
}

TEST(Conv2dErrors, NegativePadding) {
  EXPECT_THAT(Conv2dNhwcDAG({1, 13, 11, 4}, {3, 3, 4, 6}, ScalarType::kFloat32,
                            Params({1, 1}, {-1, 0}, {1, 1}, 1)),
              StatusIs(kInvalid, HasSubstr("conv2d_nhwc: height padding -1 is negative")));
}

TEST(Conv2dErrors, KernelLargerThanPaddedInput) {
  EXPECT_THAT(
      Conv2dNchwDAG({1, 4, 5, 5}, {6, 4, 7, 3}),
      StatusIs(kInvalid, HasSubstr("conv2d_nchw: kernel height 7 (dilation 1, effective 7) is "
                                   "larger than the padded input height 5 (input 5, padding 0)")));
  // Dilation makes a 3-wide kernel span 7 > 5 + 2·0.
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 5, 5}, {6, 4, 3, 3}, ScalarType::kFloat32,
                            Params({1, 1}, {0, 0}, {1, 3}, 1)),
              StatusIs(kInvalid, HasSubstr("kernel width 3 (dilation 3, effective 7) is larger "
                                           "than the padded input width 5")));
  // Padding makes it fit: 5 + 2·1 = 7.
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 5, 5}, {6, 4, 3, 3}, ScalarType::kFloat32,
                            Params({1, 1}, {1, 1}, {1, 3}, 1)),
              IsOk());
  EXPECT_THAT(Conv1dDAG({1, 4, 3}, {6, 4, 5}),
              StatusIs(kInvalid, HasSubstr("conv1d: kernel length 5")));
}

TEST(Conv2dErrors, ChannelsNotDivisibleByGroups) {
  EXPECT_THAT(Conv2dNchwDAG({1, 5, 13, 11}, {6, 2, 3, 3}, ScalarType::kFloat32,
                            Params({1, 1}, {0, 0}, {1, 1}, 2)),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: input channels 5 of X [1, 5, 13, 11] "
                                           "are not divisible by groups 2")));
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13, 11}, {5, 2, 3, 3}, ScalarType::kFloat32,
                            Params({1, 1}, {0, 0}, {1, 1}, 2)),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: output channels 5 of W [5, 2, 3, 3] "
                                           "are not divisible by groups 2")));
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13, 11}, {6, 4, 3, 3}, ScalarType::kFloat32,
                            Params({1, 1}, {0, 0}, {1, 1}, 0)),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: groups 0 must be at least 1")));
  EXPECT_THAT(Conv1dDAG({1, 6, 13}, {4, 2, 3}, ScalarType::kFloat32, {1, 0, 1, 4}),
              StatusIs(kInvalid, HasSubstr("conv1d: input channels 6 of X [1, 6, 13] are not "
                                           "divisible by groups 4")));
}

TEST(Conv2dErrors, WeightChannelMismatch) {
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13, 11}, {6, 3, 3, 3}, ScalarType::kFloat32,
                            Params({1, 1}, {0, 0}, {1, 1}, 2)),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: weight channel mismatch: W [6, 3, 3, 3] "
                                           "has 3 input channels per group, but X [1, 4, 13, 11] "
                                           "with groups 2 has 2")));
  EXPECT_THAT(Conv2dNhwcDAG({1, 13, 11, 4}, {3, 3, 2, 6}),
              StatusIs(kInvalid, HasSubstr("conv2d_nhwc: weight channel mismatch: W [3, 3, 2, 6] "
                                           "has 2 input channels per group")));
}

TEST(Conv2dErrors, BoolAndMixedDtypes) {
  EXPECT_THAT(Conv2dNchwDAG({1, 4, 13, 11}, {6, 4, 3, 3}, ScalarType::kBool),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: X has dtype bool")));
  absl::StatusOr<Tensor> x = Placeholder("X", {1, 4, 5, 5}, ScalarType::kFloat32);
  absl::StatusOr<Tensor> w = Placeholder("W", {2, 4, 3, 3}, ScalarType::kBFloat16);
  ASSERT_THAT(x, IsOk());
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(Conv2dNchw(*x, *w),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: X is float32 but W is bfloat16")));
}

TEST(DepthwiseErrors, WeightShape) {
  EXPECT_THAT(
      DepthwiseConv2dNchwDAG({1, 4, 13, 11}, {8, 2, 3, 3}),
      StatusIs(kInvalid, HasSubstr("depthwise_conv2d_nchw: weight channel mismatch: W "
                                   "[8, 2, 3, 3] must have extent 1 in dimension 1, got 2")));
  EXPECT_THAT(DepthwiseConv2dNchwDAG({1, 4, 13, 11}, {6, 1, 3, 3}),
              StatusIs(kInvalid, HasSubstr("depthwise_conv2d_nchw: weight channel mismatch: "
                                           "output channels 6 of W [6, 1, 3, 3] are not a multiple "
                                           "of the input channels 4 of X [1, 4, 13, 11]")));
  EXPECT_THAT(DepthwiseConv2dNchwDAG({1, 4, 3, 3}, {4, 1, 5, 5}),
              StatusIs(kInvalid, HasSubstr("depthwise_conv2d_nchw: kernel height 5")));
}

TEST(PaddedConvErrors, NameTheTwoStageOperator) {
  EXPECT_THAT(Conv2dNchwPaddedDAG({1, 4, 13, 11}, {6, 3, 3, 3}),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw_padded: weight channel mismatch")));
  EXPECT_THAT(Conv2dNchwPaddedDAG({1, 4, 13, 11}, {6, 4, 3, 3}, ScalarType::kFloat32,
                                  Params({1, 1}, {0, -2}, {1, 1}, 1)),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw_padded: width padding -2 is negative")));
}

// ---------------------------------------------------------------------------------------------
// Through the registry (attributes as text).

TEST(ConvRegistry, PerDimensionAttributesReachTheOperator) {
  OpArgs args;
  args.shapes = {{2, 4, 13, 11}, {4, 2, 3, 2}};
  args.attrs = {{"stride", "2,1"}, {"padding", "1,0"}, {"dilation", "1,2"}, {"groups", "2"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("conv2d_nchw", args);
  ASSERT_THAT(dag, IsOk());
  const Conv2dParams p = Params({2, 1}, {1, 0}, {1, 2}, 2);
  CheckOperator(*dag, {2, 4, 7, 9}, [&](const BufferMap& in) {
    return RefConv2dNchw(in.at("X"), in.at("W"), p, 7, 9);
  });
}

TEST(ConvRegistry, OneValueMeansBothDimensions) {
  OpArgs args;
  args.shapes = {{1, 13, 11, 3}, {3, 3, 3, 2}};
  args.attrs = {{"stride", "2"}, {"padding", "1"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("conv2d_nhwc", args);
  ASSERT_THAT(dag, IsOk());
  const Conv2dParams p = Params({2, 2}, {1, 1}, {1, 1}, 1);
  CheckOperator(*dag, {1, 7, 6, 2}, [&](const BufferMap& in) {
    return RefConv2dNhwc(in.at("X"), in.at("W"), p, 7, 6);
  });
}

TEST(ConvRegistry, Conv1dAndPaddedAndDepthwiseBuild) {
  OpArgs conv1d;
  conv1d.shapes = {{1, 4, 33}, {6, 2, 3}};
  conv1d.attrs = {{"stride", "2"}, {"padding", "1"}, {"dilation", "2"}, {"groups", "2"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("conv1d", conv1d);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {1, 6, 16}, [&](const BufferMap& in) {
    return RefConv1d(in.at("X"), in.at("W"), Conv1dParams{2, 1, 2, 2}, 16);
  });

  OpArgs padded;
  padded.shapes = {{1, 4, 13, 11}, {6, 4, 3, 3}};
  padded.attrs = {{"padding", "2,1"}};
  dag = BuildOp("conv2d_nchw_padded", padded);
  ASSERT_THAT(dag, IsOk());
  EXPECT_EQ(dag->num_stages(), 4);

  OpArgs depthwise;
  depthwise.shapes = {{1, 4, 13, 11}, {8, 1, 3, 3}};
  depthwise.attrs = {{"stride", "2"}};
  dag = BuildOp("depthwise_conv2d_nchw", depthwise);
  ASSERT_THAT(dag, IsOk());
  EXPECT_EQ(dag->stage(dag->output_ids()[0]).shape(), (std::vector<int64_t>{1, 8, 6, 5}));
}

TEST(ConvRegistry, BadWindowAttributes) {
  OpArgs args;
  args.shapes = {{1, 4, 13, 11}, {6, 4, 3, 3}};
  args.attrs = {{"stride", "2,2,2"}};
  EXPECT_THAT(BuildOp("conv2d_nchw", args),
              StatusIs(kInvalid, HasSubstr("attribute 'stride' of conv2d_nchw: expected 1 or 2 "
                                           "values (height,width), got 3")));
  args.attrs = {{"dilation", "0"}};
  EXPECT_THAT(BuildOp("conv2d_nchw", args),
              StatusIs(kInvalid, HasSubstr("conv2d_nchw: height dilation 0 must be at least 1")));
  args.attrs = {{"padding", "x"}};
  EXPECT_THAT(BuildOp("conv2d_nchw", args), StatusIs(kInvalid, HasSubstr("padding")));
}

}  // namespace
}  // namespace tilesearch::ir
