#include "search/graph_executor.h"

#include <sys/sysinfo.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "measure/builder.h"
#include "measure/checker.h"
#include "measure/loaded_module.h"
#include "measure/tensor_map_args.h"
#include "runtime/cuda_device.h"
#include "runtime/cuda_driver.h"
#include "schedule/lower.h"
#include "schedule/naive_gpu.h"
#include "schedule/state.h"
#include "search/log_io.h"
#include "search/replay.h"

namespace tilesearch::search {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Bytes written before each timed cpu run when flushing: larger than the last-level cache of the
// machines we run on (the host measurer's amount).
constexpr size_t kHostFlushBytes = size_t{64} << 20;

// 64-byte aligned, zero-initialized host bytes (kernels need 16).
class AlignedBytes {
 public:
  /// Errors: kResourceExhausted when the memory cannot be allocated.
  static absl::StatusOr<std::unique_ptr<AlignedBytes>> Create(size_t size) {
    const size_t rounded = std::max<size_t>(64, (size + 63) / 64 * 64);
    auto* data =
        rounded < size ? nullptr : static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size, " bytes of host memory"));
    }
    std::memset(data, 0, rounded);
    return std::unique_ptr<AlignedBytes>(new AlignedBytes(data, size));
  }
  ~AlignedBytes() { std::free(data_); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  AlignedBytes(std::byte* data, size_t size) : size_(size), data_(data) {}
  size_t size_;
  std::byte* data_;
};

// Bytes of memory this machine has (RAM + swap; 0 when unknown): host buffers beyond it would
// only be killed by the kernel's out-of-memory handler while being zeroed.
int64_t HostMemoryBytes() {
  struct sysinfo info {};
  if (sysinfo(&info) != 0) return 0;
  return static_cast<int64_t>(info.totalram + info.totalswap) * static_cast<int64_t>(info.mem_unit);
}

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.2f GiB", bytes / double(int64_t{1} << 30));
}

std::string Describe(ir::ScalarType dtype, const std::vector<int64_t>& shape) {
  return absl::StrCat(ir::TypeName(dtype), " [", absl::StrJoin(shape, ", "), "]");
}

std::string TaskLabel(int index, const GraphTask& task) {
  return absl::StrCat("task ", index, " ('", task.name, "')");
}

absl::Status Prefixed(const std::string& prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", std::string(status.message())));
}

int64_t ValueBytes(const ir::GraphNode& node) {
  int64_t n = 1;
  for (int64_t e : node.shape) n *= e;
  return n * measure::StorageBytes(node.dtype);
}

// The unscheduled program of `dag` for `target`: the initial state on the cpu, the naive GPU
// schedule (the measurer's reference kernels) on cuda.
absl::StatusOr<schedule::State> UnscheduledState(const ir::ComputeDAG& dag, const Target& target) {
  if (target.is_gpu()) return schedule::NaiveGpuSchedule(dag, target);
  return schedule::State::Initial(dag);
}

// Checks that the kernel's parameters (the DAG's placeholders, then its one output) are the
// values every subgraph of task `t` binds to them.
absl::Status CheckBindings(const ir::Graph& graph, const GraphPartition& partition, int t,
                           const ir::LoopNest& nest) {
  const GraphTask& task = partition.tasks[t];
  for (int s : task.subgraphs) {
    const Subgraph& sub = partition.subgraphs[s];
    std::vector<int> bound = sub.inputs;
    bound.push_back(sub.output);
    if (nest.params.size() != bound.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          TaskLabel(t, task), ": the kernel takes ", nest.params.size(), " parameters, subgraph ",
          s, " binds ", bound.size(), " values (", sub.inputs.size(),
          " inputs and its output); a fused task needs one output"));
    }
    for (size_t i = 0; i < bound.size(); ++i) {
      const ir::BufferDecl& p = nest.params[i];
      const ir::GraphNode& node = graph.node(bound[i]);
      if (p.dtype != node.dtype || p.shape != node.shape) {
        return absl::FailedPreconditionError(
            absl::StrCat(TaskLabel(t, task), ": kernel parameter ", i, " ('", p.name, "') is ",
                         Describe(p.dtype, p.shape), ", subgraph ", s, " binds node ", node.id,
                         " '", node.name, "' of ", Describe(node.dtype, node.shape)));
      }
    }
  }
  return absl::OkStatus();
}

// Checks that `partition` refers to nodes of `graph` and to its own tasks.
absl::Status CheckPartition(const ir::Graph& graph, const GraphPartition& partition) {
  if (partition.subgraphs.empty() || partition.tasks.empty()) {
    return absl::InvalidArgumentError("the partition has no subgraphs");
  }
  auto bad_node = [&](int id) { return id < 0 || id >= graph.num_nodes(); };
  for (size_t s = 0; s < partition.subgraphs.size(); ++s) {
    const Subgraph& sub = partition.subgraphs[s];
    bool bad = bad_node(sub.output) || sub.task < 0 ||
               sub.task >= static_cast<int>(partition.tasks.size());
    for (int id : sub.inputs) bad = bad || bad_node(id);
    if (bad) {
      return absl::InvalidArgumentError(absl::StrCat(
          "subgraph ", s, " refers to a node or task outside the graph (", graph.num_nodes(),
          " nodes) or the partition (", partition.tasks.size(), " tasks): not its partition"));
    }
  }
  for (size_t t = 0; t < partition.tasks.size(); ++t) {
    if (partition.tasks[t].subgraphs.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("task ", t, " has no subgraph"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* GraphReferenceName(GraphReference reference) {
  switch (reference) {
    case GraphReference::kInterpreter:
      return "interpreter";
    case GraphReference::kUnscheduled:
      return "unscheduled";
  }
  return "unknown";
}

std::string GraphTiming::ToString() const {
  std::string out = absl::StrFormat("%-4s %-28s %6s %12s %14s %7s\n", "task", "name", "weight",
                                    "ms/call", "ms/execution", "share");
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskTiming& t = tasks[i];
    absl::StrAppendFormat(&out, "%-4d %-28s %6d %12.4f %14.4f %6.1f%%\n", static_cast<int>(i),
                          t.name, t.weight, t.ms_per_call, t.total_ms, 100 * t.share);
  }
  absl::StrAppendFormat(&out, "end to end: %.4f ms median (p10 %.4f, p90 %.4f, %d runs)\n",
                        end_to_end.median_ms, end_to_end.p10_ms, end_to_end.p90_ms,
                        end_to_end.runs);
  absl::StrAppendFormat(&out, "sum of tasks: %.4f ms\n", sum_of_tasks_ms);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Impl.

struct GraphExecutor::Impl {
  ir::Graph graph;
  GraphPartition partition;
  Target target;
  GraphExecutorOptions options;
  std::vector<ExecutorTask> tasks;
  std::vector<std::string> log_warnings;

  // Value buffers: node_buffer[node id] indexes buffer_nodes / the buffers, or -1.
  std::vector<int> node_buffer;
  std::vector<int> buffer_nodes;
  int64_t total_bytes = 0;
  bool inputs_set = false;
  bool ran = false;

  // cpu
  std::vector<std::unique_ptr<codegen::HostKernel>> host_kernels;  // per task
  std::vector<std::unique_ptr<AlignedBytes>> host_buffers;         // per value buffer
  std::vector<std::vector<void*>> host_args;                       // per subgraph
  std::unique_ptr<AlignedBytes> host_flush;
  unsigned char flush_fill = 0;

  // cuda (destroyed in reverse order: everything on the device before the context)
  std::unique_ptr<runtime::CudaContext> context;
  std::vector<runtime::DeviceBuffer> device_buffers;               // per value buffer
  std::vector<std::unique_ptr<measure::LoadedGpuModule>> modules;  // per task
  std::vector<std::vector<runtime::DeviceBuffer>> scratch;         // per task (empty: a map)
  std::vector<std::vector<codegen::KernelArg>> module_args;        // per task
  // TMA tensor maps, encoded over the buffers of each subgraph that runs a task with them.
  std::vector<runtime::DeviceBuffer> tensor_maps;
  std::vector<std::vector<runtime::cuda::CUdeviceptr>> device_args;  // per subgraph
  std::unique_ptr<runtime::GpuTimer> timer;

  ~Impl() {
    // Device objects go before the context releases the device, with the context current (another
    // executor's context, e.g. Check's reference, unbinds it when it is destroyed).
    if (context != nullptr) context->MakeCurrent().IgnoreError();
    timer.reset();
    device_args.clear();
    tensor_maps.clear();
    scratch.clear();
    modules.clear();
    device_buffers.clear();
  }

  absl::Status Init(const ir::Graph& g, const GraphPartition& p, const Target& t,
                    const GraphExecutorOptions& o);
  absl::Status AddTask(int t, const ir::ComputeDAG& dag, const schedule::State& state,
                       const Target& kernel_target);
  absl::Status AllocateBuffers();
  absl::Status RunSubgraph(int s);
  absl::Status RunAll();
};

absl::Status GraphExecutor::Impl::Init(const ir::Graph& g, const GraphPartition& p, const Target& t,
                                       const GraphExecutorOptions& o) {
  RETURN_IF_ERROR(g.Validate());
  RETURN_IF_ERROR(CheckPartition(g, p));
  graph = g;
  partition = p;
  target = t;
  options = o;
  for (const GraphTask& task : partition.tasks) {
    ExecutorTask e;
    e.name = task.name;
    e.workload_key = task.workload_key;
    e.weight = task.weight;
    e.flops = task.dag.Flops();
    tasks.push_back(std::move(e));
  }
  if (target.is_gpu()) {
    // First, so that a machine without a driver fails before anything is compiled.
    ASSIGN_OR_RETURN(const runtime::CudaDriver* driver, runtime::CudaDriver::Load());
    ASSIGN_OR_RETURN(context, runtime::CudaContext::Create(*driver, options.device));
    modules.resize(partition.tasks.size());
    scratch.resize(partition.tasks.size());
    module_args.resize(partition.tasks.size());
  } else {
    host_kernels.resize(partition.tasks.size());
  }
  return absl::OkStatus();
}

absl::Status GraphExecutor::Impl::AddTask(int t, const ir::ComputeDAG& dag,
                                          const schedule::State& state,
                                          const Target& kernel_target) {
  const std::string label = TaskLabel(t, partition.tasks[t]);
  const Clock::time_point start = Clock::now();
  absl::StatusOr<schedule::LoweredKernel> lowered = schedule::Lower(dag, state, kernel_target);
  if (!lowered.ok()) {
    return Prefixed(absl::StrCat(label, ": cannot lower for ", kernel_target.ToString()),
                    lowered.status());
  }
  RETURN_IF_ERROR(CheckBindings(graph, partition, t, lowered->nest));
  if (!target.is_gpu()) {
    codegen::HostCompileOptions compile;
    compile.num_threads = options.host_threads;
    absl::StatusOr<std::unique_ptr<codegen::HostKernel>> kernel =
        codegen::CompileForHost(lowered->nest, compile);
    if (!kernel.ok()) return Prefixed(label + ": compile", kernel.status());
    host_kernels[t] = *std::move(kernel);
    tasks[t].num_kernels = 1;
  } else {
    measure::BuildInput input;
    input.lowered = std::make_shared<const schedule::LoweredKernel>(*std::move(lowered));
    const measure::BuildResult built = measure::Builder(kernel_target).BuildInProcess(input);
    if (!built.build_status.ok()) return Prefixed(label + ": compile", built.build_status);
    const codegen::GpuModule* module = built.gpu_module.get();
    absl::StatusOr<std::unique_ptr<measure::LoadedGpuModule>> loaded =
        measure::LoadedGpuModule::Load(*context, *module);
    if (!loaded.ok()) return Prefixed(label + ": load", loaded.status());
    modules[t] = *std::move(loaded);
    module_args[t] = module->args;
    for (size_t i = input.lowered->nest.params.size(); i < module->args.size(); ++i) {
      if (module->args[i].kind == codegen::KernelArg::Kind::kTensorMap) {
        scratch[t].emplace_back();  // encoded per subgraph (AllocateBuffers)
        continue;
      }
      absl::StatusOr<runtime::DeviceBuffer> buffer =
          runtime::DeviceBuffer::Allocate(context->driver(), module->args[i].bytes());
      if (!buffer.ok()) return Prefixed(label + ": scratch", buffer.status());
      scratch[t].push_back(*std::move(buffer));
    }
    tasks[t].num_kernels = static_cast<int>(module->kernels.size());
  }
  tasks[t].compile_ms = MsSince(start);
  return absl::OkStatus();
}

absl::Status GraphExecutor::Impl::AllocateBuffers() {
  // The values' bytes first: a graph whose buffers cannot fit in host memory is an error before
  // anything is allocated (cuda: the driver's allocation errors say so).
  if (!target.is_gpu()) {
    std::vector<bool> seen(graph.num_nodes(), false);
    int64_t needed = 0;
    for (const Subgraph& sub : partition.subgraphs) {
      std::vector<int> ids = sub.inputs;
      ids.push_back(sub.output);
      for (int id : ids) {
        if (seen[id]) continue;
        seen[id] = true;
        needed += ValueBytes(graph.node(id));
      }
    }
    const int64_t available = HostMemoryBytes();
    if (available > 0 && needed > available) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the graph's buffers need ", GiB(needed), " (", needed,
                       " bytes) of host memory, more than this machine's ", GiB(available),
                       " (RAM + swap); use a smaller --batch"));
    }
  }
  node_buffer.assign(graph.num_nodes(), -1);
  auto add = [&](int id) -> absl::Status {
    if (node_buffer[id] >= 0) return absl::OkStatus();
    const ir::GraphNode& node = graph.node(id);
    const int64_t bytes = ValueBytes(node);
    node_buffer[id] = static_cast<int>(buffer_nodes.size());
    buffer_nodes.push_back(id);
    total_bytes += bytes;
    if (target.is_gpu()) {
      absl::StatusOr<runtime::DeviceBuffer> buffer =
          runtime::DeviceBuffer::Allocate(context->driver(), bytes);
      if (!buffer.ok()) {
        return Prefixed(absl::StrCat("buffer of node ", id, " '", node.name, "'"), buffer.status());
      }
      device_buffers.push_back(*std::move(buffer));
    } else {
      absl::StatusOr<std::unique_ptr<AlignedBytes>> buffer =
          AlignedBytes::Create(static_cast<size_t>(bytes));
      if (!buffer.ok()) {
        return Prefixed(absl::StrCat("buffer of node ", id, " '", node.name, "'"), buffer.status());
      }
      host_buffers.push_back(*std::move(buffer));
    }
    return absl::OkStatus();
  };
  for (const Subgraph& sub : partition.subgraphs) {
    for (int id : sub.inputs) RETURN_IF_ERROR(add(id));
    RETURN_IF_ERROR(add(sub.output));
  }
  for (int id : graph.outputs()) {
    if (node_buffer[id] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output node ", id, " '", graph.node(id).name, "' is no subgraph's output"));
    }
  }
  // Every subgraph's argument list, bound once (tensor maps encoded over its own buffers).
  for (const Subgraph& sub : partition.subgraphs) {
    std::vector<int> bound = sub.inputs;
    bound.push_back(sub.output);
    if (target.is_gpu()) {
      std::vector<runtime::cuda::CUdeviceptr> args;
      for (int id : bound) args.push_back(device_buffers[node_buffer[id]].ptr());
      for (const runtime::DeviceBuffer& b : scratch[sub.task]) args.push_back(b.ptr());
      absl::Status maps =
          measure::BindTensorMaps(context->driver(), module_args[sub.task], &args, &tensor_maps);
      if (!maps.ok()) {
        return Prefixed(absl::StrCat("subgraph ", device_args.size(), " (",
                                     TaskLabel(sub.task, partition.tasks[sub.task]), ")"),
                        maps);
      }
      device_args.push_back(std::move(args));
    } else {
      std::vector<void*> args;
      for (int id : bound) args.push_back(host_buffers[node_buffer[id]]->data());
      host_args.push_back(std::move(args));
    }
  }
  return absl::OkStatus();
}

absl::Status GraphExecutor::Impl::RunSubgraph(int s) {
  const int t = partition.subgraphs[s].task;
  absl::Status status = target.is_gpu()
                            ? modules[t]->LaunchAll(device_args[s], /*synchronize=*/false)
                            : host_kernels[t]->Run(host_args[s]);
  if (!status.ok()) {
    return Prefixed(absl::StrCat("subgraph ", s, " (", TaskLabel(t, partition.tasks[t]), ")"),
                    status);
  }
  return absl::OkStatus();
}

absl::Status GraphExecutor::Impl::RunAll() {
  for (size_t s = 0; s < partition.subgraphs.size(); ++s) {
    RETURN_IF_ERROR(RunSubgraph(static_cast<int>(s)));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// GraphExecutor.

GraphExecutor::GraphExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GraphExecutor::~GraphExecutor() = default;

absl::StatusOr<std::unique_ptr<GraphExecutor>> GraphExecutor::Create(
    const ir::Graph& graph, const GraphPartition& partition, const std::string& log_path,
    const Target& target, const GraphExecutorOptions& options) {
  auto impl = std::make_unique<Impl>();
  // One read of the log for every task; records whose key does not match their workload are
  // skipped (with a warning), as ApplyHistoryBest does.
  ReadOptions read;
  read.verify_workload_keys = true;
  ASSIGN_OR_RETURN(LogContents log, ReadLog(log_path, read));
  RETURN_IF_ERROR(impl->Init(graph, partition, target, options));
  impl->log_warnings = std::move(log.warnings);
  for (size_t i = 0; i < partition.tasks.size(); ++i) {
    const int t = static_cast<int>(i);
    const GraphTask& task = partition.tasks[i];
    // The messages of ApplyHistoryBestByKey: "<log>: no record for workload <key> on cpu".
    absl::StatusOr<ReplayedRecord> best = [&]() -> absl::StatusOr<ReplayedRecord> {
      absl::StatusOr<MeasureRecord> record = BestRecord(log.records, task.workload_key, target);
      if (!record.ok()) return Prefixed(log_path, record.status());
      absl::StatusOr<ReplayedRecord> replayed = ReplayRecord(*record);
      if (!replayed.ok()) return Prefixed(log_path, replayed.status());
      return replayed;
    }();
    if (best.ok()) {
      ExecutorTask& e = impl->tasks[i];
      e.tuned = true;
      e.trial = best->record.trial;
      e.logged_ms = best->record.median_ms();
      RETURN_IF_ERROR(impl->AddTask(t, best->dag, best->state, best->record.target));
      continue;
    }
    if (!options.allow_untuned || best.status().code() != absl::StatusCode::kNotFound) {
      return Prefixed(TaskLabel(t, task), best.status());
    }
    impl->tasks[i].note = std::string(best.status().message());
    ASSIGN_OR_RETURN(schedule::State state, UnscheduledState(task.dag, target));
    RETURN_IF_ERROR(impl->AddTask(t, task.dag, state, target));
  }
  RETURN_IF_ERROR(impl->AllocateBuffers());
  return std::unique_ptr<GraphExecutor>(new GraphExecutor(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<GraphExecutor>> GraphExecutor::CreateUnscheduled(
    const ir::Graph& graph, const GraphPartition& partition, const Target& target,
    const GraphExecutorOptions& options) {
  auto impl = std::make_unique<Impl>();
  RETURN_IF_ERROR(impl->Init(graph, partition, target, options));
  for (size_t i = 0; i < partition.tasks.size(); ++i) {
    const GraphTask& task = partition.tasks[i];
    impl->tasks[i].note = "unscheduled program";
    absl::StatusOr<schedule::State> state = UnscheduledState(task.dag, target);
    if (!state.ok()) return Prefixed(TaskLabel(static_cast<int>(i), task), state.status());
    RETURN_IF_ERROR(impl->AddTask(static_cast<int>(i), task.dag, *state, target));
  }
  RETURN_IF_ERROR(impl->AllocateBuffers());
  return std::unique_ptr<GraphExecutor>(new GraphExecutor(std::move(impl)));
}

absl::Status GraphExecutor::SetInputs(const ir::BufferMap& inputs) {
  Impl& m = *impl_;
  if (m.target.is_gpu()) RETURN_IF_ERROR(m.context->MakeCurrent());
  for (size_t b = 0; b < m.buffer_nodes.size(); ++b) {
    const ir::GraphNode& node = m.graph.node(m.buffer_nodes[b]);
    if (node.kind == ir::NodeKind::kOp) continue;
    ASSIGN_OR_RETURN(ir::HostBuffer value, ir::GraphLeafBuffer(node, inputs));
    const std::vector<std::byte> bytes = measure::PackBuffer(value);
    if (m.target.is_gpu()) {
      RETURN_IF_ERROR(m.device_buffers[b].Upload(bytes.data(), static_cast<int64_t>(bytes.size())));
    } else {
      CHECK(bytes.size() == m.host_buffers[b]->size())
          << "packed " << bytes.size() << " bytes for a buffer of " << m.host_buffers[b]->size();
      std::memcpy(m.host_buffers[b]->data(), bytes.data(), bytes.size());
    }
  }
  m.inputs_set = true;
  m.ran = false;
  return absl::OkStatus();
}

absl::Status GraphExecutor::Execute() {
  Impl& m = *impl_;
  if (!m.inputs_set) return absl::FailedPreconditionError("inputs not set (call SetInputs)");
  if (m.target.is_gpu()) RETURN_IF_ERROR(m.context->MakeCurrent());
  RETURN_IF_ERROR(m.RunAll());
  if (m.target.is_gpu()) RETURN_IF_ERROR(m.context->Synchronize());
  m.ran = true;
  return absl::OkStatus();
}

absl::StatusOr<ir::BufferMap> GraphExecutor::Outputs() const {
  const Impl& m = *impl_;
  if (!m.ran) return absl::FailedPreconditionError("the graph has not run (call Execute)");
  if (m.target.is_gpu()) RETURN_IF_ERROR(m.context->MakeCurrent());
  ir::BufferMap outputs;
  for (int id : m.graph.outputs()) {
    const ir::GraphNode& node = m.graph.node(id);
    const int b = m.node_buffer[id];
    ir::HostBuffer out = ir::HostBuffer::Zeros(node.dtype, node.shape);
    if (m.target.is_gpu()) {
      std::vector<std::byte> bytes(static_cast<size_t>(ValueBytes(node)));
      RETURN_IF_ERROR(
          m.device_buffers[b].Download(bytes.data(), static_cast<int64_t>(bytes.size())));
      RETURN_IF_ERROR(measure::UnpackBuffer(bytes.data(), bytes.size(), &out));
    } else {
      RETURN_IF_ERROR(
          measure::UnpackBuffer(m.host_buffers[b]->data(), m.host_buffers[b]->size(), &out));
    }
    outputs[node.name] = std::move(out);
  }
  return outputs;
}

absl::StatusOr<ir::BufferMap> GraphExecutor::Run(const ir::BufferMap& inputs) {
  RETURN_IF_ERROR(SetInputs(inputs));
  RETURN_IF_ERROR(Execute());
  return Outputs();
}

absl::StatusOr<GraphTiming> GraphExecutor::Time(const runtime::TimingOptions& options) {
  Impl& m = *impl_;
  if (!m.inputs_set) return absl::FailedPreconditionError("inputs not set (call SetInputs)");
  const int num_subgraphs = static_cast<int>(m.partition.subgraphs.size());
  // Times `body` (all subgraphs, or one) with the target's clock.
  auto time =
      [&](const std::function<absl::Status()>& body) -> absl::StatusOr<runtime::TimingStats> {
    if (m.target.is_gpu()) {
      RETURN_IF_ERROR(m.context->MakeCurrent());
      if (m.timer == nullptr) {
        ASSIGN_OR_RETURN(m.timer, runtime::GpuTimer::Create(*m.context));
      }
      return m.timer->Time(body, options);
    }
    if (options.flush_cache && m.host_flush == nullptr) {
      ASSIGN_OR_RETURN(m.host_flush, AlignedBytes::Create(kHostFlushBytes));
    }
    return runtime::TimeRepeated(
        [&]() -> absl::StatusOr<double> {
          if (options.flush_cache) {
            std::memset(m.host_flush->data(), ++m.flush_fill, m.host_flush->size());
          }
          const Clock::time_point t0 = Clock::now();
          RETURN_IF_ERROR(body());
          return MsSince(t0);
        },
        options);
  };

  GraphTiming out;
  ASSIGN_OR_RETURN(out.end_to_end, time([&] { return m.RunAll(); }));
  std::vector<double> subgraph_ms(num_subgraphs, 0);
  for (int s = 0; s < num_subgraphs; ++s) {
    ASSIGN_OR_RETURN(runtime::TimingStats stats, time([&] { return m.RunSubgraph(s); }));
    subgraph_ms[s] = stats.median_ms;
  }
  if (m.target.is_gpu()) RETURN_IF_ERROR(m.context->Synchronize());
  m.ran = true;
  for (size_t t = 0; t < m.partition.tasks.size(); ++t) {
    const GraphTask& task = m.partition.tasks[t];
    TaskTiming tt;
    tt.name = task.name;
    tt.weight = task.weight;
    for (int s : task.subgraphs) tt.total_ms += subgraph_ms[s];
    tt.ms_per_call = tt.total_ms / static_cast<double>(task.subgraphs.size());
    out.sum_of_tasks_ms += tt.total_ms;
    out.tasks.push_back(std::move(tt));
  }
  for (TaskTiming& tt : out.tasks) {
    tt.share = out.sum_of_tasks_ms > 0 ? tt.total_ms / out.sum_of_tasks_ms : 0;
  }
  return out;
}

absl::StatusOr<GraphCheck> GraphExecutor::Check(const GraphCheckOptions& options) {
  Impl& m = *impl_;
  const ir::BufferMap inputs = ir::MakeRandomGraphInputs(m.graph, options.seed);
  ASSIGN_OR_RETURN(ir::BufferMap got, Run(inputs));
  ir::BufferMap expected;
  if (options.reference == GraphReference::kInterpreter) {
    ASSIGN_OR_RETURN(expected, ir::RunGraphReference(m.graph, inputs));
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<GraphExecutor> reference,
                     CreateUnscheduled(m.graph, m.partition, m.target, m.options));
    ASSIGN_OR_RETURN(expected, reference->Run(inputs));
  }
  GraphCheck out;
  out.reference = options.reference;
  out.report.trials = 1;
  for (int id : m.graph.outputs()) {
    const ir::GraphNode& node = m.graph.node(id);
    auto g = got.find(node.name);
    auto e = expected.find(node.name);
    CHECK(g != got.end() && e != expected.end()) << "output '" << node.name << "' missing";
    measure::CompareOutput(node.name, g->second, e->second,
                           measure::ToleranceFor(node.dtype, options.atol, options.rtol),
                           /*trial=*/0, measure::CheckDistribution::kUniformSymmetric, &out.report);
  }
  out.passed = out.report.mismatches == 0;
  return out;
}

const std::vector<ExecutorTask>& GraphExecutor::tasks() const { return impl_->tasks; }
const Target& GraphExecutor::target() const { return impl_->target; }
int64_t GraphExecutor::buffer_bytes() const { return impl_->total_bytes; }
const std::vector<std::string>& GraphExecutor::log_warnings() const { return impl_->log_warnings; }

}  // namespace tilesearch::search
