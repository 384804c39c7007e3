// Overlapped tuning rounds (TuneOptions::overlap_rounds) on the cpu target, where they are off by
// default and switched on here: round r is measured on a second thread while round r + 1 is
// trained, searched and built. What must hold is what holds without overlap: the log ends with
// exactly the budget, no state measured twice (the round in flight is excluded from the next
// round's search), trial numbers in order, one round line per round; and the overlap must really
// happen: the third round is searched by a model that has seen the first round only (its line's
// train_samples), where the serial loop's model has seen both earlier rounds. Either way one
// measuring worker is set up for the whole task (the round lines' measure_split). Also the
// automatic choices per target, the job's time limit, and the options' errors.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status_matchers.h"
#include "base/target.h"
#include "costmodel/xgboost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/apply_step.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/training_data.h"
#include "search/tuner.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

constexpr int kPerRound = 8;
constexpr int kTrials = 4 * kPerRound;

std::string TempLog(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/overlapped_rounds_test_" +
                           std::to_string(::getpid()) + "_" + name + ".jsonl";
  std::remove(path.c_str());
  return path;
}

// The learned model (its round lines say how many samples it was trained on), small search.
TuneOptions Options(const std::string& log, int trials, int overlap, int per_round = kPerRound,
                    bool stream_builds = true) {
  TuneOptions o = testing::TinyCpuTuneOptions(log, trials, per_round, 11);
  o.use_xgboost = true;
  o.overlap_rounds = overlap;
  o.stream_builds = stream_builds;
  // Enough states for full rounds of per_round (the tiny options' population of 16 gives 8).
  o.search.population = std::max(o.search.population, 3 * per_round);
  o.search.init_min_population = std::max(o.search.init_min_population, 2 * per_round);
  return o;
}

struct Job {
  absl::StatusOr<TuneResult> result;
  LogContents log;
};

Job RunJob(const std::string& name, int trials, int overlap, int per_round = kPerRound,
           bool stream_builds = true) {
  const std::string path = TempLog(name);
  Job job{Tune(testing::SquareMatmul(32), Target::HostCpu(),
               Options(path, trials, overlap, per_round, stream_builds)),
          {}};
  absl::StatusOr<LogContents> log = ReadLog(path);
  EXPECT_TRUE(log.ok()) << log.status();
  if (log.ok()) job.log = *std::move(log);
  std::remove(path.c_str());
  return job;
}

// The same with streaming builds (the default) and with each round built whole before its
// measurement (TuneOptions::stream_builds false).
class OverlappedRoundsStreamTest : public ::testing::TestWithParam<bool> {};

TEST_P(OverlappedRoundsStreamTest, MeasureTheBudgetOnceEachWithAOneRoundStaleModel) {
  const bool stream = GetParam();
  const Job overlapped = RunJob(stream ? "on" : "on_whole", kTrials, 1, kPerRound, stream);
  ASSERT_TRUE(overlapped.result.ok()) << overlapped.result.status();
  const std::vector<MeasureRecord>& records = overlapped.log.records;
  ASSERT_EQ(records.size(), static_cast<size_t>(kTrials));
  EXPECT_EQ(overlapped.result->new_trials, kTrials);
  std::unordered_set<uint64_t> states;
  const ir::ComputeDAG dag = *testing::SquareMatmul(32).Build();
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].trial, static_cast<int64_t>(i));
    EXPECT_TRUE(states.insert(StepsHash(records[i].steps)).second) << "trial " << i << " repeats";
    EXPECT_TRUE(schedule::ReplaySteps(dag, records[i].steps).ok()) << "trial " << i;
  }
  EXPECT_TRUE(overlapped.result->best.has_value());

  // Round 1 (no records yet) and round 2 (searched after round 1 was measured) are serial; rounds
  // 3 and 4 were searched while the round before them was measured.
  const std::vector<RoundRecord>& rounds = overlapped.log.rounds;
  ASSERT_EQ(rounds.size(), 4u);
  for (size_t r = 0; r < rounds.size(); ++r) {
    EXPECT_EQ(rounds[r].first_trial, static_cast<int64_t>(r) * kPerRound);
    EXPECT_EQ(rounds[r].trials, kPerRound);
    EXPECT_EQ(rounds[r].overlapped, r >= 2) << "round " << r + 1;
    // One measuring worker serves the whole task, although each overlapped round is measured
    // from a thread of its own that ends with the round.
    EXPECT_EQ(rounds[r].measure_split.worker_setups, r == 0 ? 1 : 0) << "round " << r + 1;
    EXPECT_GT(rounds[r].measure_split.items_s, 0) << "round " << r + 1;
    EXPECT_LE(rounds[r].measure_split.items_s, rounds[r].measure_s) << "round " << r + 1;
  }
  // The third round's model has seen the first round only; the fourth's the first two.
  EXPECT_EQ(rounds[1].train_samples, kPerRound);
  EXPECT_EQ(rounds[2].train_samples, kPerRound);
  EXPECT_EQ(rounds[3].train_samples, 2 * kPerRound);

  // Without overlap every round's model has seen every earlier round.
  const Job serial = RunJob(stream ? "off" : "off_whole", kTrials, 0, kPerRound, stream);
  ASSERT_TRUE(serial.result.ok()) << serial.result.status();
  ASSERT_EQ(serial.log.rounds.size(), 4u);
  for (size_t r = 0; r < serial.log.rounds.size(); ++r) {
    EXPECT_FALSE(serial.log.rounds[r].overlapped);
    EXPECT_EQ(serial.log.rounds[r].measure_split.worker_setups, r == 0 ? 1 : 0);
    EXPECT_EQ(serial.log.rounds[r].train_samples, static_cast<int64_t>(r) * kPerRound);
  }
}

INSTANTIATE_TEST_SUITE_P(StreamingOrWholeRounds, OverlappedRoundsStreamTest, ::testing::Bool());

// A pretrained model ranks before the task has records, so with a budget of more than two rounds
// the second round is searched while the first is measured; a budget whose second round is its
// last keeps the second round after the first (searched around its best). The samples of an
// overlapped round are given to the model beside the next build: every round's line still says
// the model saw all rounds but the one measured during its search.
TEST(OverlappedRoundsTest, APretrainedModelOverlapsFromTheFirstRound) {
  const Target cpu = Target::HostCpu();
  const std::string train_log = TempLog("pretrain_log");
  ASSERT_TRUE(Tune(testing::SquareMatmul(32), cpu, Options(train_log, kTrials, 0)).ok());
  search::TrainingDataOptions data_options;
  data_options.target = cpu;
  data_options.threads = 1;
  absl::StatusOr<TrainingData> data = LoadTrainingData({train_log}, data_options);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->tasks.size(), 1u);
  costmodel::XGBoostModel pretrained(costmodel::OnlineModelOptions(3, 1));
  ASSERT_TRUE(pretrained.Update(data->tasks[0].samples).ok());
  ASSERT_TRUE(pretrained.trained());
  pretrained.set_info({costmodel::ModelTargetName(cpu), "{}"});
  const std::string model = TempLog("pretrained") + ".model";
  ASSERT_TRUE(pretrained.Save(model).ok());

  const auto tune_from_model = [&](const std::string& name, int trials, int per_round = kPerRound) {
    const std::string path = TempLog(name);
    TuneOptions o = Options(path, trials, 1, per_round);
    o.model_init = model;
    Job job{Tune(testing::SquareMatmul(24), cpu, o), {}};
    absl::StatusOr<LogContents> log = ReadLog(path);
    EXPECT_TRUE(log.ok()) << log.status();
    if (log.ok()) job.log = *std::move(log);
    std::remove(path.c_str());
    return job;
  };
  const Job long_job = tune_from_model("from_model", kTrials);
  ASSERT_TRUE(long_job.result.ok()) << long_job.result.status();
  ASSERT_EQ(long_job.log.records.size(), static_cast<size_t>(kTrials));
  std::unordered_set<uint64_t> states;
  for (const MeasureRecord& r : long_job.log.records) {
    EXPECT_TRUE(states.insert(StepsHash(r.steps)).second) << "trial " << r.trial << " repeats";
  }
  const std::vector<RoundRecord>& rounds = long_job.log.rounds;
  ASSERT_EQ(rounds.size(), 4u);
  EXPECT_FALSE(rounds[0].overlapped);
  EXPECT_EQ(rounds[0].measure_split.worker_setups, 1);
  for (size_t r = 1; r < rounds.size(); ++r) {
    EXPECT_TRUE(rounds[r].overlapped) << "round " << r + 1;
    EXPECT_EQ(rounds[r].measure_split.worker_setups, 0) << "round " << r + 1;
    // Round r + 1 was searched while round r was measured: its model saw rounds 1 .. r - 1.
    EXPECT_EQ(rounds[r].train_samples, static_cast<int64_t>(r - 1) * kPerRound)
        << "round " << r + 1;
  }

  // Two rounds in all: the second is searched after the first is measured.
  const Job short_job = tune_from_model("from_model_short", 2 * kPerRound);
  ASSERT_TRUE(short_job.result.ok()) << short_job.result.status();
  ASSERT_EQ(short_job.log.rounds.size(), 2u);
  EXPECT_FALSE(short_job.log.rounds[1].overlapped);
  EXPECT_EQ(short_job.log.rounds[1].train_samples, kPerRound);

  // Rounds of 32: the first is half a round (it holds up the pipeline), the second a whole one
  // (searched while the first is measured; trials / 4 = 36 caps it), the last 32 in two halves.
  const Job half_first = tune_from_model("from_model_half_first", 144, 32);
  ASSERT_TRUE(half_first.result.ok()) << half_first.result.status();
  std::vector<int64_t> sizes;
  for (const RoundRecord& r : half_first.log.rounds) sizes.push_back(r.trials);
  EXPECT_EQ(sizes, (std::vector<int64_t>{16, 32, 32, 32, 16, 16}));
  EXPECT_EQ(half_first.log.records.size(), 144u);
  std::remove(train_log.c_str());
  std::remove(model.c_str());
}

// With overlap, the budget's last round (of at least 32) is measured as two halves chosen by one
// search, the second built while the first is measured; without overlap it stays one round.
TEST(OverlappedRoundsTest, TheLastRoundIsMeasuredInTwoHalves) {
  // Rounds of 32: the first is 21 (a learned model's first round is a quarter of the budget),
  // then 32, then the last 32 of the budget of 85.
  constexpr int kTrials85 = 85;
  const Job overlapped = RunJob("halves_on", kTrials85, 1, 32);
  ASSERT_TRUE(overlapped.result.ok()) << overlapped.result.status();
  std::vector<int64_t> sizes;
  for (const RoundRecord& r : overlapped.log.rounds) sizes.push_back(r.trials);
  EXPECT_THAT(sizes, ::testing::ElementsAre(21, 32, 16, 16));
  ASSERT_EQ(overlapped.log.rounds.size(), 4u);
  EXPECT_TRUE(overlapped.log.rounds[3].overlapped);  // built while the first half was measured
  ASSERT_EQ(overlapped.log.records.size(), static_cast<size_t>(kTrials85));
  std::unordered_set<uint64_t> states;
  for (size_t i = 0; i < overlapped.log.records.size(); ++i) {
    EXPECT_EQ(overlapped.log.records[i].trial, static_cast<int64_t>(i));
    EXPECT_TRUE(states.insert(StepsHash(overlapped.log.records[i].steps)).second)
        << "trial " << i << " repeats";
  }

  const Job serial = RunJob("halves_off", kTrials85, 0, 32);
  ASSERT_TRUE(serial.result.ok()) << serial.result.status();
  sizes.clear();
  for (const RoundRecord& r : serial.log.rounds) sizes.push_back(r.trials);
  EXPECT_THAT(sizes, ::testing::ElementsAre(21, 32, 32));
}

TEST(OverlappedRoundsTest, AnUnevenBudgetEndsExactlyAndResumes) {
  const std::string path = TempLog("uneven");
  const Target cpu = Target::HostCpu();
  // 2.5 rounds: the last round is cut to the budget although it was searched beside round 2.
  absl::StatusOr<TuneResult> first =
      Tune(testing::SquareMatmul(32), cpu, Options(path, 2 * kPerRound + 4, 1));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->trials, 2 * kPerRound + 4);
  absl::StatusOr<TuneResult> resumed =
      Tune(testing::SquareMatmul(32), cpu, Options(path, 4 * kPerRound, 1));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->new_trials, 2 * kPerRound - 4);
  absl::StatusOr<LogContents> log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->records.size(), static_cast<size_t>(4 * kPerRound));
  std::unordered_set<uint64_t> states;
  for (const MeasureRecord& r : log->records) {
    EXPECT_TRUE(states.insert(StepsHash(r.steps)).second) << "trial " << r.trial << " repeats";
  }
  std::remove(path.c_str());
}

TEST(OverlappedRoundsTest, ATimeLimitDropsTheRoundPreparedBesideTheLastMeasured) {
  const std::string path = TempLog("limit");
  const Target cpu = Target::HostCpu();
  ASSERT_TRUE(Tune(testing::SquareMatmul(32), cpu, Options(path, kPerRound, 1)).ok());
  // The log has records, so the first round of this job is measured beside the search of the
  // next; the limit is reached when the first round ends, and the next round is never measured.
  TuneOptions o = Options(path, 4 * kPerRound, 1);
  o.time_limit_s = 1e-3;
  absl::StatusOr<TuneResult> limited = Tune(testing::SquareMatmul(32), cpu, o);
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_TRUE(limited->time_limited);
  EXPECT_EQ(limited->new_trials, kPerRound);
  absl::StatusOr<LogContents> log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->records.size(), static_cast<size_t>(2 * kPerRound));
  ASSERT_EQ(log->rounds.size(), 2u);
  EXPECT_FALSE(log->rounds[1].overlapped);  // searched before the first round of this job
  // Without a limit the same resume runs to the budget.
  o.time_limit_s = 0;
  absl::StatusOr<TuneResult> full = Tune(testing::SquareMatmul(32), cpu, o);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE(full->time_limited);
  EXPECT_EQ(full->trials, 4 * kPerRound);
  std::remove(path.c_str());
}

TEST(OverlappedRoundsTest, AutomaticChoicesPerTarget) {
  TuneOptions given;
  ASSERT_LT(given.overlap_rounds, 0);
  ASSERT_LT(given.search.local_search_fraction, 0);
  ASSERT_EQ(given.per_round, 0);
  const TuneOptions cpu = ResolveTuneOptions(given, Target::HostCpu());
  EXPECT_EQ(cpu.overlap_rounds, 0);
  EXPECT_EQ(cpu.per_round, 64);
  EXPECT_EQ(cpu.search.local_search_fraction, 0.0);
  const Target h200 = Target::H200();
  const TuneOptions gpu = ResolveTuneOptions(given, h200);
  EXPECT_EQ(gpu.overlap_rounds, 1);
  EXPECT_EQ(gpu.search.local_search_fraction, 0.25);
  EXPECT_EQ(gpu.per_round, 128);
  // Given values stay.
  given.per_round = 32;
  given.overlap_rounds = 0;
  given.search.local_search_fraction = 0.5;
  const TuneOptions kept = ResolveTuneOptions(given, h200);
  EXPECT_EQ(kept.overlap_rounds, 0);
  EXPECT_EQ(kept.search.local_search_fraction, 0.5);
  EXPECT_EQ(kept.per_round, 32);
}

TEST(OverlappedRoundsTest, RejectsAnOverlapOtherThanOnOffOrAuto) {
  TuneOptions o = Options(TempLog("bad"), 4, 2);
  EXPECT_THAT(Tune(testing::SquareMatmul(32), Target::HostCpu(), o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("overlap_rounds must be 0 (off), 1 (on) or negative")));
  o.overlap_rounds = 1;
  o.time_limit_s = -1;
  EXPECT_THAT(Tune(testing::SquareMatmul(32), Target::HostCpu(), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("time_limit_s must be >= 0")));
  o.time_limit_s = 0;
  o.search.local_search_fraction = 1.5;
  EXPECT_THAT(Tune(testing::SquareMatmul(32), Target::HostCpu(), o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("local_search_fraction must be in [0, 1]")));
}

}  // namespace
}  // namespace tilesearch::search
