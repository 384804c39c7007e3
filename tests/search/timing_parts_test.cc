// search/timing_parts.h: the order of the final selection's passes, and the join of a schedule's
// parts checked against statistics computed here from the parts' runs.
#include "search/timing_parts.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/timing.h"

namespace tilesearch::search {
namespace {

// A part of `ms` runs (costs and samples), its wall time and check as given.
measure::MeasureResult Part(const std::vector<double>& ms, double check_ms, double wall_ms) {
  measure::MeasureResult r;
  for (double m : ms) r.costs_s.push_back(m / 1000);
  r.timing = runtime::Summarize(ms);
  r.check_ms = check_ms;
  r.run_wall_ms = wall_ms;
  r.load_ms = 1;
  return r;
}

TEST(TimingPartsTest, PassesAlternateTheirOrderSoEveryScheduleHasTheSameMeanPosition) {
  constexpr size_t kN = 5;
  EXPECT_EQ(PassOrder(kN, 0), (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(PassOrder(kN, 1), (std::vector<size_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(PassOrder(kN, 2), PassOrder(kN, 0));
  EXPECT_TRUE(PassOrder(0, 1).empty());
  // Over 4 passes, the sum of each schedule's positions is the same: 2 · (n − 1).
  std::vector<size_t> position_sum(kN, 0);
  for (int pass = 0; pass < 4; ++pass) {
    const std::vector<size_t> order = PassOrder(kN, pass);
    for (size_t k = 0; k < kN; ++k) position_sum[order[k]] += k;
  }
  for (size_t i = 0; i < kN; ++i) EXPECT_EQ(position_sum[i], 2 * (kN - 1)) << i;
}

TEST(TimingPartsTest, JoinedRunsAreEveryPartsRunsInOrderWithTheirStatistics) {
  const std::vector<double> a = {1.0, 1.2, 1.1};
  const std::vector<double> b = {2.0, 0.9};
  const std::vector<double> c = {1.5, 1.3, 1.4, 1.6};
  const measure::MeasureResult joined =
      JoinParts({Part(a, 3, 10), Part(b, 4, 20), Part(c, 5, 30)}, 250);
  ASSERT_TRUE(joined.ok());
  std::vector<double> all = a;
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  ASSERT_EQ(joined.costs_s.size(), all.size());
  ASSERT_EQ(joined.timing.samples_ms.size(), all.size());
  for (size_t k = 0; k < all.size(); ++k) {
    EXPECT_DOUBLE_EQ(joined.costs_s[k], all[k] / 1000) << k;
    EXPECT_DOUBLE_EQ(joined.timing.samples_ms[k], all[k]) << k;
  }
  // A naive median and mean of the nine runs.
  std::vector<double> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(joined.timing.runs, 9);
  EXPECT_DOUBLE_EQ(joined.timing.median_ms, sorted[4]);
  EXPECT_NEAR(joined.timing.mean_ms, std::accumulate(all.begin(), all.end(), 0.0) / 9, 1e-12);
  EXPECT_DOUBLE_EQ(joined.timing.min_ms, 0.9);
  EXPECT_DOUBLE_EQ(joined.timing.max_ms, 2.0);
  EXPECT_DOUBLE_EQ(joined.check_ms, 12);
  EXPECT_DOUBLE_EQ(joined.run_wall_ms, 60);
  EXPECT_DOUBLE_EQ(joined.load_ms, 3);
  EXPECT_DOUBLE_EQ(joined.timing.soak_ms, 250);
  EXPECT_FALSE(joined.screened);
}

TEST(TimingPartsTest, APartThatFailedIsTheResult) {
  measure::MeasureResult wrong = Part({1.0}, 1, 1);
  wrong.error = measure::MeasureError::kWrongAnswer;
  wrong.message = "second part mismatched";
  measure::MeasureResult timeout = Part({1.0}, 1, 1);
  timeout.error = measure::MeasureError::kRunTimeout;
  const measure::MeasureResult joined = JoinParts({Part({1.0, 1.1}, 1, 5), wrong, timeout}, 100);
  EXPECT_EQ(joined.error, measure::MeasureError::kWrongAnswer);
  EXPECT_EQ(joined.message, "second part mismatched");
}

}  // namespace
}  // namespace tilesearch::search
