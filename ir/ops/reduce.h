// Reductions over a set of axes: sum, mean, max, min (PyTorch torch.sum / mean / amax / amin with
// `dim` and `keepdim`).
//
// Shapes: out.shape is x.shape without the reduced axes (keepdim=false) or with them as extent 1
// (keepdim=true). A reduction over every axis with keepdim=false yields shape [1] rather than a
// rank-0 tensor, so every stage keeps at least one loop to schedule.
//
// float16 / bfloat16: reduce_sum accumulates in float32 (`name`_acc, then a cast stage `name`);
// reduce_mean's sum stage is float32 and its division rounds once; max / min are exact and stay in
// the dtype.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// The reduction applied over the chosen axes.
enum class ReduceOp : uint8_t { kSum, kMean, kMax, kMin };

/// The operator name: "reduce_sum", "reduce_mean", "reduce_max", "reduce_min".
const char* ReduceOpName(ReduceOp op);

/// Reduces `x` over `axes` (negative counts from the end; empty = every axis).
/// Stages: one reduce stage named `name` (default: the operator name), tag "reduce_sum" etc.; for
/// kMean a sum stage "<name>_sum" (tag "reduce_mean.sum") followed by a compute stage `name`
/// dividing by the number of reduced elements (tag "reduce_mean.div").
/// Errors: kInvalidArgument "reduce_sum: axis 3 out of range for rank 2", "reduce_sum: axis 1
/// given twice ...", bool dtype, and a non-float dtype for kMean.
absl::StatusOr<Tensor> ReduceAxes(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes,
                                  bool keepdim = false, const std::string& name = "");

/// DAG of ReduceAxes on a placeholder "X" of `shape` and `dtype`.
/// Errors: non-positive extents, and those of ReduceAxes.
absl::StatusOr<ComputeDAG> ReduceDAG(ReduceOp op, const std::vector<int64_t>& shape,
                                     const std::vector<int64_t>& axes, bool keepdim = false,
                                     ScalarType dtype = ScalarType::kFloat32);

}  // namespace tilesearch::ir
