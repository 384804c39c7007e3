// Model layers built with the graph API (ir/graph.h): a BERT encoder layer, a
// ResNet-50 bottleneck and a LLaMA SwiGLU MLP, tuned by `tilesearch tune-graph` and run by
// `tilesearch run-graph` and examples/tune_graph.cc.
//
//   absl::StatusOr<ir::Graph> g = models::BertLayer({});              // full size
//   absl::StatusOr<ir::Graph> t = models::BertLayer(models::BertLayerConfig::Small());
//
// Each builder takes a size struct whose defaults are the published shapes and whose Small() is a
// tiny version with the same structure (tests interpret those in a second). Inputs are named "x";
// weights are params named after their role ("wq", "ln1_gamma"). All float32, row-major; a
// builder returns the graph's first error (ir::Graph::Validate) for inconsistent sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph.h"

namespace tilesearch::models {

/// A BERT-base encoder layer (Devlin et al. 2019; HuggingFace BertLayer, post-LN, inference).
struct BertLayerConfig {
  int64_t batch = 8;
  int64_t seq = 128;
  int64_t hidden = 768;
  int64_t heads = 12;  // must divide hidden
  int64_t ffn = 3072;
  double eps = 1e-12;  // layernorm epsilon (BERT's)
  /// batch 2, seq 4, hidden 8, 2 heads, ffn 16.
  static BertLayerConfig Small();
};
/// x[batch·seq, hidden] →
///   q, k, v = dense(x, wq/wk/wv[hidden, hidden], bias)                 (three equal denses)
///   heads(t) = reshape(transpose(reshape(t, [B, S, NH, D]), 0,2,1,3), [B·NH, S, D])
///   p = softmax(scale(batch_matmul(heads(q), heads(k)ᵀ), 1/√D))        [B·NH, S, S]
///   ctx = merge_heads(batch_matmul(p, heads(v)))                       [B·S, hidden]
///   a = layernorm(dense(ctx, wo, bo) + x)
///   out = layernorm(dense(dense(a, w1[ffn, hidden], b1, gelu), w2[hidden, ffn], b2) + a)
absl::StatusOr<ir::Graph> BertLayer(const BertLayerConfig& config);

/// A ResNet-50 bottleneck block with an identity shortcut (He et al. 2016; conv2_x's second and
/// third blocks: 56×56, 256 → 64 → 64 → 256 channels), NCHW, biases as [C, 1, 1] params (the
/// folded batch norm of inference).
struct ResNetBlockConfig {
  int64_t batch = 1;
  int64_t channels = 256;   // block input and output
  int64_t bottleneck = 64;  // the 3×3 convolution's channels
  int64_t height = 56;
  int64_t width = 56;
  /// batch 1, 8 → 4 → 4 → 8 channels, 6×6.
  static ResNetBlockConfig Small();
};
/// x[N, C, H, W] → y1 = relu(conv1x1(x, w1[Cb, C, 1, 1]) + b1)
///                 y2 = relu(conv3x3(y1, w2[Cb, Cb, 3, 3], pad 1) + b2)
///                 out = relu(conv1x1(y2, w3[C, Cb, 1, 1]) + b3 + x)        [N, C, H, W]
absl::StatusOr<ir::Graph> ResNetBlock(const ResNetBlockConfig& config);

/// The LLaMA MLP (Touvron et al. 2023; Shazeer 2020's SwiGLU), no biases.
struct SwiGluMlpConfig {
  int64_t tokens = 16;
  int64_t hidden = 4096;
  int64_t intermediate = 11008;
  /// 4 tokens, hidden 8, intermediate 12.
  static SwiGluMlpConfig Small();
};
/// x[T, H] → dense(silu(dense(x, wg[I, H])) · dense(x, wu[I, H]), wd[H, I])   [T, H]
absl::StatusOr<ir::Graph> SwiGluMlp(const SwiGluMlpConfig& config);

/// "bert_layer", "resnet_block", "swiglu_mlp".
const std::vector<std::string>& ModelNames();

/// The model `name` at full size, or Small() with `small`; `batch` > 0 replaces the batch (bert:
/// sequences; resnet: images; swiglu: tokens). Errors: kInvalidArgument "unknown model 'x'
/// (expected bert_layer, resnet_block or swiglu_mlp)", "batch must be >= 0, got -1"; the
/// builder's errors.
absl::StatusOr<ir::Graph> BuildModel(const std::string& name, int64_t batch = 0,
                                     bool small = false);

}  // namespace tilesearch::models
