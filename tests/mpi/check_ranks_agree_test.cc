// The join check of an MPI job (mpi::CheckRanksAgree): ranks that agree pass; a rank's own error,
// a different command line, a different target and a GPU of another model than the job's target
// are each one error naming the rank and what differs.
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "base/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mpi/mpi_job.h"
#include "search/measure_record.h"

namespace tilesearch::mpi {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

JoinInfo Rank(const std::string& target_text, const std::string& device_arch = "") {
  JoinInfo info;
  info.args = {"tune", "--op", "matmul", "--trials", "64"};
  info.target = search::TargetToRecordJson(*ParseTarget(target_text));
  info.device_arch = device_arch;
  info.device_name = device_arch.empty() ? "" : "GPU " + device_arch;
  return info;
}

const std::vector<std::string> kNames = {"rank 0 (host a)", "rank 1 (host b)"};

TEST(CheckRanksAgreeTest, RanksOfOneCommandAndGpuModelAgree) {
  EXPECT_TRUE(CheckRanksAgree(
                  {Rank("cuda -arch=sm_90", "sm_90"), Rank("cuda -arch=sm_90", "sm_90")}, kNames)
                  .ok());
  EXPECT_TRUE(CheckRanksAgree({Rank("cpu"), Rank("cpu")}, kNames).ok());
}

TEST(CheckRanksAgreeTest, ARanksOwnErrorIsNamed) {
  std::vector<JoinInfo> infos = {Rank("cpu"), Rank("cpu")};
  infos[1].error = "no usable CUDA device 1";
  EXPECT_THAT(CheckRanksAgree(infos, kNames),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("rank 1 (host b): no usable CUDA device 1")));
}

TEST(CheckRanksAgreeTest, ADifferentCommandLineIsNamed) {
  std::vector<JoinInfo> infos = {Rank("cpu"), Rank("cpu")};
  infos[1].args.back() = "128";
  EXPECT_THAT(CheckRanksAgree(infos, kNames),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("ranks disagree on the command line: rank 1 (host b)"),
                             HasSubstr("--trials 128"), HasSubstr("--trials 64"))));
}

TEST(CheckRanksAgreeTest, AnotherTargetOrGpuModelIsRefused) {
  EXPECT_THAT(CheckRanksAgree({Rank("cuda -arch=sm_90", "sm_90"), Rank("cpu")}, kNames),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ranks disagree on the target: rank 1 (host b) tunes for cpu")));
  EXPECT_THAT(CheckRanksAgree(
                  {Rank("cuda -arch=sm_90", "sm_90"), Rank("cuda -arch=sm_90", "sm_80")}, kNames),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rank 1 (host b) has a GPU sm_80 (sm_80)"),
                             HasSubstr("the job tunes for sm_90"),
                             HasSubstr("different GPU models must stay apart"))));
}

}  // namespace
}  // namespace tilesearch::mpi
