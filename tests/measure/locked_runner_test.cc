// MeasureOptions::device_lock_path (runtime/device_lock.h underneath): a runner waits for the
// lock's holder, then measures; a lock file that cannot be opened is an error naming it.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status_matchers.h"
#include "base/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/lower_naive.h"
#include "ir/tensor.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "runtime/device_lock.h"
#include "tests/measure/doubling_dag.h"

namespace tilesearch::measure {
namespace {

using runtime::DeviceLock;
using runtime::DeviceLockState;
using runtime::ReadDeviceLockState;
using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

// Bound on waits that succeed in milliseconds: a broken lock fails instead of hanging. Wall time,
// and generous: on a loaded 2-core CI machine the 100 hand-offs of the counter test took over 4 s.
constexpr std::chrono::seconds kDeadline{30};

// A fresh path in the test's temporary directory (removed first: earlier runs left it).
std::string TempPath(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + "/locked_runner_test_" + std::to_string(::getpid()) + "_" + name;
  std::remove(path.c_str());
  return path;
}

// Whether the lock file at `path` shows `n` outstanding tickets within kDeadline.
bool WaitForTickets(const std::string& path, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() <= deadline) {
    absl::StatusOr<DeviceLockState> s = ReadDeviceLockState(path);
    if (s.ok() && s->tickets.size() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

using testing_util::Doubling;

MeasureOptions Options(const std::string& lock) {
  MeasureOptions o;
  o.timing.warmup_runs = 0;
  o.timing.min_runs = 1;
  o.timing.max_runs = 1;
  o.timing.min_total_ms = 0;
  o.host_threads = 1;
  o.device_lock_path = lock;
  return o;
}

TEST(LockedRunnerTest, MeasureWaitsForTheLockHolderThenMeasures) {
  const std::string lock = TempPath("measure.lock");
  absl::StatusOr<std::unique_ptr<DeviceLock>> holder = DeviceLock::Open(lock);
  ASSERT_THAT(holder, IsOk());
  ASSERT_THAT((*holder)->Acquire(), IsOk());  // another job holds the device

  ir::ComputeDAG dag = Doubling();
  absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(dag);
  ASSERT_THAT(naive, IsOk());
  absl::StatusOr<std::unique_ptr<Runner>> m = CreateRunner(Target::HostCpu(), Options(lock));
  ASSERT_THAT(m, IsOk());
  BuildResult c;
  c.nest = std::make_shared<const ir::LoopNest>(*naive);

  std::atomic<bool> done{false};
  std::vector<MeasureResult> results;
  std::thread measuring([&] {
    results = (*m)->Run(dag, {c});
    done = true;
  });
  const bool queued = WaitForTickets(lock, 2);  // the runner took a ticket behind the holder
  EXPECT_TRUE(queued);
  EXPECT_FALSE(done.load());
  ASSERT_THAT((*holder)->Release(), IsOk());
  measuring.join();
  EXPECT_TRUE(done.load());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].error, MeasureError::kNone) << results[0].message;
  EXPECT_EQ(results[0].check.mismatches, 0);
  absl::StatusOr<DeviceLockState> state = ReadDeviceLockState(lock);
  ASSERT_THAT(state, IsOk());
  EXPECT_TRUE(state->tickets.empty());  // the runner released its turn
}

TEST(LockedRunnerTest, UnopenableLockFileIsAnErrorNamingIt) {
  EXPECT_THAT(CreateRunner(Target::HostCpu(), Options("/nonexistent-dir/x.lock")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot open device lock '/nonexistent-dir/x.lock'")));
}

}  // namespace
}  // namespace tilesearch::measure
