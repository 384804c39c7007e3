// Resuming from logs that went wrong. A tuning job killed with SIGKILL in the middle of a round
// loses no measured batch: a child
// process tunes on the cpu target with one candidate per runner call, the test kills it once the
// log holds some of the round's records but not its round line, then resumes in this process.
// Every record on disk before the kill is still there, byte for byte, none is measured again, and
// the log ends with exactly the requested number of trials.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/tuner.h"
#include "tests/search/record_test_util.h"
#include "tests/search/scratch_dir.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

using ::tilesearch::testing::IsOk;

// The complete lines of the file (those ending in '\n').
std::vector<std::string> CompleteLines(const std::string& path) {
  const std::string text = testing::ReadText(path);
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  lines.pop_back();  // after the last '\n': empty, or a partial line
  return lines;
}

// A child process that tunes and exits (0: the job succeeded); its pid, or -1 when fork failed.
pid_t TuneInChild(const schedule::Workload& workload, const Target& target,
                  const TuneOptions& options) {
  const pid_t child = ::fork();
  if (child == 0) {
    absl::StatusOr<TuneResult> result = Tune(workload, target, options);
    ::_exit(result.ok() ? 0 : 1);
  }
  return child;
}

TEST(KillResumeTest, KilledMidRoundJobLosesNoMeasuredRecord) {
  const std::string log = ::tilesearch::testing::ScratchPath("killed.jsonl");
  constexpr int kTrials = 12;
  // One round of all the trials in one runner call: records reach the disk one by one, as their
  // results arrive, while the round goes on.
  TuneOptions options = testing::TinyCpuTuneOptions(log, kTrials, kTrials, 5);
  options.measure_batch = 0;
  const schedule::Workload workload = testing::SquareMatmul(16);
  const Target cpu = Target::HostCpu();
  const pid_t child = TuneInChild(workload, cpu, options);
  ASSERT_GE(child, 0);
  // Kill it once 3 records are on disk (well before the round's 12 and its round line).
  std::vector<std::string> lines;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    lines = CompleteLines(log);
    if (lines.size() >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the job ended before it was killed";
  const std::vector<std::string> before = CompleteLines(log);
  ASSERT_GE(before.size(), 3u);
  ASSERT_LT(before.size(), static_cast<size_t>(kTrials)) << "killed too late: not mid-round";
  for (const std::string& line : before) {
    ASSERT_EQ(line.find("\"kind\":\"round\""), std::string::npos) << "the round had ended";
  }

  // A kill during a write may leave a partial last line: the resumed job skips it (with a warning)
  // and starts its records on a fresh line.
  const std::string text = testing::ReadText(log);
  const bool torn = !text.empty() && text.back() != '\n';

  // Resume: the records before the kill are kept as they were, the rest are new schedules.
  absl::StatusOr<TuneResult> resumed = Tune(workload, cpu, options);
  ASSERT_THAT(resumed, IsOk());
  EXPECT_EQ(resumed->trials, kTrials);
  EXPECT_EQ(resumed->new_trials, kTrials - static_cast<int64_t>(before.size()));
  const std::vector<std::string> after = CompleteLines(log);
  ASSERT_GE(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i]) << "line " << i + 1;
  ReadOptions every;
  every.keep_duplicates = true;
  absl::StatusOr<LogContents> read = ReadLog(log, every);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->corrupt_lines, torn ? 1 : 0);
  ASSERT_EQ(read->records.size(), static_cast<size_t>(kTrials));
  std::set<std::string> schedules;
  for (const MeasureRecord& r : read->records) schedules.insert(StepsCanonicalText(r.steps));
  EXPECT_EQ(schedules.size(), static_cast<size_t>(kTrials)) << "a schedule was measured twice";
  // Trials are numbered on from the records kept.
  for (size_t i = 0; i < read->records.size(); ++i) {
    EXPECT_EQ(read->records[i].trial, static_cast<int64_t>(i));
  }
}

// A job killed during the final selection's last pass keeps the final timings it finished: each
// schedule's record reaches the disk when its last part has run, the last pass runs the batch
// fastest first by round timing, so the cut log's final-timed records are the fastest schedules'
// and its best record (BestRecord, as `show` and `export` pick) is one of them.
TEST(KillResumeTest, KilledDuringTheFinalPassesKeepsTheSchedulesItFinished) {
  const std::string log = ::tilesearch::testing::ScratchPath("killed_final.jsonl");
  constexpr int kTrials = 8;
  TuneOptions options = testing::TinyCpuTuneOptions(log, kTrials, kTrials, 7);
  options.final_candidates = kTrials;
  options.final_min_runs = 3;
  options.final_min_total_ms = 0;
  options.final_budget_s = 600;
  options.final_passes = 3;  // on the cpu each part JITs its schedule: tens of ms a part
  const schedule::Workload workload = testing::SquareMatmul(24);
  const Target cpu = Target::HostCpu();
  const pid_t child = TuneInChild(workload, cpu, options);
  ASSERT_GE(child, 0);
  auto final_lines = [&] {
    size_t n = 0;
    for (const std::string& line : CompleteLines(log)) {
      n += line.find("\"final_timing\":true") != std::string::npos;
    }
    return n;
  };
  // Kill it 50 ms after the first final record is on disk: time for the appends of a batch
  // logged all at once, not for the last parts of seven schedules (each part a JIT and runs).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && final_lines() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the job ended before it was killed";

  absl::StatusOr<LogContents> read = ReadLog(log);  // a torn last line is skipped
  ASSERT_THAT(read, IsOk());
  ReadOptions every;
  every.keep_duplicates = true;
  absl::StatusOr<LogContents> lines = ReadLog(log, every);
  ASSERT_THAT(lines, IsOk());
  std::set<int64_t> timed_trials;
  for (const MeasureRecord& r : lines->records) {
    if (r.final_timing) timed_trials.insert(r.trial);
  }
  ASSERT_GE(timed_trials.size(), 1u);
  ASSERT_LT(timed_trials.size(), static_cast<size_t>(kTrials))
      << "every final record was on disk at once: not logged as each schedule finished";
  // Each final-timed schedule was at least as fast, by its round timing, as every valid schedule
  // the cut pass had not finished.
  double slowest_timed = 0;
  double fastest_untimed = std::numeric_limits<double>::infinity();
  for (const MeasureRecord& r : lines->records) {
    if (r.final_timing || !r.valid()) continue;
    if (timed_trials.count(r.trial) > 0) {
      slowest_timed = std::max(slowest_timed, r.median_ms());
    } else {
      fastest_untimed = std::min(fastest_untimed, r.median_ms());
    }
  }
  EXPECT_LE(slowest_timed, fastest_untimed);
  absl::StatusOr<MeasureRecord> best =
      BestRecord(read->records, read->records[0].workload_key, cpu);
  ASSERT_THAT(best, IsOk());
  EXPECT_TRUE(best->final_timing);
}

// A log concatenated with itself (cat a.jsonl a.jsonl > b.jsonl) holds every record twice: the
// resumed job counts each once toward the budget and gives the model each once (the round line's
// train_samples), so it measures the trials still missing.
TEST(KillResumeTest, DoubledLogResumesCountingEachRecordOnce) {
  const std::string log = ::tilesearch::testing::ScratchPath("doubled.jsonl");
  const schedule::Workload workload = testing::SquareMatmul(16);
  const Target cpu = Target::HostCpu();
  TuneOptions options = testing::TinyCpuTuneOptions(log, 4, 4, 9);
  ASSERT_THAT(Tune(workload, cpu, options), IsOk());
  const std::string once = testing::ReadText(log);
  {
    std::ofstream out(log, std::ios::binary | std::ios::app);
    out << once;
  }
  options.trials = 6;
  options.per_round = 2;
  absl::StatusOr<TuneResult> resumed = Tune(workload, cpu, options);
  ASSERT_THAT(resumed, IsOk());
  EXPECT_EQ(resumed->new_trials, 2);
  EXPECT_EQ(resumed->trials, 6);
  ASSERT_EQ(resumed->rounds.size(), 1u);
  EXPECT_EQ(resumed->rounds[0].train_samples, 4);
  EXPECT_EQ(resumed->rounds[0].first_trial, 4);
}

}  // namespace
}  // namespace tilesearch::search
