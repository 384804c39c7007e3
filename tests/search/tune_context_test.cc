// TuneContext: the task it carries, its generator and Fork, and LowerCandidate (the one lowering of
// a search candidate) against schedule::Lower.
#include "search/tune_context.h"

#include <random>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "schedule/lower.h"
#include "search/sketch.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::State;
using tilesearch::testing::IsOk;

TEST(TuneContext, CarriesTheTaskAndOptions) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({16, 12}, {12, 20}));
  SearchOptions options;
  options.population = 7;
  options.annotation.max_innermost_split_factor = 8;
  TuneContext ctx(dag, Target::H200(), options, /*seed=*/5);
  EXPECT_EQ(ctx.workload_key(), dag.WorkloadKey());
  EXPECT_EQ(ctx.target().ToString(), Target::H200().ToString());
  EXPECT_EQ(ctx.dag().num_stages(), dag.num_stages());
  EXPECT_EQ(ctx.options().population, 7);
  EXPECT_EQ(ctx.annotation().max_innermost_split_factor, 8);
  // A copy shares the task; Fork seeds a generator of its own.
  TuneContext copy = ctx;
  EXPECT_EQ(&copy.task(), &ctx.task());
  TuneContext fork = ctx.Fork(99);
  EXPECT_EQ(&fork.task(), &ctx.task());
  std::mt19937_64 want5(5), want99(99);
  EXPECT_EQ(ctx.rng()(), want5());
  EXPECT_EQ(fork.rng()(), want99());
}

TEST(TuneContext, LowerCandidateKeepsTheLoweringOfTheState) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}));
  for (const Target& target : {Target::H200(), Target::HostCpu()}) {
    TuneContext ctx(dag, target, AnnotationOptions{}, /*seed=*/2);
    absl::StatusOr<std::vector<State>> sketches = GenerateSketches(ctx);
    ASSERT_THAT(sketches, IsOk());
    std::vector<State> pop = SampleInitialPopulation(*sketches, 4, ctx);
    ASSERT_FALSE(pop.empty());
    for (const State& s : pop) {
      absl::StatusOr<Candidate> c = LowerCandidate(s, ctx);
      ASSERT_THAT(c, IsOk());
      ASSERT_NE(c->lowered, nullptr);
      absl::StatusOr<schedule::LoweredKernel> k = schedule::Lower(dag, s, target);
      ASSERT_THAT(k, IsOk());
      EXPECT_EQ(ir::ToString(c->lowered->nest), ir::ToString(k->nest));
      EXPECT_EQ(c->lowered->launches.size(), k->launches.size());
      EXPECT_EQ(c->state.steps(), s.steps());
    }
  }
  // A sketch with unfilled tile sizes does not lower.
  TuneContext ctx(dag, Target::HostCpu());
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(ctx);
  ASSERT_THAT(sketches, IsOk());
  EXPECT_FALSE(LowerCandidate((*sketches)[0], ctx).ok());
}

}  // namespace
}  // namespace tilesearch::search
