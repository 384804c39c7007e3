// Random annotation of sketches: the initial population of the evolutionary search (Ansor,
// OSDI'20 §4.2; TVM v0.19 sketch_policy_rules.cc init-population rules InitFillTileSize,
// InitThreadBind, InitUnroll for CUDA and InitFillTileSize, InitChangeComputeLocation,
// InitParallel, InitUnroll, InitVectorization for CPU). Every random choice is uniform over its
// candidates; invalid programs (schedule::Lower fails, e.g. GPU limits) are rejected and resampled.
//
// Differences from TVM, and why:
//  - Awkward extents (few divisors: primes, 2·prime, ...) are, with probability
//    non_divisible_probability, tiled as if rounded up to a multiple of 8 (guards cover the tail):
//    perfect tiles of a prime extent are only 1 and the extent itself.
//  - Thread counts of cross-thread reductions and of untiled GPU stages are drawn from
//    gpu_thread_candidates (TVM fixes them at warp_size and relies on mutation; MetaSchedule
//    samples {32..1024} the same way), and an untiled stage with ≤ warp_size points still gets a
//    blockIdx (our Lower rejects threads without blocks).
//  - Cooperative fetching draws the vector width from {1, 2, 4} (those that divide the fused
//    extent; TVM starts at 1 and leaves widening to mutation).
//  - A tiled GPU stage needs ≥ warp_size threads only when its space has ≥ 16 warps of points
//    (TVM: > 2 warps); below that, uniform tiles almost never reach a warp (8×12 outputs: 0.5%)
//    and such kernels are launch-bound anyway.
//  - CPU compute-location changes choose root or an attach point of the single consumer; inlining
//    is left to the sketch rules.
//  - GPU kernels that fetch shared tiles inside a reduction loop draw a software_pipeline$0..4
//    pragma (uniformly up to gpu_max_software_pipeline; schedule/software_pipeline.h):
//    register-staged prefetch (1) hides global latency inside each warp but costs registers (a
//    block per SM on some tilings), double buffering (2) saves a barrier per step but doubles the
//    shared tiles, and the cp.async rings (3, 4 stages) drop the staging registers but multiply
//    the shared tiles, so measurement decides (H200, bench/NOTES.md: 1 vs 0: 3.89 -> 3.46 ms on
//    one matmul tiling, 3.65 -> 3.91 on another; 2 vs 1: 3.88 -> 3.22 on one, 3.13 -> 3.36 on
//    another; 4 vs 1: 3.13 -> 3.00 on the latter). MetaSchedule has the analogous
//    software_pipeline_stage annotation; Ansor has none.
//  - The register check counts each thread's staged share of the shared tiles.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "schedule/lower.h"
#include "schedule/state.h"
#include "search/tune_context.h"

namespace tilesearch::search {

/// All ordered factorizations (f0, ..., f_{n-1}) of `extent` (outermost first) with
/// f_{n-1} ≤ max_innermost (TVM SplitFactorizationMemo). n ≥ 1, extent ≥ 1. Memoized per thread.
const std::vector<std::vector<int64_t>>& SplitFactorizations(int64_t extent, int n,
                                                             int64_t max_innermost);

/// Annotates one sketch: fills its unfilled split lengths with random tile sizes, replays it on
/// ctx.dag(), adds the target's annotations (GPU: thread binding, cooperative fetching, unroll
/// pragmas; CPU: compute locations, parallel, unroll pragmas, vectorize) and checks the program
/// once (LowerCandidate: schedule::Lower and the register estimate); the candidate carries the
/// lowered program. The steps are the annotation rules of annotation.cc's table, in order (TVM's
/// init-population rules), all drawing from ctx.rng(). Errors: kFailedPrecondition
/// "invalid_schedule: ..." for GPU states over the limits (threads < warp_size on a large space,
/// the register estimate, or Lower's checks), the failing step's error otherwise. Deterministic for
/// a given rng state.
///
/// GPU multi-level tiles are drawn jointly per stage so that the launch limits hold by
/// construction: vthreads ≤ min(max_vthread_extent, gpu_max_vthread), warp_size ≤ threads
/// ≤ max_threads_per_block (the lower bound only for spaces of ≥ 16 warps), the register
/// estimate, and the shared-memory footprint of the cached inputs ≤ the opt-in limit (interval
/// bounds of the tiled stage's load indices over the block tile); tiles leaving ≥ gpu_min_blocks
/// blocks are preferred.
[[nodiscard]] absl::StatusOr<Candidate> AnnotateSketch(const schedule::State& sketch,
                                                       TuneContext& ctx);

/// One of `sketches` to annotate: with both kinds present, a tensor-core sketch with probability
/// options.tensor_core_share, else a SIMT one; uniformly within each kind, except that where
/// one-pass tf32 sketches exist (TF32 allowed) 3xTF32 ones weigh a third as much.
/// `sketches` must not be empty.
const schedule::State& PickSketch(const std::vector<schedule::State>& sketches,
                                  const AnnotationOptions& options, std::mt19937_64& rng);

/// Samples up to `n` distinct (by State::Hash) valid states: each attempt annotates a sketch drawn
/// by PickSketch; invalid ones are dropped. Stops after n · max_attempts_per_state attempts, so
/// fewer than n states come back when valid ones are rare (none when `sketches` is empty).
/// Deterministic for a fixed rng seed.
std::vector<schedule::State> SampleInitialPopulation(const std::vector<schedule::State>& sketches,
                                                     int n, TuneContext& ctx);

namespace internal {
// Helpers shared with search/mutation.cc.

/// Uniform integer in [0, n) from `rng` (0 when n ≤ 1); rng() % n, the same on every platform.
int64_t Pick(std::mt19937_64& rng, int64_t n);
/// steps[i] when it is a one-length SplitStep whose inner part the next step annotates with
/// `annotation` (on the same stage); nullptr otherwise.
const schedule::SplitStep* SplitThenAnnotated(const std::vector<schedule::Step>& steps, int i,
                                              schedule::IteratorAnnotation annotation);
/// True when steps[i] is a one-length SplitStep whose inner part the next step binds to
/// threadIdx.x (a thread-count split: cross-thread reductions, untiled GPU stages).
bool IsThreadSplit(const std::vector<schedule::Step>& steps, int i);
/// True when steps[i] is a one-length SplitStep whose outer part the next step factors out
/// (RfactorStep on the same stage and iterator) and the step after splits the partial stage
/// across threads (IsThreadSplit): a block-reduction split (sketch rule
/// SplitReductionAcrossBlocks), whose length is the number of elements each block reduces. The
/// CPU's rfactor splits are not.
bool IsBlockReductionSplit(const std::vector<schedule::Step>& steps, int i);
/// The chunk lengths a block-reduction split of `extent` may take: the values of
/// options.gpu_block_reduction_chunks ≤ extent / 2 (the smallest one if none is).
std::vector<int64_t> BlockChunkCandidates(int64_t extent, const AnnotationOptions& options);
/// The vector widths (elements) a vectorized split of `extent` may take: 1, 2, 4, 8 and 16 where
/// they divide the extent and width × element_bytes ≤ target.max_vector_bytes.
std::vector<int64_t> VectorWidths(int64_t extent, int64_t element_bytes, const Target& target);
/// The loads of `op`'s body whose indices mention iterator or axis `axis` (a row's elements, not
/// the row's scalars such as its max), in visiting order.
std::vector<const ir::LoadNode*> LoadsUsing(const ir::TensorNode& op, const std::string& axis);
/// Bytes of the widest element `op` stores or loads along iterator or axis `axis` (the loads whose
/// indices use it: a row's elements, not the row's scalars such as its max); the stored type's
/// bytes where no load uses it (a fused iterator).
int64_t WidestAccessBytes(const ir::TensorNode& op, const std::string& axis);
/// A thread count from options.gpu_thread_candidates that is ≤ extent (extent itself if none).
int64_t SampleThreads(int64_t extent, const AnnotationOptions& options, std::mt19937_64& rng);
/// Random tile lengths (n_lengths of them, outermost first, without the outer rest) for `extent`.
std::vector<int64_t> SampleTile(int64_t extent, int n_lengths, const AnnotationOptions& options,
                                std::mt19937_64& rng);
/// GPU: whether the multi-level tiling run holding SplitStep `i` of `steps` (the consecutive
/// filled splits of one stage with ≥ 2 lengths that DoMultiLevelTiling writes) keeps the limits
/// the annotation draws tiles within: vthreads ≤ min(max_vthread_extent, gpu_max_vthread),
/// warp_size (on spaces of ≥ 16 warps) ≤ threads ≤ max_threads_per_block, the register
/// estimate, and thread levels not tightened by a non-divisible split. Replays only the steps
/// before the run (a cheap check before a full replay and lowering). True when steps[i] is in no
/// such run, on CPU targets, or when the check cannot be made (lowering decides then).
bool GpuTileRunFits(const TuneContext& ctx, const std::vector<schedule::Step>& steps, int i);
/// GPU: checks every kernel of `kernel` against the register estimate (threads × (local elements
/// + gpu_register_overhead) ≤ target.max_registers_per_block, per thread ≤
/// gpu_max_registers_per_thread). Errors: kFailedPrecondition "invalid_schedule: about N registers
/// per thread ...". OK for CPU targets.
absl::Status CheckRegisterEstimate(const schedule::LoweredKernel& kernel, const Target& target,
                                   const AnnotationOptions& options);
/// CPU compute_at candidates of stage `sid` (TVM GetComputeLocationCandidates): (consumer id,
/// iterator id) pairs of its single consumer, outer to inner, not inside untiled reductions or
/// unrolled loops, skipping extent-1 iterators, stopping after an attach point.
std::vector<std::pair<int, int>> ComputeLocationCandidates(const schedule::State& s, int sid);

}  // namespace internal

}  // namespace tilesearch::search
