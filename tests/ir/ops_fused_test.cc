// dense_bias_relu, matmul_scale_residual and conv2d_bias_relu: the reference (naive loop nest
// run by the interpreter) and float64 point evaluation against Eigen (dense, matmul) or naive
// loops (conv) in double, on random inputs; stage structure; every input error.
#include <Eigen/Dense>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/fused.h"
#include "ir/ops/registry.h"
#include "tests/ir/ops_test_util.h"

namespace tilesearch::ir {
namespace {

using ops_test::CheckOperator;
using ::testing::HasSubstr;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;

ConstMap MapMatrix(const HostBuffer& b, int64_t rows, int64_t cols) {
  return ConstMap(b.data.data(), rows, cols);
}

std::vector<double> Flatten(const RowMat& m) {
  return std::vector<double>(m.data(), m.data() + m.size());
}

// ---------------------------------------------------------------------------------------------
// dense_bias_relu

struct DenseCase {
  int64_t m, n, k;
};
void PrintTo(const DenseCase& c, std::ostream* os) {
  *os << "M=" << c.m << " N=" << c.n << " K=" << c.k;
}

class DenseBiasReluTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseBiasReluTest, ReferenceAndPointsMatchEigen) {
  const DenseCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = DenseBiasReluDAG({c.m, c.k}, {c.n, c.k}, {c.n});
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.m, c.n}, [&](const BufferMap& in) {
    RowMat y = MapMatrix(in.at("X"), c.m, c.k) * MapMatrix(in.at("W"), c.n, c.k).transpose();
    y.rowwise() += Eigen::Map<const Eigen::RowVectorXd>(in.at("bias").data.data(), c.n);
    return Flatten(y.cwiseMax(0.0));
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, DenseBiasReluTest,
                         ::testing::Values(DenseCase{7, 9, 33}, DenseCase{1, 1, 1},
                                           DenseCase{17, 5, 127}, DenseCase{1, 13, 6}));

TEST(DenseBiasRelu, TwoStagesReductionThenEpilogue) {
  absl::StatusOr<ComputeDAG> dag = DenseBiasReluDAG({4, 6}, {5, 6}, {5});
  ASSERT_THAT(dag, IsOk());
  ASSERT_EQ(dag->num_stages(), 5);  // X, W, bias, dense, Y
  const int acc = dag->StageId("dense");
  const int out = dag->output_ids()[0];
  ASSERT_GE(acc, 0);
  EXPECT_EQ(dag->Kind(acc), StageKind::kReduction);
  EXPECT_NE(dag->Kind(out), StageKind::kReduction);
  EXPECT_EQ(dag->Consumers(acc), std::vector<int>{out});
  EXPECT_TRUE(dag->IsInlinable(out) || dag->Consumers(out).empty());
  EXPECT_DOUBLE_EQ(dag->StageFlops(acc), 2.0 * 4 * 5 * 6);
  // One add and one max per output element.
  EXPECT_DOUBLE_EQ(dag->StageFlops(out), 2.0 * 4 * 5);
}

TEST(DenseBiasReluErrors, InnerMismatchKeepsTheInnerMessage) {
  EXPECT_THAT(DenseBiasReluDAG({4, 3}, {5, 2}, {5}),
              StatusIs(kInvalid, HasSubstr("dense_bias_relu: dense: inner dimensions differ: X is "
                                           "[4, 3], W is [5, 2]")));
}

TEST(DenseBiasReluErrors, BiasShape) {
  EXPECT_THAT(DenseBiasReluDAG({4, 3}, {5, 3}, {6}),
              StatusIs(kInvalid, HasSubstr("dense_bias_relu: dense: bias has length 6 but W "
                                           "[5, 3] has 5 output features")));
  EXPECT_THAT(DenseBiasReluDAG({4, 3}, {5, 3}, {5, 1}),
              StatusIs(kInvalid, HasSubstr("dense_bias_relu: bias must have rank 1 ([N]), got "
                                           "[5, 1]")));
  EXPECT_THAT(DenseBiasReluDAG({4, 3}, {5, 3}, {0}),
              StatusIs(kInvalid, HasSubstr("dense_bias_relu: bias has non-positive extent 0")));
}

TEST(DenseBiasReluErrors, RankAndUndefinedBias) {
  EXPECT_THAT(DenseBiasReluDAG({4, 3, 1}, {5, 3}, {5}),
              StatusIs(kInvalid, HasSubstr("dense_bias_relu: X must have rank 2 ([M, K]), got "
                                           "[4, 3, 1]")));
  absl::StatusOr<Tensor> x = Placeholder("X", {4, 3});
  absl::StatusOr<Tensor> w = Placeholder("W", {5, 3});
  ASSERT_THAT(x, IsOk());
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(DenseBiasRelu(*x, *w, Tensor()),
              StatusIs(kInvalid, HasSubstr("dense_bias_relu: bias is undefined")));
}

// ---------------------------------------------------------------------------------------------
// matmul_scale_residual

struct ResidualCase {
  int64_t m, n, k;
  double scale;
};
void PrintTo(const ResidualCase& c, std::ostream* os) {
  *os << "M=" << c.m << " N=" << c.n << " K=" << c.k << " scale=" << c.scale;
}

class MatmulScaleResidualTest : public ::testing::TestWithParam<ResidualCase> {};

TEST_P(MatmulScaleResidualTest, ReferenceAndPointsMatchEigen) {
  const ResidualCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag =
      MatmulScaleResidualDAG({c.m, c.k}, {c.k, c.n}, {c.m, c.n}, ScalarType::kFloat32, c.scale);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.m, c.n}, [&](const BufferMap& in) {
    RowMat d = (MapMatrix(in.at("A"), c.m, c.k) * MapMatrix(in.at("B"), c.k, c.n)) * c.scale +
               MapMatrix(in.at("R"), c.m, c.n);
    return Flatten(d);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulScaleResidualTest,
                         ::testing::Values(ResidualCase{127, 7, 33, 0.5},
                                           ResidualCase{1, 1, 1, 1.0}, ResidualCase{5, 6, 7, -2.5},
                                           ResidualCase{9, 1, 127, 0.125}));

TEST(MatmulScaleResidual, EpilogueIsElementwise) {
  absl::StatusOr<ComputeDAG> dag = MatmulScaleResidualDAG({4, 6}, {6, 5}, {4, 5});
  ASSERT_THAT(dag, IsOk());
  ASSERT_EQ(dag->num_stages(), 5);  // A, B, R, C, D
  const int out = dag->output_ids()[0];
  EXPECT_EQ(dag->stage(out).name(), "D");
  EXPECT_EQ(dag->Kind(out), StageKind::kElementwise);
  EXPECT_EQ(dag->Kind(dag->StageId("C")), StageKind::kReduction);
}

TEST(MatmulScaleResidualErrors, ResidualShapeAndInnerMismatch) {
  EXPECT_THAT(MatmulScaleResidualDAG({7, 4}, {4, 6}, {7, 5}),
              StatusIs(kInvalid, HasSubstr("matmul_scale_residual: R is [7, 5] but A·B is "
                                           "[7, 6]")));
  EXPECT_THAT(MatmulScaleResidualDAG({7, 4}, {5, 6}, {7, 6}),
              StatusIs(kInvalid, HasSubstr("matmul_scale_residual: matmul: inner dimensions "
                                           "differ: A is [7, 4], B is [5, 6]")));
  EXPECT_THAT(MatmulScaleResidualDAG({7, 4}, {4, 6}, {42}),
              StatusIs(kInvalid, HasSubstr("matmul_scale_residual: R must have rank 2 ([M, N]), "
                                           "got [42]")));
}

TEST(MatmulScaleResidualErrors, NeedsFloat) {
  EXPECT_THAT(MatmulScaleResidualDAG({7, 4}, {4, 6}, {7, 6}, ScalarType::kInt32),
              StatusIs(kInvalid, HasSubstr("matmul_scale_residual: A has dtype int32; a float "
                                           "dtype is needed")));
}

// ---------------------------------------------------------------------------------------------
// conv2d_bias_relu

std::vector<double> RefConv2dBiasRelu(const HostBuffer& x, const HostBuffer& w, const HostBuffer& b,
                                      const Conv2dParams& p, int64_t oh, int64_t ow) {
  const int64_t cg = w.shape[1], k_ = w.shape[0], kg = k_ / p.groups;
  std::vector<double> out;
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t k = 0; k < k_; ++k)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = 0;
          for (int64_t rc = 0; rc < cg; ++rc)
            for (int64_t ry = 0; ry < w.shape[2]; ++ry)
              for (int64_t rx = 0; rx < w.shape[3]; ++rx) {
                int64_t ih = y * p.stride[0] - p.padding[0] + ry * p.dilation[0];
                int64_t iw = xo * p.stride[1] - p.padding[1] + rx * p.dilation[1];
                if (ih < 0 || ih >= x.shape[2] || iw < 0 || iw >= x.shape[3]) continue;
                acc += x.at({n, (k / kg) * cg + rc, ih, iw}) * w.at({k, rc, ry, rx});
              }
          out.push_back(std::max(acc + b.at({k}), 0.0));
        }
  return out;
}

struct ConvCase {
  std::string name;
  int64_t n, c, h, w, k, r, s;
  Conv2dParams p;
  int64_t oh, ow;  // worked out by hand
};
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

class Conv2dBiasReluTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dBiasReluTest, ReferenceAndPointsMatchNaiveLoops) {
  const ConvCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = Conv2dBiasReluDAG(
      {c.n, c.c, c.h, c.w}, {c.k, c.c / c.p.groups, c.r, c.s}, {c.k}, ScalarType::kFloat32, c.p);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.n, c.k, c.oh, c.ow}, [&](const BufferMap& in) {
    return RefConv2dBiasRelu(in.at("X"), in.at("W"), in.at("bias"), c.p, c.oh, c.ow);
  });
  const double conv_flops = 2.0 * c.n * c.k * c.oh * c.ow * (c.c / c.p.groups) * c.r * c.s;
  EXPECT_DOUBLE_EQ(dag->StageFlops(dag->StageId("conv")), conv_flops);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, Conv2dBiasReluTest,
    ::testing::Values(ConvCase{"Pad1", 1, 4, 13, 11, 6, 3, 3,
                               Conv2dParams{{1, 1}, {1, 1}, {1, 1}, 1}, 13, 11},
                      ConvCase{"Stride2Dilation2Groups2", 2, 4, 13, 11, 6, 3, 3,
                               Conv2dParams{{2, 2}, {2, 2}, {2, 2}, 2}, 7, 6},
                      ConvCase{"AllOnes", 1, 1, 1, 1, 1, 1, 1, Conv2dParams{}, 1, 1}),
    [](const auto& info) { return info.param.name; });

TEST(Conv2dBiasReluErrors, BiasShape) {
  EXPECT_THAT(Conv2dBiasReluDAG({1, 4, 13, 11}, {6, 4, 3, 3}, {5}),
              StatusIs(kInvalid, HasSubstr("conv2d_bias_relu: bias has length 5 but W "
                                           "[6, 4, 3, 3] has 6 output channels")));
  EXPECT_THAT(Conv2dBiasReluDAG({1, 4, 13, 11}, {6, 4, 3, 3}, {1, 6}),
              StatusIs(kInvalid, HasSubstr("conv2d_bias_relu: bias must have rank 1 ([K]), got "
                                           "[1, 6]")));
}

TEST(Conv2dBiasReluErrors, ConvolutionErrorsKeepTheInnerMessage) {
  EXPECT_THAT(Conv2dBiasReluDAG({1, 4, 13, 11}, {6, 3, 3, 3}, {6}, ScalarType::kFloat32,
                                Conv2dParams{{1, 1}, {0, 0}, {1, 1}, 2}),
              StatusIs(kInvalid, HasSubstr("conv2d_bias_relu: conv2d_nchw: weight channel "
                                           "mismatch")));
  EXPECT_THAT(Conv2dBiasReluDAG({1, 4, 13, 11}, {6, 4, 3, 3}, {6}, ScalarType::kFloat32,
                                Conv2dParams{{0, 1}, {0, 0}, {1, 1}, 1}),
              StatusIs(kInvalid, HasSubstr("conv2d_bias_relu: conv2d_nchw: height stride 0")));
  EXPECT_THAT(Conv2dBiasReluDAG({1, 4, 13}, {6, 4, 3, 3}, {6}),
              StatusIs(kInvalid, HasSubstr("conv2d_bias_relu: X must have rank 4")));
}

// ---------------------------------------------------------------------------------------------
// Through the registry.

TEST(FusedRegistry, ScaleAttributeReachesTheEpilogue) {
  OpArgs args;
  args.shapes = {{9, 5}, {5, 4}, {9, 4}};
  args.attrs = {{"scale", "0.25"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("matmul_scale_residual", args);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {9, 4}, [&](const BufferMap& in) {
    RowMat d = (MapMatrix(in.at("A"), 9, 5) * MapMatrix(in.at("B"), 5, 4)) * 0.25 +
               MapMatrix(in.at("R"), 9, 4);
    return Flatten(d);
  });
  args.attrs = {{"scale", "abc"}};
  EXPECT_THAT(BuildOp("matmul_scale_residual", args), StatusIs(kInvalid, HasSubstr("scale")));
}

TEST(FusedRegistry, ConvAndDenseBuild) {
  OpArgs conv;
  conv.shapes = {{1, 4, 13, 11}, {6, 2, 3, 3}, {6}};
  conv.attrs = {{"stride", "2"}, {"padding", "1"}, {"groups", "2"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("conv2d_bias_relu", conv);
  ASSERT_THAT(dag, IsOk());
  const Conv2dParams p{{2, 2}, {1, 1}, {1, 1}, 2};
  CheckOperator(*dag, {1, 6, 7, 6}, [&](const BufferMap& in) {
    return RefConv2dBiasRelu(in.at("X"), in.at("W"), in.at("bias"), p, 7, 6);
  });

  OpArgs dense;
  dense.shapes = {{3, 4}, {5, 4}, {5}};
  dag = BuildOp("dense_bias_relu", dense);
  ASSERT_THAT(dag, IsOk());
  EXPECT_EQ(dag->num_stages(), 5);
}

}  // namespace
}  // namespace tilesearch::ir
