// 2-D pooling over NCHW tensors: max_pool2d and avg_pool2d, with PyTorch's semantics
// (torch.nn.functional.max_pool2d / avg_pool2d, ceil_mode=False).
//
//   OH = floor((H + 2·ph − dh·(R − 1) − 1) / sh) + 1   (likewise OW; dilation is 1 for avg)
//   max: Y[n, c, oh, ow] = max_{ry, rx} Xpad[n, c, oh·sh + ry·dh − ph, ow·sw + rx·dw − pw], where
//        padded positions are −inf (they never win: padding ≤ kernel/2 leaves a real element in
//        every window).
//   avg: Y = (Σ_{ry, rx} Xpad[...]) / (R·S), padded positions 0 and always counted
//        (count_include_pad=True).
// Padding is read lazily in the reduction body (Select(in bounds, X[...], pad value)).
// Axis names n, c, h, w; reduce axes ry, rx.
//
// Errors (kInvalidArgument, naming the operator and the numbers): X rank ≠ 4, extents or kernel
// < 1, stride or dilation < 1, negative padding, padding > kernel/2 (PyTorch's rule), kernel
// larger than the padded input, bool dtype (avg: non-float dtype), dilation ≠ 1 for avg.
//
// float16 / bfloat16: avg_pool2d's window sum is a float32 stage; the division rounds once to the
// dtype. max_pool2d is exact and stays in the dtype.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// Window parameters of 2-D pooling, each {height, width}.
struct Pool2dParams {
  std::array<int64_t, 2> kernel = {1, 1};
  /// The kernel when unset (PyTorch's default).
  std::optional<std::array<int64_t, 2>> stride;
  std::array<int64_t, 2> padding = {0, 0};
  /// max_pool2d only; avg_pool2d requires {1, 1}.
  std::array<int64_t, 2> dilation = {1, 1};
};

/// X[N, C, H, W] → Y[N, C, OH, OW], the window maximum. One reduction stage `name` (kind max),
/// tag "max_pool2d".
absl::StatusOr<Tensor> MaxPool2d(const Tensor& x, const Pool2dParams& params,
                                 const std::string& name = "Y");
/// Placeholder X and MaxPool2d.
absl::StatusOr<ComputeDAG> MaxPool2dDAG(const std::vector<int64_t>& x_shape, ScalarType dtype,
                                        const Pool2dParams& params);

/// X[N, C, H, W] → Y[N, C, OH, OW], the window mean over the full kernel area. Two stages: the
/// window sum `sum_name` (tag "avg_pool2d") and the elementwise division `name`
/// (tag "avg_pool2d.divide").
absl::StatusOr<Tensor> AvgPool2d(const Tensor& x, const Pool2dParams& params,
                                 const std::string& name = "Y",
                                 const std::string& sum_name = "pool_sum");
/// Placeholder X and AvgPool2d.
absl::StatusOr<ComputeDAG> AvgPool2dDAG(const std::vector<int64_t>& x_shape, ScalarType dtype,
                                        const Pool2dParams& params);

}  // namespace tilesearch::ir
