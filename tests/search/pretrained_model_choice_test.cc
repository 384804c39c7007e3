// With a pretrained model (TuneOptions::model_init) the tuner also trains an online-only model on
// the task's records and searches with whichever model's top picks of the task's measured rounds
// were better (each scored a round before it was measured: held out; an online model without
// records yet is cross-validated on the round instead). Each round line logs the judgement and
// names the initial model of the model that searched it (empty: the online-only one): the logged
// judgements must decide the next rounds' models exactly, and a pretrained model that ranks the
// task backwards (trained on inverted merits of the same workload) must be dropped for the
// online one. (A model trained on the true merits is not tested to be kept: on this machine's noisy
// CPU timings of a 32³ matmul, a cross-validated online model's top picks beat it in 2 of 6 runs.)
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/target.h"
#include "costmodel/xgboost_model.h"
#include "gtest/gtest.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/model_judge.h"
#include "search/training_data.h"
#include "search/tuner.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

constexpr int kPerRound = 8;
// Rounds of the judged tunes: a round's top quarter must be a few programs for its judgement to
// stand above the CPU's timing noise (at 8 per round it is two).
constexpr int kJudgedPerRound = 16;
constexpr int kJudgedRounds = 3;

std::string TempPath(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/pretrained_model_choice_test_" +
                           std::to_string(::getpid()) + "_" + name;
  std::remove(path.c_str());
  return path;
}

// Each program is timed 5 times (the median is its time): one run of a 32³ matmul is a few
// microseconds, and a single run on a loaded 2-core machine ranks programs by noise.
TuneOptions Options(const std::string& log, int trials, int per_round = kPerRound,
                    uint64_t seed = 5) {
  TuneOptions o = testing::TinyCpuTuneOptions(log, trials, per_round, seed);
  o.use_xgboost = true;
  o.overlap_rounds = 0;
  o.search.population = 32;
  o.measure.timing.min_runs = 5;
  if (o.measure.timing.max_runs < 5) o.measure.timing.max_runs = 5;
  return o;
}

// A model trained on the log's samples with each merit m replaced by max + min - m (so the
// fastest program looks slowest), saved for the cpu target.
std::string InvertedModel(const std::string& log) {
  TrainingDataOptions data_options;
  data_options.target = Target::HostCpu();
  data_options.threads = 1;
  absl::StatusOr<TrainingData> data = LoadTrainingData({log}, data_options);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok() || data->tasks.empty()) return "";
  std::vector<costmodel::TrainingSample> samples = data->tasks[0].samples;
  double lo = 0, hi = 0;
  bool first = true;
  for (const costmodel::TrainingSample& s : samples) {
    if (s.throughput <= 0) continue;
    lo = first ? s.throughput : std::min(lo, s.throughput);
    hi = first ? s.throughput : std::max(hi, s.throughput);
    first = false;
  }
  for (costmodel::TrainingSample& s : samples) {
    if (s.throughput > 0) s.throughput = hi + lo - s.throughput;
  }
  costmodel::XGBoostModel model(costmodel::OnlineModelOptions(3, 1));
  EXPECT_TRUE(model.Update(samples).ok());
  EXPECT_TRUE(model.trained());
  model.set_info({costmodel::ModelTargetName(Target::HostCpu()), "{}"});
  const std::string path = TempPath("inverted.model");
  EXPECT_TRUE(model.Save(path).ok());
  return path;
}

TEST(PretrainedModelChoiceTest, APretrainedModelThatRanksTheTaskBackwardsIsDropped) {
  const Target cpu = Target::HostCpu();
  const std::string train_log = TempPath("train.jsonl");
  ASSERT_TRUE(Tune(testing::SquareMatmul(32), cpu, Options(train_log, 6 * kPerRound)).ok());
  const std::string model = InvertedModel(train_log);
  ASSERT_FALSE(model.empty());

  // The premise (the pretrained model's top picks of the task's first round were worse than
  // random picks, by the judge's own measure: TopPicksMerit) rests on CPU timings, so a tune whose
  // first round the timing noise ranked otherwise is not evidence either way: up to three tunes
  // with different seeds; the first whose premise holds is judged, and none holding fails.
  bool judged = false;
  for (uint64_t seed = 5; seed < 8 && !judged; ++seed) {
    const std::string log = TempPath("tune.jsonl");
    TuneOptions o = Options(log, kJudgedRounds * kJudgedPerRound, kJudgedPerRound, seed);
    o.model_init = model;
    absl::StatusOr<TuneResult> result = Tune(testing::SquareMatmul(32), cpu, o);
    ASSERT_TRUE(result.ok()) << result.status();
    absl::StatusOr<LogContents> contents = ReadLog(log);
    ASSERT_TRUE(contents.ok()) << contents.status();
    std::remove(log.c_str());
    const std::vector<RoundRecord>& rounds = contents->rounds;
    ASSERT_EQ(rounds.size(), static_cast<size_t>(kJudgedRounds));
    EXPECT_EQ(rounds[0].model_init, model);  // nothing judged yet: the pretrained model searches
    ASSERT_EQ(contents->records.size(), static_cast<size_t>(kJudgedRounds * kJudgedPerRound));
    // Every round is judged (the first by cross-validated online scores: the online model had no
    // records when it scored it), and each round after the first is searched by the model whose
    // top-picks merits, summed over the rounds before it (weighted by their programs), are higher.
    double summed_pretrained = 0, summed_online = 0;
    for (size_t i = 0; i < rounds.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, ", round ", i + 1));
      if (i > 0) {
        EXPECT_EQ(rounds[i].model_init.empty(), summed_online > summed_pretrained)
            << "summed top-picks merits: pretrained " << summed_pretrained << ", online "
            << summed_online;
      }
      ASSERT_TRUE(rounds[i].judge.has_value());
      EXPECT_EQ(rounds[i].judge->cross_validated, i == 0);
      summed_pretrained += rounds[i].judge->pretrained * static_cast<double>(rounds[i].trials);
      summed_online += rounds[i].judge->online * static_cast<double>(rounds[i].trials);
    }
    ASSERT_EQ(rounds[0].predicted.size(), static_cast<size_t>(kJudgedPerRound));
    // Merits of the first round (one workload: 1 / median is FLOP/s up to a constant).
    std::vector<double> merits(kJudgedPerRound, -1);
    for (const MeasureRecord& r : contents->records) {
      const int64_t i = r.trial - rounds[0].first_trial;
      if (i >= 0 && i < kJudgedPerRound) merits[i] = r.valid() ? 1.0 / r.median_ms() : 0.0;
    }
    double mean = 0, best = 0;
    for (double m : merits) {
      ASSERT_GE(m, 0) << "a trial of the first round has no record";
      mean += m / kJudgedPerRound;
      best = std::max(best, m);
    }
    if (best <= 0) continue;
    absl::StatusOr<double> picks = TopPicksMerit(rounds[0].predicted, merits, 0.25);
    ASSERT_TRUE(picks.ok()) << picks.status();
    if (!(*picks < mean / best)) continue;
    // Its top picks were among the round's slower programs; the online model's cross-validated
    // top picks are better, so the online model searches from the second round on. The judgement
    // is a comparison of CPU timings too: where the noise made the first round's a tie or close,
    // the second round (scored by both models before it was measured) decides by the third.
    judged = true;
    EXPECT_TRUE(rounds[1].model_init.empty() || rounds[2].model_init.empty())
        << "seed " << seed << ": " << rounds[1].model_init << " searched rounds 2 and 3 (top picks "
        << *picks << " of the best, random picks " << mean / best << ")";
  }
  EXPECT_TRUE(judged) << "in none of three tunes did the inverted model rank the first round below "
                         "chance";
  std::remove(train_log.c_str());
  std::remove(model.c_str());
}

}  // namespace
}  // namespace tilesearch::search
