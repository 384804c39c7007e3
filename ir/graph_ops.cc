// The graph operator table: each graph operator's fusion pattern, input count, attributes and the
// builder that applies the library operator (ir/ops/*) to input tensors. Also Reshape, the one
// graph operator the library lacks.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/graph.h"
#include "ir/ops/conv.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/layout.h"
#include "ir/ops/linear.h"
#include "ir/ops/norm.h"
#include "ir/ops/op_checks.h"
#include "ir/ops/pool.h"
#include "ir/ops/reduce.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {
namespace {

using ops_internal::BoolAttr;
using ops_internal::FloatAttr;
using ops_internal::IntAttr;
using ops_internal::IntListAttr;
using ops_internal::PairAttr;
using ops_internal::StringAttr;

/// Builds an operator's stages: inputs (count already checked), attributes in `args.attrs`.
using BuildFn = std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>& in,
                                                     const OpArgs& args, const std::string& name)>;

struct OpDef {
  GraphOpInfo info;
  BuildFn build;
};

absl::StatusOr<MatmulOptions> ReadMatmulOptions(const OpArgs& args, const std::string& op) {
  MatmulOptions o;
  ASSIGN_OR_RETURN(o.transpose_a, BoolAttr(args, op, "transpose_a", false));
  ASSIGN_OR_RETURN(o.transpose_b, BoolAttr(args, op, "transpose_b", false));
  return o;
}

absl::StatusOr<Pool2dParams> ReadPool(const OpArgs& args, const std::string& op) {
  if (!args.attrs.count("kernel")) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": attribute 'kernel' is required"));
  }
  Pool2dParams p;
  ASSIGN_OR_RETURN(p.kernel, PairAttr(args, op, "kernel", {1, 1}));
  ASSIGN_OR_RETURN(p.stride, PairAttr(args, op, "stride", p.kernel));
  ASSIGN_OR_RETURN(p.padding, PairAttr(args, op, "padding", {0, 0}));
  ASSIGN_OR_RETURN(p.dilation, PairAttr(args, op, "dilation", {1, 1}));
  return p;
}

absl::StatusOr<UnaryParams> ReadUnaryParams(const OpArgs& args, const std::string& op) {
  UnaryParams p;
  ASSIGN_OR_RETURN(p.leaky_alpha, FloatAttr(args, op, "alpha", p.leaky_alpha));
  absl::StatusOr<std::string> approximate = StringAttr(args, op, "approximate", "none");
  if (!approximate.ok()) return approximate.status();
  if (*approximate != "none" && *approximate != "tanh") {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'approximate' of ", op, ": '",
                                                   *approximate, "' is not none or tanh"));
  }
  p.gelu_tanh = *approximate == "tanh";
  ASSIGN_OR_RETURN(p.softplus_beta, FloatAttr(args, op, "beta", p.softplus_beta));
  ASSIGN_OR_RETURN(p.softplus_threshold, FloatAttr(args, op, "threshold", p.softplus_threshold));
  if (op == "elu") {
    ASSIGN_OR_RETURN(p.elu_alpha, FloatAttr(args, op, "alpha", p.elu_alpha));
  }
  ASSIGN_OR_RETURN(p.min_val, FloatAttr(args, op, "min_val", p.min_val));
  ASSIGN_OR_RETURN(p.max_val, FloatAttr(args, op, "max_val", p.max_val));
  return p;
}

/// Attributes each unary operator reads.
std::vector<std::string> UnaryAttrs(UnaryOp op) {
  switch (op) {
    case UnaryOp::kLeakyRelu:
    case UnaryOp::kElu:
      return {"alpha"};
    case UnaryOp::kGelu:
      return {"approximate"};
    case UnaryOp::kSoftplus:
      return {"beta", "threshold"};
    case UnaryOp::kHardtanh:
      return {"max_val", "min_val"};
    default:
      return {};
  }
}

void AddOp(std::vector<OpDef>* ops, std::string name, OpPattern pattern, int min_in, int max_in,
           std::vector<std::string> inputs, std::vector<std::string> attrs, BuildFn build) {
  ops->push_back(OpDef{
      GraphOpInfo{std::move(name), pattern, min_in, max_in, std::move(inputs), std::move(attrs)},
      std::move(build)});
}

// Data reuse: elementwise consumers fuse into these.
void AddDataReuseOps(std::vector<OpDef>* ops) {
  AddOp(ops, "dense", OpPattern::kOutEWiseFusable, 2, 3, {"X[M,K]", "W[N,K]", "bias[N] (optional)"},
        {"activation"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(std::string text, StringAttr(a, "dense", "activation", "none"));
          ASSIGN_OR_RETURN(Activation act, ParseActivation("dense", text));
          return Dense(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), act, name, name + "_acc");
        });
  AddOp(ops, "matmul", OpPattern::kOutEWiseFusable, 2, 2, {"A[M,K]", "B[K,N]"},
        {"transpose_a", "transpose_b"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(MatmulOptions o, ReadMatmulOptions(a, "matmul"));
          return Matmul(in[0], in[1], o, name);
        });
  AddOp(ops, "batch_matmul", OpPattern::kOutEWiseFusable, 2, 2, {"A[B,M,K]", "B[B,K,N]"},
        {"transpose_a", "transpose_b"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(MatmulOptions o, ReadMatmulOptions(a, "batch_matmul"));
          return BatchMatmul(in[0], in[1], o, name);
        });
  AddOp(ops, "conv2d_nchw", OpPattern::kOutEWiseFusable, 2, 2, {"X[N,C,H,W]", "W[K,C/groups,R,S]"},
        {"dilation", "groups", "padding", "stride"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(Conv2dParams p, ops_internal::ReadConv2dParams(a, "conv2d_nchw"));
          return Conv2dNchw(in[0], in[1], p, name);
        });
  AddOp(ops, "depthwise_conv2d_nchw", OpPattern::kOutEWiseFusable, 2, 2,
        {"X[N,C,H,W]", "W[C*m,1,R,S]"}, {"dilation", "padding", "stride"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(Conv2dParams p,
                           ops_internal::ReadConv2dParams(a, "depthwise_conv2d_nchw"));
          return DepthwiseConv2dNchw(in[0], in[1], p, name);
        });
  AddOp(ops, "max_pool2d", OpPattern::kOutEWiseFusable, 1, 1, {"X[N,C,H,W]"},
        {"dilation", "kernel", "padding", "stride"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(Pool2dParams p, ReadPool(a, "max_pool2d"));
          return MaxPool2d(in[0], p, name);
        });
  AddOp(ops, "avg_pool2d", OpPattern::kOutEWiseFusable, 1, 1, {"X[N,C,H,W]"},
        {"dilation", "kernel", "padding", "stride"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(Pool2dParams p, ReadPool(a, "avg_pool2d"));
          return AvgPool2d(in[0], p, name, name + "_sum");
        });
}

// Reductions (with their elementwise tails).
void AddReductionOps(std::vector<OpDef>* ops) {
  for (const char* op : {"softmax", "log_softmax"}) {
    const std::string s = op;
    AddOp(ops, s, OpPattern::kCommReduce, 1, 1, {"X"}, {"axis"},
          [s](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
            ASSIGN_OR_RETURN(int64_t axis, IntAttr(a, s, "axis", -1));
            return s == "softmax" ? Softmax(in[0], axis, name) : LogSoftmax(in[0], axis, name);
          });
  }
  AddOp(ops, "layernorm", OpPattern::kCommReduce, 3, 3, {"X", "gamma", "beta"},
        {"eps", "normalized_ndim"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(int64_t nd, IntAttr(a, "layernorm", "normalized_ndim", 1));
          ASSIGN_OR_RETURN(double eps, FloatAttr(a, "layernorm", "eps", 1e-5));
          return LayerNorm(in[0], in[1], in[2], static_cast<int>(nd), eps, name);
        });
  AddOp(ops, "rmsnorm", OpPattern::kCommReduce, 2, 2, {"X", "gamma"}, {"eps", "normalized_ndim"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(int64_t nd, IntAttr(a, "rmsnorm", "normalized_ndim", 1));
          ASSIGN_OR_RETURN(double eps, FloatAttr(a, "rmsnorm", "eps", 1e-6));
          return RmsNorm(in[0], in[1], static_cast<int>(nd), eps, name);
        });
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
    const std::string s = ReduceOpName(op);
    AddOp(ops, s, OpPattern::kCommReduce, 1, 1, {"X"}, {"axes", "keepdim"},
          [s, op](const auto& in, const OpArgs& a,
                  const std::string& name) -> absl::StatusOr<Tensor> {
            ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntListAttr(a, s, "axes", {}));
            ASSIGN_OR_RETURN(bool keepdim, BoolAttr(a, s, "keepdim", false));
            return ReduceAxes(op, in[0], axes, keepdim, name);
          });
  }
}

// Elementwise and injective.
void AddElementwiseOps(std::vector<OpDef>* ops) {
  for (UnaryOp op :
       {UnaryOp::kRelu, UnaryOp::kLeakyRelu, UnaryOp::kGelu, UnaryOp::kSigmoid, UnaryOp::kTanh,
        UnaryOp::kSwish, UnaryOp::kSoftplus, UnaryOp::kElu, UnaryOp::kHardtanh}) {
    const std::string s = UnaryOpName(op);
    AddOp(ops, s, OpPattern::kElemWise, 1, 1, {"X"}, UnaryAttrs(op),
          [s, op](const auto& in, const OpArgs& a,
                  const std::string& name) -> absl::StatusOr<Tensor> {
            ASSIGN_OR_RETURN(UnaryParams p, ReadUnaryParams(a, s));
            return Unary(op, in[0], p, name);
          });
  }
  AddOp(ops, "scale", OpPattern::kElemWise, 1, 1, {"X"}, {"scale"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          if (!a.attrs.count("scale")) {
            return absl::InvalidArgumentError("scale: attribute 'scale' is required");
          }
          ASSIGN_OR_RETURN(double scale, FloatAttr(a, "scale", "scale", 1.0));
          return Scale(in[0], scale, name);
        });
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv,
                      BinaryOp::kMaximum, BinaryOp::kMinimum}) {
    AddOp(ops, BinaryOpName(op), OpPattern::kBroadcast, 2, 2, {"A", "B"}, {},
          [op](const auto& in, const OpArgs&, const std::string& name) -> absl::StatusOr<Tensor> {
            return Binary(op, in[0], in[1], name);
          });
  }
  AddOp(ops, "transpose", OpPattern::kInjective, 1, 1, {"X"}, {"perm"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          ASSIGN_OR_RETURN(std::vector<int64_t> perm, IntListAttr(a, "transpose", "perm", {}));
          return Transpose(in[0], perm, name);
        });
  AddOp(ops, "reshape", OpPattern::kInjective, 1, 1, {"X"}, {"shape"},
        [](const auto& in, const OpArgs& a, const std::string& name) -> absl::StatusOr<Tensor> {
          if (!a.attrs.count("shape")) {
            return absl::InvalidArgumentError("reshape: attribute 'shape' is required");
          }
          ASSIGN_OR_RETURN(std::vector<int64_t> shape, IntListAttr(a, "reshape", "shape", {}));
          return Reshape(in[0], shape, name);
        });
}

std::vector<OpDef> MakeOps() {
  std::vector<OpDef> ops;
  AddDataReuseOps(&ops);
  AddReductionOps(&ops);
  AddElementwiseOps(&ops);
  std::sort(ops.begin(), ops.end(),
            [](const OpDef& a, const OpDef& b) { return a.info.name < b.info.name; });
  return ops;
}

const std::vector<OpDef>& Ops() {
  static const std::vector<OpDef>* ops = new std::vector<OpDef>(MakeOps());
  return *ops;
}

const OpDef* FindDef(const std::string& op) {
  for (const OpDef& def : Ops()) {
    if (def.info.name == op) return &def;
  }
  return nullptr;
}

}  // namespace

const char* OpPatternName(OpPattern pattern) {
  switch (pattern) {
    case OpPattern::kElemWise:
      return "elemwise";
    case OpPattern::kBroadcast:
      return "broadcast";
    case OpPattern::kInjective:
      return "injective";
    case OpPattern::kCommReduce:
      return "comm_reduce";
    case OpPattern::kOutEWiseFusable:
      return "out_ewise_fusable";
    case OpPattern::kOpaque:
      return "opaque";
  }
  return "unknown";
}

const std::vector<GraphOpInfo>& GraphOps() {
  static const std::vector<GraphOpInfo>* infos = [] {
    auto* v = new std::vector<GraphOpInfo>();
    for (const OpDef& def : Ops()) v->push_back(def.info);
    return v;
  }();
  return *infos;
}

absl::StatusOr<const GraphOpInfo*> FindGraphOp(const std::string& op) {
  for (const GraphOpInfo& info : GraphOps()) {
    if (info.name == op) return &info;
  }
  return absl::NotFoundError(absl::StrCat("unknown graph operator '", op, "'"));
}

absl::StatusOr<Tensor> BuildGraphOp(const std::string& op, const std::vector<Tensor>& inputs,
                                    const std::map<std::string, std::string>& attrs,
                                    const std::string& name) {
  const OpDef* def = FindDef(op);
  if (def == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown graph operator '", op, "'"));
  }
  const GraphOpInfo& info = def->info;
  const int n = static_cast<int>(inputs.size());
  if (n < info.min_inputs || n > info.max_inputs) {
    std::string expected = info.min_inputs == info.max_inputs
                               ? absl::StrCat(info.min_inputs)
                               : absl::StrCat(info.min_inputs, " to ", info.max_inputs);
    return absl::InvalidArgumentError(absl::StrCat(op, ": expected ", expected, " input",
                                                   info.max_inputs == 1 ? "" : "s", ", got ", n));
  }
  for (int i = 0; i < n; ++i) {
    if (!inputs[i].defined()) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": input ", i, " is undefined"));
    }
  }
  for (const auto& [key, value] : attrs) {
    if (std::find(info.attrs.begin(), info.attrs.end(), key) == info.attrs.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": unknown attribute '", key, "'",
          info.attrs.empty() ? std::string(" (it takes none)")
                             : absl::StrCat(" (expected ", absl::StrJoin(info.attrs, ", "), ")")));
    }
  }
  OpArgs args;
  for (const Tensor& t : inputs) args.shapes.push_back(t.shape());
  args.dtype = inputs.empty() ? ScalarType::kFloat32 : inputs[0].dtype();
  args.attrs = attrs;
  return def->build(inputs, args, name);
}

absl::StatusOr<Tensor> Reshape(const Tensor& x, const std::vector<int64_t>& shape,
                               const std::string& name) {
  if (!x.defined()) return absl::InvalidArgumentError("reshape: X is undefined");
  const int64_t n = x.NumElements();
  std::vector<int64_t> out = shape;
  int inferred = -1;
  int64_t known = 1;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == -1) {
      if (inferred >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("reshape: more than one extent is -1 in ", ShapeToString(shape)));
      }
      inferred = static_cast<int>(d);
    } else if (out[d] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("reshape: extent ", out[d], " in dimension ",
                                                     d, " of ", ShapeToString(shape),
                                                     " is not positive"));
    } else if (out[d] > n || known > n / out[d]) {
      known = n + 1;  // more elements than x has (reported below), without overflowing
    } else {
      known *= out[d];
    }
  }
  if (inferred >= 0 && known <= n && n % known == 0) out[inferred] = n / known;
  int64_t total = 1;
  bool fits = !out.empty();
  for (int64_t e : out) {
    if (e < 1 || e > n || total > n / e) {  // total · e > n, without overflow
      fits = false;
      break;
    }
    total *= e;
  }
  if (!fits || total != n) {
    return absl::InvalidArgumentError(absl::StrCat("reshape: cannot reshape ",
                                                   ShapeToString(x.shape()), " (", n,
                                                   " elements) into ", ShapeToString(shape)));
  }
  const std::vector<int64_t> in_shape = x.shape();
  return Compute(
      name, out,
      [&](const std::vector<Expr>& axes) {
        // Row-major flat index of the output element, then the input index of that position.
        Expr flat = axes[0];
        for (size_t d = 1; d < axes.size(); ++d) flat = flat * IntConst(out[d]) + axes[d];
        std::vector<Expr> index(in_shape.size());
        for (size_t d = in_shape.size(); d-- > 0;) {
          index[d] = d == 0 ? flat : flat % IntConst(in_shape[d]);
          if (d > 0) flat = flat / IntConst(in_shape[d]);
        }
        return x(index);
      },
      TagOnly("reshape"));
}

}  // namespace tilesearch::ir
