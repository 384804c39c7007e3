#include "ir/ops/pool.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ops/op_checks.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {

using ops_internal::CheckTensor;
using ops_internal::CheckWindowParams;
using ops_internal::MakeInput;
using ops_internal::WindowOutputExtent;

namespace {

// Checks the window and returns {OH, OW}.
absl::StatusOr<std::array<int64_t, 2>> CheckPool(const std::string& op, const Tensor& x,
                                                 const Pool2dParams& p) {
  const std::array<int64_t, 2> stride = p.stride.value_or(p.kernel);
  const char* dims[2] = {"height", "width"};
  for (int i = 0; i < 2; ++i) {
    if (p.kernel[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": kernel ", dims[i], " ", p.kernel[i], " must be at least 1"));
    }
    RETURN_IF_ERROR(CheckWindowParams(op, dims[i], stride[i], p.padding[i], p.dilation[i]));
    if (2 * p.padding[i] > p.kernel[i]) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", dims[i], " padding ", p.padding[i],
                                                     " is more than half the kernel ", dims[i], " ",
                                                     p.kernel[i]));
    }
  }
  std::array<int64_t, 2> out;
  for (int i = 0; i < 2; ++i) {
    ASSIGN_OR_RETURN(out[i], WindowOutputExtent(op, dims[i], x.shape()[2 + i], p.kernel[i],
                                                stride[i], p.padding[i], p.dilation[i]));
  }
  return out;
}

// Xpad[n, c, oh·s + r·d − p, ...] with out-of-bounds positions reading `pad_value` (lazily).
Expr WindowLoad(const Tensor& x, const std::vector<Expr>& ax, const std::vector<Expr>& r,
                const Pool2dParams& p, const Expr& pad_value) {
  const std::array<int64_t, 2> stride = p.stride.value_or(p.kernel);
  std::vector<Expr> idx = {ax[0], ax[1]};
  Expr cond;
  for (int i = 0; i < 2; ++i) {
    Expr e = stride[i] == 1 ? ax[2 + i] : ax[2 + i] * IntConst(stride[i]);
    e = e + (p.dilation[i] == 1 ? r[i] : r[i] * IntConst(p.dilation[i]));
    if (p.padding[i] != 0) {
      e = e - IntConst(p.padding[i]);
      Expr c = (e >= IntConst(0)) && (e < IntConst(x.shape()[2 + i]));
      cond = cond.defined() ? (cond && c) : c;
    }
    idx.push_back(e);
  }
  Expr load = x(idx);
  return cond.defined() ? Select(cond, load, pad_value) : load;
}

}  // namespace

absl::StatusOr<Tensor> MaxPool2d(const Tensor& x, const Pool2dParams& params,
                                 const std::string& name) {
  const std::string op = "max_pool2d";
  RETURN_IF_ERROR(CheckTensor(op, "X", x, 4, "[N, C, H, W]"));
  RETURN_IF_ERROR(ops_internal::CheckNumeric(op, "X", x));
  ASSIGN_OR_RETURN(auto out, CheckPool(op, x, params));
  const Expr lowest = ReduceIdentity(ReduceKind::kMax, x.dtype());
  return Reduce(
      name, {x.shape()[0], x.shape()[1], out[0], out[1]}, ReduceKind::kMax,
      {params.kernel[0], params.kernel[1]},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        return WindowLoad(x, ax, r, params, lowest);
      },
      Expr(), ComputeOptions{{"n", "c", "h", "w"}, {"ry", "rx"}, "max_pool2d"});
}

absl::StatusOr<ComputeDAG> MaxPool2dDAG(const std::vector<int64_t>& x_shape, ScalarType dtype,
                                        const Pool2dParams& params) {
  ASSIGN_OR_RETURN(Tensor x, MakeInput("max_pool2d", "X", x_shape, 4, "[N, C, H, W]", dtype));
  ASSIGN_OR_RETURN(Tensor y, MaxPool2d(x, params));
  return ComputeDAG::Create({y});
}

absl::StatusOr<Tensor> AvgPool2d(const Tensor& x, const Pool2dParams& params,
                                 const std::string& name, const std::string& sum_name) {
  const std::string op = "avg_pool2d";
  RETURN_IF_ERROR(CheckTensor(op, "X", x, 4, "[N, C, H, W]"));
  RETURN_IF_ERROR(ops_internal::CheckFloat(op, "X", x));
  if (params.dilation[0] != 1 || params.dilation[1] != 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": dilation ", params.dilation[0], ",",
                                                   params.dilation[1],
                                                   " is not supported (only 1)"));
  }
  ASSIGN_OR_RETURN(auto out, CheckPool(op, x, params));
  const Expr zero = MakeConst(x.dtype(), 0);
  const std::vector<int64_t> shape = {x.shape()[0], x.shape()[1], out[0], out[1]};
  ASSIGN_OR_RETURN(Tensor sum,
                   Reduce(
                       sum_name, shape, ReduceKind::kSum, {params.kernel[0], params.kernel[1]},
                       [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
                         // float16 / bfloat16 sums accumulate in float32.
                         return ops_internal::Widen(WindowLoad(x, ax, r, params, zero));
                       },
                       Expr(), ComputeOptions{{"n", "c", "h", "w"}, {"ry", "rx"}, "avg_pool2d"}));
  const double area = static_cast<double>(params.kernel[0]) * static_cast<double>(params.kernel[1]);
  return Compute(
      name, shape,
      [&](const std::vector<Expr>& ax) { return ops_internal::Narrow(x.dtype(), sum(ax) / area); },
      ComputeOptions{{"n", "c", "h", "w"}, {}, "avg_pool2d.divide"});
}

absl::StatusOr<ComputeDAG> AvgPool2dDAG(const std::vector<int64_t>& x_shape, ScalarType dtype,
                                        const Pool2dParams& params) {
  ASSIGN_OR_RETURN(Tensor x, MakeInput("avg_pool2d", "X", x_shape, 4, "[N, C, H, W]", dtype));
  ASSIGN_OR_RETURN(Tensor y, AvgPool2d(x, params));
  return ComputeDAG::Create({y});
}

namespace ops_internal {

namespace {

absl::StatusOr<Pool2dParams> ReadPoolParams(const OpArgs& args, const std::string& op,
                                            bool with_dilation) {
  if (!args.attrs.count("kernel")) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": attribute 'kernel' is required (e.g. kernel=3 or kernel=3,2)"));
  }
  Pool2dParams p;
  ASSIGN_OR_RETURN(p.kernel, PairAttr(args, op, "kernel", {1, 1}));
  ASSIGN_OR_RETURN(p.stride, PairAttr(args, op, "stride", p.kernel));
  ASSIGN_OR_RETURN(p.padding, PairAttr(args, op, "padding", {0, 0}));
  if (with_dilation) {
    ASSIGN_OR_RETURN(p.dilation, PairAttr(args, op, "dilation", {1, 1}));
  }
  return p;
}

std::vector<OpAttrInfo> PoolAttrInfo(bool with_dilation) {
  std::vector<OpAttrInfo> attrs = {
      {"kernel", "", "window size: one value, or height,width (required)"},
      {"stride", "kernel", "window step: one value, or height,width (default: the kernel)"},
      {"padding", "0", "padding on each side (at most half the kernel)"}};
  if (with_dilation) {
    attrs.push_back({"dilation", "1", "spacing of window taps: one value, or height,width"});
  }
  return attrs;
}

}  // namespace

void AppendPoolOps(std::vector<OpInfo>& ops) {
  ops.push_back(OpInfo{
      "avg_pool2d",
      "Y[N,C,OH,OW] = window mean of X[N,C,H,W] over the full kernel area (count_include_pad)",
      {"X[N,C,H,W]"},
      PoolAttrInfo(false),
      [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
        RETURN_IF_ERROR(ExpectInputs(args, "avg_pool2d", 1));
        ASSIGN_OR_RETURN(Pool2dParams p, ReadPoolParams(args, "avg_pool2d", false));
        return AvgPool2dDAG(args.shapes[0], args.dtype, p);
      }});
  ops.push_back(OpInfo{"max_pool2d",
                       "Y[N,C,OH,OW] = window maximum of X[N,C,H,W] (padding never wins)",
                       {"X[N,C,H,W]"},
                       PoolAttrInfo(true),
                       [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
                         RETURN_IF_ERROR(ExpectInputs(args, "max_pool2d", 1));
                         ASSIGN_OR_RETURN(Pool2dParams p, ReadPoolParams(args, "max_pool2d", true));
                         return MaxPool2dDAG(args.shapes[0], args.dtype, p);
                       }});
}

}  // namespace ops_internal

}  // namespace tilesearch::ir
