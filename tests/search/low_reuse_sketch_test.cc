// Sketches for stages multi-level tiling would take but whose largest input is read at most 4
// times (search/sketch_rules.cc), on CUDA:
// - CrossThreadReduction for GEMV-like stages (a matrix-vector product, a dense layer with batch
//   1-4): one block per output point and the row split across threads, at any number of points;
// - UntiledLowReuse for short reductions (a depthwise convolution's 3x3 window): the stage left
//   untiled, one output point per thread.
// Annotated states lower and compute what float64 loops compute; matmuls and dense convolutions
// (large reuse) and CPU targets get neither.
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gtest/gtest.h"
#include "ir/ops/conv.h"
#include "ir/ops/linear.h"
#include "ir/reference.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/annotation.h"
#include "search/mutation_internal.h"
#include "search/sketch.h"
#include "search/sketch_rules.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::State;
using tilesearch::testing::IsOk;

// Sketches in which the stage named `name` reduces across threads.
std::vector<State> CrossThreadSketches(const std::vector<State>& sketches,
                                       const std::string& name) {
  std::vector<State> out;
  for (const State& s : sketches) {
    const int sid = s.StageId(name);
    if (sid >= 0 && HasCrossThreadReduction(s, sid)) out.push_back(s);
  }
  return out;
}

TEST(GemvSketch, LargestReadReuseCountsTheAxesARead) {
  const ir::ComputeDAG gemv = testing::MustBuild(ir::GemvDAG({8192, 65536}, {65536}));
  const State g = State::Initial(gemv);
  EXPECT_EQ(LargestReadReuse(g, g.StageId("y")), 1);
  const ir::ComputeDAG dense = testing::MustBuild(ir::DenseDAG({4, 2048}, {768, 2048}, {{768}}));
  const State d = State::Initial(dense);
  EXPECT_EQ(LargestReadReuse(d, d.StageId("dense")), 4);
  const ir::ComputeDAG mm = testing::MustBuild(ir::MatmulDAG({512, 256}, {256, 1024}));
  const State m = State::Initial(mm);
  // B [256, 1024] is the largest read; it is read once per row of A.
  EXPECT_EQ(LargestReadReuse(m, m.StageId("C")), 512);
}

TEST(GemvSketch, ManyRowsGetACrossThreadSketchBesideTheTiledOnes) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::GemvDAG({8192, 65536}, {65536}));
  auto sketches = GenerateSketches(TuneContext(dag, Target::H200()));
  ASSERT_THAT(sketches.status(), IsOk());
  EXPECT_EQ(CrossThreadSketches(*sketches, "y").size(), 1u);
  EXPECT_GT(sketches->size(), 1u) << "the multi-level tiled sketches stay";
}

TEST(GemvSketch, MatmulsAndBatch8DenseGetNone) {
  for (const ir::ComputeDAG& dag :
       {testing::MustBuild(ir::MatmulDAG({4096, 4096}, {4096, 4096})),
        testing::MustBuild(ir::DenseDAG({8, 2048}, {768, 2048}, std::nullopt))}) {
    auto sketches = GenerateSketches(TuneContext(dag, Target::H200()));
    ASSERT_THAT(sketches.status(), IsOk());
    const std::string out = dag.stage(dag.output_ids()[0]).name();
    EXPECT_TRUE(CrossThreadSketches(*sketches, out).empty()) << out;
  }
}

// Annotated cross-thread states of `dag` (output stage `name`) match the float64 reference.
void ExpectAnnotatedMatchFloat64(const ir::ComputeDAG& dag, const std::string& name) {
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  const std::vector<State> cross = CrossThreadSketches(*sketches, name);
  ASSERT_EQ(cross.size(), 1u);
  std::mt19937_64 rng(11);
  for (int n = 0; n < 6; ++n) {
    SCOPED_TRACE(n);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(cross[0], dag, target, rng);
    ASSERT_THAT(c.status(), IsOk()) << cross[0].ToString();
    // One block per output point: more blocks than one block's threads could cover.
    ASSERT_FALSE(c->lowered->launches.empty());
    absl::StatusOr<double> err =
        schedule::testing::RelErrorToFloat64(dag, c->lowered->nest, 17 + n);
    ASSERT_THAT(err.status(), IsOk()) << c->lowered->nest;
    EXPECT_LE(*err, 1e-4);
  }
}

TEST(GemvSketch, AnnotatedGemvMatchesFloat64) {
  // 1500 rows: more points than a block's threads, and not a multiple of the warp size.
  ExpectAnnotatedMatchFloat64(testing::MustBuild(ir::GemvDAG({1500, 700}, {700})), "y");
}

TEST(GemvSketch, AnnotatedDenseWithBiasBatch3MatchesFloat64) {
  // The dense reduction fuses into its bias epilogue (one kernel).
  ExpectAnnotatedMatchFloat64(testing::MustBuild(ir::DenseDAG({3, 300}, {1000, 300}, {{1000}})),
                              "dense");
}

// Sketches in which no stage is multi-level tiled or cached (only the placeholders and `name`).
std::vector<State> UntiledSketches(const std::vector<State>& sketches, const std::string& name) {
  std::vector<State> out;
  for (const State& s : sketches) {
    const int sid = s.StageId(name);
    if (sid >= 0 && s.num_stages() == 3 && s.steps().empty()) out.push_back(s);
  }
  return out;
}

ir::ComputeDAG Depthwise(const std::vector<int64_t>& x, int64_t padding,
                         ir::ScalarType dtype = ir::ScalarType::kFloat32) {
  ir::Conv2dParams params;
  params.padding = {padding, padding};
  return testing::MustBuild(ir::DepthwiseConv2dNchwDAG(x, {x[1], 1, 3, 3}, dtype, params));
}

TEST(DepthwiseSketch, AnUntiledSketchBesideTheTiledOnes) {
  const ir::ComputeDAG dag = Depthwise({64, 384, 112, 112}, 1);
  const State initial = State::Initial(dag);
  EXPECT_EQ(LargestReadReuse(initial, initial.StageId("Y")), 1);
  auto sketches = GenerateSketches(TuneContext(dag, Target::H200()));
  ASSERT_THAT(sketches.status(), IsOk());
  EXPECT_EQ(UntiledSketches(*sketches, "Y").size(), 1u);
  EXPECT_GT(sketches->size(), 1u) << "the multi-level tiled sketches stay";
}

TEST(DepthwiseSketch, DenseConvolutionsAndCpuGetNone) {
  ir::Conv2dParams params;
  params.padding = {1, 1};
  const ir::ComputeDAG conv = testing::MustBuild(
      ir::Conv2dNchwDAG({2, 16, 14, 14}, {16, 16, 3, 3}, ir::ScalarType::kFloat32, params));
  auto gpu = GenerateSketches(TuneContext(conv, Target::H200()));
  ASSERT_THAT(gpu.status(), IsOk());
  EXPECT_TRUE(UntiledSketches(*gpu, "Y").empty());
  auto cpu = GenerateSketches(TuneContext(Depthwise({2, 8, 10, 10}, 1), Target::HostCpu()));
  ASSERT_THAT(cpu.status(), IsOk());
  EXPECT_TRUE(UntiledSketches(*cpu, "Y").empty());
}

// The lengths of the splits annotation adds to the untiled stage's two innermost space iterators
// (h: iterator 2; w: iterator 4 once h is split): the points each thread computes along each.
// -1 where there is none.
std::pair<int64_t, int64_t> PointsPerThread(const State& s) {
  std::pair<int64_t, int64_t> points = {-1, -1};
  for (const schedule::Step& step : s.steps()) {
    const auto* sp = std::get_if<schedule::SplitStep>(&step);
    if (sp == nullptr || sp->lengths.size() != 1 || !sp->lengths[0]) continue;
    if (sp->iter_id == 2 && points.first < 0) {
      points.first = *sp->lengths[0];
    } else if (sp->iter_id == 4 && points.first > 0 && points.second < 0) {
      points.second = *sp->lengths[0];
    }
  }
  return points;
}

// The points per thread along h and along w that 24 annotations of `dag`'s untiled sketch draw:
// the one without steps, or (fused) the one whose only step computes the window sum at its cast
// consumer. Each annotated state is checked against float64 within `tolerance`.
struct DrawnPoints {
  std::set<int64_t> along_h, along_w;
  std::set<size_t> launches;  // kernels per lowered state
};
DrawnPoints DrawUntiled(const ir::ComputeDAG& dag, uint64_t seed, double tolerance,
                        bool fused = false) {
  DrawnPoints drawn;
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  EXPECT_THAT(sketches.status(), IsOk());
  if (!sketches.ok()) return drawn;
  std::vector<State> untiled;
  for (const State& st : *sketches) {
    const bool at_consumer =
        st.steps().size() == 1 && std::holds_alternative<schedule::ComputeAtStep>(st.steps()[0]);
    if (fused ? at_consumer : st.steps().empty()) untiled.push_back(st);
  }
  EXPECT_EQ(untiled.size(), 1u);
  if (untiled.size() != 1) return drawn;
  std::mt19937_64 rng(seed);
  for (int n = 0; n < 24; ++n) {
    SCOPED_TRACE(n);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(untiled[0], dag, target, rng);
    EXPECT_THAT(c.status(), IsOk()) << untiled[0].ToString();
    if (!c.ok()) continue;
    const auto [h, w] = PointsPerThread(c->state);
    drawn.along_h.insert(h);
    drawn.along_w.insert(w);
    drawn.launches.insert(c->lowered->launches.size());
    if (fused) {
      // The sum is computed at each point: attached at the cast's innermost iterator (the
      // points along w), whose kernel carries an unroll pragma.
      const int sum = c->state.StageId("Y_acc");
      const int cast = c->state.StageId("Y");
      EXPECT_GE(sum, 0);
      EXPECT_GE(cast, 0);
      if (sum < 0 || cast < 0) continue;
      const schedule::Stage& acc = c->state.stage(sum);
      EXPECT_EQ(acc.attach_stage, cast);
      EXPECT_EQ(acc.attach_iter, c->state.stage(cast).iters.back().name);
      EXPECT_EQ(acc.attach_iter, "w.1");
      bool unroll = false;
      for (const schedule::Step& step : c->state.steps()) {
        const auto* pr = std::get_if<schedule::PragmaStep>(&step);
        unroll |= pr != nullptr && pr->stage_id == cast && pr->software_pipeline < 0 &&
                  pr->min_blocks_per_sm < 0;
      }
      EXPECT_TRUE(unroll);
    }
    absl::StatusOr<double> err =
        schedule::testing::RelErrorToFloat64(dag, c->lowered->nest, seed + 20 + n);
    EXPECT_THAT(err.status(), IsOk()) << c->lowered->nest;
    if (err.ok()) {
      EXPECT_LE(*err, tolerance);
    }
  }
  return drawn;
}

TEST(DepthwiseSketch, AnnotatedUntiledStatesMatchFloat64) {
  // h = 16: 1, 2, 4 or 8 points per thread; w = 12: 1, 2 or 4.
  const ir::ComputeDAG dag = Depthwise({2, 4, 16, 12}, 1);
  ASSERT_EQ(UntiledSketches(*GenerateSketches(TuneContext(dag, Target::H200())), "Y").size(), 1u);
  const DrawnPoints drawn = DrawUntiled(dag, 5, 1e-5);
  EXPECT_EQ(drawn.along_h, (std::set<int64_t>{1, 2, 4, 8})) << "points along h: a sampled decision";
  EXPECT_EQ(drawn.along_w, (std::set<int64_t>{1, 2, 4})) << "points along w: a sampled decision";
  EXPECT_EQ(drawn.launches, (std::set<size_t>{1}));
}

TEST(DepthwiseSketch, HalfTypesComputeTheSumAtTheCastWithEightPointsAlongW) {
  // bfloat16, w = 16: the float32 window sum, then its cast to bfloat16. The sketch that
  // computes the sum at the cast is one kernel whose threads take 1, 2, 4 or 8 points along w
  // (8 are 16 bytes of a row); the unfused one (two kernels) stays beside it. Error: bfloat16
  // inputs and output, 2^-8 per rounding.
  const ir::ComputeDAG dag = Depthwise({2, 4, 8, 16}, 1, ir::ScalarType::kBFloat16);
  const DrawnPoints fused = DrawUntiled(dag, 11, 1e-2, /*fused=*/true);
  EXPECT_EQ(fused.along_h, (std::set<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(fused.along_w, (std::set<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(fused.launches, (std::set<size_t>{1}));
  const DrawnPoints unfused = DrawUntiled(dag, 13, 1e-2);
  EXPECT_EQ(unfused.along_w, (std::set<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(unfused.launches, (std::set<size_t>{2}));
}

TEST(DepthwiseSketch, AFactorMoveOfThePointsRecordsTheFusedRestAgain) {
  // Y: [n, k, h, w, ry, rx]; 8 points along h, 1 along w, the rest fused (2·4·2·12 = 192) and
  // split by 64 threads. Moving a factor of the h points changes the fused rest: its split must
  // record the new extent, or the mutated steps do not replay.
  const ir::ComputeDAG dag = Depthwise({2, 4, 16, 12}, 1);
  const int y = State::Initial(dag).StageId("Y");
  auto split = [&](int iter, int64_t extent, int64_t length) {
    schedule::SplitStep sp;
    sp.stage_id = y;
    sp.iter_id = iter;
    sp.extent = extent;
    sp.lengths = {length};
    return sp;
  };
  std::vector<schedule::Step> steps = {split(2, 16, 8), split(4, 12, 1),
                                       schedule::ReorderStep{y, {0, 1, 2, 4, 3, 5, 6, 7}},
                                       schedule::FuseStep{y, {0, 1, 2, 3}}, split(0, 192, 64)};
  ASSERT_THAT(schedule::ReplaySteps(dag, steps).status(), IsOk());
  std::get<schedule::SplitStep>(steps[0]).lengths = {4};
  EXPECT_FALSE(schedule::ReplaySteps(dag, steps).ok()) << "the rest's extent is stale";
  internal::RefreshLaterSplitExtents(dag, steps, 0);
  EXPECT_EQ(std::get<schedule::SplitStep>(steps[4]).extent, 2 * 4 * 4 * 12);
  EXPECT_EQ(std::get<schedule::SplitStep>(steps[1]).extent, 12) << "w's own split is unchanged";
  absl::StatusOr<State> replayed = schedule::ReplaySteps(dag, steps);
  ASSERT_THAT(replayed.status(), IsOk());
  EXPECT_EQ(replayed->stage(y).iters[0].extent, 2 * 4 * 4 * 12 / 64);
}

TEST(DepthwiseSketch, OddExtentsTakeOnePointPerThread) {
  const ir::ComputeDAG dag = Depthwise({1, 4, 7, 11}, 1);
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  const std::vector<State> untiled = UntiledSketches(*sketches, "Y");
  ASSERT_EQ(untiled.size(), 1u);
  std::mt19937_64 rng(9);
  for (int n = 0; n < 6; ++n) {
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(untiled[0], dag, target, rng);
    ASSERT_THAT(c.status(), IsOk());
    EXPECT_EQ(PointsPerThread(c->state), (std::pair<int64_t, int64_t>{1, 1}));
  }
}

}  // namespace
}  // namespace tilesearch::search
