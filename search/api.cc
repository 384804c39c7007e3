#include "search/api.h"

#include <chrono>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "measure/checker.h"
#include "measure/loaded_module.h"
#include "measure/tensor_map_args.h"
#include "runtime/cuda_device.h"
#include "runtime/cuda_driver.h"
#include "search/log_io.h"
#include "search/predict.h"

namespace tilesearch {
namespace {

std::string Describe(const ir::BufferDecl& b) {
  return absl::StrCat(ir::TypeName(b.dtype), " [", absl::StrJoin(b.shape, ", "), "]");
}
std::string Describe(const ir::HostBuffer& b) {
  return absl::StrCat(ir::TypeName(b.dtype), " [", absl::StrJoin(b.shape, ", "), "]");
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Tasks and targets.

absl::StatusOr<Task> Task::Create(const std::string& op, std::vector<std::vector<int64_t>> shapes,
                                  const Target& target, ir::ScalarType dtype,
                                  std::map<std::string, std::string> attrs) {
  Task task;
  task.workload.op = op;
  task.workload.args.shapes = std::move(shapes);
  task.workload.args.dtype = dtype;
  task.workload.args.attrs = std::move(attrs);
  task.target = target;
  absl::StatusOr<ir::ComputeDAG> dag = task.workload.Build();
  if (!dag.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("workload ", task.workload.ToString(), ": ",
                                                   std::string(dag.status().message())));
  }
  return task;
}

absl::StatusOr<Task> Task::FromWorkload(schedule::Workload workload, const Target& target) {
  Task task;
  task.workload = std::move(workload);
  task.target = target;
  absl::StatusOr<ir::ComputeDAG> dag = task.workload.Build();
  if (!dag.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("workload ", task.workload.ToString(), ": ",
                                                   std::string(dag.status().message())));
  }
  return task;
}

std::string Task::ToString() const {
  return absl::StrCat(workload.ToString(), " on ", target.ToString());
}

Target DefaultTarget() {
  // Probed in a forked child: this process must not initialize CUDA before forking workers.
  absl::StatusOr<runtime::DeviceInfo> device = runtime::ProbeCudaDevice(0);
  if (device.ok()) return runtime::TargetFromDevice(*device);
  return Target::HostCpu();
}

absl::StatusOr<Target> TargetFromString(const std::string& text) {
  if (text == "auto") return DefaultTarget();
  return ParseTarget(text);
}

// ---------------------------------------------------------------------------------------------
// Tuning and replay.

absl::StatusOr<TuneResult> Tune(const Task& task, const TuneOptions& options) {
  return search::Tune(task.workload, task.target, options);
}

absl::StatusOr<HistoryBest> ApplyHistoryBest(const std::string& log_path, const Task& task,
                                             measure::Fp32Precision precision) {
  return search::ApplyHistoryBest(log_path, task.workload, task.target, precision);
}

absl::StatusOr<HistoryBest> ApplyHistoryBestOrPredict(const std::string& log_path, const Task& task,
                                                      costmodel::CostModel* model) {
  absl::StatusOr<HistoryBest> best = ApplyHistoryBest(log_path, task);
  if (best.ok() || best.status().code() != absl::StatusCode::kNotFound) return best;
  absl::StatusOr<search::LogContents> contents = search::ReadLog(log_path);
  if (!contents.ok()) return best;  // the log itself is missing: ApplyHistoryBest said so
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, task.workload.Build());
  absl::StatusOr<search::PredictedSchedule> p =
      search::PredictSchedule(dag, task.workload, task.target, contents->records, model);
  if (!p.ok()) {
    return absl::Status(p.status().code(),
                        absl::StrCat(p.status().message(), " (", best.status().message(), ")"));
  }
  HistoryBest out;
  out.record.workload = task.workload;
  out.record.workload_key = dag.WorkloadKey();
  out.record.target = task.target;
  out.record.steps = p->state.steps();
  out.dag = std::move(dag);
  out.state = std::move(p->state);
  out.warnings = std::move(contents->warnings);
  out.predicted = true;
  out.prediction = std::move(p->origin);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Kernel.

struct Kernel::Impl {
  Target target;
  std::vector<codegen::KernelArg> params;
  double last_run_ms = 0;
  // cpu
  std::unique_ptr<codegen::HostKernel> host;
  // cuda (destroyed in reverse order: buffers and module before the context)
  std::unique_ptr<runtime::CudaContext> context;
  std::unique_ptr<measure::LoadedGpuModule> module;
  std::vector<runtime::DeviceBuffer> device_buffers;  // every argument but the tensor maps
  std::vector<runtime::DeviceBuffer> tensor_maps;     // encoded over device_buffers once
  std::vector<runtime::cuda::CUdeviceptr> device_args;

  absl::Status RunHost(const std::vector<ir::HostBuffer*>& buffers);
  absl::Status RunCuda(const std::vector<ir::HostBuffer*>& buffers);
};

Kernel::Kernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Kernel::Kernel(Kernel&&) noexcept = default;
Kernel& Kernel::operator=(Kernel&&) noexcept = default;
Kernel::~Kernel() = default;

absl::StatusOr<Kernel> Kernel::Load(const KernelArtifact& artifact, int device) {
  auto impl = std::make_unique<Impl>();
  impl->target = artifact.record.target;
  impl->params.assign(artifact.args.begin(), artifact.args.begin() + artifact.num_params);
  if (!artifact.is_gpu()) {
    ASSIGN_OR_RETURN(impl->host, codegen::CompileForHost(artifact.lowered.nest));
    return Kernel(std::move(impl));
  }
  CHECK(artifact.gpu != nullptr) << "cuda artifact '" << artifact.name << "' has no module";
  ASSIGN_OR_RETURN(const runtime::CudaDriver* driver, runtime::CudaDriver::Load());
  ASSIGN_OR_RETURN(impl->context, runtime::CudaContext::Create(*driver, device));
  ASSIGN_OR_RETURN(impl->module, measure::LoadedGpuModule::Load(*impl->context, *artifact.gpu));
  for (const codegen::KernelArg& arg : artifact.gpu->args) {
    runtime::DeviceBuffer buffer;
    if (arg.kind != codegen::KernelArg::Kind::kTensorMap) {
      ASSIGN_OR_RETURN(buffer, runtime::DeviceBuffer::Allocate(*driver, arg.bytes()));
    }
    impl->device_args.push_back(buffer.ptr());
    impl->device_buffers.push_back(std::move(buffer));
  }
  // The buffers stay for the kernel's lifetime, so its tensor maps are encoded once.
  RETURN_IF_ERROR(
      measure::BindTensorMaps(*driver, artifact.gpu->args, &impl->device_args, &impl->tensor_maps));
  return Kernel(std::move(impl));
}

absl::Status Kernel::Run(const std::vector<ir::HostBuffer*>& buffers) {
  const std::vector<codegen::KernelArg>& params = impl_->params;
  if (buffers.size() != params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the kernel takes ", params.size(), " buffers, got ", buffers.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const ir::BufferDecl& want = params[i].buffer;
    if (buffers[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", i, " ('", want.name, "') is null"));
    }
    const ir::HostBuffer& got = *buffers[i];
    if (got.dtype != want.dtype || got.shape != want.shape ||
        static_cast<int64_t>(got.data.size()) != want.NumElements()) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer ", i, " ('", want.name, "') is ", Describe(got), " with ",
                       got.data.size(), " values, the kernel expects ", Describe(want)));
    }
  }
  return impl_->host != nullptr ? impl_->RunHost(buffers) : impl_->RunCuda(buffers);
}

absl::Status Kernel::Impl::RunHost(const std::vector<ir::HostBuffer*>& buffers) {
  // PackBuffer's vectors come from operator new: 16-byte aligned, as the kernel requires.
  std::vector<std::vector<std::byte>> packed;
  std::vector<void*> pointers;
  packed.reserve(buffers.size());
  for (const ir::HostBuffer* b : buffers) {
    packed.push_back(measure::PackBuffer(*b));
    pointers.push_back(packed.back().data());
  }
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(host->Run(pointers));
  last_run_ms = MsSince(start);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (params[i].kind != codegen::KernelArg::Kind::kOutput) continue;
    RETURN_IF_ERROR(measure::UnpackBuffer(packed[i].data(), packed[i].size(), buffers[i]));
  }
  return absl::OkStatus();
}

absl::Status Kernel::Impl::RunCuda(const std::vector<ir::HostBuffer*>& buffers) {
  RETURN_IF_ERROR(context->MakeCurrent());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (params[i].kind != codegen::KernelArg::Kind::kInput) continue;
    const std::vector<std::byte> bytes = measure::PackBuffer(*buffers[i]);
    RETURN_IF_ERROR(device_buffers[i].Upload(bytes.data(), static_cast<int64_t>(bytes.size())));
  }
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(module->LaunchAll(device_args, /*synchronize=*/true));
  last_run_ms = MsSince(start);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (params[i].kind != codegen::KernelArg::Kind::kOutput) continue;
    std::vector<std::byte> bytes(static_cast<size_t>(params[i].bytes()));
    RETURN_IF_ERROR(device_buffers[i].Download(bytes.data(), static_cast<int64_t>(bytes.size())));
    RETURN_IF_ERROR(measure::UnpackBuffer(bytes.data(), bytes.size(), buffers[i]));
  }
  return absl::OkStatus();
}

const std::vector<codegen::KernelArg>& Kernel::params() const { return impl_->params; }

std::vector<ir::HostBuffer> Kernel::MakeBuffers() const {
  std::vector<ir::HostBuffer> out;
  for (const codegen::KernelArg& p : impl_->params) {
    out.push_back(ir::HostBuffer::Zeros(p.buffer.dtype, p.buffer.shape));
  }
  return out;
}

double Kernel::last_run_ms() const { return impl_->last_run_ms; }

const Target& Kernel::target() const { return impl_->target; }

}  // namespace tilesearch
