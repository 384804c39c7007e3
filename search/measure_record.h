// Measure records: one tuning trial (a schedule of a workload on a target and its measured result),
// the unit of tuning logs (search/log_io.h). After Ansor's MeasureInput / MeasureResult log lines
// (TVM src/auto_scheduler/measure_record.cc, /work/shared/reference/ansor-notes.md "Log format"),
// but self-describing: the workload is named by operator + shapes + dtype + attrs (so `replay` can
// rebuild the DAG from the log alone), and the target carries its limits.
//
// JSON form, format version 1: one object per line (JSON Lines), every field written, top-level
// fields in the order below; all fields but "device_name" (inside "target") are required on
// reading (in any order).
//
// Unknown fields and versions (one rule for records and round lines): within a format version,
// fields are only ever added, and a field an older reader may skip without misreading the line
// (an annotation, a statistic) is added without a version change. A log reader (ReadLog) reads a
// line with fields it does not know as if they were absent and warns once per field, naming the
// file, the first line and how many lines have it. A change an older reader would misread (a
// field whose absence changes the meaning of the others, a changed unit or step encoding) bumps
// the version; a line of a newer version than this build reads fails the whole read, naming file
// and line (skipping it could hide the best record; see log_io.h). Without a place to report
// them (MeasureRecordFromJson without `unknown_fields`), an unknown field is an error.
//
//   {"version": 1,
//    "workload_key": "9f0c2d4e6a1b3c5d",                    // ir::ComputeDAG::WorkloadKey()
//    "workload": {"op": "matmul", "shapes": [[512, 512], [512, 512]], "dtype": "float32",
//                 "attrs": {}},                               // schedule::WorkloadToJson
//                 // a graph task: {"op": "fused", ..., "nodes": [...]} (schedule/fused_workload.h)
//    "target": {"kind": "cuda", "arch": "sm_90", "device_name": "NVIDIA H200",
//               "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, ...},
//    "steps": [["SP", 2, 0, 512, [8, 4], 1], ...],            // bare step array, step_json.h v1
//    "result": {"error": "none", "costs_s": [...], "timing": {...}, ...},
//                                       // measure::MeasureResultToJson minus timing.samples_ms
//    "compile_ms": 31.5, "run_ms": 120.0,
//    "timestamp": "2025-11-30T03:07:39.123Z",
//    "tilesearch_version": "0.5.0-dev", "seed": 42, "trial": 17}
//
// Optional, written last and only when true: "untuned": true marks the record of the task's
// untuned program (cpu: no steps; cuda: schedule::NaiveGpuSchedule), which a tuning job measures
// in its first round so that its best is never slower than the untuned program. Absent: false.
// "remeasured": true marks a new measurement of a schedule measured before (tune / bench
// --remeasure N, after the code generator changed): same steps and trial number as the first
// record; ReadLog keeps it in that record's place. Absent: false. "final_timing": true (with
// "remeasured") marks one timed by the final selection (tune / bench --final-candidates): held
// longer than a round's timing, which BestRecord ranks before the round records it judged.
// Absent: false.
//
// "target" holds every field of Target: "kind" ("cuda" / "cpu"), "arch", and the limits
// under their struct member names (max_threads_per_block, max_shared_memory_per_block,
// max_shared_memory_optin, max_registers_per_block, warp_size, max_vthread_extent,
// max_vector_bytes, sm_count, l2_bytes, host_cores, host_vector_bytes), plus "device_name". A cpu
// target is written with only kind, arch, device_name, host_cores and host_vector_bytes; the GPU
// limits of older cpu records are read and left unused (absent ones read as Target's defaults).
// "seed" is an unsigned 64-bit integer. A version-1 record holds steps of step-list version 1.
// A record may also carry "kind": "record" (written without it; lines without "kind" are records).
// "precision" ("ieee" or "tf32", SearchOptions::precision) is written after "workload" in every
// record; lines without it (older logs) are ieee. A tf32 record's workload key ends in "-tf32"
// (measure::PrecisionWorkloadKey), an ieee one's does not: a record whose key and precision
// disagree is an error, so a record of one precision never matches a task of the other.
//
// Round lines (metadata, also version 1): after each round's records, in the same fsync'd write,
// the tuner appends one line saying how the cost model ranked that round's candidates before they
// were measured (held-out records: the model had never seen them) and how the model was trained:
//
//   {"kind": "round", "version": 1, "workload_key": "...", "target": {...},  // as in records
//    "round": 3, "first_trial": 128, "trials": 64, "valid": 61,
//    "model": "xgboost", "model_trained": true, "train_samples": 128, "train_programs": 125,
//    "boost_rounds": 37, "model_validation_accuracy": 0.71,   // XGBoost's own split; or null
//    "predicted": [0.81, 0.77, null, ...],  // score of trial first_trial + i; null: -inf / none
//    "pairwise_accuracy": 0.68, "top_k_recall": 0.5, "k": 7,   // null when undefined
//    "train_s": 1.2, "search_s": 14.0, "build_s": 2.1, "measure_s": 30.5,
//    "timestamp": "...", "tilesearch_version": "0.5.0-dev", "seed": 42}
//
// Every field above is written and required on reading; any other field is an error, except two
// optional ones, written after "valid" only when the round was tuned with local search on
// (SearchOptions::local_search_fraction > 0) and absent otherwise (read as 0):
//
//    "local_search_trials": 16,    // of the round's trials, its first ones, from local search
//    "local_search_fraction": 0.25 // the fraction in effect for the round
//
// They are read together (one without the other is an error); lines without them (older logs,
// local search off) read as rounds without local search. A third optional field, written after
// "model" only when the learned model was warm-started from a pretrained model file
// (`tune --model-init`), names that file as given (absent: no initial model):
//
//    "model_init": "models/default-cuda-sm_90.model"
//
// A fourth, written after "measure_s" only for a round trained, searched and built while the
// previous round was measured (TuneOptions::overlap_rounds; absent: false):
//
//    "overlapped": true
//
// A fifth, written after it by runners that report it (measure::RunUsage; absent, as in older
// logs: zeros), splits measure_s: the task's data built in the tuner's process, the measuring
// workers set up (fork, CUDA context, reference, uploads) and their time, and the candidates'
// time in the workers (what is left of measure_s is the runner's and the log's own work):
//
//    "measure_split": {"prepare_s": 0.0, "worker_setups": 0, "setup_s": 0.0, "items_s": 28.7}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "nlohmann/json_fwd.hpp"
#include "schedule/schedule_file.h"
#include "schedule/step.h"

namespace tilesearch::search {

/// Version of the record format this build writes and the newest it reads.
inline constexpr int kLogFormatVersion = 1;

/// The version string written into new records' "tilesearch_version".
inline constexpr char kTilesearchVersion[] = "0.5.0-dev";

/// One measured trial.
struct MeasureRecord {
  int version = kLogFormatVersion;  // record format version (kLogFormatVersion when written)
  std::string workload_key;     // measure::PrecisionWorkloadKey(workload.Build()'s key, precision)
  schedule::Workload workload;  // operator + arguments: rebuilds the DAG
  /// How float32 outputs were allowed to compute and were judged (SearchOptions::precision);
  /// "precision" in JSON, after "workload". Absent in older logs: ieee.
  measure::Fp32Precision precision = measure::Fp32Precision::kIeee;
  Target target;                      // kind, arch and limits the schedule was made for
  std::string device_name;            // e.g. "NVIDIA H200", or the host CPU model; may be empty
  std::vector<schedule::Step> steps;  // the schedule: transform steps applied to the initial state
  measure::MeasureResult result;      // error kind + message, or costs (seconds) and timing (ms)
  double compile_ms = 0;              // wall time spent lowering + compiling this candidate, ms
  double run_ms = 0;                  // wall time spent checking + timing it, ms
  std::string timestamp;              // ISO 8601 UTC, e.g. "2025-11-30T03:07:39.123Z"
  std::string tilesearch_version = kTilesearchVersion;
  uint64_t seed = 0;  // random seed of the tuning job
  int64_t trial = 0;  // index of this trial within the job (0-based)
  /// The task's untuned program (UntunedState): the baseline the best is compared with.
  bool untuned = false;
  /// A new measurement of a schedule the log already holds (TuneOptions::remeasure_best), made
  /// when the code generator may have changed its speed. Its `trial` is the first record's;
  /// reading a log, it takes that record's place (ReadLog).
  bool remeasured = false;
  /// A remeasured record timed by the final selection (TuneOptions::final_candidates), held
  /// for longer than a round times (the final timing and soak): BestRecord ranks those and the
  /// round records after the newest of them only.
  bool final_timing = false;

  /// True when the result is usable: no error and a finite positive median time.
  bool valid() const;
  /// The median run time in ms (result.timing.median_ms); +inf when !valid().
  double median_ms() const;
};

/// The record as one JSON object (the format above). `result.timing.samples_ms` is left out to
/// keep lines short; `result.costs_s` (every timed run, seconds) is kept.
nlohmann::json MeasureRecordToJson(const MeasureRecord& record);
/// The JSON object on one line, no trailing newline.
std::string MeasureRecordToLine(const MeasureRecord& record);

/// Reads a record written by MeasureRecordToJson. Errors:
///   kFailedPrecondition "log format version 2 is newer than this build reads (1)";
///   kInvalidArgument naming the field: "record is not a JSON object", "field 'trial' is missing",
///   "field 'seed' must be a non-negative integer, got -1", "unknown field 'foo' (expected ...)",
///   "field 'target.kind' must be \"cuda\" or \"cpu\", got \"tpu\"", "field 'steps': step 3: ...",
///   "field 'result.error': unknown measure error 'exploded' (...)", workload errors of
///   schedule::WorkloadFromJson ("field 'workload.shapes' ...").
/// With `unknown_fields`, fields the format does not have ("foo", "target.foo") are appended to it
/// and ignored instead (the log reader's rule above).
absl::StatusOr<MeasureRecord> MeasureRecordFromJson(
    const nlohmann::json& j, std::vector<std::string>* unknown_fields = nullptr);
/// Parses one line of text (nlohmann parse errors become kInvalidArgument "not valid JSON: ...")
/// then MeasureRecordFromJson.
absl::StatusOr<MeasureRecord> MeasureRecordFromLine(const std::string& line);

/// One rank's share of a round spread over MPI ranks (TuneOptions::measurer): how many of the
/// round's candidates it built and measured, and its wall seconds building them (replay, lowering,
/// compiling), measuring them (check + timing) and idle (the round's spread wall time less both),
/// so that imbalance between ranks shows.
/// How a round's measure phase split (measure::RunUsage summed over its Run calls and ranks).
struct MeasureSplit {
  double prepare_s = 0;  // the task's data built in the measuring process
  int64_t worker_setups = 0;
  double setup_s = 0;  // the workers' setups
  double items_s = 0;  // the candidates in the workers
  bool empty() const {
    return prepare_s == 0 && worker_setups == 0 && setup_s == 0 && items_s == 0;
  }
  void Add(const measure::RunUsage& usage);
  void Add(const MeasureSplit& other);
};

struct RankTiming {
  int rank = 0;
  int64_t trials = 0;
  double build_s = 0;
  double measure_s = 0;
  double idle_s = 0;
  /// The rank's measure_s split (carried to rank 0, summed into RoundRecord::measure_split; not
  /// written per rank).
  MeasureSplit split;
};

/// One round's metadata line (format above): the cost model's quality on the round's candidates,
/// scored before measurement, against their measured throughput.
struct RoundRecord {
  int version = kLogFormatVersion;
  std::string workload_key;
  Target target;
  std::string device_name;
  int64_t round = 0;        // 1-based, counting the task's earlier rounds in the log (resumes)
  int64_t first_trial = 0;  // MeasureRecord::trial of the round's first record
  int64_t trials = 0;       // records of the round: trials first_trial .. first_trial + trials - 1
  int64_t valid = 0;        // of which valid (MeasureRecord::valid)
  /// Of the round's trials, how many (its first ones, trials first_trial ..
  /// first_trial + local_search_trials - 1) came from local search (TuneResult::
  /// local_search_trials), 0..trials; and SearchOptions::local_search_fraction in [0, 1] for the
  /// round. Written only when either is > 0 (the "local_search_*" fields); absent on reading: 0.
  int64_t local_search_trials = 0;
  double local_search_fraction = 0;
  std::string model;  // CostModel::Name(): "xgboost" or "random"
  /// The model file the learned model was warm-started from (TuneOptions::model_init, as given),
  /// empty without one. Written as "model_init" after "model" only when not empty; absent on
  /// reading (older logs): empty.
  std::string model_init;
  /// Whether the model that scored the round had been trained (XGBoost: an ensemble exists;
  /// RandomModel: always false, it learns nothing).
  bool model_trained = false;
  /// Training samples the model had received when it scored the round (all earlier records of the
  /// task, failed ones included), and of them the programs with features and a usable label that
  /// training used (XGBoost's report; 0 for RandomModel).
  int64_t train_samples = 0;
  int64_t train_programs = 0;
  /// Boosting rounds of the XGBoost ensemble that scored the round (0: none / RandomModel).
  int64_t boost_rounds = 0;
  /// XGBoost's pairwise accuracy on its own held-out split of the training records at its last
  /// training (NaN when it made no split, or for RandomModel). Written as null when NaN.
  double model_validation_accuracy = 0;
  /// The model's score of each record of the round, in trial order (-inf: no features; written as
  /// null).
  std::vector<double> predicted;
  /// costmodel::PairwiseRankingAccuracy of `predicted` vs measured throughput over the round's
  /// valid records; NaN (null) when fewer than two valid records have different throughputs.
  double pairwise_accuracy = 0;
  /// costmodel::TopKRecall over the round's valid records with k = max(1, valid / 8); NaN (null)
  /// when none is valid (k is then 0).
  double top_k_recall = 0;
  int k = 0;
  /// With a pretrained model (TuneOptions::model_init), the round as the model judge saw it
  /// (search/model_judge.h): each model's TopPicksMerit of the round, in [0, 1], from the scores
  /// it gave before the round was measured, and whether the online-only model's scores were
  /// replaced by cross-validated ones (it had no records yet). The next round is searched by the
  /// model whose merits, summed over the judged rounds weighted by their programs, are higher.
  /// Written as "judge": {"pretrained": p, "online": o, "cross_validated": b} after "k" only for
  /// judged rounds; absent on reading: nullopt.
  struct Judgement {
    double pretrained = 0;
    double online = 0;
    bool cross_validated = false;
  };
  std::optional<Judgement> judge;
  /// Wall seconds of the round's phases: model training, evolutionary search (+ scoring), lowering
  /// and compiling, measuring.
  double train_s = 0;
  double search_s = 0;
  double build_s = 0;
  double measure_s = 0;
  /// The round was trained, searched and built while the previous round was measured
  /// (TuneOptions::overlap_rounds), so its phases' times do not add up to its wall time (nor do
  /// they with streaming builds, TuneOptions::stream_builds: build_s overlaps measure_s). Written
  /// as "overlapped": true after "measure_s" only when true; absent reads as false.
  bool overlapped = false;
  /// measure_s split (format above); empty when the runner did not report it.
  MeasureSplit measure_split;
  /// The share of the round's fresh states drawn from tensor-core sketches (search/
  /// sketch_family.h), in [0, 1]; negative when the task does not have sketches of both families.
  /// Written as "tensor_core_share" only when >= 0; absent reads as -1.
  double tensor_core_share = -1;
  /// Per rank, in rank order, when the round was spread over MPI ranks (TuneOptions::measurer):
  /// written as "ranks": [{"rank": 0, "trials": 32, "build_s": ..., "measure_s": ...,
  /// "idle_s": ...}, ...] after "overlapped" only when not empty; absent reads as empty.
  std::vector<RankTiming> ranks;
  std::string timestamp;
  std::string tilesearch_version = kTilesearchVersion;
  uint64_t seed = 0;
};

/// A target as records write it ("target": kind, arch, device_name, limits) and back; FromJson
/// errors (kInvalidArgument) name the bad field, an unknown field among them.
nlohmann::json TargetToRecordJson(const Target& target, const std::string& device_name = "");
absl::StatusOr<Target> TargetFromRecordJson(const nlohmann::json& j);

/// The round line as one JSON object (NaN and infinite numbers as null).
nlohmann::json RoundRecordToJson(const RoundRecord& round);
/// The JSON object on one line, no trailing newline.
std::string RoundRecordToLine(const RoundRecord& round);
/// Reads a round line. Errors as MeasureRecordFromJson: kFailedPrecondition for a newer version;
/// kInvalidArgument naming the field ("field 'round' must be a positive integer, got 0",
/// "field 'kind' must be \"round\"", "unknown field 'foo' (expected ...)",
/// "field 'pairwise_accuracy' must be a number in [0, 1] or null, got 2",
/// "field 'local_search_trials' is 5, more than the round's 4 trials",
/// "field 'local_search_fraction' is missing (local_search_trials is given)",
/// "field 'local_search_fraction' must be a number in [0, 1], got 2" (null refused too),
/// "field 'local_search_trials' is 3 but field 'local_search_fraction' is 0 (...)").
/// `unknown_fields` as in MeasureRecordFromJson.
absl::StatusOr<RoundRecord> RoundRecordFromJson(const nlohmann::json& j,
                                                std::vector<std::string>* unknown_fields = nullptr);

/// The kind of a log line's JSON object: "record" when it has no "kind" field, else its value
/// (which may be anything; callers reject unknown kinds). "" when `j` is not an object or its
/// "kind" is not a string.
std::string LogLineKind(const nlohmann::json& j);

/// The current time as ISO 8601 UTC with milliseconds: "2025-11-30T03:07:39.123Z".
std::string CurrentTimestamp();

/// True when two targets name the same hardware: same kind and arch (limits are not compared).
bool SameTarget(const Target& a, const Target& b);

/// Canonical text of a step list: the compact dump of its bare JSON array (step_json.h), e.g.
/// [["SP",2,0,64,[8,4],1]]. Equal step lists give equal text, and different ones different text.
std::string StepsCanonicalText(const std::vector<schedule::Step>& steps);
/// 64-bit FNV-1a (ir::Fnv1a64) of StepsCanonicalText: recognizes an already measured schedule of
/// a task (a tuner keeps a set of these per workload key and target). Stable across processes.
uint64_t StepsHash(const std::vector<schedule::Step>& steps);
/// StepsHash(record.steps).
uint64_t RecordStateHash(const MeasureRecord& record);

/// Achieved FLOP/s: dag.Flops() / (median_ms · 1e-3); 0 when the record is not valid. `dag` is the
/// record's workload (the caller builds it once per task).
double RecordThroughput(const MeasureRecord& record, const ir::ComputeDAG& dag);
/// Achieved bandwidth in bytes/s counting each input and output byte once:
/// (dag.InputBytes() + dag.OutputBytes()) / (median_ms · 1e-3); 0 when not valid. The figure of
/// merit for memory-bound operators (softmax, elementwise).
double RecordBandwidth(const MeasureRecord& record, const ir::ComputeDAG& dag);

}  // namespace tilesearch::search
