// Evolutionary search: the candidate generator of one tuning round (Ansor, OSDI'20 §5.1; TVM v0.19
// SketchPolicyNode::SearchOneRound / EvolutionarySearch / PickStatesWithEpsGreedy,
// /work/shared/reference/ansor-notes.md §2). An initial population is sampled by random annotation
// of the sketches (plus the best measured states), scored with the cost model and evolved for a
// few generations by fitness-proportional selection, mutation and node-based crossover; the best
// scored states never measured before come out, plus a few random ones (eps-greedy exploration).
//
// Differences from TVM, and why:
//  - States are identified by StepsHash of their step list (search/measure_record.h), the same key
//    the tuning log uses, rather than State::ToStr().
//  - Crossover (CrossoverTileSizes, search/mutation.h) is applied with crossover_probability to
//    pairs of selected parents; TVM never implemented it.
//  - The initial population is sampled once per call (TVM retries with a halved target when 5
//    consecutive sampling rounds add nothing; SampleInitialPopulation bounds its attempts instead).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <unordered_set>
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
  /// Randomly annotated states sampled at least (sample_init_min_population).
  int init_min_population = 50;
  /// Fraction of the population taken from the best measured states
  /// (sample_init_use_measured_ratio).
  double init_measured_ratio = 0.2;
  /// Random annotation and mutation knobs.
  AnnotationOptions annotation;
};

/// The cost model's scores of `states` (features via costmodel::ExtractStateFeatures; a state that
/// does not lower has no features and scores -infinity). Errors: the model's Predict errors.
[[nodiscard]] absl::StatusOr<std::vector<double>> ScoreStates(const ir::ComputeDAG& dag,
                                                              const schedule::Target& target,
                                                              const std::vector<schedule::State>& states,
                                                              costmodel::CostModel& model);

/// One round's candidates: up to `n_out` distinct states (by StepsHash of their steps) of `dag`
/// for `target`, none of whose hash is in `measured`: about (1 − eps_greedy) · n_out of the best
/// predicted states found by evolution (best first), then random states of the initial population
/// (and more evolved ones when random ones run out). `sketches` come from GenerateSketches;
/// `best_states` are the best measured states (best first), of which up to
/// init_measured_ratio · population seed the population. Fewer than n_out states (possibly none)
/// come back when the space is nearly exhausted. Errors: kInvalidArgument for non-positive
/// population or negative generations / n_out, probabilities outside [0, 1]; the model's errors.
/// Deterministic for a fixed rng state and a deterministic model.
[[nodiscard]] absl::StatusOr<std::vector<schedule::State>> EvolutionarySearch(
    const ir::ComputeDAG& dag, const schedule::Target& target,
    const std::vector<schedule::State>& sketches, costmodel::CostModel& model,
    const std::unordered_set<uint64_t>& measured, const std::vector<schedule::State>& best_states,
    int n_out, const SearchOptions& options, std::mt19937_64& rng);

}  // namespace tilesearch::search
