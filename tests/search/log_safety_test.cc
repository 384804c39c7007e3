// Logs and artifacts that a user can get wrong: a text file given as a log is refused naming its
// first bad line (an empty file is an empty log, a real log with a damaged trailing line still
// reads); fifos, directories and devices are refused as logs by the reader and the writer without
// blocking; a record whose workload key does not match its workload is skipped with its line
// number (and ApplyHistoryBest then picks the next consistent record); the target filter's
// summary warning can be turned off; the tuning curve names trials as the records do (0-based);
// artifact names that are C/C++ keywords or reserved identifiers are refused; WriteArtifacts
// writes all files or none and ValidateArtifactDir refuses an unusable output directory.
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
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

std::string Scratch(const std::string& name) { return ::tilesearch::testing::ScratchPath(name); }

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A valid cpu record of `workload` (no steps: the naive schedule, which always replays) with the
// given median, claiming `key`.
MeasureRecord Record(const schedule::Workload& workload, const std::string& key, int64_t trial,
                     double median_ms) {
  MeasureRecord r = TimedRecord(workload, key, Target::HostCpu(), trial, median_ms);
  r.device_name = "host";
  r.seed = 1;
  return r;
}

// `r` with a split of its output stage by `factor`: records of equal steps count as one schedule
// measured twice, so the tests give each record its own.
MeasureRecord WithSplit(MeasureRecord r, int64_t factor) {
  r.steps = {schedule::SplitStep{2, 0, r.workload.args.shapes[0][0], {factor}, true}};
  return r;
}

std::string Lines(const std::vector<MeasureRecord>& records) {
  std::string text;
  for (const MeasureRecord& r : records) text += MeasureRecordToLine(r) + "\n";
  return text;
}

// ---------------------------------------------------------------------------------------------
// Files that are not logs.

TEST(LogSafetyTest, TextFileIsNotALogAndTheErrorNamesTheFileAndItsFirstBadLine) {
  const std::string path = Scratch("notes.txt");
  WriteText(path, "\nshopping list\n- milk\n");
  EXPECT_THAT(ReadLog(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'" + path + "' is not a tilesearch tuning log"),
                             HasSubstr("line 2 is not a record or round line"),
                             HasSubstr("\"shopping list\""))));
  // JSON that is not ours is not a log either.
  const std::string other = Scratch("other.jsonl");
  WriteText(other, "{\"name\": \"x\"}\n{\"name\": \"y\"}\n");
  EXPECT_THAT(ReadLog(other), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("line 1 is not a record or round line")));
}

TEST(LogSafetyTest, EmptyFileAndBlankLinesAreAnEmptyLog) {
  const std::string empty = Scratch("empty.jsonl");
  WriteText(empty, "");
  absl::StatusOr<LogContents> read = ReadLog(empty);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->records, IsEmpty());
  const std::string blank = Scratch("blank.jsonl");
  WriteText(blank, "\n  \n\t\n");
  read = ReadLog(blank);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->records, IsEmpty());
  EXPECT_EQ(read->lines, 3);
}

TEST(LogSafetyTest, LogWithADamagedLineStillReadsWithAWarning) {
  const std::string path = Scratch("damaged.jsonl");
  const std::string key = KeyOf(Matmul(16));
  const std::string line = MeasureRecordToLine(Record(Matmul(16), key, 1, 2.0));
  WriteText(path, Lines({Record(Matmul(16), key, 0, 1.0)}) + line.substr(0, line.size() / 2));
  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->records, SizeIs(1));
  ASSERT_THAT(read->warnings, SizeIs(1));
  EXPECT_THAT(read->warnings[0], HasSubstr(path + ":2: skipped: not valid JSON"));
}

TEST(LogSafetyTest, DeeplyNestedValuesAreSkippedWithAShortMessageNotAStackOverflow) {
  // A corrupt line whose workload, steps or version is a list nested 100000 deep: quoting the
  // value in the message used to recurse once per level in json::dump and overflow the stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string path = Scratch("deep.jsonl");
  const std::string key = KeyOf(Matmul(16));
  const std::string good = MeasureRecordToLine(Record(Matmul(16), key, 0, 1.0));
  WriteText(path, good + "\n" + "{\"version\":1,\"workload_key\":\"" + key + "\",\"workload\":" +
                      deep + "}\n" + "{\"version\":" + deep + "}\n" + "{\"kind\":" + deep + "}\n");
  absl::StatusOr<LogContents> read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->records, SizeIs(1));
  ASSERT_THAT(read->warnings, SizeIs(3));
  for (const std::string& w : read->warnings) {
    EXPECT_THAT(w, HasSubstr("skipped"));
    EXPECT_LT(w.size(), 400u) << w.substr(0, 400);
  }
  EXPECT_THAT(read->warnings[0], HasSubstr(path + ":2:"));
}

TEST(LogSafetyTest, SpecialFilesAreRefusedByTheReaderAndTheWriter) {
  const std::string fifo = Scratch("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Neither may block waiting for a writer / reader of the fifo.
  EXPECT_THAT(ReadLog(fifo), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("log '" + fifo +
                                                "' is not a regular file (it is a "
                                                "fifo)")));
  EXPECT_THAT(LogWriter::Open(fifo).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(it is a fifo)")));

  const std::string dir = Scratch("dir.jsonl");
  std::filesystem::create_directories(dir);
  EXPECT_THAT(ReadLog(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(it is a directory)")));
  EXPECT_THAT(LogWriter::Open(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(it is a directory)")));

  // A device that never ends.
  EXPECT_THAT(ReadLog("/dev/urandom"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("(it is a character device)")));
  // A symbolic link to a regular log is fine.
  const std::string target = Scratch("real.jsonl");
  WriteText(target, Lines({Record(Matmul(16), KeyOf(Matmul(16)), 0, 1.0)}));
  const std::string link = Scratch("link.jsonl");
  std::filesystem::create_symlink(target, link);
  absl::StatusOr<LogContents> read = ReadLog(link);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->records, SizeIs(1));
}

// ---------------------------------------------------------------------------------------------
// Records whose key does not match their workload.

TEST(LogSafetyTest, InconsistentRecordIsSkippedWithItsLineNumberWhenVerifying) {
  const std::string path = Scratch("inconsistent.jsonl");
  const std::string key16 = KeyOf(Matmul(16));
  ASSERT_NE(key16, KeyOf(Matmul(8)));
  // Line 2 claims the 16³ key but is an 8³ matmul.
  WriteText(path, Lines({Record(Matmul(16), key16, 0, 3.0),
                         WithSplit(Record(Matmul(8), key16, 1, 0.5), 2),
                         WithSplit(Record(Matmul(16), key16, 2, 2.0), 4)}));
  ReadOptions verify;
  verify.verify_workload_keys = true;
  absl::StatusOr<LogContents> read = ReadLog(path, verify);
  ASSERT_THAT(read, IsOk());
  ASSERT_THAT(read->records, SizeIs(2));
  EXPECT_EQ(read->records[0].trial, 0);
  EXPECT_EQ(read->records[1].trial, 2);
  EXPECT_EQ(read->inconsistent_records, 1);
  ASSERT_THAT(read->warnings, SizeIs(1));
  EXPECT_THAT(read->warnings[0], AllOf(HasSubstr(path + ":2: skipped: workload key " + key16),
                                       HasSubstr("matmul 8x8 8x8"), HasSubstr(KeyOf(Matmul(8)))));
  // Without verification the reader keeps every record (the flag's default).
  read = ReadLog(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->records, SizeIs(3));
}

TEST(LogSafetyTest, ApplyHistoryBestSkipsAnInconsistentBestAndPicksTheNextValidRecord) {
  const std::string path = Scratch("inconsistent_best.jsonl");
  const std::string key16 = KeyOf(Matmul(16));
  WriteText(path, Lines({Record(Matmul(16), key16, 0, 3.0), Record(Matmul(8), key16, 1, 0.5),
                         WithSplit(Record(Matmul(16), key16, 2, 2.0), 4)}));
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(path, Matmul(16), Target::HostCpu());
  ASSERT_THAT(best, IsOk());
  EXPECT_EQ(best->record.trial, 2);  // the fastest of trials 0 (3 ms) and 2 (2 ms)
  ASSERT_THAT(best->warnings, SizeIs(1));
  EXPECT_THAT(best->warnings[0], HasSubstr(path + ":2: skipped: workload key"));
}

// ---------------------------------------------------------------------------------------------
// Filters and the tuning curve.

TEST(LogSafetyTest, TargetFilterWarningCanBeTurnedOffAndTheCountStays) {
  const std::string path = Scratch("two_targets.jsonl");
  const std::string key = KeyOf(Matmul(16));
  MeasureRecord gpu = Record(Matmul(16), key, 0, 1.0);
  gpu.target = Target::H200();
  WriteText(path, Lines({gpu, Record(Matmul(16), key, 0, 2.0)}));
  ReadOptions cpu;
  cpu.target = Target::HostCpu();
  absl::StatusOr<LogContents> read = ReadLog(path, cpu);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->warnings, ElementsAre(HasSubstr("records of other targets")));
  cpu.warn_other_targets = false;
  read = ReadLog(path, cpu);
  ASSERT_THAT(read, IsOk());
  EXPECT_THAT(read->warnings, IsEmpty());
  EXPECT_EQ(read->foreign_target_records, 1);
  EXPECT_THAT(read->records, SizeIs(1));
}

TEST(LogSafetyTest, TuningCurveNamesTrialsAsTheRecordsDo) {
  const std::string key = KeyOf(Matmul(16));
  // Trials 0..3 with medians 4, 3, 5, 1 ms: best so far 4, 3, 3, 1.
  std::vector<MeasureRecord> records = {
      Record(Matmul(16), key, 0, 4.0), Record(Matmul(16), key, 1, 3.0),
      Record(Matmul(16), key, 2, 5.0), Record(Matmul(16), key, 3, 1.0)};
  std::vector<WorkloadSummary> s = SummarizeLog(records);
  ASSERT_THAT(s, SizeIs(1));
  ASSERT_THAT(s[0].curve, SizeIs(4));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s[0].curve[i].trial, i);
    EXPECT_EQ(s[0].curve[i].trials, i + 1);
  }
  const std::string text = FormatSummary(s, 4);
  EXPECT_THAT(text, HasSubstr("trials numbered from 0"));
  EXPECT_THAT(text, HasSubstr("  trial 0: best 4 ms"));
  EXPECT_THAT(text, HasSubstr("  trial 2: best 3 ms"));
  EXPECT_THAT(text, HasSubstr("  trial 3: best 1 ms"));
  EXPECT_THAT(text, Not(HasSubstr("  trial 4:")));  // no 1-based count among the trial names
  EXPECT_THAT(text, HasSubstr("at trial 3\n"));     // the best, as its record says
  // 90% of the best (1 ms → ≤ 1.11 ms) is first reached by trial 3, the 4th trial.
  EXPECT_THAT(text, HasSubstr("90% of the best reached at trial 3 (after 4 trials)"));
}

// ---------------------------------------------------------------------------------------------
// Artifact names and output directories.

TEST(ArtifactNameTest, KeywordsAndReservedIdentifiersAreRefused) {
  for (const char* name : {"int", "while", "bool", "static_assert", "typeof"}) {
    EXPECT_THAT(ValidateArtifactName(name),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(std::string("'") + name + "'"), HasSubstr("C keyword"))))
        << name;
  }
  for (const char* name : {"class", "new", "template", "namespace", "this"}) {
    EXPECT_THAT(ValidateArtifactName(name),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("C++ keyword")))
        << name;
  }
  for (const char* name : {"_kernel", "_Kernel", "__k", "my__kernel"}) {
    EXPECT_THAT(ValidateArtifactName(name),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is reserved")))
        << name;
  }
  EXPECT_THAT(ValidateArtifactName("main"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("already defines")));
  EXPECT_THAT(ValidateArtifactName(codegen::kHostObjectParallelFor),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("already defines")));
  EXPECT_THAT(ValidateArtifactName("my-kernel"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a C identifier")));
  EXPECT_THAT(ValidateArtifactName("9k"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a C identifier")));
  EXPECT_THAT(ValidateArtifactName(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("artifact name is empty")));
  for (const char* name : {"my_kernel", "matmul_9f0c2d4e", "Int", "integer", "k"}) {
    EXPECT_THAT(ValidateArtifactName(name), IsOk()) << name;
  }
}

TEST(ArtifactNameTest, BuildKernelRefusesAKeywordBeforeCompiling) {
  MeasureRecord r = Record(Matmul(8), KeyOf(Matmul(8)), 0, 1.0);
  BuildOptions options;
  options.name = "int";
  EXPECT_THAT(BuildKernel(r, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'int' is a C keyword")));
}

// A cpu artifact with hand-made contents (WriteArtifacts only writes what it is given).
KernelArtifact FakeCpuArtifact(const std::string& name) {
  KernelArtifact a;
  a.name = name;
  a.record = Record(Matmul(8), KeyOf(Matmul(8)), 0, 1.0);
  codegen::HostObject object;
  object.bytes = "not really an object";
  object.entry_name = name;
  object.target_triple = "x86_64-unknown-linux-gnu";
  object.cpu = "generic";
  a.host = object;
  return a;
}

std::set<std::string> DirEntries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.insert(e.path().filename().string());
  }
  return names;
}

TEST(WriteArtifactsTest, WritesEveryFileAndLeavesNoTemporaryFile) {
  const std::string dir = Scratch("out_ok") + "/nested/dir";
  absl::StatusOr<std::vector<std::string>> written = WriteArtifacts(FakeCpuArtifact("k"), dir);
  ASSERT_THAT(written, IsOk());
  EXPECT_THAT(*written, ElementsAre(dir + "/k.o", dir + "/k.h", dir + "/k.json"));
  EXPECT_EQ(DirEntries(dir), (std::set<std::string>{"k.o", "k.h", "k.json"}));
  EXPECT_EQ(ReadText(dir + "/k.o"), "not really an object");
}

TEST(WriteArtifactsTest, AnUnwritableDestinationLeavesNoFileAtAll) {
  const std::string dir = Scratch("out_partial");
  std::filesystem::create_directories(dir + "/k.json");  // the last file cannot be written
  EXPECT_THAT(WriteArtifacts(FakeCpuArtifact("k"), dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(dir + "/k.json"), HasSubstr("is a directory"))));
  EXPECT_EQ(DirEntries(dir), (std::set<std::string>{"k.json"}));  // no k.o, k.h, temporaries
}

TEST(WriteArtifactsTest, UnusableOutputDirectoryIsRefusedUpFrontWithoutCreatingAnything) {
  const std::string file = Scratch("plain_file");
  WriteText(file, "x");
  EXPECT_THAT(ValidateArtifactDir(file), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  HasSubstr("'" + file + "' is not a directory")));
  EXPECT_THAT(ValidateArtifactDir(file + "/sub/dir"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot create output directory '" + file + "/sub/dir'")));
  EXPECT_THAT(ValidateArtifactDir(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is empty")));
  // A directory that can be created is fine, and is not created by the check.
  const std::string fresh = Scratch("fresh") + "/a/b";
  EXPECT_THAT(ValidateArtifactDir(fresh), IsOk());
  EXPECT_FALSE(std::filesystem::exists(Scratch("fresh")));
  EXPECT_THAT(WriteArtifacts(FakeCpuArtifact("k"), file + "/sub"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot create output")));
}

}  // namespace
}  // namespace tilesearch::search
