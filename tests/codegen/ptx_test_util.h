// Helpers of the PTX tests that lower schedule files: counting instructions in PTX text,
// assembling it with ptxas (skipped where ptxas is absent), and lowering + compiling a schedule
// file's text to PTX.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "gtest/gtest.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"

namespace tilesearch::codegen::testing {

inline constexpr char kPtxas[] = "/usr/local/cuda/bin/ptxas";

/// Number of (possibly overlapping) occurrences of `what` in `text`.
inline int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

/// What ptxas -arch=`arch` prints (stdout and stderr) assembling `ptx`, its notes included (e.g.
/// "(C7519) warpgroup.arrive is injected ..."), expecting it to succeed; nullopt where ptxas is
/// absent (the caller skips). The PTX is written to `stem_prefix`_<pid>.ptx in the test's
/// temporary directory: ctest runs the test cases of one binary as parallel processes, and a
/// shared file name let one case's ptxas read another's half-written PTX.
inline std::optional<std::string> PtxasLog(const std::string& ptx, const std::string& stem_prefix,
                                           const std::string& arch = "sm_90") {
  if (!std::filesystem::exists(kPtxas)) return std::nullopt;
  const std::string dir = ::testing::TempDir();
  const std::string stem = stem_prefix + "_" + std::to_string(::getpid());
  const std::string in = dir + "/" + stem + ".ptx";
  const std::string log = dir + "/" + stem + ".log";
  std::ofstream(in) << ptx;
  const std::string cmd = std::string(kPtxas) + " -arch=" + arch + " " + in + " -o " + dir + "/" +
                          stem + ".cubin > " + log + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << ptx;
  std::ifstream f(log);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// Expects ptxas -arch=`arch` (sm_90 by default) to assemble `ptx` (PtxasLog); marks the test
/// skipped (and returns) where ptxas is absent.
inline void ExpectPtxasAccepts(const std::string& ptx, const std::string& stem_prefix,
                               const std::string& arch = "sm_90") {
  if (!PtxasLog(ptx, stem_prefix, arch).has_value()) {
    GTEST_SKIP() << "ptxas not found at " << kPtxas << "; PTX not assembled";
  }
}

/// A lowered schedule and its PTX.
struct CompiledSchedule {
  schedule::LoweredKernel kernel;
  std::string ptx;
};

/// Parses, resolves and lowers a schedule file's `text` and compiles it to PTX with its launches
/// (with `block_x` threads on x instead where `block_x` > 0). Errors: those of each stage.
inline absl::StatusOr<CompiledSchedule> CompileScheduleText(const std::string& text,
                                                            int64_t block_x = 0) {
  ASSIGN_OR_RETURN(schedule::ScheduleFile file, schedule::ScheduleFile::Parse(text));
  ASSIGN_OR_RETURN(schedule::ResolvedSchedule r, file.Resolve());
  ASSIGN_OR_RETURN(schedule::LoweredKernel k, schedule::Lower(r.dag, r.state, file.target));
  std::vector<LaunchConfig> launches;
  for (const LaunchConfig& l : k.launches) {
    LaunchConfig li;
    li.grid = l.grid;
    li.block = l.block;
    if (block_x > 0) li.block[0] = block_x;
    launches.push_back(li);
  }
  ASSIGN_OR_RETURN(GpuModule m, CompileToPtx(k.nest, launches));
  return CompiledSchedule{std::move(k), m.ptx};
}

/// The text of the file at `path`; NotFound where it cannot be opened.
inline absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream f(path);
  if (!f.good()) return absl::NotFoundError(path + " not found");
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace tilesearch::codegen::testing
