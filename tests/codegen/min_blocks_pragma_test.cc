// The min_blocks_per_sm pragma (PragmaStep "min_blocks_per_sm$N"): it parses, prints and
// round-trips through JSON, bad values are rejected, Lower carries the largest value among the
// kernel's stages into its LaunchConfig, and the PTX asks ptxas for it (.minnctapersm) only when
// set. The kernel still matches the naive program in the interpreter.
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "nlohmann/json.hpp"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/step_json.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

PragmaStep MinBlocks(const State& s, const std::string& stage, int n) {
  PragmaStep p;
  p.stage_id = s.StageId(stage);
  p.iter_id = 0;
  p.min_blocks_per_sm = n;
  return p;
}

TEST(MinBlocksPragma, ParsesPrintsAndRoundTripsJson) {
  for (int n : {0, 2, 32}) {
    const nlohmann::json j =
        nlohmann::json::array({"PR", 4, 0, "min_blocks_per_sm$" + std::to_string(n)});
    absl::StatusOr<Step> step = StepFromJson(j);
    ASSERT_THAT(step, IsOk());
    const auto& p = std::get<PragmaStep>(*step);
    EXPECT_EQ(p.min_blocks_per_sm, n);
    EXPECT_EQ(p.software_pipeline, -1);
    EXPECT_EQ(StepToJson(*step), j);
    EXPECT_EQ(StepToString(*step), "pragma(4, 0, min_blocks_per_sm=" + std::to_string(n) + ")");
  }
  for (const char* bad : {"min_blocks_per_sm$33", "min_blocks_per_sm$-1", "min_blocks_per_sm$",
                          "min_blocks_per_sm$x", "min_blocks_per_sm$100000000000"}) {
    EXPECT_THAT(StepFromJson(nlohmann::json::array({"PR", 1, 0, bad})),
                StatusIs(kInvalid, HasSubstr("min_blocks_per_sm takes 0..32")))
        << bad;
  }
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});
  testing::Sched s = testing::GpuMatmulSched(dag, {.i = {4, 2}, .j = {8, 2}, .k_inner = 4});
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_THAT(ApplyStep(s.state(), MinBlocks(s.state(), "C", 40)),
              StatusIs(kInvalid, HasSubstr("min_blocks_per_sm 40 is not in 0..32")));
}

TEST(MinBlocksPragma, LowerAndPtxCarryTheLargestValueOfTheKernel) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});
  testing::Sched s = testing::GpuMatmulSched(dag, {.i = {4, 2}, .j = {8, 2}, .k_inner = 4});
  ASSERT_THAT(s.status(), IsOk());
  codegen::GpuCompileOptions compile;
  compile.arch = "sm_90";

  absl::StatusOr<LoweredKernel> plain = Lower(dag, s.state(), Target::H200());
  ASSERT_THAT(plain, IsOk());
  ASSERT_EQ(plain->launches.size(), 1u);
  EXPECT_EQ(plain->launches[0].min_blocks_per_sm, 0);
  absl::StatusOr<codegen::GpuModule> m0 =
      codegen::CompileToPtx(plain->nest, plain->launches, compile);
  ASSERT_THAT(m0, IsOk());
  EXPECT_THAT(m0->ptx, Not(HasSubstr(".minnctapersm")));

  // 2 on the root stage, 3 on C.local (attached into it): the kernel asks for 3.
  absl::StatusOr<State> two = ApplyStep(s.state(), MinBlocks(s.state(), "C", 2));
  ASSERT_THAT(two, IsOk());
  absl::StatusOr<State> three = ApplyStep(*two, MinBlocks(*two, "C.local", 3));
  ASSERT_THAT(three, IsOk());
  absl::StatusOr<LoweredKernel> k = Lower(dag, *three, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_EQ(k->launches[0].min_blocks_per_sm, 3);
  EXPECT_THAT(k->launches[0].ToString(), HasSubstr("min 3 blocks/SM"));
  absl::StatusOr<codegen::GpuModule> m3 = codegen::CompileToPtx(k->nest, k->launches, compile);
  ASSERT_THAT(m3, IsOk());
  EXPECT_THAT(m3->ptx, HasSubstr(".minnctapersm 3"));
  testing::ExpectMatchesReference(dag, *three, Target::H200(), /*exact=*/true);
}

}  // namespace
}  // namespace tilesearch::schedule
