// State: initial construction, copy-on-write sharing, stage insertion, the stable text form and
// its hash.
#include "schedule/state.h"

#include <string>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/apply_step.h"
#include "tests/schedule/schedule_test_util.h"

namespace tilesearch::schedule {
namespace {

using ::testing::ElementsAre;
using ::tilesearch::testing::IsOk;
using namespace ::tilesearch::schedule::testing;  // NOLINT

TEST(StateTest, InitialStateMirrorsTheDag) {
  State s = State::Initial(MatmulRelu(8, 6, 4));
  ASSERT_EQ(s.num_stages(), 4);
  EXPECT_EQ(s.StageId("A"), 0);
  EXPECT_EQ(s.StageId("D"), 3);
  EXPECT_EQ(s.StageId("nope"), -1);
  const Stage& c = s.stage(2);
  EXPECT_EQ(c.IterIndex("k"), 2);
  EXPECT_EQ(c.IterIndex("x"), -1);
  EXPECT_EQ(c.location, ComputeLocation::kRoot);
  EXPECT_EQ(c.scope, ir::MemoryScope::kGlobal);
  EXPECT_THAT(c.axis_extents, ElementsAre(8, 6));
  ASSERT_EQ(c.axis_values.size(), 3u);
  EXPECT_EQ(ir::ToString(c.axis_values[2]), "k");
  EXPECT_TRUE(c.guards.empty());
  EXPECT_TRUE(s.stage(0).is_placeholder());
}

TEST(StateTest, CopiesShareStagesUntilWritten) {
  State a = State::Initial(Matmul(8, 6, 4));
  State b = a;
  EXPECT_EQ(&a.stage(2), &b.stage(2));
  b.MutableStage(2).auto_unroll_max_step = 16;
  EXPECT_NE(&a.stage(2), &b.stage(2));
  EXPECT_EQ(a.stage(2).auto_unroll_max_step, 0);
  EXPECT_EQ(b.stage(2).auto_unroll_max_step, 16);
  EXPECT_EQ(&a.stage(1), &b.stage(1));
}

TEST(StateTest, InsertStageShiftsLaterAttachStages) {
  State s = State::Initial(MatmulRelu(8, 6, 4));
  Stage& c = s.MutableStage(2);
  c.location = ComputeLocation::kAttached;
  c.attach_stage = 3;
  c.attach_iter = "i";
  Stage extra = s.stage(1);
  s.InsertStage(1, extra);
  EXPECT_EQ(s.num_stages(), 5);
  EXPECT_EQ(s.stage(3).name(), "C");
  EXPECT_EQ(s.stage(3).attach_stage, 4);
}

TEST(StateTest, AppendStepDoesNotChangeCopies) {
  State a = State::Initial(Matmul(8, 6, 4));
  State b = a;
  b.AppendStep(ComputeRootStep{2});
  EXPECT_TRUE(a.steps().empty());
  EXPECT_EQ(b.steps().size(), 1u);
}

TEST(StateTest, ToStringListsStagesLoopsAndSteps) {
  SplitStep split;
  split.stage_id = 2;
  split.iter_id = 0;
  split.lengths = {4};
  absl::StatusOr<State> s = ApplyStep(State::Initial(Matmul(6, 5, 3)), split);
  ASSERT_THAT(s, IsOk());
  s = ApplyStep(*s, AnnotationStep{2, 1, IteratorAnnotation::kVThread});
  ASSERT_THAT(s, IsOk());
  const std::string expected =
      "stage 0 A: placeholder\n"
      "stage 1 B: placeholder\n"
      "stage 2 C: root, global\n"
      "  for i.0 (2) space\n"
      "  for i.1 (4) space vthread\n"
      "  for j (5) space\n"
      "  for k (3) reduce\n"
      "  if (((i.0*4) + i.1) < 6)\n"
      "steps:\n"
      "  split(2, 0, [4])\n"
      "  annotation(2, 1, vthread)\n";
  EXPECT_EQ(s->ToString(), expected);
}

TEST(StateTest, HashIsFnv1aOfTheText) {
  State s = State::Initial(Matmul(6, 5, 3));
  // FNV-1a, 64 bit, written out here.
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s.ToString()) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  EXPECT_EQ(s.Hash(), h);
}

TEST(StateTest, EqualStepsGiveEqualTextAndDifferentStepsDiffer) {
  const ir::ComputeDAG dag = Matmul(8, 8, 8);
  std::vector<Step> steps = {FuseStep{2, {0, 1}},
                             AnnotationStep{2, 0, IteratorAnnotation::kParallel}};
  absl::StatusOr<State> a = ReplaySteps(dag, steps);
  absl::StatusOr<State> b = ReplaySteps(dag, steps);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->ToString(), b->ToString());
  EXPECT_EQ(a->Hash(), b->Hash());
  steps[1] = AnnotationStep{2, 0, IteratorAnnotation::kUnroll};
  absl::StatusOr<State> c = ReplaySteps(dag, steps);
  ASSERT_THAT(c, IsOk());
  EXPECT_NE(a->Hash(), c->Hash());
}

}  // namespace
}  // namespace tilesearch::schedule
