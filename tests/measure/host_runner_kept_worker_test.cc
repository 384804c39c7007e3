// The host runner keeps one worker per task across Run calls: the second call of a task sets up
// no worker and builds no task data, its results equal a fresh runner's and are correct against
// the naive reference; a candidate that crashes in a later call costs one setup and the next
// candidate is still measured; another task gets its own worker.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "base/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/lower_naive.h"
#include "ir/stmt.h"
#include "ir/tensor.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::Ok;

MeasureOptions FastOptions() {
  MeasureOptions o;
  o.timing.warmup_runs = 1;
  o.timing.min_runs = 3;
  o.timing.max_runs = 5;
  o.timing.min_total_ms = 0;
  o.host_threads = 1;
  return o;
}

BuildResult Candidate(ir::LoopNest nest) {
  BuildResult c;
  c.nest = std::make_shared<const ir::LoopNest>(std::move(nest));
  return c;
}

void ExpectCorrect(const MeasureResult& r) {
  EXPECT_EQ(r.error, MeasureError::kNone) << MeasureErrorName(r.error) << ": " << r.message;
  EXPECT_EQ(r.check.trials, FastOptions().check_trials);
  EXPECT_EQ(r.check.mismatches, 0);
  EXPECT_GT(r.check.checked_elements, 0);
  EXPECT_GT(r.timing.median_ms, 0);
}

// The 128×128×128 matmul of the example CPU schedule: naive and tiled nests.
struct MatmulTask {
  ir::ComputeDAG dag;
  ir::LoopNest naive;
  ir::LoopNest tiled;
};

MatmulTask LoadMatmul() {
  schedule::ScheduleFile file = Ok(schedule::ScheduleFile::Load(
      std::string(TS_EXAMPLE_SCHEDULES_DIR) + "/matmul_cpu_tiled.json"));
  schedule::ResolvedSchedule resolved = Ok(file.Resolve());
  schedule::LoweredKernel lowered =
      Ok(schedule::Lower(resolved.dag, resolved.state, Target::HostCpu()));
  return {resolved.dag, Ok(ir::LowerNaive(resolved.dag)), std::move(lowered.nest)};
}

// Y[i] = X[i] · 2 over 1024 elements, and hand-built nests for it.
constexpr int64_t kN = 1024;

ir::ComputeDAG Doubling() {
  ir::Tensor x = Ok(ir::Placeholder("X", {kN}));
  ir::Tensor y =
      Ok(ir::Compute("Y", {kN}, [&](const std::vector<ir::Expr>& ax) { return x(ax[0]) * 2.0; }));
  return Ok(ir::ComputeDAG::Create({y}));
}

// for i in [0, kN): Y[i + offset] = X[i] · factor
ir::LoopNest Scale(double factor, int64_t offset = 0) {
  ir::LoopNest nest;
  nest.name = "doubling";
  nest.params = {ir::BufferDecl{"X", ir::ScalarType::kFloat32, {kN}},
                 ir::BufferDecl{"Y", ir::ScalarType::kFloat32, {kN}}};
  nest.num_inputs = 1;
  ir::Expr i = ir::MakeVar("i");
  nest.body =
      ir::ForNode::Make(i, ir::IntConst(0), ir::IntConst(kN), ir::ForKind::kSerial,
                        ir::StoreNode::Make("Y", {i + ir::IntConst(offset)},
                                            ir::LoadNode::Make(ir::ScalarType::kFloat32, "X", {i}) *
                                                ir::FloatConst(factor)));
  return nest;
}

// Both reference paths: the interpreter's in this process (small task) and the compiled naive
// program in the worker's setup (interpreter limit 0), the setup that keeping the worker saves.
class KeptHostWorkerTest : public ::testing::TestWithParam<bool> {
 protected:
  MeasureOptions Options() const {
    MeasureOptions o = FastOptions();
    if (GetParam()) o.interpreter_reference_max_ops = 0;
    return o;
  }
};

TEST_P(KeptHostWorkerTest, SecondRunOfATaskSetsUpNoWorkerAndMatchesAFreshRunner) {
  MatmulTask task = LoadMatmul();
  std::unique_ptr<Runner> kept = Ok(CreateRunner(Target::HostCpu(), Options()));
  std::vector<MeasureResult> first =
      kept->Run(task.dag, {Candidate(task.naive), Candidate(task.tiled)});
  const RunUsage first_usage = kept->last_run_usage();
  std::vector<MeasureResult> second =
      kept->Run(task.dag, {Candidate(task.tiled), Candidate(task.naive)});
  const RunUsage second_usage = kept->last_run_usage();

  EXPECT_EQ(first_usage.worker_setups, 1);
  EXPECT_GT(first_usage.setup_ms, 0);
  EXPECT_GT(first_usage.prepare_ms, 0);
  EXPECT_EQ(second_usage.worker_setups, 0);
  EXPECT_EQ(second_usage.setup_ms, 0);
  EXPECT_EQ(second_usage.prepare_ms, 0);
  EXPECT_GT(second_usage.item_ms, 0);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  for (const MeasureResult& r : first) ExpectCorrect(r);
  for (const MeasureResult& r : second) ExpectCorrect(r);

  // A fresh runner's first call checks the same candidates on the same inputs against the same
  // reference: equal check reports.
  std::unique_ptr<Runner> fresh = Ok(CreateRunner(Target::HostCpu(), Options()));
  std::vector<MeasureResult> again =
      fresh->Run(task.dag, {Candidate(task.tiled), Candidate(task.naive)});
  EXPECT_EQ(fresh->last_run_usage().worker_setups, 1);
  ASSERT_EQ(again.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ExpectCorrect(again[i]);
    EXPECT_EQ(second[i].check.checked_elements, again[i].check.checked_elements) << i;
    EXPECT_EQ(second[i].check.max_abs_error, again[i].check.max_abs_error) << i;
    EXPECT_EQ(second[i].check.max_rel_error, again[i].check.max_rel_error) << i;
    EXPECT_EQ(second[i].check.f64_points, again[i].check.f64_points) << i;
    EXPECT_GT(again[i].check.f64_points, 0) << i;
    EXPECT_EQ(second[i].check.f64_max_abs_error, again[i].check.f64_max_abs_error) << i;
    EXPECT_EQ(second[i].check.reference_f64_max_abs_error,
              again[i].check.reference_f64_max_abs_error)
        << i;
  }
  // Within the precision rule against float64 on the sampled points, too.
  for (const MeasureResult& r : second) EXPECT_LE(r.check.f64_max_ratio, 1);
}

TEST_P(KeptHostWorkerTest, CrashInALaterRunIsReportedAndTheNextCandidateMeasured) {
  const ir::ComputeDAG dag = Doubling();
  MeasureOptions options = Options();
  std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), options));
  ExpectCorrect(m->Run(dag, {Candidate(Scale(2.0))})[0]);
  ASSERT_EQ(m->last_run_usage().worker_setups, 1);
  std::vector<MeasureResult> r = m->Run(dag, {
                                                 Candidate(Scale(2.0)),                    // 0
                                                 Candidate(Scale(2.0, int64_t{1} << 40)),  // 1
                                                 Candidate(Scale(3.0)),                    // 2
                                                 Candidate(Scale(2.0)),                    // 3
                                             });
  ASSERT_EQ(r.size(), 4u);
  ExpectCorrect(r[0]);
  EXPECT_EQ(r[1].error, MeasureError::kRuntimeError) << r[1].message;
  EXPECT_THAT(r[1].message, HasSubstr("killed by signal"));
  EXPECT_THAT(r[1].message, HasSubstr("while running candidate 1"));
  // The worker set up after the crash checks as the first one did.
  EXPECT_EQ(r[2].error, MeasureError::kWrongAnswer);
  EXPECT_EQ(r[2].check.mismatches, options.check_trials * kN);
  ExpectCorrect(r[3]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);  // the one after the crash
}

TEST_P(KeptHostWorkerTest, AnotherTaskGetsItsOwnWorker) {
  MatmulTask matmul = LoadMatmul();
  const ir::ComputeDAG doubling = Doubling();
  std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), Options()));
  ExpectCorrect(m->Run(doubling, {Candidate(Scale(2.0))})[0]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);
  ExpectCorrect(m->Run(matmul.dag, {Candidate(matmul.tiled)})[0]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);
  EXPECT_GT(m->last_run_usage().prepare_ms, 0);
  ExpectCorrect(m->Run(matmul.dag, {Candidate(matmul.naive)})[0]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 0);
  // Back to the first task: its worker was replaced, so it is set up again, and still checks.
  std::vector<MeasureResult> r = m->Run(doubling, {Candidate(Scale(3.0)), Candidate(Scale(2.0))});
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);
  EXPECT_EQ(r[0].error, MeasureError::kWrongAnswer);
  ExpectCorrect(r[1]);
}

INSTANTIATE_TEST_SUITE_P(ReferencePaths, KeptHostWorkerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("CompiledNaive")
                                             : std::string("Interpreter");
                         });

}  // namespace
}  // namespace tilesearch::measure
