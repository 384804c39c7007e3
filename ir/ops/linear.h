// Linear-algebra operators: matmul, batch_matmul, dense (a fully connected layer with optional
// bias and activation) and gemv.
//
// Each operator comes twice: a tensor-level function (Tensors in, the output Tensor out) so that
// fused operators compose, and a DAG-level builder that makes the placeholders from shapes and a
// dtype and returns the ComputeDAG. Semantics follow PyTorch (torch.matmul, torch.bmm,
// torch.nn.functional.linear, torch.mv). Reductions are sums over the inner dimension, accumulated
// in the element dtype. All errors are kInvalidArgument with a message that starts with the
// operator's name and gives the shapes, e.g.
// "matmul: inner dimensions differ: A is [64, 32], B is [31, 16]".
//
// float16 / bfloat16: products are summed in float32 (PyTorch's acc_type). Matmul, BatchMatmul and
// Gemv then have two stages, the float32 reduction `name`_acc and a cast stage `name` (0 FLOPs);
// Dense always has its epilogue stage, which applies bias and activation to the float32 sum and
// rounds once (ops_internal::AccumulatingReduce in ir/ops/op_checks.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// Elementwise activation applied in an epilogue.
enum class Activation : uint8_t {
  kNone,
  kRelu,  // max(x, 0)
  kGelu,  // 0.5·x·(1 + erf(x/√2)), the exact (erf) form, torch.nn.functional.gelu's default
};

/// "none", "relu", "gelu".
const char* ActivationName(Activation activation);

/// Parses "none" | "relu" | "gelu". Errors: kInvalidArgument "<op>: unknown activation 'x'
/// (expected none, relu or gelu)".
absl::StatusOr<Activation> ParseActivation(const std::string& op, const std::string& text);

/// `activation` applied to `x` (numeric; gelu needs a float type, which callers check).
Expr ApplyActivation(Activation activation, const Expr& x);

/// Transpose flags of matmul and batch_matmul (torch.matmul(A.T, B.T) style operands).
struct MatmulOptions {
  bool transpose_a = false;  // A is given as [K, M] (batch: [B, K, M])
  bool transpose_b = false;  // B is given as [N, K] (batch: [B, N, K])
};

/// C[i, j] = Σ_k A[i, k]·B[k, j]: A[M, K], B[K, N] → C[M, N] (with the transpose flags, A is
/// [K, M] and read as A[k, i]; B is [N, K] and read as B[j, k]). One reduction stage named `name`,
/// axes i, j, reduce axis k, tag "matmul".
/// Errors: rank ≠ 2, bool or differing dtypes, inner dimensions differ.
absl::StatusOr<Tensor> Matmul(const Tensor& a, const Tensor& b, const MatmulOptions& options = {},
                              const std::string& name = "C");

/// Placeholders A, B (shapes as given, i.e. already transposed when the flags say so) and Matmul.
/// Errors: those of Matmul, plus extents < 1.
absl::StatusOr<ComputeDAG> MatmulDAG(const std::vector<int64_t>& a_shape,
                                     const std::vector<int64_t>& b_shape,
                                     ScalarType dtype = ScalarType::kFloat32,
                                     const MatmulOptions& options = {});

/// C[b, i, j] = Σ_k A[b, i, k]·B[b, k, j]: A[B, M, K], B[B, K, N] → C[B, M, N] (torch.bmm; the
/// transpose flags swap the last two dimensions of A / B). Axes b, i, j; reduce axis k; tag
/// "batch_matmul". Errors: rank ≠ 3, bool or differing dtypes, batch sizes or inner dimensions
/// differ.
absl::StatusOr<Tensor> BatchMatmul(const Tensor& a, const Tensor& b,
                                   const MatmulOptions& options = {},
                                   const std::string& name = "C");

/// Placeholders A, B and BatchMatmul. Errors: those of BatchMatmul, plus extents < 1.
absl::StatusOr<ComputeDAG> BatchMatmulDAG(const std::vector<int64_t>& a_shape,
                                          const std::vector<int64_t>& b_shape,
                                          ScalarType dtype = ScalarType::kFloat32,
                                          const MatmulOptions& options = {});

/// Y = activation(X·Wᵀ + bias) (torch.nn.functional.linear then the activation):
/// X[M, K], W[N, K], bias[N] (optional: pass an undefined Tensor for none) → Y[M, N].
/// Without bias and activation: one reduction stage `name` (axes i, j, reduce k, tag "dense").
/// Otherwise two stages: the reduction `acc_name` and an elementwise epilogue `name`
/// (tag "dense.epilogue") that adds bias[j] and applies the activation.
/// Errors: X or W rank ≠ 2, bias rank ≠ 1, bool or differing dtypes, inner dimensions differ,
/// bias length ≠ N, gelu on a non-float dtype.
absl::StatusOr<Tensor> Dense(const Tensor& x, const Tensor& w, const Tensor& bias,
                             Activation activation = Activation::kNone,
                             const std::string& name = "Y", const std::string& acc_name = "dense");

/// Placeholders X, W, bias (when `bias_shape` is given) and Dense.
/// Errors: those of Dense, plus extents < 1.
absl::StatusOr<ComputeDAG> DenseDAG(const std::vector<int64_t>& x_shape,
                                    const std::vector<int64_t>& w_shape,
                                    const std::optional<std::vector<int64_t>>& bias_shape,
                                    ScalarType dtype = ScalarType::kFloat32,
                                    Activation activation = Activation::kNone);

/// y[i] = Σ_k A[i, k]·x[k]: A[M, K], x[K] → y[M] (torch.mv). Axis i, reduce axis k, tag "gemv".
/// Errors: A rank ≠ 2, x rank ≠ 1, bool or differing dtypes, inner dimensions differ.
absl::StatusOr<Tensor> Gemv(const Tensor& a, const Tensor& x, const std::string& name = "y");

/// Placeholders A, x and Gemv. Errors: those of Gemv, plus extents < 1.
absl::StatusOr<ComputeDAG> GemvDAG(const std::vector<int64_t>& a_shape,
                                   const std::vector<int64_t>& x_shape,
                                   ScalarType dtype = ScalarType::kFloat32);

}  // namespace tilesearch::ir
