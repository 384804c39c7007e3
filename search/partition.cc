// Graph partitioning: TVM's FuseOps on the post-dominator tree (phases 0 and 1), one ComputeDAG per
// fused group, deduplication by workload key.
#include "search/partition.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/ops/layout.h"
#include "ir/reference.h"

namespace tilesearch::search {
namespace {

using ir::GraphNode;
using ir::NodeKind;
using ir::OpPattern;

int Rank(OpPattern p) { return static_cast<int>(p); }
OpPattern MaxPattern(OpPattern a, OpPattern b) { return Rank(a) >= Rank(b) ? a : b; }
bool IsAnchor(OpPattern p) {
  return p == OpPattern::kOutEWiseFusable || p == OpPattern::kCommReduce;
}

/// A consumer edge: the consumer node and the edge's pattern.
struct Edge {
  int to = -1;
  OpPattern pattern = OpPattern::kOpaque;
};

/// The fusion state over the live operator nodes of one graph.
class Fuser {
 public:
  explicit Fuser(const ir::Graph& graph) : graph_(graph) {
    const int n = graph.num_nodes();
    live_.assign(n, false);
    is_output_.assign(n, false);
    for (int id : graph.outputs()) is_output_[id] = true;
    // Live: operator nodes some output depends on (reverse reachability, ids are topological).
    for (int id : graph.outputs()) live_[id] = true;
    for (int id = n - 1; id >= 0; --id) {
      const GraphNode& node = graph.node(id);
      if (!live_[id] || node.kind != NodeKind::kOp) continue;
      for (int in : node.inputs) {
        if (graph.node(in).kind == NodeKind::kOp) live_[in] = true;
      }
    }
    // Consumer edges between live nodes. A broadcast edge whose operand already has the output's
    // shape is elementwise (TVM's IndexedForwardGraph::Creator does the same).
    edges_.resize(n);
    for (int id = 0; id < n; ++id) {
      const GraphNode& node = graph.node(id);
      if (!live_[id]) continue;
      for (int in : node.inputs) {
        if (!live_[in]) continue;
        OpPattern p = node.pattern;
        if (p == OpPattern::kBroadcast && graph.node(in).shape == node.shape) {
          p = OpPattern::kElemWise;
        }
        bool merged = false;
        for (Edge& e : edges_[in]) {
          if (e.to == id) {
            e.pattern = MaxPattern(e.pattern, p);
            merged = true;
          }
        }
        if (!merged) edges_[in].push_back(Edge{id, p});
      }
    }
    ComputePostDominators();
    parent_.resize(n);
    group_pattern_.resize(n);
    anchors_.assign(n, 0);
    for (int id = 0; id < n; ++id) {
      parent_[id] = id;
      group_pattern_[id] = graph.node(id).pattern;
      anchors_[id] = IsAnchor(graph.node(id).pattern) ? 1 : 0;
    }
  }

  bool live(int id) const { return live_[id]; }
  bool is_output(int id) const { return is_output_[id]; }
  const std::vector<Edge>& edges(int id) const { return edges_[id]; }

  int Find(int id) {
    while (parent_[id] != id) id = parent_[id] = parent_[parent_[id]];
    return id;
  }

  /// TVM FuseMutator::RunFuse for one phase.
  void RunPhase(int phase) {
    for (int id = 0; id < graph_.num_nodes(); ++id) {
      if (!live_[id]) continue;
      const int dom = ipdom_[id];
      if (dom < 0) continue;
      if (Find(id) == Find(dom)) continue;
      const OpPattern pattern = group_pattern_[Find(id)];
      if (pattern == OpPattern::kOpaque) continue;
      if (IsAnchor(pattern)) {
        if (phase != 0) continue;
        TryFuse(id, dom, /*need_elemwise_relation=*/true,
                [](OpPattern kind, bool) { return Rank(kind) <= Rank(OpPattern::kBroadcast); });
      } else if (Rank(pattern) <= Rank(OpPattern::kBroadcast)) {
        TryFuse(id, dom, false, [](OpPattern kind, bool is_sink) {
          if (!is_sink) return Rank(kind) <= Rank(OpPattern::kInjective);
          return kind != OpPattern::kOpaque;
        });
      } else if (pattern == OpPattern::kInjective) {
        if (phase != 1) continue;
        TryFuse(id, dom, false,
                [](OpPattern kind, bool) { return Rank(kind) <= Rank(OpPattern::kInjective); });
      }
    }
  }

 private:
  /// Immediate post-dominators of the live operator nodes (-1: the exit, i.e. a graph output or
  /// no common later node). Consumers have larger ids, so reverse id order sees them first.
  void ComputePostDominators() {
    const int n = graph_.num_nodes();
    ipdom_.assign(n, -1);
    depth_.assign(n, 0);
    for (int id = n - 1; id >= 0; --id) {
      if (!live_[id]) continue;
      int dom = -1;
      if (!is_output_[id] && !edges_[id].empty()) {
        dom = edges_[id][0].to;
        for (size_t i = 1; i < edges_[id].size() && dom >= 0; ++i) {
          dom = Lca(dom, edges_[id][i].to);
        }
      }
      ipdom_[id] = dom;
      depth_[id] = dom < 0 ? 1 : depth_[dom] + 1;
    }
  }

  int Lca(int a, int b) const {
    while (a != b) {
      if (a < 0 || b < 0) return -1;
      if (depth_[a] > depth_[b]) {
        a = ipdom_[a];
      } else if (depth_[b] > depth_[a]) {
        b = ipdom_[b];
      } else {
        a = ipdom_[a];
        b = ipdom_[b];
      }
    }
    return a;
  }

  /// Walks every path from `src` to its post-dominator `sink`: checks `fcond` on each node's group
  /// pattern (TVM CheckPath), and, when asked, that every edge is elementwise (TVM's dominator
  /// relation pattern); if both hold and the merge keeps at most one anchor, merges the groups of
  /// `src` and of every path node into the group of `sink` (TVM CommitFuse).
  void TryFuse(int src, int sink, bool need_elemwise_relation,
               const std::function<bool(OpPattern, bool)>& fcond) {
    std::set<int> visited;
    std::vector<int> path;
    OpPattern relation = OpPattern::kElemWise;
    bool ok = true;
    std::function<void(int)> visit = [&](int v) {
      if (!ok || !visited.insert(v).second) return;
      if (!fcond(group_pattern_[Find(v)], v == sink)) {
        ok = false;
        return;
      }
      path.push_back(v);
      if (v == sink) return;
      for (const Edge& e : edges_[v]) {
        relation = MaxPattern(relation, e.pattern);
        visit(e.to);
      }
    };
    for (const Edge& e : edges_[src]) {
      relation = MaxPattern(relation, e.pattern);
      visit(e.to);
    }
    if (!ok) return;
    if (need_elemwise_relation && relation != OpPattern::kElemWise) return;
    if (!need_elemwise_relation && Rank(relation) > Rank(OpPattern::kInjective) &&
        relation != OpPattern::kCommReduce) {
      return;
    }
    std::set<int> roots = {Find(src)};
    for (int v : path) roots.insert(Find(v));
    int anchors = 0;
    for (int r : roots) anchors += anchors_[r];
    if (anchors > 1) return;
    const int target = Find(sink);
    for (int r : roots) {
      if (r == target) continue;
      parent_[r] = target;
      group_pattern_[target] = MaxPattern(group_pattern_[target], group_pattern_[r]);
      anchors_[target] += anchors_[r];
    }
  }

  const ir::Graph& graph_;
  std::vector<bool> live_;
  std::vector<bool> is_output_;
  std::vector<std::vector<Edge>> edges_;
  std::vector<int> ipdom_;
  std::vector<int> depth_;
  std::vector<int> parent_;
  std::vector<OpPattern> group_pattern_;
  std::vector<int> anchors_;
};

/// The DAG of the operator nodes `nodes` (ascending) with output `output`; fills `inputs` with
/// the graph node bound to each placeholder in dag.input_ids() order.
absl::StatusOr<ir::ComputeDAG> BuildSubgraphDAG(const ir::Graph& graph,
                                                const std::vector<int>& nodes, int output,
                                                std::vector<int>* inputs) {
  std::map<int, ir::Tensor> tensors;
  std::map<std::string, int> placeholder_node;
  const std::set<int> members(nodes.begin(), nodes.end());
  for (int id : nodes) {
    const GraphNode& node = graph.node(id);
    std::vector<ir::Tensor> operands;
    for (int in : node.inputs) {
      auto it = tensors.find(in);
      if (it == tensors.end()) {
        CHECK(!members.count(in)) << "node " << in << " used before it was built";
        const GraphNode& src = graph.node(in);
        ASSIGN_OR_RETURN(ir::Tensor p,
                         ir::Placeholder(absl::StrCat("v", in), src.shape, src.dtype));
        placeholder_node[p.name()] = in;
        it = tensors.emplace(in, p).first;
      }
      operands.push_back(it->second);
    }
    ASSIGN_OR_RETURN(ir::Tensor out, ir::BuildGraphOp(node.op, operands, node.attrs,
                                                      absl::StrCat(node.op, "_", id)));
    tensors[id] = out;
  }
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, ir::ComputeDAG::Create({tensors.at(output)}));
  inputs->clear();
  for (int sid : dag.input_ids()) inputs->push_back(placeholder_node.at(dag.stage(sid).name()));
  return dag;
}

std::string NodeList(const std::vector<int>& nodes) {
  std::vector<std::string> parts;
  for (int id : nodes) parts.push_back(absl::StrCat("%", id));
  return absl::StrJoin(parts, " ");
}

}  // namespace

absl::StatusOr<GraphPartition> PartitionGraph(const ir::Graph& graph,
                                              const PartitionOptions& options) {
  RETURN_IF_ERROR(graph.Validate());
  Fuser fuser(graph);
  if (options.fuse) {
    fuser.RunPhase(0);
    fuser.RunPhase(1);
  }
  GraphPartition result;
  std::map<int, std::vector<int>> groups;  // root → members, ascending
  for (const GraphNode& node : graph.nodes()) {
    if (node.kind != NodeKind::kOp) continue;
    if (!fuser.live(node.id)) {
      result.dead_nodes.push_back(node.id);
      continue;
    }
    groups[fuser.Find(node.id)].push_back(node.id);
  }
  // A group's output: its one member read outside it or marked as a graph output. The sink of a
  // group post-dominates every member, so its id is the group's largest and output order is an
  // execution order.
  std::vector<std::pair<int, std::vector<int>>> ordered;
  for (auto& [root, members] : groups) {
    const std::set<int> in_group(members.begin(), members.end());
    int output = -1;
    for (int id : members) {
      bool escapes = fuser.is_output(id);
      for (const Edge& e : fuser.edges(id)) escapes |= !in_group.count(e.to);
      if (!escapes) continue;
      CHECK(output < 0) << "fused group " << NodeList(members) << " has two outputs %" << output
                        << " and %" << id;
      output = id;
    }
    CHECK(output == members.back())
        << "fused group " << NodeList(members) << " ends at %" << output;
    ordered.emplace_back(output, std::move(members));
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  std::map<std::string, int> task_by_key;
  for (auto& [output, members] : ordered) {
    Subgraph sg;
    sg.nodes = members;
    sg.output = output;
    for (int id : members) {
      if (IsAnchor(graph.node(id).pattern)) sg.anchor = id;
    }
    absl::StatusOr<ir::ComputeDAG> dag = BuildSubgraphDAG(graph, members, output, &sg.inputs);
    if (!dag.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("subgraph of nodes ", NodeList(members), ": ", dag.status().message()));
    }
    sg.dag = *std::move(dag);
    const std::string key = sg.dag.WorkloadKey();
    auto [it, inserted] = task_by_key.emplace(key, static_cast<int>(result.tasks.size()));
    if (inserted) {
      GraphTask task;
      std::vector<std::string> ops;
      for (int id : members) ops.push_back(graph.node(id).op);
      task.name = absl::StrJoin(ops, "_");
      task.workload_key = key;
      task.dag = sg.dag;
      result.tasks.push_back(std::move(task));
    }
    sg.task = it->second;
    GraphTask& task = result.tasks[sg.task];
    task.weight += 1;
    task.subgraphs.push_back(static_cast<int>(result.subgraphs.size()));
    result.subgraphs.push_back(std::move(sg));
  }
  return result;
}

double GraphPartition::Flops() const {
  double total = 0;
  for (const GraphTask& t : tasks) total += t.weight * t.dag.Flops();
  return total;
}

std::string GraphPartition::ToString() const {
  std::string out = absl::StrFormat("%d tasks, %d subgraphs, %.4g GFLOP per run\n", tasks.size(),
                                    subgraphs.size(), Flops() * 1e-9);
  for (size_t i = 0; i < tasks.size(); ++i) {
    const GraphTask& t = tasks[i];
    std::vector<std::string> where;
    for (int s : t.subgraphs) where.push_back(NodeList(subgraphs[s].nodes));
    absl::StrAppendFormat(&out, "task %d  %-28s weight %d  %.4g MFLOP  key %s  nodes %s\n", i,
                          t.name, t.weight, t.dag.Flops() * 1e-6, t.workload_key,
                          absl::StrJoin(where, " | "));
  }
  for (size_t i = 0; i < subgraphs.size(); ++i) {
    const Subgraph& s = subgraphs[i];
    absl::StrAppendFormat(&out, "subgraph %d  task %d  %s -> %%%d  (reads %s)\n", i, s.task,
                          NodeList(s.nodes), s.output, NodeList(s.inputs));
  }
  return out;
}

absl::StatusOr<ir::BufferMap> RunPartitionReference(const ir::Graph& graph,
                                                    const GraphPartition& partition,
                                                    const ir::BufferMap& inputs) {
  RETURN_IF_ERROR(graph.Validate());
  std::map<int, ir::HostBuffer> values;
  for (int id : graph.leaves()) {
    ASSIGN_OR_RETURN(values[id], ir::GraphLeafBuffer(graph.node(id), inputs));
  }
  for (size_t i = 0; i < partition.subgraphs.size(); ++i) {
    const Subgraph& sg = partition.subgraphs[i];
    ir::BufferMap buffers;
    for (size_t k = 0; k < sg.inputs.size(); ++k) {
      auto it = values.find(sg.inputs[k]);
      CHECK(it != values.end()) << "subgraph " << i << " reads %" << sg.inputs[k]
                                << " before it is computed";
      buffers.emplace(sg.dag.stage(sg.dag.input_ids()[k]).name(), it->second);
    }
    absl::StatusOr<ir::BufferMap> out = ir::RunReference(sg.dag, buffers);
    if (!out.ok()) {
      return absl::Status(out.status().code(),
                          absl::StrCat("subgraph ", i, " (nodes ", NodeList(sg.nodes),
                                       "): ", out.status().message()));
    }
    values[sg.output] = std::move(out->begin()->second);
  }
  ir::BufferMap outputs;
  for (int id : graph.outputs()) outputs[graph.node(id).name] = values.at(id);
  return outputs;
}

}  // namespace tilesearch::search
