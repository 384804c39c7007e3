// `tilesearch tune-graph` and `tilesearch run-graph`: a model layer of examples/models.h
// partitioned into tasks (search/partition.h), tuned with the task scheduler on one log
// (search/task_scheduler.h, search/task_scheduler_tuner.h), and run with the best kernel of every
// task (search/graph_executor.h).
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/interrupt.h"
#include "base/status.h"
#include "examples/models.h"
#include "ir/graph.h"
#include "nlohmann/json.hpp"
#include "search/api.h"
#include "search/graph_executor.h"
#include "search/partition.h"
#include "search/task_scheduler.h"
#include "search/task_scheduler_tuner.h"
#include "tools/commands.h"
#include "tools/distributed.h"
#include "tools/number_text.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

// Options both commands share: which graph, partitioned how, on which target.
struct GraphOptions {
  std::string model;
  int64_t batch = 0;  // 0: the model's default
  bool small = false;
  bool no_fuse = false;
  std::string target = "auto";
  int host_threads = 0;
};

void AddGraphOptions(CLI::App& app, GraphOptions& o) {
  app.add_option("--model", o.model, "the model layer: bert_layer, resnet_block or swiglu_mlp")
      ->required()
      ->check(CLI::IsMember(models::ModelNames()));
  app.add_option("--batch", o.batch,
                 "batch (bert: sequences, resnet: images, swiglu: tokens); default: the model's")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->transform(NumberText(true, "1..4096"));  // runs before the range check
  app.add_flag("--small", o.small, "the tiny version of the model (same structure, test sizes)");
  app.add_flag("--no-fuse", o.no_fuse,
               "one task per operator node (no fusion): every task is a single registry operator");
  app.add_option("--target", o.target, "auto, cpu, cuda or cuda -arch=sm_XX")
      ->capture_default_str();
  app.add_option("--host-threads", o.host_threads,
                 "cpu target: threads running parallel loops, 0..4096 (default 0: every core)")
      ->check(CLI::Range(0, 4096))
      ->transform(NumberText(true, "0..4096"));  // runs before the range check
}

struct LoadedGraph {
  ir::Graph graph;
  search::GraphPartition partition;
  Target target;
};

absl::StatusOr<LoadedGraph> LoadGraph(const GraphOptions& o) {
  LoadedGraph out;
  ASSIGN_OR_RETURN(out.graph, models::BuildModel(o.model, o.batch, o.small));
  ASSIGN_OR_RETURN(out.partition, search::PartitionGraph(out.graph, {.fuse = !o.no_fuse}));
  ASSIGN_OR_RETURN(out.target, TargetFromString(o.target));
  // The search sizes parallel loops by the threads that will run them.
  if (o.host_threads > 0 && !out.target.is_gpu()) out.target.host_cores = o.host_threads;
  return out;
}

void PrintHeader(const GraphOptions& o, const LoadedGraph& g) {
  int ops = 0;
  for (const ir::GraphNode& n : g.graph.nodes()) ops += n.kind == ir::NodeKind::kOp;
  std::cout << "model: " << o.model << (o.small ? " (small)" : "") << ", " << ops
            << " operator nodes, " << g.partition.subgraphs.size() << " subgraphs, "
            << g.partition.tasks.size() << " tasks (" << (o.no_fuse ? "unfused" : "fused") << "), "
            << Sci(g.partition.Flops() * 1e-9) << " GFLOP per execution\n"
            << "target: " << g.target.ToString() << "\n";
}

void PrintTasks(const search::GraphPartition& p) {
  std::cout << absl::StrFormat("%-4s %-28s %6s %12s  %s\n", "task", "name", "weight", "MFLOP/call",
                               "workload key");
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const search::GraphTask& t = p.tasks[i];
    std::cout << absl::StrFormat("%-4d %-28s %6d %12.3f  %s\n", static_cast<int>(i), t.name,
                                 t.weight, t.dag.Flops() * 1e-6, t.workload_key);
  }
}

using nlohmann::json;

json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// The graph's identity in both commands' JSON.
json GraphJson(const GraphOptions& o, const LoadedGraph& g) {
  const int x = g.graph.FindNode("x");
  return {{"model", o.model},
          {"batch", o.batch > 0 ? json(o.batch) : json(nullptr)},
          {"input_shape", x >= 0 ? json(g.graph.node(x).shape) : json(nullptr)},
          {"small", o.small},
          {"fused", !o.no_fuse},
          {"target", g.target.ToString()},
          {"flops", g.partition.Flops()},
          {"subgraphs", g.partition.subgraphs.size()}};
}

// The path as it will be opened: absolute and normalized, symbolic links of the existing part
// resolved (a file that does not exist yet still compares equal to another spelling of it).
std::filesystem::path Normalized(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
  return ec ? std::filesystem::path(path).lexically_normal() : p;
}

// `flag`'s file will be created or overwritten: its directory must exist (checked before any
// tuning or timing, so that a typo does not cost the run) and it must not be a directory.
absl::Status CheckWritablePath(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", path, "' is a directory"));
  }
  const std::filesystem::path dir = Normalized(path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", path, "': directory '", dir.string(), "' does not exist"));
  }
  return absl::OkStatus();
}

// --json must name a new or regular file, in an existing directory, that is not the log (also when
// the log does not exist yet: tune-graph creates it, and the JSON written over it would lose every
// record).
absl::Status CheckJsonPath(const std::string& json_path, const std::string& log) {
  if (json_path.empty()) return absl::OkStatus();
  std::error_code ec;
  const bool same = Normalized(json_path) == Normalized(log) ||
                    (std::filesystem::exists(log, ec) && std::filesystem::exists(json_path, ec) &&
                     std::filesystem::equivalent(json_path, log, ec));
  if (same) {
    return absl::InvalidArgumentError(
        absl::StrCat("--json '", json_path, "' is the tuning log; give another file"));
  }
  return CheckWritablePath("--json", json_path);
}

absl::Status WriteJson(const std::string& path, const json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  out.close();
  if (!out)
    return absl::PermissionDeniedError(absl::StrCat("cannot write --json file '", path, "'"));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// tune-graph

// SIGINT outside the tuner's rounds (search::Tune handles the ones inside: the round in flight is
// finished and logged): between rounds and while the log is restored, the first one asks the
// scheduler to stop before its next round, so the summary and --json are still written; a second
// one ends the process as killed by SIGINT (nothing is being written to the log then).
volatile std::sig_atomic_t g_graph_interrupts = 0;

void OnGraphSigint(int) {
  g_graph_interrupts = g_graph_interrupts + 1;
  if (g_graph_interrupts >= 2) DieOfSigint();
}

// Installs OnGraphSigint for its lifetime (search::Tune installs its own handler during a round
// and restores this one after it).
class GraphSigintGuard {
 public:
  // The count is reset before the handler is installed (the comma expression).
  GraphSigintGuard() : handler_((g_graph_interrupts = 0, OnGraphSigint)) {}
  static bool interrupted() { return g_graph_interrupts > 0; }

 private:
  ScopedSigintHandler handler_;
};

struct TuneGraphOptions {
  GraphOptions graph;
  int64_t trials = 0;
  int per_round = 64;
  std::string log;
  uint64_t seed = 0;
  bool round_robin = false;
  std::string cost_model = "xgboost";
  SearchOverrides search;  // --population, --generations, --crossover-..., --max-family-...
  int per_task_early_stopping = 0;
  FinalSelectionOverrides final_selection;  // --final-candidates, --final-min-time-ms, ...
  bool skip_untunable = false;
  std::string json_path;
  TimingOverrides timing;  // --min-runs, --min-time-ms, --warmup
  bool quiet = false;
};

absl::StatusOr<int> TuneGraph(const TuneGraphOptions& o) {
  if (o.log.empty()) return absl::InvalidArgumentError("--log must name a file");
  RETURN_IF_ERROR(CheckWritablePath("--log", o.log));
  RETURN_IF_ERROR(CheckJsonPath(o.json_path, o.log));
  ASSIGN_OR_RETURN(LoadedGraph g, LoadGraph(o.graph));
  // The tasks the tuner can tune: their workloads, and their indices in the partition.
  const std::vector<search::SchedulerTask> all = search::SchedulerTasksOf(g.partition);
  std::vector<schedule::Workload> workloads;
  std::vector<search::SchedulerTask> tasks;
  std::vector<int> task_index;  // tasks[i] is partition task task_index[i]
  std::vector<std::string> untunable;
  for (size_t i = 0; i < g.partition.tasks.size(); ++i) {
    absl::StatusOr<schedule::Workload> w =
        search::TaskWorkload(g.graph, g.partition, static_cast<int>(i));
    if (!w.ok()) {
      untunable.push_back(std::string(w.status().message()));
      continue;
    }
    workloads.push_back(*std::move(w));
    tasks.push_back(all[i]);
    task_index.push_back(static_cast<int>(i));
  }
  if (!untunable.empty()) {
    if (!o.skip_untunable || workloads.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          untunable.size(), " of ", g.partition.tasks.size(),
          " tasks cannot be tuned: ", absl::StrJoin(untunable, "; "),
          workloads.empty() ? ""
                            : " (--skip-untunable tunes the others; --no-fuse makes every "
                              "task a single operator)"));
    }
  }
  search::TuneOptions tune = TuneOptionsFor(o.log, o.seed, o.cost_model == "xgboost", o.search,
                                            o.timing, o.graph.host_threads, o.quiet);
  o.final_selection.ApplyTo(&tune);
  // Under mpiexec: ranks > 0 serve the rounds rank 0's scheduler hands out, and end here.
  ASSIGN_OR_RETURN(std::optional<int> served, DistributeTuning(tune, g.target));
  if (served) return *served;
  PrintHeader(o.graph, g);
  PrintTasks(g.partition);
  if (!untunable.empty()) {
    std::cout << "not tuned (" << untunable.size()
              << "; the scheduler's task numbers below count the tuned tasks only):\n";
    for (const std::string& why : untunable) std::cout << "  " << why << "\n";
  }

  const GraphSigintGuard sigint;
  ASSIGN_OR_RETURN(std::unique_ptr<search::TunerTaskRunner> runner,
                   search::TunerTaskRunner::Create(workloads, g.target, tune));

  search::TaskSchedulerOptions sched;
  sched.strategy = o.round_robin ? search::AllocationStrategy::kRoundRobin
                                 : search::AllocationStrategy::kGradient;
  sched.trials = o.trials;
  sched.per_round = o.per_round;
  sched.per_task_early_stopping = o.per_task_early_stopping;
  sched.seed = o.seed;
  sched.stop_requested = [] { return GraphSigintGuard::interrupted(); };
  ASSIGN_OR_RETURN(search::TaskSchedulerResult result,
                   search::RunTaskScheduler(tasks, *runner, sched));
  // The final selection of each task (the scheduler's rounds skip it), then the objective again.
  for (size_t i = 0; i < tasks.size() && !result.interrupted; ++i) {
    ASSIGN_OR_RETURN(search::RoundResult final_pick, runner->FinalSelection(static_cast<int>(i)));
    result.tasks[i].best_latency_s = final_pick.best_latency_s;
    result.interrupted = final_pick.interrupted || GraphSigintGuard::interrupted();
  }
  result.objective = search::SchedulerObjective(tasks, result.tasks);

  std::cout << "log: " << o.log << "\n"
            << "strategy: " << (o.round_robin ? "round-robin" : "gradient") << ", "
            << result.rounds.size() << " rounds, " << result.trials << " trials";
  if (result.interrupted) std::cout << ", interrupted";
  if (result.early_stopped) std::cout << ", stopped early";
  std::cout << "\n" << result.ToString(tasks);
  // The allocation in rounds, compactly: which task got each round (w: warm-up, r: random).
  std::cout << "rounds:";
  for (const search::SchedulerRound& r : result.rounds) {
    std::cout << " " << r.task << (r.warmup ? "w" : (r.random ? "r" : ""));
  }
  std::cout << "\n";
  int not_started = 0;
  for (const search::TaskAllocation& a : result.tasks) {
    not_started += a.state == search::TaskState::kNotStarted;
  }
  if (not_started > 0 && !result.interrupted) {
    std::cout << not_started << " of " << tasks.size()
              << " tasks got no trials: the budget ran out before their warm-up round (give "
                 "--trials >= "
              << tasks.size() << " to tune every task; run again on the same log to continue)\n";
  }
  if (!o.json_path.empty()) {
    json j = GraphJson(o.graph, g);
    j["log"] = o.log;
    j["strategy"] = o.round_robin ? "round-robin" : "gradient";
    j["trials"] = result.trials;
    j["objective_ms"] = NumberOrNull(result.objective * 1e3);
    j["interrupted"] = result.interrupted;
    j["tasks"] = json::array();
    for (size_t i = 0; i < tasks.size(); ++i) {
      const search::TaskAllocation& a = result.tasks[i];
      j["tasks"].push_back({{"name", tasks[i].name},
                            {"weight", tasks[i].weight},
                            {"flops", tasks[i].flops},
                            {"partition_task", task_index[i]},
                            {"workload_key", g.partition.tasks[task_index[i]].workload_key},
                            {"trials", a.trials},
                            {"restored_trials", a.restored_trials},
                            {"rounds", a.rounds},
                            {"best_ms", NumberOrNull(a.best_latency_s * 1e3)},
                            {"state", search::TaskStateName(a.state)}});
    }
    j["rounds"] = json::array();
    for (const search::SchedulerRound& r : result.rounds) {
      j["rounds"].push_back({{"task", r.task},
                             {"trials", r.trials},
                             {"total_trials", r.total_trials},
                             {"objective_ms", NumberOrNull(r.objective * 1e3)},
                             {"warmup", r.warmup},
                             {"random", r.random}});
    }
    j["untunable"] = untunable;
    RETURN_IF_ERROR(WriteJson(o.json_path, j));
  }
  if (result.interrupted) {
    std::cerr << "tune-graph: interrupted; every finished round is in " << o.log
              << "; run again with the same log to resume\n";
    return 130;
  }
  return result.dead_tasks.empty() && std::isfinite(result.objective) ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// run-graph

struct RunGraphOptions {
  GraphOptions graph;
  std::string log;
  bool allow_untuned = false;
  std::string check = "auto";
  uint64_t seed = 0x67a9;
  TimingOverrides timing;  // --min-runs, --min-time-ms, --warmup
  bool no_flush = false;
  std::string json_path;
};

// Graphs up to this many FLOPs are checked against the interpreter by default (`check auto`);
// larger ones against the unscheduled kernels (the interpreter runs ~1e7-1e8 operations/s).
constexpr double kInterpreterFlops = 2e8;

absl::StatusOr<int> RunGraph(const RunGraphOptions& o) {
  RETURN_IF_ERROR(CheckJsonPath(o.json_path, o.log));
  ASSIGN_OR_RETURN(LoadedGraph g, LoadGraph(o.graph));
  search::GraphExecutorOptions eo;
  eo.host_threads = o.graph.host_threads;
  eo.allow_untuned = o.allow_untuned;
  ASSIGN_OR_RETURN(std::unique_ptr<search::GraphExecutor> exec,
                   search::GraphExecutor::Create(g.graph, g.partition, o.log, g.target, eo));
  for (const std::string& w : exec->log_warnings()) std::cerr << "warning: " << w << "\n";
  PrintHeader(o.graph, g);
  std::cout << "log: " << o.log << "\n";

  int code = 0;
  json j = GraphJson(o.graph, g);
  j["log"] = o.log;
  j["check"] = nullptr;
  if (o.check != "none") {
    search::GraphCheckOptions co;
    co.seed = o.seed;
    const bool interpreter =
        o.check == "interpreter" || (o.check == "auto" && g.partition.Flops() <= kInterpreterFlops);
    co.reference =
        interpreter ? search::GraphReference::kInterpreter : search::GraphReference::kUnscheduled;
    ASSIGN_OR_RETURN(search::GraphCheck check, exec->Check(co));
    std::cout << "check against the "
              << (check.reference == search::GraphReference::kInterpreter ? "interpreter"
                                                                          : "unscheduled kernels")
              << ": " << (check.passed ? "OK" : "MISMATCH") << " (" << check.report.checked_elements
              << " output elements, max abs error " << Sci(check.report.max_abs_error)
              << ", max rel error " << Sci(check.report.max_rel_error) << ")\n";
    j["check"] = {{"reference", search::GraphReferenceName(check.reference)},
                  {"passed", check.passed},
                  {"elements", check.report.checked_elements},
                  {"mismatches", check.report.mismatches},
                  {"max_abs_error", check.report.max_abs_error},
                  {"max_rel_error", check.report.max_rel_error},
                  {"first_mismatch", check.report.first_mismatch}};
    if (!check.passed) {
      std::cout << "  " << check.report.mismatches
                << " elements outside tolerance; first: " << check.report.first_mismatch << "\n";
      code = 1;
    }
  } else {
    ASSIGN_OR_RETURN(ir::BufferMap unused, exec->Run(ir::MakeRandomGraphInputs(g.graph, o.seed)));
    (void)unused;
  }

  runtime::TimingOptions timing;
  o.timing.ApplyTo(timing);
  timing.flush_cache = !o.no_flush;
  ASSIGN_OR_RETURN(search::GraphTiming t, exec->Time(timing));

  std::cout << absl::StrFormat("%-4s %-28s %6s %-12s %10s %10s %12s %7s\n", "task", "name",
                               "weight", "kernel", "logged ms", "ms/call", "ms/execution", "share");
  double logged_total = 0;
  bool all_tuned = true;
  for (size_t i = 0; i < t.tasks.size(); ++i) {
    const search::ExecutorTask& e = exec->tasks()[i];
    const search::TaskTiming& tt = t.tasks[i];
    const std::string source = e.tuned ? absl::StrCat("trial ", e.trial) : "untuned";
    const std::string logged = e.tuned ? Fixed(e.logged_ms, 4) : "-";
    logged_total += e.weight * e.logged_ms;
    all_tuned = all_tuned && e.tuned;
    std::cout << absl::StrFormat("%-4d %-28s %6d %-12s %10s %10.4f %12.4f %6.1f%%\n",
                                 static_cast<int>(i), tt.name, tt.weight, source, logged,
                                 tt.ms_per_call, tt.total_ms, 100 * tt.share);
  }
  const runtime::TimingStats& e2e = t.end_to_end;
  std::cout << "end-to-end latency: " << Fixed(e2e.median_ms, 4) << " ms median (p10 "
            << Fixed(e2e.p10_ms, 4) << ", p90 " << Fixed(e2e.p90_ms, 4) << ", " << e2e.runs
            << " runs" << (timing.flush_cache ? ", caches flushed before each" : "") << ")\n"
            << "sum of tasks: " << Fixed(t.sum_of_tasks_ms, 4) << " ms";
  if (all_tuned) std::cout << " (log: Σ weight·median " << Fixed(logged_total, 4) << " ms)";
  std::cout << "\n";
  for (const search::ExecutorTask& e : exec->tasks()) {
    if (!e.tuned) std::cout << "untuned: " << e.name << ": " << e.note << "\n";
  }
  if (!o.json_path.empty()) {
    j["end_to_end"] = {{"median_ms", e2e.median_ms},
                       {"p10_ms", e2e.p10_ms},
                       {"p90_ms", e2e.p90_ms},
                       {"runs", e2e.runs},
                       {"flush_cache", timing.flush_cache}};
    j["sum_of_tasks_ms"] = t.sum_of_tasks_ms;
    j["tasks"] = json::array();
    for (size_t i = 0; i < t.tasks.size(); ++i) {
      const search::ExecutorTask& e = exec->tasks()[i];
      const search::TaskTiming& tt = t.tasks[i];
      j["tasks"].push_back({{"name", e.name},
                            {"workload_key", e.workload_key},
                            {"weight", e.weight},
                            {"flops", e.flops},
                            {"tuned", e.tuned},
                            {"trial", e.tuned ? json(e.trial) : json(nullptr)},
                            {"logged_ms", e.tuned ? json(e.logged_ms) : json(nullptr)},
                            {"ms_per_call", tt.ms_per_call},
                            {"ms_per_execution", tt.total_ms},
                            {"share", tt.share},
                            {"kernels", e.num_kernels},
                            {"note", e.note}});
    }
    RETURN_IF_ERROR(WriteJson(o.json_path, j));
  }
  return code;
}

}  // namespace

ExitCodeAction AddTuneGraphCommand(CLI::App& app) {
  auto o = std::make_shared<TuneGraphOptions>();
  AddGraphOptions(app, o->graph);
  app.add_option("--trials", o->trials, "trials of this run over all tasks, 1..10000000")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
      ->transform(NumberText(true, "1..10000000"));  // runs before the range check
  app.add_option("--per-round", o->per_round,
                 "trials per scheduler round, 1..4096 (at most trials / tasks)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096))
      ->transform(NumberText(true, "1..4096"));  // runs before the range check
  app.add_option("--log", o->log, "the tuning log of all tasks (appended to, resumed from)")
      ->required();
  app.add_option("--seed", o->seed, "seed of the scheduler, the search and the model")
      ->capture_default_str();
  app.add_flag("--round-robin", o->round_robin,
               "give rounds to the tasks in turn instead of by the gradient (Ansor §6)");
  app.add_option("--cost-model", o->cost_model, "xgboost or random")
      ->capture_default_str()
      ->check(CLI::IsMember({"xgboost", "random"}));
  AddSearchOptions(app, &o->search);
  AddFinalSelectionOptions(app, &o->final_selection, "each task's");
  app.add_option("--per-task-early-stopping", o->per_task_early_stopping,
                 "stop a task after this many of its rounds without improvement, 0 = off")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000))
      ->transform(NumberText(true, "0..1000000"));  // runs before the range check
  app.add_option("--json", o->json_path,
                 "write the allocation as JSON: tasks (weight, FLOPs, trials, rounds, best ms, "
                 "state) and every round (task, trials, objective ms)");
  app.add_flag("--skip-untunable", o->skip_untunable,
               "tune the tasks the tuner can tune and list the others (default: an error)");
  AddCandidateTimingOptions(app, &o->timing);
  app.add_flag("--quiet", o->quiet, "no progress lines on stderr");
  return [o]() { return TuneGraph(*o); };
}

ExitCodeAction AddRunGraphCommand(CLI::App& app) {
  auto o = std::make_shared<RunGraphOptions>();
  AddGraphOptions(app, o->graph);
  app.add_option("--log", o->log, "the tuning log holding the tasks' records")->required();
  app.add_flag("--allow-untuned", o->allow_untuned,
               "run tasks without a valid record with their unscheduled program");
  app.add_option("--check", o->check,
                 "reference of the output check: interpreter, unscheduled (the untuned kernels "
                 "on the target), none, or auto (interpreter up to 2e8 FLOPs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "interpreter", "unscheduled", "none"}));
  app.add_option("--seed", o->seed, "seed of the check's random inputs")->capture_default_str();
  app.add_option("--min-runs", o->timing.min_runs, "timed runs at least, 1..100000")
      ->check(CLI::Range(1, 100000))
      ->transform(NumberText(true, "1..100000"));  // runs before the range check
  app.add_option("--min-time-ms", o->timing.min_time_ms,
                 "summed time of the timed runs at least, ms")
      ->check(CLI::Range(0.0, 600000.0))
      ->transform(NumberText(false, "0..600000"));  // runs before the range check
  app.add_option("--warmup", o->timing.warmup, "untimed runs before timing, 0..10000")
      ->check(CLI::Range(0, 10000))
      ->transform(NumberText(true, "0..10000"));  // runs before the range check
  app.add_flag("--no-flush", o->no_flush, "do not flush the caches before each timed run");
  app.add_option("--json", o->json_path,
                 "write the check, the end-to-end latency and the per-task breakdown as JSON");
  return [o]() { return RunGraph(*o); };
}

}  // namespace tilesearch::tools
