// The software_pipeline pragma (PragmaStep "software_pipeline$0|1"): it parses, prints and
// round-trips through JSON, bad values are rejected, and Lower pipelines a GPU kernel's shared
// fetches by default and with "$1" but not with "$0" on the kernel's stage or a stage attached
// into it; every variant still matches the naive program in the interpreter.
#include <cstdlib>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "nlohmann/json.hpp"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/software_pipeline.h"
#include "schedule/step_json.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using ::testing::Contains;
using testing::ExpectMatchesReference;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using testing::LocalAllocations;
using ::testing::Not;
using testing::Sched;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// Ansor's GPU matmul structure (testing::GpuMatmulSched): C.local per thread (2x2), 4x8 threads,
// k split by 4, A and B cached in shared memory at k.0 and fetched by all 32 threads.
State Schedule(const ir::ComputeDAG& dag) {
  Sched s = testing::GpuMatmulSched(dag, {.i = {4, 2}, .j = {8, 2}, .k_inner = 4});
  EXPECT_THAT(s.status(), IsOk());
  return s.state();
}

PragmaStep PipelinePragma(const State& s, const std::string& stage, int value) {
  PragmaStep p;
  p.stage_id = s.StageId(stage);
  p.iter_id = 0;
  p.software_pipeline = value;
  return p;
}

TEST(SoftwarePipelinePragma, ParsesPrintsAndRoundTripsJson) {
  for (int value : {0, 1, 2, 3, 4}) {
    const std::string name = "software_pipeline$" + std::to_string(value);
    const nlohmann::json j = nlohmann::json::array({"PR", 3, 1, name});
    absl::StatusOr<Step> step = StepFromJson(j);
    ASSERT_THAT(step, IsOk());
    const auto* p = std::get_if<PragmaStep>(&*step);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->stage_id, 3);
    EXPECT_EQ(p->iter_id, 1);
    EXPECT_EQ(p->software_pipeline, value);
    EXPECT_EQ(p->auto_unroll_max_step, 0);
    EXPECT_EQ(StepToJson(*step), j);
    EXPECT_EQ(StepToString(*step), "pragma(3, 1, software_pipeline=" + std::to_string(value) + ")");
    // Through a whole step list's text too.
    absl::StatusOr<std::vector<Step>> back = StepsFromText(StepsToText({*step}));
    ASSERT_THAT(back, IsOk());
    ASSERT_EQ(back->size(), 1u);
    EXPECT_EQ((*back)[0], *step);
  }
  // The unroll pragma is unchanged (and not a software_pipeline one).
  absl::StatusOr<Step> unroll =
      StepFromJson(nlohmann::json::array({"PR", 2, 0, "auto_unroll_max_step$64"}));
  ASSERT_THAT(unroll, IsOk());
  EXPECT_EQ(std::get<PragmaStep>(*unroll).auto_unroll_max_step, 64);
  EXPECT_EQ(std::get<PragmaStep>(*unroll).software_pipeline, -1);
  EXPECT_EQ(StepToString(*unroll), "pragma(2, 0, auto_unroll_max_step=64)");
}

TEST(SoftwarePipelinePragma, RejectsBadValuesAndUnknownPragmas) {
  for (const char* bad : {"software_pipeline$5", "software_pipeline$x", "software_pipeline$",
                          "software_pipeline$01", "software_pipeline$-1"}) {
    EXPECT_THAT(StepFromJson(nlohmann::json::array({"PR", 1, 0, bad})),
                StatusIs(kInvalid, HasSubstr("software_pipeline takes 0, 1, 2, 3 or 4")))
        << bad;
  }
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["PR", 1, 0, "pipeline$1"]]})"),
              StatusIs(kInvalid, HasSubstr("unknown pragma 'pipeline$1'")));
  // Applying a constructed step with another value fails too.
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});
  State st = Schedule(dag);
  EXPECT_THAT(ApplyStep(st, PipelinePragma(st, "C.local", 5)),
              StatusIs(kInvalid, HasSubstr("software_pipeline 5 is not 0, 1, 2, 3 or 4")));
}

TEST(SoftwarePipelinePragma, SetsTheStageAndShowsInToString) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});
  State st = Schedule(dag);
  EXPECT_EQ(st.stage(st.StageId("C.local")).software_pipeline, -1);
  EXPECT_THAT(st.ToString(), Not(HasSubstr("software_pipeline")));
  absl::StatusOr<State> off = ApplyStep(st, PipelinePragma(st, "C.local", 0));
  ASSERT_THAT(off, IsOk());
  EXPECT_EQ(off->stage(off->StageId("C.local")).software_pipeline, 0);
  EXPECT_THAT(off->ToString(), HasSubstr("software_pipeline=0"));
  EXPECT_NE(off->Hash(), st.Hash());
  absl::StatusOr<State> on = ApplyStep(st, PipelinePragma(st, "C.local", 1));
  ASSERT_THAT(on, IsOk());
  EXPECT_THAT(on->ToString(), HasSubstr("software_pipeline=1"));
  EXPECT_NE(on->Hash(), off->Hash());
}

TEST(SoftwarePipelinePragma, LowerPipelinesUnlessAStageOfTheKernelSaysOff) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});  // 6 iterations of k.0
  const State base = Schedule(dag);
  const std::vector<std::string> staged = {"A.shared.stage", "B.shared.stage"};

  // No pragma (today's records): pipelined.
  absl::StatusOr<LoweredKernel> k = Lower(dag, base, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_THAT(LocalAllocations(k->nest.body), IsSupersetOf(staged)) << k->nest;
  EXPECT_TRUE(SoftwarePipelineEnabled(base, base.StageId("C")));
  ExpectMatchesReference(dag, base, Target::H200(), /*exact=*/true);

  // "$1" on the reduction stage: pipelined.
  absl::StatusOr<State> on = ApplyStep(base, PipelinePragma(base, "C.local", 1));
  ASSERT_THAT(on, IsOk());
  k = Lower(dag, *on, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_THAT(LocalAllocations(k->nest.body), IsSupersetOf(staged)) << k->nest;
  ExpectMatchesReference(dag, *on, Target::H200(), /*exact=*/true);

  // "$0" on the kernel's root stage, on the attached reduction stage, or on a fetch stage
  // attached two levels deep: not pipelined.
  for (const std::string stage : {"C", "C.local", "A.shared"}) {
    SCOPED_TRACE(stage);
    absl::StatusOr<State> off = ApplyStep(base, PipelinePragma(base, stage, 0));
    ASSERT_THAT(off, IsOk());
    EXPECT_FALSE(SoftwarePipelineEnabled(*off, off->StageId("C")));
    k = Lower(dag, *off, Target::H200());
    ASSERT_THAT(k, IsOk());
    for (const std::string& name : staged) {
      EXPECT_THAT(LocalAllocations(k->nest.body), Not(Contains(name))) << k->nest;
    }
    ExpectMatchesReference(dag, *off, Target::H200(), /*exact=*/true);
  }
}

// Generated code depends only on the state (a logged record replays to the kernel that was
// measured): TILESEARCH_NO_SOFTWARE_PIPELINE in the environment changes nothing.
TEST(SoftwarePipelinePragma, EnvironmentDoesNotTurnThePassOff) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});
  const State base = Schedule(dag);
  absl::StatusOr<LoweredKernel> plain = Lower(dag, base, Target::H200());
  ASSERT_THAT(plain, IsOk());
  ASSERT_EQ(setenv("TILESEARCH_NO_SOFTWARE_PIPELINE", "1", /*overwrite=*/1), 0);
  absl::StatusOr<LoweredKernel> with_env = Lower(dag, base, Target::H200());
  unsetenv("TILESEARCH_NO_SOFTWARE_PIPELINE");
  ASSERT_THAT(with_env, IsOk());
  EXPECT_THAT(LocalAllocations(with_env->nest.body),
              IsSupersetOf({"A.shared.stage", "B.shared.stage"}))
      << with_env->nest;
  EXPECT_EQ(ir::ToString(with_env->nest), ir::ToString(plain->nest));
}

TEST(SoftwarePipelinePragma, OffStateReplaysFromItsJsonSteps) {
  ir::ComputeDAG dag = *ir::MatmulDAG({21, 30}, {30, 37});  // guarded non-divisible tiles
  const State base = Schedule(dag);
  absl::StatusOr<State> off = ApplyStep(base, PipelinePragma(base, "C.local", 0));
  ASSERT_THAT(off, IsOk());
  absl::StatusOr<std::vector<Step>> steps = StepsFromText(StepsToText(off->steps()));
  ASSERT_THAT(steps, IsOk());
  absl::StatusOr<State> replayed = ReplaySteps(dag, *steps);
  ASSERT_THAT(replayed, IsOk());
  EXPECT_EQ(replayed->ToString(), off->ToString());
  absl::StatusOr<LoweredKernel> k = Lower(dag, *replayed, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_THAT(LocalAllocations(k->nest.body), Not(Contains("A.shared.stage"))) << k->nest;
  for (uint64_t seed : {1, 2}) ExpectMatchesReference(dag, *replayed, Target::H200(), true, seed);
}

}  // namespace
}  // namespace tilesearch::schedule
