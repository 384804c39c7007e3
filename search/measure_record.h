// Measure records: one tuning trial (a schedule of a workload on a target and its measured result),
// the unit of tuning logs (search/log_io.h). After Ansor's MeasureInput / MeasureResult log lines
// (TVM src/auto_scheduler/measure_record.cc, /work/shared/reference/ansor-notes.md "Log format"),
// but self-describing: the workload is named by operator + shapes + dtype + attrs (so `replay` can
// rebuild the DAG from the log alone), and the target carries its limits.
//
// JSON form, format version 1: one object per line (JSON Lines), every field written, top-level
// fields in the order below; all fields but "device_name" (inside "target") are required on
// reading (in any order); any other field is an error.
//
//   {"version": 1,
//    "workload_key": "9f0c2d4e6a1b3c5d",                    // ir::ComputeDAG::WorkloadKey()
//    "workload": {"op": "matmul", "shapes": [[512, 512], [512, 512]], "dtype": "float32",
//                 "attrs": {}},                               // schedule::WorkloadToJson
//    "target": {"kind": "cuda", "arch": "sm_90", "device_name": "NVIDIA H200",
//               "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, ...},
//    "steps": [["SP", 2, 0, 512, [8, 4], 1], ...],            // bare step array, step_json.h v1
//    "result": {"error": "none", "costs_s": [...], "timing": {...}, ...},
//                                       // runtime::MeasureResultToJson minus timing.samples_ms
//    "compile_ms": 31.5, "run_ms": 120.0,
//    "timestamp": "2025-11-30T03:07:39.123Z",
//    "tilesearch_version": "0.5.0-dev", "seed": 42, "trial": 17}
//
// "target" holds every field of schedule::Target: "kind" ("cuda" / "cpu"), "arch", and the limits
// under their struct member names (max_threads_per_block, max_shared_memory_per_block,
// max_shared_memory_optin, max_registers_per_block, warp_size, max_vthread_extent,
// max_vector_bytes, sm_count, l2_bytes, host_cores, host_vector_bytes), plus "device_name".
// "seed" is an unsigned 64-bit integer. A version-1 record holds steps of step-list version 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "nlohmann/json_fwd.hpp"
#include "runtime/measure.h"
#include "schedule/schedule_file.h"
#include "schedule/step.h"
#include "schedule/target.h"

namespace tilesearch::search {

/// Version of the record format this build writes and the newest it reads.
inline constexpr int kLogFormatVersion = 1;

/// The version string written into new records' "tilesearch_version".
inline constexpr char kTilesearchVersion[] = "0.5.0-dev";

/// One measured trial.
struct MeasureRecord {
  int version = kLogFormatVersion;    // record format version (kLogFormatVersion when written)
  std::string workload_key;           // ir::ComputeDAG::WorkloadKey() of workload.Build()
  schedule::Workload workload;        // operator + arguments: rebuilds the DAG
  schedule::Target target;            // kind, arch and limits the schedule was made for
  std::string device_name;            // e.g. "NVIDIA H200", or the host CPU model; may be empty
  std::vector<schedule::Step> steps;  // the schedule: transform steps applied to the initial state
  runtime::MeasureResult result;      // error kind + message, or costs (seconds) and timing (ms)
  double compile_ms = 0;              // wall time spent lowering + compiling this candidate, ms
  double run_ms = 0;                  // wall time spent checking + timing it, ms
  std::string timestamp;              // ISO 8601 UTC, e.g. "2025-11-30T03:07:39.123Z"
  std::string tilesearch_version = kTilesearchVersion;
  uint64_t seed = 0;  // random seed of the tuning job
  int64_t trial = 0;  // index of this trial within the job (0-based)

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
absl::StatusOr<MeasureRecord> MeasureRecordFromJson(const nlohmann::json& j);
/// Parses one line of text (nlohmann parse errors become kInvalidArgument "not valid JSON: ...")
/// then MeasureRecordFromJson.
absl::StatusOr<MeasureRecord> MeasureRecordFromLine(const std::string& line);

/// The current time as ISO 8601 UTC with milliseconds: "2025-11-30T03:07:39.123Z".
std::string CurrentTimestamp();

/// True when two targets name the same hardware: same kind and arch (limits are not compared).
bool SameTarget(const schedule::Target& a, const schedule::Target& b);

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
