// Mutations and crossover: children lower, keep every split's tiled extent, differ from their
// parents, and compute what the naive program computes; inapplicable mutations fail cleanly.
#include "search/mutation.h"

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/apply_step.h"
#include "search/annotation.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::IteratorAnnotation;
using schedule::State;
using ::testing::HasSubstr;
using tilesearch::testing::StatusIs;

std::vector<testing::Workload> MutationWorkloads() {
  ir::Conv2dParams pad1;
  pad1.padding = {1, 1};
  return {
      {"matmul", testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}))},
      {"conv2d", testing::MustBuild(ir::Conv2dNchwPaddedDAG({1, 4, 6, 6}, {8, 4, 3, 3},
                                                            ir::ScalarType::kFloat32, pad1))},
      {"softmax", testing::MustBuild(ir::SoftmaxDAG({4, 96}))},
  };
}

// Per split step with a known extent (thread-count splits excepted: their count is redrawn): the
// product of all parts (the outer rest, extent / product, included) when the split divides its
// extent, else the product of its explicit lengths (a non-divisible tiling keeps those).
std::vector<int64_t> TiledExtents(const State& s) {
  std::vector<int64_t> out;
  for (int i = 0; i < static_cast<int>(s.steps().size()); ++i) {
    const auto* sp = std::get_if<schedule::SplitStep>(&s.steps()[i]);
    if (sp == nullptr || sp->extent <= 0 || internal::IsThreadSplit(s.steps(), i)) continue;
    int64_t prod = 1;
    for (const auto& l : sp->lengths) prod *= *l;
    out.push_back(sp->extent % prod == 0 ? (sp->extent / prod) * prod : -prod);
  }
  return out;
}

bool SameSteps(const State& a, const State& b) { return a.steps() == b.steps(); }

using MutateFn = absl::StatusOr<Candidate> (*)(const State&, TuneContext&);

int CheckMutation(const char* name, MutateFn fn, const Target& target, bool keeps_tiles) {
  int ok = 0;
  for (const auto& w : MutationWorkloads()) {
    TuneContext ctx(w.dag, target, AnnotationOptions{}, /*seed=*/11);
    auto sketches = GenerateSketches(ctx);
    EXPECT_TRUE(sketches.ok());
    std::vector<State> pop = SampleInitialPopulation(*sketches, 12, ctx);
    for (const State& parent : pop) {
      absl::StatusOr<State> child = testing::StateOf(fn(parent, ctx));
      if (!child.ok()) {
        // Inapplicable or no valid child: a clean failure, never a crash.
        EXPECT_NE(child.status().code(), absl::StatusCode::kInternal) << child.status();
        continue;
      }
      SCOPED_TRACE(std::string(name) + " " + w.name + " on " + target.ToString());
      EXPECT_FALSE(SameSteps(*child, parent));
      if (keeps_tiles) {
        EXPECT_EQ(TiledExtents(*child), TiledExtents(parent));
      }
      // The child replays from its own steps to the same program.
      auto replayed = schedule::ReplaySteps(w.dag, child->steps());
      EXPECT_TRUE(replayed.ok()) << replayed.status();
      if (!replayed.ok()) continue;
      EXPECT_EQ(replayed->ToString(), child->ToString());
      schedule::testing::ExpectMatchesReference(w.dag, *child, target, /*exact=*/false, ok);
      ++ok;
    }
  }
  return ok;
}

TEST(Mutation, RuleTableHasTvmWeights) {
  // TVM v0.19 sketch_policy.cc: CPU mutation weights tile size 0.90, auto unroll 0.04, compute
  // location 0.05, parallel 0.01; GPU tile size 0.90, auto unroll 0.10.
  const std::map<std::string, std::pair<int, int>> want = {{"MutateTileSize", {900, 900}},
                                                           {"MutateAutoUnroll", {40, 100}},
                                                           {"MutateComputeLocation", {50, 0}},
                                                           {"MutateParallel", {10, 0}}};
  std::map<std::string, std::pair<int, int>> got;
  for (const WeightedMutationRule& r : MutationRules()) {
    got[r.rule->name()] = {r.cpu_weight, r.gpu_weight};
  }
  EXPECT_EQ(got, want);
}

TEST(Mutation, TileSizeKeepsTheTiledExtents) {
  EXPECT_GE(CheckMutation("MutateTileSize", &MutateTileSize, Target::H200(), true), 20);
  EXPECT_GE(CheckMutation("MutateTileSize", &MutateTileSize, Target::HostCpu(), true), 20);
}

TEST(Mutation, AutoUnrollChangesAPragma) {
  EXPECT_GE(CheckMutation("MutateAutoUnroll", &MutateAutoUnroll, Target::H200(), true), 20);
  EXPECT_GE(CheckMutation("MutateAutoUnroll", &MutateAutoUnroll, Target::HostCpu(), true), 20);
}

TEST(Mutation, ParallelChangesTheFusedParallelLoop) {
  EXPECT_GE(CheckMutation("MutateParallel", &MutateParallel, Target::HostCpu(), true), 5);
}

TEST(Mutation, ComputeLocationMovesAnUntiledStage) {
  // conv2d's padding stage is not strictly inlineable on cpu: it is computed at the conv's loops.
  EXPECT_GE(CheckMutation("MutateComputeLocation", &MutateComputeLocation, Target::HostCpu(), true),
            3);
}

TEST(Mutation, CpuOnlyMutationsRefuseGpuStates) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}));
  TuneContext ctx(dag, Target::H200(), AnnotationOptions{}, /*seed=*/3);
  auto sketches = GenerateSketches(ctx);
  ASSERT_TRUE(sketches.ok());
  auto pop = SampleInitialPopulation(*sketches, 1, ctx);
  ASSERT_EQ(pop.size(), 1u);
  EXPECT_THAT(MutateParallel(pop[0], ctx),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cpu only")));
  EXPECT_THAT(MutateComputeLocation(pop[0], ctx),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cpu only")));
  // A state without steps has nothing to mutate.
  State bare = State::Initial(dag);
  TuneContext cpu(dag, Target::HostCpu(), AnnotationOptions{}, /*seed=*/3);
  EXPECT_THAT(MutateTileSize(bare, cpu),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not applicable")));
  EXPECT_THAT(MutateAutoUnroll(bare, cpu),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not applicable")));
}

TEST(Mutation, CrossoverMixesTileDecisionsOfTwoParents) {
  int children = 0;
  for (const Target& target : {Target::H200(), Target::HostCpu()}) {
    for (const auto& w : MutationWorkloads()) {
      TuneContext ctx(w.dag, target, AnnotationOptions{}, /*seed=*/21);
      auto sketches = GenerateSketches(ctx);
      ASSERT_TRUE(sketches.ok());
      auto pop = SampleInitialPopulation(*sketches, 24, ctx);
      for (size_t i = 0; i < pop.size(); ++i) {
        for (size_t j = i + 1; j < pop.size(); ++j) {
          absl::StatusOr<State> child = testing::StateOf(CrossoverTileSizes(pop[i], pop[j], ctx));
          if (!child.ok()) continue;
          SCOPED_TRACE(w.name + " on " + target.ToString());
          EXPECT_FALSE(SameSteps(*child, pop[i]));
          EXPECT_FALSE(SameSteps(*child, pop[j]));
          // Every step comes from one of the parents.
          for (size_t k = 0; k < child->steps().size(); ++k) {
            EXPECT_TRUE(child->steps()[k] == pop[i].steps()[k] ||
                        child->steps()[k] == pop[j].steps()[k]);
          }
          schedule::testing::ExpectMatchesReference(w.dag, *child, target, false, children);
          ++children;
          if (children % 4 == 0) break;  // a few per parent keeps the test fast
        }
      }
    }
  }
  EXPECT_GE(children, 10);
}

TEST(Mutation, CrossoverRejectsParentsOfDifferentStructure) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}));
  TuneContext ctx(dag, Target::H200(), AnnotationOptions{}, /*seed=*/3);
  auto sketches = GenerateSketches(ctx);
  ASSERT_TRUE(sketches.ok());
  auto pop = SampleInitialPopulation(*sketches, 1, ctx);
  ASSERT_EQ(pop.size(), 1u);
  EXPECT_THAT(CrossoverTileSizes(pop[0], State::Initial(dag), ctx),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parents have")));
  EXPECT_THAT(CrossoverTileSizes(pop[0], pop[0], ctx),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("differ in 0 decision")));
}

TEST(Mutation, TileSizeMutatesTheCooperativeFetchWidth) {
  // Children that differ from their parent only in the length of a vectorized one-length split
  // (the float / float2 / float4 fetch of a shared tile): another width in {1, 2, 4}.
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({64, 32}, {32, 48}));
  const Target target = Target::H200();
  TuneContext ctx(dag, target, AnnotationOptions{}, /*seed=*/5);
  auto sketches = GenerateSketches(ctx);
  ASSERT_TRUE(sketches.ok());
  auto pop = SampleInitialPopulation(*sketches, 16, ctx);
  int width_changes = 0;
  for (const State& parent : pop) {
    for (int t = 0; t < 8; ++t) {
      absl::StatusOr<State> child = testing::StateOf(MutateTileSize(parent, ctx));
      if (!child.ok() || child->steps().size() != parent.steps().size()) continue;
      std::vector<size_t> diff;
      for (size_t k = 0; k < parent.steps().size(); ++k) {
        if (!(child->steps()[k] == parent.steps()[k])) diff.push_back(k);
      }
      if (diff.size() != 1) continue;
      const size_t k = diff[0];
      const auto* sp = std::get_if<schedule::SplitStep>(&child->steps()[k]);
      const auto* an = k + 1 < child->steps().size()
                           ? std::get_if<schedule::AnnotationStep>(&child->steps()[k + 1])
                           : nullptr;
      if (sp == nullptr || sp->lengths.size() != 1 || an == nullptr ||
          an->annotation != IteratorAnnotation::kVectorize) {
        continue;
      }
      const int64_t old = *std::get<schedule::SplitStep>(parent.steps()[k]).lengths[0];
      EXPECT_NE(*sp->lengths[0], old);
      EXPECT_TRUE(*sp->lengths[0] == 1 || *sp->lengths[0] == 2 || *sp->lengths[0] == 4);
      schedule::testing::ExpectMatchesReference(dag, *child, target, false, width_changes);
      ++width_changes;
    }
  }
  EXPECT_GE(width_changes, 3);
}

}  // namespace
}  // namespace tilesearch::search

namespace tilesearch::search {
namespace {

TEST(Mutation, VectorWidthOfAnElementwiseStageChangesWithItsThreadSplit) {
  // swish over 16×24 = 384 points: fused, split by the vector width w, the rest split by the
  // thread count. Mutating w must rewrite the thread split's recorded extent to 384 / w, or the
  // child would not replay; every child computes what the naive program computes.
  ir::ComputeDAG dag = testing::MustBuild(ir::UnaryDAG(ir::UnaryOp::kSwish, {16, 24}));
  const Target target = Target::H200();
  TuneContext ctx(dag, target, AnnotationOptions{}, /*seed=*/11);
  auto sketches = GenerateSketches(ctx);
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  std::vector<State> pop = SampleInitialPopulation(*sketches, 1, ctx);
  ASSERT_EQ(pop.size(), 1u);
  std::set<int64_t> widths;
  State s = pop[0];
  for (int t = 0; t < 40; ++t) {
    absl::StatusOr<State> child = testing::StateOf(MutateTileSize(s, ctx));
    ASSERT_THAT(child.status(), tilesearch::testing::IsOk());
    int64_t width = 0, thread_extent = 0;
    const auto& steps = child->steps();
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
      const auto* an = std::get_if<schedule::AnnotationStep>(&steps[i + 1]);
      if (sp == nullptr || an == nullptr) continue;
      if (an->annotation == IteratorAnnotation::kVectorize) width = *sp->lengths[0];
      if (an->annotation == IteratorAnnotation::kThreadIdxX) thread_extent = sp->extent;
    }
    ASSERT_GT(width, 0);
    EXPECT_EQ(thread_extent, 384 / width);
    widths.insert(width);
    schedule::testing::ExpectMatchesReference(dag, *child, target, /*exact=*/true, t);
    if (::testing::Test::HasFatalFailure()) return;
    s = *child;
  }
  EXPECT_EQ(widths, (std::set<int64_t>{1, 2, 4}));
}

}  // namespace
}  // namespace tilesearch::search
