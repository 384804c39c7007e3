#include "runtime/cuda_device.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace tilesearch::runtime {
namespace {

using cuda::CUresult;

constexpr int64_t kMinFlushBytes = 1 << 20;
constexpr int64_t kMinAllocationBytes = 256;
constexpr size_t kJitLogBytes = 64 * 1024;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string DimsText(const std::array<int64_t, 3>& d) {
  return absl::StrCat("(", d[0], ", ", d[1], ", ", d[2], ")");
}

// Writes all of `data` to `fd`, retrying on EINTR / short writes.
void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The probe child's answer: {"ok": true, "info": {...}} or {"ok": false, "code": c, "message": m}.
std::string ProbeAnswer(int ordinal) {
  nlohmann::json j;
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  absl::StatusOr<DeviceInfo> info = driver.ok() ? QueryDeviceInfo(**driver, ordinal)
                                                : absl::StatusOr<DeviceInfo>(driver.status());
  if (info.ok()) {
    j["ok"] = true;
    j["info"] = info->ToJson();
  } else {
    j["ok"] = false;
    j["code"] = static_cast<int>(info.status().code());
    j["message"] = std::string(info.status().message());
  }
  return j.dump();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DeviceInfo.

std::string DeviceInfo::arch() const { return absl::StrCat("sm_", compute_major, compute_minor); }

std::string DeviceInfo::ToString() const {
  return absl::StrCat(name, " (", arch(), ", ", sm_count, " SMs, ", l2_bytes >> 20, " MiB L2, ",
                      total_memory_bytes >> 30, " GiB)");
}

nlohmann::json DeviceInfo::ToJson() const {
  return nlohmann::json{{"ordinal", ordinal},
                        {"name", name},
                        {"compute_major", compute_major},
                        {"compute_minor", compute_minor},
                        {"sm_count", sm_count},
                        {"max_threads_per_block", max_threads_per_block},
                        {"max_threads_per_sm", max_threads_per_sm},
                        {"max_block_dims", max_block_dims},
                        {"max_grid_dims", max_grid_dims},
                        {"shared_per_block", shared_per_block},
                        {"shared_per_block_optin", shared_per_block_optin},
                        {"shared_per_sm", shared_per_sm},
                        {"regs_per_block", regs_per_block},
                        {"regs_per_sm", regs_per_sm},
                        {"l2_bytes", l2_bytes},
                        {"warp_size", warp_size},
                        {"clock_khz", clock_khz},
                        {"memory_clock_khz", memory_clock_khz},
                        {"memory_bus_width_bits", memory_bus_width_bits},
                        {"total_memory_bytes", total_memory_bytes},
                        {"driver_version", driver_version}};
}

absl::StatusOr<DeviceInfo> DeviceInfo::FromJson(const nlohmann::json& j) {
  DeviceInfo d;
  if (!j.is_object()) return absl::InvalidArgumentError("device info is not a JSON object");
  auto get = [&](const char* key, auto* value) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end())
      return absl::InvalidArgumentError(absl::StrCat("device info: no '", key, "'"));
    try {
      it->get_to(*value);
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("device info: bad '", key, "': ", e.what()));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(get("ordinal", &d.ordinal));
  RETURN_IF_ERROR(get("name", &d.name));
  RETURN_IF_ERROR(get("compute_major", &d.compute_major));
  RETURN_IF_ERROR(get("compute_minor", &d.compute_minor));
  RETURN_IF_ERROR(get("sm_count", &d.sm_count));
  RETURN_IF_ERROR(get("max_threads_per_block", &d.max_threads_per_block));
  RETURN_IF_ERROR(get("max_threads_per_sm", &d.max_threads_per_sm));
  RETURN_IF_ERROR(get("max_block_dims", &d.max_block_dims));
  RETURN_IF_ERROR(get("max_grid_dims", &d.max_grid_dims));
  RETURN_IF_ERROR(get("shared_per_block", &d.shared_per_block));
  RETURN_IF_ERROR(get("shared_per_block_optin", &d.shared_per_block_optin));
  RETURN_IF_ERROR(get("shared_per_sm", &d.shared_per_sm));
  RETURN_IF_ERROR(get("regs_per_block", &d.regs_per_block));
  RETURN_IF_ERROR(get("regs_per_sm", &d.regs_per_sm));
  RETURN_IF_ERROR(get("l2_bytes", &d.l2_bytes));
  RETURN_IF_ERROR(get("warp_size", &d.warp_size));
  RETURN_IF_ERROR(get("clock_khz", &d.clock_khz));
  RETURN_IF_ERROR(get("memory_clock_khz", &d.memory_clock_khz));
  RETURN_IF_ERROR(get("memory_bus_width_bits", &d.memory_bus_width_bits));
  RETURN_IF_ERROR(get("total_memory_bytes", &d.total_memory_bytes));
  RETURN_IF_ERROR(get("driver_version", &d.driver_version));
  return d;
}

absl::StatusOr<DeviceInfo> QueryDeviceInfo(const CudaDriver& driver, int ordinal) {
  CUresult r = driver.cuInit(0);
  if (r != cuda::CUDA_SUCCESS) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device found: ", driver.Check(r, "cuInit").message()));
  }
  int count = 0;
  RETURN_IF_ERROR(driver.Check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count <= 0) {
    return absl::FailedPreconditionError("no CUDA device found: the driver reports 0 devices");
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device found: device ", ordinal, " requested, ", count, " present"));
  }
  cuda::CUdevice dev = 0;
  RETURN_IF_ERROR(driver.Check(driver.cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
  DeviceInfo d;
  d.ordinal = ordinal;
  char name[256] = {};
  RETURN_IF_ERROR(
      driver.Check(driver.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName"));
  d.name = name;
  auto attr = [&](cuda::CUdevice_attribute a, const char* what) -> absl::StatusOr<int> {
    int v = 0;
    RETURN_IF_ERROR(driver.Check(driver.cuDeviceGetAttribute(&v, a, dev),
                                 absl::StrCat("cuDeviceGetAttribute(", what, ")")));
    return v;
  };
  // Optional attributes: 0 when the driver does not report them.
  auto optional_attr = [&](cuda::CUdevice_attribute a) {
    int v = 0;
    return driver.cuDeviceGetAttribute(&v, a, dev) == cuda::CUDA_SUCCESS ? v : 0;
  };
  ASSIGN_OR_RETURN(d.compute_major, attr(cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                         "compute capability major"));
  ASSIGN_OR_RETURN(d.compute_minor, attr(cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                         "compute capability minor"));
  ASSIGN_OR_RETURN(d.sm_count, attr(cuda::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "sm count"));
  ASSIGN_OR_RETURN(d.max_threads_per_block,
                   attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "threads per block"));
  ASSIGN_OR_RETURN(
      d.max_threads_per_sm,
      attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "threads per sm"));
  for (int i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(d.max_block_dims[i],
                     attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i, "block dims"));
    ASSIGN_OR_RETURN(d.max_grid_dims[i],
                     attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i, "grid dims"));
  }
  ASSIGN_OR_RETURN(d.shared_per_block, attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
                                            "shared memory per block"));
  ASSIGN_OR_RETURN(d.shared_per_block_optin,
                   attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                        "opt-in shared memory per block"));
  ASSIGN_OR_RETURN(
      d.shared_per_sm,
      attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "shared memory per sm"));
  ASSIGN_OR_RETURN(d.regs_per_block,
                   attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "registers per block"));
  ASSIGN_OR_RETURN(d.regs_per_sm, attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
                                       "registers per sm"));
  ASSIGN_OR_RETURN(d.l2_bytes, attr(cuda::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "l2 cache size"));
  ASSIGN_OR_RETURN(d.warp_size, attr(cuda::CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size"));
  d.clock_khz = optional_attr(cuda::CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  d.memory_clock_khz = optional_attr(cuda::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  d.memory_bus_width_bits = optional_attr(cuda::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  size_t total = 0;
  RETURN_IF_ERROR(driver.Check(driver.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem"));
  d.total_memory_bytes = static_cast<int64_t>(total);
  RETURN_IF_ERROR(driver.Check(driver.cuDriverGetVersion(&d.driver_version), "cuDriverGetVersion"));
  return d;
}

absl::StatusOr<DeviceInfo> ProbeCudaDevice(int ordinal, double timeout_ms) {
  int fds[2];
  if (pipe(fds) != 0) {
    return absl::InternalError(absl::StrCat("cuda probe: pipe: ", std::strerror(errno)));
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("cuda probe: fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    close(fds[0]);
    WriteAll(fds[1], ProbeAnswer(ordinal));
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string answer;
  auto start = std::chrono::steady_clock::now();
  bool timed_out = false;
  char chunk[4096];
  while (true) {
    double left = timeout_ms - MsSince(start);
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::ceil(left)));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      timed_out = true;
      break;
    }
    ssize_t got = read(fds[0], chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    answer.append(chunk, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device found: the probe did not answer within ", timeout_ms, " ms"));
  }
  nlohmann::json j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok")) {
    std::string how = WIFSIGNALED(wstatus)
                          ? absl::StrCat("killed by signal ", WTERMSIG(wstatus), " (",
                                         strsignal(WTERMSIG(wstatus)), ")")
                          : absl::StrCat("exited with status ", WEXITSTATUS(wstatus));
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device found: the probe process ", how, " without an answer"));
  }
  if (j["ok"].get<bool>()) return DeviceInfo::FromJson(j["info"]);
  return absl::Status(static_cast<absl::StatusCode>(j.value("code", 13)),
                      j.value("message", std::string("cuda probe failed")));
}

Target TargetFromDevice(const DeviceInfo& info) {
  Target t = Target::H200();
  t.kind = TargetKind::kCuda;
  t.arch = info.arch();
  t.max_threads_per_block = info.max_threads_per_block;
  t.max_shared_memory_per_block = info.shared_per_block;
  t.max_shared_memory_optin = std::max(info.shared_per_block_optin, info.shared_per_block);
  t.max_registers_per_block = info.regs_per_block;
  t.warp_size = info.warp_size;
  t.sm_count = info.sm_count;
  t.l2_bytes = info.l2_bytes;
  return t;
}

// ---------------------------------------------------------------------------------------------
// CudaContext.

absl::StatusOr<std::unique_ptr<CudaContext>> CudaContext::Create(const CudaDriver& driver,
                                                                 int ordinal) {
  ASSIGN_OR_RETURN(DeviceInfo info, QueryDeviceInfo(driver, ordinal));
  cuda::CUdevice dev = 0;
  RETURN_IF_ERROR(driver.Check(driver.cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
  cuda::CUcontext ctx = nullptr;
  RETURN_IF_ERROR(
      driver.Check(driver.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"));
  std::unique_ptr<CudaContext> context(new CudaContext(&driver, dev, ctx, std::move(info)));
  RETURN_IF_ERROR(context->MakeCurrent());
  return context;
}

CudaContext::~CudaContext() {
  driver_->cuCtxSetCurrent(nullptr);
  driver_->cuDevicePrimaryCtxRelease(device_);
}

absl::Status CudaContext::MakeCurrent() const {
  return driver_->Check(driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

absl::Status CudaContext::Synchronize() const {
  return driver_->Check(driver_->cuCtxSynchronize(), "cuCtxSynchronize");
}

// ---------------------------------------------------------------------------------------------
// DeviceBuffer.

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(const CudaDriver& driver, int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device buffer of ", bytes, " bytes"));
  }
  DeviceBuffer b;
  cuda::CUdeviceptr ptr = 0;
  RETURN_IF_ERROR(driver.Check(
      driver.cuMemAlloc(&ptr, static_cast<size_t>(std::max(bytes, kMinAllocationBytes))),
      absl::StrCat("cuMemAlloc(", bytes, " bytes)")));
  b.driver_ = &driver;
  b.ptr_ = ptr;
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : driver_(other.driver_), ptr_(other.ptr_), bytes_(other.bytes_) {
  other.ptr_ = 0;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    driver_ = other.driver_;
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = 0;
    other.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { Free(); }

void DeviceBuffer::Free() {
  if (ptr_ != 0) driver_->cuMemFree(ptr_);
  ptr_ = 0;
  bytes_ = 0;
}

absl::Status DeviceBuffer::Upload(const void* host, int64_t bytes) {
  if (bytes < 0 || bytes > bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("upload of ", bytes, " bytes into a device buffer of ", bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  return driver_->Check(driver_->cuMemcpyHtoD(ptr_, host, static_cast<size_t>(bytes)),
                        "cuMemcpyHtoD");
}

absl::Status DeviceBuffer::Download(void* host, int64_t bytes) const {
  if (bytes < 0 || bytes > bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("download of ", bytes, " bytes from a device buffer of ", bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  return driver_->Check(driver_->cuMemcpyDtoH(host, ptr_, static_cast<size_t>(bytes)),
                        "cuMemcpyDtoH");
}

absl::Status DeviceBuffer::Memset8(uint8_t value) {
  if (bytes_ == 0) return absl::OkStatus();
  return driver_->Check(driver_->cuMemsetD8(ptr_, value, static_cast<size_t>(bytes_)),
                        "cuMemsetD8");
}

absl::Status DeviceBuffer::Memset32(uint32_t value) {
  if (bytes_ % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("32-bit memset of a device buffer of ", bytes_, " bytes"));
  }
  if (bytes_ == 0) return absl::OkStatus();
  return driver_->Check(driver_->cuMemsetD32(ptr_, value, static_cast<size_t>(bytes_ / 4)),
                        "cuMemsetD32");
}

// ---------------------------------------------------------------------------------------------
// CudaEvent.

absl::StatusOr<std::unique_ptr<CudaEvent>> CudaEvent::Create(const CudaDriver& driver) {
  cuda::CUevent e = nullptr;
  RETURN_IF_ERROR(driver.Check(driver.cuEventCreate(&e, cuda::CU_EVENT_DEFAULT), "cuEventCreate"));
  return std::unique_ptr<CudaEvent>(new CudaEvent(&driver, e));
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) driver_->cuEventDestroy(event_);
}

absl::Status CudaEvent::Record(cuda::CUstream stream) {
  return driver_->Check(driver_->cuEventRecord(event_, stream), "cuEventRecord");
}

absl::Status CudaEvent::Synchronize() {
  return driver_->Check(driver_->cuEventSynchronize(event_), "cuEventSynchronize");
}

absl::StatusOr<double> CudaEvent::ElapsedMs(const CudaEvent& start, const CudaEvent& end) {
  float ms = 0;
  RETURN_IF_ERROR(start.driver_->Check(
      start.driver_->cuEventElapsedTime(&ms, start.event_, end.event_), "cuEventElapsedTime"));
  return static_cast<double>(ms);
}

// ---------------------------------------------------------------------------------------------
// CudaModule.

absl::StatusOr<std::unique_ptr<CudaModule>> CudaModule::LoadPtx(const CudaDriver& driver,
                                                                const std::string& ptx) {
  std::string info_log(kJitLogBytes, '\0');
  std::string error_log(kJitLogBytes, '\0');
  cuda::CUjit_option options[] = {
      cuda::CU_JIT_INFO_LOG_BUFFER, cuda::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
      cuda::CU_JIT_ERROR_LOG_BUFFER, cuda::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
      cuda::CU_JIT_LOG_VERBOSE};
  // Size options carry an unsigned int in the pointer-sized slot (in: capacity, out: bytes used).
  void* values[] = {info_log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes)),
                    error_log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes)),
                    reinterpret_cast<void*>(static_cast<uintptr_t>(1))};
  auto start = std::chrono::steady_clock::now();
  cuda::CUmodule module = nullptr;
  // The image: NUL-terminated PTX text, or an ELF cubin (its size is in its headers).
  CUresult r = driver.cuModuleLoadDataEx(&module, ptx.c_str(), 5, options, values);
  double load_ms = MsSince(start);
  auto trim = [](std::string& s) {
    s.resize(strnlen(s.data(), s.size()));
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  };
  trim(info_log);
  trim(error_log);
  if (r != cuda::CUDA_SUCCESS) return driver.Check(r, "cuModuleLoadData", error_log);
  std::unique_ptr<CudaModule> m(new CudaModule(&driver, module));
  m->load_ms_ = load_ms;
  m->info_log_ = std::move(info_log);
  return m;
}

CudaModule::~CudaModule() {
  if (module_ != nullptr) driver_->cuModuleUnload(module_);
}

absl::StatusOr<cuda::CUfunction> CudaModule::GetFunction(const std::string& name) const {
  cuda::CUfunction f = nullptr;
  CUresult r = driver_->cuModuleGetFunction(&f, module_, name.c_str());
  if (r != cuda::CUDA_SUCCESS) {
    return absl::NotFoundError(absl::StrCat("kernel '", name, "' not found in the module: ",
                                            driver_->Check(r, "cuModuleGetFunction").message()));
  }
  return f;
}

absl::StatusOr<KernelResources> CudaModule::Resources(cuda::CUfunction function,
                                                      const std::string& name,
                                                      int64_t dynamic_shared_bytes) const {
  auto attr = [&](cuda::CUfunction_attribute a, const char* what) -> absl::StatusOr<int> {
    int v = 0;
    RETURN_IF_ERROR(driver_->Check(driver_->cuFuncGetAttribute(&v, a, function),
                                   absl::StrCat("cuFuncGetAttribute(", name, ", ", what, ")")));
    return v;
  };
  KernelResources k;
  k.name = name;
  ASSIGN_OR_RETURN(k.registers_per_thread, attr(cuda::CU_FUNC_ATTRIBUTE_NUM_REGS, "registers"));
  ASSIGN_OR_RETURN(k.static_shared_bytes,
                   attr(cuda::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "shared bytes"));
  ASSIGN_OR_RETURN(k.local_bytes_per_thread,
                   attr(cuda::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local bytes"));
  ASSIGN_OR_RETURN(k.max_threads_per_block,
                   attr(cuda::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads"));
  k.dynamic_shared_bytes = dynamic_shared_bytes;
  return k;
}

absl::Status CudaModule::SetMaxDynamicSharedBytes(cuda::CUfunction function, int64_t bytes) const {
  return driver_->Check(
      driver_->cuFuncSetAttribute(function, cuda::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  static_cast<int>(bytes)),
      absl::StrCat("cuFuncSetAttribute(max dynamic shared memory ", bytes, " bytes)"));
}

// ---------------------------------------------------------------------------------------------
// Launch.

absl::Status Launch(const CudaContext& context, cuda::CUfunction function, const std::string& name,
                    const LaunchConfig& launch, const std::vector<cuda::CUdeviceptr>& args,
                    bool synchronize, cuda::CUstream stream) {
  const DeviceInfo& info = context.info();
  bool ok = launch.shared_memory_bytes >= 0 &&
            launch.shared_memory_bytes <= std::numeric_limits<int>::max();
  int64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    ok = ok && launch.grid[i] >= 1 && launch.grid[i] <= info.max_grid_dims[i] &&
         launch.block[i] >= 1 && launch.block[i] <= info.max_block_dims[i];
    threads *= std::max<int64_t>(launch.block[i], 1);
  }
  ok = ok && threads <= info.max_threads_per_block;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch of '", name, "': grid ", DimsText(launch.grid), " block ", DimsText(launch.block),
        " dynamic shared ", launch.shared_memory_bytes, " B outside the device limits (grid (",
        absl::StrJoin(info.max_grid_dims, ", "), "), block (",
        absl::StrJoin(info.max_block_dims, ", "), "), ", info.max_threads_per_block,
        " threads per block)"));
  }
  // kernelParams: one pointer per parameter, pointing at that parameter's value (a CUdeviceptr).
  std::vector<cuda::CUdeviceptr> values = args;
  std::vector<void*> params(values.size());
  for (size_t i = 0; i < values.size(); ++i) params[i] = &values[i];
  const CudaDriver& d = context.driver();
  RETURN_IF_ERROR(d.Check(
      d.cuLaunchKernel(
          function, static_cast<unsigned>(launch.grid[0]), static_cast<unsigned>(launch.grid[1]),
          static_cast<unsigned>(launch.grid[2]), static_cast<unsigned>(launch.block[0]),
          static_cast<unsigned>(launch.block[1]), static_cast<unsigned>(launch.block[2]),
          static_cast<unsigned>(launch.shared_memory_bytes), stream,
          params.empty() ? nullptr : params.data(), nullptr),
      absl::StrCat("cuLaunchKernel(", name, ")")));
  if (synchronize) return context.Synchronize();
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// GpuTimer.

absl::StatusOr<std::unique_ptr<GpuTimer>> GpuTimer::Create(const CudaContext& context) {
  std::unique_ptr<GpuTimer> t(new GpuTimer);
  int64_t bytes = std::max<int64_t>(2 * context.info().l2_bytes, kMinFlushBytes);
  bytes = (bytes + 3) / 4 * 4;
  ASSIGN_OR_RETURN(t->flush_, DeviceBuffer::Allocate(context.driver(), bytes));
  ASSIGN_OR_RETURN(t->start_, CudaEvent::Create(context.driver()));
  ASSIGN_OR_RETURN(t->end_, CudaEvent::Create(context.driver()));
  return t;
}

absl::StatusOr<TimingStats> GpuTimer::Time(const std::function<absl::Status()>& launch,
                                           const TimingOptions& options) {
  auto run_once = [&]() -> absl::StatusOr<double> {
    if (options.flush_cache) {
      // A different value each run, so no run finds the flush buffer's lines already written.
      RETURN_IF_ERROR(flush_.Memset32(++flush_value_));
    }
    RETURN_IF_ERROR(start_->Record());
    RETURN_IF_ERROR(launch());
    RETURN_IF_ERROR(end_->Record());
    RETURN_IF_ERROR(end_->Synchronize());
    return CudaEvent::ElapsedMs(*start_, *end_);
  };
  return TimeRepeated(run_once, options);
}

}  // namespace tilesearch::runtime
