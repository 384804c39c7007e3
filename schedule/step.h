// Transform steps: a schedule is the initial state of a ComputeDAG plus a list of steps
// (Ansor, OSDI'20, §4; TVM auto_scheduler transform_step.h). Steps are plain data: they are applied
// by ApplyStep (schedule/apply_step.h), printed, and (de)serialized to JSON for tuning logs.
//
// Stage and iterator ids are positions in the State the step is applied to (as in Ansor):
// cache_read and cache_write insert a stage and shift the ids of later stages; split and fuse
// replace iterators in place. Adding a step: declare its struct here, add it to `Step`, and write
// one file schedule/steps/<name>.cc with its Apply / ToJson / FromJson / ToString.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/stmt.h"
#include "nlohmann/json_fwd.hpp"

namespace tilesearch::schedule {

class State;

/// Iterator annotations; the numbers are Ansor's (kept so logs read alike).
enum class IteratorAnnotation : uint8_t {
  kNone = 0,
  kUnroll = 1,
  kVectorize = 2,
  kParallel = 3,
  kVThread = 4,
  kBlockIdxX = 5,
  kThreadIdxX = 6,
  kBlockIdxY = 7,
  kThreadIdxY = 8,
  kBlockIdxZ = 9,
  kThreadIdxZ = 10,
};
/// "none", "unroll", "vectorize", "parallel", "vthread", "blockIdx.x", ..., "threadIdx.z".
const char* AnnotationName(IteratorAnnotation a);
absl::StatusOr<IteratorAnnotation> ParseAnnotation(const std::string& name);

// Every step struct has:
//   absl::StatusOr<State> Apply(const State& s) const;   // errors name the step and the reason
//   nlohmann::json ToJson() const;                       // ["SP", stage, iter, ...]
//   static absl::StatusOr<X> FromJson(const nlohmann::json& j);
//   std::string ToString() const;                        // "split(C, i, [8, 4])"

/// Splits iterator `iter_id` (extent E) into lengths.size() + 1 iterators, as Ansor: with
/// inner_to_outer the result is [rest, l0, ..., ln-1] (ln-1 innermost, rest = ceil(E / prod l)
/// outermost; as in TVM's bound inference each length's extent is tightened to min(l, what is
/// left), so [4, 8] of E = 16 gives extents [1, 2, 8]); otherwise [l0, ..., ln-1, rest] (rest
/// innermost). The split iterator equals Σ part · (product of the lengths inside it). A nullopt
/// length is unfilled (a sketch; Apply fails on it). Non-divisible lengths are allowed: rest is
/// rounded up and a guard keeps the original range.
struct SplitStep {
  int stage_id = 0;
  int iter_id = 0;
  // The iterator's extent when the step was made; 0 = unknown. Checked on replay for stages not
  // attached by compute_at (an attached stage's extents follow its consumer's tiling).
  int64_t extent = 0;
  std::vector<std::optional<int64_t>> lengths;
  bool inner_to_outer = true;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<SplitStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const SplitStep&) const = default;
};

/// Splits like an earlier SplitStep `src_step_id` with `n_split` lengths (n_split + 1 iterators):
/// its first n_split - 1 lengths, then the product of the rest (TVM ExtractSplitLengths; 1 when
/// none is left). 1 <= n_split <= the source's lengths + 1.
struct FollowSplitStep {
  int stage_id = 0;
  int iter_id = 0;
  int src_step_id = 0;
  int n_split = 0;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<FollowSplitStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const FollowSplitStep&) const = default;
};

/// Splits by the product of the lengths at `level` of earlier SplitSteps (cooperative fetching:
/// thread count = the consumer's threadIdx extent); factor_or_nparts picks which side gets it.
struct FollowFusedSplitStep {
  int stage_id = 0;
  int iter_id = 0;
  std::vector<int> src_step_ids;
  int level = 0;
  bool factor_or_nparts = true;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<FollowFusedSplitStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const FollowFusedSplitStep&) const = default;
};

/// Fuses adjacent iterators (consecutive ids) into one of the product extent.
struct FuseStep {
  int stage_id = 0;
  std::vector<int> fused_ids;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<FuseStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const FuseStep&) const = default;
};

/// New loop order: `after_ids` is a permutation of the stage's iterator ids.
struct ReorderStep {
  int stage_id = 0;
  std::vector<int> after_ids;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<ReorderStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const ReorderStep&) const = default;
};

/// Computes stage `stage_id` inside loop `target_iter_id` of a consumer `target_stage_id`, only the
/// region one iteration of that loop needs (bound inference).
struct ComputeAtStep {
  int stage_id = 0;
  int target_stage_id = 0;
  int target_iter_id = 0;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<ComputeAtStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const ComputeAtStep&) const = default;
};

/// Inlines a stage's body into its consumers.
struct ComputeInlineStep {
  int stage_id = 0;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<ComputeInlineStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const ComputeInlineStep&) const = default;
};

/// Moves a stage back to the root (undoes compute_at / inline).
struct ComputeRootStep {
  int stage_id = 0;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<ComputeRootStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const ComputeRootStep&) const = default;
};

/// Adds a stage "<name>.<scope>" copying stage `stage_id` into `scope`, read by `reader_stage_ids`
/// instead of the original; inserted right after the original.
struct CacheReadStep {
  int stage_id = 0;
  ir::MemoryScope scope = ir::MemoryScope::kShared;
  std::vector<int> reader_stage_ids;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<CacheReadStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const CacheReadStep&) const = default;
};

/// Adds a stage "<name>.<scope>" that computes stage `stage_id`'s body into `scope`; the original
/// becomes a copy of it. Inserted before the original (which moves to stage_id + 1).
struct CacheWriteStep {
  int stage_id = 0;
  ir::MemoryScope scope = ir::MemoryScope::kLocal;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<CacheWriteStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const CacheWriteStep&) const = default;
};

/// Annotates an iterator: unroll, vectorize, parallel, vthread, or binds it to blockIdx/threadIdx.
struct AnnotationStep {
  int stage_id = 0;
  int iter_id = 0;
  IteratorAnnotation annotation = IteratorAnnotation::kNone;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<AnnotationStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const AnnotationStep&) const = default;
};

/// A pragma on a stage, one of three kinds (JSON `["PR", stage, iter, "<name>$<value>"]`):
///  - auto_unroll_max_step=N (software_pipeline < 0): loops with at most N iterations in total
///    below the pragma are unrolled;
///  - software_pipeline=0..4 (software_pipeline >= 0; auto_unroll_max_step is then 0 and unused):
///    0 turns off the register-staged prefetch of shared-memory fetches
///    (schedule/software_pipeline.h) for the GPU kernel this stage belongs to; 1 (or no such
///    pragma) keeps it on; 2 double-buffers the shared tiles too (one barrier per iteration);
///    3 and 4: a cp.async pipeline of that many shared buffers (hand schedules only: the search
///    draws 0..2);
///  - min_blocks_per_sm=N (min_blocks_per_sm >= 0; the other two unused), N in 0..32: the GPU
///    kernel this stage belongs to asks ptxas to fit N blocks per SM (CUDA __launch_bounds__'s
///    second argument, PTX .minnctapersm), which caps registers per thread at about
///    65536 / (N × threads per block); 0 = no request. Our addition to Ansor's space: its sketch
///    leaves register allocation to the compiler, which on the H200 gave 8×8-per-thread matmul
///    tiles 200+ registers (one block per SM) when unrolled (bench/NOTES.md).
struct PragmaStep {
  int stage_id = 0;
  int iter_id = 0;
  int64_t auto_unroll_max_step = 0;
  /// -1: an auto_unroll_max_step pragma; 0..4: a software_pipeline pragma with that value.
  int software_pipeline = -1;
  /// -1: not a min_blocks_per_sm pragma; else its value (0..32).
  int min_blocks_per_sm = -1;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<PragmaStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const PragmaStep&) const = default;
};

/// Factorizes a reduction: reduce iterator `iter_id` becomes a space axis of a new stage
/// "<name>.rf" placed at `factor_iter_id` among its axes; the original reduces over it.
struct RfactorStep {
  int stage_id = 0;
  int iter_id = 0;
  int factor_iter_id = 0;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<RfactorStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const RfactorStep&) const = default;
};

/// Pads dimension `iter_id` of the stage's buffer so its stride is ≡ offset (mod factor)
/// (shared-memory bank conflicts).
struct StorageAlignStep {
  int stage_id = 0;
  int iter_id = 0;
  int64_t factor = 0;
  int64_t offset = 0;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<StorageAlignStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const StorageAlignStep&) const = default;
};

/// Computes a matmul-like reduction stage (schedule/matmul_like.h) on tensor cores: the stage's
/// kernel becomes block tiles of block_m × block_n (one thread block each, or walked by persistent
/// blocks, below; blockIdx.x in a
/// swizzled order: `raster` consecutive tile rows per group for L2 reuse, 1 = row-major; the
/// batch axes on blockIdx.y), cut into warp tiles of warp_m × warp_n (one warp each), each computed
/// by m16n8kK mma.sync instructions of `kind` (ir::MmaKind: f16, bf16, tf32, tf32x3) from
/// operand tiles of depth block_k staged in shared memory: `pipeline` buffers deep (1: fill, then
/// compute; 2: the next tile is fetched while the current one is computed; 3–4: cp.async
/// multi-stage ring, used when the operands are plain loads of divisible tiles), each row padded by
/// `pad` elements against bank conflicts. The accumulators stay in registers in the mma
/// C-fragment layout. `epilogue` elementwise consumers of the stage (bias, activation, residual,
/// scale, the output cast — each reading the stage at its own index) are applied to the
/// accumulators before the one store (MetaSchedule's MultiLevelTilingTensorCore: block tile →
/// warp tile → MMA fragment). `split_k` > 1 cuts the k tiles into that many ranges on blockIdx.z
/// (for long k and few output tiles): each block stores its float32 partial sums to a workspace,
/// and a second kernel adds the ranges in a fixed order (deterministic, no atomics) and applies
/// the epilogue.
/// JSON: ["TC", stage, kind, [block_m, block_n, block_k], [warp_m, warp_n], pipeline, pad,
/// raster, epilogue(, split_k)] (split_k written when > 1; a split_k above the number of k
/// tiles runs as one range per tile). Needs sm_80 or later (mma.sync m16n8k16 / tf32). Errors:
/// split_k outside 2..64 in JSON (1..64 in the struct), tile sides outside 8..1024, pad outside
/// 0..64, raster outside 1..4096; the
/// stage is not a root, untransformed, matmul-like reduction; the kind does not match the operands'
/// element type; warp_m not a multiple of 16, warp_n of 8, block_k of K, the block tile not a
/// multiple of the warp tile; pipeline outside 1..8; pad not a multiple of 16 bytes; an epilogue
/// stage that is not an elementwise reader of the one before.
///
/// `warpgroup` (Hopper, sm_90a; JSON: split_k always written, then "wgmma") computes with
/// wgmma.mma_async m64nNk16 instead: each warp tile becomes a warpgroup tile (128 threads) of
/// warp_m × warp_n, warp_m a multiple of 64, warp_n (the instruction's N) a multiple of 8 up to
/// 256, kinds f16 and bf16, both operands read by the tensor cores straight from shared memory
/// in swizzled layouts (ir::WgmmaLayout: k-contiguous operands with a 2·block_k-byte swizzle, so
/// block_k is 16, 32 or 64; m/n-contiguous ones with the 128-byte swizzle, so their tile sides
/// are multiples of 64); pad must be 0.
///
/// `repack` (JSON: split_k and the instruction always written, then "repack") first copies both
/// operands into global workspaces whose innermost dimension is a reduce axis that both read as a
/// whole index, with the operands' zero padding written out (schedule/operand_repack.h: a
/// convolution's NCHW input becomes padded NHWC, its KCRS weights KRSC), one kernel each before
/// the GEMM, which then fills its shared tiles with 16-byte copies along k and no padding tests.
/// With wgmma and kind tf32 the repacked tiles are read by the tensor cores as they are (TF32
/// reads only K-major tiles, which repacked operands always are; the repack kernels round the
/// values to TF32), with no copy into TF32 tiles; with kind tf32x3 the repack kernels store each
/// value's truncated TF32 big part and, in a second workspace, the truncated rest, and the GEMM
/// reads both from rings of their own (the same parts as tf32x3's in-kernel split, no copy).
/// Errors: the operands do not repack (PlanOperandRepack's errors).
///
/// `tma` (JSON: "tma" after the instruction; warpgroup, f16 / bf16, not with repack) fills the
/// swizzled operand tiles with TMA box copies (ir::TmaLoadNode) instead of per-thread cp.async: one
/// thread starts each k tile's boxes, completion is tracked by one mbarrier per ring slot, and the
/// threads wait on it (ir::MbarrierNode) where they waited for their copies. An operand qualifies
/// when it is a plain load of a kernel parameter whose indices are the GEMM's axes, one row axis
/// and one k axis (and batch axes) in the order of the tile's layout; the lowering refuses the
/// step (invalid_schedule) when an operand does not qualify. Out-of-range box elements read as
/// zero, so non-divisible tiles need no guards.
///
/// `warp_specialized` (JSON: "ws" after "tma"; needs `tma`) adds a producer warpgroup to the
/// block: its first thread starts the TMA fills as soon as a ring slot is released, while the
/// warpgroup tiles (the consumers) wait for full slots, compute, and release each slot by
/// arriving on its second mbarrier once their wgmma's on it are complete: no block barrier in
/// the k loop (CUTLASS's warp-specialized Hopper GEMM). Where the block tiles cover a 2-byte
/// output, each consumer warp stages its part through shared memory of its own (16-byte row
/// pieces, synchronized by a per-warp mbarrier) where that fits without costing occupancy;
/// otherwise the consumers store straight from registers. With two or more consumer warpgroups
/// the producer returns registers the consumers take (setmaxnreg, schedule::WsRegisterSplit).
///
/// `persistent` (JSON: "persistent" after "ws"; needs `warp_specialized`, no split_k) launches at
/// most one block per multiprocessor of the target (Target::sm_count) along the tiles, each block
/// walking the block tiles bx, bx + grid, ... in the raster order (a batch's tiles batch-major, no
/// blockIdx.y): the producer's ring runs on
/// from one tile into the next (one use count over the block's k tiles), so the next tile's fills
/// proceed while the consumers store the last tile's accumulators (CUTLASS's persistent
/// warp-specialized kernels with their static tile scheduler).
///
/// `stream_k` (JSON: "streamk" after "persistent"; needs `persistent`, no `pingpong`, no
/// `multicast`) balances the last waves of a persistent grid: where the tiles are more than the
/// grid and not a multiple of it, and a block range would start inside a tile (not with one k
/// tile per tile), all but the last one to two waves' worth of tiles are walked whole as above, and
/// the k tiles of the rest are split evenly between the blocks as contiguous ranges of (tile, k
/// tile), so that every block ends at the same k step instead of a part of the grid computing
/// one more tile than the rest. A tile that two blocks share is stored by both, as float32
/// partial sums, to a workspace; a second kernel adds its two parts in k order and applies the
/// epilogue. Stream-K (Osama et al., "Stream-K: Work-centric Parallel Decomposition for Dense
/// Matrix-Matrix Multiplication on the GPU", PPoPP 2023), in its data-parallel + stream-K hybrid
/// form, with the fixup in a second kernel rather than by waiting blocks, so that no block
/// depends on another while it runs.
///
/// `pingpong` (JSON: "pingpong" after "persistent"; needs `persistent` and one warpgroup tile
/// per block tile, warp_m = block_m and warp_n = block_n) gives the block two consumer
/// warpgroups that take the block's tiles in turn (tiles 0, 2, 4, ... and 1, 3, 5, ...), each
/// computing a whole tile: one stores its accumulators while the other's wgmma's run (CUTLASS's
/// ping-pong warp-specialized kernel). Each ring slot is released by the one warpgroup that read
/// it.
///
/// `multicast` (JSON: "multicast" last; needs `tma`, no `pingpong`, no split_k) launches the
/// blocks in clusters of two along m (sm_90 thread block clusters: blocks 2p and 2p + 1 take the
/// tile rows 2r and 2r + 1 of the same tile column, the pairs in the raster order; persistent
/// pairs walk paired tiles over an even grid; the tile rows must be even in number): the pair
/// shares B's k tiles, so B's boxes are split between the two blocks and each is copied once for
/// both (TMA multicast), halving B's L2 reads; a slot is refilled only once both blocks have
/// released it (a second mbarrier per slot, arrived on from both blocks: by thread 0 without a
/// producer warpgroup, by each consumer warp with one). CUTLASS's 2x1 cluster shape.
struct TensorCoreStep {
  int stage_id = 0;
  std::string kind = "f16";
  int64_t block_m = 64;
  int64_t block_n = 64;
  int64_t block_k = 32;
  int64_t warp_m = 32;
  int64_t warp_n = 32;
  int pipeline = 2;
  int64_t pad = 8;
  int64_t raster = 1;
  int epilogue = 0;
  int split_k = 1;
  bool warpgroup = false;
  bool repack = false;
  bool tma = false;
  bool warp_specialized = false;
  bool persistent = false;
  bool stream_k = false;
  bool pingpong = false;
  bool multicast = false;
  absl::StatusOr<State> Apply(const State& s) const;
  nlohmann::json ToJson() const;
  static absl::StatusOr<TensorCoreStep> FromJson(const nlohmann::json& j);
  std::string ToString() const;
  bool operator==(const TensorCoreStep&) const = default;
};

/// Stream-k's division of a persistent grid's work (TensorCoreStep::stream_k): the first `whole`
/// tiles (a multiple of the grid) are walked whole; the `iters` k tiles of the others, in linear
/// (tile, k tile) order, are split into one contiguous range per block, block b's from
/// b · iters / grid.
struct StreamKSplit {
  int64_t whole = 0;
  int64_t iters = 0;
};

/// The split of `tiles` block tiles (batches included) of `k_tiles` k tiles each over `grid`
/// persistent blocks: all but the last grid + tiles mod grid tiles whole, so every range is at
/// least one tile's k tiles long. nullopt where stream-k would split nothing: tiles ≤ grid, tiles
/// a multiple of grid, or every range starting at a tile's first k tile (one k tile per tile,
/// say). Shared by the lowering and the search, so the search draws the option only where it
/// changes the kernel.
std::optional<StreamKSplit> PlanStreamKSplit(int64_t tiles, int64_t grid, int64_t k_tiles);

using Step =
    std::variant<SplitStep, FollowSplitStep, FollowFusedSplitStep, FuseStep, ReorderStep,
                 ComputeAtStep, ComputeInlineStep, ComputeRootStep, CacheReadStep, CacheWriteStep,
                 AnnotationStep, PragmaStep, RfactorStep, StorageAlignStep, TensorCoreStep>;

/// Readable one-line form of any step.
std::string StepToString(const Step& step);

}  // namespace tilesearch::schedule
