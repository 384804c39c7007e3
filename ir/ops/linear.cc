#include "ir/ops/linear.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ops/op_checks.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {

using ops_internal::AccumulatingReduce;
using ops_internal::AccumulationType;
using ops_internal::CheckNumeric;
using ops_internal::CheckSameDtype;
using ops_internal::CheckTensor;
using ops_internal::MakeInput;
using ops_internal::Narrow;
using ops_internal::ShapeStr;
using ops_internal::Widen;

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
  }
  return "?";
}

absl::StatusOr<Activation> ParseActivation(const std::string& op, const std::string& text) {
  if (text == "none") return Activation::kNone;
  if (text == "relu") return Activation::kRelu;
  if (text == "gelu") return Activation::kGelu;
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": unknown activation '", text, "' (expected none, relu or gelu)"));
}

Expr ApplyActivation(Activation activation, const Expr& x) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return Max(x, MakeConst(x.type(), 0));
    case Activation::kGelu:
      return x * 0.5 * (Erf(x * M_SQRT1_2) + 1.0);
  }
  CHECK(false) << "unknown activation";
  return x;
}

namespace {

absl::Status CheckOperands(const std::string& op, const std::string& a_name, const Tensor& a,
                           const std::string& b_name, const Tensor& b) {
  RETURN_IF_ERROR(CheckNumeric(op, a_name, a));
  RETURN_IF_ERROR(CheckNumeric(op, b_name, b));
  return CheckSameDtype(op, a_name, a, b_name, b);
}

absl::Status InnerMismatch(const std::string& op, const Tensor& a, const std::string& a_name,
                           const Tensor& b, const std::string& b_name) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": inner dimensions differ: ", a_name, " is ",
                                                 ShapeStr(a.shape()), ", ", b_name, " is ",
                                                 ShapeStr(b.shape())));
}

std::string Transposed(const std::string& layout, bool transposed, const std::string& swapped) {
  return transposed ? swapped : layout;
}

}  // namespace

absl::StatusOr<Tensor> Matmul(const Tensor& a, const Tensor& b, const MatmulOptions& options,
                              const std::string& name) {
  const std::string op = "matmul";
  RETURN_IF_ERROR(CheckTensor(op, "A", a, 2, Transposed("[M, K]", options.transpose_a, "[K, M]")));
  RETURN_IF_ERROR(CheckTensor(op, "B", b, 2, Transposed("[K, N]", options.transpose_b, "[N, K]")));
  RETURN_IF_ERROR(CheckOperands(op, "A", a, "B", b));
  const int64_t m = options.transpose_a ? a.shape()[1] : a.shape()[0];
  const int64_t k = options.transpose_a ? a.shape()[0] : a.shape()[1];
  const int64_t kb = options.transpose_b ? b.shape()[1] : b.shape()[0];
  const int64_t n = options.transpose_b ? b.shape()[0] : b.shape()[1];
  if (k != kb) return InnerMismatch(op, a, "A", b, "B");
  return AccumulatingReduce(
      name, {m, n}, ReduceKind::kSum, {k},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        Expr lhs = options.transpose_a ? a(r[0], ax[0]) : a(ax[0], r[0]);
        Expr rhs = options.transpose_b ? b(ax[1], r[0]) : b(r[0], ax[1]);
        return Widen(lhs) * Widen(rhs);
      },
      a.dtype(), ComputeOptions{{"i", "j"}, {"k"}, "matmul"});
}

absl::StatusOr<ComputeDAG> MatmulDAG(const std::vector<int64_t>& a_shape,
                                     const std::vector<int64_t>& b_shape, ScalarType dtype,
                                     const MatmulOptions& options) {
  const std::string op = "matmul";
  ASSIGN_OR_RETURN(Tensor a, MakeInput(op, "A", a_shape, 2, "[M, K]", dtype));
  ASSIGN_OR_RETURN(Tensor b, MakeInput(op, "B", b_shape, 2, "[K, N]", dtype));
  ASSIGN_OR_RETURN(Tensor c, Matmul(a, b, options));
  return ComputeDAG::Create({c});
}

absl::StatusOr<Tensor> BatchMatmul(const Tensor& a, const Tensor& b, const MatmulOptions& options,
                                   const std::string& name) {
  const std::string op = "batch_matmul";
  RETURN_IF_ERROR(
      CheckTensor(op, "A", a, 3, Transposed("[B, M, K]", options.transpose_a, "[B, K, M]")));
  RETURN_IF_ERROR(
      CheckTensor(op, "B", b, 3, Transposed("[B, K, N]", options.transpose_b, "[B, N, K]")));
  RETURN_IF_ERROR(CheckOperands(op, "A", a, "B", b));
  if (a.shape()[0] != b.shape()[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": batch sizes differ: A is ", ShapeStr(a.shape()), ", B is ", ShapeStr(b.shape())));
  }
  const int64_t batch = a.shape()[0];
  const int64_t m = options.transpose_a ? a.shape()[2] : a.shape()[1];
  const int64_t k = options.transpose_a ? a.shape()[1] : a.shape()[2];
  const int64_t kb = options.transpose_b ? b.shape()[2] : b.shape()[1];
  const int64_t n = options.transpose_b ? b.shape()[1] : b.shape()[2];
  if (k != kb) return InnerMismatch(op, a, "A", b, "B");
  return AccumulatingReduce(
      name, {batch, m, n}, ReduceKind::kSum, {k},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        Expr lhs = options.transpose_a ? a(ax[0], r[0], ax[1]) : a(ax[0], ax[1], r[0]);
        Expr rhs = options.transpose_b ? b(ax[0], ax[2], r[0]) : b(ax[0], r[0], ax[2]);
        return Widen(lhs) * Widen(rhs);
      },
      a.dtype(), ComputeOptions{{"b", "i", "j"}, {"k"}, "batch_matmul"});
}

absl::StatusOr<ComputeDAG> BatchMatmulDAG(const std::vector<int64_t>& a_shape,
                                          const std::vector<int64_t>& b_shape, ScalarType dtype,
                                          const MatmulOptions& options) {
  const std::string op = "batch_matmul";
  ASSIGN_OR_RETURN(Tensor a, MakeInput(op, "A", a_shape, 3, "[B, M, K]", dtype));
  ASSIGN_OR_RETURN(Tensor b, MakeInput(op, "B", b_shape, 3, "[B, K, N]", dtype));
  ASSIGN_OR_RETURN(Tensor c, BatchMatmul(a, b, options));
  return ComputeDAG::Create({c});
}

absl::StatusOr<Tensor> Dense(const Tensor& x, const Tensor& w, const Tensor& bias,
                             Activation activation, const std::string& name,
                             const std::string& acc_name) {
  const std::string op = "dense";
  if (std::string(ActivationName(activation)) == "?") {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": unknown activation ", static_cast<int>(activation)));
  }
  RETURN_IF_ERROR(CheckTensor(op, "X", x, 2, "[M, K]"));
  RETURN_IF_ERROR(CheckTensor(op, "W", w, 2, "[N, K]"));
  RETURN_IF_ERROR(CheckOperands(op, "X", x, "W", w));
  if (x.shape()[1] != w.shape()[1]) return InnerMismatch(op, x, "X", w, "W");
  const int64_t m = x.shape()[0];
  const int64_t n = w.shape()[0];
  const int64_t k = x.shape()[1];
  if (bias.defined()) {
    RETURN_IF_ERROR(CheckTensor(op, "bias", bias, 1, "[N]"));
    RETURN_IF_ERROR(CheckSameDtype(op, "X", x, "bias", bias));
    if (bias.shape()[0] != n) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": bias has length ", bias.shape()[0],
                                                     " but W ", ShapeStr(w.shape()), " has ", n,
                                                     " output features"));
    }
  }
  if (activation == Activation::kGelu) {
    RETURN_IF_ERROR(ops_internal::CheckFloat(op, "X (gelu activation)", x));
  }
  // float16 / bfloat16 accumulate in float32; the epilogue (bias, activation) runs on the float32
  // sum and rounds once to the dtype, so such dtypes always get the epilogue stage.
  const bool widen = AccumulationType(x.dtype()) != x.dtype();
  const bool epilogue = bias.defined() || activation != Activation::kNone || widen;
  ASSIGN_OR_RETURN(Tensor acc, Reduce(
                                   epilogue ? acc_name : name, {m, n}, ReduceKind::kSum, {k},
                                   [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
                                     return Widen(x(ax[0], r[0])) * Widen(w(ax[1], r[0]));
                                   },
                                   Expr(), ComputeOptions{{"i", "j"}, {"k"}, "dense"}));
  if (!epilogue) return acc;
  return Compute(
      name, {m, n},
      [&](const std::vector<Expr>& ax) {
        Expr v = acc(ax[0], ax[1]);
        if (bias.defined()) v = v + Widen(bias(ax[1]));
        return Narrow(x.dtype(), ApplyActivation(activation, v));
      },
      ComputeOptions{{"i", "j"}, {}, "dense.epilogue"});
}

absl::StatusOr<ComputeDAG> DenseDAG(const std::vector<int64_t>& x_shape,
                                    const std::vector<int64_t>& w_shape,
                                    const std::optional<std::vector<int64_t>>& bias_shape,
                                    ScalarType dtype, Activation activation) {
  const std::string op = "dense";
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "X", x_shape, 2, "[M, K]", dtype));
  ASSIGN_OR_RETURN(Tensor w, MakeInput(op, "W", w_shape, 2, "[N, K]", dtype));
  Tensor bias;
  if (bias_shape.has_value()) {
    ASSIGN_OR_RETURN(bias, MakeInput(op, "bias", *bias_shape, 1, "[N]", dtype));
  }
  ASSIGN_OR_RETURN(Tensor y, Dense(x, w, bias, activation));
  return ComputeDAG::Create({y});
}

absl::StatusOr<Tensor> Gemv(const Tensor& a, const Tensor& x, const std::string& name) {
  const std::string op = "gemv";
  RETURN_IF_ERROR(CheckTensor(op, "A", a, 2, "[M, K]"));
  RETURN_IF_ERROR(CheckTensor(op, "x", x, 1, "[K]"));
  RETURN_IF_ERROR(CheckOperands(op, "A", a, "x", x));
  if (a.shape()[1] != x.shape()[0]) return InnerMismatch(op, a, "A", x, "x");
  return AccumulatingReduce(
      name, {a.shape()[0]}, ReduceKind::kSum, {a.shape()[1]},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        return Widen(a(ax[0], r[0])) * Widen(x(r[0]));
      },
      a.dtype(), ComputeOptions{{"i"}, {"k"}, "gemv"});
}

absl::StatusOr<ComputeDAG> GemvDAG(const std::vector<int64_t>& a_shape,
                                   const std::vector<int64_t>& x_shape, ScalarType dtype) {
  const std::string op = "gemv";
  ASSIGN_OR_RETURN(Tensor a, MakeInput(op, "A", a_shape, 2, "[M, K]", dtype));
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "x", x_shape, 1, "[K]", dtype));
  ASSIGN_OR_RETURN(Tensor y, Gemv(a, x));
  return ComputeDAG::Create({y});
}

namespace ops_internal {

namespace {

absl::StatusOr<MatmulOptions> ReadMatmulOptions(const OpArgs& args, const std::string& op) {
  MatmulOptions options;
  ASSIGN_OR_RETURN(options.transpose_a, BoolAttr(args, op, "transpose_a", false));
  ASSIGN_OR_RETURN(options.transpose_b, BoolAttr(args, op, "transpose_b", false));
  return options;
}

std::vector<OpAttrInfo> TransposeAttrs(const std::string& a_layout, const std::string& b_layout) {
  return {{"transpose_a", "false", absl::StrCat("A is given as ", a_layout)},
          {"transpose_b", "false", absl::StrCat("B is given as ", b_layout)}};
}

}  // namespace

void AppendLinearOps(std::vector<OpInfo>& ops) {
  ops.push_back(OpInfo{"matmul",
                       "C[M,N] = A[M,K] · B[K,N] (torch.matmul)",
                       {"A[M,K]", "B[K,N]"},
                       TransposeAttrs("[K,M]", "[N,K]"),
                       [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
                         RETURN_IF_ERROR(ExpectInputs(args, "matmul", 2));
                         ASSIGN_OR_RETURN(MatmulOptions options, ReadMatmulOptions(args, "matmul"));
                         return MatmulDAG(args.shapes[0], args.shapes[1], args.dtype, options);
                       }});
  ops.push_back(OpInfo{"batch_matmul",
                       "C[B,M,N] = A[B,M,K] · B[B,K,N] per batch (torch.bmm)",
                       {"A[B,M,K]", "B[B,K,N]"},
                       TransposeAttrs("[B,K,M]", "[B,N,K]"),
                       [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
                         RETURN_IF_ERROR(ExpectInputs(args, "batch_matmul", 2));
                         ASSIGN_OR_RETURN(MatmulOptions options,
                                          ReadMatmulOptions(args, "batch_matmul"));
                         return BatchMatmulDAG(args.shapes[0], args.shapes[1], args.dtype, options);
                       }});
  ops.push_back(OpInfo{
      "dense",
      "Y[M,N] = activation(X[M,K] · W[N,K]ᵀ + b[N]) (torch.nn.functional.linear)",
      {"X[M,K]", "W[N,K]", "b[N] (only with bias=true)"},
      {{"bias", "false", "a third input b[N] is added"},
       {"activation", "none", "none | relu | gelu (erf form)"}},
      [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
        ASSIGN_OR_RETURN(bool bias, BoolAttr(args, "dense", "bias", false));
        ASSIGN_OR_RETURN(std::string act_text, StringAttr(args, "dense", "activation", "none"));
        ASSIGN_OR_RETURN(Activation activation, ParseActivation("dense", act_text));
        RETURN_IF_ERROR(ExpectInputs(args, "dense", bias ? 3 : 2));
        std::optional<std::vector<int64_t>> bias_shape;
        if (bias) bias_shape = args.shapes[2];
        return DenseDAG(args.shapes[0], args.shapes[1], bias_shape, args.dtype, activation);
      }});
  ops.push_back(OpInfo{"gemv",
                       "y[M] = A[M,K] · x[K] (torch.mv)",
                       {"A[M,K]", "x[K]"},
                       {},
                       [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
                         RETURN_IF_ERROR(ExpectInputs(args, "gemv", 2));
                         return GemvDAG(args.shapes[0], args.shapes[1], args.dtype);
                       }});
}

}  // namespace ops_internal

}  // namespace tilesearch::ir
