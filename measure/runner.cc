#include "measure/runner.h"

#include <iostream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/device_lock.h"

namespace tilesearch::measure {
namespace {

using runtime::DeviceLock;

// Holds the device lock (runtime/device_lock.h: a FIFO ticket lock across processes) around each
// Run call of the wrapped runner. The lock keeps no descriptor open, so forked workers inherit
// nothing of it.
class LockedRunner : public Runner {
 public:
  LockedRunner(std::unique_ptr<Runner> inner, std::unique_ptr<DeviceLock> lock)
      : inner_(std::move(inner)), lock_(std::move(lock)) {}
  std::vector<MeasureResult> Run(const ir::ComputeDAG& dag,
                                 const std::vector<BuildResult>& builds) override {
    return RunStreaming(dag, builds, nullptr);
  }
  std::vector<MeasureResult> RunStreaming(const ir::ComputeDAG& dag,
                                          const std::vector<BuildResult>& builds,
                                          const ResultCallback& on_result) override {
    lock_failed_ = false;
    if (absl::Status acquired = lock_->Acquire(); !acquired.ok()) {
      lock_failed_ = true;
      // Measuring without the lock would time kernels next to another job's: fail loudly.
      std::vector<MeasureResult> results(builds.size());
      for (size_t i = 0; i < builds.size(); ++i) {
        results[i].error = MeasureError::kRuntimeError;
        results[i].message = absl::StrCat("not measured: ", std::string(acquired.message()));
        results[i].compile_ms = builds[i].compile_ms;
        if (on_result) on_result(i, results[i]);
      }
      return results;
    }
    std::vector<MeasureResult> results = inner_->RunStreaming(dag, builds, on_result);
    if (absl::Status released = lock_->Release(); !released.ok()) {
      std::cerr << "measure: " << released.message() << "\n";
    }
    return results;
  }
  // Under the lock: the setup runs the reference kernel and uploads on the device.
  void Prepare(const ir::ComputeDAG& dag) override {
    if (!lock_->Acquire().ok()) return;  // the Run reports the lock's error
    inner_->Prepare(dag);
    if (absl::Status released = lock_->Release(); !released.ok()) {
      std::cerr << "measure: " << released.message() << "\n";
    }
  }
  const Target& target() const override { return inner_->target(); }
  void SetScreenAboveMs(double ms) override { inner_->SetScreenAboveMs(ms); }
  void SetTiming(int min_runs, double min_total_ms, double soak_ms) override {
    inner_->SetTiming(min_runs, min_total_ms, soak_ms);
  }
  RunUsage last_run_usage() const override {
    return lock_failed_ ? RunUsage{} : inner_->last_run_usage();
  }

 private:
  std::unique_ptr<Runner> inner_;
  std::unique_ptr<DeviceLock> lock_;
  bool lock_failed_ = false;  // the last call measured nothing: no lock
};

absl::StatusOr<std::unique_ptr<Runner>> CreateUnlockedRunner(const Target& target,
                                                             const MeasureOptions& options) {
  switch (target.kind) {
    case TargetKind::kCpu:
      return CreateHostRunner(target, options);
    case TargetKind::kCuda:
      return CreateCudaRunner(target, options);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no measurer for target '", target.ToString(), "'"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Runner>> CreateRunner(const Target& target,
                                                     const MeasureOptions& options) {
  RETURN_IF_ERROR(ValidateMeasureOptions(options));
  const std::string lock_path = DeviceLockPath(options);
  std::unique_ptr<DeviceLock> lock;
  if (!lock_path.empty()) {
    ASSIGN_OR_RETURN(lock, DeviceLock::Open(lock_path));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Runner> runner, CreateUnlockedRunner(target, options));
  if (lock == nullptr) return runner;
  return std::unique_ptr<Runner>(new LockedRunner(std::move(runner), std::move(lock)));
}

}  // namespace tilesearch::measure
