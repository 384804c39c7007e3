// The kernel of a stage computed by a tensor_core step (schedule/step.h): block tiles on
// blockIdx, warp tiles on threadIdx.y, lanes on threadIdx.x; operand tiles staged in shared memory
// (a ring of `pipeline` buffers, filled by cp.async where the operands are plain loads of whole
// tiles); ir::WarpMmaNode updates of per-lane accumulators; the epilogue applied to the
// accumulators and stored. Internal to Lower (schedule/lower.cc).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/expr.h"
#include "ir/stmt.h"
#include "ir/tensor.h"
#include "schedule/step.h"

namespace tilesearch::schedule::lower_internal {

/// What the lowering knows about one tensor_core stage.
struct TensorCoreKernel {
  const ir::TensorNode* op = nullptr;
  /// The stage's body with inlined producers substituted.
  ir::Expr body;
  TensorCoreStep config;
  /// The buffer the kernel stores (the last epilogue stage, or the stage itself); it has the
  /// stage's shape.
  std::string out_buffer;
  /// out_buffer's element type.
  ir::ScalarType out_dtype = ir::ScalarType::kFloat32;
  /// The stored value for accumulator value `acc` (float32) at the stage's axis values `axes`.
  std::function<absl::StatusOr<ir::Expr>(const ir::Expr& acc, const std::vector<ir::Expr>& axes)>
      epilogue;
  /// The shape of a tensor the stage reads (for `repack`), nullopt for an unknown name.
  std::function<std::optional<std::vector<int64_t>>(const std::string&)> buffer_shape;
  /// Whether a buffer the stage reads is a parameter of the nest (a TMA tensor map's source).
  std::function<bool(const std::string&)> is_param;
  /// A variable name not used elsewhere in the nest, derived from the argument.
  std::function<std::string(const std::string&)> fresh;
};

/// The kernels of the stage, in launch order (one; two with split_k: the partial sums, then their
/// reduction with the epilogue), and the global workspaces between them.
struct TensorCoreKernels {
  std::vector<ir::Stmt> kernels;
  std::vector<ir::BufferDecl> workspaces;
};

/// Whether `target` runs the kernels' mma.sync shapes: a cuda target of sm_80 or later.
bool TargetHasMmaSync(const Target& target);

/// The kernels (blockIdx loop nests). Errors: kFailedPrecondition "invalid_schedule: ..." for a
/// non-GPU target, a stage that is not matmul-like, or operands the kind cannot read; the
/// target's limits (threads, shared memory) are checked on the result by the caller.
absl::StatusOr<TensorCoreKernels> BuildTensorCoreKernel(const TensorCoreKernel& k,
                                                        const Target& target);

}  // namespace tilesearch::schedule::lower_internal
