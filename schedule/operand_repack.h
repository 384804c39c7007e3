// Repacking the operands of a matmul-like stage for the tensor_core step's `repack` decision: each
// operand tensor is copied, by a kernel of its own before the GEMM, into a global workspace whose
// innermost dimension is the one a chosen reduce axis (the "inner k axis") indexes, with the
// operand's zero padding written into the workspace. The GEMM then reads both operands k-contiguous
// and without padding conditions, so its shared-memory fill takes 16-byte cp.async copies where
// the un-repacked operand needed an element-by-element gather.
//
// For a convolution in NCHW (x[n, c, oh·s + kh·d − p, ow·s + kw·d − p] · w[k, c, kh, kw]) this is
// the NCHW → padded NHWC transform of the input and KCRS → KRSC of the weights that cuDNN and
// CUTLASS run before an implicit-GEMM convolution on tensor cores (CUTLASS's implicit GEMM reads
// NHWC with channels innermost for the same reason: whole 16-byte vectors along k).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/expr.h"
#include "ir/stmt.h"
#include "ir/tensor.h"
#include "schedule/matmul_like.h"

namespace tilesearch::schedule {

/// One operand's repack: workspace dimension i holds source dimension order[i]; a source index
/// value v of dimension d sits at workspace index v + offset[d].
struct RepackedOperand {
  std::string source;                               // the tensor the factor loads
  ir::ScalarType dtype = ir::ScalarType::kFloat32;  // its element type (the workspace's)
  std::vector<int64_t> source_shape;
  std::vector<ir::Expr> indices;  // the factor's load indices (over the stage's axis variables)
  std::vector<int> order;         // source dimension of each workspace dimension
  std::vector<int64_t> offset;    // per source dimension: −(the smallest index read)
  std::vector<int64_t> shape;     // workspace shape, in workspace dimension order
  int64_t Elements() const;
};

/// The repack of both operands of a matmul-like stage.
struct OperandRepack {
  RepackedOperand a;
  RepackedOperand b;
  /// Position in op.reduce_axes of the inner k axis: the GEMM's k runs over the other reduce axes
  /// in their order, then this one fastest.
  int inner_k = 0;
};

/// The repack of `mm` (the roles of stage `op`). The inner k axis is a reduce axis that both
/// factors' loads use as one whole index (the input channel of a convolution); among several, the
/// one whose extent is a multiple of 8, then of 4, then the largest. Each factor must be a load or
/// a cast of one, optionally under Select(cond, load, 0) where cond is a conjunction of bounds
/// tests `i >= 0` / `i < extent` of the load's own indices (a padded convolution's window);
/// every index must be affine enough for interval bounds over the axes' ranges, and reads outside
/// the tensor must be exactly the ones cond excludes. Errors (kInvalidArgument naming the stage
/// and the factor): no such reduce axis, a factor of another form, a condition that is not a
/// bounds test of its load, an unbounded index, a read outside the tensor that no condition
/// excludes, a workspace of 2^31 elements or more, a tensor of unknown shape. A load's tensor
/// shape is its producer's, else `shape_of(buffer)` where given (the lowering's bodies, whose
/// inlined loads carry no producer).
using BufferShapeFn = std::function<std::optional<std::vector<int64_t>>(const std::string&)>;
absl::StatusOr<OperandRepack> PlanOperandRepack(const ir::TensorNode& op, const MatmulLike& mm,
                                                const BufferShapeFn& shape_of = nullptr);

/// The factor that reads operand `r` from workspace `workspace`: a plain load (of r.dtype, no
/// cast, no condition) over the stage's axis variables.
ir::Expr RepackedFactor(const RepackedOperand& r, const std::string& workspace);

/// What a repack kernel stores for each source value x.
enum class RepackValues {
  kAsIs,
  /// x rounded to TF32 (round to nearest, as cvt.rna): a float32 operand of one-pass TF32 MMAs,
  /// so that tensor cores reading the workspace's values as they are see exact TF32 operands.
  kTf32Rounded,
  /// 3xTF32's two parts (the tensor_core step's tf32x3 with repack on wgmma): big = x truncated
  /// to TF32 into the workspace, small = (x − big) truncated into the second workspace (x − big
  /// is exact in float32), the same parts the in-kernel split stores; the GEMM then reads four
  /// exact TF32 tiles per k step and copies nothing.
  kTf32Split,
};

/// The kernel that fills `workspace` from r.source, zero where the source index is outside the
/// tensor. Where the source's innermost dimension moves (NCHW -> NHWC), a shared-memory tiled
/// transpose (64 x 32 tiles, 32 x 8 threads, loads and stores both coalesced); else one thread
/// per workspace element along its innermost dimension. `values` says what is stored
/// (RepackValues); kTf32Split also writes `small_workspace` (same shape). `fresh` makes unused
/// names.
ir::Stmt RepackKernel(const RepackedOperand& r, const std::string& workspace,
                      const std::function<std::string(const std::string&)>& fresh,
                      RepackValues values = RepackValues::kAsIs,
                      const std::string& small_workspace = "");

}  // namespace tilesearch::schedule
