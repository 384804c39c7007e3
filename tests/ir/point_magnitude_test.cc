// Float64 point evaluation with the magnitude of the terms (ir::EvaluatePointWithMagnitude),
// against values computed by hand or by naive loops here: a matmul (M = Σ|a||b|), a cancellation
// sum(x) − sum(x) (value 0, M = 2Σ|x|), a mean, division, unary functions to first order, max /
// select on values and max / min reductions taking the larger M of their operands (a kink or a tie
// may flip the choice), a select on indices the taken branch's M, and an integer stage.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/status_matchers.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/reference.h"

namespace tilesearch::ir {
namespace {

using ::tilesearch::testing::Ok;
using Axes = std::vector<Expr>;

TEST(PointMagnitudeTest, MatmulMagnitudeIsSumOfAbsoluteProducts) {
  constexpr int64_t kM = 3, kK = 37, kN = 4;
  Tensor a = Ok(Placeholder("A", {kM, kK}));
  Tensor b = Ok(Placeholder("B", {kK, kN}));
  Tensor c = Ok(Reduce("C", {kM, kN}, ReduceKind::kSum, {kK}, [&](const Axes& ax, const Axes& r) {
    return a(ax[0], r[0]) * b(r[0], ax[1]);
  }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({c}));
  const BufferMap in = MakeRandomInputs(dag, 5);
  const std::vector<double>& av = in.at("A").data;
  const std::vector<double>& bv = in.at("B").data;
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double value = 0, magnitude = 0;
      for (int64_t k = 0; k < kK; ++k) {
        value += av[i * kK + k] * bv[k * kN + j];
        magnitude += std::fabs(av[i * kK + k]) * std::fabs(bv[k * kN + j]);
      }
      const PointValue v = Ok(EvaluatePointWithMagnitude(dag, dag.StageId("C"), {i, j}, in));
      EXPECT_NEAR(v.value, value, 1e-12);
      EXPECT_NEAR(v.magnitude, magnitude, 1e-12);
      EXPECT_GT(v.magnitude, std::fabs(v.value));  // random signs cancel
    }
  }
}

TEST(PointMagnitudeTest, CancellationKeepsTheMagnitudeOfBothSums) {
  constexpr int64_t kN = 50;
  Tensor x = Ok(Placeholder("X", {kN}));
  Tensor s1 = Ok(Reduce("S1", {1}, ReduceKind::kSum, {kN},
                        [&](const Axes&, const Axes& r) { return x(r[0]); }));
  Tensor s2 = Ok(Reduce("S2", {1}, ReduceKind::kSum, {kN},
                        [&](const Axes&, const Axes& r) { return x(r[0]); }));
  Tensor d = Ok(Compute("D", {1}, [&](const Axes& ax) { return s1(ax[0]) - s2(ax[0]); }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({d}));
  const BufferMap in = MakeRandomInputs(dag, 3);
  double abs_sum = 0;
  for (double v : in.at("X").data) abs_sum += std::fabs(v);
  const PointValue v = Ok(EvaluatePointWithMagnitude(dag, dag.StageId("D"), {0}, in));
  EXPECT_EQ(v.value, 0);
  EXPECT_NEAR(v.magnitude, 2 * abs_sum, 1e-12);
  EXPECT_GT(abs_sum, 10);  // 50 values uniform in [-1, 1)
}

TEST(PointMagnitudeTest, MeanDividesTheSumsMagnitudeByTheCount) {
  constexpr int64_t kN = 40;
  Tensor x = Ok(Placeholder("X", {kN}));
  Tensor s = Ok(Reduce("S", {1}, ReduceKind::kSum, {kN},
                       [&](const Axes&, const Axes& r) { return x(r[0]); }));
  Tensor m = Ok(Compute("M", {1}, [&](const Axes& ax) { return s(ax[0]) / 40.0; }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({m}));
  const BufferMap in = MakeRandomInputs(dag, 8);
  double sum = 0, abs_sum = 0;
  for (double v : in.at("X").data) {
    sum += v;
    abs_sum += std::fabs(v);
  }
  const PointValue v = Ok(EvaluatePointWithMagnitude(dag, dag.StageId("M"), {0}, in));
  EXPECT_NEAR(v.value, sum / 40, 1e-14);
  EXPECT_NEAR(v.magnitude, abs_sum / 40, 1e-14);
}

TEST(PointMagnitudeTest, DivisionUnaryMaxAndSelect) {
  Tensor a = Ok(Placeholder("A", {4}));
  Tensor b = Ok(Placeholder("B", {4}));
  Tensor q = Ok(Compute("Q", {4}, [&](const Axes& ax) { return a(ax[0]) / b(ax[0]); }));
  Tensor t = Ok(Compute("T", {4}, [&](const Axes& ax) { return Tanh(a(ax[0]) * 3.0); }));
  Tensor e = Ok(Compute("E", {4}, [&](const Axes& ax) { return Exp(a(ax[0]) - b(ax[0])); }));
  Tensor r = Ok(Compute("R", {4}, [&](const Axes& ax) { return Max(a(ax[0]), FloatConst(0)); }));
  Tensor s = Ok(Compute("S", {4}, [&](const Axes& ax) {
    return Select(a(ax[0]) > b(ax[0]), a(ax[0]) + b(ax[0]), b(ax[0]) * 2.0);
  }));
  Tensor p = Ok(Compute("P", {4}, [&](const Axes& ax) {
    return Select(ax[0] < IntConst(2), a(ax[0]) * 4.0, FloatConst(0));
  }));
  Tensor mx = Ok(Reduce("MX", {1}, ReduceKind::kMax, {4},
                        [&](const Axes&, const Axes& rr) { return a(rr[0]); }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({q, t, e, r, s, p, mx}));
  BufferMap in = MakeRandomInputs(dag, 1);
  in.at("A").data = {0.5, -2.0, 0.25, -0.75};
  in.at("B").data = {-0.25, 4.0, 0.5, -1.0};
  for (int64_t i = 0; i < 4; ++i) {
    const double av = in.at("A").data[i], bv = in.at("B").data[i];
    auto at = [&](const char* name) {
      return Ok(EvaluatePointWithMagnitude(dag, dag.StageId(name), {i}, in));
    };
    // a · (1/b): M(a) · (M(b)/b² + 1/|b|) = 2|a|/|b| for inputs.
    EXPECT_DOUBLE_EQ(at("Q").value, av / bv);
    EXPECT_DOUBLE_EQ(at("Q").magnitude, 2 * std::fabs(av) / std::fabs(bv));
    // tanh(3a): (1 − tanh²) · 3|a| + |tanh|.
    const double th = std::tanh(3 * av);
    EXPECT_DOUBLE_EQ(at("T").magnitude, (1 - th * th) * 3 * std::fabs(av) + std::fabs(th));
    // exp(a − b): e^(a−b) · (|a| + |b|) + e^(a−b).
    const double ex = std::exp(av - bv);
    EXPECT_DOUBLE_EQ(at("E").magnitude, ex * (std::fabs(av) + std::fabs(bv)) + ex);
    // relu: the chosen value, the larger M (the constant 0 has M 0): |a| also where a < 0.
    EXPECT_DOUBLE_EQ(at("R").value, std::max(av, 0.0));
    EXPECT_DOUBLE_EQ(at("R").magnitude, std::fabs(av));
    // select on values: the taken branch's value, the larger M of both branches.
    EXPECT_DOUBLE_EQ(at("S").value, av > bv ? av + bv : 2 * bv);
    EXPECT_DOUBLE_EQ(at("S").magnitude, std::max(std::fabs(av) + std::fabs(bv), 2 * std::fabs(bv)));
    // select on an index (padding): the taken branch's M only.
    EXPECT_DOUBLE_EQ(at("P").magnitude, i < 2 ? 4 * std::fabs(av) : 0.0);
  }
  // max reduction: the largest value, the largest |a| (2.0 at a = −2), not the chosen 0.5's.
  const PointValue m = Ok(EvaluatePointWithMagnitude(dag, dag.StageId("MX"), {0}, in));
  EXPECT_DOUBLE_EQ(m.value, 0.5);
  EXPECT_DOUBLE_EQ(m.magnitude, 2.0);
}

TEST(PointMagnitudeTest, EvaluateStageIsEveryPointInRowMajorOrder) {
  // A softmax over rows of 7: each element needs its row's max and sum (shared by the memo).
  Tensor x = Ok(Placeholder("X", {3, 7}));
  Tensor m = Ok(Reduce("M", {3}, ReduceKind::kMax, {7},
                       [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]); }));
  Tensor e =
      Ok(Compute("E", {3, 7}, [&](const Axes& ax) { return Exp(x(ax[0], ax[1]) - m(ax[0])); }));
  Tensor s = Ok(Reduce("S", {3}, ReduceKind::kSum, {7},
                       [&](const Axes& ax, const Axes& r) { return e(ax[0], r[0]); }));
  Tensor y = Ok(Compute("Y", {3, 7}, [&](const Axes& ax) { return e(ax[0], ax[1]) / s(ax[0]); }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({y}));
  const BufferMap in = MakeRandomInputs(dag, 4);
  const std::vector<double> all = Ok(EvaluateStage(dag, dag.StageId("Y"), in));
  ASSERT_EQ(all.size(), 21u);
  for (int64_t i = 0; i < 3; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < 7; ++j) mx = std::max(mx, in.at("X").data[i * 7 + j]);
    for (int64_t j = 0; j < 7; ++j) sum += std::exp(in.at("X").data[i * 7 + j] - mx);
    for (int64_t j = 0; j < 7; ++j) {
      EXPECT_NEAR(all[i * 7 + j], std::exp(in.at("X").data[i * 7 + j] - mx) / sum, 1e-15);
    }
  }
  EXPECT_FALSE(EvaluateStage(dag, 99, in).ok());
}

TEST(PointMagnitudeTest, IntegerStageMagnitudeIsItsValue) {
  Tensor x = Ok(Placeholder("X", {3}, ScalarType::kInt32));
  Tensor y = Ok(Compute(
      "Y", {3}, [&](const Axes& ax) { return x(ax[0]) * IntConst(-3, ScalarType::kInt32); }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({y}));
  BufferMap in = MakeRandomInputs(dag, 1);
  in.at("X").data = {2, -5, 0};
  for (int64_t i = 0; i < 3; ++i) {
    const PointValue v = Ok(EvaluatePointWithMagnitude(dag, dag.StageId("Y"), {i}, in));
    EXPECT_EQ(v.value, -3 * in.at("X").data[i]);
    EXPECT_EQ(v.magnitude, std::fabs(v.value));
  }
  EXPECT_EQ(Ok(EvaluatePoint(dag, dag.StageId("Y"), {1}, in)), 15);
}

}  // namespace
}  // namespace tilesearch::ir
