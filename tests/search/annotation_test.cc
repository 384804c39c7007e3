// Random annotation: sampled states of matmul, conv2d, softmax and layernorm lower for cuda and
// cpu and compute what the naive program computes (interpreter vs ir::RunReference); tile
// products equal the extents; thread counts respect the limits; sampling is deterministic.
#include "search/annotation.h"

#include <cstdint>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/lower.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::IteratorAnnotation;
using schedule::State;
using schedule::Target;

std::vector<testing::Workload> AnnotationWorkloads() {
  ir::Conv2dParams pad1;
  pad1.padding = {1, 1};
  return {
      {"matmul", testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}))},
      {"conv2d", testing::MustBuild(ir::Conv2dNchwPaddedDAG({1, 4, 6, 6}, {8, 4, 3, 3},
                                                            ir::ScalarType::kFloat32, pad1))},
      {"softmax", testing::MustBuild(ir::SoftmaxDAG({4, 96}))},
      {"layernorm", testing::MustBuild(ir::LayerNormDAG({4, 80}))},
  };
}

// Product of all parts of every filled split equals the extent it splits (divisible tiles), or
// covers it with less than one outer step to spare (non-divisible tiles).
void ExpectTilesCoverExtents(const State& s) {
  for (const auto& step : s.steps()) {
    const auto* sp = std::get_if<schedule::SplitStep>(&step);
    if (sp == nullptr || sp->extent <= 0) continue;
    int64_t prod = 1;
    for (const auto& l : sp->lengths) {
      ASSERT_TRUE(l.has_value());
      ASSERT_GE(*l, 1);
      prod *= *l;
    }
    const int64_t outer = (sp->extent + prod - 1) / prod;
    EXPECT_GE(outer * prod, sp->extent) << StepToString(step);
    EXPECT_LT((outer - 1) * prod, sp->extent) << StepToString(step);
  }
}

void CheckPopulation(const testing::Workload& w, const Target& target, int n) {
  auto sketches = GenerateSketches(w.dag, target);
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  std::mt19937_64 rng(1234);
  std::vector<State> pop = SampleInitialPopulation(*sketches, w.dag, target, n, rng);
  ASSERT_EQ(static_cast<int>(pop.size()), n) << w.name << " on " << target.ToString();
  int i = 0;
  for (const State& s : pop) {
    SCOPED_TRACE(w.name + " on " + target.ToString() + " #" + std::to_string(i));
    ExpectTilesCoverExtents(s);
    auto k = schedule::Lower(w.dag, s, target);
    ASSERT_THAT(k.status(), tilesearch::testing::IsOk());
    for (const auto& launch : k->launches) {
      const int64_t threads = launch.block[0] * launch.block[1] * launch.block[2];
      EXPECT_LE(threads, target.max_threads_per_block);
      EXPECT_LE(launch.shared_memory_bytes, target.max_shared_memory_per_block);
    }
    for (int sid = 0; sid < s.num_stages(); ++sid) {
      for (const auto& it : s.stage(sid).iters) {
        if (it.annotation == IteratorAnnotation::kVThread) {
          EXPECT_LE(it.extent, target.max_vthread_extent);
        }
      }
    }
    schedule::testing::ExpectMatchesReference(w.dag, s, target, /*exact=*/false, i);
    if (::testing::Test::HasFatalFailure()) return;
    ++i;
  }
}

TEST(Annotation, CudaSamplesLowerAndMatchTheReference) {
  for (const auto& w : AnnotationWorkloads()) CheckPopulation(w, Target::H200(), 50);
}

TEST(Annotation, CpuSamplesLowerAndMatchTheReference) {
  for (const auto& w : AnnotationWorkloads()) CheckPopulation(w, Target::HostCpu(), 50);
}

TEST(Annotation, CudaMatmulBindsBlocksVthreadsAndAtLeastAWarpOfThreads) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({128, 64}, {64, 128}));
  auto sketches = GenerateSketches(dag, Target::H200());
  ASSERT_TRUE(sketches.ok());
  std::mt19937_64 rng(5);
  std::vector<State> pop = SampleInitialPopulation(*sketches, dag, Target::H200(), 20, rng);
  ASSERT_EQ(pop.size(), 20u);
  for (const State& s : pop) {
    const auto& c = s.stage(s.StageId("C"));
    ASSERT_GE(c.iters.size(), 3u);
    EXPECT_EQ(c.iters[0].annotation, IteratorAnnotation::kBlockIdxX);
    EXPECT_EQ(c.iters[1].annotation, IteratorAnnotation::kVThread);
    EXPECT_EQ(c.iters[2].annotation, IteratorAnnotation::kThreadIdxX);
    EXPECT_GE(c.iters[2].extent, 32);
    EXPECT_LE(c.iters[2].extent, 1024);
    EXPECT_LE(c.iters[1].extent, 8);
    // Block tile × blocks covers the 128 × 128 output.
    EXPECT_GE(c.iters[0].extent * c.iters[1].extent * c.iters[2].extent * c.iters[3].extent *
                  c.iters[4].extent,
              128 * 128);
    // Cooperative fetch: the shared stages' threads equal the block's.
    for (const std::string name : {"A.shared", "B.shared"}) {
      const auto& sh = s.stage(s.StageId(name));
      bool bound = false;
      for (const auto& it : sh.iters) {
        if (it.annotation == IteratorAnnotation::kThreadIdxX) {
          bound = true;
          EXPECT_LE(it.extent, c.iters[2].extent);
        }
      }
      EXPECT_TRUE(bound) << name;
    }
  }
}

TEST(Annotation, SamplingIsDeterministicForASeed) {
  for (const Target& target : {Target::H200(), Target::HostCpu()}) {
    ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}));
    auto sketches = GenerateSketches(dag, target);
    ASSERT_TRUE(sketches.ok());
    std::mt19937_64 r1(77), r2(77), r3(78);
    auto a = SampleInitialPopulation(*sketches, dag, target, 10, r1);
    auto b = SampleInitialPopulation(*sketches, dag, target, 10, r2);
    auto c = SampleInitialPopulation(*sketches, dag, target, 10, r3);
    ASSERT_EQ(a.size(), b.size());
    bool differs = a.size() != c.size();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].ToString(), b[i].ToString());
      if (i < c.size()) differs |= a[i].ToString() != c[i].ToString();
    }
    EXPECT_TRUE(differs);
  }
}

TEST(Annotation, SplitFactorizationsAreAllOrderedFactorizations) {
  // Independent count: ordered factorizations of 2^a into n factors = C(a + n - 1, n - 1).
  EXPECT_EQ(SplitFactorizations(64, 3, 64).size(), 28u);       // C(8, 2)
  EXPECT_EQ(SplitFactorizations(4096, 4, 4096).size(), 455u);  // C(15, 3)
  for (const auto& f : SplitFactorizations(360, 3, 8)) {
    EXPECT_EQ(f[0] * f[1] * f[2], 360);
    EXPECT_LE(f[2], 8);
  }
  // 12 = 2^2·3 into 2 ordered factors: one per divisor (6), innermost ≤ 4 keeps 1, 2, 3, 4.
  EXPECT_EQ(SplitFactorizations(12, 2, 4).size(), 4u);
  EXPECT_EQ(SplitFactorizations(7, 1, 64).size(), 1u);
}

TEST(Annotation, EmptySketchListGivesNothing) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({4, 4}, {4, 4}));
  std::mt19937_64 rng(1);
  EXPECT_TRUE(SampleInitialPopulation({}, dag, Target::H200(), 5, rng).empty());
}

}  // namespace
}  // namespace tilesearch::search
