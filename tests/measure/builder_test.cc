// The Builder (measure/builder.h): a failed lowering becomes an invalid_schedule build error, cpu
// candidates pass through as their shared nest, GPU candidates get the PTX that codegen compiles
// for the same kernel, in the worker pool (Build) and in process (BuildInProcess) alike.
#include "measure/builder.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status_matchers.h"
#include "base/target.h"
#include "codegen/codegen.h"
#include "codegen/ptxas.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"
#include "schedule/lower.h"
#include "schedule/naive_gpu.h"
#include "schedule/state.h"
#include "tests/measure/doubling_dag.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;

using testing_util::Doubling;

TEST(BuilderTest, AFailedLoweringIsAnInvalidScheduleBuildErrorWithItsLoweringTime) {
  BuildInput plain = BuildInput::FromLowering(absl::InvalidArgumentError("stale region"), 1.5);
  BuildInput prefixed = BuildInput::FromLowering(
      absl::FailedPreconditionError("invalid_schedule: 2048 threads per block"), 0.25);
  const std::vector<BuildResult> built = Builder(Target::HostCpu()).Build({plain, prefixed});
  ASSERT_EQ(built.size(), 2u);
  EXPECT_EQ(built[0].build_status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(built[0].build_status.message(), "invalid_schedule: stale region");
  EXPECT_DOUBLE_EQ(built[0].compile_ms, 1.5);
  EXPECT_EQ(built[0].nest, nullptr);
  EXPECT_EQ(built[1].build_status.message(), "invalid_schedule: 2048 threads per block");
  EXPECT_DOUBLE_EQ(built[1].compile_ms, 0.25);
}

TEST(BuilderTest, CpuCandidatesPassThroughAsTheirSharedNest) {
  const ir::ComputeDAG dag = Doubling();
  const schedule::State state = schedule::State::Initial(dag);
  BuildInput input = BuildInput::FromLowering(schedule::Lower(dag, state, Target::HostCpu()), 2.0);
  ASSERT_NE(input.lowered, nullptr);
  const std::vector<BuildResult> built = Builder(Target::HostCpu()).Build({input});
  ASSERT_EQ(built.size(), 1u);
  EXPECT_THAT(built[0].build_status, IsOk());
  EXPECT_EQ(built[0].nest.get(), &input.lowered->nest);  // not copied
  EXPECT_EQ(built[0].gpu_module, nullptr);
  EXPECT_TRUE(built[0].launches.empty());
  EXPECT_DOUBLE_EQ(built[0].compile_ms, 2.0);
}

TEST(BuilderTest, GpuCandidatesGetCodegensPtxInThePoolAndInProcess) {
  const ir::ComputeDAG dag = Doubling();
  const Target gpu = Target::H200();
  absl::StatusOr<schedule::State> state = schedule::NaiveGpuSchedule(dag, gpu);
  ASSERT_THAT(state, IsOk());
  absl::StatusOr<schedule::LoweredKernel> lowered = schedule::Lower(dag, *state, gpu);
  ASSERT_THAT(lowered, IsOk());
  codegen::GpuCompileOptions compile;
  compile.arch = gpu.arch;
  absl::StatusOr<codegen::GpuModule> direct =
      codegen::CompileToPtx(lowered->nest, lowered->launches, compile);
  ASSERT_THAT(direct, IsOk());

  const BuildInput input = BuildInput::FromLowering(*lowered, 0.5);
  const Builder builder(gpu);
  const std::vector<BuildResult> pooled = builder.Build({input, input});
  ASSERT_EQ(pooled.size(), 2u);
  const BuildResult in_process = builder.BuildInProcess(input);
  for (const BuildResult* r : {&pooled[0], &pooled[1], &in_process}) {
    ASSERT_THAT(r->build_status, IsOk());
    ASSERT_NE(r->gpu_module, nullptr);
    EXPECT_EQ(r->gpu_module->ptx, direct->ptx);
    EXPECT_THAT(r->gpu_module->ptx, HasSubstr(".target sm_90"));
    EXPECT_EQ(r->gpu_module->kernels.size(), lowered->launches.size());
    EXPECT_EQ(r->launches.size(), lowered->launches.size());
    EXPECT_EQ(r->launches[0].grid, lowered->launches[0].grid);
    EXPECT_EQ(r->launches[0].block, lowered->launches[0].block);
    EXPECT_GE(r->compile_ms, 0.5 + r->gpu_module->compile_ms - 1e-9);
  }
}

// Build's callback: every input exactly once, with the result Build then returns (failed
// lowerings, cpu pass-throughs and GPU compilations alike).
TEST(BuilderTest, EachCandidateIsReportedOnceWithItsFinalResult) {
  const ir::ComputeDAG dag = Doubling();
  const Target gpu = Target::H200();
  absl::StatusOr<schedule::State> state = schedule::NaiveGpuSchedule(dag, gpu);
  ASSERT_THAT(state, IsOk());
  const BuildInput good = BuildInput::FromLowering(schedule::Lower(dag, *state, gpu), 0.5);
  const BuildInput bad = BuildInput::FromLowering(absl::InvalidArgumentError("stale region"), 1);
  const Builder builder(gpu);
  std::map<size_t, int> calls;
  std::map<size_t, std::string> ptx;
  std::map<size_t, std::string> error;
  const std::vector<BuildResult> built =
      builder.Build({good, bad, good}, [&](size_t i, const BuildResult& r) {
        ++calls[i];
        if (r.gpu_module != nullptr) ptx[i] = r.gpu_module->ptx;
        error[i] = std::string(r.build_status.message());
      });
  ASSERT_EQ(built.size(), 3u);
  ASSERT_EQ(calls.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(calls[i], 1);
    EXPECT_EQ(error[i], std::string(built[i].build_status.message()));
    if (i == 1) {
      EXPECT_EQ(error[i], "invalid_schedule: stale region");
      continue;
    }
    ASSERT_NE(built[i].gpu_module, nullptr);
    EXPECT_EQ(ptx[i], built[i].gpu_module->ptx);
    EXPECT_THAT(ptx[i], HasSubstr(".target sm_90"));
  }
}

TEST(BuilderTest, GpuCandidatesAreAssembledIntoCubinsWhenPtxasIsFound) {
  if (!codegen::FindPtxas().has_value()) GTEST_SKIP() << "no ptxas: candidates stay PTX only";
  const ir::ComputeDAG dag = Doubling();
  const Target gpu = Target::H200();
  absl::StatusOr<schedule::State> state = schedule::NaiveGpuSchedule(dag, gpu);
  ASSERT_THAT(state, IsOk());
  absl::StatusOr<schedule::LoweredKernel> lowered = schedule::Lower(dag, *state, gpu);
  ASSERT_THAT(lowered, IsOk());
  const BuildInput input = BuildInput::FromLowering(*lowered, 0);
  const std::vector<BuildResult> pooled = Builder(gpu).Build({input});
  ASSERT_EQ(pooled.size(), 1u);
  ASSERT_THAT(pooled[0].build_status, IsOk());
  const codegen::GpuModule& m = *pooled[0].gpu_module;
  EXPECT_EQ(m.assemble_error, "");
  ASSERT_GE(m.cubin.size(), 4u);
  EXPECT_EQ(m.cubin.substr(0, 4), std::string("\x7f"
                                              "ELF"));  // through the worker's pipe
  EXPECT_GT(m.assemble_ms, 0);
  BuilderOptions off;
  off.assemble_cubin = false;
  EXPECT_EQ(Builder(gpu, off).Build({input})[0].gpu_module->cubin, "");
  // A ptxas that cannot run: the PTX stays loadable, the error is kept.
  BuilderOptions broken;
  broken.gpu.ptxas = "/nonexistent/ptxas";
  const BuildResult r = Builder(gpu, broken).BuildInProcess(input);
  ASSERT_THAT(r.build_status, IsOk());
  EXPECT_EQ(r.gpu_module->cubin, "");
  EXPECT_THAT(r.gpu_module->assemble_error, HasSubstr("/nonexistent/ptxas"));
  EXPECT_THAT(r.gpu_module->ptx, HasSubstr(".target sm_90"));
}

TEST(BuilderTest, AnUnknownArchIsTheCandidatesCompileError) {
  const ir::ComputeDAG dag = Doubling();
  Target gpu = Target::H200();
  absl::StatusOr<schedule::State> state = schedule::NaiveGpuSchedule(dag, gpu);
  ASSERT_THAT(state, IsOk());
  BuildInput input = BuildInput::FromLowering(schedule::Lower(dag, *state, gpu), 0);
  gpu.arch = "banana";
  const Builder builder(gpu);
  for (const BuildResult& r : {builder.BuildInProcess(input), builder.Build({input})[0]}) {
    EXPECT_EQ(r.build_status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.build_status.message()), HasSubstr("unknown CUDA arch 'banana'"));
    EXPECT_EQ(r.gpu_module, nullptr);
    EXPECT_NE(r.nest, nullptr);
  }
}

}  // namespace
}  // namespace tilesearch::measure
