// Evolutionary search: the candidate generator of one tuning round (Ansor, OSDI'20 §5.1; TVM v0.19
// SketchPolicyNode::SearchOneRound / EvolutionarySearch / PickStatesWithEpsGreedy,
// /work/shared/reference/ansor-notes.md §2). An initial population is sampled by random annotation
// of the sketches (plus the best measured states), scored with the cost model and evolved for a
// few generations by fitness-proportional selection, mutation and node-based crossover; the best
// scored states never measured before come out, plus a few random ones (eps-greedy exploration).
//
// The per-state work (annotation or mutation, replay, lowering, validity, feature extraction) runs
// on `num_threads` worker threads; each item gets its own generator seeded from the caller's, and
// results are gathered in item order, so the output does not depend on the thread count. Each
// state is lowered once: its features are kept (and its score, the model being fixed during a
// call) by StepsHash, so copies and re-discovered children cost nothing.
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
#include "costmodel/cost_model.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"
#include "schedule/target.h"
#include "search/annotation.h"

namespace tilesearch::search {

/// Knobs of the evolutionary search; defaults are TVM v0.19's (search_policy.py).
struct SearchOptions {
  /// States per generation (evolutionary_search_population).
  int population = 2048;
  /// Generations of evolution after the initial population (evolutionary_search_num_iters).
  /// Capped at 2 with a RandomModel, as in TVM (scores carry no information).
  int generations = 4;
  /// Probability that a selected parent is mutated (evolutionary_search_mutation_prob).
  double mutation_probability = 0.85;
  /// Probability that a selected parent not mutated is crossed with a second selected parent
  /// (our addition; 0 disables crossover).
  double crossover_probability = 0.05;
  /// Fraction of each round's output drawn at random from the initial population (eps_greedy).
  double eps_greedy = 0.05;
  /// Largest fraction of a round's model-ranked picks (the non-random ones) that may share one
  /// tile family (TileFamilyHash, search/mutation.h) while states of other families are ranked;
  /// the rest of the picks go to the next families by rank, and only when too few other
  /// families exist are more of one family taken. The cap is ceil(fraction · picks), at least 1
  /// (so 0 means one pick per family). 1 disables (TVM: top-k by score alone). Our
  /// addition: in a 1000-trial XGBoost run on matmul 4096³ (H200) 633 trials went to one family
  /// (50-60 of each round's 64 from round 5 on), and the faster 128×128 family one tile
  /// mutation away was never measured (bench/NOTES.md).
  double max_family_fraction = 0.25;
  /// Fraction of each tuning round's trials that come from local search around the best measured
  /// states (LocalSearchCandidates, search/local_search.h) in every round that has a valid
  /// measured state (so not the first): ceil(fraction · trials of the round), the rest from
  /// EvolutionarySearch (which also fills in when local search finds fewer). Read by the tuner
  /// (search/tuner.h), not by EvolutionarySearch. 0 (the default) disables. Our addition, off by
  /// default because the evidence does not favour it: the model ranked a hand schedule 3-5%
  /// faster than the best of 704 XGBoost trials 96th of 100, which motivated it, but in an A/B
  /// from scratch on matmul 4096³ (H200, seed 1, 1000 trials, bench/NOTES.md) 0.25
  /// ended at 3.060 ms and 0 at 3.003 ms; resuming that 704-trial log to 1000 with 0.25 went
  /// 3.165 → 3.152 ms.
  double local_search_fraction = 0;
  /// How many of the best measured states (best first) local search takes the neighbors of
  /// (>= 1).
  int local_search_states = 4;
  /// Randomly annotated states sampled at least (sample_init_min_population).
  int init_min_population = 50;
  /// Fraction of the population taken from the best measured states
  /// (sample_init_use_measured_ratio).
  double init_measured_ratio = 0.2;
  /// Random annotation and mutation knobs.
  AnnotationOptions annotation;
  /// Worker threads for the per-state work; 0 = one per hardware thread. The result does not
  /// depend on it.
  int num_threads = 0;
};

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
};

/// The cost model's scores of `states` (features via costmodel::ExtractStateFeatures; a state that
/// does not lower has no features and scores -infinity). Errors: the model's Predict errors.
[[nodiscard]] absl::StatusOr<std::vector<double>> ScoreStates(
    const ir::ComputeDAG& dag, const schedule::Target& target,
    const std::vector<schedule::State>& states, costmodel::CostModel& model);

/// One round's candidates: up to `n_out` distinct states (by StepsHash of their steps) of `dag`
/// for `target`, none of whose hash is in `measured`: about (1 − eps_greedy) · n_out of the best
/// predicted states found by evolution (best first), then random states of the initial population
/// (and more evolved ones when random ones run out). `sketches` come from GenerateSketches;
/// `best_states` are the best measured states (best first), of which up to
/// init_measured_ratio · population seed the population. Fewer than n_out states (possibly none)
/// come back when the space is nearly exhausted. `profile`, when given, receives the call's time
/// split and counts. Errors: kInvalidArgument for non-positive population or negative
/// generations / n_out / num_threads, probabilities outside [0, 1]; the model's errors.
/// Deterministic for a fixed rng state and a deterministic model, for any num_threads.
[[nodiscard]] absl::StatusOr<std::vector<schedule::State>> EvolutionarySearch(
    const ir::ComputeDAG& dag, const schedule::Target& target,
    const std::vector<schedule::State>& sketches, costmodel::CostModel& model,
    const std::unordered_set<uint64_t>& measured, const std::vector<schedule::State>& best_states,
    int n_out, const SearchOptions& options, std::mt19937_64& rng,
    SearchProfile* profile = nullptr);

}  // namespace tilesearch::search
