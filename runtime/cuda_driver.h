// The CUDA driver library, loaded at run time with dlopen (never linked), so the binary runs, and
// says so clearly, where no driver exists. Entry points are resolved by their versioned symbol
// names (cuMemAlloc_v2, cuDevicePrimaryCtxRelease_v2, cuEventElapsedTime_v2 where exported, ...)
// as the CUDA 13 headers map them. Loading calls no CUDA function; cuInit is the caller's (see
// CudaContext), so loading in a process that must never initialize CUDA is harmless.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cuda_api.h"

namespace tilesearch::runtime {

/// The resolved entry points of one loaded libcuda. Immutable after loading, shared by all
/// threads; the library is never unloaded.
class CudaDriver {
 public:
  /// The library path: $TILESEARCH_CUDA_DRIVER when set and non-empty, else "libcuda.so.1".
  static std::string DefaultLibraryPath();

  /// The driver at DefaultLibraryPath(), loaded once per distinct path for the process
  /// (thread-safe); a failed load is retried on the next call. Errors: kFailedPrecondition
  /// "no CUDA driver found: <dlerror text>" when the library or one of its entry points is missing.
  [[nodiscard]] static absl::StatusOr<const CudaDriver*> Load();
  /// As Load() for an explicit library path.
  [[nodiscard]] static absl::StatusOr<const CudaDriver*> LoadFrom(const std::string& path);

  /// "CUDA_ERROR_INVALID_PTX" (or "CUDA_ERROR <code>" when the driver does not know the code).
  std::string ErrorName(cuda::CUresult result) const;
  /// "a PTX JIT compilation failed" (or "unknown error" when the driver does not know the code).
  std::string ErrorString(cuda::CUresult result) const;

  /// OK for CUDA_SUCCESS; otherwise "<call>: <error name>: <error string>" followed, when `log`
  /// is non-empty, by "\n" and the log (e.g. the JIT error log). Codes: CUDA_ERROR_OUT_OF_MEMORY
  /// → kResourceExhausted, CUDA_ERROR_NO_DEVICE / NOT_INITIALIZED → kFailedPrecondition,
  /// CUDA_ERROR_INVALID_VALUE → kInvalidArgument, everything else kInternal.
  absl::Status Check(cuda::CUresult result, const std::string& call,
                     const std::string& log = "") const;

  /// The library path it was loaded from.
  const std::string& path() const { return path_; }
  /// Whether cuEventElapsedTime resolved to the _v2 symbol.
  bool elapsed_time_v2() const { return elapsed_time_v2_; }

  // Entry points (never null after a successful load, except where said). Symbol names in
  // parentheses.
  cuda::PFN_cuInit cuInit = nullptr;
  cuda::PFN_cuDriverGetVersion cuDriverGetVersion = nullptr;
  cuda::PFN_cuGetErrorName cuGetErrorName = nullptr;
  cuda::PFN_cuGetErrorString cuGetErrorString = nullptr;
  cuda::PFN_cuDeviceGet cuDeviceGet = nullptr;
  cuda::PFN_cuDeviceGetCount cuDeviceGetCount = nullptr;
  cuda::PFN_cuDeviceGetName cuDeviceGetName = nullptr;
  cuda::PFN_cuDeviceGetAttribute cuDeviceGetAttribute = nullptr;
  cuda::PFN_cuDeviceTotalMem cuDeviceTotalMem = nullptr;  // (_v2)
  cuda::PFN_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain = nullptr;
  cuda::PFN_cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease = nullptr;  // (_v2)
  cuda::PFN_cuCtxSetCurrent cuCtxSetCurrent = nullptr;
  cuda::PFN_cuCtxSynchronize cuCtxSynchronize = nullptr;
  cuda::PFN_cuMemAlloc cuMemAlloc = nullptr;      // (_v2)
  cuda::PFN_cuMemFree cuMemFree = nullptr;        // (_v2)
  cuda::PFN_cuMemcpyHtoD cuMemcpyHtoD = nullptr;  // (_v2)
  cuda::PFN_cuMemcpyDtoH cuMemcpyDtoH = nullptr;  // (_v2)
  cuda::PFN_cuMemsetD8 cuMemsetD8 = nullptr;      // (_v2)
  cuda::PFN_cuMemsetD32 cuMemsetD32 = nullptr;    // (_v2)
  cuda::PFN_cuModuleLoadDataEx cuModuleLoadDataEx = nullptr;
  cuda::PFN_cuModuleUnload cuModuleUnload = nullptr;
  cuda::PFN_cuModuleGetFunction cuModuleGetFunction = nullptr;
  cuda::PFN_cuFuncGetAttribute cuFuncGetAttribute = nullptr;
  cuda::PFN_cuFuncSetAttribute cuFuncSetAttribute = nullptr;
  cuda::PFN_cuLaunchKernel cuLaunchKernel = nullptr;
  cuda::PFN_cuEventCreate cuEventCreate = nullptr;
  cuda::PFN_cuEventRecord cuEventRecord = nullptr;
  cuda::PFN_cuEventSynchronize cuEventSynchronize = nullptr;
  cuda::PFN_cuEventElapsedTime cuEventElapsedTime = nullptr;  // (_v2 if exported, else plain)
  cuda::PFN_cuEventDestroy cuEventDestroy = nullptr;          // (_v2)
  cuda::PFN_cuStreamSynchronize cuStreamSynchronize = nullptr;
  // Null where the driver predates CUDA 12.0 (no TMA): runtime::EncodeTensorMap says so.
  cuda::PFN_cuTensorMapEncodeTiled cuTensorMapEncodeTiled = nullptr;

 private:
  CudaDriver() = default;
  std::string path_;
  bool elapsed_time_v2_ = false;
};

}  // namespace tilesearch::runtime
