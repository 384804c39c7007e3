// Forked workers: items that succeed, segfault, abort, hang, exit, throw or ask for a restart, and
// setups that fail, crash or hang; every later item still runs and returns its own payload.
#include "measure/worker_batch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/search/scratch_dir.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using Kind = WorkerItemOutcome::Kind;

// A counter in memory shared with the workers (MAP_SHARED survives fork).
class SharedCounter {
 public:
  SharedCounter() {
    void* p = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    value_ = new (p) std::atomic<int>(0);
  }
  ~SharedCounter() { munmap(value_, sizeof(std::atomic<int>)); }
  int Increment() { return value_->fetch_add(1) + 1; }
  int Get() const { return value_->load(); }

 private:
  std::atomic<int>* value_;
};

TEST(WorkerBatchTest, FaultingHangingAndExitingItemsCostOnlyThemselves) {
  SharedCounter setups;
  const std::string big(1 << 20, 'x');
  auto item = [&](int i) -> std::string {
    switch (i) {
      case 1:
        std::raise(SIGSEGV);
        break;
      case 3:
        std::abort();
      case 4:
        for (;;) pause();
      case 5:
        _exit(3);
      case 6:
      case 8:
        return std::to_string(getpid());
      case 7:
        RequestWorkerRestart();
        return std::to_string(getpid());
      case 9:
        _exit(0);
      case 10:
        throw std::runtime_error("boom");
      case 11:
        return big;
      default:
        break;
    }
    return "item" + std::to_string(i);
  };
  WorkerOptions options;
  options.item_timeout_ms = 300;
  options.setup_timeout_ms = 5000;
  std::vector<std::pair<int, WorkerItemOutcome>> reported;
  std::vector<WorkerItemOutcome> out = RunBatchInWorkers(
      13,
      [&] {
        setups.Increment();
        return absl::OkStatus();
      },
      item, options, [&](int i, const WorkerItemOutcome& o) { reported.emplace_back(i, o); });
  ASSERT_EQ(out.size(), 13u);
  // Every outcome was reported once, in order, as returned.
  ASSERT_EQ(reported.size(), 13u);
  for (int i = 0; i < 13; ++i) {
    EXPECT_EQ(reported[i].first, i);
    EXPECT_EQ(reported[i].second.kind, out[i].kind) << i;
    EXPECT_EQ(reported[i].second.payload, out[i].payload) << i;
    EXPECT_EQ(reported[i].second.message, out[i].message) << i;
  }
  EXPECT_EQ(out[0].kind, Kind::kDone);
  EXPECT_EQ(out[0].payload, "item0");
  EXPECT_EQ(out[1].kind, Kind::kCrashed);
  EXPECT_EQ(out[1].message, "killed by signal 11 (Segmentation fault)");
  EXPECT_EQ(out[2].kind, Kind::kDone);
  EXPECT_EQ(out[2].payload, "item2");
  EXPECT_EQ(out[3].kind, Kind::kCrashed);
  EXPECT_EQ(out[3].message, "killed by signal 6 (Aborted)");
  EXPECT_EQ(out[4].kind, Kind::kTimedOut);
  EXPECT_THAT(out[4].message, HasSubstr("timed out after 300 ms"));
  EXPECT_GE(out[4].wall_ms, 300);
  EXPECT_EQ(out[5].kind, Kind::kCrashed);
  EXPECT_EQ(out[5].message, "exited with status 3");
  ASSERT_EQ(out[6].kind, Kind::kDone);
  ASSERT_EQ(out[7].kind, Kind::kDone);
  ASSERT_EQ(out[8].kind, Kind::kDone);
  EXPECT_EQ(out[6].payload, out[7].payload);  // one worker ran 6 and 7
  EXPECT_NE(out[7].payload, out[8].payload);  // 7 asked for a restart
  EXPECT_NE(out[6].payload, std::to_string(getpid()));
  EXPECT_EQ(out[9].kind, Kind::kCrashed);
  EXPECT_EQ(out[9].message, "exited with status 0 before finishing item 9");
  EXPECT_EQ(out[10].kind, Kind::kCrashed);
  EXPECT_THAT(out[10].message, HasSubstr("threw: boom"));
  EXPECT_EQ(out[11].kind, Kind::kDone);
  EXPECT_EQ(out[11].payload, big);
  EXPECT_EQ(out[12].kind, Kind::kDone);
  EXPECT_EQ(out[12].payload, "item12");
  // Workers: [0, 1], [2, 3], [4], [5], [6, 7], [8, 9], [10], [11, 12].
  EXPECT_EQ(setups.Get(), 8);
}

// Outcomes reach the parent's callback while later items still run: each item waits for the
// marker file that the parent's callback writes for the item before it.
TEST(WorkerBatchTest, OutcomesAreReportedWhileLaterItemsRun) {
  const std::string dir = ::tilesearch::testing::ScratchPath("reported");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  auto marker = [&](int i) { return absl::StrCat(dir, "/", i); };
  auto item = [&](int i) -> std::string {
    if (i == 0) return "first";
    for (int tries = 0; tries < 2000; ++tries) {
      if (::access(marker(i - 1).c_str(), F_OK) == 0) return "saw the report of the one before";
      ::usleep(1000);
    }
    return "no report of the one before";
  };
  std::vector<int> order;
  const std::vector<WorkerItemOutcome> out = RunBatchInWorkers(
      4, [] { return absl::OkStatus(); }, item, WorkerOptions{},
      [&](int i, const WorkerItemOutcome&) {
        order.push_back(i);
        const int fd = ::open(marker(i).c_str(), O_CREAT | O_WRONLY, 0644);
        ASSERT_GE(fd, 0);
        ::close(fd);
      });
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(out[i].kind, Kind::kDone);
    EXPECT_EQ(out[i].payload, "saw the report of the one before") << i;
  }
}

TEST(WorkerBatchTest, CrashIsSeenWhileAGrandchildHoldsThePipe) {
  auto item = [](int i) -> std::string {
    if (i == 0) {
      const pid_t worker = getpid();
      if (fork() == 0) {
        // Dies with the worker (also if the worker died before the prctl).
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != worker) _exit(0);
        sleep(5);
        _exit(0);
      }
      std::raise(SIGSEGV);
    }
    return "after";
  };
  WorkerOptions options;
  options.item_timeout_ms = 3000;
  std::vector<WorkerItemOutcome> out = RunBatchInWorkers(2, nullptr, item, options);
  EXPECT_EQ(out[0].kind, Kind::kCrashed);
  EXPECT_THAT(out[0].message, HasSubstr("signal 11"));
  EXPECT_EQ(out[1].kind, Kind::kDone);
  EXPECT_EQ(out[1].payload, "after");
}

TEST(WorkerBatchTest, FailedSetupFailsEveryItemWithItsMessage) {
  int items_run = 0;
  std::vector<WorkerItemOutcome> out = RunBatchInWorkers(
      3, [] { return absl::UnavailableError("no cuda device"); },
      [&](int) {
        ++items_run;
        return std::string("ran");
      });
  ASSERT_EQ(out.size(), 3u);
  for (const WorkerItemOutcome& o : out) {
    EXPECT_EQ(o.kind, Kind::kSetupFailed);
    EXPECT_THAT(o.message, HasSubstr("no cuda device"));
  }
}

TEST(WorkerBatchTest, SetupRetriedUpToTheLimit) {
  SharedCounter setups;
  WorkerOptions options;
  options.max_setup_failures = 3;
  std::vector<WorkerItemOutcome> out = RunBatchInWorkers(
      4,
      [&] {
        return setups.Increment() <= 2 ? absl::InternalError("flaky setup") : absl::OkStatus();
      },
      [](int i) { return "ok" + std::to_string(i); }, options);
  EXPECT_EQ(out[0].kind, Kind::kSetupFailed);
  EXPECT_EQ(out[1].kind, Kind::kSetupFailed);
  EXPECT_THAT(out[1].message, HasSubstr("flaky setup"));
  EXPECT_EQ(out[2].kind, Kind::kDone);
  EXPECT_EQ(out[2].payload, "ok2");
  EXPECT_EQ(out[3].payload, "ok3");
  EXPECT_EQ(setups.Get(), 3);
}

TEST(WorkerBatchTest, SetupThatCrashesOrHangsIsReported) {
  std::vector<WorkerItemOutcome> crashed = RunBatchInWorkers(
      2,
      []() -> absl::Status {
        std::raise(SIGSEGV);
        return absl::OkStatus();
      },
      [](int) { return std::string("ran"); });
  for (const WorkerItemOutcome& o : crashed) {
    EXPECT_EQ(o.kind, Kind::kSetupFailed);
    EXPECT_EQ(o.message, "worker killed by signal 11 (Segmentation fault) during setup");
  }
  WorkerOptions options;
  options.setup_timeout_ms = 300;
  std::vector<WorkerItemOutcome> hung = RunBatchInWorkers(
      2,
      []() -> absl::Status {
        for (;;) pause();
      },
      [](int) { return std::string("ran"); }, options);
  for (const WorkerItemOutcome& o : hung) {
    EXPECT_EQ(o.kind, Kind::kSetupFailed);
    EXPECT_THAT(o.message, HasSubstr("setup timed out after 300 ms"));
  }
}

TEST(WorkerBatchTest, ChildStateDoesNotLeakIntoTheParent) {
  int parent_value = 1;
  std::vector<WorkerItemOutcome> out = RunBatchInWorkers(2, nullptr, [&](int i) {
    parent_value += 10;  // the worker's copy
    return std::to_string(parent_value + i);
  });
  EXPECT_EQ(out[0].payload, "11");
  EXPECT_EQ(out[1].payload, "22");
  EXPECT_EQ(parent_value, 1);
  EXPECT_TRUE(RunBatchInWorkers(0, nullptr, [](int) { return std::string(); }).empty());
}

TEST(WorkerBatchTest, PhasesRestartTheClockAndNameTheTimeout) {
  auto item = [](int i) -> std::string {
    // Two phases of 900 ms each under a 1500 ms limit: each restarts the clock (600 ms of slack
    // per phase: a loaded machine may deschedule the parent for a while).
    BeginWorkerItemPhase("compile");
    usleep(900 * 1000);
    BeginWorkerItemPhase("run", i == 1 ? 450 : 0);
    usleep(900 * 1000);
    return "done" + std::to_string(i);
  };
  WorkerOptions options;
  options.item_timeout_ms = 1500;
  std::vector<WorkerItemOutcome> out = RunBatchInWorkers(3, nullptr, item, options);
  EXPECT_EQ(out[0].kind, Kind::kDone);
  EXPECT_EQ(out[0].payload, "done0");
  EXPECT_EQ(out[0].phase, "run");
  EXPECT_EQ(out[1].kind, Kind::kTimedOut);
  EXPECT_EQ(out[1].phase, "run");
  EXPECT_THAT(out[1].message, HasSubstr("timed out after 450 ms in phase 'run'"));
  EXPECT_EQ(out[2].kind, Kind::kDone);
  EXPECT_EQ(out[2].payload, "done2");
}

}  // namespace
}  // namespace tilesearch::measure
