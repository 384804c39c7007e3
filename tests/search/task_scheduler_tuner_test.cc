// The task scheduler driving the real tuner on the cpu: tasks of a small graph (unfused, so each
// task is one registry operator), one shared log, resume from it; TaskWorkload's registry and
// fused forms.
#include "search/task_scheduler_tuner.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/status.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph.h"
#include "search/log_io.h"
#include "search/partition.h"
#include "search/task_scheduler.h"
#include "tests/search/scratch_dir.h"

namespace tilesearch::search {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

// x[8, 16] → dense(w[16, 16]) → relu: two tasks when unfused, one when fused.
ir::Graph SmallGraph() {
  ir::Graph g;
  ir::Value x = g.Input("x", {8, 16});
  ir::Value w = g.Param("w", {16, 16});
  g.MarkOutput(g.Relu(g.Dense(x, w)));
  return g;
}

// The workloads of the partition's tasks, in order.
absl::StatusOr<std::vector<schedule::Workload>> TaskWorkloads(const ir::Graph& g,
                                                              const GraphPartition& partition) {
  std::vector<schedule::Workload> workloads;
  for (int i = 0; i < static_cast<int>(partition.tasks.size()); ++i) {
    absl::StatusOr<schedule::Workload> w = TaskWorkload(g, partition, i);
    if (!w.ok()) return w.status();
    workloads.push_back(*std::move(w));
  }
  return workloads;
}

TuneOptions SmallTune(const std::string& log) {
  TuneOptions o;
  o.log_path = log;
  o.seed = 3;
  o.use_xgboost = false;  // random model: the fastest rounds
  o.search.population = 32;
  o.search.generations = 1;
  o.search.init_min_population = 8;
  o.measure.timing.min_runs = 3;
  o.measure.timing.min_total_ms = 1;
  o.measure.timing.warmup_runs = 1;
  if (o.measure.timing.max_runs < o.measure.timing.min_runs) {
    o.measure.timing.max_runs = o.measure.timing.min_runs;
  }
  o.measure.host_threads = 1;
  o.model_threads = 1;
  o.quiet = true;
  return o;
}

TEST(TaskWorkloadTest, SingleOperatorTasksMapToRegistryWorkloadsAndFusedOnesToFusedWorkloads) {
  const ir::Graph g = SmallGraph();
  absl::StatusOr<GraphPartition> unfused = PartitionGraph(g, {.fuse = false});
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  ASSERT_EQ(unfused->tasks.size(), 2u);
  absl::StatusOr<schedule::Workload> dense = TaskWorkload(g, *unfused, 0);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->op, "dense");
  EXPECT_EQ(dense->args.shapes, (std::vector<std::vector<int64_t>>{{8, 16}, {16, 16}}));
  absl::StatusOr<ir::ComputeDAG> dag = dense->Build();
  ASSERT_TRUE(dag.ok());
  EXPECT_EQ(dag->WorkloadKey(), unfused->tasks[0].workload_key);
  absl::StatusOr<schedule::Workload> relu = TaskWorkload(g, *unfused, 1);
  ASSERT_TRUE(relu.ok()) << relu.status();
  EXPECT_EQ(relu->op, "relu");

  absl::StatusOr<GraphPartition> fused = PartitionGraph(g);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_EQ(fused->tasks.size(), 1u);
  // The fused task (dense + relu) is a fused workload now (tests/search/fused_workload_test.cc).
  absl::StatusOr<schedule::Workload> dense_relu = TaskWorkload(g, *fused, 0);
  ASSERT_TRUE(dense_relu.ok()) << dense_relu.status();
  EXPECT_EQ(dense_relu->op, "fused");
  EXPECT_EQ(dense_relu->nodes.size(), 2u);
  EXPECT_THAT(TaskWorkload(g, *fused, 1),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("task 1 is not a task")));
}

// SmallGraph partitioned without fusion (its dense and its relu, two tasks) and their workloads.
struct UnfusedTasks {
  GraphPartition partition;
  std::vector<schedule::Workload> workloads;
};
absl::StatusOr<UnfusedTasks> UnfusedSmallGraphTasks() {
  const ir::Graph g = SmallGraph();
  UnfusedTasks out;
  ASSIGN_OR_RETURN(out.partition, PartitionGraph(g, {.fuse = false}));
  ASSIGN_OR_RETURN(out.workloads, TaskWorkloads(g, out.partition));
  return out;
}

TEST(TunerTaskRunnerTest, SchedulesTwoCpuTasksIntoOneLogAndResumesFromIt) {
  const std::string log = tilesearch::testing::ScratchPath("graph.jsonl");
  absl::StatusOr<UnfusedTasks> unfused = UnfusedSmallGraphTasks();
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  const GraphPartition* partition = &unfused->partition;
  const std::vector<schedule::Workload>& workloads = unfused->workloads;
  const std::vector<SchedulerTask> tasks = SchedulerTasksOf(*partition);
  const Target cpu = Target::HostCpu();

  TaskSchedulerOptions options;
  options.trials = 4;
  options.per_round = 2;
  auto run = [&]() -> absl::StatusOr<TaskSchedulerResult> {
    absl::StatusOr<std::unique_ptr<TunerTaskRunner>> runner =
        TunerTaskRunner::Create(workloads, cpu, SmallTune(log));
    if (!runner.ok()) return runner.status();
    return RunTaskScheduler(tasks, **runner, options);
  };
  // The log is the reference: per task, its records and their best median.
  auto check_against_log = [&](const TaskSchedulerResult& r) {
    absl::StatusOr<LogContents> contents = ReadLog(log);
    ASSERT_TRUE(contents.ok()) << contents.status();
    for (int i = 0; i < 2; ++i) {
      int64_t count = 0;
      double best_ms = std::numeric_limits<double>::infinity();
      for (const MeasureRecord& rec : contents->records) {
        if (rec.workload_key != partition->tasks[i].workload_key) continue;
        ++count;
        if (rec.valid()) best_ms = std::min(best_ms, rec.median_ms());
      }
      EXPECT_EQ(count, r.tasks[i].restored_trials + r.tasks[i].trials) << "task " << i;
      ASSERT_TRUE(std::isfinite(best_ms)) << "task " << i << ": no valid record";
      EXPECT_DOUBLE_EQ(r.tasks[i].best_latency_s, best_ms * 1e-3) << "task " << i;
    }
  };

  absl::StatusOr<TaskSchedulerResult> first = run();
  ASSERT_TRUE(first.ok()) << first.status();
  // Both tasks warm up; the relu of 8x16 has only a couple of distinct schedules, so its search
  // may run dry, and the dense then takes the rest of the budget.
  EXPECT_EQ(first->trials, 4);
  EXPECT_TRUE(first->rounds[0].warmup);
  EXPECT_TRUE(first->rounds[1].warmup);
  EXPECT_EQ(first->tasks[0].trials, 4 - first->tasks[1].trials);
  EXPECT_TRUE(first->dead_tasks.empty());
  check_against_log(*first);

  // A second run on the same log restores both tasks (no warm-up) and spends 2 more trials.
  options.trials = 2;
  absl::StatusOr<TaskSchedulerResult> second = run();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->trials, 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(second->tasks[i].restored_trials, first->tasks[i].trials) << "task " << i;
  }
  for (const SchedulerRound& round : second->rounds) EXPECT_FALSE(round.warmup);
  check_against_log(*second);
}

// The scheduler's rounds never run the final selection (each is a Tune call); FinalSelection does,
// once per task, without a new trial: the task's fastest schedules get remeasured records timed
// with the final timing, and the latency it returns is the log's best after them.
TEST(TunerTaskRunnerTest, FinalSelectionTimesEachTasksFastestAgainWithoutNewTrials) {
  const std::string log = tilesearch::testing::ScratchPath("graph_final.jsonl");
  absl::StatusOr<UnfusedTasks> unfused = UnfusedSmallGraphTasks();
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  const GraphPartition* partition = &unfused->partition;
  const std::vector<schedule::Workload>& workloads = unfused->workloads;
  TuneOptions tune = SmallTune(log);
  // The rounds time 3 runs at most; the final timing at least 5.
  tune.measure.timing.min_total_ms = 0;
  tune.measure.timing.max_runs = 3;
  tune.final_candidates = 2;
  tune.final_min_runs = 5;
  tune.final_min_total_ms = 0;
  absl::StatusOr<std::unique_ptr<TunerTaskRunner>> runner =
      TunerTaskRunner::Create(workloads, Target::HostCpu(), tune);
  ASSERT_TRUE(runner.ok()) << runner.status();
  TaskSchedulerOptions options;
  options.trials = 6;
  options.per_round = 3;
  absl::StatusOr<TaskSchedulerResult> result =
      RunTaskScheduler(SchedulerTasksOf(*partition), **runner, options);
  ASSERT_TRUE(result.ok()) << result.status();
  auto remeasured = [&](int task) {
    absl::StatusOr<LogContents> contents = ReadLog(log);
    EXPECT_TRUE(contents.ok()) << contents.status();
    int64_t n = 0;
    for (const MeasureRecord& r : contents->records) {
      if (r.workload_key != partition->tasks[task].workload_key || !r.remeasured) continue;
      ++n;
      EXPECT_GE(r.result.timing.runs, 5) << "task " << task << " trial " << r.trial;
    }
    return n;
  };
  for (int i = 0; i < 2; ++i) EXPECT_EQ(remeasured(i), 0) << "task " << i;

  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<RoundResult> final_pick = (*runner)->FinalSelection(i);
    ASSERT_TRUE(final_pick.ok()) << final_pick.status();
    EXPECT_EQ(final_pick->trials, 0);
    const std::optional<TuneResult>& last = (*runner)->last_results()[i];
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ(last->new_trials, 0) << "task " << i;
    EXPECT_EQ(last->trials, result->tasks[i].trials) << "task " << i;
    EXPECT_GE(last->final_timed, 1) << "task " << i;
    EXPECT_EQ(remeasured(i), last->final_timed) << "task " << i;
    ASSERT_TRUE(last->best.has_value());
    EXPECT_DOUBLE_EQ(final_pick->best_latency_s, last->best->median_ms() * 1e-3);
  }
  EXPECT_THAT((*runner)->FinalSelection(2).status(),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("task 2")));
}

}  // namespace
}  // namespace tilesearch::search
