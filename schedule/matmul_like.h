// Recognizing matmul-like stages: reductions that read as a (batched) GEMM
// C[batch, m, n] = Σ_k A(batch, m, k) · B(batch, n, k), where each output and reduce axis plays one
// role. Matmul in every transpose layout, dense, batch_matmul, attention's QKᵀ and convolutions
// (implicit GEMM: m = the output pixels, n = the output channels, k = input channels × window) all
// qualify. This is what the tensor_core step and the tensor-core sketch rule apply to (the role
// analysis of TVM MetaSchedule's MultiLevelTilingTensorCore, by access pattern instead of a
// registered intrinsic description).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/expr.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace tilesearch::schedule {

/// The GEMM roles of a reduction stage. Axis lists index op.axes (output axes) in their order;
/// every reduce axis is a k axis (op.reduce_axes order, the last one fastest).
struct MatmulLike {
  std::vector<int> m_axes;      // read by the first factor only
  std::vector<int> n_axes;      // read by the second factor only
  std::vector<int> batch_axes;  // read by both factors, or by neither (broadcast)
  int64_t m = 1;                // products of the role's extents
  int64_t n = 1;
  int64_t k = 1;
  int64_t batch = 1;
  /// The two factors of the body (over op's axis and reduce-axis variables): `a` reads the m
  /// axes, `b` the n axes. Each is a Load, a Cast of one, or a Select of one with 0.
  ir::Expr a;
  ir::Expr b;
  /// Element type of the tensors each factor loads (float16 for float32(A[i, k]) of a float16 A).
  ir::ScalarType a_type = ir::ScalarType::kFloat32;
  ir::ScalarType b_type = ir::ScalarType::kFloat32;
  /// Whether the last index of the factor's load uses the innermost k axis (k is the contiguous
  /// direction in memory): decides the shared-memory tile layout.
  bool a_k_inner = true;
  bool b_k_inner = true;
  /// Whether the tensor_core step's `repack` applies and changes something: the operands repack
  /// (schedule/operand_repack.h) and one of them is not a load indexed by bare axis variables (a
  /// convolution's window).
  bool repackable = false;
  /// Whether the operands repack at all (PlanOperandRepack succeeds), changing something or not:
  /// tf32x3 on wgmma repacks plain operands too, for its split parts (RepackValues::kTf32Split).
  /// Planned only where it can matter (a non-plain operand, or float32 operands); false elsewhere.
  bool repack_plannable = false;
};

/// The GEMM roles of `op` with its body `body` (the stage's body with inlined producers
/// substituted; op.body when nothing is inlined). Errors (kInvalidArgument, naming the stage and
/// what does not fit): not a sum reduction, a body that is not a product of two operand factors
/// (a Load, a Cast of one, a Select of one with 0), a reduce axis missing from a factor, no m or
/// no n axis (gemv-like: nothing for a tensor core to tile), factors loading mixed element types.
absl::StatusOr<MatmulLike> AnalyzeMatmulLike(const ir::TensorNode& op, const ir::Expr& body);

/// The Load of an operand factor that is a plain (optionally cast) load whose indices are bare
/// axis variables (what a tile copies whole); nullptr otherwise (a padded or strided window).
const ir::LoadNode* PlainOperandLoad(const ir::Expr& factor);

}  // namespace tilesearch::schedule
