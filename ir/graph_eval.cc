// Reference evaluation of a Graph: every operator node lowered naively on its own and run by the
// interpreter, in node order.
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/graph.h"
#include "ir/ops/layout.h"
#include "ir/reference.h"

namespace tilesearch::ir {

BufferMap MakeRandomGraphInputs(const Graph& graph, uint64_t seed) {
  BufferMap inputs;
  uint64_t i = 0;
  for (int id : graph.leaves()) {
    const GraphNode& n = graph.node(id);
    HostBuffer b = HostBuffer::Zeros(n.dtype, n.shape);
    FillRandom(b, seed + i++);
    inputs.emplace(n.name, std::move(b));
  }
  return inputs;
}

absl::StatusOr<HostBuffer> GraphLeafBuffer(const GraphNode& leaf, const BufferMap& inputs) {
  auto it = inputs.find(leaf.name);
  if (it == inputs.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing buffer for ", leaf.op, " '", leaf.name, "'"));
  }
  if (it->second.shape != leaf.shape || it->second.dtype != leaf.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer for '", leaf.name, "' is ", ShapeToString(it->second.shape), " ",
                     TypeName(it->second.dtype), " but the graph says ", ShapeToString(leaf.shape),
                     " ", TypeName(leaf.dtype)));
  }
  return it->second;
}

absl::StatusOr<BufferMap> RunGraphReference(const Graph& graph, const BufferMap& inputs,
                                            bool all_nodes) {
  RETURN_IF_ERROR(graph.Validate());
  // Values by node id; placeholders of a node's DAG are named v<id> after the node they read.
  std::vector<HostBuffer> values(graph.num_nodes());
  for (int id : graph.leaves()) {
    ASSIGN_OR_RETURN(values[id], GraphLeafBuffer(graph.node(id), inputs));
  }
  for (const GraphNode& n : graph.nodes()) {
    if (n.kind != NodeKind::kOp) continue;
    std::vector<Tensor> operands;
    BufferMap buffers;
    std::map<int, Tensor> placeholders;  // one per operand node, even when read twice
    for (int in : n.inputs) {
      auto it = placeholders.find(in);
      if (it == placeholders.end()) {
        const GraphNode& src = graph.node(in);
        ASSIGN_OR_RETURN(Tensor p, Placeholder(absl::StrCat("v", in), src.shape, src.dtype));
        buffers.emplace(p.name(), values[in]);
        it = placeholders.emplace(in, p).first;
      }
      operands.push_back(it->second);
    }
    const std::string stage = absl::StrCat(n.op, "_", n.id);
    ASSIGN_OR_RETURN(Tensor out, BuildGraphOp(n.op, operands, n.attrs, stage));
    ASSIGN_OR_RETURN(ComputeDAG dag, ComputeDAG::Create({out}));
    absl::StatusOr<BufferMap> result = RunReference(dag, buffers);
    if (!result.ok()) {
      return absl::Status(result.status().code(), absl::StrCat("node ", n.id, " (", n.op,
                                                               "): ", result.status().message()));
    }
    values[n.id] = std::move(result->at(stage));
  }
  BufferMap outputs;
  for (const GraphNode& n : graph.nodes()) {
    bool is_output = false;
    for (int id : graph.outputs()) is_output |= id == n.id;
    if (is_output || (all_nodes && n.kind == NodeKind::kOp)) outputs[n.name] = values[n.id];
  }
  return outputs;
}

}  // namespace tilesearch::ir
