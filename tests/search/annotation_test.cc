// Random annotation: sampled states of matmul, conv2d, softmax and layernorm lower for cuda and
// cpu and compute what the naive program computes (interpreter vs ir::RunReference); tile
// products equal the extents; thread counts respect the limits; sampling is deterministic.
#include "search/annotation.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::IteratorAnnotation;
using schedule::State;
using ::testing::HasSubstr;

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
  auto sketches = GenerateSketches(TuneContext(w.dag, target));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  std::mt19937_64 rng(1234);
  std::vector<State> pop = testing::SampleInContext(*sketches, w.dag, target, n, rng);
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
      // Tensor-core kernels stage deeper operand rings in the opt-in shared memory.
      const bool tensor_core = std::any_of(s.steps().begin(), s.steps().end(), [](const auto& st) {
        return std::holds_alternative<schedule::TensorCoreStep>(st);
      });
      EXPECT_LE(launch.shared_memory_bytes,
                tensor_core ? target.max_shared_memory_optin : target.max_shared_memory_per_block);
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
  auto sketches = GenerateSketches(testing::SimtContext(dag, Target::H200()));
  ASSERT_TRUE(sketches.ok());
  std::mt19937_64 rng(5);
  std::vector<State> pop = testing::SampleInContext(*sketches, dag, Target::H200(), 20, rng);
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
    auto sketches = GenerateSketches(TuneContext(dag, target));
    ASSERT_TRUE(sketches.ok());
    std::mt19937_64 r1(77), r2(77), r3(78);
    auto a = testing::SampleInContext(*sketches, dag, target, 10, r1);
    auto b = testing::SampleInContext(*sketches, dag, target, 10, r2);
    auto c = testing::SampleInContext(*sketches, dag, target, 10, r3);
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
  EXPECT_TRUE(testing::SampleInContext({}, dag, Target::H200(), 5, rng).empty());
}

// ---------------------------------------------------------------------------------------------
// Launch limits by construction (large shapes of the H200 benchmarks).

// Lengths of the splits with exactly `n` lengths, in step order.
std::vector<std::vector<int64_t>> SplitLengths(const State& s, size_t n) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& step : s.steps()) {
    const auto* sp = std::get_if<schedule::SplitStep>(&step);
    if (sp == nullptr || sp->lengths.size() != n) continue;
    std::vector<int64_t> v;
    for (const auto& l : sp->lengths) v.push_back(l.value_or(0));
    out.push_back(v);
  }
  return out;
}

// Checks a cuda state against the launch limits directly: thread and grid extents from the
// lowered launches, vthreads from the iterators, and the register estimate recomputed from the
// multi-level tiling splits (4 lengths [vthread, thread, inner, inner]: a thread holds the
// product of the inner lengths in registers).
void ExpectWithinCudaLimits(const ir::ComputeDAG& dag, const State& s, const Target& target) {
  auto k = schedule::Lower(dag, s, target);
  ASSERT_THAT(k.status(), tilesearch::testing::IsOk());
  for (const auto& launch : k->launches) {
    const int64_t threads = launch.block[0] * launch.block[1] * launch.block[2];
    EXPECT_LE(threads, target.max_threads_per_block) << launch.ToString();
    EXPECT_LE(launch.shared_memory_bytes, target.max_shared_memory_optin) << launch.ToString();
    EXPECT_LE(launch.grid[0], int64_t{2147483647});
    EXPECT_LE(launch.grid[1], 65535);
    EXPECT_LE(launch.grid[2], 65535);
  }
  for (int sid = 0; sid < s.num_stages(); ++sid) {
    for (const auto& it : s.stage(sid).iters) {
      if (it.annotation == IteratorAnnotation::kVThread) {
        EXPECT_LE(it.extent, 8);
      }
    }
  }
  const auto tiles = SplitLengths(s, 4);
  if (tiles.empty()) return;
  int64_t threads = 1, local = 1, vthreads = 1;
  for (const auto& l : tiles) {
    vthreads *= l[0];
    threads *= l[1];
    local *= l[2] * l[3];
  }
  EXPECT_LE(vthreads, 8);
  EXPECT_GE(threads, 32);
  EXPECT_LE(threads, 1024);
  EXPECT_LE(local + 32, 255);
  EXPECT_LE(threads * (local + 32), 65536);
}

TEST(Annotation, CudaAnnotationOfLargeWorkloadsIsValidByConstruction) {
  // Before the joint tile sampler, independent tile draws gave 4% (matmul 4096^3), 9% (1024^3)
  // and 10-12% (these conv2d layers) valid states.
  ir::Conv2dParams pad1;
  pad1.padding = {1, 1};
  const std::vector<testing::Workload> workloads = {
      {"matmul_4096", testing::MustBuild(ir::MatmulDAG({4096, 4096}, {4096, 4096}))},
      {"matmul_1024", testing::MustBuild(ir::MatmulDAG({1024, 1024}, {1024, 1024}))},
      {"softmax_4096", testing::MustBuild(ir::SoftmaxDAG({4096, 4096}))},
      {"conv2d_resnet_14", testing::MustBuild(ir::Conv2dNchwDAG({1, 256, 14, 14}, {256, 256, 3, 3},
                                                                ir::ScalarType::kFloat32, pad1))},
      {"conv2d_padded_resnet_56",
       testing::MustBuild(ir::Conv2dNchwPaddedDAG({1, 64, 56, 56}, {64, 64, 3, 3},
                                                  ir::ScalarType::kFloat32, pad1))},
  };
  const Target target = Target::H200();
  for (const auto& w : workloads) {
    SCOPED_TRACE(w.name);
    auto sketches = GenerateSketches(TuneContext(w.dag, target));
    ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
    std::mt19937_64 rng(2024);
    const int attempts = 30;
    int valid = 0;
    for (int i = 0; i < attempts; ++i) {
      const State& sketch = (*sketches)[internal::Pick(rng, sketches->size())];
      absl::StatusOr<State> s =
          testing::StateOf(testing::AnnotateInContext(sketch, w.dag, target, rng));
      if (!s.ok()) continue;
      ++valid;
      ExpectWithinCudaLimits(w.dag, *s, target);
      if (::testing::Test::HasFatalFailure()) return;
    }
    // 27-30 of 30 before software pipelining staged the shared tiles in registers; with the
    // staging counted by the sampler, 26-30 (the rest: shared footprints of compute locations
    // the sampler's footprint model does not see, e.g. 16 MiB for a B tile cached outside k).
    EXPECT_GE(valid, attempts * 8 / 10);
  }
}

// The sketch of a matmul with its unfilled splits set, in step order, to `tiles`.
State FilledSketch(const ir::ComputeDAG& dag, const Target& target,
                   const std::vector<std::vector<int64_t>>& tiles) {
  auto sketches = GenerateSketches(testing::SimtContext(dag, target));
  EXPECT_THAT(sketches.status(), tilesearch::testing::IsOk());
  State out = State::Initial(dag);
  size_t next = 0;
  for (schedule::Step step : (*sketches)[0].steps()) {
    if (auto* sp = std::get_if<schedule::SplitStep>(&step); sp && next < tiles.size()) {
      EXPECT_EQ(sp->lengths.size(), tiles[next].size());
      for (size_t k = 0; k < sp->lengths.size(); ++k) sp->lengths[k] = tiles[next][k];
      ++next;
    }
    out.AppendStep(step);
  }
  EXPECT_EQ(next, tiles.size());
  return out;
}

TEST(Annotation, Matmul128x128BlockWith8x8RegisterTilesIsInTheCudaSpace) {
  // The hand schedule's family: 128x128 block tile, 16x16 = 256 threads, 8x8 outputs per thread,
  // k tile 16; annotation binds it and adds the cooperative shared-memory fetch of A and B.
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({4096, 4096}, {4096, 4096}));
  const Target target = Target::H200();
  const State sketch = FilledSketch(dag, target, {{1, 16, 2, 4}, {1, 16, 1, 8}, {2, 8}});
  bool vectorized_both = false;
  // The fetch width is drawn from {1, 2, 4} per tile: some seeds give float4 for both.
  for (uint64_t seed = 0; seed < 32 && !vectorized_both; ++seed) {
    std::mt19937_64 rng(seed);
    absl::StatusOr<State> s =
        testing::StateOf(testing::AnnotateInContext(sketch, dag, target, rng));
    ASSERT_THAT(s.status(), tilesearch::testing::IsOk());
    const auto& c = s->stage(s->StageId("C"));
    EXPECT_EQ(c.iters[0].annotation, IteratorAnnotation::kBlockIdxX);
    EXPECT_EQ(c.iters[0].extent, (4096 / 128) * (4096 / 128));
    EXPECT_EQ(c.iters[1].extent, 1);  // vthread
    EXPECT_EQ(c.iters[2].annotation, IteratorAnnotation::kThreadIdxX);
    EXPECT_EQ(c.iters[2].extent, 256);
    EXPECT_EQ(c.iters[3].extent * c.iters[4].extent, 8 * 8);
    auto k = schedule::Lower(dag, *s, target);
    ASSERT_THAT(k.status(), tilesearch::testing::IsOk());
    ASSERT_EQ(k->launches.size(), 1u);
    EXPECT_EQ(k->launches[0].grid[0], 1024);
    EXPECT_EQ(k->launches[0].block[0], 256);
    // A tile 128 x 16 and B tile 16 x 128, float32; twice that when the drawn software_pipeline
    // pragma double-buffers them ($2), and S times for a cp.async ring of S stages ($3, $4), which
    // falls back to double buffering when a fetch is not a vector copy.
    const int pipeline = std::max(s->stage(s->StageId("C.local")).software_pipeline,
                                  s->stage(s->StageId("C")).software_pipeline);
    const int64_t tiles = (128 * 16 + 16 * 128) * 4;
    const int64_t bytes = k->launches[0].shared_memory_bytes;
    if (pipeline >= 3) {
      EXPECT_TRUE(bytes == tiles * pipeline || bytes == tiles * 2) << bytes << " " << pipeline;
    } else {
      EXPECT_EQ(bytes, tiles * (pipeline == 2 ? 2 : 1));
    }
    int vectorized = 0;
    for (const std::string name : {"A.shared", "B.shared"}) {
      const auto& sh = s->stage(s->StageId(name));
      int64_t threads = 0, width = 1;
      for (const auto& it : sh.iters) {
        if (it.annotation == IteratorAnnotation::kThreadIdxX) threads = it.extent;
        if (it.annotation == IteratorAnnotation::kVectorize) width = it.extent;
      }
      EXPECT_EQ(threads, 256) << name;
      vectorized += width == 4;
    }
    vectorized_both |= vectorized == 2;
  }
  EXPECT_TRUE(vectorized_both) << "no seed fetched both tiles with float4";
}

TEST(Annotation, RegisterEstimateRejectsTooManyRegistersPerBlock) {
  // 32 x 32 = 1024 threads, each with 4x4 x 2x2 = 64 accumulators: about 96 registers per
  // thread, 98304 per block > 65536. Lower accepts it (it does not see registers).
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({1024, 1024}, {1024, 1024}));
  const Target target = Target::H200();
  const State sketch = FilledSketch(dag, target, {{1, 32, 4, 4}, {1, 32, 2, 2}, {1, 8}});
  std::mt19937_64 rng(1);
  EXPECT_THAT(testing::StateOf(testing::AnnotateInContext(sketch, dag, target, rng)).status(),
              tilesearch::testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                            HasSubstr("registers per thread")));
  // Half the threads fit.
  const State half = FilledSketch(dag, target, {{1, 16, 4, 4}, {1, 32, 2, 2}, {1, 8}});
  EXPECT_THAT(testing::StateOf(testing::AnnotateInContext(half, dag, target, rng)).status(),
              tilesearch::testing::IsOk());
}

TEST(Annotation, GpuTileRunFitsChecksTheTilingLimitsFromTheSteps) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({1024, 1024}, {1024, 1024}));
  const Target target = Target::H200();
  // The first split of the tiling run (after cache_write) is step 1.
  auto fits = [&](const std::vector<std::vector<int64_t>>& tiles, const AnnotationOptions& o) {
    return internal::GpuTileRunFits(TuneContext(dag, target, o),
                                    FilledSketch(dag, target, tiles).steps(), 1);
  };
  const AnnotationOptions defaults;
  EXPECT_TRUE(fits({{1, 16, 2, 4}, {1, 16, 1, 8}, {2, 8}}, defaults));
  EXPECT_FALSE(fits({{1, 64, 1, 1}, {1, 32, 1, 1}, {2, 8}}, defaults));  // 2048 threads
  EXPECT_FALSE(fits({{1, 4, 1, 1}, {1, 4, 1, 1}, {2, 8}}, defaults));    // 16 threads
  EXPECT_FALSE(fits({{1, 32, 4, 4}, {1, 32, 2, 2}, {1, 8}}, defaults));  // registers
  // Two virtual threads: within the default (8); beyond a gpu_max_vthread of 1.
  EXPECT_TRUE(fits({{2, 16, 1, 4}, {1, 16, 1, 8}, {2, 8}}, defaults));
  AnnotationOptions one;
  one.gpu_max_vthread = 1;
  EXPECT_FALSE(fits({{2, 16, 1, 4}, {1, 16, 1, 8}, {2, 8}}, one));
  EXPECT_FALSE(fits({{4, 16, 1, 1}, {4, 16, 1, 1}, {2, 8}}, defaults));  // 16 > 8
  // Every virtual thread keeps its own accumulators: 8×8 per virtual thread fits alone
  // (64 + 32 registers) but not with 2×2 of them (256 + 32 > 255).
  EXPECT_TRUE(fits({{1, 16, 2, 4}, {1, 16, 2, 4}, {2, 8}}, defaults));
  EXPECT_FALSE(fits({{2, 16, 2, 4}, {2, 16, 2, 4}, {2, 8}}, defaults));
}

// Grid limits live in schedule/gpu_validity (Lower's launch checks); tested here with the
// schedule space.
TEST(GpuValidity, GridExtentsBeyondTheHardwareLimitsAreRejected) {
  const Target target = Target::H200();
  auto bind = [&](const ir::ComputeDAG& dag, int64_t threads, IteratorAnnotation block_dim) {
    State s = State::Initial(dag);
    auto apply = [&](const schedule::Step& step) {
      absl::StatusOr<State> next = schedule::ApplyStep(s, step);
      EXPECT_THAT(next.status(), tilesearch::testing::IsOk());
      if (next.ok()) s = *next;
    };
    apply(schedule::AnnotationStep{1, 0, block_dim});
    schedule::SplitStep sp;
    sp.stage_id = 1;
    sp.iter_id = 1;
    sp.extent = s.stage(1).iters[1].extent;
    sp.lengths = {threads};
    apply(sp);
    apply(schedule::AnnotationStep{1, 2, IteratorAnnotation::kThreadIdxX});
    return schedule::Lower(dag, s, target).status();
  };
  // blockIdx.y of 70000 > 65535.
  EXPECT_THAT(bind(testing::MustBuild(ir::UnaryDAG(ir::UnaryOp::kRelu, {70000, 32})), 32,
                   IteratorAnnotation::kBlockIdxY),
              tilesearch::testing::StatusIs(
                  absl::StatusCode::kFailedPrecondition,
                  HasSubstr("blockIdx.y extent 70000 exceeds the hardware grid limit 65535")));
  EXPECT_THAT(bind(testing::MustBuild(ir::UnaryDAG(ir::UnaryOp::kRelu, {65535, 32})), 32,
                   IteratorAnnotation::kBlockIdxY),
              tilesearch::testing::IsOk());
  // blockIdx.x of 2^31 > 2^31 - 1 (nothing is allocated: lowering only).
  EXPECT_THAT(bind(testing::MustBuild(ir::UnaryDAG(ir::UnaryOp::kRelu, {int64_t{1} << 31, 2})), 2,
                   IteratorAnnotation::kBlockIdxX),
              tilesearch::testing::StatusIs(
                  absl::StatusCode::kFailedPrecondition,
                  HasSubstr("blockIdx.x extent 2147483648 exceeds the hardware grid limit "
                            "2147483647")));
}

}  // namespace
}  // namespace tilesearch::search

namespace tilesearch::search {
namespace {

// The width of the vectorized split of `stage` in `s` (0 when none).
int64_t RootVectorWidth(const State& s, int stage) {
  for (size_t i = 0; i + 1 < s.steps().size(); ++i) {
    const auto* sp = std::get_if<schedule::SplitStep>(&s.steps()[i]);
    const auto* an = std::get_if<schedule::AnnotationStep>(&s.steps()[i + 1]);
    if (sp && an && sp->stage_id == stage && an->stage_id == stage &&
        an->iter_id == sp->iter_id + 1 && an->annotation == IteratorAnnotation::kVectorize) {
      return *sp->lengths[0];
    }
  }
  return 0;
}

TEST(Annotation, CudaElementwiseStagesDrawVectorWidthsAndStayCorrect) {
  // Elementwise root stages (no reduction, nothing attached) get a vectorized split of 1, 2 or 4
  // under the thread split; every width must occur and every sample must compute what the naive
  // program computes (the interpreter on the lowered nest).
  const Target target = Target::H200();
  const std::vector<testing::Workload> workloads = {
      {"swish", testing::MustBuild(ir::UnaryDAG(ir::UnaryOp::kSwish, {16, 24}))},
      {"add_bias", testing::MustBuild(ir::BinaryDAG(ir::BinaryOp::kAdd, {8, 12}, {12}))},
  };
  for (const auto& w : workloads) {
    SCOPED_TRACE(w.name);
    auto sketches = GenerateSketches(TuneContext(w.dag, target));
    ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
    std::mt19937_64 rng(5);
    std::vector<State> pop = testing::SampleInContext(*sketches, w.dag, target, 18, rng);
    ASSERT_FALSE(pop.empty());
    std::set<int64_t> widths;
    int i = 0;
    for (const State& s : pop) {
      const int out = s.num_stages() - 1;
      const int64_t width = RootVectorWidth(s, out);
      EXPECT_TRUE(width == 1 || width == 2 || width == 4) << width;
      widths.insert(width);
      schedule::testing::ExpectMatchesReference(w.dag, s, target, /*exact=*/true, i++);
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(widths, (std::set<int64_t>{1, 2, 4}));
  }
  // A reduction keeps the plain thread split (its vector loop would not be innermost).
  ir::ComputeDAG sum = testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {64, 48}, {0}));
  auto sketches = GenerateSketches(TuneContext(sum, target));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  std::mt19937_64 rng(6);
  for (const State& s : testing::SampleInContext(*sketches, sum, target, 8, rng)) {
    for (int sid = 0; sid < s.num_stages(); ++sid) EXPECT_EQ(RootVectorWidth(s, sid), 0);
  }
}

}  // namespace
}  // namespace tilesearch::search
