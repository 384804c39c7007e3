// Unary activations, broadcasting binary arithmetic and scaling.
#include "ir/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ops/layout.h"
#include "ir/ops/op_checks.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {

const char* UnaryOpName(UnaryOp op) {
  switch (op) {
    case UnaryOp::kRelu:
      return "relu";
    case UnaryOp::kLeakyRelu:
      return "leaky_relu";
    case UnaryOp::kGelu:
      return "gelu";
    case UnaryOp::kSigmoid:
      return "sigmoid";
    case UnaryOp::kTanh:
      return "tanh";
    case UnaryOp::kSwish:
      return "swish";
    case UnaryOp::kSoftplus:
      return "softplus";
    case UnaryOp::kElu:
      return "elu";
    case UnaryOp::kHardtanh:
      return "hardtanh";
  }
  return "?";
}

const char* BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSub:
      return "sub";
    case BinaryOp::kMul:
      return "mul";
    case BinaryOp::kDiv:
      return "div";
    case BinaryOp::kMaximum:
      return "maximum";
    case BinaryOp::kMinimum:
      return "minimum";
  }
  return "?";
}

namespace {

/// f(x) of a unary operator; parameters already validated.
Expr UnaryBody(UnaryOp op, const Expr& x, const UnaryParams& p) {
  const ScalarType t = x.type();
  switch (op) {
    case UnaryOp::kRelu:
      return Max(x, MakeConst(t, 0));
    case UnaryOp::kLeakyRelu:
      return Select(x >= 0.0, x, x * p.leaky_alpha);
    case UnaryOp::kGelu:
      if (p.gelu_tanh) {
        const double k = std::sqrt(2.0 / M_PI);
        return 0.5 * x * (1.0 + Tanh(k * (x + 0.044715 * x * x * x)));
      }
      return 0.5 * x * (1.0 + Erf(x * M_SQRT1_2));
    case UnaryOp::kSigmoid:
      return Sigmoid(x);
    case UnaryOp::kTanh:
      return Tanh(x);
    case UnaryOp::kSwish:
      return x * Sigmoid(x);
    case UnaryOp::kSoftplus: {
      Expr bx = x * p.softplus_beta;
      return Select(bx > p.softplus_threshold, x, Log(1.0 + Exp(bx)) / p.softplus_beta);
    }
    case UnaryOp::kElu:
      return Select(x > 0.0, x, p.elu_alpha * (Exp(x) - 1.0));
    case UnaryOp::kHardtanh:
      return Min(Max(x, MakeConst(t, p.min_val)), MakeConst(t, p.max_val));
  }
  CHECK(false) << "unknown unary op";
  return Expr();
}

Expr BinaryBody(BinaryOp op, const Expr& a, const Expr& b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kMaximum:
      return Max(a, b);
    case BinaryOp::kMinimum:
      return Min(a, b);
  }
  CHECK(false) << "unknown binary op";
  return Expr();
}

/// Index into `x` (broadcast to `out_rank` axes) for the output index `i`.
std::vector<Expr> BroadcastIndex(const Tensor& x, const std::vector<Expr>& i,
                                 const std::vector<int64_t>& out_shape) {
  const int offset = static_cast<int>(out_shape.size()) - x.ndim();
  std::vector<Expr> index;
  for (int d = 0; d < x.ndim(); ++d) {
    const bool broadcast = x.shape()[d] == 1 && out_shape[offset + d] != 1;
    index.push_back(broadcast ? IntConst(0) : i[offset + d]);
  }
  return index;
}

}  // namespace

absl::StatusOr<Tensor> Unary(UnaryOp op, const Tensor& x, const UnaryParams& params,
                             const std::string& name) {
  const std::string op_name = UnaryOpName(op);
  if (op_name == "?") {
    return absl::InvalidArgumentError(
        absl::StrCat("unary: unknown operator ", static_cast<int>(op)));
  }
  RETURN_IF_ERROR(ops_internal::CheckDefined(op_name, "X", x));
  RETURN_IF_ERROR(RequireFloat(op_name, x));
  if (op == UnaryOp::kSoftplus && !(params.softplus_beta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("softplus: beta ", params.softplus_beta, " is not positive"));
  }
  if (op == UnaryOp::kHardtanh && !(params.min_val <= params.max_val)) {
    return absl::InvalidArgumentError(absl::StrCat("hardtanh: min_val ", params.min_val,
                                                   " is greater than max_val ", params.max_val));
  }
  return Compute(
      name.empty() ? op_name : name, x.shape(),
      [&](const std::vector<Expr>& i) { return UnaryBody(op, x(i), params); }, TagOnly(op_name));
}

absl::StatusOr<std::vector<int64_t>> BroadcastShape(const std::string& op,
                                                    const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    // k counts from the last axis.
    const int64_t ea = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t eb = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": shapes ", ShapeToString(a), " and ",
                                                     ShapeToString(b), " cannot be broadcast"));
    }
    out[rank - 1 - k] = std::max(ea, eb);
  }
  return out;
}

absl::StatusOr<Tensor> Binary(BinaryOp op, const Tensor& a, const Tensor& b,
                              const std::string& name) {
  const std::string op_name = BinaryOpName(op);
  if (op_name == "?") {
    return absl::InvalidArgumentError(
        absl::StrCat("binary: unknown operator ", static_cast<int>(op)));
  }
  RETURN_IF_ERROR(ops_internal::CheckDefined(op_name, "A", a));
  RETURN_IF_ERROR(ops_internal::CheckDefined(op_name, "B", b));
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(op_name, ": dtypes ", TypeName(a.dtype()),
                                                   " of '", a.name(), "' and ", TypeName(b.dtype()),
                                                   " of '", b.name(), "' differ"));
  }
  if (IsBool(a.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op_name, ": dtype bool of '", a.name(), "' is not numeric"));
  }
  if (op == BinaryOp::kDiv) RETURN_IF_ERROR(RequireFloat(op_name, a));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastShape(op_name, a.shape(), b.shape()));
  return Compute(
      name.empty() ? op_name : name, out_shape,
      [&](const std::vector<Expr>& i) {
        return BinaryBody(op, a(BroadcastIndex(a, i, out_shape)),
                          b(BroadcastIndex(b, i, out_shape)));
      },
      TagOnly(op_name));
}

absl::StatusOr<Tensor> Scale(const Tensor& x, double scale, const std::string& name) {
  RETURN_IF_ERROR(ops_internal::CheckDefined("scale", "X", x));
  RETURN_IF_ERROR(RequireFloat("scale", x));
  if (!std::isfinite(scale)) {
    return absl::InvalidArgumentError(absl::StrCat("scale: scale ", scale, " is not finite"));
  }
  return Compute(
      name, x.shape(), [&](const std::vector<Expr>& i) { return x(i) * scale; }, TagOnly("scale"));
}

absl::StatusOr<ComputeDAG> UnaryDAG(UnaryOp op, const std::vector<int64_t>& shape,
                                    const UnaryParams& params, ScalarType dtype) {
  ASSIGN_OR_RETURN(Tensor x, OpInput(UnaryOpName(op), "X", shape, dtype));
  ASSIGN_OR_RETURN(Tensor y, Unary(op, x, params));
  return ComputeDAG::Create({y});
}

absl::StatusOr<ComputeDAG> BinaryDAG(BinaryOp op, const std::vector<int64_t>& a_shape,
                                     const std::vector<int64_t>& b_shape, ScalarType dtype) {
  ASSIGN_OR_RETURN(Tensor a, OpInput(BinaryOpName(op), "A", a_shape, dtype));
  ASSIGN_OR_RETURN(Tensor b, OpInput(BinaryOpName(op), "B", b_shape, dtype));
  ASSIGN_OR_RETURN(Tensor y, Binary(op, a, b));
  return ComputeDAG::Create({y});
}

absl::StatusOr<ComputeDAG> ScaleDAG(const std::vector<int64_t>& shape, double scale,
                                    ScalarType dtype) {
  ASSIGN_OR_RETURN(Tensor x, OpInput("scale", "X", shape, dtype));
  ASSIGN_OR_RETURN(Tensor y, Scale(x, scale));
  return ComputeDAG::Create({y});
}

namespace ops_internal {
namespace {

/// Reads the attributes of unary operator `op` into params.
absl::StatusOr<UnaryParams> ParseUnaryParams(UnaryOp op, const OpArgs& args) {
  const std::string name = UnaryOpName(op);
  UnaryParams p;
  switch (op) {
    case UnaryOp::kLeakyRelu: {
      ASSIGN_OR_RETURN(p.leaky_alpha, FloatAttr(args, name, "alpha", p.leaky_alpha));
      break;
    }
    case UnaryOp::kGelu: {
      absl::StatusOr<std::string> approximate = StringAttr(args, name, "approximate", "none");
      RETURN_IF_ERROR(approximate.status());
      if (*approximate != "none" && *approximate != "tanh") {
        return absl::InvalidArgumentError(absl::StrCat("attribute 'approximate' of gelu: '",
                                                       *approximate, "' is not one of none, tanh"));
      }
      p.gelu_tanh = *approximate == "tanh";
      break;
    }
    case UnaryOp::kSoftplus: {
      ASSIGN_OR_RETURN(p.softplus_beta, FloatAttr(args, name, "beta", p.softplus_beta));
      ASSIGN_OR_RETURN(p.softplus_threshold,
                       FloatAttr(args, name, "threshold", p.softplus_threshold));
      break;
    }
    case UnaryOp::kElu: {
      ASSIGN_OR_RETURN(p.elu_alpha, FloatAttr(args, name, "alpha", p.elu_alpha));
      break;
    }
    case UnaryOp::kHardtanh: {
      ASSIGN_OR_RETURN(p.min_val, FloatAttr(args, name, "min_val", p.min_val));
      ASSIGN_OR_RETURN(p.max_val, FloatAttr(args, name, "max_val", p.max_val));
      break;
    }
    default:
      break;
  }
  return p;
}

struct UnaryEntry {
  UnaryOp op;
  const char* summary;
  std::vector<OpAttrInfo> attrs;
};

}  // namespace

void AppendElementwiseOps(std::vector<OpInfo>& ops) {
  const std::vector<UnaryEntry> unary = {
      {UnaryOp::kRelu, "max(x, 0)", {}},
      {UnaryOp::kLeakyRelu, "x if x >= 0 else alpha * x", {{"alpha", "0.01", "negative slope"}}},
      {UnaryOp::kGelu,
       "0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation",
       {{"approximate", "none", "none | tanh"}}},
      {UnaryOp::kSigmoid, "1 / (1 + exp(-x))", {}},
      {UnaryOp::kTanh, "tanh(x)", {}},
      {UnaryOp::kSwish, "x * sigmoid(x) (SiLU)", {}},
      {UnaryOp::kSoftplus,
       "log(1 + exp(beta x)) / beta; x where beta x > threshold",
       {{"beta", "1", "positive"}, {"threshold", "20", "linear above this beta * x"}}},
      {UnaryOp::kElu, "x if x > 0 else alpha (exp(x) - 1)", {{"alpha", "1", "negative scale"}}},
      {UnaryOp::kHardtanh,
       "min(max(x, min_val), max_val)",
       {{"min_val", "-1", "lower bound"}, {"max_val", "1", "upper bound"}}},
  };
  for (const UnaryEntry& e : unary) {
    const UnaryOp op = e.op;
    const std::string name = UnaryOpName(op);
    ops.push_back(OpInfo{
        .name = name,
        .summary = e.summary,
        .inputs = {"X[d0,...,dn-1]"},
        .attrs = e.attrs,
        .build = [op, name](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
          RETURN_IF_ERROR(ExpectInputs(args, name, 1));
          ASSIGN_OR_RETURN(UnaryParams params, ParseUnaryParams(op, args));
          return UnaryDAG(op, args.shapes[0], params, args.dtype);
        },
    });
  }
  const std::vector<std::pair<BinaryOp, const char*>> binary = {
      {BinaryOp::kAdd, "a + b with numpy broadcasting"},
      {BinaryOp::kSub, "a - b with numpy broadcasting"},
      {BinaryOp::kMul, "a * b with numpy broadcasting"},
      {BinaryOp::kDiv, "a / b with numpy broadcasting"},
      {BinaryOp::kMaximum, "max(a, b) with numpy broadcasting"},
      {BinaryOp::kMinimum, "min(a, b) with numpy broadcasting"},
  };
  for (const auto& [op, summary] : binary) {
    const BinaryOp binary_op = op;
    const std::string name = BinaryOpName(op);
    ops.push_back(OpInfo{
        .name = name,
        .summary = summary,
        .inputs = {"A[...]", "B[...] (broadcastable with A)"},
        .attrs = {},
        .build = [binary_op, name](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
          RETURN_IF_ERROR(ExpectInputs(args, name, 2));
          return BinaryDAG(binary_op, args.shapes[0], args.shapes[1], args.dtype);
        },
    });
  }
  ops.push_back(OpInfo{
      .name = "scale",
      .summary = "x * scale",
      .inputs = {"X[d0,...,dn-1]"},
      .attrs = {{"scale", "1", "the constant factor"}},
      .build = [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
        RETURN_IF_ERROR(ExpectInputs(args, "scale", 1));
        ASSIGN_OR_RETURN(double scale, FloatAttr(args, "scale", "scale", 1.0));
        return ScaleDAG(args.shapes[0], scale, args.dtype);
      },
  });
}

}  // namespace ops_internal
}  // namespace tilesearch::ir
