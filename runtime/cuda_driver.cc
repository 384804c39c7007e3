#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace tilesearch::runtime {
namespace {

constexpr char kDefaultLibrary[] = "libcuda.so.1";

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown dlopen error");
}

// Resolves `symbol` into `*fn`; false (and `*error` set) when it is missing.
template <typename Fn>
bool Resolve(void* handle, const char* symbol, Fn* fn, std::string* error) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (p == nullptr) {
    *error = DlError();
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

}  // namespace

std::string CudaDriver::DefaultLibraryPath() {
  const char* env = std::getenv("TILESEARCH_CUDA_DRIVER");
  if (env != nullptr && env[0] != '\0') return env;
  return kDefaultLibrary;
}

absl::StatusOr<const CudaDriver*> CudaDriver::Load() { return LoadFrom(DefaultLibraryPath()); }

absl::StatusOr<const CudaDriver*> CudaDriver::LoadFrom(const std::string& path) {
  static std::mutex* mu = new std::mutex;
  static auto* loaded = new std::map<std::string, std::unique_ptr<CudaDriver>>;
  std::lock_guard<std::mutex> lock(*mu);
  if (auto it = loaded->find(path); it != loaded->end()) return it->second.get();

  // RTLD_LOCAL: the driver's symbols stay out of the global namespace.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no CUDA driver found: ", DlError()));
  }
  std::unique_ptr<CudaDriver> d(new CudaDriver);
  d->path_ = path;
  std::string error;
  bool ok =
      Resolve(handle, "cuInit", &d->cuInit, &error) &&
      Resolve(handle, "cuDriverGetVersion", &d->cuDriverGetVersion, &error) &&
      Resolve(handle, "cuGetErrorName", &d->cuGetErrorName, &error) &&
      Resolve(handle, "cuGetErrorString", &d->cuGetErrorString, &error) &&
      Resolve(handle, "cuDeviceGet", &d->cuDeviceGet, &error) &&
      Resolve(handle, "cuDeviceGetCount", &d->cuDeviceGetCount, &error) &&
      Resolve(handle, "cuDeviceGetName", &d->cuDeviceGetName, &error) &&
      Resolve(handle, "cuDeviceGetAttribute", &d->cuDeviceGetAttribute, &error) &&
      Resolve(handle, "cuDeviceTotalMem_v2", &d->cuDeviceTotalMem, &error) &&
      Resolve(handle, "cuDevicePrimaryCtxRetain", &d->cuDevicePrimaryCtxRetain, &error) &&
      Resolve(handle, "cuDevicePrimaryCtxRelease_v2", &d->cuDevicePrimaryCtxRelease, &error) &&
      Resolve(handle, "cuCtxSetCurrent", &d->cuCtxSetCurrent, &error) &&
      Resolve(handle, "cuCtxSynchronize", &d->cuCtxSynchronize, &error) &&
      Resolve(handle, "cuMemAlloc_v2", &d->cuMemAlloc, &error) &&
      Resolve(handle, "cuMemFree_v2", &d->cuMemFree, &error) &&
      Resolve(handle, "cuMemcpyHtoD_v2", &d->cuMemcpyHtoD, &error) &&
      Resolve(handle, "cuMemcpyDtoH_v2", &d->cuMemcpyDtoH, &error) &&
      Resolve(handle, "cuMemsetD8_v2", &d->cuMemsetD8, &error) &&
      Resolve(handle, "cuMemsetD32_v2", &d->cuMemsetD32, &error) &&
      Resolve(handle, "cuModuleLoadDataEx", &d->cuModuleLoadDataEx, &error) &&
      Resolve(handle, "cuModuleUnload", &d->cuModuleUnload, &error) &&
      Resolve(handle, "cuModuleGetFunction", &d->cuModuleGetFunction, &error) &&
      Resolve(handle, "cuFuncGetAttribute", &d->cuFuncGetAttribute, &error) &&
      Resolve(handle, "cuFuncSetAttribute", &d->cuFuncSetAttribute, &error) &&
      Resolve(handle, "cuLaunchKernel", &d->cuLaunchKernel, &error) &&
      Resolve(handle, "cuEventCreate", &d->cuEventCreate, &error) &&
      Resolve(handle, "cuEventRecord", &d->cuEventRecord, &error) &&
      Resolve(handle, "cuEventSynchronize", &d->cuEventSynchronize, &error) &&
      Resolve(handle, "cuEventDestroy_v2", &d->cuEventDestroy, &error) &&
      Resolve(handle, "cuStreamSynchronize", &d->cuStreamSynchronize, &error);
  if (ok) {
    // cuEventElapsedTime_v2 exists from CUDA 12.8 on; older drivers only have the plain symbol.
    std::string ignored;
    d->elapsed_time_v2_ =
        Resolve(handle, "cuEventElapsedTime_v2", &d->cuEventElapsedTime, &ignored);
    if (!d->elapsed_time_v2_) {
      ok = Resolve(handle, "cuEventElapsedTime", &d->cuEventElapsedTime, &error);
    }
    // cuTensorMapEncodeTiled exists from CUDA 12.0 on; an older driver still runs every kernel
    // without TMA, so its absence only leaves the entry null.
    (void)Resolve(handle, "cuTensorMapEncodeTiled", &d->cuTensorMapEncodeTiled, &ignored);
  }
  if (!ok) {
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat("no CUDA driver found: ", error));
  }
  const CudaDriver* result = d.get();
  (*loaded)[path] = std::move(d);
  return result;
}

std::string CudaDriver::ErrorName(cuda::CUresult result) const {
  const char* s = nullptr;
  if (cuGetErrorName(result, &s) == cuda::CUDA_SUCCESS && s != nullptr) return s;
  return absl::StrCat("CUDA_ERROR ", result);
}

std::string CudaDriver::ErrorString(cuda::CUresult result) const {
  const char* s = nullptr;
  if (cuGetErrorString(result, &s) == cuda::CUDA_SUCCESS && s != nullptr) return s;
  return "unknown error";
}

absl::Status CudaDriver::Check(cuda::CUresult result, const std::string& call,
                               const std::string& log) const {
  if (result == cuda::CUDA_SUCCESS) return absl::OkStatus();
  std::string message = absl::StrCat(call, ": ", ErrorName(result), ": ", ErrorString(result));
  if (!log.empty()) absl::StrAppend(&message, "\n", log);
  switch (result) {
    case cuda::CUDA_ERROR_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(message);
    case cuda::CUDA_ERROR_NO_DEVICE:
    case cuda::CUDA_ERROR_NOT_INITIALIZED:
      return absl::FailedPreconditionError(message);
    case cuda::CUDA_ERROR_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace tilesearch::runtime
