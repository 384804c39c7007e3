// A compiled GPU module (codegen::GpuModule: PTX and its kernels' launch configurations) loaded
// into a CUDA context through the runtime's driver objects, ready to launch with codegen's
// argument convention (codegen/codegen.h: one device pointer per buffer, params then scratch).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/launch_config.h"
#include "codegen/codegen.h"
#include "runtime/cuda_api.h"
#include "runtime/cuda_device.h"

namespace tilesearch::measure {

/// The launch of `kernel`: its grid and block, its dynamic shared memory as the launch's shared
/// memory bytes.
LaunchConfig KernelLaunch(const codegen::GpuKernelInfo& kernel);

/// A codegen::GpuModule loaded and ready to run: its kernels looked up, their resources read and
/// dynamic shared memory allowed where a kernel needs more than 48 KiB.
class LoadedGpuModule {
 public:
  /// Errors: CudaModule::LoadPtx's; GetFunction's; kInvalidArgument "kernel 'k' needs N bytes of
  /// shared memory, the device allows M" (static + dynamic over the opt-in limit).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LoadedGpuModule>> Load(
      const runtime::CudaContext& context, const codegen::GpuModule& module);

  /// Launches every kernel in module order on the default stream. `args`: one device pointer per
  /// element of module.args (params, then scratch; a tensor map's points at its encoded bytes:
  /// BindTensorMaps). Errors: kInvalidArgument for a wrong argument
  /// count; runtime::Launch's errors (with `synchronize`, the asynchronous ones too).
  absl::Status LaunchAll(const std::vector<runtime::cuda::CUdeviceptr>& args,
                         bool synchronize) const;

  /// One per kernel, in launch order.
  const std::vector<runtime::KernelResources>& resources() const { return resources_; }
  double load_ms() const { return module_->load_ms(); }

 private:
  LoadedGpuModule() = default;
  const runtime::CudaContext* context_ = nullptr;
  std::unique_ptr<runtime::CudaModule> module_;
  std::vector<codegen::GpuKernelInfo> kernels_;
  std::vector<runtime::cuda::CUfunction> functions_;
  size_t num_args_ = 0;
  std::vector<runtime::KernelResources> resources_;
};

}  // namespace tilesearch::measure
