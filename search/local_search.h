// Local search around the best measured states: every valid state one decision away from a
// measured one, ranked by the cost model, measured next to the evolutionary search's picks.
//
// Our addition: neither Ansor (OSDI'20) nor TVM v0.19 has it; their measured states only seed the
// evolutionary search's population, where the model's score decides what survives. Why: the model
// cannot extrapolate to tilings it has not seen measured. Tuning matmul 4096³ on the H200 with
// XGBoost reached 3.165 ms in 704 trials while a hand schedule runs in 3.003 ms; the model ranked
// the hand schedule 96th of 100, so evolution guided by it never got there, although a state of
// the hand schedule's tile family (128×128 block, 16×16 threads) had been measured once, about 6
// single-decision edits away (bench/NOTES.md). Measuring the neighbors of the best states walks
// such paths with measurements instead of predictions (a measured hill climb), the model only
// ordering each state's neighbors.
//
// The neighborhood is exhaustive over the decisions mutation edits (search/mutation.h), one at a
// time: tile splits (a prime factor moved between two levels), GPU thread counts and cooperative
// fetch vector widths, auto_unroll_max_step and software_pipeline pragmas; plus one coupled edit,
// because the cp.async pipelines (software_pipeline 3, 4) only apply to vectorized fetches (with
// scalar fetches the lowering falls back to 2, so each single edit alone measures nothing new).
//
// Cost: a GPU matmul state has a few dozen neighbors (the 128×128 hand schedule of matmul 4096³:
// 48, of which 36 tile moves; tests/search/local_search_test.cc), each replayed and lowered once
// (the lowering serves the validity check, the model's features and the build); no measurement.
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "costmodel/cost_model.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"
#include "search/annotation.h"
#include "search/evolutionary_search.h"
#include "search/tune_context.h"

namespace tilesearch::search {

/// Every valid candidate one decision away from `state` (a state of ctx.dag(); options are
/// ctx.annotation(), limits ctx.target()'s), in a deterministic order
/// (by step, then level / value), distinct by StepsHash (search/measure_record.h), `state` itself
/// excluded:
///  (a) each split with a known extent > 1 and known lengths: one prime factor of one level moved
///      to another level, the outer rest (extent / product) a level when the product divides the
///      extent (so the tiled extent is kept); the new innermost length ≤
///      options.max_innermost_split_factor unless it did not grow (MutateTileSize's rules, with
///      prime factors where mutation moves any divisor: each neighbor is one edit). GPU only:
///      each other thread count of a thread-count split (options.gpu_thread_candidates ≤ its
///      extent) and each other vector width (VectorWidths) of a cooperative fetch that divides the
///      fetched extent and fits target.max_vector_bytes;
///  (b) each auto_unroll_max_step pragma: each other value of the target's candidates
///      (options.gpu_unroll_steps / cpu_unroll_steps);
///  (c) each software_pipeline pragma: each other value of 0..max(gpu_max_software_pipeline,
///      current);
///  (d) when the state has a software_pipeline pragma: every cooperative fetch at its largest
///      valid vector width together with every software_pipeline pragma at 3, and at 4 (those ≤
///      max(gpu_max_software_pipeline, largest current value));
///  (e) each tensor_core step: every other value of each of its decisions that fits
///      (search/tensor_core_space.h TensorCoreStepVariants).
/// Every neighbor is replayed, lowered once and checked as mutation's children are
/// (GpuTileRunFits before replay for tile moves, LowerCandidate); invalid ones are skipped.
/// min_blocks_per_sm pragmas are not edited. Errors: the replay error of `state`'s steps when they
/// do not replay on ctx.dag().
[[nodiscard]] absl::StatusOr<std::vector<Candidate>> NeighborStates(const schedule::State& state,
                                                                    const TuneContext& ctx);

/// Local search candidates of one tuning round: the neighbors (NeighborStates) of the first
/// `max_states` of `best` (measured candidates, best first) whose StepsHash is not in
/// `measured`, each state's list ordered by the model's score (ScoreCandidates, best first; ties
/// keep NeighborStates' order), then interleaved round-robin starting at best[0] (its best
/// neighbor first, then the second state's best, ...); up to `n_out` distinct states (a state
/// neighboring two best states comes once, at its first place). Fewer when the neighborhoods run
/// out. Errors: kInvalidArgument for n_out < 0 or max_states < 0; NeighborStates' errors; the
/// model's Predict errors.
[[nodiscard]] absl::StatusOr<std::vector<Candidate>> LocalSearchCandidates(
    const TuneContext& ctx, const std::vector<Candidate>& best,
    const std::unordered_set<uint64_t>& measured, int n_out, int max_states,
    costmodel::CostModel& model);

}  // namespace tilesearch::search
