// Fused workloads: a composed ComputeDAG named by data, so that a fused subgraph of an operator
// graph (search/partition.h: dense + bias + gelu, conv2d + add + relu, layernorm + add, ...) is a
// workload like a registry operator: tuning logs record it, replay rebuilds its DAG from the
// record alone.
//
// A fused workload (schedule::Workload with op kFusedWorkloadOp) lists its placeholders (shapes,
// one dtype) and its operator nodes in order; node k applies a graph operator (ir::GraphOps(),
// built with ir::BuildGraphOp exactly as the partitioner composes a subgraph) to placeholders and
// earlier nodes. The last node is the DAG's only output. Its JSON form (schedule::WorkloadToJson):
//
//   {"op": "fused", "shapes": [[16, 32], [24, 32], [24]], "dtype": "float32", "attrs": {},
//    "nodes": [{"op": "dense", "inputs": ["p0", "p1"], "attrs": {}},
//              {"op": "add", "inputs": ["n0", "p2"], "attrs": {}},
//              {"op": "relu", "inputs": ["n1"], "attrs": {}}]}
//
// "pI" is placeholder I (shapes[I]), "nK" the output of node K < the reading node's index (so the
// node list is acyclic by construction). Canonical form, checked by Build: every placeholder and
// every node but the last is read; the placeholders are numbered in the order of the DAG's
// input_ids() (ComputeDAG::Create's canonical stage order), so kernel argument i (after the
// registry convention: inputs, then the output) is placeholder pI. Stages are named "p<I>" and
// "<op>_<K>"; the workload key (ComputeDAG::WorkloadKey) is name-independent, so it equals the
// partition task's key.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/type.h"

namespace tilesearch::schedule {

/// The operator name of a fused workload ("fused"); not a registry operator.
inline constexpr char kFusedWorkloadOp[] = "fused";

/// An operand of a fused workload's node: placeholder `index` ("p<index>") or the output of node
/// `index` ("n<index>").
struct FusedOperand {
  bool is_node = false;
  int index = 0;

  /// "p0" / "n1".
  std::string ToString() const;
  bool operator==(const FusedOperand& other) const = default;
};

/// One operator node of a fused workload.
struct FusedNode {
  std::string op;                            // graph operator, ir::GraphOps() (e.g. "dense")
  std::vector<FusedOperand> inputs;          // in the operator's input order
  std::map<std::string, std::string> attrs;  // as text, ir::BuildGraphOp's syntax

  bool operator==(const FusedNode& other) const = default;
};

/// Parses "p3" / "n0". Errors: kInvalidArgument "must be \"p<index>\" or \"n<index>\", got 'x'"
/// (the caller prefixes the field).
absl::StatusOr<FusedOperand> ParseFusedOperand(const std::string& text);

/// Checks the node list's structure without building anything: at least one node, every operator
/// known (ir::FindGraphOp) and given as many inputs as it takes, every placeholder operand <
/// num_placeholders, every node operand an earlier node. `field` names the list in messages
/// (kInvalidArgument): "field 'workload.nodes' must list at least one node", "field
/// 'workload.nodes[1].op': unknown graph operator 'foo'", "field 'workload.nodes[0].inputs': dense
/// takes 2 to 3 inputs, got 1", "field 'workload.nodes[1].inputs[0]': placeholder p5 does not exist
/// (the workload has 3 shapes)", "field 'workload.nodes[1].inputs[0]': n2 is not an earlier node
/// (a node reads placeholders and nodes before it)".
absl::Status ValidateFusedNodes(const std::vector<FusedNode>& nodes, int num_placeholders,
                                const std::string& field = "workload.nodes");

/// Builds the DAG of a fused workload (file comment). Errors (kInvalidArgument, "fused workload:
/// ..."): ValidateFusedNodes's; "fused workload: nodes[1] (add): <BuildGraphOp's error>" (shape
/// mismatch, bad attribute); "fused workload: placeholder p2 is not read by any node"; "fused
/// workload: node n0 (dense) is not read by a later node (only the last node is an output)";
/// "fused workload: placeholders must be numbered in the order the DAG reads them: ...".
absl::StatusOr<ir::ComputeDAG> BuildFusedDAG(const std::vector<FusedNode>& nodes,
                                             const std::vector<std::vector<int64_t>>& shapes,
                                             ir::ScalarType dtype);

/// "dense(p0,p1) add(n0,p2) relu(n1)", attributes in braces: "dense(p0,p1){activation=relu}".
std::string FusedNodesToString(const std::vector<FusedNode>& nodes);

}  // namespace tilesearch::schedule
