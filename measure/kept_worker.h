// A measurement worker process kept across batches: forked once, it runs `setup` (e.g. CUDA
// init, the task's reference, uploads of the check inputs) and then serves items sent to it as
// bytes, batch after batch, until it dies or the KeptWorker is destroyed. Items must travel as
// bytes because the worker is forked without exec: it sees the parent's memory only as of its
// fork, so what a later batch builds (a newly compiled candidate) reaches it through the pipe.
//
// An item that crashes (signal, abort, illegal address) or hangs past its limit ends only that
// worker: the item is reported as crashed / timed out, and a new worker (which runs setup again)
// is forked for the next item. A worker found dead between items (killed from outside, or after
// asking for a restart) is replaced the same way; the item it never started is retried once on
// the new worker. The parent must not have initialized CUDA (a forked child cannot use the
// parent's CUDA state) and no other thread of the parent may hold a lock the child needs (malloc
// is fork-safe in glibc).
//
// The worker resets SIGSEGV / SIGBUS / SIGFPE / SIGILL / SIGABRT to their default actions (so a
// fault is reported as that signal), dies with the KeptWorker (PR_SET_PDEATHSIG of a thread the
// KeptWorker owns: the signal follows the forking *thread*, so workers are forked from that
// thread, never from a caller's thread that may end before the worker should) and leaves with
// _exit: the parent's atexit handlers, static destructors and stdio buffers are never run or
// flushed by it (the parent flushes stdout / stderr before each fork). Destroying the KeptWorker
// SIGKILLs and reaps its worker and closes its socket: no zombie, no descriptor left.
//
// Protocol over one socket pair, framed messages [type: 1 byte][index: int32][length: uint64]
// [payload]: parent → worker "item i <request>"; worker → parent "setup ok", "setup failed
// <message>", "start i", "phase i <timeout><name>", "note i <text>" (an item that threw, sent
// just before the worker exits) and "done i <restart flag><payload>".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
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

/// Limits of a worker.
struct WorkerOptions {
  double item_timeout_ms = 20000;
  double setup_timeout_ms = 120000;
  /// Worker address-space limit (RLIMIT_AS) in MiB; 0 = none. Leave 0 with CUDA (it reserves
  /// large virtual ranges).
  int64_t memory_limit_mb = 0;
  /// After this many setup failures in a row within one Run call, the call's remaining items are
  /// all kSetupFailed with the last message, without new forks.
  int max_setup_failures = 1;
};

/// Where a Run call's time went, as the parent saw it.
struct WorkerUsage {
  int64_t setups = 0;   // workers forked and set up (successfully or not)
  double setup_ms = 0;  // wall ms from each fork to its setup's end
  double item_ms = 0;   // wall ms of the items (from their request to their outcome)
};

/// One worker process kept across Run calls (see the file comment).
class KeptWorker {
 public:
  /// Runs in the worker once per fork. Its error fails the items (kSetupFailed).
  using Setup = std::function<absl::Status()>;
  /// Runs in the worker per item, with the request bytes the parent sent; returns the payload
  /// (any bytes; an item's own errors are encoded in it).
  using Item = std::function<std::string(const std::string& request)>;
  using OutcomeCallback = std::function<void(int index, const WorkerItemOutcome& outcome)>;

  /// Forks nothing yet (the first Run does). `setup` and `item` run in workers forked later, on
  /// their copy of this process's memory as of each fork: what they refer to must stay valid (and
  /// hold the task's data) for the KeptWorker's lifetime.
  KeptWorker(Setup setup, Item item, WorkerOptions options);
  /// SIGKILLs and reaps the worker, closes its socket and ends the forking thread.
  ~KeptWorker();
  KeptWorker(const KeptWorker&) = delete;
  KeptWorker& operator=(const KeptWorker&) = delete;

  /// Runs `requests` in order on the kept worker (forking and setting one up first when there is
  /// none), one outcome per request, in order. A worker that dies or times out on item i is
  /// replaced (its setup runs again) for item i+1. `on_outcome`, when given, is called with each
  /// item's index as soon as its outcome is final, in increasing index order, before Run returns.
  /// Never fails as a whole: a worker that cannot start (fork, socket or setup failure) gives
  /// kSetupFailed outcomes (WorkerOptions::max_setup_failures).
  std::vector<WorkerItemOutcome> Run(const std::vector<std::string>& requests,
                                     const OutcomeCallback& on_outcome = nullptr);

  /// Forks and sets up a worker now, when there is none (or it ended), so that the next Run's
  /// first item does not wait for the setup: true when one was set up now. A failed setup is
  /// dropped silently (the next Run starts one again and reports why). Its setup is counted in
  /// total_setups(), not in the next Run's usage.
  bool Warm();

  /// The last Run call's setups, setup time and item time.
  const WorkerUsage& last_run_usage() const { return last_run_; }
  /// Workers set up (successfully or not) over this object's lifetime.
  int64_t total_setups() const { return total_setups_; }
  /// The process id of the current worker; -1 when there is none (before the first Run, after a
  /// crash until the next item).
  pid_t worker_pid() const;

 private:
  class Connection;
  class ForkThread;
  // Result of sending one item to the worker.
  enum class ItemEnd : uint8_t { kFinished, kNotStarted };

  // Forks and sets up a worker. Errors: the setup's message as an outcome message.
  absl::Status StartWorker();
  // Sends item `index` and waits for its outcome (kFinished: `out` is final) or for the worker's
  // end before it began the item (kNotStarted: `ended_how` says how).
  ItemEnd RunItem(int index, const std::string& request, WorkerItemOutcome* out,
                  std::string* ended_how);
  void DropWorker();

  Setup setup_;
  Item item_;
  WorkerOptions options_;
  std::unique_ptr<ForkThread> fork_thread_;
  std::unique_ptr<Connection> worker_;
  WorkerUsage last_run_;
  int64_t total_setups_ = 0;
};

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
