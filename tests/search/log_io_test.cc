// Tuning logs: what LogWriter appends ReadLog gives back; truncated, garbage and malformed lines
// are skipped with warnings naming their line; a newer format version fails the read; records of
// other targets are dropped and counted; a killed-and-resumed job keeps every round exactly once;
// BestRecord picks the smallest valid median (checked against hand-made records) and explains
// when there is none; SummarizeLog's counts and best-so-far curve match hand-computed values.
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
std::filesystem::path ScratchDir() {
  return std::filesystem::path(::testing::TempDir()) /
         ("log_io_test_" + std::to_string(::getpid()));
}

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override { std::filesystem::remove_all(ScratchDir()); }
};
const ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

// A fresh path in the test's scratch directory.
std::string TempLog(const std::string& name) {
  const std::filesystem::path dir = ScratchDir();
  std::filesystem::create_directories(dir);
  const std::filesystem::path p = dir / name;
  std::filesystem::remove(p);
  return p.string();
}

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
                    runtime::MeasureError error = runtime::MeasureError::kNone,
                    const schedule::Target& target = schedule::Target::H200()) {
  MeasureRecord r;
  r.workload_key = kKey;
  r.workload.op = "matmul";
  r.workload.args.shapes = {{32, 16}, {16, 8}};
  r.target = target;
  r.device_name = target.is_gpu() ? "NVIDIA H200" : "host";
  r.steps = {schedule::SplitStep{2, 0, 32, {trial % 7 + 1}, true}};
  r.result.error = error;
  if (error == runtime::MeasureError::kNone) {
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

std::vector<int64_t> TrialsOf(const std::vector<MeasureRecord>& records) {
  std::vector<int64_t> trials;
  for (const MeasureRecord& r : records) trials.push_back(r.trial);
  return trials;
}

TEST(LogIoTest, WrittenRecordsReadBackEqual) {
  const std::string path = TempLog("roundtrip.jsonl");
  std::vector<MeasureRecord> written = {
      Trial(0, 0.25), Trial(1, 0, runtime::MeasureError::kRunTimeout), Trial(2, 0.125)};
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
  json unknown_error = MeasureRecordToJson(Trial(2, 0, runtime::MeasureError::kWrongAnswer));
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
  schedule::Target sm80 = schedule::Target::H200();
  sm80.arch = "sm_80";
  schedule::Target h200_other_limits = schedule::Target::H200();
  h200_other_limits.sm_count = 114;  // limits differ, kind and arch match: kept
  absl::StatusOr<LogWriter> w = LogWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->Append({Trial(0, 1.0), Trial(1, 1.0, runtime::MeasureError::kNone, sm80),
                         Trial(2, 1.0, runtime::MeasureError::kNone, schedule::Target::HostCpu()),
                         Trial(3, 1.0, runtime::MeasureError::kNone, h200_other_limits),
                         Trial(4, 1.0, runtime::MeasureError::kNone, sm80)}),
              IsOk());
  ReadOptions options;
  options.target = schedule::Target::H200();
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
  schedule::Target cpu = schedule::Target::HostCpu();
  const std::vector<MeasureRecord> records = {
      Trial(0, 0.9), Trial(1, 0.3, runtime::MeasureError::kWrongAnswer),  // fastest but wrong
      Trial(2, 0.5), Trial(3, 0.2, runtime::MeasureError::kNone, cpu),    // another target
      Trial(4, 0.4), Trial(5, 0.4),                                       // tie: the first wins
      Trial(6, 0.7),
  };
  std::vector<MeasureRecord> with_other_key = records;
  with_other_key.push_back(Trial(7, 0.1));
  with_other_key.back().workload_key = "ffffffffffffffff";  // another workload
  // Reference: the minimum over the valid H200 records of this key, by hand: trial 4 (0.4 ms).
  absl::StatusOr<MeasureRecord> best = BestRecord(with_other_key, kKey, schedule::Target::H200());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 4);
  EXPECT_EQ(best->median_ms(), 0.4);
  // On the cpu target only trial 3 counts.
  best = BestRecord(records, kKey, cpu);
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 3);
}

TEST(BestRecordTest, ExplainsWhyThereIsNone) {
  std::vector<MeasureRecord> records;
  for (int i = 0; i < 64; ++i) {
    records.push_back(Trial(
        i, 0,
        i % 16 == 3 ? runtime::MeasureError::kWrongAnswer : runtime::MeasureError::kCompileError));
  }
  EXPECT_THAT(BestRecord(records, kKey, schedule::Target::H200()),
              StatusIs(absl::StatusCode::kNotFound,
                       "no valid record for workload 00112233aabbccdd on cuda -arch=sm_90: all 64 "
                       "trials failed: 60 compile_error, 4 wrong_answer"));
  EXPECT_THAT(BestRecord(records, "0000000000000000", schedule::Target::H200()),
              StatusIs(absl::StatusCode::kNotFound,
                       "no record for workload 0000000000000000 on cuda -arch=sm_90"));
  EXPECT_THAT(BestRecord(records, kKey, schedule::Target::HostCpu()),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no record for workload 00112233aabbccdd on cpu; the log has its "
                                 "records on other targets: 64 on cuda -arch=sm_90")));
  EXPECT_THAT(BestRecord({}, kKey, schedule::Target::H200()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no record")));
}

TEST(SummarizeLogTest, CountsBestAndBestSoFarCurve) {
  const auto wrong = runtime::MeasureError::kWrongAnswer;
  const auto compile = runtime::MeasureError::kCompileError;
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
  EXPECT_THAT(text, HasSubstr("trial 2: best 2 ms"));
  EXPECT_THAT(text, HasSubstr("trial 6: best 0.5 ms"));
}

}  // namespace
}  // namespace tilesearch::search
