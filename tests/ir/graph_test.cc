// The graph API: shape inference against hand-computed shapes, the first recorded error with its
// node, attributes as text, printing, and node-by-node reference evaluation against naive C++
// loops in double.
#include "ir/graph.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

using Shape = std::vector<int64_t>;

TEST(GraphShapes, DenseMatmulAndBatchMatmul) {
  Graph g;
  Value x = g.Input("x", {16, 64});
  Value w = g.Param("w", {32, 64});
  Value b = g.Param("b", {32});
  EXPECT_EQ(g.shape(g.Dense(x, w, b, Activation::kRelu)), (Shape{16, 32}));
  EXPECT_EQ(g.shape(g.Dense(x, w)), (Shape{16, 32}));
  Value a = g.Input("a", {8, 5});
  Value c = g.Input("c", {5, 7});
  EXPECT_EQ(g.shape(g.MatMul(a, c)), (Shape{8, 7}));
  EXPECT_EQ(g.shape(g.MatMul(c, a, {.transpose_a = true, .transpose_b = true})), (Shape{7, 8}));
  Value q = g.Input("q", {6, 10, 4});
  Value k = g.Input("k", {6, 12, 4});
  EXPECT_EQ(g.shape(g.BatchMatMul(q, k, {.transpose_b = true})), (Shape{6, 10, 12}));
  EXPECT_THAT(g.Validate(), StatusIs(kInvalid, HasSubstr("no outputs")));
  EXPECT_THAT(g.status(), IsOk());
}

TEST(GraphShapes, ConvolutionAndPoolingFollowTheWindowFormula) {
  Graph g;
  Value x = g.Input("x", {2, 8, 15, 15});
  Value w = g.Param("w", {16, 8, 3, 3});
  Conv2dParams p;
  p.stride = {2, 2};
  p.padding = {1, 1};
  // floor((15 + 2 - 2 - 1) / 2) + 1 = 8.
  Value y = g.Conv2d(x, w, p);
  EXPECT_EQ(g.shape(y), (Shape{2, 16, 8, 8}));
  EXPECT_EQ(g.node(y).attrs.at("stride"), "2,2");
  EXPECT_EQ(g.node(y).attrs.at("groups"), "1");
  Value dw = g.Param("dw", {16, 1, 5, 5});
  Conv2dParams same;
  same.padding = {2, 2};
  EXPECT_EQ(g.shape(g.DepthwiseConv2d(y, dw, same)), (Shape{2, 16, 8, 8}));
  Pool2dParams pool;
  pool.kernel = {3, 3};
  pool.stride = std::array<int64_t, 2>{2, 2};
  // floor((8 - 2 - 1) / 2) + 1 = 3.
  EXPECT_EQ(g.shape(g.MaxPool2d(y, pool)), (Shape{2, 16, 3, 3}));
  EXPECT_EQ(g.shape(g.AvgPool2d(y, pool)), (Shape{2, 16, 3, 3}));
  EXPECT_THAT(g.status(), IsOk());
}

TEST(GraphShapes, ElementwiseBroadcastReductionsAndLayout) {
  Graph g;
  Value a = g.Input("a", {8, 1, 4});
  Value b = g.Input("b", {3, 1});
  EXPECT_EQ(g.shape(g.Add(a, b)), (Shape{8, 3, 4}));
  EXPECT_EQ(g.shape(g.Mul(b, a)), (Shape{8, 3, 4}));
  EXPECT_EQ(g.shape(g.Gelu(a)), (Shape{8, 1, 4}));
  EXPECT_EQ(g.shape(g.Scale(a, 0.5)), (Shape{8, 1, 4}));
  EXPECT_EQ(g.node(g.Scale(a, 0.1)).attrs.at("scale"), "0.10000000000000001");
  Value x = g.Input("x", {2, 3, 4, 5});
  EXPECT_EQ(g.shape(g.Softmax(x, 1)), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(g.shape(g.Reduce(ReduceOp::kSum, x, {1, 3})), (Shape{2, 4}));
  EXPECT_EQ(g.shape(g.Reduce(ReduceOp::kMean, x, {-1}, true)), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(g.shape(g.Transpose(x, {0, 2, 1, 3})), (Shape{2, 4, 3, 5}));
  EXPECT_EQ(g.shape(g.Reshape(x, {6, -1})), (Shape{6, 20}));
  EXPECT_EQ(g.shape(g.Reshape(x, {120})), (Shape{120}));
  Value gamma = g.Param("gamma", {4, 5});
  Value beta = g.Param("beta", {4, 5});
  EXPECT_EQ(g.shape(g.LayerNorm(x, gamma, beta, 2)), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(g.shape(g.RmsNorm(x, g.Param("rg", {5}))), (Shape{2, 3, 4, 5}));
  EXPECT_THAT(g.status(), IsOk());
}

TEST(GraphShapes, NodesRecordOpInputsAndGeneratedNames) {
  Graph g;
  Value x = g.Input("x", {4, 6});
  Value w = g.Param("w", {3, 6});
  Value y = g.Relu(g.Dense(x, w));
  g.MarkOutput(y);
  ASSERT_THAT(g.Validate(), IsOk());
  ASSERT_EQ(g.num_nodes(), 4);
  EXPECT_EQ(g.node(2).op, "dense");
  EXPECT_EQ(g.node(2).name, "dense_2");
  EXPECT_THAT(g.node(2).inputs, ElementsAre(0, 1));
  EXPECT_EQ(g.node(2).pattern, OpPattern::kOutEWiseFusable);
  EXPECT_EQ(g.node(y).op, "relu");
  EXPECT_EQ(g.node(y).pattern, OpPattern::kElemWise);
  EXPECT_THAT(g.node(y).inputs, ElementsAre(2));
  EXPECT_THAT(g.leaves(), ElementsAre(0, 1));
  EXPECT_THAT(g.outputs(), ElementsAre(3));
  EXPECT_THAT(g.Consumers(2), ElementsAre(3));
  EXPECT_EQ(g.FindNode("w"), 1);
  EXPECT_EQ(g.node(0).kind, NodeKind::kInput);
  EXPECT_EQ(g.node(1).kind, NodeKind::kParam);
  const std::string text = g.ToString();
  EXPECT_THAT(text, HasSubstr("%0 = input x : [4, 6] float32"));
  EXPECT_THAT(text, HasSubstr("%2 = dense(%0, %1) : [4, 3] float32  # dense_2"));
  EXPECT_THAT(text, HasSubstr("outputs: %3"));
}

TEST(GraphErrors, ShapeMismatchIsRecordedWithItsNodeAndSticks) {
  Graph g;
  Value x = g.Input("x", {16, 64});
  Value w = g.Param("w", {32, 48});
  Value y = g.Dense(x, w);
  EXPECT_FALSE(y.defined());
  EXPECT_THAT(g.status(), StatusIs(kInvalid, HasSubstr("node 2 (dense): dense: inner dimensions "
                                                       "differ")));
  EXPECT_THAT(g.status(), StatusIs(kInvalid, HasSubstr("[16, 64]")));
  // Later calls add nothing and keep the first error.
  Value z = g.Relu(x);
  EXPECT_FALSE(z.defined());
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_THAT(g.Validate(), StatusIs(kInvalid, HasSubstr("node 2 (dense)")));
}

TEST(GraphErrors, BroadcastMismatch) {
  Graph g;
  g.Add(g.Input("a", {2, 3}), g.Input("b", {4}));
  EXPECT_THAT(g.status(),
              StatusIs(kInvalid, HasSubstr("node 2 (add): add: shapes [2, 3] and [4] cannot be "
                                           "broadcast")));
}

TEST(GraphErrors, UndefinedAndForeignValues) {
  Graph g;
  Value x = g.Input("x", {4});
  g.Add(x, Value());
  EXPECT_THAT(g.status(), StatusIs(kInvalid, HasSubstr("node 1 (add): input 1 is undefined")));

  Graph other;
  Value y = other.Input("y", {4});
  Graph h;
  Value hx = h.Input("x", {4});
  h.Add(hx, y);
  EXPECT_THAT(h.status(), StatusIs(kInvalid, HasSubstr("input 1 (value %0) belongs to another "
                                                       "graph")));
}

TEST(GraphErrors, BadLeaves) {
  Graph g;
  g.Input("x", {4});
  g.Param("x", {4});
  EXPECT_THAT(g.status(), StatusIs(kInvalid, HasSubstr("param name 'x' is already used by node "
                                                       "%0")));
  Graph h;
  h.Input("x", {4, 0});
  EXPECT_THAT(h.status(), StatusIs(kInvalid, HasSubstr("input 'x'")));
  Graph k;
  k.Input("not a name", {4});
  EXPECT_THAT(k.status(), StatusIs(kInvalid, HasSubstr("input 'not a name'")));
}

TEST(GraphErrors, GenericOpChecksOperatorInputsAndAttributes) {
  Graph g;
  Value x = g.Input("x", {4, 4});
  g.Op("frobnicate", {x});
  EXPECT_THAT(g.status(), StatusIs(kInvalid, HasSubstr("unknown graph operator 'frobnicate'")));
  Graph h;
  Value hx = h.Input("x", {4, 4});
  h.Op("dense", {hx});
  EXPECT_THAT(h.status(), StatusIs(kInvalid, HasSubstr("dense: expected 2 to 3 inputs, got 1")));
  Graph k;
  Value kx = k.Input("x", {4, 4});
  k.Op("relu", {kx}, {{"axis", "1"}});
  EXPECT_THAT(k.status(), StatusIs(kInvalid, HasSubstr("relu: unknown attribute 'axis'")));
  Graph m;
  Value mx = m.Input("x", {4, 4});
  m.Op("softmax", {mx}, {{"axis", "one"}});
  EXPECT_THAT(m.status(), StatusIs(kInvalid, HasSubstr("'one' is not an integer")));
}

TEST(GraphErrors, ReshapeAndOperatorSpecificMessages) {
  Graph g;
  g.Reshape(g.Input("x", {2, 3}), {4});
  EXPECT_THAT(g.status(),
              StatusIs(kInvalid, HasSubstr("reshape: cannot reshape [2, 3] (6 elements) into "
                                           "[4]")));
  Graph h;
  h.Reshape(h.Input("x", {2, 3}), {-1, -1});
  EXPECT_THAT(h.status(), StatusIs(kInvalid, HasSubstr("more than one extent is -1")));
  Graph k;
  k.Reshape(k.Input("x", {2, 3}), {-1, 4});
  EXPECT_THAT(k.status(), StatusIs(kInvalid, HasSubstr("cannot reshape [2, 3]")));
  Graph m;
  Value mx = m.Input("x", {2, 3});
  m.Softmax(mx, 2);
  EXPECT_THAT(m.status(), StatusIs(kInvalid, HasSubstr("softmax: axis 2 out of range for rank "
                                                       "2")));
  Graph n;
  Value nx = n.Input("x", {1, 4, 5, 5});
  n.Conv2d(nx, n.Param("w", {8, 3, 3, 3}));
  EXPECT_THAT(n.status(), StatusIs(kInvalid, HasSubstr("node 2 (conv2d_nchw): conv2d_nchw")));
}

TEST(GraphErrors, OutputsMustBeOperatorNodes) {
  Graph g;
  Value x = g.Input("x", {4});
  g.MarkOutput(x);
  EXPECT_THAT(g.status(), StatusIs(kInvalid, HasSubstr("output 'x' is an input; outputs must be "
                                                       "operator nodes")));
}

// ---- Reference evaluation against naive loops -------------------------------------------------

TEST(GraphReference, MlpMatchesNaiveLoops) {
  const int64_t m = 5, k = 7, n = 4;
  Graph g;
  Value x = g.Input("x", {m, k});
  Value w = g.Param("w", {n, k});
  Value b = g.Param("b", {n});
  Value y = g.Relu(g.Add(g.Dense(x, w), b));
  g.MarkOutput(y);
  BufferMap in = MakeRandomGraphInputs(g, 11);
  absl::StatusOr<BufferMap> out = RunGraphReference(g, in);
  ASSERT_THAT(out.status(), IsOk());
  const HostBuffer& got = out->at(g.node(y).name);
  ASSERT_EQ(got.shape, (Shape{m, n}));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t r = 0; r < k; ++r)
        acc += in.at("x").data[i * k + r] * in.at("w").data[j * k + r];
      const double want = std::max(acc + in.at("b").data[j], 0.0);
      EXPECT_NEAR(got.data[i * n + j], want, 1e-5) << i << "," << j;
    }
  }
}

TEST(GraphReference, ReshapeThenTransposeMovesElements) {
  Graph g;
  Value x = g.Input("x", {6, 4});
  Value y = g.Transpose(g.Reshape(x, {2, 3, 4}), {2, 0, 1});  // [4, 2, 3]
  g.MarkOutput(y);
  BufferMap in = MakeRandomGraphInputs(g, 3);
  absl::StatusOr<BufferMap> out = RunGraphReference(g, in);
  ASSERT_THAT(out.status(), IsOk());
  const HostBuffer& got = out->at(g.node(y).name);
  ASSERT_EQ(got.shape, (Shape{4, 2, 3}));
  for (int64_t a = 0; a < 4; ++a) {
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t c = 0; c < 3; ++c) {
        // y[a, b, c] = r[b, c, a] = x.flat[b·12 + c·4 + a].
        EXPECT_EQ(got.data[(a * 2 + b) * 3 + c], in.at("x").data[b * 12 + c * 4 + a]);
      }
    }
  }
}

TEST(GraphReference, SoftmaxOfScaledInputMatchesNaiveLoops) {
  Graph g;
  Value x = g.Input("x", {3, 5});
  Value y = g.Softmax(g.Scale(x, 2.0));
  g.MarkOutput(y);
  BufferMap in = MakeRandomGraphInputs(g, 5);
  absl::StatusOr<BufferMap> out = RunGraphReference(g, in, /*all_nodes=*/true);
  ASSERT_THAT(out.status(), IsOk());
  EXPECT_EQ(out->size(), 2u);  // the scale node and the softmax node
  const HostBuffer& got = out->at(g.node(y).name);
  for (int i = 0; i < 3; ++i) {
    double mx = -1e300, sum = 0;
    for (int j = 0; j < 5; ++j) mx = std::max(mx, 2.0 * in.at("x").data[i * 5 + j]);
    for (int j = 0; j < 5; ++j) sum += std::exp(2.0 * in.at("x").data[i * 5 + j] - mx);
    for (int j = 0; j < 5; ++j) {
      EXPECT_NEAR(got.data[i * 5 + j], std::exp(2.0 * in.at("x").data[i * 5 + j] - mx) / sum, 1e-6);
    }
  }
}

TEST(GraphReference, MissingOrMisshapedInputs) {
  Graph g;
  Value x = g.Input("x", {3});
  g.MarkOutput(g.Relu(x));
  EXPECT_THAT(RunGraphReference(g, {}).status(),
              StatusIs(kInvalid, HasSubstr("missing buffer for input 'x'")));
  BufferMap in;
  in["x"] = HostBuffer::Zeros(ScalarType::kFloat32, {4});
  EXPECT_THAT(RunGraphReference(g, in).status(),
              StatusIs(kInvalid, HasSubstr("buffer for 'x' is [4] float32 but the graph says [3] "
                                           "float32")));
}

TEST(GraphOps, TableListsPatternsAndBuildsByName) {
  ASSERT_TRUE(std::is_sorted(GraphOps().begin(), GraphOps().end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
  absl::StatusOr<const GraphOpInfo*> dense = FindGraphOp("dense");
  ASSERT_THAT(dense.status(), IsOk());
  EXPECT_EQ((*dense)->pattern, OpPattern::kOutEWiseFusable);
  EXPECT_EQ((*FindGraphOp("layernorm"))->pattern, OpPattern::kCommReduce);
  EXPECT_EQ((*FindGraphOp("reshape"))->pattern, OpPattern::kInjective);
  EXPECT_EQ((*FindGraphOp("add"))->pattern, OpPattern::kBroadcast);
  EXPECT_THAT(FindGraphOp("nope").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown graph operator 'nope'")));
  absl::StatusOr<Tensor> a = Placeholder("a", {4, 8});
  absl::StatusOr<Tensor> w = Placeholder("w", {2, 8});
  absl::StatusOr<Tensor> y = BuildGraphOp("dense", {*a, *w}, {{"activation", "gelu"}}, "y");
  ASSERT_THAT(y.status(), IsOk());
  EXPECT_EQ(y->shape(), (Shape{4, 2}));
  EXPECT_EQ(y->name(), "y");
}

}  // namespace
}  // namespace tilesearch::ir
