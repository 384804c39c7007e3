// Tunes a model layer end to end: builds it with the graph API (examples/models.h), partitions it
// into tasks, spends the trial budget across the tasks with the task scheduler (Ansor §6) on one
// tuning log, then runs the whole graph with each task's best kernel, checks its output against
// the reference and prints the end-to-end latency with the per-task breakdown.
//
//   tune_graph MODEL [--small] [--no-fuse] [--trials N] [--log FILE] [--target T] [--fresh]
//              [--fast]
//   MODEL: bert_layer, resnet_block or swiglu_mlp. Defaults: 64 trials, tune_graph.jsonl, auto.
//   --no-fuse: one task per operator node instead of Ansor-style fused subgraphs.
//   --fresh: remove the log first (otherwise a second run resumes it).
//   --fast: a small search (random model, population 32) and short timing: a smoke test.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "examples/models.h"
#include "search/api.h"
#include "search/graph_executor.h"
#include "search/partition.h"
#include "search/task_scheduler.h"
#include "search/task_scheduler_tuner.h"

namespace {

template <typename T>
T Must(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(value.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(value);
}

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: tune_graph bert_layer|resnet_block|swiglu_mlp [--small] [--no-fuse] "
               "[--trials N] [--log FILE] [--target T] [--fresh] [--fast]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tilesearch;
  if (argc < 2) Usage();
  const std::string model = argv[1];
  bool small = false, fuse = true, fresh = false, fast = false;
  int64_t trials = 64;
  std::string log = "tune_graph.jsonl", target_text = "auto";
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--small") {
      small = true;
    } else if (arg == "--no-fuse") {
      fuse = false;
    } else if (arg == "--fresh") {
      fresh = true;
    } else if (arg == "--fast") {
      fast = true;
    } else if (arg == "--trials" && has_value) {
      char* end = nullptr;
      errno = 0;
      trials = std::strtoll(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || errno == ERANGE || trials < 1 || trials > 10000000) {
        std::fprintf(stderr, "error: --trials must be an integer in 1..10000000, got '%s'\n",
                     argv[i]);
        std::exit(2);
      }
    } else if (arg == "--log" && has_value) {
      log = argv[++i];
    } else if (arg == "--target" && has_value) {
      target_text = argv[++i];
    } else {
      Usage();
    }
  }
  if (fresh) {
    // Only a log file is removed (never a directory); the error_code form does not throw.
    std::error_code ec;
    if (std::filesystem::is_directory(log, ec)) {
      std::fprintf(stderr, "error: --log '%s' is a directory; --fresh removes a log file only\n",
                   log.c_str());
      return 2;
    }
    if (!std::filesystem::remove(log, ec) && ec) {
      std::fprintf(stderr, "error: --fresh: cannot remove '%s': %s\n", log.c_str(),
                   ec.message().c_str());
      return 2;
    }
  }

  const ir::Graph graph = Must(models::BuildModel(model, /*batch=*/0, small));
  const search::GraphPartition partition = Must(search::PartitionGraph(graph, {.fuse = fuse}));
  const Target target = Must(TargetFromString(target_text));
  std::cout << model << " on " << target.ToString() << ": " << partition.tasks.size() << " tasks\n";

  // One workload per task: a registry operator, or a fused subgraph of graph operators.
  std::vector<schedule::Workload> workloads;
  for (size_t i = 0; i < partition.tasks.size(); ++i) {
    workloads.push_back(Must(search::TaskWorkload(graph, partition, static_cast<int>(i))));
  }
  search::TuneOptions tune;
  tune.log_path = log;
  tune.quiet = true;
  runtime::TimingOptions timing;  // of the trials and of the graph
  if (fast) {
    tune.use_xgboost = false;
    tune.search.population = 32;
    tune.search.generations = 1;
    tune.search.init_min_population = 8;
    timing = {.warmup_runs = 1, .min_runs = 3, .min_total_ms = 1, .max_runs = 3};
    tune.measure.timing = timing;
  }
  auto runner = Must(search::TunerTaskRunner::Create(workloads, target, tune));
  search::TaskSchedulerOptions options;
  options.trials = trials;
  const std::vector<search::SchedulerTask> tasks = search::SchedulerTasksOf(partition);
  const search::TaskSchedulerResult result =
      Must(search::RunTaskScheduler(tasks, *runner, options));
  std::cout << result.ToString(tasks);
  if (result.interrupted) {
    std::cout << "interrupted: every finished round is in " << log
              << "; run again with the same log to resume\n";
    return 130;
  }

  // Every task's best kernel, compiled once; the graph checked and timed. Tasks the budget did
  // not reach run their unscheduled program (said below) instead of failing the run.
  search::GraphExecutorOptions executor_options;
  for (const search::TaskAllocation& a : result.tasks) {
    executor_options.allow_untuned |= a.state == search::TaskState::kNotStarted;
  }
  auto executor =
      Must(search::GraphExecutor::Create(graph, partition, log, target, executor_options));
  for (const search::ExecutorTask& t : executor->tasks()) {
    if (!t.tuned) std::cout << "untuned: " << t.name << ": " << t.note << "\n";
  }
  // The interpreter is exact but slow: big graphs are compared with their unscheduled kernels.
  search::GraphCheckOptions check_options;
  if (partition.Flops() > 2e8) check_options.reference = search::GraphReference::kUnscheduled;
  const search::GraphCheck check = Must(executor->Check(check_options));
  std::cout << "check against the "
            << (check.reference == search::GraphReference::kInterpreter ? "interpreter"
                                                                        : "unscheduled kernels")
            << ": " << (check.passed ? "OK" : "MISMATCH") << " (max abs error "
            << check.report.max_abs_error << ")\n";
  std::cout << Must(executor->Time(timing)).ToString();
  return check.passed ? 0 : 1;
}
