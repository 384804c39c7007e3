// Log defects a new user meets: the same schedule measured twice (logs concatenated), an
// over-long line, fields of a newer build, a replay whose best record may be on a line that could
// not be read, a workload the log does not hold, and cpu records carrying GPU limits.
#include <sys/resource.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/replay.h"
#include "tests/search/record_test_util.h"
#include "tests/search/scratch_dir.h"

namespace tilesearch::search {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::KeyOf;
using testing::Matmul;
using ::testing::Not;
using testing::ReadText;
using ::testing::SizeIs;
using testing::TimedRecord;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using json = nlohmann::json;

std::string Scratch(const std::string& name) { return ::tilesearch::testing::ScratchPath(name); }

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A valid cpu record of matmul n³ with the output stage split by `factor` (0: no steps, the
// naive schedule) and the given median.
MeasureRecord Record(int64_t n, int64_t factor, int64_t trial, double median_ms) {
  MeasureRecord r = TimedRecord(Matmul(n), KeyOf(Matmul(n)), Target::HostCpu(), trial, median_ms);
  if (factor > 0) r.steps = {schedule::SplitStep{2, 0, n, {factor}, true}};
  return r;
}

std::string Lines(const std::vector<MeasureRecord>& records) {
  std::string text;
  for (const MeasureRecord& r : records) text += MeasureRecordToLine(r) + "\n";
  return text;
}

std::vector<int64_t> Trials(const std::vector<MeasureRecord>& records) {
  std::vector<int64_t> out;
  for (const MeasureRecord& r : records) out.push_back(r.trial);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Duplicates.

TEST(LogDefectsTest, ConcatenatedLogCountsEachScheduleOnce) {
  const std::string path = Scratch("twice.jsonl");
  const std::string one = Lines({Record(16, 0, 0, 3.0), Record(16, 2, 1, 2.0)});
  // The same two trials again (cat a.jsonl a.jsonl), then the split by 2 measured anew (another
  // trial number and time: still the same schedule), then a new schedule.
  WriteText(path, one + one + Lines({Record(16, 2, 7, 1.5), Record(16, 4, 8, 1.0)}));
  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  // Each schedule once, in its first record's place and trial number, holding its newest
  // measurement: the split by 2 measured anew at trial 7 (1.5 ms).
  EXPECT_THAT(Trials(read->records), ElementsAre(0, 1, 8));
  EXPECT_DOUBLE_EQ(read->records[1].median_ms(), 1.5);
  EXPECT_EQ(read->duplicate_records, 3);
  EXPECT_THAT(read->warnings,
              ElementsAre(AllOf(HasSubstr(path + ": counted 3 duplicate records once"),
                                HasSubstr("first at line 3"))));
  // The summary `inspect` prints counts 3 trials.
  std::vector<WorkloadSummary> summary = SummarizeLog(read->records);
  ASSERT_THAT(summary, SizeIs(1));
  EXPECT_EQ(summary[0].trials, 3);
  // Records of another target with the same steps are no duplicates.
  MeasureRecord sm90 = Record(16, 2, 9, 1.0);
  sm90.target = Target::H200();
  WriteText(path, one + Lines({sm90}));
  read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(Trials(read->records), ElementsAre(0, 1, 9));
  EXPECT_EQ(read->duplicate_records, 0);
  // keep_duplicates reads every line.
  WriteText(path, one + one);
  ReadOptions all;
  all.keep_duplicates = true;
  read = ReadLog(path, all);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(Trials(read->records), ElementsAre(0, 1, 0, 1));
}

// A remeasured record (tune --remeasure) is the newest measurement of its schedule: it takes the
// first record's place (trial number, position) instead of being dropped as a duplicate, so replay
// picks by what the schedules run at now. A later duplicate that timed out is dropped.
TEST(LogDefectsTest, RemeasuredRecordReplacesTheFirstInItsPlace) {
  const std::string path = Scratch("remeasured.jsonl");
  MeasureRecord stale_best = Record(16, 2, 1, 1.0);  // logged 1.0 ms by an older build
  MeasureRecord now = Record(16, 2, 1, 4.0);         // the same schedule, 4.0 ms now
  now.remeasured = true;
  MeasureRecord again = Record(16, 2, 5, 0);  // a plain duplicate that timed out: dropped
  again.result.error = measure::MeasureError::kRunTimeout;
  WriteText(path, Lines({Record(16, 0, 0, 3.0), stale_best, Record(16, 4, 2, 2.0), now, again}));
  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(Trials(read->records), ElementsAre(0, 1, 2));
  ASSERT_THAT(read->records, SizeIs(3));
  EXPECT_TRUE(read->records[1].remeasured);
  EXPECT_DOUBLE_EQ(read->records[1].median_ms(), 4.0);
  EXPECT_EQ(read->remeasured_records, 1);
  EXPECT_EQ(read->duplicate_records, 1);
  EXPECT_THAT(read->warnings, ElementsAre(HasSubstr("counted 1 duplicate records once")));
  // The best is now the split by 4 (2.0 ms), not the stale 1.0 ms.
  absl::StatusOr<MeasureRecord> best =
      BestRecord(read->records, KeyOf(Matmul(16)), Target::HostCpu());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->trial, 2);
  // A re-measurement that failed outside the schedule (a timeout, no device) does not hide the
  // record it measured again; one that shows the schedule broken (wrong_answer) replaces it.
  MeasureRecord timed_out = Record(16, 4, 2, 0);
  timed_out.remeasured = true;
  timed_out.result.error = measure::MeasureError::kRunTimeout;
  MeasureRecord wrong = Record(16, 0, 0, 0);
  wrong.remeasured = true;
  wrong.result.error = measure::MeasureError::kWrongAnswer;
  WriteText(path, Lines({Record(16, 0, 0, 3.0), Record(16, 4, 2, 2.0), timed_out, wrong}));
  read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  ASSERT_THAT(read->records, SizeIs(2));
  EXPECT_TRUE(read->records[1].valid());
  EXPECT_DOUBLE_EQ(read->records[1].median_ms(), 2.0);
  EXPECT_EQ(read->records[0].result.error, measure::MeasureError::kWrongAnswer);
  EXPECT_EQ(read->remeasured_records, 1);
  EXPECT_EQ(read->unused_remeasures, 1);
  EXPECT_THAT(
      read->warnings,
      ElementsAre(HasSubstr("1 re-measurements failed for reasons outside their schedules")));
  // The mark round-trips; records without it read as not remeasured; a non-boolean is an error
  // naming the field.
  absl::StatusOr<MeasureRecord> back = MeasureRecordFromLine(MeasureRecordToLine(now));
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(back->remeasured);
  EXPECT_THAT(MeasureRecordToLine(stale_best), Not(HasSubstr("remeasured")));
  json bad = MeasureRecordToJson(now);
  bad["remeasured"] = "yes";
  EXPECT_THAT(MeasureRecordFromJson(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field 'remeasured'")));
  // The final selection's mark likewise, and only on a remeasured record.
  MeasureRecord held = now;
  held.final_timing = true;
  back = MeasureRecordFromLine(MeasureRecordToLine(held));
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(back->final_timing);
  EXPECT_THAT(MeasureRecordToLine(now), Not(HasSubstr("final_timing")));
  bad = MeasureRecordToJson(held);
  bad["final_timing"] = 1;
  EXPECT_THAT(MeasureRecordFromJson(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field 'final_timing'")));
  bad = MeasureRecordToJson(held);
  bad.erase("remeasured");
  EXPECT_THAT(MeasureRecordFromJson(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not \"remeasured\"")));
}

// ---------------------------------------------------------------------------------------------
// Line length.

TEST(LogDefectsTest, LineOverTheLimitIsSkippedWithItsLengthWithoutHoldingIt) {
  const std::string path = Scratch("long.jsonl");
  // A 20 MiB line (over the 16 MiB default) between two records, written in 1 MiB pieces so that
  // this process never held it: JSON, so that read whole it would parse as a line of an unknown
  // kind.
  const int64_t long_length = int64_t{20} << 20;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << MeasureRecordToLine(Record(16, 2, 0, 2.0)) << "\n"
        << R"({"kind":"x","pad":")";
    const std::string piece(1 << 20, 'a');
    for (int i = 0; i < 20; ++i) out << piece.substr(0, i == 19 ? piece.size() - 21 : piece.size());
    out << "\"}\n" << MeasureRecordToLine(Record(16, 4, 1, 1.0)) << "\n";
  }
  // The reader holds no more of a line than the limit: with a 1 MiB limit its peak memory grows
  // by far less than the line's 20 MiB.
  ReadOptions one_mib;
  one_mib.max_line_bytes = 1 << 20;
  struct rusage before;
  ::getrusage(RUSAGE_SELF, &before);
  absl::StatusOr<LogContents> read = ReadLog(path, one_mib);
  struct rusage after;
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 6 * 1024) << "KiB of peak memory more";
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->long_lines, 1);
  // With the default limit (16 MiB).
  read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(Trials(read->records), ElementsAre(0, 1));
  EXPECT_EQ(read->lines, 3);
  EXPECT_EQ(read->corrupt_lines, 1);
  EXPECT_EQ(read->long_lines, 1);
  EXPECT_EQ(read->suspect_lines, 1);  // too long to tell whose it is
  EXPECT_THAT(read->warnings,
              ElementsAre(path + ":2: skipped: line is " + std::to_string(long_length) +
                          " bytes long, over the limit of 16777216 bytes"));
  // A record line over a small limit is skipped the same way; the line after it still reads,
  // and a last line without a newline counts.
  const std::string record = MeasureRecordToLine(Record(16, 8, 2, 0.5));
  WriteText(path, record + "\n" + MeasureRecordToLine(Record(16, 4, 3, 1.0)));
  ReadOptions small;
  small.max_line_bytes = static_cast<int64_t>(record.size()) - 1;
  read = ReadLog(path, small);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(Trials(read->records), Not(::testing::Contains(2)));
  EXPECT_GE(read->long_lines, 1);
  small.max_line_bytes = static_cast<int64_t>(record.size());
  read = ReadLog(path, small);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(Trials(read->records), ElementsAre(2, 3));
}

// ---------------------------------------------------------------------------------------------
// Unknown fields and versions.

TEST(LogDefectsTest, UnknownFieldsAreReadWithoutThemAndWarnedOncePerField) {
  const std::string path = Scratch("newer_fields.jsonl");
  // The fastest record has fields this build does not know: it must still be the one replayed.
  json fast = MeasureRecordToJson(Record(16, 4, 1, 0.5));
  fast["energy_j"] = 0.25;
  fast["target"]["tensor_cores"] = 0;
  json also = MeasureRecordToJson(Record(16, 8, 2, 2.0));
  also["energy_j"] = 1.0;
  WriteText(path, Lines({Record(16, 2, 0, 1.0)}) + fast.dump() + "\n" + also.dump() + "\n");
  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(Trials(read->records), ElementsAre(0, 1, 2));
  EXPECT_EQ(read->corrupt_lines, 0);
  EXPECT_EQ(read->unknown_fields.at("energy_j"), 2);
  EXPECT_EQ(read->unknown_fields.at("target.tensor_cores"), 1);
  EXPECT_THAT(read->warnings,
              ElementsAre(HasSubstr(path + ":2: ignored unknown field 'energy_j' (in 2 lines"),
                          HasSubstr(path + ":2: ignored unknown field 'target.tensor_cores' (in 1 "
                                           "line")));
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(path, Matmul(16), Target::HostCpu());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->record.trial, 1);
  EXPECT_DOUBLE_EQ(best->record.median_ms(), 0.5);
  // Parsing one record without a place for warnings stays strict.
  EXPECT_THAT(MeasureRecordFromJson(fast),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown field 'energy_j'")));
  // A newer version fails the whole read, naming the line.
  json newer = MeasureRecordToJson(Record(16, 8, 3, 0.1));
  newer["version"] = kLogFormatVersion + 1;
  WriteText(path, Lines({Record(16, 2, 0, 1.0)}) + newer.dump() + "\n");
  EXPECT_THAT(ReadLog(path), StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr(path + ":2: log format version")));
}

// ---------------------------------------------------------------------------------------------
// Replay and skipped lines.

TEST(LogDefectsTest, ReplayRefusesWhenASkippedLineMayHoldTheWorkloadsBestRecord) {
  const std::string path = Scratch("torn.jsonl");
  const std::string key16 = KeyOf(Matmul(16));
  // Line 2: a record of the workload cut short (a torn write): it may have been the best.
  const std::string torn = MeasureRecordToLine(Record(16, 4, 1, 0.1));
  WriteText(path, Lines({Record(16, 2, 0, 1.0)}) + torn.substr(0, torn.size() / 2) + "\n" +
                      Lines({Record(16, 8, 2, 2.0)}));
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(path, Matmul(16), Target::HostCpu());
  EXPECT_THAT(best, StatusIs(absl::StatusCode::kFailedPrecondition,
                             AllOf(HasSubstr(path + ": 1 line that may hold a record of workload " +
                                             key16 + " could not be read (line 2;"),
                                   HasSubstr("--allow-unreadable-lines"))));
  // Allowed: the best of the lines read, and the count of unusable lines among the warnings.
  best = ApplyHistoryBest(path, Matmul(16), Target::HostCpu(), measure::Fp32Precision::kIeee,
                          /*allow_unreadable_lines=*/true);
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->record.trial, 0);
  EXPECT_THAT(best->warnings, ::testing::Contains(HasSubstr("1 of 3 lines could not be used")));
  // A corrupt line that does not mention the workload's key cannot hold its record.
  const std::string other = MeasureRecordToLine(Record(8, 2, 5, 0.1));
  WriteText(path, Lines({Record(16, 2, 0, 1.0)}) + other.substr(0, other.size() / 2) + "\n");
  best = ApplyHistoryBest(path, Matmul(16), Target::HostCpu());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->record.trial, 0);
}

// A corrupt round line (a JSON object of kind "round" with a bad field) is skipped with a
// warning, but it cannot hold a record: replay takes the best record without
// --allow-unreadable-lines.
TEST(LogDefectsTest, ACorruptRoundLineDoesNotBlockReplay) {
  const std::string path = Scratch("bad_round.jsonl");
  RoundRecord round;
  round.workload_key = KeyOf(Matmul(16));
  round.target = Target::HostCpu();
  round.round = 1;
  round.trials = 2;
  round.predicted = {0.5, 0.25};
  nlohmann::json bad = RoundRecordToJson(round);
  bad["overlapped"] = "yes";
  WriteText(path, Lines({Record(16, 2, 0, 1.0), Record(16, 4, 1, 0.5)}) + bad.dump() + "\n");
  ReadOptions read_options;
  read_options.workload_key = KeyOf(Matmul(16));
  absl::StatusOr<LogContents> read = ReadLog(path, read_options);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->corrupt_lines, 1);
  EXPECT_EQ(read->corrupt_round_lines, 1);
  EXPECT_EQ(read->suspect_lines, 0);
  EXPECT_THAT(
      read->warnings,
      ::testing::Contains(HasSubstr(":3: skipped: field 'overlapped' must be true or false")));
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(path, Matmul(16), Target::HostCpu());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->record.trial, 1);
}

TEST(LogDefectsTest, NoRecordForAWorkloadListsTheWorkloadsTheLogHolds) {
  const std::string path = Scratch("others.jsonl");
  schedule::Workload relu;
  relu.op = "relu";
  relu.args.shapes = {{64}};
  MeasureRecord r = TimedRecord(relu, KeyOf(relu), Target::HostCpu(), 9, 1.0);
  WriteText(path, Lines({r, Record(8, 2, 0, 1.0), Record(8, 4, 1, 1.0)}));
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(path, Matmul(16), Target::HostCpu());
  // The matmul first (the same operator), with its key, target and record count.
  EXPECT_THAT(
      best, StatusIs(absl::StatusCode::kNotFound,
                     AllOf(HasSubstr("no record for workload " + KeyOf(Matmul(16)) + " on cpu"),
                           HasSubstr("; the log holds records of 2 other workloads: matmul 8x8 "
                                     "8x8 float32 (key " +
                                     KeyOf(Matmul(8)) + ", cpu, 2 records); relu 64 float32 (key " +
                                     KeyOf(relu) + ", cpu, 1 record)"))));
}

// ---------------------------------------------------------------------------------------------
// Target fields.

TEST(LogDefectsTest, CpuRecordsCarryNoGpuLimitsAndOldOnesStillRead) {
  MeasureRecord cpu = Record(16, 2, 0, 1.0);
  const json written = MeasureRecordToJson(cpu);
  std::vector<std::string> keys;
  for (auto it = written["target"].begin(); it != written["target"].end(); ++it) {
    keys.push_back(it.key());
  }
  EXPECT_THAT(keys, ElementsAre("arch", "device_name", "host_cores", "host_vector_bytes", "kind"));
  // A cuda record keeps every limit.
  MeasureRecord gpu = cpu;
  gpu.target = Target::H200();
  EXPECT_EQ(MeasureRecordToJson(gpu)["target"]["sm_count"], 132);
  EXPECT_EQ(MeasureRecordToJson(gpu)["target"]["warp_size"], 32);
  // An older cpu record with the GPU limits reads (values kept, unused).
  json old = written;
  old["target"]["sm_count"] = 7;
  old["target"]["warp_size"] = 64;
  for (const char* f :
       {"max_threads_per_block", "max_shared_memory_per_block", "max_shared_memory_optin",
        "max_registers_per_block", "max_vthread_extent", "max_vector_bytes", "l2_bytes"}) {
    old["target"][f] = 1;
  }
  absl::StatusOr<MeasureRecord> read = MeasureRecordFromJson(old);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->target.sm_count, 7);
  EXPECT_EQ(read->target.host_cores, cpu.target.host_cores);
  // A new one reads back to the same record line.
  absl::StatusOr<MeasureRecord> back = MeasureRecordFromJson(written);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(MeasureRecordToLine(*back), MeasureRecordToLine(cpu));
  // A cuda record without its limits is refused (they are its hardware's).
  json gpu_json = MeasureRecordToJson(gpu);
  gpu_json["target"].erase("sm_count");
  EXPECT_THAT(MeasureRecordFromJson(gpu_json),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'target.sm_count' is missing")));
}

}  // namespace
}  // namespace tilesearch::search
