#include "search/tuner.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <cerrno>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/interrupt.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "costmodel/xgboost_model.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/local_search.h"
#include "search/sketch.h"
#include "measure/runner.h"

namespace tilesearch::search {
namespace {

// The device lock (measure::DeviceLockPath) must not be the
// tuning log: the log writer holds a flock on the log, and the lock's own flock on a second
// descriptor of the same file would wait for it forever.
absl::Status CheckLockIsNotTheLog(const TuneOptions& options) {
  const std::string lock = measure::DeviceLockPath(options.measure);
  if (lock.empty()) return absl::OkStatus();
  std::error_code ec1, ec2;
  const auto a = std::filesystem::weakly_canonical(lock, ec1);
  const auto b = std::filesystem::weakly_canonical(options.log_path, ec2);
  if ((!ec1 && !ec2 && a == b) || lock == options.log_path) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the device lock '", lock, "' is the tuning log '", options.log_path,
        "': give the lock a file of its own"));
  }
  return absl::OkStatus();
}

using schedule::State;

// SIGINT handling. The first SIGINT lets the round in flight finish and be logged, then the job
// stops; a second one stops the process at once (dying of SIGINT: exit status 130 in a shell),
// except while a round is being appended to the log, where it waits for the append (one write +
// fsync) to end, so the log never holds a partial line and no completed round is lost.
volatile std::sig_atomic_t g_interrupts = 0;  // SIGINTs received since the guard was installed
volatile std::sig_atomic_t g_writing = 0;     // 1 while LogWriter::Append runs
volatile std::sig_atomic_t g_quiet = 0;       // TuneOptions::quiet
volatile pid_t g_tuner_pid = 0;               // the tuning process (not its forked workers)

// Async-signal-safe: ends the process as killed by SIGINT (the shell's status 130).
[[noreturn]] void StopNow() {
  if (!g_quiet) {
    WriteStderrSignalSafe(
        "tune: stopped at once by a second interrupt; the round in flight is not logged "
        "(every completed round is); run again with the same log to resume\n");
  }
  DieOfSigint();
}

void OnSigint(int) {
  // Forked measurement workers inherit the handler: they carry on; the tuning process decides
  // (its death kills them, measure/worker_batch.cc sets PR_SET_PDEATHSIG).
  if (::getpid() != g_tuner_pid) return;
  const int saved_errno = errno;
  g_interrupts = g_interrupts + 1;
  if (g_interrupts == 1) {
    if (!g_quiet) {
      WriteStderrSignalSafe(
          "\ntune: interrupt: finishing the round in flight, logging it and stopping "
          "(Ctrl-C again to stop at once)\n");
    }
  } else if (!g_writing) {
    StopNow();
  }  // else: the append in flight completes, then AfterAppend stops.
  errno = saved_errno;
}

// Installs the SIGINT handler for the lifetime of the object, restoring the previous one.
class SigintGuard {
 public:
  explicit SigintGuard(bool quiet) : handler_(ResetState(quiet)) {}

  static bool interrupted() { return g_interrupts > 0; }

  /// Appends under the "writing" flag: a second SIGINT during the append stops the process
  /// right after it.
  static absl::Status Append(LogWriter& writer, const std::vector<MeasureRecord>& records,
                             const RoundRecord& round) {
    g_writing = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    absl::Status status = writer.Append(records, round);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    g_writing = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (g_interrupts >= 2) StopNow();
    return status;
  }

 private:
  // Resets the handler's state before the handler is installed; returns the handler.
  static void (*ResetState(bool quiet))(int) {
    g_interrupts = 0;
    g_writing = 0;
    g_quiet = quiet ? 1 : 0;
    g_tuner_pid = ::getpid();
    return OnSigint;
  }

  ScopedSigintHandler handler_;
};

std::string Fixed(double v, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << v;
  return out.str();
}

std::string Duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::lround(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrCat(s / 60, "m", s % 60, "s");
  return absl::StrCat(s / 3600, "h", (s % 3600) / 60, "m");
}

// The figure of merit of a record: bytes/s for memory-bound workloads, FLOP/s otherwise (both
// ∝ 1 / median within a task, so the model's normalized labels are the same; bytes/s also works
// for workloads without arithmetic, whose FLOP/s would be 0 and leave the model untrained). 0 for
// a record that is not valid.
double RecordMerit(const MeasureRecord& r, const ir::ComputeDAG& dag, bool memory_bound) {
  return memory_bound ? RecordBandwidth(r, dag) : RecordThroughput(r, dag);
}

// The training sample of a record (features of its replayed state; none when it does not replay
// or lower, which the model ignores).
costmodel::TrainingSample SampleOf(const MeasureRecord& r, const ir::ComputeDAG& dag,
                                   const Target& target, bool memory_bound) {
  costmodel::TrainingSample s;
  s.throughput = RecordMerit(r, dag, memory_bound);
  absl::StatusOr<State> state = schedule::ReplaySteps(dag, r.steps);
  if (!state.ok()) return s;
  absl::StatusOr<costmodel::StoreFeatures> f =
      costmodel::ExtractStateFeatures(dag, *state, target);
  if (f.ok()) s.features.stores = *std::move(f);
  return s;
}

// Builds the round's candidates: one lowering per state, then the Builder (a failed lowering is
// an invalid_schedule build error; cuda: PTX of all lowered ones in parallel worker processes).
std::vector<measure::BuildResult> BuildCandidates(const ir::ComputeDAG& dag, const Target& target,
                                                  const std::vector<State>& states) {
  std::vector<measure::BuildInput> inputs;
  inputs.reserve(states.size());
  for (const State& state : states) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<schedule::LoweredKernel> kernel = schedule::Lower(dag, state, target);
    const double lower_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    inputs.push_back(measure::BuildInput::FromLowering(std::move(kernel), lower_ms));
  }
  return measure::Builder(target).Build(inputs);
}

// Fills the model fields of a round line from the model that is about to score the round.
void DescribeModel(const costmodel::CostModel& model, int64_t samples_given, RoundRecord* round) {
  round->model = model.Name();
  round->train_samples = samples_given;
  round->model_validation_accuracy = std::numeric_limits<double>::quiet_NaN();
  if (const auto* xgb = dynamic_cast<const costmodel::XGBoostModel*>(&model)) {
    round->model_trained = xgb->trained();
    if (xgb->trained()) {
      const costmodel::XGBoostTrainingReport& report = xgb->last_report();
      round->train_programs = report.num_programs;
      round->boost_rounds = report.rounds;
      round->model_validation_accuracy = report.validation_pairwise_accuracy;
    }
  }
}

// The held-out quality of the round's scores: pairwise ranking accuracy and top-k recall of
// `predicted` against the measured merit over the round's valid records.
void ScoreRound(const std::vector<MeasureRecord>& round_records, const ir::ComputeDAG& dag,
                bool memory_bound, RoundRecord* round) {
  std::vector<double> predicted, actual;
  for (size_t i = 0; i < round_records.size(); ++i) {
    if (!round_records[i].valid()) continue;
    predicted.push_back(round->predicted[i]);
    actual.push_back(RecordMerit(round_records[i], dag, memory_bound));
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  round->valid = static_cast<int64_t>(actual.size());
  absl::StatusOr<double> pairwise = costmodel::PairwiseRankingAccuracy(predicted, actual);
  round->pairwise_accuracy = pairwise.ok() ? *pairwise : nan;
  round->k = actual.empty() ? 0 : std::max(1, static_cast<int>(actual.size()) / 8);
  absl::StatusOr<double> recall =
      actual.empty() ? absl::StatusOr<double>(nan) : costmodel::TopKRecall(predicted, actual, round->k);
  round->top_k_recall = recall.ok() ? *recall : nan;
}

}  // namespace

absl::StatusOr<TuneResult> Tune(const schedule::Workload& workload, const Target& target,
                                const TuneOptions& options) {
  if (options.trials < 1) {
    return absl::InvalidArgumentError(absl::StrCat("trials must be >= 1, got ", options.trials));
  }
  if (options.per_round < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("per_round must be >= 1, got ", options.per_round));
  }
  if (options.model_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_threads must be >= 0 (0 = all usable cores), got ",
                     options.model_threads));
  }
  if (options.early_stopping < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("early_stopping must be >= 0 (0 = off), got ", options.early_stopping));
  }
  if (options.log_path.empty()) return absl::InvalidArgumentError("a tuning log path is required");
  if (!(options.search.local_search_fraction >= 0 && options.search.local_search_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("local_search_fraction must be in [0, 1], got ",
                                                   options.search.local_search_fraction));
  }
  if (options.search.local_search_states < 1) {
    return absl::InvalidArgumentError(absl::StrCat("local_search_states must be >= 1, got ",
                                                   options.search.local_search_states));
  }
  if (options.search.population < 1 || options.search.generations < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("search population must be >= 1 and generations >= 0, got ",
                     options.search.population, " and ", options.search.generations));
  }
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, workload.Build());
  const std::string key = dag.WorkloadKey();
  RETURN_IF_ERROR(CheckLockIsNotTheLog(options));
  ASSIGN_OR_RETURN(std::unique_ptr<measure::Runner> measurer,
                   measure::CreateRunner(target, options.measure));
  RETURN_IF_ERROR(measure::CheckMeasureHostMemory(dag, options.measure));

  const bool memory_bound = IsMemoryBound(
      dag.Flops(), static_cast<double>(dag.InputBytes() + dag.OutputBytes()));
  // Resume: the task's records already in the log.
  std::vector<MeasureRecord> records;
  // The first new round's number: past every round line of the log, skipped ones included
  // (NextRoundNumber), so a resumed log never holds two rounds of one number.
  int64_t first_round = 1;
  {
    ReadOptions read;
    read.target = target;
    read.workload_key = key;
    read.verify_workload_keys = true;  // never resume from a record whose key lies
    absl::StatusOr<LogContents> log = ReadLog(options.log_path, read);
    if (log.ok()) {
      if (!options.quiet) {
        for (const std::string& w : log->warnings) std::cerr << "tilesearch: warning: " << w << "\n";
      }
      records = std::move(log->records);
      first_round = NextRoundNumber(*log);
    } else if (log.status().code() != absl::StatusCode::kNotFound) {
      return log.status();
    }
  }
  ASSIGN_OR_RETURN(LogWriter writer, LogWriter::Open(options.log_path));

  std::unique_ptr<costmodel::CostModel> model;
  if (options.use_xgboost) {
    costmodel::XGBoostOptions xo;
    xo.seed = options.seed;
    xo.nthread = options.model_threads;
    model = std::make_unique<costmodel::XGBoostModel>(xo);
  } else {
    model = std::make_unique<costmodel::RandomModel>(options.seed);
  }
  ASSIGN_OR_RETURN(std::vector<State> sketches, GenerateSketches(dag, target));

  std::unordered_set<uint64_t> measured;
  std::vector<costmodel::TrainingSample> pending;  // samples not yet given to the model
  for (const MeasureRecord& r : records) {
    measured.insert(RecordStateHash(r));
    pending.push_back(SampleOf(r, dag, target, memory_bound));
  }
  int64_t samples_given = 0;  // samples passed to the model's Update so far
  const int64_t resumed = static_cast<int64_t>(records.size());
  if (!options.quiet && resumed > 0) {
    std::cerr << "tune: resuming from " << options.log_path << ": " << resumed
              << " trials of this task\n";
  }

  std::mt19937_64 rng(options.seed ^ 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(resumed));
  TuneResult result;
  SigintGuard sigint(options.quiet);
  const auto start = std::chrono::steady_clock::now();
  const double flops = dag.Flops();
  const double bytes = static_cast<double>(dag.InputBytes() + dag.OutputBytes());
  int empty_rounds = 0;
  while (static_cast<int64_t>(records.size()) < options.trials) {
    if (SigintGuard::interrupted()) {
      result.interrupted = true;
      break;
    }
    auto since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    auto t_phase = std::chrono::steady_clock::now();
    double train_s = 0;
    if (!pending.empty()) {
      RETURN_IF_ERROR(model->Update(pending));
      train_s = since(t_phase);
      samples_given += static_cast<int64_t>(pending.size());
      pending.clear();
    }
    // Best measured states seed the population.
    std::vector<const MeasureRecord*> valid;
    for (const MeasureRecord& r : records)
      if (r.valid()) valid.push_back(&r);
    std::stable_sort(valid.begin(), valid.end(), [](const MeasureRecord* a, const MeasureRecord* b) {
      return a->median_ms() < b->median_ms();
    });
    // Enough for the population's seeds and for local search's states: local search must not
    // depend on the population size (a population of 4 gave no seeds and so no local search).
    const size_t n_best = std::max(
        static_cast<size_t>(options.search.init_measured_ratio * options.search.population),
        options.search.local_search_fraction > 0
            ? static_cast<size_t>(std::max(options.search.local_search_states, 0))
            : size_t{0});
    std::vector<State> best_states;
    for (size_t i = 0; i < valid.size() && best_states.size() < n_best; ++i) {
      absl::StatusOr<State> s = schedule::ReplaySteps(dag, valid[i]->steps);
      if (s.ok()) best_states.push_back(*std::move(s));
    }

    const int n = static_cast<int>(
        std::min<int64_t>(options.per_round, options.trials - static_cast<int64_t>(records.size())));
    t_phase = std::chrono::steady_clock::now();
    // Local search around the best measured states (our addition, search/local_search.h) gives
    // ceil(fraction · n) of the round; the evolutionary search the rest, never the same states.
    std::vector<State> states;
    const int n_local =
        best_states.empty()
            ? 0
            : static_cast<int>(std::ceil(options.search.local_search_fraction * n - 1e-9));
    if (n_local > 0) {
      ASSIGN_OR_RETURN(states, LocalSearchCandidates(dag, target, best_states, measured, n_local,
                                                     options.search.local_search_states, *model,
                                                     options.search.annotation));
    }
    const int64_t local_trials = static_cast<int64_t>(states.size());
    {  // called even for 0 states: it validates the search options
      std::unordered_set<uint64_t> exclude = measured;
      for (const State& s : states) exclude.insert(StepsHash(s.steps()));
      ASSIGN_OR_RETURN(std::vector<State> evolved,
                       EvolutionarySearch(dag, target, sketches, *model, exclude, best_states,
                                          n - static_cast<int>(states.size()), options.search,
                                          rng));
      for (State& s : evolved) states.push_back(std::move(s));
    }
    if (states.empty()) {
      // TVM retries once (retry_search_one_round_on_empty), then stops.
      if (++empty_rounds > 1) {
        result.exhausted = true;
        if (!options.quiet) std::cerr << "tune: no new candidates; the search space looks exhausted\n";
        break;
      }
      continue;
    }
    empty_rounds = 0;
    // The model's scores of the round's candidates, before any of them is measured.
    RoundRecord round_line;
    DescribeModel(*model, samples_given, &round_line);
    ASSIGN_OR_RETURN(round_line.predicted, ScoreStates(dag, target, states, *model));
    const double search_s = since(t_phase);
    t_phase = std::chrono::steady_clock::now();

    std::vector<measure::BuildResult> candidates = BuildCandidates(dag, target, states);
    const double build_s = since(t_phase);
    t_phase = std::chrono::steady_clock::now();
    std::vector<measure::MeasureResult> results = measurer->Run(dag, candidates);
    const double measure_s = since(t_phase);
    if (results.size() != candidates.size()) {
      return absl::InternalError(absl::StrCat("the measurer returned ", results.size(),
                                              " results for ", candidates.size(), " candidates"));
    }
    std::vector<MeasureRecord> round;
    round.reserve(states.size());
    bool all_no_device = true;
    double round_best_ms = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < states.size(); ++i) {
      MeasureRecord r;
      r.workload_key = key;
      r.workload = workload;
      r.target = target;
      r.steps = states[i].steps();
      r.result = std::move(results[i]);
      // Lowering (+ PTX compile on cuda, done here); cpu: plus the worker's JIT compile.
      r.compile_ms = candidates[i].compile_ms + (target.is_gpu() ? 0.0 : r.result.compile_ms);
      r.run_ms = r.result.run_wall_ms;
      r.timestamp = CurrentTimestamp();
      r.seed = options.seed;
      r.trial = static_cast<int64_t>(records.size() + round.size());
      if (r.result.error != measure::MeasureError::kNoDevice) all_no_device = false;
      if (r.valid()) round_best_ms = std::min(round_best_ms, r.median_ms());
      round.push_back(std::move(r));
    }
    round_line.workload_key = key;
    round_line.target = target;
    round_line.round = first_round + static_cast<int64_t>(result.rounds.size());
    round_line.first_trial = round.front().trial;
    round_line.trials = static_cast<int64_t>(round.size());
    round_line.local_search_trials = local_trials;  // written when the fraction is > 0
    round_line.local_search_fraction = options.search.local_search_fraction;
    ScoreRound(round, dag, memory_bound, &round_line);
    round_line.train_s = train_s;
    round_line.search_s = search_s;
    round_line.build_s = build_s;
    round_line.measure_s = measure_s;
    round_line.timestamp = CurrentTimestamp();
    round_line.seed = options.seed;
    RETURN_IF_ERROR(SigintGuard::Append(writer, round, round_line));
    result.rounds.push_back(round_line);
    result.local_search_trials.push_back(local_trials);
    for (MeasureRecord& r : round) {
      measured.insert(RecordStateHash(r));
      pending.push_back(SampleOf(r, dag, target, memory_bound));
      records.push_back(std::move(r));
    }
    result.new_trials += static_cast<int64_t>(round.size());
    if (all_no_device) {
      return absl::FailedPreconditionError(
          absl::StrCat("no device: ", records.back().result.message));
    }

    if (!options.quiet) {
      double best_ms = std::numeric_limits<double>::infinity();
      std::map<std::string, int64_t> errors;
      for (const MeasureRecord& r : records) {
        if (r.valid()) best_ms = std::min(best_ms, r.median_ms());
        if (r.result.error != measure::MeasureError::kNone)
          ++errors[measure::MeasureErrorName(r.result.error)];
      }
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const int64_t left = options.trials - static_cast<int64_t>(records.size());
      const double eta = elapsed / static_cast<double>(result.new_trials) * left;
      // GB/s for memory-bound workloads (the figure of merit there), GFLOP/s otherwise.
      const double amount = memory_bound ? bytes : flops;
      const char* unit = memory_bound ? " GB/s" : " GFLOP/s";
      auto rate = [&](double ms) {
        return std::isfinite(ms) && ms > 0 ? Fixed(amount / (ms * 1e6), 2) : std::string("-");
      };
      std::string err_text;
      for (const auto& [name, count] : errors) absl::StrAppend(&err_text, " ", name, "=", count);
      std::string model_text = absl::StrCat(model->Name(), " acc ",
                                            std::isnan(round_line.pairwise_accuracy)
                                                ? std::string("-")
                                                : Fixed(round_line.pairwise_accuracy, 2));
      if (round_line.model_trained) {
        absl::StrAppend(&model_text, " (", round_line.train_programs, " programs, ",
                        round_line.boost_rounds, " trees)");
      } else if (options.use_xgboost) {
        absl::StrAppend(&model_text, " (untrained)");
      }
      std::cerr << "tune: trials " << records.size() << "/" << options.trials << "  best "
                << rate(best_ms) << unit
                << (std::isfinite(best_ms) ? absl::StrCat(" (", Fixed(best_ms, 4), " ms)") : "")
                << "  round best " << rate(round_best_ms) << unit << "  errors"
                << (err_text.empty() ? " none" : err_text) << "  model " << model_text
                << "  elapsed " << Duration(elapsed) << "  eta " << Duration(eta)
                << "  (round: "
                << (local_trials > 0 ? absl::StrCat(local_trials, " local, ") : std::string())
                << "train " << Fixed(train_s, 2) << "s, search " << Fixed(search_s, 1)
                << "s, build " << Fixed(build_s, 1) << "s, measure " << Fixed(measure_s, 1)
                << "s)\n";
    }
    if (options.early_stopping > 0) {
      // Trials since the best median was last improved (strictly), over all the task's records.
      double best = std::numeric_limits<double>::infinity();
      int64_t best_index = -1;
      for (size_t i = 0; i < records.size(); ++i) {
        if (records[i].valid() && records[i].median_ms() < best) {
          best = records[i].median_ms();
          best_index = static_cast<int64_t>(i);
        }
      }
      const int64_t since_best = static_cast<int64_t>(records.size()) - 1 - best_index;
      if (since_best >= options.early_stopping &&
          static_cast<int64_t>(records.size()) < options.trials) {
        result.early_stopped = true;
        if (!options.quiet) {
          std::cerr << "tune: stopping early: no improvement in the last " << since_best
                    << " trials (--early-stopping " << options.early_stopping << ")\n";
        }
        break;
      }
    }
  }
  if (SigintGuard::interrupted()) result.interrupted = true;
  if (result.interrupted && !options.quiet) {
    std::cerr << "tune: interrupted after " << records.size() << " trials (all logged to "
              << options.log_path << "); run again with the same log to resume\n";
  }

  result.trials = static_cast<int64_t>(records.size());
  absl::StatusOr<MeasureRecord> best = BestRecord(records, key, target);
  if (best.ok()) result.best = *std::move(best);
  for (const WorkloadSummary& s : SummarizeLog(records)) {
    if (s.workload_key != key) continue;
    result.errors = s.errors;
    result.errors.erase("none");
    result.curve = s.curve;
  }
  return result;
}

}  // namespace tilesearch::search
