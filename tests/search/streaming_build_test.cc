// StreamingBuild (search/streaming_build.h): a round's builds on a thread of their own, read in
// candidate order as they arrive. What is read must be what a synchronous Builder::Build of the
// same inputs returns (the same PTX, the same errors), WaitReady must never report a candidate
// that is not built, and a cancelled build must end every candidate, built or cancelled.
#include "search/streaming_build.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status_matchers.h"
#include "base/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "schedule/lower.h"
#include "schedule/naive_gpu.h"
#include "schedule/state.h"
#include "tests/measure/doubling_dag.h"

namespace tilesearch::search {
namespace {

using ::testing::AnyOf;
using ::tilesearch::testing::IsOk;

std::vector<measure::BuildInput> Inputs(const Target& gpu, int good) {
  const ir::ComputeDAG dag = measure::testing_util::Doubling();
  absl::StatusOr<schedule::State> state = schedule::NaiveGpuSchedule(dag, gpu);
  CHECK(state.ok()) << state.status();
  std::vector<measure::BuildInput> inputs;
  for (int i = 0; i < good; ++i) {
    inputs.push_back(measure::BuildInput::FromLowering(schedule::Lower(dag, *state, gpu), 0.5));
    if (i == 0) {
      inputs.push_back(
          measure::BuildInput::FromLowering(absl::InvalidArgumentError("stale region"), 1));
    }
  }
  return inputs;
}

TEST(StreamingBuildTest, CandidatesReadInOrderAreTheSynchronousBuildsResults) {
  const Target gpu = Target::H200();
  const measure::Builder builder(gpu);
  const std::vector<measure::BuildInput> inputs = Inputs(gpu, 4);
  const std::vector<measure::BuildResult> reference = builder.Build(inputs);
  StreamingBuild stream(builder, inputs);
  ASSERT_EQ(stream.size(), inputs.size());
  size_t read = 0;
  while (read < stream.size()) {
    const size_t n = stream.WaitReady(read, 2);
    ASSERT_GE(n, 1u);
    ASSERT_LE(n, 2u);
    for (size_t i = read; i < read + n; ++i) {
      SCOPED_TRACE(i);
      const measure::BuildResult got = stream.Get(i);
      EXPECT_EQ(got.build_status.code(), reference[i].build_status.code());
      EXPECT_EQ(got.build_status.message(), reference[i].build_status.message());
      ASSERT_EQ(got.gpu_module == nullptr, reference[i].gpu_module == nullptr);
      if (got.gpu_module != nullptr) {
        EXPECT_EQ(got.gpu_module->ptx, reference[i].gpu_module->ptx);
      }
    }
    read += n;
  }
  EXPECT_EQ(stream.WaitReady(stream.size()), 0u);
  EXPECT_EQ(stream.Get(1).build_status.message(), "invalid_schedule: stale region");
  stream.WaitDone();
  EXPECT_GT(stream.wall_s(), 0);
}

TEST(StreamingBuildTest, ACancelledBuildEndsEveryCandidateBuiltOrCancelled) {
  const Target gpu = Target::H200();
  const measure::Builder builder(gpu);
  StreamingBuild stream(builder, Inputs(gpu, 8));
  stream.Cancel();
  stream.WaitDone();
  ASSERT_EQ(stream.WaitReady(0), stream.size());  // every candidate has its final result
  for (size_t i = 0; i < stream.size(); ++i) {
    SCOPED_TRACE(i);
    const measure::BuildResult r = stream.Get(i);
    if (i == 1) {
      EXPECT_EQ(r.build_status.code(), absl::StatusCode::kFailedPrecondition);
      continue;
    }
    EXPECT_THAT(r.build_status.code(), AnyOf(absl::StatusCode::kOk, absl::StatusCode::kCancelled));
    EXPECT_EQ(r.gpu_module != nullptr, r.build_status.ok());
  }
}

}  // namespace
}  // namespace tilesearch::search
