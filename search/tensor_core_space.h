// The search space of the tensor_core step (schedule/step.h): which mma kinds a matmul-like stage
// may use, random configurations for annotation, and one-decision edits for mutation. The
// decisions are MetaSchedule's MultiLevelTilingTensorCore ones (warps per block, warp tile in
// fragments, k depth per stage) plus the pipeline depth, the shared-row padding, the block
// raster group and split-K (k ranges of at least 4 tiles each).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "schedule/matmul_like.h"
#include "schedule/state.h"
#include "schedule/step.h"

namespace tilesearch::search {

/// Whether `steps` (a state's or a record's) hold a tensor_core step.
bool HasTensorCoreStep(const std::vector<schedule::Step>& steps);
/// Whether `s` computes some stage with a tensor_core step.
bool HasTensorCoreStep(const schedule::State& s);

/// The mma kinds (ir::MmaKindName) that can compute `mm` exactly enough: f16 for float16
/// operands, bf16 for bfloat16, tf32x3 for float32 (and tf32 when `allow_tf32`). Empty when the
/// operand types differ or none fits.
std::vector<std::string> TensorCoreKinds(const schedule::MatmulLike& mm, bool allow_tf32);

/// Whether `t` fits `target`: threads per block, shared memory (with opt-in) and at most 128
/// accumulator registers per thread; wgmma steps also need sm_90 and f16 / bf16.
bool TensorCoreStepFits(const schedule::TensorCoreStep& t, const Target& target);

/// `base` with every decision but the stage, kind and epilogue drawn uniformly from the space
/// (tiles no larger than the problem needs, fitting `target`; a few redraws, then the smallest
/// mma.sync configuration). On sm_90, f16 / bf16 steps are wgmma tilings three times in four,
/// three in four draws repack the operands where MatmulLike::repackable or (wgmma tf32x3 tilings,
/// whose repack kernels then split the values) MatmulLike::repack_plannable, three in four wgmma
/// draws fill by TMA where TmaOperands and the operands are placeholders of `s` with rows of whole
/// 16-byte chunks, one in four TMA draws adds a producer warpgroup, half of those (without
/// split_k) make the blocks persistent, and half of the persistent ones with one warpgroup tile
/// per block tile give the block two ping-pong consumers (TensorCoreStep::pingpong); one in
/// eight TMA draws pairs its blocks in clusters with multicast B tiles where MulticastFits. `s` is
/// the state the step applies to. Errors: the stage is not matmul-like.
absl::StatusOr<schedule::TensorCoreStep> SampleTensorCoreStep(schedule::TensorCoreStep base,
                                                              const schedule::State& s,
                                                              const Target& target,
                                                              std::mt19937_64& rng);

/// The decisions of a tensor_core step: warp tile rows, warp tile columns, warps along m, warps
/// along n, k depth, pipeline depth, padding, split-K, raster group, on Hopper the instruction
/// (mma.sync by warps or wgmma by warpgroups, whose tiles then count warpgroups), and whether the
/// operands are repacked (where MatmulLike::repackable, or on wgmma tf32x3 where the operands
/// repack at all), on wgmma whether TMA fills the operand
/// tiles (where TmaOperands), with TMA whether a producer warpgroup issues the fills
/// (TensorCoreStep::warp_specialized), with it whether the blocks are persistent
/// (TensorCoreStep::persistent), with those and one warpgroup tile per block tile whether
/// two consumers take the tiles in turn (TensorCoreStep::pingpong), and where MulticastFits
/// whether the blocks run in clusters of two sharing B's tiles (TensorCoreStep::multicast), and
/// with persistent blocks (no ping-pong, no multicast) whether the last waves' k tiles are split
/// between the blocks (TensorCoreStep::stream_k).
inline constexpr int kTensorCoreDecisions = 17;

/// Whether stream-k (TensorCoreStep::stream_k) would split anything for `t`'s persistent grid on
/// `target` (schedule::PlanStreamKSplit): more block tiles (batches included) than
/// multiprocessors, not a multiple of them, and some block's range starting inside a tile.
bool StreamKSplits(const schedule::TensorCoreStep& t, const schedule::MatmulLike& mm,
                   const Target& target);

/// Whether `t` may pair its blocks in clusters with multicast B tiles (TensorCoreStep::multicast):
/// TMA fills, no ping-pong consumers, no split_k, and an even number of block tile rows.
bool MulticastFits(const schedule::TensorCoreStep& t, const schedule::MatmulLike& mm);

/// Whether TMA may fill `t`'s operand tiles (TensorCoreStep::tma): a wgmma tiling of f16 / bf16,
/// not repacked, whose operands are plain loads (schedule::PlainOperandLoad) over one m axis, one
/// n axis and one k axis, of placeholders of `s` with rows of whole 16-byte chunks (a tensor
/// map's strides). The lowering decides the rest and refuses the step otherwise.
bool TmaOperands(const schedule::TensorCoreStep& t, const schedule::MatmulLike& mm,
                 const schedule::State& s);

/// `t` with decision `decision` (0 .. kTensorCoreDecisions - 1, in the order above) set to each
/// other value of its candidates that still fits `target` and the problem; empty for a decision
/// out of range. `s`: the state the step applies to (whether TMA applies).
std::vector<schedule::TensorCoreStep> TensorCoreStepVariants(const schedule::TensorCoreStep& t,
                                                             const schedule::MatmulLike& mm,
                                                             const schedule::State& s,
                                                             const Target& target, int decision);

/// Changes one decision of `t` (drawn uniformly) to another value of its candidates that still
/// fits; false when the drawn decision has no other value that fits.
bool MutateTensorCoreStep(schedule::TensorCoreStep& t, const schedule::MatmulLike& mm,
                          const schedule::State& s, const Target& target, std::mt19937_64& rng);

}  // namespace tilesearch::search
