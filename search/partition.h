// Partitioning an operator graph into tuning tasks (Ansor, OSDI'20, §6: "we partition a DNN into
// small subgraphs with Relay's operator fusion pass"; TVM relay/transforms/fuse_ops.cc).
//
// Each anchor operator — data reuse (dense, matmul, batch_matmul, conv2d, pooling) or a reduction
// (softmax, layernorm, rmsnorm, reduce_*) — becomes one subgraph together with the elementwise
// consumers it post-dominates, and, for reductions, with elementwise producers it post-dominates;
// chains of elementwise / injective operators that no anchor takes form subgraphs of their own.
// Every subgraph is one ComputeDAG composed from the library operators of its nodes (the
// placeholders are the values it reads from outside). Subgraphs with equal workload keys
// (ir::ComputeDAG::WorkloadKey, name-independent) are one task whose weight is the number of
// subgraphs, so a scheduler minimizes Σ weight·latency (Ansor §6's objective f).
//
// Fusion rules: TVM's FuseOps on the post-dominator tree, phases 0 and 1 (TVM's phase 2 handles
// tuples, which graphs here do not have). A node n fuses into its immediate post-dominator d
// (merging every node on the paths n → d into d's group) when:
//   - n is kOutEWiseFusable or kCommReduce (phase 0): every edge on the paths is elementwise (a
//     broadcast edge counts as elementwise when the operand already has the output's shape, as in
//     TVM), and every path node's group, d's included, is at most kBroadcast;
//   - n is kElemWise / kBroadcast (both phases): the relation n → d is at most kInjective or is
//     kCommReduce; path nodes' groups are at most kInjective and d's group is not opaque;
//   - n is kInjective (phase 1): every path node's group, d's included, is at most kInjective.
// Two differences from TVM: a reduction (kCommReduce) also takes its elementwise consumers (TVM
// fuses kCommReduce with nothing downstream; here softmax / layernorm already end in an
// elementwise stage, so the combined DAG is the same shape the sketch rules handle), and a fusion
// that would put two anchors in one group is skipped (one anchor per task, as Ansor's sketches
// assume). A graph output, or a node read by several nodes that no single later node
// post-dominates, ends its subgraph. Nodes no output depends on are not computed.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/graph.h"
#include "ir/host_buffer.h"

namespace tilesearch::search {

/// One fused subgraph: an instance of a task at one place in the graph.
struct Subgraph {
  /// Graph node ids of its operator nodes, ascending (a topological order).
  std::vector<int> nodes;
  /// The anchor node (kOutEWiseFusable or kCommReduce), or -1 for an elementwise / injective
  /// subgraph.
  int anchor = -1;
  /// Graph node ids bound to the DAG's placeholders, in kernel argument order
  /// (dag.input_ids() order). A value read twice appears once.
  std::vector<int> inputs;
  /// Graph node id of its output (the DAG's only output, dag.output_ids()[0]).
  int output = -1;
  /// Index of its task in GraphPartition::tasks.
  int task = -1;
  /// This instance's DAG: placeholders named "v<id>" after the graph node they read, stages
  /// "<op>_<id>" (plus the operators' auxiliary suffixes).
  ir::ComputeDAG dag;
};

/// One tuning task: the subgraphs with one workload key.
struct GraphTask {
  /// The operators of its first subgraph joined by '_', e.g. "dense_add_relu".
  std::string name;
  /// ir::ComputeDAG::WorkloadKey() of `dag`, equal for every subgraph of the task.
  std::string workload_key;
  /// The DAG of its first subgraph. Any subgraph's DAG has the same stages in the same order, so a
  /// kernel tuned on this one runs every subgraph with that subgraph's `inputs` / `output`.
  ir::ComputeDAG dag;
  /// Number of subgraphs (Ansor's task weight: how often the kernel runs per graph execution).
  int weight = 0;
  /// Indices in GraphPartition::subgraphs, ascending.
  std::vector<int> subgraphs;
};

/// A graph split into subgraphs (execution order) and deduplicated tasks.
struct GraphPartition {
  /// In execution order: every subgraph's inputs are graph leaves or outputs of earlier
  /// subgraphs.
  std::vector<Subgraph> subgraphs;
  /// In order of first occurrence.
  std::vector<GraphTask> tasks;
  /// Operator nodes no graph output depends on (not in any subgraph), ascending.
  std::vector<int> dead_nodes;

  /// Σ over tasks of weight · dag.Flops(): the graph's FLOPs per execution.
  double Flops() const;
  /// A readable table: one line per task (index, name, weight, FLOPs, key, graph nodes), then the
  /// subgraphs in execution order.
  std::string ToString() const;
};

/// Options of PartitionGraph.
struct PartitionOptions {
  /// false: no fusion, one subgraph per operator node (for comparison and debugging).
  bool fuse = true;
};

/// Partitions `graph` (rules in the file comment).
/// Errors: graph.Validate()'s (the graph's recorded error, no outputs); a subgraph whose DAG the
/// library cannot build (kInvalidArgument naming the subgraph's nodes).
absl::StatusOr<GraphPartition> PartitionGraph(const ir::Graph& graph,
                                              const PartitionOptions& options = {});

/// Runs the partition the way an executor does, with the reference interpreter in place of tuned
/// kernels: each subgraph's DAG in execution order on its input buffers (graph leaves from
/// `inputs`, keyed by node name; intermediates from earlier subgraphs). Returns the graph outputs
/// by node name (ir::RunGraphReference's form).
/// Errors: missing or mis-shaped leaf buffers, interpreter errors (naming the subgraph).
absl::StatusOr<ir::BufferMap> RunPartitionReference(const ir::Graph& graph,
                                                    const GraphPartition& partition,
                                                    const ir::BufferMap& inputs);

}  // namespace tilesearch::search
