// Reference results of a ComputeDAG: random inputs, the naive program through the interpreter and
// float64 point evaluation, against a softmax written as naive C++ loops in double.
#include "ir/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

using Axes = std::vector<Expr>;

using ::tilesearch::testing::Ok;

constexpr int64_t kRows = 5, kCols = 11;

// Softmax over rows: M = max_j X, E = exp(X - M), S = sum_j E, Y = E / S (output).
ComputeDAG Softmax() {
  Tensor x = Ok(Placeholder("X", {kRows, kCols}));
  Tensor m = Ok(Reduce("M", {kRows}, ReduceKind::kMax, {kCols},
                       [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]); }));
  Tensor e = Ok(Compute("E", {kRows, kCols},
                        [&](const Axes& ax) { return Exp(x(ax[0], ax[1]) - m(ax[0])); }));
  Tensor s = Ok(Reduce("S", {kRows}, ReduceKind::kSum, {kCols},
                       [&](const Axes& ax, const Axes& r) { return e(ax[0], r[0]); }));
  Tensor y =
      Ok(Compute("Y", {kRows, kCols}, [&](const Axes& ax) { return e(ax[0], ax[1]) / s(ax[0]); }));
  return Ok(ComputeDAG::Create({y}));
}

// The same softmax in double.
std::vector<double> NaiveSoftmax(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < kRows; ++i) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < kCols; ++j) mx = std::max(mx, x[i * kCols + j]);
    double sum = 0;
    for (int64_t j = 0; j < kCols; ++j) sum += std::exp(x[i * kCols + j] - mx);
    for (int64_t j = 0; j < kCols; ++j) y[i * kCols + j] = std::exp(x[i * kCols + j] - mx) / sum;
  }
  return y;
}

TEST(ReferenceTest, RandomInputsAreSeededPerInputAndInRange) {
  Tensor a = Ok(Placeholder("A", {3, 4}));
  Tensor b = Ok(Placeholder("B", {3, 4}));
  Tensor c =
      Ok(Compute("C", {3, 4}, [&](const Axes& ax) { return a(ax[0], ax[1]) + b(ax[0], ax[1]); }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({c}));
  const BufferMap inputs = MakeRandomInputs(dag, 42);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_NE(inputs.at("A").data, inputs.at("B").data);
  EXPECT_EQ(MakeRandomInputs(dag, 42).at("A").data, inputs.at("A").data);
  EXPECT_NE(MakeRandomInputs(dag, 43).at("A").data, inputs.at("A").data);
  // Seed + index: the second input of seed 42 is the first input of seed 43.
  const std::string first = dag.stage(dag.input_ids()[0]).name();
  const std::string second = dag.stage(dag.input_ids()[1]).name();
  EXPECT_EQ(MakeRandomInputs(dag, 43).at(first).data, inputs.at(second).data);
  for (const auto& [name, buffer] : inputs) {
    EXPECT_EQ(buffer.shape, (std::vector<int64_t>{3, 4}));
    for (double v : buffer.data) {
      EXPECT_GE(v, -1.0);
      EXPECT_LT(v, 1.0);
      EXPECT_EQ(v, static_cast<float>(v));  // rounded to float32
    }
  }
}

TEST(ReferenceTest, SoftmaxMatchesNaiveLoops) {
  const ComputeDAG dag = Softmax();
  const BufferMap inputs = MakeRandomInputs(dag, 1);
  const std::vector<double> expected = NaiveSoftmax(inputs.at("X").data);
  for (Precision p : {Precision::kNative, Precision::kFloat64}) {
    const BufferMap outputs = Ok(RunReference(dag, inputs, p));
    ASSERT_EQ(outputs.size(), 1u);
    const HostBuffer& y = outputs.at("Y");
    EXPECT_EQ(y.shape, (std::vector<int64_t>{kRows, kCols}));
    for (size_t e = 0; e < expected.size(); ++e) {
      EXPECT_NEAR(y.data[e], expected[e], 1e-6) << e;
    }
  }
}

TEST(ReferenceTest, EvaluatePointMatchesNaiveLoopsInDouble) {
  const ComputeDAG dag = Softmax();
  const BufferMap inputs = MakeRandomInputs(dag, 2);
  const std::vector<double> x = inputs.at("X").data;
  const std::vector<double> expected = NaiveSoftmax(x);
  const int y = dag.StageId("Y");
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kCols; j += 3) {
      const double v = Ok(EvaluatePoint(dag, y, {i, j}, inputs));
      EXPECT_NEAR(v, expected[i * kCols + j], 1e-14) << i << ", " << j;
    }
  }
  // An intermediate reduction and a placeholder.
  double mx = -INFINITY;
  for (int64_t j = 0; j < kCols; ++j) mx = std::max(mx, x[2 * kCols + j]);
  EXPECT_EQ(Ok(EvaluatePoint(dag, dag.StageId("M"), {2}, inputs)), mx);
  EXPECT_EQ(Ok(EvaluatePoint(dag, dag.StageId("X"), {4, 10}, inputs)), x[4 * kCols + 10]);
}

// `steps` counts stage bodies: Y[i, j] evaluates its own body once, E[i, j] and the other
// kCols - 1 elements E[i, *] that S[i] sums once each (memoized), and M[i] and S[i] kCols reduce
// iterations each: 1 + 1 + (kCols - 1) + 2 kCols = 1 + 3 kCols. An input costs nothing.
TEST(ReferenceTest, EvaluatePointCountsStageBodies) {
  const ComputeDAG dag = Softmax();
  const BufferMap inputs = MakeRandomInputs(dag, 3);
  int64_t steps = -1;
  Ok(EvaluatePoint(dag, dag.StageId("Y"), {1, 4}, inputs, &steps));
  EXPECT_EQ(steps, 1 + 3 * kCols);
  Ok(EvaluatePoint(dag, dag.StageId("M"), {0}, inputs, &steps));
  EXPECT_EQ(steps, kCols);
  Ok(EvaluatePoint(dag, dag.StageId("X"), {0, 0}, inputs, &steps));
  EXPECT_EQ(steps, 0);
}

TEST(ReferenceTest, EvaluatePointEvaluatesOnlyTheTakenSelectBranch) {
  // P[i] = i >= 1 ? X[i - 1] : 0 (a shift with padding); X[-1] would be out of range.
  Tensor x = Ok(Placeholder("X", {4}));
  Tensor p = Ok(Compute("P", {5}, [&](const Axes& ax) {
    return Select(ax[0] >= IntConst(1), x(Min(ax[0] - IntConst(1), IntConst(3))), FloatConst(0));
  }));
  const ComputeDAG dag = Ok(ComputeDAG::Create({p}));
  const BufferMap inputs = MakeRandomInputs(dag, 3);
  EXPECT_EQ(Ok(EvaluatePoint(dag, dag.StageId("P"), {0}, inputs)), 0.0);
  EXPECT_EQ(Ok(EvaluatePoint(dag, dag.StageId("P"), {3}, inputs)), inputs.at("X").data[2]);
}

TEST(ReferenceTest, EvaluatePointErrors) {
  const ComputeDAG dag = Softmax();
  const BufferMap inputs = MakeRandomInputs(dag, 4);
  const int y = dag.StageId("Y");
  EXPECT_THAT(EvaluatePoint(dag, 99, {0, 0}, inputs),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stage id 99 out of range")));
  EXPECT_THAT(EvaluatePoint(dag, -1, {0, 0}, inputs),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stage id -1 out of range")));
  EXPECT_THAT(EvaluatePoint(dag, y, {0}, inputs),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("index of rank 1 for stage 'Y' of rank 2")));
  EXPECT_THAT(EvaluatePoint(dag, y, {0, kCols}, inputs),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("index 11 out of range [0, 11) in dimension 1 of stage 'Y'")));
  EXPECT_THAT(EvaluatePoint(dag, y, {0, 0}, BufferMap{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing input 'X'")));
}

TEST(ReferenceTest, RunReferenceErrors) {
  const ComputeDAG dag = Softmax();
  EXPECT_THAT(RunReference(dag, BufferMap{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing input 'X'")));
  BufferMap wrong;
  wrong["X"] = HostBuffer::Zeros(ScalarType::kFloat32, {kRows, kCols + 1});
  EXPECT_THAT(RunReference(dag, wrong), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 HasSubstr("input 'X' is float32 [5, 12]")));
}

// A generated input (HostBuffer::source) holds no data: point evaluation reads exactly the values
// the source gives (here the same numbers as a held buffer, through an independent source that
// counts its calls), and whole-program interpretation refuses it.
class VectorSource : public ElementSource {
 public:
  explicit VectorSource(std::vector<double> values) : values_(std::move(values)) {}
  void Fill(int64_t begin, int64_t end, double* out) const override {
    for (int64_t i = begin; i < end; ++i) out[i - begin] = values_[static_cast<size_t>(i)];
    reads_ += end - begin;
  }
  int64_t reads() const { return reads_.load(); }

 private:
  std::vector<double> values_;
  mutable std::atomic<int64_t> reads_{0};  // Fill may be called from several threads
};

TEST(ReferenceTest, GeneratedInputsEvaluateLikeHeldOnes) {
  const ComputeDAG dag = Softmax();
  const BufferMap held = MakeRandomInputs(dag, 5);
  auto source = std::make_shared<VectorSource>(held.at("X").data);
  BufferMap generated;
  HostBuffer& g = generated["X"];
  g.dtype = ScalarType::kFloat32;
  g.shape = {kRows, kCols};
  g.source = source;
  ASSERT_TRUE(g.data.empty());
  const std::vector<double> expected = NaiveSoftmax(held.at("X").data);
  const int y = dag.StageId("Y");
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kCols; ++j) {
      const PointValue a = Ok(EvaluatePointWithMagnitude(dag, y, {i, j}, held));
      const PointValue b = Ok(EvaluatePointWithMagnitude(dag, y, {i, j}, generated));
      EXPECT_EQ(a.value, b.value);
      EXPECT_EQ(a.magnitude, b.magnitude);
      EXPECT_NEAR(b.value, expected[i * kCols + j], 1e-14);
    }
  }
  // One row's point reads that row only (each element once per reduction that reads it: M and E).
  const int64_t before = source->reads();
  Ok(EvaluatePoint(dag, y, {3, 0}, generated));
  EXPECT_GT(source->reads() - before, 0);
  EXPECT_LE(source->reads() - before, 3 * kCols);
  EXPECT_THAT(RunReference(dag, generated),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'X' is generated on demand (55 elements)")));
  // A generated buffer of the wrong shape is refused like a held one.
  generated["X"].shape = {kRows, kCols + 1};
  EXPECT_THAT(
      EvaluatePoint(dag, y, {0, 0}, generated),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input 'X' is float32 [5, 12]")));
}

}  // namespace
}  // namespace tilesearch::ir
