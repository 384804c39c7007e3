// Transpose and the shape / axis helpers shared by the operator families.
#include "ir/ops/layout.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {

std::string ShapeToString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<int> NormalizeAxis(const std::string& op, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": axis ", axis, " out of range for rank ", rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

absl::StatusOr<std::vector<int>> NormalizeAxes(const std::string& op,
                                               const std::vector<int64_t>& axes, int rank) {
  std::vector<int> normalized;
  for (int64_t axis : axes) {
    ASSIGN_OR_RETURN(int a, NormalizeAxis(op, axis, rank));
    if (std::find(normalized.begin(), normalized.end(), a) != normalized.end()) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", a, " given twice in ",
                                                     ShapeToString(axes), " for rank ", rank));
    }
    normalized.push_back(a);
  }
  std::sort(normalized.begin(), normalized.end());
  return normalized;
}

absl::StatusOr<Tensor> OpInput(const std::string& op, const std::string& name,
                               const std::vector<int64_t>& shape, ScalarType dtype) {
  if (shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": input ", name, " has no dimensions"));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": input ", name, " has extent ", shape[d],
                                                     " in dimension ", d, " (shape ",
                                                     ShapeToString(shape), ")"));
    }
  }
  return Placeholder(name, shape, dtype);
}

absl::Status RequireFloat(const std::string& op, const Tensor& x) {
  if (IsFloat(x.dtype())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": dtype ", TypeName(x.dtype()), " of '",
                                                 x.name(), "' is not a float type"));
}

ComputeOptions TagOnly(std::string tag) {
  ComputeOptions options;
  options.tag = std::move(tag);
  return options;
}

absl::StatusOr<Tensor> Transpose(const Tensor& x, const std::vector<int64_t>& perm,
                                 const std::string& name) {
  if (!x.defined()) return absl::InvalidArgumentError("transpose: X is undefined");
  const int rank = x.ndim();
  std::vector<int> p;
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) p.push_back(d);
  } else {
    bool ok = static_cast<int>(perm.size()) == rank;
    std::vector<bool> seen(rank, false);
    for (size_t d = 0; ok && d < perm.size(); ++d) {
      int64_t a = perm[d] < 0 ? perm[d] + rank : perm[d];
      ok = a >= 0 && a < rank && !seen[a];
      if (ok) {
        seen[a] = true;
        p.push_back(static_cast<int>(a));
      }
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("transpose: perm ", ShapeToString(perm), " is not a permutation of 0..",
                       rank - 1, " (input shape ", ShapeToString(x.shape()), ")"));
    }
  }
  std::vector<int64_t> out_shape;
  for (int d = 0; d < rank; ++d) out_shape.push_back(x.shape()[p[d]]);
  return Compute(
      name, out_shape,
      [&](const std::vector<Expr>& i) {
        std::vector<Expr> j(rank);
        for (int d = 0; d < rank; ++d) j[p[d]] = i[d];
        return x(j);
      },
      TagOnly("transpose"));
}

absl::StatusOr<ComputeDAG> TransposeDAG(const std::vector<int64_t>& shape,
                                        const std::vector<int64_t>& perm, ScalarType dtype) {
  ASSIGN_OR_RETURN(Tensor x, OpInput("transpose", "X", shape, dtype));
  ASSIGN_OR_RETURN(Tensor y, Transpose(x, perm));
  return ComputeDAG::Create({y});
}

namespace ops_internal {

void AppendLayoutOps(std::vector<OpInfo>& ops) {
  ops.push_back(OpInfo{
      .name = "transpose",
      .summary = "permute the axes of X (PyTorch x.permute(perm))",
      .inputs = {"X[d0,...,dn-1]"},
      .attrs = {{"perm", "reverse", "comma-separated permutation of 0..n-1, or reverse"}},
      .build = [](const OpArgs& args) -> absl::StatusOr<ComputeDAG> {
        RETURN_IF_ERROR(ExpectInputs(args, "transpose", 1));
        // "reverse" (the default) reverses the axes, as an empty list does.
        std::vector<int64_t> perm;
        absl::StatusOr<std::string> text = StringAttr(args, "transpose", "perm", "reverse");
        RETURN_IF_ERROR(text.status());
        if (*text != "reverse") {
          ASSIGN_OR_RETURN(perm, IntListAttr(args, "transpose", "perm", {}));
        }
        return TransposeDAG(args.shapes[0], perm, args.dtype);
      },
  });
}

}  // namespace ops_internal
}  // namespace tilesearch::ir
