#include "search/tuner.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_set>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/interrupt.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "costmodel/xgboost_model.h"
#include "measure/builder.h"
#include "measure/runner.h"
#include "runtime/timing.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/naive_gpu.h"
#include "search/local_search.h"
#include "search/model_judge.h"
#include "search/sketch.h"
#include "search/sketch_family.h"
#include "search/streaming_build.h"
#include "search/tensor_core_space.h"
#include "search/timing_parts.h"

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
    return absl::InvalidArgumentError(absl::StrCat("the device lock '", lock,
                                                   "' is the tuning log '", options.log_path,
                                                   "': give the lock a file of its own"));
  }
  return absl::OkStatus();
}

using schedule::State;

// SIGINT handling. The first SIGINT lets the round in flight finish and be logged, then the job
// stops; a second one stops the process at once (dying of SIGINT: exit status 130 in a shell),
// except while records are being appended to the log, where it waits for the append (one write +
// fsync) to end, so the log never holds a partial line and no measured batch is lost.
volatile std::sig_atomic_t g_interrupts = 0;  // SIGINTs received since the guard was installed
volatile std::sig_atomic_t g_writing = 0;     // 1 while LogWriter::Append runs
volatile std::sig_atomic_t g_quiet = 0;       // TuneOptions::quiet
volatile pid_t g_tuner_pid = 0;               // the tuning process (not its forked workers)

// Async-signal-safe: ends the process as killed by SIGINT (the shell's status 130).
[[noreturn]] void StopNow() {
  if (!g_quiet) {
    WriteStderrSignalSafe(
        "tune: stopped at once by a second interrupt; the batch in flight is not logged "
        "(every measured batch is); run again with the same log to resume\n");
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
                             const std::optional<RoundRecord>& round) {
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

// " ranks: r0 build 1.2s measure 3.4s idle 0.5s | r1 ..." for a spread round; "" otherwise.
// The measure phase's split for the round line: " = worker setups 1 (2.1s) + candidates 28.7s"
// (+ " + task data 0.4s" when built in the round); empty when the runner reported none.
std::string MeasureSplitText(const MeasureSplit& split) {
  if (split.empty()) return "";
  std::string text =
      absl::StrCat(" = worker setups ", split.worker_setups, " (", Fixed(split.setup_s, 1),
                   "s) + candidates ", Fixed(split.items_s, 1), "s");
  if (split.prepare_s > 0) absl::StrAppend(&text, " + task data ", Fixed(split.prepare_s, 1), "s");
  return text;
}

std::string RankTimingText(const std::vector<RankTiming>& ranks) {
  std::string text;
  for (const RankTiming& r : ranks) {
    absl::StrAppend(&text, text.empty() ? "  ranks: " : " | ", "r", r.rank, " ", r.trials,
                    " trials build ", Fixed(r.build_s, 1), "s measure ", Fixed(r.measure_s, 1),
                    "s idle ", Fixed(r.idle_s, 1), "s");
  }
  return text;
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

// A logged record's state replayed and lowered for ctx.target() (plain schedule::Lower, as
// measured states always were): nullopt when the steps do not replay; a null lowering when the
// state does not lower (it then has no features).
std::optional<Candidate> ReplayRecord(const MeasureRecord& r, const TuneContext& ctx) {
  absl::StatusOr<State> state = schedule::ReplaySteps(ctx.dag(), r.steps);
  if (!state.ok()) return std::nullopt;
  Candidate c{*std::move(state), nullptr, 0};
  absl::StatusOr<schedule::LoweredKernel> kernel =
      schedule::Lower(ctx.dag(), c.state, ctx.target());
  if (kernel.ok()) c.lowered = std::make_shared<const schedule::LoweredKernel>(*std::move(kernel));
  return c;
}

// The training sample of a record: its merit and the features of its candidate's lowering (none
// without one, which the model ignores).
costmodel::TrainingSample SampleOf(const MeasureRecord& r, const Candidate* c,
                                   const TuneContext& ctx, bool memory_bound) {
  costmodel::TrainingSample s;
  s.throughput = RecordMerit(r, ctx.dag(), memory_bound);
  if (c == nullptr || c->lowered == nullptr) return s;
  absl::StatusOr<costmodel::StoreFeatures> f =
      costmodel::ExtractLoweredFeatures(c->state, *c->lowered, ctx.target());
  if (f.ok()) s.features.stores = *std::move(f);
  return s;
}

costmodel::TrainingSample SampleOf(const MeasureRecord& r, const std::optional<Candidate>& c,
                                   const TuneContext& ctx, bool memory_bound) {
  return SampleOf(r, c ? &*c : nullptr, ctx, memory_bound);
}

// The round's build inputs: each candidate's own lowering (made once, when the search validated
// it), so the Builder compiles without lowering again; compile_ms starts with that lowering time.
std::vector<measure::BuildInput> BuildInputsOf(const std::vector<Candidate>& round) {
  std::vector<measure::BuildInput> inputs(round.size());
  for (size_t i = 0; i < round.size(); ++i) {
    inputs[i].lowered = round[i].lowered;  // null: the Builder reports invalid_schedule
    inputs[i].lower_ms = round[i].lower_ms;
  }
  return inputs;
}

std::vector<measure::BuildResult> BuildCandidates(const measure::Builder& builder,
                                                  const std::vector<Candidate>& round) {
  return builder.Build(BuildInputsOf(round));
}

// Fills the model fields of a round line from the model that is about to score the round.
void DescribeModel(const costmodel::CostModel& model, const std::string& model_init,
                   int64_t samples_given, RoundRecord* round) {
  round->model = model.Name();
  round->model_init = model_init;
  round->train_samples = samples_given;
  round->model_validation_accuracy = std::numeric_limits<double>::quiet_NaN();
  if (const auto* xgb = dynamic_cast<const costmodel::XGBoostModel*>(&model)) {
    round->model_trained = xgb->trained();
    if (xgb->trained()) {
      const costmodel::XGBoostTrainingReport& report = xgb->last_report();
      round->train_programs = report.num_programs;
      // Before its first Update a warm-started model is the initial ensemble alone.
      round->boost_rounds = std::max<int64_t>(report.rounds, xgb->initial_rounds());
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
  absl::StatusOr<double> recall = actual.empty()
                                      ? absl::StatusOr<double>(nan)
                                      : costmodel::TopKRecall(predicted, actual, round->k);
  round->top_k_recall = recall.ok() ? *recall : nan;
}

absl::Status ValidateTuneOptions(const TuneOptions& options) {
  if (options.trials < 1) {
    return absl::InvalidArgumentError(absl::StrCat("trials must be >= 1, got ", options.trials));
  }
  if (options.per_round < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("per_round must be >= 1 (0: the target's choice), got ", options.per_round));
  }
  if (options.model_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model_threads must be >= 0 (0 = all usable cores), got ", options.model_threads));
  }
  if (options.early_stopping < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("early_stopping must be >= 0 (0 = off), got ", options.early_stopping));
  }
  if (options.remeasure_best < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("remeasure_best must be >= 0 (0 = off), got ", options.remeasure_best));
  }
  if (options.final_candidates > 0 &&
      (options.final_min_runs < 1 || !(options.final_min_total_ms >= 0) ||
       !(options.final_budget_s >= 0) || !(options.final_soak_ms >= 0))) {
    return absl::InvalidArgumentError(
        absl::StrCat("the final selection needs final_min_runs >= 1, final_min_total_ms >= 0, "
                     "final_budget_s >= 0 and final_soak_ms >= 0, got ",
                     options.final_min_runs, ", ", options.final_min_total_ms, ", ",
                     options.final_budget_s, " and ", options.final_soak_ms));
  }
  if (options.final_passes < 1 || options.final_passes > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("final_passes must be in 1..64, got ", options.final_passes));
  }
  if (!(options.compile_timeout_ms > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile_timeout_ms must be > 0, got ", options.compile_timeout_ms));
  }
  if (!(options.time_limit_s >= 0)) {  // NaN too
    return absl::InvalidArgumentError(
        absl::StrCat("time_limit_s must be >= 0 (0 = none), got ", options.time_limit_s));
  }
  if (options.measure_batch < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "measure_batch must be >= 0 (0 = the whole round), got ", options.measure_batch));
  }
  if (!(options.screen_factor >= 0)) {  // NaN too
    return absl::InvalidArgumentError(absl::StrCat(
        "screen_factor must be >= 0 (below 1: no screening), got ", options.screen_factor));
  }
  if (options.log_path.empty()) return absl::InvalidArgumentError("a tuning log path is required");
  if (!options.model_init.empty() && !options.use_xgboost) {
    return absl::InvalidArgumentError(
        "an initial model (model_init) needs the learned model, not the random one");
  }
  if (!(options.search.local_search_fraction >= 0 && options.search.local_search_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local_search_fraction must be in [0, 1] (negative: the target's choice), got ",
        options.search.local_search_fraction));
  }
  if (options.overlap_rounds != 0 && options.overlap_rounds != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "overlap_rounds must be 0 (off), 1 (on) or negative (the target's choice), got ",
        options.overlap_rounds));
  }
  if (!(options.search.family_dominance == 0 || options.search.family_dominance >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("family_dominance must be 0 (off) or >= 1, got ",
                                                   options.search.family_dominance));
  }
  if (!(options.search.family_floor >= 0 && options.search.family_floor <= 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("family_floor must be in [0, 0.5], got ", options.search.family_floor));
  }
  if (options.search.local_search_states < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("local_search_states must be >= 1, got ", options.search.local_search_states));
  }
  if (options.search.population < 1 || options.search.generations < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("search population must be >= 1 and generations >= 0, got ",
                     options.search.population, " and ", options.search.generations));
  }
  return absl::OkStatus();
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The final timing of a remeasure round in passes (TuneOptions::final_passes): the whole timing
// each schedule is asked for, split over `passes` parts.
struct PartTiming {
  int passes = 1;  // 1: each schedule timed whole, as the runner's timing says
  int min_runs = 0;
  double min_total_ms = 0;
  double soak_ms = 0;
};

// One round's candidates (the first `local` from local search, the rest from the evolutionary
// search), the model's scores of them before any is measured, their builds, their records once
// measured (and logged), and the phases' times.
struct Round {
  std::vector<Candidate> candidates;
  int64_t local = 0;
  int64_t untuned = -1;  // index of the untuned program among the candidates; -1: not among them
  RoundRecord line;      // model fields and predicted scores filled by the search
  std::vector<measure::BuildResult> built;  // parallel to candidates
  /// The round's builds in progress (PrepareRound): MeasureRound takes each candidate as soon as
  /// it is built, and fills `built` (with TuneOptions::stream_builds off, all are built before
  /// PrepareRound returns); null when `built` was filled before (Remeasure) or the round
  /// measurer builds.
  std::shared_ptr<StreamingBuild> building;
  /// A remeasure round (TuningJob::Remeasure): the index in the job's records of the record each
  /// candidate measures again; empty for search rounds.
  std::vector<size_t> remeasured;
  bool final_timing = false;           // a remeasure round of the final selection
  PartTiming parts;                    // the final selection's timing in passes
  std::vector<MeasureRecord> records;  // the measured candidates' records, logged, in order
  int64_t first_trial = 0;             // the task's trial number of records[0]
  bool overlapped = false;  // trained, searched and built while the previous round was measured
  /// The model was given this round's samples on the measuring thread, beside the next round's
  /// build (TrainBeside), so FinishRound queues none.
  bool trained_beside = false;
  /// With a pretrained model: each model's scores of the candidates (the pretrained one's, the
  /// online-only one's), whichever searched; judged once measured (TuningJob::JudgeModels).
  std::vector<double> pretrained_scores;
  std::vector<double> online_scores;
  /// The online-only model had records when it scored the round (otherwise its scores are an
  /// untrained model's, and the judge cross-validates instead).
  bool online_trained = false;
  /// The candidates' features (CandidateFeatures), extracted once when the round is scored, for
  /// the scores of both models and the round's training samples.
  std::vector<costmodel::ProgramFeatures> features;
  std::vector<RankTiming> ranks;  // per rank, when TuneOptions::measurer spread the round
  double train_s = 0;
  double search_s = 0;
  double build_s = 0;
  double measure_s = 0;
  MeasureSplit split;  // measure_s split by the runners (Runner::last_run_usage)
};

// A tuning job between rounds: the task's records (resumed and new) with their candidates, the
// model and the samples it has not seen yet, the log and the runner.
class TuningJob {
 public:
  // A training still running (a round ended in an error) is waited for: it uses the models.
  ~TuningJob() {
    if (training_.joinable()) training_.join();
  }
  // Resume / setup: reads the task's records from the log, opens it for appending, creates the
  // runner, the model and the sketches.
  static absl::StatusOr<std::unique_ptr<TuningJob>> Open(const schedule::Workload& workload,
                                                         const Target& target,
                                                         const TuneOptions& options) {
    ASSIGN_OR_RETURN(ir::ComputeDAG dag, workload.Build());
    auto task =
        std::make_shared<const SearchTask>(std::move(dag), target, options.search.precision);
    RETURN_IF_ERROR(CheckLockIsNotTheLog(options));
    measure::MeasureOptions measure_options = options.measure;
    measure_options.precision = options.search.precision;  // one option: the search's
    measure_options.screen_factor = options.screen_factor >= 1 ? options.screen_factor : 0;
    ASSIGN_OR_RETURN(std::unique_ptr<measure::Runner> runner,
                     measure::CreateRunner(target, measure_options));
    RETURN_IF_ERROR(measure::CheckMeasureHostMemory(task->dag, options.measure, target));
    // The task's records already in the log, and the first new round's number: past every round
    // line of the log, skipped ones included (NextRoundNumber), so a resumed log never holds two
    // rounds of one number.
    std::vector<MeasureRecord> records;
    int64_t first_round = 1;
    ReadOptions read;
    read.target = target;
    read.workload_key = task->workload_key;
    read.verify_workload_keys = true;  // never resume from a record whose key lies
    absl::StatusOr<LogContents> log = ReadLog(options.log_path, read);
    if (log.ok()) {
      if (!options.quiet) {
        for (const std::string& w : log->warnings)
          std::cerr << "tilesearch: warning: " << w << "\n";
      }
      records = std::move(log->records);
      first_round = NextRoundNumber(*log);
    } else if (log.status().code() != absl::StatusCode::kNotFound) {
      return log.status();
    }
    if (!options.model_init.empty()) {
      // Before the log is created: a model file that does not load leaves no empty log behind.
      costmodel::XGBoostModel probe;
      RETURN_IF_ERROR(probe.LoadForTarget(options.model_init, target));
    }
    ASSIGN_OR_RETURN(LogWriter writer, LogWriter::Open(options.log_path));
    const uint64_t seed =
        options.seed ^ 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(records.size());
    std::unique_ptr<TuningJob> job(new TuningJob(workload, options,
                                                 TuneContext(task, options.search, seed),
                                                 std::move(runner), std::move(writer)));
    job->first_round_ = first_round;
    if (!options.model_init.empty()) {
      auto* xgb = static_cast<costmodel::XGBoostModel*>(job->model_.get());
      RETURN_IF_ERROR(xgb->SetInitialModel(options.model_init, target));
    }
    ASSIGN_OR_RETURN(job->sketches_, GenerateSketches(job->ctx_));
    for (MeasureRecord& r : records) {
      std::optional<Candidate> c = ReplayRecord(r, job->ctx_);
      job->Add(std::move(r), std::move(c));
    }
    if (!options.quiet && !job->records_.empty()) {
      std::cerr << "tune: resuming from " << options.log_path << ": " << job->records_.size()
                << " trials of this task\n";
    }
    return job;
  }

  int64_t trials() const { return static_cast<int64_t>(records_.size()); }
  // The task's fastest valid median so far, ms (0 when none: no screening yet).
  double BestValidMs() const {
    double best = 0;
    for (const MeasureRecord& r : records_) {
      if (r.valid() && (best == 0 || r.median_ms() < best)) best = r.median_ms();
    }
    return best;
  }
  TuneResult& result() { return result_; }
  measure::Runner& runner() { return *runner_; }
  const TuneContext& ctx() const { return ctx_; }

  // Gives the model the samples it has not seen (resumed records, the last round's), after the
  // training TrainBeside started, if any, has ended.
  absl::Status UpdateModel(Round& round) {
    RETURN_IF_ERROR(JoinTraining());
    const auto t0 = std::chrono::steady_clock::now();
    round.train_s = carried_train_s_;  // trained beside the last build for this round's search
    carried_train_s_ = 0;
    if (!pending_.empty()) {
      RETURN_IF_ERROR(UpdateModels(pending_));
      round.train_s += SecondsSince(t0);
      samples_given_ += static_cast<int64_t>(pending_.size());
      pending_.clear();
    }
    return absl::OkStatus();
  }

  // The round's candidates: local search around the best measured states gives
  // ceil(fraction · n) of the round (search/local_search.h), the evolutionary search the rest,
  // never the same states; then the model's scores of them, before any is measured.
  absl::Status SearchRound(Round& round) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!held_back_.empty()) return TakeHeldBack(round, t0);
    const SearchOptions& so = options_.search;
    const std::vector<Candidate> best = BestCandidates();
    const int n = static_cast<int>(
        std::min<int64_t>(RoundSize(), options_.trials - trials() - in_flight_trials_));
    const int n_local =
        best.empty() ? 0 : static_cast<int>(std::ceil(so.local_search_fraction * n - 1e-9));
    // Measured states and those of the round in flight are never candidates again.
    std::unordered_set<uint64_t> exclude = measured_;
    exclude.insert(in_flight_.begin(), in_flight_.end());
    if (n_local > 0) {
      ASSIGN_OR_RETURN(round.candidates, LocalSearchCandidates(ctx_, best, exclude, n_local,
                                                               so.local_search_states, Active()));
    }
    round.local = static_cast<int64_t>(round.candidates.size());
    if (static_cast<int>(round.candidates.size()) < n) AddUntuned(round);
    for (const Candidate& c : round.candidates) exclude.insert(StepsHash(c.state.steps()));
    SetFamilyShare(round);
    // A pretrained model shares the task's first round with random states (kUnjudgedEpsGreedy):
    // on held-out H200 workloads its top picks were worse than random ones (bench/NOTES.md), and
    // the judge and the online-only model learn from both. A second round searched while the
    // first is measured (overlapped rounds) is not: random states are slow to measure.
    const double eps = ctx_.options().eps_greedy;
    const bool unjudged =
        online_ != nullptr && !judge_.judged() && trials() == 0 && in_flight_.empty();
    if (unjudged) ctx_ = ctx_.WithEpsGreedy(std::max(eps, kUnjudgedEpsGreedy));
    // Called even for 0 states: it validates the search options.
    absl::StatusOr<std::vector<Candidate>> evolved = EvolutionarySearch(
        ctx_, sketches_, Active(), exclude, best, n - static_cast<int>(round.candidates.size()));
    if (unjudged) ctx_ = ctx_.WithEpsGreedy(eps);
    RETURN_IF_ERROR(evolved.status());
    for (Candidate& c : *evolved) round.candidates.push_back(std::move(c));
    HoldBackFinalHalf(round);
    return ScoreCandidates(round, t0);
  }

  // The last round of the budget, when rounds overlap, is measured as two: its second half is
  // held back (HoldBackFinalHalf) and built while the first is measured (the next SearchRound
  // takes it: TakeHeldBack), so that only half a round is measured after the host's last build
  // instead of a whole one. No search is added: both halves were chosen together.
  void HoldBackFinalHalf(Round& round) {
    const int64_t n = static_cast<int64_t>(round.candidates.size());
    if (options_.overlap_rounds != 1 || n < 2 * kMinFinalHalf ||
        trials() + in_flight_trials_ + n < options_.trials) {
      return;
    }
    const int64_t keep = (n + 1) / 2;
    held_back_local_ = std::max<int64_t>(0, round.local - keep);
    round.local = std::min(round.local, keep);
    held_back_.assign(std::make_move_iterator(round.candidates.begin() + keep),
                      std::make_move_iterator(round.candidates.end()));
    round.candidates.resize(static_cast<size_t>(keep));
  }
  static constexpr int64_t kMinFinalHalf = 16;

  absl::Status TakeHeldBack(Round& round, std::chrono::steady_clock::time_point t0) {
    round.candidates = std::move(held_back_);
    held_back_.clear();
    round.local = held_back_local_;
    held_back_local_ = 0;
    return ScoreCandidates(round, t0);
  }

  // The model's scores of the round's candidates (with a pretrained model, both models'), before
  // any is measured, and the round's search time since `t0`.
  absl::Status ScoreCandidates(Round& round, std::chrono::steady_clock::time_point t0) {
    if (!round.candidates.empty()) {
      DescribeModel(Active(), UseOnline() ? "" : options_.model_init, samples_given_, &round.line);
      round.features = CandidateFeatures(round.candidates, ctx_);
      ASSIGN_OR_RETURN(round.line.predicted, Active().Predict(round.features));
      if (online_) {
        ASSIGN_OR_RETURN(std::vector<double> other,
                         (UseOnline() ? *model_ : *online_).Predict(round.features));
        round.pretrained_scores = UseOnline() ? other : round.line.predicted;
        round.online_scores = UseOnline() ? round.line.predicted : std::move(other);
        round.online_trained = samples_given_ > 0;
      }
    }
    round.search_s = SecondsSince(t0);
    return absl::OkStatus();
  }

  // The tensor-core share the round's evolutionary search draws fresh states with, from the
  // task's measurements when it has sketches of both families (search/sketch_family.h), recorded
  // in the round line. The context keeps its generator and lowering cache.
  void SetFamilyShare(Round& round) {
    const auto is_tc = [](const State& s) { return HasTensorCoreStep(s); };
    const bool tensor_core = std::any_of(sketches_.begin(), sketches_.end(), is_tc);
    const bool simt = !std::all_of(sketches_.begin(), sketches_.end(), is_tc);
    if (!tensor_core || !simt) return;
    const SearchOptions& so = options_.search;
    const double share =
        TensorCoreShareFor(BestPerFamily(records_, ctx_.workload_key()),
                           so.annotation.tensor_core_share, so.family_dominance, so.family_floor);
    round.line.tensor_core_share = share;
    if (share != ctx_.annotation().tensor_core_share) ctx_ = ctx_.WithTensorCoreShare(share);
  }

  // The untuned program as the round's next candidate, once per job, unless already measured
  // (a resumed log): the best is then chosen among candidates that include it.
  void AddUntuned(Round& round) {
    if (untuned_tried_) return;
    untuned_tried_ = true;
    absl::StatusOr<State> state = UntunedState(ctx_.dag(), ctx_.target());
    if (state.ok() && (measured_.contains(StepsHash(state->steps())) ||
                       in_flight_.contains(StepsHash(state->steps())))) {
      return;
    }
    absl::StatusOr<Candidate> c = state.ok() ? LowerCandidate(*std::move(state), ctx_)
                                             : absl::StatusOr<Candidate>(state.status());
    if (!c.ok()) {
      if (!options_.quiet) {
        std::cerr << "tune: warning: the untuned program is not a candidate: " << c.status()
                  << "\n";
      }
      return;
    }
    round.untuned = static_cast<int64_t>(round.candidates.size());
    round.candidates.push_back(*std::move(c));
  }

  // True when the search has run dry: a round without candidates is retried once (TVM
  // retry_search_one_round_on_empty), a second one in a row stops the job.
  bool Exhausted(const Round& round) {
    if (!round.candidates.empty()) {
      empty_rounds_ = 0;
      return false;
    }
    if (++empty_rounds_ <= 1) return false;
    result_.exhausted = true;
    if (!options_.quiet) std::cerr << "tune: no new candidates; the search space looks exhausted\n";
    return true;
  }

  // The next round: the model given the samples it has not seen, the search, the builds.
  // `searched`, when given, is called once the model is no longer used (after the search, or
  // on an error before it).
  absl::Status PrepareRound(Round& round, const measure::Builder& builder,
                            const std::function<void()>& searched = nullptr) {
    absl::Status status = UpdateModel(round);
    if (status.ok()) status = SearchRound(round);
    if (searched) searched();
    RETURN_IF_ERROR(status);
    // A round measurer builds each share where it is measured.
    if (round.candidates.empty() || options_.measurer) return absl::OkStatus();
    // The builds run on a thread of their own and MeasureRound takes each candidate as it is
    // built. One round's builds at a time: the compile workers serve the round measured next.
    if (std::shared_ptr<StreamingBuild> previous = last_build_.lock()) previous->WaitDone();
    round.building = std::make_shared<StreamingBuild>(builder, BuildInputsOf(round.candidates));
    last_build_ = round.building;
    // Without streaming the whole round is built before PrepareRound returns.
    if (!options_.stream_builds) round.building->WaitDone();
    return absl::OkStatus();
  }

  // PrepareRound while the runner sets up the task's measurement on a second thread
  // (Runner::Prepare: on cuda the kept worker's fork, context, inputs and reference), so that the
  // first measurement does not wait for it. GPU targets without a round measurer only.
  absl::Status PrepareRoundWarmingRunner(Round& round, const measure::Builder& builder) {
    if (options_.measurer || !ctx_.target().is_gpu()) return PrepareRound(round, builder);
    const ir::ComputeDAG dag = ctx_.dag();  // ctx_ may be replaced by the search meanwhile
    std::thread warming([&] { runner_->Prepare(dag); });
    absl::Status prepared = PrepareRound(round, builder);
    warming.join();
    return prepared;
  }

  // Measures the round's built candidates in batches of options.measure_batch (the whole round by
  // default), appending each record to the log (one write + fsync) as soon as the runner reports
  // its result, into round.records. Reads the job's records but changes nothing of the job except
  // the log, so PrepareRound may run beside it (overlapped rounds). Errors: the log's; an internal
  // error when the runner reports fewer results than candidates.
  absl::Status MeasureRound(Round& round, const measure::Builder& builder);
  // MeasureRound of a round built whole whose timing is in passes (Round::parts): every candidate
  // timed in round.parts.passes parts, pass after pass in PassOrder (the last pass in the
  // batch's order), one runner call per part, no staged-timing screen; each candidate's record
  // (JoinParts) logged once its last part ran or a part failed (a SIGINT lets the passes finish,
  // as it lets a round in flight finish). Errors: the log's; kInternal when the runner returns
  // no result.
  absl::Status MeasureInParts(Round& round);
  // MeasureRound through TuneOptions::measurer: the round spread over its processes, this one
  // building and measuring its own share with the job's builder and runner; records logged in
  // candidate order as they arrive.
  absl::Status MeasureRoundSpread(Round& round, const measure::Builder& builder);

  // Keeps the measured round's records (the model's samples, the states never measured again),
  // then appends the round line. Errors: the log's; kFailedPrecondition when every candidate
  // reported no_device.
  absl::Status FinishRound(Round& round);

  // Featurizes the samples of `round` (measured, not yet finished) and starts giving them to the
  // models on a thread of its own (training_, joined by the next UpdateModel), so that training
  // overlaps the next round's build and the start of its measurement instead of preceding the
  // search or holding up the GPU: the model that searches the round after next is the same as
  // without it. Call only after the next round's search (ctx_ and the models are then left
  // alone until UpdateModel). Its time is counted into the train_s of the next searched round.
  void TrainBeside(Round& round) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<costmodel::TrainingSample> samples = RoundSamples(round);
    if (!pending_.empty()) {  // keep the order of Update calls that FinishRound would give
      samples.insert(samples.begin(), pending_.begin(), pending_.end());
      pending_.clear();
    }
    samples_given_ += static_cast<int64_t>(samples.size());
    round.trained_beside = true;
    const double featurize_s = SecondsSince(t0);
    training_ = std::thread([this, featurize_s, samples = std::move(samples)] {
      const auto t1 = std::chrono::steady_clock::now();
      training_status_ = UpdateModels(samples);
      carried_train_s_ += featurize_s + SecondsSince(t1);
    });
  }

  // The training samples of the round's measured records: their merit and their candidates'
  // features (those extracted when the round was scored, else extracted now).
  std::vector<costmodel::TrainingSample> RoundSamples(const Round& round) const {
    const bool scored = round.features.size() == round.records.size() &&
                        round.candidates.size() == round.records.size();
    std::vector<costmodel::TrainingSample> samples;
    samples.reserve(round.records.size());
    for (size_t i = 0; i < round.records.size(); ++i) {
      if (scored) {
        costmodel::TrainingSample s;
        s.throughput = RecordMerit(round.records[i], ctx_.dag(), memory_bound_);
        s.features = round.features[i];  // no stores without a lowering: ignored
        samples.push_back(std::move(s));
      } else {
        const Candidate* c = i < round.candidates.size() ? &round.candidates[i] : nullptr;
        samples.push_back(SampleOf(round.records[i], c, ctx_, memory_bound_));
      }
    }
    return samples;
  }

  // Waits for the training TrainBeside started, if any; its error.
  absl::Status JoinTraining() {
    if (training_.joinable()) training_.join();
    absl::Status status = std::move(training_status_);
    training_status_ = absl::OkStatus();
    return status;
  }

  // The states of `round` are being measured: the next round must not repeat them, and the trial
  // budget counts them.
  void SetInFlight(const Round& round) {
    for (const Candidate& c : round.candidates) in_flight_.insert(StepsHash(c.state.steps()));
    in_flight_trials_ = static_cast<int64_t>(round.candidates.size());
  }
  void ClearInFlight() {
    in_flight_.clear();
    in_flight_trials_ = 0;
  }

  // TuneOptions::remeasure_best: measures the `n` fastest valid logged schedules of the task
  // again (one batch, logged as remeasured records) and puts the new records in their places
  // (records, the model's queued samples). Errors: the log's, the runner's.
  absl::Status Remeasure(const measure::Builder& builder, int n);

  // The valid records with a candidate, fastest first, leaving out those `skip` marks.
  std::vector<size_t> FastestValid(const std::vector<bool>& skip) const;

  // Measures the records at `indices` again (one batch, logged as remeasured records), puts the
  // usable new records in their places (records, the model's queued samples), counts them in
  // `replaced` (and lists their indices in `replaced_indices` when given) and reports
  // "tune: <what>, K of them usable ...". Errors: the log's, the runner's, kFailedPrecondition
  // when no device answered.
  absl::Status RemeasureRecords(const measure::Builder& builder, const std::vector<size_t>& indices,
                                const std::string& what, int64_t* replaced,
                                std::vector<size_t>* replaced_indices, bool final_timing = false,
                                const PartTiming& parts = {});

  // TuneOptions::final_candidates: times those of the `n` fastest valid schedules that no earlier
  // job timed so with the final timing, then those faster by their round timing than the fastest
  // so timed (at most `n` more), each batch as Remeasure's, within `budget_s` (estimated from the
  // records). Errors: the log's, the runner's.
  absl::Status FinalSelection(const measure::Builder& builder, int n, int min_runs,
                              double min_total_ms, double budget_s);

  // The log record of the round's candidate i, measured with `result`.
  MeasureRecord RecordOf(const Round& round, size_t i, measure::MeasureResult result) const;

  // The progress line of the round just logged (stderr).
  void Report(const Round& round) const;

  // Early stopping: true when the last options.early_stopping trials (or more) did not improve on
  // the best median.
  bool StopEarly();

  // The job's result, from the task's records.
  TuneResult Finish();

 private:
  TuningJob(const schedule::Workload& workload, const TuneOptions& options, TuneContext ctx,
            std::unique_ptr<measure::Runner> runner, LogWriter writer)
      : workload_(workload),
        options_(options),
        ctx_(std::move(ctx)),
        runner_(std::move(runner)),
        writer_(std::move(writer)),
        model_(MakeModel(options)),
        online_(options.use_xgboost && !options.model_init.empty() ? MakeModel(options) : nullptr),
        memory_bound_(IsMemoryBound(
            ctx_.dag().Flops(),
            static_cast<double>(ctx_.dag().InputBytes() + ctx_.dag().OutputBytes()))) {}

  static std::unique_ptr<costmodel::CostModel> MakeModel(const TuneOptions& options) {
    if (!options.use_xgboost) return std::make_unique<costmodel::RandomModel>(options.seed);
    return std::make_unique<costmodel::XGBoostModel>(
        costmodel::OnlineModelOptions(options.seed, options.model_threads));
  }

  // Candidates of the next round: per_round, except that a learned model without any record of
  // the task gets a first round of min(per_round, max(16, trials / 4)), so that it is trained
  // from the second round on even at small budgets (at --trials 48 and the default 64 per round
  // it would otherwise score every round untrained).
  // With a pretrained model the rounds overlap from the first one, whose measurement then holds
  // up the whole pipeline: the second round waits for it to be built, and the second round's
  // measurement for it to end (half of it random states, the slowest to measure). So the task's
  // first round is then at most half a round: on the H200 (fp32 matmul 4096³) a first round of 128
  // took 9.1 s to measure while the next was prepared in 5.3 s, one core busy in between.
  int64_t RoundSize() const {
    if (!options_.use_xgboost || trials() > 0 || samples_given_ > 0) return options_.per_round;
    int64_t size = std::min<int64_t>(options_.per_round,
                                     std::max<int64_t>(kFirstRoundMin, options_.trials / 4));
    if (options_.overlap_rounds == 1 && !options_.model_init.empty() && in_flight_.empty()) {
      size = std::min(size, std::max<int64_t>(kFirstRoundMin, options_.per_round / 2));
    }
    return size;
  }
  static constexpr int64_t kFirstRoundMin = 16;
  // The random share of a round searched by a pretrained model not yet judged on the task.
  static constexpr double kUnjudgedEpsGreedy = 0.5;

  // Gives `samples` to the model and, with a pretrained one, to the online-only model on a second
  // thread (separate boosters: XGBoost allows it; each trains on few records, so two at once use
  // the cores better than one after the other).
  absl::Status UpdateModels(const std::vector<costmodel::TrainingSample>& samples) {
    if (online_ == nullptr) return model_->Update(samples);
    absl::Status online_status;
    std::thread online([&] { online_status = online_->Update(samples); });
    const absl::Status status = model_->Update(samples);
    online.join();
    RETURN_IF_ERROR(status);
    return online_status;
  }

  // With a pretrained model, the model the search uses: the online-only one once its top picks
  // of the task's measured rounds were better (JudgeModels), the pretrained one before.
  bool UseOnline() const { return online_ != nullptr && judge_.prefers_online(); }
  costmodel::CostModel& Active() { return UseOnline() ? *online_ : *model_; }

  // Judges the round's held-out scores of both models (made before it was measured) by their top
  // picks (search/model_judge.h). Scores of an online model that had no records yet are replaced
  // by cross-validated ones from fresh online models trained on the round's other records. The
  // judgement, for the round's log line; nullopt when the round was not judged.
  std::optional<RoundRecord::Judgement> JudgeModels(
      const Round& round, const std::vector<MeasureRecord>& round_records) {
    const size_t n = round_records.size();
    if (online_ == nullptr || round.pretrained_scores.size() != n ||
        round.online_scores.size() != n) {
      return std::nullopt;
    }
    std::vector<double> merits;
    for (const MeasureRecord& r : round_records) {
      merits.push_back(RecordMerit(r, ctx_.dag(), memory_bound_));
    }
    std::vector<double> online = round.online_scores;
    if (!round.online_trained) {
      if (round.features.size() != n || n < static_cast<size_t>(2 * kJudgeFolds)) {
        return std::nullopt;
      }
      std::vector<costmodel::TrainingSample> samples(n);
      for (size_t i = 0; i < n; ++i) {
        samples[i].features = round.features[i];
        samples[i].throughput = merits[i];
      }
      absl::StatusOr<std::vector<double>> cv =
          CrossValidatedScores([&] { return MakeModel(options_); }, samples, kJudgeFolds);
      if (!cv.ok()) return std::nullopt;  // the round stays unjudged
      online = *std::move(cv);
    }
    absl::StatusOr<ModelJudge::RoundMerits> judged =
        judge_.AddRound(round.pretrained_scores, online, merits);
    if (!judged.ok()) return std::nullopt;  // e.g. no valid program: nothing to judge by
    return RoundRecord::Judgement{judged->pretrained, judged->online, !round.online_trained};
  }
  static constexpr int kJudgeFolds = 4;

  // Keeps a record, its candidate (valid records seed the search) and its training sample.
  // `queue`: the record's sample waits for the model's next Update (false: already given).
  void Add(MeasureRecord r, std::optional<Candidate> c, bool queue = true) {
    measured_.insert(RecordStateHash(r));
    if (queue) pending_.push_back(SampleOf(r, c, ctx_, memory_bound_));
    candidates_.push_back(std::move(c));
    records_.push_back(std::move(r));
  }

  // The best measured candidates, best first: enough for the population's seeds and for local
  // search's states (local search must not depend on the population size).
  std::vector<Candidate> BestCandidates() const {
    const SearchOptions& so = options_.search;
    std::vector<size_t> valid;
    for (size_t i = 0; i < records_.size(); ++i) {
      // The untuned program is a baseline, not a state of the search space: it has no decisions
      // for local search or mutation to edit.
      if (records_[i].valid() && !records_[i].untuned) valid.push_back(i);
    }
    std::stable_sort(valid.begin(), valid.end(), [&](size_t a, size_t b) {
      return records_[a].median_ms() < records_[b].median_ms();
    });
    const size_t n_best = std::max(static_cast<size_t>(so.init_measured_ratio * so.population),
                                   so.local_search_fraction > 0
                                       ? static_cast<size_t>(std::max(so.local_search_states, 0))
                                       : size_t{0});
    std::vector<Candidate> best;
    for (size_t i = 0; i < valid.size() && best.size() < n_best; ++i) {
      if (candidates_[valid[i]]) best.push_back(*candidates_[valid[i]]);
    }
    return best;
  }

  const schedule::Workload workload_;
  const TuneOptions& options_;
  TuneContext ctx_;
  std::unique_ptr<measure::Runner> runner_;
  LogWriter writer_;
  std::unique_ptr<costmodel::CostModel> model_;
  // With TuneOptions::model_init: an online-only model given the same samples as model_ (the
  // warm-started one); the search uses the one with the better held-out ranking of the task's
  // measured rounds (UseOnline). Null otherwise.
  std::unique_ptr<costmodel::CostModel> online_;
  ModelJudge judge_;  // of model_ and online_ over the task's measured rounds
  // The final round's second half, searched with its first (HoldBackFinalHalf), and how many of
  // them local search found.
  std::vector<Candidate> held_back_;
  int64_t held_back_local_ = 0;
  const bool memory_bound_;
  std::vector<State> sketches_;
  std::vector<MeasureRecord> records_;
  std::vector<std::optional<Candidate>> candidates_;  // parallel to records_
  std::unordered_set<uint64_t> measured_;
  std::unordered_set<uint64_t> in_flight_;  // states of the round measured beside the search
  int64_t in_flight_trials_ = 0;
  std::vector<costmodel::TrainingSample> pending_;  // samples not yet given to the model
  int64_t samples_given_ = 0;                       // samples passed to the model's Update so far
  double carried_train_s_ = 0;  // TrainBeside's time, for the next searched round's train_s
  std::weak_ptr<StreamingBuild> last_build_;  // the latest round's builds (PrepareRound)
  std::thread training_;          // TrainBeside's training of the models, joined by UpdateModel
  absl::Status training_status_;  // its result
  int64_t first_round_ = 1;
  int empty_rounds_ = 0;
  bool untuned_tried_ = false;
  TuneResult result_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

MeasureRecord TuningJob::RecordOf(const Round& round, size_t i,
                                  measure::MeasureResult result) const {
  const Target& target = ctx_.target();
  MeasureRecord r;
  r.workload_key = ctx_.workload_key();
  r.precision = ctx_.options().precision;
  r.workload = workload_;
  r.target = target;
  r.steps = round.candidates[i].state.steps();
  r.result = std::move(result);
  // Lowering (+ the Builder's PTX compile on cuda); cpu: plus the worker's JIT compile.
  r.compile_ms = round.built[i].compile_ms + (target.is_gpu() ? 0.0 : r.result.compile_ms);
  r.run_ms = r.result.run_wall_ms;
  r.timestamp = CurrentTimestamp();
  r.seed = options_.seed;
  r.trial = round.first_trial + static_cast<int64_t>(i);
  r.untuned = static_cast<int64_t>(i) == round.untuned;
  if (!round.remeasured.empty()) {
    const MeasureRecord& first = records_[round.remeasured[i]];
    r.trial = first.trial;
    r.untuned = first.untuned;
    r.remeasured = true;
    r.final_timing = round.final_timing;
  }
  return r;
}

std::vector<size_t> TuningJob::FastestValid(const std::vector<bool>& skip) const {
  std::vector<size_t> valid;
  for (size_t i = 0; i < records_.size(); ++i) {
    if (records_[i].valid() && candidates_[i] && !(i < skip.size() && skip[i])) valid.push_back(i);
  }
  std::stable_sort(valid.begin(), valid.end(), [&](size_t a, size_t b) {
    return records_[a].median_ms() < records_[b].median_ms();
  });
  return valid;
}

absl::Status TuningJob::Remeasure(const measure::Builder& builder, int n) {
  std::vector<size_t> valid = FastestValid({});
  if (valid.size() > static_cast<size_t>(n)) valid.resize(static_cast<size_t>(n));
  return RemeasureRecords(
      builder, valid, absl::StrCat("re-measured the ", valid.size(), " fastest logged schedules"),
      &result_.remeasured, nullptr);
}

absl::Status TuningJob::FinalSelection(const measure::Builder& builder, int n, int min_runs,
                                       double min_total_ms, double budget_s) {
  // The final timing's caps (measure/item_request.cc ApplyRequestContext): past min_runs it
  // stops at run_cap runs or wall_cap ms of its timed phase, cache flushes included.
  const runtime::TimingOptions& base = options_.measure.timing;
  const double soak_ms = options_.final_soak_ms;
  const int passes = options_.final_passes;
  const int run_cap = std::max(base.max_runs, min_runs);
  const double wall_cap = runtime::WallLimitFor(base.max_wall_ms, min_total_ms);
  // A record's timing phase, ms (its run wall time less its checks and module loads, which a
  // record of several parts has several of), and per run.
  auto timing_wall_ms = [](const MeasureRecord& r) {
    return std::max(r.result.run_wall_ms - r.result.check_ms - r.result.load_ms, 0.0);
  };
  // A schedule's estimated cost, seconds: its record's build and check, and the final timing:
  // the runs it needs (min_total_ms of its median, at least min_runs, at most run_cap) at its
  // round's wall time per run (flushes included), within the wall cap past min_runs. Schedules
  // are taken while the estimates fit the budget.
  // With passes, each part has the runner's caps for its share (at most part_run_cap runs past
  // its share of min_runs, the wall cap of its share of the run time), and each part checks the
  // schedule again.
  const int part_runs = std::max((min_runs + passes - 1) / passes, 1);
  const double part_total_ms = min_total_ms / passes;
  const int part_run_cap = std::max(base.max_runs, part_runs);
  const double part_wall_cap = runtime::WallLimitFor(base.max_wall_ms, part_total_ms);
  auto cost_s = [&](const MeasureRecord& r) {
    const runtime::TimingStats& t = r.result.timing;
    double timing_ms = 2 * min_total_ms;  // (no round timing to go by)
    if (t.runs > 0 && timing_wall_ms(r) > 0 && t.median_ms > 0) {
      const double per_run = timing_wall_ms(r) / t.runs;
      const double needed =
          std::clamp(std::ceil(part_total_ms / t.median_ms), static_cast<double>(part_runs),
                     static_cast<double>(part_run_cap));
      double part_ms = needed * per_run;
      if (part_wall_cap > 0) {
        part_ms = std::max(part_runs * per_run, std::min(part_ms, part_wall_cap));
      }
      timing_ms = passes * part_ms;
    }
    // Each part loads the schedule in the worker again: a module load on a GPU, the JIT compile
    // on the cpu (in the result's compile time).
    const double setup_ms =
        ctx_.target().is_gpu() ? passes * r.result.load_ms : (passes - 1) * r.result.compile_ms;
    return (r.compile_ms + setup_ms + passes * r.result.check_ms + soak_ms + timing_ms) / 1000;
  };
  double spent_s = 0;
  // `first`: the schedule opens a batch, whose first part soaks a whole soak more in passes.
  auto fits = [&](size_t i, bool first) {
    const double c = cost_s(records_[i]) + (first && passes > 1 ? soak_ms / 1000 : 0);
    if (spent_s + c > budget_s) return false;
    spent_s += c;
    return true;
  };
  // Timed with the final timing already (an earlier job's final selection on this log): not
  // again, and the fastest of them is the bar the others must pass. A final timing counts when
  // it took the runs and half the summed time asked now, or stopped at a cap the final timing
  // would stop at too (a fast kernel behind slow cache flushes reaches the runs' cap or the wall
  // limit first; with passes, every part's wall limit): one of 100 ms does not stand for a held
  // timing of a second. Likewise it must have followed at least half the soak asked now: one
  // taken cool does not stand for one at the steady state. Only the final selection's own
  // records count (MeasureRecord::final_timing, the mark BestRecord ranks by): a log's held
  // timings from before the mark are taken again, once, and marked.
  auto final_timed = [&](const MeasureRecord& r) {
    const runtime::TimingStats& t = r.result.timing;
    return r.valid() && r.final_timing && !r.result.screened && t.runs >= min_runs &&
           t.soak_ms >= 0.5 * soak_ms &&
           (t.runs >= run_cap || t.runs * t.mean_ms >= 0.5 * min_total_ms ||
            (part_wall_cap > 0 && timing_wall_ms(r) >= 0.95 * passes * part_wall_cap));
  };
  std::vector<bool> tried(records_.size(), false);
  double best_timed = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < records_.size(); ++i) {
    const MeasureRecord& r = records_[i];
    if (final_timed(r)) {
      tried[i] = true;
      best_timed = std::min(best_timed, r.median_ms());
    }
  }
  // First the n fastest valid schedules not so timed yet; then, while some are faster by their
  // round timing than the fastest so timed, those (at most n more).
  std::vector<size_t> batch;
  const std::vector<size_t> fastest = FastestValid({});
  for (size_t k = 0; k < fastest.size() && k < static_cast<size_t>(n); ++k) {
    if (tried[fastest[k]]) continue;
    if (!fits(fastest[k], batch.empty())) {
      // Said, not silent: the pick is then by round timing.
      if (batch.empty()) {
        std::cerr << "tune: warning: final selection: the fastest schedule not yet so timed is "
                  << "estimated at " << Fixed(cost_s(records_[fastest[k]]), 1)
                  << " s, over the final budget of " << Fixed(budget_s, 1)
                  << " s: none timed again (the pick is by round timing)\n";
      }
      break;
    }
    batch.push_back(fastest[k]);
  }
  const std::string timing = absl::StrCat(
      soak_ms > 0 ? absl::StrCat(absl::StrFormat("%g", soak_ms), " ms of untimed runs, then ") : "",
      min_runs, "+ runs and ", Fixed(min_total_ms, 0), "+ ms of runs (at most ", run_cap, " runs",
      wall_cap > 0 ? absl::StrCat(" or ", Fixed(wall_cap / 1000, 1), " s") : "", "), no screen",
      passes > 1 ? absl::StrCat(", in ", passes, " interleaved passes") : "");
  std::string what = absl::StrCat("final selection (", timing, "): timed ", batch.size(),
                                  " of the ", n, " fastest schedules again");
  size_t more = static_cast<size_t>(n);
  absl::Status status;
  runner_->SetTiming(min_runs, min_total_ms, soak_ms);
  while (!batch.empty() && status.ok() && !SigintGuard::interrupted()) {
    std::vector<size_t> replaced;
    status = RemeasureRecords(builder, batch, what, &result_.final_timed, &replaced,
                              /*final_timing=*/true,
                              PartTiming{passes, min_runs, min_total_ms, soak_ms});
    for (size_t i : batch) tried[i] = true;
    // Only new measurements set the bar: a timed-out one left its round record in place.
    for (size_t i : replaced) {
      if (records_[i].valid()) best_timed = std::min(best_timed, records_[i].median_ms());
    }
    batch.clear();
    for (size_t i : FastestValid(tried)) {
      if (batch.size() >= more || !(records_[i].median_ms() < best_timed) ||
          !fits(i, batch.empty())) {
        break;
      }
      batch.push_back(i);
    }
    more -= batch.size();
    what = absl::StrCat("final selection (", timing, "): timed ", batch.size(),
                        " more, faster by their round timing than the fastest so timed");
  }
  runner_->SetTiming(0, 0, 0);
  return status;
}

absl::Status TuningJob::RemeasureRecords(const measure::Builder& builder,
                                         const std::vector<size_t>& valid, const std::string& what,
                                         int64_t* replaced, std::vector<size_t>* replaced_indices,
                                         bool final_timing, const PartTiming& parts) {
  if (valid.empty()) return absl::OkStatus();
  Round round;
  round.remeasured = valid;
  round.final_timing = final_timing;
  round.parts = parts;
  for (size_t i : valid) round.candidates.push_back(*candidates_[i]);
  const auto t = std::chrono::steady_clock::now();
  if (!options_.measurer) round.built = BuildCandidates(builder, round.candidates);
  round.build_s = SecondsSince(t);
  RETURN_IF_ERROR(MeasureRound(round, builder));
  std::vector<std::string> changes;
  int64_t usable = 0;
  bool all_no_device = !round.records.empty();
  for (size_t k = 0; k < round.records.size(); ++k) {
    const size_t i = round.remeasured[k];
    MeasureRecord& now = round.records[k];
    changes.push_back(absl::StrCat(
        "trial ", now.trial, " ", Fixed(records_[i].median_ms(), 4), " -> ",
        now.valid() ? Fixed(now.median_ms(), 4) : measure::MeasureErrorName(now.result.error)));
    if (now.result.error != measure::MeasureError::kNoDevice) all_no_device = false;
    // As ReadLog will: a timeout or a missing device says nothing about the schedule.
    if (!SupersedesEarlierMeasurement(now)) continue;
    // Nothing was given to the model yet (Open queues every resumed sample): the queued sample
    // of the record becomes the new measurement's.
    if (samples_given_ == 0 && i < pending_.size()) {
      pending_[i] = SampleOf(now, candidates_[i], ctx_, memory_bound_);
    }
    records_[i] = std::move(now);
    ++*replaced;
    ++usable;
    if (replaced_indices != nullptr) replaced_indices->push_back(i);
  }
  if (all_no_device) {
    return absl::FailedPreconditionError(
        absl::StrCat("no device: ", round.records.front().result.message));
  }
  if (!options_.quiet) {
    std::cerr << "tune: " << what << ", " << usable
              << " of them usable (ms, logged -> now): " << absl::StrJoin(changes, ", ")
              << " (build " << Fixed(round.build_s, 1) << "s, measure " << Fixed(round.measure_s, 1)
              << "s)\n";
  }
  return absl::OkStatus();
}

absl::Status TuningJob::MeasureRoundSpread(Round& round, const measure::Builder& builder) {
  const size_t n = round.candidates.size();
  RoundShare all;
  all.workload = workload_;
  all.target = ctx_.target();
  all.precision = ctx_.options().precision;
  all.round = first_round_ + static_cast<int64_t>(result_.rounds.size());
  for (size_t i = 0; i < n; ++i) {
    all.indices.push_back(static_cast<int64_t>(i));
    all.steps.push_back(round.candidates[i].state.steps());
  }
  // A remeasure round times every schedule fully (as MeasureRound).
  const bool screen = options_.screen_factor >= 1 && round.remeasured.empty();
  all.screen_above_ms = screen ? options_.screen_factor * BestValidMs() : 0;
  all.screen_factor = options_.screen_factor >= 1 ? options_.screen_factor : 0;
  all.compile_timeout_ms = options_.compile_timeout_ms;
  all.unroll_budget = options_.unroll_budget;
  // This process's share: the search's own lowerings, built and measured as in MeasureRound.
  auto local = [&](const std::vector<int64_t>& indices, const RoundMeasurer::ResultCallback& done,
                   RankTiming* timing) {
    timing->trials = static_cast<int64_t>(indices.size());
    if (indices.empty()) return;
    std::vector<Candidate> mine;
    for (int64_t i : indices) mine.push_back(round.candidates[static_cast<size_t>(i)]);
    const auto t_build = std::chrono::steady_clock::now();
    const std::vector<measure::BuildResult> built = BuildCandidates(builder, mine);
    timing->build_s = SecondsSince(t_build);
    MeasureBuilt(built, indices, all.screen_above_ms, ctx_.dag(), *runner_, done, timing);
  };
  round.built.assign(n, measure::BuildResult{});  // RecordOf reads each one's compile_ms
  absl::Status logged;
  const auto t = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<RankTiming>> ranks =
      options_.measurer->MeasureRound(all, local, [&](const MeasuredCandidate& m) {
        if (!logged.ok()) return;  // after a failed append: nothing more
        const size_t i = static_cast<size_t>(m.index);
        round.built[i].compile_ms = m.build_ms;
        MeasureRecord record = RecordOf(round, i, m.result);
        logged = SigintGuard::Append(writer_, {record}, std::nullopt);
        if (logged.ok()) round.records.push_back(std::move(record));
      });
  const double wall_s = SecondsSince(t);
  RETURN_IF_ERROR(logged);
  RETURN_IF_ERROR(ranks.status());
  if (round.records.size() != n) {
    return absl::InternalError(absl::StrCat("the round measurer delivered ", round.records.size(),
                                            " results for ", n, " candidates"));
  }
  // The round's phases: its slowest rank's build, then the rest of the spread's wall time.
  round.ranks = *std::move(ranks);
  double build_s = 0;
  for (const RankTiming& r : round.ranks) build_s = std::max(build_s, r.build_s);
  round.build_s += build_s;
  round.measure_s += std::max(0.0, wall_s - build_s);
  for (const RankTiming& r : round.ranks) round.split.Add(r.split);
  return absl::OkStatus();
}

absl::Status TuningJob::MeasureRound(Round& round, const measure::Builder& builder) {
  if (options_.measurer) return MeasureRoundSpread(round, builder);
  if (round.parts.passes > 1 && !round.building) return MeasureInParts(round);
  const size_t n = round.candidates.size();
  const size_t batch = options_.measure_batch > 0 ? static_cast<size_t>(options_.measure_batch)
                                                  : std::max<size_t>(n, 1);
  // The screen's reference: the task's best so far, including this round's earlier batches.
  double best_ms = BestValidMs();
  // A remeasure round times every schedule fully: screened against its own logged time, a
  // schedule that got slower would keep only its short timing.
  const bool screen = options_.screen_factor >= 1 && round.remeasured.empty();
  if (round.building) round.built.assign(n, measure::BuildResult{});
  for (size_t first = 0; first < n;) {
    // Streaming: the candidates built so far in a row (at least one, waited for), up to a batch.
    size_t count = std::min(batch, n - first);
    if (round.building) {
      count = round.building->WaitReady(first, count);
      for (size_t i = first; i < first + count; ++i) round.built[i] = round.building->Get(i);
    }
    const std::vector<measure::BuildResult> part(round.built.begin() + first,
                                                 round.built.begin() + first + count);
    runner_->SetScreenAboveMs(screen ? options_.screen_factor * best_ms : 0);
    const auto t = std::chrono::steady_clock::now();
    absl::Status logged;
    size_t reported = 0;
    std::vector<measure::MeasureResult> results = runner_->RunStreaming(
        ctx_.dag(), part, [&](size_t k, const measure::MeasureResult& result) {
          if (!logged.ok() || k != reported) return;  // after a failed append: nothing more
          MeasureRecord record = RecordOf(round, first + k, result);
          logged = SigintGuard::Append(writer_, {record}, std::nullopt);
          if (!logged.ok()) return;
          if (record.valid() && (best_ms == 0 || record.median_ms() < best_ms)) {
            best_ms = record.median_ms();
          }
          round.records.push_back(std::move(record));
          ++reported;
        });
    round.measure_s += SecondsSince(t);
    round.split.Add(runner_->last_run_usage());
    RETURN_IF_ERROR(logged);
    if (results.size() != part.size() || reported != part.size()) {
      return absl::InternalError(absl::StrCat("the runner returned ", results.size(),
                                              " results and reported ", reported, " for ",
                                              part.size(), " candidates"));
    }
    first += count;
  }
  // The builds' wall time, from their start to the last candidate built (they overlap the
  // measurement of the round's first candidates).
  if (round.building) round.build_s = round.building->wall_s();
  return absl::OkStatus();
}

absl::Status TuningJob::MeasureInParts(Round& round) {
  const size_t n = round.candidates.size();
  const PartTiming& p = round.parts;
  // Each part asks its share; the runs rounded up, so that the parts time min_runs at least.
  const int part_runs = std::max((p.min_runs + p.passes - 1) / p.passes, 1);
  const double part_total_ms = p.min_total_ms / p.passes;
  // Timed in full, as every remeasure round (MeasureRound): no staged-timing screen left from
  // the last search round.
  runner_->SetScreenAboveMs(0);
  std::vector<std::vector<measure::MeasureResult>> parts(n);
  std::vector<double> soaked_ms(n, 0);
  std::vector<std::optional<MeasureRecord>> joined(n);
  const auto t = std::chrono::steady_clock::now();
  // The runner's timing as the final selection set it, on every way out.
  const absl::Cleanup restore_timing = [&] {
    runner_->SetTiming(p.min_runs, p.min_total_ms, p.soak_ms);
  };
  bool first = true;
  // The passes of the batch all run, as a round in flight does after a SIGINT. A schedule's
  // record is logged as soon as its last part ran (or a part failed), so that a job killed during
  // the last pass keeps the schedules it finished. The last pass runs in the batch's order,
  // fastest by round timing first: a log cut off there holds the final timings of the fastest
  // (BestRecord then picks among the final-timed records, not the round records left unjudged).
  for (int pass = 0; pass < p.passes; ++pass) {
    for (size_t i : PassOrder(n, p.passes - 1 - pass)) {
      // A schedule whose part failed is not timed further (JoinParts takes that part).
      if (joined[i].has_value()) continue;
      // The batch's first part follows the whole soak (the card brought to its steady state
      // once); every later part its share, right after the part before it.
      const double soak_ms = first ? p.soak_ms : p.soak_ms / p.passes;
      first = false;
      runner_->SetTiming(part_runs, part_total_ms, soak_ms);
      std::vector<measure::MeasureResult> results = runner_->Run(ctx_.dag(), {round.built[i]});
      round.split.Add(runner_->last_run_usage());
      if (results.size() != 1) {
        return absl::InternalError(
            absl::StrCat("the runner returned ", results.size(), " results for 1 candidate"));
      }
      soaked_ms[i] += soak_ms;
      parts[i].push_back(std::move(results.front()));
      if (pass + 1 == p.passes || !parts[i].back().ok()) {
        joined[i] = RecordOf(round, i, JoinParts(std::move(parts[i]), soaked_ms[i]));
        RETURN_IF_ERROR(SigintGuard::Append(writer_, {*joined[i]}, std::nullopt));
      }
    }
  }
  round.measure_s += SecondsSince(t);
  // In candidate order, as FinishRound pairs records with candidates.
  for (size_t i = 0; i < n; ++i) round.records.push_back(std::move(*joined[i]));
  return absl::OkStatus();
}

absl::Status TuningJob::FinishRound(Round& round) {
  bool all_no_device = true;
  if (!round.trained_beside) {
    for (costmodel::TrainingSample& s : RoundSamples(round)) pending_.push_back(std::move(s));
  }
  for (size_t i = 0; i < round.records.size(); ++i) {
    if (round.records[i].result.error != measure::MeasureError::kNoDevice) all_no_device = false;
    Add(std::move(round.records[i]), std::move(round.candidates[i]), /*queue=*/false);
    ++result_.new_trials;
  }
  const std::vector<MeasureRecord> round_records(records_.begin() + round.first_trial,
                                                 records_.end());
  RoundRecord& line = round.line;
  line.workload_key = ctx_.workload_key();
  line.target = ctx_.target();
  line.round = first_round_ + static_cast<int64_t>(result_.rounds.size());
  line.first_trial = round.first_trial;
  line.trials = static_cast<int64_t>(round_records.size());
  line.local_search_trials = round.local;  // written when the fraction is > 0
  line.local_search_fraction = options_.search.local_search_fraction;
  ScoreRound(round_records, ctx_.dag(), memory_bound_, &line);
  line.judge = JudgeModels(round, round_records);
  line.train_s = round.train_s;
  line.search_s = round.search_s;
  line.build_s = round.build_s;
  line.measure_s = round.measure_s;
  line.overlapped = round.overlapped;
  line.measure_split = round.split;
  line.ranks = round.ranks;
  line.timestamp = CurrentTimestamp();
  line.seed = options_.seed;
  RETURN_IF_ERROR(SigintGuard::Append(writer_, {}, line));
  result_.rounds.push_back(line);
  result_.local_search_trials.push_back(round.local);
  if (all_no_device) {
    return absl::FailedPreconditionError(
        absl::StrCat("no device: ", records_.back().result.message));
  }
  return absl::OkStatus();
}

void TuningJob::Report(const Round& round) const {
  if (options_.quiet) return;
  const RoundRecord& line = round.line;
  double best_ms = std::numeric_limits<double>::infinity();
  double round_best_ms = std::numeric_limits<double>::infinity();
  std::map<std::string, int64_t> errors;
  for (size_t i = 0; i < records_.size(); ++i) {
    const MeasureRecord& r = records_[i];
    if (r.valid()) best_ms = std::min(best_ms, r.median_ms());
    const bool in_round = i + static_cast<size_t>(line.trials) >= records_.size();
    if (r.valid() && in_round) round_best_ms = std::min(round_best_ms, r.median_ms());
    if (r.result.error != measure::MeasureError::kNone)
      ++errors[measure::MeasureErrorName(r.result.error)];
  }
  const double elapsed = SecondsSince(start_);
  const int64_t left = options_.trials - trials();
  const double eta = elapsed / static_cast<double>(result_.new_trials) * left;
  // GB/s for memory-bound workloads (the figure of merit there), GFLOP/s otherwise.
  const ir::ComputeDAG& dag = ctx_.dag();
  const double amount =
      memory_bound_ ? static_cast<double>(dag.InputBytes() + dag.OutputBytes()) : dag.Flops();
  const char* unit = memory_bound_ ? " GB/s" : " GFLOP/s";
  auto rate = [&](double ms) {
    return std::isfinite(ms) && ms > 0 ? Fixed(amount / (ms * 1e6), 2) : std::string("-");
  };
  std::string err_text;
  for (const auto& [name, count] : errors) absl::StrAppend(&err_text, " ", name, "=", count);
  std::string model_text = absl::StrCat(
      model_->Name(), " acc ",
      std::isnan(line.pairwise_accuracy) ? std::string("-") : Fixed(line.pairwise_accuracy, 2));
  if (line.model_trained) {
    absl::StrAppend(&model_text, " (", line.train_programs, " programs, ", line.boost_rounds,
                    " trees)");
  } else if (options_.use_xgboost) {
    absl::StrAppend(&model_text, " (untrained)");
  }
  std::cerr << "tune: trials " << records_.size() << "/" << options_.trials << "  best "
            << rate(best_ms) << unit
            << (std::isfinite(best_ms) ? absl::StrCat(" (", Fixed(best_ms, 4), " ms)") : "")
            << "  round best " << rate(round_best_ms) << unit << "  errors"
            << (err_text.empty() ? " none" : err_text) << "  model " << model_text << "  elapsed "
            << Duration(elapsed) << "  eta " << Duration(eta) << "  (round: "
            << (round.overlapped ? "train, search and build beside the previous measure; " : "")
            << (round.local > 0 ? absl::StrCat(round.local, " local, ") : std::string()) << "train "
            << Fixed(round.train_s, 2) << "s, search " << Fixed(round.search_s, 1) << "s, build "
            << Fixed(round.build_s, 1) << "s, measure " << Fixed(round.measure_s, 1) << "s"
            << MeasureSplitText(round.split) << ")" << RankTimingText(round.ranks) << "\n";
}

bool TuningJob::StopEarly() {
  if (options_.early_stopping <= 0) return false;
  // Trials since the best median was last improved (strictly), over all the task's records.
  double best = std::numeric_limits<double>::infinity();
  int64_t best_index = -1;
  for (size_t i = 0; i < records_.size(); ++i) {
    if (records_[i].valid() && records_[i].median_ms() < best) {
      best = records_[i].median_ms();
      best_index = static_cast<int64_t>(i);
    }
  }
  const int64_t since_best = trials() - 1 - best_index;
  if (since_best < options_.early_stopping || trials() >= options_.trials) return false;
  result_.early_stopped = true;
  if (!options_.quiet) {
    std::cerr << "tune: stopping early: no improvement in the last " << since_best
              << " trials (--early-stopping " << options_.early_stopping << ")\n";
  }
  return true;
}

TuneResult TuningJob::Finish() {
  if (absl::Status trained = JoinTraining(); !trained.ok() && !options_.quiet) {
    std::cerr << "tune: warning: the last model update failed: " << trained << "\n";
  }
  if (SigintGuard::interrupted()) result_.interrupted = true;
  if (result_.interrupted && !options_.quiet) {
    std::cerr << "tune: interrupted after " << records_.size() << " trials (all logged to "
              << options_.log_path << "); run again with the same log to resume\n";
  }
  result_.trials = trials();
  absl::StatusOr<MeasureRecord> best = BestRecord(records_, ctx_.workload_key(), ctx_.target());
  if (best.ok()) result_.best = *std::move(best);
  absl::StatusOr<State> untuned = UntunedState(ctx_.dag(), ctx_.target());
  for (const MeasureRecord& r : records_) {
    if (r.untuned || (untuned.ok() && r.steps == untuned->steps())) {
      result_.untuned = r;
      break;
    }
  }
  for (const WorkloadSummary& s : SummarizeLog(records_)) {
    if (s.workload_key != ctx_.workload_key()) continue;
    result_.errors = s.errors;
    result_.errors.erase("none");
    result_.curve = s.curve;
  }
  return std::move(result_);
}

}  // namespace

absl::StatusOr<State> UntunedState(const ir::ComputeDAG& dag, const Target& target) {
  if (target.is_gpu()) return schedule::NaiveGpuSchedule(dag, target);
  return State::Initial(dag);
}

TuneOptions ResolveTuneOptions(const TuneOptions& options, const Target& target) {
  TuneOptions resolved = options;
  if (resolved.search.local_search_fraction < 0) {
    resolved.search.local_search_fraction = target.is_gpu() ? 0.25 : 0.0;
  }
  if (resolved.overlap_rounds < 0) resolved.overlap_rounds = target.is_gpu() ? 1 : 0;
  if (resolved.per_round == 0) resolved.per_round = target.is_gpu() ? 128 : 64;
  if (resolved.final_candidates < 0) resolved.final_candidates = target.is_gpu() ? 8 : 0;
  return resolved;
}

namespace {

// Measures `round` on a second thread while `next` is prepared (trained, searched, built) on this
// one. Neither touches what the other reads: MeasureRound only reads the job's records and
// appends to the log; PrepareRound leaves the log alone and skips the states in flight. The
// measuring thread forks the measurement worker while this thread, or the round's build thread
// (streaming builds), may run the search's threads or fork compile workers: neither child needs
// a lock the other side holds (malloc is fork-safe in glibc; the compile workers run MLIR, which
// the measurement side enters only to compile the task's reference kernels when it sets a task
// up, and vice versa for CUDA). A compile worker forked during that setup could inherit a held
// LLVM lock: it then hangs and costs its one candidate a compile_timeout.
// Once `round` is measured and `next` searched, the measuring thread starts the models' training on
// `round`'s samples on a thread of its own (TuningJob::TrainBeside), which runs beside the rest of
// `next`'s build and the start of its measurement, so that neither the host nor the GPU waits for
// it; skipped when no round will be searched after `next` (`trials` ends with it).
absl::Status MeasureBesidePrepare(TuningJob& job, Round& round, Round& next,
                                  const measure::Builder& builder, int64_t trials) {
  absl::Status measured;
  std::mutex mu;
  std::condition_variable cv;
  bool searched = false;
  job.SetInFlight(round);
  std::thread measuring([&] {
    measured = job.MeasureRound(round, builder);
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return searched; });
    lock.unlock();
    const int64_t after_next = job.trials() + static_cast<int64_t>(round.records.size()) +
                               static_cast<int64_t>(next.candidates.size());
    if (measured.ok() && !next.candidates.empty() && after_next < trials &&
        !SigintGuard::interrupted()) {
      job.TrainBeside(round);
    }
  });
  absl::Status prepared = job.PrepareRound(next, builder, [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      searched = true;
    }
    cv.notify_one();
  });
  measuring.join();
  job.ClearInFlight();
  next.overlapped = true;
  RETURN_IF_ERROR(measured);
  return prepared;
}

}  // namespace

absl::StatusOr<TuneResult> Tune(const schedule::Workload& workload, const Target& target,
                                const TuneOptions& given) {
  const TuneOptions options = ResolveTuneOptions(given, target);
  RETURN_IF_ERROR(ValidateTuneOptions(options));
  ASSIGN_OR_RETURN(std::unique_ptr<TuningJob> job, TuningJob::Open(workload, target, options));
  measure::BuilderOptions build_options;
  build_options.parallel.timeout_ms = options.compile_timeout_ms;
  build_options.gpu.unroll_budget = options.unroll_budget;
  const measure::Builder builder(target, build_options);
  SigintGuard sigint(options.quiet);
  const auto started = std::chrono::steady_clock::now();
  if (options.remeasure_best > 0) RETURN_IF_ERROR(job->Remeasure(builder, options.remeasure_best));
  std::optional<Round> round;  // searched and built, not yet measured
  bool first = true;
  while (true) {
    if (SigintGuard::interrupted()) {
      job->result().interrupted = true;  // a prepared round is dropped unmeasured
      break;
    }
    if (!round) {
      if (job->trials() >= options.trials) break;
      round.emplace();
      // The first round is searched and built while the runner sets up its task.
      RETURN_IF_ERROR(first ? job->PrepareRoundWarmingRunner(*round, builder)
                            : job->PrepareRound(*round, builder));
      first = false;
      if (job->Exhausted(*round)) break;
      if (round->candidates.empty()) {
        round.reset();
        continue;
      }
    }
    round->first_trial = job->trials();
    std::optional<Round> next;
    // Overlap once the task has records (the model has something to rank the next round with)
    // and the budget leaves trials for another round; from the first round when the model
    // starts pretrained (it ranks without records) and the budget leaves more than one round
    // after it (a small budget's second round is better searched after the first is measured:
    // around its best, by a model that saw it).
    const int64_t after = job->trials() + static_cast<int64_t>(round->candidates.size());
    const bool has_records = job->trials() > 0;
    const bool pretrained_start = !options.model_init.empty() && options.use_xgboost &&
                                  options.trials - after > options.per_round;
    if (options.overlap_rounds == 1 && (has_records || pretrained_start) &&
        after < options.trials) {
      next.emplace();
      RETURN_IF_ERROR(MeasureBesidePrepare(*job, *round, *next, builder, options.trials));
    } else {
      RETURN_IF_ERROR(job->MeasureRound(*round, builder));
    }
    RETURN_IF_ERROR(job->FinishRound(*round));
    job->Report(*round);
    if (job->StopEarly()) break;
    if (options.time_limit_s > 0 && SecondsSince(started) >= options.time_limit_s &&
        job->trials() < options.trials) {
      job->result().time_limited = true;
      break;
    }
    round.reset();
    // An empty next round is searched again without overlap (Exhausted counts it then); a
    // non-empty one ends a run of empty rounds as a serial one does.
    if (next && !next->candidates.empty()) {
      job->Exhausted(*next);
      round = std::move(next);
    }
  }
  // Final-selection settings asked while there is no final selection: said, not silent (the
  // passes only at a count other than the default, which every cpu tune has with it off).
  if ((options.final_candidates <= 0 || options.measurer) && !options.quiet) {
    std::vector<std::string> unused;
    if (options.final_soak_ms > 0) {
      unused.push_back(
          absl::StrCat("the final soak (", absl::StrFormat("%g", options.final_soak_ms), " ms)"));
    }
    if (options.final_passes != TuneOptions::kDefaultFinalPasses) {
      unused.push_back(absl::StrCat("the final passes (", options.final_passes, ")"));
    }
    if (!unused.empty()) {
      std::cerr << "tune: note: "
                << (options.measurer ? "a spread job has no final selection"
                                     : "the final selection is off (--final-candidates 0; the "
                                       "default on cpu)")
                << ", so these have no effect: " << absl::StrJoin(unused, ", ") << "\n";
    }
  }
  if (options.final_candidates > 0 && !options.measurer && !job->result().interrupted &&
      !SigintGuard::interrupted()) {
    // The trials are logged: a failed final selection leaves the pick to their round timings.
    if (absl::Status s =
            job->FinalSelection(builder, options.final_candidates, options.final_min_runs,
                                options.final_min_total_ms, options.final_budget_s);
        !s.ok() && !options.quiet) {
      std::cerr << "tune: warning: the final selection failed (the pick is by round timing): "
                << s.message() << "\n";
    }
    if (SigintGuard::interrupted()) job->result().interrupted = true;
  }
  return job->Finish();
}

}  // namespace tilesearch::search
