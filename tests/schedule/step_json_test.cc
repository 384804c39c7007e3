// Step lists to JSON and back: exact round trips of random lists, Ansor's record form, and the
// errors for malformed input.
#include "schedule/step_json.h"

#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/step.h"

namespace tilesearch::schedule {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

std::vector<int> RandomIds(std::mt19937& rng) {
  std::vector<int> ids(rng() % 5);
  for (int& id : ids) id = static_cast<int>(rng() % 20);
  return ids;
}

ir::MemoryScope RandomScope(std::mt19937& rng) {
  return rng() % 2 ? ir::MemoryScope::kShared : ir::MemoryScope::kLocal;
}

Step RandomStep(std::mt19937& rng) {
  const int stage = rng() % 10, iter = rng() % 8;
  switch (rng() % 14) {
    case 0: {
      SplitStep s;
      s.stage_id = stage;
      s.iter_id = iter;
      s.extent = rng() % 3 == 0 ? 0 : 1 + rng() % 4096;
      for (int k = 0, n = 1 + rng() % 4; k < n; ++k) {
        if (rng() % 4 == 0) {
          s.lengths.push_back(std::nullopt);
        } else {
          s.lengths.push_back(1 + rng() % 64);
        }
      }
      s.inner_to_outer = rng() % 2;
      return s;
    }
    case 1:
      return FollowSplitStep{stage, iter, static_cast<int>(rng() % 30),
                             static_cast<int>(1 + rng() % 4)};
    case 2: {
      FollowFusedSplitStep s;
      s.stage_id = stage;
      s.iter_id = iter;
      s.src_step_ids = RandomIds(rng);
      s.level = rng() % 4;
      s.factor_or_nparts = rng() % 2;
      return s;
    }
    case 3:
      return FuseStep{stage, RandomIds(rng)};
    case 4:
      return ReorderStep{stage, RandomIds(rng)};
    case 5:
      return ComputeAtStep{stage, static_cast<int>(rng() % 10), iter};
    case 6:
      return ComputeInlineStep{stage};
    case 7:
      return ComputeRootStep{stage};
    case 8:
      return CacheReadStep{stage, RandomScope(rng), RandomIds(rng)};
    case 9:
      return CacheWriteStep{stage, RandomScope(rng)};
    case 10:
      return AnnotationStep{stage, iter, static_cast<IteratorAnnotation>(rng() % 11)};
    case 11:
      return PragmaStep{stage, iter, static_cast<int64_t>(rng() % 1025)};
    case 12:
      return RfactorStep{stage, iter, static_cast<int>(rng() % 3)};
    default:
      return StorageAlignStep{stage, iter, static_cast<int64_t>(1 + rng() % 64),
                              static_cast<int64_t>(rng() % 8)};
  }
}

TEST(StepJsonTest, RandomStepListsRoundTripExactly) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Step> steps;
    for (int k = 0, n = rng() % 12; k < n; ++k) steps.push_back(RandomStep(rng));
    const std::string text = StepsToText(steps);
    absl::StatusOr<std::vector<Step>> back = StepsFromText(text);
    ASSERT_THAT(back, IsOk()) << text;
    EXPECT_EQ(*back, steps) << text;
    EXPECT_EQ(StepsToText(*back), text);
  }
}

TEST(StepJsonTest, UsesAnsorPrefixesAndArgumentOrder) {
  SplitStep split;
  split.stage_id = 2;
  split.iter_id = 0;
  split.extent = 64;
  split.lengths = {8, 4};
  split.inner_to_outer = true;
  EXPECT_EQ(StepToJson(split).dump(), R"(["SP",2,0,64,[8,4],1])");
  EXPECT_EQ(StepToJson(CacheReadStep{2, ir::MemoryScope::kShared, {3}}).dump(),
            R"(["CHR",2,"shared",[3]])");
  EXPECT_EQ(StepToJson(CacheWriteStep{3, ir::MemoryScope::kLocal}).dump(), R"(["CHW",3,"local"])");
  EXPECT_EQ(StepToJson(PragmaStep{5, 0, 512}).dump(), R"(["PR",5,0,"auto_unroll_max_step$512"])");
  EXPECT_EQ(StepToJson(AnnotationStep{6, 0, IteratorAnnotation::kBlockIdxX}).dump(),
            R"(["AN",6,0,5])");
  FollowFusedSplitStep ffsp;
  ffsp.stage_id = 4;
  ffsp.iter_id = 0;
  ffsp.src_step_ids = {4, 3, 2, 1};
  ffsp.level = 1;
  ffsp.factor_or_nparts = true;
  EXPECT_EQ(StepToJson(ffsp).dump(), R"(["FFSP",4,0,[4,3,2,1],1,1])");
  EXPECT_EQ(StepToJson(FollowSplitStep{4, 0, 1, 3}).dump(), R"(["FSP",4,0,1,3])");
  EXPECT_EQ(StepToJson(ComputeAtStep{3, 4, 11}).dump(), R"(["CA",3,4,11])");
  EXPECT_EQ(StepToJson(StorageAlignStep{1, 0, 32, 1}).dump(), R"(["SA",1,0,32,1])");
  EXPECT_EQ(StepToJson(RfactorStep{2, 1, 0}).dump(), R"(["RF",2,1,0])");
  EXPECT_EQ(StepsToJson({}).dump(), R"({"steps":[],"version":1})");
}

TEST(StepJsonTest, ReadsAnAnsorRecordsStepList) {
  // Steps of a TVM auto_scheduler CUDA record (the "i"[1][1] field), wrapped in our envelope.
  const std::string text = R"({"version": 1, "steps": [["CHW", 3, "local"],
      ["SP", 3, 0, 1, [1, 1, 1, 1], 1], ["FSP", 4, 0, 1, 3], ["CA", 3, 4, 11],
      ["CHR", 2, "shared", [3]], ["FU", 6, [0, 1, 2, 3]], ["AN", 6, 0, 5],
      ["FFSP", 4, 0, [4, 3, 2, 1], 1, 1], ["AN", 4, 1, 6],
      ["PR", 5, 0, "auto_unroll_max_step$512"]]})";
  absl::StatusOr<std::vector<Step>> steps = StepsFromText(text);
  ASSERT_THAT(steps, IsOk());
  ASSERT_EQ(steps->size(), 10u);
  const auto* sp = std::get_if<SplitStep>(&(*steps)[1]);
  ASSERT_NE(sp, nullptr);
  EXPECT_EQ(sp->extent, 1);
  EXPECT_EQ(sp->lengths.size(), 4u);
  const auto* pr = std::get_if<PragmaStep>(&(*steps)[9]);
  ASSERT_NE(pr, nullptr);
  EXPECT_EQ(pr->auto_unroll_max_step, 512);
}

TEST(StepJsonTest, NewerVersionIsAnError) {
  EXPECT_THAT(StepsFromText(R"({"version": 2, "steps": []})"),
              StatusIs(kInvalid, HasSubstr("step list version 2 is newer than this build reads "
                                           "(1)")));
  EXPECT_THAT(StepsFromText(R"({"steps": []})"),
              StatusIs(kInvalid, HasSubstr("no integer 'version'")));
}

TEST(StepJsonTest, UnknownTopLevelFieldIsAnError) {
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [], "extra": 3})"),
              StatusIs(kInvalid, HasSubstr("unknown field 'extra' in step list")));
}

TEST(StepJsonTest, BadArityNamesTheStepIndex) {
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["CI", 1], ["SP", 2, 0, 64, [8]]]})"),
              StatusIs(kInvalid, HasSubstr("step 1: step 'SP' needs 6 fields")));
}

TEST(StepJsonTest, UnknownPrefixNamesTheStepIndex) {
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["CI", 1], ["CI", 2], ["XX", 1]]})"),
              StatusIs(kInvalid, HasSubstr("step 2: unknown step prefix 'XX'")));
}

TEST(StepJsonTest, WrongFieldTypesAreErrors) {
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["FU", "a", [0, 1]]]})"),
              StatusIs(kInvalid, HasSubstr("step 0: field 1 of step 'FU' is not an integer")));
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["CHR", 1, "texture", [2]]]})"),
              StatusIs(kInvalid, HasSubstr("unknown scope 'texture'")));
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["PR", 1, 0, "unroll$4"]]})"),
              StatusIs(kInvalid, HasSubstr("unknown pragma 'unroll$4'")));
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["AN", 1, 0, 11]]})"),
              StatusIs(kInvalid, HasSubstr("annotation 11")));
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["SP", 1, 0, 8, ["x"], 1]]})"),
              StatusIs(kInvalid, HasSubstr("not a list of lengths")));
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [7]})"),
              StatusIs(kInvalid, HasSubstr("step 0: a step is an array led by its prefix")));
}

TEST(StepJsonTest, IdsOutsideIntAreErrorsNotWrapped) {
  // 4294967301 = 2^32 + 5 would wrap to stage 5 if narrowed to int.
  EXPECT_THAT(
      StepsFromText(R"({"version": 1, "steps": [["PR", 4294967301, 0, "software_pipeline$0"]]})"),
      StatusIs(kInvalid, HasSubstr("field 1 of step 'PR' is out of range: 4294967301")));
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["SP", 2, -1, 64, [8], 1]]})"),
              StatusIs(kInvalid, HasSubstr("field 2 of step 'SP' is out of range: -1")));
  EXPECT_THAT(StepsFromText(R"({"version": 1, "steps": [["RE", 2, [0, 4294967296]]]})"),
              StatusIs(kInvalid, HasSubstr("out-of-range integer")));
  // 2^64 - 1 would read as -1 (the message said "pad -1 is outside 0..64").
  EXPECT_THAT(
      StepsFromText(R"({"version": 1, "steps": [["TC", 2, "bf16", [64, 64, 64], [64, 64], 2, )"
                    R"(18446744073709551615, 1, 0, 1, "wgmma"]]})"),
      StatusIs(kInvalid, HasSubstr("field 6 of step 'TC' is out of range: 18446744073709551615")));
}

TEST(StepJsonTest, InvalidJsonTextIsAnError) {
  EXPECT_THAT(StepsFromText("{\"version\": 1, "),
              StatusIs(kInvalid, HasSubstr("step list is not valid JSON")));
}

}  // namespace
}  // namespace tilesearch::schedule
