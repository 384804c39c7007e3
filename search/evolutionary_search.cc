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
#include "search/mutation_internal.h"
#include "search/tensor_core_space.h"

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
    const double x = internal::Uniform01(rng) * total_;
    const size_t i = std::upper_bound(prefix_.begin(), prefix_.end(), x) - prefix_.begin();
    return std::min(i, prefix_.size() - 1);
  }

 private:
  std::vector<double> prefix_;
  double total_ = 0;
};

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

// A member of the population: the candidate (state and lowering), its StepsHash and its features
// (null: none, the state has no lowering or its features failed; it scores -infinity).
struct Member {
  Candidate candidate;
  uint64_t hash = 0;
  Features features;
  uint64_t structure = 0;  // StructureHash: crossover partners share it

  const State& state() const { return candidate.state; }
};

// Features of a candidate from its lowering (null without one or when extraction fails).
Features FeaturesOf(const Candidate& c, const Target& target) {
  if (c.lowered == nullptr) return nullptr;
  absl::StatusOr<costmodel::StoreFeatures> f =
      costmodel::ExtractLoweredFeatures(c.state, *c.lowered, target);
  if (!f.ok()) return nullptr;
  return std::make_shared<const costmodel::StoreFeatures>(*std::move(f));
}

// The result of one work item on a worker.
struct ItemResult {
  std::optional<Member> candidate;
  double work_cpu_s = 0;      // annotation or mutation, with replay, lowering and validity
  double features_cpu_s = 0;  // hashing and feature extraction
  bool known = false;         // the child's steps were already known: features reused
};

class Search {
 public:
  Search(const TuneContext& ctx, const std::vector<State>& sketches, costmodel::CostModel& model,
         SearchProfile& profile)
      : cache_(ctx.options().reuse_lowerings ? std::make_shared<LoweringCache>() : nullptr),
        ctx_(ctx.WithLoweringCache(cache_)),
        target_(ctx.target()),
        sketches_(sketches),
        model_(model),
        options_(ctx.options()),
        profile_(profile) {
    const SearchOptions& options = options_;
    threads_ = options.num_threads > 0
                   ? options.num_threads
                   : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    profile_.threads = threads_;
  }

  // Hashed and featured copies of measured candidates (in order; those without a lowering keep
  // null features).
  std::vector<Member> Prepare(const std::vector<Candidate>& best) {
    std::vector<ItemResult> res(best.size());
    InParallel(static_cast<int64_t>(best.size()), [&](int64_t i) {
      const double t0 = ThreadCpuSeconds();
      const std::vector<schedule::Step>& steps = best[i].state.steps();
      Member m{best[i], StepsHash(steps), FeaturesOf(best[i], target_), StructureHash(steps)};
      res[i].features_cpu_s = ThreadCpuSeconds() - t0;
      res[i].candidate = std::move(m);
    });
    std::vector<Member> out;
    for (ItemResult& r : res) {
      Account(r, true);
      Remember(*r.candidate);
      out.push_back(*std::move(r.candidate));
    }
    return out;
  }

  // Up to n distinct (by hash) valid random annotations, in attempt order.
  std::vector<Member> SampleInitial(int n, std::mt19937_64& rng) {
    std::vector<Member> out;
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
      InParallel(batch, [&](int64_t i) {
        TuneContext item = ctx_.Fork(MixSeed(base + static_cast<uint64_t>(i)));
        const double t0 = ThreadCpuSeconds();
        // Tensor-core sketches get options.tensor_core_share of the draws (annotation.h).
        const State& sketch = PickSketch(sketches_, options_.annotation, item.rng());
        absl::StatusOr<Candidate> c = AnnotateSketch(sketch, item);
        const double t1 = ThreadCpuSeconds();
        res[i].work_cpu_s = t1 - t0;
        if (!c.ok()) return;
        Finish(*std::move(c), res[i]);
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
  absl::StatusOr<std::vector<double>> Score(const std::vector<Member>& pop) {
    const Clock::time_point t0 = Clock::now();
    std::vector<costmodel::ProgramFeatures> programs;
    std::vector<uint64_t> hashes;
    std::unordered_map<uint64_t, bool> pending;
    for (const Member& c : pop) {
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
    for (const Member& c : pop) {
      auto it = c.features ? scores_.find(c.hash) : scores_.end();
      out.push_back(it == scores_.end() ? -std::numeric_limits<double>::infinity() : it->second);
    }
    profile_.predict_s += SecondsSince(t0);
    return out;
  }

  // The next generation: fitness-proportional selection, then mutation / crossover / copy.
  std::vector<Member> Evolve(const std::vector<Member>& pop, const std::vector<double>& scores,
                             std::mt19937_64& rng) {
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
      const Member& p = pop[parent];
      for (int k = 0; k < 8; ++k) {
        const size_t o = sampler.Draw(rng);
        if (pop[o].structure == p.structure && pop[o].hash != p.hash) return o;
      }
      const std::vector<size_t>& g = groups[p.structure];
      const size_t o = g[internal::Pick(rng, static_cast<int64_t>(g.size()))];
      return pop[o].hash != p.hash ? static_cast<int64_t>(o) : -1;
    };
    const int population = options_.population;
    std::vector<Member> next;
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
        const double x = internal::Uniform01(rng);
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
      InParallel(batch, [&](int64_t i) {
        const Item& it = items[i];
        if (it.op == Op::kCopy) {
          res[i].candidate = pop[it.parent];
          return;
        }
        TuneContext item = ctx_.Fork(it.seed);
        const double t0 = ThreadCpuSeconds();
        absl::StatusOr<Candidate> child =
            it.op == Op::kMutate
                ? Mutate(pop[it.parent].state(), item)
                : CrossoverTileSizes(pop[it.parent].state(), pop[it.other].state(), item);
        const double t1 = ThreadCpuSeconds();
        res[i].work_cpu_s = t1 - t0;
        if (!child.ok()) return;  // failed mutations are discarded
        Finish(*std::move(child), res[i]);
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
    if (cache_ != nullptr) profile_.lowering_cache_hits = cache_->hits();
    return next;
  }

  // Frees what the call made (thousands of lowered IR trees, states and features) on the worker
  // threads, except what the returned candidates share: dropped by the calling thread alone, as
  // the containers went out of scope, they took a tenth of the call on 2 cores, and a larger
  // share with more cores.
  void Release(std::vector<Member>& population, std::vector<Member>& init,
               std::unordered_map<uint64_t, std::pair<double, Candidate>>& seen) {
    std::vector<Candidate*> candidates;
    std::vector<Features*> features;
    for (std::vector<Member>* members : {&population, &init}) {
      for (Member& m : *members) {
        candidates.push_back(&m.candidate);
        features.push_back(&m.features);
      }
    }
    for (auto& [hash, entry] : seen) candidates.push_back(&entry.second);
    for (auto& [hash, f] : features_) features.push_back(&f);
    std::vector<absl::StatusOr<Candidate>> cached;
    if (cache_ != nullptr) cached = cache_->Take();
    const int64_t n_candidates = static_cast<int64_t>(candidates.size());
    const int64_t n_features = static_cast<int64_t>(features.size());
    InParallel(n_candidates + n_features + static_cast<int64_t>(cached.size()), [&](int64_t i) {
      if (i < n_candidates) {
        *candidates[i] = Candidate{};
      } else if (i < n_candidates + n_features) {
        features[i - n_candidates]->reset();
      } else {
        cached[i - n_candidates - n_features] = Candidate{};
      }
    });
  }

 private:
  // ParallelFor on the search's threads, its wall time added to the profile.
  void InParallel(int64_t n, const std::function<void(int64_t)>& fn) {
    const Clock::time_point t0 = Clock::now();
    ParallelFor(n, threads_, fn);
    profile_.parallel_s += SecondsSince(t0);
  }

  // Hash and features of a valid new state (features reused when its steps are known).
  void Finish(Candidate c, ItemResult& r) const {
    Member m;
    m.hash = StepsHash(c.state.steps());
    m.structure = StructureHash(c.state.steps());
    // The caches are only written between parallel sections.
    if (auto it = features_.find(m.hash); it != features_.end()) {
      m.features = it->second;
      r.known = true;
    } else {
      m.features = FeaturesOf(c, target_);
    }
    m.candidate = std::move(c);
    r.candidate = std::move(m);
  }

  void Remember(const Member& m) { features_.emplace(m.hash, m.features); }

  // Adds an item's CPU times to the profile (its work to annotation or to mutation).
  void Account(const ItemResult& r, bool annotation) {
    profile_.features_cpu_s += r.features_cpu_s;
    (annotation ? profile_.annotate_cpu_s : profile_.mutate_cpu_s) += r.work_cpu_s;
  }

  // Outcomes of the edits tried in this call (null: options.reuse_lowerings is off); the
  // per-item contexts (ctx_.Fork) share it.
  std::shared_ptr<LoweringCache> cache_;
  const TuneContext ctx_;
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

std::vector<costmodel::ProgramFeatures> CandidateFeatures(const std::vector<Candidate>& candidates,
                                                          const TuneContext& ctx) {
  std::vector<costmodel::ProgramFeatures> programs(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].lowered == nullptr) continue;
    absl::StatusOr<costmodel::StoreFeatures> f = costmodel::ExtractLoweredFeatures(
        candidates[i].state, *candidates[i].lowered, ctx.target());
    if (f.ok()) programs[i].stores = *std::move(f);
  }
  return programs;
}

absl::StatusOr<std::vector<double>> ScoreCandidates(const std::vector<Candidate>& candidates,
                                                    const TuneContext& ctx,
                                                    costmodel::CostModel& model) {
  return model.Predict(CandidateFeatures(candidates, ctx));
}

absl::StatusOr<std::vector<Candidate>> EvolutionarySearch(
    TuneContext& ctx, const std::vector<State>& sketches, costmodel::CostModel& model,
    const std::unordered_set<uint64_t>& measured, const std::vector<Candidate>& best, int n_out,
    SearchProfile* profile) {
  const SearchOptions& options = ctx.options();
  const Target& target = ctx.target();
  std::mt19937_64& rng = ctx.rng();
  RETURN_IF_ERROR(ValidateOptions(options, n_out));
  SearchProfile local_profile;
  SearchProfile& prof = profile != nullptr ? *profile : local_profile;
  prof = SearchProfile{};
  if (n_out == 0) return std::vector<Candidate>{};
  const Clock::time_point start = Clock::now();
  Search search(ctx, sketches, model, prof);

  // Initial population: the best measured states, then random annotations.
  const int n_best =
      std::min<int>(static_cast<int>(best.size()),
                    static_cast<int>(options.init_measured_ratio * options.population));
  const int n_sample = std::max(options.init_min_population, options.population - n_best);
  std::vector<Member> population =
      search.Prepare(std::vector<Candidate>(best.begin(), best.begin() + n_best));
  std::vector<Member> init = search.SampleInitial(n_sample, rng);
  population.insert(population.end(), init.begin(), init.end());
  prof.init_s = SecondsSince(start);

  // Best unmeasured states seen over all generations: hash → (score, candidate).
  std::unordered_map<uint64_t, std::pair<double, Candidate>> seen;
  const int generations =
      model.Name() == "random" ? std::min(options.generations, 2) : options.generations;
  for (int gen = 0; gen <= generations && !population.empty(); ++gen) {
    ASSIGN_OR_RETURN(std::vector<double> scores, search.Score(population));
    for (size_t i = 0; i < population.size(); ++i) {
      if (!std::isfinite(scores[i]) && scores[i] < 0) continue;  // no features
      const uint64_t h = population[i].hash;
      if (measured.contains(h) || seen.contains(h)) continue;
      seen.emplace(h, std::make_pair(scores[i], population[i].candidate));
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
  std::vector<Candidate> out;
  std::unordered_set<uint64_t> taken;
  // Best ranked first, at most family_cap per tile family; then by rank whatever family.
  const int family_cap =
      std::max(1, static_cast<int>(std::ceil(options.max_family_fraction * n_best_out)));
  std::unordered_map<uint64_t, int> per_family;
  // A sketch family (tensor-core or SIMT) drawn for less than half of the fresh states also
  // gets at most that share of these picks (the tuner's measured shares, search/
  // sketch_family.h): an online update from a round of one family's records can score states of
  // the other family arbitrarily (a pairwise objective constrains no offset between states it
  // has no pairs of), and did put 47 SIMT states among 48 picks of an fp16 matmul whose best SIMT
  // state was 15x slower (bench/NOTES.md).
  const double tc_share = ctx.annotation().tensor_core_share;
  const auto sketch_family_cap = [&](bool tensor_core) {
    const double share = tensor_core ? tc_share : 1 - tc_share;
    return share < 0.5 ? std::max(1, static_cast<int>(std::ceil(share * n_best_out))) : n_best_out;
  };
  const int cap_of[2] = {sketch_family_cap(false), sketch_family_cap(true)};
  int per_sketch_family[2] = {0, 0};
  for (const auto& [score, h] : ranked) {
    if (static_cast<int>(out.size()) >= n_best_out) break;
    const Candidate& c = seen.at(h).second;
    const int tensor_core = HasTensorCoreStep(c.state) ? 1 : 0;
    if (per_sketch_family[tensor_core] >= cap_of[tensor_core]) continue;
    int& n_family = per_family[TileFamilyHash(c.state.steps(), target.is_gpu())];
    if (n_family >= family_cap) continue;
    ++n_family;
    ++per_sketch_family[tensor_core];
    out.push_back(c);
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
    out.push_back(init[i].candidate);
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
  search.Release(population, init, seen);
  prof.total_s = SecondsSince(start);
  return out;
}

}  // namespace tilesearch::search
