// Graph partitioning: which nodes fuse (MLP, BERT layer, diamonds, elementwise chains, reductions),
// deduplication by workload key with weights, the subgraph ↔ graph node mapping, and that every
// subgraph's DAG computes what the graph's nodes compute one by one (reference interpreter), with
// the MLP also checked against naive loops in double.
#include "search/partition.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph.h"
#include "ir/reference.h"

namespace tilesearch::search {
namespace {

using ir::Graph;
using ir::Value;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

/// dense(x, w) + b, then relu: the layer the MLP repeats.
Value DenseBiasRelu(Graph& g, Value x, const std::string& name, int64_t out, int64_t in) {
  Value w = g.Param(name + "_w", {out, in});
  Value b = g.Param(name + "_b", {out});
  return g.Relu(g.Add(g.Dense(x, w), b));
}

/// 16 tokens, 64 → 64 → 64 → 32: the two 64 → 64 layers are one task.
Graph Mlp() {
  Graph g;
  Value x = g.Input("x", {16, 64});
  Value h1 = DenseBiasRelu(g, x, "fc1", 64, 64);
  Value h2 = DenseBiasRelu(g, h1, "fc2", 64, 64);
  g.MarkOutput(DenseBiasRelu(g, h2, "fc3", 32, 64));
  return g;
}

const GraphTask* TaskNamed(const GraphPartition& p, const std::string& name, int weight) {
  for (const GraphTask& t : p.tasks) {
    if (t.name == name && t.weight == weight) return &t;
  }
  return nullptr;
}

/// Max |a − b| over two equally shaped buffers.
double MaxDiff(const ir::HostBuffer& a, const ir::HostBuffer& b) {
  EXPECT_EQ(a.shape, b.shape);
  double d = 0;
  for (size_t i = 0; i < a.data.size() && i < b.data.size(); ++i) {
    d = std::max(d, std::abs(a.data[i] - b.data[i]));
  }
  return d;
}

/// Every subgraph's DAG, fed with the node-by-node reference values of its inputs, reproduces the
/// node-by-node value of its output node; and the whole partition run reproduces the outputs.
void ExpectSubgraphsMatchNodeByNode(const Graph& g, const GraphPartition& p, uint64_t seed) {
  ir::BufferMap in = ir::MakeRandomGraphInputs(g, seed);
  absl::StatusOr<ir::BufferMap> nodes = ir::RunGraphReference(g, in, /*all_nodes=*/true);
  ASSERT_THAT(nodes.status(), IsOk());
  auto value_of = [&](int id) -> const ir::HostBuffer& {
    const std::string& name = g.node(id).name;
    return g.node(id).kind == ir::NodeKind::kOp ? nodes->at(name) : in.at(name);
  };
  for (size_t i = 0; i < p.subgraphs.size(); ++i) {
    const Subgraph& sg = p.subgraphs[i];
    ir::BufferMap buffers;
    ASSERT_EQ(sg.inputs.size(), sg.dag.input_ids().size());
    for (size_t k = 0; k < sg.inputs.size(); ++k) {
      buffers[sg.dag.stage(sg.dag.input_ids()[k]).name()] = value_of(sg.inputs[k]);
    }
    absl::StatusOr<ir::BufferMap> out = ir::RunReference(sg.dag, buffers);
    ASSERT_THAT(out.status(), IsOk());
    EXPECT_LE(MaxDiff(out->begin()->second, value_of(sg.output)), 1e-5) << "subgraph " << i;
  }
  absl::StatusOr<ir::BufferMap> whole = RunPartitionReference(g, p, in);
  ASSERT_THAT(whole.status(), IsOk());
  for (int id : g.outputs()) {
    EXPECT_LE(MaxDiff(whole->at(g.node(id).name), value_of(id)), 1e-5);
  }
}

TEST(PartitionMlp, DenseBiasReluLayersFuseAndRepeatedLayersDeduplicate) {
  Graph g = Mlp();
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->subgraphs.size(), 3u);
  ASSERT_EQ(p->tasks.size(), 2u);
  EXPECT_EQ(p->tasks[0].name, "dense_add_relu");
  EXPECT_EQ(p->tasks[0].weight, 2);
  EXPECT_THAT(p->tasks[0].subgraphs, ElementsAre(0, 1));
  EXPECT_EQ(p->tasks[1].name, "dense_add_relu");
  EXPECT_EQ(p->tasks[1].weight, 1);
  EXPECT_NE(p->tasks[0].workload_key, p->tasks[1].workload_key);
  EXPECT_EQ(p->tasks[0].workload_key, p->subgraphs[1].dag.WorkloadKey());
  // Node ids: x 0, fc1_w 1, fc1_b 2, dense 3, add 4, relu 5, fc2_w 6, fc2_b 7, dense 8, ...
  EXPECT_THAT(p->subgraphs[0].nodes, ElementsAre(3, 4, 5));
  EXPECT_EQ(p->subgraphs[0].anchor, 3);
  EXPECT_EQ(p->subgraphs[0].output, 5);
  EXPECT_THAT(p->subgraphs[0].inputs, UnorderedElementsAre(0, 1, 2));
  EXPECT_THAT(p->subgraphs[1].nodes, ElementsAre(8, 9, 10));
  EXPECT_THAT(p->subgraphs[1].inputs, UnorderedElementsAre(5, 6, 7));
  // Equal keys mean equal argument positions: the activation is bound where x was.
  for (size_t k = 0; k < 3; ++k) {
    if (p->subgraphs[0].inputs[k] == 0) {
      EXPECT_EQ(p->subgraphs[1].inputs[k], 5);
    }
    if (p->subgraphs[0].inputs[k] == 1) {
      EXPECT_EQ(p->subgraphs[1].inputs[k], 6);
    }
  }
  // dense (16·64·64 MACs) + bias add + relu per layer.
  EXPECT_DOUBLE_EQ(p->tasks[0].dag.Flops(), 2.0 * 16 * 64 * 64 + 16 * 64 + 16 * 64);
  EXPECT_DOUBLE_EQ(p->Flops(),
                   2 * (2.0 * 16 * 64 * 64 + 2 * 16 * 64) + (2.0 * 16 * 32 * 64 + 2 * 16 * 32));
  EXPECT_THAT(p->ToString(), HasSubstr("weight 2"));
}

TEST(PartitionMlp, PartitionRunMatchesNaiveLoopsInDouble) {
  Graph g = Mlp();
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ir::BufferMap in = ir::MakeRandomGraphInputs(g, 42);
  absl::StatusOr<ir::BufferMap> out = RunPartitionReference(g, *p, in);
  ASSERT_THAT(out.status(), IsOk());
  std::vector<double> h = in.at("x").data;
  int64_t width = 64;
  for (const auto& [name, out_features] :
       std::vector<std::pair<std::string, int64_t>>{{"fc1", 64}, {"fc2", 64}, {"fc3", 32}}) {
    const std::vector<double>& w = in.at(name + "_w").data;
    const std::vector<double>& b = in.at(name + "_b").data;
    std::vector<double> next(16 * out_features);
    for (int64_t i = 0; i < 16; ++i) {
      for (int64_t j = 0; j < out_features; ++j) {
        double acc = b[j];
        for (int64_t k = 0; k < width; ++k) acc += h[i * width + k] * w[j * width + k];
        next[i * out_features + j] = std::max(acc, 0.0);
      }
    }
    h = std::move(next);
    width = out_features;
  }
  const ir::HostBuffer& got = out->at(g.node(g.outputs()[0]).name);
  ASSERT_EQ(got.data.size(), h.size());
  for (size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(got.data[i], h[i], 1e-4) << i;
  ExpectSubgraphsMatchNodeByNode(g, *p, 42);
}

/// A BERT encoder layer; by default at toy size: 2 sequences of 8 tokens, hidden 32, 2 heads of
/// 16, FFN 64.
Graph BertLayer(int64_t b = 2, int64_t s = 8, int64_t heads = 2, int64_t dh = 16,
                int64_t ffn = 64) {
  const int64_t hidden = heads * dh;
  Graph g;
  Value x = g.Input("x", {b * s, hidden});
  auto linear = [&](Value in, const std::string& name, int64_t out, int64_t width) {
    return g.Add(g.Dense(in, g.Param(name + "_w", {out, width})), g.Param(name + "_b", {out}));
  };
  auto heads_first = [&](Value t) {  // [b·s, hidden] → [b·heads, s, dh]
    return g.Reshape(g.Transpose(g.Reshape(t, {b, s, heads, dh}), {0, 2, 1, 3}),
                     {b * heads, s, dh});
  };
  Value q = heads_first(linear(x, "q", hidden, hidden));
  Value k = heads_first(linear(x, "k", hidden, hidden));
  Value v = heads_first(linear(x, "v", hidden, hidden));
  Value scores = g.Scale(g.BatchMatMul(q, k, {.transpose_b = true}), 0.25);
  Value ctx = g.BatchMatMul(g.Softmax(scores), v);
  Value merged =
      g.Reshape(g.Transpose(g.Reshape(ctx, {b, heads, s, dh}), {0, 2, 1, 3}), {b * s, hidden});
  Value attn = g.Add(linear(merged, "o", hidden, hidden), x);
  Value ln1 = g.LayerNorm(attn, g.Param("ln1_g", {hidden}), g.Param("ln1_b", {hidden}));
  Value f = g.Gelu(linear(ln1, "f1", ffn, hidden));
  Value out = g.Add(linear(f, "f2", hidden, ffn), ln1);
  g.MarkOutput(g.LayerNorm(out, g.Param("ln2_g", {hidden}), g.Param("ln2_b", {hidden})));
  return g;
}

TEST(PartitionBert, TasksAndWeightsFollowTvmFusion) {
  Graph g = BertLayer();
  ASSERT_THAT(g.Validate(), IsOk());
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  // q, k, v projections; their head reshapes; scores; softmax; context; merge; output projection
  // with bias and residual; two layernorms; FFN up with gelu; FFN down with bias and residual.
  EXPECT_EQ(p->subgraphs.size(), 15u) << p->ToString();
  EXPECT_EQ(p->tasks.size(), 10u) << p->ToString();
  EXPECT_NE(TaskNamed(*p, "dense_add", 3), nullptr) << p->ToString();
  EXPECT_NE(TaskNamed(*p, "reshape_transpose_reshape", 3), nullptr) << p->ToString();
  EXPECT_NE(TaskNamed(*p, "batch_matmul_scale", 1), nullptr) << p->ToString();
  EXPECT_NE(TaskNamed(*p, "softmax", 1), nullptr) << p->ToString();
  EXPECT_NE(TaskNamed(*p, "batch_matmul", 1), nullptr) << p->ToString();
  EXPECT_NE(TaskNamed(*p, "reshape_transpose_reshape", 1), nullptr) << p->ToString();
  EXPECT_NE(TaskNamed(*p, "layernorm", 2), nullptr) << p->ToString();
  EXPECT_NE(TaskNamed(*p, "dense_add_gelu", 1), nullptr) << p->ToString();
  int dense_add_add = 0;
  for (const GraphTask& t : p->tasks) dense_add_add += t.name == "dense_add_add" ? t.weight : 0;
  EXPECT_EQ(dense_add_add, 2);  // output projection and FFN down: different shapes, two tasks
  int weights = 0;
  for (const GraphTask& t : p->tasks) weights += t.weight;
  EXPECT_EQ(weights, 15);
  // Every operator node is in exactly one subgraph, and subgraphs run after their producers.
  std::vector<int> seen(g.num_nodes(), 0);
  std::vector<bool> ready(g.num_nodes(), false);
  for (int id : g.leaves()) ready[id] = true;
  for (const Subgraph& sg : p->subgraphs) {
    for (int id : sg.nodes) ++seen[id];
    for (int id : sg.inputs) EXPECT_TRUE(ready[id]) << "%" << id << " read before computed";
    ready[sg.output] = true;
  }
  for (const ir::GraphNode& n : g.nodes()) {
    EXPECT_EQ(seen[n.id], n.kind == ir::NodeKind::kOp ? 1 : 0) << "%" << n.id;
  }
  EXPECT_TRUE(p->dead_nodes.empty());
}

TEST(PartitionBert, BertBaseSizesPartitionTheSameWay) {
  // batch 8, sequence 128, 12 heads of 64 (hidden 768), FFN 3072: shapes only, nothing runs.
  Graph g = BertLayer(8, 128, 12, 64, 3072);
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_EQ(p->subgraphs.size(), 15u);
  EXPECT_EQ(p->tasks.size(), 10u);
  const GraphTask* qkv = TaskNamed(*p, "dense_add", 3);
  ASSERT_NE(qkv, nullptr);
  EXPECT_DOUBLE_EQ(qkv->dag.Flops(), 2.0 * 1024 * 768 * 768 + 1024 * 768);
  const GraphTask* up = TaskNamed(*p, "dense_add_gelu", 1);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->dag.stage(up->dag.output_ids()[0]).shape(), (std::vector<int64_t>{1024, 3072}));
}

TEST(PartitionModels, SwigluMlpFusesTheActivationAndTheProductIntoTheTwoDenses) {
  Graph g;
  Value x = g.Input("x", {16, 4096});
  Value gate = g.Dense(x, g.Param("w_gate", {11008, 4096}));
  Value up = g.Dense(x, g.Param("w_up", {11008, 4096}));
  Value act = g.Silu(gate);
  Value h = g.Mul(act, up);
  g.MarkOutput(g.Dense(h, g.Param("w_down", {4096, 11008})));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->subgraphs.size(), 3u) << p->ToString();
  // In node order: the gate dense takes silu; the up dense then takes the product (its group has
  // no anchor yet); the silu group can no longer join it (one anchor per task).
  EXPECT_THAT(p->subgraphs[0].nodes, ElementsAre(gate.id(), act.id()));
  EXPECT_EQ(p->tasks[p->subgraphs[0].task].name, "dense_swish");
  EXPECT_THAT(p->subgraphs[1].nodes, ElementsAre(up.id(), h.id()));
  EXPECT_EQ(p->tasks[p->subgraphs[1].task].name, "dense_mul");
  EXPECT_EQ(p->tasks[p->subgraphs[2].task].name, "dense");
  EXPECT_EQ(p->tasks.size(), 3u);  // the up and down denses differ in shape
}

TEST(PartitionModels, ResnetBottleneckIsThreeConvTasks) {
  Graph g;
  Value x = g.Input("x", {1, 256, 56, 56});
  auto conv = [&](Value in, const std::string& name, int64_t k, int64_t c, int64_t r) {
    ir::Conv2dParams p;
    p.padding = {r / 2, r / 2};
    Value y = g.Conv2d(in, g.Param(name + "_w", {k, c, r, r}), p);
    return g.Add(y, g.Param(name + "_b", {k, 1, 1}));
  };
  Value a = g.Relu(conv(x, "c1", 64, 256, 1));
  Value b = g.Relu(conv(a, "c2", 64, 64, 3));
  g.MarkOutput(g.Relu(g.Add(conv(b, "c3", 256, 64, 1), x)));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->tasks.size(), 3u) << p->ToString();
  EXPECT_EQ(p->tasks[0].name, "conv2d_nchw_add_relu");
  EXPECT_EQ(p->tasks[1].name, "conv2d_nchw_add_relu");
  EXPECT_EQ(p->tasks[2].name, "conv2d_nchw_add_add_relu");
  EXPECT_DOUBLE_EQ(p->tasks[1].dag.Flops(), 2.0 * 64 * 56 * 56 * 64 * 9 + 2.0 * 64 * 56 * 56);
}

TEST(PartitionBert, EverySubgraphComputesWhatItsNodesCompute) {
  Graph g = BertLayer();
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ExpectSubgraphsMatchNodeByNode(g, *p, 7);
}

TEST(PartitionFusion, DiamondUnderAnAnchorFusesThroughItsPostDominator) {
  Graph g;
  Value x = g.Input("x", {8, 16});
  Value d = g.Dense(x, g.Param("w", {12, 16}));
  Value r = g.Relu(d);
  Value s = g.Sigmoid(d);
  g.MarkOutput(g.Mul(r, s));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->subgraphs.size(), 1u);
  EXPECT_THAT(p->subgraphs[0].nodes, ElementsAre(2, 3, 4, 5));
  EXPECT_EQ(p->tasks[0].name, "dense_relu_sigmoid_mul");
  ExpectSubgraphsMatchNodeByNode(g, *p, 1);
}

TEST(PartitionFusion, ElementwiseChainWithoutAnchorIsItsOwnTask) {
  Graph g;
  Value x = g.Input("x", {4, 8});
  Value y = g.Input("y", {8});
  g.MarkOutput(g.Add(g.Sigmoid(g.Relu(x)), y));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->subgraphs.size(), 1u);
  EXPECT_EQ(p->subgraphs[0].anchor, -1);
  EXPECT_EQ(p->tasks[0].name, "relu_sigmoid_add");
  EXPECT_THAT(p->subgraphs[0].inputs, UnorderedElementsAre(0, 1));
  ExpectSubgraphsMatchNodeByNode(g, *p, 2);
}

TEST(PartitionFusion, AReductionTakesElementwiseProducersAndConsumers) {
  Graph g;
  Value x = g.Input("x", {4, 8});
  Value y = g.Input("y", {4, 8});
  Value sum = g.Add(x, y);
  Value sm = g.Softmax(sum);
  Value d = g.Dense(g.Relu(sm), g.Param("w", {6, 8}));
  g.MarkOutput(d);
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->subgraphs.size(), 2u) << p->ToString();
  EXPECT_EQ(p->tasks[0].name, "add_softmax_relu");
  EXPECT_EQ(p->subgraphs[0].anchor, sm.id());
  EXPECT_EQ(p->tasks[1].name, "dense");
  ExpectSubgraphsMatchNodeByNode(g, *p, 3);
}

TEST(PartitionFusion, ADenseTakesNoProducers) {
  Graph g;
  Value x = g.Input("x", {4, 8});
  g.MarkOutput(g.Dense(g.Relu(x), g.Param("w", {6, 8})));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->tasks.size(), 2u) << p->ToString();
  EXPECT_EQ(p->tasks[0].name, "relu");
  EXPECT_EQ(p->tasks[1].name, "dense");
}

TEST(PartitionFusion, OneAnchorPerTask) {
  Graph g;
  Value x = g.Input("x", {4, 8});
  Value d = g.Add(g.Dense(x, g.Param("w", {8, 8})), x);
  g.MarkOutput(g.LayerNorm(d, g.Param("gamma", {8}), g.Param("beta", {8})));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->tasks.size(), 2u);
  EXPECT_EQ(p->tasks[0].name, "dense_add");
  EXPECT_EQ(p->tasks[1].name, "layernorm");
}

TEST(PartitionFusion, ConvBiasReluWithBroadcastBiasAndResidual) {
  Graph g;
  Value x = g.Input("x", {1, 8, 6, 6});
  ir::Conv2dParams same;
  same.padding = {1, 1};
  Value c1 =
      g.Relu(g.Add(g.Conv2d(x, g.Param("w1", {8, 8, 3, 3}), same), g.Param("b1", {8, 1, 1})));
  Value c2 = g.Add(g.Conv2d(c1, g.Param("w2", {8, 8, 3, 3}), same), g.Param("b2", {8, 1, 1}));
  g.MarkOutput(g.Relu(g.Add(c2, x)));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->tasks.size(), 2u) << p->ToString();
  EXPECT_EQ(p->tasks[0].name, "conv2d_nchw_add_relu");
  EXPECT_EQ(p->tasks[1].name, "conv2d_nchw_add_add_relu");
  ExpectSubgraphsMatchNodeByNode(g, *p, 4);
}

TEST(PartitionFusion, AValueReadTwiceIsOnePlaceholder) {
  Graph g;
  Value x = g.Input("x", {4, 8});
  g.MarkOutput(g.Mul(x, x));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_THAT(p->subgraphs[0].inputs, ElementsAre(0));
  ExpectSubgraphsMatchNodeByNode(g, *p, 5);
}

TEST(PartitionFusion, GraphOutputsEndTheirSubgraphs) {
  Graph g;
  Value x = g.Input("x", {4, 8});
  Value d = g.Dense(x, g.Param("w", {8, 8}));
  g.MarkOutput(d);
  g.MarkOutput(g.Relu(d));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->subgraphs.size(), 2u);
  EXPECT_THAT(p->subgraphs[0].nodes, ElementsAre(2));
  EXPECT_THAT(p->subgraphs[1].nodes, ElementsAre(3));
}

TEST(PartitionOptionsTest, NoFusionGivesOneSubgraphPerNodeAndDeadNodesAreDropped) {
  Graph g = Mlp();
  Value unused = g.Relu(g.value(0));
  ASSERT_TRUE(unused.defined());
  absl::StatusOr<GraphPartition> p = PartitionGraph(g, {.fuse = false});
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_EQ(p->subgraphs.size(), 9u);
  EXPECT_THAT(p->dead_nodes, ElementsAre(unused.id()));
  // The two 64 → 64 layers still share their dense, add and relu tasks; fc3 has its own three.
  EXPECT_EQ(p->tasks.size(), 6u);
  ExpectSubgraphsMatchNodeByNode(g, *p, 6);
}

TEST(PartitionErrors, GraphErrorsPassThrough) {
  Graph g;
  g.Relu(g.Input("x", {4}));
  EXPECT_THAT(PartitionGraph(g).status(), StatusIs(kInvalid, HasSubstr("graph has no outputs")));
  Graph h;
  h.Add(h.Input("a", {2}), h.Input("b", {3}));
  EXPECT_THAT(PartitionGraph(h).status(), StatusIs(kInvalid, HasSubstr("node 2 (add)")));
}

TEST(PartitionErrors, RunPartitionReferenceNeedsEveryLeaf) {
  Graph g = Mlp();
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ir::BufferMap in = ir::MakeRandomGraphInputs(g, 1);
  in.erase("fc2_b");
  EXPECT_THAT(RunPartitionReference(g, *p, in).status(),
              StatusIs(kInvalid, HasSubstr("missing buffer for param 'fc2_b'")));
}

}  // namespace
}  // namespace tilesearch::search
