// Where a wgmma tensor_core step (TensorCoreStep::warpgroup) keeps its operand tiles in shared
// memory: PTX's swizzled canonical layouts (ir::WgmmaLayout) chosen from the tiling and the
// operands' contiguous direction. One rule for the lowering (schedule/tensor_core_lower.cc), which
// builds the kernel on these layouts, and the search space (search/tensor_core_space.cc), which
// draws only tilings the lowering takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

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

/// float32 accumulators a consumer thread of warpgroup tiling `t` holds: warp_m · warp_n / 128,
/// twice that for tf32x3 (its tile accumulator beside the accumulator).
int64_t WgmmaAccumulators(const TensorCoreStep& t);

/// Threads of a block of warpgroup tiling `t`: 128 per consumer warpgroup (two per block tile
/// with `pingpong`), plus the producer warpgroup's 128 with `warp_specialized`.
int64_t WgmmaBlockThreads(const TensorCoreStep& t);

/// Register reallocation (ir::SetMaxNRegNode) of a warp-specialized warpgroup tiling with two or
/// more consumer warpgroups whose accumulators (plus kWgmmaRegisterOverhead) already keep a
/// second block off the multiprocessor: {the producer's per-thread limit, the consumers'},
/// CUTLASS's 40 / 232 at 384 threads; nullopt for other tilings. The kernel is compiled for one
/// block per multiprocessor (PTX .minnctapersm 1), so ptxas gives every thread at launch the most
/// the block size allows (65536 / threads in granules of 8, at most 255), the block's pool; the
/// consumers' limit is what the pool holds once the producer has returned its part, so their
/// increase never waits forever.
std::optional<std::pair<int64_t, int64_t>> WsRegisterSplit(const TensorCoreStep& t);

/// Registers a consumer thread needs besides its accumulators (addresses, counters, descriptors):
/// the 64x256 tiles of a 384-thread warp-specialized block use 164 of 168 before reallocation,
/// and three such consumers at 512 threads (152 each) made ptxas ask for 154.
inline constexpr int64_t kWgmmaRegisterOverhead = 32;

/// Registers a consumer thread of warpgroup tiling `t` may hold: its share of the register file at
/// the block's size, or the consumers' limit under register reallocation (WsRegisterSplit).
int64_t WgmmaThreadRegisters(const TensorCoreStep& t);

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
