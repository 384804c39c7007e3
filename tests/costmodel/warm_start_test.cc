// The warm start's online update (XGBoostModel::SetInitialModel, then Update with a task's records)
// on a synthetic two-family task: a pretrained model that ranks a fast family above a slow one
// must keep that order after an update on noisy records of the fast family alone, as the tuner
// sees on half-precision matmuls (wgmma vs SIMT states); the update before cross-validation and
// clipping flipped it. Also: a real trend in enough records is learned, and the weighted model
// survives a save and load.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "base/target.h"
#include "costmodel/features.h"
#include "costmodel/xgboost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/costmodel/sample_lists.h"

namespace tilesearch::costmodel {
namespace {

using testing::FeaturesOf;
using ::testing::HasSubstr;
using testing::ThroughputOf;
using ::tilesearch::testing::StatusIs;

// Entries of a synthetic program drawn at random (feature version 1's count).
constexpr int kRandomFeatures = 159;

// One-store programs of a family: the first kRandomFeatures features uniform in [0, 8), except f0
// in [0, 4) for the slow family and [4, 8) for the fast one (the families' programs differ along
// the feature that orders them, as SIMT and wgmma states differ in their tiles). Speed: 30 + 2 f0
// in the slow family, 10x that in the fast one; `trend` -1 reverses the order within the family;
// with `noise` the speed is drawn from the family's range, unrelated to the features.
std::vector<TrainingSample> Family(int n, int task, int family, uint64_t seed, bool noise = false,
                                   double trend = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 8.0f);
  std::vector<TrainingSample> out;
  for (int p = 0; p < n; ++p) {
    TrainingSample s;
    s.task_id = task;
    // The first kRandomFeatures entries are drawn, the rest stay 0, so the programs (and the
    // trees trained on them) do not change when a feature version adds entries.
    std::vector<float> row(kNumFeatures, 0.0f);
    for (int i = 0; i < kRandomFeatures; ++i) row[i] = u(rng);
    row[0] = 0.5f * row[0] + 4.0f * static_cast<float>(family);
    const double e = (noise ? 0.5 * u(rng) : row[0] - 4.0 * family);  // in [0, 4)
    const double within = trend > 0 ? e : 4.0 - e;
    s.throughput = (30.0 + 2.0 * within) * (family == 1 ? 10.0 : 1.0);
    s.features.stores.push_back(std::move(row));
    out.push_back(std::move(s));
  }
  return out;
}

Target Sm90() { return Target::H200(); }

// The tuner's model (regression from scratch; a warm start takes the initial model's objective).
XGBoostOptions Options() { return OnlineModelOptions(43, 1); }

// A rank model pretrained on three tasks holding both families, saved for sm_90.
std::string Pretrained() {
  static const std::string path = [] {
    XGBoostOptions o = Options();
    o.objective = XGBoostObjective::kPairwiseRank;
    o.max_depth = 6;
    o.max_rounds = 200;
    XGBoostModel m(o);
    std::vector<TrainingSample> train;
    for (int task = 0; task < 3; ++task) {
      for (int family = 0; family < 2; ++family) {
        for (TrainingSample& s : Family(60, task, family, 100 + 2 * task + family)) {
          train.push_back(std::move(s));
        }
      }
    }
    EXPECT_TRUE(m.Update(train).ok());
    m.set_info({ModelTargetName(Sm90()), "{}"});
    const std::string p = ::testing::TempDir() + "/ws_pretrained.model";
    EXPECT_TRUE(m.Save(p).ok());
    return p;
  }();
  return path;
}

// How many (fast, slow) pairs of held-out programs `m` orders slow first.
int CrossFamilyFlips(XGBoostModel& m) {
  const std::vector<double> fast = *m.Predict(FeaturesOf(Family(100, 9, 1, 7)));
  const std::vector<double> slow = *m.Predict(FeaturesOf(Family(100, 9, 0, 8)));
  int flips = 0;
  for (double f : fast) {
    for (double s : slow) flips += s >= f;
  }
  return flips;
}

// The warm start before this change: one held-out split, the tuner's default trees (depth 10,
// rate 0.2, up to 10000 rounds) and objective (regression), weight 1, no clip.
XGBoostOptions BeforeCrossValidation(XGBoostObjective objective) {
  XGBoostOptions o = Options();
  o.warm.folds = 0;
  o.warm.max_depth = 10;
  o.warm.eta = 0.2;
  o.warm.max_rounds = 10000;
  o.warm.objective = objective;
  return o;
}

TEST(WarmStartTest, NoisyRecordsOfOneFamilyKeepTheCrossFamilyOrder) {
  XGBoostModel pre(Options());
  ASSERT_TRUE(pre.LoadForTarget(Pretrained(), Sm90()).ok());
  const int pre_flips = CrossFamilyFlips(pre);
  ASSERT_LT(pre_flips, 50);
  const std::vector<TrainingSample> records = Family(32, 9, 1, 11, /*noise=*/true);

  XGBoostModel warm(Options());
  ASSERT_TRUE(warm.SetInitialModel(Pretrained(), Sm90()).ok());
  ASSERT_TRUE(warm.Update(records).ok());
  EXPECT_EQ(CrossFamilyFlips(warm), pre_flips);
  // Noise: cross-validation finds no gain, and the pretrained model scores alone.
  EXPECT_EQ(warm.last_report().added_weight, 0);
  const std::vector<ProgramFeatures> held = FeaturesOf(Family(50, 9, 1, 12));
  EXPECT_EQ(*warm.Predict(held), *pre.Predict(held));

  // The update before cross-validation flips families, with the tuner's objective (regression
  // on the rank model's scale) and with the pretrained model's (rank).
  for (XGBoostObjective objective :
       {XGBoostObjective::kRegression, XGBoostObjective::kPairwiseRank}) {
    XGBoostModel before(BeforeCrossValidation(objective));
    ASSERT_TRUE(before.SetInitialModel(Pretrained(), Sm90()).ok());
    ASSERT_TRUE(before.Update(records).ok());
    EXPECT_GT(CrossFamilyFlips(before), 2 * pre_flips + 20) << XGBoostObjectiveName(objective);
  }
}

// Enough records of a within-family trend the pretrained model gets backwards: the update learns
// it (weight > 0, better held-out order within the family) but moves no program past one that
// the pretrained model scores below every record.
TEST(WarmStartTest, ARealTrendInEnoughRecordsIsLearnedWithinTheFamily) {
  XGBoostModel pre(Options());
  ASSERT_TRUE(pre.LoadForTarget(Pretrained(), Sm90()).ok());
  XGBoostModel warm(Options());
  ASSERT_TRUE(warm.SetInitialModel(Pretrained(), Sm90()).ok());
  const std::vector<TrainingSample> records = Family(64, 9, 1, 21, false, /*trend=*/-1.0);
  ASSERT_TRUE(warm.Update(records).ok());
  EXPECT_GT(warm.last_report().added_weight, 0);
  EXPECT_GT(warm.last_report().validation_pairwise_accuracy,
            warm.last_report().initial_pairwise_accuracy);
  const std::vector<TrainingSample> held = Family(150, 9, 1, 22, false, -1.0);
  const double before =
      *PairwiseRankingAccuracy(*pre.Predict(FeaturesOf(held)), ThroughputOf(held));
  const double after =
      *PairwiseRankingAccuracy(*warm.Predict(FeaturesOf(held)), ThroughputOf(held));
  EXPECT_GT(after, before + 0.1) << before << " -> " << after;

  // Slow programs the pretrained model scores below every record keep their score and stay
  // below every fast program they were below.
  const std::vector<double> rec = *pre.Predict(FeaturesOf(records));
  const double band_lo = *std::min_element(rec.begin(), rec.end());
  const std::vector<ProgramFeatures> slow = FeaturesOf(Family(100, 9, 0, 8));
  const std::vector<ProgramFeatures> fast = FeaturesOf(Family(100, 9, 1, 7, false, -1.0));
  const std::vector<double> slow_pre = *pre.Predict(slow), slow_warm = *warm.Predict(slow);
  const std::vector<double> fast_pre = *pre.Predict(fast), fast_warm = *warm.Predict(fast);
  int below = 0;
  for (size_t i = 0; i < slow.size(); ++i) {
    if (slow_pre[i] >= band_lo) continue;
    ++below;
    EXPECT_EQ(slow_warm[i], slow_pre[i]);
    for (size_t j = 0; j < fast.size(); ++j) {
      if (fast_pre[j] > slow_pre[i]) {
        EXPECT_GT(fast_warm[j], slow_warm[i]) << i << " " << j;
      }
    }
  }
  EXPECT_GT(below, 50);

  // Saved and loaded, the weighted model predicts the same; it cannot be a warm start's initial
  // model (its weight would be lost in the frozen ensemble).
  const std::string path = ::testing::TempDir() + "/ws_warm.model";
  ASSERT_TRUE(warm.Save(path).ok());
  XGBoostModel loaded(Options());
  ASSERT_TRUE(loaded.Load(path).ok());
  EXPECT_EQ(*loaded.Predict(FeaturesOf(held)), *warm.Predict(FeaturesOf(held)));
  XGBoostModel again(Options());
  EXPECT_THAT(again.SetInitialModel(path, Sm90()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weighted added trees")));
}

}  // namespace
}  // namespace tilesearch::costmodel
