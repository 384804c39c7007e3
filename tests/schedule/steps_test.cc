// Each transform step: its effect on the state (checked by enumerating the loops against the
// axis domain) and each misuse's Status.
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/apply_step.h"
#include "schedule/bound_inference.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "tests/schedule/schedule_test_util.h"

namespace tilesearch::schedule {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using namespace ::tilesearch::schedule::testing;  // NOLINT

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

State Apply(const State& s, const Step& step) {
  absl::StatusOr<State> r = ApplyStep(s, step);
  EXPECT_THAT(r, IsOk()) << StepToString(step);
  return r.ok() ? *r : s;
}

std::vector<std::string> IterNames(const Stage& s) {
  std::vector<std::string> names;
  for (const Iterator& it : s.iters) names.push_back(it.name);
  return names;
}
std::vector<int64_t> IterExtents(const Stage& s) {
  std::vector<int64_t> e;
  for (const Iterator& it : s.iters) e.push_back(it.extent);
  return e;
}

SplitStep Split(int stage, int iter, std::vector<std::optional<int64_t>> lengths,
                bool inner_to_outer = true, int64_t extent = 0) {
  SplitStep s;
  s.stage_id = stage;
  s.iter_id = iter;
  s.lengths = std::move(lengths);
  s.inner_to_outer = inner_to_outer;
  s.extent = extent;
  return s;
}

AnnotationStep Annotate(int stage, int iter, IteratorAnnotation a) {
  AnnotationStep s;
  s.stage_id = stage;
  s.iter_id = iter;
  s.annotation = a;
  return s;
}

// ---------------------------------------------------------------------------------------------
// State::Initial

TEST(InitialStateTest, OneStagePerDagStageWithAxesThenReduceAxes) {
  State s = State::Initial(Matmul(8, 6, 4));
  ASSERT_EQ(s.num_stages(), 3);
  EXPECT_EQ(s.stage(2).name(), "C");
  EXPECT_THAT(IterNames(s.stage(2)), ElementsAre("i", "j", "k"));
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(8, 6, 4));
  EXPECT_EQ(s.stage(2).iters[2].kind, IteratorKind::kReduce);
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({8, 6, 4}));
  EXPECT_TRUE(s.stage(0).iters.empty());
  EXPECT_TRUE(s.steps().empty());
}

// ---------------------------------------------------------------------------------------------
// split

TEST(SplitTest, InnerToOuterNamesExtentsAndCoverage) {
  State s = Apply(State::Initial(Matmul(64, 6, 4)), Split(2, 0, {8, 4}, true, 64));
  EXPECT_THAT(IterNames(s.stage(2)), ElementsAre("i.0", "i.1", "i.2", "j", "k"));
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(2, 8, 4, 6, 4));
  EXPECT_TRUE(s.stage(2).guards.empty());
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({64, 6, 4}));
  ASSERT_EQ(s.steps().size(), 1u);
}

TEST(SplitTest, OuterToInnerPutsTheRestInnermost) {
  State s = Apply(State::Initial(Matmul(60, 6, 4)), Split(2, 0, {3, 2}, false));
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(3, 2, 10, 6, 4));
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({60, 6, 4}));
}

TEST(SplitTest, NonDivisibleAddsAGuardAndVisitsEachPointOnce) {
  State s = Apply(State::Initial(Matmul(60, 5, 7)), Split(2, 2, {4}));
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(60, 5, 2, 4));
  EXPECT_EQ(s.stage(2).guards.size(), 1u);
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({60, 5, 7}));
}

TEST(SplitTest, LengthsLargerThanTheExtentAreAllowed) {
  State s = Apply(State::Initial(Matmul(6, 5, 7)), Split(2, 0, {16}));
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(1, 6, 5, 7));  // tightened to 6
  EXPECT_TRUE(s.stage(2).guards.empty());
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({6, 5, 7}));
}

TEST(SplitTest, InnerToOuterTightensEachLengthToWhatIsLeft) {
  // 16 split by [4, 8]: inner 8, then min(4, 2) = 2, rest 1 (TVM PassDownDomain).
  State s = Apply(State::Initial(Matmul(16, 5, 7)), Split(2, 0, {4, 8}));
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(1, 2, 8, 5, 7));
  EXPECT_TRUE(s.stage(2).guards.empty());
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({16, 5, 7}));
  // 10 split by [4, 4]: inner 4, then min(4, 3) = 3, rest 1; 12 points, 2 guarded off.
  s = Apply(State::Initial(Matmul(10, 5, 7)), Split(2, 0, {4, 4}));
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(1, 3, 4, 5, 7));
  EXPECT_EQ(s.stage(2).guards.size(), 1u);
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({10, 5, 7}));
}

TEST(SplitTest, SplittingASplitResultNestsNames) {
  State s = Apply(State::Initial(Matmul(64, 6, 4)), Split(2, 0, {8}));
  s = Apply(s, Split(2, 1, {2}));
  EXPECT_THAT(IterNames(s.stage(2)), ElementsAre("i.0", "i.1.0", "i.1.1", "j", "k"));
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({64, 6, 4}));
}

TEST(SplitTest, DropsTheAnnotationOfTheSplitIterator) {
  State s = Apply(State::Initial(Matmul(64, 6, 4)), Annotate(2, 0, IteratorAnnotation::kParallel));
  s = Apply(s, Split(2, 0, {8}));
  EXPECT_EQ(s.stage(2).iters[0].annotation, IteratorAnnotation::kNone);
  EXPECT_EQ(s.stage(2).iters[1].annotation, IteratorAnnotation::kNone);
}

TEST(SplitTest, UnfilledLengthIsAnError) {
  EXPECT_THAT(ApplyStep(State::Initial(Matmul(8, 8, 8)), Split(2, 0, {std::nullopt, 2})),
              StatusIs(kInvalid, HasSubstr("split(2, 0, [?, 2]): length 0 is unfilled")));
}

TEST(SplitTest, LengthBelowOneIsAnError) {
  EXPECT_THAT(ApplyStep(State::Initial(Matmul(8, 8, 8)), Split(2, 0, {0})),
              StatusIs(kInvalid, HasSubstr("length 0 is 0 (must be >= 1)")));
}

TEST(SplitTest, NoLengthsIsAnError) {
  EXPECT_THAT(ApplyStep(State::Initial(Matmul(8, 8, 8)), Split(2, 0, {})),
              StatusIs(kInvalid, HasSubstr("at least one length")));
}

TEST(SplitTest, InlinedStageIsAnError) {
  State s = Apply(State::Initial(Chain(16)), ComputeInlineStep{1});
  EXPECT_THAT(ApplyStep(s, Split(1, 0, {4})),
              StatusIs(kInvalid, HasSubstr("split(1, 0, [4]): stage 'B' is inlined")));
}

TEST(SplitTest, PlaceholderIsAnError) {
  EXPECT_THAT(ApplyStep(State::Initial(Chain(16)), Split(0, 0, {4})),
              StatusIs(kInvalid, HasSubstr("stage 'A' is a placeholder")));
}

TEST(SplitTest, BadIdsAreErrors) {
  State s = State::Initial(Matmul(8, 8, 8));
  EXPECT_THAT(ApplyStep(s, Split(7, 0, {2})),
              StatusIs(kInvalid, HasSubstr("stage id 7 is out of range (the state has 3")));
  EXPECT_THAT(ApplyStep(s, Split(-1, 0, {2})), StatusIs(kInvalid, HasSubstr("stage id -1")));
  EXPECT_THAT(ApplyStep(s, Split(2, 3, {2})),
              StatusIs(kInvalid, HasSubstr("iterator id 3 is out of range (stage 'C' has 3")));
}

TEST(SplitTest, RecordedExtentMustMatchOnARootStage) {
  EXPECT_THAT(ApplyStep(State::Initial(Matmul(8, 8, 8)), Split(2, 0, {2}, true, 16)),
              StatusIs(kInvalid, HasSubstr("recorded for extent 16 but iterator 'i' of stage "
                                           "'C' has extent 8")));
}

// ---------------------------------------------------------------------------------------------
// follow_split / follow_fused_split

TEST(FollowSplitTest, TakesTheFirstLengthsAndTheProductOfTheRest) {
  State s = Apply(State::Initial(MatmulRelu(64, 32, 8)), Split(2, 0, {2, 4, 2}));
  s = Apply(s, FollowSplitStep{3, 0, 0, 2});  // lengths [2, 4*2]
  EXPECT_THAT(IterNames(s.stage(3)), ElementsAre("i.0", "i.1", "i.2", "j"));
  EXPECT_THAT(IterExtents(s.stage(3)), ElementsAre(4, 2, 8, 32));
  s = Apply(s, FollowSplitStep{3, 3, 0, 3});  // all three lengths
  EXPECT_THAT(IterExtents(s.stage(3)), ElementsAre(4, 2, 8, 2, 2, 4, 2));
  EXPECT_EQ(AxisPointCounts(s.stage(3)), FullBox({64, 32}));
  // n_split = lengths + 1 appends a length of 1 (TVM ExtractSplitLengths).
  s = Apply(s, FollowSplitStep{3, 0, 0, 4});
  EXPECT_THAT(IterExtents(s.stage(3)).size(), 11u);
}

TEST(FollowSplitTest, SourceMustBeASplitAndNSplitInRange) {
  State s = Apply(State::Initial(MatmulRelu(64, 32, 8)), Split(2, 0, {2, 4}));
  s = Apply(s, ReorderStep{2, {1, 0, 2, 3, 4}});
  EXPECT_THAT(ApplyStep(s, FollowSplitStep{3, 0, 1, 2}),
              StatusIs(kInvalid, HasSubstr("source step 1 is reorder(2, [1, 0, 2, 3, 4]), not "
                                           "a split")));
  EXPECT_THAT(ApplyStep(s, FollowSplitStep{3, 0, 0, 4}),
              StatusIs(kInvalid, HasSubstr("n_split 4 must be in [1, 3]")));
  EXPECT_THAT(ApplyStep(s, FollowSplitStep{3, 0, 9, 2}),
              StatusIs(kInvalid, HasSubstr("source step 9 is out of range")));
}

TEST(FollowFusedSplitTest, MultipliesTheLengthsAtOneLevel) {
  State s = Apply(State::Initial(MatmulRelu(64, 32, 8)), Split(2, 0, {2, 4}));
  s = Apply(s, Split(2, 2, {8, 2}));
  FollowFusedSplitStep f;
  f.stage_id = 3;
  f.iter_id = 1;
  f.src_step_ids = {0, 1};
  f.level = 0;
  f.factor_or_nparts = true;  // inner factor 2 * 8 = 16
  s = Apply(s, f);
  EXPECT_THAT(IterExtents(s.stage(3)), ElementsAre(64, 2, 16));
  f.iter_id = 0;
  f.level = 1;
  f.factor_or_nparts = false;  // nparts 4 * 2 = 8
  s = Apply(s, f);
  EXPECT_THAT(IterExtents(s.stage(3)), ElementsAre(8, 8, 2, 16));
  EXPECT_EQ(AxisPointCounts(s.stage(3)), FullBox({64, 32}));
  f.level = 2;
  EXPECT_THAT(ApplyStep(s, f), StatusIs(kInvalid, HasSubstr("level 2 is out of range")));
}

// ---------------------------------------------------------------------------------------------
// fuse

TEST(FuseTest, AdjacentIteratorsFuseWithDivModRecovery) {
  State s = Apply(State::Initial(Matmul(6, 5, 7)), FuseStep{2, {0, 1}});
  EXPECT_THAT(IterNames(s.stage(2)), ElementsAre("i@j", "k"));
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(30, 7));
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({6, 5, 7}));
}

TEST(FuseTest, ThreeIteratorsAndMixedKind) {
  State s = Apply(State::Initial(Matmul(6, 5, 7)), FuseStep{2, {0, 1, 2}});
  EXPECT_THAT(IterNames(s.stage(2)), ElementsAre("i@j@k"));
  EXPECT_EQ(s.stage(2).iters[0].kind, IteratorKind::kMixed);
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({6, 5, 7}));
}

TEST(FuseTest, NonAdjacentIsAnError) {
  EXPECT_THAT(ApplyStep(State::Initial(Matmul(6, 5, 7)), FuseStep{2, {0, 2}}),
              StatusIs(kInvalid, HasSubstr("fuse(2, [0, 2]): iterators are not adjacent")));
}

TEST(FuseTest, EmptyAndOutOfRangeAreErrors) {
  State s = State::Initial(Matmul(6, 5, 7));
  EXPECT_THAT(ApplyStep(s, FuseStep{2, {}}), StatusIs(kInvalid, HasSubstr("no iterators")));
  EXPECT_THAT(ApplyStep(s, FuseStep{2, {2, 3}}),
              StatusIs(kInvalid, HasSubstr("iterator id 3 is out of range")));
}

TEST(FuseTest, FusingGuardedSplitsKeepsCoverage) {
  State s = Apply(State::Initial(Matmul(10, 6, 3)), Split(2, 0, {4}));
  s = Apply(s, Split(2, 2, {4}));                 // i.0 i.1 j.0 j.1 k
  s = Apply(s, ReorderStep{2, {0, 2, 1, 3, 4}});  // i.0 j.0 i.1 j.1 k
  s = Apply(s, FuseStep{2, {0, 1}});
  s = Apply(s, FuseStep{2, {1, 2}});
  EXPECT_THAT(IterNames(s.stage(2)), ElementsAre("i.0@j.0", "i.1@j.1", "k"));
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({10, 6, 3}));
}

// ---------------------------------------------------------------------------------------------
// reorder

TEST(ReorderTest, PermutesIterators) {
  State s = Apply(State::Initial(Matmul(6, 5, 7)), ReorderStep{2, {2, 0, 1}});
  EXPECT_THAT(IterNames(s.stage(2)), ElementsAre("k", "i", "j"));
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({6, 5, 7}));
}

TEST(ReorderTest, NotAPermutationIsAnError) {
  State s = State::Initial(Matmul(6, 5, 7));
  EXPECT_THAT(ApplyStep(s, ReorderStep{2, {0, 0, 1}}),
              StatusIs(kInvalid, HasSubstr("reorder(2, [0, 0, 1]): the order is not a "
                                           "permutation of 0..2 (id 0 repeats)")));
  EXPECT_THAT(ApplyStep(s, ReorderStep{2, {0, 1}}),
              StatusIs(kInvalid, HasSubstr("not a permutation")));
  EXPECT_THAT(ApplyStep(s, ReorderStep{2, {0, 1, 5}}),
              StatusIs(kInvalid, HasSubstr("id 5 is out of range")));
}

// ---------------------------------------------------------------------------------------------
// Random split / fuse / reorder sequences keep every stage's coverage exact.

TEST(LoopTransformPropertyTest, RandomSequencesVisitEachPointOnce) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 60; ++trial) {
    State s = State::Initial(Matmul(1 + rng() % 12, 1 + rng() % 9, 1 + rng() % 7));
    for (int n = 0; n < 6; ++n) {
      const int iters = static_cast<int>(s.stage(2).iters.size());
      Step step;
      switch (rng() % 3) {
        case 0: {
          std::vector<std::optional<int64_t>> lengths;
          for (int k = 0, nl = 1 + rng() % 2; k < nl; ++k) lengths.push_back(1 + rng() % 5);
          step = Split(2, rng() % iters, lengths, rng() % 2);
          break;
        }
        case 1: {
          const int first = rng() % iters;
          const int count = 1 + rng() % std::min(3, iters - first);
          std::vector<int> ids;
          for (int k = 0; k < count; ++k) ids.push_back(first + k);
          step = FuseStep{2, ids};
          break;
        }
        default: {
          std::vector<int> order(iters);
          for (int k = 0; k < iters; ++k) order[k] = k;
          std::shuffle(order.begin(), order.end(), rng);
          step = ReorderStep{2, order};
        }
      }
      absl::StatusOr<State> next = ApplyStep(s, step);
      ASSERT_THAT(next, IsOk()) << StepToString(step);
      s = *next;
    }
    const Stage& c = s.stage(2);
    EXPECT_EQ(AxisPointCounts(c), FullBox(DomainOf(c))) << s.ToString();
  }
}

// ---------------------------------------------------------------------------------------------
// compute_at / compute_root / compute_inline

TEST(ComputeAtTest, AttachesWithTheRegionExtents) {
  // D = relu(C): C computed inside D's tile of 8 x 4.
  State s = Apply(State::Initial(MatmulRelu(64, 32, 16)), Split(3, 0, {8}));
  s = Apply(s, Split(3, 2, {4}));              // D: i.0 i.1 j.0 j.1
  s = Apply(s, ReorderStep{3, {0, 2, 1, 3}});  // i.0 j.0 i.1 j.1
  s = Apply(s, ComputeAtStep{2, 3, 1});        // at j.0
  const Stage& c = s.stage(2);
  EXPECT_EQ(c.location, ComputeLocation::kAttached);
  EXPECT_EQ(c.attach_stage, 3);
  EXPECT_EQ(c.attach_iter, "j.0");
  EXPECT_THAT(c.axis_extents, ElementsAre(8, 4));
  EXPECT_THAT(IterExtents(c), ElementsAre(8, 4, 16));  // reduce keeps its extent
}

TEST(ComputeAtTest, SplittingTheAttachIteratorMovesTheAttachPointInward) {
  State s = Apply(State::Initial(MatmulRelu(64, 32, 16)), ComputeAtStep{2, 3, 0});
  EXPECT_THAT(s.stage(2).axis_extents, ElementsAre(1, 32));
  s = Apply(s, Split(3, 0, {4}));
  EXPECT_EQ(s.stage(2).attach_iter, "i.1");
  EXPECT_THAT(s.stage(2).axis_extents, ElementsAre(1, 32));
}

TEST(ComputeAtTest, ConsumerTilingAfterComputeAtRebuildsTheProducerLoops) {
  // Ansor's multi-level tiling with fusion: tile C, follow it in D, then attach C.
  State s = Apply(State::Initial(MatmulRelu(64, 32, 16)), Split(2, 0, {4, 2}));  // step 0
  s = Apply(s, Split(2, 3, {2, 4}));                                             // step 1
  s = Apply(s, ReorderStep{2, {0, 3, 1, 4, 2, 5, 6}});
  s = Apply(s, FollowSplitStep{3, 0, 0, 1});  // D: i.0 (8) i.1 (8)
  s = Apply(s, FollowSplitStep{3, 2, 1, 1});  // D: i.0 i.1 j.0 (4) j.1 (8)
  s = Apply(s, ReorderStep{3, {0, 2, 1, 3}});
  s = Apply(s, ComputeAtStep{2, 3, 1});  // at j.0: an 8 x 8 tile
  const Stage& c = s.stage(2);
  EXPECT_THAT(c.axis_extents, ElementsAre(8, 8));
  // C's tiling was replayed on the 8 x 8 tile: i -> (1, 4, 2), j -> (1, 2, 4).
  EXPECT_THAT(IterNames(c), ElementsAre("i.0", "j.0", "i.1", "j.1", "i.2", "j.2", "k"));
  EXPECT_THAT(IterExtents(c), ElementsAre(1, 1, 4, 2, 2, 4, 16));
  EXPECT_EQ(AxisPointCounts(c), FullBox(DomainOf(c)));
  // Changing D's tiling (a fuse) keeps the region; binding changes nothing for a global stage
  // without thread loops.
  s = Apply(s, FuseStep{3, {0, 1}});
  EXPECT_EQ(s.stage(2).attach_iter, "i.0@j.0");
  EXPECT_THAT(s.stage(2).axis_extents, ElementsAre(8, 8));
}

TEST(ComputeAtTest, ComputeRootRestoresTheFullExtents) {
  State s = Apply(State::Initial(MatmulRelu(64, 32, 16)), ComputeAtStep{2, 3, 1});
  EXPECT_THAT(s.stage(2).axis_extents, ElementsAre(1, 1));
  s = Apply(s, Split(2, 2, {4}));
  s = Apply(s, ComputeRootStep{2});
  EXPECT_EQ(s.stage(2).location, ComputeLocation::kRoot);
  EXPECT_THAT(IterExtents(s.stage(2)), ElementsAre(64, 32, 4, 4));
  EXPECT_EQ(AxisPointCounts(s.stage(2)), FullBox({64, 32, 16}));
}

TEST(ComputeAtTest, UnrelatedStageIsAnError) {
  // C does not read D; A is a placeholder; B (inlined) and C are unrelated in Chain? C reads B.
  State s = State::Initial(MatmulRelu(8, 8, 8));
  EXPECT_THAT(ApplyStep(s, ComputeAtStep{3, 2, 0}),
              StatusIs(kInvalid, HasSubstr("compute_at(3, 2, 0): stage 'C' does not read stage "
                                           "'D'")));
}

TEST(ComputeAtTest, SelfPlaceholderAndInlinedTargetsAreErrors) {
  State s = State::Initial(MatmulRelu(8, 8, 8));
  EXPECT_THAT(ApplyStep(s, ComputeAtStep{2, 2, 0}),
              StatusIs(kInvalid, HasSubstr("cannot compute stage 'C' at itself")));
  EXPECT_THAT(ApplyStep(s, ComputeAtStep{2, 0, 0}),
              StatusIs(kInvalid, HasSubstr("target stage 'A' is a placeholder")));
  EXPECT_THAT(ApplyStep(s, ComputeAtStep{0, 2, 0}),
              StatusIs(kInvalid, HasSubstr("stage 'A' is a placeholder")));
  EXPECT_THAT(ApplyStep(s, ComputeAtStep{2, 3, 5}),
              StatusIs(kInvalid, HasSubstr("iterator id 5 is out of range")));
  State chain = Apply(State::Initial(Chain(16)), ComputeInlineStep{1});
  EXPECT_THAT(ApplyStep(chain, ComputeAtStep{2, 1, 0}),
              StatusIs(kInvalid, HasSubstr("target stage 'B' is inlined")));
}

TEST(ComputeInlineTest, InlinesAnElementwiseStage) {
  State s = Apply(State::Initial(Chain(16)), ComputeInlineStep{1});
  EXPECT_EQ(s.stage(1).location, ComputeLocation::kInlined);
}

TEST(ComputeInlineTest, MisusesAreErrors) {
  State s = State::Initial(MatmulRelu(8, 8, 8));
  EXPECT_THAT(ApplyStep(s, ComputeInlineStep{2}),
              StatusIs(kInvalid, HasSubstr("compute_inline(2): stage 'C' has a reduction")));
  EXPECT_THAT(ApplyStep(s, ComputeInlineStep{3}),
              StatusIs(kInvalid, HasSubstr("stage 'D' is an output of the DAG")));
  EXPECT_THAT(ApplyStep(s, ComputeInlineStep{0}),
              StatusIs(kInvalid, HasSubstr("stage 'A' is a placeholder")));
}

TEST(ComputeInlineTest, StageWithAnAttachedStageIsAnError) {
  ir::Tensor a = Input("A", {16});
  auto b = ir::Compute(
      "B", {16}, [&](const Axes& ax) { return a(ax[0]) + ir::FloatConst(1); }, Names({"i"}));
  auto c = ir::Compute(
      "C", {16}, [&](const Axes& ax) { return (*b)(ax[0]) * ir::FloatConst(2); }, Names({"i"}));
  auto d = ir::Compute(
      "D", {16}, [&](const Axes& ax) { return (*c)(ax[0]) - ir::FloatConst(3); }, Names({"i"}));
  State s = State::Initial(MakeDag({*d}));
  s = Apply(s, ComputeAtStep{1, 2, 0});  // B inside C
  EXPECT_THAT(ApplyStep(s, ComputeInlineStep{2}),
              StatusIs(kInvalid, HasSubstr("stage 'B' is attached at 'i' of stage 'C'")));
}

// ---------------------------------------------------------------------------------------------
// cache_read / cache_write

TEST(CacheReadTest, InsertsACopyStageAndRedirectsTheReaders) {
  State s = Apply(State::Initial(Matmul(8, 6, 4)), CacheReadStep{0, ir::MemoryScope::kShared, {2}});
  ASSERT_EQ(s.num_stages(), 4);
  const Stage& cache = s.stage(1);
  EXPECT_EQ(cache.name(), "A.shared");
  EXPECT_EQ(cache.scope, ir::MemoryScope::kShared);
  EXPECT_THAT(cache.op->shape, ElementsAre(8, 4));
  const auto* load = cache.op->body.as<ir::LoadNode>();
  ASSERT_NE(load, nullptr);
  EXPECT_EQ(load->buffer, "A");
  EXPECT_EQ(s.stage(2).name(), "B");
  EXPECT_EQ(s.stage(3).name(), "C");
  const std::string body = ir::ToString(s.stage(3).op->body);
  EXPECT_THAT(body, HasSubstr("A.shared["));
  EXPECT_THAT(body, ::testing::Not(HasSubstr("A[")));
}

TEST(CacheReadTest, ShiftsAttachedStagesAndAttachesTheCache) {
  State s = Apply(State::Initial(Matmul(8, 6, 4)), CacheReadStep{0, ir::MemoryScope::kShared, {2}});
  s = Apply(s, CacheReadStep{2, ir::MemoryScope::kShared, {3}});  // B.shared
  ASSERT_EQ(s.stage(3).name(), "B.shared");
  s = Apply(s, ComputeAtStep{1, 4, 2});  // A.shared at C's k
  s = Apply(s, ComputeAtStep{3, 4, 2});  // B.shared at C's k
  EXPECT_THAT(s.stage(1).axis_extents, ElementsAre(1, 1));
  // A second cache_read of A for the same reader is an error (C reads A.shared now).
  EXPECT_THAT(ApplyStep(s, CacheReadStep{0, ir::MemoryScope::kLocal, {4}}),
              StatusIs(kInvalid, HasSubstr("stage 'C' does not read stage 'A'")));
  // Redirecting C to a new cache of A.shared leaves A.shared attached in a stage that no longer
  // reads it.
  EXPECT_THAT(ApplyStep(s, CacheReadStep{1, ir::MemoryScope::kLocal, {4}}),
              StatusIs(kInvalid, HasSubstr("cannot infer the region of stage 'A.shared': stage "
                                           "'C' does not read stage 'A.shared'")));
}

TEST(CacheReadTest, InsertingShiftsTheAttachStageOfLaterStages) {
  State s = Apply(State::Initial(MatmulRelu(8, 6, 4)), ComputeAtStep{2, 3, 1});
  s = Apply(s, CacheReadStep{0, ir::MemoryScope::kShared, {2}});
  EXPECT_EQ(s.stage(3).name(), "C");
  EXPECT_EQ(s.stage(3).attach_stage, 4);
  EXPECT_EQ(s.stage(4).name(), "D");
}

TEST(CacheReadTest, MisusesAreErrors) {
  State s = State::Initial(Matmul(8, 6, 4));
  EXPECT_THAT(ApplyStep(s, CacheReadStep{0, ir::MemoryScope::kShared, {1}}),
              StatusIs(kInvalid, HasSubstr("cache_read(0, shared, [1]): stage 'B' does not read "
                                           "stage 'A'")));
  EXPECT_THAT(ApplyStep(s, CacheReadStep{0, ir::MemoryScope::kShared, {}}),
              StatusIs(kInvalid, HasSubstr("no reader stages")));
  EXPECT_THAT(ApplyStep(s, CacheReadStep{0, ir::MemoryScope::kShared, {2, 2}}),
              StatusIs(kInvalid, HasSubstr("listed twice")));
  EXPECT_THAT(ApplyStep(s, CacheReadStep{0, ir::MemoryScope::kShared, {9}}),
              StatusIs(kInvalid, HasSubstr("stage id 9 is out of range")));
  EXPECT_THAT(ApplyStep(s, CacheReadStep{0, ir::MemoryScope::kGlobal, {2}}),
              StatusIs(kInvalid, HasSubstr("scope shared or local")));
  State chain = Apply(State::Initial(Chain(16)), ComputeInlineStep{1});
  EXPECT_THAT(ApplyStep(chain, CacheReadStep{1, ir::MemoryScope::kShared, {2}}),
              StatusIs(kInvalid, HasSubstr("stage 'B' is inlined")));
}

TEST(CacheWriteTest, TheCacheComputesAndTheOriginalCopies) {
  State s = Apply(State::Initial(Matmul(8, 6, 4)), CacheWriteStep{2, ir::MemoryScope::kLocal});
  ASSERT_EQ(s.num_stages(), 4);
  const Stage& cache = s.stage(2);
  const Stage& orig = s.stage(3);
  EXPECT_EQ(cache.name(), "C.local");
  EXPECT_EQ(cache.scope, ir::MemoryScope::kLocal);
  EXPECT_EQ(cache.op->reduce, ir::ReduceKind::kSum);
  EXPECT_THAT(IterNames(cache), ElementsAre("i", "j", "k"));
  EXPECT_EQ(orig.name(), "C");
  EXPECT_EQ(orig.op->reduce, ir::ReduceKind::kNone);
  EXPECT_THAT(IterNames(orig), ElementsAre("i", "j"));
  EXPECT_EQ(ir::ToString(orig.op->body), "C.local[i, j]");
  // The cache can then be attached in the copy (Ansor's GPU sketch).
  s = Apply(s, Split(3, 0, {4}));
  s = Apply(s, ComputeAtStep{2, 3, 1});
  EXPECT_THAT(s.stage(2).axis_extents, ElementsAre(1, 6));
}

TEST(CacheWriteTest, MisusesAreErrors) {
  State s = State::Initial(Matmul(8, 6, 4));
  EXPECT_THAT(ApplyStep(s, CacheWriteStep{0, ir::MemoryScope::kLocal}),
              StatusIs(kInvalid, HasSubstr("cache_write(0, local): stage 'A' is a placeholder")));
  State split = Apply(s, Split(2, 0, {2}));
  EXPECT_THAT(ApplyStep(split, CacheWriteStep{2, ir::MemoryScope::kLocal}),
              StatusIs(kInvalid, HasSubstr("cache_write must come before other loop transforms "
                                           "of stage 'C'")));
  State chain = Apply(State::Initial(Chain(16)), ComputeInlineStep{1});
  EXPECT_THAT(ApplyStep(chain, CacheWriteStep{1, ir::MemoryScope::kLocal}),
              StatusIs(kInvalid, HasSubstr("stage 'B' is inlined")));
}

// ---------------------------------------------------------------------------------------------
// annotation / pragma / storage_align

TEST(AnnotationTest, SetsTheAnnotation) {
  State s = Apply(State::Initial(Matmul(8, 6, 4)), Annotate(2, 0, IteratorAnnotation::kBlockIdxX));
  s = Apply(s, Annotate(2, 1, IteratorAnnotation::kThreadIdxX));
  s = Apply(s, Annotate(2, 2, IteratorAnnotation::kVectorize));
  EXPECT_EQ(s.stage(2).iters[0].annotation, IteratorAnnotation::kBlockIdxX);
  EXPECT_EQ(s.stage(2).iters[1].annotation, IteratorAnnotation::kThreadIdxX);
  EXPECT_EQ(s.stage(2).iters[2].annotation, IteratorAnnotation::kVectorize);
}

TEST(AnnotationTest, VectorizingANonInnermostLoopIsAnError) {
  EXPECT_THAT(
      ApplyStep(State::Initial(Matmul(8, 6, 4)), Annotate(2, 1, IteratorAnnotation::kVectorize)),
      StatusIs(kInvalid, HasSubstr("annotation(2, 1, vectorize): vectorize needs the innermost "
                                   "iterator, but 'j' is 1 of 3 in stage 'C'")));
}

TEST(AnnotationTest, BindingAReduceIteratorToBlockIdxIsAnError) {
  State s = State::Initial(Matmul(8, 6, 4));
  EXPECT_THAT(ApplyStep(s, Annotate(2, 2, IteratorAnnotation::kBlockIdxX)),
              StatusIs(kInvalid, HasSubstr("cannot bind reduce iterator 'k' of stage 'C' to "
                                           "blockIdx.x")));
  EXPECT_THAT(ApplyStep(s, Annotate(2, 2, IteratorAnnotation::kVThread)),
              StatusIs(kInvalid, HasSubstr("to vthread")));
  State fused = Apply(s, FuseStep{2, {1, 2}});
  EXPECT_THAT(ApplyStep(fused, Annotate(2, 1, IteratorAnnotation::kBlockIdxY)),
              StatusIs(kInvalid, HasSubstr("cannot bind mixed iterator 'j@k'")));
  // A reduce iterator may be bound to threadIdx (cross-thread reduction).
  EXPECT_THAT(ApplyStep(s, Annotate(2, 2, IteratorAnnotation::kThreadIdxX)), IsOk());
}

TEST(AnnotationTest, TheSameBindingTwiceInAStageIsAnError) {
  State s = Apply(State::Initial(Matmul(8, 6, 4)), Annotate(2, 0, IteratorAnnotation::kThreadIdxX));
  EXPECT_THAT(ApplyStep(s, Annotate(2, 1, IteratorAnnotation::kThreadIdxX)),
              StatusIs(kInvalid, HasSubstr("stage 'C' already binds iterator 'i' to threadIdx.x")));
  // Re-annotating the same iterator is fine.
  EXPECT_THAT(ApplyStep(s, Annotate(2, 0, IteratorAnnotation::kThreadIdxX)), IsOk());
  EXPECT_THAT(ApplyStep(s, Annotate(2, 1, IteratorAnnotation::kThreadIdxY)), IsOk());
}

TEST(AnnotationTest, InlinedStagesAndPlaceholdersCannotBeAnnotated) {
  State s = Apply(State::Initial(Chain(16)), ComputeInlineStep{1});
  EXPECT_THAT(ApplyStep(s, Annotate(1, 0, IteratorAnnotation::kParallel)),
              StatusIs(kInvalid, HasSubstr("stage 'B' is inlined")));
  EXPECT_THAT(ApplyStep(s, Annotate(1, 0, IteratorAnnotation::kVectorize)),
              StatusIs(kInvalid, HasSubstr("stage 'B' is inlined")));
  EXPECT_THAT(ApplyStep(s, Annotate(0, 0, IteratorAnnotation::kUnroll)),
              StatusIs(kInvalid, HasSubstr("stage 'A' is a placeholder")));
}

TEST(AnnotationTest, CooperativeFetchBindsThreadsInsideAThreadLoop) {
  // A.shared attached inside C's threadIdx loop binds its own loop to threadIdx.x.
  State s =
      Apply(State::Initial(Matmul(64, 64, 16)), CacheReadStep{0, ir::MemoryScope::kShared, {2}});
  s = Apply(s, Split(3, 0, {8}));  // C: i.0 i.1 j k
  s = Apply(s, Annotate(3, 0, IteratorAnnotation::kBlockIdxX));
  s = Apply(s, Annotate(3, 1, IteratorAnnotation::kThreadIdxX));
  s = Apply(s, ComputeAtStep{1, 3, 3});  // at k
  s = Apply(s, FuseStep{1, {0, 1}});
  EXPECT_THAT(ApplyStep(s, Annotate(1, 0, IteratorAnnotation::kThreadIdxX)), IsOk());
}

TEST(PragmaTest, SetsAutoUnrollAndRejectsMisuse) {
  State s = Apply(State::Initial(Matmul(8, 6, 4)), PragmaStep{2, 0, 64});
  EXPECT_EQ(s.stage(2).auto_unroll_max_step, 64);
  EXPECT_THAT(ApplyStep(s, PragmaStep{2, 0, -1}),
              StatusIs(kInvalid, HasSubstr("pragma(2, 0, auto_unroll_max_step=-1): "
                                           "auto_unroll_max_step -1 is negative")));
  State chain = Apply(State::Initial(Chain(16)), ComputeInlineStep{1});
  EXPECT_THAT(ApplyStep(chain, PragmaStep{1, 0, 16}),
              StatusIs(kInvalid, HasSubstr("stage 'B' is inlined")));
}

TEST(StorageAlignTest, RecordsAndRejectsBadValues) {
  State s = Apply(State::Initial(Matmul(8, 6, 4)), CacheReadStep{0, ir::MemoryScope::kShared, {2}});
  s = Apply(s, StorageAlignStep{1, 0, 32, 1});
  EXPECT_EQ(s.stage(1).storage_align_dim, 0);
  EXPECT_EQ(s.stage(1).storage_align_factor, 32);
  EXPECT_EQ(s.stage(1).storage_align_offset, 1);
  EXPECT_THAT(ApplyStep(s, StorageAlignStep{1, 0, 0, 0}),
              StatusIs(kInvalid, HasSubstr("factor 0 must be >= 1")));
  EXPECT_THAT(ApplyStep(s, StorageAlignStep{1, 0, 8, 8}),
              StatusIs(kInvalid, HasSubstr("offset 8 must be in [0, 8)")));
  EXPECT_THAT(ApplyStep(s, StorageAlignStep{1, 2, 8, 1}),
              StatusIs(kInvalid, HasSubstr("dimension 2 is out of range")));
}

// ---------------------------------------------------------------------------------------------
// Ansor's GPU sketch for matmul ("SSSRRSRS", cache_write, shared cache_reads, cooperative fetch),
// step by step in Ansor's order.

TEST(AnsorSketchTest, GpuMatmulStepsReplayWithBlockSizedSharedRegions) {
  using IA = IteratorAnnotation;
  std::vector<Step> steps = {
      CacheWriteStep{2, ir::MemoryScope::kLocal},  // A B C.local C
      Split(2, 0, {2, 4, 2, 2}),                   // i: 2 (block) 2 (vthread) 4 (thread) 2 2
      Split(2, 5, {2, 4, 2, 2}),
      Split(2, 10, {4, 2}),  // k: 8 4 2
      ReorderStep{2, {0, 5, 1, 6, 2, 7, 10, 11, 3, 8, 12, 4, 9}},
      FollowSplitStep{3, 0, 1, 3},  // C: i.0 i.1 i.2 i.3 j
      FollowSplitStep{3, 4, 2, 3},
      ReorderStep{3, {0, 4, 1, 5, 2, 6, 3, 7}},
      ComputeAtStep{2, 3, 5},                           // C.local at C's j.2
      CacheReadStep{1, ir::MemoryScope::kShared, {2}},  // A B B.shared C.local C
      ComputeAtStep{2, 3, 6},                           // B.shared at C.local's k.0
      CacheReadStep{0, ir::MemoryScope::kShared, {3}},  // A A.shared B B.shared C.local C
      ComputeAtStep{1, 4, 6},
      FuseStep{5, {0, 1}},
      AnnotationStep{5, 0, IA::kBlockIdxX},
      FuseStep{5, {1, 2}},
      AnnotationStep{5, 1, IA::kVThread},
      FuseStep{5, {2, 3}},
      AnnotationStep{5, 2, IA::kThreadIdxX},
      FuseStep{1, {0, 1}},  // A.shared: cooperative fetch
      Split(1, 0, {1}),
      AnnotationStep{1, 1, IA::kVectorize},
      FollowFusedSplitStep{1, 0, {1, 2}, 1, true},
      AnnotationStep{1, 1, IA::kThreadIdxX},
      PragmaStep{4, 0, 512},
  };
  absl::StatusOr<State> r = ReplaySteps(Matmul(64, 64, 64), steps);
  ASSERT_THAT(r, IsOk());
  const State& s = *r;
  const Stage& local = s.stage(4);
  EXPECT_EQ(local.name(), "C.local");
  EXPECT_EQ(local.attach_iter, "i.2@j.2");
  EXPECT_THAT(local.axis_extents, ElementsAre(4, 4));
  // The outer tiles of the attached C.local are tightened to 1.
  EXPECT_THAT(IterExtents(local), ElementsAre(1, 1, 1, 1, 1, 1, 8, 4, 2, 2, 2, 2, 2));
  EXPECT_EQ(AxisPointCounts(local), FullBox(DomainOf(local)));
  // A.shared covers the block's 32 rows (relaxed over vthread and threadIdx) by one k.0 tile.
  const Stage& a_shared = s.stage(1);
  EXPECT_THAT(a_shared.axis_extents, ElementsAre(32, 8));
  EXPECT_THAT(IterNames(a_shared), ElementsAre("ax0@ax1.0.0", "ax0@ax1.0.1", "ax0@ax1.1"));
  EXPECT_THAT(IterExtents(a_shared), ElementsAre(16, 16, 1));  // 256 elements, 16 threads
  EXPECT_EQ(a_shared.iters[1].annotation, IA::kThreadIdxX);
  EXPECT_EQ(AxisPointCounts(a_shared), FullBox({32, 8}));
  EXPECT_THAT(s.stage(3).axis_extents, ElementsAre(8, 32));
  EXPECT_EQ(s.stage(4).auto_unroll_max_step, 512);
}

// ---------------------------------------------------------------------------------------------
// rfactor

// Evaluates stage `name` of `s` at `point` in double precision straight from the definitions
// (placeholders read `inputs`, row-major), looping over reduce axes by hand.
double EvalStage(const State& s, const std::string& name, const std::vector<int64_t>& point,
                 const std::map<std::string, std::vector<double>>& inputs);

double EvalValue(const State& s, const ir::Expr& e, const Env& env,
                 const std::map<std::string, std::vector<double>>& inputs) {
  using K = ir::ExprKind;
  if (auto c = ir::AsConstNumber(e)) return *c;
  if (const auto* l = e.as<ir::LoadNode>()) {
    std::vector<int64_t> idx;
    for (const ir::Expr& i : l->indices) idx.push_back(Eval(i, env));
    return EvalStage(s, l->buffer, idx, inputs);
  }
  if (const auto* sel = e.as<ir::SelectNode>()) {
    return Eval(sel->cond, env) ? EvalValue(s, sel->true_value, env, inputs)
                                : EvalValue(s, sel->false_value, env, inputs);
  }
  if (e.kind() == K::kAdd || e.kind() == K::kMul || e.kind() == K::kMax) {
    auto [a, b] = ir::BinaryOperands(e);
    const double x = EvalValue(s, a, env, inputs), y = EvalValue(s, b, env, inputs);
    return e.kind() == K::kAdd ? x + y : e.kind() == K::kMul ? x * y : std::max(x, y);
  }
  ADD_FAILURE() << "cannot evaluate " << ir::ToString(e);
  return 0;
}

double EvalStage(const State& s, const std::string& name, const std::vector<int64_t>& point,
                 const std::map<std::string, std::vector<double>>& inputs) {
  const int id = s.StageId(name);
  EXPECT_GE(id, 0) << name;
  const ir::TensorNode& op = *s.stage(id).op;
  if (op.is_placeholder) {
    int64_t flat = 0;
    for (size_t d = 0; d < point.size(); ++d) flat = flat * op.shape[d] + point[d];
    return inputs.at(name)[flat];
  }
  Env env;
  for (size_t d = 0; d < op.axes.size(); ++d) env[op.axes[d].name] = point[d];
  if (op.reduce == ir::ReduceKind::kNone) return EvalValue(s, op.body, env, inputs);
  EXPECT_EQ(op.reduce, ir::ReduceKind::kSum);
  double acc = EvalValue(s, op.init, env, inputs);
  std::vector<Iterator> raxes;
  for (const ir::IterVar& r : op.reduce_axes) raxes.push_back({r.name, r.extent});
  ForEachIteration(raxes, 0, raxes.size(), env,
                   [&](const Env& e) { acc += EvalValue(s, op.body, e, inputs); });
  return acc;
}

void ExpectMatmulValues(const State& s, int64_t m, int64_t n, int64_t k) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> a(m * k), b(k * n);
  for (double& v : a) v = u(rng);
  for (double& v : b) v = u(rng);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t r = 0; r < k; ++r) want += a[i * k + r] * b[r * n + j];
      EXPECT_NEAR(EvalStage(s, "C", {i, j}, {{"A", a}, {"B", b}}), want, 1e-12) << i << "," << j;
    }
  }
}

TEST(RfactorTest, SplitReduceAxisBecomesASpaceAxisOfTheRfStage) {
  State s = Apply(State::Initial(Matmul(5, 4, 7)), Split(2, 2, {3}));  // k.0 (3) k.1 (3), guarded
  s = Apply(s, RfactorStep{2, 3, 0});
  ASSERT_EQ(s.num_stages(), 4);
  const Stage& rf = s.stage(2);
  const Stage& c = s.stage(3);
  EXPECT_EQ(rf.name(), "C.rf");
  EXPECT_THAT(rf.op->shape, ElementsAre(3, 5, 4));
  EXPECT_THAT(IterNames(rf), ElementsAre("k.1", "i", "j", "k.0"));
  EXPECT_EQ(c.name(), "C");
  EXPECT_THAT(IterNames(c), ElementsAre("i", "j", "k.1"));
  EXPECT_EQ(c.iters[2].kind, IteratorKind::kReduce);
  ExpectMatmulValues(s, 5, 4, 7);
}

TEST(RfactorTest, FactorAxisPlacementAndOuterIterator) {
  State s = Apply(State::Initial(Matmul(3, 4, 8)), Split(2, 2, {2}));  // k.0 (4) k.1 (2)
  s = Apply(s, RfactorStep{2, 2, 2});                                  // factor k.0, last
  EXPECT_THAT(s.stage(2).op->shape, ElementsAre(3, 4, 4));
  EXPECT_THAT(IterNames(s.stage(2)), ElementsAre("i", "j", "k.0", "k.1"));
  ExpectMatmulValues(s, 3, 4, 8);
  // An unsplit reduce axis: the rf stage has no reduction left.
  State whole = Apply(State::Initial(Matmul(3, 4, 5)), RfactorStep{2, 2, 1});
  EXPECT_EQ(whole.stage(2).op->reduce, ir::ReduceKind::kNone);
  ExpectMatmulValues(whole, 3, 4, 5);
}

TEST(RfactorTest, MisusesAreErrors) {
  State s = Apply(State::Initial(Matmul(4, 4, 8)), Split(2, 2, {2}));
  EXPECT_THAT(ApplyStep(s, RfactorStep{2, 0, 0}),
              StatusIs(kInvalid, HasSubstr("rfactor(2, 0, 0): iterator 'i' of stage 'C' is not "
                                           "a reduce iterator")));
  EXPECT_THAT(ApplyStep(s, RfactorStep{2, 3, 3}),
              StatusIs(kInvalid, HasSubstr("factor_iter_id 3 must be in [0, 2]")));
  EXPECT_THAT(ApplyStep(s, RfactorStep{0, 0, 0}),
              StatusIs(kInvalid, HasSubstr("stage 'A' is a placeholder")));
  EXPECT_THAT(ApplyStep(State::Initial(Chain(8)), RfactorStep{2, 0, 0}),
              StatusIs(kInvalid, HasSubstr("stage 'C' has no reduction")));
  State mixed = Apply(State::Initial(Matmul(4, 4, 8)), FuseStep{2, {1, 2}});
  EXPECT_THAT(ApplyStep(mixed, RfactorStep{2, 1, 0}),
              StatusIs(kInvalid, HasSubstr("not a reduce iterator")));
}

TEST(CacheWriteTest, KeepsTheValues) {
  State s = Apply(State::Initial(Matmul(3, 4, 5)), CacheWriteStep{2, ir::MemoryScope::kLocal});
  ExpectMatmulValues(s, 3, 4, 5);
}

TEST(CacheReadTest, KeepsTheValues) {
  State s = Apply(State::Initial(Matmul(3, 4, 5)), CacheReadStep{1, ir::MemoryScope::kShared, {2}});
  ExpectMatmulValues(s, 3, 4, 5);
}

// ---------------------------------------------------------------------------------------------
// Random steps, valid or not, never crash; every state they reach keeps each stage's loops
// covering its domain exactly once.

Step RandomAnyStep(const State& s, std::mt19937& rng) {
  const int n = s.num_stages();
  const int stage = static_cast<int>(rng() % (n + 1)) - (rng() % 8 == 0 ? 1 : 0);
  const int iters = stage >= 0 && stage < n ? static_cast<int>(s.stage(stage).iters.size()) : 3;
  auto iter = [&] { return static_cast<int>(rng() % (iters + 1)) - (rng() % 10 == 0 ? 1 : 0); };
  auto ids = [&] {
    std::vector<int> v;
    const int first = iter();
    for (int k = 0, m = 1 + rng() % 3; k < m; ++k) v.push_back(first + k);
    return v;
  };
  switch (rng() % 13) {
    case 0:
    case 1: {
      std::vector<std::optional<int64_t>> lengths;
      for (int k = 0, m = 1 + rng() % 2; k < m; ++k) {
        lengths.push_back(static_cast<int64_t>(rng() % 5) - (rng() % 10 == 0 ? 1 : 0));
      }
      return Split(stage, iter(), lengths, rng() % 2);
    }
    case 2:
      return FuseStep{stage, ids()};
    case 3: {
      std::vector<int> order(std::max(iters, 0));
      for (int k = 0; k < iters; ++k) order[k] = k;
      std::shuffle(order.begin(), order.end(), rng);
      if (rng() % 5 == 0 && !order.empty()) order[0] = order.back();
      return ReorderStep{stage, order};
    }
    case 4:
      return ComputeAtStep{stage, static_cast<int>(rng() % n), iter()};
    case 5:
      return rng() % 2 ? Step(ComputeInlineStep{stage}) : Step(ComputeRootStep{stage});
    case 6:
      return CacheReadStep{stage,
                           rng() % 2 ? ir::MemoryScope::kShared : ir::MemoryScope::kLocal,
                           {static_cast<int>(rng() % n)}};
    case 7:
      return CacheWriteStep{stage, ir::MemoryScope::kLocal};
    case 8:
      return Annotate(stage, iter(), static_cast<IteratorAnnotation>(rng() % 11));
    case 9:
      return RfactorStep{stage, iter(), static_cast<int>(rng() % 3)};
    case 10:
      return FollowSplitStep{stage, iter(), static_cast<int>(rng() % (s.steps().size() + 1)),
                             static_cast<int>(rng() % 4)};
    case 11: {
      TensorCoreStep t;
      t.stage_id = stage;
      const char* kinds[] = {"tf32x3", "tf32", "f16", "int4"};
      t.kind = kinds[rng() % 4];
      t.warp_m = 16 * (1 + rng() % 2) - (rng() % 10 == 0 ? 8 : 0);
      t.warp_n = 8 * (1 + rng() % 2);
      t.block_m = t.warp_m * (1 + rng() % 2);
      t.block_n = t.warp_n * (1 + rng() % 2);
      t.block_k = 8 * (1 + rng() % 3);
      t.pipeline = static_cast<int>(rng() % 5);
      t.pad = 4 * (rng() % 2);
      t.epilogue = static_cast<int>(rng() % 2);
      t.split_k = 1 + static_cast<int>(rng() % 2);
      return t;
    }
    default: {
      FollowFusedSplitStep f;
      f.stage_id = stage;
      f.iter_id = iter();
      f.src_step_ids = {static_cast<int>(rng() % (s.steps().size() + 1))};
      f.level = rng() % 2;
      f.factor_or_nparts = rng() % 2;
      return f;
    }
  }
}

TEST(RandomStepsTest, NeverCrashAndKeepExactCoverage) {
  std::mt19937 rng(99);
  const std::vector<ir::ComputeDAG> dags = {Matmul(6, 5, 4), MatmulRelu(6, 4, 3), Chain(7),
                                            Conv2d(3, 4, 2, 2, 2, 1)};
  int applied = 0;
  std::map<size_t, int> applied_by_kind;
  for (int trial = 0; trial < 400; ++trial) {
    State s = State::Initial(dags[trial % dags.size()]);
    for (int k = 0; k < 30; ++k) {
      const Step step = RandomAnyStep(s, rng);
      absl::StatusOr<State> next = ApplyStep(s, step);
      if (!next.ok()) {
        EXPECT_EQ(next.status().code(), kInvalid) << next.status();
        EXPECT_THAT(std::string(next.status().message()), HasSubstr(StepToString(step)));
        continue;
      }
      ++applied;
      ++applied_by_kind[step.index()];
      s = *std::move(next);
      for (int id = 0; id < s.num_stages(); ++id) {
        const Stage& st = s.stage(id);
        if (st.is_placeholder() || st.location == ComputeLocation::kInlined) continue;
        ASSERT_EQ(AxisPointCounts(st), FullBox(DomainOf(st))) << st.name() << "\n" << s.ToString();
        // Attached stages always have their current region's extents.
        if (st.location != ComputeLocation::kAttached) continue;
        absl::StatusOr<std::vector<RegionDim>> region =
            InferRegion(s, id, st.attach_stage, st.attach_iter);
        ASSERT_THAT(region, IsOk()) << s.ToString();
        std::vector<int64_t> extents;
        for (const RegionDim& d : *region) extents.push_back(d.extent);
        EXPECT_EQ(extents, st.axis_extents) << st.name() << " after " << StepToString(step) << "\n"
                                            << s.ToString();
      }
    }
    absl::StatusOr<State> replayed = ReplaySteps(s.dag(), s.steps());
    ASSERT_THAT(replayed, IsOk());
    EXPECT_EQ(replayed->ToString(), s.ToString());
  }
  EXPECT_GT(applied, 500);
  // Every kind of step except storage_align and pragma (not generated) succeeded sometimes.
  for (size_t kind = 0; kind < std::variant_size_v<Step>; ++kind) {
    if (kind == Step(PragmaStep{}).index() || kind == Step(StorageAlignStep{}).index()) continue;
    EXPECT_GT(applied_by_kind[kind], 2) << "step kind " << kind;
  }
}

// ---------------------------------------------------------------------------------------------
// ReplaySteps

TEST(ReplayTest, ReplayingTheStepsRebuildsAnEqualState) {
  State s = Apply(State::Initial(MatmulRelu(64, 32, 16)), Split(3, 0, {8}));
  s = Apply(s, ComputeAtStep{2, 3, 1});
  s = Apply(s, Annotate(3, 0, IteratorAnnotation::kParallel));
  absl::StatusOr<State> r = ReplaySteps(s.dag(), s.steps());
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->ToString(), s.ToString());
  EXPECT_EQ(r->Hash(), s.Hash());
}

TEST(ReplayTest, ErrorsNameTheStepIndex) {
  std::vector<Step> steps = {Split(2, 0, {4}), FuseStep{2, {0, 2}}};
  EXPECT_THAT(ReplaySteps(Matmul(8, 8, 8), steps),
              StatusIs(kInvalid, HasSubstr("step 1: fuse(2, [0, 2]): iterators are not "
                                           "adjacent")));
}

}  // namespace
}  // namespace tilesearch::schedule
