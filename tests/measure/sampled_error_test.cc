// The float64 error of a candidate on sampled points (SampleFloat64Reference, RecordSampledError,
// measure/checker.h) against a matmul computed here in float64 and in sequential float32, the
// 3xTF32 verdict, and the report fields' JSON (old results without them still read).
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/reference.h"
#include "ir/tensor.h"
#include "measure/checker.h"
#include "measure/measure.h"
#include "measure/reference.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::Ok;
using Axes = std::vector<ir::Expr>;

constexpr int64_t kM = 6, kK = 300, kN = 5;

ir::ComputeDAG Matmul() {
  ir::Tensor a = Ok(ir::Placeholder("A", {kM, kK}));
  ir::Tensor b = Ok(ir::Placeholder("B", {kK, kN}));
  ir::Tensor c =
      Ok(ir::Reduce("C", {kM, kN}, ir::ReduceKind::kSum, {kK}, [&](const Axes& ax, const Axes& r) {
        return a(ax[0], r[0]) * b(r[0], ax[1]);
      }));
  return Ok(ir::ComputeDAG::Create({c}));
}

TEST(SampledErrorTest, PointsValuesMagnitudesAndTheReferenceError) {
  const ir::ComputeDAG dag = Matmul();
  const ir::BufferMap in = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 3);
  const std::vector<double>& a = in.at("A").data;
  const std::vector<double>& b = in.at("B").data;
  // The test's own float64 values, magnitudes and sequential float32 sums.
  std::vector<double> exact(kM * kN), magnitude(kM * kN);
  ir::HostBuffer ref32 = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kM, kN});
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < kK; ++k) {
        exact[i * kN + j] += a[i * kK + k] * b[k * kN + j];
        magnitude[i * kN + j] += std::fabs(a[i * kK + k] * b[k * kN + j]);
        acc = static_cast<float>(acc + static_cast<float>(a[i * kK + k] * b[k * kN + j]));
      }
      ref32.data[i * kN + j] = acc;
    }
  }
  ir::BufferMap reference;
  reference.emplace("C", ref32);
  MeasureOptions options;
  options.precision_samples = 20;
  const std::vector<SampledOutput> sampled =
      Ok(SampleFloat64Reference(dag, in, reference, options, 9));
  ASSERT_EQ(sampled.size(), 1u);
  const SampledOutput& s = sampled[0];
  EXPECT_EQ(s.name, "C");
  ASSERT_EQ(s.flats.size(), 22u);
  EXPECT_EQ(s.flats[0], 0);
  EXPECT_EQ(s.flats[1], kM * kN - 1);
  EXPECT_EQ(s.rule.unit_roundoff, std::ldexp(1.0, -24));
  EXPECT_EQ(s.rule.atol, 1e-4);
  double reference_error = 0;
  for (size_t p = 0; p < s.flats.size(); ++p) {
    ASSERT_GE(s.flats[p], 0);
    ASSERT_LT(s.flats[p], kM * kN);
    EXPECT_NEAR(s.ref64[p], exact[s.flats[p]], 1e-12);
    EXPECT_NEAR(s.magnitude[p], magnitude[s.flats[p]], 1e-12);
    reference_error =
        std::max(reference_error, std::fabs(ref32.data[s.flats[p]] - exact[s.flats[p]]));
  }
  EXPECT_DOUBLE_EQ(s.reference_max_abs_error, reference_error);
  EXPECT_GT(reference_error, 0);

  // A candidate off by 1e-3 at every point: its error, ratio by the rule, points counted.
  CheckReport report;
  RecordSampledError(
      s, [&](int64_t flat) { return exact[flat] + 1e-3; }, &report);
  EXPECT_EQ(report.f64_points, 22);
  EXPECT_NEAR(report.f64_max_abs_error, 1e-3, 1e-12);
  double ratio = 0;
  for (size_t p = 0; p < s.flats.size(); ++p) {
    ratio = std::max(ratio, 1e-3 / (1e-4 + 1e-4 * std::fabs(s.ref64[p]) +
                                    16 * std::ldexp(1.0, -24) * s.magnitude[p]));
  }
  EXPECT_NEAR(report.f64_max_ratio, ratio, 1e-9);
  EXPECT_GT(report.f64_max_ratio, 1);  // 1e-3 is outside the rule for these magnitudes
  EXPECT_DOUBLE_EQ(report.reference_f64_max_abs_error, reference_error);
  // A NaN is an infinite ratio and error.
  CheckReport nan_report;
  RecordSampledError(
      s, [](int64_t) { return std::nan(""); }, &nan_report);
  EXPECT_TRUE(std::isinf(nan_report.f64_max_ratio));
  EXPECT_TRUE(std::isinf(nan_report.f64_max_abs_error));
}

// D[i] = sum_k (X[i, k] + 1000) − 1000 · K: the float32 naive program's sum of 4·10^6-sized
// partial sums is off by units; InterpreterReference (float64 from the definitions, rounded once
// to float32) by at most half an ulp of D (|D| < 64 here: 2^-19).
TEST(SampledErrorTest, InterpreterReferenceIsOffByOneRoundingPerStage) {
  constexpr int64_t kRows = 4, kDepth = 4096;
  ir::Tensor x = Ok(ir::Placeholder("X", {kRows, kDepth}));
  ir::Tensor s =
      Ok(ir::Reduce("S", {kRows}, ir::ReduceKind::kSum, {kDepth},
                    [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]) + 1000.0; }));
  ir::Tensor d = Ok(ir::Compute(
      "D", {kRows}, [&](const Axes& ax) { return s(ax[0]) - static_cast<double>(1000 * kDepth); }));
  const ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({d}));
  const ir::BufferMap in = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 5);
  const ir::BufferMap f64 = Ok(InterpreterReference(dag, in));
  const ir::BufferMap f32 = Ok(ir::RunReference(dag, in));
  double worst32 = 0;
  for (int64_t i = 0; i < kRows; ++i) {
    double exact = 0;
    for (int64_t k = 0; k < kDepth; ++k) exact += in.at("X").data[i * kDepth + k];
    EXPECT_LE(std::fabs(f64.at("D").data[i] - exact), std::ldexp(1.0, -19)) << i;
    worst32 = std::max(worst32, std::fabs(f32.at("D").data[i] - exact));
  }
  EXPECT_GT(worst32, 1.0);  // the float32 reference: far more than one rounding
}

TEST(SampledErrorTest, StepLimitKeepsFewerPoints) {
  const ir::ComputeDAG dag = Matmul();
  const ir::BufferMap in = MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, 3);
  MeasureOptions options;
  options.precision_samples = 20;
  options.arbitration_max_steps = 5 * kK;  // each point is kK reduce steps
  // With the float32 reference's outputs given, every point costs its float64 evaluation.
  const ir::BufferMap plain = Ok(ir::RunReference(dag, in));
  const std::vector<SampledOutput> given = Ok(SampleFloat64Reference(dag, in, plain, options, 9));
  ASSERT_EQ(given.size(), 1u);
  EXPECT_EQ(given[0].flats.size(), 5u);
  // Without them, the plain float32 program is point-evaluated too: twice the steps per point.
  const std::vector<SampledOutput> sampled = Ok(SampleFloat64Reference(dag, in, {}, options, 9));
  ASSERT_EQ(sampled.size(), 1u);
  ASSERT_EQ(sampled[0].flats.size(), 2u);
  // Its error is the plain float32 sum's at those points, as the naive program computes it.
  double want = 0;
  for (size_t k = 0; k < sampled[0].flats.size(); ++k) {
    const int64_t flat = sampled[0].flats[k];
    EXPECT_EQ(sampled[0].flats[k], given[0].flats[k]);
    want = std::max(want, std::fabs(plain.at("C").data[flat] - sampled[0].ref64[k]));
  }
  EXPECT_GT(want, 0);  // a 300-term float32 sum is not exact
  EXPECT_EQ(sampled[0].reference_max_abs_error, want);
}

TEST(SampledErrorTest, Tf32x3VerdictComparesWithTheReference) {
  CheckReport r;
  EXPECT_THAT(Tf32x3Verdict(r), HasSubstr("no float64 error was measured"));
  r.f64_points = 10;
  r.f64_max_abs_error = 2e-5;
  r.reference_f64_max_abs_error = 3e-5;
  EXPECT_EQ(Tf32x3Verdict(r), "");
  r.f64_max_abs_error = 6e-5;
  EXPECT_EQ(Tf32x3Verdict(r), "");  // up to twice the reference's: sampling noise
  r.f64_max_abs_error = 6.1e-5;
  r.f64_max_ratio = 0.5;
  EXPECT_THAT(Tf32x3Verdict(r), HasSubstr("less accurate than float32"));
  r.f64_max_ratio = 1.0 / 16;  // negligible by the rule (an exact reference): accepted
  EXPECT_EQ(Tf32x3Verdict(r), "");
}

TEST(SampledErrorTest, ReportFieldsRoundTripAndOldResultsRead) {
  MeasureResult r;
  r.check.f64_points = 258;
  r.check.f64_max_ratio = 0.25;
  r.check.f64_max_abs_error = 1.5e-5;
  r.check.reference_f64_max_abs_error = 2.5e-5;
  const MeasureResult back = Ok(MeasureResultFromJson(MeasureResultToJson(r)));
  EXPECT_EQ(back.check.f64_points, 258);
  EXPECT_EQ(back.check.f64_max_ratio, 0.25);
  EXPECT_EQ(back.check.f64_max_abs_error, 1.5e-5);
  EXPECT_EQ(back.check.reference_f64_max_abs_error, 2.5e-5);
  r.check.f64_max_ratio = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isinf(Ok(MeasureResultFromJson(MeasureResultToJson(r))).check.f64_max_ratio));
  // Without sampled points the fields are not written; results without them read as 0.
  const nlohmann::json old = MeasureResultToJson(MeasureResult{});
  EXPECT_FALSE(old.at("check").contains("f64_points"));
  EXPECT_EQ(Ok(MeasureResultFromJson(old)).check.f64_points, 0);
  MeasureOptions o;
  o.precision_samples = -1;
  EXPECT_FALSE(ValidateMeasureOptions(o).ok());
}

}  // namespace
}  // namespace tilesearch::measure
