// Helpers of the tests that run on a real GPU: the device probe and the skip where it finds none,
// running a test body in a forked child (so the test process never initializes CUDA), and a
// context on device 0.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "runtime/cuda_device.h"
#include "runtime/cuda_driver.h"

namespace tilesearch::measure::testing_util {
using runtime::CudaContext;
using runtime::CudaDriver;
using runtime::DeviceInfo;
using runtime::ProbeCudaDevice;

/// ProbeCudaDevice(0), probed once per process.
inline const absl::StatusOr<DeviceInfo>& ProbedDevice() {
  static const auto* probe = new absl::StatusOr<DeviceInfo>(ProbeCudaDevice(0));
  return *probe;
}

/// Skips the test ("no CUDA driver: ...") where the probe found no device.
#define TS_SKIP_WITHOUT_DEVICE()                                                            \
  if (!::tilesearch::measure::testing_util::ProbedDevice().ok()) {                          \
    GTEST_SKIP() << "no CUDA driver: "                                                      \
                 << ::tilesearch::measure::testing_util::ProbedDevice().status().message(); \
  }

/// Runs `body` in a forked child (which may initialize CUDA); the child's failures are printed
/// there as they happen and reported back through its exit status.
inline void RunForked(const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    body();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the device test's child failed (its failures are printed above); wait status " << status;
}

/// A context on device 0; null (with a failed expectation) where the driver or context fails.
inline std::unique_ptr<CudaContext> MakeContext() {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  EXPECT_TRUE(driver.ok()) << driver.status();
  if (!driver.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<CudaContext>> ctx = CudaContext::Create(**driver, 0);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return ctx.ok() ? *std::move(ctx) : nullptr;
}

}  // namespace tilesearch::measure::testing_util
