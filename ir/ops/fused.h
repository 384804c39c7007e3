// Fused operators: a main reduction followed by an elementwise epilogue, the shapes Ansor fuses
// (a multi-level-tiled stage whose consumer is inlined or computed at its tiles). Each is built
// from the tensor-level operators of ir/ops/linear.h and ir/ops/conv.h, so it has exactly two
// stages: the reduction and the epilogue.
//
// Errors are kInvalidArgument and start with the fused operator's name; errors found by the inner
// operator keep its message after that prefix, e.g.
// "dense_bias_relu: dense: inner dimensions differ: X is [4, 3], W is [5, 2]".
//
// float16 / bfloat16: the inner matmul / conv accumulate in float32 and are cast to the dtype
// (stages `acc_name`_acc and `acc_name`) before the epilogue; dense_bias_relu's epilogue runs on
// the float32 sum.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/ops/conv.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// Y[i, j] = max(Σ_k X[i, k]·W[j, k] + bias[j], 0): X[M, K], W[N, K], bias[N] → Y[M, N]
/// (torch.relu(torch.nn.functional.linear(X, W, bias))). Stages: the dense reduction `acc_name`
/// (axes i, j, reduce k) and the epilogue `name`. Errors: those of Dense, and bias undefined.
absl::StatusOr<Tensor> DenseBiasRelu(const Tensor& x, const Tensor& w, const Tensor& bias,
                                     const std::string& name = "Y",
                                     const std::string& acc_name = "dense");
/// Placeholders X, W, bias and DenseBiasRelu.
absl::StatusOr<ComputeDAG> DenseBiasReluDAG(const std::vector<int64_t>& x_shape,
                                            const std::vector<int64_t>& w_shape,
                                            const std::vector<int64_t>& bias_shape,
                                            ScalarType dtype = ScalarType::kFloat32);

/// D[i, j] = (Σ_k A[i, k]·B[k, j])·scale + R[i, j]: A[M, K], B[K, N], R[M, N] → D[M, N].
/// Stages: the matmul `acc_name` and the epilogue `name` (tag "matmul_scale_residual").
/// Errors: those of Matmul, R not [M, N] or of another dtype, a non-float dtype.
absl::StatusOr<Tensor> MatmulScaleResidual(const Tensor& a, const Tensor& b, const Tensor& r,
                                           double scale = 1.0, const std::string& name = "D",
                                           const std::string& acc_name = "C");
/// Placeholders A, B, R and MatmulScaleResidual.
absl::StatusOr<ComputeDAG> MatmulScaleResidualDAG(const std::vector<int64_t>& a_shape,
                                                  const std::vector<int64_t>& b_shape,
                                                  const std::vector<int64_t>& r_shape,
                                                  ScalarType dtype = ScalarType::kFloat32,
                                                  double scale = 1.0);

/// Y[n, k, h, w] = max(conv2d_nchw(X, W)[n, k, h, w] + bias[k], 0): X[N, C, H, W],
/// W[K, C/groups, R, S], bias[K] → Y[N, K, OH, OW]. Stages: the Conv2dNchw reduction `acc_name`
/// and the epilogue `name` (tag "conv2d_bias_relu"). Errors: those of Conv2dNchw, bias not [K] or
/// of another dtype.
absl::StatusOr<Tensor> Conv2dBiasRelu(const Tensor& x, const Tensor& w, const Tensor& bias,
                                      const Conv2dParams& params = {},
                                      const std::string& name = "Y",
                                      const std::string& acc_name = "conv");
/// Placeholders X, W, bias and Conv2dBiasRelu.
absl::StatusOr<ComputeDAG> Conv2dBiasReluDAG(const std::vector<int64_t>& x_shape,
                                             const std::vector<int64_t>& w_shape,
                                             const std::vector<int64_t>& bias_shape,
                                             ScalarType dtype = ScalarType::kFloat32,
                                             const Conv2dParams& params = {});

}  // namespace tilesearch::ir
