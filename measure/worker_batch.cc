// Forked workers for a batch of items. Protocol over one pipe per worker, child → parent, framed
// messages: [type: 1 byte][index: int32][length: uint64][payload: length bytes], with types
// "setup ok", "setup failed <message>", "start i", "done i <payload>" and "note <text>" (an item
// that threw, sent just before the worker exits). The parent polls with the current deadline
// (setup, or the running item's), SIGKILLs and reaps a worker that misses it, and forks a new one
// for the next item after any worker that ends before the batch does.
#include "measure/worker_batch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"

namespace tilesearch::measure {
namespace {

enum class MessageType : uint8_t { kSetupOk = 1, kSetupFailed, kStart, kDone, kNote, kPhase };

constexpr size_t kHeaderBytes = 1 + 4 + 8;

// Worker-side state (only set inside a worker): its pipe, the running item, a restart request.
bool in_worker = false;
bool restart_requested = false;
int worker_fd = -1;
int worker_item = -1;

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------------------------
// Child side.

// Writes all of `size` bytes, retrying on EINTR and partial writes; a failure ends the worker (the
// parent is gone or closed the pipe).
void WriteAllOrDie(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(121);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void SendMessage(int fd, MessageType type, int index, const std::string& payload) {
  char header[kHeaderBytes];
  header[0] = static_cast<char>(type);
  const int32_t i32 = index;
  const uint64_t length = payload.size();
  std::memcpy(header + 1, &i32, 4);
  std::memcpy(header + 5, &length, 8);
  WriteAllOrDie(fd, header, kHeaderBytes);
  if (!payload.empty()) WriteAllOrDie(fd, payload.data(), payload.size());
}

[[noreturn]] void RunChild(int fd, int first_item, int num_items,
                           const std::function<absl::Status()>& setup,
                           const std::function<std::string(int)>& item,
                           const WorkerOptions& options) {
  in_worker = true;
  restart_requested = false;
  worker_fd = fd;
  // Die with the parent; if it is already gone, stop now.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
  // A closed pipe must surface as a write error, not a silent death by SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  if (options.memory_limit_mb > 0) {
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(options.memory_limit_mb) << 20;
    ::setrlimit(RLIMIT_AS, &limit);
  }
  try {
    absl::Status status = setup ? setup() : absl::OkStatus();
    if (!status.ok()) {
      SendMessage(fd, MessageType::kSetupFailed, first_item, status.ToString());
      _exit(0);
    }
  } catch (const std::exception& e) {
    SendMessage(fd, MessageType::kSetupFailed, first_item, absl::StrCat("setup threw: ", e.what()));
    _exit(0);
  } catch (...) {
    SendMessage(fd, MessageType::kSetupFailed, first_item, "setup threw an unknown exception");
    _exit(0);
  }
  SendMessage(fd, MessageType::kSetupOk, first_item, "");
  for (int i = first_item; i < num_items; ++i) {
    SendMessage(fd, MessageType::kStart, i, "");
    worker_item = i;
    std::string payload;
    try {
      payload = item(i);
    } catch (const std::exception& e) {
      SendMessage(fd, MessageType::kNote, i, absl::StrCat("threw: ", e.what()));
      _exit(70);
    } catch (...) {
      SendMessage(fd, MessageType::kNote, i, "threw an unknown exception");
      _exit(70);
    }
    worker_item = -1;
    SendMessage(fd, MessageType::kDone, i, payload);
    if (restart_requested) break;
  }
  ::close(fd);
  _exit(0);
}

// ---------------------------------------------------------------------------------------------
// Parent side.

std::string DescribeWaitStatus(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return absl::StrCat("killed by signal ", sig, " (", name != nullptr ? name : "unknown", ")");
  }
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  return absl::StrCat("ended with wait status ", status);
}

int WaitForChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 0;
  }
  return status;
}

// One worker as the parent sees it.
class WorkerConnection {
 public:
  WorkerConnection(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  ~WorkerConnection() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      WaitForChild(pid_);
    }
  }
  WorkerConnection(const WorkerConnection&) = delete;
  WorkerConnection& operator=(const WorkerConnection&) = delete;

  struct Message {
    MessageType type;
    int index;
    std::string payload;
  };

  // Waits until a complete message arrives (returned), the worker ends (nullopt, `ended` set with
  // its wait status) or `deadline` passes (nullopt, `ended` false).
  std::optional<Message> Next(Clock::time_point deadline, bool* ended, int* wait_status) {
    *ended = false;
    for (;;) {
      if (std::optional<Message> m = Parse()) return m;
      if (eof_) {
        *ended = true;
        *wait_status = Reap();
        return std::nullopt;
      }
      const double left_ms =
          std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
      if (left_ms <= 0) return std::nullopt;
      // Wake up now and then to notice a worker that died while a process it forked still holds
      // the pipe's write end open (no EOF then).
      struct pollfd pfd = {fd_, POLLIN, 0};
      const int slice = static_cast<int>(std::min(100.0, std::ceil(left_ms)));
      const int r = ::poll(&pfd, 1, slice);
      if (r < 0 && errno != EINTR) {
        CHECK(false) << "poll on a worker pipe failed: " << std::strerror(errno);
      }
      if (r > 0) {
        ReadAvailable();
      } else if (r == 0 && pid_ > 0) {
        int status = 0;
        const pid_t w = ::waitpid(pid_, &status, WNOHANG);
        if (w == pid_) {
          pid_ = -1;
          reaped_status_ = status;
          ReadAvailable();  // everything it wrote is in the pipe already
          eof_ = true;
        }
      }
    }
  }

  // SIGKILLs the worker and reaps it.
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      WaitForChild(pid_);
      pid_ = -1;
    }
  }

 private:
  int Reap() {
    if (pid_ > 0) {
      reaped_status_ = WaitForChild(pid_);
      pid_ = -1;
    }
    return reaped_status_;
  }

  void ReadAvailable() {
    char chunk[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd_, chunk, sizeof(chunk));
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
        if (static_cast<size_t>(n) < sizeof(chunk)) return;
        continue;
      }
      if (n == 0) {
        eof_ = true;
        return;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      eof_ = true;  // a broken pipe reads as the end of the worker
      return;
    }
  }

  std::optional<Message> Parse() {
    if (buffer_.size() - consumed_ < kHeaderBytes) return std::nullopt;
    const char* h = buffer_.data() + consumed_;
    int32_t index = 0;
    uint64_t length = 0;
    std::memcpy(&index, h + 1, 4);
    std::memcpy(&length, h + 5, 8);
    if (buffer_.size() - consumed_ - kHeaderBytes < length) return std::nullopt;
    Message m{static_cast<MessageType>(h[0]), index,
              buffer_.substr(consumed_ + kHeaderBytes, length)};
    consumed_ += kHeaderBytes + length;
    if (consumed_ == buffer_.size()) {
      buffer_.clear();
      consumed_ = 0;
    }
    return m;
  }

  pid_t pid_;
  int fd_;
  std::string buffer_;
  size_t consumed_ = 0;
  bool eof_ = false;
  int reaped_status_ = 0;
};

Clock::time_point After(double ms) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
}

}  // namespace

void RequestWorkerRestart() {
  if (in_worker) restart_requested = true;
}

void BeginWorkerItemPhase(const std::string& phase, double timeout_ms) {
  if (!in_worker || worker_item < 0) return;
  std::string payload(sizeof(double), '\0');
  std::memcpy(payload.data(), &timeout_ms, sizeof(double));
  payload += phase;
  SendMessage(worker_fd, MessageType::kPhase, worker_item, payload);
}

std::vector<WorkerItemOutcome> RunBatchInWorkers(
    int num_items, const std::function<absl::Status()>& setup,
    const std::function<std::string(int)>& item, const WorkerOptions& options,
    const std::function<void(int, const WorkerItemOutcome&)>& on_outcome) {
  std::vector<WorkerItemOutcome> outcomes(std::max(num_items, 0));
  int next = 0;
  int reported = 0;  // items below `next` are final; those from `reported` on go to on_outcome
  auto report = [&]() {
    for (; on_outcome && reported < next; ++reported) on_outcome(reported, outcomes[reported]);
  };
  int setup_failures = 0;
  auto fail_setup = [&](const std::string& message) {
    ++setup_failures;
    outcomes[next].kind = WorkerItemOutcome::Kind::kSetupFailed;
    outcomes[next].message = message;
    ++next;
    if (setup_failures >= options.max_setup_failures) {
      for (; next < num_items; ++next) {
        outcomes[next].kind = WorkerItemOutcome::Kind::kSetupFailed;
        outcomes[next].message = message;
      }
    }
  };

  while (next < num_items) {
    report();
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      fail_setup(absl::StrCat("cannot create a worker pipe: ", std::strerror(errno)));
      continue;
    }
    // Whatever the parent buffered must not be written twice (the child never flushes, but be
    // safe against a child that does).
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      fail_setup(absl::StrCat("cannot fork a worker: ", std::strerror(err)));
      continue;
    }
    if (pid == 0) {
      ::close(fds[0]);
      RunChild(fds[1], next, num_items, setup, item, options);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    WorkerConnection worker(pid, fds[0]);

    bool in_setup = true;
    int current = -1;  // the item the worker is running, -1 between items
    Clock::time_point item_start = Clock::now();
    Clock::time_point deadline = After(options.setup_timeout_ms);
    bool progressed = false;
    double phase_timeout = options.item_timeout_ms;  // the limit the running item is under
    for (;;) {
      bool ended = false;
      int wait_status = 0;
      std::optional<WorkerConnection::Message> m = worker.Next(deadline, &ended, &wait_status);
      if (m.has_value()) {
        switch (m->type) {
          case MessageType::kSetupOk:
            in_setup = false;
            setup_failures = 0;
            deadline = After(options.item_timeout_ms);
            break;
          case MessageType::kSetupFailed:
            worker.Kill();
            fail_setup(absl::StrCat("setup failed: ", m->payload));
            progressed = true;
            break;
          case MessageType::kStart:
            CHECK(m->index == next) << "worker started item " << m->index << ", expected " << next;
            current = m->index;
            item_start = Clock::now();
            deadline = After(options.item_timeout_ms);
            phase_timeout = options.item_timeout_ms;
            break;
          case MessageType::kDone: {
            CHECK(m->index == current)
                << "worker finished item " << m->index << ", expected " << current;
            WorkerItemOutcome& out = outcomes[current];
            out.kind = WorkerItemOutcome::Kind::kDone;
            out.payload = std::move(m->payload);
            out.wall_ms = MsSince(item_start);
            next = current + 1;
            current = -1;
            progressed = true;
            deadline = After(options.item_timeout_ms);
            phase_timeout = options.item_timeout_ms;
            break;
          }
          case MessageType::kPhase: {
            CHECK(m->index == current && m->payload.size() >= sizeof(double))
                << "phase message for item " << m->index << " while running " << current;
            double timeout = 0;
            std::memcpy(&timeout, m->payload.data(), sizeof(double));
            outcomes[current].phase = m->payload.substr(sizeof(double));
            deadline = After(timeout > 0 ? timeout : options.item_timeout_ms);
            phase_timeout = timeout > 0 ? timeout : options.item_timeout_ms;
            break;
          }
          case MessageType::kNote:
            if (m->index >= 0 && m->index < num_items) outcomes[m->index].message = m->payload;
            break;
        }
        if (m->type == MessageType::kSetupFailed) break;
        report();
        continue;
      }
      if (ended) {
        if (in_setup) {
          fail_setup(absl::StrCat("worker ", DescribeWaitStatus(wait_status), " during setup"));
        } else if (current >= 0) {
          WorkerItemOutcome& out = outcomes[current];
          out.kind = WorkerItemOutcome::Kind::kCrashed;
          out.wall_ms = MsSince(item_start);
          std::string how = DescribeWaitStatus(wait_status);
          if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
            how = absl::StrCat(how, " before finishing item ", current);
          }
          out.message = out.message.empty() ? how : absl::StrCat(out.message, "; ", how);
          next = current + 1;
        } else if (!progressed && next < num_items) {
          // Ended between setup and its first item: count it as a failed start so that a worker
          // that keeps doing this cannot loop forever.
          fail_setup(
              absl::StrCat("worker ", DescribeWaitStatus(wait_status), " before its first item"));
        }
        break;
      }
      // Deadline passed.
      worker.Kill();
      if (in_setup) {
        fail_setup(absl::StrFormat("setup timed out after %.0f ms; the worker was killed",
                                   options.setup_timeout_ms));
      } else {
        const int stuck = current >= 0 ? current : next;
        WorkerItemOutcome& out = outcomes[stuck];
        out.kind = WorkerItemOutcome::Kind::kTimedOut;
        out.wall_ms = current >= 0 ? MsSince(item_start) : 0;
        out.message =
            absl::StrFormat("timed out after %.0f ms%s; the worker was killed", phase_timeout,
                            out.phase.empty() ? "" : " in phase '" + out.phase + "'");
        next = stuck + 1;
      }
      break;
    }
  }
  report();
  return outcomes;
}

}  // namespace tilesearch::measure
