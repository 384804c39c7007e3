// Layout operators (transpose / permute) and the shape and axis helpers every operator family
// shares: printing shapes in messages and normalizing (possibly negative) axes against a rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// "[2, 3]" (an empty shape prints "[]"); the form used in every operator error message.
std::string ShapeToString(const std::vector<int64_t>& shape);

/// Maps `axis` in [-rank, rank) to [0, rank) (negative counts from the end, as PyTorch).
/// Errors: kInvalidArgument "<op>: axis 3 out of range for rank 2".
absl::StatusOr<int> NormalizeAxis(const std::string& op, int64_t axis, int rank);

/// Normalizes every axis of `axes` and returns them ascending.
/// Errors: kInvalidArgument for an axis out of range, or "<op>: axis 1 given twice" when two
/// entries name one axis (e.g. 1 and -2 at rank 3).
absl::StatusOr<std::vector<int>> NormalizeAxes(const std::string& op,
                                               const std::vector<int64_t>& axes, int rank);

/// A placeholder for input `name` of operator `op`.
/// Errors: kInvalidArgument "<op>: input X has no dimensions" or
/// "<op>: input X has extent 0 in dimension 1 (shape [4, 0])".
absl::StatusOr<Tensor> OpInput(const std::string& op, const std::string& name,
                               const std::vector<int64_t>& shape, ScalarType dtype);

/// Errors unless `x` has a float dtype: kInvalidArgument "<op>: dtype int32 of 'X' is not a float
/// type".
absl::Status RequireFloat(const std::string& op, const Tensor& x);

/// ComputeOptions with only the tag set.
ComputeOptions TagOnly(std::string tag);

/// Transpose (PyTorch `x.permute(perm)`): out.shape[d] = x.shape[perm[d]] and
/// out[i_0, ..., i_{n-1}] = x[j] with j[perm[d]] = i_d. An empty `perm` reverses the axes (numpy's
/// default). One compute stage named `name`, tag "transpose".
/// Errors: kInvalidArgument "transpose: perm [0, 0, 1] is not a permutation of 0..2" (wrong length,
/// repeated or out-of-range entries; negative entries count from the end).
absl::StatusOr<Tensor> Transpose(const Tensor& x, const std::vector<int64_t>& perm,
                                 const std::string& name = "transpose");

/// DAG of Transpose on a placeholder "X" of `shape` and `dtype`.
/// Errors: non-positive extents, and those of Transpose.
absl::StatusOr<ComputeDAG> TransposeDAG(const std::vector<int64_t>& shape,
                                        const std::vector<int64_t>& perm,
                                        ScalarType dtype = ScalarType::kFloat32);

}  // namespace tilesearch::ir
