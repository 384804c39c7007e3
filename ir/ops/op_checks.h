// Input checks shared by the operator families (linear, conv, pool, fused): shape and dtype
// validation with messages that name the operator and the argument, sliding-window output extents,
// and the per-dimension window attributes ("2" or "2,3").
//
// Every check returns kInvalidArgument; messages start with the operator name, e.g.
// "conv2d_nchw: X must have rank 4 ([N, C, H, W]), got [1, 4, 13]".
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/expr.h"
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

/// Errors unless `t` is defined: "<op>: <arg> is undefined".
inline absl::Status CheckDefined(const std::string& op, const std::string& arg, const Tensor& t) {
  if (t.defined()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", arg, " is undefined"));
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

/// Largest stride, padding, dilation (and attribute value in general): 2^31 − 1, so window
/// arithmetic on tensor extents (≤ kMaxElements = 2^40) cannot overflow int64.
inline constexpr int64_t kMaxWindowParam = (int64_t{1} << 31) - 1;

/// Checks one dimension's window parameters: 1 ≤ stride, 1 ≤ dilation, 0 ≤ padding, each at most
/// kMaxWindowParam.
inline absl::Status CheckWindowParams(const std::string& op, const std::string& dim, int64_t stride,
                                      int64_t padding, int64_t dilation) {
  for (const auto& [what, value] : {std::pair<const char*, int64_t>{"stride", stride},
                                    {"padding", padding},
                                    {"dilation", dilation}}) {
    if (value > kMaxWindowParam) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", dim, " ", what, " ", value,
                                                     " exceeds the maximum ", kMaxWindowParam));
    }
  }
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
/// Errors: window parameters out of range (CheckWindowParams), `in` or `kernel` outside
/// [1, kMaxElements], the dilated kernel larger than the padded input (the output would be empty).
/// The arithmetic cannot overflow: every operand is bounded first.
inline absl::StatusOr<int64_t> WindowOutputExtent(const std::string& op, const std::string& dim,
                                                  int64_t in, int64_t kernel, int64_t stride,
                                                  int64_t padding, int64_t dilation) {
  absl::Status status = CheckWindowParams(op, dim, stride, padding, dilation);
  if (!status.ok()) return status;
  for (const auto& [what, value] :
       {std::pair<const char*, int64_t>{"input", in}, {"kernel", kernel}}) {
    if (value < 1 || value > kMaxElements) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " ", dim, " ", value,
                                                     " is outside [1, ", kMaxElements, "]"));
    }
  }
  const int64_t padded = in + 2 * padding;  // ≤ 2^40 + 2^32
  // dilation·(kernel − 1) + 1 > padded, decided without forming the (possibly 2^71) product.
  if (kernel > 1 && dilation > (padded - 1) / (kernel - 1)) {
    // The effective extent is printed when it fits in int64 (dilation ≥ 1 here).
    const bool fits = kernel - 1 <= (std::numeric_limits<int64_t>::max() - 1) / dilation;
    const std::string effective =
        fits ? absl::StrCat(dilation * (kernel - 1) + 1) : std::string("above 2^63");
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": kernel ", dim, " ", kernel, " (dilation ", dilation, ", effective ",
                     effective, ") is larger than the padded input ", dim, " ", padded, " (input ",
                     in, ", padding ", padding, "); the output would be empty"));
  }
  const int64_t effective = dilation * (kernel - 1) + 1;  // ≤ padded now
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

/// Accumulation type of sums and products over `t` values, as PyTorch's `acc_type`: float32 for
/// float16 and bfloat16 (storage types whose running sums would round at every step: 4096 fp16
/// ones would sum to 2048), `t` itself otherwise. Max / min reductions are exact in any type and
/// keep `t`.
inline ScalarType AccumulationType(ScalarType t) {
  return (t == ScalarType::kFloat16 || t == ScalarType::kBFloat16) ? ScalarType::kFloat32 : t;
}

/// `e` cast to AccumulationType(e.type()); `e` itself when that is its type.
inline Expr Widen(const Expr& e) {
  const ScalarType acc = AccumulationType(e.type());
  return acc == e.type() ? e : Cast(acc, e);
}

/// `e` cast to `t`; `e` itself when it already has type `t`.
inline Expr Narrow(ScalarType t, const Expr& e) { return e.type() == t ? e : Cast(t, e); }

/// A reduction that is an operator's output, accumulated in AccumulationType(dtype) for sum and
/// prod. When that differs from `dtype` (float16 / bfloat16) there are two stages: the float32
/// reduction `name`_acc (tag options.tag) and the compute stage `name` (tag options.tag + ".cast")
/// that casts it to `dtype` (0 FLOPs: casts are not counted). Otherwise one stage `name`.
/// `fn` returns the term in the operands' type; it is widened here. Errors: those of Reduce.
inline absl::StatusOr<Tensor> AccumulatingReduce(const std::string& name,
                                                 const std::vector<int64_t>& shape, ReduceKind kind,
                                                 const std::vector<int64_t>& reduce_shape,
                                                 const ReduceFn& fn, ScalarType dtype,
                                                 const ComputeOptions& options) {
  const bool widen =
      (kind == ReduceKind::kSum || kind == ReduceKind::kProd) && AccumulationType(dtype) != dtype;
  if (!widen) return Reduce(name, shape, kind, reduce_shape, fn, Expr(), options);
  absl::StatusOr<Tensor> acc = Reduce(
      name + "_acc", shape, kind, reduce_shape,
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) { return Widen(fn(ax, r)); },
      Expr(), options);
  if (!acc.ok()) return acc.status();
  const Tensor acc_tensor = *acc;
  return Compute(
      name, shape, [&](const std::vector<Expr>& ax) { return Narrow(dtype, acc_tensor(ax)); },
      ComputeOptions{options.axis_names, {}, options.tag + ".cast"});
}

}  // namespace tilesearch::ir::ops_internal
