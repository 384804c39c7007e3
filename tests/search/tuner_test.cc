// The tuning loop end to end on the cpu target (a 64×64×64 float32 matmul, small search options so
// the whole file runs in well under a minute on 2 cores): the best record is a valid schedule whose
// lowered nest, interpreted, equals both a hand-written float64 triple loop and ir::RunReference,
// and is faster than the naive program timed by the same measurer; the log holds exactly the
// budget with no state measured twice; resuming with a larger budget measures only the
// difference, none of it a state already in the log; SIGINT stops the job after a whole logged
// round. Also the evolutionary search's own contract (distinct unmeasured states) and option
// errors.
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <thread>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include <unistd.h>

#include "base/status_matchers.h"
#include "costmodel/cost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "ir/lower_naive.h"
#include "ir/reference.h"
#include "runtime/measure.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/evolutionary_search.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/sketch.h"
#include "search/tuner.h"

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

runtime::MeasureOptions FastMeasure() {
  runtime::MeasureOptions m;
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
  o.quiet = true;
  return o;
}

std::string TempLog(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/tuner_test_" + name + ".jsonl";
  std::remove(path.c_str());
  return path;
}

std::vector<MeasureRecord> ReadAll(const std::string& path) {
  absl::StatusOr<LogContents> log = ReadLog(path);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? log->records : std::vector<MeasureRecord>{};
}

TEST(TunerTest, TunedMatmulIsCorrectFasterThanNaiveAndLogsEachStateOnce) {
  const std::string log = TempLog("tune");
  const schedule::Target target = schedule::Target::HostCpu();
  constexpr int kTrials = 32;
  absl::StatusOr<TuneResult> result = Tune(Matmul64(), target, SmallTune(log, kTrials));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->trials, kTrials);
  EXPECT_EQ(result->new_trials, kTrials);
  EXPECT_EQ(static_cast<int>(result->curve.size()), kTrials);
  ASSERT_TRUE(result->best.has_value());
  const MeasureRecord& best = *result->best;
  EXPECT_EQ(best.result.error, runtime::MeasureError::kNone);
  EXPECT_TRUE(best.valid());

  // The log: exactly the budget, no duplicate state, trial indices 0..31.
  const std::vector<MeasureRecord> records = ReadAll(log);
  ASSERT_EQ(static_cast<int>(records.size()), kTrials);
  std::unordered_set<uint64_t> hashes;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_TRUE(hashes.insert(RecordStateHash(records[i])).second) << "trial " << i;
    EXPECT_EQ(records[i].trial, static_cast<int64_t>(i));
  }
  // The best record is the fastest valid one of the log.
  for (const MeasureRecord& r : records) {
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
  absl::StatusOr<std::unique_ptr<runtime::Measurer>> measurer =
      runtime::CreateMeasurer(target, FastMeasure());
  ASSERT_TRUE(measurer.ok()) << measurer.status();
  absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(*dag);
  ASSERT_TRUE(naive.ok()) << naive.status();
  runtime::MeasureCandidate naive_c, best_c;
  naive_c.nest = std::make_shared<const ir::LoopNest>(*naive);
  best_c.nest = std::make_shared<const ir::LoopNest>(kernel->nest);
  const std::vector<runtime::MeasureResult> timed = (*measurer)->Measure(*dag, {naive_c, best_c});
  ASSERT_EQ(timed.size(), 2u);
  ASSERT_TRUE(timed[0].ok()) << timed[0].message;
  ASSERT_TRUE(timed[1].ok()) << timed[1].message;
  EXPECT_LT(timed[1].median_ms(), timed[0].median_ms());

  // Resume with a larger budget: only the difference is measured, no state twice.
  absl::StatusOr<TuneResult> resumed = Tune(Matmul64(), target, SmallTune(log, kTrials + 8));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->new_trials, 8);
  EXPECT_EQ(resumed->trials, kTrials + 8);
  const std::vector<MeasureRecord> after = ReadAll(log);
  ASSERT_EQ(static_cast<int>(after.size()), kTrials + 8);
  std::unordered_set<uint64_t> all;
  for (const MeasureRecord& r : after) EXPECT_TRUE(all.insert(RecordStateHash(r)).second);
  for (int i = 0; i < kTrials; ++i) {
    EXPECT_EQ(StepsCanonicalText(after[i].steps), StepsCanonicalText(records[i].steps));
  }
  ASSERT_TRUE(resumed->best.has_value());
  EXPECT_LE(resumed->best->median_ms(), best.median_ms());

  // A budget already met measures nothing.
  absl::StatusOr<TuneResult> again = Tune(Matmul64(), target, SmallTune(log, kTrials));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->new_trials, 0);
  EXPECT_EQ(static_cast<int>(ReadAll(log).size()), kTrials + 8);
}

TEST(TunerTest, SigintStopsBetweenRoundsWithTheRoundLogged) {
  const std::string log = TempLog("sigint");
  const schedule::Target target = schedule::Target::HostCpu();
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
  absl::StatusOr<TuneResult> result = Tune(Matmul64(), target, SmallTune(log, kTrials));
  stop = true;
  interrupter.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->interrupted);
  EXPECT_LT(result->trials, kTrials);
  EXPECT_GT(result->trials, 0);
  EXPECT_EQ(result->trials % 8, 0);  // whole rounds only
  EXPECT_EQ(static_cast<int64_t>(ReadAll(log).size()), result->trials);
}

TEST(EvolutionarySearchTest, ReturnsDistinctUnmeasuredStates) {
  absl::StatusOr<ir::ComputeDAG> dag = Matmul64().Build();
  ASSERT_TRUE(dag.ok());
  const schedule::Target target = schedule::Target::HostCpu();
  absl::StatusOr<std::vector<schedule::State>> sketches = GenerateSketches(*dag, target);
  ASSERT_TRUE(sketches.ok());
  costmodel::RandomModel model(3);
  SearchOptions options;
  options.population = 48;
  options.generations = 1;
  options.init_min_population = 16;
  std::mt19937_64 rng(5);
  absl::StatusOr<std::vector<schedule::State>> first =
      EvolutionarySearch(*dag, target, *sketches, model, {}, {}, 12, options, rng);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 12u);
  std::unordered_set<uint64_t> measured;
  for (const schedule::State& s : *first) {
    EXPECT_TRUE(measured.insert(StepsHash(s.steps())).second);
    EXPECT_TRUE(schedule::Lower(*dag, s, target).ok());
  }
  absl::StatusOr<std::vector<schedule::State>> second =
      EvolutionarySearch(*dag, target, *sketches, model, measured, *first, 12, options, rng);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->empty());
  for (const schedule::State& s : *second) {
    EXPECT_FALSE(measured.contains(StepsHash(s.steps())));
  }
}

TEST(EvolutionarySearchTest, RejectsBadOptions) {
  absl::StatusOr<ir::ComputeDAG> dag = Matmul64().Build();
  ASSERT_TRUE(dag.ok());
  const schedule::Target target = schedule::Target::HostCpu();
  costmodel::RandomModel model(3);
  std::mt19937_64 rng(5);
  SearchOptions options;
  options.population = 0;
  EXPECT_THAT(EvolutionarySearch(*dag, target, {}, model, {}, {}, 4, options, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("population")));
  options.population = 8;
  options.mutation_probability = 1.5;
  EXPECT_THAT(EvolutionarySearch(*dag, target, {}, model, {}, {}, 4, options, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mutation_probability")));
}

TEST(TunerTest, RejectsBadOptions) {
  const schedule::Target target = schedule::Target::HostCpu();
  TuneOptions o = SmallTune(TempLog("bad"), 0);
  EXPECT_THAT(Tune(Matmul64(), target, o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trials must be >= 1, got 0")));
  o.trials = 4;
  o.log_path = "";
  EXPECT_THAT(Tune(Matmul64(), target, o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("log path")));
  o.log_path = "/nonexistent-dir/x/log.jsonl";
  EXPECT_THAT(Tune(Matmul64(), target, o), StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent-dir/x/log.jsonl")));
}

}  // namespace
}  // namespace tilesearch::search
