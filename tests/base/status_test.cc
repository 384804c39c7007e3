#include "base/status.h"

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch {
namespace {

using ::testing::HasSubstr;
using testing::IsOk;
using testing::StatusIs;

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd value " + std::to_string(x));
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x));
  return absl::OkStatus();
}

TEST(StatusMacros, AssignOrReturnPassesValuesThrough) {
  absl::StatusOr<int> q = Quarter(12);
  ASSERT_THAT(q, IsOk());
  EXPECT_EQ(*q, 3);
}

TEST(StatusMacros, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd value 3")));
}

TEST(StatusMacros, ReturnIfErrorAcceptsStatusOr) {
  EXPECT_THAT(CheckEven(4), IsOk());
  EXPECT_THAT(CheckEven(5), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd value 5")));
}

TEST(StatusMatchers, StatusIsRejectsOtherCodesAndMessages) {
  absl::Status s = absl::NotFoundError("no such thing");
  EXPECT_THAT(s, ::testing::Not(StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no"))));
  EXPECT_THAT(s, ::testing::Not(StatusIs(absl::StatusCode::kNotFound, HasSubstr("other"))));
  EXPECT_THAT(s, ::testing::Not(IsOk()));
}

TEST(CheckDeathTest, FailingCheckAbortsWithTheMessage) {
  EXPECT_DEATH(
      {
        CHECK(1 + 1 == 3) << "arithmetic is "
                          << "broken";
      },
      "arithmetic is broken");
}

TEST(CheckDeathTest, PassingCheckDoesNothing) {
  int evaluated = 0;
  CHECK(++evaluated == 1) << "never printed";
  EXPECT_EQ(evaluated, 1);
}

}  // namespace
}  // namespace tilesearch
