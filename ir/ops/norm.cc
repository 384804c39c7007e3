// Softmax, log_softmax, layernorm and rmsnorm as reduction stages followed by a normalize stage.
#include "ir/ops/norm.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ops/layout.h"
#include "ir/ops/op_checks.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {
namespace {

using ops_internal::Narrow;
using ops_internal::Widen;

/// `shape` without dimension `axis`, or [1] when nothing remains.
std::vector<int64_t> DropAxis(const std::vector<int64_t>& shape, int axis) {
  std::vector<int64_t> out;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d != axis) out.push_back(shape[d]);
  }
  if (out.empty()) out.push_back(1);
  return out;
}

/// Index of a statistic (shape from DropAxis) for the full index `i`.
std::vector<Expr> DropIndex(const std::vector<Expr>& i, int axis) {
  std::vector<Expr> out;
  for (int d = 0; d < static_cast<int>(i.size()); ++d) {
    if (d != axis) out.push_back(i[d]);
  }
  if (out.empty()) out.push_back(IntConst(0));
  return out;
}

/// Full index from a statistic index `i` (shape from DropAxis) and the reduce variable `r`.
std::vector<Expr> InsertIndex(const std::vector<Expr>& i, const Expr& r, int axis, int rank) {
  std::vector<Expr> out;
  int k = 0;
  for (int d = 0; d < rank; ++d) out.push_back(d == axis ? r : i[k++]);
  return out;
}

absl::StatusOr<Tensor> SoftmaxImpl(const std::string& op, const Tensor& x, int64_t axis,
                                   const std::string& name, bool log) {
  RETURN_IF_ERROR(ops_internal::CheckDefined(op, "X", x));
  RETURN_IF_ERROR(RequireFloat(op, x));
  const int rank = x.ndim();
  ASSIGN_OR_RETURN(int a, NormalizeAxis(op, axis, rank));
  const std::vector<int64_t> stat_shape = DropAxis(x.shape(), a);
  const std::vector<int64_t> reduce_shape = {x.shape()[a]};
  // With a single statistic element (rank 1) the statistic index [0] is ignored.
  auto x_at = [&](const std::vector<Expr>& i, const Expr& r) {
    return rank == 1 ? x(r) : x(InsertIndex(i, r, a, rank));
  };
  ASSIGN_OR_RETURN(Tensor max, Reduce(
                                   name + "_max", stat_shape, ReduceKind::kMax, reduce_shape,
                                   [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                                     return x_at(i, r[0]);
                                   },
                                   Expr(), TagOnly(op + ".max")));
  ASSIGN_OR_RETURN(Tensor sum, Reduce(
                                   name + "_expsum", stat_shape, ReduceKind::kSum, reduce_shape,
                                   [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                                     // float32 for float16 / bfloat16 (the max is exact in
                                     // the dtype and stays there).
                                     return Exp(Widen(x_at(i, r[0])) - Widen(max(i)));
                                   },
                                   Expr(), TagOnly(op + ".expsum")));
  return Compute(
      name, x.shape(),
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> s = DropIndex(i, a);
        Expr shifted = Widen(x(i)) - Widen(max(s));
        if (log) return Narrow(x.dtype(), shifted - Log(sum(s)));
        return Narrow(x.dtype(), Exp(shifted) / sum(s));
      },
      TagOnly(op + ".normalize"));
}

/// Checks x's dtype, normalized_ndim and eps.
absl::Status CheckNormArgs(const std::string& op, const Tensor& x, int64_t normalized_ndim,
                           double eps) {
  RETURN_IF_ERROR(ops_internal::CheckDefined(op, "X", x));
  RETURN_IF_ERROR(RequireFloat(op, x));
  if (normalized_ndim < 1 || normalized_ndim > x.ndim()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": normalized_ndim ", normalized_ndim,
                                                   " out of range 1..", x.ndim(), " for rank ",
                                                   x.ndim()));
  }
  if (!std::isfinite(eps)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": eps ", eps, " is not finite"));
  }
  if (eps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": eps ", eps, " is negative"));
  }
  return absl::OkStatus();
}

/// Checks that `param` has the shape of x's trailing axes and x's dtype.
absl::Status CheckParam(const std::string& op, const std::string& what, const Tensor& x,
                        const Tensor& param, int normalized_ndim) {
  RETURN_IF_ERROR(ops_internal::CheckDefined(op, what, param));
  const std::vector<int64_t> trailing(x.shape().end() - normalized_ndim, x.shape().end());
  if (param.shape() != trailing) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", what, " shape ", ShapeToString(param.shape()), " does not match the trailing ",
        normalized_ndim, " axes ", ShapeToString(trailing), " of X ", ShapeToString(x.shape())));
  }
  if (param.dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " dtype ",
                                                   TypeName(param.dtype()),
                                                   " differs from X dtype ", TypeName(x.dtype())));
  }
  return absl::OkStatus();
}

/// Splits x's axes into `lead` statistic axes and `k` trailing normalized axes.
struct NormLayout {
  int rank;
  int lead;  // rank - k
  std::vector<int64_t> stat_shape;
  std::vector<int64_t> reduce_shape;
  int64_t count;  // elements per statistic

  NormLayout(const Tensor& x, int k) : rank(x.ndim()), lead(x.ndim() - k), count(1) {
    for (int d = 0; d < rank; ++d) {
      if (d < lead) {
        stat_shape.push_back(x.shape()[d]);
      } else {
        reduce_shape.push_back(x.shape()[d]);
        count *= x.shape()[d];
      }
    }
    if (stat_shape.empty()) stat_shape.push_back(1);
  }
  /// x's index from statistic axes `i` and reduce axes `r`.
  std::vector<Expr> Full(const std::vector<Expr>& i, const std::vector<Expr>& r) const {
    std::vector<Expr> out(i.begin(), i.begin() + lead);
    out.insert(out.end(), r.begin(), r.end());
    return out;
  }
  /// Statistic index for x's index `i`.
  std::vector<Expr> Stat(const std::vector<Expr>& i) const {
    if (lead == 0) return {IntConst(0)};
    return std::vector<Expr>(i.begin(), i.begin() + lead);
  }
  /// Parameter (gamma / beta) index for x's index `i`.
  std::vector<Expr> Param(const std::vector<Expr>& i) const {
    return std::vector<Expr>(i.begin() + lead, i.end());
  }
};

absl::StatusOr<ComputeDAG> NormDAG(const std::string& op, const std::vector<int64_t>& shape,
                                   int normalized_ndim, double eps, ScalarType dtype) {
  ASSIGN_OR_RETURN(Tensor x, OpInput(op, "X", shape, dtype));
  RETURN_IF_ERROR(CheckNormArgs(op, x, normalized_ndim, eps));
  const std::vector<int64_t> trailing(shape.end() - normalized_ndim, shape.end());
  ASSIGN_OR_RETURN(Tensor gamma, OpInput(op, "gamma", trailing, dtype));
  if (op == "rmsnorm") {
    ASSIGN_OR_RETURN(Tensor y, RmsNorm(x, gamma, normalized_ndim, eps));
    return ComputeDAG::Create({y});
  }
  ASSIGN_OR_RETURN(Tensor beta, OpInput(op, "beta", trailing, dtype));
  ASSIGN_OR_RETURN(Tensor y, LayerNorm(x, gamma, beta, normalized_ndim, eps));
  return ComputeDAG::Create({y});
}

}  // namespace

absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t axis, const std::string& name) {
  return SoftmaxImpl("softmax", x, axis, name, /*log=*/false);
}

absl::StatusOr<Tensor> LogSoftmax(const Tensor& x, int64_t axis, const std::string& name) {
  return SoftmaxImpl("log_softmax", x, axis, name, /*log=*/true);
}

absl::StatusOr<Tensor> LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 int normalized_ndim, double eps, const std::string& name) {
  const std::string op = "layernorm";
  RETURN_IF_ERROR(CheckNormArgs(op, x, normalized_ndim, eps));
  RETURN_IF_ERROR(CheckParam(op, "gamma", x, gamma, normalized_ndim));
  RETURN_IF_ERROR(CheckParam(op, "beta", x, beta, normalized_ndim));
  const NormLayout layout(x, normalized_ndim);
  const double inv_n = 1.0 / static_cast<double>(layout.count);
  ASSIGN_OR_RETURN(Tensor mean,
                   Reduce(
                       name + "_mean", layout.stat_shape, ReduceKind::kSum, layout.reduce_shape,
                       [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                         return Widen(x(layout.Full(i, r))) * inv_n;
                       },
                       Expr(), TagOnly("layernorm.mean")));
  ASSIGN_OR_RETURN(Tensor var,
                   Reduce(
                       name + "_var", layout.stat_shape, ReduceKind::kSum, layout.reduce_shape,
                       [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                         Expr centered = Widen(x(layout.Full(i, r))) - mean(i);
                         return centered * centered * inv_n;
                       },
                       Expr(), TagOnly("layernorm.var")));
  return Compute(
      name, x.shape(),
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> s = layout.Stat(i);
        std::vector<Expr> p = layout.Param(i);
        return Narrow(x.dtype(), (Widen(x(i)) - mean(s)) * Rsqrt(var(s) + eps) * Widen(gamma(p)) +
                                     Widen(beta(p)));
      },
      TagOnly("layernorm.normalize"));
}

absl::StatusOr<Tensor> RmsNorm(const Tensor& x, const Tensor& gamma, int normalized_ndim,
                               double eps, const std::string& name) {
  const std::string op = "rmsnorm";
  RETURN_IF_ERROR(CheckNormArgs(op, x, normalized_ndim, eps));
  RETURN_IF_ERROR(CheckParam(op, "gamma", x, gamma, normalized_ndim));
  const NormLayout layout(x, normalized_ndim);
  const double inv_n = 1.0 / static_cast<double>(layout.count);
  ASSIGN_OR_RETURN(Tensor ms,
                   Reduce(
                       name + "_ms", layout.stat_shape, ReduceKind::kSum, layout.reduce_shape,
                       [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                         Expr v = Widen(x(layout.Full(i, r)));
                         return v * v * inv_n;
                       },
                       Expr(), TagOnly("rmsnorm.ms")));
  return Compute(
      name, x.shape(),
      [&](const std::vector<Expr>& i) {
        return Narrow(x.dtype(), Widen(x(i)) * Rsqrt(ms(layout.Stat(i)) + eps) *
                                     Widen(gamma(layout.Param(i))));
      },
      TagOnly("rmsnorm.normalize"));
}

absl::StatusOr<ComputeDAG> SoftmaxDAG(const std::vector<int64_t>& shape, int64_t axis,
                                      ScalarType dtype) {
  ASSIGN_OR_RETURN(Tensor x, OpInput("softmax", "X", shape, dtype));
  ASSIGN_OR_RETURN(Tensor y, Softmax(x, axis));
  return ComputeDAG::Create({y});
}

absl::StatusOr<ComputeDAG> LogSoftmaxDAG(const std::vector<int64_t>& shape, int64_t axis,
                                         ScalarType dtype) {
  ASSIGN_OR_RETURN(Tensor x, OpInput("log_softmax", "X", shape, dtype));
  ASSIGN_OR_RETURN(Tensor y, LogSoftmax(x, axis));
  return ComputeDAG::Create({y});
}

absl::StatusOr<ComputeDAG> LayerNormDAG(const std::vector<int64_t>& shape, int normalized_ndim,
                                        double eps, ScalarType dtype) {
  return NormDAG("layernorm", shape, normalized_ndim, eps, dtype);
}

absl::StatusOr<ComputeDAG> RmsNormDAG(const std::vector<int64_t>& shape, int normalized_ndim,
                                      double eps, ScalarType dtype) {
  return NormDAG("rmsnorm", shape, normalized_ndim, eps, dtype);
}

namespace ops_internal {

void AppendNormOps(std::vector<OpInfo>& ops) {
  for (bool log : {false, true}) {
    const std::string name = log ? "log_softmax" : "softmax";
    ops.push_back(OpInfo{
        .name = name,
        .summary = log ? "x - max - log(sum(exp(x - max))) along axis (torch.log_softmax)"
                       : "exp(x - max) / sum(exp(x - max)) along axis (torch.softmax)",
        .inputs = {"X[d0,...,dn-1]"},
        .attrs = {{"axis", "-1", "axis to normalize, negative from the end"}},
        .build = [name, log](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
          RETURN_IF_ERROR(ExpectInputs(args, name, 1));
          ASSIGN_OR_RETURN(int64_t axis, IntAttr(args, name, "axis", -1));
          return log ? LogSoftmaxDAG(args.shapes[0], axis, args.dtype)
                     : SoftmaxDAG(args.shapes[0], axis, args.dtype);
        },
    });
  }
  ops.push_back(OpInfo{
      .name = "layernorm",
      .summary = "(x - mean) * rsqrt(var + eps) * gamma + beta over trailing axes (layer_norm)",
      .inputs = {"X[d0,...,dn-1]", "gamma[trailing axes]", "beta[trailing axes]"},
      .attrs = {{"normalized_ndim", "1", "number of trailing axes normalized"},
                {"eps", "1e-05", "added to the variance"}},
      .build = [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
        const std::string op = "layernorm";
        RETURN_IF_ERROR(ExpectInputs(args, op, 3));
        ASSIGN_OR_RETURN(int64_t k, IntAttr(args, op, "normalized_ndim", 1));
        ASSIGN_OR_RETURN(double eps, FloatAttr(args, op, "eps", 1e-5));
        ASSIGN_OR_RETURN(Tensor x, OpInput(op, "X", args.shapes[0], args.dtype));
        ASSIGN_OR_RETURN(Tensor gamma, OpInput(op, "gamma", args.shapes[1], args.dtype));
        ASSIGN_OR_RETURN(Tensor beta, OpInput(op, "beta", args.shapes[2], args.dtype));
        RETURN_IF_ERROR(CheckNormArgs(op, x, k, eps));
        ASSIGN_OR_RETURN(Tensor y, LayerNorm(x, gamma, beta, static_cast<int>(k), eps));
        return ComputeDAG::Create({y});
      },
  });
  ops.push_back(OpInfo{
      .name = "rmsnorm",
      .summary = "x * rsqrt(mean(x^2) + eps) * gamma over trailing axes (rms_norm)",
      .inputs = {"X[d0,...,dn-1]", "gamma[trailing axes]"},
      .attrs = {{"normalized_ndim", "1", "number of trailing axes normalized"},
                {"eps", "1e-06", "added to the mean of squares"}},
      .build = [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
        const std::string op = "rmsnorm";
        RETURN_IF_ERROR(ExpectInputs(args, op, 2));
        ASSIGN_OR_RETURN(int64_t k, IntAttr(args, op, "normalized_ndim", 1));
        ASSIGN_OR_RETURN(double eps, FloatAttr(args, op, "eps", 1e-6));
        ASSIGN_OR_RETURN(Tensor x, OpInput(op, "X", args.shapes[0], args.dtype));
        ASSIGN_OR_RETURN(Tensor gamma, OpInput(op, "gamma", args.shapes[1], args.dtype));
        RETURN_IF_ERROR(CheckNormArgs(op, x, k, eps));
        ASSIGN_OR_RETURN(Tensor y, RmsNorm(x, gamma, static_cast<int>(k), eps));
        return ComputeDAG::Create({y});
      },
  });
}

}  // namespace ops_internal
}  // namespace tilesearch::ir
