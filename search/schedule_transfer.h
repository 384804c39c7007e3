// Transfer of a schedule between shapes of one operator: a step list measured on one workload
// replayed on another of the same structure (same operator, dtype and attributes, other extents),
// with every split's tile lengths adapted to the new iterator extents. The candidates a model
// ranks when it predicts a schedule for a shape that was never tuned (search/predict.h), as
// TVM's and Triton's users ask for warm starts from known-good configurations of nearby shapes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"
#include "schedule/step.h"

namespace tilesearch::search {

/// Tile lengths of one split adapted to a new extent. `lengths` are the split's given lengths
/// (outermost first); with `inner_to_outer` they are the inner parts and the outermost part is
/// derived (ceil(extent / product)), otherwise they are the outer parts and the innermost is
/// derived. Walking from the part farthest from the derived one (the innermost with
/// inner_to_outer: the vector, unroll and thread levels that decide a kernel's structure), each
/// length is kept while it is at most what is left of the extent and cut to what is left
/// otherwise; what is left is then ceil(left / length). So lengths never exceed the extent, a
/// shape that holds the old tiles keeps them exactly, and a non-divisible extent keeps the tiles
/// (the lowering guards the remainder). Unfilled lengths (nullopt) stay unfilled.
std::vector<std::optional<int64_t>> AdaptSplitLengths(
    const std::vector<std::optional<int64_t>>& lengths, bool inner_to_outer, int64_t extent);

/// Replays `steps` on `dag`'s initial state step by step; before each SplitStep of a stage that
/// is not attached by compute_at, its recorded extent becomes the iterator's extent in the state
/// reached so far and its lengths AdaptSplitLengths of it (an attached stage's splits are
/// replayed as recorded: their extents follow the consumer's tiling). Other steps are replayed as
/// they are (tensor_core tiles included: the tensor-core lowering guards partial tiles). The
/// state holds the adapted steps. Errors (kInvalidArgument): "step N: <ApplyStep's error>" when a
/// step does not apply to this DAG (another structure: a different operator or attributes), a
/// SplitStep naming a stage or iterator the state does not have.
[[nodiscard]] absl::StatusOr<schedule::State> TransferSteps(
    const std::vector<schedule::Step>& steps, const ir::ComputeDAG& dag);

/// Grids of fewer blocks than this many times the target's SM count get halved-tile variants
/// (TransferVariants): below one block per SM halving only adds SMs. Not more: in the held-out
/// logs on the H200 (bench/results/h200-2026-12-03-heldout-study.md) the tuned bests of the
/// conv2d and the odd fp32 matmul ran 98 and 108 blocks of 128 x 128, and with 4 waves the
/// shipped model picked a halved conv2d tile that had run at 0.56x the best (the transferred
/// copy: 0.73x).
inline constexpr int64_t kFewWaves = 1;

/// Doubled-tile variants (TransferVariants) are kept while their grid has at least this many
/// blocks per SM: a smaller grid leaves SMs idle that the larger tile's reuse does not repay.
/// On the H200 held-out study's logs the tuned bests of the bf16 matmul 2500x1800x3000 and the
/// conv2d 16x128x28x28 ran twice the transferred block tile on 240 and 98 blocks (1.8 and 0.74
/// per SM), at 1.86x and 1.37x the transferred tiles' speed; a bound of 1 per SM would leave out
/// the conv2d's.
inline constexpr double kEnlargedBlocksPerSm = 0.5;

/// Variants of a transferred schedule for the new extents, ranked beside the transferred copy:
/// the copy keeps the source shape's k-loop and grid decisions, which can misfit the new one
/// (a 64x512x1024 batch matmul's split-K 8 and 5-stage pipeline left a 32x384x256 one 1 k tile
/// per block, at 0.31x its tuned best on the H200). For the state's tensor_core step, each of
///  - its epilogue extended to the longest chain of elementwise consumers that applies (a step
///    from a relative without the new DAG's bias or activation fuses them);
///  - split_k lowered to the largest of 1, 2, 4, 8, 16 below it that keeps at least 4 k tiles per
///    range (the search space's own rule, search/tensor_core_space.h), and split_k 1;
///  - each with the pipeline depth capped at a quarter of the k tiles per range, at least 2 (a
///    deeper ring than the k loop spends each block in prologue and epilogue);
///  - when those grids have fewer than kFewWaves x target.sm_count blocks (batch x m tiles x n
///    tiles x split_k), the block tile halved along m, along n and along both (the warp tile cut
///    to the halved side where the block no longer holds it);
///  - when the grid of a split_k 1 one has blocks to spare, its block tile doubled along the
///    shorter side (both sides of a square tile; a wider warp tile where the space allows it,
///    else one more warp per side; the pipeline lowered to what shared memory holds), each also
///    with the k tile doubled, kept where the doubled grid has fewer blocks and at least
///    kEnlargedBlocksPerSm x target.sm_count of them (a source tuned on a smaller shape brings
///    tiles sized for its few waves);
/// is returned when it differs from the step, fits the target (TensorCoreStepFits, and the wgmma
/// layouts for warpgroup steps) and `state`'s steps with it replay on `dag`; the others are
/// dropped. Distinct, in the order above. Empty for a state without a tensor_core step, or whose
/// step's stage is not matmul-like. SIMT schedules get no variants (their pipeline pragma is at
/// most a double buffer, and their block tiles span several split steps).
std::vector<schedule::State> TransferVariants(const schedule::State& state,
                                              const ir::ComputeDAG& dag, const Target& target);

}  // namespace tilesearch::search
