// Async-signal-safe pieces of the Ctrl-C handling shared by `tune` (search/tuner.cc), `bench`
// (tools/cmd_bench.cc) and `tune-graph` (tools/cmd_graph.cc): each keeps its own count of
// interrupts and its own policy; these are what they do from inside a SIGINT handler.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tilesearch {

/// Writes a NUL-terminated `text` to stderr with write(2), retrying after EINTR and partial
/// writes. Async-signal-safe.
inline void WriteStderrSignalSafe(const char* text) {
  size_t size = std::strlen(text);
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    text += n;
    size -= static_cast<size_t>(n);
  }
}

/// Ends the process as killed by SIGINT (a shell then reports status 130): restores the default
/// action, unblocks SIGINT (a handler runs with it blocked) and raises it; _exit(130) if that did
/// not end the process. Async-signal-safe.
[[noreturn]] inline void DieOfSigint() {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGINT, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(SIGINT);
  ::_exit(130);
}

/// Installs `handler` for SIGINT (empty mask, no flags) for the object's lifetime and restores
/// the previous disposition on destruction. Not copyable.
class ScopedSigintHandler {
 public:
  explicit ScopedSigintHandler(void (*handler)(int)) {
    struct sigaction sa = {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &previous_);
  }
  ~ScopedSigintHandler() { ::sigaction(SIGINT, &previous_, nullptr); }
  ScopedSigintHandler(const ScopedSigintHandler&) = delete;
  ScopedSigintHandler& operator=(const ScopedSigintHandler&) = delete;

 private:
  struct sigaction previous_ = {};
};

}  // namespace tilesearch
