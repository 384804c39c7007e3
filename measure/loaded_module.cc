#include "measure/loaded_module.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::measure {
namespace {

// Without opting in, a kernel may use at most 48 KiB of shared memory in total.
constexpr int64_t kDefaultSharedLimit = 48 * 1024;

}  // namespace

LaunchConfig KernelLaunch(const codegen::GpuKernelInfo& kernel) {
  LaunchConfig launch;
  launch.grid = kernel.grid;
  launch.block = kernel.block;
  launch.shared_memory_bytes = kernel.dynamic_shared_bytes;
  return launch;
}

absl::StatusOr<std::unique_ptr<LoadedGpuModule>> LoadedGpuModule::Load(
    const runtime::CudaContext& context, const codegen::GpuModule& module) {
  std::unique_ptr<LoadedGpuModule> m(new LoadedGpuModule);
  m->context_ = &context;
  m->kernels_ = module.kernels;
  m->num_args_ = module.args.size();
  // The cubin when the Builder assembled one: no driver JIT at load.
  ASSIGN_OR_RETURN(m->module_,
                   runtime::CudaModule::LoadPtx(context.driver(),
                                                module.cubin.empty() ? module.ptx : module.cubin));
  const runtime::DeviceInfo& info = context.info();
  for (const codegen::GpuKernelInfo& k : module.kernels) {
    ASSIGN_OR_RETURN(runtime::cuda::CUfunction f, m->module_->GetFunction(k.name));
    ASSIGN_OR_RETURN(runtime::KernelResources res,
                     m->module_->Resources(f, k.name, k.dynamic_shared_bytes));
    int64_t shared = res.static_shared_bytes + k.dynamic_shared_bytes;
    int64_t limit = std::max(info.shared_per_block_optin, info.shared_per_block);
    if (shared > limit) {
      return absl::InvalidArgumentError(absl::StrCat("kernel '", k.name, "' needs ", shared,
                                                     " bytes of shared memory, the device allows ",
                                                     limit));
    }
    if (k.dynamic_shared_bytes > 0 && shared > kDefaultSharedLimit) {
      RETURN_IF_ERROR(m->module_->SetMaxDynamicSharedBytes(f, k.dynamic_shared_bytes));
    }
    m->functions_.push_back(f);
    m->resources_.push_back(std::move(res));
  }
  return m;
}

absl::Status LoadedGpuModule::LaunchAll(const std::vector<runtime::cuda::CUdeviceptr>& args,
                                        bool synchronize) const {
  if (args.size() != num_args_) {
    return absl::InvalidArgumentError(
        absl::StrCat("module takes ", num_args_, " buffer arguments, got ", args.size()));
  }
  for (size_t i = 0; i < kernels_.size(); ++i) {
    RETURN_IF_ERROR(runtime::Launch(*context_, functions_[i], kernels_[i].name,
                                    KernelLaunch(kernels_[i]), args, /*synchronize=*/false));
  }
  if (synchronize) return context_->Synchronize();
  return absl::OkStatus();
}

}  // namespace tilesearch::measure
