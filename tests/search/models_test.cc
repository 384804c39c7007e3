// The model graphs of examples/models.h: every operator node's shape at full size, tiny versions'
// outputs (interpreted node by node, ir::RunGraphReference) against float64 loops written from the
// papers' formulas, and how the partitioner splits them.
#include "examples/models.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph.h"
#include "search/partition.h"

namespace tilesearch::models {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;
using Shape = std::vector<int64_t>;
using OpShapes = std::vector<std::pair<std::string, Shape>>;
using Mat = std::vector<double>;

// The operator nodes in creation order: (op, shape).
OpShapes OpNodes(const ir::Graph& g) {
  OpShapes out;
  for (const ir::GraphNode& n : g.nodes()) {
    if (n.kind == ir::NodeKind::kOp) out.emplace_back(n.op, n.shape);
  }
  return out;
}

// ---- float64 building blocks (row-major) ----

// x[m, k] · w[n, k]ᵀ + b[n] (b may be empty).
Mat Dense(const Mat& x, const Mat& w, const Mat& b, int64_t m, int64_t k, int64_t n) {
  Mat y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = b.empty() ? 0 : b[j];
      for (int64_t p = 0; p < k; ++p) s += x[i * k + p] * w[j * k + p];
      y[i * n + j] = s;
    }
  }
  return y;
}

Mat LayerNormRows(const Mat& x, const Mat& gamma, const Mat& beta, int64_t rows, int64_t cols,
                  double eps) {
  Mat y(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j) mean += x[i * cols + j] / cols;
    for (int64_t j = 0; j < cols; ++j) var += std::pow(x[i * cols + j] - mean, 2) / cols;
    for (int64_t j = 0; j < cols; ++j) {
      y[i * cols + j] = (x[i * cols + j] - mean) / std::sqrt(var + eps) * gamma[j] + beta[j];
    }
  }
  return y;
}

void ExpectClose(const Mat& got, const Mat& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-4 + 2e-4 * std::abs(want[i])) << "element " << i;
  }
}

// The graph's only output, interpreted.
Mat Interpret(const ir::Graph& g, const ir::BufferMap& in) {
  absl::StatusOr<ir::BufferMap> out = ir::RunGraphReference(g, in);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return out->at(g.node(g.outputs()[0]).name).data;
}

TEST(ModelsTest, BertLayerHasBertBaseShapes) {
  absl::StatusOr<ir::Graph> g = BertLayer({});
  ASSERT_TRUE(g.ok()) << g.status();
  const Shape t{1024, 768}, heads{96, 128, 64};
  const OpShapes split{{"dense", t},
                       {"reshape", {8, 128, 12, 64}},
                       {"transpose", {8, 12, 128, 64}},
                       {"reshape", heads}};
  OpShapes want;
  for (int i = 0; i < 3; ++i) want.insert(want.end(), split.begin(), split.end());
  const OpShapes rest{{"batch_matmul", {96, 128, 128}},
                      {"scale", {96, 128, 128}},
                      {"softmax", {96, 128, 128}},
                      {"batch_matmul", heads},
                      {"reshape", {8, 12, 128, 64}},
                      {"transpose", {8, 128, 12, 64}},
                      {"reshape", t},
                      {"dense", t},
                      {"add", t},
                      {"layernorm", t},
                      {"dense", {1024, 3072}},
                      {"dense", t},
                      {"add", t},
                      {"layernorm", t}};
  want.insert(want.end(), rest.begin(), rest.end());
  EXPECT_EQ(OpNodes(*g), want);
  // The query, key and value projections are one task: unfused with the output projection
  // (same shapes, weight 4), fused without it (it takes the residual add, weight 3).
  for (bool fuse : {false, true}) {
    absl::StatusOr<search::GraphPartition> p = search::PartitionGraph(*g, {.fuse = fuse});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->tasks[0].name, "dense");
    EXPECT_EQ(p->tasks[0].weight, fuse ? 3 : 4);
    // x·wᵀ (+ the bias, at most one add per element and a few more per output).
    EXPECT_GE(p->tasks[0].dag.Flops(), 2.0 * 1024 * 768 * 768);
    EXPECT_LE(p->tasks[0].dag.Flops(), 2.0 * 1024 * 768 * 768 + 4.0 * 1024 * 768);
  }
}

TEST(ModelsTest, ResNetBlockHasConv2Shapes) {
  for (int64_t batch : {1, 16}) {
    absl::StatusOr<ir::Graph> g = BuildModel("resnet_block", batch);
    ASSERT_TRUE(g.ok()) << g.status();
    const Shape in{batch, 256, 56, 56}, mid{batch, 64, 56, 56};
    const OpShapes want{{"conv2d_nchw", mid}, {"add", mid}, {"relu", mid},
                        {"conv2d_nchw", mid}, {"add", mid}, {"relu", mid},
                        {"conv2d_nchw", in},  {"add", in},  {"add", in},
                        {"relu", in}};
    EXPECT_EQ(OpNodes(*g), want) << "batch " << batch;
    EXPECT_EQ(g->shape(g->value(g->FindNode("w2"))), (Shape{64, 64, 3, 3}));
  }
}

TEST(ModelsTest, SwiGluMlpHasLlamaShapes) {
  absl::StatusOr<ir::Graph> g = BuildModel("swiglu_mlp");
  ASSERT_TRUE(g.ok()) << g.status();
  const Shape mid{16, 11008};
  const OpShapes want{
      {"dense", mid}, {"dense", mid}, {"swish", mid}, {"mul", mid}, {"dense", {16, 4096}}};
  EXPECT_EQ(OpNodes(*g), want);
  // The gate and up projections are one workload.
  absl::StatusOr<search::GraphPartition> p = search::PartitionGraph(*g, {.fuse = false});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tasks[0].weight, 2);
}

TEST(ModelsTest, SmallBertLayerComputesTheEncoderFormula) {
  const BertLayerConfig c = BertLayerConfig::Small();
  absl::StatusOr<ir::Graph> g = BertLayer(c);
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::BufferMap in = ir::MakeRandomGraphInputs(*g, 3);
  auto p = [&](const std::string& name) { return in.at(name).data; };
  const int64_t b = c.batch, s = c.seq, h = c.hidden, nh = c.heads, d = h / nh, t = b * s;
  const Mat x = p("x");
  const Mat q = Dense(x, p("wq"), p("bq"), t, h, h), k = Dense(x, p("wk"), p("bk"), t, h, h),
            v = Dense(x, p("wv"), p("bv"), t, h, h);
  Mat context(t * h, 0);
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t n = 0; n < nh; ++n) {
      for (int64_t i = 0; i < s; ++i) {
        Mat score(s);
        for (int64_t j = 0; j < s; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) {
            dot += q[(bi * s + i) * h + n * d + e] * k[(bi * s + j) * h + n * d + e];
          }
          score[j] = dot / std::sqrt(static_cast<double>(d));
        }
        const double top = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double& z : score) sum += (z = std::exp(z - top));
        for (int64_t j = 0; j < s; ++j) {
          for (int64_t e = 0; e < d; ++e) {
            context[(bi * s + i) * h + n * d + e] +=
                score[j] / sum * v[(bi * s + j) * h + n * d + e];
          }
        }
      }
    }
  }
  Mat attn = Dense(context, p("wo"), p("bo"), t, h, h);
  for (int64_t i = 0; i < t * h; ++i) attn[i] += x[i];
  attn = LayerNormRows(attn, p("ln1_gamma"), p("ln1_beta"), t, h, c.eps);
  Mat up = Dense(attn, p("w1"), p("b1"), t, h, c.ffn);
  for (double& z : up) z = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
  Mat out = Dense(up, p("w2"), p("b2"), t, c.ffn, h);
  for (int64_t i = 0; i < t * h; ++i) out[i] += attn[i];
  ExpectClose(Interpret(*g, in), LayerNormRows(out, p("ln2_gamma"), p("ln2_beta"), t, h, c.eps));
}

TEST(ModelsTest, SmallResNetBlockComputesTheBottleneck) {
  const ResNetBlockConfig c = ResNetBlockConfig::Small();
  absl::StatusOr<ir::Graph> g = ResNetBlock(c);
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::BufferMap in = ir::MakeRandomGraphInputs(*g, 4);
  const int64_t hh = c.height, ww = c.width;
  // conv(x[cin, H, W], w[cout, cin, r, r], pad r/2) + b, batch 1.
  auto conv = [&](const Mat& x, const std::string& name, int64_t cin, int64_t cout, int64_t r) {
    const Mat& w = in.at("w" + name).data;
    const Mat& bias = in.at("b" + name).data;
    Mat y(cout * hh * ww);
    for (int64_t o = 0; o < cout; ++o) {
      for (int64_t i = 0; i < hh; ++i) {
        for (int64_t j = 0; j < ww; ++j) {
          double sum = bias[o];
          for (int64_t ci = 0; ci < cin; ++ci) {
            for (int64_t a = 0; a < r; ++a) {
              for (int64_t e = 0; e < r; ++e) {
                const int64_t yi = i + a - r / 2, xj = j + e - r / 2;
                if (yi < 0 || yi >= hh || xj < 0 || xj >= ww) continue;
                sum += x[(ci * hh + yi) * ww + xj] * w[((o * cin + ci) * r + a) * r + e];
              }
            }
          }
          y[(o * hh + i) * ww + j] = sum;
        }
      }
    }
    return y;
  };
  auto relu = [](Mat m) {
    for (double& z : m) z = std::max(z, 0.0);
    return m;
  };
  const Mat& x = in.at("x").data;
  const Mat y1 = relu(conv(x, "1", c.channels, c.bottleneck, 1));
  const Mat y2 = relu(conv(y1, "2", c.bottleneck, c.bottleneck, 3));
  Mat y3 = conv(y2, "3", c.bottleneck, c.channels, 1);
  for (size_t i = 0; i < y3.size(); ++i) y3[i] += x[i];
  ExpectClose(Interpret(*g, in), relu(y3));
}

TEST(ModelsTest, SmallSwiGluMlpComputesSiluGateTimesUp) {
  const SwiGluMlpConfig c = SwiGluMlpConfig::Small();
  absl::StatusOr<ir::Graph> g = SwiGluMlp(c);
  ASSERT_TRUE(g.ok()) << g.status();
  const ir::BufferMap in = ir::MakeRandomGraphInputs(*g, 5);
  const Mat& x = in.at("x").data;
  const Mat gate = Dense(x, in.at("wg").data, {}, c.tokens, c.hidden, c.intermediate);
  Mat h = Dense(x, in.at("wu").data, {}, c.tokens, c.hidden, c.intermediate);
  for (size_t i = 0; i < h.size(); ++i) h[i] *= gate[i] / (1 + std::exp(-gate[i]));
  ExpectClose(Interpret(*g, in),
              Dense(h, in.at("wd").data, {}, c.tokens, c.intermediate, c.hidden));
}

TEST(ModelsTest, BadNamesAndSizesAreErrors) {
  EXPECT_THAT(BuildModel("gpt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown model 'gpt'")));
  EXPECT_THAT(BuildModel("bert_layer", -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch must be >= 0")));
  EXPECT_THAT(BertLayer({.hidden = 770}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("12 heads do not divide")));
  // A shape error inside the graph surfaces with its node.
  EXPECT_THAT(ResNetBlock({.height = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("x")));
}

}  // namespace
}  // namespace tilesearch::models
