// The kept worker (see the header). The parent polls its socket with the current deadline (setup,
// or the running item's), SIGKILLs and reaps a worker that misses it, and forks a new one for the
// next item after any worker that ends.
#include "measure/kept_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"

namespace tilesearch::measure {
namespace {

enum class MessageType : uint8_t {
  kSetupOk = 1,
  kSetupFailed,
  kStart,
  kDone,
  kNote,
  kPhase,
  kItem,  // parent → worker
};

constexpr size_t kHeaderBytes = 1 + 4 + 8;

// Worker-side state (only set inside a worker): its socket, the running item, a restart request.
bool in_worker = false;
bool restart_requested = false;
int worker_fd = -1;
int worker_item = -1;

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

Clock::time_point After(double ms) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
}

std::string Header(MessageType type, int index, uint64_t length) {
  std::string header(kHeaderBytes, '\0');
  header[0] = static_cast<char>(type);
  const int32_t i32 = index;
  std::memcpy(header.data() + 1, &i32, 4);
  std::memcpy(header.data() + 5, &length, 8);
  return header;
}

// ---------------------------------------------------------------------------------------------
// Worker side.

// Writes all of `size` bytes, retrying on EINTR and partial writes; a failure ends the worker (the
// parent is gone or closed the socket).
void WriteAllOrDie(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(121);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void SendMessage(int fd, MessageType type, int index, const std::string& payload) {
  const std::string header = Header(type, index, payload.size());
  WriteAllOrDie(fd, header.data(), header.size());
  if (!payload.empty()) WriteAllOrDie(fd, payload.data(), payload.size());
}

// Reads exactly `size` bytes; false at the end of the stream or on an error (the parent is gone).
bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void RunChild(int fd, pid_t parent, const KeptWorker::Setup& setup,
                           const KeptWorker::Item& item, const WorkerOptions& options) {
  in_worker = true;
  restart_requested = false;
  worker_fd = fd;
  // Die with the forking thread (the KeptWorker's); if the process is already gone, stop now.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(0);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
  // A closed socket must surface as a write error, not a silent death by SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  if (options.memory_limit_mb > 0) {
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(options.memory_limit_mb) << 20;
    ::setrlimit(RLIMIT_AS, &limit);
  }
  try {
    absl::Status status = setup ? setup() : absl::OkStatus();
    if (!status.ok()) {
      SendMessage(fd, MessageType::kSetupFailed, 0, status.ToString());
      _exit(0);
    }
  } catch (const std::exception& e) {
    SendMessage(fd, MessageType::kSetupFailed, 0, absl::StrCat("setup threw: ", e.what()));
    _exit(0);
  } catch (...) {
    SendMessage(fd, MessageType::kSetupFailed, 0, "setup threw an unknown exception");
    _exit(0);
  }
  SendMessage(fd, MessageType::kSetupOk, 0, "");
  for (;;) {
    char header[kHeaderBytes];
    if (!ReadAll(fd, header, kHeaderBytes)) _exit(0);  // the parent closed the socket
    int32_t index = 0;
    uint64_t length = 0;
    std::memcpy(&index, header + 1, 4);
    std::memcpy(&length, header + 5, 8);
    std::string request(length, '\0');
    if (static_cast<MessageType>(header[0]) != MessageType::kItem ||
        !ReadAll(fd, request.data(), length)) {
      _exit(122);
    }
    SendMessage(fd, MessageType::kStart, index, "");
    worker_item = index;
    std::string payload(1, '\0');  // the restart flag, then the item's payload
    try {
      payload += item(request);
    } catch (const std::exception& e) {
      SendMessage(fd, MessageType::kNote, index, absl::StrCat("threw: ", e.what()));
      _exit(70);
    } catch (...) {
      SendMessage(fd, MessageType::kNote, index, "threw an unknown exception");
      _exit(70);
    }
    worker_item = -1;
    payload[0] = restart_requested ? 1 : 0;
    SendMessage(fd, MessageType::kDone, index, payload);
    if (restart_requested) {
      ::close(fd);
      _exit(0);
    }
  }
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

}  // namespace

// Runs functions on one long-lived thread: workers are forked there, so that their
// PR_SET_PDEATHSIG (which follows the forking thread) fires only when the KeptWorker ends.
class KeptWorker::ForkThread {
 public:
  ForkThread() : thread_([this] { Loop(); }) {}
  ~ForkThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Runs `fn` on the thread and waits until it returns.
  void Call(const std::function<void()>& fn) {
    std::unique_lock<std::mutex> lock(mu_);
    task_ = &fn;
    done_ = false;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || task_ != nullptr; });
      if (stop_) return;
      const std::function<void()>* task = task_;
      // Not held while the task forks: the child must not inherit a held lock it might touch.
      lock.unlock();
      (*task)();
      lock.lock();
      task_ = nullptr;
      done_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()>* task_ = nullptr;
  bool done_ = false;
  bool stop_ = false;
  std::thread thread_;
};

// One worker as the parent sees it.
class KeptWorker::Connection {
 public:
  Connection(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  ~Connection() {
    ::close(fd_);
    Kill();
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  struct Message {
    MessageType type;
    int index;
    std::string payload;
  };

  pid_t pid() const { return pid_; }

  // Waits until a complete message arrives (returned), the worker ends (nullopt, `ended` set with
  // its wait status) or `deadline` passes (nullopt, `ended` false).
  std::optional<Message> Next(Clock::time_point deadline, bool* ended, int* wait_status) {
    *ended = false;
    bool drained = false;  // the read after the deadline (below) was made
    for (;;) {
      if (std::optional<Message> m = Parse()) return m;
      if (eof_) {
        *ended = true;
        *wait_status = Reap();
        return std::nullopt;
      }
      const double left_ms =
          std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
      if (left_ms <= 0) {
        // What the worker wrote before the deadline counts even if this process was not running
        // to read it (a loaded machine): read once more without waiting before giving up.
        struct pollfd pfd = {fd_, POLLIN, 0};
        if (!drained && ::poll(&pfd, 1, 0) > 0) {
          drained = true;
          ReadAvailable();
          continue;
        }
        return std::nullopt;
      }
      // Wake up now and then to notice a worker that died while a process it forked still holds
      // the socket open (no end of stream then).
      struct pollfd pfd = {fd_, POLLIN, 0};
      const int slice = static_cast<int>(std::min(100.0, std::ceil(left_ms)));
      const int r = ::poll(&pfd, 1, slice);
      if (r < 0 && errno != EINTR) {
        CHECK(false) << "poll on a worker socket failed: " << std::strerror(errno);
      }
      if (r > 0) {
        ReadAvailable();
      } else if (r == 0) {
        PollExit();
      }
    }
  }

  // Whether the worker has ended (checked without blocking; what it wrote stays readable).
  bool Ended() {
    PollExit();
    return pid_ <= 0;
  }

  // Writes one request, waiting at most until `deadline` for room in the socket. False when the
  // worker is gone (or does not read): the caller then waits for its end.
  bool Send(MessageType type, int index, const std::string& payload, Clock::time_point deadline) {
    const std::string header = Header(type, index, payload.size());
    return SendBytes(header.data(), header.size(), deadline) &&
           SendBytes(payload.data(), payload.size(), deadline);
  }

  // SIGKILLs the worker and reaps it.
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      reaped_status_ = WaitForChild(pid_);
      pid_ = -1;
    }
  }

 private:
  void PollExit() {
    if (pid_ <= 0) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      reaped_status_ = status;
      ReadAvailable();  // everything it wrote is in the socket already
      eof_ = true;
    }
  }

  bool SendBytes(const char* p, size_t size, Clock::time_point deadline) {
    while (size > 0) {
      const ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        p += n;
        size -= static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const double left_ms =
            std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
        if (left_ms <= 0) return false;
        struct pollfd pfd = {fd_, POLLOUT, 0};
        ::poll(&pfd, 1, static_cast<int>(std::min(100.0, std::ceil(left_ms))));
        PollExit();
        if (pid_ <= 0) return false;
        continue;
      }
      return false;  // EPIPE / ECONNRESET: the worker is gone
    }
    return true;
  }

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
      eof_ = true;  // a broken socket reads as the end of the worker
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

KeptWorker::KeptWorker(Setup setup, Item item, WorkerOptions options)
    : setup_(std::move(setup)), item_(std::move(item)), options_(options) {}

KeptWorker::~KeptWorker() {
  worker_.reset();
  fork_thread_.reset();
}

pid_t KeptWorker::worker_pid() const { return worker_ != nullptr ? worker_->pid() : -1; }

void KeptWorker::DropWorker() { worker_.reset(); }

absl::Status KeptWorker::StartWorker() {
  DropWorker();
  ++last_run_.setups;
  ++total_setups_;
  const Clock::time_point start = Clock::now();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a worker socket: ", std::strerror(errno)));
  }
  if (fork_thread_ == nullptr) fork_thread_ = std::make_unique<ForkThread>();
  // Whatever the parent buffered must not be written twice (the child never flushes, but be safe
  // against a child that does).
  std::fflush(nullptr);
  pid_t pid = -1;
  int fork_errno = 0;
  const pid_t parent = ::getpid();
  fork_thread_->Call([&] {
    pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      RunChild(fds[1], parent, setup_, item_, options_);
    }
    fork_errno = errno;
  });
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return absl::InternalError(absl::StrCat("cannot fork a worker: ", std::strerror(fork_errno)));
  }
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  worker_ = std::make_unique<Connection>(pid, fds[0]);

  const Clock::time_point deadline = After(options_.setup_timeout_ms);
  absl::Status status;
  for (;;) {
    bool ended = false;
    int wait_status = 0;
    std::optional<Connection::Message> m = worker_->Next(deadline, &ended, &wait_status);
    if (m.has_value() && m->type == MessageType::kSetupOk) break;
    if (m.has_value() && m->type == MessageType::kSetupFailed) {
      status = absl::InternalError(absl::StrCat("setup failed: ", m->payload));
      break;
    }
    if (m.has_value()) continue;  // nothing else is sent during setup
    status = absl::InternalError(
        ended ? absl::StrCat("worker ", DescribeWaitStatus(wait_status), " during setup")
              : absl::StrFormat("setup timed out after %.0f ms; the worker was killed",
                                options_.setup_timeout_ms));
    break;
  }
  last_run_.setup_ms += MsSince(start);
  if (!status.ok()) DropWorker();
  return status;
}

bool KeptWorker::Warm() {
  if (worker_ != nullptr && !worker_->Ended()) return false;
  return StartWorker().ok();  // a failed start is already dropped
}

KeptWorker::ItemEnd KeptWorker::RunItem(int index, const std::string& request,
                                        WorkerItemOutcome* out, std::string* ended_how) {
  Clock::time_point item_start = Clock::now();
  double phase_timeout = options_.item_timeout_ms;
  Clock::time_point deadline = After(phase_timeout);
  bool started = false;
  // A worker that does not take the request is waited for below (its end, or the deadline).
  (void)worker_->Send(MessageType::kItem, index, request, deadline);
  for (;;) {
    bool ended = false;
    int wait_status = 0;
    std::optional<Connection::Message> m = worker_->Next(deadline, &ended, &wait_status);
    if (m.has_value()) {
      switch (m->type) {
        case MessageType::kStart:
          CHECK(m->index == index) << "worker started item " << m->index << ", expected " << index;
          started = true;
          item_start = Clock::now();
          deadline = After(phase_timeout);
          break;
        case MessageType::kPhase: {
          CHECK(m->index == index && m->payload.size() >= sizeof(double))
              << "phase message for item " << m->index << " while running " << index;
          double timeout = 0;
          std::memcpy(&timeout, m->payload.data(), sizeof(double));
          out->phase = m->payload.substr(sizeof(double));
          phase_timeout = timeout > 0 ? timeout : options_.item_timeout_ms;
          deadline = After(phase_timeout);
          break;
        }
        case MessageType::kNote:
          if (m->index == index) out->message = m->payload;
          break;
        case MessageType::kDone: {
          CHECK(m->index == index && !m->payload.empty())
              << "worker finished item " << m->index << ", expected " << index;
          out->kind = WorkerItemOutcome::Kind::kDone;
          out->payload = m->payload.substr(1);
          out->wall_ms = MsSince(item_start);
          // A worker that asked for a restart exits after this message: reap it now.
          if (m->payload[0] != 0) DropWorker();
          return ItemEnd::kFinished;
        }
        default:
          break;  // setup messages cannot come now
      }
      continue;
    }
    if (ended) {
      const std::string how = DescribeWaitStatus(wait_status);
      DropWorker();
      if (!started) {
        *ended_how = how;
        return ItemEnd::kNotStarted;
      }
      out->kind = WorkerItemOutcome::Kind::kCrashed;
      out->wall_ms = MsSince(item_start);
      std::string what = how;
      if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
        what = absl::StrCat(what, " before finishing item ", index);
      }
      out->message = out->message.empty() ? what : absl::StrCat(out->message, "; ", what);
      return ItemEnd::kFinished;
    }
    // Deadline passed.
    DropWorker();
    out->kind = WorkerItemOutcome::Kind::kTimedOut;
    out->wall_ms = started ? MsSince(item_start) : 0;
    out->message =
        absl::StrFormat("timed out after %.0f ms%s; the worker was killed", phase_timeout,
                        out->phase.empty() ? "" : " in phase '" + out->phase + "'");
    return ItemEnd::kFinished;
  }
}

std::vector<WorkerItemOutcome> KeptWorker::Run(const std::vector<std::string>& requests,
                                               const OutcomeCallback& on_outcome) {
  last_run_ = WorkerUsage{};
  const int num_items = static_cast<int>(requests.size());
  std::vector<WorkerItemOutcome> outcomes(requests.size());
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
    if (setup_failures >= options_.max_setup_failures) {
      for (; next < num_items; ++next) {
        outcomes[next].kind = WorkerItemOutcome::Kind::kSetupFailed;
        outcomes[next].message = message;
      }
    }
  };
  bool retried = false;  // the item `next` was already retried after a worker's end before it
  while (next < num_items) {
    report();
    if (worker_ != nullptr && worker_->Ended()) DropWorker();  // died while idle
    bool fresh = false;
    if (worker_ == nullptr) {
      absl::Status started = StartWorker();
      if (!started.ok()) {
        fail_setup(std::string(started.message()));
        continue;
      }
      setup_failures = 0;
      fresh = true;
    }
    WorkerItemOutcome& out = outcomes[next];
    std::string ended_how;
    const Clock::time_point item_start = Clock::now();
    const ItemEnd end = RunItem(next, requests[next], &out, &ended_how);
    last_run_.item_ms += MsSince(item_start);
    if (end == ItemEnd::kFinished) {
      ++next;
      retried = false;
      continue;
    }
    // The worker ended before it began the item. A worker just set up that does this counts as a
    // failed start, so that one that keeps doing it cannot loop forever; a worker kept from
    // earlier items may have been killed from outside while idle: the item is retried once.
    if (fresh || retried) {
      fail_setup(absl::StrCat("worker ", ended_how, " before its first item"));
      retried = false;
    } else {
      retried = true;
    }
  }
  report();
  return outcomes;
}

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

}  // namespace tilesearch::measure
