// Mutation and crossover of annotated states, the evolution operators of Ansor's search (OSDI'20
// §5.1; TVM v0.19 sketch_policy_rules.cc MutateTileSize, MutateAutoUnroll, MutateComputeLocation,
// MutateParallel). Each edits the state's step list and replays it on the DAG; the result is
// checked with schedule::Lower and the register estimate (internal::CheckRegisterEstimate), so
// every returned state is a valid program for `target`; its lowered program goes to `lowered`
// when given (callers reuse it, e.g. for features, instead of lowering again).
// Every function returns a failure Status when it does not apply (kFailedPrecondition
// "<name> not applicable: ...") or when no valid child was found in a few tries (the last error).
//
// Differences from TVM, and why:
//  - MutateTileSize also changes the vector width of a GPU cooperative fetch (a one-length
//    split whose inner part is vectorized) to another of {1, 2, 4} that divides the fetched
//    extent: annotation draws it once and nothing else would revisit it.
//  - MutateTileSize also mutates thread-count splits (a one-length split whose inner part is
//    bound to threadIdx.x) by drawing another count from the annotation's thread candidates; TVM
//    only moves factors, which cannot leave the ≤ 64 innermost bound such splits start from.
//    Non-divisible splits move factors among their explicit lengths only, so the tiled range is
//    unchanged.
//  - MutateComputeLocation draws the new location from the candidates of the state just before
//    the compute_at step (TVM uses the final state's iterator ids, which can name other loops).
//  - MutateAutoUnroll also moves software_pipeline pragmas among 0..4 (not in TVM: our GPU lowering's
//    register-staged prefetch of shared tiles helps some tilings and costs others a block per
//    SM, so it is a searched decision).
//  - CrossoverTileSizes is new: Ansor §5.1 describes node-based crossover, TVM never implemented
//    it (`TODO(merrymercy, comaniac): add crossover`). It mixes single decisions, not whole
//    stages: a matmul or conv2d has one tiled stage holding almost all decisions, and mixing by
//    stage gave no child on cpu (0 of 92 same-structure pairs) and only fetch widths on cuda.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "schedule/lower.h"
#include "schedule/state.h"
#include "base/target.h"
#include "search/annotation.h"

namespace tilesearch::search {

/// Moves a random divisor factor of one tile length of a random split to another level of the
/// same split (the outer rest included when the split divides its extent); the product of all
/// parts, i.e. the tiled extent, is kept and the innermost length stays ≤
/// options.max_innermost_split_factor. Splits with an unknown (0) or unit extent are not mutated.
[[nodiscard]] absl::StatusOr<schedule::State> MutateTileSize(
    const schedule::State& state, const ir::ComputeDAG& dag, const Target& target,
    std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

/// Changes one pragma drawn uniformly from the state's pragmas: an auto_unroll_max_step pragma
/// gets another value of the target's candidate list, a software_pipeline pragma another value of
/// 0..options.gpu_max_software_pipeline (annotation adds these on GPU kernels with shared-memory
/// fetches).
[[nodiscard]] absl::StatusOr<schedule::State> MutateAutoUnroll(
    const schedule::State& state, const ir::ComputeDAG& dag, const Target& target,
    std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

/// CPU: moves one compute_at of an untiled stage to another candidate iterator of its consumer
/// (annotation's ComputeLocationCandidates).
[[nodiscard]] absl::StatusOr<schedule::State> MutateComputeLocation(
    const schedule::State& state, const ir::ComputeDAG& dag, const Target& target,
    std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

/// CPU: changes how many outer iterators are fused into one parallel loop (the parallel extent);
/// later steps on that stage are renumbered.
[[nodiscard]] absl::StatusOr<schedule::State> MutateParallel(
    const schedule::State& state, const ir::ComputeDAG& dag, const Target& target,
    std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

/// Hash of a step list with its decisions (split lengths, pragma values) cleared: states with
/// different structure hashes cannot be crossed (CrossoverTileSizes); equal ones almost surely
/// can (64-bit FNV-1a of the steps' text).
uint64_t StructureHash(const std::vector<schedule::Step>& steps);

/// Hash of a state's tile family: for every multi-level space split (a split with >= 3 lengths:
/// the sketches' "SSS" levels, GPU [vthread, thread, inner, inner], CPU [outer, inner, inner])
/// its tiled span (the product of its lengths: the block tile on GPU) and its thread length (GPU:
/// lengths[1]) or innermost length (CPU). States of one family share their block tile, thread
/// block shape and accumulators per thread, and differ in the arrangement of the per-thread
/// tile, the reduction split, pragmas and fetch widths. All states without such splits form one
/// family. Used to keep a round's measurements diverse (SearchOptions::max_family_fraction).
uint64_t TileFamilyHash(const std::vector<schedule::Step>& steps, bool gpu);

/// Crossover of decisions (after Ansor §5.1's node-based crossover): the child takes each decision
/// in which the parents differ (a split's lengths, an unroll pragma's value) from a parent chosen
/// at random, at least one from each, the rest of the steps from `parent_a`. The parents must
/// share their structure (the same steps apart from split lengths and pragma values: two
/// annotations of one sketch with the same bindings; StructureHash). GPU children whose mixed
/// tiles break the launch limits (GpuTileRunFits) are redrawn before lowering. Errors:
/// kInvalidArgument when the structures differ, kFailedPrecondition when the parents differ in
/// fewer than 2 decisions or no valid child was found.
[[nodiscard]] absl::StatusOr<schedule::State> CrossoverTileSizes(
    const schedule::State& parent_a, const schedule::State& parent_b, const ir::ComputeDAG& dag,
    const Target& target, std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

}  // namespace tilesearch::search
