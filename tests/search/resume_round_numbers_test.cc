// Resuming a tuning log whose round lines were partly skipped as corrupt: the new round lines must
// not reuse a round number already in the file (inspect would list two "round 2"). A real cpu tune
// of a 16×16×16 float32 matmul (2 rounds of 2 trials), one round line corrupted by hand, then one
// more round; the round numbers are read back from the raw file text with nlohmann::json (not with
// the log reader under test), so the corrupt line's number counts too.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/measure.h"
#include "nlohmann/json.hpp"
#include "search/log_io.h"
#include "search/tuner.h"
#include "tests/search/scratch_dir.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

using nlohmann::json;

schedule::Workload Matmul16() { return testing::SquareMatmul(16); }

TuneOptions SmallTune(const std::string& log, int trials) {
  return testing::TinyCpuTuneOptions(log, trials, /*per_round=*/2, /*seed=*/11);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& line : lines) out << line << "\n";
}

// Index of the line of round `round` (a JSON round line), -1 when none.
int RoundLineIndex(const std::vector<std::string>& lines, int64_t round) {
  for (size_t i = 0; i < lines.size(); ++i) {
    const json j = json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("kind", "") == "round" && j.value("round", 0) == round) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// The "round" numbers of the file's round lines that are JSON, in file order.
std::vector<int64_t> RoundNumbers(const std::string& path) {
  std::vector<int64_t> numbers;
  for (const std::string& line : Lines(path)) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("kind", "") == "round") numbers.push_back(j.at("round"));
  }
  return numbers;
}

// Tunes 2 rounds into a fresh log and returns its path.
std::string TwoRoundLog(const std::string& name) {
  const std::string log = ::tilesearch::testing::ScratchPath(name);
  absl::StatusOr<TuneResult> first = Tune(Matmul16(), Target::HostCpu(), SmallTune(log, 4));
  EXPECT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(RoundNumbers(log), (std::vector<int64_t>{1, 2}));
  return log;
}

TEST(ResumeRoundNumbersTest, CorruptFirstRoundLineIsNotRenumbered) {
  const std::string log = TwoRoundLog("corrupt_first.jsonl");
  std::vector<std::string> lines = Lines(log);
  const int at = RoundLineIndex(lines, 1);
  ASSERT_GE(at, 0);
  json j = json::parse(lines[at]);
  j["local_search_trials"] = 0;
  j["local_search_fraction"] = 2;  // outside [0, 1]: the reader skips the line
  lines[at] = j.dump();
  WriteLines(log, lines);
  absl::StatusOr<LogContents> read = ReadLog(log);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->corrupt_lines, 1);
  ASSERT_EQ(read->rounds.size(), 1u);

  ASSERT_TRUE(Tune(Matmul16(), Target::HostCpu(), SmallTune(log, 6)).ok());
  const std::vector<int64_t> numbers = RoundNumbers(log);
  ASSERT_EQ(numbers.size(), 3u);
  EXPECT_EQ(std::set<int64_t>(numbers.begin(), numbers.end()).size(), 3u) << numbers[2];
  EXPECT_GT(numbers[2], numbers[0]);
  EXPECT_GT(numbers[2], numbers[1]);
}

// The last round's line corrupt: the highest number is only in the skipped line.
TEST(ResumeRoundNumbersTest, CorruptLastRoundLineIsNotRenumbered) {
  const std::string log = TwoRoundLog("corrupt_last.jsonl");
  std::vector<std::string> lines = Lines(log);
  const int at = RoundLineIndex(lines, 2);
  ASSERT_GE(at, 0);
  json j = json::parse(lines[at]);
  j["valid"] = "garbage";
  lines[at] = j.dump();
  WriteLines(log, lines);

  ASSERT_TRUE(Tune(Matmul16(), Target::HostCpu(), SmallTune(log, 6)).ok());
  const std::vector<int64_t> numbers = RoundNumbers(log);
  ASSERT_EQ(numbers.size(), 3u);
  EXPECT_EQ(numbers[2], 3);  // one past the skipped line's round 2
}

// A truncated last round line (not JSON; its number unreadable): counted as a round line.
TEST(ResumeRoundNumbersTest, TruncatedLastRoundLineIsCounted) {
  const std::string log = TwoRoundLog("truncated_last.jsonl");
  std::vector<std::string> lines = Lines(log);
  const int at = RoundLineIndex(lines, 2);
  ASSERT_GE(at, 0);
  const size_t cut = lines[at].find("\"round\":");
  ASSERT_NE(cut, std::string::npos);
  lines[at] = lines[at].substr(0, cut);  // keeps "kind":"round", loses the number
  ASSERT_NE(lines[at].find("\"kind\":\"round\""), std::string::npos) << lines[at];
  WriteLines(log, lines);

  ASSERT_TRUE(Tune(Matmul16(), Target::HostCpu(), SmallTune(log, 6)).ok());
  const std::vector<int64_t> numbers = RoundNumbers(log);
  ASSERT_EQ(numbers, (std::vector<int64_t>{1, 3}));  // the truncated one was 2
}

// NextRoundNumber on hand-made contents.
TEST(ResumeRoundNumbersTest, NextRoundNumberRules) {
  LogContents c;
  EXPECT_EQ(NextRoundNumber(c), 1);
  RoundRecord r;
  r.round = 4;
  c.rounds.push_back(r);
  EXPECT_EQ(NextRoundNumber(c), 5);
  c.max_corrupt_round = 7;
  c.corrupt_round_lines = 1;
  EXPECT_EQ(NextRoundNumber(c), 8);
  c.max_corrupt_round = 0;
  c.corrupt_round_lines = 6;  // 1 kept + 6 skipped lines: numbers up to 7 may be taken
  EXPECT_EQ(NextRoundNumber(c), 8);
}

}  // namespace
}  // namespace tilesearch::search
