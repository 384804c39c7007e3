// Reductions over a set of axes.
#include "ir/ops/reduce.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ops/layout.h"
#include "ir/ops/op_checks.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "reduce_sum";
    case ReduceOp::kMean:
      return "reduce_mean";
    case ReduceOp::kMax:
      return "reduce_max";
    case ReduceOp::kMin:
      return "reduce_min";
  }
  return "?";
}

absl::StatusOr<Tensor> ReduceAxes(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes,
                                  bool keepdim, const std::string& name) {
  const std::string op_name = ReduceOpName(op);
  const std::string stage = name.empty() ? op_name : name;
  if (op_name == "?") {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce: unknown reduce op ", static_cast<int>(op)));
  }
  RETURN_IF_ERROR(ops_internal::CheckDefined(op_name, "X", x));
  const int rank = x.ndim();
  if (IsBool(x.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op_name, ": dtype bool of '", x.name(), "' is not numeric"));
  }
  if (op == ReduceOp::kMean) RETURN_IF_ERROR(RequireFloat(op_name, x));

  std::vector<int> reduced;
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) reduced.push_back(d);
  } else {
    ASSIGN_OR_RETURN(reduced, NormalizeAxes(op_name, axes, rank));
  }
  std::vector<bool> is_reduced(rank, false);
  std::vector<int64_t> reduce_shape;
  int64_t count = 1;
  for (int d : reduced) {
    is_reduced[d] = true;
    reduce_shape.push_back(x.shape()[d]);
    count *= x.shape()[d];
  }
  // Output dimension of each kept input dimension (and of every input dimension under keepdim).
  std::vector<int64_t> out_shape;
  std::vector<int> out_dim(rank, -1);
  for (int d = 0; d < rank; ++d) {
    if (keepdim) {
      out_dim[d] = d;
      out_shape.push_back(is_reduced[d] ? 1 : x.shape()[d]);
    } else if (!is_reduced[d]) {
      out_dim[d] = static_cast<int>(out_shape.size());
      out_shape.push_back(x.shape()[d]);
    }
  }
  if (out_shape.empty()) out_shape.push_back(1);

  auto body = [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
    std::vector<Expr> index;
    int k = 0;
    for (int d = 0; d < rank; ++d) index.push_back(is_reduced[d] ? r[k++] : i[out_dim[d]]);
    return x(index);
  };
  switch (op) {
    case ReduceOp::kSum:
      return ops_internal::AccumulatingReduce(stage, out_shape, ReduceKind::kSum, reduce_shape,
                                              body, x.dtype(), TagOnly(op_name));
    case ReduceOp::kMax:
      return Reduce(stage, out_shape, ReduceKind::kMax, reduce_shape, body, Expr(),
                    TagOnly(op_name));
    case ReduceOp::kMin:
      return Reduce(stage, out_shape, ReduceKind::kMin, reduce_shape, body, Expr(),
                    TagOnly(op_name));
    case ReduceOp::kMean: {
      // The sum stays in the accumulation type (float32 for float16 / bfloat16); the division
      // rounds once to the dtype.
      ASSIGN_OR_RETURN(Tensor sum, Reduce(
                                       stage + "_sum", out_shape, ReduceKind::kSum, reduce_shape,
                                       [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                                         return ops_internal::Widen(body(i, r));
                                       },
                                       Expr(), TagOnly("reduce_mean.sum")));
      return Compute(
          stage, out_shape,
          [&](const std::vector<Expr>& i) {
            return ops_internal::Narrow(x.dtype(), sum(i) / static_cast<double>(count));
          },
          TagOnly("reduce_mean.div"));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("reduce: unknown reduce op ", static_cast<int>(op)));
}

absl::StatusOr<ComputeDAG> ReduceDAG(ReduceOp op, const std::vector<int64_t>& shape,
                                     const std::vector<int64_t>& axes, bool keepdim,
                                     ScalarType dtype) {
  ASSIGN_OR_RETURN(Tensor x, OpInput(ReduceOpName(op), "X", shape, dtype));
  ASSIGN_OR_RETURN(Tensor y, ReduceAxes(op, x, axes, keepdim));
  return ComputeDAG::Create({y});
}

namespace ops_internal {

void AppendReduceOps(std::vector<OpInfo>& ops) {
  struct Entry {
    ReduceOp op;
    const char* summary;
  };
  for (const Entry& e :
       {Entry{ReduceOp::kSum, "sum of X over axes (torch.sum)"},
        Entry{ReduceOp::kMean, "mean of X over axes: sum, then divide (torch.mean)"},
        Entry{ReduceOp::kMax, "maximum of X over axes (torch.amax)"},
        Entry{ReduceOp::kMin, "minimum of X over axes (torch.amin)"}}) {
    const ReduceOp op = e.op;
    const std::string name = ReduceOpName(op);
    ops.push_back(OpInfo{
        .name = name,
        .summary = e.summary,
        .inputs = {"X[d0,...,dn-1]"},
        .attrs = {{"axes", "all", "comma-separated axes, negative from the end, or all"},
                  {"keepdim", "false", "keep reduced axes with extent 1"}},
        .build = [op, name](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
          RETURN_IF_ERROR(ExpectInputs(args, name, 1));
          // "all" (the default) reduces every axis, as an empty list does.
          std::vector<int64_t> axes;
          absl::StatusOr<std::string> text = StringAttr(args, name, "axes", "all");
          RETURN_IF_ERROR(text.status());
          if (*text != "all") {
            ASSIGN_OR_RETURN(axes, IntListAttr(args, name, "axes", {}));
          }
          ASSIGN_OR_RETURN(bool keepdim, BoolAttr(args, name, "keepdim", false));
          return ReduceDAG(op, args.shapes[0], axes, keepdim, args.dtype);
        },
    });
  }
}

}  // namespace ops_internal
}  // namespace tilesearch::ir
