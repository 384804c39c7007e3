#include "base/read_file.h"

#include <cstdio>
#include <string>

#include "base/status_matchers.h"
#include "base/write_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch {
namespace {

using ::testing::HasSubstr;
using testing::IsOk;
using testing::StatusIs;

TEST(ReadFile, ReturnsTheBytesWritten) {
  const std::string path = ::testing::TempDir() + "/read_file_bytes.bin";
  const std::string bytes("a\0b\nc", 5);  // binary: a NUL and a newline survive
  ASSERT_TRUE(WriteFile(path, bytes).ok());
  absl::StatusOr<std::string> read = ReadFile(path, "test file");
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(*read, bytes);
  std::remove(path.c_str());
}

TEST(ReadFile, NamesAMissingFileAndADirectory) {
  const std::string missing = ::testing::TempDir() + "/read_file_no_such.json";
  EXPECT_THAT(ReadFile(missing, "test file"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("cannot read test file '" + missing + "': No such file")));
  const std::string dir = ::testing::TempDir();
  EXPECT_THAT(ReadFile(dir, "test file"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("it is a directory")));
}

}  // namespace
}  // namespace tilesearch
