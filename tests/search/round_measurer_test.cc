// Rounds spread by a RoundMeasurer (TuneOptions::measurer), without MPI: a measurer that plays
// two ranks in this process, sending the second rank's share through its JSON form
// (RoundShareToJson / FromJson, MeasuredCandidateToJson / FromJson) to MeasureShare on a runner of
// its own and delivering the results in candidate order. The log must read as a single process's:
// the budget exactly, each schedule measured once, trials in order, one round line per round
// naming both ranks' shares; a failing measurer fails the job with its error after logging what
// it delivered; and the share's JSON keeps every field.
#include "search/round_measurer.h"

#include <cstdio>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status_matchers.h"
#include "base/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/runner.h"
#include "search/log_io.h"
#include "search/tuner.h"
#include "tests/search/scratch_dir.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

// Two "ranks" in one process: rank 0's share through the tuner's own builder and runner, rank
// 1's through JSON and MeasureShare. Fails round `fail_round` (0: never) after delivering its
// first candidate.
class TwoRankMeasurer : public RoundMeasurer {
 public:
  explicit TwoRankMeasurer(int64_t fail_round = 0) : fail_round_(fail_round) {}

  absl::StatusOr<std::vector<RankTiming>> MeasureRound(const RoundShare& round,
                                                       const LocalShare& local,
                                                       const ResultCallback& on_result) override {
    ++rounds_;
    std::vector<std::optional<MeasuredCandidate>> slots(round.steps.size());
    std::vector<RankTiming> timing(2);
    timing[1].rank = 1;
    local(
        ShareOfRank(round, 0, 2).indices,
        [&](const MeasuredCandidate& m) { slots[static_cast<size_t>(m.index)] = m; }, &timing[0]);
    absl::StatusOr<RoundShare> remote =
        RoundShareFromJson(RoundShareToJson(ShareOfRank(round, 1, 2)));
    if (!remote.ok()) return remote.status();
    absl::StatusOr<ir::ComputeDAG> dag = remote->workload.Build();
    if (!dag.ok()) return dag.status();
    measure::MeasureOptions options;
    options.timing.min_runs = 1;
    options.timing.min_total_ms = 0;
    options.timing.warmup_runs = 0;
    options.host_threads = 1;
    absl::StatusOr<std::unique_ptr<measure::Runner>> runner =
        measure::CreateHostRunner(remote->target, options);
    if (!runner.ok()) return runner.status();
    MeasureShare(
        *remote, *dag, **runner,
        [&](const MeasuredCandidate& m) {
          absl::StatusOr<MeasuredCandidate> back =
              MeasuredCandidateFromJson(MeasuredCandidateToJson(m));
          ASSERT_TRUE(back.ok()) << back.status();
          slots[static_cast<size_t>(back->index)] = *back;
        },
        &timing[1]);
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!slots[i]) return absl::InternalError("a candidate has no result");
      on_result(*slots[i]);
      if (rounds_ == fail_round_) return absl::InternalError("rank 1 stopped answering");
    }
    return timing;
  }

 private:
  int64_t fail_round_;
  int64_t rounds_ = 0;
};

TEST(RoundMeasurerTest, ASpreadJobLogsTheBudgetOnceEachWithBothRanksPerRound) {
  const std::string path = tilesearch::testing::ScratchPath("spread.jsonl");
  TuneOptions o = testing::TinyCpuTuneOptions(path, 12, 4, 3);
  o.measurer = std::make_shared<TwoRankMeasurer>();
  absl::StatusOr<TuneResult> tuned = Tune(testing::SquareMatmul(16), Target::HostCpu(), o);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->trials, 12);
  ASSERT_TRUE(tuned->best.has_value());
  absl::StatusOr<LogContents> log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->records.size(), 12u);
  std::unordered_set<uint64_t> states;
  for (size_t i = 0; i < log->records.size(); ++i) {
    EXPECT_EQ(log->records[i].trial, static_cast<int64_t>(i));
    EXPECT_TRUE(states.insert(RecordStateHash(log->records[i])).second) << "trial " << i;
  }
  ASSERT_EQ(log->rounds.size(), 3u);
  for (const RoundRecord& r : log->rounds) {
    ASSERT_EQ(r.ranks.size(), 2u);
    EXPECT_EQ(r.ranks[0].rank, 0);
    EXPECT_EQ(r.ranks[1].rank, 1);
    EXPECT_EQ(r.ranks[0].trials + r.ranks[1].trials, r.trials);
    EXPECT_EQ(r.ranks[0].trials, 2);
  }
}

TEST(RoundMeasurerTest, AFailedRoundKeepsWhatWasDeliveredAndTheJobResumes) {
  const std::string path = tilesearch::testing::ScratchPath("failed.jsonl");
  TuneOptions o = testing::TinyCpuTuneOptions(path, 12, 4, 5);
  o.measurer = std::make_shared<TwoRankMeasurer>(/*fail_round=*/2);
  EXPECT_THAT(Tune(testing::SquareMatmul(16), Target::HostCpu(), o).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("rank 1 stopped answering")));
  absl::StatusOr<LogContents> log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->records.size(), 5u);  // round 1, and round 2's first candidate
  o.measurer = std::make_shared<TwoRankMeasurer>();
  absl::StatusOr<TuneResult> resumed = Tune(testing::SquareMatmul(16), Target::HostCpu(), o);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->new_trials, 7);
  log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status();
  std::unordered_set<uint64_t> states;
  for (const MeasureRecord& r : log->records) {
    EXPECT_TRUE(states.insert(RecordStateHash(r)).second) << "trial " << r.trial;
  }
  EXPECT_EQ(states.size(), 12u);
}

TEST(RoundMeasurerTest, AShareKeepsEveryFieldThroughJson) {
  RoundShare share;
  share.workload = testing::SquareMatmul(8);
  share.target = Target::HostCpu();
  share.precision = measure::Fp32Precision::kTf32;
  share.round = 7;
  share.indices = {1, 3};
  share.steps = {{}, {}};
  share.screen_above_ms = 1.5;
  share.screen_factor = 2;
  share.compile_timeout_ms = 1234;
  share.unroll_budget = 99;
  absl::StatusOr<RoundShare> back = RoundShareFromJson(RoundShareToJson(share));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->workload.ToString(), share.workload.ToString());
  EXPECT_EQ(back->target.ToString(), share.target.ToString());
  EXPECT_EQ(back->target.host_cores, share.target.host_cores);
  EXPECT_EQ(back->precision, measure::Fp32Precision::kTf32);
  EXPECT_EQ(back->round, 7);
  EXPECT_EQ(back->indices, share.indices);
  EXPECT_EQ(back->steps.size(), 2u);
  EXPECT_EQ(back->screen_above_ms, 1.5);
  EXPECT_EQ(back->screen_factor, 2);
  EXPECT_EQ(back->compile_timeout_ms, 1234);
  EXPECT_EQ(back->unroll_budget, 99);
  EXPECT_THAT(RoundShareFromJson(nlohmann::json{{"round", 1}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("workload")));
}

TEST(RoundMeasurerTest, SharesInterleaveTheRoundOverRanks) {
  RoundShare round;
  for (int64_t i = 0; i < 5; ++i) {
    round.indices.push_back(i);
    round.steps.push_back({});
  }
  EXPECT_EQ(ShareOfRank(round, 0, 2).indices, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(ShareOfRank(round, 1, 2).indices, (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(ShareOfRank(round, 5, 6).indices.empty());
}

}  // namespace
}  // namespace tilesearch::search
