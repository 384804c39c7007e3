// Graph construction: leaves, operator nodes with shape inference by the operator library, outputs,
// the sticky first error, and printing.
#include "ir/graph.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/ops/layout.h"

namespace tilesearch::ir {
namespace {

std::atomic<uint64_t> next_graph_uid{1};

/// Doubles as text that reads back exactly.
std::string DoubleText(double v) { return absl::StrFormat("%.17g", v); }

std::string IntListText(const std::vector<int64_t>& v) { return absl::StrJoin(v, ","); }

std::string PairText(const std::array<int64_t, 2>& v) { return absl::StrCat(v[0], ",", v[1]); }

std::map<std::string, std::string> MatmulAttrs(const MatmulOptions& o) {
  std::map<std::string, std::string> attrs;
  if (o.transpose_a) attrs["transpose_a"] = "true";
  if (o.transpose_b) attrs["transpose_b"] = "true";
  return attrs;
}

std::map<std::string, std::string> ConvAttrs(const Conv2dParams& p, bool with_groups) {
  std::map<std::string, std::string> attrs = {{"stride", PairText(p.stride)},
                                              {"padding", PairText(p.padding)},
                                              {"dilation", PairText(p.dilation)}};
  if (with_groups) attrs["groups"] = absl::StrCat(p.groups);
  return attrs;
}

std::map<std::string, std::string> PoolAttrs(const Pool2dParams& p) {
  return {{"kernel", PairText(p.kernel)},
          {"stride", PairText(p.stride.value_or(p.kernel))},
          {"padding", PairText(p.padding)},
          {"dilation", PairText(p.dilation)}};
}

}  // namespace

Graph::Graph() : uid_(next_graph_uid.fetch_add(1)) {}

Value Graph::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
  return Value();
}

absl::Status Graph::CheckValue(Value v, const std::string& what) const {
  if (!v.defined()) return absl::InvalidArgumentError(absl::StrCat(what, " is undefined"));
  if (v.graph_uid_ != uid_ || v.id_ >= num_nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " (value %", v.id_, ") belongs to another graph"));
  }
  return absl::OkStatus();
}

Value Graph::AddLeaf(NodeKind kind, const std::string& name, const std::vector<int64_t>& shape,
                     ScalarType dtype) {
  if (!status_.ok()) return Value();
  const char* what = kind == NodeKind::kInput ? "input" : "param";
  if (names_.count(name)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(what, " name '", name, "' is already used by node %", FindNode(name))));
  }
  absl::StatusOr<Tensor> t = Placeholder(name, shape, dtype);
  if (!t.ok()) {
    return Fail(
        absl::InvalidArgumentError(absl::StrCat(what, " '", name, "': ", t.status().message())));
  }
  GraphNode node;
  node.id = num_nodes();
  node.kind = kind;
  node.name = name;
  node.op = what;
  node.shape = shape;
  node.dtype = dtype;
  node.pattern = OpPattern::kOpaque;
  names_.insert(name);
  leaves_.push_back(node.id);
  nodes_.push_back(std::move(node));
  return Value(uid_, nodes_.back().id);
}

Value Graph::Input(const std::string& name, const std::vector<int64_t>& shape, ScalarType dtype) {
  return AddLeaf(NodeKind::kInput, name, shape, dtype);
}

Value Graph::Param(const std::string& name, const std::vector<int64_t>& shape, ScalarType dtype) {
  return AddLeaf(NodeKind::kParam, name, shape, dtype);
}

Value Graph::Op(const std::string& op, const std::vector<Value>& inputs,
                const std::map<std::string, std::string>& attrs) {
  if (!status_.ok()) return Value();
  const int id = num_nodes();
  const std::string where = absl::StrCat("node ", id, " (", op, "): ");
  absl::StatusOr<const GraphOpInfo*> info = FindGraphOp(op);
  if (!info.ok())
    return Fail(absl::InvalidArgumentError(where + std::string(info.status().message())));
  // Shape inference: build the operator on fresh placeholders of the operands' shapes.
  std::vector<Tensor> operands;
  std::vector<int> input_ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    absl::Status s = CheckValue(inputs[i], absl::StrCat("input ", i));
    if (!s.ok()) return Fail(absl::InvalidArgumentError(where + std::string(s.message())));
    const GraphNode& in = nodes_[inputs[i].id()];
    absl::StatusOr<Tensor> p = Placeholder(absl::StrCat("in", i), in.shape, in.dtype);
    CHECK(p.ok()) << p.status();  // the node's shape was valid when it was made
    operands.push_back(*p);
    input_ids.push_back(in.id);
  }
  std::string name = absl::StrCat(op, "_", id);
  while (names_.count(name)) name += "_";
  absl::StatusOr<Tensor> out = BuildGraphOp(op, operands, attrs, name);
  if (!out.ok()) {
    return Fail(absl::Status(out.status().code(), where + std::string(out.status().message())));
  }
  GraphNode node;
  node.id = id;
  node.kind = NodeKind::kOp;
  node.name = name;
  node.op = op;
  node.inputs = std::move(input_ids);
  node.attrs = attrs;
  node.shape = out->shape();
  node.dtype = out->dtype();
  node.pattern = (*info)->pattern;
  names_.insert(name);
  nodes_.push_back(std::move(node));
  return Value(uid_, id);
}

Value Graph::Dense(Value x, Value w, Value bias, Activation activation) {
  std::map<std::string, std::string> attrs;
  if (activation != Activation::kNone) attrs["activation"] = ActivationName(activation);
  if (bias.defined()) return Op("dense", {x, w, bias}, attrs);
  return Op("dense", {x, w}, attrs);
}

Value Graph::MatMul(Value a, Value b, const MatmulOptions& options) {
  return Op("matmul", {a, b}, MatmulAttrs(options));
}

Value Graph::BatchMatMul(Value a, Value b, const MatmulOptions& options) {
  return Op("batch_matmul", {a, b}, MatmulAttrs(options));
}

Value Graph::Conv2d(Value x, Value w, const Conv2dParams& params) {
  return Op("conv2d_nchw", {x, w}, ConvAttrs(params, true));
}

Value Graph::DepthwiseConv2d(Value x, Value w, const Conv2dParams& params) {
  return Op("depthwise_conv2d_nchw", {x, w}, ConvAttrs(params, false));
}

Value Graph::MaxPool2d(Value x, const Pool2dParams& params) {
  return Op("max_pool2d", {x}, PoolAttrs(params));
}

Value Graph::AvgPool2d(Value x, const Pool2dParams& params) {
  return Op("avg_pool2d", {x}, PoolAttrs(params));
}

Value Graph::Add(Value a, Value b) { return Op("add", {a, b}); }
Value Graph::Sub(Value a, Value b) { return Op("sub", {a, b}); }
Value Graph::Mul(Value a, Value b) { return Op("mul", {a, b}); }
Value Graph::Div(Value a, Value b) { return Op("div", {a, b}); }
Value Graph::Maximum(Value a, Value b) { return Op("maximum", {a, b}); }
Value Graph::Minimum(Value a, Value b) { return Op("minimum", {a, b}); }

Value Graph::Relu(Value x) { return Op("relu", {x}); }
Value Graph::Gelu(Value x) { return Op("gelu", {x}); }
Value Graph::Sigmoid(Value x) { return Op("sigmoid", {x}); }
Value Graph::Tanh(Value x) { return Op("tanh", {x}); }
Value Graph::Silu(Value x) { return Op("swish", {x}); }

Value Graph::Unary(UnaryOp op, Value x, const UnaryParams& params) {
  const UnaryParams d;
  std::map<std::string, std::string> attrs;
  switch (op) {
    case UnaryOp::kLeakyRelu:
      if (params.leaky_alpha != d.leaky_alpha) attrs["alpha"] = DoubleText(params.leaky_alpha);
      break;
    case UnaryOp::kElu:
      if (params.elu_alpha != d.elu_alpha) attrs["alpha"] = DoubleText(params.elu_alpha);
      break;
    case UnaryOp::kGelu:
      if (params.gelu_tanh) attrs["approximate"] = "tanh";
      break;
    case UnaryOp::kSoftplus:
      attrs["beta"] = DoubleText(params.softplus_beta);
      attrs["threshold"] = DoubleText(params.softplus_threshold);
      break;
    case UnaryOp::kHardtanh:
      attrs["min_val"] = DoubleText(params.min_val);
      attrs["max_val"] = DoubleText(params.max_val);
      break;
    default:
      break;
  }
  return Op(UnaryOpName(op), {x}, attrs);
}

Value Graph::Scale(Value x, double scale) {
  return Op("scale", {x}, {{"scale", DoubleText(scale)}});
}

Value Graph::Softmax(Value x, int64_t axis) {
  return Op("softmax", {x}, {{"axis", absl::StrCat(axis)}});
}

Value Graph::LayerNorm(Value x, Value gamma, Value beta, int normalized_ndim, double eps) {
  return Op("layernorm", {x, gamma, beta},
            {{"normalized_ndim", absl::StrCat(normalized_ndim)}, {"eps", DoubleText(eps)}});
}

Value Graph::RmsNorm(Value x, Value gamma, int normalized_ndim, double eps) {
  return Op("rmsnorm", {x, gamma},
            {{"normalized_ndim", absl::StrCat(normalized_ndim)}, {"eps", DoubleText(eps)}});
}

Value Graph::Reduce(ReduceOp op, Value x, const std::vector<int64_t>& axes, bool keepdim) {
  std::map<std::string, std::string> attrs;
  if (!axes.empty()) attrs["axes"] = IntListText(axes);
  if (keepdim) attrs["keepdim"] = "true";
  return Op(ReduceOpName(op), {x}, attrs);
}

Value Graph::Transpose(Value x, const std::vector<int64_t>& perm) {
  std::map<std::string, std::string> attrs;
  if (!perm.empty()) attrs["perm"] = IntListText(perm);
  return Op("transpose", {x}, attrs);
}

Value Graph::Reshape(Value x, const std::vector<int64_t>& shape) {
  return Op("reshape", {x}, {{"shape", IntListText(shape)}});
}

void Graph::MarkOutput(Value v) {
  if (!status_.ok()) return;
  absl::Status s = CheckValue(v, "output");
  if (!s.ok()) {
    Fail(s);
    return;
  }
  const GraphNode& n = nodes_[v.id()];
  if (n.kind != NodeKind::kOp) {
    Fail(absl::InvalidArgumentError(absl::StrCat(
        "output '", n.name, "' is ", n.kind == NodeKind::kInput ? "an input" : "a param",
        "; outputs must be operator nodes")));
    return;
  }
  for (int id : outputs_) {
    if (id == n.id) return;
  }
  outputs_.push_back(n.id);
}

absl::Status Graph::Validate() const {
  RETURN_IF_ERROR(status_);
  if (outputs_.empty()) {
    return absl::InvalidArgumentError("graph has no outputs (call MarkOutput)");
  }
  return absl::OkStatus();
}

const GraphNode& Graph::node(int id) const {
  CHECK(id >= 0 && id < num_nodes()) << "node id " << id << " out of range " << num_nodes();
  return nodes_[id];
}

const GraphNode& Graph::node(Value v) const {
  CHECK(CheckValue(v, "value").ok()) << "value %" << v.id() << " is not a node of this graph";
  return nodes_[v.id()];
}

std::vector<int64_t> Graph::shape(Value v) const {
  if (!CheckValue(v, "value").ok()) return {};
  return nodes_[v.id()].shape;
}

std::vector<int> Graph::Consumers(int id) const {
  std::vector<int> out;
  for (const GraphNode& n : nodes_) {
    for (int in : n.inputs) {
      if (in == id) {
        out.push_back(n.id);
        break;
      }
    }
  }
  return out;
}

Value Graph::value(int id) const {
  CHECK(id >= 0 && id < num_nodes()) << "node id " << id << " out of range " << num_nodes();
  return Value(uid_, id);
}

int Graph::FindNode(const std::string& name) const {
  for (const GraphNode& n : nodes_) {
    if (n.name == name) return n.id;
  }
  return -1;
}

std::string Graph::ToString() const {
  std::string out;
  for (const GraphNode& n : nodes_) {
    const std::string type = absl::StrCat(ShapeToString(n.shape), " ", TypeName(n.dtype));
    if (n.kind != NodeKind::kOp) {
      absl::StrAppend(&out, "%", n.id, " = ", n.op, " ", n.name, " : ", type, "\n");
      continue;
    }
    std::vector<std::string> args;
    for (int in : n.inputs) args.push_back(absl::StrCat("%", in));
    std::vector<std::string> attrs;
    for (const auto& [k, v] : n.attrs) attrs.push_back(absl::StrCat(k, "=", v));
    absl::StrAppend(&out, "%", n.id, " = ", n.op, "(", absl::StrJoin(args, ", "), ")",
                    attrs.empty() ? "" : " ", absl::StrJoin(attrs, " "), " : ", type, "  # ",
                    n.name, "\n");
  }
  std::vector<std::string> outs;
  for (int id : outputs_) outs.push_back(absl::StrCat("%", id));
  absl::StrAppend(&out, "outputs: ", outs.empty() ? "(none)" : absl::StrJoin(outs, ", "), "\n");
  return out;
}

}  // namespace tilesearch::ir
