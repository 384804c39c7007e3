// Replay of tuning logs into kernel artifacts (Ansor's ApplyHistoryBest, OSDI'20 §6 / TVM
// auto_scheduler.ApplyHistoryBest): the best valid record of a task (workload key + target) is
// picked from the log, its steps are replayed on the workload's DAG (a record replays exactly: same
// steps, same kernel), the state is lowered again and compiled into what a program needs to run
// the kernel without tilesearch:
//   cuda: PTX (codegen::CompileToPtx), a cubin when ptxas is at hand, the launch configuration
//         of every kernel and a C header whose static inline launcher calls cuLaunchKernel;
//   cpu:  an object file from the host JIT's own MLIR → LLVM pipeline (codegen::CompileHostObject)
//         with one C entry taking plain pointers, and a C header declaring it.
// The rebuilt kernel can be checked again against the unscheduled program on fresh random inputs
// (CheckKernel) before it is written out (WriteArtifacts). A record's workload may be a registry
// operator or a fused workload (a graph task, schedule/fused_workload.h): either rebuilds its DAG
// from the record alone; a fused kernel's parameters are its placeholders p0, p1, ... (the
// subgraph's inputs in order) and then its output.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "codegen/codegen.h"
#include "codegen/ptxas.h"
#include "ir/compute_dag.h"
#include "measure/measure.h"
#include "nlohmann/json_fwd.hpp"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "schedule/state.h"
#include "search/measure_record.h"

namespace tilesearch::search {

/// A measure record with its workload rebuilt and its steps replayed.
struct ReplayedRecord {
  MeasureRecord record;
  ir::ComputeDAG dag;     // record.workload.Build()
  schedule::State state;  // record.steps applied to dag's initial state
  /// ReadLog's warnings (skipped lines, records of other targets) when read from a log.
  std::vector<std::string> warnings;
  /// True when the log had no valid record of the workload and the schedule was predicted
  /// without measuring (ApplyHistoryBestOrPredict): `record` then has no result, and
  /// `prediction` says where the schedule came from ("transferred from trial 17 of ...").
  bool predicted = false;
  std::string prediction;
};

/// Rebuilds the record's DAG and replays its steps. Errors (kInvalidArgument, naming the trial):
/// "trial 17: workload: <Build's error>", "trial 17: workload key 1234 of the record differs
/// from 5678 of its workload rebuilt by this build", "trial 17: step 3: <ApplyStep's error>".
[[nodiscard]] absl::StatusOr<ReplayedRecord> ReplayRecord(const MeasureRecord& record);

/// The best valid record (smallest median time; search::BestRecord) of `workload` on `target` in
/// the log at `log_path`, replayed. The log is read with ReadOptions::verify_workload_keys: a
/// record whose workload key does not match its workload is skipped with a warning naming its line
/// (in `warnings`), so the next best consistent record is picked. A record whose steps no longer
/// replay is skipped the same way ("<path>: skipped the record of trial 5 (1 ms), which does not
/// replay: ...; using the next best"); when no valid record replays, the best one's error. Errors:
/// ReadLog's (kNotFound "log 'x' does not exist", a newer format version); unless
/// `allow_unreadable_lines`, kFailedPrecondition "<path>: 2 lines that may hold records of
/// workload <key> could not be read (lines 7, 9; ...)" when lines the reader skipped (corrupt,
/// truncated, too long) mention the workload's key or were too long to look at
/// (LogContents::suspect_lines): the best record may be among them; the workload's build errors;
/// kNotFound "<path>: no record for workload <key> on <target>[; the log has its records on other
/// targets: 12 on cpu][; the log holds records of 2 other workloads: ...]" (OtherWorkloadsText,
/// the same operator first) or
/// "<path>: no valid record for workload <key> on <target>: all 64 trials failed: 60 compile_error,
/// 4 wrong_answer" (BestRecord's messages); ReplayRecord's errors prefixed with the path.
/// `precision` picks the records of that precision (their key: measure::PrecisionWorkloadKey):
/// a tf32 record never answers an ieee replay, nor the reverse.
[[nodiscard]] absl::StatusOr<ReplayedRecord> ApplyHistoryBest(
    const std::string& log_path, const schedule::Workload& workload, const Target& target,
    measure::Fp32Precision precision = measure::Fp32Precision::kIeee,
    bool allow_unreadable_lines = false);

/// As ApplyHistoryBest for a workload named only by its key (ir::ComputeDAG::WorkloadKey()).
[[nodiscard]] absl::StatusOr<ReplayedRecord> ApplyHistoryBestByKey(
    const std::string& log_path, const std::string& workload_key, const Target& target,
    bool allow_unreadable_lines = false);

struct BuildOptions {
  /// Base name of the artifact: file names, the cpu entry symbol, C header macros. Must be a C
  /// identifier; "" = DefaultArtifactName(record).
  std::string name;
  /// GPU code generation; `arch` is replaced by the record's target arch.
  codegen::GpuCompileOptions gpu;
  /// Host object emission; `entry_name` is replaced by the artifact name.
  codegen::HostObjectOptions host;
  /// cuda: assemble the PTX into a cubin when ptxas is found (FindPtxas).
  bool cubin = true;
};

/// A rebuilt kernel: everything WriteArtifacts writes.
struct KernelArtifact {
  std::string name;                      // the artifact's base name (a C identifier)
  MeasureRecord record;                  // the record it was built from
  ir::ComputeDAG dag;                    // its workload
  schedule::LoweredKernel lowered;       // the re-lowered loop nest and GPU launches
  std::vector<codegen::KernelArg> args;  // params (inputs, outputs), then scratch buffers
  int num_params = 0;                    // args a caller passes; the rest are scratch
  double flops = 0;                      // FLOPs of one run (dag.Flops())

  // cuda only.
  std::shared_ptr<const codegen::GpuModule> gpu;  // PTX, kernels (entry, grid, block, shared)
  std::string cubin;                              // ptxas output; empty when not built
  // cpu only.
  std::optional<codegen::HostObject> host;  // the object file and its entry

  /// Why something is missing, e.g. "no cubin: ptxas not found ($TILESEARCH_PTXAS unset, no
  /// ptxas on PATH, no /usr/local/cuda/bin/ptxas)".
  std::vector<std::string> notes;

  bool is_gpu() const { return record.target.is_gpu(); }
  /// GFLOP/s of the record's median time (0 when it has none).
  double gflops() const;
};

/// "<op>_<first 8 characters of the workload key>", made a C identifier, e.g. "matmul_9f0c2d4e".
std::string DefaultArtifactName(const MeasureRecord& record);

/// OK when `name` can name an artifact: a C identifier (letters, digits, '_', not starting with a
/// digit) that is neither a C (C23) nor a C++ (C++20) keyword ("int", "class", ...), nor reserved
/// (a leading '_', which C reserves at file scope, or "__" anywhere, which C++ reserves), nor a
/// symbol the artifacts use themselves ("main", codegen::kHostObjectParallelFor). Errors
/// (kInvalidArgument, naming it): "artifact name 'int' is a C keyword; ...", "artifact name
/// '_x' is reserved in C (it starts with '_'); ...", "artifact name 'my-kernel' is not a C
/// identifier ...".
absl::Status ValidateArtifactName(const std::string& name);

/// Checks, before anything is built and without creating anything, that WriteArtifacts can use
/// `out_dir`: an existing `out_dir` must be a directory this process can write into; a missing
/// one needs its nearest existing ancestor to be such a directory. Errors: kInvalidArgument
/// "output directory '' is empty", "output directory 'x' is not a directory", "cannot create
/// output directory 'x/y/z': 'x' is not a directory" (or "...: Not a directory" when a component
/// is a file); kPermissionDenied "... is not writable: Permission denied".
absl::Status ValidateArtifactDir(const std::string& out_dir);

/// codegen/ptxas.h: the ptxas to use and the assembly of PTX into a cubin.
using codegen::AssemblePtx;
using codegen::FindPtxas;

/// Lowers the replayed state for its record's target and compiles it (cuda: CompileToPtx with
/// the lowered launches, then a cubin when `options.cubin` and ptxas is found; cpu:
/// CompileHostObject). Errors, naming the trial: "trial 17: cannot lower for cuda -arch=sm_90:
/// ..." (Lower's), "trial 17: compile: ..." (codegen's), "trial 17: ptxas -arch=sm_90 failed ..."
/// (a ptxas that rejects the PTX), kInvalidArgument for a name ValidateArtifactName refuses.
[[nodiscard]] absl::StatusOr<KernelArtifact> BuildKernel(const ReplayedRecord& replayed,
                                                         const BuildOptions& options = {});
/// ReplayRecord then BuildKernel.
[[nodiscard]] absl::StatusOr<KernelArtifact> BuildKernel(const MeasureRecord& record,
                                                         const BuildOptions& options = {});

struct CheckOptions {
  /// The check of measure::Runner (tolerances, trials, distributions) with its own seed, so
  /// the inputs differ from the tuning job's (whose default seed is 1). Timing is one run.
  measure::MeasureOptions measure = DefaultMeasure();
  static measure::MeasureOptions DefaultMeasure();
};

/// The outcome of CheckKernel.
struct CheckOutcome {
  bool checked = false;  // false: not re-checked (`note` says why); `passed` is then false
  bool passed = false;   // every output element within tolerance on every trial
  /// "not re-checked: no CUDA driver found: ..." when !checked; the failure when checked and not
  /// passed ("wrong_answer: C[3, 17]: got nan, expected 1.25 ..."); empty when passed.
  std::string note;
  measure::MeasureResult result;  // the measurer's result (check report), when checked
};

/// Runs the rebuilt kernel against the unscheduled program on fresh random inputs through
/// measure::CreateRunner (measure/measure.h: outputs poisoned with NaN, every element compared
/// under the dtype's tolerance): cpu through the host measurer (the nest JIT-compiled by the same
/// pipeline as the object), cuda through the cuda measurer with the artifact's own PTX. The check
/// judges by the precision the record was tuned under (artifact.record.precision, replacing
/// options.measure.precision): a tf32 kernel by TF32's unit roundoff, as its tuning did. Where no
/// CUDA driver or device answers the outcome is "not re-checked", not an error. Forks measurement
/// workers: call it before this process initializes CUDA. Errors: kInvalidArgument for invalid
/// measure options; kResourceExhausted when the check needs more host memory than is available.
[[nodiscard]] absl::StatusOr<CheckOutcome> CheckKernel(const KernelArtifact& artifact,
                                                       const CheckOptions& options = {});

/// A GPU kernel's launch as the artifacts and `measure --json` record it: grid, block, static and
/// dynamic shared bytes, and "cluster" ([n, 1, 1]) for a kernel compiled for clusters of n > 1
/// blocks (.reqnctapercluster: a record of the launch, not an argument of it).
nlohmann::json KernelLaunchJson(const codegen::GpuKernelInfo& kernel);

/// The artifact's JSON description (see WriteArtifacts); `check` adds its outcome.
nlohmann::json ArtifactToJson(const KernelArtifact& artifact, const CheckOutcome* check = nullptr);

/// The C header: cuda, a launcher (see WriteArtifacts); cpu, the entry's prototype.
std::string ArtifactHeader(const KernelArtifact& artifact);

/// Writes into `out_dir` (ValidateArtifactDir, then created with its parents when missing), all or
/// nothing: every file is first written under a temporary name in `out_dir` and renamed into place
/// only when all were written (an existing destination that is not a regular file, e.g. a
/// directory named <name>.json, is refused before anything is written; when a rename fails the
/// files already renamed are removed):
///   cuda: <name>.ptx, <name>.cubin (when built);
///   cpu:  <name>.o;
///   both: <name>.h and <name>.json.
/// The JSON: name, workload (schedule::WorkloadToJson), workload_key, target ("cuda
/// -arch=sm_90"), device_name, trial, seed, steps (the step list), median_ms, gflops, flops,
/// files, entries (PTX entry names or the C symbol), launches (per kernel: entry, grid, block,
/// static and dynamic shared bytes; empty on cpu), arguments (index, name, kind
/// input/output/scratch/tensor_map, dtype, shape, bytes; a tensor_map argument, int64 [16], also
/// has "tensor_map": {source, the "name" of the input or output it describes; dims, outermost
/// first; box; swizzle bytes}), notes, cpu ({triple, cpu}) for cpu, and check (checked, passed,
/// note, trials, max_abs_error, max_rel_error) when given.
/// The cuda header (needs <cuda.h>): <NAME>_NUM_KERNELS / _NUM_ARGS / _ARG<i>_BYTES macros,
/// `<name>_kernel_names`, `CUresult <name>_get_functions(CUmodule, CUfunction fns[])` (which also
/// opts kernels into dynamic shared memory above 48 KiB), and `CUresult <name>_launch(const
/// CUfunction fns[], CUdeviceptr d_<arg>..., CUstream stream)` calling cuLaunchKernel for each
/// kernel in order with the recorded grid, block and dynamic shared bytes, after encoding each TMA
/// tensor map over its source's buffer (cuTensorMapEncodeTiled, CUDA 12+) into the map argument's
/// buffer with cuMemcpyHtoDAsync on `stream`. The cpu header:
/// `int <name>(const float* A, const float* B, float* C);` with the argument layout documented.
/// Returns the paths written, in the order above. Errors: ValidateArtifactDir's; kInvalidArgument
/// "cannot write 'd/k.json': it is a directory"; kInternal / kPermissionDenied naming the path
/// that could not be written or renamed (then none of the files is left in `out_dir`).
[[nodiscard]] absl::StatusOr<std::vector<std::string>> WriteArtifacts(
    const KernelArtifact& artifact, const std::string& out_dir,
    const CheckOutcome* check = nullptr);

}  // namespace tilesearch::search
