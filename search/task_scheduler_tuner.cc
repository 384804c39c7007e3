#include "search/task_scheduler_tuner.h"

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ops/registry.h"
#include "schedule/fused_workload.h"
#include "search/log_io.h"

namespace tilesearch::search {

namespace {

// The registry workload of a single-node subgraph (nullopt when the node's operator is not a
// registry operator or its registry DAG is not the task's).
std::optional<schedule::Workload> RegistryWorkload(const ir::Graph& graph, const Subgraph& sub,
                                                   const std::string& key) {
  if (sub.nodes.size() != 1) return std::nullopt;
  const ir::GraphNode& node = graph.node(sub.nodes.front());
  if (!ir::FindOp(node.op).ok()) return std::nullopt;
  schedule::Workload w;
  w.op = node.op;
  for (int input : node.inputs) w.args.shapes.push_back(graph.node(input).shape);
  w.args.dtype = node.inputs.empty() ? node.dtype : graph.node(node.inputs.front()).dtype;
  w.args.attrs = node.attrs;
  absl::StatusOr<ir::ComputeDAG> dag = w.Build();
  if (!dag.ok() || dag->WorkloadKey() != key) return std::nullopt;
  return w;
}

}  // namespace

absl::StatusOr<schedule::Workload> TaskWorkload(const ir::Graph& graph,
                                                const GraphPartition& partition, int task) {
  if (task < 0 || task >= static_cast<int>(partition.tasks.size())) {
    return absl::OutOfRangeError(absl::StrCat("task ", task, " is not a task of the partition (",
                                              partition.tasks.size(), " tasks)"));
  }
  const GraphTask& t = partition.tasks[task];
  CHECK(!t.subgraphs.empty()) << "task " << task << " has no subgraph";
  const Subgraph& sub = partition.subgraphs[t.subgraphs.front()];
  if (std::optional<schedule::Workload> w = RegistryWorkload(graph, sub, t.workload_key)) {
    return *std::move(w);
  }

  // The fused form: placeholders in Subgraph::inputs order, nodes in graph (topological) order.
  CHECK(!sub.nodes.empty() && sub.nodes.back() == sub.output)
      << "task " << task << ": the subgraph's output is not its last node";
  schedule::Workload w;
  w.op = schedule::kFusedWorkloadOp;
  std::map<int, schedule::FusedOperand> operand_of;
  for (size_t i = 0; i < sub.inputs.size(); ++i) {
    const ir::GraphNode& in = graph.node(sub.inputs[i]);
    if (i == 0) {
      w.args.dtype = in.dtype;
    } else if (in.dtype != w.args.dtype) {
      return absl::UnimplementedError(
          absl::StrCat("task ", task, " ('", t.name, "') reads ", ir::TypeName(w.args.dtype),
                       " and ", ir::TypeName(in.dtype), " inputs; a fused workload has one dtype"));
    }
    w.args.shapes.push_back(in.shape);
    operand_of[sub.inputs[i]] = schedule::FusedOperand{false, static_cast<int>(i)};
  }
  for (size_t k = 0; k < sub.nodes.size(); ++k) {
    const ir::GraphNode& node = graph.node(sub.nodes[k]);
    schedule::FusedNode n;
    n.op = node.op;
    n.attrs = node.attrs;
    for (int in : node.inputs) {
      auto it = operand_of.find(in);
      CHECK(it != operand_of.end()) << "task " << task << ": node %" << node.id << " reads %" << in
                                    << ", neither a subgraph input nor an earlier node";
      n.inputs.push_back(it->second);
    }
    w.nodes.push_back(std::move(n));
    operand_of[sub.nodes[k]] = schedule::FusedOperand{true, static_cast<int>(k)};
  }
  absl::StatusOr<ir::ComputeDAG> dag = w.Build();
  if (!dag.ok()) {
    return absl::Status(
        dag.status().code(),
        absl::StrCat("task ", task, " ('", t.name, "'): ", std::string(dag.status().message())));
  }
  if (dag->WorkloadKey() != t.workload_key) {
    return absl::UnimplementedError(absl::StrCat(
        "task ", task, " ('", t.name, "'): the fused workload ", w.ToString(),
        " builds workload key ", dag->WorkloadKey(), ", not the task's ", t.workload_key));
  }
  return w;
}

absl::StatusOr<std::unique_ptr<TunerTaskRunner>> TunerTaskRunner::Create(
    std::vector<schedule::Workload> workloads, const Target& target, const TuneOptions& options) {
  if (workloads.empty())
    return absl::InvalidArgumentError("the tuner runner needs at least one task");
  if (options.log_path.empty()) return absl::InvalidArgumentError("a tuning log path is required");
  std::unique_ptr<TunerTaskRunner> runner(new TunerTaskRunner());
  for (size_t i = 0; i < workloads.size(); ++i) {
    absl::StatusOr<ir::ComputeDAG> dag = workloads[i].Build();
    if (!dag.ok()) {
      return absl::Status(dag.status().code(),
                          absl::StrCat("task ", i, ": ", std::string(dag.status().message())));
    }
    runner->keys_.push_back(dag->WorkloadKey());
  }
  runner->workloads_ = std::move(workloads);
  runner->target_ = target;
  runner->options_ = options;
  runner->options_.early_stopping = 0;
  // Each scheduler round is a Tune call: re-measuring there, or a final selection, would repeat
  // every round.
  runner->options_.remeasure_best = 0;
  runner->final_candidates_ = ResolveTuneOptions(options, target).final_candidates;
  runner->options_.final_candidates = 0;
  runner->final_soak_ms_ = options.final_soak_ms;
  runner->options_.final_soak_ms = 0;  // the rounds have no final selection to soak for
  runner->logged_.assign(runner->workloads_.size(), -1);
  runner->last_.resize(runner->workloads_.size());
  return runner;
}

absl::Status TunerTaskRunner::CheckTask(int task) const {
  if (task < 0 || task >= static_cast<int>(workloads_.size())) {
    return absl::OutOfRangeError(absl::StrCat("task ", task, " is not a task of the runner (",
                                              workloads_.size(), " tasks)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RoundResult> TunerTaskRunner::Restore(int task) {
  RETURN_IF_ERROR(CheckTask(task));
  RoundResult r;
  ReadOptions read;
  read.target = target_;
  read.workload_key = keys_[task];
  read.verify_workload_keys = true;  // the records Tune itself would resume from
  read.warn_other_targets = false;
  absl::StatusOr<LogContents> log = ReadLog(options_.log_path, read);
  if (!log.ok()) {
    if (log.status().code() != absl::StatusCode::kNotFound) return log.status();
    logged_[task] = 0;
    return r;
  }
  logged_[task] = static_cast<int64_t>(log->records.size());
  r.trials = logged_[task];
  absl::StatusOr<MeasureRecord> best = BestRecord(log->records, keys_[task], target_);
  if (best.ok()) r.best_latency_s = best->median_ms() * 1e-3;
  return r;
}

absl::StatusOr<RoundResult> TunerTaskRunner::TuneRound(int task, int num_trials) {
  RETURN_IF_ERROR(CheckTask(task));
  if (num_trials < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a round needs >= 1 trials, got ", num_trials));
  }
  if (logged_[task] < 0) RETURN_IF_ERROR(Restore(task).status());
  TuneOptions o = options_;
  o.trials = static_cast<int>(logged_[task] + num_trials);
  o.per_round = num_trials;
  ASSIGN_OR_RETURN(TuneResult tuned, Tune(workloads_[task], target_, o));
  logged_[task] = tuned.trials;
  RoundResult r;
  r.trials = tuned.new_trials;
  r.interrupted = tuned.interrupted;
  if (tuned.best.has_value()) r.best_latency_s = tuned.best->median_ms() * 1e-3;
  last_[task] = std::move(tuned);
  return r;
}

absl::StatusOr<RoundResult> TunerTaskRunner::FinalSelection(int task) {
  RETURN_IF_ERROR(CheckTask(task));
  if (logged_[task] < 0) RETURN_IF_ERROR(Restore(task).status());
  if (final_candidates_ <= 0 || logged_[task] < 1) {
    ASSIGN_OR_RETURN(RoundResult r, Restore(task));
    r.trials = 0;
    return r;
  }
  TuneOptions o = options_;
  o.trials = static_cast<int>(logged_[task]);  // no new trial: straight to the final selection
  o.final_candidates = final_candidates_;
  o.final_soak_ms = final_soak_ms_;
  ASSIGN_OR_RETURN(TuneResult tuned, Tune(workloads_[task], target_, o));
  RoundResult r;
  r.interrupted = tuned.interrupted;
  if (tuned.best.has_value()) r.best_latency_s = tuned.best->median_ms() * 1e-3;
  last_[task] = std::move(tuned);
  return r;
}

}  // namespace tilesearch::search
