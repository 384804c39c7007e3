// The tuning loop of one task (Ansor, OSDI'20 §5 / TVM v0.19 SketchPolicyNode::Search with
// auto_scheduler.TuningOptions): every round gives the cost model the records it has not seen, runs
// the evolutionary search (search/evolutionary_search.h) for the round's candidates (each lowered
// once by the search, search/tune_context.h), builds their lowerings (measure::Builder:
// PTX in parallel compile workers on cuda, on a thread of their own so that each candidate is
// measured as soon as it is built, TuneOptions::stream_builds; on cpu the runner's worker
// JIT-compiles each nest), checks and times them (measure::Runner) in batches of at most
// TuneOptions::measure_batch, appending each
// record to the log as soon as it is measured (fsync'd, search/log_io.h), then the
// round line, and prints a progress line. A job resumes from its log: the records
// of the task (workload key + target) train the model, their states are never measured again and
// they count toward the trial budget.
//
// With SearchOptions::local_search_fraction > 0 (by default 0.25 on GPU targets, 0 on cpu), from
// the second round on that share of each round's candidates are the model's best unmeasured
// neighbors of the best measured states (search/local_search.h, our addition); the evolutionary
// search gives the rest.
//
// Overlapped rounds (TuneOptions::overlap_rounds, on by default for GPU targets): once the task has
// records (or from the first round when the model starts pretrained, TuneOptions::model_init, and
// the budget leaves more than one round after it), round r is measured on a second thread while
// round r + 1 is searched and built on this one, so the GPU is not idle while the host searches
// and compiles (each was about a third of a round on the H200). The measuring thread, once round r
// is measured and round r + 1 searched, gives the model round r's samples while round r + 1 builds
// (the model that searches round r + 2 is the one it would be without this; its training time is
// that round's train_s). The price: round r + 1 is chosen by a model that has not seen round r's
// measurements (one round stale, as in asynchronous batch Bayesian optimization), and never
// repeats a state of round r. Records and round lines are written exactly as without overlap.
// The first round is searched and built while the runner sets up its measurement of the task
// (measure::Runner::Prepare).
//
// Model quality: each round's candidates are scored by the current model (ScoreCandidates) before
// they are measured; once measured they are records the model has never seen, so the round line
// written after them (RoundRecord, search/measure_record.h) holds an honest held-out pairwise
// ranking accuracy and top-k recall of those scores against the measured throughput, plus how the
// model was trained (samples, XGBoost boosting rounds).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "measure/measure.h"
#include "schedule/schedule_file.h"
#include "schedule/state.h"
#include "search/evolutionary_search.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/round_measurer.h"

namespace tilesearch::search {

/// Summed run time a tuner's candidate is timed for at least (after min_runs), ms.
inline constexpr double kCandidateMinTotalMs = 5;
/// Timed runs of a tuner's candidate at least (after its warm-up). Over 784 fully timed records
/// of an fp32 matmul 4096³ tune on the H200, the median of the first 5 runs was within 0.35 % of
/// the 10-run median at the 99th percentile (bench/NOTES.md), and the runs are most of a
/// contender's measurement, which bounds a tune's checked trials per second.
inline constexpr int kCandidateMinRuns = 5;

/// measure::MeasureOptions with the tuner's candidate timing (kCandidateMinRuns,
/// kCandidateMinTotalMs).
inline measure::MeasureOptions CandidateMeasureOptions() {
  measure::MeasureOptions m;
  m.timing.min_runs = kCandidateMinRuns;
  m.timing.min_total_ms = kCandidateMinTotalMs;
  return m;
}

/// What one Tuner run does: its budget, rounds, cost model, search and measurement.
struct TuneOptions {
  /// Total trials of the task, counting those already in the log.
  int trials = 64;
  /// Candidates measured per round (num_measures_per_round). With the learned model and no record
  /// of the task yet, the first round measures min(per_round, max(16, trials / 4)) so that the
  /// model is trained from the second round on even at small budgets; with a pretrained model and
  /// overlapped rounds, at most max(16, per_round / 2), so that measuring starts sooner and the
  /// second round's build does not wait for a long first measurement. 0: the target's choice
  /// (ResolveTuneOptions): 128 on GPU targets, 64 (TVM's) on cpu. Why 128 on the H200: the search
  /// costs about the same per round whatever the round's size, and with rounds overlapped the host
  /// side (train, search, build) was the longer one; fp32 matmul 4096³, 1024 trials: 10.98 checked
  /// trials/s with 64, 15.07 with 128, the same best (bench/results/
  /// h200-2026-12-03-population-and-points-per-thread.md).
  int per_round = 0;
  /// At most this many candidates per runner call (Runner::RunStreaming); 0: no cap (with
  /// streaming builds a call takes the candidates built so far in a row). The measuring worker
  /// and the task's reference are kept across calls (measure/kept_worker.h), so a call costs
  /// little. Whatever the batch, each record is appended to the log (one write + fsync) as soon
  /// as its result arrives, so a killed job loses no finished measurement. The staged-timing
  /// screen (screen_factor) is set per call, from the best before it.
  int measure_batch = 0;
  /// Staged timing: each batch is measured with measure::MeasureOptions::screen_above_ms set to
  /// this factor times the task's best valid time so far, so candidates slower than that in their
  /// first short timing keep it instead of a full timing (successive halving with two rungs).
  /// 0 (or below 1): every candidate is timed fully. 1.5 leaves the full timing to the round's
  /// contenders: a candidate 1.5× slower than the best is ranked well enough by its short timing
  /// for the cost model, and the full timing of the slow majority was most of a trial's time (on
  /// the CPU a flushed run costs more than a 0.3 ms kernel).
  double screen_factor = 1.5;
  /// Per-candidate limit of the GPU build (MLIR → PTX → cubin) while tuning, ms; a candidate over
  /// it is a compile_timeout record. Every round waits for its slowest build, and on the H200 the
  /// candidates that took over 3 s were all unrolled SIMT kernels 15–150× slower than the best,
  /// while the ten fastest of each of eight matmul 4096³ tunes built in at most 0.4 s
  /// (bench/NOTES.md). codegen's own default (10 s) holds elsewhere (measure, replay).
  double compile_timeout_ms = 3000;
  /// codegen::GpuCompileOptions::unroll_budget of the GPU builds (0: none, the default).
  int64_t unroll_budget = 0;
  /// The tuning log (JSON Lines); created when absent, appended to otherwise. Required.
  std::string log_path;
  /// Seeds the search, the random model and the records' "seed".
  uint64_t seed = 0;
  /// The learned model (XGBoostModel); false: RandomModel (the ablation baseline).
  bool use_xgboost = true;
  /// A pretrained model file (`tilesearch train-model`) the learned model starts from and keeps
  /// boosting on top of with the task's records (XGBoostModel::SetInitialModel); "" = start
  /// untrained. With one, an online-only model learns the same records beside it and each round
  /// is searched by whichever ranked the task's measured rounds better (pairwise accuracy of the
  /// scores each gave a round before it was measured); until a round is judged, half of a round is
  /// drawn at random (eps-greedy 0.5). Round lines name the initial model of the model that
  /// searched (empty: the online-only one). Why: on eight held-out H200 workloads the pretrained
  /// model's own picks were worse than random ones (bench/results/h200-2026-12-03-heldout-*.md).
  /// Must be a model of the tuning target (kind and arch) and this build's features.
  std::string model_init;
  /// XGBoost training threads (XGBoostOptions::nthread); 0 = every usable core. Training data is
  /// small (hundreds to thousands of store rows), so 1 thread costs little and avoids OpenMP
  /// contention on a busy host; results are the same for any count.
  int model_threads = 0;
  SearchOptions search;
  /// How candidates are checked and timed. Its timing's min_runs and min_total_ms default to
  /// kCandidateMinRuns and kCandidateMinTotalMs here, below runtime::TimingOptions' 10 runs and
  /// 50 ms: a tuner ranks candidates,
  /// and the runs past min_runs that 50 ms asks for, each behind a cache flush, were most of a
  /// trial on the CPU (a 64 MiB host write per run: 0.7–1 s per contender of matmul 256³ on 2
  /// cores; with the host runner's check-run screen, 2.46 → 2.7–5.0 checked trials/s over four
  /// seeds, bench/NOTES.md). The final measurements
  /// (`measure`, replay's re-check, score.py) keep their own.
  measure::MeasureOptions measure = CandidateMeasureOptions();
  /// Early stopping (TVM TuningOptions.early_stopping): stop once this many trials of the task in
  /// a row (resumed ones included) have not improved on the best median; checked after each
  /// round. 0 = off.
  int early_stopping = 0;
  /// No progress lines on stderr.
  bool quiet = false;
  /// Overlapped rounds (see the file comment): 1 on, 0 off, -1 (the default) the target's choice
  /// (ResolveTuneOptions): on for GPU targets, off on cpu, where the search and the builds would
  /// compete with the measured kernels for the host cores and disturb their timing.
  int overlap_rounds = -1;
  /// Streaming builds: each round's candidates are built on a thread of their own
  /// (search/streaming_build.h) and measured as soon as each is built, in candidate order, while
  /// the rest compile and the next round is searched; false: the whole round is built before its
  /// measurement starts. The log's format is the same either way; the calls to the runner differ
  /// (a call per built prefix instead of one per round), and with them the staged-timing screen's
  /// reference (the best before each call), so which slow candidates keep their short timing can
  /// differ. A round line's build_s is the builds' wall time, which then overlaps its measure_s.
  bool stream_builds = true;
  /// Before the first new round, the task's this many fastest valid schedules in the log are
  /// measured again with this build and logged as remeasured records (MeasureRecord::remeasured),
  /// which take their first records' places: after a code-generator change the ranking, the
  /// search's seeds and replay's best follow what the schedules run at now. They do not count as
  /// new trials. 0 = off.
  int remeasure_best = 0;
  /// Final selection: after the last round, the task's this many fastest valid schedules (resumed
  /// ones included) are measured again with the final timing, each in full (no staged-timing
  /// screen), and logged as remeasured records, which take their first records' places; then,
  /// while schedules not so timed are faster by their round timing than the fastest so timed,
  /// those are timed too (at most this many more). Schedules an earlier job already timed so
  /// (remeasured, unscreened, at least final_min_runs runs) are not timed again. Replay's best is
  /// then a schedule timed as its user will time it rather than the luckiest of several short
  /// timings within noise of each other (the winner's curse): the twelve fastest of a bf16 8192³
  /// tune on the H200 lay within 5 % by their 8-run timings; the pick (4 stages) scored 1.01×
  /// eager, while the second (the same tiling, 3 stages) measured 1.10× as a hand schedule
  /// (bench/NOTES.md). A re-timing that fails outside the schedule (a run timeout, no device)
  /// leaves the round record in place. Not counted as trials; runs after time_limit_s too (up to
  /// final_budget_s); a failure is a warning on stderr, the pick then by round timing. Skipped
  /// when the job was interrupted, and with a `measurer` (its ranks time with their own
  /// runners). -1 (the default): the target's choice (ResolveTuneOptions): 8 on GPU targets, 0 on
  /// cpu. 0 = off.
  int final_candidates = -1;
  /// The final timing: at least this many timed runs and this much summed run time, ms (the
  /// bench scripts time hand schedules with `measure --min-runs 20 --min-time-ms 100`).
  int final_min_runs = 20;
  double final_min_total_ms = 100;
  /// Before each final timing the schedule runs untimed for this long, ms of wall time
  /// (runtime::TimingOptions::soak_ms), so that each is timed at the steady state it brings the
  /// card to (a GEMM of a few ms repeated runs at the power limit, at a clock that depends on its
  /// energy per run) rather than at the temperature the previous one left. The soak is logged
  /// with the timing (runtime::TimingStats::soak_ms); an earlier job's final timing counts only
  /// if it followed at least half the soak asked now. 0 = none.
  double final_soak_ms = 0;
  /// The final timing of each batch in this many passes (search/timing_parts.h): every schedule
  /// is timed in as many parts, each asking that share of final_min_runs (rounded up) and
  /// final_min_total_ms, the batch's order reversed from one pass to the next and the last pass
  /// in the batch's order (fastest by round timing first; with 2 passes C B A, A B C), and its
  /// record joins its parts, logged as soon as its last part ran (a job killed during the last
  /// pass keeps the fastest schedules' final timings). The batch's first part follows the whole
  /// final_soak_ms, every later part its share (so each schedule's logged soak is at least
  /// final_soak_ms). The clock drifts over the seconds of a final selection: timed one after
  /// another, the first schedule timed read the fastest of its batch in 5 of 7 bf16 GEMM tunes
  /// on an H100, by 1–8 % (bench/NOTES.md); interleaved, each schedule's runs span the batch,
  /// and over an even count a drift linear in time weighs on all alike. Each part checks the
  /// schedule again (the budget counts it). 1 = each schedule timed whole, one after another.
  /// Range 1..64.
  static constexpr int kDefaultFinalPasses = 4;
  int final_passes = kDefaultFinalPasses;
  /// The final selection's time, seconds, estimated per schedule from its record (build, a
  /// check per pass, soak and run wall times, plus twice final_min_total_ms): schedules past it
  /// are not timed again.
  /// The checks of an 8.6 GB reduction take about 40 s each on the H200; a GEMM's well under 1 s.
  double final_budget_s = 30;
  /// Wall-clock limit of the job, seconds; 0 = none. Checked after each logged round: once
  /// reached, no further round is measured (an overlapped round already built is dropped) and
  /// TuneResult::time_limited is set. A round in flight always completes.
  double time_limit_s = 0;
  /// Where rounds are built and measured (search/round_measurer.h); null (the default): this
  /// process's Builder and Runner. With one, each round is handed to it whole: it spreads the
  /// candidates over processes (the MPI build's mpi::MpiRoundMeasurer), this process builds and
  /// measures its own share, and the records are logged in candidate order as they arrive, as
  /// without it. measure_batch is then unused (each process measures its share in one batch), and
  /// each round is screened by the best time before it (screen_factor).
  std::shared_ptr<RoundMeasurer> measurer;
};

/// `options` with its automatic choices made for `target`: SearchOptions::local_search_fraction
/// < 0 becomes 0.25 on GPU targets and 0 on cpu, overlap_rounds < 0 becomes 1 on GPU targets and
/// 0 on cpu, final_candidates < 0 becomes 8 on GPU targets and 0 on cpu; every other field as
/// given. Tune calls it first.
[[nodiscard]] TuneOptions ResolveTuneOptions(const TuneOptions& options, const Target& target);

struct TuneResult {
  /// The best valid record of the task in the log; nullopt when none is valid.
  std::optional<MeasureRecord> best;
  /// The record of the task's untuned program (UntunedState; MeasureRecord::untuned, or an older
  /// record with its steps): the best is never slower, being chosen among the candidates it is
  /// one of. nullopt when the log has none (its lowering failed, or the job measured nothing).
  std::optional<MeasureRecord> untuned;
  /// Records of the task in the log at the end (previous runs included).
  int64_t trials = 0;
  /// Trials measured by this call.
  int64_t new_trials = 0;
  /// Logged schedules this call measured again whose new record replaced the logged one
  /// (TuneOptions::remeasure_best; SupersedesEarlierMeasurement).
  int64_t remeasured = 0;
  /// Schedules the final selection timed (TuneOptions::final_candidates) whose new record
  /// replaced the logged one.
  int64_t final_timed = 0;
  /// Error kind name ("none" excluded) → count, over all records of the task.
  std::map<std::string, int64_t> errors;
  /// Best-so-far curve over all records of the task, in log order.
  std::vector<CurvePoint> curve;
  /// True when a SIGINT stopped the job between rounds (the CLI then exits with 130).
  bool interrupted = false;
  /// True when the search found no new candidate (the space looks exhausted) before the budget.
  bool exhausted = false;
  /// True when early stopping ended the job before the budget.
  bool early_stopped = false;
  /// True when TuneOptions::time_limit_s ended the job before the budget.
  bool time_limited = false;
  /// Round lines written by this call (one per measured round), in order.
  std::vector<RoundRecord> rounds;
  /// Per round of `rounds`: how many of its trials (its first ones) came from local search
  /// (SearchOptions::local_search_fraction); the rest came from the evolutionary search.
  std::vector<int64_t> local_search_trials;
};

/// The task's untuned program as a schedule: on cpu the initial state (no steps: the naive loop
/// nest), on cuda schedule::NaiveGpuSchedule (the measurement method's GPU reference). A tuning
/// job measures it among its first round's candidates (marked MeasureRecord::untuned) unless the
/// log already holds it. Errors: NaiveGpuSchedule's.
[[nodiscard]] absl::StatusOr<schedule::State> UntunedState(const ir::ComputeDAG& dag,
                                                           const Target& target);

/// Tunes `workload` on `target` until the log holds options.trials records of the task, the
/// search runs dry, early stopping triggers, or SIGINT arrives (checked between rounds; the round
/// in flight is finished and logged; TuneResult::interrupted; with overlapped rounds the next
/// round, already built, is dropped unmeasured). A second SIGINT ends the process at
/// once, killed by SIGINT (a shell's status 130), losing only the batch in flight: when it arrives
/// while records are being appended to the log, the append (one write + fsync) completes first,
/// so the log never ends in a partial line. A job killed otherwise (SIGKILL) loses at most the
/// batch in flight too; the next job resumes from every record on disk. Progress on stderr (unless
/// quiet), one line per round: trials done / total, best and round-best GFLOP/s (GB/s for
/// memory-bound workloads, IsMemoryBound), errors by kind, the model's held-out pairwise accuracy
/// on the round, elapsed time, ETA and the phases' times (with the round's local-search trials when
/// there are any). The model's training label is the record's throughput (FLOP/s, or bytes/s for
/// memory-bound workloads; 0 for failures). Errors: kInvalidArgument for trials < 1, per_round < 1,
/// early_stopping < 0, an empty log path, model_init with the random model, a model_init file that
/// does not load for the target (XGBoostModel::SetInitialModel's errors), invalid search or
/// measure options (local_search_fraction
/// above 1, local_search_states < 1, overlap_rounds above 1 among them), an unbuildable workload;
/// the log's read / write errors; the measurer's creation errors (e.g. "no CUDA driver found");
/// kFailedPrecondition when every candidate reports no_device.
[[nodiscard]] absl::StatusOr<TuneResult> Tune(const schedule::Workload& workload,
                                              const Target& target, const TuneOptions& options);

}  // namespace tilesearch::search
