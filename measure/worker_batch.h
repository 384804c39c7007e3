// Runs a batch of work items in a forked worker process, so that an item that crashes (signal,
// abort, illegal address) or hangs past its limit ends only that worker: the item is reported as
// crashed / timed out, and a new worker is forked for the remaining items. Each worker first runs
// `setup` (e.g. CUDA init and the task's reference) once, then the items in order, writing each
// item's payload back through a pipe. Fork without exec: the child sees the parent's memory as of
// the fork (copy-on-write), so items may refer to in-memory data (nests, compiled modules). The
// parent must not have initialized CUDA (a forked child cannot use the parent's CUDA state) and no
// other thread of the parent may hold a lock the child needs (malloc is fork-safe in glibc).
// The worker resets SIGSEGV / SIGBUS / SIGFPE / SIGILL / SIGABRT to their default actions (so a
// fault is reported as that signal), dies with the parent (PR_SET_PDEATHSIG) and leaves with
// _exit: the parent's atexit handlers, static destructors and stdio buffers are never run or
// flushed by it (the parent flushes stdout / stderr before each fork).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tilesearch::measure {

/// What happened to one item.
struct WorkerItemOutcome {
  enum class Kind : uint8_t {
    kDone,         // item returned; `payload` holds what it returned
    kCrashed,      // the worker died during the item (message: "killed by signal 11
                   // (Segmentation fault)", "exited with status 3", "exited with status 0
                   // before finishing item 4", "threw: <what()>")
    kTimedOut,     // over item_timeout_ms; the worker was killed
    kSetupFailed,  // setup returned an error, crashed or timed out (message says which); the
                   // item did not run
  };
  Kind kind = Kind::kDone;
  std::string payload;
  std::string message;
  double wall_ms = 0;  // the item's wall time as the parent saw it
  /// The last phase the item began (BeginWorkerItemPhase); empty when it began none. Tells where a
  /// crash or timeout happened (e.g. "compile" vs "run").
  std::string phase;
};
/// Limits of the workers of one RunBatchInWorkers call.
struct WorkerOptions {
  double item_timeout_ms = 20000;
  double setup_timeout_ms = 120000;
  /// Worker address-space limit (RLIMIT_AS) in MiB; 0 = none. Leave 0 with CUDA (it reserves
  /// large virtual ranges).
  int64_t memory_limit_mb = 0;
  /// After this many setup failures in a row the remaining items are all kSetupFailed with the
  /// last message, without new forks.
  int max_setup_failures = 1;
};

/// Runs items 0..num_items-1: in a worker, `setup()` once, then `item(i)` for each i in order; a
/// worker that dies or times out on item i is replaced by a new one (which runs setup again)
/// starting at i+1. `item` returns the payload (any bytes; an item's own errors are encoded in
/// it). One outcome per item, in order. The child never returns into the caller's code: it
/// _exit()s after its items.
/// `on_outcome`, when given, is called in the parent with each item's index as soon as its
/// outcome is final, in increasing index order, before RunBatchInWorkers returns (so a caller can
/// keep each result, e.g. append it to a log, while later items still run).
std::vector<WorkerItemOutcome> RunBatchInWorkers(
    int num_items, const std::function<absl::Status()>& setup,
    const std::function<std::string(int)>& item, const WorkerOptions& options = {},
    const std::function<void(int, const WorkerItemOutcome&)>& on_outcome = nullptr);

/// Called from inside an item (in the worker): after this item's payload is sent, the worker exits
/// and a new one (running setup again) takes the next item. For items that leave the worker's state
/// unusable without crashing (e.g. a CUDA context poisoned by an illegal address). Outside a worker
/// it does nothing.
void RequestWorkerRestart();

/// Called from inside an item (in the worker): the item now enters `phase` (e.g. "compile", then
/// "run"); the parent records it in the outcome and restarts the item's clock with `timeout_ms`
/// (<= 0: WorkerOptions::item_timeout_ms). So each phase has its own limit, and a timeout or crash
/// can be attributed to its phase. Outside a worker it does nothing.
void BeginWorkerItemPhase(const std::string& phase, double timeout_ms = 0);

}  // namespace tilesearch::measure
