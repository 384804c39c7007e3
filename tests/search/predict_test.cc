// Schedules for untuned shapes: split lengths adapted to new extents, step lists transferred
// between shapes of one operator (each transferred program run in the interpreter against the
// naive program), and PredictSchedule choosing among transferred and sampled candidates.
#include "search/predict.h"

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "costmodel/cost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/schedule_transfer.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::tilesearch::testing::Ok;
using ::tilesearch::testing::StatusIs;
using Lengths = std::vector<std::optional<int64_t>>;

schedule::Workload MatmulWorkload(int64_t m, int64_t k, int64_t n) {
  schedule::Workload w;
  w.op = "matmul";
  w.args.shapes = {{m, k}, {k, n}};
  w.args.dtype = ir::ScalarType::kFloat32;
  return w;
}

TEST(AdaptSplitLengthsTest, KeepsTilesThatFitAndCutsFromTheOuterEnd) {
  // inner_to_outer: lengths are inner parts, the innermost kept first.
  EXPECT_EQ(AdaptSplitLengths({8, 4}, true, 1024), (Lengths{8, 4}));
  EXPECT_EQ(AdaptSplitLengths({8, 4}, true, 16), (Lengths{4, 4}));
  EXPECT_EQ(AdaptSplitLengths({8, 4}, true, 3), (Lengths{1, 3}));
  EXPECT_EQ(AdaptSplitLengths({8, 4}, true, 100), (Lengths{8, 4}));  // guarded remainder
  // Outer parts: the outermost kept first.
  EXPECT_EQ(AdaptSplitLengths({8, 4}, false, 16), (Lengths{8, 2}));
  EXPECT_EQ(AdaptSplitLengths({Lengths::value_type(), 4}, true, 2),
            (Lengths{Lengths::value_type(), 2}));
}

TEST(WorkloadDistanceTest, LogRatiosOfTwinsOnly) {
  EXPECT_DOUBLE_EQ(WorkloadDistance(MatmulWorkload(512, 512, 512), MatmulWorkload(1024, 512, 256)),
                   2);  // A's m doubled, B's n halved
  EXPECT_DOUBLE_EQ(WorkloadDistance(MatmulWorkload(64, 64, 64), MatmulWorkload(64, 64, 64)), 0);
  schedule::Workload t = MatmulWorkload(64, 64, 64);
  t.args.attrs["transpose_b"] = "true";
  EXPECT_TRUE(std::isinf(WorkloadDistance(MatmulWorkload(64, 64, 64), t)));
  schedule::Workload h = MatmulWorkload(64, 64, 64);
  h.args.dtype = ir::ScalarType::kFloat16;
  EXPECT_TRUE(std::isinf(WorkloadDistance(MatmulWorkload(64, 64, 64), h)));
}

// Every state sampled for one matmul shape, transferred to another (non-divisible) shape, lowers
// and computes the same as the naive program there.
void ExpectTransfersRun(const Target& target, int samples) {
  const ir::ComputeDAG from = Ok(MatmulWorkload(64, 64, 64).Build());
  const ir::ComputeDAG to = Ok(MatmulWorkload(40, 72, 24).Build());
  TuneContext ctx(from, target, SearchOptions{}, 3);
  const std::vector<schedule::State> sketches = Ok(GenerateSketches(ctx));
  const std::vector<schedule::State> states = SampleInitialPopulation(sketches, samples, ctx);
  ASSERT_GE(static_cast<int>(states.size()), samples / 2);
  TuneContext to_ctx(to, target);
  size_t lowered = 0;
  for (const schedule::State& s : states) {
    absl::StatusOr<schedule::State> moved = TransferSteps(s.steps(), to);
    ASSERT_TRUE(moved.ok()) << moved.status() << "\n" << s.ToString();
    absl::StatusOr<Candidate> c = LowerCandidate(*moved, to_ctx);
    if (!c.ok()) continue;  // over a limit of the new shape: predict skips it the same way
    ++lowered;
    schedule::testing::ExpectMatchesReference(to, *moved, target, /*exact=*/false);
  }
  EXPECT_GE(lowered, states.size() * 3 / 4);
}

TEST(TransferStepsTest, CpuSchedulesOfOneMatmulRunCorrectlyOnAnother) {
  ExpectTransfersRun(Target::HostCpu(), 24);
}

TEST(TransferStepsTest, GpuSchedulesOfOneMatmulRunCorrectlyOnAnother) {
  ExpectTransfersRun(Target::H200(), 24);
}

TEST(TransferStepsTest, AnotherOperatorsStepsAreAnError) {
  const ir::ComputeDAG mm = Ok(MatmulWorkload(64, 64, 64).Build());
  TuneContext ctx(mm, Target::HostCpu(), SearchOptions{}, 1);
  const std::vector<schedule::State> states =
      SampleInitialPopulation(Ok(GenerateSketches(ctx)), 1, ctx);
  ASSERT_EQ(states.size(), 1u);
  schedule::Workload relu;
  relu.op = "relu";
  relu.args.shapes = {{64}};
  EXPECT_THAT(TransferSteps(states[0].steps(), Ok(relu.Build())),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("step ")));
}

// Records of valid trials of `states` on `workload`, with the given median times.
std::vector<MeasureRecord> RecordsOf(const schedule::Workload& workload, const Target& target,
                                     const std::vector<schedule::State>& states,
                                     const std::vector<double>& ms) {
  const ir::ComputeDAG dag = Ok(workload.Build());
  std::vector<MeasureRecord> out;
  for (size_t i = 0; i < states.size(); ++i) {
    MeasureRecord r;
    r.workload = workload;
    r.workload_key = dag.WorkloadKey();
    r.target = target;
    r.steps = states[i].steps();
    r.result.timing.median_ms = ms[i];
    r.trial = static_cast<int64_t>(i);
    out.push_back(r);
  }
  return out;
}

TEST(PredictScheduleTest, WithoutAModelTheNearestFastestRecordIsTransferred) {
  const Target target = Target::HostCpu();
  const schedule::Workload near = MatmulWorkload(64, 64, 64);
  const schedule::Workload far = MatmulWorkload(8, 8, 8);
  TuneContext ctx(Ok(near.Build()), target, SearchOptions{}, 5);
  const std::vector<schedule::State> states =
      SampleInitialPopulation(Ok(GenerateSketches(ctx)), 3, ctx);
  ASSERT_EQ(states.size(), 3u);
  std::vector<MeasureRecord> records = RecordsOf(near, target, states, {0.3, 0.1, 0.2});
  for (MeasureRecord& r : RecordsOf(far, target, {states[0]}, {0.01})) records.push_back(r);

  const schedule::Workload task = MatmulWorkload(48, 80, 56);
  const ir::ComputeDAG dag = Ok(task.Build());
  const PredictedSchedule p = Ok(PredictSchedule(dag, task, target, records, nullptr));
  EXPECT_THAT(p.origin, HasSubstr("trial 1 of matmul 64x64 64x64"));  // 0.1 ms, the nearest
  EXPECT_EQ(p.transferred, 3);  // the far record's schedule transfers to the same as trial 0
  EXPECT_EQ(p.sampled, 0);
  EXPECT_TRUE(std::isnan(p.score));
  schedule::testing::ExpectMatchesReference(dag, p.state, target, /*exact=*/false);
}

TEST(PredictScheduleTest, AModelRanksTransfersAndSamplesOnlyWhereNothingTransfers) {
  const Target target = Target::H200();
  const schedule::Workload tuned = MatmulWorkload(64, 64, 64);
  TuneContext ctx(Ok(tuned.Build()), target, SearchOptions{}, 9);
  const std::vector<schedule::State> states =
      SampleInitialPopulation(Ok(GenerateSketches(ctx)), 2, ctx);
  ASSERT_EQ(states.size(), 2u);
  const std::vector<MeasureRecord> records = RecordsOf(tuned, target, states, {0.2, 0.1});

  const schedule::Workload task = MatmulWorkload(96, 32, 80);
  const ir::ComputeDAG dag = Ok(task.Build());
  costmodel::RandomModel model(4);
  PredictOptions o;
  o.fresh_samples = 6;
  const PredictedSchedule p = Ok(PredictSchedule(dag, task, target, records, &model, o));
  EXPECT_EQ(p.transferred, 2);
  EXPECT_EQ(p.sampled, 0);  // transfers exist: no samples
  EXPECT_THAT(p.origin, HasSubstr("transferred from trial"));
  EXPECT_TRUE(p.score >= 0 && p.score < 1) << p.score;  // a RandomModel score
  schedule::testing::ExpectMatchesReference(dag, p.state, target, /*exact=*/false);

  // No record of the operator: the model ranks fresh samples.
  const PredictedSchedule fresh = Ok(PredictSchedule(dag, task, target, {}, &model, o));
  EXPECT_EQ(fresh.transferred, 0);
  EXPECT_GT(fresh.sampled, 0);
  EXPECT_LE(fresh.sampled, 6);
  EXPECT_EQ(fresh.origin, "sampled");
  schedule::testing::ExpectMatchesReference(dag, fresh.state, target, /*exact=*/false);
}

TEST(PredictScheduleTest, NothingToTransferWithoutAModelIsNotFound) {
  const schedule::Workload task = MatmulWorkload(48, 80, 56);
  const ir::ComputeDAG dag = Ok(task.Build());
  EXPECT_THAT(PredictSchedule(dag, task, Target::HostCpu(), {}, nullptr),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no tuned workload of matmul float32 on cpu")));
  PredictOptions bad;
  bad.nearest_workloads = 0;
  EXPECT_THAT(PredictSchedule(dag, task, Target::HostCpu(), {}, nullptr, bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nearest_workloads")));
}

}  // namespace
}  // namespace tilesearch::search
