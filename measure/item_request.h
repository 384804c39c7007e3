// What a kept measurement worker (measure/kept_worker.h) receives per candidate, as bytes: the
// batch it belongs to, the batch's screen, the build's compile time, and the candidate's code:
// the lowered loop nest for the host runner (the worker JIT-compiles it, so a compiler crash
// costs only the worker) or the compiled GPU module for the CUDA runner (its cubin, or its PTX
// when it has none, with the kernels' names and launch configurations and the argument list).
// Encoded and decoded by the same build; not a file format.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/codegen.h"
#include "ir/stmt.h"
#include "measure/measure.h"
#include "runtime/timing.h"

namespace tilesearch::measure {

/// The part of a request every runner sends.
struct RequestContext {
  /// The Run call the candidate belongs to: a worker resets its within-batch screen
  /// (MeasureOptions::screen_factor) when it changes.
  uint64_t batch = 0;
  /// MeasureOptions::screen_above_ms of the batch (ms; 0 = off).
  double screen_above_ms = 0;
  /// The build's time (BuildResult::compile_ms), copied into the result.
  double compile_ms = 0;
  /// The batch's timing when it differs from the worker's (Runner::SetTiming: a tuner's final
  /// selection times its contenders longer than its rounds, each in full, without the worker's
  /// within-batch screen); min_runs 0 = the worker's own timing and screen.
  int64_t min_runs = 0;
  double min_total_ms = 0;
  /// With min_runs > 0: untimed runs before each timing, ms of wall time
  /// (runtime::TimingOptions::soak_ms; Runner::SetTiming).
  double soak_ms = 0;
};

/// A runner's timing override (Runner::SetTiming), copied into each request's context.
struct TimingOverride {
  int64_t min_runs = 0;  // 0: none
  double min_total_ms = 0;
  double soak_ms = 0;
};

/// A host candidate: its loop nest.
struct HostRequest {
  RequestContext context;
  ir::LoopNest nest;
};

/// A GPU candidate: its module and whether the 3xTF32 accuracy gate applies to it.
struct GpuRequest {
  RequestContext context;
  /// Under ieee precision, a 3xTF32 candidate must also be no less accurate than the float32
  /// reference on the sampled points (Tf32x3Verdict).
  bool tf32x3_gate = false;
  /// ptx (only when cubin is empty), arch, cubin, kernels, args; the compile statistics and kept
  /// MLIR / LLVM IR are not sent.
  codegen::GpuModule module;
};

/// A worker's options for one request: the context's screen_above_ms, and where it overrides the
/// timing (RequestContext::min_runs > 0) its min_runs, min_total_ms and soak_ms (max_runs raised to
/// min_runs where below it) with every candidate timed in full (screen_factor 0: no staged-timing
/// screen), and the run timeout raised by the soak and the timing's wall limit (a held timing of
/// seconds is not a run timeout); the timing, screen and timeout unchanged otherwise.
void ApplyRequestContext(const RequestContext& context, MeasureOptions* options);

/// The request's bytes. Never fails.
std::string EncodeHostRequest(const HostRequest& request);
std::string EncodeGpuRequest(const GpuRequest& request);

/// The request back. Errors: kInvalidArgument "corrupt measure request: ..." (truncated or
/// malformed bytes, or ir::DecodeLoopNest's error for the nest).
[[nodiscard]] absl::StatusOr<HostRequest> DecodeHostRequest(const std::string& bytes);
[[nodiscard]] absl::StatusOr<GpuRequest> DecodeGpuRequest(const std::string& bytes);

}  // namespace tilesearch::measure
