// The tuning loop end to end on the cpu target (a 64×64×64 float32 matmul, small search options so
// the whole file runs in seconds on 2 cores). One shared job (12 trials in 2 rounds, resumed to
// 15): the best record is a valid schedule whose lowered nest, interpreted, equals both a
// hand-written float64 triple loop and ir::RunReference, and is faster than the naive program timed
// by the same measurer; the log holds exactly the budget with no state measured twice; resuming
// with a larger budget measures only the difference, none of it a state already in the log; each
// round appends one round line whose pairwise accuracy and top-k recall equal a naive recomputation
// from its stored predictions and the measured records, and whose predictions are those of an
// XGBoost model trained independently on the earlier rounds only (held out). Separately: early
// stopping ends a job at the first round boundary where the log shows enough trials without
// improvement; SIGINT stops the job after a whole logged round; the evolutionary search's own
// contract (distinct unmeasured states) and option errors.
#include "search/tuner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/status_matchers.h"
#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "costmodel/xgboost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "ir/lower_naive.h"
#include "ir/reference.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/evolutionary_search.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/sketch.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

constexpr int64_t kN = 64;

schedule::Workload Matmul64() {
  schedule::Workload w;
  w.op = "matmul";
  w.args.shapes = {{kN, kN}, {kN, kN}};
  w.args.dtype = ir::ScalarType::kFloat32;
  return w;
}

measure::MeasureOptions FastMeasure() {
  measure::MeasureOptions m;
  m.timing.min_runs = 3;
  m.timing.min_total_ms = 1;
  m.timing.warmup_runs = 1;
  if (m.timing.max_runs < m.timing.min_runs) m.timing.max_runs = m.timing.min_runs;
  m.host_threads = 1;
  return m;
}

TuneOptions SmallTune(const std::string& log, int trials) {
  TuneOptions o;
  o.trials = trials;
  o.per_round = 8;
  o.log_path = log;
  o.seed = 7;
  o.search.population = 64;
  o.search.generations = 1;
  o.search.init_min_population = 16;
  o.measure = FastMeasure();
  o.model_threads = 1;
  o.quiet = true;
  return o;
}

// Logs this process made, removed when the tests end.
std::vector<std::string>& TempLogs() {
  static std::vector<std::string>* logs = new std::vector<std::string>();
  return *logs;
}

class TempLogCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& path : TempLogs()) std::remove(path.c_str());
  }
};
const ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new TempLogCleanup);

std::string TempLog(const std::string& name) {
  // The pid keeps concurrent runs of this binary (several build trees, one /tmp) apart.
  const std::string path =
      ::testing::TempDir() + "/tuner_test_" + std::to_string(::getpid()) + "_" + name + ".jsonl";
  TempLogs().push_back(path);
  std::remove(path.c_str());
  return path;
}

std::vector<MeasureRecord> ReadAll(const std::string& path) {
  absl::StatusOr<LogContents> log = ReadLog(path);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? log->records : std::vector<MeasureRecord>{};
}

// Naive pairwise accuracy: over pairs with different actual values, 1 for the same order, 1/2 for
// equal predictions.
double NaivePairwise(const std::vector<double>& p, const std::vector<double>& a) {
  double agree = 0, pairs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < a.size(); ++j) {
      if (i >= j || a[i] == a[j]) continue;
      pairs += 1;
      if (p[i] == p[j]) {
        agree += 0.5;
      } else if ((p[i] > p[j]) == (a[i] > a[j])) {
        agree += 1;
      }
    }
  }
  return pairs > 0 ? agree / pairs : std::nan("");
}

// Naive top-k recall: the k best by each ranking (ties: lower index first), overlap / k.
double NaiveTopK(const std::vector<double>& p, const std::vector<double>& a, int k) {
  auto top = [k](const std::vector<double>& v) {
    std::vector<bool> taken(v.size(), false);
    for (int n = 0; n < k; ++n) {
      int best = -1;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!taken[i] && (best < 0 || v[i] > v[best])) best = static_cast<int>(i);
      }
      taken[best] = true;
    }
    return taken;
  };
  const std::vector<bool> tp = top(p), ta = top(a);
  int hits = 0;
  for (size_t i = 0; i < a.size(); ++i) hits += tp[i] && ta[i];
  return static_cast<double>(hits) / k;
}

// One small XGBoost job shared by the tests below (tuning is the slow part): 12 trials in 2
// rounds of 6, then a resume to 15 (a third round of 3) and a call whose budget is already met.
class TunedMatmulTest : public ::testing::Test {
 protected:
  static constexpr int kTrials = 12;
  static constexpr int kResumed = 15;
  static constexpr int kPerRound = 6;

  static TuneOptions JobOptions(int trials) {
    TuneOptions o = SmallTune(*log_, trials);
    o.per_round = kPerRound;
    return o;
  }

  static void SetUpTestSuite() {
    log_ = new std::string(TempLog("tune"));
    const Target target = Target::HostCpu();
    first_ = new absl::StatusOr<TuneResult>(Tune(Matmul64(), target, JobOptions(kTrials)));
    first_records_ = new std::vector<MeasureRecord>(ReadAll(*log_));
    resumed_ = new absl::StatusOr<TuneResult>(Tune(Matmul64(), target, JobOptions(kResumed)));
    again_ = new absl::StatusOr<TuneResult>(Tune(Matmul64(), target, JobOptions(kTrials)));
  }
  static void TearDownTestSuite() {
    delete log_;
    delete first_;
    delete first_records_;
    delete resumed_;
    delete again_;
  }

  static std::string* log_;
  static absl::StatusOr<TuneResult>* first_;
  static std::vector<MeasureRecord>* first_records_;  // the log after the first call
  static absl::StatusOr<TuneResult>* resumed_;
  static absl::StatusOr<TuneResult>* again_;
};
std::string* TunedMatmulTest::log_ = nullptr;
absl::StatusOr<TuneResult>* TunedMatmulTest::first_ = nullptr;
std::vector<MeasureRecord>* TunedMatmulTest::first_records_ = nullptr;
absl::StatusOr<TuneResult>* TunedMatmulTest::resumed_ = nullptr;
absl::StatusOr<TuneResult>* TunedMatmulTest::again_ = nullptr;

TEST_F(TunedMatmulTest, BestIsCorrectAndFasterThanNaive) {
  const Target target = Target::HostCpu();
  ASSERT_TRUE(first_->ok()) << first_->status();
  const TuneResult& result = **first_;
  EXPECT_EQ(result.trials, kTrials);
  EXPECT_EQ(result.new_trials, kTrials);
  EXPECT_EQ(static_cast<int>(result.curve.size()), kTrials);
  ASSERT_TRUE(result.best.has_value());
  const MeasureRecord& best = *result.best;
  EXPECT_EQ(best.result.error, measure::MeasureError::kNone);
  EXPECT_TRUE(best.valid());
  // The best record is the fastest valid one of the log.
  for (const MeasureRecord& r : *first_records_) {
    if (r.valid()) {
      EXPECT_GE(r.median_ms(), best.median_ms());
    }
  }
  // Re-lowered and interpreted, the best schedule computes the matmul: against a hand-written
  // float64 triple loop and against ir::RunReference.
  absl::StatusOr<ir::ComputeDAG> dag = Matmul64().Build();
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<schedule::State> state = schedule::ReplaySteps(*dag, best.steps);
  ASSERT_TRUE(state.ok()) << state.status();
  absl::StatusOr<schedule::LoweredKernel> kernel = schedule::Lower(*dag, *state, target);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const ir::BufferMap inputs = ir::MakeRandomInputs(*dag, 11);
  absl::StatusOr<ir::BufferMap> reference = ir::RunReference(*dag, inputs);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(reference->size(), 1u);
  ir::BufferMap buffers = inputs;
  const std::string out_name = reference->begin()->first;
  ir::HostBuffer out = reference->begin()->second;
  std::fill(out.data.begin(), out.data.end(), std::nan(""));
  buffers[out_name] = out;
  ASSERT_TRUE(ir::Interpret(kernel->nest, buffers).ok());
  const ir::HostBuffer& a = inputs.at(dag->stage(dag->input_ids()[0]).name());
  const ir::HostBuffer& b = inputs.at(dag->stage(dag->input_ids()[1]).name());
  const ir::HostBuffer& got = buffers.at(out_name);
  ASSERT_EQ(got.data.size(), static_cast<size_t>(kN * kN));
  for (int64_t i = 0; i < kN; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < kN; ++k) sum += a.data[i * kN + k] * b.data[k * kN + j];
      ASSERT_NEAR(got.data[i * kN + j], sum, 1e-4) << "C[" << i << ", " << j << "]";
      ASSERT_NEAR(got.data[i * kN + j], reference->begin()->second.data[i * kN + j], 1e-4);
    }
  }

  // Faster than the naive program measured by the same measurer.
  absl::StatusOr<std::unique_ptr<measure::Runner>> measurer =
      measure::CreateRunner(target, FastMeasure());
  ASSERT_TRUE(measurer.ok()) << measurer.status();
  absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(*dag);
  ASSERT_TRUE(naive.ok()) << naive.status();
  measure::BuildResult naive_c, best_c;
  naive_c.nest = std::make_shared<const ir::LoopNest>(*naive);
  best_c.nest = std::make_shared<const ir::LoopNest>(kernel->nest);
  const std::vector<measure::MeasureResult> timed = (*measurer)->Run(*dag, {naive_c, best_c});
  ASSERT_EQ(timed.size(), 2u);
  ASSERT_TRUE(timed[0].ok()) << timed[0].message;
  ASSERT_TRUE(timed[1].ok()) << timed[1].message;
  EXPECT_LT(timed[1].median_ms(), timed[0].median_ms());
}

TEST_F(TunedMatmulTest, LogHoldsTheBudgetWithEachStateOnceAndResumeMeasuresOnlyTheDifference) {
  ASSERT_TRUE(first_->ok()) << first_->status();
  // The log after the first call: exactly the budget, no duplicate state, trial indices 0..11.
  const std::vector<MeasureRecord>& records = *first_records_;
  ASSERT_EQ(static_cast<int>(records.size()), kTrials);
  std::unordered_set<uint64_t> hashes;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_TRUE(hashes.insert(RecordStateHash(records[i])).second) << "trial " << i;
    EXPECT_EQ(records[i].trial, static_cast<int64_t>(i));
  }
  // Resume with a larger budget: only the difference is measured, no state twice.
  ASSERT_TRUE(resumed_->ok()) << resumed_->status();
  EXPECT_EQ((*resumed_)->new_trials, kResumed - kTrials);
  EXPECT_EQ((*resumed_)->trials, kResumed);
  absl::StatusOr<LogContents> after = ReadLog(*log_);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(static_cast<int>(after->records.size()), kResumed);
  std::unordered_set<uint64_t> all;
  for (const MeasureRecord& r : after->records) EXPECT_TRUE(all.insert(RecordStateHash(r)).second);
  for (int i = 0; i < kTrials; ++i) {
    EXPECT_EQ(StepsCanonicalText(after->records[i].steps), StepsCanonicalText(records[i].steps));
  }
  ASSERT_TRUE((*resumed_)->best.has_value());
  ASSERT_TRUE((*first_)->best.has_value());
  EXPECT_LE((*resumed_)->best->median_ms(), (*first_)->best->median_ms());
  // A budget already met measures nothing and writes no round line.
  ASSERT_TRUE(again_->ok()) << again_->status();
  EXPECT_EQ((*again_)->new_trials, 0);
  EXPECT_TRUE((*again_)->rounds.empty());
  EXPECT_EQ(after->rounds.size(), 3u);
}

TEST_F(TunedMatmulTest, EachRoundLogsHeldOutModelQuality) {
  ASSERT_TRUE(first_->ok()) << first_->status();
  ASSERT_TRUE(resumed_->ok()) << resumed_->status();
  const Target target = Target::HostCpu();
  absl::StatusOr<LogContents> contents = ReadLog(*log_);
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->records.size(), static_cast<size_t>(kResumed));
  ASSERT_EQ(contents->rounds.size(), 3u);
  ASSERT_EQ((*first_)->rounds.size(), 2u);
  absl::StatusOr<ir::ComputeDAG> dag = Matmul64().Build();
  ASSERT_TRUE(dag.ok());
  const double flops = 2.0 * kN * kN * kN;
  const int first_trial[] = {0, kPerRound, 2 * kPerRound};
  const int size[] = {kPerRound, kPerRound, kResumed - kTrials};
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(r);
    const RoundRecord& round = contents->rounds[r];
    // The resumed job numbers its round after the log's.
    EXPECT_EQ(round.round, r + 1);
    EXPECT_EQ(round.first_trial, first_trial[r]);
    EXPECT_EQ(round.trials, size[r]);
    EXPECT_EQ(round.model, "xgboost");
    EXPECT_EQ(round.train_samples, first_trial[r]);  // every earlier record, none of this round's
    EXPECT_EQ(round.seed, 7u);
    ASSERT_EQ(round.predicted.size(), static_cast<size_t>(size[r]));
    // Recompute the metrics from the stored predictions and the measured records.
    std::vector<double> predicted, actual;
    for (int i = 0; i < size[r]; ++i) {
      const MeasureRecord& rec = contents->records[first_trial[r] + i];
      ASSERT_EQ(rec.trial, first_trial[r] + i);
      if (!rec.valid()) continue;
      predicted.push_back(round.predicted[i]);
      actual.push_back(flops / (rec.result.timing.median_ms * 1e-3));
    }
    EXPECT_EQ(round.valid, static_cast<int64_t>(actual.size()));
    ASSERT_GE(actual.size(), 2u);
    EXPECT_GE(round.pairwise_accuracy, 0.0);
    EXPECT_LE(round.pairwise_accuracy, 1.0);
    EXPECT_NEAR(round.pairwise_accuracy, NaivePairwise(predicted, actual), 1e-12);
    EXPECT_EQ(round.k, std::max<int>(1, static_cast<int>(actual.size()) / 8));
    EXPECT_NEAR(round.top_k_recall, NaiveTopK(predicted, actual, round.k), 1e-12);
  }
  // Round 1: no model yet; the untrained ensemble scores everything 0 (chance: 1/2).
  EXPECT_FALSE(contents->rounds[0].model_trained);
  EXPECT_EQ(contents->rounds[0].pairwise_accuracy, 0.5);
  EXPECT_TRUE(contents->rounds[1].model_trained);
  EXPECT_GT(contents->rounds[1].boost_rounds, 0);

  // Round 2's scores are those of a model trained on round 1 only: retrain one independently.
  costmodel::XGBoostOptions xo;
  xo.seed = 7;
  xo.nthread = 1;
  costmodel::XGBoostModel model(xo);
  auto features = [&](const MeasureRecord& rec) {
    costmodel::ProgramFeatures p;
    absl::StatusOr<schedule::State> state = schedule::ReplaySteps(*dag, rec.steps);
    EXPECT_TRUE(state.ok());
    if (!state.ok()) return p;
    absl::StatusOr<costmodel::StoreFeatures> f =
        costmodel::ExtractStateFeatures(*dag, *state, target);
    if (f.ok()) p.stores = *f;
    return p;
  };
  std::vector<costmodel::TrainingSample> samples;
  for (int i = 0; i < kPerRound; ++i) {
    const MeasureRecord& rec = contents->records[i];
    costmodel::TrainingSample s;
    s.throughput = rec.valid() ? flops / (rec.result.timing.median_ms * 1e-3) : 0;
    s.features = features(rec);
    samples.push_back(s);
  }
  ASSERT_TRUE(model.Update(samples).ok());
  EXPECT_EQ(model.last_report().rounds, contents->rounds[1].boost_rounds);
  EXPECT_EQ(model.last_report().num_programs, contents->rounds[1].train_programs);
  std::vector<costmodel::ProgramFeatures> round2;
  for (int i = kPerRound; i < 2 * kPerRound; ++i) round2.push_back(features(contents->records[i]));
  absl::StatusOr<std::vector<double>> scores = model.Predict(round2);
  ASSERT_TRUE(scores.ok());
  for (int i = 0; i < kPerRound; ++i) {
    EXPECT_NEAR((*scores)[i], contents->rounds[1].predicted[i],
                1e-9 * std::max(1.0, std::fabs((*scores)[i])))
        << i;
  }
}

TEST(TunerTest, EarlyStoppingEndsAtTheFirstRoundWithoutEnoughImprovement) {
  const std::string log = TempLog("early");
  const Target target = Target::HostCpu();
  TuneOptions options = SmallTune(log, 60);
  options.per_round = 1;
  options.use_xgboost = false;  // random search: improvements become rare quickly
  options.early_stopping = 2;
  absl::StatusOr<TuneResult> result = Tune(Matmul64(), target, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<MeasureRecord> records = ReadAll(log);
  EXPECT_TRUE(result->early_stopped);
  EXPECT_LT(records.size(), 60u);
  EXPECT_EQ(static_cast<int64_t>(records.size()), result->trials);
  // By hand: after n trials, trials since the last strict improvement of the best median; the job
  // must stop at the first n where that reaches 2.
  double best = std::numeric_limits<double>::infinity();
  int64_t best_index = -1;
  int64_t stop_at = -1;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].valid() && records[i].result.timing.median_ms < best) {
      best = records[i].result.timing.median_ms;
      best_index = static_cast<int64_t>(i);
    }
    if (static_cast<int64_t>(i) - best_index >= 2) {
      stop_at = static_cast<int64_t>(i) + 1;
      break;
    }
  }
  EXPECT_EQ(stop_at, static_cast<int64_t>(records.size()));

  options.early_stopping = -1;
  EXPECT_THAT(
      Tune(Matmul64(), target, options),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("early_stopping must be >= 0")));
}

// Staged timing on the cpu target: screened records keep their short timing (3 runs, against at
// least 6 for the full one here), are slower than the best, and the best is fully timed; with the
// screen off nothing is screened.
TEST(TunerTest, StagedTimingScreensOnlySlowerCandidates) {
  const Target target = Target::HostCpu();
  for (double factor : {1.5, 0.0}) {
    SCOPED_TRACE(::testing::Message() << "screen factor " << factor);
    const std::string log = TempLog(factor > 0 ? "screened" : "unscreened");
    TuneOptions options = SmallTune(log, 32);
    options.use_xgboost = false;  // random search: a wide spread of times
    options.measure.timing.min_runs = 6;
    options.measure.timing.max_runs = 6;
    options.screen_factor = factor;
    absl::StatusOr<TuneResult> result = Tune(Matmul64(), target, options);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->best.has_value());
    EXPECT_FALSE(result->best->result.screened);
    EXPECT_EQ(result->best->result.timing.runs, 6);
    int screened = 0;
    for (const MeasureRecord& r : ReadAll(log)) {
      if (!r.valid() || !r.result.screened) continue;
      ++screened;
      EXPECT_EQ(r.result.timing.runs, 3) << "trial " << r.trial;
      EXPECT_GT(r.median_ms(), result->best->median_ms()) << "trial " << r.trial;
    }
    if (factor > 0) {
      EXPECT_GT(screened, 0);
    } else {
      EXPECT_EQ(screened, 0);
    }
  }
}

TEST(TunerTest, SigintStopsBetweenRoundsWithTheRoundLogged) {
  const std::string log = TempLog("sigint");
  const Target target = Target::HostCpu();
  constexpr int kTrials = 200;
  // Once the first round is in the log (so Tune's handler is installed), send SIGINT.
  std::atomic<bool> stop{false};
  std::thread interrupter([&] {
    while (!stop.load()) {
      std::ifstream in(log);
      std::string line;
      if (in && std::getline(in, line) && !line.empty()) {
        ::kill(::getpid(), SIGINT);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  TuneOptions options = SmallTune(log, kTrials);
  options.per_round = 4;
  absl::StatusOr<TuneResult> result = Tune(Matmul64(), target, options);
  stop = true;
  interrupter.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->interrupted);
  EXPECT_LT(result->trials, kTrials);
  EXPECT_GT(result->trials, 0);
  EXPECT_EQ(result->trials % 4, 0);  // whole rounds only
  EXPECT_EQ(static_cast<int64_t>(ReadAll(log).size()), result->trials);
}

TEST(EvolutionarySearchTest, ReturnsDistinctUnmeasuredStates) {
  absl::StatusOr<ir::ComputeDAG> dag = Matmul64().Build();
  ASSERT_TRUE(dag.ok());
  const Target target = Target::HostCpu();
  absl::StatusOr<std::vector<schedule::State>> sketches =
      GenerateSketches(TuneContext(*dag, target));
  ASSERT_TRUE(sketches.ok());
  costmodel::RandomModel model(3);
  SearchOptions options;
  options.population = 48;
  options.generations = 1;
  options.init_min_population = 16;
  std::mt19937_64 rng(5);
  absl::StatusOr<std::vector<schedule::State>> first =
      testing::EvolveInContext(*dag, target, *sketches, model, {}, {}, 12, options, rng);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 12u);
  std::unordered_set<uint64_t> measured;
  for (const schedule::State& s : *first) {
    EXPECT_TRUE(measured.insert(StepsHash(s.steps())).second);
    EXPECT_TRUE(schedule::Lower(*dag, s, target).ok());
  }
  absl::StatusOr<std::vector<schedule::State>> second =
      testing::EvolveInContext(*dag, target, *sketches, model, measured, *first, 12, options, rng);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->empty());
  for (const schedule::State& s : *second) {
    EXPECT_FALSE(measured.contains(StepsHash(s.steps())));
  }
}

TEST(EvolutionarySearchTest, RejectsBadOptions) {
  absl::StatusOr<ir::ComputeDAG> dag = Matmul64().Build();
  ASSERT_TRUE(dag.ok());
  const Target target = Target::HostCpu();
  costmodel::RandomModel model(3);
  std::mt19937_64 rng(5);
  SearchOptions options;
  options.population = 0;
  EXPECT_THAT(testing::EvolveInContext(*dag, target, {}, model, {}, {}, 4, options, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("population")));
  options.population = 8;
  options.mutation_probability = 1.5;
  EXPECT_THAT(testing::EvolveInContext(*dag, target, {}, model, {}, {}, 4, options, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mutation_probability")));
}

TEST(TunerTest, RejectsBadOptions) {
  const Target target = Target::HostCpu();
  TuneOptions o = SmallTune(TempLog("bad"), 0);
  EXPECT_THAT(Tune(Matmul64(), target, o), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("trials must be >= 1, got 0")));
  o.trials = 4;
  o.log_path = "";
  EXPECT_THAT(Tune(Matmul64(), target, o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("log path")));
  o.log_path = "/nonexistent-dir/x/log.jsonl";
  EXPECT_THAT(Tune(Matmul64(), target, o),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent-dir/x/log.jsonl")));
  o.log_path = TempLog("bad");
  o.measure_batch = -1;
  EXPECT_THAT(Tune(Matmul64(), target, o), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("measure_batch must be >= 0")));
  o.measure_batch = 0;
  o.compile_timeout_ms = 0;
  EXPECT_THAT(Tune(Matmul64(), target, o), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("compile_timeout_ms must be > 0")));
  o.compile_timeout_ms = 3000;
  o.screen_factor = std::nan("");
  EXPECT_THAT(Tune(Matmul64(), target, o), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("screen_factor must be >= 0")));
}

}  // namespace
}  // namespace tilesearch::search
