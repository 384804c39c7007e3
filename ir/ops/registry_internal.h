// Registration hooks: each operator family appends its OpInfo entries; registry.cc gathers them.
// Attribute helpers shared by those entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ops/registry.h"

namespace tilesearch::ir::ops_internal {

void AppendLinearOps(std::vector<OpInfo>& ops);       // matmul, batch_matmul, dense, gemv
void AppendConvOps(std::vector<OpInfo>& ops);         // conv1d, conv2d_*, depthwise, padded
void AppendPoolOps(std::vector<OpInfo>& ops);         // max_pool2d, avg_pool2d
void AppendFusedOps(std::vector<OpInfo>& ops);        // dense_bias_relu, matmul_scale_residual, ...
void AppendReduceOps(std::vector<OpInfo>& ops);       // reduce_sum/mean/max/min
void AppendNormOps(std::vector<OpInfo>& ops);         // softmax, log_softmax, layernorm, rmsnorm
void AppendElementwiseOps(std::vector<OpInfo>& ops);  // unary activations, binary, scale
void AppendLayoutOps(std::vector<OpInfo>& ops);       // transpose / permute

/// Attribute readers: the value of `name` in args.attrs or `default_value` when absent.
/// Errors: kInvalidArgument "attribute 'stride' of conv2d: 'x' is not an integer"; integers (and
/// list entries) outside [-(2^31 - 1), 2^31 - 1] are rejected ("... is out of range ...").
absl::StatusOr<int64_t> IntAttr(const OpArgs& args, const std::string& op, const std::string& name,
                                int64_t default_value);
absl::StatusOr<double> FloatAttr(const OpArgs& args, const std::string& op, const std::string& name,
                                 double default_value);
absl::StatusOr<bool> BoolAttr(const OpArgs& args, const std::string& op, const std::string& name,
                              bool default_value);
absl::StatusOr<std::string> StringAttr(const OpArgs& args, const std::string& op,
                                       const std::string& name, const std::string& default_value);
/// "1,2" → {1, 2}; accepts negative numbers.
absl::StatusOr<std::vector<int64_t>> IntListAttr(const OpArgs& args, const std::string& op,
                                                 const std::string& name,
                                                 const std::vector<int64_t>& default_value);
/// Errors unless args.shapes has exactly `n` shapes.
absl::Status ExpectInputs(const OpArgs& args, const std::string& op, size_t n);

}  // namespace tilesearch::ir::ops_internal
