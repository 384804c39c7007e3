// TaskRunner on the real tuner: each round of a task is one search::Tune call on the shared log,
// asking for the task's logged trials plus the round's. Tune resumes from the log every time (its
// records train the model, their states are never measured again, they count toward its budget),
// so consecutive calls continue one search, all tasks share one log file, and a scheduler run on
// an existing log restores every task's trials and best latency from it (Restore).
//
// Limitation: search::Tune tunes a schedule::Workload, i.e. one operator of the operator
// registry (ir/ops/registry.h), and records the workload in every log record for replay. A graph
// task can be tuned here only when its DAG is exactly one registry operator: TaskWorkload finds
// that workload for a subgraph of one operator node (a dense with its bias and activation
// attributes is one node), and checks that the workload rebuilds the task's DAG (equal workload
// keys). Fused subgraphs of several operators (dense + add + relu, matmul + softmax, ...) need a
// workload form for composed DAGs in records and logs (e.g. the subgraph's nodes and shapes,
// rebuilt with ir::BuildGraphOp as search/partition.cc does) and a Tune entry point taking that
// form.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph.h"
#include "schedule/schedule_file.h"
#include "schedule/target.h"
#include "search/partition.h"
#include "search/task_scheduler.h"
#include "search/tuner.h"

namespace tilesearch::search {

/// The registry workload whose DAG is task `task` of `partition` (a partition of `graph`): its
/// first subgraph must be one operator node whose graph operator is a registry operator; the
/// workload is that operator on the node's input shapes, dtype and attributes.
/// Errors: kOutOfRange for a task index outside the partition; kUnimplemented "task 1
/// ('dense_add_relu') fuses 3 operators; the tuner tunes single registry operators only" for fused
/// subgraphs; kUnimplemented when the rebuilt workload's key differs from the task's (naming both
/// keys); the registry's errors.
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
      std::vector<schedule::Workload> workloads, const schedule::Target& target,
      const TuneOptions& options);

  /// Tune with trials = logged + num_trials. The result's latency is the best valid record's
  /// median (seconds); trials = the records this call measured (0 when the search ran dry).
  /// Errors: those of Tune, and kOutOfRange for a bad task index.
  absl::StatusOr<RoundResult> TuneRound(int task, int num_trials) override;
  /// The task's records of this target in the log (0 and +inf when the log does not exist).
  /// Errors: the log's read errors.
  absl::StatusOr<RoundResult> Restore(int task) override;

  /// The last TuneResult of each task (nullopt before its first round).
  const std::vector<std::optional<TuneResult>>& last_results() const { return last_; }

 private:
  TunerTaskRunner() = default;
  absl::Status CheckTask(int task) const;

  std::vector<schedule::Workload> workloads_;
  std::vector<std::string> keys_;
  schedule::Target target_;
  TuneOptions options_;
  /// Records of each task in the log; -1 until read.
  std::vector<int64_t> logged_;
  std::vector<std::optional<TuneResult>> last_;
};

}  // namespace tilesearch::search
