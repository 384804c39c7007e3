// Tensors and stages: placeholder(shape, dtype), compute(shape, fn(indices)) and reductions.
//
// A Tensor is the output of one stage. A compute stage defines every element by a body expression
// over its axis variables; a reduction stage combines (sum, max, min, prod) a body over its reduce
// axes starting from an init value. Bodies read other tensors through Loads that point at them, so
// the stages reachable from some outputs form a ComputeDAG (ir/compute_dag.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/expr.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// Largest rank of a tensor or reduce domain (Placeholder / Compute / Reduce reject more).
inline constexpr int kMaxRank = 32;
/// Largest element count of a tensor, and of a reduction's iteration domain (output × reduce
/// extents): 2^40. Keeps every element, byte and FLOP count far from int64 overflow.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

/// A loop axis of a stage: its variable's name and its extent (range [0, extent)).
struct IterVar {
  std::string name;
  int64_t extent = 0;
  /// The axis variable as an int64 Var expression.
  Expr var() const { return MakeVar(name); }
};

enum class ReduceKind : uint8_t { kNone, kSum, kMax, kMin, kProd };
const char* ReduceKindName(ReduceKind kind);

/// Identity of a combiner in `t`: 0 for sum, 1 for prod, lowest / highest value for max / min
/// (-inf / +inf for floats).
Expr ReduceIdentity(ReduceKind kind, ScalarType t);
/// Combines an accumulator with a new term: acc + x, max(acc, x), min(acc, x), acc * x.
Expr ReduceCombine(ReduceKind kind, Expr acc, Expr x);

/// One stage. Immutable once built.
struct TensorNode {
  std::string name;
  ScalarType dtype = ScalarType::kFloat32;
  std::vector<int64_t> shape;
  bool is_placeholder = false;
  /// Output axes, one per shape dimension (empty for placeholders).
  std::vector<IterVar> axes;
  /// Reduce axes (empty unless `reduce != kNone`).
  std::vector<IterVar> reduce_axes;
  ReduceKind reduce = ReduceKind::kNone;
  /// Compute: the element value at `axes`. Reduction: the term combined over `reduce_axes`.
  Expr body;
  /// Reduction only: the accumulator's initial value (the combiner's identity unless given).
  Expr init;
  /// The operator that made the stage ("matmul", "conv2d.pad"); informative, not part of the key.
  std::string tag;
};

/// Handle to a stage's output.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const TensorNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const TensorNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const TensorNode>& node() const { return node_; }
  const std::string& name() const { return node_->name; }
  const std::vector<int64_t>& shape() const { return node_->shape; }
  ScalarType dtype() const { return node_->dtype; }
  int ndim() const { return static_cast<int>(node_->shape.size()); }
  int64_t NumElements() const;

  /// A Load of one element (CHECKs that the tensor is defined). The number of indices is not
  /// checked here: Compute / Reduce return kInvalidArgument for a body that indexes a tensor with
  /// the wrong number of indices.
  Expr operator()(const std::vector<Expr>& indices) const;
  template <typename... Args>
  Expr operator()(Args... indices) const {
    return (*this)(std::vector<Expr>{ToIndex(indices)...});
  }

 private:
  static Expr ToIndex(const Expr& e) { return e; }
  static Expr ToIndex(int64_t v) { return IntConst(v); }
  static Expr ToIndex(int v) { return IntConst(v); }
  std::shared_ptr<const TensorNode> node_;
};

/// Names the axes of Compute / Reduce (default i0, i1, ... and r0, r1, ...) and tags the stage.
struct ComputeOptions {
  std::vector<std::string> axis_names;
  std::vector<std::string> reduce_axis_names;
  std::string tag;
};

/// An input tensor. Errors: kInvalidArgument for a name that is not an identifier
/// ([A-Za-z_][A-Za-z0-9_.]*), an unknown dtype, an extent < 1 (message names the tensor and the
/// dimension), a rank above kMaxRank or more than kMaxElements elements.
absl::StatusOr<Tensor> Placeholder(std::string name, std::vector<int64_t> shape,
                                   ScalarType dtype = ScalarType::kFloat32);

using ComputeFn = std::function<Expr(const std::vector<Expr>& axes)>;
using ReduceFn =
    std::function<Expr(const std::vector<Expr>& axes, const std::vector<Expr>& reduce_axes)>;

/// out[axes] = fn(axes); the stage's dtype is the body's type.
/// Errors: kInvalidArgument for an extent < 1, a rank above kMaxRank, more than kMaxElements
/// elements, wrong number of axis names, or a body that reads
/// a tensor with the wrong number of indices or uses a variable that is not an axis.
absl::StatusOr<Tensor> Compute(std::string name, std::vector<int64_t> shape, const ComputeFn& fn,
                               const ComputeOptions& options = {});

/// out[axes] = combine over reduce axes of fn(axes, reduce_axes), starting from `init` (the
/// identity of `kind` when undefined). Errors as Compute, plus kind == kNone or unknown, no reduce
/// axes, and an iteration domain (output and reduce axes) of rank above kMaxRank or more than
/// kMaxElements points.
absl::StatusOr<Tensor> Reduce(std::string name, std::vector<int64_t> shape, ReduceKind kind,
                              std::vector<int64_t> reduce_shape, const ReduceFn& fn,
                              Expr init = Expr(), const ComputeOptions& options = {});

}  // namespace tilesearch::ir
