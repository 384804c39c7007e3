// A per-process scratch directory for tests that write logs and artifacts: under the test temp
// dir, named after the test binary and its pid (several build trees may run the same test at
// once), removed when the test binary exits.
#pragma once

#include <errno.h>  // program_invocation_short_name (GNU)
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace tilesearch::testing {

/// <TempDir>/<binary>_<pid>.
inline std::filesystem::path ScratchDir() {
  return std::filesystem::path(::testing::TempDir()) /
         (std::string(program_invocation_short_name) + "_" + std::to_string(::getpid()));
}

/// A fresh path `name` in ScratchDir() (the directory is created; an old file or directory of
/// that name is removed).
inline std::string ScratchPath(const std::string& name) {
  std::filesystem::create_directories(ScratchDir());
  const std::filesystem::path p = ScratchDir() / name;
  std::filesystem::remove_all(p);
  return p.string();
}

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override { std::filesystem::remove_all(ScratchDir()); }
};
inline const ::testing::Environment* const kScratchCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

}  // namespace tilesearch::testing
