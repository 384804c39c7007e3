// The graph executor: runs a partitioned operator graph with one compiled kernel per task (Ansor,
// OSDI'20, §6: after the task scheduler has tuned every task, the network runs the best schedule
// of each; TVM auto_scheduler.ApplyHistoryBest + relay.build).
//
//   GraphPartition p = PartitionGraph(graph).value();
//   auto exec = GraphExecutor::Create(graph, p, "graph.jsonl", target).value();
//   ir::BufferMap outputs = exec->Run(ir::MakeRandomGraphInputs(graph, 1)).value();
//   GraphTiming t = exec->Time({}).value();       // end to end + per task
//   GraphCheck c = exec->Check({}).value();       // against ir::RunGraphReference
//
// Kernels. Each task's kernel comes from the best valid record of its workload key on the target
// in the tuning log (search::BestRecord and ReplayRecord, as ApplyHistoryBestByKey: the record's
// workload rebuilt — a registry operator or a fused workload — its steps replayed, lowered again
// for the record's target) and is compiled once: cpu, JIT-compiled in this process
// (codegen::CompileForHost, as the host measurer does); cuda, codegen::CompileToPtx loaded into
// the primary context of the device (measure::LoadedGpuModule). With
// `allow_untuned`, a task without a valid record runs its unscheduled program instead (cpu: the
// initial state; cuda: schedule::NaiveGpuSchedule), and CreateUnscheduled builds every task that
// way (the compiled reference of big graphs, where the interpreter is too slow).
//
// Buffers. Every graph value a subgraph reads or writes across subgraph borders (graph inputs,
// params, subgraph outputs) gets one buffer, allocated once at Create (cpu: 64-byte aligned host
// memory; cuda: device memory), in the dtype's storage layout; values inside a fused subgraph are
// the kernel's own scratch (cuda: one set of scratch buffers per task, allocated once and shared
// by the task's subgraphs, which run one after another). A subgraph binds its task's kernel to its
// own input buffers (Subgraph::inputs, the kernel's input parameters in order) and its output
// buffer. Execute runs the subgraphs in execution order; nothing is allocated or copied there.
//
// Not thread-safe. A cuda executor initializes CUDA in this process (create it after any tuning or
// measurement worker was forked, never before).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/graph.h"
#include "ir/host_buffer.h"
#include "measure/measure.h"
#include "runtime/timing.h"
#include "search/partition.h"

namespace tilesearch::search {

struct GraphExecutorOptions {
  /// cpu: threads that run the kernels' parallel loops (codegen::HostCompileOptions::num_threads;
  /// 0 = one per hardware thread). Use the tuning job's measure.host_threads to reproduce its
  /// times.
  int host_threads = 0;
  /// cuda: the device ordinal.
  int device = 0;
  /// A task without a valid record in the log runs its unscheduled program (ExecutorTask::tuned is
  /// false and `note` says why) instead of failing Create with kNotFound.
  bool allow_untuned = false;
};

/// Where one task's kernel came from.
struct ExecutorTask {
  std::string name;          // GraphTask::name
  std::string workload_key;  // GraphTask::workload_key
  int weight = 0;            // GraphTask::weight: subgraphs that run this kernel per execution
  double flops = 0;          // FLOPs of one run (the task DAG's)
  /// True: the best valid record of the log; false: the unscheduled program.
  bool tuned = false;
  int64_t trial = -1;     // the record's trial (tuned only)
  double logged_ms = 0;   // the record's median in the log, ms (tuned only)
  std::string note;       // untuned: why ("no record for workload ... on cpu")
  double compile_ms = 0;  // lowering + code generation (+ driver load on cuda), wall clock
  int num_kernels = 1;    // cuda: GPU kernels launched per call; cpu: 1
};

/// One task's share of a graph execution (GraphExecutor::Time).
struct TaskTiming {
  std::string name;
  int weight = 0;
  /// Median time of one call of the task's kernel (mean over its subgraphs of each subgraph's
  /// median), ms.
  double ms_per_call = 0;
  /// Σ over the task's subgraphs of their median, ms: its time per graph execution.
  double total_ms = 0;
  /// total_ms / Σ over tasks of total_ms, in [0, 1].
  double share = 0;
};

/// End-to-end and per-task times of a graph execution.
struct GraphTiming {
  /// Whole executions (every subgraph in order, cuda: timed with events around all launches).
  runtime::TimingStats end_to_end;
  /// Per task, in GraphPartition::tasks order; each subgraph timed alone with the same options.
  std::vector<TaskTiming> tasks;
  /// Σ tasks' total_ms: the end-to-end time without launch gaps and cross-kernel cache effects.
  double sum_of_tasks_ms = 0;

  /// A table: one line per task (index, name, weight, ms per call, ms per execution, share), then
  /// the end-to-end median with p10 / p90 and the sum of the tasks.
  std::string ToString() const;
};

/// What the outputs are compared with.
enum class GraphReference {
  kInterpreter,  // ir::RunGraphReference: every node interpreted naively in float64 arithmetic
                 // rounded to the dtype (slow: use it up to ~1e8 FLOPs)
  kUnscheduled,  // the same partition run by GraphExecutor::CreateUnscheduled on the same target
};
/// "interpreter", "unscheduled".
const char* GraphReferenceName(GraphReference reference);

struct GraphCheckOptions {
  GraphReference reference = GraphReference::kInterpreter;
  /// Seeds ir::MakeRandomGraphInputs (values in [-1, 1) for every input and param).
  uint64_t seed = 0x67a9;
  /// Tolerance |got − ref| <= atol + rtol·|ref| (measure::ToleranceFor: 0 = by dtype, float32
  /// 1e-4 / 1e-4, as the measurer's check).
  double atol = 0;
  double rtol = 0;
};

/// The outcome of GraphExecutor::Check.
struct GraphCheck {
  bool passed = false;
  /// Over every element of every graph output: max errors, mismatches, the first mismatch
  /// ("gelu_7[3, 17]: got nan, expected 1.25 (trial 0, uniform)"). trials = 1.
  measure::CheckReport report;
  GraphReference reference = GraphReference::kInterpreter;
};

/// Runs a partitioned graph with compiled task kernels (see the file comment).
class GraphExecutor {
 public:
  /// Kernels from the best valid records of `log_path` on `target` (the log read once; records
  /// whose workload key does not match their workload skipped, see log_warnings()).
  /// `partition` must be a partition of `graph` (PartitionGraph).
  /// Errors: graph.Validate()'s; ReadLog's (kNotFound "log 'x' does not exist"); without
  /// allow_untuned, kNotFound "task 2 ('dense_add'): <log>: no record for workload <key> on cpu"
  /// (or "no valid record ... all 64 trials failed: ..."); a record this build cannot replay or
  /// lower ("task 2 ('dense_add'): <log>: trial 17: step 3: ..."); kFailedPrecondition when a
  /// record's kernel parameters do not match the subgraph's values ("task 1 ('dense'): kernel
  /// parameter 0 ('X') is float32 [8, 16], subgraph 3 binds node 2 'x' of float32 [8, 32]");
  /// compile errors; cuda: "no CUDA driver found: ...", the driver's load and allocation errors.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GraphExecutor>> Create(
      const ir::Graph& graph, const GraphPartition& partition, const std::string& log_path,
      const Target& target, const GraphExecutorOptions& options = {});

  /// Every task's unscheduled program (no log). Errors: as Create, without the log's.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GraphExecutor>> CreateUnscheduled(
      const ir::Graph& graph, const GraphPartition& partition, const Target& target,
      const GraphExecutorOptions& options = {});

  ~GraphExecutor();
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  /// Copies every input and param the subgraphs read from `inputs` (by node name; values rounded
  /// to the node's dtype) into its buffer. Errors (kInvalidArgument): "missing buffer for param
  /// 'x'", "buffer for 'x' is [4] float32 but the graph says [4, 8] float32" (GraphLeafBuffer).
  absl::Status SetInputs(const ir::BufferMap& inputs);
  /// Runs every subgraph in execution order on the buffers (cuda: then waits for the device).
  /// Errors: kFailedPrecondition "inputs not set (call SetInputs)"; a kernel's run errors, naming
  /// the subgraph and task.
  absl::Status Execute();
  /// The graph outputs after Execute, by node name (ir::RunGraphReference's form). Errors:
  /// kFailedPrecondition "the graph has not run (call Execute)"; cuda copy errors.
  absl::StatusOr<ir::BufferMap> Outputs() const;
  /// SetInputs, Execute, Outputs.
  absl::StatusOr<ir::BufferMap> Run(const ir::BufferMap& inputs);

  /// Times whole executions (runtime::TimeRepeated with `options`; options.flush_cache flushes
  /// the caches before each execution, not between its subgraphs) and then each subgraph alone
  /// (flushed before each run when options.flush_cache), on the inputs set last. Errors: as
  /// Execute; TimeRepeated's (bad options).
  absl::StatusOr<GraphTiming> Time(const runtime::TimingOptions& options);

  /// Runs the graph on fresh random inputs (options.seed) and compares every graph output element
  /// with the reference's under the tolerance (measure::CompareOutput). Leaves this executor's
  /// inputs set to those random inputs. Errors: Run's; the reference's (interpreter errors;
  /// CreateUnscheduled's).
  absl::StatusOr<GraphCheck> Check(const GraphCheckOptions& options = {});

  /// Per task, in GraphPartition::tasks order.
  const std::vector<ExecutorTask>& tasks() const;
  const Target& target() const;
  /// Bytes of the buffers allocated for graph values (scratch excluded).
  int64_t buffer_bytes() const;
  /// Create: the log's read warnings (skipped lines, records whose workload key does not match
  /// their workload); empty for CreateUnscheduled.
  const std::vector<std::string>& log_warnings() const;

 private:
  struct Impl;
  explicit GraphExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tilesearch::search
