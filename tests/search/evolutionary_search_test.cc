// Evolutionary search: the output does not depend on the worker thread count; outputs are
// distinct, unmeasured, valid programs, the best predicted first; the profile's counts add up;
// crossover yields valid children; option errors. Small matmuls keep each search well under a
// second on 2 cores.
#include "search/evolutionary_search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/measure_record.h"
#include "search/mutation.h"
#include "search/sketch.h"
#include "tests/search/feature_sum_model.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::State;
using testing::FeatureSumModel;
using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

SearchOptions SmallOptions(int threads) {
  SearchOptions o;
  o.population = 48;
  o.generations = 3;
  o.init_min_population = 16;
  o.crossover_probability = 0.3;
  o.num_threads = threads;
  return o;
}

std::vector<std::string> StepTexts(const std::vector<State>& states) {
  std::vector<std::string> out;
  for (const State& s : states) {
    std::string t;
    for (const auto& step : s.steps()) t += schedule::StepToString(step) + ";";
    out.push_back(t);
  }
  return out;
}

struct Case {
  std::string name;
  ir::ComputeDAG dag;
  Target target;
};

std::vector<Case> Cases() {
  return {
      {"matmul_cuda", testing::MustBuild(ir::MatmulDAG({64, 64}, {64, 64})), Target::H200()},
      {"matmul_cpu", testing::MustBuild(ir::MatmulDAG({32, 48}, {48, 40})), Target::HostCpu()},
  };
}

TEST(EvolutionarySearch, OutputDoesNotDependOnTheThreadCount) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto sketches = GenerateSketches(TuneContext(c.dag, c.target));
    ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
    std::vector<std::string> reference;
    for (int threads : {1, 2, 5}) {
      for (bool random_model : {false, true}) {
        FeatureSumModel sum_model;
        costmodel::RandomModel random(99);
        costmodel::CostModel& model =
            random_model ? static_cast<costmodel::CostModel&>(random) : sum_model;
        std::mt19937_64 rng(12345);
        auto out = testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, 16,
                                            SmallOptions(threads), rng);
        ASSERT_THAT(out.status(), tilesearch::testing::IsOk());
        ASSERT_FALSE(out->empty());
        std::vector<std::string> texts = StepTexts(*out);
        // The caller's generator advanced the same way too.
        texts.push_back(std::to_string(rng()));
        const size_t slot = random_model ? 1 : 0;
        if (reference.size() <= slot) {
          reference.resize(slot + 1);
        }
        std::string joined;
        for (const auto& t : texts) joined += t + "\n";
        if (threads == 1) {
          reference[slot] = joined;
        } else {
          EXPECT_EQ(joined, reference[slot]) << threads << " threads, random=" << random_model;
        }
      }
    }
  }
}

// The lowering cache (SearchOptions::reuse_lowerings) changes nothing: the same candidates in
// the same order, each carrying the lowering that lowering its steps afresh gives, scored the
// same; and the cached run did reuse lowerings (a population of 48 over 3 generations repeats
// edits).
TEST(EvolutionarySearch, ReusedLoweringsChangeNothing) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto sketches = GenerateSketches(TuneContext(c.dag, c.target));
    ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
    std::vector<std::vector<Candidate>> outs;
    for (bool reuse : {false, true}) {
      SearchOptions options = SmallOptions(2);
      options.reuse_lowerings = reuse;
      TuneContext ctx(c.dag, c.target, options, /*seed=*/7);
      FeatureSumModel model;
      SearchProfile profile;
      auto out = EvolutionarySearch(ctx, *sketches, model, {}, {}, 16, &profile);
      ASSERT_THAT(out.status(), tilesearch::testing::IsOk());
      EXPECT_EQ(profile.lowering_cache_hits > 0, reuse);
      outs.push_back(*std::move(out));
    }
    ASSERT_FALSE(outs[1].empty());
    EXPECT_EQ(StepTexts(testing::StatesOf(outs[0])), StepTexts(testing::StatesOf(outs[1])));
    for (const Candidate& cand : outs[1]) {
      ASSERT_NE(cand.lowered, nullptr);
      auto fresh = schedule::Lower(c.dag, schedule::ReplaySteps(c.dag, cand.state.steps()).value(),
                                   c.target);
      ASSERT_THAT(fresh.status(), tilesearch::testing::IsOk());
      EXPECT_EQ(ir::ToString(cand.lowered->nest), ir::ToString(fresh->nest));
    }
    FeatureSumModel model;
    TuneContext ctx(c.dag, c.target);
    auto plain = ScoreCandidates(outs[0], ctx, model);
    auto reused = ScoreCandidates(outs[1], ctx, model);
    ASSERT_THAT(plain.status(), tilesearch::testing::IsOk());
    ASSERT_THAT(reused.status(), tilesearch::testing::IsOk());
    EXPECT_EQ(*plain, *reused);
  }
}

TEST(EvolutionarySearch, OutputsAreDistinctUnmeasuredValidAndBestPredictedFirst) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto sketches = GenerateSketches(TuneContext(c.dag, c.target));
    ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
    FeatureSumModel model;
    SearchOptions options = SmallOptions(2);
    options.eps_greedy = 0.25;
    options.max_family_fraction = 1;  // pure rank order (the family cap is tested below)
    std::mt19937_64 rng(7);
    auto first =
        testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, 8, options, rng);
    ASSERT_THAT(first.status(), tilesearch::testing::IsOk());
    ASSERT_EQ(first->size(), 8u);
    // The first round's states are now measured; the second round must avoid them.
    std::unordered_set<uint64_t> measured;
    for (const State& s : *first) measured.insert(StepsHash(s.steps()));
    ASSERT_EQ(measured.size(), first->size());
    auto out = testing::EvolveInContext(c.dag, c.target, *sketches, model, measured, *first, 8,
                                        options, rng);
    ASSERT_THAT(out.status(), tilesearch::testing::IsOk());
    ASSERT_EQ(out->size(), 8u);
    std::unordered_set<uint64_t> hashes;
    for (const State& s : *out) {
      const uint64_t h = StepsHash(s.steps());
      EXPECT_FALSE(measured.contains(h));
      EXPECT_TRUE(hashes.insert(h).second) << "duplicate output";
      EXPECT_THAT(schedule::Lower(c.dag, s, c.target).status(), tilesearch::testing::IsOk());
    }
    // The (1 - eps) · n = 6 evolved states come best first: rescored from scratch
    // (ExtractStateFeatures + Predict), their scores do not increase.
    auto scores = testing::ScoreInContext(c.dag, c.target, *out, model);
    ASSERT_THAT(scores.status(), tilesearch::testing::IsOk());
    for (int i = 1; i < 6; ++i) EXPECT_GE((*scores)[i - 1], (*scores)[i]) << i;
  }
}

TEST(EvolutionarySearch, ProfileCountsAddUpAndCrossoverYieldsValidChildren) {
  const Case c = Cases()[0];
  auto sketches = GenerateSketches(TuneContext(c.dag, c.target));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  FeatureSumModel model;
  SearchOptions options = SmallOptions(3);
  options.mutation_probability = 0.5;
  options.crossover_probability = 0.8;
  std::mt19937_64 rng(3);
  SearchProfile profile;
  auto out = testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, 8, options, rng,
                                      &profile);
  ASSERT_THAT(out.status(), tilesearch::testing::IsOk());
  EXPECT_EQ(profile.threads, 3);
  EXPECT_GE(profile.annotation_valid, options.population);
  EXPECT_LE(profile.annotation_valid, profile.annotation_attempts);
  // Every generation fills the population; each child is a copy or a valid mutation/crossover.
  EXPECT_EQ(profile.copies + profile.mutation_valid + profile.crossover_valid,
            int64_t{options.generations} * options.population);
  EXPECT_LE(profile.mutation_valid, profile.mutation_attempts);
  EXPECT_GT(profile.crossover_attempts, 0);
  EXPECT_GT(profile.crossover_valid, 0);
  EXPECT_LE(profile.crossover_valid, profile.crossover_attempts);
  // Each distinct program is predicted once.
  EXPECT_GE(profile.predicted, options.population);
  EXPECT_LE(profile.predicted,
            profile.annotation_valid + profile.mutation_valid + profile.crossover_valid);
  EXPECT_GE(profile.total_s, profile.init_s);
  EXPECT_GE(profile.total_s, profile.evolve_s);
  EXPECT_GT(profile.annotate_cpu_s + profile.mutate_cpu_s + profile.features_cpu_s, 0);
}

TEST(EvolutionarySearch, CrossoverChildrenAreMostlyValidOnCudaAndCpu) {
  // Partners share the parent's structure and decisions mix one by one: most crossovers give a
  // valid child (by stage on cpu, with a random partner, none did). The SIMT sketches only: a
  // tensor-core state is one decision step, which crossover cannot mix (a child would equal a
  // parent), so its share of the population would only thin out the partners.
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    SketchOptions simt;
    simt.tensor_cores = false;
    auto sketches = GenerateSketches(TuneContext(c.dag, c.target, {}, 0, simt));
    ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
    FeatureSumModel model;
    SearchOptions options = SmallOptions(2);
    options.generations = 2;
    options.mutation_probability = 0.5;
    options.crossover_probability = 1;
    std::mt19937_64 rng(17);
    SearchProfile profile;
    auto out = testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, 8, options, rng,
                                        &profile);
    ASSERT_THAT(out.status(), tilesearch::testing::IsOk());
    EXPECT_GE(profile.crossover_attempts, options.population / 4);
    EXPECT_GE(profile.crossover_valid * 4, profile.crossover_attempts * 3)
        << profile.crossover_valid << " of " << profile.crossover_attempts;
  }
}

// The GPU tile family of a state: (block span, threads) per multi-level space split, and
// (-(block m, n), warp m, n and wgmma) for a tensor_core step.
std::vector<std::pair<int64_t, int64_t>> FamilyOf(const State& s) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& step : s.steps()) {
    if (const auto* tc = std::get_if<schedule::TensorCoreStep>(&step)) {
      out.emplace_back(-(tc->block_m * 100000 + tc->block_n),
                       (tc->warp_m * 100000 + tc->warp_n) * 2 + (tc->warpgroup ? 1 : 0));
      continue;
    }
    const auto* sp = std::get_if<schedule::SplitStep>(&step);
    if (sp == nullptr || sp->lengths.size() < 3) continue;
    int64_t span = 1;
    for (const auto& l : sp->lengths) span *= *l;
    out.emplace_back(span, *sp->lengths[1]);
  }
  return out;
}

TEST(EvolutionarySearch, RankedPicksAreSpreadOverTileFamilies) {
  const Case c{"matmul_cuda", testing::MustBuild(ir::MatmulDAG({256, 256}, {256, 256})),
               Target::H200()};
  // SIMT sketches: their families are the multi-level splits' (tensor-core tiles: below).
  auto sketches = GenerateSketches(testing::SimtContext(c.dag, c.target));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  SearchOptions options = SmallOptions(2);
  options.population = 96;
  options.eps_greedy = 0;
  // The whole ranking without a cap (the same seed gives the same population and scores). The
  // sum stops before the launch features: with them this ranking's top 16 spreads over families.
  FeatureSumModel model(costmodel::kLaunchOffset);
  options.max_family_fraction = 1;
  std::mt19937_64 rng_all(21);
  auto ranked =
      testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, 100000, options, rng_all);
  ASSERT_THAT(ranked.status(), tilesearch::testing::IsOk());
  const int n = 16;
  ASSERT_GT(static_cast<int>(ranked->size()), 2 * n);
  // Naive reference of the capped pick: rank order, at most 4 (0.25 · 16) per family, then the
  // rest by rank.
  std::map<std::vector<std::pair<int64_t, int64_t>>, int> count;
  std::vector<std::string> expected;
  std::set<size_t> used;
  for (size_t i = 0; i < ranked->size() && expected.size() < n; ++i) {
    if (count[FamilyOf((*ranked)[i])]++ >= 4) continue;
    expected.push_back(StepTexts({(*ranked)[i]})[0]);
    used.insert(i);
  }
  for (size_t i = 0; i < ranked->size() && expected.size() < n; ++i) {
    if (!used.contains(i)) expected.push_back(StepTexts({(*ranked)[i]})[0]);
  }
  // The uncapped top 16 must crowd some family, or this test could not fail.
  std::map<std::vector<std::pair<int64_t, int64_t>>, int> top;
  int most = 0;
  for (int i = 0; i < n; ++i) most = std::max(most, ++top[FamilyOf((*ranked)[i])]);
  ASSERT_GT(most, 4) << "the uncapped top 16 spread over families already";

  options.max_family_fraction = 0.25;
  std::mt19937_64 rng(21);
  auto capped =
      testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, n, options, rng);
  ASSERT_THAT(capped.status(), tilesearch::testing::IsOk());
  EXPECT_EQ(StepTexts(*capped), expected);
}

TEST(EvolutionarySearch, TileFamilyHashIgnoresTheArrangementInsideAThreadTile) {
  // GPU split lengths [vthread, thread, inner, inner]: same block span and threads → same family.
  auto split = [](int64_t e, std::vector<int64_t> l) {
    schedule::SplitStep sp;
    sp.stage_id = 2;
    sp.iter_id = 0;
    sp.extent = e;
    for (int64_t v : l) sp.lengths.push_back(v);
    return schedule::Step(sp);
  };
  const uint64_t a = TileFamilyHash({split(4096, {2, 16, 1, 4})}, true);
  EXPECT_EQ(a, TileFamilyHash({split(4096, {1, 16, 2, 4})}, true));
  EXPECT_EQ(a, TileFamilyHash({split(4096, {1, 16, 8, 1})}, true));
  EXPECT_NE(a, TileFamilyHash({split(4096, {2, 32, 1, 2})}, true));  // more threads
  EXPECT_NE(a, TileFamilyHash({split(4096, {2, 16, 1, 8})}, true));  // bigger block tile
  // Two-length (reduction) splits do not count.
  EXPECT_EQ(a, TileFamilyHash({split(4096, {2, 16, 1, 4}), split(4096, {8, 4})}, true));
}

TEST(EvolutionarySearch, TileFamilyHashSeparatesTensorCoreTilesButNotTheirDepthOrPipeline) {
  schedule::TensorCoreStep t;
  t.stage_id = 2;
  t.kind = "bf16";
  t.warpgroup = true;
  t.block_m = 128;
  t.block_n = 256;
  t.warp_m = 64;
  t.warp_n = 256;
  t.block_k = 64;
  t.pipeline = 4;
  const uint64_t a = TileFamilyHash({t}, true);
  schedule::TensorCoreStep same_tiles = t;
  same_tiles.block_k = 32;
  same_tiles.pipeline = 6;
  same_tiles.raster = 8;
  same_tiles.split_k = 2;
  EXPECT_EQ(a, TileFamilyHash({same_tiles}, true));
  schedule::TensorCoreStep other = t;
  other.block_n = 128;
  other.warp_n = 128;
  EXPECT_NE(a, TileFamilyHash({other}, true));  // another block tile
  other = t;
  other.warp_m = 128;
  other.warp_n = 128;
  EXPECT_NE(a, TileFamilyHash({other}, true));  // another warpgroup tile
  other = t;
  other.warpgroup = false;
  EXPECT_NE(a, TileFamilyHash({other}, true));  // mma.sync
  other = t;
  other.repack = true;
  EXPECT_NE(a, TileFamilyHash({other}, true));  // repacked operands: other kernels
  // Neither is the family of the states without splits or tensor-core steps.
  EXPECT_NE(a, TileFamilyHash({}, true));
}

TEST(EvolutionarySearch, OptionErrors) {
  const Case c = Cases()[0];
  auto sketches = GenerateSketches(TuneContext(c.dag, c.target));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  costmodel::RandomModel model(1);
  std::mt19937_64 rng(1);
  SearchOptions o = SmallOptions(-1);
  EXPECT_THAT(
      testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, 4, o, rng).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_threads must be >= 0")));
  o = SmallOptions(1);
  o.crossover_probability = 1.5;
  EXPECT_THAT(
      testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, 4, o, rng).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("crossover_probability must be in [0, 1], got 1.5")));
  o = SmallOptions(1);
  o.max_family_fraction = -0.5;
  EXPECT_THAT(
      testing::EvolveInContext(c.dag, c.target, *sketches, model, {}, {}, 4, o, rng).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("max_family_fraction must be in [0, 1], got -0.5")));
}

}  // namespace
}  // namespace tilesearch::search
