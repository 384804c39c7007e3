// The judge of a tune's pretrained and online-only cost models: the merit of each model's top
// picks (checked against merits averaged by hand), k-fold cross-validated scores (checked against
// the folds computed independently), and the running preference.
#include "search/model_judge.h"

#include <memory>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace tilesearch::search {
namespace {

TEST(TopPicksMeritTest, MeanOfTheTopQuarterOverTheBest) {
  // 8 programs, top quarter = 2: the scores rank programs 5 and 2 first (merits 4 and 8).
  const std::vector<double> scores = {0.1, 0.7, 0.9, 0.2, 0.3, 1.5, 0.0, 0.4};
  const std::vector<double> merits = {1, 2, 8, 3, 5, 4, 6, 7};
  absl::StatusOr<double> m = TopPicksMerit(scores, merits, 0.25);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(*m, (4.0 + 8.0) / 2 / 8.0);
  // A perfect ranking's top picks are the two best: (8 + 7) / 2 / 8.
  absl::StatusOr<double> perfect = TopPicksMerit(merits, merits, 0.25);
  ASSERT_TRUE(perfect.ok());
  EXPECT_DOUBLE_EQ(*perfect, 15.0 / 16.0);
}

TEST(TopPicksMeritTest, TiedScoresShareThePlacesEvenly) {
  // All scores equal: the expected top-k merit under random tie-breaking is the mean merit.
  const std::vector<double> merits = {1, 2, 3, 4, 0, 6};
  const std::vector<double> flat(merits.size(), 0.5);
  absl::StatusOr<double> m = TopPicksMerit(flat, merits, 0.5);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(*m, (16.0 / 6.0) / 6.0);
  // One clear first, then a tie of three for the remaining two places (k = 3 of 6).
  const std::vector<double> scores = {9, 1, 1, 1, 0, 0};
  absl::StatusOr<double> t = TopPicksMerit(scores, merits, 0.5);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(*t, (1.0 + 2.0 * (2.0 + 3.0 + 4.0) / 3.0) / 3.0 / 6.0);
}

TEST(TopPicksMeritTest, BadInputIsAnError) {
  EXPECT_EQ(TopPicksMerit({1, 2}, {1}, 0.5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopPicksMerit({}, {}, 0.5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopPicksMerit({1}, {1}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopPicksMerit({1}, {-1}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopPicksMerit({1, 2}, {0, 0}, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A model whose score of every program is the sum of the throughputs it was trained on: the
// held-out score of sample i is then the total minus the throughputs of i's fold.
class SumModel : public costmodel::CostModel {
 public:
  absl::Status Update(const std::vector<costmodel::TrainingSample>& samples) override {
    for (const costmodel::TrainingSample& s : samples) sum_ += s.throughput;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> Predict(
      const std::vector<costmodel::ProgramFeatures>& programs) override {
    return std::vector<double>(programs.size(), sum_);
  }
  absl::Status Save(const std::string&) const override { return absl::OkStatus(); }
  absl::Status Load(const std::string&) override { return absl::OkStatus(); }
  std::string Name() const override { return "sum"; }

 private:
  double sum_ = 0;
};

TEST(CrossValidatedScoresTest, EachSampleIsScoredByAModelThatDidNotSeeIt) {
  std::vector<costmodel::TrainingSample> samples(10);
  for (size_t i = 0; i < samples.size(); ++i) samples[i].throughput = static_cast<double>(1 << i);
  const double total = 1023;
  absl::StatusOr<std::vector<double>> cv =
      CrossValidatedScores([] { return std::make_unique<SumModel>(); }, samples, /*folds=*/3);
  ASSERT_TRUE(cv.ok()) << cv.status();
  ASSERT_EQ(cv->size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    double fold = 0;
    for (size_t j = i % 3; j < samples.size(); j += 3) fold += samples[j].throughput;
    EXPECT_DOUBLE_EQ((*cv)[i], total - fold) << "sample " << i;
  }
  EXPECT_EQ(
      CrossValidatedScores([] { return std::make_unique<SumModel>(); }, samples, 1).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CrossValidatedScores([] { return std::make_unique<SumModel>(); },
                                 std::vector<costmodel::TrainingSample>(2), 3)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelJudgeTest, PrefersTheModelWhoseTopPicksWereBetterOverTheRounds) {
  ModelJudge judge;
  EXPECT_FALSE(judge.judged());
  EXPECT_FALSE(judge.prefers_online());
  const std::vector<double> merits = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<double> right = merits;                         // top 2: 8, 7
  std::vector<double> wrong(merits.rbegin(), merits.rend());  // top 2: 1, 2
  // A round with no valid program adds nothing.
  EXPECT_FALSE(judge.AddRound(right, wrong, std::vector<double>(8, 0)).ok());
  EXPECT_FALSE(judge.judged());
  // Round 1, 8 programs: pretrained 15/16, online 3/16.
  ASSERT_TRUE(judge.AddRound(right, wrong, merits).ok());
  EXPECT_FALSE(judge.prefers_online());
  // Round 2, 16 programs where online is right and pretrained wrong: the larger round outweighs.
  std::vector<double> m2(16);
  std::iota(m2.begin(), m2.end(), 1.0);
  std::vector<double> w2(m2.rbegin(), m2.rend());
  ASSERT_TRUE(judge.AddRound(w2, m2, m2).ok());
  // Pretrained: 8·(15/16) + 16·((1+2+3+4)/4/16); online: 8·(3/16) + 16·((16+15+14+13)/4/16).
  const double pretrained = 8 * (15.0 / 16) + 16 * (10.0 / 64);
  const double online = 8 * (3.0 / 16) + 16 * (58.0 / 64);
  ASSERT_GT(online, pretrained);
  EXPECT_TRUE(judge.prefers_online());
  EXPECT_EQ(judge.programs(), 24);
}

}  // namespace
}  // namespace tilesearch::search
