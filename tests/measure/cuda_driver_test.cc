// The CUDA driver and runner where no driver (or device) is needed: a missing library or entry
// point gives kFailedPrecondition "no CUDA driver found: ...", the runner's factory says so
// without initializing CUDA here, failed builds map to their error kinds without running, and a
// worker that finds no driver reports kNoDevice.
#include "runtime/cuda_driver.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/cuda_runner.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "runtime/cuda_device.h"
#include "tests/measure/cuda_test_util.h"

namespace tilesearch::measure {
using runtime::CudaDriver;
using runtime::DeviceInfo;
using runtime::ProbeCudaDevice;
using runtime::TargetFromDevice;
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::tilesearch::testing::StatusIs;

// Sets TILESEARCH_CUDA_DRIVER for the scope of one test.
class ScopedDriverPath {
 public:
  explicit ScopedDriverPath(const char* path) { setenv("TILESEARCH_CUDA_DRIVER", path, 1); }
  ~ScopedDriverPath() { unsetenv("TILESEARCH_CUDA_DRIVER"); }
};

TEST(CudaDriverTest, MissingLibraryIsFailedPreconditionNamingIt) {
  EXPECT_THAT(CudaDriver::LoadFrom("/nonexistent/libcuda.so.1"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(StartsWith("no CUDA driver found: "),
                             HasSubstr("/nonexistent/libcuda.so.1"))));
}

TEST(CudaDriverTest, EnvironmentVariableOverridesTheLibraryPath) {
  {
    ScopedDriverPath env("/nonexistent/override.so");
    EXPECT_EQ(CudaDriver::DefaultLibraryPath(), "/nonexistent/override.so");
    EXPECT_THAT(CudaDriver::Load(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                             HasSubstr("/nonexistent/override.so")));
  }
  EXPECT_EQ(CudaDriver::DefaultLibraryPath(), "libcuda.so.1");
}

TEST(CudaDriverTest, LibraryWithoutTheEntryPointsIsRejected) {
  // The math library loads but has no cuInit.
  EXPECT_THAT(CudaDriver::LoadFrom("libm.so.6"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(StartsWith("no CUDA driver found: "), HasSubstr("cuInit"))));
}

TEST(CudaDriverTest, DefaultLoadSaysWhyWhereThereIsNoDriver) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (driver.ok()) GTEST_SKIP() << "a CUDA driver is present at " << (*driver)->path();
  EXPECT_THAT(driver, StatusIs(absl::StatusCode::kFailedPrecondition,
                               StartsWith("no CUDA driver found: ")));
}

TEST(CudaDriverTest, ProbeWithoutDriverFailsInTheChild) {
  ScopedDriverPath env("/nonexistent/libcuda.so.1");
  EXPECT_THAT(ProbeCudaDevice(0), StatusIs(absl::StatusCode::kFailedPrecondition,
                                           StartsWith("no CUDA driver found: ")));
}

TEST(CudaRunnerFactoryTest, NoDriverIsFailedPrecondition) {
  ScopedDriverPath env("/nonexistent/libcuda.so.1");
  EXPECT_THAT(
      CreateCudaRunner(Target::H200(), MeasureOptions{}),
      StatusIs(absl::StatusCode::kFailedPrecondition, StartsWith("no CUDA driver found: ")));
}

TEST(CudaRunnerFactoryTest, DefaultDriverAbsentIsFailedPrecondition) {
  if (CudaDriver::Load().ok()) GTEST_SKIP() << "a CUDA driver is present";
  EXPECT_THAT(CreateCudaRunner(Target::H200(), MeasureOptions{}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no CUDA driver found")));
}

TEST(CudaRunnerFactoryTest, CpuTargetIsInvalidArgument) {
  EXPECT_THAT(CreateCudaRunner(Target::HostCpu(), MeasureOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cuda target")));
}

TEST(CudaRunnerFactoryTest, InvalidOptionsAreInvalidArgument) {
  MeasureOptions options;
  options.timing.min_runs = 0;
  EXPECT_THAT(CreateCudaRunner(Target::H200(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_runs")));
}

TEST(CudaRunnerTest, FailedBuildsMapToTheirKindsWithoutRunning) {
  std::unique_ptr<Runner> m =
      cuda_internal::NewCudaRunnerWithoutProbe(Target::H200(), MeasureOptions{});
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(8, 16);
  ASSERT_TRUE(dag.ok()) << dag.status();
  std::vector<BuildResult> candidates(4);
  candidates[0].build_status = absl::DeadlineExceededError("compile_timeout: over 10000 ms");
  candidates[1].build_status =
      absl::FailedPreconditionError("invalid_schedule: 2048 threads per block exceed 1024");
  candidates[2].build_status = absl::InternalError("ptxas: error");
  candidates[2].compile_ms = 12.5;
  candidates[3].build_status = absl::InvalidArgumentError("split factor 7 does not divide 60");
  std::vector<MeasureResult> r = m->Run(*dag, candidates);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].error, MeasureError::kCompileTimeout);
  EXPECT_EQ(r[1].error, MeasureError::kInvalidSchedule);
  EXPECT_EQ(r[2].error, MeasureError::kCompileError);
  EXPECT_EQ(r[2].message, "ptxas: error");
  EXPECT_EQ(r[2].compile_ms, 12.5);
  EXPECT_EQ(r[3].error, MeasureError::kCompileError);
  for (const MeasureResult& x : r) EXPECT_TRUE(x.costs_s.empty());
}

TEST(CudaRunnerTest, CandidateWithOtherParametersIsRejectedBeforeRunning) {
  std::unique_ptr<Runner> m =
      cuda_internal::NewCudaRunnerWithoutProbe(Target::H200(), MeasureOptions{});
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(8, 16);
  ASSERT_TRUE(dag.ok()) << dag.status();
  auto module = std::make_shared<codegen::GpuModule>();
  module->args = {codegen::KernelArg{{"A", ir::ScalarType::kFloat32, {8, 16}},
                                     codegen::KernelArg::Kind::kInput},
                  codegen::KernelArg{{"C", ir::ScalarType::kFloat32, {8, 16}},
                                     codegen::KernelArg::Kind::kOutput}};
  BuildResult c;
  c.gpu_module = module;
  std::vector<MeasureResult> r = m->Run(*dag, {c});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].error, MeasureError::kUnknown);
  EXPECT_THAT(r[0].message, HasSubstr("differs from the task's 'B'"));
}

TEST(CudaRunnerTest, WorkerWithoutDriverReportsNoDevice) {
  ScopedDriverPath env("/nonexistent/libcuda.so.1");
  std::unique_ptr<Runner> m =
      cuda_internal::NewCudaRunnerWithoutProbe(Target::H200(), MeasureOptions{});
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(8, 16);
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<BuildResult> c = testing_util::AddCandidate(*dag, /*scale=*/1.0);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<MeasureResult> r = m->Run(*dag, {*c, *c});
  ASSERT_EQ(r.size(), 2u);
  for (const MeasureResult& x : r) {
    EXPECT_EQ(x.error, MeasureError::kNoDevice) << x.message;
    EXPECT_THAT(x.message, StartsWith("no CUDA driver found: "));
  }
}

TEST(CudaRunnerTest, SetupFailureMessagesMapToKinds) {
  using cuda_internal::SetupFailureError;
  EXPECT_EQ(SetupFailureError("FAILED_PRECONDITION: no CUDA driver found: x"),
            MeasureError::kNoDevice);
  EXPECT_EQ(SetupFailureError("no CUDA device found: cuInit: CUDA_ERROR_NO_DEVICE"),
            MeasureError::kNoDevice);
  EXPECT_EQ(SetupFailureError("INTERNAL: reference check failed (trial 0, uniform): ..."),
            MeasureError::kUnknown);
  EXPECT_EQ(SetupFailureError("setup timed out after 120000 ms"), MeasureError::kRuntimeError);
  EXPECT_EQ(SetupFailureError("setup failed: FAILED_PRECONDITION: no CUDA device found: x"),
            MeasureError::kNoDevice);
  EXPECT_EQ(cuda_internal::StripStatusCodeName("INTERNAL: a: b"), "a: b");
  EXPECT_EQ(cuda_internal::StripStatusCodeName("setup failed: INTERNAL: a"), "a");
  EXPECT_EQ(cuda_internal::StripStatusCodeName("no code: here"), "no code: here");
}

TEST(DeviceInfoTest, JsonRoundTripAndTarget) {
  DeviceInfo d;
  d.name = "Test GPU";
  d.compute_major = 9;
  d.compute_minor = 0;
  d.sm_count = 132;
  d.max_threads_per_block = 1024;
  d.shared_per_block = 49152;
  d.shared_per_block_optin = 232448;
  d.regs_per_block = 65536;
  d.l2_bytes = 52428800;
  d.warp_size = 32;
  d.max_grid_dims = {2147483647, 65535, 65535};
  absl::StatusOr<DeviceInfo> back = DeviceInfo::FromJson(d.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, "Test GPU");
  EXPECT_EQ(back->max_grid_dims[0], 2147483647);
  EXPECT_EQ(back->l2_bytes, 52428800);
  Target t = TargetFromDevice(d);
  EXPECT_EQ(t.kind, TargetKind::kCuda);
  EXPECT_EQ(t.arch, "sm_90");
  EXPECT_EQ(t.sm_count, 132);
  EXPECT_EQ(t.l2_bytes, 52428800);
  EXPECT_EQ(t.max_shared_memory_optin, 232448);
  nlohmann::json j = d.ToJson();
  j.erase("l2_bytes");
  EXPECT_THAT(DeviceInfo::FromJson(j),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("l2_bytes")));
}

}  // namespace
}  // namespace tilesearch::measure
