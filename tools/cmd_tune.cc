// `tilesearch tune`: Ansor-style tuning of one workload on one target (search/tuner.h), logging
// every trial to a JSON Lines log, then a summary of the best record.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/compute_dag.h"
#include "measure/measure.h"
#include "schedule/schedule_file.h"
#include "search/tuner.h"
#include "tools/commands.h"
#include "tools/distributed.h"
#include "tools/model_options.h"
#include "tools/number_text.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

struct TuneCommandOptions {
  WorkloadOptions workload;
  int trials = 64;
  int per_round = 0;  // the target's choice (search::ResolveTuneOptions)
  int64_t unroll_budget = 0;
  std::string log;
  uint64_t seed = 0;
  std::string model = "xgboost";
  std::string model_init;  // --model-init PATH | none; "" = the default model when there is one
  SearchOverrides search;  // --population, --generations, --crossover-..., --max-...
  TimingOverrides timing;  // --min-runs, --min-time-ms, --warmup
  int early_stopping = 0;  // 0: off
  int remeasure = 0;       // --remeasure: logged schedules measured again first; 0: none
  FinalSelectionOverrides final_selection;  // --final-candidates, --final-min-time-ms, ...
  int host_threads = 0;                     // cpu: parallel-loop threads, 0 = every usable core
  int model_threads = 0;                    // XGBoost threads per model, 0 = every usable core
  double run_timeout_ms = -1;               // < 0: MeasureOptions' default
  std::string overlap_rounds = "auto";      // --overlap-rounds on | off | auto
  std::string stream_builds = "on";         // --stream-builds on | off
  bool quiet = false;
};

// TuneOptions::model_init from --model-init: a file, "none", or (not given) the default model of
// the target when the learned model is used. Errors: --model-init with --model random.
absl::StatusOr<std::string> ModelInit(const TuneCommandOptions& options, const Target& target) {
  if (options.model_init == "none") return std::string();
  if (!options.model_init.empty()) {
    if (options.model != "xgboost") {
      return absl::InvalidArgumentError("--model-init needs --model xgboost");
    }
    return options.model_init;
  }
  if (options.model != "xgboost") return std::string();
  const std::string path = DefaultModelPath(target);
  if (!path.empty() && !options.quiet) {
    std::cerr << "tune: the cost model starts from the default model " << path
              << " (--model-init none: start untrained)\n";
  }
  return path;
}

absl::StatusOr<int> Tune(const TuneCommandOptions& options) {
  if (options.workload.op.empty() && options.workload.schedule.empty()) {
    return absl::InvalidArgumentError("give --op NAME (and --shape for each input)");
  }
  ASSIGN_OR_RETURN(schedule::ScheduleFile file, ScheduleFromOptions(options.workload));
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, file.workload.Build());

  search::TuneOptions tune =
      TuneOptionsFor(options.log, options.seed, options.model == "xgboost", options.search,
                     options.timing, options.host_threads, options.quiet);
  tune.trials = options.trials;
  tune.per_round = options.per_round;
  tune.unroll_budget = options.unroll_budget;
  // The search sizes parallel loops by the target's cores: the threads that will run them.
  if (options.host_threads > 0 && !file.target.is_gpu())
    file.target.host_cores = options.host_threads;
  if (options.run_timeout_ms > 0) tune.measure.run_timeout_ms = options.run_timeout_ms;
  tune.early_stopping = options.early_stopping;
  tune.remeasure_best = options.remeasure;
  options.final_selection.ApplyTo(&tune);
  tune.model_threads = options.model_threads;
  tune.overlap_rounds = options.overlap_rounds == "on"    ? 1
                        : options.overlap_rounds == "off" ? 0
                                                          : -1;
  tune.stream_builds = options.stream_builds == "on";
  // Under mpiexec: ranks > 0 serve rank 0's rounds, and end here.
  ASSIGN_OR_RETURN(std::optional<int> served, DistributeTuning(tune, file.target));
  if (served) return *served;
  ASSIGN_OR_RETURN(tune.model_init, ModelInit(options, file.target));
  ASSIGN_OR_RETURN(search::TuneResult result, search::Tune(file.workload, file.target, tune));

  std::cout << "workload: " << file.workload.ToString() << " (key "
            << measure::PrecisionWorkloadKey(dag.WorkloadKey(), tune.search.precision) << ")\n"
            << "target: " << file.target.ToString() << "\n"
            << "log: " << options.log << "\n"
            << "trials: " << result.trials << " (" << result.new_trials << " measured now)";
  if (options.remeasure > 0) {
    std::cout << ", " << result.remeasured << " of the fastest logged schedules re-measured";
  }
  if (result.final_timed > 0) {
    std::cout << ", the " << result.final_timed << " fastest timed again for the final pick";
  }
  if (result.interrupted) std::cout << ", interrupted";
  if (result.exhausted) std::cout << ", search space exhausted";
  if (result.early_stopped) std::cout << ", stopped early";
  std::cout << "\n";
  if (!result.rounds.empty()) {
    // The cost model's held-out ranking quality over this call's rounds.
    std::cout << "model pairwise accuracy per round:";
    for (const search::RoundRecord& r : result.rounds) {
      std::cout << " " << (std::isnan(r.pairwise_accuracy) ? "-" : Fixed(r.pairwise_accuracy, 3));
    }
    std::cout << " (" << result.rounds.front().model << ")\n";
  }
  std::cout << "errors:";
  if (result.errors.empty()) std::cout << " none";
  for (const auto& [name, count] : result.errors) std::cout << " " << name << "=" << count;
  std::cout << "\n";
  // After Ctrl-C: 130 (128 + SIGINT), as a shell reports a job stopped by SIGINT, whatever the
  // best.
  const int done = result.interrupted ? 130 : 0;
  if (!result.best) {
    std::cout << "best: no valid record\n";
    return result.interrupted ? 130 : 1;
  }
  const search::MeasureRecord& best = *result.best;
  const double ms = best.median_ms();
  std::cout << "best: trial " << best.trial << ", median " << Fixed(ms, 4) << " ms, "
            << Fixed(dag.Flops() / (ms * 1e6), 2) << " GFLOP/s, "
            << Fixed(static_cast<double>(dag.InputBytes() + dag.OutputBytes()) / (ms * 1e6), 2)
            << " GB/s, " << best.steps.size() << " steps\n";
  if (result.untuned && result.untuned->valid()) {
    const double untuned_ms = result.untuned->median_ms();
    std::cout << "untuned: trial " << result.untuned->trial << ", median " << Fixed(untuned_ms, 4)
              << " ms (the best is " << Fixed(untuned_ms / ms, 2) << "x as fast)\n";
  } else if (result.untuned) {
    std::cout << "untuned: trial " << result.untuned->trial << " failed ("
              << measure::MeasureErrorName(result.untuned->result.error) << ")\n";
  }
  return done;
}

}  // namespace

ExitCodeAction AddTuneCommand(CLI::App& app) {
  auto options = std::make_shared<TuneCommandOptions>();
  AddWorkloadOptions(app, options->workload);
  app.add_option("--trials", options->trials,
                 "total trials of the task in the log (resumed logs count), 1..1000000")
      ->required()
      ->check(CLI::Range(1, 1000000))
      ->transform(NumberText(true, "1..1000000"));  // runs before the range check
  app.add_option("--unroll-budget", options->unroll_budget,
                 "cuda target: unrolled loops whose full unrolling exceeds this many loop-nest "
                 "nodes stay loops (0: none)")
      ->capture_default_str();
  app.add_option("--per-round", options->per_round,
                 "trials measured per round, 1..4096 (default 0: the target's choice, 128 on "
                 "cuda, 64 on cpu)")
      ->check(CLI::Range(0, 4096))
      ->transform(NumberText(true, "0..4096"));  // runs before the range check
  app.add_option("--log", options->log, "tuning log (JSON Lines; appended to, resumed from)")
      ->required();
  app.add_option("--seed", options->seed, "seed of the search and the model")
      ->capture_default_str();
  app.add_option("--model", options->model, "cost model: xgboost or random")
      ->capture_default_str()
      ->check(CLI::IsMember({"xgboost", "random"}));
  app.add_option("--model-init", options->model_init,
                 "pretrained model file (train-model) the xgboost model starts from, or none; "
                 "default: the shipped default model of a cuda target's arch when there is one");
  app.add_option("--model-threads", options->model_threads,
                 "XGBoost threads of each cost model (training and scoring; with --model-init two "
                 "models train at once, beside the round's build), 0 = every usable core")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  AddSearchOptions(app, &options->search);
  AddPrecisionOption(app, &options->search.precision);
  AddCandidateTimingOptions(app, &options->timing);
  app.add_option("--remeasure", options->remeasure,
                 "first measure the task's N fastest logged schedules again with this build "
                 "(after an upgrade: their new times replace the logged ones), 0 = none")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096))
      ->transform(NumberText(true, "0..4096"));  // runs before the range check
  AddFinalSelectionOptions(app, &options->final_selection, "the");
  app.add_option("--early-stopping", options->early_stopping,
                 "stop after this many trials in a row without a better median, 0 = off")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000))
      ->transform(NumberText(true, "0..1000000"));  // runs before the range check
  app.add_option(
         "--host-threads", options->host_threads,
         "cpu target: threads running parallel loops, 0..4096 (default 0: every usable core)")
      ->check(CLI::Range(0, 4096))
      ->transform(NumberText(true, "0..4096"));  // runs before the range check
  app.add_option(
         "--run-timeout-ms", options->run_timeout_ms,
         absl::StrCat("wall-clock limit of one candidate's check + timing, ms, 100..3600000 "
                      "(default ",
                      measure::MeasureOptions().run_timeout_ms, "; over it: run_timeout)"))
      ->check(CLI::Range(100.0, 3600000.0))
      ->transform(NumberText(false, "100..3600000"));  // runs before the range check
  app.add_option("--overlap-rounds", options->overlap_rounds,
                 "measure each round while the next is trained, searched and built (its model "
                 "then lacks the round in flight): on, off, or auto (default: on for cuda, off "
                 "for cpu, where the search would disturb the measured host kernels)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  app.add_option("--stream-builds", options->stream_builds,
                 "measure each candidate as soon as it is built, while the rest of its round "
                 "compiles (on, the default), or build the whole round first (off)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--quiet", options->quiet, "no progress lines on stderr");
  return [options]() { return Tune(*options); };
}

}  // namespace tilesearch::tools
