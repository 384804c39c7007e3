// Timing statistics against hand-computed values, and the stopping rule of TimeRepeated counted
// with a fake run function that returns fixed times.
#include "runtime/timing.h"

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

TEST(SummarizeTest, OddCountStatsMatchHandComputedValues) {
  // Sorted 1..5: median 3; p10 at position 0.4 → 1.4; p90 at 3.6 → 4.6; variance 10 / 4.
  TimingStats s = Summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(s.runs, 5);
  EXPECT_THAT(s.samples_ms, ElementsAre(4, 1, 3, 2, 5));  // order of the runs kept
  EXPECT_DOUBLE_EQ(s.median_ms, 3);
  EXPECT_DOUBLE_EQ(s.mean_ms, 3);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_DOUBLE_EQ(s.max_ms, 5);
  EXPECT_DOUBLE_EQ(s.p10_ms, 1.4);
  EXPECT_DOUBLE_EQ(s.p90_ms, 4.6);
  EXPECT_DOUBLE_EQ(s.stddev_ms, std::sqrt(2.5));
  EXPECT_DOUBLE_EQ(s.relative_spread(), 3.2 / 3);
}

TEST(SummarizeTest, EvenCountInterpolatesMedianAndPercentiles) {
  // Sorted 1, 2, 3, 10: median 2.5; p10 at 0.3 → 1.3; p90 at 2.7 → 3 + 0.7·7 = 7.9; mean 4;
  // squared deviations 9 + 4 + 1 + 36 = 50 over n − 1 = 3.
  TimingStats s = Summarize({10, 3, 1, 2});
  EXPECT_DOUBLE_EQ(s.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.p10_ms, 1.3);
  EXPECT_DOUBLE_EQ(s.p90_ms, 7.9);
  EXPECT_DOUBLE_EQ(s.mean_ms, 4);
  EXPECT_DOUBLE_EQ(s.stddev_ms, std::sqrt(50.0 / 3));
}

TEST(SummarizeTest, OneSampleHasZeroSpread) {
  TimingStats s = Summarize({0.25});
  EXPECT_EQ(s.runs, 1);
  EXPECT_DOUBLE_EQ(s.median_ms, 0.25);
  EXPECT_DOUBLE_EQ(s.p10_ms, 0.25);
  EXPECT_DOUBLE_EQ(s.p90_ms, 0.25);
  EXPECT_DOUBLE_EQ(s.stddev_ms, 0);
}

TEST(SummarizeTest, ToStringGivesMedianPercentilesAndRuns) {
  EXPECT_EQ(Summarize({4, 1, 3, 2, 5}).ToString(),
            "3.000 ms median (p10 1.400, p90 4.600, 5 runs)");
}

TEST(SummarizeDeathTest, EmptyOrNonFiniteSamplesAbort) {
  EXPECT_DEATH(Summarize({}), "no samples");
  EXPECT_DEATH(Summarize({1, NAN}), "non-finite");
}

// Counts calls and returns a fixed time per run.
struct FakeRun {
  double ms;
  int calls = 0;
  absl::StatusOr<double> operator()() {
    ++calls;
    return ms;
  }
};

TEST(TimeRepeatedTest, RunsUntilMinimumTotalTime) {
  // 2 ms per run, at least 10 runs and 50 ms: 25 timed runs after 3 warm-ups.
  FakeRun run{2.0};
  TimingOptions options;
  options.warmup_runs = 3;
  options.min_runs = 10;
  options.min_total_ms = 50;
  options.max_runs = 1000;
  absl::StatusOr<TimingStats> s = TimeRepeated(std::ref(run), options);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->runs, 25);
  EXPECT_EQ(s->samples_ms.size(), 25u);
  EXPECT_EQ(run.calls, 28);
  EXPECT_DOUBLE_EQ(s->median_ms, 2.0);
}

TEST(TimeRepeatedTest, MinimumRunsWinForSlowRuns) {
  FakeRun run{100.0};
  TimingOptions options;
  options.warmup_runs = 1;
  options.min_runs = 10;
  options.min_total_ms = 50;
  absl::StatusOr<TimingStats> s = TimeRepeated(std::ref(run), options);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->runs, 10);
  EXPECT_EQ(run.calls, 11);
}

TEST(TimeRepeatedTest, MaxRunsCapsFastRuns) {
  FakeRun run{0.001};
  TimingOptions options;
  options.warmup_runs = 0;
  options.min_runs = 5;
  options.min_total_ms = 50;
  options.max_runs = 20;
  absl::StatusOr<TimingStats> s = TimeRepeated(std::ref(run), options);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->runs, 20);
  EXPECT_EQ(run.calls, 20);
}

// A fast kernel behind a slow flush: each run reports 0.01 ms but takes 20 ms of wall time. The
// min_total_ms extension stops once the wall time passes max_wall_ms (100 ms: after at most 5
// runs, since each takes at least 20 ms); min_runs still holds.
TEST(TimeRepeatedTest, WallLimitEndsTheMinimumTimeExtension) {
  int calls = 0;
  auto run = [&]() -> absl::StatusOr<double> {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return 0.01;
  };
  TimingOptions options;
  options.warmup_runs = 0;
  options.min_runs = 3;
  options.min_total_ms = 50;
  options.max_wall_ms = 100;
  absl::StatusOr<TimingStats> s = TimeRepeated(run, options);
  ASSERT_THAT(s, IsOk());
  EXPECT_GE(s->runs, 3);
  EXPECT_LE(s->runs, 5);
  // min_runs wins over the wall limit.
  options.min_runs = 4;
  options.max_wall_ms = 10;
  s = TimeRepeated(run, options);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->runs, 4);
  options.max_wall_ms = -1;
  EXPECT_THAT(TimeRepeated(run, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_wall_ms")));
}

// The soak: untimed runs after the warm-up until soak_ms of wall time has passed since the first
// untimed run, then the timing as without it. Each fake run sleeps 5 ms (or longer, on a busy
// machine); the timed runs are the last `runs` calls. Both bounds hold whatever the sleeps take:
// the first timed run starts 40 ms or more after TimeRepeated was called, and the last untimed
// one under 40 ms after the first run (which is no earlier than the soak's clock).
TEST(TimeRepeatedTest, SoakRunsUntimedForItsWallTimeBeforeTheTiming) {
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> starts;
  auto run = [&]() -> absl::StatusOr<double> {
    starts.push_back(Clock::now());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return 1.0;
  };
  TimingOptions options;
  // No warm-up: its 5 ms run could outlast the soak on a loaded machine and leave no soak run.
  options.warmup_runs = 0;
  options.soak_ms = 40;
  options.min_runs = 3;
  options.min_total_ms = 0;
  const Clock::time_point called = Clock::now();
  absl::StatusOr<TimingStats> s = TimeRepeated(run, options);
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(s->runs, 3);
  EXPECT_EQ(s->soak_ms, 40);          // logged with the timing
  ASSERT_GE(starts.size(), 3u + 1u);  // at least one soak run, the timed runs
  auto ms_between = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  EXPECT_GE(ms_between(called, starts[starts.size() - 3]), 40.0);
  // No soak run started past the soak.
  EXPECT_LT(ms_between(starts.front(), starts[starts.size() - 4]), 40.0);
  options.soak_ms = -1;
  EXPECT_THAT(TimeRepeated(run, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("soak_ms")));
}

TEST(TimeRepeatedTest, FirstErrorOfTheRunIsReturnedAsIs) {
  int calls = 0;
  auto run = [&]() -> absl::StatusOr<double> {
    if (++calls == 5) return absl::UnavailableError("launch failed: illegal address");
    return 1.0;
  };
  TimingOptions options;
  options.warmup_runs = 2;
  EXPECT_THAT(TimeRepeated(run, options),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("illegal address")));
  EXPECT_EQ(calls, 5);
}

TEST(TimeRepeatedTest, WarmupErrorIsReturned) {
  auto run = []() -> absl::StatusOr<double> { return absl::InternalError("warm-up fault"); };
  EXPECT_THAT(TimeRepeated(run, TimingOptions{}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("warm-up fault")));
}

TEST(TimeRepeatedTest, InvalidOptionsAreRejected) {
  FakeRun run{1.0};
  TimingOptions options;
  options.min_runs = 0;
  EXPECT_THAT(TimeRepeated(std::ref(run), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_runs")));
  options = {};
  options.max_runs = 3;
  options.min_runs = 5;
  EXPECT_THAT(TimeRepeated(std::ref(run), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_runs 3")));
  options = {};
  options.warmup_runs = -1;
  EXPECT_THAT(TimeRepeated(std::ref(run), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("warmup_runs")));
  options = {};
  options.min_total_ms = -1;
  EXPECT_THAT(TimeRepeated(std::ref(run), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_total_ms")));
  EXPECT_EQ(run.calls, 0);
}

}  // namespace
}  // namespace tilesearch::runtime
