// The Runner: checks, then times, built candidates of one task on one target (TVM's
// ProgramRunner, include/tvm/auto_scheduler/measure.h). Every candidate is checked against the
// task's reference on fresh random inputs, then timed (measure/measure.h: method and results);
// failures are data (MeasureResult::error), never a crash of the caller. Runs happen in a worker
// process kept across Run calls of the same task (measure/kept_worker.h), so that its setup (CUDA
// context, the task's reference, the check inputs on the device) is paid once per task, not per
// round: a candidate that crashes or hangs kills only that worker; it is recorded as runtime_error
// / run_timeout and a new worker (with setup) continues with the next candidate. A Run call for
// another task (another workload key) replaces the worker. The caller's process never initializes
// CUDA.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "measure/builder.h"
#include "measure/measure.h"

namespace tilesearch::measure {

/// Where one Run call's measuring time went: the measure phase of a round, split.
struct RunUsage {
  /// The task's data built in the caller's process (check inputs, host references), ms; 0 when
  /// kept from an earlier call of the same task.
  double prepare_ms = 0;
  /// Workers set up in the call (fork, CUDA context, the task's reference, uploads): 0 when the
  /// worker of an earlier call served it, 1 for a new task, more after candidates that ended
  /// their worker. And their wall time, ms.
  int64_t worker_setups = 0;
  double setup_ms = 0;
  /// The candidates' wall time in the worker (load or JIT, check, timing), ms.
  double item_ms = 0;
};

/// Checks and times built candidates of one task on one target.
class Runner {
 public:
  virtual ~Runner() = default;
  /// One result per build, in order. `dag` defines the task (its naive program is the
  /// reference; every candidate's nest must have the same params as ir::LowerNaive(dag)).
  /// Never fails as a whole: errors are per result (a worker that cannot start gives every
  /// remaining candidate kRuntimeError / kNoDevice with the reason).
  /// The worker is forked without exec: call it while no other thread of this process is
  /// inside MLIR / LLVM or holds a lock the workers need (earlier compiles in this process are
  /// fine); a worker that inherits a held lock hangs and is reported as run_timeout. The host
  /// runner JIT-compiles each candidate in the worker under its own run_timeout_ms clock (a
  /// compile over it: kCompileTimeout; a compiler crash: kCompileError).
  virtual std::vector<MeasureResult> Run(const ir::ComputeDAG& dag,
                                         const std::vector<BuildResult>& builds) = 0;
  /// The index into `builds` and its final result, as RunStreaming delivers them.
  using ResultCallback = std::function<void(size_t index, const MeasureResult& result)>;
  /// Run, also calling `on_result` (when given) for each build as soon as its result is final,
  /// in increasing index order, from the calling thread, before returning: a caller can log each
  /// result while later candidates are still measured, so that one worker setup (fork, CUDA
  /// context, the task's reference) serves many candidates without risking their results. The
  /// default calls Run, then `on_result` for each result.
  virtual std::vector<MeasureResult> RunStreaming(const ir::ComputeDAG& dag,
                                                  const std::vector<BuildResult>& builds,
                                                  const ResultCallback& on_result) {
    std::vector<MeasureResult> results = Run(dag, builds);
    if (on_result) {
      for (size_t i = 0; i < results.size(); ++i) on_result(i, results[i]);
    }
    return results;
  }
  virtual const Target& target() const = 0;
  /// Sets up ahead of the first Run of `dag`'s task what that Run would (cuda: the task's check
  /// inputs and references, and a kept worker: fork, CUDA context, uploads, the reference kernel),
  /// so that it can overlap the search and build of a tuner's first round. Optional and silent:
  /// what fails here is set up again, and reported, by the Run. Its time and setups are reported
  /// in the next Run's last_run_usage(). Forks like Run (the same caveat). The default does
  /// nothing.
  virtual void Prepare(const ir::ComputeDAG& dag) { (void)dag; }
  /// Staged timing for the next Run calls: MeasureOptions::screen_above_ms (ms; 0 turns it off).
  /// Runners that do not screen ignore it.
  virtual void SetScreenAboveMs(double ms) { (void)ms; }
  /// Timing of the next Run calls' candidates: at least `min_runs` timed runs and `min_total_ms`
  /// of summed run time (runtime::TimingOptions; the warm-up, flush, run and wall limits stay the
  /// runner's), every candidate timed in full (no staged-timing screen, whatever
  /// SetScreenAboveMs and MeasureOptions::screen_factor say), each after `soak_ms` of untimed
  /// runs (runtime::TimingOptions::soak_ms). min_runs 0 restores the runner's own timing and
  /// screens. Runners without a timing of their own ignore it.
  virtual void SetTiming(int min_runs, double min_total_ms, double soak_ms) {
    (void)min_runs;
    (void)min_total_ms;
    (void)soak_ms;
  }
  /// The split of the last Run / RunStreaming call's time; zeros for runners that do not keep one.
  virtual RunUsage last_run_usage() const { return {}; }
};

/// The runner of `target`: host JIT for cpu, CUDA for cuda; wrapped in a lock on
/// options.device_lock_path (or $TILESEARCH_DEVICE_LOCK) when one is given. Errors:
/// kInvalidArgument for invalid options or a lock file that cannot be opened; for cuda,
/// kFailedPrecondition "no CUDA driver found: ..." when libcuda.so.1 cannot be loaded or no device
/// exists (probed in a short-lived child process, so this process still never initializes CUDA).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Runner>> CreateRunner(
    const Target& target, const MeasureOptions& options = {});
/// The runner of the cpu target, without the device lock. Errors: kInvalidArgument for another
/// target or invalid options.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Runner>> CreateHostRunner(
    const Target& target, const MeasureOptions& options);
/// The runner of a cuda target, without the device lock. Errors: as CreateRunner's for cuda;
/// kInvalidArgument for another target.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Runner>> CreateCudaRunner(
    const Target& target, const MeasureOptions& options);

}  // namespace tilesearch::measure
