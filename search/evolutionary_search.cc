#include "search/evolutionary_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "costmodel/features.h"
#include "search/measure_record.h"
#include "search/mutation.h"

namespace tilesearch::search {
namespace {

using schedule::State;

// Uniform double in [0, 1) from rng, the same on every platform.
double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

// Index drawn with probability proportional to weights (TVM ComputePrefixSumProb over
// max(score, 0)); uniform when every weight is 0.
class FitnessSampler {
 public:
  explicit FitnessSampler(const std::vector<double>& scores) {
    prefix_.reserve(scores.size());
    double sum = 0;
    for (double s : scores) {
      sum += (std::isfinite(s) && s > 0) ? s : 0.0;
      prefix_.push_back(sum);
    }
    total_ = sum;
  }
  size_t Draw(std::mt19937_64& rng) const {
    if (total_ <= 0) return static_cast<size_t>(internal::Pick(rng, prefix_.size()));
    const double x = Uniform01(rng) * total_;
    const size_t i = std::upper_bound(prefix_.begin(), prefix_.end(), x) - prefix_.begin();
    return std::min(i, prefix_.size() - 1);
  }

 private:
  std::vector<double> prefix_;
  double total_ = 0;
};

// One mutation rule chosen by TVM's rule weights (CPU: tile size 0.90, unroll 0.04, compute
// location 0.05, parallel 0.01; GPU: tile size 0.90, unroll 0.10).
absl::StatusOr<State> Mutate(const State& s, const ir::ComputeDAG& dag,
                             const schedule::Target& target, std::mt19937_64& rng,
                             const AnnotationOptions& options) {
  const double x = Uniform01(rng);
  if (x < 0.90) return MutateTileSize(s, dag, target, rng, options);
  if (target.is_gpu()) return MutateAutoUnroll(s, dag, target, rng, options);
  if (x < 0.94) return MutateAutoUnroll(s, dag, target, rng, options);
  if (x < 0.99) return MutateComputeLocation(s, dag, target, rng, options);
  return MutateParallel(s, dag, target, rng, options);
}

absl::Status ValidateOptions(const SearchOptions& o, int n_out) {
  if (o.population < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("search population must be positive, got ", o.population));
  }
  if (o.generations < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("search generations must be >= 0, got ", o.generations));
  }
  if (n_out < 0) {
    return absl::InvalidArgumentError(absl::StrCat("n_out must be >= 0, got ", n_out));
  }
  const std::pair<const char*, double> probs[] = {
      {"mutation_probability", o.mutation_probability},
      {"crossover_probability", o.crossover_probability},
      {"eps_greedy", o.eps_greedy},
      {"init_measured_ratio", o.init_measured_ratio}};
  for (const auto& [name, p] : probs) {
    if (!(p >= 0 && p <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be in [0, 1], got ", p));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<double>> ScoreStates(const ir::ComputeDAG& dag,
                                                const schedule::Target& target,
                                                const std::vector<State>& states,
                                                costmodel::CostModel& model) {
  std::vector<costmodel::ProgramFeatures> programs(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    absl::StatusOr<costmodel::StoreFeatures> f =
        costmodel::ExtractStateFeatures(dag, states[i], target);
    if (f.ok()) programs[i].stores = *std::move(f);
  }
  return model.Predict(programs);
}

absl::StatusOr<std::vector<State>> EvolutionarySearch(
    const ir::ComputeDAG& dag, const schedule::Target& target, const std::vector<State>& sketches,
    costmodel::CostModel& model, const std::unordered_set<uint64_t>& measured,
    const std::vector<State>& best_states, int n_out, const SearchOptions& options,
    std::mt19937_64& rng) {
  RETURN_IF_ERROR(ValidateOptions(options, n_out));
  if (n_out == 0) return std::vector<State>{};

  // Initial population: the best measured states, then random annotations.
  const int n_best = std::min<int>(static_cast<int>(best_states.size()),
                                   static_cast<int>(options.init_measured_ratio * options.population));
  const int n_sample = std::max(options.init_min_population, options.population - n_best);
  std::vector<State> init = SampleInitialPopulation(sketches, dag, target, n_sample, rng,
                                                    options.annotation);
  std::vector<State> population(best_states.begin(), best_states.begin() + n_best);
  population.insert(population.end(), init.begin(), init.end());

  // Best unmeasured states seen over all generations: hash → (score, state).
  std::unordered_map<uint64_t, std::pair<double, State>> seen;
  const int generations =
      model.Name() == "random" ? std::min(options.generations, 2) : options.generations;
  for (int gen = 0; gen <= generations && !population.empty(); ++gen) {
    ASSIGN_OR_RETURN(std::vector<double> scores, ScoreStates(dag, target, population, model));
    for (size_t i = 0; i < population.size(); ++i) {
      if (!std::isfinite(scores[i]) && scores[i] < 0) continue;  // does not lower
      const uint64_t h = StepsHash(population[i].steps());
      if (measured.contains(h) || seen.contains(h)) continue;
      seen.emplace(h, std::make_pair(scores[i], population[i]));
    }
    if (gen == generations) break;

    // Next generation: fitness-proportional selection, then mutation / crossover / copy.
    const FitnessSampler sampler(scores);
    std::vector<State> next;
    next.reserve(options.population);
    const int max_attempts = 4 * options.population;
    for (int attempt = 0; attempt < max_attempts &&
                          static_cast<int>(next.size()) < options.population;
         ++attempt) {
      const State& parent = population[sampler.Draw(rng)];
      const double x = Uniform01(rng);
      if (x < options.mutation_probability) {
        absl::StatusOr<State> child = Mutate(parent, dag, target, rng, options.annotation);
        if (child.ok()) next.push_back(*std::move(child));  // failed mutations are discarded
      } else if (x < options.mutation_probability +
                         (1 - options.mutation_probability) * options.crossover_probability) {
        const State& other = population[sampler.Draw(rng)];
        absl::StatusOr<State> child = CrossoverTileSizes(parent, other, dag, target, rng);
        if (child.ok()) next.push_back(*std::move(child));
      } else {
        next.push_back(parent);
      }
    }
    population = std::move(next);
  }

  // Best predicted first (ties: lower hash, for determinism).
  std::vector<std::pair<double, uint64_t>> ranked;
  ranked.reserve(seen.size());
  for (const auto& [h, entry] : seen) ranked.emplace_back(entry.first, h);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });

  const int n_random = static_cast<int>(std::lround(options.eps_greedy * n_out));
  const int n_best_out = n_out - n_random;
  std::vector<State> out;
  std::unordered_set<uint64_t> taken;
  for (const auto& [score, h] : ranked) {
    if (static_cast<int>(out.size()) >= n_best_out) break;
    out.push_back(seen.at(h).second);
    taken.insert(h);
  }
  // Random states of the initial population (eps-greedy exploration).
  std::vector<size_t> order(init.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i : order) {
    if (static_cast<int>(out.size()) >= n_out) break;
    const uint64_t h = StepsHash(init[i].steps());
    if (measured.contains(h) || taken.contains(h)) continue;
    out.push_back(init[i]);
    taken.insert(h);
  }
  // Not enough random ones: more of the evolved ones.
  for (const auto& [score, h] : ranked) {
    if (static_cast<int>(out.size()) >= n_out) break;
    if (taken.contains(h)) continue;
    out.push_back(seen.at(h).second);
    taken.insert(h);
  }
  return out;
}

}  // namespace tilesearch::search
