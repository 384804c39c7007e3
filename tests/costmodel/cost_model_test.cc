// Labels, ranking metrics and the random model, checked against hand-computed values.
#include "costmodel/cost_model.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_matchers.h"
#include "costmodel/features.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::costmodel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

ProgramFeatures OneStore() { return ProgramFeatures{{std::vector<float>(kNumFeatures, 1.0f)}}; }

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(NormalizedLabelsTest, DividesByTheBestOfEachTask) {
  std::vector<TrainingSample> s = {
      {0, {}, 2.0}, {1, {}, 10.0}, {0, {}, 4.0}, {0, {}, 0.0}, {2, {}, 0.0}};
  EXPECT_THAT(NormalizedLabels(s), ElementsAre(0.5, 1.0, 1.0, 0.0, 0.0));
}

TEST(PairwiseRankingAccuracyTest, PerfectReversedAndTies) {
  EXPECT_DOUBLE_EQ(*PairwiseRankingAccuracy({1, 2, 3}, {10, 20, 30}), 1.0);
  EXPECT_DOUBLE_EQ(*PairwiseRankingAccuracy({3, 2, 1}, {10, 20, 30}), 0.0);
  // Pair (0,1) predicted equal counts 1/2; (0,2) and (1,2) agree.
  EXPECT_DOUBLE_EQ(*PairwiseRankingAccuracy({1, 1, 3}, {1, 2, 3}), 2.5 / 3);
  // Pairs with equal actual values are skipped: only (0,2) and (1,2) count; (1,2) disagrees.
  EXPECT_DOUBLE_EQ(*PairwiseRankingAccuracy({1, 5, 3}, {1, 1, 2}), 0.5);
}

TEST(PairwiseRankingAccuracyTest, Errors) {
  EXPECT_THAT(PairwiseRankingAccuracy({1, 2}, {1, 2, 3}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 predictions for 3")));
  EXPECT_THAT(PairwiseRankingAccuracy({1, 2}, {4, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no two of the 2")));
}

TEST(TopKRecallTest, FractionOfTrueTopKAmongPredictedTopK) {
  // True top 2: indices 2 (3) and 3 (2). Predicted top 2: 0 and 1 -> 0 found.
  EXPECT_DOUBLE_EQ(*TopKRecall({0.9, 0.8, 0.1, 0.5}, {1, 0, 3, 2}, 2), 0.0);
  // Predicted top 2: 2 and 0 -> one of {2, 3}.
  EXPECT_DOUBLE_EQ(*TopKRecall({0.5, 0.1, 0.9, 0.2}, {1, 0, 3, 2}, 2), 0.5);
  EXPECT_DOUBLE_EQ(*TopKRecall({0.5, 0.1, 0.9, 0.8}, {1, 0, 3, 2}, 2), 1.0);
  // k beyond the size is clipped: everything is found.
  EXPECT_DOUBLE_EQ(*TopKRecall({3, 2, 1}, {1, 2, 3}, 10), 1.0);
}

TEST(TopKRecallTest, Errors) {
  EXPECT_THAT(TopKRecall({1}, {1, 2}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 predictions for 2")));
  EXPECT_THAT(TopKRecall({}, {}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no programs")));
  EXPECT_THAT(TopKRecall({1}, {1}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k 0 < 1")));
}

TEST(ValidateTest, RejectsBadThroughputAndRowLength) {
  EXPECT_THAT(ValidateSamples({{0, OneStore(), 1.0}, {0, OneStore(), -1.0}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sample 1: throughput -1")));
  EXPECT_THAT(ValidateSamples({{0, OneStore(), NAN}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not finite")));
  ProgramFeatures short_row{{std::vector<float>(12, 0.0f)}};
  EXPECT_THAT(
      ValidatePrograms({OneStore(), short_row}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(absl::StrCat("program 1 store 0: 12 features, expected ", kNumFeatures))));
}

TEST(RandomModelTest, SeededUniformScoresAndMinusInfinityWithoutFeatures) {
  RandomModel a(7), b(7);
  std::vector<ProgramFeatures> progs = {OneStore(), OneStore(), ProgramFeatures{}, OneStore()};
  auto sa = a.Predict(progs);
  auto sb = b.Predict(progs);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(*sa, *sb);
  EXPECT_TRUE(std::isinf((*sa)[2]) && (*sa)[2] < 0);
  for (int i : {0, 1, 3}) {
    EXPECT_GE((*sa)[i], 0.0);
    EXPECT_LT((*sa)[i], 1.0);
  }
  EXPECT_NE((*sa)[0], (*sa)[1]);
  EXPECT_TRUE(a.Update({{0, OneStore(), 3.0}}).ok());
  EXPECT_THAT(a.Update({{0, OneStore(), -3.0}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("throughput -3")));
}

TEST(RandomModelTest, SaveLoadRestartsFromTheSeed) {
  const std::string path = TempPath("random_model.txt");
  RandomModel a(11);
  ASSERT_TRUE(a.Save(path).ok());
  RandomModel fresh(11), loaded(99);
  ASSERT_TRUE(loaded.Load(path).ok());
  std::vector<ProgramFeatures> progs(5, OneStore());
  EXPECT_EQ(*loaded.Predict(progs), *fresh.Predict(progs));
}

TEST(RandomModelTest, LoadErrors) {
  RandomModel m(1);
  EXPECT_THAT(m.Load(TempPath("does_not_exist.model")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot read model file")));
  const std::string path = TempPath("not_a_model.txt");
  std::ofstream(path) << "hello world\n";
  EXPECT_THAT(m.Load(path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a random model")));
}

// Spearman's rho against hand-computed values: identical and reversed orders, ties given their
// average rank (ranks [1, 2.5, 2.5, 4] vs [1, 3, 2, 4]: cov 4.5, variances 4.5 and 5, rho =
// 4.5 / sqrt(22.5)), and the errors.
TEST(SpearmanTest, HandComputedValuesAndErrors) {
  EXPECT_DOUBLE_EQ(*SpearmanCorrelation({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(*SpearmanCorrelation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_NEAR(*SpearmanCorrelation({1, 2, 2, 3}, {1, 3, 2, 4}), 4.5 / std::sqrt(22.5), 1e-12);
  EXPECT_FALSE(SpearmanCorrelation({1, 1, 1}, {1, 2, 3}).ok());
  EXPECT_FALSE(SpearmanCorrelation({1}, {1}).ok());
  EXPECT_FALSE(SpearmanCorrelation({1, 2}, {1, 2, 3}).ok());
}

}  // namespace
}  // namespace tilesearch::costmodel
