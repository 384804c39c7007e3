// Evolutionary search: the candidate generator of one tuning round (Ansor, OSDI'20 §5.1; TVM v0.19
// SketchPolicyNode::SearchOneRound / EvolutionarySearch / PickStatesWithEpsGreedy,
// /work/shared/reference/ansor-notes.md §2). An initial population is sampled by random annotation
// of the sketches (plus the best measured states), scored with the cost model and evolved for a
// few generations by fitness-proportional selection, mutation and node-based crossover; the best
// scored states never measured before come out, plus a few random ones (eps-greedy exploration).
//
// The per-state work (annotation or mutation, replay, lowering, validity, feature extraction) runs
// on `num_threads` worker threads; each item gets its own context (TuneContext::Fork) seeded from
// the caller's generator, and results are gathered in item order, so the output does not depend on
// the thread count. Each state is lowered once, when it is made (a Candidate carries its
// lowering); its features are kept (and its score, the model being fixed during a call) by
// StepsHash, so copies and re-discovered children cost nothing.
//
// Differences from TVM, and why:
//  - States are identified by StepsHash of their step list (search/measure_record.h), the same key
//    the tuning log uses, rather than State::ToStr().
//  - Crossover (CrossoverTileSizes, search/mutation.h) is applied with crossover_probability to
//    a selected parent and a partner of the same structure (StructureHash), drawn by fitness
//    (else uniformly among that structure's states; a parent without one is mutated instead);
//    TVM never implemented it. Random pairs rarely share a structure on CPU (several sketches,
//    parallel and vectorize fusion): 0 of 100 cpu matmul pairs crossed.
//  - The non-random picks are spread over tile families (max_family_fraction): TVM takes the
//    top k by score, which on matmul 4096³ spent 63% of 1000 trials on one family.
//  - The initial population is sampled once per call (TVM retries with a halved target when 5
//    consecutive sampling rounds add nothing; the sampling bounds its attempts instead).
//  - A state's score is computed once per call: TVM re-predicts every generation (a RandomModel
//    then gives a copied state a new random score; here it keeps its first).
#pragma once

#include <cstdint>
#include <random>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "costmodel/cost_model.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"
#include "search/tune_context.h"

namespace tilesearch::search {

/// Where one EvolutionarySearch call spent its time and what its operators achieved.
struct SearchProfile {
  /// Wall-clock seconds: the whole call, the initial population (annotation, lowering, features
  /// of sampled and best measured states), the generations' children (selection, mutation,
  /// crossover, lowering, features), model predictions, and the final ranking.
  double total_s = 0;
  double init_s = 0;
  double evolve_s = 0;
  double predict_s = 0;
  double rank_s = 0;
  /// Wall-clock seconds spent in the sections that run on the worker threads (the rest of
  /// total_s runs on the calling thread alone: predictions, selection, bookkeeping).
  double parallel_s = 0;
  /// CPU seconds summed over the workers: annotation (fill, replay, bind, lower, validity),
  /// mutation and crossover (edit, replay, lower, validity), feature extraction and hashing.
  double annotate_cpu_s = 0;
  double mutate_cpu_s = 0;
  double features_cpu_s = 0;
  /// Worker threads used.
  int threads = 0;
  /// Counts: annotation attempts and valid results; mutation attempts (each one call of a
  /// mutation rule, itself retrying a few edits) and valid children; crossover attempts and valid
  /// children; parents copied unchanged; valid children whose steps were already known this call
  /// (no features computed again); programs sent to the model.
  int64_t annotation_attempts = 0;
  int64_t annotation_valid = 0;
  int64_t mutation_attempts = 0;
  int64_t mutation_valid = 0;
  int64_t crossover_attempts = 0;
  int64_t crossover_valid = 0;
  int64_t copies = 0;
  int64_t known_children = 0;
  int64_t predicted = 0;
  /// Edited step lists (mutation, crossover) whose replay and lowering came from the call's
  /// LoweringCache (tried before in this call).
  int64_t lowering_cache_hits = 0;
};

/// The features of each candidate's lowering for ctx.target() (costmodel::ExtractLoweredFeatures),
/// in order; no stores for a candidate without a lowering or whose features fail.
[[nodiscard]] std::vector<costmodel::ProgramFeatures> CandidateFeatures(
    const std::vector<Candidate>& candidates, const TuneContext& ctx);

/// The cost model's scores of `candidates` for ctx.target() (model.Predict of CandidateFeatures;
/// a candidate without a lowering or whose features fail scores -infinity). Errors: the model's
/// Predict errors.
[[nodiscard]] absl::StatusOr<std::vector<double>> ScoreCandidates(
    const std::vector<Candidate>& candidates, const TuneContext& ctx, costmodel::CostModel& model);

/// One round's candidates: up to `n_out` distinct candidates (by StepsHash of their steps) of
/// ctx.dag() for ctx.target(), none of whose hash is in `measured`: about (1 − eps_greedy) · n_out
/// of the best predicted states found by evolution (best first), then random states of the
/// initial population (and more evolved ones when random ones run out). The options are
/// ctx.options(); the caller's draws come from ctx.rng(). `sketches` come from GenerateSketches;
/// `best` are the best measured candidates (best first; their lowerings give their features, a
/// null lowering none), of which up to init_measured_ratio · population seed the population.
/// Fewer than n_out candidates (possibly none) come back when the space is nearly exhausted.
/// `profile`, when given, receives the call's time split and counts. Errors: kInvalidArgument for
/// non-positive population or negative generations / n_out / num_threads, probabilities outside
/// [0, 1]; the model's errors. Deterministic for a fixed rng state and a deterministic model, for
/// any num_threads.
[[nodiscard]] absl::StatusOr<std::vector<Candidate>> EvolutionarySearch(
    TuneContext& ctx, const std::vector<schedule::State>& sketches, costmodel::CostModel& model,
    const std::unordered_set<uint64_t>& measured, const std::vector<Candidate>& best, int n_out,
    SearchProfile* profile = nullptr);

}  // namespace tilesearch::search
