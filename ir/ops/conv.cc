#include "ir/ops/conv.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ops/op_checks.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {

using ops_internal::AccumulatingReduce;
using ops_internal::CheckNumeric;
using ops_internal::CheckSameDtype;
using ops_internal::CheckTensor;
using ops_internal::CheckWindowParams;
using ops_internal::MakeInput;
using ops_internal::ShapeStr;
using ops_internal::Widen;
using ops_internal::WindowOutputExtent;

namespace {

// Channel and spatial extents of a convolution, read from X and W in whatever layout.
struct ConvDims {
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t weight_channels = 0;  // W's input channels per group
  std::vector<int64_t> in;      // spatial input extents
  std::vector<int64_t> kernel;  // spatial kernel extents
};

struct ConvWindow {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

// Output spatial extents after checking dtypes, window parameters, groups and channels.
absl::StatusOr<std::vector<int64_t>> CheckConv(const std::string& op, const Tensor& x,
                                               const Tensor& w, const ConvDims& d,
                                               const ConvWindow& win) {
  RETURN_IF_ERROR(CheckNumeric(op, "X", x));
  RETURN_IF_ERROR(CheckNumeric(op, "W", w));
  RETURN_IF_ERROR(CheckSameDtype(op, "X", x, "W", w));
  const std::vector<std::string> dim_names = d.in.size() == 1
                                                 ? std::vector<std::string>{"length"}
                                                 : std::vector<std::string>{"height", "width"};
  for (size_t i = 0; i < d.in.size(); ++i) {
    RETURN_IF_ERROR(
        CheckWindowParams(op, dim_names[i], win.stride[i], win.padding[i], win.dilation[i]));
  }
  if (win.groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": groups ", win.groups, " must be at least 1"));
  }
  if (d.in_channels % win.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": input channels ", d.in_channels, " of X ",
                                                   ShapeStr(x.shape()),
                                                   " are not divisible by groups ", win.groups));
  }
  if (d.out_channels % win.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": output channels ", d.out_channels,
                                                   " of W ", ShapeStr(w.shape()),
                                                   " are not divisible by groups ", win.groups));
  }
  if (d.weight_channels != d.in_channels / win.groups) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": weight channel mismatch: W ", ShapeStr(w.shape()), " has ",
                     d.weight_channels, " input channels per group, but X ", ShapeStr(x.shape()),
                     " with groups ", win.groups, " has ", d.in_channels / win.groups));
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < d.in.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t extent,
                     WindowOutputExtent(op, dim_names[i], d.in[i], d.kernel[i], win.stride[i],
                                        win.padding[i], win.dilation[i]));
    out.push_back(extent);
  }
  return out;
}

ConvWindow Window2d(const Conv2dParams& p) {
  return ConvWindow{{p.stride[0], p.stride[1]},
                    {p.padding[0], p.padding[1]},
                    {p.dilation[0], p.dilation[1]},
                    p.groups};
}

// out·stride + r·dilation − padding, without the trivial factors and terms.
Expr WindowIndex(const Expr& out, const Expr& r, int64_t stride, int64_t dilation,
                 int64_t padding) {
  // Integer constants (no double round trip); the parameters are bounded by CheckWindowParams.
  Expr e = stride == 1 ? out : out * IntConst(stride);
  e = e + (dilation == 1 ? r : r * IntConst(dilation));
  if (padding != 0) e = e - IntConst(padding);
  return e;
}

// x[idx] where every spatial index idx[dims[i]] with padding[i] > 0 is checked against x's
// extent; out-of-bounds elements read as `pad_value`, and the Load is not performed there (Select
// is lazy).
Expr PaddedLoad(const Tensor& x, const std::vector<Expr>& idx, const std::vector<int>& dims,
                const std::vector<int64_t>& padding, const Expr& pad_value) {
  Expr cond;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (padding[i] == 0) continue;
    const Expr& v = idx[dims[i]];
    Expr c = (v >= IntConst(0)) && (v < IntConst(x.shape()[dims[i]]));
    cond = cond.defined() ? (cond && c) : c;
  }
  Expr load = x(idx);
  return cond.defined() ? Select(cond, load, pad_value) : load;
}

// Input channel of reduction channel `rc` for output channel `k`: (k / out_per_group)·in_per_group
// + rc (just rc for one group).
Expr GroupChannel(const Expr& k, const Expr& rc, const ConvDims& d, int64_t groups) {
  if (groups == 1) return rc;
  const int64_t out_per_group = d.out_channels / groups;
  const int64_t in_per_group = d.in_channels / groups;
  return (k / IntConst(out_per_group)) * IntConst(in_per_group) + rc;
}

}  // namespace

absl::StatusOr<Tensor> Conv1d(const Tensor& x, const Tensor& w, const Conv1dParams& params,
                              const std::string& name) {
  const std::string op = "conv1d";
  RETURN_IF_ERROR(CheckTensor(op, "X", x, 3, "[N, C, L]"));
  RETURN_IF_ERROR(CheckTensor(op, "W", w, 3, "[K, C/groups, S]"));
  const ConvDims d{x.shape()[0], x.shape()[1],   w.shape()[0],
                   w.shape()[1], {x.shape()[2]}, {w.shape()[2]}};
  const ConvWindow win{{params.stride}, {params.padding}, {params.dilation}, params.groups};
  ASSIGN_OR_RETURN(std::vector<int64_t> out, CheckConv(op, x, w, d, win));
  const Expr zero = MakeConst(x.dtype(), 0);
  return AccumulatingReduce(
      name, {d.batch, d.out_channels, out[0]}, ReduceKind::kSum, {d.weight_channels, d.kernel[0]},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        Expr l = WindowIndex(ax[2], r[1], params.stride, params.dilation, params.padding);
        Expr c = GroupChannel(ax[1], r[0], d, params.groups);
        return Widen(PaddedLoad(x, {ax[0], c, l}, {2}, {params.padding}, zero)) *
               Widen(w(ax[1], r[0], r[1]));
      },
      x.dtype(), ComputeOptions{{"n", "k", "l"}, {"rc", "rx"}, "conv1d"});
}

absl::StatusOr<ComputeDAG> Conv1dDAG(const std::vector<int64_t>& x_shape,
                                     const std::vector<int64_t>& w_shape, ScalarType dtype,
                                     const Conv1dParams& params) {
  const std::string op = "conv1d";
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "X", x_shape, 3, "[N, C, L]", dtype));
  ASSIGN_OR_RETURN(Tensor w, MakeInput(op, "W", w_shape, 3, "[K, C/groups, S]", dtype));
  ASSIGN_OR_RETURN(Tensor y, Conv1d(x, w, params));
  return ComputeDAG::Create({y});
}

absl::StatusOr<Tensor> Conv2dNchw(const Tensor& x, const Tensor& w, const Conv2dParams& params,
                                  const std::string& name) {
  const std::string op = "conv2d_nchw";
  RETURN_IF_ERROR(CheckTensor(op, "X", x, 4, "[N, C, H, W]"));
  RETURN_IF_ERROR(CheckTensor(op, "W", w, 4, "[K, C/groups, R, S]"));
  const ConvDims d{x.shape()[0],
                   x.shape()[1],
                   w.shape()[0],
                   w.shape()[1],
                   {x.shape()[2], x.shape()[3]},
                   {w.shape()[2], w.shape()[3]}};
  const ConvWindow win = Window2d(params);
  ASSIGN_OR_RETURN(std::vector<int64_t> out, CheckConv(op, x, w, d, win));
  const Expr zero = MakeConst(x.dtype(), 0);
  return AccumulatingReduce(
      name, {d.batch, d.out_channels, out[0], out[1]}, ReduceKind::kSum,
      {d.weight_channels, d.kernel[0], d.kernel[1]},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        Expr h = WindowIndex(ax[2], r[1], win.stride[0], win.dilation[0], win.padding[0]);
        Expr v = WindowIndex(ax[3], r[2], win.stride[1], win.dilation[1], win.padding[1]);
        Expr c = GroupChannel(ax[1], r[0], d, params.groups);
        return Widen(PaddedLoad(x, {ax[0], c, h, v}, {2, 3}, win.padding, zero)) *
               Widen(w(ax[1], r[0], r[1], r[2]));
      },
      x.dtype(), ComputeOptions{{"n", "k", "h", "w"}, {"rc", "ry", "rx"}, "conv2d_nchw"});
}

absl::StatusOr<ComputeDAG> Conv2dNchwDAG(const std::vector<int64_t>& x_shape,
                                         const std::vector<int64_t>& w_shape, ScalarType dtype,
                                         const Conv2dParams& params) {
  const std::string op = "conv2d_nchw";
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "X", x_shape, 4, "[N, C, H, W]", dtype));
  ASSIGN_OR_RETURN(Tensor w, MakeInput(op, "W", w_shape, 4, "[K, C/groups, R, S]", dtype));
  ASSIGN_OR_RETURN(Tensor y, Conv2dNchw(x, w, params));
  return ComputeDAG::Create({y});
}

absl::StatusOr<Tensor> Conv2dNhwc(const Tensor& x, const Tensor& w, const Conv2dParams& params,
                                  const std::string& name) {
  const std::string op = "conv2d_nhwc";
  RETURN_IF_ERROR(CheckTensor(op, "X", x, 4, "[N, H, W, C]"));
  RETURN_IF_ERROR(CheckTensor(op, "W", w, 4, "[R, S, C/groups, K]"));
  const ConvDims d{x.shape()[0],
                   x.shape()[3],
                   w.shape()[3],
                   w.shape()[2],
                   {x.shape()[1], x.shape()[2]},
                   {w.shape()[0], w.shape()[1]}};
  const ConvWindow win = Window2d(params);
  ASSIGN_OR_RETURN(std::vector<int64_t> out, CheckConv(op, x, w, d, win));
  const Expr zero = MakeConst(x.dtype(), 0);
  return AccumulatingReduce(
      name, {d.batch, out[0], out[1], d.out_channels}, ReduceKind::kSum,
      {d.kernel[0], d.kernel[1], d.weight_channels},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        Expr h = WindowIndex(ax[1], r[0], win.stride[0], win.dilation[0], win.padding[0]);
        Expr v = WindowIndex(ax[2], r[1], win.stride[1], win.dilation[1], win.padding[1]);
        Expr c = GroupChannel(ax[3], r[2], d, params.groups);
        return Widen(PaddedLoad(x, {ax[0], h, v, c}, {1, 2}, win.padding, zero)) *
               Widen(w(r[0], r[1], r[2], ax[3]));
      },
      x.dtype(), ComputeOptions{{"n", "h", "w", "k"}, {"ry", "rx", "rc"}, "conv2d_nhwc"});
}

absl::StatusOr<ComputeDAG> Conv2dNhwcDAG(const std::vector<int64_t>& x_shape,
                                         const std::vector<int64_t>& w_shape, ScalarType dtype,
                                         const Conv2dParams& params) {
  const std::string op = "conv2d_nhwc";
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "X", x_shape, 4, "[N, H, W, C]", dtype));
  ASSIGN_OR_RETURN(Tensor w, MakeInput(op, "W", w_shape, 4, "[R, S, C/groups, K]", dtype));
  ASSIGN_OR_RETURN(Tensor y, Conv2dNhwc(x, w, params));
  return ComputeDAG::Create({y});
}

absl::StatusOr<Tensor> DepthwiseConv2dNchw(const Tensor& x, const Tensor& w,
                                           const Conv2dParams& params, const std::string& name) {
  const std::string op = "depthwise_conv2d_nchw";
  RETURN_IF_ERROR(CheckTensor(op, "X", x, 4, "[N, C, H, W]"));
  RETURN_IF_ERROR(CheckTensor(op, "W", w, 4, "[C*multiplier, 1, R, S]"));
  const int64_t channels = x.shape()[1];
  if (w.shape()[1] != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": weight channel mismatch: W ", ShapeStr(w.shape()),
                     " must have extent 1 in dimension 1, got ", w.shape()[1]));
  }
  if (w.shape()[0] % channels != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": weight channel mismatch: output channels ", w.shape()[0], " of W ",
                     ShapeStr(w.shape()), " are not a multiple of the input channels ", channels,
                     " of X ", ShapeStr(x.shape())));
  }
  const int64_t multiplier = w.shape()[0] / channels;
  const ConvDims d{x.shape()[0],
                   channels,
                   w.shape()[0],
                   1,
                   {x.shape()[2], x.shape()[3]},
                   {w.shape()[2], w.shape()[3]}};
  ConvWindow win = Window2d(params);
  win.groups = channels;
  ASSIGN_OR_RETURN(std::vector<int64_t> out, CheckConv(op, x, w, d, win));
  const Expr zero = MakeConst(x.dtype(), 0);
  return AccumulatingReduce(
      name, {d.batch, d.out_channels, out[0], out[1]}, ReduceKind::kSum, {d.kernel[0], d.kernel[1]},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        Expr h = WindowIndex(ax[2], r[0], win.stride[0], win.dilation[0], win.padding[0]);
        Expr v = WindowIndex(ax[3], r[1], win.stride[1], win.dilation[1], win.padding[1]);
        Expr c = multiplier == 1 ? ax[1] : ax[1] / IntConst(multiplier);
        return Widen(PaddedLoad(x, {ax[0], c, h, v}, {2, 3}, win.padding, zero)) *
               Widen(w(ax[1], 0, r[0], r[1]));
      },
      x.dtype(), ComputeOptions{{"n", "k", "h", "w"}, {"ry", "rx"}, "depthwise_conv2d_nchw"});
}

absl::StatusOr<ComputeDAG> DepthwiseConv2dNchwDAG(const std::vector<int64_t>& x_shape,
                                                  const std::vector<int64_t>& w_shape,
                                                  ScalarType dtype, const Conv2dParams& params) {
  const std::string op = "depthwise_conv2d_nchw";
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "X", x_shape, 4, "[N, C, H, W]", dtype));
  ASSIGN_OR_RETURN(Tensor w, MakeInput(op, "W", w_shape, 4, "[C*multiplier, 1, R, S]", dtype));
  ASSIGN_OR_RETURN(Tensor y, DepthwiseConv2dNchw(x, w, params));
  return ComputeDAG::Create({y});
}

absl::StatusOr<Tensor> Conv2dNchwPadded(const Tensor& x, const Tensor& w,
                                        const Conv2dParams& params, const std::string& name,
                                        const std::string& pad_name) {
  const std::string op = "conv2d_nchw_padded";
  RETURN_IF_ERROR(CheckTensor(op, "X", x, 4, "[N, C, H, W]"));
  RETURN_IF_ERROR(CheckTensor(op, "W", w, 4, "[K, C/groups, R, S]"));
  const ConvDims d{x.shape()[0],
                   x.shape()[1],
                   w.shape()[0],
                   w.shape()[1],
                   {x.shape()[2], x.shape()[3]},
                   {w.shape()[2], w.shape()[3]}};
  const ConvWindow win = Window2d(params);
  ASSIGN_OR_RETURN(std::vector<int64_t> out, CheckConv(op, x, w, d, win));
  const int64_t ph = win.padding[0];
  const int64_t pw = win.padding[1];
  const Expr zero = MakeConst(x.dtype(), 0);
  ASSIGN_OR_RETURN(Tensor pad,
                   Compute(
                       pad_name, {d.batch, d.in_channels, d.in[0] + 2 * ph, d.in[1] + 2 * pw},
                       [&](const std::vector<Expr>& ax) {
                         Expr h = ph == 0 ? ax[2] : ax[2] - IntConst(ph);
                         Expr v = pw == 0 ? ax[3] : ax[3] - IntConst(pw);
                         return PaddedLoad(x, {ax[0], ax[1], h, v}, {2, 3}, win.padding, zero);
                       },
                       ComputeOptions{{"n", "c", "h", "w"}, {}, "conv2d_nchw.pad"}));
  return AccumulatingReduce(
      name, {d.batch, d.out_channels, out[0], out[1]}, ReduceKind::kSum,
      {d.weight_channels, d.kernel[0], d.kernel[1]},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        Expr h = WindowIndex(ax[2], r[1], win.stride[0], win.dilation[0], 0);
        Expr v = WindowIndex(ax[3], r[2], win.stride[1], win.dilation[1], 0);
        Expr c = GroupChannel(ax[1], r[0], d, params.groups);
        return Widen(pad(ax[0], c, h, v)) * Widen(w(ax[1], r[0], r[1], r[2]));
      },
      x.dtype(), ComputeOptions{{"n", "k", "h", "w"}, {"rc", "ry", "rx"}, "conv2d_nchw"});
}

absl::StatusOr<ComputeDAG> Conv2dNchwPaddedDAG(const std::vector<int64_t>& x_shape,
                                               const std::vector<int64_t>& w_shape,
                                               ScalarType dtype, const Conv2dParams& params) {
  const std::string op = "conv2d_nchw_padded";
  ASSIGN_OR_RETURN(Tensor x, MakeInput(op, "X", x_shape, 4, "[N, C, H, W]", dtype));
  ASSIGN_OR_RETURN(Tensor w, MakeInput(op, "W", w_shape, 4, "[K, C/groups, R, S]", dtype));
  ASSIGN_OR_RETURN(Tensor y, Conv2dNchwPadded(x, w, params));
  return ComputeDAG::Create({y});
}

namespace ops_internal {

absl::StatusOr<Conv2dParams> ReadConv2dParams(const OpArgs& args, const std::string& op) {
  Conv2dParams p;
  ASSIGN_OR_RETURN(p.stride, PairAttr(args, op, "stride", {1, 1}));
  ASSIGN_OR_RETURN(p.padding, PairAttr(args, op, "padding", {0, 0}));
  ASSIGN_OR_RETURN(p.dilation, PairAttr(args, op, "dilation", {1, 1}));
  ASSIGN_OR_RETURN(p.groups, IntAttr(args, op, "groups", 1));
  return p;
}

std::vector<OpAttrInfo> Conv2dAttrInfo(bool with_groups) {
  std::vector<OpAttrInfo> attrs = {
      {"stride", "1", "window step: one value, or height,width"},
      {"padding", "0", "zeros on each side: one value, or height,width"},
      {"dilation", "1", "spacing of kernel taps: one value, or height,width"}};
  if (with_groups) attrs.push_back({"groups", "1", "channel groups (C and K divisible by it)"});
  return attrs;
}

namespace {

using Conv2dDagFn = absl::StatusOr<ComputeDAG> (*)(const std::vector<int64_t>&,
                                                   const std::vector<int64_t>&, ScalarType,
                                                   const Conv2dParams&);

OpInfo Conv2dOp(std::string name, std::string summary, std::vector<std::string> inputs,
                bool with_groups, Conv2dDagFn build) {
  std::string op = name;
  return OpInfo{std::move(name), std::move(summary), std::move(inputs), Conv2dAttrInfo(with_groups),
                [op, build](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
                  RETURN_IF_ERROR(ExpectInputs(args, op, 2));
                  ASSIGN_OR_RETURN(Conv2dParams params, ReadConv2dParams(args, op));
                  return build(args.shapes[0], args.shapes[1], args.dtype, params);
                }};
}

}  // namespace

void AppendConvOps(std::vector<OpInfo>& ops) {
  ops.push_back(OpInfo{"conv1d",
                       "Y[N,K,OL] = conv1d(X[N,C,L], W[K,C/groups,S]) (torch.nn.functional.conv1d)",
                       {"X[N,C,L]", "W[K,C/groups,S]"},
                       {{"stride", "1", "window step"},
                        {"padding", "0", "zeros on each side"},
                        {"dilation", "1", "spacing of kernel taps"},
                        {"groups", "1", "channel groups (C and K divisible by it)"}},
                       [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
                         const std::string op = "conv1d";
                         RETURN_IF_ERROR(ExpectInputs(args, op, 2));
                         Conv1dParams p;
                         ASSIGN_OR_RETURN(p.stride, IntAttr(args, op, "stride", 1));
                         ASSIGN_OR_RETURN(p.padding, IntAttr(args, op, "padding", 0));
                         ASSIGN_OR_RETURN(p.dilation, IntAttr(args, op, "dilation", 1));
                         ASSIGN_OR_RETURN(p.groups, IntAttr(args, op, "groups", 1));
                         return Conv1dDAG(args.shapes[0], args.shapes[1], args.dtype, p);
                       }});
  ops.push_back(Conv2dOp(
      "conv2d_nchw",
      "Y[N,K,OH,OW] = conv2d(X[N,C,H,W], W[K,C/groups,R,S]), padding read lazily in the body",
      {"X[N,C,H,W]", "W[K,C/groups,R,S]"}, true, &Conv2dNchwDAG));
  ops.push_back(Conv2dOp("conv2d_nhwc",
                         "Y[N,OH,OW,K] = conv2d(X[N,H,W,C], W[R,S,C/groups,K]) in NHWC layout",
                         {"X[N,H,W,C]", "W[R,S,C/groups,K]"}, true, &Conv2dNhwcDAG));
  ops.push_back(Conv2dOp(
      "depthwise_conv2d_nchw",
      "Y[N,C*m,OH,OW] = depthwise conv2d(X[N,C,H,W], W[C*m,1,R,S]) (groups = C, multiplier m)",
      {"X[N,C,H,W]", "W[C*multiplier,1,R,S]"}, false, &DepthwiseConv2dNchwDAG));
  ops.push_back(Conv2dOp(
      "conv2d_nchw_padded",
      "conv2d_nchw as two stages: an explicit padding stage, then the reduction (Ansor's form)",
      {"X[N,C,H,W]", "W[K,C/groups,R,S]"}, true, &Conv2dNchwPaddedDAG));
}

}  // namespace ops_internal

}  // namespace tilesearch::ir
