// CompileManyToPtx: a pool of forked worker processes (or threads) compiling candidates with a
// per-candidate deadline. Process workers read job indices from a pipe, compile the job from
// their copy-on-write view of the caller's memory and write the serialized result back.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/cpu_count.h"
#include "codegen/codegen.h"
#include "codegen/mlir_setup.h"

namespace tilesearch::codegen {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

absl::Status TimeoutStatus(size_t job, double limit_ms) {
  return absl::DeadlineExceededError(
      absl::StrCat("compile_timeout: candidate ", job, " took longer than ", limit_ms, " ms"));
}

absl::Status CancelledStatus(size_t job) {
  return absl::CancelledError(
      absl::StrCat("cancelled: candidate ", job, " was not compiled (the caller stopped)"));
}

bool Cancelled(const ParallelCompileOptions& parallel) {
  return parallel.cancel != nullptr && parallel.cancel->load(std::memory_order_relaxed);
}

// ---- result serialization (worker → parent) ---------------------------------------------------

class Writer {
 public:
  void I64(int64_t v) { buf_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void F64(double v) { buf_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void Str(const std::string& s) {
    I64(static_cast<int64_t>(s.size()));
    buf_ += s;
  }
  const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(const std::string& buf) : buf_(buf) {}
  bool I64(int64_t& v) { return Raw(&v, sizeof v); }
  bool F64(double& v) { return Raw(&v, sizeof v); }
  bool Str(std::string& s) {
    int64_t n = 0;
    if (!I64(n) || n < 0 || pos_ + static_cast<size_t>(n) > buf_.size()) return false;
    s.assign(buf_, pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }

 private:
  bool Raw(void* p, size_t n) {
    if (pos_ + n > buf_.size()) return false;
    std::memcpy(p, buf_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  const std::string& buf_;
  size_t pos_ = 0;
};

std::string Serialize(const absl::StatusOr<GpuModule>& r) {
  Writer w;
  w.I64(static_cast<int64_t>(r.status().code()));
  w.Str(std::string(r.status().message()));
  if (!r.ok()) return w.data();
  w.Str(r->ptx);
  w.Str(r->arch);
  w.F64(r->compile_ms);
  const GpuModule::Phases& p = r->phases;
  for (double ms : {p.emit_ms, p.lower_ms, p.math_ms, p.scf_to_cf_ms, p.to_nvvm_ms, p.cleanup_ms,
                    p.translate_ms, p.optimize_ms, p.codegen_ms}) {
    w.F64(ms);
  }
  w.I64(r->emitted_ops);
  w.Str(r->mlir);
  w.Str(r->llvm_ir);
  w.Str(r->cubin);
  w.Str(r->assemble_error);
  w.F64(r->assemble_ms);
  w.I64(static_cast<int64_t>(r->kernels.size()));
  for (const GpuKernelInfo& k : r->kernels) {
    w.Str(k.name);
    for (int d = 0; d < 3; ++d) w.I64(k.grid[d]);
    for (int d = 0; d < 3; ++d) w.I64(k.block[d]);
    w.I64(k.static_shared_bytes);
    w.I64(k.dynamic_shared_bytes);
  }
  return w.data();
}

absl::StatusOr<GpuModule> Deserialize(const std::string& buf, const ir::LoopNest& nest) {
  Reader r(buf);
  int64_t code = 0;
  std::string message;
  const absl::Status corrupt = absl::InternalError("corrupt result from a compile worker");
  if (!r.I64(code) || !r.Str(message)) return corrupt;
  if (code != 0) return absl::Status(static_cast<absl::StatusCode>(code), message);
  GpuModule m;
  int64_t n = 0;
  GpuModule::Phases& p = m.phases;
  if (!r.Str(m.ptx) || !r.Str(m.arch) || !r.F64(m.compile_ms) || !r.F64(p.emit_ms) ||
      !r.F64(p.lower_ms) || !r.F64(p.math_ms) || !r.F64(p.scf_to_cf_ms) || !r.F64(p.to_nvvm_ms) ||
      !r.F64(p.cleanup_ms) || !r.F64(p.translate_ms) || !r.F64(p.optimize_ms) ||
      !r.F64(p.codegen_ms) || !r.I64(m.emitted_ops) || !r.Str(m.mlir) || !r.Str(m.llvm_ir) ||
      !r.Str(m.cubin) || !r.Str(m.assemble_error) || !r.F64(m.assemble_ms) || !r.I64(n)) {
    return corrupt;
  }
  for (int64_t i = 0; i < n; ++i) {
    GpuKernelInfo k;
    if (!r.Str(k.name)) return corrupt;
    for (int d = 0; d < 3; ++d) {
      if (!r.I64(k.grid[d])) return corrupt;
    }
    for (int d = 0; d < 3; ++d) {
      if (!r.I64(k.block[d])) return corrupt;
    }
    if (!r.I64(k.static_shared_bytes) || !r.I64(k.dynamic_shared_bytes)) return corrupt;
    m.kernels.push_back(std::move(k));
  }
  absl::StatusOr<std::vector<KernelArg>> args = KernelArgs(nest);
  if (!args.ok()) return args.status();
  m.args = *std::move(args);
  return m;
}

// send() with MSG_NOSIGNAL: a dead peer gives an error, not a SIGPIPE that would end the caller.
bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

absl::StatusOr<GpuModule> CompileJob(const GpuCompileJob& job, const GpuCompileOptions& options) {
  if (!job.nest) return absl::InvalidArgumentError("compile job without a loop nest");
  return CompileToPtx(*job.nest, job.launches, options);
}

// ---- process workers --------------------------------------------------------------------------

struct Worker {
  pid_t pid = -1;
  int fd = -1;  // the parent's end of a socket pair with the worker
  std::optional<size_t> job;
  Clock::time_point started;
};

// Closes every descriptor above stderr except `keep` (in a forked child; async-signal-safe
// calls only).
void CloseInheritedDescriptors(int keep) {
  if (keep > 3) syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u);
  syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u);
}

[[noreturn]] void WorkerMain(int fd, const std::vector<GpuCompileJob>& jobs,
                             const GpuCompileOptions& options, int64_t memory_limit_mb) {
  if (memory_limit_mb > 0) {
    rlimit lim;
    lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(memory_limit_mb) << 20;
    setrlimit(RLIMIT_AS, &lim);
  }
  while (true) {
    int64_t index = 0;
    if (!ReadAll(fd, &index, sizeof index)) _exit(0);
    const std::string result = Serialize(CompileJob(jobs[static_cast<size_t>(index)], options));
    const int64_t size = static_cast<int64_t>(result.size());
    if (!WriteAll(fd, &size, sizeof size) || !WriteAll(fd, result.data(), result.size())) {
      _exit(1);
    }
  }
}

class ProcessPool {
 public:
  ProcessPool(const std::vector<GpuCompileJob>& jobs, const GpuCompileOptions& options,
              const ParallelCompileOptions& parallel, const CompileDoneCallback& on_done)
      : jobs_(jobs), options_(options), parallel_(parallel), on_done_(on_done) {}

  ~ProcessPool() {
    for (Worker& w : workers_) Stop(w);
  }

  absl::Status Spawn(Worker& w) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return absl::InternalError(absl::StrCat("socketpair() failed: ", std::strerror(errno)));
    }
    const pid_t pid = fork();
    if (pid < 0) {
      close(sv[0]);
      close(sv[1]);
      return absl::InternalError(absl::StrCat("fork() failed: ", std::strerror(errno)));
    }
    if (pid == 0) {
      // Only this worker's end and the standard streams stay open in the child: a descriptor of
      // another thread's (a device lock's flock, the measuring worker's pipes) would otherwise be
      // held open by this worker until it ends, and a lock would not be released by its owner's
      // close.
      CloseInheritedDescriptors(sv[1]);
      WorkerMain(sv[1], jobs_, options_, parallel_.memory_limit_mb);
    }
    close(sv[1]);
    w.pid = pid;
    w.fd = sv[0];
    w.job.reset();
    return absl::OkStatus();
  }

  // Kills and reaps a worker; returns how it ended (for crash messages).
  std::string Stop(Worker& w) {
    std::string how;
    if (w.pid > 0) {
      int status = 0;
      // A worker that already exited is reaped without a signal.
      if (waitpid(w.pid, &status, WNOHANG) == 0) {
        kill(w.pid, SIGKILL);
        waitpid(w.pid, &status, 0);
        how = "killed";
      } else if (WIFSIGNALED(status)) {
        how = absl::StrCat("signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
      } else if (WIFEXITED(status)) {
        how = absl::StrCat("exit status ", WEXITSTATUS(status));
      }
    }
    if (w.fd >= 0) close(w.fd);
    w = Worker{};
    return how;
  }

  std::vector<absl::StatusOr<GpuModule>> Run() {
    std::vector<absl::StatusOr<GpuModule>> results(jobs_.size(),
                                                   absl::InternalError("not compiled"));
    internal::InitializeLlvmTargets();  // once, before forking, so workers inherit it
    std::deque<size_t> pending;
    for (size_t i = 0; i < jobs_.size(); ++i) pending.push_back(i);
    size_t remaining = jobs_.size();
    int hw = parallel_.num_workers > 0 ? parallel_.num_workers : UsableCores();
    workers_.resize(std::min<size_t>(std::max(1, hw), jobs_.size()));
    std::vector<bool> reported(jobs_.size(), false);
    auto finish = [&](size_t j) {
      --remaining;
      reported[j] = true;
      if (on_done_) on_done_(j, results[j]);
    };
    while (remaining > 0) {
      if (Cancelled(parallel_)) {
        for (Worker& w : workers_) Stop(w);
        for (size_t j = 0; j < jobs_.size(); ++j) {
          if (reported[j]) continue;
          results[j] = CancelledStatus(j);
          finish(j);
        }
        break;
      }
      // Hand pending jobs to idle workers (forking replacements as needed).
      for (Worker& w : workers_) {
        if (pending.empty()) break;
        if (w.job) continue;
        if (w.pid <= 0) {
          if (absl::Status st = Spawn(w); !st.ok()) {
            // No worker: compile in this process instead (no isolation for this job).
            const size_t j = pending.front();
            pending.pop_front();
            results[j] = CompileJob(jobs_[j], options_);
            finish(j);
            continue;
          }
        }
        const size_t j = pending.front();
        const int64_t index = static_cast<int64_t>(j);
        if (!WriteAll(w.fd, &index, sizeof index)) {
          Stop(w);
          continue;  // respawned on the next pass
        }
        pending.pop_front();
        w.job = j;
        w.started = Clock::now();
      }
      // Wait for a result or the earliest deadline.
      std::vector<pollfd> fds;
      std::vector<Worker*> polled;
      double wait_ms = parallel_.timeout_ms;
      for (Worker& w : workers_) {
        if (!w.job) continue;
        fds.push_back(pollfd{w.fd, POLLIN, 0});
        polled.push_back(&w);
        wait_ms = std::min(wait_ms, parallel_.timeout_ms - MsSince(w.started));
      }
      if (fds.empty()) continue;
      // A cancel flag is looked at at least every 50 ms.
      if (parallel_.cancel != nullptr) wait_ms = std::min(wait_ms, 50.0);
      const int timeout = std::max(0, static_cast<int>(std::ceil(wait_ms)));
      const int ready = poll(fds.data(), fds.size(), timeout);
      if (ready < 0 && errno != EINTR) break;
      for (size_t i = 0; i < fds.size(); ++i) {
        Worker& w = *polled[i];
        const size_t j = *w.job;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          int64_t size = 0;
          std::string buf;
          bool ok = ReadAll(w.fd, &size, sizeof size) && size >= 0;
          if (ok) {
            buf.resize(static_cast<size_t>(size));
            ok = ReadAll(w.fd, buf.data(), buf.size());
          }
          if (ok) {
            results[j] = Deserialize(buf, *jobs_[j].nest);
            w.job.reset();
          } else {
            const std::string how = Stop(w);
            results[j] = absl::InternalError(absl::StrCat(
                "compiler crashed: the worker compiling candidate ", j, " ended with ", how,
                parallel_.memory_limit_mb > 0
                    ? absl::StrCat(" (memory limit ", parallel_.memory_limit_mb, " MiB)")
                    : std::string()));
          }
          finish(j);
        } else if (MsSince(w.started) >= parallel_.timeout_ms) {
          Stop(w);
          results[j] = TimeoutStatus(j, parallel_.timeout_ms);
          finish(j);
        }
      }
    }
    return results;
  }

 private:
  const std::vector<GpuCompileJob>& jobs_;
  const GpuCompileOptions& options_;
  const ParallelCompileOptions& parallel_;
  const CompileDoneCallback& on_done_;
  std::vector<Worker> workers_;
};

// ---- thread workers ---------------------------------------------------------------------------

std::vector<absl::StatusOr<GpuModule>> RunInThreads(const std::vector<GpuCompileJob>& jobs,
                                                    const GpuCompileOptions& options,
                                                    const ParallelCompileOptions& parallel,
                                                    const CompileDoneCallback& on_done) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<absl::StatusOr<GpuModule>>> done;
  };
  auto shared = std::make_shared<Shared>();
  shared->done.resize(jobs.size());
  std::vector<absl::StatusOr<GpuModule>> results(jobs.size(), absl::InternalError("not compiled"));
  std::vector<Clock::time_point> started(jobs.size());
  std::vector<size_t> running;
  size_t next = 0;
  size_t remaining = jobs.size();
  const int hw = parallel.num_workers > 0 ? parallel.num_workers : UsableCores();
  const size_t slots = static_cast<size_t>(std::max(1, hw));
  std::vector<size_t> finished;  // reported outside the lock
  std::unique_lock<std::mutex> lock(shared->mu);
  while (remaining > 0) {
    if (Cancelled(parallel)) {
      // Running threads finish in the background; their results are discarded.
      for (size_t j : running) finished.push_back(j);
      for (size_t j = next; j < jobs.size(); ++j) finished.push_back(j);
      for (size_t j : finished) results[j] = CancelledStatus(j);
      lock.unlock();
      if (on_done) {
        for (size_t j : finished) on_done(j, results[j]);
      }
      return results;
    }
    while (running.size() < slots && next < jobs.size()) {
      const size_t j = next++;
      started[j] = Clock::now();
      running.push_back(j);
      // The thread owns copies of what it needs: it may outlive this call.
      std::thread([shared, job = jobs[j], options, j] {
        absl::StatusOr<GpuModule> r = CompileJob(job, options);
        std::lock_guard<std::mutex> guard(shared->mu);
        shared->done[j] = std::move(r);
        shared->cv.notify_all();
      }).detach();
    }
    double wait_ms = parallel.timeout_ms;
    for (size_t j : running) wait_ms = std::min(wait_ms, parallel.timeout_ms - MsSince(started[j]));
    if (parallel.cancel != nullptr) wait_ms = std::min(wait_ms, 50.0);
    shared->cv.wait_for(lock, std::chrono::duration<double, std::milli>(std::max(0.0, wait_ms)));
    for (auto it = running.begin(); it != running.end();) {
      const size_t j = *it;
      if (shared->done[j]) {
        results[j] = *std::move(shared->done[j]);
      } else if (MsSince(started[j]) >= parallel.timeout_ms) {
        results[j] = TimeoutStatus(j, parallel.timeout_ms);
      } else {
        ++it;
        continue;
      }
      --remaining;
      finished.push_back(j);
      it = running.erase(it);
    }
    if (on_done && !finished.empty()) {
      lock.unlock();
      for (size_t j : finished) on_done(j, results[j]);
      lock.lock();
    }
    finished.clear();
  }
  return results;
}

}  // namespace

std::vector<absl::StatusOr<GpuModule>> CompileManyToPtx(const std::vector<GpuCompileJob>& jobs,
                                                        const GpuCompileOptions& options,
                                                        const ParallelCompileOptions& parallel,
                                                        const CompileDoneCallback& on_done) {
  if (jobs.empty()) return {};
  if (parallel.isolation == ParallelCompileOptions::Isolation::kThread) {
    return RunInThreads(jobs, options, parallel, on_done);
  }
  ProcessPool pool(jobs, options, parallel, on_done);
  return pool.Run();
}

}  // namespace tilesearch::codegen
