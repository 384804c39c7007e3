// The task scheduler: how a trial budget is split among the tasks of a graph (Ansor, OSDI'20, §6
// and Appendix A; TVM python/tvm/auto_scheduler/task_scheduler.py, GradientScheduler).
//
// The objective is f = Σ_i w_i · g_i, where g_i is task i's best latency so far (seconds) and w_i
// its weight (how often its kernel runs per graph execution). Tuning happens in rounds: a round
// runs one task's search for up to `per_round` trials through a TaskRunner. The gradient
// strategy first gives every task one warm-up round, then repeatedly gives the next round to the
// task with the steepest expected decrease of f:
//
//   ∂f/∂t_i ≈ w_i · (α·backward_i + (1−α)·forward_i)                       (Ansor eq. 2)
//   backward_i = (g_i(t) − g_i(t − W)) / W                  over the last W rounds (0 if fewer)
//   forward_i  = min(g_i − g_i / t_i, β · C_i / max_{j∈N(i)} V_j) − g_i
//
// t_i counts task i's rounds, C_i its FLOPs, V_j = C_j / g_j the throughput of task j and N(i)
// the similarity group of i (tasks with equal SchedulerTask::similarity_tag; the β term is
// dropped when i has no group). The task with the most negative estimate gets the round; with
// probability `eps_greedy` (and whenever all estimates are equal) a uniformly random schedulable
// task gets it instead (the paper's ε-greedy; TVM's code randomizes only on ties). A task that
// cannot match its group's best throughput within a factor β after more than 5 rounds beyond the
// others of its group leaves the group (TVM _adjust_similarity_group).
//
// A task stops being scheduled when its warm-up round found no valid schedule (dead, reported),
// when its search space is exhausted (a round measured nothing), or when it has gone
// `per_task_early_stopping` rounds without improving (early stop). The round-robin strategy
// cycles through the schedulable tasks instead (TVM strategy="round-robin"), for comparison.
//
// The scheduler does not tune anything itself: TaskRunner is the seam between it and a tuner
// (search/task_scheduler_tuner.h adapts search::Tune; tests use fakes with known latency curves).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "search/partition.h"

namespace tilesearch::search {

/// What a task's rounds have produced so far, as a TaskRunner reports it.
struct RoundResult {
  /// The task's best latency over all its trials so far (seconds); +inf while none is valid.
  double best_latency_s = std::numeric_limits<double>::infinity();
  /// Trials measured by the call (TuneRound: 0 means the task's search space is exhausted;
  /// Restore: trials already in the log).
  int64_t trials = 0;
  /// True when the run was interrupted (SIGINT): the scheduler stops after this round.
  bool interrupted = false;
};

/// Tunes tasks one round at a time. Tasks are numbered 0..n-1 in the order given to
/// RunTaskScheduler.
class TaskRunner {
 public:
  virtual ~TaskRunner() = default;
  /// Runs one search round of `task`, measuring at most `num_trials` (≥ 1) new trials, and
  /// returns the task's best latency after the round and the trials measured. Measuring more than
  /// `num_trials` is a contract violation (RunTaskScheduler returns kInternal). Errors end the
  /// whole schedule.
  virtual absl::StatusOr<RoundResult> TuneRound(int task, int num_trials) = 0;
  /// What earlier runs left for `task` (resume): trials already measured and their best latency.
  /// Called once per task before any round. Default: nothing (0 trials, +inf).
  virtual absl::StatusOr<RoundResult> Restore(int task);
};

/// One task as the scheduler sees it.
struct SchedulerTask {
  /// For reports only.
  std::string name;
  /// w_i: how often the task's kernel runs per graph execution (> 0).
  double weight = 1;
  /// C_i: floating-point operations of one run of the task (≥ 0; only the similarity term uses it).
  double flops = 0;
  /// Tasks with equal non-empty tags form a similarity group (SimilarityTag); empty: no group.
  std::string similarity_tag;
};

enum class AllocationStrategy {
  kGradient,    // warm-up, then the steepest expected decrease of the objective (Ansor §6)
  kRoundRobin,  // warm-up, then the schedulable tasks in turn
};

/// Options of RunTaskScheduler; defaults are TVM's GradientScheduler defaults.
struct TaskSchedulerOptions {
  AllocationStrategy strategy = AllocationStrategy::kGradient;
  /// Total trials of this run over all tasks (≥ 1); trials restored from a log do not count (as in
  /// TVM). The run never measures more than this.
  int64_t trials = 0;
  /// Trials per round (TVM num_measures_per_round). The effective value is
  /// min(per_round, max(1, trials / number of tasks)), as in TVM.
  int per_round = 64;
  /// Weight of the backward (observed) gradient against the forward (predicted) one, in [0, 1].
  double alpha = 0.2;
  /// Similarity term: a task is expected to reach 1/β of its group's best throughput (> 0).
  double beta = 2;
  /// Rounds over which the backward gradient is taken (≥ 1).
  int backward_window_size = 3;
  /// Probability of giving a round to a uniformly random schedulable task (gradient strategy
  /// only), in [0, 1].
  double eps_greedy = 0.05;
  /// A task stops after this many of its rounds in a row without improving its best latency;
  /// 0 = off (TVM's default; TVM counts trials, here rounds).
  int per_task_early_stopping = 0;
  /// The run stops once this many trials in a row have not improved the objective (TVM
  /// TuningOptions.early_stopping; only after every task has a valid schedule); 0 = off.
  int64_t early_stopping = 0;
  /// Seeds the ε-greedy and tie-breaking draws.
  uint64_t seed = 0;
  /// Asked before every round (null: never): true ends the run as an interrupt does
  /// (TaskSchedulerResult::interrupted), without starting the round. For a SIGINT that arrives
  /// between rounds, outside the runner's own interrupt handling (tools/cmd_graph.cc).
  std::function<bool()> stop_requested;
};

/// Why a task is no longer scheduled.
enum class TaskState {
  kActive,        // schedulable (at the end: the budget ran out first)
  kNotStarted,    // the budget ran out before its warm-up round
  kDead,          // its warm-up found no valid schedule
  kExhausted,     // a round measured no new trial
  kEarlyStopped,  // per_task_early_stopping rounds without improvement
};
/// "active", "not_started", "dead", "exhausted", "early_stopped".
const char* TaskStateName(TaskState state);

/// One task's share of the run.
struct TaskAllocation {
  /// Trials measured in this run (restored ones excluded).
  int64_t trials = 0;
  /// Trials restored from earlier runs (TaskRunner::Restore).
  int64_t restored_trials = 0;
  /// Rounds run in this run, warm-up included.
  int rounds = 0;
  /// Best latency at the end (seconds); +inf if none is valid.
  double best_latency_s = std::numeric_limits<double>::infinity();
  TaskState state = TaskState::kActive;
};

/// One round of the run.
struct SchedulerRound {
  int task = -1;
  /// Trials this round measured.
  int64_t trials = 0;
  /// Trials of the run so far, this round included.
  int64_t total_trials = 0;
  /// The objective after the round (seconds; see TaskSchedulerResult::objective).
  double objective = std::numeric_limits<double>::infinity();
  bool warmup = false;
  /// The task was drawn at random (ε-greedy or a tie) rather than by the gradient.
  bool random = false;
};

/// What RunTaskScheduler did.
struct TaskSchedulerResult {
  /// Per task, in the order given.
  std::vector<TaskAllocation> tasks;
  /// Every round in order: the objective history.
  std::vector<SchedulerRound> rounds;
  /// Tasks whose warm-up found no valid schedule, ascending. They are excluded from the objective.
  std::vector<int> dead_tasks;
  /// Trials measured in this run (≤ options.trials).
  int64_t trials = 0;
  /// Σ weight · best latency (seconds) over the tasks that are not dead; +inf while one of them
  /// has no valid schedule (e.g. not started).
  double objective = std::numeric_limits<double>::infinity();
  /// The runner reported an interrupt.
  bool interrupted = false;
  /// options.early_stopping ended the run.
  bool early_stopped = false;

  /// A table, one line per task: index, name, weight, trials (+restored), rounds, best latency
  /// (ms), weighted latency (ms), state; then the objective and the dead tasks.
  std::string ToString(const std::vector<SchedulerTask>& tasks) const;
};

/// Runs the schedule (algorithm in the file comment) until options.trials trials are measured,
/// no task is schedulable, early stopping triggers or the runner reports an interrupt.
/// Errors: kInvalidArgument for no tasks, a weight that is not positive and finite, negative or
/// non-finite flops, trials < 1, per_round < 1, alpha outside [0, 1], beta ≤ 0,
/// backward_window_size < 1, eps_greedy outside [0, 1], negative early-stopping values; kInternal
/// when the runner measures more than it was asked or reports a NaN or negative latency; the
/// runner's errors, prefixed "task 2 ('dense_relu'): ".
[[nodiscard]] absl::StatusOr<TaskSchedulerResult> RunTaskScheduler(
    const std::vector<SchedulerTask>& tasks, TaskRunner& runner,
    const TaskSchedulerOptions& options);

/// TaskSchedulerResult::objective of `allocations` (one per task of `tasks`, in order): Σ weight ·
/// best_latency_s over the tasks that are not dead, seconds; +inf while one of them has no valid
/// schedule. For a result whose latencies changed after the run (a final selection per task).
double SchedulerObjective(const std::vector<SchedulerTask>& tasks,
                          const std::vector<TaskAllocation>& allocations);

/// A similarity tag in the manner of TVM's derive_similarity_tag: the distinct tags of the DAG's
/// reduction stages joined by '_', then '_' and int(log_1.618(FLOPs + 1)); "" for a DAG without
/// reductions (no group). TVM tags only operators that opt in; here every reduction's operator
/// (the anchor: matmul, conv2d, softmax, ...) names the group, so tasks of one operator kind
/// within a factor 1.618 of FLOPs share a group.
std::string SimilarityTag(const ir::ComputeDAG& dag);

/// The scheduler's view of a partition's tasks: name, weight, dag.Flops(), SimilarityTag(dag).
std::vector<SchedulerTask> SchedulerTasksOf(const GraphPartition& partition);

}  // namespace tilesearch::search
