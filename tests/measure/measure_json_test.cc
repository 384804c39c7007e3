// MeasureResult names and JSON: every field survives the round trip (non-finite numbers too),
// malformed JSON names the bad field; option validation names the bad option; the host-memory
// refusal states the share of the available memory it allows.
#include <cmath>
#include <limits>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/tensor.h"
#include "measure/measure.h"

namespace tilesearch::measure {
using runtime::KernelResources;
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::Ok;
using ::tilesearch::testing::StatusIs;

TEST(MeasureErrorTest, NamesRoundTrip) {
  const std::pair<MeasureError, const char*> names[] = {
      {MeasureError::kNone, "none"},
      {MeasureError::kInvalidSchedule, "invalid_schedule"},
      {MeasureError::kCompileError, "compile_error"},
      {MeasureError::kCompileTimeout, "compile_timeout"},
      {MeasureError::kWrongAnswer, "wrong_answer"},
      {MeasureError::kRuntimeError, "runtime_error"},
      {MeasureError::kRunTimeout, "run_timeout"},
      {MeasureError::kNoDevice, "no_device"},
      {MeasureError::kUnknown, "unknown_error"},
  };
  for (const auto& [error, name] : names) {
    EXPECT_STREQ(MeasureErrorName(error), name);
    absl::StatusOr<MeasureError> parsed = ParseMeasureError(name);
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, error);
  }
  EXPECT_THAT(ParseMeasureError("segfault"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'segfault'")));
}

TEST(MeasureErrorTest, DistributionNames) {
  EXPECT_STREQ(CheckDistributionName(CheckDistribution::kUniformSymmetric), "uniform");
  EXPECT_STREQ(CheckDistributionName(CheckDistribution::kUniformPositive), "uniform01");
  EXPECT_STREQ(CheckDistributionName(CheckDistribution::kNormalOffset), "normal");
  for (CheckDistribution d :
       {CheckDistribution::kUniformSymmetric, CheckDistribution::kUniformPositive,
        CheckDistribution::kNormalOffset}) {
    absl::StatusOr<CheckDistribution> parsed = ParseCheckDistribution(CheckDistributionName(d));
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_THAT(ParseCheckDistribution("gauss"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'gauss'")));
}

TEST(MeasureResultTest, MedianIsInfiniteUnlessOk) {
  MeasureResult r;
  r.timing.median_ms = 0.5;
  EXPECT_EQ(r.median_ms(), 0.5);
  r.error = MeasureError::kWrongAnswer;
  EXPECT_TRUE(std::isinf(r.median_ms()));
}

MeasureResult FullResult() {
  MeasureResult r;
  r.error = MeasureError::kWrongAnswer;
  r.message = "1 of 4 output elements outside tolerance";
  r.costs_s = {0.001, 0.002};
  r.timing.samples_ms = {1, 2};
  r.timing.runs = 2;
  r.timing.median_ms = 1.5;
  r.timing.mean_ms = 1.5;
  r.timing.min_ms = 1;
  r.timing.max_ms = 2;
  r.timing.p10_ms = 1.1;
  r.timing.p90_ms = 1.9;
  r.timing.stddev_ms = 0.7071;
  r.timing.soak_ms = 250;
  r.compile_ms = 120.5;
  r.load_ms = 3.25;
  r.check_ms = 7;
  r.run_wall_ms = 11;
  r.screened = true;
  r.check.trials = 2;
  r.check.max_abs_error = std::numeric_limits<double>::infinity();
  r.check.max_rel_error = 0.125;
  r.check.mismatches = 1;
  r.check.checked_elements = 8;
  r.check.first_mismatch = "C[1, 0]: got nan, expected 1.25 (trial 0, uniform)";
  KernelResources k;
  k.name = "matmul_kernel0";
  k.registers_per_thread = 64;
  k.static_shared_bytes = 8192;
  k.dynamic_shared_bytes = 65536;
  k.local_bytes_per_thread = 16;
  k.max_threads_per_block = 512;
  r.kernels = {k, KernelResources{"second", 32, 0, 0, 0, 1024}};
  return r;
}

TEST(MeasureResultJsonTest, EveryFieldRoundTripsThroughText) {
  const MeasureResult r = FullResult();
  const std::string text = MeasureResultToJson(r).dump();
  absl::StatusOr<MeasureResult> back = MeasureResultFromJson(nlohmann::json::parse(text));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->error, r.error);
  EXPECT_EQ(back->message, r.message);
  EXPECT_THAT(back->costs_s, ElementsAre(0.001, 0.002));
  EXPECT_THAT(back->timing.samples_ms, ElementsAre(1, 2));
  EXPECT_EQ(back->timing.runs, 2);
  EXPECT_EQ(back->timing.median_ms, 1.5);
  EXPECT_EQ(back->timing.mean_ms, 1.5);
  EXPECT_EQ(back->timing.min_ms, 1);
  EXPECT_EQ(back->timing.max_ms, 2);
  EXPECT_EQ(back->timing.p10_ms, 1.1);
  EXPECT_EQ(back->timing.p90_ms, 1.9);
  EXPECT_EQ(back->timing.stddev_ms, 0.7071);
  EXPECT_EQ(back->timing.soak_ms, 250);
  EXPECT_EQ(back->compile_ms, 120.5);
  EXPECT_EQ(back->load_ms, 3.25);
  EXPECT_EQ(back->check_ms, 7);
  EXPECT_EQ(back->run_wall_ms, 11);
  EXPECT_TRUE(back->screened);
  EXPECT_EQ(back->check.trials, 2);
  EXPECT_TRUE(std::isinf(back->check.max_abs_error) && back->check.max_abs_error > 0);
  EXPECT_EQ(back->check.max_rel_error, 0.125);
  EXPECT_EQ(back->check.mismatches, 1);
  EXPECT_EQ(back->check.checked_elements, 8);
  EXPECT_EQ(back->check.first_mismatch, r.check.first_mismatch);
  ASSERT_EQ(back->kernels.size(), 2u);
  EXPECT_EQ(back->kernels[0].name, "matmul_kernel0");
  EXPECT_EQ(back->kernels[0].registers_per_thread, 64);
  EXPECT_EQ(back->kernels[0].static_shared_bytes, 8192);
  EXPECT_EQ(back->kernels[0].dynamic_shared_bytes, 65536);
  EXPECT_EQ(back->kernels[0].local_bytes_per_thread, 16);
  EXPECT_EQ(back->kernels[0].max_threads_per_block, 512);
  EXPECT_EQ(back->kernels[1].name, "second");
  EXPECT_EQ(back->kernels[1].max_threads_per_block, 1024);
}

TEST(MeasureResultJsonTest, NonFiniteNumbersAreStrings) {
  MeasureResult r;
  r.check.max_abs_error = std::numeric_limits<double>::infinity();
  r.check.max_rel_error = std::numeric_limits<double>::quiet_NaN();
  r.load_ms = -std::numeric_limits<double>::infinity();
  nlohmann::json j = MeasureResultToJson(r);
  EXPECT_EQ(j["check"]["max_abs_error"], "inf");
  EXPECT_EQ(j["check"]["max_rel_error"], "nan");
  EXPECT_EQ(j["load_ms"], "-inf");
  absl::StatusOr<MeasureResult> back = MeasureResultFromJson(j);
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(std::isnan(back->check.max_rel_error));
  EXPECT_EQ(back->load_ms, -std::numeric_limits<double>::infinity());
  // A fully timed result writes no "screened" field and reads back unscreened.
  EXPECT_FALSE(j.contains("screened"));
  EXPECT_FALSE(back->screened);
}

TEST(MeasureResultJsonTest, MalformedFieldsAreNamed) {
  const nlohmann::json good = MeasureResultToJson(FullResult());
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* expected;
  };
  const Case cases[] = {
      {"/error", "crashed", "field 'error'"},
      {"/error", 3, "field 'error' is not a string"},
      {"/message", 1, "field 'message' is not a string"},
      {"/costs_s", "fast", "field 'costs_s' is not an array"},
      {"/costs_s/1", "slow", "field 'costs_s[1]' is not a number"},
      {"/timing", 1, "field 'timing' is not an object"},
      {"/timing/runs", "ten", "field 'timing.runs' is not an integer"},
      {"/timing/median_ms", nullptr, "field 'timing.median_ms' is not a number"},
      {"/check/mismatches", 1.5, "field 'check.mismatches' is not an integer"},
      {"/screened", 1, "field 'screened' is not a boolean"},
      {"/kernels", nlohmann::json::object(), "field 'kernels' is not an array"},
      {"/kernels/1", 7, "field 'kernels[1]' is not an object"},
      {"/kernels/0/registers_per_thread", "many",
       "field 'kernels[0].registers_per_thread' is not an integer"},
      // Values that do not hang together: a run count the costs do not have (which would let a
      // damaged record pass for a held timing), a negative count, soak or run time.
      {"/timing/runs", 100000, "'timing.runs' is 100000 but 'costs_s' has 2 runs"},
      {"/timing/runs", -1, "field 'timing.runs' is not a count >= 0"},
      {"/timing/soak_ms", -1000, "field 'timing.soak_ms' is not ms >= 0"},
      {"/costs_s/0", -0.001, "field 'costs_s' is not run times >= 0 s"},
  };
  // A timed result whose costs were cut away.
  nlohmann::json ok = good;
  ok["error"] = "none";
  ASSERT_THAT(MeasureResultFromJson(ok), IsOk());
  ok["costs_s"] = nlohmann::json::array();
  EXPECT_THAT(MeasureResultFromJson(ok),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'timing.runs' is 2 but 'costs_s' has 0")));
  for (const Case& c : cases) {
    nlohmann::json j = good;
    j[nlohmann::json::json_pointer(c.pointer)] = c.value;
    EXPECT_THAT(MeasureResultFromJson(j),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.expected)))
        << c.pointer;
  }
  nlohmann::json no_error = good;
  no_error.erase("error");
  EXPECT_THAT(MeasureResultFromJson(no_error),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'error' is missing")));
  EXPECT_THAT(MeasureResultFromJson(nlohmann::json::array()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a json object")));
}

TEST(MeasureOptionsTest, ScreenIsTheSmallerOfTheFixedAndTheBatchRelativeOne) {
  MeasureOptions o;
  EXPECT_EQ(ScreenFor(o, 0), 0);  // neither set: no screening
  EXPECT_EQ(ScreenFor(o, 2.0), 0);
  o.screen_factor = 1.5;
  EXPECT_EQ(ScreenFor(o, 0), 0);  // no candidate fully timed yet in this worker
  EXPECT_DOUBLE_EQ(ScreenFor(o, 2.0), 3.0);
  o.screen_above_ms = 2.5;
  EXPECT_DOUBLE_EQ(ScreenFor(o, 2.0), 2.5);
  EXPECT_DOUBLE_EQ(ScreenFor(o, 1.0), 1.5);
  EXPECT_DOUBLE_EQ(ScreenFor(o, 0), 2.5);
  o.screen_factor = 0;
  EXPECT_DOUBLE_EQ(ScreenFor(o, 1.0), 2.5);
}

TEST(MeasureOptionsTest, ValidationNamesTheBadOption) {
  EXPECT_THAT(ValidateMeasureOptions(MeasureOptions{}), IsOk());
  auto expect_bad = [](auto mutate, const char* what) {
    MeasureOptions o;
    mutate(o);
    EXPECT_THAT(ValidateMeasureOptions(o),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
  };
  expect_bad([](MeasureOptions& o) { o.timing.min_runs = 0; }, "min_runs");
  expect_bad([](MeasureOptions& o) { o.timing.max_runs = 2; }, "max_runs 2");
  expect_bad([](MeasureOptions& o) { o.check_trials = -1; }, "check_trials");
  expect_bad([](MeasureOptions& o) { o.distributions.clear(); }, "distributions");
  expect_bad([](MeasureOptions& o) { o.atol = -1; }, "tolerances");
  expect_bad([](MeasureOptions& o) { o.reference_point_samples = -3; }, "reference_point_samples");
  expect_bad([](MeasureOptions& o) { o.run_timeout_ms = 0; }, "run_timeout_ms");
  expect_bad([](MeasureOptions& o) { o.setup_timeout_ms = -5; }, "setup_timeout_ms");
  expect_bad([](MeasureOptions& o) { o.host_threads = -1; }, "host_threads");
  expect_bad([](MeasureOptions& o) { o.screen_above_ms = -1; }, "screen_above_ms");
  expect_bad([](MeasureOptions& o) { o.screen_factor = -2; }, "screen_factor");
  // Without a check, no distributions are needed.
  MeasureOptions unchecked;
  unchecked.check = false;
  unchecked.distributions.clear();
  EXPECT_THAT(ValidateMeasureOptions(unchecked), IsOk());
}

// A task that needs 80 % of the available memory: below the total but above the 60 % a
// measurement may take. The refusal says so, with both numbers (it once read "needs 80 GiB ...
// but 124.8 GiB are available"); half the share passes.
TEST(MeasureOptionsTest, HostMemoryRefusalStatesTheShareItAllows) {
  const double available = AvailableHostBytes();
  ASSERT_GT(available, 0);
  MeasureOptions options;  // 8 bytes per element and (check trials + 3) copies
  const double copies = options.check_trials + 3;
  auto dag_needing = [&](double bytes) {
    const int64_t elements = static_cast<int64_t>(bytes / (8.0 * copies) / 2);  // input + output
    absl::StatusOr<ir::Tensor> x = ir::Placeholder("X", {elements});
    EXPECT_TRUE(x.ok()) << x.status();
    absl::StatusOr<ir::Tensor> y =
        ir::Compute("Y", {elements}, [&](const std::vector<ir::Expr>& ax) { return (*x)(ax)*2.0; });
    EXPECT_TRUE(y.ok()) << y.status();
    absl::StatusOr<ir::ComputeDAG> dag = ir::ComputeDAG::Create({*y});
    EXPECT_TRUE(dag.ok()) << dag.status();
    return *std::move(dag);
  };
  const ir::ComputeDAG big = dag_needing(0.8 * available);
  const Target cpu = Target::HostCpu();
  EXPECT_NEAR(EstimateMeasureHostBytes(big, options, cpu), 0.8 * available, 0.01 * available);
  EXPECT_THAT(CheckMeasureHostMemory(big, options, cpu),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::AllOf(HasSubstr("more than the 60% of the"),
                                        HasSubstr("GiB available that a measurement may take"))));
  EXPECT_THAT(CheckMeasureHostMemory(dag_needing(0.3 * available), options, cpu), IsOk());
}

// On a GPU target a task with 2^28 input elements (2 GiB as 8-byte values per copy) and a small
// output generates its inputs on demand (the reference runs on the device): the estimate is its
// outputs' copies plus one chunk (at most 256 MiB), against more than 10 GiB on the cpu target.
TEST(MeasureOptionsTest, GpuTasksWithLargeInputsGenerateThemOnDemand) {
  MeasureOptions options;
  const double copies = options.check_trials + 3;
  const int64_t rows = 1024, cols = int64_t{1} << 18;  // 2^28 inputs, 1024 outputs
  ir::Tensor x = Ok(ir::Placeholder("X", {rows, cols}));
  ir::Tensor y = Ok(ir::Reduce("Y", {rows}, ir::ReduceKind::kSum, {cols},
                               [&](const std::vector<ir::Expr>& ax,
                                   const std::vector<ir::Expr>& r) { return x(ax[0], r[0]); }));
  const ir::ComputeDAG big = Ok(ir::ComputeDAG::Create({y}));
  const Target cpu = Target::HostCpu();
  const Target gpu = Target::H200();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  ASSERT_TRUE(CheckInputsOnDemand(big, options, gpu));
  EXPECT_FALSE(CheckInputsOnDemand(big, options, cpu));
  const double gpu_bytes = EstimateMeasureHostBytes(big, options, gpu);
  EXPECT_GE(gpu_bytes, 1024.0 * 8 * copies);  // the outputs' 8-byte copies
  EXPECT_LE(gpu_bytes, 1024.0 * 8 * copies + 256.0 * 1024 * 1024);
  EXPECT_GT(EstimateMeasureHostBytes(big, options, cpu), 10 * kGiB);
  // Not below the threshold, nor with the interpreter's reference, unless nothing is checked.
  MeasureOptions unchecked = options;
  unchecked.check = false;
  unchecked.interpreter_reference_max_ops = 1e30;
  EXPECT_TRUE(CheckInputsOnDemand(big, unchecked, gpu));
  MeasureOptions high = options;
  high.generated_inputs_min_elements = big.stage(big.input_ids()[0]).NumElements() + 1;
  EXPECT_FALSE(CheckInputsOnDemand(big, high, gpu));
  MeasureOptions interpreted = options;
  interpreted.interpreter_reference_max_ops = 1e30;
  EXPECT_FALSE(CheckInputsOnDemand(big, interpreted, gpu));
  MeasureOptions negative = options;
  negative.generated_inputs_min_elements = -1;
  EXPECT_THAT(ValidateMeasureOptions(negative),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("generated_inputs_min_elements must not be negative")));
}

}  // namespace
}  // namespace tilesearch::measure
