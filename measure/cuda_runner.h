// Internals of the CUDA runner (CreateCudaRunner in measure/runner.h) exposed for tests:
// the error mapping of failed builds and failed worker setups, and a runner that skips the
// device probe (its workers still load the driver and fail with kNoDevice where none exists).
#pragma once

#include <memory>
#include <string>

#include "base/target.h"
#include "measure/measure.h"
#include "measure/runner.h"

namespace tilesearch::measure::cuda_internal {

/// The result of a candidate whose build failed (not run): kCompileTimeout for kDeadlineExceeded
/// or a message starting "compile_timeout", kInvalidSchedule for a message starting
/// "invalid_schedule", kCompileError otherwise; the message is the status's; compile_ms copied.
MeasureResult BuildFailureResult(const BuildResult& candidate);

/// The error kind of a worker whose setup failed with `message` (worker_batch.h's text, e.g.
/// "setup failed: FAILED_PRECONDITION: no CUDA driver found: ..."): kNoDevice for "no CUDA driver
/// found" / "no CUDA device found", kUnknown for a failure of the task's reference ("reference
/// ..."), kRuntimeError otherwise (crash or timeout of the setup, CUDA errors).
MeasureError SetupFailureError(const std::string& message);

/// `message` without a leading "setup failed: " (KeptWorker's prefix) and status code name
/// ("setup failed: FAILED_PRECONDITION: x" → "x").
std::string StripStatusCodeName(const std::string& message);

/// A CUDA runner for `target` without probing the device first (options not validated). Only
/// for tests: the caller's process still never initializes CUDA.
std::unique_ptr<Runner> NewCudaRunnerWithoutProbe(const Target& target,
                                                  const MeasureOptions& options);

}  // namespace tilesearch::measure::cuda_internal
