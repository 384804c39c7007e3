// Evolutionary search (see evolutionary_search.h): initial population, generations of selection,
// mutation and crossover with per-item generators on a thread pool, eps-greedy output.
#include "search/evolutionary_search.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "costmodel/features.h"
#include "schedule/lower.h"
#include "search/measure_record.h"
#include "search/mutation.h"

namespace tilesearch::search {
namespace {

using schedule::State;
using Clock = std::chrono::steady_clock;
using Features = std::shared_ptr<const costmodel::StoreFeatures>;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Uniform double in [0, 1) from rng, the same on every platform.
double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

// SplitMix64 finalizer: decorrelates the per-item seeds base + i.
uint64_t MixSeed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Runs fn(i) for every i in [0, n) on up to `threads` threads (the caller's included), items
// handed out one at a time. fn must only write to its own item's slots.
void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t workers = std::min<int64_t>(std::max(1, threads), n);
  if (workers == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (int64_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
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
                             const Target& target, std::mt19937_64& rng,
                             const AnnotationOptions& options, schedule::LoweredKernel* lowered) {
  const double x = Uniform01(rng);
  if (x < 0.90) return MutateTileSize(s, dag, target, rng, options, lowered);
  if (target.is_gpu()) return MutateAutoUnroll(s, dag, target, rng, options, lowered);
  if (x < 0.94) return MutateAutoUnroll(s, dag, target, rng, options, lowered);
  if (x < 0.99) return MutateComputeLocation(s, dag, target, rng, options, lowered);
  return MutateParallel(s, dag, target, rng, options, lowered);
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
  if (o.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("search num_threads must be >= 0 (0 = all cores), got ", o.num_threads));
  }
  const std::pair<const char*, double> probs[] = {
      {"mutation_probability", o.mutation_probability},
      {"crossover_probability", o.crossover_probability},
      {"eps_greedy", o.eps_greedy},
      {"init_measured_ratio", o.init_measured_ratio},
      {"max_family_fraction", o.max_family_fraction}};
  for (const auto& [name, p] : probs) {
    if (!(p >= 0 && p <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be in [0, 1], got ", p));
    }
  }
  return absl::OkStatus();
}

// A member of the population: the state, its StepsHash and its features (null: none, the state
// does not lower or its features failed; it scores -infinity).
struct Candidate {
  State state;
  uint64_t hash = 0;
  Features features;
  uint64_t structure = 0;  // StructureHash: crossover partners share it
};

// Features of a lowered state, as costmodel::ExtractStateFeatures computes them (each stage's
// auto_unroll_max_step attached to the stores of its buffer) without lowering again.
Features FeaturesOf(const State& s, const schedule::LoweredKernel& kernel,
                    const Target& target) {
  costmodel::FeatureOptions options;
  for (int i = 0; i < s.num_stages(); ++i) {
    const schedule::Stage& stage = s.stage(i);
    if (stage.auto_unroll_max_step > 0) {
      options.auto_unroll_max_step[stage.name()] = stage.auto_unroll_max_step;
    }
  }
  absl::StatusOr<costmodel::StoreFeatures> f =
      costmodel::ExtractFeatures(kernel.nest, target, options);
  if (!f.ok()) return nullptr;
  return std::make_shared<const costmodel::StoreFeatures>(*std::move(f));
}

// The result of one work item on a worker.
struct ItemResult {
  std::optional<Candidate> candidate;
  double work_cpu_s = 0;      // annotation or mutation, with replay, lowering and validity
  double features_cpu_s = 0;  // hashing and feature extraction
  bool known = false;         // the child's steps were already known: features reused
};

class Search {
 public:
  Search(const ir::ComputeDAG& dag, const Target& target,
         const std::vector<State>& sketches, costmodel::CostModel& model,
         const SearchOptions& options, SearchProfile& profile)
      : dag_(dag),
        target_(target),
        sketches_(sketches),
        model_(model),
        options_(options),
        profile_(profile) {
    threads_ = options.num_threads > 0
                   ? options.num_threads
                   : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    profile_.threads = threads_;
  }

  // Lowered, hashed and featured copies of measured states (in order; those that no longer lower
  // keep null features).
  std::vector<Candidate> Prepare(const std::vector<State>& states) {
    std::vector<ItemResult> res(states.size());
    ParallelFor(static_cast<int64_t>(states.size()), threads_, [&](int64_t i) {
      const double t0 = ThreadCpuSeconds();
      Candidate c{states[i], StepsHash(states[i].steps()), nullptr,
                  StructureHash(states[i].steps())};
      absl::StatusOr<schedule::LoweredKernel> k = schedule::Lower(dag_, states[i], target_);
      if (k.ok()) c.features = FeaturesOf(states[i], *k, target_);
      res[i].features_cpu_s = ThreadCpuSeconds() - t0;
      res[i].candidate = std::move(c);
    });
    std::vector<Candidate> out;
    for (ItemResult& r : res) {
      Account(r, true);
      Remember(*r.candidate);
      out.push_back(*std::move(r.candidate));
    }
    return out;
  }

  // Up to n distinct (by hash) valid random annotations, in attempt order.
  std::vector<Candidate> SampleInitial(int n, std::mt19937_64& rng) {
    std::vector<Candidate> out;
    if (sketches_.empty() || n <= 0) return out;
    std::unordered_map<uint64_t, bool> taken;
    const int64_t max_attempts =
        int64_t{n} * std::max(1, options_.annotation.max_attempts_per_state);
    int64_t attempts = 0;
    while (static_cast<int>(out.size()) < n && attempts < max_attempts) {
      const int64_t need = n - static_cast<int64_t>(out.size());
      const int64_t batch = std::min(max_attempts - attempts, need + need / 16 + 4);
      const uint64_t base = rng();
      std::vector<ItemResult> res(batch);
      ParallelFor(batch, threads_, [&](int64_t i) {
        std::mt19937_64 item_rng(MixSeed(base + static_cast<uint64_t>(i)));
        const double t0 = ThreadCpuSeconds();
        const State& sketch =
            sketches_[internal::Pick(item_rng, static_cast<int64_t>(sketches_.size()))];
        schedule::LoweredKernel kernel;
        absl::StatusOr<State> s =
            AnnotateSketch(sketch, dag_, target_, item_rng, options_.annotation, &kernel);
        const double t1 = ThreadCpuSeconds();
        res[i].work_cpu_s = t1 - t0;
        if (!s.ok()) return;
        Finish(*std::move(s), kernel, res[i]);
        res[i].features_cpu_s = ThreadCpuSeconds() - t1;
      });
      attempts += batch;
      profile_.annotation_attempts += batch;
      int added = 0;
      for (ItemResult& r : res) {
        Account(r, true);
        if (!r.candidate) continue;
        ++profile_.annotation_valid;
        Remember(*r.candidate);
        if (static_cast<int>(out.size()) < n && taken.emplace(r.candidate->hash, true).second) {
          out.push_back(*std::move(r.candidate));
          ++added;
        }
      }
      // A whole batch without a new state: the space is (nearly) exhausted.
      if (added == 0) break;
    }
    return out;
  }

  // Scores of `pop` (-infinity without features), predicting only states not scored before in
  // this call, in order of first appearance.
  absl::StatusOr<std::vector<double>> Score(const std::vector<Candidate>& pop) {
    const Clock::time_point t0 = Clock::now();
    std::vector<costmodel::ProgramFeatures> programs;
    std::vector<uint64_t> hashes;
    std::unordered_map<uint64_t, bool> pending;
    for (const Candidate& c : pop) {
      if (!c.features || scores_.contains(c.hash) || !pending.emplace(c.hash, true).second) {
        continue;
      }
      programs.push_back(costmodel::ProgramFeatures{*c.features});
      hashes.push_back(c.hash);
    }
    if (!programs.empty()) {
      ASSIGN_OR_RETURN(std::vector<double> s, model_.Predict(programs));
      if (s.size() != programs.size()) {
        return absl::InternalError(absl::StrCat("cost model returned ", s.size(), " scores for ",
                                                programs.size(), " programs"));
      }
      for (size_t i = 0; i < s.size(); ++i) scores_[hashes[i]] = s[i];
      profile_.predicted += static_cast<int64_t>(programs.size());
    }
    std::vector<double> out;
    out.reserve(pop.size());
    for (const Candidate& c : pop) {
      auto it = c.features ? scores_.find(c.hash) : scores_.end();
      out.push_back(it == scores_.end() ? -std::numeric_limits<double>::infinity() : it->second);
    }
    profile_.predict_s += SecondsSince(t0);
    return out;
  }

  // The next generation: fitness-proportional selection, then mutation / crossover / copy.
  std::vector<Candidate> Evolve(const std::vector<Candidate>& pop,
                                const std::vector<double>& scores, std::mt19937_64& rng) {
    enum class Op : uint8_t { kCopy, kMutate, kCrossover };
    struct Item {
      size_t parent = 0;
      size_t other = 0;
      Op op = Op::kCopy;
      uint64_t seed = 0;
    };
    const FitnessSampler sampler(scores);
    std::unordered_map<uint64_t, std::vector<size_t>> groups;  // structure → members
    for (size_t i = 0; i < pop.size(); ++i) groups[pop[i].structure].push_back(i);
    // A crossover partner: another state of the parent's structure, drawn by fitness (a few
    // tries), else uniformly among that structure's members; none (a structure of one state):
    // -1, and the parent is mutated instead.
    auto partner = [&](size_t parent) -> int64_t {
      const Candidate& p = pop[parent];
      for (int k = 0; k < 8; ++k) {
        const size_t o = sampler.Draw(rng);
        if (pop[o].structure == p.structure && pop[o].hash != p.hash) return o;
      }
      const std::vector<size_t>& g = groups[p.structure];
      const size_t o = g[internal::Pick(rng, static_cast<int64_t>(g.size()))];
      return pop[o].hash != p.hash ? static_cast<int64_t>(o) : -1;
    };
    const int population = options_.population;
    std::vector<Candidate> next;
    next.reserve(population);
    const int64_t max_attempts = int64_t{4} * population;
    int64_t attempts = 0;
    while (static_cast<int>(next.size()) < population && attempts < max_attempts) {
      const int64_t batch =
          std::min(max_attempts - attempts, static_cast<int64_t>(population - next.size()));
      // All draws of the caller's generator happen here, in item order.
      std::vector<Item> items(batch);
      for (Item& it : items) {
        it.parent = sampler.Draw(rng);
        const double x = Uniform01(rng);
        if (x < options_.mutation_probability) {
          it.op = Op::kMutate;
        } else if (x < options_.mutation_probability +
                           (1 - options_.mutation_probability) * options_.crossover_probability) {
          const int64_t other = partner(it.parent);
          it.op = other >= 0 ? Op::kCrossover : Op::kMutate;
          it.other = other >= 0 ? static_cast<size_t>(other) : 0;
        }
        it.seed = rng();
      }
      std::vector<ItemResult> res(batch);
      ParallelFor(batch, threads_, [&](int64_t i) {
        const Item& it = items[i];
        if (it.op == Op::kCopy) {
          res[i].candidate = pop[it.parent];
          return;
        }
        std::mt19937_64 item_rng(it.seed);
        const double t0 = ThreadCpuSeconds();
        schedule::LoweredKernel kernel;
        absl::StatusOr<State> child =
            it.op == Op::kMutate
                ? Mutate(pop[it.parent].state, dag_, target_, item_rng, options_.annotation,
                         &kernel)
                : CrossoverTileSizes(pop[it.parent].state, pop[it.other].state, dag_, target_,
                                     item_rng, options_.annotation, &kernel);
        const double t1 = ThreadCpuSeconds();
        res[i].work_cpu_s = t1 - t0;
        if (!child.ok()) return;  // failed mutations are discarded
        Finish(*std::move(child), kernel, res[i]);
        res[i].features_cpu_s = ThreadCpuSeconds() - t1;
      });
      attempts += batch;
      for (int64_t i = 0; i < batch; ++i) {
        ItemResult& r = res[i];
        Account(r, false);
        switch (items[i].op) {
          case Op::kCopy:
            ++profile_.copies;
            break;
          case Op::kMutate:
            ++profile_.mutation_attempts;
            profile_.mutation_valid += r.candidate.has_value();
            break;
          case Op::kCrossover:
            ++profile_.crossover_attempts;
            profile_.crossover_valid += r.candidate.has_value();
            break;
        }
        if (!r.candidate) continue;
        profile_.known_children += r.known;
        Remember(*r.candidate);
        next.push_back(*std::move(r.candidate));
      }
    }
    return next;
  }

 private:
  // Hash and features of a valid new state (features reused when its steps are known).
  void Finish(State s, const schedule::LoweredKernel& kernel, ItemResult& r) const {
    Candidate c;
    c.hash = StepsHash(s.steps());
    c.structure = StructureHash(s.steps());
    // The caches are only written between parallel sections.
    if (auto it = features_.find(c.hash); it != features_.end()) {
      c.features = it->second;
      r.known = true;
    } else {
      c.features = FeaturesOf(s, kernel, target_);
    }
    c.state = std::move(s);
    r.candidate = std::move(c);
  }

  void Remember(const Candidate& c) { features_.emplace(c.hash, c.features); }

  // Adds an item's CPU times to the profile (its work to annotation or to mutation).
  void Account(const ItemResult& r, bool annotation) {
    profile_.features_cpu_s += r.features_cpu_s;
    (annotation ? profile_.annotate_cpu_s : profile_.mutate_cpu_s) += r.work_cpu_s;
  }

  const ir::ComputeDAG& dag_;
  const Target& target_;
  const std::vector<State>& sketches_;
  costmodel::CostModel& model_;
  const SearchOptions& options_;
  SearchProfile& profile_;
  int threads_ = 1;
  std::unordered_map<uint64_t, Features> features_;
  std::unordered_map<uint64_t, double> scores_;
};

}  // namespace

absl::StatusOr<std::vector<double>> ScoreStates(const ir::ComputeDAG& dag,
                                                const Target& target,
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
    const ir::ComputeDAG& dag, const Target& target, const std::vector<State>& sketches,
    costmodel::CostModel& model, const std::unordered_set<uint64_t>& measured,
    const std::vector<State>& best_states, int n_out, const SearchOptions& options,
    std::mt19937_64& rng, SearchProfile* profile) {
  RETURN_IF_ERROR(ValidateOptions(options, n_out));
  SearchProfile local_profile;
  SearchProfile& prof = profile != nullptr ? *profile : local_profile;
  prof = SearchProfile{};
  if (n_out == 0) return std::vector<State>{};
  const Clock::time_point start = Clock::now();
  Search search(dag, target, sketches, model, options, prof);

  // Initial population: the best measured states, then random annotations.
  const int n_best =
      std::min<int>(static_cast<int>(best_states.size()),
                    static_cast<int>(options.init_measured_ratio * options.population));
  const int n_sample = std::max(options.init_min_population, options.population - n_best);
  std::vector<Candidate> population =
      search.Prepare(std::vector<State>(best_states.begin(), best_states.begin() + n_best));
  std::vector<Candidate> init = search.SampleInitial(n_sample, rng);
  population.insert(population.end(), init.begin(), init.end());
  prof.init_s = SecondsSince(start);

  // Best unmeasured states seen over all generations: hash → (score, state).
  std::unordered_map<uint64_t, std::pair<double, State>> seen;
  const int generations =
      model.Name() == "random" ? std::min(options.generations, 2) : options.generations;
  for (int gen = 0; gen <= generations && !population.empty(); ++gen) {
    ASSIGN_OR_RETURN(std::vector<double> scores, search.Score(population));
    for (size_t i = 0; i < population.size(); ++i) {
      if (!std::isfinite(scores[i]) && scores[i] < 0) continue;  // no features
      const uint64_t h = population[i].hash;
      if (measured.contains(h) || seen.contains(h)) continue;
      seen.emplace(h, std::make_pair(scores[i], population[i].state));
    }
    if (gen == generations) break;
    const Clock::time_point t = Clock::now();
    population = search.Evolve(population, scores, rng);
    prof.evolve_s += SecondsSince(t);
  }

  const Clock::time_point rank_start = Clock::now();
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
  // Best ranked first, at most family_cap per tile family; then by rank whatever family.
  const int family_cap =
      std::max(1, static_cast<int>(std::ceil(options.max_family_fraction * n_best_out)));
  std::unordered_map<uint64_t, int> per_family;
  for (const auto& [score, h] : ranked) {
    if (static_cast<int>(out.size()) >= n_best_out) break;
    const State& s = seen.at(h).second;
    int& n_family = per_family[TileFamilyHash(s.steps(), target.is_gpu())];
    if (n_family >= family_cap) continue;
    ++n_family;
    out.push_back(s);
    taken.insert(h);
  }
  for (const auto& [score, h] : ranked) {
    if (static_cast<int>(out.size()) >= n_best_out) break;
    if (taken.contains(h)) continue;
    out.push_back(seen.at(h).second);
    taken.insert(h);
  }
  // Random states of the initial population (eps-greedy exploration).
  std::vector<size_t> order(init.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i : order) {
    if (static_cast<int>(out.size()) >= n_out) break;
    const uint64_t h = init[i].hash;
    if (measured.contains(h) || taken.contains(h)) continue;
    out.push_back(init[i].state);
    taken.insert(h);
  }
  // Not enough random ones: more of the evolved ones.
  for (const auto& [score, h] : ranked) {
    if (static_cast<int>(out.size()) >= n_out) break;
    if (taken.contains(h)) continue;
    out.push_back(seen.at(h).second);
    taken.insert(h);
  }
  prof.rank_s = SecondsSince(rank_start);
  prof.total_s = SecondsSince(start);
  return out;
}

}  // namespace tilesearch::search
