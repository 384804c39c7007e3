// Model files across runs: the target and provenance saved with the booster, refusal of a model
// for another target or feature version (the message names both), truncated and corrupted files
// (errors, never a crash), a fixed-seed train / save / load round trip, warm starts from a saved
// model (SetInitialModel) and the pairwise ranking objective, on synthetic programs whose speed is
// a known function of their features.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_matchers.h"
#include "base/target.h"
#include "costmodel/features.h"
#include "costmodel/xgboost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/costmodel/sample_lists.h"

namespace tilesearch::costmodel {
namespace {

using ::testing::AllOf;
using testing::FeaturesOf;
using ::testing::HasSubstr;
using testing::ThroughputOf;
using ::tilesearch::testing::StatusIs;

// Programs of 1 to max_extra_stores stores, features uniform in [0, 8); a store's speed is
// 30 + 2 f0 + f1 · shift (shift changes the task's function), the program's the sum.
std::vector<TrainingSample> Programs(int n, int task, double shift, uint64_t seed,
                                     int max_extra_stores = 2) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 8.0f);
  std::vector<TrainingSample> out;
  for (int p = 0; p < n; ++p) {
    TrainingSample s;
    s.task_id = task;
    for (int r = 0; r < 1 + p % max_extra_stores; ++r) {
      std::vector<float> row(kNumFeatures);
      for (float& x : row) x = u(rng);
      s.throughput += 30.0 + 2.0 * row[0] + shift * row[1];
      s.features.stores.push_back(std::move(row));
    }
    out.push_back(std::move(s));
  }
  return out;
}

XGBoostOptions Small() {
  XGBoostOptions o;
  o.nthread = 1;
  o.max_rounds = 60;
  o.max_depth = 4;
  return o;
}

std::string Path(const std::string& name) { return ::testing::TempDir() + "/mf_" + name; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Target Cuda(const std::string& arch) {
  Target t = Target::H200();
  t.arch = arch;
  return t;
}

// A trained model saved for cuda sm_90 with a provenance.
std::string SavedModel(const std::string& name, XGBoostModel* model) {
  EXPECT_TRUE(model->Update(Programs(60, 0, 0.5, 1)).ok());
  model->set_info({ModelTargetName(Cuda("sm_90")), R"({"records": 60, "logs": ["a.jsonl"]})"});
  const std::string path = Path(name);
  EXPECT_TRUE(model->Save(path).ok());
  return path;
}

TEST(ModelFileTest, TargetNames) {
  EXPECT_EQ(ModelTargetName(Cuda("sm_90")), "cuda sm_90");
  EXPECT_EQ(ModelTargetName(Target::HostCpu()), "cpu");
}

TEST(ModelFileTest, FixedSeedRoundTripKeepsPredictionsAndProvenance) {
  XGBoostModel a(Small()), b(Small());
  const std::string pa = SavedModel("a.model", &a);
  const std::string pb = SavedModel("b.model", &b);
  // Same seed, same data: the same file, byte for byte.
  EXPECT_EQ(ReadAll(pa), ReadAll(pb));
  XGBoostModel loaded(Small());
  ASSERT_TRUE(loaded.LoadForTarget(pa, Cuda("sm_90")).ok());
  EXPECT_EQ(loaded.info().target, "cuda sm_90");
  const nlohmann::json prov = nlohmann::json::parse(loaded.info().provenance);
  EXPECT_EQ(prov["records"], 60);
  EXPECT_EQ(prov["logs"][0], "a.jsonl");
  const std::vector<ProgramFeatures> progs = FeaturesOf(Programs(40, 0, 0.5, 9));
  EXPECT_EQ(*loaded.Predict(progs), *a.Predict(progs));
}

TEST(ModelFileTest, AnotherTargetOrFeatureVersionIsRefusedNamingBoth) {
  XGBoostModel a(Small());
  const std::string path = SavedModel("target.model", &a);
  XGBoostModel m(Small());
  EXPECT_THAT(m.LoadForTarget(path, Cuda("sm_80")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(absl::StrCat("is for cuda sm_90 (feature version ",
                                                    kFeatureVersion, ")")),
                             HasSubstr(absl::StrCat("this run needs cuda sm_80 (feature version ",
                                                    kFeatureVersion, ")")))));
  EXPECT_THAT(m.SetInitialModel(path, Target::HostCpu()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("this run needs cpu")));
  EXPECT_FALSE(m.trained());

  // The same file claiming another feature version.
  std::string text = ReadAll(path);
  const std::string version = absl::StrCat("\"feature_version\":", kFeatureVersion);
  const size_t at = text.find(version);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, version.size(), "\"feature_version\":7");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  EXPECT_THAT(m.LoadForTarget(path, Cuda("sm_90")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("is for cuda sm_90 (feature version 7)"),
                             HasSubstr(absl::StrCat("needs cuda sm_90 (feature version ",
                                                    kFeatureVersion, ")")))));
  EXPECT_THAT(m.Load(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("has feature version 7, this build extracts ",
                                              kFeatureVersion))));
}

TEST(ModelFileTest, EveryTruncationAndCorruptionIsAnErrorNotACrash) {
  XGBoostModel a(Small());
  const std::string path = SavedModel("whole.model", &a);
  const std::string text = ReadAll(path);
  const std::string cut = Path("cut.model");
  XGBoostModel m(Small());
  // Every prefix (in steps, for speed) is refused and leaves the model untouched.
  for (size_t n = 0; n < text.size(); n += 1 + text.size() / 300) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << text.substr(0, n);
    const absl::Status s = m.Load(cut);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "prefix " << n << ": " << s;
    EXPECT_FALSE(m.trained()) << "prefix " << n;
  }
  // Bytes of the booster flipped: loads a (different) model or fails with a message; never
  // crashes.
  const size_t body = text.find('\n', text.find('\n') + 1) + 1;
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<size_t> pos(body, text.size() - 1);
  for (int i = 0; i < 40; ++i) {
    std::string bad = text;
    bad[pos(rng)] ^= 0x5a;
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << bad;
    XGBoostModel x(Small());
    const absl::Status s = x.Load(cut);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    }
  }
}

TEST(ModelFileTest, VersionOneFilesReadAsAnyTarget) {
  const std::string path = Path("v1.model");
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << "tilesearch-xgboost-model\n"
      << R"({"version": 1, "feature_version": )" << kFeatureVersion << R"(, "num_features": )"
      << kNumFeatures << R"(, "trained": false, )"
      << R"("rounds": 0, "booster_bytes": 0})"
      << "\n";
  XGBoostModel m(Small());
  ASSERT_TRUE(m.LoadForTarget(path, Cuda("sm_90")).ok());
  EXPECT_EQ(m.info().target, "");
  EXPECT_THAT(m.SetInitialModel(path, Cuda("sm_90")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no trained model")));
}

TEST(ModelFileTest, WarmStartKeepsThePretrainedTreesAndLearnsTheNewTask) {
  XGBoostModel pre(Small());
  const std::string path = SavedModel("init.model", &pre);
  XGBoostModel m(Small());
  ASSERT_TRUE(m.SetInitialModel(path, Cuda("sm_90")).ok());
  EXPECT_GT(m.initial_rounds(), 0);
  EXPECT_TRUE(m.trained());
  // Before any record: the pretrained model alone.
  const std::vector<TrainingSample> held = Programs(200, 7, -3.0, 30, 1);
  EXPECT_EQ(*m.Predict(FeaturesOf(held)), *pre.Predict(FeaturesOf(held)));
  // A new task of one-store programs where f1 slows programs down (the pretraining task sped them
  // up).
  const absl::Status updated = m.Update(Programs(80, 7, -3.0, 31, 1));
  ASSERT_TRUE(updated.ok()) << updated;
  EXPECT_GE(m.last_report().rounds, m.initial_rounds());
  const double before =
      *PairwiseRankingAccuracy(*pre.Predict(FeaturesOf(held)), ThroughputOf(held));
  const double after = *PairwiseRankingAccuracy(*m.Predict(FeaturesOf(held)), ThroughputOf(held));
  EXPECT_GT(after, before + 0.05) << before << " -> " << after;
  // Saved and loaded, the warm-started model predicts the same.
  ASSERT_TRUE(m.Save(Path("warm.model")).ok());
  XGBoostModel loaded(Small());
  ASSERT_TRUE(loaded.Load(Path("warm.model")).ok());
  EXPECT_EQ(*loaded.Predict(FeaturesOf(held)), *m.Predict(FeaturesOf(held)));
}

// Below min_programs_for_validation there is no held-out split to stop on: a warm-started model
// keeps the pretrained trees alone (boosted on the training error, they overfit a handful).
TEST(ModelFileTest, WarmStartAddsNoTreesWithoutAHeldOutSplit) {
  XGBoostModel pre(Small());
  const std::string path = SavedModel("init_few.model", &pre);
  XGBoostModel m(Small());
  ASSERT_TRUE(m.SetInitialModel(path, Cuda("sm_90")).ok());
  ASSERT_TRUE(m.Update(Programs(Small().min_programs_for_validation - 1, 7, -3.0, 60, 1)).ok());
  EXPECT_EQ(m.last_report().rounds, m.initial_rounds());
  const std::vector<ProgramFeatures> progs = FeaturesOf(Programs(30, 7, -3.0, 61, 1));
  EXPECT_EQ(*m.Predict(progs), *pre.Predict(progs));
}

TEST(ModelFileTest, PairwiseRankObjectiveRanksHeldOutPrograms) {
  XGBoostOptions o = Small();
  o.objective = XGBoostObjective::kPairwiseRank;
  o.max_rounds = 300;
  XGBoostModel m(o);
  // Two tasks 1000x apart: only the order within a task matters to this objective.
  std::vector<TrainingSample> train = Programs(100, 0, 0.5, 40, 1);
  for (TrainingSample& s : Programs(100, 1, 0.5, 41, 1)) {
    s.throughput *= 1000;
    train.push_back(std::move(s));
  }
  ASSERT_TRUE(m.Update(train).ok());
  ASSERT_TRUE(m.trained());
  const std::vector<TrainingSample> held = Programs(150, 0, 0.5, 42, 1);
  EXPECT_GT(*PairwiseRankingAccuracy(*m.Predict(FeaturesOf(held)), ThroughputOf(held)), 0.8);
  ASSERT_TRUE(m.Save(Path("rank.model")).ok());
  EXPECT_NE(ReadAll(Path("rank.model")).find("\"objective\":\"rank\""), std::string::npos);
}

// The shipped default model (models/, bench/scripts/train_default_model.sh) loads for its target
// and ranks: it scores distinct synthetic programs with more than one distinct value.
TEST(ModelFileTest, ShippedDefaultModelLoadsForItsTargetOnly) {
  const std::string path = std::string(TS_MODELS_DIR) + "/default-cuda-sm_90.model";
  XGBoostModel m(Small());
  ASSERT_TRUE(m.LoadForTarget(path, Cuda("sm_90")).ok());
  EXPECT_TRUE(m.trained());
  EXPECT_EQ(m.info().target, "cuda sm_90");
  const nlohmann::json prov = nlohmann::json::parse(m.info().provenance);
  EXPECT_GT(prov["records"].get<int>(), 1000);
  std::vector<double> scores = *m.Predict(FeaturesOf(Programs(20, 0, 0.5, 50)));
  std::sort(scores.begin(), scores.end());
  EXPECT_LT(scores.front(), scores.back());
  XGBoostModel other(Small());
  EXPECT_THAT(other.LoadForTarget(path, Target::HostCpu()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("this run needs cpu")));
}

}  // namespace
}  // namespace tilesearch::costmodel
