// Tuning logs: what LogWriter appends ReadLog gives back; truncated, garbage and malformed lines
// are skipped with warnings naming their line; a newer format version fails the read; records of
// other targets are dropped and counted; a killed-and-resumed job keeps every round exactly once;
// BestRecord picks the smallest valid median (checked against hand-made records) and explains
// when there is none; SummarizeLog's counts and best-so-far curve match hand-computed values.
// Round metadata lines: written after their round in one Append, read back as rounds (filtered by
// target and workload key like records), corrupt ones skipped with their line number, unknown
// line kinds skipped; a log of only records (the format before round lines) still reads.
#include "search/log_io.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/search/scratch_dir.h"

namespace tilesearch::search {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr char kKey[] = "00112233aabbccdd";

// This process's scratch directory, removed when the tests end.
std::string TempLog(const std::string& name) { return ::tilesearch::testing::ScratchPath(name); }

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

void AppendRaw(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}

// A matmul 32x16 · 16x8 trial on the H200 target: median `median_ms` (ms) when `error` is kNone.
MeasureRecord Trial(int64_t trial, double median_ms,
                    measure::MeasureError error = measure::MeasureError::kNone,
                    const Target& target = Target::H200()) {
  MeasureRecord r;
  r.workload_key = kKey;
  r.workload.op = "matmul";
  r.workload.args.shapes = {{32, 16}, {16, 8}};
  r.target = target;
  r.device_name = target.is_gpu() ? "NVIDIA H200" : "host";
  // Distinct steps per trial: records with equal steps are one schedule measured twice.
  r.steps = {schedule::SplitStep{2, 0, 32, {trial + 1}, true}};
  r.result.error = error;
  if (error == measure::MeasureError::kNone) {
    r.result.costs_s = {median_ms * 1e-3};
    r.result.timing.runs = 1;
    r.result.timing.median_ms = median_ms;
  } else {
    r.result.message = "failed";
  }
  r.timestamp = "2025-11-30T00:00:00.000Z";
  r.seed = 7;
  r.trial = trial;
  return r;
}

std::vector<MeasureRecord> Round(int64_t first_trial, int n) {
  std::vector<MeasureRecord> round;
  for (int i = 0; i < n; ++i) round.push_back(Trial(first_trial + i, 1.0 + first_trial + i));
  return round;
}

// The round line of trials first_trial .. first_trial + n - 1 with hand-picked values.
RoundRecord RoundLine(int64_t round, int64_t first_trial, int n,
                      const Target& target = Target::H200()) {
  RoundRecord r;
  r.workload_key = kKey;
  r.target = target;
  r.device_name = "NVIDIA H200";
  r.round = round;
  r.first_trial = first_trial;
  r.trials = n;
  r.valid = n;
  r.model = "xgboost";
  r.model_trained = round > 1;
  r.train_samples = first_trial;
  r.train_programs = first_trial;
  r.boost_rounds = round > 1 ? 12 : 0;
  r.model_validation_accuracy = std::numeric_limits<double>::quiet_NaN();
  for (int i = 0; i < n; ++i) r.predicted.push_back(0.5 * i);
  r.predicted[0] = -std::numeric_limits<double>::infinity();  // a state without features
  r.pairwise_accuracy = 0.75;
  r.top_k_recall = 0.5;
  r.k = 2;
  r.train_s = 0.25;
  r.search_s = 1.5;
  r.build_s = 0.125;
  r.measure_s = 2.0;
  r.timestamp = "2025-11-30T00:00:01.000Z";
  r.seed = 7;
  return r;
}

std::vector<int64_t> TrialsOf(const std::vector<MeasureRecord>& records) {
  std::vector<int64_t> trials;
  for (const MeasureRecord& r : records) trials.push_back(r.trial);
  return trials;
}

TEST(LogIoTest, WrittenRecordsReadBackEqual) {
  const std::string path = TempLog("roundtrip.jsonl");
  std::vector<MeasureRecord> written = {
      Trial(0, 0.25), Trial(1, 0, measure::MeasureError::kRunTimeout), Trial(2, 0.125)};
  {
    absl::StatusOr<LogWriter> w = LogWriter::Open(path);
    ASSERT_THAT(w, IsOk());
    ASSERT_THAT(w->Append(written), IsOk());
  }
  // One line per record, each ending in a newline.
  EXPECT_THAT(Lines(path), SizeIs(3));
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.back(), '\n');

  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(read->warnings.empty());
  EXPECT_EQ(read->lines, 3);
  ASSERT_EQ(read->records.size(), 3u);
  for (size_t i = 0; i < written.size(); ++i) {
    SCOPED_TRACE(i);
    const MeasureRecord& a = written[i];
    const MeasureRecord& b = read->records[i];
    EXPECT_EQ(b.trial, a.trial);
    EXPECT_EQ(b.workload_key, a.workload_key);
    EXPECT_TRUE(b.workload == a.workload);
    EXPECT_EQ(b.target.arch, "sm_90");
    EXPECT_EQ(b.device_name, "NVIDIA H200");
    EXPECT_EQ(b.steps, a.steps);
    EXPECT_EQ(b.result.error, a.result.error);
    EXPECT_EQ(b.result.costs_s, a.result.costs_s);
    EXPECT_EQ(b.result.timing.median_ms, a.result.timing.median_ms);
    EXPECT_EQ(b.seed, 7u);
  }
}

TEST(LogIoTest, MissingFileIsNotFoundAndBadDirectoryNamesThePath) {
  EXPECT_THAT(ReadLog(TempLog("absent.jsonl")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("absent.jsonl' does not exist")));
  const std::string bad = TempLog("x") + "/no/such/dir/log.jsonl";
  EXPECT_THAT(LogWriter::Open(bad).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot open log '" + bad)));
}

// A writer killed in the middle of a line leaves half a line; the reader skips it by number, and
// a resumed writer starts its records on a new line.
TEST(LogIoTest, TruncatedLastLineIsSkippedAndResumeStartsAFreshLine) {
  const std::string path = TempLog("truncated.jsonl");
  {
    absl::StatusOr<LogWriter> w = LogWriter::Open(path);
    ASSERT_THAT(w, IsOk());
    ASSERT_THAT(w->Append(Round(0, 3)), IsOk());
  }
  const std::string line = MeasureRecordToLine(Trial(3, 4.0));
  AppendRaw(path, line.substr(0, line.size() / 2));

  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(TrialsOf(read->records), ElementsAre(0, 1, 2));
  EXPECT_EQ(read->corrupt_lines, 1);
  ASSERT_THAT(read->warnings, SizeIs(1));
  EXPECT_THAT(read->warnings[0], HasSubstr(path + ":4: skipped: not valid JSON"));

  {
    absl::StatusOr<LogWriter> w = LogWriter::Open(path);
    ASSERT_THAT(w, IsOk());
    ASSERT_THAT(w->Append(Round(3, 2)), IsOk());
  }
  read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(TrialsOf(read->records), ElementsAre(0, 1, 2, 3, 4));
  ASSERT_THAT(read->warnings, SizeIs(1));
  EXPECT_THAT(read->warnings[0], HasSubstr(":4: skipped:"));
  EXPECT_EQ(read->lines, 6);
}

TEST(LogIoTest, GarbageAndMalformedLinesAreSkippedWithTheirLineNumbers) {
  const std::string path = TempLog("garbage.jsonl");
  json wrong_type = MeasureRecordToJson(Trial(1, 2.0));
  wrong_type["trial"] = "one";
  json unknown_error = MeasureRecordToJson(Trial(2, 0, measure::MeasureError::kWrongAnswer));
  unknown_error["result"]["error"] = "melted";
  json bad_step = MeasureRecordToJson(Trial(3, 2.0));
  bad_step["steps"][0] = json::parse(R"(["SP", "two"])");
  std::ostringstream text;
  text << MeasureRecordToLine(Trial(0, 1.0)) << "\n"   // 1
       << "this is not json\n"                         // 2
       << "\n"                                         // 3: blank, ignored
       << wrong_type.dump() << "\n"                    // 4
       << unknown_error.dump() << "\n"                 // 5
       << "[1, 2, 3]\n"                                // 6
       << bad_step.dump() << "\n"                      // 7
       << MeasureRecordToLine(Trial(5, 3.0)) << "\n";  // 8
  AppendRaw(path, text.str());

  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(TrialsOf(read->records), ElementsAre(0, 5));
  EXPECT_EQ(read->lines, 8);
  EXPECT_EQ(read->corrupt_lines, 5);
  ASSERT_THAT(read->warnings, SizeIs(5));
  EXPECT_THAT(read->warnings[0], HasSubstr(path + ":2: skipped: not valid JSON"));
  EXPECT_THAT(read->warnings[1], HasSubstr(path + ":4: skipped: field 'trial'"));
  EXPECT_THAT(
      read->warnings[2],
      HasSubstr(path + ":5: skipped: field 'result.error': unknown measure error 'melted'"));
  EXPECT_THAT(read->warnings[3], HasSubstr(path + ":6: skipped: record is not a JSON object"));
  EXPECT_THAT(read->warnings[4], HasSubstr(path + ":7: skipped: field 'steps'"));
}

TEST(LogIoTest, NewerFormatVersionFailsTheRead) {
  const std::string path = TempLog("newer.jsonl");
  json newer = MeasureRecordToJson(Trial(1, 2.0));
  newer["version"] = 2;
  AppendRaw(path, MeasureRecordToLine(Trial(0, 1.0)) + "\n" + newer.dump() + "\n");
  EXPECT_THAT(ReadLog(path),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       path + ":2: log format version 2 is newer than this build reads (1)"));
}

TEST(LogIoTest, RecordsOfOtherTargetsAreDroppedAndCounted) {
  const std::string path = TempLog("targets.jsonl");
  Target sm80 = Target::H200();
  sm80.arch = "sm_80";
  Target h200_other_limits = Target::H200();
  h200_other_limits.sm_count = 114;  // limits differ, kind and arch match: kept
  absl::StatusOr<LogWriter> w = LogWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->Append({Trial(0, 1.0), Trial(1, 1.0, measure::MeasureError::kNone, sm80),
                         Trial(2, 1.0, measure::MeasureError::kNone, Target::HostCpu()),
                         Trial(3, 1.0, measure::MeasureError::kNone, h200_other_limits),
                         Trial(4, 1.0, measure::MeasureError::kNone, sm80)}),
              IsOk());
  ReadOptions options;
  options.target = Target::H200();
  absl::StatusOr<LogContents> read = ReadLog(path, options);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(TrialsOf(read->records), ElementsAre(0, 3));
  EXPECT_EQ(read->foreign_target_records, 3);
  EXPECT_EQ(read->corrupt_lines, 0);
  ASSERT_THAT(read->warnings, SizeIs(1));
  EXPECT_THAT(read->warnings[0],
              HasSubstr("skipped 3 records of other targets (cpu: 1, cuda -arch=sm_80: 2)"));

  // Without a filter every record is kept.
  read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->records, SizeIs(5));
  EXPECT_TRUE(read->warnings.empty());

  // The workload-key filter.
  ReadOptions by_key;
  by_key.workload_key = "ffffffffffffffff";
  read = ReadLog(path, by_key);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(read->records.empty());
  EXPECT_EQ(read->other_workload_records, 5);
}

// A second writer of the same log (another tuning job) is refused while the first is open, with a
// message naming the log; once the first closes, the log can be opened again.
TEST(LogIoTest, SecondWriterOfALogIsRefusedWhileTheFirstIsOpen) {
  const std::string path = TempLog("busy.jsonl");
  {
    absl::StatusOr<LogWriter> first = LogWriter::Open(path);
    ASSERT_THAT(first, IsOk());
    EXPECT_THAT(LogWriter::Open(path).status(),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("log '" + path + "' is in use by another tuning job")));
  }
  EXPECT_THAT(LogWriter::Open(path), IsOk());
}

// Two rounds, the job "dies" (its writer is abandoned without any cleanup beyond the fsync each
// Append did), a new job re-opens the log and appends a third round: every trial once, in order.
TEST(LogIoTest, ResumedJobKeepsEveryRoundExactlyOnce) {
  const std::string path = TempLog("resume.jsonl");
  {
    absl::StatusOr<LogWriter> first = LogWriter::Open(path);
    ASSERT_THAT(first, IsOk());
    ASSERT_THAT(first->Append(Round(0, 4)), IsOk());
    ASSERT_THAT(first->Append(Round(4, 4)), IsOk());
    // Read while the first writer is still open: the fsynced rounds are all there.
    absl::StatusOr<LogContents> mid = ReadLog(path);
    ASSERT_THAT(mid, IsOk());
    EXPECT_THAT(mid->records, SizeIs(8));
  }
  absl::StatusOr<LogContents> before = ReadLog(path);
  ASSERT_THAT(before, IsOk());
  absl::StatusOr<LogWriter> second = LogWriter::Open(path);
  ASSERT_THAT(second, IsOk());
  ASSERT_THAT(second->Append(Round(static_cast<int64_t>(before->records.size()), 4)), IsOk());
  absl::StatusOr<LogContents> after = ReadLog(path);
  ASSERT_THAT(after, IsOk());
  EXPECT_TRUE(after->warnings.empty());
  EXPECT_THAT(TrialsOf(after->records), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  EXPECT_THAT(Lines(path), SizeIs(12));
}

TEST(LogIoTest, AppendingAnEmptyRoundWritesNothing) {
  const std::string path = TempLog("empty.jsonl");
  absl::StatusOr<LogWriter> w = LogWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->Append({}), IsOk());
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(read->records.empty());
  // A moved-from writer's target keeps working.
  LogWriter moved = *std::move(w);
  ASSERT_THAT(moved.Append({Trial(0, 1.0)}), IsOk());
  EXPECT_THAT(Lines(path), SizeIs(1));
}

TEST(BestRecordTest, PicksTheSmallestValidMedian) {
  Target cpu = Target::HostCpu();
  const std::vector<MeasureRecord> records = {
      Trial(0, 0.9), Trial(1, 0.3, measure::MeasureError::kWrongAnswer),  // fastest but wrong
      Trial(2, 0.5), Trial(3, 0.2, measure::MeasureError::kNone, cpu),    // another target
      Trial(4, 0.4), Trial(5, 0.4),                                       // tie: the first wins
      Trial(6, 0.7),
  };
  std::vector<MeasureRecord> with_other_key = records;
  with_other_key.push_back(Trial(7, 0.1));
  with_other_key.back().workload_key = "ffffffffffffffff";  // another workload
  // Reference: the minimum over the valid H200 records of this key, by hand: trial 4 (0.4 ms).
  absl::StatusOr<MeasureRecord> best = BestRecord(with_other_key, kKey, Target::H200());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 4);
  EXPECT_EQ(best->median_ms(), 0.4);
  // On the cpu target only trial 3 counts.
  best = BestRecord(records, kKey, cpu);
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 3);
}

// Records timed by a final selection (held timings) outrank the round records measured before
// them, whose short bursts read faster; a later job's rounds compete again (a remeasure_best
// record, timed again as a round is, stays a round record: log_defects_test). Reference by
// hand: before any timing again, trial 0 (0.5 ms); after trials 1 and 2 were timed again at 0.8
// and 0.7 ms, trial 2's 0.7 (trial 0's burst no longer counts, nor a failed re-timing's); a round
// after that at 0.6 ms wins; one at 0.9 does not.
TEST(BestRecordTest, RecordsTimedAgainOutrankEarlierRounds) {
  auto at = [](MeasureRecord r, const std::string& time, bool held) {
    r.timestamp = time;
    r.remeasured = r.final_timing = held;
    return r;
  };
  std::vector<MeasureRecord> records = {at(Trial(0, 0.5), "2025-11-30T00:00:01.000Z", false),
                                        at(Trial(1, 0.55), "2025-11-30T00:00:02.000Z", false),
                                        at(Trial(2, 0.6), "2025-11-30T00:00:03.000Z", false)};
  absl::StatusOr<MeasureRecord> best = BestRecord(records, kKey, Target::H200());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 0);
  records.push_back(at(Trial(1, 0.8), "2025-11-30T00:00:04.000Z", true));
  records.push_back(at(Trial(2, 0.7), "2025-11-30T00:00:05.000Z", true));
  records.push_back(
      at(Trial(3, 0.1, measure::MeasureError::kRunTimeout), "2025-11-30T00:00:06.000Z", true));
  best = BestRecord(records, kKey, Target::H200());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 2);
  EXPECT_EQ(best->median_ms(), 0.7);
  records.push_back(at(Trial(4, 0.9), "2025-11-30T00:00:07.000Z", false));
  best = BestRecord(records, kKey, Target::H200());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 2);
  records.push_back(at(Trial(5, 0.6), "2025-11-30T00:00:08.000Z", false));
  best = BestRecord(records, kKey, Target::H200());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 5);
}

TEST(BestRecordTest, ExplainsWhyThereIsNone) {
  std::vector<MeasureRecord> records;
  for (int i = 0; i < 64; ++i) {
    records.push_back(Trial(
        i, 0,
        i % 16 == 3 ? measure::MeasureError::kWrongAnswer : measure::MeasureError::kCompileError));
  }
  EXPECT_THAT(BestRecord(records, kKey, Target::H200()),
              StatusIs(absl::StatusCode::kNotFound,
                       "no valid record for workload 00112233aabbccdd on cuda -arch=sm_90: all 64 "
                       "trials failed: 60 compile_error, 4 wrong_answer"));
  EXPECT_THAT(BestRecord(records, "0000000000000000", Target::H200()),
              StatusIs(absl::StatusCode::kNotFound,
                       "no record for workload 0000000000000000 on cuda -arch=sm_90"));
  EXPECT_THAT(BestRecord(records, kKey, Target::HostCpu()),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no record for workload 00112233aabbccdd on cpu; the log has its "
                                 "records on other targets: 64 on cuda -arch=sm_90")));
  EXPECT_THAT(BestRecord({}, kKey, Target::H200()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no record")));
}

TEST(SummarizeLogTest, CountsBestAndBestSoFarCurve) {
  const auto wrong = measure::MeasureError::kWrongAnswer;
  const auto compile = measure::MeasureError::kCompileError;
  std::vector<MeasureRecord> records = {Trial(0, 0, compile), Trial(1, 2.0), Trial(2, 0, wrong),
                                        Trial(3, 0.5),        Trial(4, 1.0), Trial(5, 0, compile)};
  MeasureRecord other = Trial(0, 3.0);
  other.workload_key = "ffffffffffffffff";
  records.insert(records.begin() + 2, other);
  const std::vector<WorkloadSummary> s = SummarizeLog(records);
  ASSERT_THAT(s, SizeIs(2));
  EXPECT_EQ(s[0].workload_key, kKey);
  EXPECT_EQ(s[0].trials, 6);
  EXPECT_EQ(s[0].valid, 3);
  EXPECT_EQ(s[0].best_median_ms, 0.5);
  EXPECT_EQ(s[0].best_trial, 3);
  const double flops = 2.0 * 32 * 8 * 16;  // matmul 32x16 · 16x8
  EXPECT_DOUBLE_EQ(s[0].flops, flops);
  EXPECT_DOUBLE_EQ(s[0].best_flops, flops / 0.5e-3);
  EXPECT_EQ(s[0].errors.at("compile_error"), 2);
  EXPECT_EQ(s[0].errors.at("wrong_answer"), 1);
  EXPECT_EQ(s[0].errors.size(), 2u);
  // Best so far after each trial, by hand: none, 2.0, 2.0, 0.5, 0.5, 0.5.
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> expected = {inf, 2.0, 2.0, 0.5, 0.5, 0.5};
  ASSERT_THAT(s[0].curve, SizeIs(6));
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(s[0].curve[i].trials, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(s[0].curve[i].best_median_ms, expected[i]);
    EXPECT_DOUBLE_EQ(s[0].curve[i].best_flops,
                     std::isinf(expected[i]) ? 0 : flops / (expected[i] * 1e-3));
  }
  EXPECT_EQ(s[1].workload_key, "ffffffffffffffff");
  EXPECT_EQ(s[1].trials, 1);
  EXPECT_EQ(s[1].best_median_ms, 3.0);

  const std::string text = FormatSummary(s, 3);
  EXPECT_THAT(text, HasSubstr("matmul 32x16 16x8 float32"));
  EXPECT_THAT(text, HasSubstr("trials 6, valid 3, best 0.5 ms"));
  EXPECT_THAT(text, HasSubstr("errors: 2 compile_error, 1 wrong_answer"));
  // Curve lines name the records' own (0-based) trials: counts 2, 4, 6 are trials 1, 3, 5.
  EXPECT_THAT(text, HasSubstr("trial 1: best 2 ms"));
  EXPECT_THAT(text, HasSubstr("trial 5: best 0.5 ms"));
}

TEST(LogIoTest, RoundLinesFollowTheirRecordsAndReadBack) {
  const std::string path = TempLog("rounds.jsonl");
  {
    absl::StatusOr<LogWriter> w = LogWriter::Open(path);
    ASSERT_THAT(w, IsOk());
    ASSERT_THAT(w->Append(Round(0, 3), RoundLine(1, 0, 3)), IsOk());
    ASSERT_THAT(w->Append(Round(3, 3), RoundLine(2, 3, 3)), IsOk());
  }
  // 3 records, their round line, 3 records, theirs.
  const std::vector<std::string> lines = Lines(path);
  ASSERT_THAT(lines, SizeIs(8));
  for (int i : {0, 1, 2, 4, 5, 6}) {
    EXPECT_FALSE(json::parse(lines[i]).contains("kind")) << "line " << i + 1;
  }
  for (int i : {3, 7}) {
    const json j = json::parse(lines[i]);
    EXPECT_EQ(j.at("kind"), "round");
    EXPECT_EQ(j.at("version"), 1);
    // -inf and NaN are written as null.
    EXPECT_TRUE(j.at("predicted")[0].is_null());
    EXPECT_TRUE(j.at("model_validation_accuracy").is_null());
  }

  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(read->warnings.empty()) << read->warnings[0];
  EXPECT_THAT(TrialsOf(read->records), ElementsAre(0, 1, 2, 3, 4, 5));
  ASSERT_THAT(read->rounds, SizeIs(2));
  const RoundRecord want = RoundLine(2, 3, 3);
  const RoundRecord& got = read->rounds[1];
  EXPECT_EQ(got.round, 2);
  EXPECT_EQ(got.first_trial, 3);
  EXPECT_EQ(got.trials, 3);
  EXPECT_EQ(got.valid, 3);
  EXPECT_EQ(got.workload_key, kKey);
  EXPECT_TRUE(SameTarget(got.target, Target::H200()));
  EXPECT_EQ(got.model, "xgboost");
  EXPECT_TRUE(got.model_trained);
  EXPECT_EQ(got.train_samples, 3);
  EXPECT_EQ(got.boost_rounds, 12);
  EXPECT_TRUE(std::isnan(got.model_validation_accuracy));
  ASSERT_THAT(got.predicted, SizeIs(3));
  EXPECT_EQ(got.predicted[0], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(got.predicted[1], 0.5);
  EXPECT_EQ(got.predicted[2], 1.0);
  EXPECT_EQ(got.pairwise_accuracy, 0.75);
  EXPECT_EQ(got.top_k_recall, 0.5);
  EXPECT_EQ(got.k, 2);
  EXPECT_EQ(got.train_s, want.train_s);
  EXPECT_EQ(got.search_s, want.search_s);
  EXPECT_EQ(got.build_s, want.build_s);
  EXPECT_EQ(got.measure_s, want.measure_s);
  EXPECT_EQ(got.timestamp, want.timestamp);
  EXPECT_EQ(got.seed, 7u);
  EXPECT_FALSE(read->rounds[0].model_trained);
}

TEST(LogIoTest, RoundLinesAreFilteredLikeRecords) {
  const std::string path = TempLog("round_filters.jsonl");
  {
    absl::StatusOr<LogWriter> w = LogWriter::Open(path);
    ASSERT_THAT(w, IsOk());
    ASSERT_THAT(w->Append(Round(0, 2), RoundLine(1, 0, 2)), IsOk());
    std::vector<MeasureRecord> cpu = {
        Trial(0, 1.0, measure::MeasureError::kNone, Target::HostCpu())};
    ASSERT_THAT(w->Append(cpu, RoundLine(1, 0, 1, Target::HostCpu())), IsOk());
    RoundRecord other_key = RoundLine(2, 2, 2);
    other_key.workload_key = "ffffffffffffffff";
    ASSERT_THAT(w->Append({}, other_key), IsOk());
  }
  ReadOptions h200;
  h200.target = Target::H200();
  absl::StatusOr<LogContents> read = ReadLog(path, h200);
  ASSERT_THAT(read, IsOk());
  ASSERT_THAT(read->rounds, SizeIs(2));
  EXPECT_EQ(read->rounds[0].workload_key, kKey);
  EXPECT_EQ(read->rounds[1].workload_key, "ffffffffffffffff");
  EXPECT_EQ(read->foreign_target_rounds, 1);
  EXPECT_EQ(read->foreign_target_records, 1);

  ReadOptions by_key = h200;
  by_key.workload_key = kKey;
  read = ReadLog(path, by_key);
  ASSERT_THAT(read, IsOk());
  ASSERT_THAT(read->rounds, SizeIs(1));
  EXPECT_EQ(read->rounds[0].round, 1);
  EXPECT_EQ(read->other_workload_rounds, 1);

  read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->rounds, SizeIs(3));
  EXPECT_THAT(read->records, SizeIs(3));
}

TEST(LogIoTest, CorruptRoundLinesAndUnknownKindsAreSkippedWithTheirLineNumbers) {
  const std::string path = TempLog("bad_rounds.jsonl");
  json bad_accuracy = RoundRecordToJson(RoundLine(1, 0, 2));
  bad_accuracy["pairwise_accuracy"] = 2;
  json short_predictions = RoundRecordToJson(RoundLine(1, 0, 2));
  short_predictions["predicted"] = json::array({1.0});
  json extra = RoundRecordToJson(RoundLine(1, 0, 2));
  extra["colour"] = "blue";
  json missing_round = RoundRecordToJson(RoundLine(1, 0, 2));
  missing_round.erase("round");
  json record_kind = MeasureRecordToJson(Trial(2, 1.0));
  record_kind["kind"] = "record";  // explicit kind of a record: accepted
  std::ostringstream text;
  text << MeasureRecordToLine(Trial(0, 1.0)) << "\n"  // 1
       << MeasureRecordToLine(Trial(1, 1.0)) << "\n"  // 2
       << bad_accuracy.dump() << "\n"                 // 3
       << short_predictions.dump() << "\n"            // 4
       << R"({"kind": "comment", "version": 1, "text": "hi"})"
       << "\n"                                                          // 5
       << extra.dump() << "\n"                                          // 6
       << missing_round.dump() << "\n"                                  // 7
       << RoundRecordToLine(RoundLine(1, 0, 2)) << "\n"                 // 8
       << record_kind.dump() << "\n"                                    // 9
       << RoundRecordToLine(RoundLine(2, 2, 1)).substr(0, 80) << "\n";  // 10: truncated
  AppendRaw(path, text.str());

  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(TrialsOf(read->records), ElementsAre(0, 1, 2));
  // Line 6's unknown field is ignored (one warning for it, after the skipped lines').
  ASSERT_THAT(read->rounds, SizeIs(2));
  EXPECT_EQ(read->rounds[0].round, 1);
  EXPECT_EQ(read->rounds[1].round, 1);
  EXPECT_EQ(read->corrupt_lines, 5);
  ASSERT_THAT(read->warnings, SizeIs(6));
  EXPECT_THAT(read->warnings[0], HasSubstr(path + ":3: skipped: field 'pairwise_accuracy' must be "
                                                  "a number in [0, 1] or null, got 2"));
  EXPECT_THAT(read->warnings[1],
              HasSubstr(path + ":4: skipped: field 'predicted' has 1 scores for 2 trials"));
  EXPECT_THAT(read->warnings[2], HasSubstr(path + ":5: skipped: unknown line kind \"comment\""));
  EXPECT_THAT(read->warnings[3], HasSubstr(path + ":7: skipped: field 'round' is missing"));
  EXPECT_THAT(read->warnings[4], HasSubstr(path + ":10: skipped: not valid JSON"));
  EXPECT_THAT(read->warnings[5], HasSubstr(path + ":6: ignored unknown field 'colour' (in 1 line"));
}

TEST(LogIoTest, NewerRoundLineFailsTheRead) {
  const std::string path = TempLog("newer_round.jsonl");
  json newer = RoundRecordToJson(RoundLine(1, 0, 1));
  newer["version"] = 2;
  newer["new_field"] = 1;
  AppendRaw(path, MeasureRecordToLine(Trial(0, 1.0)) + "\n" + newer.dump() + "\n");
  EXPECT_THAT(ReadLog(path),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       path + ":2: log format version 2 is newer than this build reads (1)"));
}

TEST(SummarizeLogTest, RoundsJoinTheirWorkloadAndNinetyPercentTrialIsFound) {
  // Medians 4, 2, 1.2, 3, 1.0 ms: best 1.0; 90% of its throughput is a median <= 1/0.9 = 1.11 ms,
  // first reached by the best itself at trial count 5 (1.2 ms is only 83%).
  std::vector<MeasureRecord> records = {Trial(0, 4.0), Trial(1, 2.0), Trial(2, 1.2), Trial(3, 3.0),
                                        Trial(4, 1.0)};
  RoundRecord foreign = RoundLine(1, 0, 5, Target::HostCpu());
  const std::vector<WorkloadSummary> s =
      SummarizeLog(records, {RoundLine(1, 0, 3), foreign, RoundLine(2, 3, 2)});
  ASSERT_THAT(s, SizeIs(1));
  EXPECT_EQ(s[0].trials_to_90_percent, 5);
  ASSERT_THAT(s[0].rounds, SizeIs(2));
  EXPECT_EQ(s[0].rounds[1].round, 2);
  // matmul 32x16 · 16x8 fp32: 2·32·8·16 FLOPs over (32·16 + 16·8 + 32·8)·4 bytes = 2.29 FLOP/B,
  // memory bound: GB/s.
  const double bytes = (32 * 16 + 16 * 8 + 32 * 8) * 4.0;
  EXPECT_TRUE(s[0].memory_bound);
  EXPECT_EQ(s[0].bytes, bytes);
  EXPECT_DOUBLE_EQ(s[0].best_bytes_per_s, bytes / 1.0e-3);
  EXPECT_STREQ(SummaryUnit(s[0]), "GB/s");
  EXPECT_DOUBLE_EQ(SummaryThroughput(s[0], 2.0), bytes / 2.0e-3 * 1e-9);

  // With the last record at 1.1 ms instead, 90% of its throughput is a median <= 1.222 ms, which
  // the 1.2 ms record reached at trial count 3.
  records[4] = Trial(4, 1.1);
  EXPECT_EQ(SummarizeLog(records)[0].trials_to_90_percent, 3);

  const std::string text = FormatSummary(s, 5);
  EXPECT_THAT(text, HasSubstr("90% of the best reached at trial 4 (after 5 trials)"));
  EXPECT_THAT(text, HasSubstr("GB/s"));
  EXPECT_THAT(text, HasSubstr("round 1 (trials 0-2, 3 valid; xgboost untrained (0 samples)): "
                              "pairwise accuracy 0.750, top-2 recall 0.500"));
  EXPECT_THAT(text, HasSubstr("round 2 (trials 3-4, 2 valid; xgboost trained on 3 of 3 samples, "
                              "12 boosting rounds)"));

  // A compute-bound workload (matmul 256³: 2·256³ FLOPs over 3·256²·4 bytes = 42.7 FLOP/B).
  MeasureRecord big = Trial(0, 2.0);
  big.workload.args.shapes = {{256, 256}, {256, 256}};
  const std::vector<WorkloadSummary> b = SummarizeLog({big});
  ASSERT_THAT(b, SizeIs(1));
  EXPECT_FALSE(b[0].memory_bound);
  EXPECT_STREQ(SummaryUnit(b[0]), "GFLOP/s");
  EXPECT_DOUBLE_EQ(SummaryThroughput(b[0], 2.0), 2.0 * 256 * 256 * 256 / 2.0e-3 * 1e-9);
  EXPECT_EQ(b[0].trials_to_90_percent, 1);
}

}  // namespace
}  // namespace tilesearch::search
