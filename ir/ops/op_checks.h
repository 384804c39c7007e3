// Input checks shared by the operator families (linear, conv, pool, fused): shape and dtype
// validation with messages that name the operator and the argument, sliding-window output extents,
// and the per-dimension window attributes ("2" or "2,3").
//
// Every check returns kInvalidArgument; messages start with the operator name, e.g.
// "conv2d_nchw: X must have rank 4 ([N, C, H, W]), got [1, 4, 13]".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/ops/registry_internal.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::ir::ops_internal {

/// "[64, 32]".
inline std::string ShapeStr(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

/// Errors unless `shape` has `rank` dimensions, all ≥ 1. `layout` describes the expected
/// dimensions, e.g. "[N, C, H, W]".
inline absl::Status CheckShape(const std::string& op, const std::string& arg,
                               const std::vector<int64_t>& shape, size_t rank,
                               const std::string& layout) {
  if (shape.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", arg, " must have rank ", rank, " (",
                                                   layout, "), got ", ShapeStr(shape)));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", arg, " has non-positive extent ",
                                                     shape[d], " in dimension ", d, " (",
                                                     ShapeStr(shape), ")"));
    }
  }
  return absl::OkStatus();
}

/// CheckShape, then a placeholder named `arg`.
inline absl::StatusOr<Tensor> MakeInput(const std::string& op, const std::string& arg,
                                        const std::vector<int64_t>& shape, size_t rank,
                                        const std::string& layout, ScalarType dtype) {
  absl::Status status = CheckShape(op, arg, shape, rank, layout);
  if (!status.ok()) return status;
  return Placeholder(arg, shape, dtype);
}

/// Errors unless `t` is defined and has rank `rank` (tensor-level operator entry points).
inline absl::Status CheckTensor(const std::string& op, const std::string& arg, const Tensor& t,
                                size_t rank, const std::string& layout) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", arg, " is undefined"));
  }
  return CheckShape(op, arg, t.shape(), rank, layout);
}

/// Errors for bool tensors (arithmetic on bool is not defined).
inline absl::Status CheckNumeric(const std::string& op, const std::string& arg, const Tensor& t) {
  if (IsBool(t.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " has dtype bool; a numeric dtype is needed"));
  }
  return absl::OkStatus();
}

/// Errors for non-float tensors (operators that divide or call math functions).
inline absl::Status CheckFloat(const std::string& op, const std::string& arg, const Tensor& t) {
  if (!IsFloat(t.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", arg, " has dtype ", TypeName(t.dtype()), "; a float dtype is needed"));
  }
  return absl::OkStatus();
}

/// Errors unless `a` and `b` share one dtype.
inline absl::Status CheckSameDtype(const std::string& op, const std::string& a_name,
                                   const Tensor& a, const std::string& b_name, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", a_name, " is ", TypeName(a.dtype()),
                                                   " but ", b_name, " is ", TypeName(b.dtype())));
  }
  return absl::OkStatus();
}

/// Checks one dimension's window parameters: stride ≥ 1, dilation ≥ 1, padding ≥ 0.
inline absl::Status CheckWindowParams(const std::string& op, const std::string& dim, int64_t stride,
                                      int64_t padding, int64_t dilation) {
  if (stride < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", dim, " stride ", stride, " must be at least 1"));
  }
  if (dilation < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", dim, " dilation ", dilation, " must be at least 1"));
  }
  if (padding < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", dim, " padding ", padding, " is negative"));
  }
  return absl::OkStatus();
}

/// Output extent of a sliding window as PyTorch computes it:
/// floor((in + 2·padding − dilation·(kernel − 1) − 1) / stride) + 1.
/// Errors: the dilated kernel is larger than the padded input (the output would be empty).
inline absl::StatusOr<int64_t> WindowOutputExtent(const std::string& op, const std::string& dim,
                                                  int64_t in, int64_t kernel, int64_t stride,
                                                  int64_t padding, int64_t dilation) {
  absl::Status status = CheckWindowParams(op, dim, stride, padding, dilation);
  if (!status.ok()) return status;
  const int64_t effective = dilation * (kernel - 1) + 1;
  const int64_t padded = in + 2 * padding;
  if (effective > padded) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": kernel ", dim, " ", kernel, " (dilation ", dilation, ", effective ",
                     effective, ") is larger than the padded input ", dim, " ", padded, " (input ",
                     in, ", padding ", padding, "); the output would be empty"));
  }
  return (padded - effective) / stride + 1;
}

/// Reads a per-dimension attribute of 2-D windows: "2" means {2, 2}, "2,3" means {2, 3}
/// (height, width). Errors: unparsable, or not 1 or 2 values.
inline absl::StatusOr<std::array<int64_t, 2>> PairAttr(const OpArgs& args, const std::string& op,
                                                       const std::string& name,
                                                       std::array<int64_t, 2> default_value) {
  absl::StatusOr<std::vector<int64_t>> values =
      IntListAttr(args, op, name, {default_value[0], default_value[1]});
  if (!values.ok()) return values.status();
  if (values->size() == 1) return std::array<int64_t, 2>{(*values)[0], (*values)[0]};
  if (values->size() == 2) return std::array<int64_t, 2>{(*values)[0], (*values)[1]};
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' of ", op,
                                                 ": expected 1 or 2 values (height,width), got ",
                                                 values->size()));
}

}  // namespace tilesearch::ir::ops_internal
