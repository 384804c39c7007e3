// The software_pipeline decision in the search: GPU annotation of a matmul whose kernel fetches
// shared tiles in its reduction loop adds a "software_pipeline$b" pragma with both values across
// seeds (and Lower follows it), cpu annotation and row caches (softmax) never get one, and
// MutateAutoUnroll flips it as a decision (the structure hash is unchanged, the steps hash is not).
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "ir/ops/norm.h"
#include "schedule/lower.h"
#include "search/annotation.h"
#include "search/measure_record.h"
#include "search/mutation.h"
#include "search/sketch.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::State;
using schedule::Step;
using tilesearch::testing::IsOk;

// Indices of the software_pipeline pragmas of a step list.
std::vector<int> PipelinePragmas(const std::vector<Step>& steps) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    const auto* p = std::get_if<schedule::PragmaStep>(&steps[i]);
    if (p != nullptr && p->software_pipeline >= 0) out.push_back(i);
  }
  return out;
}

bool HasSharedStage(const State& s) {
  for (int i = 0; i < s.num_stages(); ++i) {
    if (!s.stage(i).is_placeholder() && s.stage(i).scope == ir::MemoryScope::kShared) return true;
  }
  return false;
}

// Number of local allocations named "*.stage" (the pipelining pass's staging arrays).
int StagingArrays(const ir::Stmt& s) {
  class V : public ir::StmtVisitor {
   public:
    int n = 0;

   protected:
    void VisitAllocate(const ir::AllocateNode* op, const ir::Stmt& s) override {
      const std::string& name = op->buffer.name;
      if (name.size() > 6 && name.compare(name.size() - 6, 6, ".stage") == 0) ++n;
      ir::StmtVisitor::VisitAllocate(op, s);
    }
  };
  V v;
  v.Visit(s);
  return v.n;
}

TEST(SoftwarePipelineSearch, GpuAnnotationDrawsBothValuesAndLowerFollowsThem) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({4096, 4096}, {4096, 4096}));
  const Target target = Target::H200();
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches, IsOk());
  int shared_sketches = 0;
  std::set<int> values;
  int staged_on = 0;
  int annotated = 0;  // valid annotations of sketches with shared fetches
  for (const State& sketch : *sketches) {
    const bool shared = HasSharedStage(sketch);
    shared_sketches += shared;
    for (uint64_t seed = 0; seed < 24; ++seed) {
      TuneContext ctx(dag, target, AnnotationOptions{}, seed);
      absl::StatusOr<Candidate> c = AnnotateSketch(sketch, ctx);
      if (!c.ok()) continue;  // an invalid draw (GPU limits): resampled by the search
      const State* s = &c->state;
      const schedule::LoweredKernel& kernel = *c->lowered;
      const std::vector<int> pragmas = PipelinePragmas(s->steps());
      if (!shared) {
        EXPECT_TRUE(pragmas.empty()) << s->ToString();
        continue;
      }
      ++annotated;
      // One pragma for the one kernel that fetches shared tiles.
      ASSERT_EQ(pragmas.size(), 1u) << s->ToString();
      const int value = std::get<schedule::PragmaStep>(s->steps()[pragmas[0]]).software_pipeline;
      values.insert(value);
      EXPECT_THAT(s->ToString(),
                  ::testing::HasSubstr("software_pipeline=" + std::to_string(value)));
      if (value == 0) {
        EXPECT_EQ(StagingArrays(kernel.nest.body), 0) << kernel.nest;
      } else {
        staged_on += StagingArrays(kernel.nest.body) > 0;
      }
    }
  }
  ASSERT_GT(shared_sketches, 0);
  EXPECT_GE(annotated, 6);
  EXPECT_EQ(values, (std::set<int>{0, 1, 2, 3, 4}));
  EXPECT_GT(staged_on, 0);  // "$1" kernels do get the staging arrays
}

TEST(SoftwarePipelineSearch, NoPipelinePragmaWithoutFetchesInAReductionLoop) {
  // cpu matmul (no shared memory) and cuda softmax (its row cache is fetched once per row, at a
  // space loop: nothing to pipeline).
  struct Case {
    ir::ComputeDAG dag;
    Target target;
  };
  std::vector<Case> cases = {
      {testing::MustBuild(ir::MatmulDAG({64, 64}, {64, 64})), Target::HostCpu()},
      {testing::MustBuild(ir::SoftmaxDAG({64, 1024})), Target::H200()},
  };
  bool saw_row_cache = false;
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(c.dag, c.target));
    ASSERT_THAT(sketches, IsOk());
    std::mt19937_64 rng(5);
    std::vector<State> pop = testing::SampleInContext(*sketches, c.dag, c.target, 16, rng);
    ASSERT_FALSE(pop.empty());
    for (const State& s : pop) {
      saw_row_cache |= HasSharedStage(s);
      EXPECT_TRUE(PipelinePragmas(s.steps()).empty()) << s.ToString();
    }
  }
  EXPECT_TRUE(saw_row_cache);  // the softmax case did have shared stages
}

TEST(SoftwarePipelineSearch, MutationFlipsThePragmaAsADecision) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({4096, 4096}, {4096, 4096}));
  const Target target = Target::H200();
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches, IsOk());
  TuneContext ctx(dag, target, AnnotationOptions{}, /*seed=*/3);
  std::vector<State> pop = SampleInitialPopulation(*sketches, 8, ctx);
  int flips = 0;
  for (const State& parent : pop) {
    const std::vector<int> pragmas = PipelinePragmas(parent.steps());
    if (pragmas.size() != 1) continue;
    const int i = pragmas[0];
    const int old = std::get<schedule::PragmaStep>(parent.steps()[i]).software_pipeline;
    // The mutation picks one of the state's pragmas; a few tries reach this one.
    for (int t = 0; t < 16; ++t) {
      absl::StatusOr<Candidate> mutated = MutateAutoUnroll(parent, ctx);
      ASSERT_THAT(mutated, IsOk());
      const State* child = &mutated->state;
      const schedule::LoweredKernel& kernel = *mutated->lowered;
      ASSERT_EQ(child->steps().size(), parent.steps().size());
      const auto& p = std::get<schedule::PragmaStep>(child->steps()[i]);
      if (p.software_pipeline == old) continue;
      EXPECT_TRUE(p.software_pipeline >= 0 && p.software_pipeline <= 4) << p.software_pipeline;
      // Only that step changed; the structure is the same, the state is not.
      for (size_t j = 0; j < parent.steps().size(); ++j) {
        if (static_cast<int>(j) != i) {
          EXPECT_EQ(child->steps()[j], parent.steps()[j]) << j;
        }
      }
      EXPECT_EQ(StructureHash(child->steps()), StructureHash(parent.steps()));
      EXPECT_NE(StepsHash(child->steps()), StepsHash(parent.steps()));
      EXPECT_NE(child->Hash(), parent.Hash());
      if (p.software_pipeline == 0) {
        EXPECT_EQ(StagingArrays(kernel.nest.body), 0) << kernel.nest;
      }
      ++flips;
      break;
    }
  }
  EXPECT_GT(flips, 0);
}

}  // namespace
}  // namespace tilesearch::search
