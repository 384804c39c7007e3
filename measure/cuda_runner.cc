// The CUDA runner (measure/runner.h). The caller's process never initializes CUDA: the device
// is probed in a short-lived child (ProbeCudaDevice) and every run happens in a forked worker kept
// across Run calls of one task (measure/kept_worker.h); each candidate reaches it as bytes (its
// cubin or PTX, kernels and launch configurations: measure/item_request.h). Once per task, in the
// parent: check inputs per trial (one distribution each), the task's reference (the interpreter
// for small tasks; otherwise the naive GPU kernel, compiled once per workload, which each worker's
// setup runs and spot-checks in float64) and random timing inputs.
//
// Per worker (its setup, once per task unless a candidate ends the worker), the device-resident
// path: every trial's inputs, the trial's reference
// outputs (the naive kernel writes them in place, or the interpreter's are uploaded), pristine
// copies of both, the timing inputs and one set of output buffers are uploaded / allocated once,
// with the compare module of measure/device_compare.h. Per candidate: load the PTX; per trial,
// poison the outputs with a device memset, launch, compare each float32 output on the device and
// download only its 32-byte result slot (other dtypes: download and compare on the host); time
// it on the resident timing inputs; then count, on the device, the words of the resident inputs
// and references that differ from their pristine copies: a candidate that wrote into them is a
// wrong answer and its worker is replaced (a fresh worker uploads fresh copies). Where the
// resident buffers would take more than half the device memory, or their allocation fails, the
// worker falls back to the per-candidate path: inputs uploaded and outputs poisoned from the
// host, outputs downloaded and compared on the host, timing inputs uploaded per candidate.
// Tasks with very large inputs (CheckInputsOnDemand, measure/measure.h) hold none of them on the
// host: the trials' inputs are generated buffers (ir::HostBuffer::source), each worker generates
// them chunk by chunk straight into device memory (UploadInput), and the float64 point
// evaluations compute the input elements they read from the same generator.
// Mismatches against the float32 reference are re-judged in float64 (ArbitrateMismatches,
// measure/checker.h) on the host, from the trial's host inputs (held, or generated on demand) and
// reference that every worker keeps (BatchData): a device-compared output with 0 < mismatches <=
// the arbitration cap is downloaded and compared again there. Tasks whose inputs are generated on
// demand need the resident path (the per-candidate one would regenerate them per candidate).
// A CUDA failure after a launch poisons the context, so such a worker asks to be replaced after
// its item (RequestWorkerRestart).
// A candidate's TMA tensor maps hold device addresses of its parameters, so each set of buffers it
// runs on (every trial's inputs, the timing inputs) gets maps encoded over that set
// (measure/tensor_map_args.h); maps are never poisoned or compared.
#include "measure/cuda_runner.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/lower_naive.h"
#include "ir/magnitude_dag.h"
#include "ir/reference.h"
#include "measure/check_inputs_fill.h"
#include "measure/checker.h"
#include "measure/device_compare.h"
#include "measure/item_request.h"
#include "measure/kept_worker.h"
#include "measure/loaded_module.h"
#include "measure/reference.h"
#include "measure/result_reporter.h"
#include "measure/runner.h"
#include "measure/tensor_map_args.h"
#include "runtime/cuda_device.h"
#include "runtime/cuda_driver.h"

namespace tilesearch::measure {

namespace cuda = runtime::cuda;
using runtime::CudaContext;
using runtime::CudaDriver;
using runtime::CudaModule;
using runtime::DeviceBuffer;
using runtime::DeviceInfo;
using runtime::GpuTimer;
using runtime::ProbeCudaDevice;
using runtime::TimingStats;
namespace cuda_internal {
namespace {

using Clock = std::chrono::steady_clock;

// One entry of the device compare's mismatch list: flat index, got as float64 bits.
constexpr int64_t kMismatchEntryBytes = 16;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

uint64_t DeriveSeed(uint64_t seed, uint64_t batch, uint64_t trial) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ batch) ^ trial);
}

MeasureResult ErrorResult(MeasureError error, std::string message, double compile_ms) {
  MeasureResult r;
  r.error = error;
  r.message = std::move(message);
  r.compile_ms = compile_ms;
  return r;
}

// One checked run's inputs and the reference outputs for them.
struct Trial {
  CheckDistribution distribution = CheckDistribution::kUniformSymmetric;
  uint64_t seed = 0;
  // By placeholder name; generated (ir::HostBuffer::source, no data) for tasks whose inputs are
  // generated on demand (CheckInputsOnDemand), which then have nothing in `packed`.
  ir::BufferMap inputs;
  std::map<std::string, std::vector<std::byte>> packed;  // the same, in storage layout
  ir::BufferMap expected;  // by output name; on the GPU path filled by the worker's setup
};

// Everything a batch's workers read (built in the parent before the fork).
struct BatchData {
  const ir::ComputeDAG* dag = nullptr;
  ir::LoopNest naive_params;  // LowerNaive's param list (body unused)
  std::vector<Trial> trials;
  std::map<std::string, std::vector<std::byte>> timing_inputs;
  ir::BufferMap timing_sources;   // generated timing inputs (when `timing_inputs` is empty)
  bool inputs_on_demand = false;  // CheckInputsOnDemand: inputs generated, none held packed
  std::shared_ptr<const codegen::GpuModule> naive_module;  // when the reference runs on the GPU
  // The magnitude kernel (BuildGpuMagnitudes): M of every float output, the cancellation allowance
  // of the device compare. Null: none (no float output, or it did not compile).
  std::shared_ptr<const codegen::GpuModule> magnitude_module;
  ir::BufferMap native_first;  // interpreter path: the float32 naive program's trial-0 outputs
};

// What a worker keeps on the device for its whole batch (the device-resident path). Params are
// indexed as in the task's naive program: inputs j < num_inputs, outputs k = param − num_inputs.
struct ResidentData {
  int num_inputs = 0;
  int num_outputs = 0;
  std::vector<std::vector<DeviceBuffer>> inputs;           // [trial][j]
  std::vector<std::vector<DeviceBuffer>> references;       // [trial][k]
  std::vector<std::vector<DeviceBuffer>> pristine_inputs;  // [trial][j], never a kernel argument
  std::vector<std::vector<DeviceBuffer>> pristine_references;  // [trial][k]
  // [trial][k]: M of output k (float32, the magnitude kernel's), read by the device compare; an
  // empty buffer where there is none (no magnitude kernel, or a non-float output).
  std::vector<std::vector<DeviceBuffer>> magnitudes;
  std::vector<std::vector<bool>> device_compare;  // [trial][k]: compare on the device
  std::vector<DeviceBuffer> timing_inputs;        // [j]
  std::vector<DeviceBuffer> outputs;              // [k], written by every candidate
  std::vector<int> output_order;                  // k by output name (the host path's order)
  // Result slots: [trial][k] compare slots first, then [trial][param] difference counts.
  DeviceBuffer slots;
  // The device compare's mismatch list (16 bytes per entry), reused by every compare: each is
  // read back before the next one starts. Empty when arbitration is off.
  DeviceBuffer mismatch_list;
  int64_t mismatch_capacity = 0;
  std::vector<CompareSlot> initial_slots;

  int CompareSlotIndex(int trial, int k) const { return trial * num_outputs + k; }
  int DifferenceSlotIndex(int trial, int param) const {
    return static_cast<int>(inputs.size()) * num_outputs + trial * (num_inputs + num_outputs) +
           param;
  }
  cuda::CUdeviceptr SlotPtr(int index) const {
    return slots.ptr() + static_cast<cuda::CUdeviceptr>(index) * sizeof(CompareSlot);
  }
};

// A worker's device state (each worker fills its own copy-on-write copy).
struct WorkerState {
  const CudaDriver* driver = nullptr;
  std::unique_ptr<CudaContext> context;
  std::unique_ptr<GpuTimer> timer;
  std::unique_ptr<DeviceComparer> comparer;  // null: float32 outputs compared on the host
  std::unique_ptr<ResidentData> resident;    // null: the per-candidate upload path
  std::vector<SampledOutput> sampled;        // float64 reference at sampled points of trial 0
  uint64_t batch = 0;        // the batch of the last request (batch_best_ms is per batch)
  double batch_best_ms = 0;  // the fastest candidate this worker fully timed in it (ScreenFor)
};

// The task a kept worker serves: its data built in this process once per task (BatchData; every
// value a function of the task and MeasureOptions::seed, so keeping it across Run calls changes no
// result), and the worker's state, filled in the worker's copy.
struct CudaTask {
  std::string key;  // the DAG's workload key
  ir::ComputeDAG dag;
  BatchData data;  // data.dag points at `dag`
  WorkerState state;
  // Declared last, so destroyed first: its worker reads the fields above.
  std::unique_ptr<KeptWorker> worker;
};

// The worker's setup, then the float64 reference at sampled points of the first trial (its
// reference outputs exist by then on both paths).
absl::Status WorkerSetupAndSample(const MeasureOptions& options, BatchData* data,
                                  WorkerState* state);

// A candidate's error on trial 0's sampled points of output `name` (CheckReport::f64_*).
void RecordSampled(const WorkerState& state, const std::string& name,
                   const std::function<double(int64_t)>& got_at, CheckReport* report) {
  for (const SampledOutput& so : state.sampled) {
    if (so.name == name) RecordSampledError(so, got_at, report);
  }
}

// Device buffers for every argument of a module (params, then scratch), sized in storage bytes;
// a tensor map's entry in `buffers` is empty, its encoded bytes (over these params) in `maps`.
struct ArgBuffers {
  std::vector<DeviceBuffer> buffers;
  std::vector<cuda::CUdeviceptr> ptrs;
  std::vector<DeviceBuffer> maps;
};

absl::StatusOr<ArgBuffers> AllocateArgs(const CudaDriver& driver,
                                        const std::vector<codegen::KernelArg>& args) {
  ArgBuffers a;
  for (const codegen::KernelArg& arg : args) {
    DeviceBuffer b;
    if (arg.kind != codegen::KernelArg::Kind::kTensorMap) {
      const int64_t bytes = arg.buffer.NumElements() * StorageBytes(arg.buffer.dtype);
      ASSIGN_OR_RETURN(b, DeviceBuffer::Allocate(driver, bytes));
    }
    a.ptrs.push_back(b.ptr());
    a.buffers.push_back(std::move(b));
  }
  RETURN_IF_ERROR(BindTensorMaps(driver, args, &a.ptrs, &a.maps));
  return a;
}

absl::Status UploadPoison(DeviceBuffer& buffer, const ir::BufferDecl& decl) {
  std::vector<std::byte> bytes(static_cast<size_t>(buffer.bytes()));
  PoisonBytes(bytes.data(), decl.dtype, decl.NumElements());
  return buffer.Upload(bytes.data(), buffer.bytes());
}

absl::Status UploadBytes(DeviceBuffer& buffer, const std::vector<std::byte>& bytes,
                         const std::string& name) {
  if (static_cast<int64_t>(bytes.size()) != buffer.bytes()) {
    return absl::OutOfRangeError(absl::StrCat("buffer '", name, "' has ", bytes.size(),
                                              " bytes, its kernel argument ", buffer.bytes()));
  }
  return buffer.Upload(bytes.data(), buffer.bytes());
}

// Uploads input `name` into each of `dests` (each as large as the input's storage bytes): its
// packed bytes when `packed` holds them, else the generated buffer `sources[name]` in chunks of
// kGeneratedInputChunkElements (PackGeneratedChunks), so the host holds one chunk at a time.
// Errors: kNotFound for an input in neither, kOutOfRange for a size that differs from a
// destination's (the task's data, not the device, is wrong); the copies' errors (CudaDriver).
absl::Status UploadInput(const CudaDriver& driver, const std::string& name,
                         const std::map<std::string, std::vector<std::byte>>& packed,
                         const ir::BufferMap& sources, const std::vector<DeviceBuffer*>& dests) {
  if (auto it = packed.find(name); it != packed.end()) {
    for (DeviceBuffer* d : dests) RETURN_IF_ERROR(UploadBytes(*d, it->second, name));
    return absl::OkStatus();
  }
  auto it = sources.find(name);
  if (it == sources.end() || !it->second.generated()) {
    return absl::NotFoundError(absl::StrCat("no input data for '", name, "'"));
  }
  const ir::HostBuffer& generated = it->second;
  const int64_t bytes = generated.NumElements() * StorageBytes(generated.dtype);
  for (const DeviceBuffer* d : dests) {
    if (d->bytes() != bytes) {
      return absl::OutOfRangeError(absl::StrCat("buffer '", name, "' has ", bytes,
                                                " bytes, its kernel argument ", d->bytes()));
    }
  }
  return PackGeneratedChunks(
      generated, kGeneratedInputChunkElements,
      [&](int64_t offset, const std::vector<std::byte>& chunk) -> absl::Status {
        for (DeviceBuffer* d : dests) {
          RETURN_IF_ERROR(
              driver.Check(driver.cuMemcpyHtoD(d->ptr() + static_cast<cuda::CUdeviceptr>(offset),
                                               chunk.data(), chunk.size()),
                           "cuMemcpyHtoD"));
        }
        return absl::OkStatus();
      });
}

// Runs `module` once on `trial`'s inputs (outputs and scratch poisoned first; tensor maps, encoded
// over these buffers, kept) and returns its outputs by name. `launch_error` receives launch /
// synchronization errors (the context may be unusable after them); other errors are returned.
absl::StatusOr<ir::BufferMap> RunChecked(const CudaDriver& driver, const LoadedGpuModule& module,
                                         const std::vector<codegen::KernelArg>& args,
                                         ArgBuffers& buffers, const Trial& trial,
                                         absl::Status* launch_error) {
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::KernelArg& arg = args[i];
    if (arg.kind == codegen::KernelArg::Kind::kInput) {
      RETURN_IF_ERROR(
          UploadInput(driver, arg.buffer.name, trial.packed, trial.inputs, {&buffers.buffers[i]}));
    } else if (arg.kind != codegen::KernelArg::Kind::kTensorMap) {
      RETURN_IF_ERROR(UploadPoison(buffers.buffers[i], arg.buffer));
    }
  }
  *launch_error = module.LaunchAll(buffers.ptrs, /*synchronize=*/true);
  if (!launch_error->ok()) return ir::BufferMap{};
  ir::BufferMap outputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::KernelArg& arg = args[i];
    if (arg.kind != codegen::KernelArg::Kind::kOutput) continue;
    std::vector<std::byte> bytes(static_cast<size_t>(buffers.buffers[i].bytes()));
    RETURN_IF_ERROR(buffers.buffers[i].Download(bytes.data(), buffers.buffers[i].bytes()));
    ir::HostBuffer got = ir::HostBuffer::Zeros(arg.buffer.dtype, arg.buffer.shape);
    RETURN_IF_ERROR(UnpackBuffer(bytes.data(), bytes.size(), &got));
    outputs[arg.buffer.name] = std::move(got);
  }
  return outputs;
}

// Poisons a device buffer of `dtype` elements on the device (the values of PoisonBytes): NaN words
// for floats, 0x5A bytes for integers and bool; float16 / bfloat16 buffers of an odd element count
// get the host's poison uploaded.
absl::Status PoisonOnDevice(DeviceBuffer& buffer, const ir::BufferDecl& decl) {
  switch (decl.dtype) {
    case ir::ScalarType::kFloat32:
      return buffer.Memset32(0x7fc00000u);
    case ir::ScalarType::kFloat16:
    case ir::ScalarType::kBFloat16: {
      if (buffer.bytes() % 4 != 0) return UploadPoison(buffer, decl);
      const uint32_t nan = decl.dtype == ir::ScalarType::kFloat16 ? 0x7e00u : 0x7fc0u;
      return buffer.Memset32(nan | (nan << 16));
    }
    case ir::ScalarType::kInt32:
    case ir::ScalarType::kInt64:
    case ir::ScalarType::kBool:
      return buffer.Memset8(0x5a);
  }
  return absl::InternalError("unknown dtype");
}

// Copies `bytes` bytes at byte `offset` of device memory `ptr` to `host` (synchronous).
absl::Status DownloadAt(const CudaDriver& driver, cuda::CUdeviceptr ptr, int64_t offset, void* host,
                        int64_t bytes) {
  return driver.Check(driver.cuMemcpyDtoH(host, ptr + static_cast<cuda::CUdeviceptr>(offset),
                                          static_cast<size_t>(bytes)),
                      "cuMemcpyDtoH");
}

// Element `flat` of a device buffer of `dtype` elements, downloaded and unpacked.
absl::StatusOr<double> DownloadElement(const CudaDriver& driver, const DeviceBuffer& buffer,
                                       ir::ScalarType dtype, int64_t flat) {
  const int64_t bytes = StorageBytes(dtype);
  std::array<std::byte, 8> raw{};
  RETURN_IF_ERROR(DownloadAt(driver, buffer.ptr(), bytes * flat, raw.data(), bytes));
  ir::HostBuffer one = ir::HostBuffer::Zeros(dtype, {1});
  RETURN_IF_ERROR(UnpackBuffer(raw.data(), static_cast<size_t>(bytes), &one));
  return one.data[0];
}

// Whether every value of `buffer` survives packing into its dtype (NaNs included), so that the
// packed copy on the device holds exactly the values the host path would compare with.
bool ExactInStorage(const ir::HostBuffer& buffer) {
  const std::vector<std::byte> bytes = PackBuffer(buffer);
  ir::HostBuffer back = ir::HostBuffer::Zeros(buffer.dtype, buffer.shape);
  if (!UnpackBuffer(bytes.data(), bytes.size(), &back).ok()) return false;
  for (size_t i = 0; i < buffer.data.size(); ++i) {
    const double v = buffer.data[i];
    if (std::isnan(v) ? !std::isnan(back.data[i]) : back.data[i] != v) return false;
  }
  return true;
}

absl::StatusOr<DeviceBuffer> AllocateAndUpload(const CudaDriver& driver,
                                               const std::vector<std::byte>& bytes) {
  ASSIGN_OR_RETURN(DeviceBuffer b,
                   DeviceBuffer::Allocate(driver, static_cast<int64_t>(bytes.size())));
  RETURN_IF_ERROR(b.Upload(bytes.data(), static_cast<int64_t>(bytes.size())));
  return b;
}

// Device bytes the resident path keeps: per trial the inputs and references twice (pristine
// copies), the timing inputs and one set of outputs.
double ResidentBytes(const ir::LoopNest& params, int trials, bool magnitudes) {
  double in = 0, out = 0, m = 0;
  for (size_t p = 0; p < params.params.size(); ++p) {
    const ir::BufferDecl& d = params.params[p];
    const double bytes = static_cast<double>(d.NumElements() * StorageBytes(d.dtype));
    (static_cast<int>(p) < params.num_inputs ? in : out) += bytes;
    if (magnitudes && static_cast<int>(p) >= params.num_inputs && ir::IsFloat(d.dtype)) {
      m += static_cast<double>(d.NumElements()) * 4;
    }
  }
  return trials * (2 * (in + out) + m) + in + out;
}

// The resident buffers without references: every trial's inputs (and their pristine copies), the
// timing inputs and the outputs. Errors: kResourceExhausted when they would take more than half
// the device memory or an allocation fails; UploadInput's.
absl::StatusOr<std::unique_ptr<ResidentData>> AllocateResident(const BatchData& data,
                                                               const WorkerState& state) {
  const CudaDriver& driver = *state.driver;
  const ir::LoopNest& params = data.naive_params;
  const int trials = static_cast<int>(data.trials.size());
  const double total = static_cast<double>(state.context->info().total_memory_bytes);
  const double need = ResidentBytes(params, trials, data.magnitude_module != nullptr);
  if (total > 0 && need > 0.5 * total) {
    return absl::ResourceExhaustedError(
        absl::StrCat("resident check buffers need ", need, " bytes of ", total));
  }
  auto res = std::make_unique<ResidentData>();
  res->num_inputs = params.num_inputs;
  res->num_outputs = static_cast<int>(params.params.size()) - params.num_inputs;
  const std::vector<ir::BufferDecl>& decls = params.params;
  auto output_decl = [&](int k) -> const ir::BufferDecl& { return decls[res->num_inputs + k]; };
  for (int k = 0; k < res->num_outputs; ++k) res->output_order.push_back(k);
  std::sort(res->output_order.begin(), res->output_order.end(),
            [&](int a, int b) { return output_decl(a).name < output_decl(b).name; });
  auto input_bytes = [&](int j) { return decls[j].NumElements() * StorageBytes(decls[j].dtype); };
  for (int t = 0; t < trials; ++t) {
    res->inputs.emplace_back();
    res->pristine_inputs.emplace_back();
    const Trial& trial = data.trials[t];
    for (int j = 0; j < res->num_inputs; ++j) {
      ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(driver, input_bytes(j)));
      ASSIGN_OR_RETURN(DeviceBuffer p, DeviceBuffer::Allocate(driver, input_bytes(j)));
      RETURN_IF_ERROR(UploadInput(driver, decls[j].name, trial.packed, trial.inputs, {&b, &p}));
      res->inputs[t].push_back(std::move(b));
      res->pristine_inputs[t].push_back(std::move(p));
    }
  }
  for (int j = 0; j < res->num_inputs; ++j) {
    ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(driver, input_bytes(j)));
    RETURN_IF_ERROR(
        UploadInput(driver, decls[j].name, data.timing_inputs, data.timing_sources, {&b}));
    res->timing_inputs.push_back(std::move(b));
  }
  for (int k = 0; k < res->num_outputs; ++k) {
    const ir::BufferDecl& d = output_decl(k);
    ASSIGN_OR_RETURN(DeviceBuffer b,
                     DeviceBuffer::Allocate(driver, d.NumElements() * StorageBytes(d.dtype)));
    res->outputs.push_back(std::move(b));
  }
  return res;
}

// The naive (reference) kernel loaded, with one buffer per argument of which only the scratch
// ones are allocated with their size. Reference kernels are lowered without schedules and never
// take tensor maps; one that did is refused.
struct LoadedReference {
  std::unique_ptr<LoadedGpuModule> module;
  ArgBuffers scratch;
};

absl::StatusOr<LoadedReference> LoadReferenceWithScratch(const codegen::GpuModule& module,
                                                         const WorkerState& state) {
  LoadedReference ref;
  absl::StatusOr<std::unique_ptr<LoadedGpuModule>> loaded =
      LoadedGpuModule::Load(*state.context, module);
  if (!loaded.ok()) {
    return absl::InternalError(
        absl::StrCat("reference kernel does not load: ", loaded.status().message()));
  }
  ref.module = *std::move(loaded);
  for (const codegen::KernelArg& arg : module.args) {
    if (arg.kind == codegen::KernelArg::Kind::kTensorMap) {
      return absl::InternalError(absl::StrCat("reference kernel argument '", arg.buffer.name,
                                              "' is a tensor map, which reference kernels never "
                                              "take"));
    }
    const int64_t bytes = arg.kind == codegen::KernelArg::Kind::kScratch
                              ? arg.buffer.NumElements() * StorageBytes(arg.buffer.dtype)
                              : 0;
    ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(*state.driver, bytes));
    ref.scratch.ptrs.push_back(b.ptr());
    ref.scratch.buffers.push_back(std::move(b));
  }
  return ref;
}

// Trial t's references written in place by the naive kernel on the trial's resident inputs, their
// pristine copies, and the trial's expected outputs on the host after the float64 spot check.
absl::Status NaiveResidentReferences(const MeasureOptions& options, BatchData* data, int t,
                                     LoadedReference& naive, const CudaDriver& driver,
                                     ResidentData* res) {
  const std::vector<ir::BufferDecl>& decls = data->naive_params.params;
  Trial& trial = data->trials[t];
  // Arguments: this trial's resident inputs, its reference buffers as outputs, scratch.
  std::vector<cuda::CUdeviceptr> args = naive.scratch.ptrs;
  int param = 0;
  for (size_t i = 0; i < data->naive_module->args.size(); ++i) {
    const codegen::KernelArg& arg = data->naive_module->args[i];
    if (arg.kind == codegen::KernelArg::Kind::kScratch) {
      RETURN_IF_ERROR(PoisonOnDevice(naive.scratch.buffers[i], arg.buffer));
      continue;
    }
    if (param >= static_cast<int>(decls.size()) || arg.buffer.name != decls[param].name) {
      return absl::InternalError(
          absl::StrCat("reference kernel argument '", arg.buffer.name, "' out of order"));
    }
    if (param < res->num_inputs) {
      args[i] = res->inputs[t][param].ptr();
    } else {
      DeviceBuffer& ref = res->references[t][param - res->num_inputs];
      RETURN_IF_ERROR(PoisonOnDevice(ref, arg.buffer));
      args[i] = ref.ptr();
    }
    ++param;
  }
  absl::Status launched = naive.module->LaunchAll(args, /*synchronize=*/true);
  if (!launched.ok()) {
    return absl::InternalError(absl::StrCat("reference kernel failed: ", launched.message()));
  }
  ir::BufferMap expected;
  for (int k = 0; k < res->num_outputs; ++k) {
    const ir::BufferDecl& d = decls[res->num_inputs + k];
    std::vector<std::byte> bytes(static_cast<size_t>(res->references[t][k].bytes()));
    const DeviceBuffer& reference = res->references[t][k];
    RETURN_IF_ERROR(reference.Download(bytes.data(), reference.bytes()));
    ir::HostBuffer got = ir::HostBuffer::Zeros(d.dtype, d.shape);
    RETURN_IF_ERROR(UnpackBuffer(bytes.data(), bytes.size(), &got));
    expected[d.name] = std::move(got);
    ASSIGN_OR_RETURN(DeviceBuffer p, AllocateAndUpload(driver, bytes));
    res->pristine_references[t].push_back(std::move(p));
    res->device_compare[t].push_back(DeviceComparer::Supports(d.dtype));
  }
  absl::Status verified = VerifyReferenceSamples(*data->dag, trial.inputs, expected,
                                                 options.reference_point_samples, trial.seed);
  if (!verified.ok()) {
    return absl::InternalError(absl::StrCat("reference check failed (trial ", t, ", ",
                                            CheckDistributionName(trial.distribution),
                                            "): ", verified.message()));
  }
  trial.expected = std::move(expected);
  return absl::OkStatus();
}

// Trial t's references uploaded from the interpreter's outputs, with their pristine copies.
absl::Status UploadResidentReferences(const BatchData& data, int t, const CudaDriver& driver,
                                      ResidentData* res) {
  const Trial& trial = data.trials[t];
  for (int k = 0; k < res->num_outputs; ++k) {
    const ir::BufferDecl& d = data.naive_params.params[res->num_inputs + k];
    auto it = trial.expected.find(d.name);
    if (it == trial.expected.end()) {
      return absl::InternalError(absl::StrCat("no reference for output '", d.name, "'"));
    }
    const std::vector<std::byte> bytes = PackBuffer(it->second);
    RETURN_IF_ERROR(UploadBytes(res->references[t][k], bytes, d.name));
    ASSIGN_OR_RETURN(DeviceBuffer p, AllocateAndUpload(driver, bytes));
    res->pristine_references[t].push_back(std::move(p));
    res->device_compare[t].push_back(DeviceComparer::Supports(d.dtype) &&
                                     ExactInStorage(it->second));
  }
  return absl::OkStatus();
}

// Every trial's M of its float outputs (res->magnitudes), written by the magnitude kernel from the
// trial's resident inputs; empty buffers when the batch has no magnitude kernel.
absl::Status ResidentMagnitudes(const BatchData& data, const WorkerState& state,
                                ResidentData* res) {
  const int trials = static_cast<int>(data.trials.size());
  res->magnitudes.clear();
  for (int t = 0; t < trials; ++t) {
    res->magnitudes.emplace_back();
    res->magnitudes.back().resize(static_cast<size_t>(res->num_outputs));
  }
  if (data.magnitude_module == nullptr) return absl::OkStatus();
  const codegen::GpuModule& module = *data.magnitude_module;
  ASSIGN_OR_RETURN(LoadedReference kernel, LoadReferenceWithScratch(module, state));
  const std::vector<ir::BufferDecl>& decls = data.naive_params.params;
  for (int t = 0; t < trials; ++t) {
    std::map<std::string, cuda::CUdeviceptr> by_name;  // the kernel's arguments by name
    for (int j = 0; j < res->num_inputs; ++j) by_name[decls[j].name] = res->inputs[t][j].ptr();
    for (int k = 0; k < res->num_outputs; ++k) {
      const ir::BufferDecl& d = decls[res->num_inputs + k];
      if (!ir::IsFloat(d.dtype)) continue;
      ASSIGN_OR_RETURN(res->magnitudes[t][k],
                       DeviceBuffer::Allocate(*state.driver, d.NumElements() * 4));
      by_name[d.name + ir::kMagnitudeSuffix] = res->magnitudes[t][k].ptr();
    }
    std::vector<cuda::CUdeviceptr> args = kernel.scratch.ptrs;
    for (size_t i = 0; i < module.args.size(); ++i) {
      const codegen::KernelArg& arg = module.args[i];
      if (arg.kind == codegen::KernelArg::Kind::kScratch) continue;
      auto it = by_name.find(arg.buffer.name);
      if (it == by_name.end()) {
        return absl::InternalError(absl::StrCat("magnitude kernel argument '", arg.buffer.name,
                                                "' is neither an input nor a magnitude"));
      }
      args[i] = it->second;
    }
    absl::Status launched = kernel.module->LaunchAll(args, /*synchronize=*/true);
    if (!launched.ok()) {
      return absl::InternalError(absl::StrCat("magnitude kernel failed: ", launched.message()));
    }
  }
  return absl::OkStatus();
}

// Trial 0's magnitudes on the device against the float64 M of the sampled points. The device M is
// M at the values the reference kernel computes: within a few 1e-6 of the float64 M where every
// stage is float32, but where intermediate stages are float16 / bfloat16 their rounding moves the
// slopes (exp of a rounded input: 10 % seen on the H200 in swiglu_gate_bf16). A disagreement beyond
// 5 % (all-float32 DAGs) or a factor of 4 (with half-precision stages) means a wrong magnitude
// kernel: that output's magnitudes are dropped, with a warning, so its check runs without the
// cancellation allowance (stricter, the float64 arbitration still judging its few mismatches).
void VerifyMagnitudes(const BatchData& data, WorkerState* state) {
  if (state->resident == nullptr || state->resident->magnitudes.empty()) return;
  ResidentData& res = *state->resident;
  bool half_stages = false;
  for (const ir::Tensor& t : data.dag->stages()) {
    half_stages |= t.dtype() == ir::ScalarType::kFloat16 || t.dtype() == ir::ScalarType::kBFloat16;
  }
  const std::vector<ir::BufferDecl>& decls = data.naive_params.params;
  for (int k = 0; k < res.num_outputs; ++k) {
    if (res.magnitudes[0][k].bytes() == 0) continue;
    const ir::BufferDecl& d = decls[res.num_inputs + k];
    std::string disagreement;
    for (const SampledOutput& so : state->sampled) {
      for (size_t i = 0; so.name == d.name && i < so.flats.size() && disagreement.empty(); ++i) {
        const double want = so.magnitude[i];
        if (!std::isfinite(want)) continue;
        absl::StatusOr<double> got = DownloadElement(*state->driver, res.magnitudes[0][k],
                                                     ir::ScalarType::kFloat32, so.flats[i]);
        const bool agrees =
            got.ok() && (half_stages ? *got >= want / 4 && *got <= want * 4
                                     : std::fabs(*got - want) <= 0.05 * want + 1e-30);
        if (!agrees) {
          disagreement = absl::StrCat("element ", so.flats[i], ": M ",
                                      got.ok() ? absl::StrCat(*got) : got.status().ToString(),
                                      ", float64 M ", want);
        }
      }
    }
    if (disagreement.empty()) continue;
    std::fprintf(stderr,
                 "warning: the magnitude kernel disagrees with float64 point evaluation at '%s' "
                 "%s; '%s' is checked without the cancellation allowance\n",
                 d.name.c_str(), disagreement.c_str(), d.name.c_str());
    for (std::vector<DeviceBuffer>& trial : res.magnitudes) trial[k] = DeviceBuffer();
  }
}

// The device-resident setup (see the file comment). Errors: kResourceExhausted when the resident
// buffers would take more than half the device memory or an allocation fails (the caller then
// uses the per-candidate path); "reference ..." errors of the naive kernel as on that path.
absl::Status SetupResident(const MeasureOptions& options, BatchData* data, WorkerState* state) {
  const CudaDriver& driver = *state->driver;
  ASSIGN_OR_RETURN(std::unique_ptr<ResidentData> res, AllocateResident(*data, *state));
  // References: the naive kernel writes them in place; the interpreter's are uploaded.
  std::optional<LoadedReference> naive;
  if (data->naive_module != nullptr) {
    ASSIGN_OR_RETURN(naive, LoadReferenceWithScratch(*data->naive_module, *state));
  }
  const int trials = static_cast<int>(data->trials.size());
  for (int t = 0; t < trials; ++t) {
    res->references.emplace_back();
    res->pristine_references.emplace_back();
    res->device_compare.emplace_back();
    for (int k = 0; k < res->num_outputs; ++k) {
      const ir::BufferDecl& d = data->naive_params.params[res->num_inputs + k];
      ASSIGN_OR_RETURN(DeviceBuffer b,
                       DeviceBuffer::Allocate(driver, d.NumElements() * StorageBytes(d.dtype)));
      res->references[t].push_back(std::move(b));
    }
    if (naive.has_value()) {
      RETURN_IF_ERROR(NaiveResidentReferences(options, data, t, *naive, driver, res.get()));
    } else {
      RETURN_IF_ERROR(UploadResidentReferences(*data, t, driver, res.get()));
    }
  }
  RETURN_IF_ERROR(ResidentMagnitudes(*data, *state, res.get()));
  const int num_slots = trials * res->num_outputs + trials * (res->num_inputs + res->num_outputs);
  res->initial_slots.assign(static_cast<size_t>(num_slots), InitialCompareSlot());
  ASSIGN_OR_RETURN(res->slots, DeviceBuffer::Allocate(
                                   driver, static_cast<int64_t>(num_slots * sizeof(CompareSlot))));
  if (options.arbitration_max_elements > 0) {
    res->mismatch_capacity = options.arbitration_max_elements;
    ASSIGN_OR_RETURN(res->mismatch_list,
                     DeviceBuffer::Allocate(driver, res->mismatch_capacity * kMismatchEntryBytes));
  }
  state->resident = std::move(res);
  return absl::OkStatus();
}

// An empty kernel for PTX ISA 7.0 / sm_75, which the driver JIT-compiles for any newer device.
constexpr char kJitWarmupPtx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry tilesearch_jit_warmup()\n{\n  "
    "ret;\n}\n";

// Worker setup: the context, the timer, the compare module and the resident buffers (with the
// expected outputs of every trial on the GPU-reference path: naive kernel, spot-checked in
// float64); where they do not fit, the per-candidate path's expected outputs.
absl::Status WorkerSetup(const MeasureOptions& options, BatchData* data, WorkerState* state) {
  ASSIGN_OR_RETURN(state->driver, CudaDriver::Load());
  ASSIGN_OR_RETURN(state->context, CudaContext::Create(*state->driver, options.device));
  ASSIGN_OR_RETURN(state->timer, GpuTimer::Create(*state->context));
  // The driver's first PTX JIT in a process costs ~80 ms more than later ones (seen on the H200:
  // 88 vs 8 ms); load an empty module once so the first candidate's load_ms is like the others'.
  // Best effort: a failure here shows up again, with its message, on the real modules.
  (void)CudaModule::LoadPtx(*state->driver, kJitWarmupPtx);
  // The compare module; without it (a JIT failure, not expected) float32 outputs are compared on
  // the host and the resident inputs are not checked for writes.
  absl::StatusOr<std::unique_ptr<DeviceComparer>> comparer =
      DeviceComparer::Create(*state->context);
  if (comparer.ok()) state->comparer = *std::move(comparer);
  absl::Status resident = SetupResident(options, data, state);
  if (resident.ok()) return absl::OkStatus();
  if (resident.code() != absl::StatusCode::kResourceExhausted) return resident;
  if (data->inputs_on_demand) {
    // The per-candidate path would generate and upload every input again for each candidate
    // (minutes per candidate at these sizes): refuse, with the device's numbers.
    return absl::ResourceExhaustedError(absl::StrCat(
        "the inputs are generated on demand (too large to hold on the host) and need the "
        "device-resident check, which does not fit: ",
        resident.message()));
  }
  // Not enough device memory to keep everything: the per-candidate path.
  state->resident.reset();
  if (data->naive_module == nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<LoadedGpuModule>> naive =
      LoadedGpuModule::Load(*state->context, *data->naive_module);
  if (!naive.ok()) {
    return absl::InternalError(
        absl::StrCat("reference kernel does not load: ", naive.status().message()));
  }
  absl::StatusOr<ArgBuffers> buffers = AllocateArgs(*state->driver, data->naive_module->args);
  if (!buffers.ok()) {
    return absl::InternalError(absl::StrCat("reference kernel: ", buffers.status().message()));
  }
  for (size_t t = 0; t < data->trials.size(); ++t) {
    Trial& trial = data->trials[t];
    absl::Status launch_error;
    absl::StatusOr<ir::BufferMap> outputs = RunChecked(
        *state->driver, **naive, data->naive_module->args, *buffers, trial, &launch_error);
    if (!launch_error.ok()) {
      return absl::InternalError(absl::StrCat("reference kernel failed: ", launch_error.message()));
    }
    if (!outputs.ok()) {
      return absl::InternalError(absl::StrCat("reference kernel: ", outputs.status().message()));
    }
    absl::Status verified = VerifyReferenceSamples(*data->dag, trial.inputs, *outputs,
                                                   options.reference_point_samples, trial.seed);
    if (!verified.ok()) {
      return absl::InternalError(absl::StrCat("reference check failed (trial ", t, ", ",
                                              CheckDistributionName(trial.distribution),
                                              "): ", verified.message()));
    }
    trial.expected = std::move(*outputs);
  }
  return absl::OkStatus();
}

absl::Status WorkerSetupAndSample(const MeasureOptions& options, BatchData* data,
                                  WorkerState* state) {
  RETURN_IF_ERROR(WorkerSetup(options, data, state));
  if (!options.check || data->trials.empty()) return absl::OkStatus();
  const Trial& trial = data->trials[0];
  absl::StatusOr<std::vector<SampledOutput>> sampled =
      SampleFloat64Reference(*data->dag, trial.inputs, data->native_first, options, trial.seed);
  if (!sampled.ok()) {
    return absl::InternalError(
        absl::StrCat("reference: float64 sampled points: ", sampled.status().message()));
  }
  state->sampled = *std::move(sampled);
  VerifyMagnitudes(*data, state);
  return absl::OkStatus();
}

std::string FinishItem(MeasureResult& r, Clock::time_point start, MeasureError error,
                       std::string message) {
  r.error = error;
  r.message = std::move(message);
  r.run_wall_ms = MsSince(start);
  return MeasureResultToJson(r).dump();
}

// A launch or synchronization failure: the context may be poisoned (illegal address), so this
// worker ends after the item unless the launch was refused before reaching the device.
std::string RuntimeFailure(MeasureResult& r, Clock::time_point start, const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) RequestWorkerRestart();
  return FinishItem(r, start, MeasureError::kRuntimeError, std::string(status.message()));
}

std::string MismatchMessage(const CheckReport& check) {
  std::string message =
      absl::StrCat(check.mismatches, " of ", check.checked_elements,
                   " output elements outside tolerance; first ", check.first_mismatch);
  if (!check.arbitration.empty()) absl::StrAppend(&message, "; ", check.arbitration);
  return message;
}

ArbitrationOptions ArbitrationOf(const MeasureOptions& options) {
  return {options.arbitration_max_elements, options.arbitration_max_steps, options.precision};
}

// Downloads output buffer `output` (of `decl`) to the host. Errors: the driver's, UnpackBuffer's.
absl::StatusOr<ir::HostBuffer> DownloadOutput(const DeviceBuffer& output,
                                              const ir::BufferDecl& decl) {
  std::vector<std::byte> bytes(static_cast<size_t>(output.bytes()));
  RETURN_IF_ERROR(output.Download(bytes.data(), output.bytes()));
  ir::HostBuffer got = ir::HostBuffer::Zeros(decl.dtype, decl.shape);
  RETURN_IF_ERROR(UnpackBuffer(bytes.data(), bytes.size(), &got));
  return got;
}

// An item's early end: the payload of FinishItem / RuntimeFailure; empty while the item goes on.
using Finished = std::optional<std::string>;

// A candidate's arguments on the resident buffers: the task param of each argument (-1: scratch
// or tensor map), the candidate's own scratch buffers, and the device pointers of a launch on
// each trial's inputs and on the timing inputs, each set with its own tensor maps (`maps`).
struct ResidentArgs {
  std::vector<int> param_of;
  std::vector<DeviceBuffer> scratch;  // empty where the argument is no scratch buffer
  std::vector<std::vector<cuda::CUdeviceptr>> trial_ptrs;  // [trial]
  std::vector<cuda::CUdeviceptr> timing_ptrs;
  std::vector<DeviceBuffer> maps;
};

// The device pointers of the candidate's arguments with the task inputs at `inputs` and its tensor
// maps encoded over them into new buffers appended to bound.maps.
absl::StatusOr<std::vector<cuda::CUdeviceptr>> ResidentArgPtrs(
    const CudaDriver& driver, const codegen::GpuModule& gpu, const ResidentData& res,
    const std::vector<DeviceBuffer>& inputs, ResidentArgs& bound) {
  const int ni = res.num_inputs;
  std::vector<cuda::CUdeviceptr> a(bound.param_of.size());
  for (size_t i = 0; i < bound.param_of.size(); ++i) {
    const int p = bound.param_of[i];
    a[i] = p < 0 ? bound.scratch[i].ptr() : p < ni ? inputs[p].ptr() : res.outputs[p - ni].ptr();
  }
  RETURN_IF_ERROR(BindTensorMaps(driver, gpu.args, &a, &bound.maps));
  return a;
}

// Maps the candidate's arguments onto the resident buffers, allocates its scratch buffers and
// binds its pointer sets (ResidentArgs).
Finished BindResidentArgs(const BatchData& data, const WorkerState& state,
                          const codegen::GpuModule& gpu, Clock::time_point start, MeasureResult& r,
                          ResidentArgs* bound) {
  const std::vector<ir::BufferDecl>& decls = data.naive_params.params;
  bound->param_of.assign(gpu.args.size(), -1);
  bound->scratch.resize(gpu.args.size());
  int next_param = 0;
  for (size_t i = 0; i < gpu.args.size(); ++i) {
    const codegen::KernelArg& arg = gpu.args[i];
    if (arg.kind == codegen::KernelArg::Kind::kTensorMap) continue;  // bound per pointer set
    if (arg.kind != codegen::KernelArg::Kind::kScratch) {
      if (next_param >= static_cast<int>(decls.size()) ||
          arg.buffer.name != decls[next_param].name) {
        return FinishItem(r, start, MeasureError::kUnknown,
                          absl::StrCat("candidate argument '", arg.buffer.name, "' out of order"));
      }
      bound->param_of[i] = next_param++;
      continue;
    }
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(
        *state.driver, arg.buffer.NumElements() * StorageBytes(arg.buffer.dtype));
    if (!b.ok()) {
      return FinishItem(r, start, MeasureError::kRuntimeError, std::string(b.status().message()));
    }
    bound->scratch[i] = *std::move(b);
  }
  const ResidentData& res = *state.resident;
  for (const std::vector<DeviceBuffer>& inputs : res.inputs) {
    absl::StatusOr<std::vector<cuda::CUdeviceptr>> ptrs =
        ResidentArgPtrs(*state.driver, gpu, res, inputs, *bound);
    if (!ptrs.ok()) {
      return FinishItem(r, start, MeasureError::kRuntimeError,
                        std::string(ptrs.status().message()));
    }
    bound->trial_ptrs.push_back(*std::move(ptrs));
  }
  absl::StatusOr<std::vector<cuda::CUdeviceptr>> timing =
      ResidentArgPtrs(*state.driver, gpu, res, res.timing_inputs, *bound);
  if (!timing.ok()) {
    return FinishItem(r, start, MeasureError::kRuntimeError,
                      std::string(timing.status().message()));
  }
  bound->timing_ptrs = *std::move(timing);
  return std::nullopt;
}

// The mismatches of output k of trial t, as the device compare listed them (all `summary`'s),
// judged in float64 (ArbitrateListed) and accumulated into the report.
Finished ArbitrateDeviceList(const MeasureOptions& options, const BatchData& data,
                             const WorkerState& state, int t, int k, const CompareSummary& summary,
                             const ir::HostBuffer& expected, Clock::time_point start,
                             MeasureResult& r) {
  const ResidentData& res = *state.resident;
  const Trial& trial = data.trials[t];
  const ir::BufferDecl& decl = data.naive_params.params[res.num_inputs + k];
  const int64_t count = summary.mismatches;
  std::vector<std::array<uint64_t, 2>> entries(static_cast<size_t>(count));
  absl::Status s = DownloadAt(*state.driver, res.mismatch_list.ptr(), 0, entries.data(),
                              count * kMismatchEntryBytes);
  if (!s.ok()) return RuntimeFailure(r, start, s);
  std::sort(entries.begin(), entries.end());
  std::vector<int64_t> flats;
  std::vector<double> got, ref32;
  const int64_t n = decl.NumElements();
  for (const auto& [flat, bits] : entries) {
    if (flat >= static_cast<uint64_t>(n)) {
      return FinishItem(r, start, MeasureError::kUnknown,
                        absl::StrCat("device compare listed element ", flat, " of ", n));
    }
    flats.push_back(static_cast<int64_t>(flat));
    got.push_back(std::bit_cast<double>(bits));
    ref32.push_back(expected.data[flat]);
  }
  const int output_id = data.dag->StageId(decl.name);
  const ArbitrationSummary a =
      ArbitrateListed(*data.dag, output_id, trial.inputs, summary, flats, got, ref32,
                      ToleranceFor(decl.dtype, options.atol, options.rtol), ArbitrationOf(options));
  // The first mismatch is the lowest listed index: entries are sorted.
  AccumulateArbitration(*data.dag, output_id, a, got.front(), ref32.front(), t, trial.distribution,
                        &r.check);
  return std::nullopt;
}

// Output k of trial t compared on the device (its slot downloaded); few mismatches are judged
// again in float64 on the host (from the device's mismatch list, or the downloaded output).
Finished CompareOnDevice(const MeasureOptions& options, const BatchData& data,
                         const WorkerState& state, int t, int k, Clock::time_point start,
                         MeasureResult& r) {
  const ResidentData& res = *state.resident;
  const CudaDriver& driver = *state.driver;
  const Trial& trial = data.trials[t];
  const ir::BufferDecl& decl = data.naive_params.params[res.num_inputs + k];
  Tolerance tolerance = ToleranceFor(decl.dtype, options.atol, options.rtol);
  const int64_t n = decl.NumElements();
  const cuda::CUdeviceptr slot_ptr = res.SlotPtr(res.CompareSlotIndex(t, k));
  // The precision rule's cancellation allowance c · u · M where the magnitudes exist.
  const DeviceBuffer& magnitude = res.magnitudes[t][k];
  if (magnitude.bytes() > 0) {
    tolerance.allowance = kCancellationFactor * RuleFor(*data.dag, data.dag->StageId(decl.name),
                                                        tolerance, options.precision)
                                                    .unit_roundoff;
  }
  absl::Status s = state.comparer->Compare(
      decl.dtype, res.outputs[k].ptr(), res.references[t][k].ptr(), n, tolerance, slot_ptr,
      res.mismatch_list.ptr(), res.mismatch_capacity, magnitude.bytes() > 0 ? magnitude.ptr() : 0);
  CompareSlot slot{};
  if (s.ok()) s = DownloadAt(driver, slot_ptr, 0, slot.data(), sizeof(CompareSlot));
  if (!s.ok()) return RuntimeFailure(r, start, s);
  const CompareSummary summary = DecodeCompareSlot(slot, n);
  if (t == 0) {
    // The sampled points' values, one float32 download each (a few hundred bytes).
    absl::Status sampled_status;
    RecordSampled(
        state, decl.name,
        [&](int64_t flat) -> double {
          absl::StatusOr<double> g = DownloadElement(driver, res.outputs[k], decl.dtype, flat);
          if (!g.ok() && sampled_status.ok()) sampled_status = g.status();
          return g.ok() ? *g : 0.0;
        },
        &r.check);
    if (!sampled_status.ok()) return RuntimeFailure(r, start, sampled_status);
  }
  if (summary.mismatches < 0 || summary.mismatches > n ||
      (summary.mismatches > 0 && summary.first_mismatch >= n)) {
    return FinishItem(r, start, MeasureError::kUnknown,
                      absl::StrCat("device compare of '", decl.name, "' reported ", slot[0],
                                   " mismatches, first at ", slot[3], " of ", n, " elements"));
  }
  auto expected = trial.expected.find(decl.name);
  if (summary.mismatches > 0 && summary.mismatches <= options.arbitration_max_elements &&
      expected != trial.expected.end() && static_cast<int64_t>(slot[4]) == summary.mismatches &&
      summary.mismatches <= res.mismatch_capacity) {
    // Few mismatches, all in the device's list: float64 arbitration of those alone.
    return ArbitrateDeviceList(options, data, state, t, k, summary, expected->second, start, r);
  }
  if (summary.mismatches > 0 && summary.mismatches <= options.arbitration_max_elements &&
      expected != trial.expected.end()) {
    // Few mismatches but no list: the output to the host and the comparison again there, with
    // float64 arbitration (ArbitrateMismatches). trial.expected holds the same values as the
    // device reference (device_compare needs them exact in the dtype).
    absl::StatusOr<ir::HostBuffer> got = DownloadOutput(res.outputs[k], decl);
    if (!got.ok()) return RuntimeFailure(r, start, got.status());
    CompareOutputWithArbitration(*data.dag, data.dag->StageId(decl.name), trial.inputs, *got,
                                 expected->second, tolerance, ArbitrationOf(options), t,
                                 trial.distribution, &r.check);
    return std::nullopt;
  }
  double got_first = 0, expected_first = 0;
  if (summary.mismatches > 0 && r.check.mismatches == 0 && r.check.first_mismatch.empty()) {
    absl::StatusOr<double> g =
        DownloadElement(driver, res.outputs[k], decl.dtype, summary.first_mismatch);
    if (!g.ok()) return RuntimeFailure(r, start, g.status());
    absl::StatusOr<double> e =
        DownloadElement(driver, res.references[t][k], decl.dtype, summary.first_mismatch);
    if (!e.ok()) return RuntimeFailure(r, start, e.status());
    got_first = *g;
    expected_first = *e;
  }
  AccumulateSummary(decl.name, decl.shape, summary, got_first, expected_first, t,
                    trial.distribution, &r.check);
  return std::nullopt;
}

// Output k of trial t downloaded and compared on the host (with float64 arbitration).
Finished CompareOnHost(const MeasureOptions& options, const BatchData& data,
                       const WorkerState& state, int t, int k, Clock::time_point start,
                       MeasureResult& r) {
  const ResidentData& res = *state.resident;
  const Trial& trial = data.trials[t];
  const ir::BufferDecl& decl = data.naive_params.params[res.num_inputs + k];
  auto expected = trial.expected.find(decl.name);
  if (expected == trial.expected.end()) {
    return FinishItem(r, start, MeasureError::kUnknown,
                      absl::StrCat("no reference for output '", decl.name, "'"));
  }
  std::vector<std::byte> bytes(static_cast<size_t>(res.outputs[k].bytes()));
  absl::Status s = res.outputs[k].Download(bytes.data(), res.outputs[k].bytes());
  if (!s.ok()) return RuntimeFailure(r, start, s);
  ir::HostBuffer got = ir::HostBuffer::Zeros(decl.dtype, decl.shape);
  s = UnpackBuffer(bytes.data(), bytes.size(), &got);
  if (!s.ok()) return FinishItem(r, start, MeasureError::kUnknown, std::string(s.message()));
  if (t == 0) {
    RecordSampled(
        state, decl.name, [&](int64_t flat) { return got.data[flat]; }, &r.check);
  }
  CompareOutputWithArbitration(*data.dag, data.dag->StageId(decl.name), trial.inputs, got,
                               expected->second,
                               ToleranceFor(decl.dtype, options.atol, options.rtol),
                               ArbitrationOf(options), t, trial.distribution, &r.check);
  return std::nullopt;
}

// One timed run without warm-up or flush: a check launch timed for staged timing.
runtime::TimingOptions OneCheckRun() {
  runtime::TimingOptions o;
  o.warmup_runs = 0;
  o.min_runs = 1;
  o.max_runs = 1;
  o.min_total_ms = 0;
  o.flush_cache = false;
  return o;
}

// The check on the resident inputs and references: per trial, outputs and scratch poisoned on the
// device, one synchronized launch, every output compared (in name order). With staged timing
// (options.screen_above_ms > 0) each launch's time goes to `check_runs_ms`.
Finished ResidentCheck(const MeasureOptions& options, const BatchData& data,
                       const WorkerState& state, const codegen::GpuModule& gpu,
                       const LoadedGpuModule& module, ResidentArgs& bound, Clock::time_point start,
                       MeasureResult& r, std::vector<double>* check_runs_ms) {
  ResidentData& res = *state.resident;
  const int ni = res.num_inputs;
  const auto check_start = Clock::now();
  absl::Status init =
      res.slots.Upload(res.initial_slots.data(),
                       static_cast<int64_t>(res.initial_slots.size() * sizeof(CompareSlot)));
  if (!init.ok()) return RuntimeFailure(r, start, init);
  for (size_t t = 0; t < data.trials.size(); ++t) {
    for (size_t i = 0; i < gpu.args.size(); ++i) {
      const int p = bound.param_of[i];
      if ((p >= 0 && p < ni) || gpu.args[i].kind == codegen::KernelArg::Kind::kTensorMap) continue;
      absl::Status s =
          PoisonOnDevice(p < 0 ? bound.scratch[i] : res.outputs[p - ni], gpu.args[i].buffer);
      if (!s.ok()) return RuntimeFailure(r, start, s);
    }
    const std::vector<cuda::CUdeviceptr>& args = bound.trial_ptrs[t];
    if (ScreenFor(options, state.batch_best_ms) > 0) {
      // Timed between events (one run, no flush) for staged timing; Time waits for the end event.
      absl::StatusOr<TimingStats> one = state.timer->Time(
          [&]() { return module.LaunchAll(args, /*synchronize=*/false); }, OneCheckRun());
      if (!one.ok()) return RuntimeFailure(r, start, one.status());
      check_runs_ms->push_back(one->median_ms);
    } else {
      absl::Status launched = module.LaunchAll(args, /*synchronize=*/true);
      if (!launched.ok()) return RuntimeFailure(r, start, launched);
    }
    for (int k : res.output_order) {
      const int trial = static_cast<int>(t);
      Finished finished = state.comparer != nullptr && res.device_compare[t][k]
                              ? CompareOnDevice(options, data, state, trial, k, start, r)
                              : CompareOnHost(options, data, state, trial, k, start, r);
      if (finished.has_value()) return finished;
    }
    ++r.check.trials;
  }
  r.check_ms = MsSince(check_start);
  return std::nullopt;
}

// Whether the candidate wrote into the resident inputs or references (their slots were zeroed with
// the others before the check): a wrong answer, and the next worker starts from fresh copies.
Finished CheckResidentIntact(const BatchData& data, const WorkerState& state, bool wrong,
                             Clock::time_point start, MeasureResult& r) {
  const ResidentData& res = *state.resident;
  const std::vector<ir::BufferDecl>& decls = data.naive_params.params;
  const int ni = res.num_inputs;
  const int trials = static_cast<int>(data.trials.size());
  const int params = ni + res.num_outputs;
  absl::Status s;
  for (int t = 0; t < trials && s.ok(); ++t) {
    for (int p = 0; p < params && s.ok(); ++p) {
      const DeviceBuffer& live = p < ni ? res.inputs[t][p] : res.references[t][p - ni];
      const DeviceBuffer& pristine =
          p < ni ? res.pristine_inputs[t][p] : res.pristine_references[t][p - ni];
      s = state.comparer->CountDifferences(live.ptr(), pristine.ptr(), live.bytes(),
                                           res.SlotPtr(res.DifferenceSlotIndex(t, p)));
    }
  }
  std::vector<CompareSlot> counts(static_cast<size_t>(trials * params));
  if (s.ok()) {
    s = DownloadAt(*state.driver, res.SlotPtr(res.DifferenceSlotIndex(0, 0)), 0, counts.data(),
                   static_cast<int64_t>(counts.size() * sizeof(CompareSlot)));
  }
  if (!s.ok()) return RuntimeFailure(r, start, s);
  for (int t = 0; t < trials; ++t) {
    for (int p = 0; p < params; ++p) {
      const uint64_t changed = counts[t * params + p][0];
      if (changed == 0) continue;
      RequestWorkerRestart();
      r.costs_s.clear();
      r.timing = TimingStats{};
      std::string message =
          p < ni ? absl::StrCat("candidate wrote into its input '", decls[p].name, "' (", changed,
                                " words of trial ", t, "'s copy changed)")
                 : absl::StrCat("candidate wrote outside its outputs: the reference of '",
                                decls[p].name, "' (trial ", t, ") changed in ", changed, " words");
      if (wrong) absl::StrAppend(&message, "; ", MismatchMessage(r.check));
      return FinishItem(r, start, MeasureError::kWrongAnswer, std::move(message));
    }
  }
  return std::nullopt;
}

// Check and timing of a loaded candidate on the worker's resident buffers (see the file comment).
std::string ResidentCheckAndTime(const MeasureOptions& options, const BatchData& data,
                                 WorkerState& state, const codegen::GpuModule& gpu,
                                 const LoadedGpuModule& module, bool tf32x3_gate,
                                 Clock::time_point start, MeasureResult& r) {
  ResidentArgs bound;
  if (Finished f = BindResidentArgs(data, state, gpu, start, r, &bound)) return *f;
  std::vector<double> check_runs_ms;
  if (options.check) {
    if (Finished f =
            ResidentCheck(options, data, state, gpu, module, bound, start, r, &check_runs_ms)) {
      return *f;
    }
  }
  std::string tf32x3_verdict;
  if (options.check && tf32x3_gate && r.check.mismatches == 0) {
    tf32x3_verdict = Tf32x3Verdict(r.check);
  }
  const bool wrong = r.check.mismatches > 0 || !tf32x3_verdict.empty();

  // Staged timing: a candidate slower than the screen in every check run keeps those times.
  if (!wrong && !check_runs_ms.empty() &&
      *std::min_element(check_runs_ms.begin(), check_runs_ms.end()) >
          ScreenFor(options, state.batch_best_ms)) {
    r.timing = runtime::Summarize(check_runs_ms);
    r.screened = true;
    for (double ms : check_runs_ms) r.costs_s.push_back(ms / 1000.0);
  }
  // Timing on the resident timing inputs (random, never the check inputs, never zeros).
  if (!wrong && !r.screened) {
    const std::vector<cuda::CUdeviceptr>& timing_args = bound.timing_ptrs;
    absl::StatusOr<TimingStats> stats = state.timer->Time(
        [&]() { return module.LaunchAll(timing_args, /*synchronize=*/false); }, options.timing);
    if (!stats.ok()) return RuntimeFailure(r, start, stats.status());
    r.timing = *stats;
    for (double ms : stats->samples_ms) r.costs_s.push_back(ms / 1000.0);
  }

  if (options.check && state.comparer != nullptr && !data.trials.empty()) {
    if (Finished f = CheckResidentIntact(data, state, wrong, start, r)) return *f;
  }
  if (wrong) {
    return FinishItem(r, start, MeasureError::kWrongAnswer,
                      tf32x3_verdict.empty() ? MismatchMessage(r.check) : tf32x3_verdict);
  }
  if (!r.screened && (state.batch_best_ms == 0 || r.timing.median_ms < state.batch_best_ms)) {
    state.batch_best_ms = r.timing.median_ms;
  }
  return FinishItem(r, start, MeasureError::kNone, "");
}

// One candidate in the worker: load, check, time (on the resident buffers, or with per-candidate
// uploads where the worker has none). `gpu` was built in `compile_ms`; `tf32x3_gate`: the 3xTF32
// accuracy gate applies (GpuRequest). Returns MeasureResultToJson's text.
std::string WorkerItem(const MeasureOptions& options, const BatchData& data, WorkerState& state,
                       const codegen::GpuModule& gpu, double compile_ms, bool tf32x3_gate) {
  const auto start = Clock::now();
  MeasureResult r;
  r.compile_ms = compile_ms;
  auto finish = [&](MeasureError error, std::string message) {
    return FinishItem(r, start, error, std::move(message));
  };
  auto runtime_failure = [&](const absl::Status& status) {
    return RuntimeFailure(r, start, status);
  };

  absl::StatusOr<std::unique_ptr<LoadedGpuModule>> loaded =
      LoadedGpuModule::Load(*state.context, gpu);
  if (!loaded.ok()) {
    // Shared memory beyond the device's limit is a schedule the device cannot run; everything
    // else here is the driver's JIT rejecting the PTX.
    const MeasureError e = loaded.status().code() == absl::StatusCode::kInvalidArgument
                               ? MeasureError::kInvalidSchedule
                               : MeasureError::kCompileError;
    return finish(e, std::string(loaded.status().message()));
  }
  r.load_ms = (*loaded)->load_ms();
  r.kernels = (*loaded)->resources();
  if (state.resident != nullptr) {
    return ResidentCheckAndTime(options, data, state, gpu, **loaded, tf32x3_gate, start, r);
  }

  absl::StatusOr<ArgBuffers> buffers = AllocateArgs(*state.driver, gpu.args);
  if (!buffers.ok())
    return finish(MeasureError::kRuntimeError, std::string(buffers.status().message()));

  if (options.check) {
    const auto check_start = Clock::now();
    for (size_t t = 0; t < data.trials.size(); ++t) {
      const Trial& trial = data.trials[t];
      absl::Status launch_error;
      absl::StatusOr<ir::BufferMap> outputs =
          RunChecked(*state.driver, **loaded, gpu.args, *buffers, trial, &launch_error);
      if (!launch_error.ok()) return runtime_failure(launch_error);
      if (!outputs.ok()) return runtime_failure(outputs.status());
      for (const auto& [name, got] : *outputs) {
        auto expected = trial.expected.find(name);
        if (expected == trial.expected.end()) {
          return finish(MeasureError::kUnknown,
                        absl::StrCat("no reference for output '", name, "'"));
        }
        CompareOutputWithArbitration(
            *data.dag, data.dag->StageId(name), trial.inputs, got, expected->second,
            ToleranceFor(got.dtype, options.atol, options.rtol), ArbitrationOf(options),
            static_cast<int>(t), trial.distribution, &r.check);
        if (t == 0) {
          RecordSampled(
              state, name, [&](int64_t flat) { return got.data[flat]; }, &r.check);
        }
      }
      ++r.check.trials;
    }
    r.check_ms = MsSince(check_start);
    if (r.check.mismatches > 0) {
      return finish(MeasureError::kWrongAnswer, MismatchMessage(r.check));
    }
    if (tf32x3_gate) {
      if (std::string v = Tf32x3Verdict(r.check); !v.empty()) {
        return finish(MeasureError::kWrongAnswer, std::move(v));
      }
    }
  }

  // Timing on their own input buffers (random, never the check inputs, never zeros).
  std::vector<DeviceBuffer> timing_buffers;
  std::vector<cuda::CUdeviceptr> timing_args = buffers->ptrs;
  for (size_t i = 0; i < gpu.args.size(); ++i) {
    const codegen::KernelArg& arg = gpu.args[i];
    if (arg.kind != codegen::KernelArg::Kind::kInput) continue;
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(
        *state.driver, arg.buffer.NumElements() * StorageBytes(arg.buffer.dtype));
    if (!b.ok()) return finish(MeasureError::kRuntimeError, std::string(b.status().message()));
    absl::Status up =
        UploadInput(*state.driver, arg.buffer.name, data.timing_inputs, data.timing_sources, {&*b});
    if (absl::IsNotFound(up) || absl::IsOutOfRange(up)) {
      return finish(MeasureError::kUnknown, std::string(up.message()));
    }
    if (!up.ok()) return runtime_failure(up);
    timing_args[i] = b->ptr();
    timing_buffers.push_back(std::move(*b));
  }
  // The check's tensor maps hold the check buffers' addresses: the timing set gets its own.
  std::vector<DeviceBuffer> timing_maps;
  if (absl::Status bound = BindTensorMaps(*state.driver, gpu.args, &timing_args, &timing_maps);
      !bound.ok()) {
    return finish(MeasureError::kRuntimeError, std::string(bound.message()));
  }
  const LoadedGpuModule& module = **loaded;
  absl::StatusOr<TimingStats> stats = state.timer->Time(
      [&]() { return module.LaunchAll(timing_args, /*synchronize=*/false); }, options.timing);
  if (!stats.ok()) return runtime_failure(stats.status());
  r.timing = *stats;
  for (double ms : stats->samples_ms) r.costs_s.push_back(ms / 1000.0);
  return finish(MeasureError::kNone, "");
}

// The candidate's buffer params must be the task's (names, dtypes, shapes, order).
absl::Status CheckCandidateArgs(const ir::LoopNest& naive, const codegen::GpuModule& gpu) {
  size_t next = 0;
  for (const codegen::KernelArg& arg : gpu.args) {
    if (arg.kind == codegen::KernelArg::Kind::kScratch ||
        arg.kind == codegen::KernelArg::Kind::kTensorMap) {
      continue;
    }
    if (next >= naive.params.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("candidate has an extra parameter '", arg.buffer.name, "'"));
    }
    const ir::BufferDecl& want = naive.params[next];
    const bool want_input = static_cast<int>(next) < naive.num_inputs;
    if (arg.buffer.name != want.name || arg.buffer.dtype != want.dtype ||
        arg.buffer.shape != want.shape ||
        (arg.kind == codegen::KernelArg::Kind::kInput) != want_input) {
      return absl::InvalidArgumentError(absl::StrCat("candidate parameter ", next, " '",
                                                     arg.buffer.name, "' differs from the task's '",
                                                     want.name, "'"));
    }
    ++next;
  }
  if (next != naive.params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("candidate has ", next, " parameters, the task ", naive.params.size()));
  }
  return absl::OkStatus();
}

std::map<std::string, std::vector<std::byte>> PackAll(const ir::BufferMap& buffers) {
  std::map<std::string, std::vector<std::byte>> packed;
  for (const auto& [name, b] : buffers) packed[name] = PackBuffer(b);
  return packed;
}

// The result of a measured candidate from its worker outcome.
MeasureResult ResultOfOutcome(const WorkerItemOutcome& o, const BuildResult& c) {
  MeasureResult r;
  switch (o.kind) {
    case WorkerItemOutcome::Kind::kDone: {
      nlohmann::json j = nlohmann::json::parse(o.payload, nullptr, false);
      absl::StatusOr<MeasureResult> parsed =
          j.is_discarded() ? absl::InvalidArgumentError("not JSON") : MeasureResultFromJson(j);
      r = parsed.ok() ? *std::move(parsed)
                      : ErrorResult(MeasureError::kUnknown,
                                    absl::StrCat("bad worker payload: ", parsed.status().message()),
                                    c.compile_ms);
      break;
    }
    case WorkerItemOutcome::Kind::kCrashed:
      r = ErrorResult(MeasureError::kRuntimeError,
                      absl::StrCat("measurement worker crashed: ", o.message), c.compile_ms);
      break;
    case WorkerItemOutcome::Kind::kTimedOut:
      r = ErrorResult(MeasureError::kRunTimeout, o.message, c.compile_ms);
      break;
    case WorkerItemOutcome::Kind::kSetupFailed:
      r = ErrorResult(SetupFailureError(o.message), StripStatusCodeName(o.message), c.compile_ms);
      break;
  }
  r.compile_ms = c.compile_ms;
  if (r.run_wall_ms == 0) r.run_wall_ms = o.wall_ms;
  return r;
}

class CudaRunner : public Runner {
 public:
  CudaRunner(Target target, MeasureOptions options)
      : target_(std::move(target)), options_(std::move(options)) {}

  const Target& target() const override { return target_; }

  void SetScreenAboveMs(double ms) override { options_.screen_above_ms = ms > 0 ? ms : 0; }
  void SetTiming(int min_runs, double min_total_ms, double soak_ms) override {
    timing_override_ = {std::max(min_runs, 0), std::max(min_total_ms, 0.0), std::max(soak_ms, 0.0)};
  }

  std::vector<MeasureResult> Run(const ir::ComputeDAG& dag,
                                 const std::vector<BuildResult>& candidates) override {
    return RunStreaming(dag, candidates, nullptr);
  }

  std::vector<MeasureResult> RunStreaming(const ir::ComputeDAG& dag,
                                          const std::vector<BuildResult>& candidates,
                                          const ResultCallback& on_result) override {
    last_usage_ = RunUsage{};
    std::vector<MeasureResult> results(candidates.size());
    ResultReporter reporter(&results, on_result);
    absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(dag);
    std::vector<int> runnable;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const BuildResult& c = candidates[i];
      if (!c.build_status.ok()) {
        results[i] = BuildFailureResult(c);
      } else if (c.gpu_module == nullptr) {
        results[i] = ErrorResult(MeasureError::kUnknown, "candidate has no compiled GPU module",
                                 c.compile_ms);
      } else if (!naive.ok()) {
        results[i] =
            ErrorResult(MeasureError::kUnknown,
                        absl::StrCat("reference: ", naive.status().message()), c.compile_ms);
      } else if (absl::Status s = CheckCandidateArgs(*naive, *c.gpu_module); !s.ok()) {
        results[i] = ErrorResult(MeasureError::kUnknown, std::string(s.message()), c.compile_ms);
      } else {
        runnable.push_back(static_cast<int>(i));
        continue;
      }
      reporter.Final(i);
    }
    if (runnable.empty()) return results;

    // A new task (or the first) gets its data and a new worker; the same task keeps both.
    double prepare_ms = 0;
    absl::Status prepared = EnsureTask(dag, *naive, &prepare_ms);
    last_usage_.prepare_ms = prepare_ms + warm_usage_.prepare_ms;
    if (!prepared.ok()) {
      for (int i : runnable) {
        results[i] = ErrorResult(MeasureError::kUnknown, std::string(prepared.message()),
                                 candidates[i].compile_ms);
        reporter.Final(i);
      }
      return results;
    }

    ++batches_;
    std::vector<std::string> requests;
    for (int i : runnable) {
      const BuildResult& c = candidates[i];
      GpuRequest request;
      const TimingOverride& t = timing_override_;
      request.context = {batches_,   options_.screen_above_ms, c.compile_ms,
                         t.min_runs, t.min_total_ms,           t.soak_ms};
      // Under ieee, a 3xTF32 candidate must also be no less accurate than the float32 reference.
      request.tf32x3_gate = options_.precision == Fp32Precision::kIeee && c.nest != nullptr &&
                            UsesMmaKind(*c.nest, ir::MmaKind::kTF32x3);
      request.module = *c.gpu_module;
      requests.push_back(EncodeGpuRequest(request));
    }
    task_->worker->Run(requests, [&](int k, const WorkerItemOutcome& o) {
      const int i = runnable[k];
      results[i] = ResultOfOutcome(o, candidates[i]);
      reporter.Final(i);
    });
    const WorkerUsage& usage = task_->worker->last_run_usage();
    last_usage_.worker_setups = usage.setups + warm_usage_.worker_setups;
    last_usage_.setup_ms = usage.setup_ms + warm_usage_.setup_ms;
    last_usage_.item_ms = usage.item_ms;
    warm_usage_ = RunUsage{};
    return results;
  }

  // The task's data and a set-up worker ahead of the first Run; what it cost is reported by the
  // next Run that measures (a failed setup is dropped: that Run sets up again and reports why).
  void Prepare(const ir::ComputeDAG& dag) override {
    absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(dag);
    if (!naive.ok()) return;
    double prepare_ms = 0;
    if (!EnsureTask(dag, *naive, &prepare_ms).ok()) return;
    warm_usage_.prepare_ms += prepare_ms;
    const Clock::time_point setup_start = Clock::now();
    if (task_->worker->Warm()) {
      ++warm_usage_.worker_setups;
      warm_usage_.setup_ms += MsSince(setup_start);
    }
  }

  RunUsage last_run_usage() const override { return last_usage_; }

 private:
  // Makes task_ the task of `dag` (its data built here, its KeptWorker not yet forked) unless it
  // already is; *prepare_ms: the time of a new task's data, 0 for a kept one. A new task drops
  // what Prepare spent on the one before. Errors: the task data's (PrepareTask).
  absl::Status EnsureTask(const ir::ComputeDAG& dag, const ir::LoopNest& naive,
                          double* prepare_ms) {
    *prepare_ms = 0;
    const std::string key = dag.WorkloadKey();
    if (task_ != nullptr && task_->key == key) return absl::OkStatus();
    task_.reset();
    warm_usage_ = RunUsage{};
    const Clock::time_point prepare_start = Clock::now();
    auto task = std::make_unique<CudaTask>();
    task->key = key;
    task->dag = dag;
    task->data.dag = &task->dag;
    task->data.naive_params = naive;
    absl::Status prepared = PrepareTask(task->dag, &task->data);
    *prepare_ms = MsSince(prepare_start);
    RETURN_IF_ERROR(prepared);
    WorkerOptions worker_options;
    worker_options.item_timeout_ms = options_.run_timeout_ms;
    worker_options.setup_timeout_ms = options_.setup_timeout_ms;
    worker_options.memory_limit_mb = 0;  // CUDA reserves large virtual ranges
    CudaTask* t = task.get();
    task->worker = std::make_unique<KeptWorker>(
        [this, t]() { return WorkerSetupAndSample(options_, &t->data, &t->state); },
        [this, t](const std::string& request) { return MeasureRequest(*t, request); },
        worker_options);
    task_ = std::move(task);
    return absl::OkStatus();
  }

  // Runs in the worker per candidate: decodes the request, then WorkerItem under the batch's
  // screen; MeasureResultToJson's text.
  std::string MeasureRequest(CudaTask& task, const std::string& bytes) const {
    absl::StatusOr<GpuRequest> request = DecodeGpuRequest(bytes);
    if (!request.ok()) {
      return MeasureResultToJson(
                 ErrorResult(MeasureError::kUnknown, std::string(request.status().message()), 0))
          .dump();
    }
    if (request->context.batch != task.state.batch) {
      task.state.batch = request->context.batch;
      task.state.batch_best_ms = 0;
    }
    MeasureOptions options = options_;
    ApplyRequestContext(request->context, &options);
    // A held final timing's longer run timeout (ApplyRequestContext) restarts the item's clock.
    if (options.run_timeout_ms != options_.run_timeout_ms) {
      BeginWorkerItemPhase("run", options.run_timeout_ms);
    }
    return WorkerItem(options, task.data, task.state, request->module, request->context.compile_ms,
                      request->tf32x3_gate);
  }

  // Check trials (inputs and, for small tasks, the interpreter's outputs), timing inputs and,
  // for large tasks, the naive GPU kernel: once per task. The seeds are those the first batch of
  // a runner that drew fresh inputs per batch used.
  absl::Status PrepareTask(const ir::ComputeDAG& dag, BatchData* data) {
    constexpr uint64_t batch = 0;
    const bool on_demand = CheckInputsOnDemand(dag, options_, target_);
    data->inputs_on_demand = on_demand;
    if (options_.check) {
      const bool on_gpu = NaiveOps(dag) > options_.interpreter_reference_max_ops;
      if (on_gpu) {
        ASSIGN_OR_RETURN(data->naive_module, NaiveModule(dag));
      }
      data->magnitude_module = MagnitudeModule(dag);
      for (int t = 0; t < options_.check_trials; ++t) {
        Trial trial;
        trial.distribution = options_.distributions[t % options_.distributions.size()];
        trial.seed = DeriveSeed(options_.seed, batch, static_cast<uint64_t>(t));
        if (on_demand) {
          trial.inputs = MakeGeneratedCheckInputs(dag, trial.distribution, trial.seed);
        } else {
          trial.inputs = MakeCheckInputs(dag, trial.distribution, trial.seed);
          trial.packed = PackAll(trial.inputs);
        }
        if (!on_gpu) {
          absl::StatusOr<ir::BufferMap> expected = InterpreterReference(dag, trial.inputs);
          if (!expected.ok()) {
            return absl::Status(expected.status().code(),
                                absl::StrCat("reference: ", expected.status().message()));
          }
          trial.expected = *std::move(expected);
          if (t == 0) {
            // The float32 naive program's values: the float32 reference error of the sampled
            // points (the interpreter's reference above is float64-accurate).
            absl::StatusOr<ir::BufferMap> native = ir::RunReference(dag, trial.inputs);
            if (native.ok()) data->native_first = *std::move(native);
          }
        }
        data->trials.push_back(std::move(trial));
      }
    }
    // Timing inputs: their own seed, uniform in [-1, 1) (never zeros).
    const uint64_t timing_seed = DeriveSeed(options_.seed, batch, 0xFFFFFFFFull);
    if (on_demand) {
      data->timing_sources =
          MakeGeneratedCheckInputs(dag, CheckDistribution::kUniformSymmetric, timing_seed);
    } else {
      data->timing_inputs =
          PackAll(MakeCheckInputs(dag, CheckDistribution::kUniformSymmetric, timing_seed));
    }
    return absl::OkStatus();
  }

  // The naive GPU kernel of `dag`, compiled once per workload.
  absl::StatusOr<std::shared_ptr<const codegen::GpuModule>> NaiveModule(const ir::ComputeDAG& dag) {
    const std::string key = dag.WorkloadKey();
    if (auto it = naive_modules_.find(key); it != naive_modules_.end()) return it->second;
    ASSIGN_OR_RETURN(codegen::GpuModule module, BuildGpuReference(dag, target_));
    auto shared = std::make_shared<const codegen::GpuModule>(std::move(module));
    naive_modules_[key] = shared;
    return shared;
  }

  // The magnitude kernel of `dag`, compiled once per workload; null for a DAG without float outputs
  // and, with a warning on stderr, when it does not compile (the device compare then has no
  // cancellation allowance: stricter, and the float64 arbitration still judges its mismatches).
  std::shared_ptr<const codegen::GpuModule> MagnitudeModule(const ir::ComputeDAG& dag) {
    const std::string key = dag.WorkloadKey();
    if (auto it = magnitude_modules_.find(key); it != magnitude_modules_.end()) return it->second;
    std::shared_ptr<const codegen::GpuModule> shared;
    bool has_float_output = false;
    for (int id : dag.output_ids()) has_float_output |= ir::IsFloat(dag.stage(id).dtype());
    if (has_float_output) {
      absl::StatusOr<codegen::GpuModule> module = BuildGpuMagnitudes(dag, target_);
      if (module.ok()) {
        shared = std::make_shared<const codegen::GpuModule>(*std::move(module));
      } else {
        std::fprintf(stderr,
                     "warning: workload %s: no magnitude kernel (%s); the check runs "
                     "without the cancellation allowance\n",
                     key.c_str(), std::string(module.status().message()).c_str());
      }
    }
    magnitude_modules_[key] = shared;
    return shared;
  }

  Target target_;
  MeasureOptions options_;
  TimingOverride timing_override_;  // SetTiming's
  uint64_t batches_ = 0;  // Run calls with candidates to run (the requests' batch numbers)
  RunUsage last_usage_;
  RunUsage warm_usage_;  // what Prepare spent ahead of the next Run (its task's data, its setup)
  std::map<std::string, std::shared_ptr<const codegen::GpuModule>> naive_modules_;
  std::map<std::string, std::shared_ptr<const codegen::GpuModule>> magnitude_modules_;
  // Declared last, so its worker ends before the rest of the runner.
  std::unique_ptr<CudaTask> task_;
};

}  // namespace

MeasureResult BuildFailureResult(const BuildResult& candidate) {
  const absl::Status& s = candidate.build_status;
  const std::string message(s.message());
  MeasureError e = MeasureError::kCompileError;
  if (s.code() == absl::StatusCode::kDeadlineExceeded ||
      absl::StartsWith(message, "compile_timeout")) {
    e = MeasureError::kCompileTimeout;
  } else if (absl::StartsWith(message, "invalid_schedule")) {
    e = MeasureError::kInvalidSchedule;
  }
  return ErrorResult(e, message, candidate.compile_ms);
}

std::string StripStatusCodeName(const std::string& message) {
  std::string text = message;
  // KeptWorker reports a setup's error as "setup failed: <Status::ToString()>".
  constexpr char kSetupPrefix[] = "setup failed: ";
  if (absl::StartsWith(text, kSetupPrefix)) text = text.substr(sizeof(kSetupPrefix) - 1);
  size_t i = 0;
  while (i < text.size() && ((text[i] >= 'A' && text[i] <= 'Z') || text[i] == '_')) ++i;
  if (i > 0 && text.compare(i, 2, ": ") == 0) return text.substr(i + 2);
  return text;
}

MeasureError SetupFailureError(const std::string& message) {
  const std::string text = StripStatusCodeName(message);
  if (absl::StartsWith(text, "no CUDA driver found") ||
      absl::StartsWith(text, "no CUDA device found")) {
    return MeasureError::kNoDevice;
  }
  if (absl::StartsWith(text, "reference")) return MeasureError::kUnknown;
  return MeasureError::kRuntimeError;
}

std::unique_ptr<Runner> NewCudaRunnerWithoutProbe(const Target& target,
                                                  const MeasureOptions& options) {
  return std::make_unique<CudaRunner>(target, options);
}

}  // namespace cuda_internal

absl::StatusOr<std::unique_ptr<Runner>> CreateCudaRunner(const Target& target,
                                                         const MeasureOptions& options) {
  if (target.kind != TargetKind::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cuda measurer needs a cuda target, got '", target.ToString(), "'"));
  }
  RETURN_IF_ERROR(ValidateMeasureOptions(options));
  absl::StatusOr<DeviceInfo> info = ProbeCudaDevice(options.device, options.setup_timeout_ms);
  if (!info.ok()) {
    if (info.status().code() == absl::StatusCode::kFailedPrecondition) return info.status();
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device found: ", info.status().message()));
  }
  return cuda_internal::NewCudaRunnerWithoutProbe(target, options);
}

}  // namespace tilesearch::measure
