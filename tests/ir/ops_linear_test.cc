// matmul, batch_matmul, dense and gemv: the reference (naive loop nest run by the interpreter) and
// float64 point evaluation against Eigen in double, on random inputs; and every input error.
#include <Eigen/Dense>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "ir/ops/registry.h"
#include "tests/ir/ops_test_util.h"

namespace tilesearch::ir {
namespace {

using ops_test::CheckOperator;
using ::testing::HasSubstr;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;

ConstMap MapMatrix(const HostBuffer& b, int64_t offset, int64_t rows, int64_t cols) {
  return ConstMap(b.data.data() + offset, rows, cols);
}

std::vector<double> Flatten(const RowMat& m) {
  return std::vector<double>(m.data(), m.data() + m.size());
}

double GeluRef(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// ---------------------------------------------------------------------------------------------
// matmul

struct MatmulCase {
  int64_t m, n, k;
  bool ta, tb;
};
void PrintTo(const MatmulCase& c, std::ostream* os) {
  *os << "M=" << c.m << " N=" << c.n << " K=" << c.k << " ta=" << c.ta << " tb=" << c.tb;
}

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulTest, ReferenceAndPointsMatchEigen) {
  const MatmulCase c = GetParam();
  std::vector<int64_t> a_shape =
      c.ta ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k};
  std::vector<int64_t> b_shape =
      c.tb ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
  absl::StatusOr<ComputeDAG> dag =
      MatmulDAG(a_shape, b_shape, ScalarType::kFloat32, MatmulOptions{c.ta, c.tb});
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.m, c.n}, [&](const BufferMap& in) {
    ConstMap a = MapMatrix(in.at("A"), 0, a_shape[0], a_shape[1]);
    ConstMap b = MapMatrix(in.at("B"), 0, b_shape[0], b_shape[1]);
    RowMat lhs = c.ta ? RowMat(a.transpose()) : RowMat(a);
    RowMat rhs = c.tb ? RowMat(b.transpose()) : RowMat(b);
    return Flatten(lhs * rhs);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulTest,
    ::testing::Values(MatmulCase{127, 7, 33, false, false}, MatmulCase{1, 1, 1, false, false},
                      MatmulCase{1, 7, 5, false, false}, MatmulCase{7, 1, 127, false, false},
                      MatmulCase{13, 9, 17, true, false}, MatmulCase{13, 9, 17, false, true},
                      MatmulCase{5, 6, 7, true, true}));

TEST(MatmulStage, HasNamedAxesTagAndTwoMnkFlops) {
  absl::StatusOr<ComputeDAG> dag = MatmulDAG({12, 5}, {5, 9});
  ASSERT_THAT(dag, IsOk());
  const Tensor& c = dag->stage(dag->output_ids()[0]);
  EXPECT_EQ(c.name(), "C");
  EXPECT_EQ(c->tag, "matmul");
  ASSERT_EQ(c->axes.size(), 2u);
  EXPECT_EQ(c->axes[0].name, "i");
  EXPECT_EQ(c->axes[1].name, "j");
  ASSERT_EQ(c->reduce_axes.size(), 1u);
  EXPECT_EQ(c->reduce_axes[0].name, "k");
  EXPECT_EQ(c->reduce_axes[0].extent, 5);
  EXPECT_EQ(c->reduce, ReduceKind::kSum);
  EXPECT_DOUBLE_EQ(dag->Flops(), 2.0 * 12 * 9 * 5);
  EXPECT_TRUE(dag->NeedsMultiLevelTiling(dag->output_ids()[0]));
}

TEST(MatmulErrors, InnerDimensionsDifferGivesBothShapes) {
  EXPECT_THAT(MatmulDAG({64, 32}, {31, 16}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("matmul: inner dimensions differ: A is [64, 32], B is [31, 16]")));
}

TEST(MatmulErrors, InnerDimensionsDifferWithTransposes) {
  // A given as [K, M] = [32, 64]: K = 32; B given as [N, K] = [16, 31]: K = 31.
  EXPECT_THAT(MatmulDAG({32, 64}, {16, 31}, ScalarType::kFloat32, {true, true}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("inner dimensions differ: A is [32, 64], B is [16, 31]")));
  // Without transposes these shapes would be wrong; with transpose_a they fit.
  EXPECT_THAT(MatmulDAG({32, 64}, {32, 16}, ScalarType::kFloat32, {true, false}), IsOk());
}

TEST(MatmulErrors, WrongRank) {
  EXPECT_THAT(MatmulDAG({2, 3, 4}, {4, 5}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("matmul: A must have rank 2 ([M, K]), got [2, 3, 4]")));
  EXPECT_THAT(MatmulDAG({2, 3}, {3}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("matmul: B must have rank 2 ([K, N]), got [3]")));
}

TEST(MatmulErrors, NonPositiveExtent) {
  EXPECT_THAT(MatmulDAG({4, 3}, {3, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("matmul: B has non-positive extent 0 in dimension 1 ([3, 0])")));
  EXPECT_THAT(MatmulDAG({-2, 3}, {3, 5}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("matmul: A has non-positive extent -2 in dimension 0")));
}

TEST(MatmulErrors, BoolDtype) {
  EXPECT_THAT(MatmulDAG({4, 3}, {3, 2}, ScalarType::kBool),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("matmul: A has dtype bool")));
}

TEST(MatmulErrors, TensorsOfDifferentDtypes) {
  absl::StatusOr<Tensor> a = Placeholder("A", {4, 3}, ScalarType::kFloat32);
  absl::StatusOr<Tensor> b = Placeholder("B", {3, 2}, ScalarType::kFloat16);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT(Matmul(*a, *b), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("matmul: A is float32 but B is float16")));
}

TEST(MatmulErrors, UndefinedTensor) {
  absl::StatusOr<Tensor> a = Placeholder("A", {4, 3});
  ASSERT_THAT(a, IsOk());
  EXPECT_THAT(Matmul(*a, Tensor()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("matmul: B is undefined")));
}

// ---------------------------------------------------------------------------------------------
// batch_matmul

struct BatchMatmulCase {
  int64_t batch, m, n, k;
  bool ta, tb;
};
void PrintTo(const BatchMatmulCase& c, std::ostream* os) {
  *os << "B=" << c.batch << " M=" << c.m << " N=" << c.n << " K=" << c.k << " ta=" << c.ta
      << " tb=" << c.tb;
}

class BatchMatmulTest : public ::testing::TestWithParam<BatchMatmulCase> {};

TEST_P(BatchMatmulTest, ReferenceAndPointsMatchEigen) {
  const BatchMatmulCase c = GetParam();
  std::vector<int64_t> a_shape =
      c.ta ? std::vector<int64_t>{c.batch, c.k, c.m} : std::vector<int64_t>{c.batch, c.m, c.k};
  std::vector<int64_t> b_shape =
      c.tb ? std::vector<int64_t>{c.batch, c.n, c.k} : std::vector<int64_t>{c.batch, c.k, c.n};
  absl::StatusOr<ComputeDAG> dag =
      BatchMatmulDAG(a_shape, b_shape, ScalarType::kFloat32, MatmulOptions{c.ta, c.tb});
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.batch, c.m, c.n}, [&](const BufferMap& in) {
    std::vector<double> out;
    for (int64_t bi = 0; bi < c.batch; ++bi) {
      ConstMap a = MapMatrix(in.at("A"), bi * c.m * c.k, a_shape[1], a_shape[2]);
      ConstMap b = MapMatrix(in.at("B"), bi * c.k * c.n, b_shape[1], b_shape[2]);
      RowMat lhs = c.ta ? RowMat(a.transpose()) : RowMat(a);
      RowMat rhs = c.tb ? RowMat(b.transpose()) : RowMat(b);
      std::vector<double> part = Flatten(lhs * rhs);
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchMatmulTest,
                         ::testing::Values(BatchMatmulCase{3, 7, 5, 9, false, false},
                                           BatchMatmulCase{1, 1, 1, 1, false, false},
                                           BatchMatmulCase{2, 13, 7, 11, true, true},
                                           BatchMatmulCase{2, 6, 5, 4, true, false},
                                           BatchMatmulCase{4, 1, 6, 3, false, true}));

TEST(BatchMatmulStage, AxesAndFlops) {
  absl::StatusOr<ComputeDAG> dag = BatchMatmulDAG({3, 4, 5}, {3, 5, 6});
  ASSERT_THAT(dag, IsOk());
  const Tensor& c = dag->stage(dag->output_ids()[0]);
  ASSERT_EQ(c->axes.size(), 3u);
  EXPECT_EQ(c->axes[0].name, "b");
  EXPECT_EQ(c->tag, "batch_matmul");
  EXPECT_DOUBLE_EQ(dag->Flops(), 2.0 * 3 * 4 * 6 * 5);
}

TEST(BatchMatmulErrors, BatchSizesDiffer) {
  EXPECT_THAT(
      BatchMatmulDAG({2, 4, 5}, {3, 5, 6}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("batch_matmul: batch sizes differ: A is [2, 4, 5], B is [3, 5, 6]")));
}

TEST(BatchMatmulErrors, InnerDimensionsDiffer) {
  EXPECT_THAT(BatchMatmulDAG({2, 4, 5}, {2, 6, 7}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("batch_matmul: inner dimensions differ: A is [2, 4, 5], "
                                 "B is [2, 6, 7]")));
}

TEST(BatchMatmulErrors, WrongRankAndExtent) {
  EXPECT_THAT(BatchMatmulDAG({4, 5}, {2, 5, 7}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("batch_matmul: A must have rank 3 ([B, M, K]), got [4, 5]")));
  EXPECT_THAT(BatchMatmulDAG({2, 4, 5}, {2, 5, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("batch_matmul: B has non-positive extent 0 in dimension 2")));
}

// ---------------------------------------------------------------------------------------------
// dense

struct DenseCase {
  int64_t m, n, k;
  bool bias;
  Activation activation;
};
void PrintTo(const DenseCase& c, std::ostream* os) {
  *os << "M=" << c.m << " N=" << c.n << " K=" << c.k << " bias=" << c.bias
      << " activation=" << ActivationName(c.activation);
}

class DenseTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseTest, ReferenceAndPointsMatchEigen) {
  const DenseCase c = GetParam();
  std::optional<std::vector<int64_t>> bias_shape;
  if (c.bias) bias_shape = std::vector<int64_t>{c.n};
  absl::StatusOr<ComputeDAG> dag =
      DenseDAG({c.m, c.k}, {c.n, c.k}, bias_shape, ScalarType::kFloat32, c.activation);
  ASSERT_THAT(dag, IsOk());
  const bool epilogue = c.bias || c.activation != Activation::kNone;
  EXPECT_EQ(dag->num_stages(), (c.bias ? 3 : 2) + 1 + (epilogue ? 1 : 0));
  CheckOperator(*dag, {c.m, c.n}, [&](const BufferMap& in) {
    ConstMap x = MapMatrix(in.at("X"), 0, c.m, c.k);
    ConstMap w = MapMatrix(in.at("W"), 0, c.n, c.k);
    RowMat y = x * w.transpose();
    if (c.bias) {
      Eigen::Map<const Eigen::RowVectorXd> b(in.at("bias").data.data(), c.n);
      y.rowwise() += b;
    }
    if (c.activation == Activation::kRelu) y = y.cwiseMax(0.0);
    if (c.activation == Activation::kGelu) y = y.unaryExpr(&GeluRef);
    return Flatten(y);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, DenseTest,
                         ::testing::Values(DenseCase{7, 9, 33, false, Activation::kNone},
                                           DenseCase{1, 1, 1, false, Activation::kNone},
                                           DenseCase{7, 9, 33, true, Activation::kNone},
                                           DenseCase{17, 1, 5, true, Activation::kRelu},
                                           DenseCase{6, 11, 13, false, Activation::kRelu},
                                           DenseCase{5, 8, 127, false, Activation::kGelu},
                                           DenseCase{5, 8, 9, true, Activation::kGelu}));

TEST(DenseStage, EpilogueIsElementwiseAfterTheReduction) {
  absl::StatusOr<ComputeDAG> dag =
      DenseDAG({4, 6}, {5, 6}, std::vector<int64_t>{5}, ScalarType::kFloat32, Activation::kRelu);
  ASSERT_THAT(dag, IsOk());
  const int out = dag->output_ids()[0];
  EXPECT_EQ(dag->stage(out).name(), "Y");
  EXPECT_EQ(dag->Kind(out), StageKind::kInjective);  // bias[j] is a broadcast read
  const int acc = dag->StageId("dense");
  ASSERT_GE(acc, 0);
  EXPECT_EQ(dag->Kind(acc), StageKind::kReduction);
  EXPECT_DOUBLE_EQ(dag->StageFlops(acc), 2.0 * 4 * 5 * 6);
}

TEST(DenseErrors, InnerDimensionsDiffer) {
  EXPECT_THAT(DenseDAG({4, 6}, {5, 7}, std::nullopt),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dense: inner dimensions differ: X is [4, 6], W is [5, 7]")));
}

TEST(DenseErrors, BiasLengthAndRank) {
  EXPECT_THAT(DenseDAG({4, 6}, {5, 6}, std::vector<int64_t>{4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dense: bias has length 4 but W [5, 6] has 5 output features")));
  EXPECT_THAT(DenseDAG({4, 6}, {5, 6}, std::vector<int64_t>{1, 5}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dense: bias must have rank 1 ([N]), got [1, 5]")));
}

TEST(DenseErrors, WrongRankAndExtent) {
  EXPECT_THAT(DenseDAG({4}, {5, 4}, std::nullopt),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dense: X must have rank 2 ([M, K]), got [4]")));
  EXPECT_THAT(DenseDAG({4, 3}, {0, 3}, std::nullopt),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dense: W has non-positive extent 0 in dimension 0")));
}

TEST(DenseErrors, GeluNeedsFloat) {
  EXPECT_THAT(DenseDAG({4, 3}, {2, 3}, std::nullopt, ScalarType::kInt32, Activation::kGelu),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dense: X (gelu activation) has dtype int32; a float dtype")));
}

TEST(DenseErrors, UnknownActivation) {
  EXPECT_THAT(
      ParseActivation("dense", "swish"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("dense: unknown activation 'swish' (expected none, relu or gelu)")));
}

// ---------------------------------------------------------------------------------------------
// gemv

struct GemvCase {
  int64_t m, k;
};
void PrintTo(const GemvCase& c, std::ostream* os) { *os << "M=" << c.m << " K=" << c.k; }

class GemvTest : public ::testing::TestWithParam<GemvCase> {};

TEST_P(GemvTest, ReferenceAndPointsMatchEigen) {
  const GemvCase c = GetParam();
  absl::StatusOr<ComputeDAG> dag = GemvDAG({c.m, c.k}, {c.k});
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {c.m}, [&](const BufferMap& in) {
    ConstMap a = MapMatrix(in.at("A"), 0, c.m, c.k);
    Eigen::Map<const Eigen::VectorXd> x(in.at("x").data.data(), c.k);
    Eigen::VectorXd y = a * x;
    return std::vector<double>(y.data(), y.data() + y.size());
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvTest,
                         ::testing::Values(GemvCase{127, 33}, GemvCase{1, 1}, GemvCase{7, 127},
                                           GemvCase{1, 9}));

TEST(GemvErrors, InnerDimensionsDifferAndRanks) {
  EXPECT_THAT(GemvDAG({8, 5}, {6}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gemv: inner dimensions differ: A is [8, 5], x is [6]")));
  EXPECT_THAT(GemvDAG({8, 5}, {5, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gemv: x must have rank 1 ([K]), got [5, 1]")));
  EXPECT_THAT(GemvDAG({8}, {8}), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("gemv: A must have rank 2 ([M, K]), got [8]")));
}

// ---------------------------------------------------------------------------------------------
// Through the registry (attributes as text).

TEST(LinearRegistry, MatmulTransposeAttributesReachTheOperator) {
  OpArgs args;
  args.shapes = {{13, 9}, {13, 17}};  // A as [K, M]
  args.attrs = {{"transpose_a", "true"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("matmul", args);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {9, 17}, [&](const BufferMap& in) {
    ConstMap a = MapMatrix(in.at("A"), 0, 13, 9);
    ConstMap b = MapMatrix(in.at("B"), 0, 13, 17);
    return Flatten(a.transpose() * b);
  });
}

TEST(LinearRegistry, DenseWithBiasAndGeluFromAttributes) {
  OpArgs args;
  args.shapes = {{3, 4}, {5, 4}, {5}};
  args.attrs = {{"bias", "true"}, {"activation", "gelu"}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("dense", args);
  ASSERT_THAT(dag, IsOk());
  CheckOperator(*dag, {3, 5}, [&](const BufferMap& in) {
    ConstMap x = MapMatrix(in.at("X"), 0, 3, 4);
    ConstMap w = MapMatrix(in.at("W"), 0, 5, 4);
    Eigen::Map<const Eigen::RowVectorXd> b(in.at("bias").data.data(), 5);
    RowMat y = x * w.transpose();
    y.rowwise() += b;
    return Flatten(y.unaryExpr(&GeluRef));
  });
}

TEST(LinearRegistry, DenseBiasInputFollowsTheBiasAttribute) {
  OpArgs args;
  args.shapes = {{3, 4}, {5, 4}};
  absl::StatusOr<ComputeDAG> dag = BuildOp("dense", args);
  ASSERT_THAT(dag, IsOk());
  EXPECT_EQ(dag->num_stages(), 3);  // X, W, Y
  args.attrs = {{"bias", "true"}};
  EXPECT_THAT(BuildOp("dense", args), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("dense: expected 3 input shapes, got 2")));
  args.shapes = {{3, 4}, {5, 4}, {5}};
  args.attrs = {};
  EXPECT_THAT(BuildOp("dense", args), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("dense: expected 2 input shapes, got 3")));
}

TEST(LinearRegistry, BadAttributeValuesAreReported) {
  OpArgs args;
  args.shapes = {{3, 4}, {5, 4}, {5}};
  args.attrs = {{"bias", "true"}, {"activation", "tanh"}};
  EXPECT_THAT(BuildOp("dense", args), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("dense: unknown activation 'tanh'")));
  OpArgs gemv;
  gemv.shapes = {{3, 4}, {5}};
  EXPECT_THAT(BuildOp("gemv", gemv),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gemv: inner dimensions differ: A is [3, 4], x is [5]")));
}

}  // namespace
}  // namespace tilesearch::ir
