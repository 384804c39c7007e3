// The device lock (runtime/device_lock.h) between real processes: mutual exclusion, first-come-
// first-served order (also against a holder that re-locks at once and against later waiters that
// poll faster), recovery from a holder or a waiter killed with SIGKILL, signals during the wait.
#include "runtime/device_lock.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::runtime {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

// Bound on waits that succeed in milliseconds: a broken lock fails instead of hanging. Wall time,
// and generous: on a loaded 2-core CI machine the 100 hand-offs of the counter test took over 4 s.
constexpr std::chrono::seconds kDeadline{30};

DeviceLock::Options Poll(double min_ms, double max_ms) {
  DeviceLock::Options o;
  o.min_poll_ms = min_ms;
  o.max_poll_ms = max_ms;
  return o;
}

// A fresh path in the test's temporary directory (removed first: earlier runs left it).
std::string TempPath(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + "/device_lock_test_" + std::to_string(::getpid()) + "_" + name;
  std::remove(path.c_str());
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void AppendFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app);
  out << text;
}

// Child processes that are killed and reaped when the test ends, whatever happened.
class Children {
 public:
  ~Children() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  // Runs `body` in a forked child that exits with its return value.
  pid_t Fork(const std::function<int()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(body());
    EXPECT_GT(pid, 0);
    pids_.push_back(pid);
    return pid;
  }
  // The child's exit code once it exits, within kDeadline; -1 if it does not, or is killed.
  int Wait(pid_t pid) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() <= deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        std::erase(pids_, pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return -1;
  }

 private:
  std::vector<pid_t> pids_;
};

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

// A child's body: take the lock, append `mark` to `order` while holding it, release. 0 = done.
int MarkInTurn(const std::string& lock, const std::string& order, const std::string& mark,
               DeviceLock::Options options) {
  absl::StatusOr<std::unique_ptr<DeviceLock>> l = DeviceLock::Open(lock, options);
  if (!l.ok() || !(*l)->Acquire().ok()) return 1;
  AppendFile(order, mark);
  return (*l)->Release().ok() ? 0 : 2;
}

TEST(DeviceLockTest, ProcessesIncrementingACounterFileNeverOverlap) {
  const std::string lock = TempPath("counter.lock");
  const std::string counter = TempPath("counter");
  { std::ofstream(counter) << 0; }
  constexpr int kProcesses = 4, kTurns = 25;
  Children children;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcesses; ++p) {
    pids.push_back(children.Fork([&] {
      absl::StatusOr<std::unique_ptr<DeviceLock>> l = DeviceLock::Open(lock, Poll(0.2, 2));
      if (!l.ok()) return 1;
      for (int i = 0; i < kTurns; ++i) {
        if (!(*l)->Acquire().ok()) return 2;
        // Read, pause, write: without mutual exclusion, concurrent turns lose increments.
        int value = -1;
        std::ifstream(counter) >> value;
        ::usleep(200);
        std::ofstream(counter) << value + 1;
        if (!(*l)->Release().ok()) return 3;
      }
      return 0;
    }));
  }
  for (pid_t pid : pids) EXPECT_EQ(children.Wait(pid), 0);
  int value = -1;
  std::ifstream(counter) >> value;
  EXPECT_EQ(value, kProcesses * kTurns);
  absl::StatusOr<DeviceLockState> state = ReadDeviceLockState(lock);
  ASSERT_THAT(state, IsOk());
  EXPECT_TRUE(state->tickets.empty());
  EXPECT_EQ(state->next, kProcesses * kTurns);
  EXPECT_EQ(state->serving, kProcesses * kTurns);
}

TEST(DeviceLockTest, WaitersAreServedInTheOrderTheyQueuedEvenIfLaterOnesPollFaster) {
  const std::string lock = TempPath("fifo.lock");
  const std::string order = TempPath("fifo.order");
  absl::StatusOr<std::unique_ptr<DeviceLock>> holder = DeviceLock::Open(lock);
  ASSERT_THAT(holder, IsOk());
  ASSERT_THAT((*holder)->Acquire(), IsOk());
  Children children;
  // A queues first but polls slowly; B and C queue later and poll 100 times as often.
  const pid_t a = children.Fork([&] { return MarkInTurn(lock, order, "A", Poll(20, 20)); });
  ASSERT_TRUE(WaitForTickets(lock, 2));
  const pid_t b = children.Fork([&] { return MarkInTurn(lock, order, "B", Poll(0.2, 0.2)); });
  ASSERT_TRUE(WaitForTickets(lock, 3));
  const pid_t c = children.Fork([&] { return MarkInTurn(lock, order, "C", Poll(0.2, 0.2)); });
  ASSERT_TRUE(WaitForTickets(lock, 4));
  EXPECT_EQ(ReadFile(order), "");  // nobody entered while the lock was held
  ASSERT_THAT((*holder)->Release(), IsOk());
  EXPECT_EQ(children.Wait(a), 0);
  EXPECT_EQ(children.Wait(b), 0);
  EXPECT_EQ(children.Wait(c), 0);
  EXPECT_EQ(ReadFile(order), "ABC");
}

TEST(DeviceLockTest, AHolderThatLocksAgainAtOnceQueuesBehindTheWaiter) {
  // The starvation seen with flock: a job releasing and re-locking in a loop kept the lock.
  const std::string lock = TempPath("relock.lock");
  const std::string order = TempPath("relock.order");
  absl::StatusOr<std::unique_ptr<DeviceLock>> holder = DeviceLock::Open(lock, Poll(0.2, 1));
  ASSERT_THAT(holder, IsOk());
  ASSERT_THAT((*holder)->Acquire(), IsOk());
  const int64_t first_ticket = (*holder)->ticket();
  Children children;
  const pid_t waiter = children.Fork([&] { return MarkInTurn(lock, order, "W", Poll(20, 20)); });
  ASSERT_TRUE(WaitForTickets(lock, 2));
  ASSERT_THAT((*holder)->Release(), IsOk());
  ASSERT_THAT((*holder)->Acquire(), IsOk());
  AppendFile(order, "H");
  EXPECT_EQ((*holder)->ticket(), first_ticket + 2);  // after the waiter's first_ticket + 1
  ASSERT_THAT((*holder)->Release(), IsOk());
  EXPECT_EQ(children.Wait(waiter), 0);
  EXPECT_EQ(ReadFile(order), "WH");
}

TEST(DeviceLockTest, AHolderKilledWhileHoldingDoesNotBlockTheNextWaiter) {
  const std::string lock = TempPath("dead_holder.lock");
  const std::string order = TempPath("dead_holder.order");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  Children children;
  const pid_t holder = children.Fork([&] {
    absl::StatusOr<std::unique_ptr<DeviceLock>> l = DeviceLock::Open(lock);
    if (!l.ok() || !(*l)->Acquire().ok()) return 1;
    if (::write(ready[1], "x", 1) != 1) return 2;
    for (;;) ::pause();  // holds until killed
  });
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  const pid_t waiter = children.Fork([&] { return MarkInTurn(lock, order, "W", Poll(1, 5)); });
  ASSERT_TRUE(WaitForTickets(lock, 2));
  EXPECT_EQ(ReadFile(order), "");
  // Not reaped: the waiter must also see through the zombie the killed holder now is.
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  EXPECT_EQ(children.Wait(waiter), 0);
  EXPECT_EQ(ReadFile(order), "W");
  absl::StatusOr<DeviceLockState> state = ReadDeviceLockState(lock);
  ASSERT_THAT(state, IsOk());
  EXPECT_TRUE(state->tickets.empty());
}

TEST(DeviceLockTest, AWaiterKilledWhileQueuedIsSkipped) {
  const std::string lock = TempPath("dead_waiter.lock");
  const std::string order = TempPath("dead_waiter.order");
  absl::StatusOr<std::unique_ptr<DeviceLock>> holder = DeviceLock::Open(lock);
  ASSERT_THAT(holder, IsOk());
  ASSERT_THAT((*holder)->Acquire(), IsOk());
  Children children;
  const pid_t doomed = children.Fork([&] { return MarkInTurn(lock, order, "D", Poll(1, 5)); });
  ASSERT_TRUE(WaitForTickets(lock, 2));
  const pid_t next = children.Fork([&] { return MarkInTurn(lock, order, "N", Poll(1, 5)); });
  ASSERT_TRUE(WaitForTickets(lock, 3));
  ASSERT_EQ(::kill(doomed, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(doomed, &status, 0), doomed);  // gone entirely: its pid no longer exists
  ASSERT_THAT((*holder)->Release(), IsOk());
  EXPECT_EQ(children.Wait(next), 0);
  EXPECT_EQ(ReadFile(order), "N");
}

volatile sig_atomic_t g_sigints = 0;
int g_sigint_ack_fd = -1;  // the write end of a pipe the handler acknowledges each signal on
void CountSigint(int) {
  g_sigints = g_sigints + 1;
  const char byte = 'i';
  [[maybe_unused]] const ssize_t n = ::write(g_sigint_ack_fd, &byte, 1);
}

TEST(DeviceLockTest, SignalsDuringTheWaitKeepTheTicket) {
  const std::string lock = TempPath("signal.lock");
  const std::string order = TempPath("signal.order");
  absl::StatusOr<std::unique_ptr<DeviceLock>> holder = DeviceLock::Open(lock);
  ASSERT_THAT(holder, IsOk());
  ASSERT_THAT((*holder)->Acquire(), IsOk());
  // Each signal is sent once the child has handled the last (two pending SIGINTs would merge).
  int ack[2];
  ASSERT_EQ(::pipe(ack), 0);
  Children children;
  const pid_t signalled = children.Fork([&] {
    g_sigint_ack_fd = ack[1];
    // As the tuner's first SIGINT: a handler without SA_RESTART, so sleeps end with EINTR.
    struct sigaction sa = {};
    sa.sa_handler = CountSigint;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    const int code = MarkInTurn(lock, order, "S", Poll(5, 5));
    return code != 0 ? code : g_sigints == 3 ? 0 : 10;
  });
  ASSERT_TRUE(WaitForTickets(lock, 2));
  absl::StatusOr<DeviceLockState> before = ReadDeviceLockState(lock);
  ASSERT_THAT(before, IsOk());
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(::kill(signalled, SIGINT), 0);
    struct pollfd pfd = {ack[0], POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, 30000), 1) << "signal " << i << " not handled within 30 s";
    char byte = 0;
    ASSERT_EQ(::read(ack[0], &byte, 1), 1);
  }
  ::close(ack[0]);
  ::close(ack[1]);
  const pid_t later = children.Fork([&] { return MarkInTurn(lock, order, "L", Poll(0.2, 0.2)); });
  ASSERT_TRUE(WaitForTickets(lock, 3));
  absl::StatusOr<DeviceLockState> after = ReadDeviceLockState(lock);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->tickets[1].ticket, before->tickets[1].ticket);  // same place in the queue
  EXPECT_EQ(after->tickets[1].pid, signalled);
  ASSERT_THAT((*holder)->Release(), IsOk());
  EXPECT_EQ(children.Wait(signalled), 0);
  EXPECT_EQ(children.Wait(later), 0);
  EXPECT_EQ(ReadFile(order), "SL");
}

TEST(DeviceLockTest, AFileWithOtherDataIsRefusedAndLeftAlone) {
  // A tuning log given as the lock by mistake must not be overwritten.
  const std::string lock = TempPath("other.lock");
  { std::ofstream(lock) << "{\"version\": 1}\n"; }
  absl::StatusOr<std::unique_ptr<DeviceLock>> l = DeviceLock::Open(lock);
  EXPECT_THAT(l, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds other data")));
  EXPECT_EQ(ReadFile(lock), "{\"version\": 1}\n");
}

TEST(DeviceLockTest, TheFileShowsTheHolderAndAnUnreadableFileStartsAfresh) {
  const std::string lock = TempPath("format.lock");
  { std::ofstream(lock) << "tilesearch device lock v1\nnot a state\n"; }
  absl::StatusOr<DeviceLockState> fresh = ReadDeviceLockState(lock);
  ASSERT_THAT(fresh, IsOk());
  EXPECT_EQ(fresh->next, 0);
  EXPECT_TRUE(fresh->tickets.empty());
  absl::StatusOr<std::unique_ptr<DeviceLock>> l = DeviceLock::Open(lock);
  ASSERT_THAT(l, IsOk());
  ASSERT_THAT((*l)->Acquire(), IsOk());
  EXPECT_TRUE((*l)->held());
  const std::string text = ReadFile(lock);
  EXPECT_THAT(text, ::testing::StartsWith("tilesearch device lock v1\n"));
  EXPECT_THAT(text, HasSubstr(" pid " + std::to_string(::getpid()) + " "));
  absl::StatusOr<DeviceLockState> state = ReadDeviceLockState(lock);
  ASSERT_THAT(state, IsOk());
  ASSERT_EQ(state->tickets.size(), 1u);
  EXPECT_EQ(state->tickets[0].pid, ::getpid());
  EXPECT_EQ(state->serving, (*l)->ticket());
  ASSERT_THAT((*l)->Release(), IsOk());
  EXPECT_FALSE((*l)->held());
}

TEST(DeviceLockTest, MissingFileReadsAsTheInitialState) {
  absl::StatusOr<DeviceLockState> s = ReadDeviceLockState(TempPath("never-created.lock"));
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->next, 0);
  EXPECT_EQ(s->serving, 0);
  EXPECT_TRUE(s->tickets.empty());
}

TEST(DeviceLockTest, BadPollTimesAreAnError) {
  EXPECT_THAT(
      DeviceLock::Open(TempPath("poll.lock"), Poll(10, 5)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_poll_ms <= max_poll_ms")));
  EXPECT_THAT(DeviceLock::Open(TempPath("poll.lock"), Poll(0, 5)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0 < min_poll_ms")));
}

}  // namespace
}  // namespace tilesearch::runtime
