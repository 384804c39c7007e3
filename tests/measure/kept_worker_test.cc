// The kept worker: one setup serves several Run calls (from different threads too), requests
// reach it as bytes, a crash or restart costs one setup, a worker killed while idle is replaced
// without losing the item, and destroying it leaves no process and no descriptor behind.
#include "measure/kept_worker.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

int OpenDescriptors() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n;
}

// Echoes "<pid>:<request>"; "crash" segfaults, "restart" asks for a new worker.
std::string EchoItem(const std::string& request) {
  if (request == "crash") std::raise(SIGSEGV);
  if (request == "restart") RequestWorkerRestart();
  return std::to_string(getpid()) + ":" + request;
}

std::string PidOf(const WorkerItemOutcome& o) { return o.payload.substr(0, o.payload.find(':')); }

TEST(KeptWorkerTest, OneSetupServesSeveralRunsAndRequestsArriveAsBytes) {
  SharedCounter setups;
  KeptWorker worker(
      [&] {
        setups.Increment();
        return absl::OkStatus();
      },
      EchoItem, WorkerOptions{});
  const std::string big(3 << 20, 'y');  // larger than a socket's buffer
  std::vector<WorkerItemOutcome> first = worker.Run({"a", big});
  EXPECT_EQ(worker.last_run_usage().setups, 1);
  EXPECT_GT(worker.last_run_usage().setup_ms, 0);
  std::vector<WorkerItemOutcome> second = worker.Run({"b"});
  EXPECT_EQ(worker.last_run_usage().setups, 0);
  EXPECT_EQ(worker.last_run_usage().setup_ms, 0);
  EXPECT_GT(worker.last_run_usage().item_ms, 0);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].kind, Kind::kDone);
  EXPECT_EQ(first[0].payload.substr(first[0].payload.find(':') + 1), "a");
  EXPECT_EQ(first[1].payload.substr(first[1].payload.find(':') + 1), big);
  EXPECT_EQ(second[0].payload.substr(second[0].payload.find(':') + 1), "b");
  EXPECT_EQ(PidOf(first[0]), PidOf(second[0]));
  EXPECT_NE(PidOf(first[0]), std::to_string(getpid()));
  EXPECT_EQ(setups.Get(), 1);
  EXPECT_EQ(worker.total_setups(), 1);
}

// PR_SET_PDEATHSIG follows the forking thread: a worker forked for a Run call made from a thread
// that has ended since must still serve the next call.
TEST(KeptWorkerTest, WorkerOutlivesTheThreadThatRanTheFirstCall) {
  KeptWorker worker([] { return absl::OkStatus(); }, EchoItem, WorkerOptions{});
  std::vector<WorkerItemOutcome> first, second;
  std::thread([&] { first = worker.Run({"a"}); }).join();
  usleep(100 * 1000);  // time for a death signal to arrive, were there one
  std::thread([&] { second = worker.Run({"b"}); }).join();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].kind, Kind::kDone);
  EXPECT_EQ(PidOf(first[0]), PidOf(second[0]));
  EXPECT_EQ(worker.total_setups(), 1);
}

TEST(KeptWorkerTest, CrashInALaterRunCostsOneSetupAndTheNextItemRuns) {
  SharedCounter setups;
  KeptWorker worker(
      [&] {
        setups.Increment();
        return absl::OkStatus();
      },
      EchoItem, WorkerOptions{});
  std::vector<WorkerItemOutcome> first = worker.Run({"a"});
  std::vector<WorkerItemOutcome> second = worker.Run({"b", "crash", "c", "restart", "d"});
  ASSERT_EQ(second.size(), 5u);
  EXPECT_EQ(second[0].kind, Kind::kDone);
  EXPECT_EQ(PidOf(first[0]), PidOf(second[0]));
  EXPECT_EQ(second[1].kind, Kind::kCrashed);
  EXPECT_EQ(second[1].message, "killed by signal 11 (Segmentation fault)");
  EXPECT_EQ(second[2].kind, Kind::kDone);
  EXPECT_NE(PidOf(second[2]), PidOf(second[0]));
  EXPECT_EQ(second[3].kind, Kind::kDone);
  EXPECT_EQ(PidOf(second[3]), PidOf(second[2]));
  EXPECT_EQ(second[4].kind, Kind::kDone);
  EXPECT_NE(PidOf(second[4]), PidOf(second[3]));  // "restart" asked for a new worker
  EXPECT_EQ(worker.last_run_usage().setups, 2);
  EXPECT_EQ(setups.Get(), 3);
}

TEST(KeptWorkerTest, WorkerKilledWhileIdleIsReplacedWithoutLosingTheItem) {
  KeptWorker worker([] { return absl::OkStatus(); }, EchoItem, WorkerOptions{});
  std::vector<WorkerItemOutcome> first = worker.Run({"a"});
  const pid_t pid = worker.worker_pid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  std::vector<WorkerItemOutcome> second = worker.Run({"b"});
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].kind, Kind::kDone);
  EXPECT_EQ(second[0].payload.substr(second[0].payload.find(':') + 1), "b");
  EXPECT_NE(PidOf(second[0]), std::to_string(pid));
  EXPECT_EQ(worker.total_setups(), 2);
}

TEST(KeptWorkerTest, DestructionReapsTheWorkerAndClosesItsSocket) {
  const int descriptors = OpenDescriptors();
  pid_t pid = -1;
  {
    KeptWorker worker([] { return absl::OkStatus(); }, EchoItem, WorkerOptions{});
    ASSERT_EQ(worker.Run({"a"})[0].kind, Kind::kDone);
    pid = worker.worker_pid();
    ASSERT_GT(pid, 0);
    EXPECT_EQ(kill(pid, 0), 0);  // alive between runs
  }
  // Reaped: neither a process nor a zombie child of ours is left.
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(OpenDescriptors(), descriptors);
}

TEST(KeptWorkerTest, FailedSetupIsRetriedOnTheNextRun) {
  SharedCounter setups;
  KeptWorker worker(
      [&] {
        return setups.Increment() == 1 ? absl::UnavailableError("no device yet") : absl::OkStatus();
      },
      EchoItem, WorkerOptions{});
  std::vector<WorkerItemOutcome> first = worker.Run({"a", "b"});
  ASSERT_EQ(first.size(), 2u);
  for (const WorkerItemOutcome& o : first) {
    EXPECT_EQ(o.kind, Kind::kSetupFailed);
    EXPECT_THAT(o.message, HasSubstr("no device yet"));
  }
  std::vector<WorkerItemOutcome> second = worker.Run({"c"});
  EXPECT_EQ(second[0].kind, Kind::kDone);
  EXPECT_EQ(setups.Get(), 2);
}

}  // namespace
}  // namespace tilesearch::measure
