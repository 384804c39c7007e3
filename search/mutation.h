// Mutation and crossover of annotated states, the evolution operators of Ansor's search (OSDI'20
// §5.1; TVM v0.19 sketch_policy_rules.cc MutateTileSize, MutateAutoUnroll, MutateComputeLocation,
// MutateParallel). Each edits the state's step list and replays it on the context's DAG; the result
// is lowered and checked once (LowerCandidate, search/tune_context.h), so every returned candidate
// is a valid program for the context's target and carries its lowering. The mutation rules form a
// table of weighted rule objects (MutationRules; TVM sketch_policy_rules.h: rules picked by prefix
// sums of their weights): adding a mutation is one MutationRule class and one table line.
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
//  - MutateTileSize also changes one decision of a tensor_core step (warp tile, warps per block,
//    k depth, pipeline depth, padding, raster group; search/tensor_core_space.h): its tiles are
//    the tensor-core counterpart of the split lengths (MetaSchedule mutates them as splits).
//  - MutateComputeLocation draws the new location from the candidates of the state just before
//    the compute_at step (TVM uses the final state's iterator ids, which can name other loops).
//  - MutateAutoUnroll also moves software_pipeline pragmas among 0..4 (not in TVM: our GPU
//  lowering's
//    register-staged prefetch of shared tiles helps some tilings and costs others a block per
//    SM, so it is a searched decision).
//  - CrossoverTileSizes is new: Ansor §5.1 describes node-based crossover, TVM never implemented
//    it (`TODO(merrymercy, comaniac): add crossover`). It mixes single decisions, not whole
//    stages: a matmul or conv2d has one tiled stage holding almost all decisions, and mixing by
//    stage gave no child on cpu (0 of 92 same-structure pairs) and only fetch widths on cuda.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/state.h"
#include "search/annotation.h"
#include "search/tune_context.h"

namespace tilesearch::search {

/// Moves a random divisor factor of one tile length of a random split to another level of the
/// same split (the outer rest included when the split divides its extent); the product of all
/// parts, i.e. the tiled extent, is kept and the innermost length stays ≤
/// options.max_innermost_split_factor. Splits with an unknown (0) or unit extent are not mutated.
[[nodiscard]] absl::StatusOr<Candidate> MutateTileSize(const schedule::State& state,
                                                       TuneContext& ctx);

/// Changes one pragma drawn uniformly from the state's pragmas: an auto_unroll_max_step pragma
/// gets another value of the target's candidate list, a software_pipeline pragma another value of
/// 0..options.gpu_max_software_pipeline (annotation adds these on GPU kernels with shared-memory
/// fetches).
[[nodiscard]] absl::StatusOr<Candidate> MutateAutoUnroll(const schedule::State& state,
                                                         TuneContext& ctx);

/// CPU: moves one compute_at of an untiled stage to another candidate iterator of its consumer
/// (annotation's ComputeLocationCandidates).
[[nodiscard]] absl::StatusOr<Candidate> MutateComputeLocation(const schedule::State& state,
                                                              TuneContext& ctx);

/// CPU: changes how many outer iterators are fused into one parallel loop (the parallel extent);
/// later steps on that stage are renumbered.
[[nodiscard]] absl::StatusOr<Candidate> MutateParallel(const schedule::State& state,
                                                       TuneContext& ctx);

/// Hash of a step list with its decisions (split lengths, pragma values) cleared: states with
/// different structure hashes cannot be crossed (CrossoverTileSizes); equal ones almost surely
/// can (64-bit FNV-1a of the steps' text).
uint64_t StructureHash(const std::vector<schedule::Step>& steps);

/// Hash of a state's tile family: for every multi-level space split (a split with >= 3 lengths:
/// the sketches' "SSS" levels, GPU [vthread, thread, inner, inner], CPU [outer, inner, inner])
/// its tiled span (the product of its lengths: the block tile on GPU) and its thread length (GPU:
/// lengths[1]) or innermost length (CPU). States of one family share their block tile, thread
/// block shape and accumulators per thread, and differ in the arrangement of the per-thread
/// tile, the reduction split, pragmas and fetch widths. A tensor_core step adds its block tile,
/// warp (or warpgroup) tile, whether it is wgmma and whether it repacks its operands (not its k
/// depth, pipeline, raster or split-K). All states without either form one family. Used to keep a
/// round's measurements diverse (SearchOptions::max_family_fraction).
uint64_t TileFamilyHash(const std::vector<schedule::Step>& steps, bool gpu);

/// Crossover of decisions (after Ansor §5.1's node-based crossover): the child takes each decision
/// in which the parents differ (a split's lengths, an unroll pragma's value) from a parent chosen
/// at random, at least one from each, the rest of the steps from `parent_a`. The parents must
/// share their structure (the same steps apart from split lengths and pragma values: two
/// annotations of one sketch with the same bindings; StructureHash). GPU children whose mixed
/// tiles break the launch limits (GpuTileRunFits) are redrawn before lowering. Errors:
/// kInvalidArgument when the structures differ, kFailedPrecondition when the parents differ in
/// fewer than 2 decisions or no valid child was found.
[[nodiscard]] absl::StatusOr<Candidate> CrossoverTileSizes(const schedule::State& parent_a,
                                                           const schedule::State& parent_b,
                                                           TuneContext& ctx);

/// A mutation rule: one way to edit an annotated state into another valid candidate (TVM
/// PopulationGenerationRule's MutateXXX). Errors as the Mutate* functions above.
class MutationRule {
 public:
  virtual ~MutationRule() = default;
  /// Rule name, e.g. "MutateTileSize".
  virtual const char* name() const = 0;
  /// A mutated child of `state`, its random choices drawn from ctx.rng().
  virtual absl::StatusOr<Candidate> Apply(const schedule::State& state, TuneContext& ctx) const = 0;
};

/// A rule of the mutation table with its weight on each kind of target (0: not used there).
struct WeightedMutationRule {
  std::unique_ptr<MutationRule> rule;
  int cpu_weight = 0;
  int gpu_weight = 0;
};

/// The mutation table, in draw order, with TVM v0.19's weights in thousandths (CPU: tile size
/// 900, auto unroll 40, compute location 50, parallel 10; GPU: tile size 900, auto unroll 100).
const std::vector<WeightedMutationRule>& MutationRules();

/// One mutation of `state`: a rule of MutationRules() drawn with probability proportional to its
/// weight on ctx.target() (one uniform draw in [0, 1) compared with the prefix sums of the
/// weights over their total), then applied. Errors: the rule's.
[[nodiscard]] absl::StatusOr<Candidate> Mutate(const schedule::State& state, TuneContext& ctx);

}  // namespace tilesearch::search
