// InferRegion against brute-force enumeration of the indices a consumer's loops actually access.
#include "schedule/bound_inference.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/apply_step.h"
#include "schedule/state.h"
#include "tests/schedule/schedule_test_util.h"

namespace tilesearch::schedule {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using namespace ::tilesearch::schedule::testing;  // NOLINT

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// The producer index (one value per dimension) read at a consumer axis point, written by hand
// from the operator's definition.
using IndexFn = std::function<std::vector<int64_t>(const std::vector<int64_t>& point)>;

State Apply(const State& s, const Step& step) {
  absl::StatusOr<State> r = ApplyStep(s, step);
  EXPECT_THAT(r, IsOk()) << StepToString(step);
  return r.ok() ? *r : s;
}

SplitStep Split(int stage, int iter, std::vector<std::optional<int64_t>> lengths) {
  SplitStep s;
  s.stage_id = stage;
  s.iter_id = iter;
  s.lengths = std::move(lengths);
  return s;
}

int64_t RandomDivisor(int64_t n, std::mt19937& rng) {
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) divisors.push_back(d);
  }
  return divisors[rng() % divisors.size()];
}

struct Box {
  std::vector<int64_t> lo, hi;
};

// For every assignment of the consumer's loops up to `pos` (the fixed ones), enumerates the loops
// after it, evaluates the consumer's axes (skipping guarded-out iterations when `respect_guards`)
// and the producer index, and calls check(fixed env, observed box).
void ForEachFixedIteration(const Stage& consumer, int pos, const IndexFn& index,
                           bool respect_guards,
                           const std::function<void(const Env&, const Box&)>& check) {
  ForEachIteration(consumer.iters, 0, pos + 1, {}, [&](const Env& fixed) {
    Box box;
    bool any = false;
    ForEachIteration(consumer.iters, pos + 1, consumer.iters.size(), fixed, [&](const Env& env) {
      if (respect_guards) {
        for (const ir::Expr& g : consumer.guards) {
          if (!Eval(g, env)) return;
        }
      }
      std::vector<int64_t> point;
      for (const ir::Expr& v : consumer.axis_values) point.push_back(Eval(v, env));
      std::vector<int64_t> idx = index(point);
      if (!any) {
        box.lo = box.hi = idx;
        any = true;
      }
      for (size_t d = 0; d < idx.size(); ++d) {
        box.lo[d] = std::min(box.lo[d], idx[d]);
        box.hi[d] = std::max(box.hi[d], idx[d]);
      }
    });
    if (any) check(fixed, box);
  });
}

// Checks the inferred region of `producer` in root stage `consumer` at iterator `pos`: exact
// (min and extent equal the observed box, unless the box spans the whole dimension) when
// `exact`, else containing every observed index.
void CheckRegion(const State& s, int producer, int consumer, int pos, const IndexFn& index,
                 bool exact) {
  const Stage& c = s.stage(consumer);
  const std::vector<int64_t>& shape = s.stage(producer).op->shape;
  absl::StatusOr<std::vector<RegionDim>> region =
      InferRegion(s, producer, consumer, c.iters[pos].name);
  ASSERT_THAT(region, IsOk());
  ASSERT_EQ(region->size(), shape.size());
  ForEachFixedIteration(
      c, pos, index, /*respect_guards=*/!exact, [&](const Env& env, const Box& box) {
        for (size_t d = 0; d < shape.size(); ++d) {
          const int64_t min = Eval((*region)[d].min, env);
          const int64_t extent = (*region)[d].extent;
          SCOPED_TRACE(::testing::Message()
                       << "dim " << d << " region [" << min << ", +" << extent << ") observed ["
                       << box.lo[d] << ", " << box.hi[d] << "]\n"
                       << s.ToString());
          EXPECT_LE(extent, shape[d]);
          EXPECT_LE(min, box.lo[d]);
          EXPECT_GE(min + extent - 1, box.hi[d]);
          if (exact && box.hi[d] - box.lo[d] + 1 < shape[d] && extent < shape[d]) {
            EXPECT_EQ(min, box.lo[d]);
            EXPECT_EQ(extent, box.hi[d] - box.lo[d] + 1);
          }
        }
      });
}

// Random divisible splits and a random order of a stage's iterators.
State RandomTiling(State s, int stage, std::mt19937& rng, bool divisible) {
  const int n = static_cast<int>(s.stage(stage).iters.size());
  for (int it = n - 1; it >= 0; --it) {
    const int64_t extent = s.stage(stage).iters[it].extent;
    const int64_t l = divisible ? RandomDivisor(extent, rng) : 1 + rng() % 5;
    if (rng() % 3 != 0) s = Apply(s, Split(stage, it, {l}));
  }
  std::vector<int> order(s.stage(stage).iters.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
  std::shuffle(order.begin(), order.end(), rng);
  return Apply(s, ReorderStep{stage, order});
}

TEST(InferRegionTest, MatmulTilesMatchEnumeration) {
  std::mt19937 rng(7);
  const IndexFn a_index = [](const std::vector<int64_t>& p) {
    return std::vector<int64_t>{p[0], p[2]};
  };
  const IndexFn b_index = [](const std::vector<int64_t>& p) {
    return std::vector<int64_t>{p[2], p[1]};
  };
  for (int trial = 0; trial < 25; ++trial) {
    State s = RandomTiling(State::Initial(Matmul(12, 8, 6)), 2, rng, /*divisible=*/true);
    const int pos = rng() % s.stage(2).iters.size();
    CheckRegion(s, 0, 2, pos, a_index, /*exact=*/true);
    CheckRegion(s, 1, 2, pos, b_index, /*exact=*/true);
  }
}

TEST(InferRegionTest, NonDivisibleTilesContainEveryAccess) {
  std::mt19937 rng(8);
  const IndexFn a_index = [](const std::vector<int64_t>& p) {
    return std::vector<int64_t>{p[0], p[2]};
  };
  for (int trial = 0; trial < 25; ++trial) {
    State s = RandomTiling(State::Initial(Matmul(11, 7, 5)), 2, rng, /*divisible=*/false);
    const int pos = rng() % s.stage(2).iters.size();
    CheckRegion(s, 0, 2, pos, a_index, /*exact=*/false);
  }
}

TEST(InferRegionTest, ConvWindowsWithStrideAndDilationMatchEnumeration) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t stride = 1 + rng() % 3, dil = 1 + rng() % 2;
    const IndexFn x_index = [=](const std::vector<int64_t>& p) {
      return std::vector<int64_t>{p[0] * stride + p[2] * dil, p[1] * stride + p[3] * dil};
    };
    State s = RandomTiling(State::Initial(Conv2d(6, 4, 3, 2, stride, dil)), 2, rng, true);
    const int pos = rng() % s.stage(2).iters.size();
    CheckRegion(s, 0, 2, pos, x_index, /*exact=*/true);
  }
}

TEST(InferRegionTest, AttachedConsumerRegionsAreAbsolute) {
  // C (matmul) attached in a tile of D = relu(C); A's region in C at C's k loop is in A's absolute
  // coordinates: the min uses D's iterators, qualified.
  State s = State::Initial(MatmulRelu(16, 12, 6));
  s = Apply(s, Split(3, 0, {4}));
  s = Apply(s, Split(3, 2, {3}));              // D: i.0 i.1 j.0 j.1
  s = Apply(s, ReorderStep{3, {0, 2, 1, 3}});  // i.0 j.0 i.1 j.1
  s = Apply(s, ComputeAtStep{2, 3, 1});        // C: i (4) j (3) k (6)
  s = Apply(s, Split(2, 2, {2}));              // C: i j k.0 k.1
  absl::StatusOr<std::vector<RegionDim>> region = InferRegion(s, 0, 2, "k.0");
  ASSERT_THAT(region, IsOk());
  EXPECT_EQ((*region)[0].extent, 1);
  EXPECT_EQ((*region)[1].extent, 2);
  // D's tile origin is (i.0 * 4, j.0 * 3); C's row is origin + i, its k is k.0 * 2 + k.1.
  const Stage& c = s.stage(2);
  for (int64_t i0 = 0; i0 < 4; ++i0) {
    for (int64_t j0 = 0; j0 < 4; ++j0) {
      Env env = {{QualifiedIterName("D", "i.0"), i0}, {QualifiedIterName("D", "j.0"), j0}};
      ForEachIteration(c.iters, 0, 3, env, [&](const Env& fixed) {
        EXPECT_EQ(Eval((*region)[0].min, fixed), i0 * 4 + fixed.at("i"));
        EXPECT_EQ(Eval((*region)[1].min, fixed), fixed.at("k.0") * 2);
      });
    }
  }
}

TEST(InferRegionTest, SharedProducersAreRelaxedOverThreadLoops) {
  // A.shared at C's k loop under blockIdx / threadIdx bound loops: the region covers the block.
  State s = State::Initial(Matmul(64, 32, 16));
  s = Apply(s, CacheReadStep{0, ir::MemoryScope::kShared, {2}});  // A A.shared B C
  s = Apply(s, Split(3, 0, {8}));                                 // C: i.0 i.1 j k
  s = Apply(s, Split(3, 3, {4}));                                 // C: i.0 i.1 j k.0 k.1
  AnnotationStep bind;
  bind.stage_id = 3;
  bind.iter_id = 0;
  bind.annotation = IteratorAnnotation::kBlockIdxX;
  s = Apply(s, bind);
  bind.iter_id = 1;
  bind.annotation = IteratorAnnotation::kThreadIdxX;
  s = Apply(s, bind);
  s = Apply(s, ComputeAtStep{1, 3, 3});  // at k.0
  EXPECT_THAT(s.stage(1).axis_extents, ElementsAre(8, 4));
  EXPECT_EQ(EffectiveScope(s, 1), ir::MemoryScope::kShared);
  absl::StatusOr<std::vector<RegionDim>> region = InferRegion(s, 1, 3, "k.0");
  ASSERT_THAT(region, IsOk());
  EXPECT_EQ(ir::ToString((*region)[0].min), ir::ToString(ir::MakeVar("i.0") * ir::IntConst(8)));
  // Binding after compute_at (Ansor's order) re-infers the region.
  State late = State::Initial(Matmul(64, 32, 16));
  late = Apply(late, CacheReadStep{0, ir::MemoryScope::kShared, {2}});
  late = Apply(late, Split(3, 0, {8}));
  late = Apply(late, ComputeAtStep{1, 3, 3});
  EXPECT_THAT(late.stage(1).axis_extents, ElementsAre(1, 1));
  bind.iter_id = 1;
  late = Apply(late, bind);
  EXPECT_THAT(late.stage(1).axis_extents, ElementsAre(8, 1));
}

TEST(InferRegionTest, GlobalStageInsideThreadLoopIsLocal) {
  State s = State::Initial(MatmulRelu(16, 16, 4));
  AnnotationStep bind;
  bind.stage_id = 3;
  bind.iter_id = 0;
  bind.annotation = IteratorAnnotation::kBlockIdxX;
  s = Apply(s, bind);
  s = Apply(s, ComputeAtStep{2, 3, 0});
  EXPECT_EQ(EffectiveScope(s, 2), ir::MemoryScope::kShared);
  bind.iter_id = 1;
  bind.annotation = IteratorAnnotation::kThreadIdxX;
  s = Apply(s, bind);
  s = Apply(s, ComputeAtStep{2, 3, 1});
  EXPECT_EQ(EffectiveScope(s, 2), ir::MemoryScope::kLocal);
  EXPECT_THAT(s.stage(2).axis_extents, ElementsAre(1, 1));
  EXPECT_EQ(EffectiveScope(s, 3), ir::MemoryScope::kGlobal);
}

TEST(InferRegionTest, ReadsThroughInlinedStagesAndUnionsConstantOffsets) {
  // B[i] = A[2i + 1] (inlined); C[i] = B[i] + A[2i + 5].
  ir::Tensor a = Input("A", {40});
  auto b = ir::Compute(
      "B", {16}, [&](const Axes& ax) { return a(ax[0] * 2 + 1); }, Names({"i"}));
  auto c = ir::Compute(
      "C", {16}, [&](const Axes& ax) { return (*b)(ax[0]) + a(ax[0] * 2 + 5); }, Names({"i"}));
  State s = Apply(State::Initial(MakeDag({*c})), ComputeInlineStep{1});
  s = Apply(s, Split(2, 0, {4}));  // C: i.0 i.1
  absl::StatusOr<std::vector<RegionDim>> region = InferRegion(s, 0, 2, "i.0");
  ASSERT_THAT(region, IsOk());
  // Rows 2*(4*i.0 + i.1) + {1, 5}, i.1 in [0, 4): [8*i.0 + 1, 8*i.0 + 11].
  EXPECT_EQ((*region)[0].extent, 11);
  for (int64_t i0 = 0; i0 < 4; ++i0) EXPECT_EQ(Eval((*region)[0].min, {{"i.0", i0}}), 8 * i0 + 1);
  CheckRegion(
      s, 0, 2, 0, [](const std::vector<int64_t>& p) { return std::vector<int64_t>{2 * p[0] + 1}; },
      /*exact=*/false);
}

TEST(InferRegionTest, MinsThatDifferByNonConstantsFallBackToTheWholeDimension) {
  // C[i] = A[i] + A[2i]: the boxes' mins differ by i.
  ir::Tensor a = Input("A", {32});
  auto c = ir::Compute(
      "C", {16}, [&](const Axes& ax) { return a(ax[0]) + a(ax[0] * 2); }, Names({"i"}));
  State s = Apply(State::Initial(MakeDag({*c})), Split(1, 0, {4}));
  absl::StatusOr<std::vector<RegionDim>> region = InferRegion(s, 0, 1, "i.0");
  ASSERT_THAT(region, IsOk());
  EXPECT_EQ(ir::AsConstInt((*region)[0].min), 0);
  EXPECT_EQ((*region)[0].extent, 32);
}

TEST(InferRegionTest, DivAndModOfFusedLoopsAreBoundedByIntervals) {
  // A fused loop below the attach point varies under div / mod.
  std::mt19937 rng(10);
  for (int trial = 0; trial < 20; ++trial) {
    State s = RandomTiling(State::Initial(Matmul(12, 8, 6)), 2, rng, /*divisible=*/true);
    const int n = static_cast<int>(s.stage(2).iters.size());
    if (n < 3) continue;
    const int first = rng() % (n - 1);
    s = Apply(s, FuseStep{2, {first, first + 1}});
    const int pos = rng() % (n - 1);
    CheckRegion(
        s, 0, 2, pos,
        [](const std::vector<int64_t>& p) {
          return std::vector<int64_t>{p[0], p[2]};
        },
        /*exact=*/false);
  }
  State s = State::Initial(Matmul(12, 8, 6));
  s = Apply(s, Split(2, 0, {4}));     // i.0 i.1 j k
  s = Apply(s, FuseStep{2, {1, 2}});  // i.0 i.1@j k: i = i.0*4 + (i.1@j)/8
  absl::StatusOr<std::vector<RegionDim>> region = InferRegion(s, 0, 2, "i.0");
  ASSERT_THAT(region, IsOk());
  EXPECT_EQ((*region)[0].extent, 4);
  EXPECT_EQ((*region)[1].extent, 6);
}

TEST(InferRegionTest, NonAffineMixOfFixedAndVaryingFallsBackToTheWholeDimension) {
  // C[i] = A[i / 3]: (4*i.0 + i.1) / 3 divides a fixed and a varying loop together.
  ir::Tensor a = Input("A", {6});
  auto c = ir::Compute(
      "C", {16}, [&](const Axes& ax) { return a(ax[0] / 3); }, Names({"i"}));
  State s = Apply(State::Initial(MakeDag({*c})), Split(1, 0, {4}));
  absl::StatusOr<std::vector<RegionDim>> region = InferRegion(s, 0, 1, "i.0");
  ASSERT_THAT(region, IsOk());
  EXPECT_EQ(ir::AsConstInt((*region)[0].min), 0);
  EXPECT_EQ((*region)[0].extent, 6);
}

TEST(InferRegionTest, StagesAttachedInsideTheConsumerCount) {
  // B = A + 1 is attached inside C below C's outer loop; A's region at that loop includes B's.
  ir::Tensor a = Input("A", {16});
  auto b = ir::Compute(
      "B", {16}, [&](const Axes& ax) { return a(ax[0]) + ir::FloatConst(1); }, Names({"i"}));
  auto c = ir::Compute(
      "C", {16}, [&](const Axes& ax) { return (*b)(ax[0]) * ir::FloatConst(2); }, Names({"i"}));
  State s = Apply(State::Initial(MakeDag({*c})), Split(2, 0, {4}));  // C: i.0 i.1
  s = Apply(s, ComputeAtStep{1, 2, 1});                              // B at i.1
  absl::StatusOr<std::vector<RegionDim>> region = InferRegion(s, 0, 2, "i.0");
  ASSERT_THAT(region, IsOk());
  EXPECT_EQ((*region)[0].extent, 4);
  EXPECT_EQ(ir::ToString((*region)[0].min), ir::ToString(ir::MakeVar("i.0") * ir::IntConst(4)));
}

TEST(InferRegionTest, Errors) {
  State s = State::Initial(MatmulRelu(8, 8, 8));
  EXPECT_THAT(InferRegion(s, 3, 2, "i"),
              StatusIs(kInvalid, HasSubstr("stage 'C' does not read stage 'D'")));
  EXPECT_THAT(InferRegion(s, 2, 3, "x"),
              StatusIs(kInvalid, HasSubstr("stage 'D' has no iterator 'x'")));
  EXPECT_THAT(InferRegion(s, 2, 9, "i"), StatusIs(kInvalid, HasSubstr("stage ids 2 and 9")));
  EXPECT_THAT(InferRegion(s, 2, 2, "i"), StatusIs(kInvalid, HasSubstr("its own consumer")));
}

}  // namespace
}  // namespace tilesearch::schedule
