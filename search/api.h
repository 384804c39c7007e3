// The public C++ API of tilesearch: tune a tensor operator for a target, keep the measured
// schedules in a log, pick the best one back out and run it on host data. The search is Ansor's
// (Zheng et al., "Ansor: Generating High-Performance Tensor Programs for Deep Learning",
// OSDI 2020): sketches + random annotation, evolutionary search guided by a learned cost model,
// every candidate measured on the real target and checked against the unscheduled program.
//
//   auto task = tilesearch::Task::Create("matmul", {{256, 256}, {256, 256}},
//                                        tilesearch::DefaultTarget());  // what, and where
//   tilesearch::TuneOptions options;
//   options.trials = 64;
//   options.log_path = "matmul.jsonl";
//   auto tuned = tilesearch::Tune(*task, options);                      // measured trials → log
//   auto best = tilesearch::ApplyHistoryBest(options.log_path, *task);  // fastest valid record
//   auto artifact = tilesearch::BuildKernel(*best);                     // re-lowered, compiled
//   auto kernel = tilesearch::Kernel::Load(*artifact);                  // ready to launch
//   auto buffers = kernel->MakeBuffers();                               // A, B, C: fill A and B
//   auto ran = kernel->Run({&buffers[0], &buffers[1], &buffers[2]});    // C = A · B
//
// Create, Tune, ApplyHistoryBest, BuildKernel, Load and Run return an absl::Status(Or): check ok()
// before using a value (examples/tune_and_launch.cc and examples/consumer/tune_matmul.cc do).
//
// Conventions. Shapes are row-major extents; a workload's inputs are in the operator's input
// order (`tilesearch ops NAME` lists them) and its outputs follow. Times are milliseconds unless a
// name says seconds; throughput is FLOP/s (GFLOP/s where named). Every error a user's input, log
// or device can cause is an absl::Status with a lower-case message that names the numbers and
// files; nothing here aborts on bad input. examples/tune_and_launch.cc is the whole flow.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/target.h"
#include "codegen/codegen.h"
#include "costmodel/cost_model.h"
#include "ir/host_buffer.h"
#include "ir/type.h"
#include "schedule/schedule_file.h"
#include "search/measure_record.h"
#include "search/replay.h"
#include "search/tuner.h"

namespace tilesearch {

/// A tuning task (Ansor's SearchTask): one operator instance and the hardware it is tuned for.
/// Records of a task are those of its workload key (ir::ComputeDAG::WorkloadKey) on a target with
/// the same kind and arch (search::SameTarget).
struct Task {
  schedule::Workload workload;  // operator name + input shapes + dtype + attributes (or "fused")
  Target target;                // ParseTarget, DefaultTarget() or Target::HostCpu()

  /// A task of operator `op` (ir/ops/registry.h) on `shapes` (one per input, row-major extents).
  /// Errors (kInvalidArgument): those of building the workload: unknown operator, wrong number of
  /// shapes, shape mismatches ("matmul: A is 64x32 but B is 16x64"), unknown attributes.
  static absl::StatusOr<Task> Create(const std::string& op,
                                     std::vector<std::vector<int64_t>> shapes, const Target& target,
                                     ir::ScalarType dtype = ir::ScalarType::kFloat32,
                                     std::map<std::string, std::string> attrs = {});
  /// A task of any workload: a registry operator's, or a fused workload
  /// (schedule/fused_workload.h; a graph task's, search::TaskWorkload). Errors (kInvalidArgument):
  /// "workload <ToString()>: <Build's error>".
  static absl::StatusOr<Task> FromWorkload(schedule::Workload workload, const Target& target);
  /// "matmul 64x64 64x64 float32 on cpu".
  std::string ToString() const;
};

/// Options of a tuning job (trials, trials per round, log path, seed, cost model, search and
/// measurement options); see search/tuner.h. `log_path` is required.
using TuneOptions = search::TuneOptions;
/// The job's outcome: best record, trial counts, errors by kind, best-so-far curve.
using TuneResult = search::TuneResult;
/// One measured trial as stored in the log (search/measure_record.h).
using MeasureRecord = search::MeasureRecord;
/// A record with its DAG and replayed schedule state.
using HistoryBest = search::ReplayedRecord;
/// A rebuilt kernel: re-lowered nest, PTX / cubin and launches (cuda) or object file (cpu).
using KernelArtifact = search::KernelArtifact;
using BuildOptions = search::BuildOptions;

/// The target to tune for when the user does not say: the CUDA target of device 0 (its arch and
/// limits, runtime::TargetFromDevice) when a CUDA driver and device answer, else the host cpu.
/// The probe runs in a short-lived child process, so this process does not initialize CUDA (it
/// must not before forking measurement workers).
Target DefaultTarget();

/// "auto" → DefaultTarget(); anything else ParseTarget ("cpu", "cuda",
/// "cuda -arch=sm_80", "sm_90"). Errors: kInvalidArgument "unknown target 'x' (...)".
absl::StatusOr<Target> TargetFromString(const std::string& text);

/// Tunes the task until the log at options.log_path holds options.trials records of it (records
/// already there count: a job resumes), the search runs dry, or SIGINT arrives (search::Tune: the
/// evolutionary search of Ansor §5 with the XGBoost cost model, measurement on the target). The
/// first SIGINT finishes and logs the round in flight (TuneResult::interrupted); a second one ends
/// the process at once, killed by SIGINT, after any log append in progress.
/// Errors: search::Tune's (bad options, unbuildable workload, log I/O, "no CUDA driver found", a
/// log path that is not a regular file or not a tuning log).
[[nodiscard]] absl::StatusOr<TuneResult> Tune(const Task& task, const TuneOptions& options);

/// The fastest valid record of the task in the log, replayed (Ansor / TVM ApplyHistoryBest).
/// Records whose workload key does not match their workload are skipped (HistoryBest::warnings
/// names their lines). Errors: kNotFound "log 'x' does not exist"; kNotFound "<log>: no record for
/// workload <key> on <target>" or "<log>: no valid record ...: all 64 trials failed: 60
/// compile_error, 4 wrong_answer"; "<log>: trial 17: step 3: ..." for a record this build cannot
/// replay. `precision` picks the records tuned under it (TuneOptions::search.precision): a tf32
/// record never answers an ieee request, nor the reverse.
[[nodiscard]] absl::StatusOr<HistoryBest> ApplyHistoryBest(
    const std::string& log_path, const Task& task,
    measure::Fp32Precision precision = measure::Fp32Precision::kIeee);

/// ApplyHistoryBest, or, when the log has no valid record of the task (kNotFound), a schedule
/// predicted without measuring (search::PredictSchedule over every record in the log, ranked by
/// `model` when given, else the nearest tuned shape's fastest record transferred):
/// HistoryBest::predicted is then true and HistoryBest::prediction says where it came from. Check
/// a predicted kernel (search::CheckKernel) before relying on it. Errors: ApplyHistoryBest's other
/// than "no (valid) record"; when the prediction fails too, its error ("no tuned workload of
/// matmul float32 on cpu to transfer from ...") with ApplyHistoryBest's message appended.
[[nodiscard]] absl::StatusOr<HistoryBest> ApplyHistoryBestOrPredict(
    const std::string& log_path, const Task& task, costmodel::CostModel* model = nullptr);

/// BuildKernel(const HistoryBest&, const BuildOptions& = {}) and BuildKernel(const
/// MeasureRecord&, ...): re-lowers and compiles a record for its target (search/replay.h; cuda:
/// PTX, a cubin when ptxas is found, launches; cpu: an object file). Errors name the trial. The
/// same functions as search::BuildKernel (a using-declaration, so unqualified calls that find
/// both namespaces are not ambiguous).
using search::BuildKernel;

/// A built kernel loaded on its target, runnable on host buffers. cpu: JIT-compiled in this
/// process (codegen::CompileForHost, parallel loops on all cores). cuda: the artifact's PTX loaded
/// into the primary context of `device` (measure::LoadedGpuModule), one device buffer per argument
/// allocated at load (a TMA tensor map encoded there once, over its source's buffer); each Run
/// copies the inputs in, launches every kernel in order, waits and copies the outputs back. Loading
/// a cuda kernel initializes CUDA in this process: tune and re-check (search::CheckKernel) before,
/// never after. Move-only; not thread-safe.
class Kernel {
 public:
  /// Errors: cpu, CompileForHost's; cuda, kFailedPrecondition "no CUDA driver found: ..." / "no
  /// CUDA device found: ...", the driver's load and allocation errors (out of device memory:
  /// kResourceExhausted), measure::BindTensorMaps' (a tensor map the driver cannot encode).
  [[nodiscard]] static absl::StatusOr<Kernel> Load(const KernelArtifact& artifact, int device = 0);

  Kernel(Kernel&&) noexcept;
  Kernel& operator=(Kernel&&) noexcept;
  ~Kernel();

  /// Runs the kernel on one buffer per parameter (params(): inputs, then outputs), in that
  /// order. Inputs are read, outputs overwritten (their values are held as double, rounded to the
  /// parameter's dtype on the way in). Errors (kInvalidArgument): a wrong count, a null buffer,
  /// "buffer 1 ('B') is float16 [64, 32], the kernel expects float32 [32, 64]"; the target's
  /// launch errors.
  absl::Status Run(const std::vector<ir::HostBuffer*>& buffers);

  /// The parameters Run takes, in order (name, dtype, shape, input / output).
  const std::vector<codegen::KernelArg>& params() const;
  /// Zero-filled buffers of the parameters' dtypes and shapes, in params() order.
  std::vector<ir::HostBuffer> MakeBuffers() const;
  /// Wall time of the last Run's kernel execution alone (no copies, no packing), ms; one run, cold
  /// caches: the tuned median of the log is the careful number.
  double last_run_ms() const;
  const Target& target() const;

 private:
  struct Impl;
  explicit Kernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tilesearch
