// Elementwise operators: unary activations, binary arithmetic with numpy broadcasting, and scaling
// by a constant (PyTorch torch.nn.functional semantics, default parameters as PyTorch's).
//
// Each operator is one compute stage; float16 / bfloat16 inputs compute in float32 and round on
// store (ir/type.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// Unary activations (torch.nn.functional names and defaults).
enum class UnaryOp : uint8_t {
  kRelu,       // max(x, 0)
  kLeakyRelu,  // x if x ≥ 0 else leaky_alpha·x
  kGelu,       // 0.5x(1 + erf(x/√2)); with gelu_tanh 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
  kSigmoid,    // 1 / (1 + exp(−x))
  kTanh,       // tanh(x)
  kSwish,      // x·sigmoid(x) (SiLU)
  kSoftplus,   // log(1 + exp(βx)) / β, or x where βx > threshold
  kElu,        // x if x > 0 else elu_alpha·(exp(x) − 1)
  kHardtanh,   // min(max(x, min_val), max_val)
};

/// The operator name: "relu", "leaky_relu", "gelu", "sigmoid", "tanh", "swish", "softplus",
/// "elu", "hardtanh".
const char* UnaryOpName(UnaryOp op);

/// Parameters of the unary operators; each operator reads only its own.
struct UnaryParams {
  double leaky_alpha = 0.01;
  bool gelu_tanh = false;  // PyTorch approximate="tanh"
  double softplus_beta = 1.0;
  double softplus_threshold = 20.0;
  double elu_alpha = 1.0;
  double min_val = -1.0;  // hardtanh
  double max_val = 1.0;   // hardtanh
};

/// out = f(x), same shape. One compute stage named `name` (default: the operator name), tagged
/// with the operator name.
/// Errors: kInvalidArgument for a non-float dtype, softplus beta ≤ 0 ("softplus: beta 0 is not
/// positive"), hardtanh min_val > max_val.
absl::StatusOr<Tensor> Unary(UnaryOp op, const Tensor& x, const UnaryParams& params = {},
                             const std::string& name = "");

/// Binary elementwise operators: a + b, a − b, a·b, a / b, max(a, b), min(a, b).
enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kMaximum, kMinimum };

/// "add", "sub", "mul", "div", "maximum", "minimum".
const char* BinaryOpName(BinaryOp op);

/// numpy broadcasting: shapes align at their last axes; each pair of extents must be equal or
/// one of them 1; missing leading axes count as 1. Output extent: the larger.
/// Errors: kInvalidArgument "<op>: shapes [2, 3] and [4] cannot be broadcast".
absl::StatusOr<std::vector<int64_t>> BroadcastShape(const std::string& op,
                                                    const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b);

/// out = a ∘ b with broadcasting (an axis of extent 1 broadcast against a longer one reads index
/// 0). One compute stage named `name` (default: the operator name). Division is IEEE float
/// division; maximum / minimum are torch.maximum / torch.minimum.
/// Errors: kInvalidArgument for shapes that cannot be broadcast, different dtypes, bool dtype,
/// and a non-float dtype for div.
absl::StatusOr<Tensor> Binary(BinaryOp op, const Tensor& a, const Tensor& b,
                              const std::string& name = "");

/// out = x · scale, same shape; one compute stage named `name`, tag "scale".
/// Errors: kInvalidArgument for a non-float dtype.
absl::StatusOr<Tensor> Scale(const Tensor& x, double scale, const std::string& name = "scale");

/// DAGs on placeholders "X" (unary, scale) or "A" and "B" (binary) of `dtype`.
/// Errors: non-positive extents and those of the tensor-level functions.
absl::StatusOr<ComputeDAG> UnaryDAG(UnaryOp op, const std::vector<int64_t>& shape,
                                    const UnaryParams& params = {},
                                    ScalarType dtype = ScalarType::kFloat32);
absl::StatusOr<ComputeDAG> BinaryDAG(BinaryOp op, const std::vector<int64_t>& a_shape,
                                     const std::vector<int64_t>& b_shape,
                                     ScalarType dtype = ScalarType::kFloat32);
absl::StatusOr<ComputeDAG> ScaleDAG(const std::vector<int64_t>& shape, double scale,
                                    ScalarType dtype = ScalarType::kFloat32);

}  // namespace tilesearch::ir
