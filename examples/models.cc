#include "examples/models.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::models {
namespace {

absl::StatusOr<ir::Graph> Validated(ir::Graph g) {
  RETURN_IF_ERROR(g.Validate());
  return g;
}

}  // namespace

BertLayerConfig BertLayerConfig::Small() {
  return {.batch = 2, .seq = 4, .hidden = 8, .heads = 2, .ffn = 16};
}
ResNetBlockConfig ResNetBlockConfig::Small() {
  return {.batch = 1, .channels = 8, .bottleneck = 4, .height = 6, .width = 6};
}
SwiGluMlpConfig SwiGluMlpConfig::Small() { return {.tokens = 4, .hidden = 8, .intermediate = 12}; }

absl::StatusOr<ir::Graph> BertLayer(const BertLayerConfig& c) {
  if (c.heads < 1 || c.hidden % c.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bert_layer: ", c.heads, " heads do not divide hidden size ", c.hidden));
  }
  const int64_t b = c.batch, s = c.seq, h = c.hidden, nh = c.heads, d = c.hidden / c.heads;
  ir::Graph g;
  const ir::Value x = g.Input("x", {b * s, h});
  auto dense = [&](ir::Value in, const std::string& name, int64_t out, int64_t k,
                   ir::Activation act = ir::Activation::kNone) {
    const ir::Value w = g.Param("w" + name, {out, k});  // params in a fixed order: w, then b
    const ir::Value bias = g.Param("b" + name, {out});
    return g.Dense(in, w, bias, act);
  };
  // [B·S, H] → [B·NH, S, D] and back.
  auto split_heads = [&](ir::Value t) {
    return g.Reshape(g.Transpose(g.Reshape(t, {b, s, nh, d}), {0, 2, 1, 3}), {b * nh, s, d});
  };
  auto merge_heads = [&](ir::Value t) {
    return g.Reshape(g.Transpose(g.Reshape(t, {b, nh, s, d}), {0, 2, 1, 3}), {b * s, h});
  };
  auto layernorm = [&](ir::Value in, const std::string& name) {
    const ir::Value gamma = g.Param(name + "_gamma", {h});
    const ir::Value beta = g.Param(name + "_beta", {h});
    return g.LayerNorm(in, gamma, beta, 1, c.eps);
  };
  const ir::Value q = split_heads(dense(x, "q", h, h));
  const ir::Value k = split_heads(dense(x, "k", h, h));
  const ir::Value v = split_heads(dense(x, "v", h, h));
  const ir::Value scores = g.BatchMatMul(q, k, {.transpose_b = true});  // [B·NH, S, S]
  const ir::Value probs = g.Softmax(g.Scale(scores, 1.0 / std::sqrt(static_cast<double>(d))));
  const ir::Value context = merge_heads(g.BatchMatMul(probs, v));
  const ir::Value attention = layernorm(g.Add(dense(context, "o", h, h), x), "ln1");
  const ir::Value up = dense(attention, "1", c.ffn, h, ir::Activation::kGelu);
  g.MarkOutput(layernorm(g.Add(dense(up, "2", h, c.ffn), attention), "ln2"));
  return Validated(std::move(g));
}

absl::StatusOr<ir::Graph> ResNetBlock(const ResNetBlockConfig& c) {
  ir::Graph g;
  const ir::Value x = g.Input("x", {c.batch, c.channels, c.height, c.width});
  // conv(in, w[out, cin, r, r]) + b[out, 1, 1]: the inference form of conv + batch norm.
  auto conv_bias = [&](ir::Value in, const std::string& name, int64_t out, int64_t cin, int64_t r) {
    ir::Conv2dParams params;
    params.padding = {r / 2, r / 2};
    const ir::Value conv = g.Conv2d(in, g.Param("w" + name, {out, cin, r, r}), params);
    return g.Add(conv, g.Param("b" + name, {out, 1, 1}));
  };
  const ir::Value y1 = g.Relu(conv_bias(x, "1", c.bottleneck, c.channels, 1));
  const ir::Value y2 = g.Relu(conv_bias(y1, "2", c.bottleneck, c.bottleneck, 3));
  const ir::Value y3 = conv_bias(y2, "3", c.channels, c.bottleneck, 1);
  g.MarkOutput(g.Relu(g.Add(y3, x)));
  return Validated(std::move(g));
}

absl::StatusOr<ir::Graph> SwiGluMlp(const SwiGluMlpConfig& c) {
  ir::Graph g;
  const ir::Value x = g.Input("x", {c.tokens, c.hidden});
  const ir::Value gate = g.Dense(x, g.Param("wg", {c.intermediate, c.hidden}));
  const ir::Value up = g.Dense(x, g.Param("wu", {c.intermediate, c.hidden}));
  const ir::Value hidden = g.Mul(g.Silu(gate), up);
  g.MarkOutput(g.Dense(hidden, g.Param("wd", {c.hidden, c.intermediate})));
  return Validated(std::move(g));
}

const std::vector<std::string>& ModelNames() {
  static const auto* names =
      new std::vector<std::string>{"bert_layer", "resnet_block", "swiglu_mlp"};
  return *names;
}

absl::StatusOr<ir::Graph> BuildModel(const std::string& name, int64_t batch, bool small) {
  if (batch < 0) return absl::InvalidArgumentError(absl::StrCat("batch must be >= 0, got ", batch));
  if (name == "bert_layer") {
    BertLayerConfig c = small ? BertLayerConfig::Small() : BertLayerConfig{};
    if (batch > 0) c.batch = batch;
    return BertLayer(c);
  }
  if (name == "resnet_block") {
    ResNetBlockConfig c = small ? ResNetBlockConfig::Small() : ResNetBlockConfig{};
    if (batch > 0) c.batch = batch;
    return ResNetBlock(c);
  }
  if (name == "swiglu_mlp") {
    SwiGluMlpConfig c = small ? SwiGluMlpConfig::Small() : SwiGluMlpConfig{};
    if (batch > 0) c.tokens = batch;
    return SwiGluMlp(c);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model '", name, "' (expected bert_layer, resnet_block or swiglu_mlp)"));
}

}  // namespace tilesearch::models
