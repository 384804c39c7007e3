// The Builder: already-lowered candidates → what the Runner executes (TVM's ProgramBuilder,
// include/tvm/auto_scheduler/measure.h: MeasureInput → Build → BuildResult). GPU targets get PTX,
// compiled in parallel on all host cores (codegen::CompileManyToPtx: forked compile workers with a
// per-candidate time limit) and assembled into cubins by ptxas where one is found (else the driver
// JIT-compiles the PTX when the runner loads it). CPU
// candidates pass through as their loop nest: the host runner JIT-compiles each one in its
// measurement worker (MLIR's ExecutionEngine), under the worker's compile clock, so that a
// compiler crash or hang costs only that worker.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/launch_config.h"
#include "base/target.h"
#include "codegen/codegen.h"
#include "ir/stmt.h"
#include "schedule/lower.h"

namespace tilesearch::measure {

/// One candidate to build: its lowered kernel, or why it has none.
struct BuildInput {
  /// The candidate's lowered kernel (schedule::Lower), shared, not copied; null when lowering
  /// failed.
  std::shared_ptr<const schedule::LoweredKernel> lowered;
  /// The lowering's error when `lowered` is null.
  absl::Status lower_status;
  /// Wall time of the lowering, ms; counted into BuildResult::compile_ms.
  double lower_ms = 0;

  /// The input of a finished lowering: the kernel on success, its error otherwise.
  static BuildInput FromLowering(absl::StatusOr<schedule::LoweredKernel> lowered, double lower_ms);
};

/// One built candidate, what a Runner checks and times.
struct BuildResult {
  /// The lowered program (shared with the candidate's lowering); null when the build failed.
  std::shared_ptr<const ir::LoopNest> nest;
  std::vector<LaunchConfig> launches;                    // GPU: one per kernel
  std::shared_ptr<const codegen::GpuModule> gpu_module;  // GPU: the compiled module
  /// A failed build (lowering or compilation): the candidate is not run and its result carries
  /// this error (kind from the status: "compile_timeout" → kCompileTimeout, "invalid_schedule" →
  /// kInvalidSchedule, others kCompileError) and message.
  absl::Status build_status;
  /// Lowering + (GPU) PTX compilation, ms; the Runner copies it into its MeasureResult.
  double compile_ms = 0;
};
/// How the Builder compiles.
struct BuilderOptions {
  /// GPU code generation options; their arch is replaced by the target's.
  codegen::GpuCompileOptions gpu;
  /// The GPU compile pool of Build (workers, per-candidate time limit, memory limit, isolation).
  codegen::ParallelCompileOptions parallel;
  /// GPU: when gpu.ptxas is empty, assemble every candidate with the ptxas FindPtxas finds (if
  /// any), in the parallel compile workers, so that the Runner loads cubins and pays no driver
  /// JIT per candidate (about 50 ms per matmul candidate on the H200, serial in the measurement).
  bool assemble_cubin = true;
};

/// Builds candidates of one target.
class Builder {
 public:
  explicit Builder(Target target, BuilderOptions options = {});

  /// One result per input, in order. A failed lowering becomes kFailedPrecondition
  /// "invalid_schedule: <the lowering's message>" (the prefix not repeated); a failed GPU
  /// compilation keeps codegen's status ("compile_timeout: ..." for one over its time limit).
  /// Never fails as a whole. GPU compilations run in forked workers: call it while no other thread
  /// of this process is inside MLIR / LLVM.
  /// `on_done`, when given, is called from the calling thread once per input with its final
  /// result as soon as that candidate is built (failed lowerings and cpu candidates first, then
  /// GPU compilations in completion order), so that a caller can measure early candidates while
  /// later ones compile. When `cancel` turns true, the compilations not yet finished end with
  /// kCancelled "cancelled: ...".
  std::vector<BuildResult> Build(
      const std::vector<BuildInput>& inputs,
      const std::function<void(size_t, const BuildResult&)>& on_done = nullptr,
      const std::atomic<bool>* cancel = nullptr) const;

  /// As Build for one input, compiled in this process (codegen::CompileToPtx: no fork, no time
  /// limit), for tools that build a single kernel and report its compile errors as they are.
  BuildResult BuildInProcess(const BuildInput& input) const;
  /// The target every candidate is built for.
  const Target& target() const { return target_; }

 private:
  // The result of `input` before GPU compilation: the lowering's error, or the nest and launches.
  BuildResult Prepare(const BuildInput& input) const;
  codegen::GpuCompileOptions GpuOptions() const;

  Target target_;
  BuilderOptions options_;
};

}  // namespace tilesearch::measure
