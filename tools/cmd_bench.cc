// `tilesearch bench`: every problem of one or more benchmark suites (tools/suite.h) tuned
// on one target with search::Tune, each into its own log <log-dir>/<problem>.jsonl (resumed), and
// its best record replayed into kernel artifacts named after the problem (search/replay.h), which
// bench/harness/score.py looks up by problem name. One problem's failure (a workload that does not
// build, no valid record, a failed re-check) is reported for that problem and the others still
// run.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/interrupt.h"
#include "base/status.h"
#include "costmodel/xgboost_model.h"
#include "ir/compute_dag.h"
#include "measure/measure.h"
#include "nlohmann/json.hpp"
#include "schedule/schedule_file.h"
#include "search/log_io.h"
#include "search/replay.h"
#include "search/tuner.h"
#include "tools/commands.h"
#include "tools/distributed.h"
#include "tools/model_options.h"
#include "tools/number_text.h"
#include "tools/suite.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

using json = nlohmann::json;

struct BenchCommandOptions {
  std::vector<std::string> suites;
  std::string problems;  // comma-separated subset; "" = all
  bool skip_small = false;
  std::string target = "auto";
  int trials = 64;
  int per_round = 0;  // the target's choice (search::ResolveTuneOptions)
  int remeasure = 0;  // --remeasure: each problem's N fastest logged schedules measured again first
  FinalSelectionOverrides final_selection;  // --final-candidates, --final-min-time-ms, ...
  std::string model = "xgboost";
  std::string model_init;  // --model-init PATH | none; "" = the target's default model, if any
  uint64_t seed = 0;
  std::string log_dir;
  std::string out;
  std::string json_path;
  double time_limit_s = 0;  // 0 = none
  // --time-budget-s: the problems share this many seconds (0 = no budget); --round-reserve-s:
  // what each keeps back for the round past its limit, its final selection and replay.
  double time_budget_s = 0;
  double round_reserve_s = 0;
  SearchOverrides search;  // --population, --generations, --crossover-..., --max-family-...
  TimingOverrides timing;  // --min-runs, --min-time-ms, --warmup
  int host_threads = 0;
  bool no_check = false;
  bool quiet = false;
  bool allow_unreadable_lines = false;  // replay from the readable lines (search/replay.h)
  /// Under mpiexec (DistributeTuning): rank 0's round measurer and device; null otherwise.
  std::shared_ptr<search::RoundMeasurer> measurer;
  int device = 0;
};

// One selected problem and what became of it.
struct Outcome {
  const bench::Problem* problem = nullptr;
  std::string suite;  // the suite's "suite" name
  /// "ok" (artifacts written), "failed" (reason says why), "interrupted" (Ctrl-C stopped its
  /// tuning; no artifact), "not_run" (Ctrl-C came before it).
  std::string status = "not_run";
  std::string reason;       // why there is no artifact; empty when ok
  int64_t trials = 0;       // records of the problem in its log
  int64_t new_trials = 0;   // measured by this run
  int64_t final_timed = 0;  // schedules the final selection timed again (TuneResult::final_timed)
  double best_ms = std::numeric_limits<double>::quiet_NaN();
  int64_t best_trial = -1;
  double flops = 0;
  double bytes = 0;
  bool memory_bound = false;
  std::map<std::string, int64_t> errors;
  bool time_limited = false;
  bool exhausted = false;
  std::string log;
  std::string artifact;  // <out>/<name>.json when written
  std::vector<std::string> files;
  std::string check;  // "passed", "skipped (--no-check)" or the not-re-checked note
  double seconds = 0;
  double time_limit_s = 0;  // the limit its tuning ran under (0: none)

  double gflops() const { return std::isfinite(best_ms) ? flops / (best_ms * 1e6) : 0; }
  double gbps() const { return std::isfinite(best_ms) ? bytes / (best_ms * 1e6) : 0; }
  // The throughput in the problem's unit (GB/s when memory bound), as text.
  std::string Throughput() const {
    if (!std::isfinite(best_ms)) return "-";
    return memory_bound ? Fixed(gbps(), 2) + " GB/s" : Fixed(gflops(), 2) + " GFLOP/s";
  }
};

// ---- Ctrl-C: the first SIGINT outside a Tune call stops the run after the current step (a Tune
// call in flight has its own handler: it finishes and logs its round, then returns interrupted);
// a second one ends the process at once, as tune's does. No log is written outside Tune, so every
// log stays consistent.
volatile std::sig_atomic_t g_bench_interrupts = 0;

extern "C" void OnBenchSigint(int) {
  g_bench_interrupts = g_bench_interrupts + 1;
  if (g_bench_interrupts == 1) {
    WriteStderrSignalSafe(
        "\nbench: interrupt: stopping after the current step (again to stop at once)\n");
    return;
  }
  DieOfSigint();
}

class BenchSigintGuard {
 public:
  // The count is reset before the handler is installed (the comma expression).
  BenchSigintGuard() : handler_((g_bench_interrupts = 0, OnBenchSigint)) {}

  static bool interrupted() { return g_bench_interrupts > 0; }
  // Tune consumed a SIGINT with its own handler: count it here.
  static void MarkInterrupted() {
    if (g_bench_interrupts == 0) g_bench_interrupts = 1;
  }

 private:
  ScopedSigintHandler handler_;
};

// Creates `dir` (with its parents) when missing and checks that it is a writable directory.
absl::Status PrepareLogDir(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("log directory '' is empty");
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) {
      return absl::InvalidArgumentError(
          absl::StrCat("log directory '", dir, "' is not a directory"));
    }
  } else {
    fs::create_directories(dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot create log directory '", dir, "': ", ec.message()));
    }
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("log directory '", dir, "' is not writable: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

json OutcomeToJson(const Outcome& o) {
  json j;
  j["name"] = o.problem->name;
  j["suite"] = o.suite;
  j["status"] = o.status;
  j["trials"] = o.trials;
  j["new_trials"] = o.new_trials;
  j["final_timed"] = o.final_timed;
  j["best_ms"] = std::isfinite(o.best_ms) ? json(o.best_ms) : json(nullptr);
  j["best_trial"] = o.best_trial;
  j["gflops"] = o.gflops();
  j["gbps"] = o.gbps();
  j["memory_bound"] = o.memory_bound;
  j["unit"] = o.memory_bound ? "GB/s" : "GFLOP/s";
  j["errors"] = o.errors;
  j["time_limited"] = o.time_limited;
  // (null for a problem that never started: 0 would read as "no limit")
  j["time_limit_s"] = o.status == "not_run" ? json(nullptr) : json(o.time_limit_s);
  j["exhausted"] = o.exhausted;
  j["log"] = o.log;
  j["artifact"] = o.artifact.empty() ? json(nullptr) : json(o.artifact);
  j["files"] = o.files;
  j["check"] = o.check;
  j["reason"] = o.reason;
  j["seconds"] = o.seconds;
  return j;
}

// Writes the summary atomically (a temporary file renamed into place), so a run killed between
// problems leaves the previous summary whole.
absl::Status WriteSummary(const std::string& path, const BenchCommandOptions& options,
                          const Target& target, const std::vector<Outcome>& outcomes,
                          bool interrupted) {
  json j;
  j["suites"] = options.suites;
  j["target"] = target.ToString();
  j["trials"] = options.trials;
  j["log_dir"] = options.log_dir;
  j["out"] = options.out;
  j["interrupted"] = interrupted;
  int ok = 0, failed = 0;
  json problems = json::array();
  for (const Outcome& o : outcomes) {
    ok += o.status == "ok";
    failed += o.status == "failed";
    problems.push_back(OutcomeToJson(o));
  }
  j["ok"] = ok;
  j["failed"] = failed;
  j["problems"] = std::move(problems);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write summary '", path, "': ", std::strerror(errno)));
    }
    f << j.dump(1) << "\n";
    f.close();
    if (!f) {
      return absl::InternalError(absl::StrCat("cannot write summary '", tmp, "'"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return absl::InvalidArgumentError(absl::StrCat("cannot write summary '", path, "': ", why));
  }
  return absl::OkStatus();
}

// The time limit of the problem that starts `elapsed_s` into the run with `remaining` problems
// (itself included) still to run: --time-limit-s (`limit_s`), or with --time-budget-s its equal
// share of what is left less the reserve (the smaller of the two when both are set). A share
// used up still lets the problem run one round: a tiny positive limit (0 would mean none).
double ProblemTimeLimit(double limit_s, double budget_s, double reserve_s, double elapsed_s,
                        int remaining) {
  if (budget_s <= 0) return limit_s;
  const double share = std::max((budget_s - elapsed_s) / std::max(remaining, 1) - reserve_s, 1e-3);
  return limit_s > 0 ? std::min(limit_s, share) : share;
}

// Tunes one problem into its log: one Tune call for the whole budget, which stops starting rounds
// at the time limit (TuneOptions::time_limit_s, checked after each round). Fills the outcome's
// trial counts and flags.
absl::Status TuneProblem(const BenchCommandOptions& options, const schedule::Workload& workload,
                         const Target& target, Outcome& outcome) {
  search::TuneOptions tune =
      TuneOptionsFor(outcome.log, options.seed, options.model == "xgboost", options.search,
                     options.timing, options.host_threads, options.quiet);
  tune.trials = options.trials;
  tune.per_round = options.per_round;
  tune.remeasure_best = options.remeasure;
  options.final_selection.ApplyTo(&tune);
  tune.time_limit_s = std::max(0.0, outcome.time_limit_s);
  tune.measurer = options.measurer;
  tune.measure.device = options.device;
  // As `tune`: the learned model starts from the pretrained one (the target's default model).
  if (options.model == "xgboost" && options.model_init != "none") {
    tune.model_init = options.model_init.empty() ? DefaultModelPath(target) : options.model_init;
  }
  ASSIGN_OR_RETURN(search::TuneResult result, search::Tune(workload, target, tune));
  outcome.trials = result.trials;
  outcome.new_trials += result.new_trials;
  outcome.final_timed += result.final_timed;
  outcome.errors = result.errors;
  outcome.exhausted = result.exhausted;
  if (result.interrupted) BenchSigintGuard::MarkInterrupted();
  if (result.time_limited) {
    outcome.time_limited = true;
    if (!options.quiet) {
      std::cerr << "bench: " << outcome.problem->name << ": time limit of " << outcome.time_limit_s
                << " s reached after " << result.trials << " trials\n";
    }
  }
  return absl::OkStatus();
}

// Replays the problem's best record into <out>/<name>.* (re-checked unless --no-check). A
// failure is the outcome's reason.
absl::Status ReplayProblem(const BenchCommandOptions& options, const schedule::Workload& workload,
                           const Target& target, Outcome& outcome) {
  ASSIGN_OR_RETURN(search::ReplayedRecord best,
                   search::ApplyHistoryBest(outcome.log, workload, target,
                                            PrecisionOption(options.search.precision),
                                            options.allow_unreadable_lines));
  for (const std::string& w : best.warnings) std::cerr << "warning: " << w << "\n";
  outcome.best_ms = best.record.median_ms();
  outcome.best_trial = best.record.trial;
  search::BuildOptions build;
  build.name = outcome.problem->name;
  ASSIGN_OR_RETURN(search::KernelArtifact artifact, search::BuildKernel(best, build));
  std::unique_ptr<search::CheckOutcome> check;
  if (options.no_check) {
    outcome.check = "skipped (--no-check)";
  } else {
    ASSIGN_OR_RETURN(search::CheckOutcome result, search::CheckKernel(artifact));
    check = std::make_unique<search::CheckOutcome>(std::move(result));
    if (!check->checked) {
      outcome.check = check->note;
    } else if (check->passed) {
      outcome.check = "passed";
    } else {
      return absl::InternalError(
          absl::StrCat("re-check of trial ", best.record.trial, " failed: ", check->note));
    }
  }
  ASSIGN_OR_RETURN(outcome.files, search::WriteArtifacts(artifact, options.out, check.get()));
  outcome.artifact =
      (std::filesystem::path(options.out) / (outcome.problem->name + ".json")).string();
  return absl::OkStatus();
}

// Runs one problem start to end; every failure ends up in the outcome.
void RunProblem(const BenchCommandOptions& options, const Target& target, Outcome& outcome) {
  const bench::Problem& problem = *outcome.problem;
  const auto start = std::chrono::steady_clock::now();
  auto fail = [&](const std::string& what, const absl::Status& status) {
    outcome.status = "failed";
    outcome.reason = what + std::string(status.message());
  };
  outcome.log = (std::filesystem::path(options.log_dir) / (problem.name + ".jsonl")).string();
  absl::StatusOr<ir::ComputeDAG> dag = bench::BuildProblem(problem);
  if (!dag.ok()) return fail("", dag.status());
  outcome.flops = dag->Flops();
  outcome.bytes = bench::MinimumBytes(*dag);
  outcome.memory_bound = search::IsMemoryBound(outcome.flops, outcome.bytes);
  if (absl::Status name = search::ValidateArtifactName(problem.name); !name.ok()) {
    return fail("", name);
  }
  Target tune_target = target;
  // The search sizes parallel loops by the target's cores: the threads that will run them.
  if (options.host_threads > 0 && !tune_target.is_gpu()) {
    tune_target.host_cores = options.host_threads;
  }
  if (!options.quiet) {
    std::cerr << "bench: " << problem.name << ": tuning on " << target.ToString() << " into "
              << outcome.log << "\n";
  }
  if (absl::Status tuned = TuneProblem(options, problem.workload, tune_target, outcome);
      !tuned.ok()) {
    fail("tune: ", tuned);
  } else if (BenchSigintGuard::interrupted()) {
    outcome.status = "interrupted";
    outcome.reason = "interrupted (Ctrl-C) after " + std::to_string(outcome.trials) + " trials";
  } else if (absl::Status replayed = ReplayProblem(options, problem.workload, tune_target, outcome);
             !replayed.ok()) {
    fail("", replayed);
  } else {
    outcome.status = "ok";
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string OutcomeLine(const Outcome& o) {
  std::string line = absl::StrCat(o.problem->name, ": ");
  if (o.status == "not_run") return line + "not run (interrupted before it)";
  if (o.trials > 0 || o.status != "failed") {
    absl::StrAppend(&line, o.trials, " trials (", o.new_trials, " new");
    if (o.final_timed > 0) absl::StrAppend(&line, ", ", o.final_timed, " timed again to pick");
    if (o.time_limited) absl::StrAppend(&line, ", time limit");
    if (o.exhausted) absl::StrAppend(&line, ", search space exhausted");
    absl::StrAppend(&line, ")");
    if (std::isfinite(o.best_ms)) {
      absl::StrAppend(&line, ", best ", Fixed(o.best_ms, 4), " ms, ", o.Throughput());
    }
    absl::StrAppend(&line, ", ");
  }
  if (o.status == "ok") {
    absl::StrAppend(&line, "wrote ", o.artifact);
    if (o.check != "passed") absl::StrAppend(&line, " (", o.check, ")");
  } else if (o.status == "interrupted") {
    absl::StrAppend(&line, "interrupted");
  } else {
    absl::StrAppend(&line, "FAILED: ", o.reason);
  }
  absl::StrAppend(&line, " [", Fixed(o.seconds, 1), " s]");
  return line;
}

void PrintTable(const std::vector<Outcome>& outcomes) {
  size_t width = 7;
  for (const Outcome& o : outcomes) width = std::max(width, o.problem->name.size());
  std::cout << "\n"
            << std::left << std::setw(width) << "problem" << std::right << std::setw(8) << "trials"
            << std::setw(6) << "new" << std::setw(12) << "best ms" << std::setw(20) << "throughput"
            << "  result\n";
  int ok = 0, failed = 0, other = 0;
  for (const Outcome& o : outcomes) {
    std::string result;
    if (o.status == "ok") {
      result = o.artifact;
      ++ok;
    } else if (o.status == "failed") {
      result = "FAILED: " + o.reason;
      ++failed;
    } else {
      result = o.status == "interrupted" ? "interrupted" : "not run";
      ++other;
    }
    std::cout << std::left << std::setw(width) << o.problem->name << std::right << std::setw(8)
              << o.trials << std::setw(6) << o.new_trials << std::setw(12)
              << (std::isfinite(o.best_ms) ? Fixed(o.best_ms, 4) : std::string("-"))
              << std::setw(20) << o.Throughput() << "  " << result << "\n";
  }
  std::cout << "problems: " << outcomes.size() << ", artifacts: " << ok << ", failed: " << failed;
  if (other > 0) std::cout << ", interrupted or not run: " << other;
  std::cout << "\n";
}

absl::StatusOr<int> Bench(const BenchCommandOptions& given) {
  BenchCommandOptions options = given;
  // Everything a user can get wrong is checked before the first trial.
  if (options.suites.empty()) return absl::InvalidArgumentError("give --suite FILE");
  if (!options.model_init.empty() && options.model_init != "none" && options.model != "xgboost") {
    return absl::InvalidArgumentError("--model-init needs --model xgboost");
  }
  std::vector<bench::Suite> suites;
  suites.reserve(options.suites.size());
  for (const std::string& path : options.suites) {
    ASSIGN_OR_RETURN(bench::Suite suite, bench::Suite::Load(path));
    suites.push_back(std::move(suite));
  }
  std::map<std::string, std::string> source_of;  // problem name → suite file
  for (const bench::Suite& suite : suites) {
    for (const bench::Problem& p : suite.problems) {
      auto [it, inserted] = source_of.emplace(p.name, suite.source);
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat("problem '", p.name, "' is in both ", it->second, " and ", suite.source,
                         " (its log and artifacts are named after it)"));
      }
    }
  }
  std::set<std::string> wanted;
  if (!options.problems.empty()) {
    for (absl::string_view piece : absl::StrSplit(options.problems, ',', absl::SkipWhitespace())) {
      std::string name(piece);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      if (source_of.count(name) == 0) {
        return absl::InvalidArgumentError(absl::StrCat("--problems: no problem '", name, "' in ",
                                                       absl::StrJoin(options.suites, ", ")));
      }
      wanted.insert(name);
    }
  }
  std::vector<Outcome> outcomes;
  int skipped_small = 0;
  for (const bench::Suite& suite : suites) {
    for (const bench::Problem& p : suite.problems) {
      if (!wanted.empty() && wanted.count(p.name) == 0) continue;
      if (options.skip_small && p.is_small()) {
        ++skipped_small;
        continue;
      }
      Outcome o;
      o.problem = &p;
      o.suite = suite.name;
      outcomes.push_back(std::move(o));
    }
  }
  if (outcomes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no problem to run (", skipped_small, " skipped by --skip-small)"));
  }
  ASSIGN_OR_RETURN(Target target, ResolveTargetOption(options.target));
  if (options.model == "xgboost" && !options.model_init.empty() && options.model_init != "none") {
    // A model file that does not load for this target fails the run before any problem starts.
    costmodel::XGBoostModel probe;
    RETURN_IF_ERROR(probe.LoadForTarget(options.model_init, target));
  }
  {
    // Under mpiexec: ranks > 0 serve the rounds of every problem rank 0 tunes, and end here.
    search::TuneOptions shared =
        TuneOptionsFor("", options.seed, options.model == "xgboost", options.search, options.timing,
                       options.host_threads, options.quiet);
    ASSIGN_OR_RETURN(std::optional<int> served, DistributeTuning(shared, target));
    if (served) return *served;
    options.measurer = shared.measurer;
    options.device = shared.measure.device;
  }
  // --out is only checked (created when the first artifacts are written); the log directory is
  // created here, after every other check but --json's.
  RETURN_IF_ERROR(search::ValidateArtifactDir(options.out));
  RETURN_IF_ERROR(PrepareLogDir(options.log_dir));
  if (!options.json_path.empty()) {
    RETURN_IF_ERROR(WriteSummary(options.json_path, options, target, outcomes, false));
  }

  std::cout << "bench: " << outcomes.size() << (outcomes.size() == 1 ? " problem" : " problems");
  if (skipped_small > 0) std::cout << " (skipped by --skip-small: " << skipped_small << ")";
  std::cout << " on " << target.ToString() << ", " << options.trials << " trials each";
  if (options.time_limit_s > 0) std::cout << ", at most " << options.time_limit_s << " s each";
  if (options.time_budget_s > 0) {
    std::cout << ", sharing " << options.time_budget_s
              << " s (each its share of what is left, less " << options.round_reserve_s << " s)";
    if (options.round_reserve_s >= options.time_budget_s / static_cast<double>(outcomes.size())) {
      std::cerr << "bench: warning: --round-reserve-s " << options.round_reserve_s
                << " is at least each problem's share of --time-budget-s " << options.time_budget_s
                << ": every problem runs one round\n";
    }
  }
  std::cout << "; logs in " << options.log_dir << ", artifacts in " << options.out << "\n"
            << std::flush;

  BenchSigintGuard guard;
  const auto started = std::chrono::steady_clock::now();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (BenchSigintGuard::interrupted()) break;
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    outcomes[i].time_limit_s =
        ProblemTimeLimit(options.time_limit_s, options.time_budget_s, options.round_reserve_s,
                         elapsed_s, static_cast<int>(outcomes.size() - i));
    RunProblem(options, target, outcomes[i]);
    std::cout << "[" << (i + 1) << "/" << outcomes.size() << "] " << OutcomeLine(outcomes[i])
              << "\n"
              << std::flush;
    if (!options.json_path.empty()) {
      absl::Status written = WriteSummary(options.json_path, options, target, outcomes,
                                          BenchSigintGuard::interrupted());
      if (!written.ok()) std::cerr << "warning: " << written.message() << "\n";
    }
  }
  const bool interrupted = BenchSigintGuard::interrupted();
  PrintTable(outcomes);
  if (!options.json_path.empty()) {
    RETURN_IF_ERROR(WriteSummary(options.json_path, options, target, outcomes, interrupted));
    std::cout << "summary: " << options.json_path << "\n";
  }
  if (interrupted) return 130;
  for (const Outcome& o : outcomes) {
    if (o.status != "ok") return 1;
  }
  return 0;
}

// A seconds option 0..1e6 (`help` states the range and default).
CLI::Option* AddSecondsOption(CLI::App& app, const std::string& name, double* value,
                              const std::string& help) {
  return app.add_option(name, *value, help)
      ->check(CLI::Range(0.0, 1e6))
      ->transform(NumberText(false, "0..1000000"));  // runs before the range check
}

}  // namespace

ExitCodeAction AddBenchCommand(CLI::App& app) {
  auto options = std::make_shared<BenchCommandOptions>();
  app.add_option("--suite", options->suites,
                 "suite file (bench/suites/*.json); repeat for several suites")
      ->required();
  app.add_option("--problems", options->problems,
                 "comma-separated problem names to run (default: every problem of the suites)");
  app.add_flag("--skip-small", options->skip_small,
               "leave out the problems tagged \"small\" (latency-bound)");
  app.add_option("--target", options->target,
                 "auto, cpu, cuda or cuda -arch=sm_XX (auto: cuda when a device answers, else cpu)")
      ->capture_default_str();
  app.add_option("--trials", options->trials,
                 "total trials per problem, counting those already in its log, 1..1000000")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000))
      ->transform(NumberText(true, "1..1000000"));  // runs before the range check
  app.add_option("--per-round", options->per_round,
                 "trials measured per round, 1..4096 (default 0: the target's choice, 128 on "
                 "cuda, 64 on cpu)")
      ->check(CLI::Range(0, 4096))
      ->transform(NumberText(true, "0..4096"));  // runs before the range check
  app.add_option("--remeasure", options->remeasure,
                 "first measure each problem's N fastest logged schedules again with this build "
                 "(after an upgrade: their new times replace the logged ones, and replay picks "
                 "from them), 0 = none")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096))
      ->transform(NumberText(true, "0..4096"));  // runs before the range check
  AddFinalSelectionOptions(app, &options->final_selection, "each problem's");
  app.add_option("--model", options->model, "cost model: xgboost or random")
      ->capture_default_str()
      ->check(CLI::IsMember({"xgboost", "random"}));
  app.add_option("--model-init", options->model_init,
                 "pretrained model file (train-model) the xgboost model starts from, or none; "
                 "default: the shipped default model of a cuda target's arch when there is one");
  app.add_option("--seed", options->seed, "seed of the search and the model")
      ->capture_default_str();
  app.add_option("--log-dir", options->log_dir,
                 "directory of the tuning logs, one per problem: DIR/<problem>.jsonl (created "
                 "when missing; appended to and resumed from)")
      ->required();
  app.add_option("--out", options->out,
                 "directory of the artifacts, named after the problems (cuda: <problem>.ptx, "
                 ".cubin, .h, .json; cpu: <problem>.o, .h, .json)")
      ->required();
  AddSecondsOption(app, "--time-limit-s", &options->time_limit_s,
                   "per problem: stop its tuning after the round during which this many seconds "
                   "passed, 0..1e6 (default 0: no limit)");
  CLI::Option* budget = AddSecondsOption(
      app, "--time-budget-s", &options->time_budget_s,
      "the problems share this many seconds: each, when it starts, gets an equal share of what is "
      "left, less --round-reserve-s, as its time limit (time a problem leaves unused goes to "
      "those after it; with --time-limit-s the smaller), 0..1e6 (default 0: none)");
  AddSecondsOption(app, "--round-reserve-s", &options->round_reserve_s,
                   "with --time-budget-s: seconds each problem keeps back for the round past its "
                   "limit, its final selection and replay, 0..1e6 (default 0)")
      ->needs(budget);
  AddSearchOptions(app, &options->search);
  AddPrecisionOption(app, &options->search.precision);
  AddCandidateTimingOptions(app, &options->timing);
  app.add_option(
         "--host-threads", options->host_threads,
         "cpu target: threads running parallel loops, 0..4096 (default 0: every usable core)")
      ->check(CLI::Range(0, 4096))
      ->transform(NumberText(true, "0..4096"));  // runs before the range check
  app.add_flag("--no-check", options->no_check,
               "do not re-check the replayed kernels against the unscheduled programs");
  app.add_option("--json", options->json_path,
                 "write a JSON summary (per problem: status, trials, best ms, GFLOP/s, GB/s, "
                 "artifact or the reason there is none), rewritten after each problem");
  app.add_flag("--allow-unreadable-lines", options->allow_unreadable_lines,
               "replay each problem's best from the lines of its log that could be read even when "
               "skipped lines (corrupt, truncated or over-long) may hold one of its records "
               "(refused by default: the best record may be among them)");
  app.add_flag("--quiet", options->quiet, "no progress lines on stderr");
  return [options]() { return Bench(*options); };
}

}  // namespace tilesearch::tools
