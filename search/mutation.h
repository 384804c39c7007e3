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
//  - CrossoverTileSizes is new: Ansor §5.1 describes node-based crossover, TVM never implemented
//    it (`TODO(merrymercy, comaniac): add crossover`).
#pragma once

#include <random>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "schedule/lower.h"
#include "schedule/state.h"
#include "schedule/target.h"
#include "search/annotation.h"

namespace tilesearch::search {

/// Moves a random divisor factor of one tile length of a random split to another level of the
/// same split (the outer rest included when the split divides its extent); the product of all
/// parts, i.e. the tiled extent, is kept and the innermost length stays ≤
/// options.max_innermost_split_factor. Splits with an unknown (0) or unit extent are not mutated.
[[nodiscard]] absl::StatusOr<schedule::State> MutateTileSize(
    const schedule::State& state, const ir::ComputeDAG& dag, const schedule::Target& target,
    std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

/// Replaces one auto_unroll_max_step pragma by another value of the target's candidate list.
[[nodiscard]] absl::StatusOr<schedule::State> MutateAutoUnroll(
    const schedule::State& state, const ir::ComputeDAG& dag, const schedule::Target& target,
    std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

/// CPU: moves one compute_at of an untiled stage to another candidate iterator of its consumer
/// (annotation's ComputeLocationCandidates).
[[nodiscard]] absl::StatusOr<schedule::State> MutateComputeLocation(
    const schedule::State& state, const ir::ComputeDAG& dag, const schedule::Target& target,
    std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

/// CPU: changes how many outer iterators are fused into one parallel loop (the parallel extent);
/// later steps on that stage are renumbered.
[[nodiscard]] absl::StatusOr<schedule::State> MutateParallel(
    const schedule::State& state, const ir::ComputeDAG& dag, const schedule::Target& target,
    std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

/// Node-based crossover (Ansor §5.1): the child takes, for every stage, all tile decisions (split
/// lengths) and unroll pragmas of that stage from one parent chosen at random, the rest of the
/// steps from `parent_a`. The parents must share their structure (the same steps apart from split
/// lengths and pragma values: two annotations of one sketch with the same bindings). Errors:
/// kInvalidArgument when the structures differ, kFailedPrecondition when no valid child that
/// differs from both parents was found.
[[nodiscard]] absl::StatusOr<schedule::State> CrossoverTileSizes(
    const schedule::State& parent_a, const schedule::State& parent_b, const ir::ComputeDAG& dag,
    const schedule::Target& target, std::mt19937_64& rng, const AnnotationOptions& options = {},
    schedule::LoweredKernel* lowered = nullptr);

}  // namespace tilesearch::search
