// CUDA device objects over the dlopen'd driver (runtime/cuda_driver.h): device properties, the
// primary context of a device, device buffers, PTX modules (JIT by the driver), events, kernel
// launches (one device pointer per kernel parameter), and the GPU timer of the measurement method
// (design.md: CUDA events around the launches, L2 flushed before every timed run by writing a
// buffer twice the L2 size, runtime::TimeRepeated for warm-up, repeats and statistics). Every
// handle is RAII; every CUresult becomes an absl::Status through CudaDriver::Check. All objects are
// used from one thread with the context current (CudaContext::Create makes it current).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/launch_config.h"
#include "base/target.h"
#include "nlohmann/json.hpp"
#include "runtime/cuda_api.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_resources.h"
#include "runtime/timing.h"

namespace tilesearch::runtime {

/// Properties of one CUDA device as the driver reports them (cuDeviceGetAttribute).
struct DeviceInfo {
  int ordinal = 0;
  std::string name;       // "NVIDIA H200"
  int compute_major = 0;  // compute capability, e.g. 9.0
  int compute_minor = 0;
  int sm_count = 0;  // multiprocessors
  int max_threads_per_block = 0;
  int max_threads_per_sm = 0;
  std::array<int, 3> max_block_dims = {0, 0, 0};
  std::array<int, 3> max_grid_dims = {0, 0, 0};
  int64_t shared_per_block = 0;        // bytes without opt-in (48 KiB)
  int64_t shared_per_block_optin = 0;  // bytes with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int64_t shared_per_sm = 0;           // bytes
  int regs_per_block = 0;              // 32-bit registers
  int regs_per_sm = 0;
  int64_t l2_bytes = 0;
  int warp_size = 0;
  int clock_khz = 0;         // typical SM clock; 0 where the driver no longer reports it
  int memory_clock_khz = 0;  // peak memory clock; 0 where not reported
  int memory_bus_width_bits = 0;
  int64_t total_memory_bytes = 0;
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000

  /// "sm_90".
  std::string arch() const;
  /// "NVIDIA H200 (sm_90, 132 SMs, 60 MiB L2, 141 GiB)".
  std::string ToString() const;
  nlohmann::json ToJson() const;
  /// Errors: kInvalidArgument naming a missing or mistyped field.
  static absl::StatusOr<DeviceInfo> FromJson(const nlohmann::json& j);
};

/// Reads the properties of device `ordinal` in this process (calls cuInit, which initializes CUDA
/// here). Errors: kFailedPrecondition "no CUDA device found: ..." when cuInit fails or the
/// ordinal is not below the device count; the driver's errors.
[[nodiscard]] absl::StatusOr<DeviceInfo> QueryDeviceInfo(const CudaDriver& driver, int ordinal);

/// As QueryDeviceInfo with the default driver (CudaDriver::Load), but in a short-lived forked
/// child, so that this process never initializes CUDA (a process that forks measurement workers
/// must not). Errors: kFailedPrecondition "no CUDA driver found: ..." (library or entry point
/// missing) or "no CUDA device found: ..." (cuInit failed, no device, ordinal out of range, the
/// probe crashed or did not answer within `timeout_ms`).
[[nodiscard]] absl::StatusOr<DeviceInfo> ProbeCudaDevice(int ordinal, double timeout_ms = 60000);

/// The CUDA target of `info`: arch "sm_<major><minor>", threads/block, shared memory per block
/// (static and opt-in), registers per block, warp size, SM count and L2 bytes from the device; the
/// limits the device does not report (vthread extent, vector bytes) as Target::H200().
Target TargetFromDevice(const DeviceInfo& info);

/// The primary context of one device, retained for the object's lifetime and made current on the
/// creating thread.
class CudaContext {
 public:
  /// cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent, and the device properties.
  /// Errors: as QueryDeviceInfo; the driver's errors.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CudaContext>> Create(const CudaDriver& driver,
                                                                           int ordinal);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  /// Binds the context to the calling thread.
  absl::Status MakeCurrent() const;
  /// Waits for all work of the context; returns the first asynchronous error of a kernel
  /// ("cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered").
  /// After such an error the context is unusable for the rest of the process.
  absl::Status Synchronize() const;

  const CudaDriver& driver() const { return *driver_; }
  const DeviceInfo& info() const { return info_; }
  cuda::CUcontext handle() const { return context_; }

 private:
  CudaContext(const CudaDriver* driver, cuda::CUdevice device, cuda::CUcontext context,
              DeviceInfo info)
      : driver_(driver), device_(device), context_(context), info_(std::move(info)) {}
  const CudaDriver* driver_;
  cuda::CUdevice device_;
  cuda::CUcontext context_;
  DeviceInfo info_;
};

/// Device memory of the current context (cuMemAlloc), freed on destruction. Movable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// `bytes` >= 0; zero-byte buffers still get a valid (256-byte) allocation so every kernel
  /// argument is a real pointer. Errors: kInvalidArgument for bytes < 0; cuMemAlloc's errors
  /// (out of memory: kResourceExhausted).
  [[nodiscard]] static absl::StatusOr<DeviceBuffer> Allocate(const CudaDriver& driver,
                                                             int64_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  /// Copies `bytes` host bytes to the start of the buffer (synchronous). Errors: kInvalidArgument
  /// when bytes exceeds the buffer's size.
  absl::Status Upload(const void* host, int64_t bytes);
  /// Copies the first `bytes` bytes to `host` (synchronous; waits for earlier work on the
  /// default stream). Errors: as Upload.
  absl::Status Download(void* host, int64_t bytes) const;
  /// Sets every byte (cuMemsetD8, asynchronous on the default stream).
  absl::Status Memset8(uint8_t value);
  /// Sets every 32-bit word (cuMemsetD32, asynchronous on the default stream). Errors:
  /// kInvalidArgument when the size is not a multiple of 4.
  absl::Status Memset32(uint32_t value);

  cuda::CUdeviceptr ptr() const { return ptr_; }
  int64_t bytes() const { return bytes_; }

 private:
  void Free();
  const CudaDriver* driver_ = nullptr;
  cuda::CUdeviceptr ptr_ = 0;
  int64_t bytes_ = 0;
};

/// A CUDA event (timing enabled), destroyed on destruction.
class CudaEvent {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CudaEvent>> Create(const CudaDriver& driver);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  /// Records on `stream` (nullptr: the default stream).
  absl::Status Record(cuda::CUstream stream = nullptr);
  /// Waits until the recorded work completed (returns asynchronous kernel errors).
  absl::Status Synchronize();
  /// Milliseconds between two completed events (resolution about 0.5 µs).
  static absl::StatusOr<double> ElapsedMs(const CudaEvent& start, const CudaEvent& end);

 private:
  CudaEvent(const CudaDriver* driver, cuda::CUevent event) : driver_(driver), event_(event) {}
  const CudaDriver* driver_;
  cuda::CUevent event_;
};

/// A module loaded from PTX (the driver JIT-compiles it for the device) or from a cubin into the
/// current context, unloaded on destruction.
class CudaModule {
 public:
  /// cuModuleLoadDataEx of `ptx` (PTX text, or a cubin image: the driver tells them apart) with
  /// JIT info and error log buffers; load_ms is the wall time of the call.
  /// Errors: "cuModuleLoadData: CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed" followed by
  /// the JIT error log (kInternal), or the driver's other errors.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CudaModule>> LoadPtx(const CudaDriver& driver,
                                                                           const std::string& ptx);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  /// Errors: kNotFound "kernel 'x' not found in the module: ..." (the driver's message).
  absl::StatusOr<cuda::CUfunction> GetFunction(const std::string& name) const;
  /// Registers, static shared and local bytes and the thread limit of `function`
  /// (cuFuncGetAttribute); `dynamic_shared_bytes` is copied into the result.
  absl::StatusOr<KernelResources> Resources(cuda::CUfunction function, const std::string& name,
                                            int64_t dynamic_shared_bytes) const;
  /// Allows launches of `function` with up to `bytes` of dynamic shared memory
  /// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; needed above 48 KiB).
  absl::Status SetMaxDynamicSharedBytes(cuda::CUfunction function, int64_t bytes) const;

  double load_ms() const { return load_ms_; }
  /// The JIT's info log (may be empty).
  const std::string& info_log() const { return info_log_; }

 private:
  CudaModule(const CudaDriver* driver, cuda::CUmodule module) : driver_(driver), module_(module) {}
  const CudaDriver* driver_;
  cuda::CUmodule module_;
  double load_ms_ = 0;
  std::string info_log_;
};

/// Launches `function` (named `name` in messages) with `launch`'s grid and block and
/// launch.shared_memory_bytes of dynamic shared memory on `stream`, passing one device pointer per
/// element of `args` (kernelParams points at each CUdeviceptr); launch.min_blocks_per_sm is not
/// used. With `synchronize`, then waits for the context (cuCtxSynchronize) and returns the
/// kernel's asynchronous error. Errors: kInvalidArgument "launch of 'k': grid (x, y, z) / block
/// (...) outside the device limits (...)" checked before launching; cuLaunchKernel's errors
/// ("cuLaunchKernel(k): CUDA_ERROR_..."); cuCtxSynchronize's errors.
absl::Status Launch(const CudaContext& context, cuda::CUfunction function, const std::string& name,
                    const LaunchConfig& launch, const std::vector<cuda::CUdeviceptr>& args,
                    bool synchronize = false, cuda::CUstream stream = nullptr);

/// The GPU timer of the measurement method.
class GpuTimer {
 public:
  /// A flush buffer of 2 × the device's L2 bytes (at least 1 MiB) and two events.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GpuTimer>> Create(const CudaContext& context);

  /// Times `launch` (enqueues the kernels on the default stream; must not synchronize) with
  /// TimeRepeated: each run writes the flush buffer with cuMemsetD32 when options.flush_cache
  /// (outside the timed region), records the start event, calls `launch`, records the end event,
  /// waits for it and reads the elapsed milliseconds. Errors: `launch`'s, the events', and
  /// TimeRepeated's.
  absl::StatusOr<TimingStats> Time(const std::function<absl::Status()>& launch,
                                   const TimingOptions& options);

 private:
  GpuTimer() = default;
  DeviceBuffer flush_;
  std::unique_ptr<CudaEvent> start_;
  std::unique_ptr<CudaEvent> end_;
  uint32_t flush_value_ = 0;
};

}  // namespace tilesearch::runtime
