// MeasureOptions::device_lock_path: a measurer with a lock file waits while another holder has
// the file locked (as a second tuning job sharing the GPU would), then measures; a lock file that
// cannot be opened is an error naming it.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/lower_naive.h"
#include "ir/tensor.h"
#include "runtime/measure.h"
#include "schedule/target.h"

namespace tilesearch::runtime {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

ir::ComputeDAG Doubling() {
  absl::StatusOr<ir::Tensor> x = ir::Placeholder("X", {256});
  EXPECT_THAT(x, IsOk());
  absl::StatusOr<ir::Tensor> y = ir::Compute(
      "Y", {256}, [&](const std::vector<ir::Expr>& ax) { return (*x)(ax[0]) * 2.0; });
  EXPECT_THAT(y, IsOk());
  absl::StatusOr<ir::ComputeDAG> dag = ir::ComputeDAG::Create({*y});
  EXPECT_THAT(dag, IsOk());
  return *std::move(dag);
}

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

TEST(DeviceLockTest, MeasureWaitsForTheLockHolderThenMeasures) {
  const std::string lock = ::testing::TempDir() + "/device_lock_test.lock";
  const int holder = open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(flock(holder, LOCK_EX), 0);  // another job holds the device

  ir::ComputeDAG dag = Doubling();
  absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(dag);
  ASSERT_THAT(naive, IsOk());
  absl::StatusOr<std::unique_ptr<Measurer>> m =
      CreateMeasurer(schedule::Target::HostCpu(), Options(lock));
  ASSERT_THAT(m, IsOk());
  MeasureCandidate c;
  c.nest = std::make_shared<const ir::LoopNest>(*naive);

  std::atomic<bool> done{false};
  std::vector<MeasureResult> results;
  std::thread measuring([&] {
    results = (*m)->Measure(dag, {c});
    done = true;
  });
  // A doubling of 256 floats measures in milliseconds; while the lock is held it must not finish.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(done.load());
  ASSERT_EQ(flock(holder, LOCK_UN), 0);
  measuring.join();
  close(holder);
  EXPECT_TRUE(done.load());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].error, MeasureError::kNone) << results[0].message;
  EXPECT_EQ(results[0].check.mismatches, 0);
}

TEST(DeviceLockTest, UnopenableLockFileIsAnErrorNamingIt) {
  EXPECT_THAT(CreateMeasurer(schedule::Target::HostCpu(), Options("/nonexistent-dir/x.lock")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot open device lock '/nonexistent-dir/x.lock'")));
}

}  // namespace
}  // namespace tilesearch::runtime
