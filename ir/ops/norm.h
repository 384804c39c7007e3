// Normalizations: softmax and log_softmax over one axis, layer normalization and RMS normalization
// over trailing axes (PyTorch torch.softmax, torch.log_softmax, nn.functional.layer_norm,
// nn.functional.rms_norm).
//
// Every operator is written as its numerically stable multi-stage form, which is also how fast
// kernels compute it: a reduction pass for the statistics, then an elementwise normalize pass.
// Statistic stages have the input's shape without the reduced axes ([1] when none remain).
//
// float16 / bfloat16: the statistics (exp-sum, mean, variance, mean square) are float32 stages and
// the normalize stage computes in float32 and rounds once to the dtype; the softmax max stays in
// the dtype (exact).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// softmax(x)[..] = exp(x − max) / Σ exp(x − max) along `axis` (negative counts from the end).
/// Stages: "<name>_max" (max-reduce), "<name>_expsum" (sum of exp(x − max)), `name` (normalize);
/// tags "softmax.max", "softmax.expsum", "softmax.normalize".
/// Errors: kInvalidArgument "softmax: axis 3 out of range for rank 2", non-float dtype.
absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t axis = -1,
                               const std::string& name = "softmax");

/// log_softmax(x)[..] = x − max − log Σ exp(x − max) along `axis`. Stages as Softmax with the
/// prefix `name` and tags "log_softmax.*". Errors: as Softmax, naming "log_softmax".
absl::StatusOr<Tensor> LogSoftmax(const Tensor& x, int64_t axis = -1,
                                  const std::string& name = "log_softmax");

/// Layer normalization over the trailing `normalized_ndim` axes of x (N elements each):
/// mean = Σ x·(1/N); var = Σ (x − mean)²·(1/N) (biased, as PyTorch);
/// out = (x − mean)·rsqrt(var + eps)·gamma + beta, with gamma and beta shaped like those trailing
/// axes. Stages "<name>_mean", "<name>_var" (reductions), `name` (normalize).
/// Errors: kInvalidArgument "layernorm: normalized_ndim 3 out of range 1..2 for rank 2",
/// "layernorm: gamma shape [5] does not match the trailing axes [4] of X", negative eps,
/// non-float or mismatched dtypes.
absl::StatusOr<Tensor> LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 int normalized_ndim = 1, double eps = 1e-5,
                                 const std::string& name = "layernorm");

/// RMS normalization over the trailing `normalized_ndim` axes: ms = Σ x²·(1/N);
/// out = x·rsqrt(ms + eps)·gamma. Stages "<name>_ms" (reduction), `name` (normalize).
/// Errors: as LayerNorm, naming "rmsnorm".
absl::StatusOr<Tensor> RmsNorm(const Tensor& x, const Tensor& gamma, int normalized_ndim = 1,
                               double eps = 1e-6, const std::string& name = "rmsnorm");

/// DAGs on placeholders "X" (and "gamma", "beta", shaped like the trailing axes) of `dtype`.
/// Errors: non-positive extents and those of the tensor-level functions.
absl::StatusOr<ComputeDAG> SoftmaxDAG(const std::vector<int64_t>& shape, int64_t axis = -1,
                                      ScalarType dtype = ScalarType::kFloat32);
absl::StatusOr<ComputeDAG> LogSoftmaxDAG(const std::vector<int64_t>& shape, int64_t axis = -1,
                                         ScalarType dtype = ScalarType::kFloat32);
absl::StatusOr<ComputeDAG> LayerNormDAG(const std::vector<int64_t>& shape, int normalized_ndim = 1,
                                        double eps = 1e-5, ScalarType dtype = ScalarType::kFloat32);
absl::StatusOr<ComputeDAG> RmsNormDAG(const std::vector<int64_t>& shape, int normalized_ndim = 1,
                                      double eps = 1e-6, ScalarType dtype = ScalarType::kFloat32);

}  // namespace tilesearch::ir
