#include "ir/ops/fused.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ops/linear.h"
#include "ir/ops/op_checks.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {

using ops_internal::CheckFloat;
using ops_internal::CheckSameDtype;
using ops_internal::CheckTensor;
using ops_internal::MakeInput;
using ops_internal::ShapeStr;

namespace {

// Prefixes an inner operator's error with the fused operator's name.
template <typename T>
absl::StatusOr<T> Within(const std::string& op, absl::StatusOr<T> result) {
  if (result.ok()) return result;
  return absl::Status(result.status().code(),
                      absl::StrCat(op, ": ", std::string(result.status().message())));
}

}  // namespace

absl::StatusOr<Tensor> DenseBiasRelu(const Tensor& x, const Tensor& w, const Tensor& bias,
                                     const std::string& name, const std::string& acc_name) {
  const std::string op = "dense_bias_relu";
  if (!bias.defined()) return absl::InvalidArgumentError(op + ": bias is undefined");
  return Within(op, Dense(x, w, bias, Activation::kRelu, name, acc_name));
}

absl::StatusOr<ComputeDAG> DenseBiasReluDAG(const std::vector<int64_t>& x_shape,
                                            const std::vector<int64_t>& w_shape,
                                            const std::vector<int64_t>& bias_shape,
                                            ScalarType dtype) {
  const std::string op = "dense_bias_relu";
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "X", x_shape, 2, "[M, K]", dtype));
  ASSIGN_OR_RETURN(Tensor w, MakeInput(op, "W", w_shape, 2, "[N, K]", dtype));
  ASSIGN_OR_RETURN(Tensor bias, MakeInput(op, "bias", bias_shape, 1, "[N]", dtype));
  ASSIGN_OR_RETURN(Tensor y, DenseBiasRelu(x, w, bias));
  return ComputeDAG::Create({y});
}

absl::StatusOr<Tensor> MatmulScaleResidual(const Tensor& a, const Tensor& b, const Tensor& r,
                                           double scale, const std::string& name,
                                           const std::string& acc_name) {
  const std::string op = "matmul_scale_residual";
  ASSIGN_OR_RETURN(Tensor c, Within(op, Matmul(a, b, {}, acc_name)));
  RETURN_IF_ERROR(CheckFloat(op, "A", a));
  RETURN_IF_ERROR(CheckTensor(op, "R", r, 2, "[M, N]"));
  RETURN_IF_ERROR(CheckSameDtype(op, "A", a, "R", r));
  if (r.shape() != c.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": R is ", ShapeStr(r.shape()), " but A·B is ", ShapeStr(c.shape())));
  }
  return Compute(
      name, c.shape(), [&](const std::vector<Expr>& ax) { return c(ax) * scale + r(ax); },
      ComputeOptions{{"i", "j"}, {}, "matmul_scale_residual"});
}

absl::StatusOr<ComputeDAG> MatmulScaleResidualDAG(const std::vector<int64_t>& a_shape,
                                                  const std::vector<int64_t>& b_shape,
                                                  const std::vector<int64_t>& r_shape,
                                                  ScalarType dtype, double scale) {
  const std::string op = "matmul_scale_residual";
  ASSIGN_OR_RETURN(Tensor a, MakeInput(op, "A", a_shape, 2, "[M, K]", dtype));
  ASSIGN_OR_RETURN(Tensor b, MakeInput(op, "B", b_shape, 2, "[K, N]", dtype));
  ASSIGN_OR_RETURN(Tensor r, MakeInput(op, "R", r_shape, 2, "[M, N]", dtype));
  ASSIGN_OR_RETURN(Tensor d, MatmulScaleResidual(a, b, r, scale));
  return ComputeDAG::Create({d});
}

absl::StatusOr<Tensor> Conv2dBiasRelu(const Tensor& x, const Tensor& w, const Tensor& bias,
                                      const Conv2dParams& params, const std::string& name,
                                      const std::string& acc_name) {
  const std::string op = "conv2d_bias_relu";
  ASSIGN_OR_RETURN(Tensor conv, Within(op, Conv2dNchw(x, w, params, acc_name)));
  RETURN_IF_ERROR(CheckTensor(op, "bias", bias, 1, "[K]"));
  RETURN_IF_ERROR(CheckSameDtype(op, "X", x, "bias", bias));
  if (bias.shape()[0] != w.shape()[0]) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": bias has length ", bias.shape()[0],
                                                   " but W ", ShapeStr(w.shape()), " has ",
                                                   w.shape()[0], " output channels"));
  }
  return Compute(
      name, conv.shape(),
      [&](const std::vector<Expr>& ax) {
        return ApplyActivation(Activation::kRelu, conv(ax) + bias(ax[1]));
      },
      ComputeOptions{{"n", "k", "h", "w"}, {}, "conv2d_bias_relu"});
}

absl::StatusOr<ComputeDAG> Conv2dBiasReluDAG(const std::vector<int64_t>& x_shape,
                                             const std::vector<int64_t>& w_shape,
                                             const std::vector<int64_t>& bias_shape,
                                             ScalarType dtype, const Conv2dParams& params) {
  const std::string op = "conv2d_bias_relu";
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "X", x_shape, 4, "[N, C, H, W]", dtype));
  ASSIGN_OR_RETURN(Tensor w, MakeInput(op, "W", w_shape, 4, "[K, C/groups, R, S]", dtype));
  ASSIGN_OR_RETURN(Tensor bias, MakeInput(op, "bias", bias_shape, 1, "[K]", dtype));
  ASSIGN_OR_RETURN(Tensor y, Conv2dBiasRelu(x, w, bias, params));
  return ComputeDAG::Create({y});
}

namespace ops_internal {

void AppendFusedOps(std::vector<OpInfo>& ops) {
  ops.push_back(
      OpInfo{"conv2d_bias_relu",
             "Y[N,K,OH,OW] = relu(conv2d_nchw(X, W) + bias[K]): conv reduction, then the epilogue",
             {"X[N,C,H,W]", "W[K,C/groups,R,S]", "bias[K]"},
             Conv2dAttrInfo(true),
             [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
               const std::string op = "conv2d_bias_relu";
               RETURN_IF_ERROR(ExpectInputs(args, op, 3));
               ASSIGN_OR_RETURN(Conv2dParams params, ReadConv2dParams(args, op));
               return Conv2dBiasReluDAG(args.shapes[0], args.shapes[1], args.shapes[2], args.dtype,
                                        params);
             }});
  ops.push_back(
      OpInfo{"dense_bias_relu",
             "Y[M,N] = relu(X[M,K] · W[N,K]ᵀ + bias[N]): dense reduction, then the epilogue",
             {"X[M,K]", "W[N,K]", "bias[N]"},
             {},
             [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
               RETURN_IF_ERROR(ExpectInputs(args, "dense_bias_relu", 3));
               return DenseBiasReluDAG(args.shapes[0], args.shapes[1], args.shapes[2], args.dtype);
             }});
  ops.push_back(OpInfo{"matmul_scale_residual",
                       "D[M,N] = (A[M,K] · B[K,N])·scale + R[M,N]: matmul, then the epilogue",
                       {"A[M,K]", "B[K,N]", "R[M,N]"},
                       {{"scale", "1.0", "factor applied to the product"}},
                       [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
                         const std::string op = "matmul_scale_residual";
                         RETURN_IF_ERROR(ExpectInputs(args, op, 3));
                         ASSIGN_OR_RETURN(double scale, FloatAttr(args, op, "scale", 1.0));
                         return MatmulScaleResidualDAG(args.shapes[0], args.shapes[1],
                                                       args.shapes[2], args.dtype, scale);
                       }});
}

}  // namespace ops_internal

}  // namespace tilesearch::ir
