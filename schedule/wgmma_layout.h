// Where a wgmma tensor_core step (TensorCoreStep::warpgroup) keeps its operand tiles in shared
// memory: PTX's swizzled canonical layouts (ir::WgmmaLayout) chosen from the tiling and the
// operands' contiguous direction. One rule for the lowering (schedule/tensor_core_lower.cc), which
// builds the kernel on these layouts, and the search space (search/tensor_core_space.cc), which
// draws only tilings the lowering takes.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/stmt.h"
#include "schedule/matmul_like.h"
#include "schedule/step.h"

namespace tilesearch::schedule {

/// Whether `target` runs wgmma: sm_90 or sm_90a (modules that use it are compiled for sm_90a).
bool TargetHasWgmma(const Target& target);

/// Whether `t` is a wgmma tiling of a TF32 kind (tf32, tf32x3) whose float32 tiles may be copied
/// from their ring into TF32 operand tiles (rounded, or split into big and small parts) in the
/// K-major layout, the only one wgmma reads TF32 in through descriptors. Not with `repack`: tf32's
/// repacked tiles are K-major in the ring already and are read as they are, and tf32x3's repack
/// kernels store both parts, each read from a ring of its own (twice the ring). One-pass tf32
/// without repack copies at most its B (A goes through registers; a K-major B is read as it is):
/// this answer is then an upper bound, for the shared-memory estimate.
bool WgmmaSplitsTf32(const TensorCoreStep& t);

/// The shared layouts of the A and B tiles of one pipeline stage.
struct WgmmaLayouts {
  ir::WgmmaLayout a;
  ir::WgmmaLayout b;
};

/// The layouts of step `t` (a warpgroup tiling) on the matmul-like stage `mm`: a k-contiguous
/// operand gets the E·block_k-byte swizzle (K-major rows of block_k elements of E bytes), an
/// m/n-contiguous one the 128-byte swizzle in atoms of 64 rows (MN-major); TF32 tiles and
/// repacked operands (TensorCoreStep::repack) are always K-major. Every tile origin (each pipeline
/// slot, each warpgroup) must fall on the swizzle's 1024-byte period, as wgmma's descriptors here
/// have a zero base offset. Errors: kFailedPrecondition naming the operand when an m/n-contiguous
/// tile is not whole 64-row atoms or an origin is off the period.
absl::StatusOr<WgmmaLayouts> PlanWgmmaLayouts(const TensorCoreStep& t, const MatmulLike& mm);

}  // namespace tilesearch::schedule
