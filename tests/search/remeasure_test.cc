// TuneOptions::remeasure_best on the cpu target: a log whose times an older build measured (here:
// one record edited to claim 1 ns) is re-measured before tuning goes on. The fastest logged
// schedules get new records marked remeasured, with their first records' trial numbers, which
// replace them when the log is read: no new trial is counted, and the best (the job's result and
// replay's BestRecord) is then a time the schedule really runs at.
// TuneOptions::final_candidates likewise, after the last round: a record whose short timing was
// lucky (edited to claim 1 or 2 ns) is timed again with the final timing before it can be
// picked, and so is every record that its real time leaves faster than the fastest so timed.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/tuner.h"
#include "tests/search/record_test_util.h"
#include "tests/search/scratch_dir.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> lines = absl::StrSplit(testing::ReadText(path), '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// Edits the log's `n` slowest valid records to claim (k + 1) · 1e-6 ms (k = 0 for the slowest)
// and returns their trials, the slowest first.
std::vector<int64_t> ClaimFast(const std::string& log, int n) {
  std::vector<std::string> lines = Lines(log);
  std::vector<std::pair<double, int>> valid;  // (ms, line)
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    absl::StatusOr<MeasureRecord> r = MeasureRecordFromLine(lines[i]);
    if (r.ok() && r->valid()) valid.emplace_back(r->median_ms(), i);
  }
  std::sort(valid.rbegin(), valid.rend());
  std::vector<int64_t> trials;
  for (int k = 0; k < n && k < static_cast<int>(valid.size()); ++k) {
    nlohmann::json claim = nlohmann::json::parse(lines[valid[k].second]);
    claim["result"]["timing"]["median_ms"] = (k + 1) * 1e-6;
    trials.push_back(claim["trial"].get<int64_t>());
    lines[valid[k].second] = claim.dump();
  }
  std::ofstream out(log, std::ios::trunc);
  for (const std::string& l : lines) out << l << "\n";
  return trials;
}

TEST(RemeasureTest, StaleLoggedTimesAreMeasuredAgainAndTakeTheirRecordsPlaces) {
  const std::string log = ::tilesearch::testing::ScratchPath("remeasure.jsonl");
  constexpr int kTrials = 12;
  const TuneOptions options = testing::TinyCpuTuneOptions(log, kTrials, 6, 3);
  const schedule::Workload workload = testing::SquareMatmul(24);
  const Target cpu = Target::HostCpu();
  ASSERT_THAT(Tune(workload, cpu, options).status(), IsOk());

  // An older build's claim: the slowest valid record says 1e-6 ms.
  const std::vector<int64_t> claims = ClaimFast(log, 1);
  ASSERT_EQ(claims.size(), 1u);
  const int64_t stale_trial = claims[0];
  absl::StatusOr<LogContents> before = ReadLog(log);
  ASSERT_THAT(before, IsOk());
  ASSERT_EQ(before->records.size(), static_cast<size_t>(kTrials));
  absl::StatusOr<MeasureRecord> stale_best =
      BestRecord(before->records, before->records[0].workload_key, cpu);
  ASSERT_THAT(stale_best, IsOk());
  ASSERT_EQ(stale_best->trial, stale_trial);  // without re-measuring, the claim wins

  TuneOptions again = options;
  again.remeasure_best = 2;
  absl::StatusOr<TuneResult> result = Tune(workload, cpu, again);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->remeasured, 2);
  EXPECT_EQ(result->new_trials, 0);
  EXPECT_EQ(result->trials, kTrials);
  ASSERT_TRUE(result->best.has_value());
  EXPECT_GT(result->best->median_ms(), 1e-4);

  // Two more record lines, both marked, for the two fastest logged schedules (the stale one
  // among them).
  absl::StatusOr<LogContents> after = ReadLog(log);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->records.size(), static_cast<size_t>(kTrials));
  EXPECT_EQ(after->remeasured_records, 2);
  EXPECT_EQ(after->duplicate_records, 0);
  int marked = 0;
  for (const MeasureRecord& r : after->records) {
    marked += r.remeasured;
    // Timed fully: screened against the stale 1e-6 ms, every one would keep its short timing.
    if (r.remeasured) {
      EXPECT_FALSE(r.result.screened) << r.trial;
    }
    // Timed again as a round times: not the final selection's mark.
    EXPECT_FALSE(r.final_timing) << r.trial;
    if (r.trial == stale_trial) {
      EXPECT_TRUE(r.remeasured);
      EXPECT_TRUE(r.valid());
      EXPECT_GT(r.median_ms(), 1e-4);
    }
  }
  EXPECT_EQ(marked, 2);
  absl::StatusOr<MeasureRecord> best =
      BestRecord(after->records, after->records[0].workload_key, cpu);
  ASSERT_THAT(best, IsOk());
  EXPECT_DOUBLE_EQ(best->median_ms(), result->best->median_ms());

  TuneOptions negative = options;
  negative.remeasure_best = -1;
  EXPECT_THAT(Tune(workload, cpu, negative).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("remeasure_best must be >= 0")));
}

TEST(RemeasureTest, FinalSelectionTimesLuckyRecordsBeforeOneIsPicked) {
  const std::string log = ::tilesearch::testing::ScratchPath("final_selection.jsonl");
  constexpr int kTrials = 12;
  TuneOptions options = testing::TinyCpuTuneOptions(log, kTrials, 6, 5);
  options.final_candidates = 0;
  const schedule::Workload workload = testing::SquareMatmul(24);
  const Target cpu = Target::HostCpu();
  ASSERT_THAT(Tune(workload, cpu, options).status(), IsOk());
  // Two lucky short timings: the slowest schedules claim 1e-6 and 2e-6 ms.
  const std::vector<int64_t> claims = ClaimFast(log, 2);
  ASSERT_EQ(claims.size(), 2u);

  // One final candidate: the 1e-6 claim is timed first; its real time leaves the 2e-6 one
  // faster than the fastest so timed, so that is timed next (the budget is two).
  TuneOptions final_pick = options;
  final_pick.final_candidates = 1;
  final_pick.final_min_runs = 4;
  final_pick.final_min_total_ms = 0;
  absl::StatusOr<TuneResult> result = Tune(workload, cpu, final_pick);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->new_trials, 0);
  EXPECT_EQ(result->trials, kTrials);
  EXPECT_EQ(result->final_timed, 2);
  ASSERT_TRUE(result->best.has_value());
  EXPECT_GT(result->best->median_ms(), 1e-4);

  absl::StatusOr<LogContents> after = ReadLog(log);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->records.size(), static_cast<size_t>(kTrials));
  EXPECT_EQ(after->remeasured_records, 2);
  for (const MeasureRecord& r : after->records) {
    const bool claimed = std::count(claims.begin(), claims.end(), r.trial) > 0;
    EXPECT_EQ(r.remeasured, claimed) << r.trial;
    if (!claimed) continue;
    EXPECT_TRUE(r.valid()) << r.trial;
    EXPECT_GT(r.median_ms(), 1e-4) << r.trial;
    // Timed with the final timing, not the rounds' one run.
    EXPECT_GE(r.result.timing.runs, 4) << r.trial;
  }
  absl::StatusOr<MeasureRecord> best =
      BestRecord(after->records, after->records[0].workload_key, cpu);
  ASSERT_THAT(best, IsOk());
  EXPECT_DOUBLE_EQ(best->median_ms(), result->best->median_ms());

  TuneOptions bad = final_pick;
  bad.final_min_runs = 0;
  EXPECT_THAT(
      Tune(workload, cpu, bad).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("final_min_runs >= 1")));

  // Every schedule as a candidate. With no time for it, none of those not yet so timed is
  // timed; with time, they are; a later job on the log times none of them again.
  TuneOptions all = final_pick;
  all.final_candidates = kTrials;
  TuneOptions no_time = all;
  no_time.final_budget_s = 0;
  ::testing::internal::CaptureStderr();
  absl::StatusOr<TuneResult> none = Tune(workload, cpu, no_time);
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_THAT(none, IsOk());
  EXPECT_EQ(none->final_timed, 0);
  // Said, not silent.
  EXPECT_THAT(said, ::testing::HasSubstr("over the final budget of 0.0 s: none timed again"));
  EXPECT_EQ(none->new_trials, 0);
  int64_t not_yet_timed = 0;  // valid, not remeasured with the final timing: from the log
  for (const MeasureRecord& r : after->records) not_yet_timed += r.valid() && !r.remeasured;
  ASSERT_GT(not_yet_timed, 0);
  absl::StatusOr<TuneResult> everything = Tune(workload, cpu, all);
  ASSERT_THAT(everything, IsOk());
  EXPECT_EQ(everything->final_timed, not_yet_timed);
  absl::StatusOr<TuneResult> again = Tune(workload, cpu, all);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->final_timed, 0);
  EXPECT_EQ(again->trials, kTrials);

  // A longer final timing than the log's (a held one): a final timing of four runs does not
  // stand for it, so the schedules are timed again (many more runs: a run of these kernels
  // takes microseconds), once.
  TuneOptions held = all;
  held.final_min_total_ms = 5;
  held.measure.timing.max_runs = 30;  // (the runs' cap stops each timing: a quick test)
  // On the cpu every part of a final timing JITs the schedule again in the worker, which the
  // budget's estimate counts as timing (on a GPU the module loads are logged apart and left
  // out): room for all of them.
  held.final_budget_s = 600;
  absl::StatusOr<TuneResult> longer = Tune(workload, cpu, held);
  ASSERT_THAT(longer, IsOk());
  EXPECT_GT(longer->final_timed, 0);
  absl::StatusOr<LogContents> held_log = ReadLog(log);
  ASSERT_THAT(held_log, IsOk());
  for (const MeasureRecord& r : held_log->records) {
    if (!r.valid()) continue;
    EXPECT_TRUE(r.remeasured) << r.trial;
    EXPECT_GT(r.result.timing.runs, 20) << r.trial;
  }
  absl::StatusOr<TuneResult> settled = Tune(workload, cpu, held);
  ASSERT_THAT(settled, IsOk());
  EXPECT_EQ(settled->final_timed, 0);
}

// TuneOptions::final_soak_ms: each final timing follows that much wall time of untimed runs (in
// the record's run wall time, and logged with its timing). The same final selection without a
// soak, on a copy of the log, times the same schedules in at least half the soak less (compared
// schedule by schedule: the run wall time also holds each part's JIT of the schedule, which on a
// loaded machine took ~1 s for the four parts and varies between the two jobs); those unsoaked
// final timings do not stand for soaked ones (timed again, once). A negative soak is refused.
TEST(RemeasureTest, FinalTimingsFollowTheSoak) {
  const std::string log = ::tilesearch::testing::ScratchPath("final_soak.jsonl");
  const std::string plain_log = ::tilesearch::testing::ScratchPath("final_no_soak.jsonl");
  constexpr int kTrials = 8;
  constexpr double kSoakMs = 1500;
  TuneOptions options = testing::TinyCpuTuneOptions(log, kTrials, 4, 5);
  options.final_candidates = 0;
  const schedule::Workload workload = testing::SquareMatmul(24);
  const Target cpu = Target::HostCpu();
  ASSERT_THAT(Tune(workload, cpu, options).status(), IsOk());
  std::filesystem::copy_file(log, plain_log, std::filesystem::copy_options::overwrite_existing);
  TuneOptions plain = options;
  plain.log_path = plain_log;
  plain.final_candidates = 2;
  plain.final_min_runs = 4;
  plain.final_min_total_ms = 0;
  TuneOptions soaked = plain;
  soaked.log_path = log;
  soaked.final_soak_ms = kSoakMs;
  std::map<int64_t, double> plain_wall_ms;  // the unsoaked final timings' run wall time, by trial
  for (const TuneOptions& o : {plain, soaked}) {
    absl::StatusOr<TuneResult> result = Tune(workload, cpu, o);
    ASSERT_THAT(result, IsOk());
    // The two fastest, and up to two more where the timings taken again came out slower than
    // the next ones' round timings (a loaded machine).
    EXPECT_GE(result->final_timed, 2);
    EXPECT_LE(result->final_timed, 4);
    absl::StatusOr<LogContents> after = ReadLog(o.log_path);
    ASSERT_THAT(after, IsOk());
    int timed = 0, compared = 0;
    for (const MeasureRecord& r : after->records) {
      if (!r.remeasured) continue;
      ++timed;
      EXPECT_GE(r.result.timing.runs, 4) << r.trial;
      EXPECT_TRUE(r.final_timing) << r.trial;
      // In the default 4 passes: a quarter of the soak before each part, the batch's first
      // part the whole soak.
      EXPECT_GE(r.result.timing.soak_ms, o.final_soak_ms) << r.trial;
      EXPECT_LE(r.result.timing.soak_ms, 1.75 * o.final_soak_ms) << r.trial;
      if (o.final_soak_ms > 0) {
        EXPECT_GE(r.result.run_wall_ms, kSoakMs) << r.trial;
        if (auto it = plain_wall_ms.find(r.trial); it != plain_wall_ms.end()) {
          ++compared;
          EXPECT_GE(r.result.run_wall_ms - it->second, 0.5 * kSoakMs) << r.trial;
        }
      } else {
        plain_wall_ms[r.trial] = r.result.run_wall_ms;
      }
    }
    EXPECT_EQ(timed, result->final_timed);
    // Both jobs time the two fastest of the same log first.
    if (o.final_soak_ms > 0) {
      EXPECT_GE(compared, 2);
    }
  }
  TuneOptions soak_after = soaked;
  soak_after.log_path = plain_log;
  absl::StatusOr<TuneResult> retimed = Tune(workload, cpu, soak_after);
  ASSERT_THAT(retimed, IsOk());
  EXPECT_GE(retimed->final_timed, 2);
  absl::StatusOr<LogContents> retimed_log = ReadLog(plain_log);
  ASSERT_THAT(retimed_log, IsOk());
  // Those timed again are soaked now (an unsoaked final timing left is no longer among the
  // fastest), and the pick is one of them.
  int soaked_now = 0;
  for (const MeasureRecord& r : retimed_log->records) {
    if (r.remeasured && r.result.timing.soak_ms >= kSoakMs) ++soaked_now;
  }
  EXPECT_EQ(soaked_now, retimed->final_timed);
  absl::StatusOr<MeasureRecord> pick =
      BestRecord(retimed_log->records, retimed_log->records[0].workload_key, cpu);
  ASSERT_THAT(pick, IsOk());
  EXPECT_GE(pick->result.timing.soak_ms, kSoakMs);
  // Run again with the same soak: no schedule already so timed (with the soak) is timed again
  // (on a loaded machine a round record may still come out faster than every held timing and be
  // timed, and an unsoaked final timing left from the first job, still among the fastest, is).
  std::map<int64_t, std::string> final_timed_at;
  std::map<int64_t, bool> soaked_final;
  for (const MeasureRecord& r : retimed_log->records) {
    if (!r.final_timing) continue;
    final_timed_at[r.trial] = r.timestamp;
    soaked_final[r.trial] = r.result.timing.soak_ms >= kSoakMs;
  }
  absl::StatusOr<TuneResult> settled = Tune(workload, cpu, soak_after);
  ASSERT_THAT(settled, IsOk());
  absl::StatusOr<LogContents> settled_log = ReadLog(plain_log);
  ASSERT_THAT(settled_log, IsOk());
  int64_t timed_again = 0;
  for (const MeasureRecord& r : settled_log->records) {
    auto it = final_timed_at.find(r.trial);
    const bool was_final = it != final_timed_at.end();
    if (was_final && soaked_final[r.trial]) {
      EXPECT_EQ(r.timestamp, it->second) << r.trial;
    }
    if (r.final_timing && (!was_final || r.timestamp != it->second)) ++timed_again;
  }
  EXPECT_EQ(settled->final_timed, timed_again);
  // A log whose held timings carry no final_timing mark (written before the mark existed): the
  // final selection takes them again, once, and marks them; the pick is then a marked record.
  {
    std::ifstream in(plain_log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    const std::string mark = ",\"final_timing\":true";
    int64_t stripped = 0;
    for (size_t at = text.find(mark); at != std::string::npos; at = text.find(mark, at)) {
      text.erase(at, mark.size());
      ++stripped;
    }
    ASSERT_GE(stripped, 2);
    std::ofstream(plain_log, std::ios::trunc) << text;
  }
  absl::StatusOr<TuneResult> remarked = Tune(workload, cpu, soak_after);
  ASSERT_THAT(remarked, IsOk());
  EXPECT_GE(remarked->final_timed, 2);
  absl::StatusOr<LogContents> remarked_log = ReadLog(plain_log);
  ASSERT_THAT(remarked_log, IsOk());
  int64_t marked = 0;
  for (const MeasureRecord& r : remarked_log->records) marked += r.final_timing;
  EXPECT_EQ(marked, remarked->final_timed);
  pick = BestRecord(remarked_log->records, remarked_log->records[0].workload_key, cpu);
  ASSERT_THAT(pick, IsOk());
  EXPECT_TRUE(pick->final_timing);
  TuneOptions bad = soaked;
  bad.final_soak_ms = -1;
  EXPECT_THAT(
      Tune(workload, cpu, bad).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("final_soak_ms >= 0")));
}

// TuneOptions::final_passes: each final timing is the join of its passes' parts, each part asking
// its share of the runs rounded up (4 runs over 3 passes: 2 a part, 6 in all; in one pass: 4),
// every run logged, none screened by the staged timing of the rounds just before (the final
// selection times all 8 schedules, the slow ones too, in the same job as its rounds); a count
// outside 1..64 is refused. The last pass runs the batch fastest first by round timing, and each
// record is logged when its last part ran: in that order, whatever the number of passes.
TEST(RemeasureTest, FinalTimingsInPassesJoinEveryPartsRuns) {
  constexpr int kTrials = 8;
  const schedule::Workload workload = testing::SquareMatmul(24);
  const Target cpu = Target::HostCpu();
  for (const auto& [passes, runs] : {std::pair{3, 6}, std::pair{2, 4}, std::pair{1, 4}}) {
    const std::string log =
        ::tilesearch::testing::ScratchPath(absl::StrCat("final_passes_", passes, ".jsonl"));
    TuneOptions o = testing::TinyCpuTuneOptions(log, kTrials, 4, 9);
    o.final_candidates = kTrials;
    o.final_min_runs = 4;
    o.final_min_total_ms = 0;
    o.final_budget_s = 600;
    o.final_passes = passes;
    absl::StatusOr<TuneResult> result = Tune(workload, cpu, o);
    ASSERT_THAT(result, IsOk());
    absl::StatusOr<LogContents> after = ReadLog(log);
    ASSERT_THAT(after, IsOk());
    int valid = 0;
    int timed = 0;
    for (const MeasureRecord& r : after->records) {
      valid += r.valid();
      if (!r.final_timing) continue;
      ++timed;
      EXPECT_FALSE(r.result.screened) << passes << " passes, trial " << r.trial;
      EXPECT_EQ(r.result.timing.runs, runs) << passes << " passes, trial " << r.trial;
      ASSERT_EQ(r.result.costs_s.size(), static_cast<size_t>(runs)) << r.trial;
      // The statistics are the joined runs': their naive median.
      std::vector<double> ms;
      for (double c : r.result.costs_s) ms.push_back(c * 1e3);
      std::sort(ms.begin(), ms.end());
      const double median =
          ms.size() % 2 == 1 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
      EXPECT_NEAR(r.result.timing.median_ms, median, 1e-9 * median) << r.trial;
    }
    EXPECT_EQ(timed, result->final_timed);
    EXPECT_EQ(timed, valid) << "every valid schedule timed again";
    // One batch (all 8 schedules): its records in the log by their round timing, fastest first.
    ReadOptions every_line;
    every_line.keep_duplicates = true;  // the round records too, each line in file order
    absl::StatusOr<LogContents> lines = ReadLog(log, every_line);
    ASSERT_THAT(lines, IsOk());
    std::map<int64_t, double> round_ms;
    for (const MeasureRecord& r : lines->records) {
      if (!r.final_timing && r.valid()) round_ms.emplace(r.trial, r.median_ms());
    }
    std::vector<double> logged;
    for (const MeasureRecord& r : lines->records) {
      if (r.final_timing) logged.push_back(round_ms.at(r.trial));
    }
    ASSERT_EQ(logged.size(), static_cast<size_t>(timed));
    EXPECT_TRUE(std::is_sorted(logged.begin(), logged.end())) << passes << " passes";
  }
  // Passes asked with the final selection off: said, not silent.
  {
    TuneOptions off = testing::TinyCpuTuneOptions(
        ::tilesearch::testing::ScratchPath("passes_off.jsonl"), 4, 4, 9);
    off.final_candidates = 0;
    off.final_passes = 3;
    off.quiet = false;
    ::testing::internal::CaptureStderr();
    absl::StatusOr<TuneResult> result = Tune(workload, cpu, off);
    const std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_THAT(result, IsOk());
    EXPECT_EQ(result->final_timed, 0);
    EXPECT_THAT(said, ::testing::HasSubstr("so these have no effect: the final passes (3)"));
  }
  for (int bad_passes : {0, 65}) {
    TuneOptions bad = testing::TinyCpuTuneOptions(
        ::tilesearch::testing::ScratchPath("bad_passes.jsonl"), 4, 4, 9);
    bad.final_passes = bad_passes;
    EXPECT_THAT(Tune(workload, cpu, bad).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("final_passes")));
  }
}

}  // namespace
}  // namespace tilesearch::search
