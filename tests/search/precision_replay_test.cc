// The precision option in tuning logs: a log holding an ieee and a (faster) tf32 record of one
// workload answers an ieee replay with the ieee record and a tf32 replay with the tf32 one (their
// keys: measure::PrecisionWorkloadKey), both survive ReadLog's key verification, and a task made
// under tf32 has the tf32 key and draws the one-pass TF32 kind.
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/log_io.h"
#include "search/replay.h"
#include "search/tune_context.h"
#include "tests/search/record_test_util.h"
#include "tests/search/scratch_dir.h"

namespace tilesearch::search {
namespace {

using ::testing::HasSubstr;
using testing::KeyOf;
using testing::Matmul;
using testing::TimedRecord;
using ::tilesearch::testing::StatusIs;

constexpr measure::Fp32Precision kIeee = measure::Fp32Precision::kIeee;
constexpr measure::Fp32Precision kTf32 = measure::Fp32Precision::kTf32;

std::string WriteMixedLog() {
  const schedule::Workload w = Matmul(16);
  MeasureRecord ieee = TimedRecord(w, KeyOf(w), Target::HostCpu(), 0, 5.0);
  MeasureRecord tf32 = TimedRecord(w, KeyOf(w) + "-tf32", Target::HostCpu(), 1, 2.0);
  tf32.precision = kTf32;
  const std::string path = ::tilesearch::testing::ScratchPath("mixed_precision.jsonl");
  absl::StatusOr<LogWriter> writer = LogWriter::Open(path);
  CHECK(writer.ok()) << writer.status();
  CHECK(writer->Append({ieee, tf32}).ok());
  return path;
}

TEST(PrecisionReplayTest, EachPrecisionReplaysOnlyItsOwnRecords) {
  const std::string log = WriteMixedLog();
  absl::StatusOr<ReplayedRecord> ieee = ApplyHistoryBest(log, Matmul(16), Target::HostCpu());
  ASSERT_TRUE(ieee.ok()) << ieee.status();
  EXPECT_EQ(ieee->record.precision, kIeee);
  EXPECT_EQ(ieee->record.trial, 0);  // the slower record: the faster one is tf32
  EXPECT_TRUE(ieee->warnings.empty());
  absl::StatusOr<ReplayedRecord> tf32 = ApplyHistoryBest(log, Matmul(16), Target::HostCpu(), kTf32);
  ASSERT_TRUE(tf32.ok()) << tf32.status();
  EXPECT_EQ(tf32->record.precision, kTf32);
  EXPECT_EQ(tf32->record.trial, 1);
  EXPECT_EQ(tf32->record.workload_key, KeyOf(Matmul(16)) + "-tf32");
  // Another workload of the log has neither.
  EXPECT_THAT(ApplyHistoryBest(log, Matmul(32), Target::HostCpu(), kTf32),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no record for workload")));
}

TEST(PrecisionReplayTest, KeyVerificationAcceptsBothAndReplayRecordChecksTheKey) {
  ReadOptions read;
  read.verify_workload_keys = true;
  absl::StatusOr<LogContents> contents = ReadLog(WriteMixedLog(), read);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->records.size(), 2u);
  EXPECT_EQ(contents->inconsistent_records, 0);
  // A tf32 record of another workload's key is refused by ReplayRecord.
  MeasureRecord lie =
      TimedRecord(Matmul(16), KeyOf(Matmul(32)) + "-tf32", Target::HostCpu(), 2, 1.0);
  lie.precision = kTf32;
  EXPECT_THAT(ReplayRecord(lie),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("differs from " + KeyOf(Matmul(16)) + "-tf32")));
}

TEST(PrecisionReplayTest, TaskKeyAndSketchOptionsFollowThePrecision) {
  absl::StatusOr<ir::ComputeDAG> dag = Matmul(16).Build();
  ASSERT_TRUE(dag.ok());
  SearchOptions options;
  const TuneContext ieee(*dag, Target::HostCpu(), options);
  EXPECT_EQ(ieee.workload_key(), dag->WorkloadKey());
  EXPECT_FALSE(ieee.sketch_options().allow_tf32);
  options.precision = kTf32;
  const TuneContext tf32(*dag, Target::HostCpu(), options);
  EXPECT_EQ(tf32.workload_key(), dag->WorkloadKey() + "-tf32");
  EXPECT_TRUE(tf32.sketch_options().allow_tf32);
}

}  // namespace
}  // namespace tilesearch::search
