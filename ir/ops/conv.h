// Convolutions: conv1d, conv2d in NCHW and NHWC layouts, depthwise conv2d, and conv2d with a
// separate padding stage (Ansor's two-stage form).
//
// Semantics are PyTorch's (torch.nn.functional.conv1d / conv2d; cross-correlation, no kernel flip):
//   Y[n, k, oh, ow] = Σ_{rc, ry, rx} Xpad[n, g·Cg + rc, oh·sh + ry·dh, ow·sw + rx·dw] · W[k, rc,
//   ry, rx]
// with Cg = C/groups input channels per group, g = k / (K/groups) the group of output channel k,
// and Xpad the input with `padding` zeros on each side. Output extents:
//   OH = floor((H + 2·ph − dh·(R − 1) − 1) / sh) + 1   (likewise OW, OL).
// Padding is read lazily inside the reduction body: Select(in bounds, X[...], 0), so no padded
// copy exists (except in Conv2dNchwPadded, whose "pad" stage materializes it).
// Axis names: n, k (output channel), h, w (1-D: l); reduce axes rc, ry, rx (1-D: rc, rx).
//
// Errors (kInvalidArgument, the message starts with the operator name and gives the numbers):
// wrong rank, extents < 1, stride or dilation < 1, negative padding, groups < 1, channels not
// divisible by groups, weight channel mismatch, kernel larger than the padded input, bool or
// differing dtypes.
//
// float16 / bfloat16: the reduction accumulates in float32 as the stage `name`_acc, followed by a
// cast stage `name` to the dtype (0 FLOPs); see ops_internal::AccumulatingReduce.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/ops/registry.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// Window parameters of a 1-D convolution.
struct Conv1dParams {
  int64_t stride = 1;
  int64_t padding = 0;  // zeros on each side
  int64_t dilation = 1;
  int64_t groups = 1;
};

/// Window parameters of a 2-D convolution, each {height, width}.
struct Conv2dParams {
  std::array<int64_t, 2> stride = {1, 1};
  std::array<int64_t, 2> padding = {0, 0};  // zeros on each side
  std::array<int64_t, 2> dilation = {1, 1};
  int64_t groups = 1;
};

/// X[N, C, L], W[K, C/groups, S] → Y[N, K, OL]. One reduction stage `name`, tag "conv1d".
absl::StatusOr<Tensor> Conv1d(const Tensor& x, const Tensor& w, const Conv1dParams& params = {},
                              const std::string& name = "Y");
/// Placeholders X, W and Conv1d.
absl::StatusOr<ComputeDAG> Conv1dDAG(const std::vector<int64_t>& x_shape,
                                     const std::vector<int64_t>& w_shape,
                                     ScalarType dtype = ScalarType::kFloat32,
                                     const Conv1dParams& params = {});

/// X[N, C, H, W], W[K, C/groups, R, S] → Y[N, K, OH, OW]. One reduction stage `name`,
/// tag "conv2d_nchw".
absl::StatusOr<Tensor> Conv2dNchw(const Tensor& x, const Tensor& w, const Conv2dParams& params = {},
                                  const std::string& name = "Y");
/// Placeholders X, W and Conv2dNchw.
absl::StatusOr<ComputeDAG> Conv2dNchwDAG(const std::vector<int64_t>& x_shape,
                                         const std::vector<int64_t>& w_shape,
                                         ScalarType dtype = ScalarType::kFloat32,
                                         const Conv2dParams& params = {});

/// X[N, H, W, C], W[R, S, C/groups, K] → Y[N, OH, OW, K] (the NCHW definition with the
/// dimensions permuted; axes n, h, w, k). One reduction stage `name`, tag "conv2d_nhwc".
absl::StatusOr<Tensor> Conv2dNhwc(const Tensor& x, const Tensor& w, const Conv2dParams& params = {},
                                  const std::string& name = "Y");
/// Placeholders X, W and Conv2dNhwc.
absl::StatusOr<ComputeDAG> Conv2dNhwcDAG(const std::vector<int64_t>& x_shape,
                                         const std::vector<int64_t>& w_shape,
                                         ScalarType dtype = ScalarType::kFloat32,
                                         const Conv2dParams& params = {});

/// Depthwise conv2d: X[N, C, H, W], W[C·multiplier, 1, R, S] → Y[N, C·multiplier, OH, OW] with
///   Y[n, k, oh, ow] = Σ_{ry, rx} Xpad[n, k / multiplier, oh·sh + ry·dh, ow·sw + rx·dw]·W[k, 0, ry,
///   rx]
/// (torch conv2d with groups = C). The multiplier is W's first extent / C; `params.groups` is
/// ignored. One reduction stage `name` (reduce axes ry, rx), tag "depthwise_conv2d_nchw".
/// Errors as conv2d, plus W's second extent ≠ 1 or its first not a multiple of C.
absl::StatusOr<Tensor> DepthwiseConv2dNchw(const Tensor& x, const Tensor& w,
                                           const Conv2dParams& params = {},
                                           const std::string& name = "Y");
/// Placeholders X, W and DepthwiseConv2dNchw.
absl::StatusOr<ComputeDAG> DepthwiseConv2dNchwDAG(const std::vector<int64_t>& x_shape,
                                                  const std::vector<int64_t>& w_shape,
                                                  ScalarType dtype = ScalarType::kFloat32,
                                                  const Conv2dParams& params = {});

/// Conv2dNchw in two stages (Ansor's conv2d): an injective stage `pad_name` (tag
/// "conv2d_nchw.pad") holding Xpad[N, C, H + 2·ph, W + 2·pw] (axes n, c, h, w), and the reduction
/// `name` (tag "conv2d_nchw") reading it without bounds checks. Same result as Conv2dNchw.
absl::StatusOr<Tensor> Conv2dNchwPadded(const Tensor& x, const Tensor& w,
                                        const Conv2dParams& params = {},
                                        const std::string& name = "Y",
                                        const std::string& pad_name = "pad");
/// Placeholders X, W and Conv2dNchwPadded.
absl::StatusOr<ComputeDAG> Conv2dNchwPaddedDAG(const std::vector<int64_t>& x_shape,
                                               const std::vector<int64_t>& w_shape,
                                               ScalarType dtype = ScalarType::kFloat32,
                                               const Conv2dParams& params = {});

namespace ops_internal {

/// Reads the conv2d registry attributes stride, padding, dilation (each "a" or "h,w") and groups
/// (default 1). Errors: unparsable values, or not 1 or 2 values.
absl::StatusOr<Conv2dParams> ReadConv2dParams(const OpArgs& args, const std::string& op);

/// Registry descriptions of those attributes (groups only when `with_groups`).
std::vector<OpAttrInfo> Conv2dAttrInfo(bool with_groups);

}  // namespace ops_internal

}  // namespace tilesearch::ir
