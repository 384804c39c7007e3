// Float64 arbitration of float32 mismatches (ArbitrateMismatches, measure/checker.h): a long dot
// product whose naive float32 sum is less accurate than a Kahan-summed float32 "candidate" passes
// arbitration although it mismatches the naive reference; a real error, a NaN, more mismatches
// than the cap, a cap of 0 and a step limit below the work fail as the plain check. Every float32
// operation of the test's own sums is emulated in float64 and rounded (exact for + and ×), so no
// compiler contraction changes them; the float64 values are the test's own sums. Then the host
// runner end to end: a reassociated candidate that the plain check rejects at a tight tolerance
// passes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_matchers.h"
#include "base/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/reference.h"
#include "ir/stmt.h"
#include "ir/tensor.h"
#include "measure/checker.h"
#include "measure/measure.h"
#include "measure/runner.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using Axes = std::vector<ir::Expr>;

using ::tilesearch::testing::Ok;

// float32 operations, correctly rounded (the float64 result of two floats rounded to float is
// the correctly rounded float32 result for + and ×).
float F32(double x) { return static_cast<float>(x); }
float Add32(float a, float b) { return F32(static_cast<double>(a) + static_cast<double>(b)); }
float Sub32(float a, float b) { return F32(static_cast<double>(a) - static_cast<double>(b)); }
float Mul32(float a, float b) { return F32(static_cast<double>(a) * static_cast<double>(b)); }

// C[i] = sum_k A[i, k] · B[k], A [kRows, kDepth], B [kDepth]. The second half of each row is
// minus the first half (perturbed by up to 1e-3), so the exact results are small while the
// partial sums reach ~1000: the naive float32 sum loses ~1e-3, far beyond the 1e-4 tolerance.
constexpr int64_t kRows = 16;
constexpr int64_t kDepth = 8192;

struct DotTask {
  ir::ComputeDAG dag;
  ir::BufferMap inputs;
  std::vector<float> a, b;
  ir::HostBuffer naive;       // sequential float32 sum (the reference)
  ir::HostBuffer kahan;       // Kahan-compensated float32 sum (the candidate)
  std::vector<double> exact;  // float64 sum
};

DotTask MakeDotTask() {
  ir::Tensor a = Ok(ir::Placeholder("A", {kRows, kDepth}));
  ir::Tensor b = Ok(ir::Placeholder("B", {kDepth}));
  ir::Tensor c =
      Ok(ir::Reduce("C", {kRows}, ir::ReduceKind::kSum, {kDepth},
                    [&](const Axes& ax, const Axes& r) { return a(ax[0], r[0]) * b(r[0]); }));
  DotTask t{Ok(ir::ComputeDAG::Create({c})), {}, {}, {}, {}, {}, {}};
  std::mt19937_64 rng(20261130);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int64_t half = kDepth / 2;
  t.b.resize(kDepth);
  for (int64_t k = 0; k < half; ++k) t.b[k] = t.b[k + half] = F32(0.5 + unit(rng));
  t.a.resize(kRows * kDepth);
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t k = 0; k < half; ++k) {
      const float x = F32(unit(rng));
      t.a[i * kDepth + k] = x;
      t.a[i * kDepth + half + k] = F32(-(x + 2e-3 * (unit(rng) - 0.5)));
    }
  }
  ir::HostBuffer ab = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kRows, kDepth});
  ir::HostBuffer bb = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kDepth});
  ab.data.assign(t.a.begin(), t.a.end());
  bb.data.assign(t.b.begin(), t.b.end());
  t.inputs.emplace("A", std::move(ab));
  t.inputs.emplace("B", std::move(bb));
  t.naive = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kRows});
  t.kahan = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kRows});
  t.exact.resize(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    float naive = 0, sum = 0, comp = 0;
    double exact = 0;
    for (int64_t k = 0; k < kDepth; ++k) {
      const float x = t.a[i * kDepth + k], y = t.b[k];
      const float p = Mul32(x, y);
      naive = Add32(naive, p);
      const float z = Sub32(p, comp);
      const float s = Add32(sum, z);
      comp = Sub32(Sub32(s, sum), z);
      sum = s;
      exact += static_cast<double>(x) * static_cast<double>(y);
    }
    t.naive.data[i] = naive;
    t.kahan.data[i] = sum;
    t.exact[i] = exact;
  }
  return t;
}

const Tolerance kFp32 = ToleranceFor(ir::ScalarType::kFloat32);

bool Within(double got, double ref, const Tolerance& tol) {
  return std::fabs(got - ref) <= tol.atol + tol.rtol * std::fabs(ref);
}

// Rows where the candidate is outside the tolerance of the naive reference.
int64_t PlainMismatches(const DotTask& t, const ir::HostBuffer& candidate) {
  int64_t n = 0;
  for (int64_t i = 0; i < kRows; ++i) n += !Within(candidate.data[i], t.naive.data[i], kFp32);
  return n;
}

std::string G9(double v) { return absl::StrFormat("%.9g", v); }

TEST(ArbitrationTest, ElementRuleIsThePrecisionRuleWithTheSwigluNumbers) {
  // One element of swiglu_gate on the H200: float64, the naive reference, an FMA candidate.
  const double ref64 = -0.347003677, ref32 = -0.346633494, got = -0.346851945;
  EXPECT_FALSE(CompareElement(got, ref32, kFp32).ok);
  // A 2048-deep dot product of inputs uniform in [-1, 1) has M about 2048 / 4 = 512.
  const double m = 512;
  const PrecisionRule rule = RuleFor(ir::ScalarType::kFloat32, kFp32, Fp32Precision::kIeee);
  EXPECT_EQ(rule.unit_roundoff, std::ldexp(1.0, -24));
  EXPECT_TRUE(ArbitrationElementPasses(got, ref64, m, rule));
  // Without the cancellation allowance it would not pass: 1.5e-4 off, 1.35e-4 allowed.
  EXPECT_FALSE(ArbitrationElementPasses(got, ref64, 0, rule));
  // The bound is atol + rtol · |ref64| + 16 u M, no more.
  const double bound = 1e-4 + 1e-4 * std::fabs(ref64) + 16 * std::ldexp(1.0, -24) * m;
  EXPECT_TRUE(ArbitrationElementPasses(ref64 + 0.999 * bound, ref64, m, rule));
  EXPECT_FALSE(ArbitrationElementPasses(ref64 + 1.001 * bound, ref64, m, rule));
  // TF32's u widens it 8192-fold.
  const PrecisionRule tf32 = RuleFor(ir::ScalarType::kFloat32, kFp32, Fp32Precision::kTf32);
  EXPECT_TRUE(ArbitrationElementPasses(ref64 + 1.001 * bound, ref64, m, tf32));
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(ArbitrationElementPasses(nan, ref64, m, rule));
  EXPECT_FALSE(ArbitrationElementPasses(inf, ref64, m, rule));
  EXPECT_FALSE(ArbitrationElementPasses(got, nan, m, rule));
  EXPECT_FALSE(ArbitrationElementPasses(got, ref64, inf, rule));  // no allowance from inf
}

TEST(ArbitrationTest, KahanCandidatePassesWhereTheNaiveReferenceIsLessAccurate) {
  const DotTask t = MakeDotTask();
  const int c_id = t.dag.StageId("C");
  // Preconditions, from the test's own sums: the candidate is within tolerance of float64 on
  // every row, the naive reference is not, and the plain check rejects the candidate.
  int64_t naive_off = 0;
  for (int64_t i = 0; i < kRows; ++i) {
    EXPECT_TRUE(Within(t.kahan.data[i], t.exact[i], kFp32)) << "row " << i;
    naive_off += !Within(t.naive.data[i], t.exact[i], kFp32);
  }
  const int64_t mismatches = PlainMismatches(t, t.kahan);
  ASSERT_GE(mismatches, kRows / 2);
  EXPECT_GE(naive_off, kRows / 2);

  const ArbitrationSummary a =
      ArbitrateMismatches(t.dag, c_id, t.inputs, t.kahan, t.naive, kFp32, ArbitrationOptions{});
  EXPECT_EQ(a.compare.elements, kRows);
  EXPECT_EQ(a.compare.mismatches, mismatches);
  EXPECT_TRUE(a.attempted);
  EXPECT_EQ(a.arbitrated, mismatches);
  EXPECT_EQ(a.still_failing, 0);
  EXPECT_TRUE(a.passed());
  EXPECT_THAT(a.note, IsEmpty());
  // Every judged element carries the values it was judged on; ref64 is the test's float64 sum.
  ASSERT_EQ(static_cast<int64_t>(a.judged.size()), mismatches);
  for (const ArbitratedElement& e : a.judged) {
    ASSERT_GE(e.flat, 0);
    ASSERT_LT(e.flat, kRows);
    EXPECT_EQ(e.got, t.kahan.data[e.flat]);
    EXPECT_EQ(e.ref32, t.naive.data[e.flat]);
    EXPECT_NEAR(e.ref64, t.exact[e.flat], 1e-12) << "row " << e.flat;
    EXPECT_GT(e.magnitude, std::fabs(e.ref64));  // the halves cancel
    EXPECT_TRUE(e.evaluated);
    EXPECT_TRUE(e.passed);
  }

  CheckReport report;
  CompareOutputWithArbitration(t.dag, c_id, t.inputs, t.kahan, t.naive, kFp32, ArbitrationOptions{},
                               0, CheckDistribution::kUniformSymmetric, &report);
  EXPECT_EQ(report.mismatches, 0);
  EXPECT_EQ(report.arbitrated, mismatches);
  EXPECT_EQ(report.checked_elements, kRows);
  EXPECT_THAT(report.first_mismatch, IsEmpty());
  EXPECT_THAT(report.arbitration, IsEmpty());
  EXPECT_GT(report.max_abs_error, 1e-4);  // the plain comparison's errors are still reported
}

TEST(ArbitrationTest, CandidateMissingATermFailsWithItsThreeValues) {
  const DotTask t = MakeDotTask();
  const int c_id = t.dag.StageId("C");
  ir::HostBuffer wrong = t.kahan;
  constexpr int64_t kRow = 3, kTerm = 7;  // row 3 without its term k = 7
  wrong.data[kRow] = Sub32(F32(wrong.data[kRow]), Mul32(t.a[kRow * kDepth + kTerm], t.b[kTerm]));
  const int64_t mismatches = PlainMismatches(t, wrong);
  ASSERT_FALSE(Within(wrong.data[kRow], t.naive.data[kRow], kFp32));

  const ArbitrationSummary a =
      ArbitrateMismatches(t.dag, c_id, t.inputs, wrong, t.naive, kFp32, ArbitrationOptions{});
  EXPECT_EQ(a.compare.mismatches, mismatches);
  EXPECT_TRUE(a.attempted);
  EXPECT_FALSE(a.passed());
  EXPECT_EQ(a.still_failing, 1);
  EXPECT_EQ(a.arbitrated, mismatches - 1);
  EXPECT_THAT(a.note, HasSubstr(absl::StrCat("C[3]: got ", G9(wrong.data[kRow]), ", ref32 ",
                                             G9(t.naive.data[kRow]), ", ref64 ")));
  for (const ArbitratedElement& e : a.judged) {
    if (e.flat != kRow) continue;
    EXPECT_FALSE(e.passed);
    EXPECT_NEAR(e.ref64, t.exact[kRow], 1e-12);
    EXPECT_THAT(a.note, HasSubstr(absl::StrCat("ref64 ", G9(e.ref64))));
  }

  CheckReport report;
  CompareOutputWithArbitration(t.dag, c_id, t.inputs, wrong, t.naive, kFp32, ArbitrationOptions{},
                               1, CheckDistribution::kUniformPositive, &report);
  EXPECT_EQ(report.mismatches, mismatches);  // counted as the plain check counts them
  EXPECT_EQ(report.arbitrated, 0);
  EXPECT_THAT(report.arbitration,
              HasSubstr(absl::StrCat("float64 arbitration of ", mismatches,
                                     " mismatches of C (trial 1, uniform01): 1 still fail, first "
                                     "C[3]: got ",
                                     G9(wrong.data[kRow]))));
}

TEST(ArbitrationTest, MoreMismatchesThanTheCapOrACapOfZeroAreNotArbitrated) {
  const DotTask t = MakeDotTask();
  const int c_id = t.dag.StageId("C");
  const int64_t mismatches = PlainMismatches(t, t.kahan);
  ASSERT_GE(mismatches, 2);
  for (const int64_t cap : {mismatches - 1, int64_t{0}}) {
    SCOPED_TRACE(absl::StrCat("cap ", cap));
    ArbitrationOptions options;
    options.max_elements = cap;
    const ArbitrationSummary a =
        ArbitrateMismatches(t.dag, c_id, t.inputs, t.kahan, t.naive, kFp32, options);
    EXPECT_EQ(a.compare.mismatches, mismatches);
    EXPECT_FALSE(a.attempted);
    EXPECT_EQ(a.arbitrated, 0);
    EXPECT_EQ(a.still_failing, mismatches);
    EXPECT_FALSE(a.passed());
    EXPECT_THAT(a.note, IsEmpty());
    EXPECT_THAT(a.judged, IsEmpty());

    CheckReport report;
    CompareOutputWithArbitration(t.dag, c_id, t.inputs, t.kahan, t.naive, kFp32, options, 0,
                                 CheckDistribution::kUniformSymmetric, &report);
    EXPECT_EQ(report.mismatches, mismatches);
    EXPECT_EQ(report.arbitrated, 0);
    EXPECT_THAT(report.first_mismatch, HasSubstr("C["));
    EXPECT_THAT(report.arbitration, IsEmpty());  // the message stays the plain check's
  }
}

TEST(ArbitrationTest, NanCandidateFails) {
  const DotTask t = MakeDotTask();
  ir::HostBuffer nan = t.kahan;
  nan.data[5] = std::numeric_limits<double>::quiet_NaN();
  const ArbitrationSummary a = ArbitrateMismatches(t.dag, t.dag.StageId("C"), t.inputs, nan,
                                                   t.naive, kFp32, ArbitrationOptions{});
  EXPECT_TRUE(a.attempted);
  EXPECT_FALSE(a.passed());
  EXPECT_EQ(a.still_failing, 1);
  EXPECT_THAT(a.note, HasSubstr("C[5]: got nan, ref32 "));
}

// The step limit is deterministic: each point evaluation of C[i] is kDepth reduce iterations, so
// n mismatches cost n · kDepth steps; one step under that skips arbitration, exactly that allows
// it.
TEST(ArbitrationTest, StepLimitDecidesWhetherToArbitrate) {
  const DotTask t = MakeDotTask();
  const int64_t n = ArbitrateMismatches(t.dag, t.dag.StageId("C"), t.inputs, t.kahan, t.naive,
                                        kFp32, ArbitrationOptions{})
                        .compare.mismatches;
  ASSERT_GE(n, 2);
  ArbitrationOptions options;
  options.max_steps = n * kDepth - 1;
  ArbitrationSummary a =
      ArbitrateMismatches(t.dag, t.dag.StageId("C"), t.inputs, t.kahan, t.naive, kFp32, options);
  EXPECT_FALSE(a.attempted);
  EXPECT_FALSE(a.passed());
  EXPECT_EQ(a.arbitrated, 0);
  EXPECT_THAT(a.note, HasSubstr("skipped"));
  EXPECT_THAT(a.note, HasSubstr(absl::StrCat("about ", kDepth, " steps each, over the limit of ",
                                             n * kDepth - 1, " steps")));
  options.max_steps = n * kDepth;
  a = ArbitrateMismatches(t.dag, t.dag.StageId("C"), t.inputs, t.kahan, t.naive, kFp32, options);
  EXPECT_TRUE(a.attempted);
  EXPECT_TRUE(a.passed());
  EXPECT_EQ(a.arbitrated, n);
}

TEST(ArbitrationTest, ReportFieldsRoundTripThroughJsonAndOptionsAreValidated) {
  MeasureResult r;
  r.check.arbitrated = 17;
  r.check.arbitration = "float64 arbitration of 3 mismatches of C";
  const MeasureResult back = Ok(MeasureResultFromJson(MeasureResultToJson(r)));
  EXPECT_EQ(back.check.arbitrated, 17);
  EXPECT_EQ(back.check.arbitration, r.check.arbitration);
  // Logs written before arbitration existed have neither field.
  nlohmann::json old = MeasureResultToJson(MeasureResult{});
  old["check"].erase("arbitrated");
  old["check"].erase("arbitration");
  EXPECT_EQ(Ok(MeasureResultFromJson(old)).check.arbitrated, 0);

  MeasureOptions o;
  o.arbitration_max_elements = -1;
  EXPECT_THAT(ValidateMeasureOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("arbitration_max_elements")));
  o.arbitration_max_elements = 0;
  EXPECT_THAT(ValidateMeasureOptions(o), IsOk());
  o.arbitration_max_steps = -1;
  EXPECT_THAT(ValidateMeasureOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("arbitration_max_steps")));
}

// Host measurer options for the end-to-end tests: one thread, three timed runs.
MeasureOptions QuickHostOptions() {
  MeasureOptions o;
  o.timing.warmup_runs = 1;
  o.timing.min_runs = 3;
  o.timing.max_runs = 3;
  o.timing.min_total_ms = 0;
  o.host_threads = 1;
  return o;
}

// End to end on the cpu target: Y[i] = (X[i] + 4096) − 4096. The float32 reference rounds X[i] +
// 4096 to a multiple of 2^-12 and so loses X's low bits (off by up to 2^-13 ≈ 1.2e-4); the
// candidate simplifies the expression to Y[i] = X[i], the exact value. At atol 1e-5 (rtol 1e-12)
// the plain check would reject it at most elements; the screen's cancellation allowance (M =
// |X| + 2 · 4096, so 16 · 2^-24 · M ≈ 7.8e-3, from the magnitude program) accepts it with or
// without arbitration: the float32 reference's own error is no fault of the candidate's. (Long
// sums no longer make such a case: the reference compensates them, ir/compensated_sum.h.)
constexpr int64_t kRoundTripRows = 512;
constexpr double kOffset = 4096;

ir::ComputeDAG OffsetRoundTrip() {
  ir::Tensor x = Ok(ir::Placeholder("X", {kRoundTripRows}));
  ir::Tensor y = Ok(ir::Compute("Y", {kRoundTripRows},
                                [&](const Axes& ax) { return (x(ax[0]) + kOffset) - kOffset; }));
  return Ok(ir::ComputeDAG::Create({y}));
}

ir::LoopNest Simplified() {
  const ir::Expr i = ir::MakeVar("i");
  ir::LoopNest nest;
  nest.name = "simplified";
  nest.params = {ir::BufferDecl{"X", ir::ScalarType::kFloat32, {kRoundTripRows}},
                 ir::BufferDecl{"Y", ir::ScalarType::kFloat32, {kRoundTripRows}}};
  nest.num_inputs = 1;
  nest.body = ir::ForNode::Make(
      i, ir::IntConst(0), ir::IntConst(kRoundTripRows), ir::ForKind::kSerial,
      ir::StoreNode::Make("Y", {i}, ir::LoadNode::Make(ir::ScalarType::kFloat32, "X", {i})));
  return nest;
}

// Y[i] = sum_k (X[i, k] + 1000) with 4096 terms. A plain float32 sum adds ~4·10^6-sized partial
// sums (ulp 0.25 to 0.5) and is off by units; the candidate computes 1000 · 4096 + sum_k X[i, k]
// (a reassociation: error <= 0.25 + ~1e-5). The check's compensated reference is within about
// its final rounding, so at atol 0.3 (rtol 1e-12) the candidate passes without arbitration.
constexpr int64_t kSumRows = 16, kSumDepth = 4096;

ir::ComputeDAG OffsetSum() {
  ir::Tensor x = Ok(ir::Placeholder("X", {kSumRows, kSumDepth}));
  ir::Tensor y =
      Ok(ir::Reduce("Y", {kSumRows}, ir::ReduceKind::kSum, {kSumDepth},
                    [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]) + 1000.0; }));
  return Ok(ir::ComputeDAG::Create({y}));
}

ir::LoopNest Reassociated() {
  const ir::Expr i = ir::MakeVar("i"), k = ir::MakeVar("k");
  auto y = [&]() { return ir::LoadNode::Make(ir::ScalarType::kFloat32, "Y", {i}); };
  ir::Stmt body = ir::SeqNode::Make({
      ir::StoreNode::Make("Y", {i}, ir::FloatConst(0.0)),
      ir::ForNode::Make(
          k, ir::IntConst(0), ir::IntConst(kSumDepth), ir::ForKind::kSerial,
          ir::StoreNode::Make("Y", {i},
                              y() + ir::LoadNode::Make(ir::ScalarType::kFloat32, "X", {i, k}))),
      ir::StoreNode::Make("Y", {i}, y() + ir::FloatConst(1000.0 * kSumDepth)),
  });
  ir::LoopNest nest;
  nest.name = "reassociated";
  nest.params = {ir::BufferDecl{"X", ir::ScalarType::kFloat32, {kSumRows, kSumDepth}},
                 ir::BufferDecl{"Y", ir::ScalarType::kFloat32, {kSumRows}}};
  nest.num_inputs = 1;
  nest.body = ir::ForNode::Make(i, ir::IntConst(0), ir::IntConst(kSumRows), ir::ForKind::kSerial,
                                std::move(body));
  return nest;
}

TEST(ArbitrationTest, HostMeasurerAcceptsAnExactResultThePlainCheckWouldReject) {
  MeasureOptions o = QuickHostOptions();
  o.atol = 1e-5;
  o.rtol = 1e-12;
  // The naive program compiled for the host as the reference: float32 arithmetic.
  o.interpreter_reference_max_ops = 0;
  BuildResult c;
  c.nest = std::make_shared<const ir::LoopNest>(Simplified());
  const ir::ComputeDAG dag = OffsetRoundTrip();

  std::unique_ptr<Runner> with = Ok(CreateRunner(Target::HostCpu(), o));
  const std::vector<MeasureResult> passed = with->Run(dag, {c});
  ASSERT_EQ(passed.size(), 1u);
  EXPECT_EQ(passed[0].error, MeasureError::kNone)
      << MeasureErrorName(passed[0].error) << ": " << passed[0].message;
  EXPECT_EQ(passed[0].check.trials, o.check_trials);
  EXPECT_EQ(passed[0].check.mismatches, 0);
  EXPECT_EQ(passed[0].check.arbitrated, 0);          // the screen's allowance sufficed
  EXPECT_GT(passed[0].check.max_abs_error, o.atol);  // the plain check would have failed
  EXPECT_GT(passed[0].timing.median_ms, 0);
  // The measured float64 error on trial 0's sampled points: first, last and 256 seeded rows of
  // 16 (repeats counted), the candidate within the rule and more accurate than the reference.
  EXPECT_EQ(passed[0].check.f64_points, 2 + o.precision_samples);
  EXPECT_LE(passed[0].check.f64_max_ratio, 1);
  EXPECT_LE(passed[0].check.f64_max_abs_error, 0.3);
  EXPECT_GT(passed[0].check.reference_f64_max_abs_error, passed[0].check.f64_max_abs_error);

  o.arbitration_max_elements = 0;
  std::unique_ptr<Runner> without = Ok(CreateRunner(Target::HostCpu(), o));
  const std::vector<MeasureResult> unarbitrated = without->Run(dag, {c});
  ASSERT_EQ(unarbitrated.size(), 1u);
  EXPECT_EQ(unarbitrated[0].error, MeasureError::kNone) << unarbitrated[0].message;
  EXPECT_EQ(unarbitrated[0].check.mismatches, 0);

  // With the interpreter's reference (the default for a task this small: float64 from the
  // definitions, rounded once) the screen alone accepts the candidate, arbitration or not.
  MeasureOptions small = o;
  small.interpreter_reference_max_ops = MeasureOptions{}.interpreter_reference_max_ops;
  std::unique_ptr<Runner> exact = Ok(CreateRunner(Target::HostCpu(), small));
  const std::vector<MeasureResult> screened = exact->Run(dag, {c});
  ASSERT_EQ(screened.size(), 1u);
  EXPECT_EQ(screened[0].error, MeasureError::kNone) << screened[0].message;
  EXPECT_EQ(screened[0].check.arbitrated, 0);
  EXPECT_LE(screened[0].check.max_abs_error, 0.3);
  // The float32 reference error of the sampled points is still the float32 naive program's.
  EXPECT_GT(screened[0].check.reference_f64_max_abs_error, screened[0].check.f64_max_abs_error);
}

TEST(ArbitrationTest, HostMeasurerJudgesLongSumsAgainstTheCompensatedReference) {
  const ir::ComputeDAG dag = OffsetSum();
  const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 17);
  // The premise: a plain float32 sum is farther than atol from the exact value somewhere.
  const ir::BufferMap plain = Ok(ir::RunReference(dag, inputs));
  double plain_error = 0;
  for (int64_t i = 0; i < kSumRows; ++i) {
    const double exact = Ok(ir::EvaluatePoint(dag, dag.output_ids()[0], {i}, inputs));
    plain_error = std::max(plain_error, std::fabs(plain.at("Y").data[i] - exact));
  }
  EXPECT_GT(plain_error, 0.3);

  MeasureOptions o = QuickHostOptions();
  o.atol = 0.3;
  o.rtol = 1e-12;
  o.arbitration_max_elements = 0;
  // The naive program compiled for the host (compensated sums), not the float64 interpreter.
  o.interpreter_reference_max_ops = 0;
  BuildResult c;
  c.nest = std::make_shared<const ir::LoopNest>(Reassociated());
  std::unique_ptr<Runner> runner = Ok(CreateRunner(Target::HostCpu(), o));
  const std::vector<MeasureResult> results = runner->Run(dag, {c});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].error, MeasureError::kNone)
      << MeasureErrorName(results[0].error) << ": " << results[0].message;
  EXPECT_EQ(results[0].check.mismatches, 0);
  EXPECT_EQ(results[0].check.arbitrated, 0);
}

}  // namespace
}  // namespace tilesearch::measure
