// TaskRunner on the real tuner: each round of a task is one search::Tune call on the shared log,
// asking for the task's logged trials plus the round's. Tune resumes from the log every time (its
// records train the model, their states are never measured again, they count toward its budget),
// so consecutive calls continue one search, all tasks share one log file, and a scheduler run on
// an existing log restores every task's trials and best latency from it (Restore).
//
// Workloads: search::Tune tunes a schedule::Workload and records it in every log record for
// replay. TaskWorkload names each task's DAG as one: a subgraph of one operator node whose graph
// operator is a registry operator keeps the registry form (op + shapes + attributes, as logs of
// single operators have always named it); every other subgraph (dense + add + relu, layernorm +
// add, a lone reshape, ...) becomes a fused workload (schedule/fused_workload.h) listing the
// subgraph's nodes on placeholders in kernel argument order. Both rebuild the task's DAG exactly
// (equal workload keys, checked).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/graph.h"
#include "schedule/schedule_file.h"
#include "search/partition.h"
#include "search/task_scheduler.h"
#include "search/tuner.h"

namespace tilesearch::search {

/// The workload whose DAG is task `task` of `partition` (a partition of `graph`), from its first
/// subgraph: the registry form when the subgraph is one operator node of a registry operator whose
/// workload rebuilds the task's DAG, else the fused form (op "fused"): the subgraph's nodes in
/// graph order, operands "p<I>" for the subgraph's inputs (Subgraph::inputs order, which is the
/// DAG's input_ids() order, so kernel argument I binds Subgraph::inputs[I]) and "n<K>" for its
/// earlier nodes; placeholder shapes and dtype from the graph.
/// Errors: kOutOfRange for a task index outside the partition; kUnimplemented when the subgraph's
/// inputs have different dtypes (a fused workload has one dtype), or when the workload's key
/// differs from the task's (naming both keys); the fused workload's build errors.
absl::StatusOr<schedule::Workload> TaskWorkload(const ir::Graph& graph,
                                                const GraphPartition& partition, int task);

/// One round = one search::Tune call (see the file comment).
class TunerTaskRunner : public TaskRunner {
 public:
  /// `workloads[i]` is task i. `options` are used for every round, except: trials (logged trials
  /// + the round's), per_round (the round's trials) and early_stopping (0: the scheduler stops
  /// tasks itself). options.log_path is the one log of all tasks (required).
  /// Errors: kInvalidArgument for no workloads or an empty log path; each workload's build errors
  /// ("task 1: <error>").
  static absl::StatusOr<std::unique_ptr<TunerTaskRunner>> Create(
      std::vector<schedule::Workload> workloads, const Target& target, const TuneOptions& options);

  /// Tune with trials = logged + num_trials. The result's latency is the best valid record's
  /// median (seconds); trials = the records this call measured (0 when the search ran dry).
  /// Errors: those of Tune, and kOutOfRange for a bad task index.
  absl::StatusOr<RoundResult> TuneRound(int task, int num_trials) override;
  /// The task's records of this target in the log (0 and +inf when the log does not exist).
  /// Errors: the log's read errors.
  absl::StatusOr<RoundResult> Restore(int task) override;

  /// The final selection (TuneOptions::final_candidates, resolved for the target; the rounds skip
  /// it, each being a Tune call) of a task once the scheduler is done: a Tune call with no new
  /// trial. The result's latency is the task's best after it, trials 0, interrupted when a
  /// SIGINT stopped it; a task with no record, or with the selection off, is left alone. Errors:
  /// those of Tune and Restore, kOutOfRange for a bad task index.
  absl::StatusOr<RoundResult> FinalSelection(int task);

  /// The last TuneResult of each task (nullopt before its first round).
  const std::vector<std::optional<TuneResult>>& last_results() const { return last_; }

 private:
  TunerTaskRunner() = default;
  absl::Status CheckTask(int task) const;

  std::vector<schedule::Workload> workloads_;
  std::vector<std::string> keys_;
  Target target_;
  TuneOptions options_;
  /// The final selection's candidates per task (FinalSelection); 0 = none.
  int final_candidates_ = 0;
  double final_soak_ms_ = 0;  // the options' final_soak_ms, for FinalSelection only
  /// Records of each task in the log; -1 until read.
  std::vector<int64_t> logged_;
  std::vector<std::optional<TuneResult>> last_;
};

}  // namespace tilesearch::search
