// fast_p, geometric-mean speedup and the speed-of-light bound against hand-computed values of a
// small made-up table (the same table as bench/test_score_logic.py).
#include "bench/harness/fast_p.h"

#include <cmath>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::bench {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

// Speedups (baseline / ours): a 2.0, b 0.5, c 1.0 (exactly p = 1: not > 1), d 4.0,
// e incorrect (would be 10x), f 1.6.
std::vector<ProblemScore> Table() {
  return {{"a", true, 1.0, 2.0}, {"b", true, 2.0, 1.0},  {"c", true, 3.0, 3.0},
          {"d", true, 0.5, 2.0}, {"e", false, 0.1, 1.0}, {"f", true, 2.5, 4.0}};
}

TEST(FastPTest, CountsCorrectAndStrictlyFasterOverAllProblems) {
  // fast_0: a b c d f are correct with speedup > 0 → 5/6.
  EXPECT_DOUBLE_EQ(*FastP(Table(), 0.0), 5.0 / 6.0);
  // fast_1: a (2.0), d (4.0), f (1.6); c at exactly 1.0 does not count → 3/6.
  EXPECT_DOUBLE_EQ(*FastP(Table(), 1.0), 0.5);
  // fast_1.5: a, d, f → 3/6.
  EXPECT_DOUBLE_EQ(*FastP(Table(), 1.5), 0.5);
  // fast_2: d only (a is exactly 2.0) → 1/6.
  EXPECT_DOUBLE_EQ(*FastP(Table(), 2.0), 1.0 / 6.0);
  // fast_5: none; e's 10x does not count because it is incorrect.
  EXPECT_DOUBLE_EQ(*FastP(Table(), 5.0), 0.0);
}

TEST(FastPTest, GeomeanOverCorrectProblemsOnly) {
  // (2 · 0.5 · 1 · 4 · 1.6)^(1/5) = 6.4^(1/5).
  EXPECT_NEAR(*GeomeanSpeedup(Table()), std::pow(6.4, 0.2), 1e-12);
  EXPECT_NEAR(std::pow(6.4, 0.2), 1.4495, 1e-4);
}

TEST(FastPTest, SpeedupIsBaselineOverOurs) {
  EXPECT_DOUBLE_EQ(*Speedup({"x", true, 0.25, 1.0}), 4.0);
}

TEST(FastPTest, Errors) {
  EXPECT_THAT(FastP({}, 1.0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no problems")));
  EXPECT_THAT(FastP(Table(), -1.0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("p must be >= 0")));
  EXPECT_THAT(FastP({{"z", true, 0.0, 1.0}}, 1.0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("speedup of 'z': times must be positive and finite")));
  EXPECT_THAT(
      GeomeanSpeedup({{"e", false, 1.0, 1.0}}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("none of the 1 problems is correct")));
  // An incorrect problem's time is never used, even when it is meaningless.
  EXPECT_DOUBLE_EQ(*FastP({{"e", false, 0.0, 1.0}, {"a", true, 1.0, 2.0}}, 1.0), 0.5);
}

TEST(SpeedOfLightTest, BoundIsTheSlowerOfComputeAndMemory) {
  const DeviceLimits h200{50e12, 4e12};
  // 4096³ matmul: 2·4096³ = 137.4 GFLOP / 50 TFLOP/s = 2.749 ms; 201 MB / 4 TB/s = 0.05 ms.
  const double flops = 2.0 * 4096.0 * 4096.0 * 4096.0;
  const double bytes = 3.0 * 4096.0 * 4096.0 * 4.0;
  EXPECT_NEAR(*SpeedOfLightMs(flops, bytes, h200), 2.74877906944, 1e-9);
  // 1 GiB copy: 2^31 bytes / 4e12 = 0.536870912 ms.
  EXPECT_NEAR(*SpeedOfLightMs(1e6, 2147483648.0, h200), 0.536870912, 1e-12);
  EXPECT_TRUE(*IsSuspect(2.0, flops, bytes, h200));   // faster than the FMA peak allows
  EXPECT_FALSE(*IsSuspect(3.3, flops, bytes, h200));  // 83% of peak: plausible
  EXPECT_FALSE(*IsSuspect(0.6, 1e6, 2147483648.0, h200));
  EXPECT_TRUE(*IsSuspect(0.3, 1e6, 2147483648.0, h200));
}

TEST(SpeedOfLightTest, Errors) {
  EXPECT_THAT(SpeedOfLightMs(1, 1, {0, 4e12}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limits must be positive")));
  EXPECT_THAT(SpeedOfLightMs(-1, 1, {1, 1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("work must be >= 0")));
  EXPECT_THAT(
      IsSuspect(0, 1, 1, {1, 1}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("time must be positive and finite")));
}

}  // namespace
}  // namespace tilesearch::bench
