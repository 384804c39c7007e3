// Measurement of schedule candidates: every candidate is checked against the task's reference on
// fresh random inputs, then timed; failures are data (MeasureResult::error), never a crash of the
// caller. Runs happen in a worker process forked per batch (measure/worker_batch.h): a candidate
// that crashes or hangs kills only that worker; it is recorded as runtime_error / run_timeout and a
// new worker continues with the next candidate. The caller's process never initializes CUDA.
//
// Method (design.md, "Measurement method"; KernelBench's tolerance): inputs drawn from more than
// one distribution (CheckDistribution), outputs poisoned with NaN before each checked run, every
// output element compared under a dtype-aware tolerance, mismatches re-judged by the precision
// rule (measure/precision_rule.h) in float64. The reference is the unscheduled program: float64
// from the definitions for small tasks (measure/reference.h InterpreterReference), the interpreter
// for larger ones, otherwise the naive kernel on the same target
// (GPU: the naive schedule of schedule/naive_gpu.h), itself checked against float64 point
// evaluation (ir::EvaluatePoint) on sampled elements. Mirrors Ansor's MeasureInput / MeasureResult
// (TVM src/auto_scheduler/measure.cc) with costs in seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/target.h"
#include "codegen/codegen.h"
#include "ir/compute_dag.h"
#include "ir/stmt.h"
#include "measure/precision_rule.h"
#include "nlohmann/json.hpp"
#include "runtime/kernel_resources.h"
#include "runtime/timing.h"

namespace tilesearch::measure {

/// Why a candidate has no time (Ansor's MeasureErrorNO, renamed).
enum class MeasureError : uint8_t {
  kNone,
  kInvalidSchedule,  // lowering rejected the state (GPU limits, unlowerable steps)
  kCompileError,     // MLIR / LLVM / ptxas / the driver's JIT rejected the code
  kCompileTimeout,   // compilation over its limit
  kWrongAnswer,      // ran, but an output element is outside tolerance (or NaN where finite)
  kRuntimeError,     // launch failure, illegal address, crash of the worker
  kRunTimeout,       // check + timing over the per-candidate limit; the worker was killed
  kNoDevice,         // no CUDA driver / device: nothing could run
  kUnknown,
};

/// "none", "invalid_schedule", "compile_error", "compile_timeout", "wrong_answer",
/// "runtime_error", "run_timeout", "no_device", "unknown_error".
const char* MeasureErrorName(MeasureError error);
/// Inverse of MeasureErrorName. Errors: kInvalidArgument naming the unknown text.
absl::StatusOr<MeasureError> ParseMeasureError(const std::string& name);

/// Outcome of the correctness check of one candidate.
struct CheckReport {
  int trials = 0;            // checked runs (MeasureOptions::check_trials; distributions cycle)
  double max_abs_error = 0;  // over every output element of every trial
  double max_rel_error = 0;  // |got − ref| / max(|ref|, tiny), over elements with |ref| > atol
  int64_t mismatches = 0;  // elements outside tolerance (NaN where the reference is finite counts)
  int64_t checked_elements = 0;
  std::string
      first_mismatch;  // "C[3, 17]: got nan, expected 1.25 (trial 1, normal)"; empty if none
  /// Elements outside tolerance against the float32 reference that passed float64 arbitration
  /// (ArbitrateMismatches, measure/checker.h), counted per output and trial only when every
  /// mismatch of it passed (then none is counted in `mismatches`); when some fail, the whole
  /// output's mismatches stay in `mismatches` and none is counted here.
  int64_t arbitrated = 0;
  /// The first failed or skipped arbitration: "float64 arbitration of 3 mismatches of C (trial 0,
  /// uniform): 1 still fail, first C[1, 2]: got x, ref32 y, ref64 z"; empty if none.
  std::string arbitration;
  /// The candidate's measured error against float64 on sampled points (SampleFloat64Reference,
  /// measure/checker.h: the first and last element and MeasureOptions::precision_samples seeded
  /// ones of each output, first trial): how many points, the largest |got − ref64| / allowed
  /// (the precision rule's ratio, <= 1 passes), the largest |got − ref64|, and the float32
  /// reference's own largest |ref32 − ref64| on the same points. Absent (0) in logs written
  /// before they existed and where the check was off.
  int64_t f64_points = 0;
  double f64_max_ratio = 0;
  double f64_max_abs_error = 0;
  double reference_f64_max_abs_error = 0;
};

/// The result of measuring one candidate.
struct MeasureResult {
  MeasureError error = MeasureError::kNone;
  std::string message;          // why, when error != kNone (compiler diagnostics, fault, mismatch)
  std::vector<double> costs_s;  // each timed run, seconds (Ansor's MeasureResult.costs)
  runtime::TimingStats timing;  // the same runs in ms
  double compile_ms = 0;        // codegen (MLIR → PTX / host code), as reported by the builder
  double load_ms = 0;           // GPU: driver JIT of the PTX (cuModuleLoadData); host: 0
  double check_ms = 0;          // wall time of the correctness check
  double run_wall_ms = 0;       // wall time of this candidate in the worker (check + timing)
  CheckReport check;
  std::vector<runtime::KernelResources> kernels;  // GPU only, one per launch in order
  /// Timed by its check runs only (staged timing: slower than MeasureOptions::screen_above_ms);
  /// `timing` then holds those runs (no cache flush between them), not the full timing.
  bool screened = false;

  bool ok() const { return error == MeasureError::kNone; }
  /// Median time in ms; +inf when !ok().
  double median_ms() const;
};

/// JSON of a result (all fields; samples included) and back. FromJson errors: kInvalidArgument
/// naming the bad field.
nlohmann::json MeasureResultToJson(const MeasureResult& result);
absl::StatusOr<MeasureResult> MeasureResultFromJson(const nlohmann::json& j);

/// Input distributions of the correctness check (each trial uses the next one, cyclically). Values
/// are rounded to the buffer's dtype; integer buffers get integers in range, bool 0/1.
enum class CheckDistribution : uint8_t {
  kUniformSymmetric,  // uniform [-1, 1)
  kUniformPositive,   // uniform [0, 1) (KernelBench's torch.rand)
  kNormalOffset,      // normal with offset and large magnitude, score.py's (CheckNormalOf)
};
const char* CheckDistributionName(CheckDistribution d);  // "uniform", "uniform01", "normal"
/// Inverse of CheckDistributionName. Errors: kInvalidArgument naming the unknown text.
absl::StatusOr<CheckDistribution> ParseCheckDistribution(const std::string& name);
/// How candidates are checked and timed (the Runner's options).
struct MeasureOptions {
  runtime::TimingOptions timing;
  /// Checked runs before timing, with fresh inputs each, drawn from `distributions` in turn.
  int check_trials = 3;
  /// bench/score.py's three distributions, so a kernel the tuner accepts has met the scorer's
  /// inputs (the LayerNorm over 4 M-element rows passed uniform inputs and failed score.py's
  /// normal(2, 32) ones). Normal inputs need the precision rule's magnitude allowance
  /// (measure/checker.h): their partial sums grow to ~10^5, and two correct 4096-deep float32
  /// dot products that land near 0 differ by far more than 1e-4.
  std::vector<CheckDistribution> distributions = {CheckDistribution::kUniformSymmetric,
                                                  CheckDistribution::kUniformPositive,
                                                  CheckDistribution::kNormalOffset};
  /// Tolerance |got − ref| <= atol + rtol · |ref|; 0 = by dtype (float32 1e-4 / 1e-4 as
  /// KernelBench, float16 / bfloat16 1e-2 / 1e-2, integers and bool exact).
  double atol = 0;
  double rtol = 0;
  /// Skip the check (benchmark-only runs); results then say check.trials == 0.
  bool check = true;
  /// Seed of the check inputs (each trial and each batch derive their own from it).
  uint64_t seed = 1;
  /// Tasks with at most this many interpreted operations (2 · FLOPs + stores of the naive program)
  /// use InterpreterReference (float64 up to kFloat64ReferenceMaxOps, the float32 interpreter
  /// above); larger ones the naive kernel on the target.
  double interpreter_reference_max_ops = 1 << 24;
  /// GPU tasks whose inputs total at least this many elements (and whose reference is the naive
  /// kernel) never hold their check and timing inputs on the host: each worker generates them in
  /// chunks straight into device memory, and the float64 point evaluation computes the elements
  /// it reads from the same counter-based generator (CheckInputsOnDemand). The default, 2^26
  /// elements, is 512 MiB of 8-byte values per trial.
  int64_t generated_inputs_min_elements = int64_t{1} << 26;
  /// Sampled elements per output checked in float64 (ir::EvaluatePoint) when the reference is the
  /// naive kernel; a mismatch there fails the whole batch as kUnknown "reference ...".
  int reference_point_samples = 64;
  /// Float64 arbitration of float32 mismatches (ArbitrateMismatches, measure/checker.h): when one
  /// output of one trial has at most this many elements outside tolerance against the float32
  /// reference, each is re-judged against float64 point evaluation and passes if within the
  /// tolerance plus the reference's own error. 0 disables; more mismatches: wrong_answer as before.
  int64_t arbitration_max_elements = 1024;
  /// Work limit of the float64 arbitration of one output of one trial, in stage-body evaluations
  /// (ArbitrationOptions::max_steps; estimated from the first element: over it, no arbitration
  /// and wrong_answer as before). Deterministic: the verdict does not depend on load.
  int64_t arbitration_max_steps = int64_t{1} << 26;
  /// The arithmetic float32 outputs may use (measure/precision_rule.h): kIeee judges them with
  /// float32's u and accepts a 3xTF32 candidate only when its float64 error on the sampled points
  /// is no larger than the float32 reference's; kTf32 judges them with TF32's u.
  Fp32Precision precision = Fp32Precision::kIeee;
  /// Seeded points per output (besides the first and last element) where each candidate's error
  /// against float64 is measured and recorded (CheckReport::f64_*); their float64 evaluation is
  /// done once per batch, within arbitration_max_steps (fewer points where one costs more).
  int precision_samples = 256;
  /// Staged timing, the first rung of successive halving (Li et al., "Hyperband", JMLR 2018): a
  /// candidate whose fastest checked run took longer than this many ms is not timed further; its
  /// result holds the check runs' times (MeasureResult::screened). A loser by a wide margin is
  /// still a loser without a flushed, repeated timing, and a slow candidate's timing runs cost
  /// most of its trial. 0: every candidate gets the full timing. The tuner sets it per batch from
  /// its best time so far (TuneOptions::screen_factor). The CUDA runner's resident check applies
  /// it to its two check runs; the host runner keeps its check runs for a candidate whose fastest
  /// check run is over twice the screen and over 1 ms, else times one warm-up and three runs
  /// first and keeps them for a candidate slower than the screen; the CUDA per-candidate upload
  /// path times every candidate fully.
  double screen_above_ms = 0;
  /// Staged timing within a batch: also screen against this factor times the fastest candidate
  /// fully timed earlier by the same worker, so that the first batch of a task, before any best is
  /// known, screens too. 0: off. (ScreenFor combines both.)
  double screen_factor = 0;
  /// Wall-clock limit of one candidate's check + timing in the worker; over it: kRunTimeout.
  double run_timeout_ms = 20000;
  /// Limit for the worker's start (CUDA init, reference computation) per batch.
  double setup_timeout_ms = 120000;
  /// CUDA device ordinal.
  int device = 0;
  /// Host target: threads for parallel loops (0 = all cores).
  int host_threads = 0;
  /// A file every Measure call locks exclusively for its whole duration, so that several tuning
  /// jobs sharing one GPU never check or time kernels at the same time (their searches still
  /// overlap). The lock is first-come-first-served and skips dead holders (runtime/device_lock.h).
  /// Empty: the environment variable TILESEARCH_DEVICE_LOCK, if set; else none.
  std::string device_lock_path;
};

/// The staged-timing screen for a worker's next candidate, ms (0: no screening): the smaller of
/// options.screen_above_ms and options.screen_factor × `batch_best_ms` (the fastest candidate the
/// worker has fully timed so far; 0 when none), of those that apply.
double ScreenFor(const MeasureOptions& options, double batch_best_ms);

/// Whether a measurement of `dag` on `target` generates its check and timing inputs on demand
/// instead of holding them on the host: a cuda target, at least
/// options.generated_inputs_min_elements input elements in all and, when checking, the reference
/// on the GPU (NaiveOps above options.interpreter_reference_max_ops; the interpreter needs the
/// inputs in memory).
bool CheckInputsOnDemand(const ir::ComputeDAG& dag, const MeasureOptions& options,
                         const Target& target);

/// Elements per chunk of generated inputs on their way to the device (8-byte values plus their
/// packed copy, at most 16 bytes per element): what the inputs of a CheckInputsOnDemand
/// measurement cost the host at a time.
inline constexpr int64_t kGeneratedInputChunkElements = int64_t{1} << 24;

/// Host memory (bytes) a measurement of `dag` on `target` needs at its peak, estimated: the check
/// holds every input and output as 8-byte values per trial (inputs, reference outputs), plus the
/// timing inputs and the worker's unpacked outputs, plus typed copies: about 8 · (trials + 3)
/// bytes per input or output element. Measured on a relu of 10⁸ elements: > 6 GB resident,
/// estimate 8 GB. Inputs generated on demand (CheckInputsOnDemand) count as the one chunk a worker
/// holds at a time instead (kGeneratedInputChunkElements · 16 bytes: values and packed copy).
double EstimateMeasureHostBytes(const ir::ComputeDAG& dag, const MeasureOptions& options,
                                const Target& target);

/// Bytes of memory available to new allocations on this machine (/proc/meminfo MemAvailable;
/// physical pages × page size where that is missing).
double AvailableHostBytes();

/// kResourceExhausted "measuring needs about 9.6 GiB of host memory (...), more than the 60% of
/// the 14.2 GiB available that a measurement may take (...)" when EstimateMeasureHostBytes exceeds
/// `fraction` of AvailableHostBytes (the message states the fraction, so a need below the
/// available total is not a contradiction).
[[nodiscard]] absl::Status CheckMeasureHostMemory(const ir::ComputeDAG& dag,
                                                  const MeasureOptions& options,
                                                  const Target& target, double fraction = 0.6);

/// kInvalidArgument naming the first bad option (timing options as TimeRepeated checks them,
/// negative check_trials / tolerances / samples / host_threads / device, no distributions while
/// checking, non-positive timeouts); OK otherwise. CreateRunner and each runner call it.
[[nodiscard]] absl::Status ValidateMeasureOptions(const MeasureOptions& options);

/// The device lock file measurements take turns on: options.device_lock_path, else
/// $TILESEARCH_DEVICE_LOCK, else "" (no lock).
std::string DeviceLockPath(const MeasureOptions& options);

}  // namespace tilesearch::measure
