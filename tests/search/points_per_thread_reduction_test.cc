// The PointsPerThreadReduction sketch (search/sketch_rules.cc) on CUDA: a plain reduction whose
// consecutive output points read consecutive input elements (a sum over an outer axis) also gets
// sketches in which each thread computes 2, 4 or 8 consecutive outputs, their sums in a local stage
// attached at the thread. Annotated states lower and compute what float64 loops compute, with
// inner extents the points do not divide; reductions along the innermost axis, tiled stages and
// CPU targets get none.
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "ir/ops/reduce.h"
#include "ir/reference.h"
#include "schedule/lower.h"
#include "search/annotation.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::State;
using tilesearch::testing::IsOk;

// Sketches with a local stage of `name` attached to `name` and a filled one-length split of `name`
// (the points-per-thread structure), with the points each gives a thread (that split's length).
std::vector<std::pair<State, int64_t>> PointSketches(const std::vector<State>& sketches,
                                                     const std::string& name) {
  std::vector<std::pair<State, int64_t>> out;
  for (const State& s : sketches) {
    const int local = s.StageId(name + ".local");
    const int stage = s.StageId(name);
    if (local < 0 || stage < 0 || s.stage(local).attach_stage != stage) continue;
    int64_t points = -1;
    for (const schedule::Step& step : s.steps()) {
      const auto* sp = std::get_if<schedule::SplitStep>(&step);
      if (sp != nullptr && sp->stage_id == stage && sp->lengths.size() == 1 &&
          sp->lengths[0].has_value() && points < 0) {
        points = *sp->lengths[0];
      }
    }
    // Multi-level tiling's local stages come with unfilled splits.
    if (points > 0) out.emplace_back(s, points);
  }
  return out;
}

std::vector<State> Sketches(const ir::ComputeDAG& dag, const Target& target) {
  auto sketches = GenerateSketches(TuneContext(dag, target));
  EXPECT_THAT(sketches.status(), IsOk());
  return sketches.ok() ? *sketches : std::vector<State>{};
}

TEST(PointsPerThreadReduction, SumOverAnOuterAxisGetsTwoFourAndEightPoints) {
  const ir::ComputeDAG dag = testing::MustBuild(
      ir::ReduceDAG(ir::ReduceOp::kSum, {128, 4096, 4095}, {1}, /*keepdim=*/true));
  const std::vector<State> sketches = Sketches(dag, Target::H200());
  std::set<int64_t> points;
  for (const auto& [s, p] : PointSketches(sketches, "reduce_sum")) points.insert(p);
  EXPECT_EQ(points, (std::set<int64_t>{2, 4, 8}));
  EXPECT_GT(sketches.size(), 3u) << "the one-point sketch stays";
}

TEST(PointsPerThreadReduction, InnermostReductionsNarrowAxesMatmulsAndCpuGetNone) {
  const ir::ComputeDAG rows =
      testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {4096, 4096}, {1}));
  EXPECT_TRUE(PointSketches(Sketches(rows, Target::H200()), "reduce_sum").empty());
  // 40 outputs along the innermost axis: fewer than a warp of two-point threads.
  const ir::ComputeDAG narrow =
      testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {64, 512, 40}, {1}));
  EXPECT_TRUE(PointSketches(Sketches(narrow, Target::H200()), "reduce_sum").empty());
  const ir::ComputeDAG mm = testing::MustBuild(ir::MatmulDAG({512, 256}, {256, 1024}));
  EXPECT_TRUE(PointSketches(Sketches(mm, Target::H200()), "C").empty());
  const ir::ComputeDAG outer =
      testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {4, 64, 300}, {1}));
  EXPECT_TRUE(PointSketches(Sketches(outer, Target::HostCpu()), "reduce_sum").empty());
}

TEST(PointsPerThreadReduction, AnnotatedStatesMatchFloat64) {
  // 301 outputs along the innermost axis: no point count divides it (guarded tails), and the
  // reduction is over the middle axis; max is reduced the same way.
  for (ir::ReduceOp op : {ir::ReduceOp::kSum, ir::ReduceOp::kMax}) {
    const ir::ComputeDAG dag = testing::MustBuild(ir::ReduceDAG(op, {3, 70, 301}, {1}, true));
    const std::string name = ir::ReduceOpName(op);
    const Target target = Target::H200();
    const auto point_sketches = PointSketches(Sketches(dag, target), name);
    ASSERT_EQ(point_sketches.size(), 3u);
    std::mt19937_64 rng(7);
    for (const auto& [sketch, points] : point_sketches) {
      for (int n = 0; n < 3; ++n) {
        SCOPED_TRACE(name + " points " + std::to_string(points) + " sample " + std::to_string(n));
        absl::StatusOr<Candidate> c = testing::AnnotateInContext(sketch, dag, target, rng);
        ASSERT_THAT(c.status(), IsOk()) << sketch.ToString();
        ASSERT_EQ(c->lowered->launches.size(), 1u) << c->lowered->nest;
        absl::StatusOr<double> err =
            schedule::testing::RelErrorToFloat64(dag, c->lowered->nest, 31 + n);
        ASSERT_THAT(err.status(), IsOk()) << c->lowered->nest;
        EXPECT_LE(*err, 1e-5);
      }
    }
  }
}

}  // namespace
}  // namespace tilesearch::search
