// Small budgets train the learned model: at --trials 48 with the default 64 candidates per round,
// the first round is shortened so that later rounds are scored by a trained XGBoost model (read
// from the log's round lines, as `inspect` does), and the log holds exactly the budget.
#include <string>

#include "gtest/gtest.h"
#include "search/log_io.h"
#include "search/tuner.h"
#include "tests/search/scratch_dir.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

TEST(SmallBudgetModelTest, Trials48AtDefaultRoundSizeTrainsTheModel) {
  const std::string log = tilesearch::testing::ScratchPath("small_budget.jsonl");
  TuneOptions o = testing::TinyCpuTuneOptions(log, /*trials=*/48, /*per_round=*/64, /*seed=*/3);
  o.use_xgboost = true;
  absl::StatusOr<TuneResult> result = Tune(testing::SquareMatmul(16), Target::HostCpu(), o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->trials, 48);

  absl::StatusOr<LogContents> contents = ReadLog(log);
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_GE(contents->rounds.size(), 2u);
  // First round: 16 = max(16, 48 / 4) records, scored by the untrained model.
  EXPECT_EQ(contents->rounds[0].trials, 16);
  EXPECT_FALSE(contents->rounds[0].model_trained);
  for (size_t i = 1; i < contents->rounds.size(); ++i) {
    EXPECT_TRUE(contents->rounds[i].model_trained) << "round " << i + 1;
    EXPECT_GE(contents->rounds[i].train_samples, 16) << "round " << i + 1;
  }
  EXPECT_EQ(static_cast<int64_t>(contents->records.size()), 48);
}

TEST(SmallBudgetModelTest, RoundsSmallerThanTheFirstRoundMinimumAreKept) {
  // per_round below max(16, trials / 4): every round, the first included, is per_round long.
  const std::string log = tilesearch::testing::ScratchPath("large_budget.jsonl");
  TuneOptions o = testing::TinyCpuTuneOptions(log, /*trials=*/8, /*per_round=*/2, /*seed=*/3);
  o.use_xgboost = true;
  absl::StatusOr<TuneResult> result = Tune(testing::SquareMatmul(16), Target::HostCpu(), o);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->rounds.size(), 4u);
  for (const RoundRecord& r : result->rounds) EXPECT_EQ(r.trials, 2);
}

}  // namespace
}  // namespace tilesearch::search
