// The host runner on real nests: the naive matmul and a tiled CPU schedule measure correct with
// positive times (reference by the interpreter and by the JIT-compiled naive program); hand-built
// nests that store a wrong value, store 2^40 elements past the buffer or loop 2^40 times are
// wrong_answer / runtime_error / run_timeout, and the candidates after them are still measured.
#include <cmath>
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
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using Axes = std::vector<ir::Expr>;

using ::tilesearch::testing::Ok;

// Few, short timed runs: these tests check outcomes, not speed.
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

void ExpectMeasured(const MeasureResult& r) {
  EXPECT_EQ(r.error, MeasureError::kNone) << MeasureErrorName(r.error) << ": " << r.message;
  EXPECT_EQ(r.check.trials, FastOptions().check_trials);
  EXPECT_EQ(r.check.mismatches, 0);
  EXPECT_GT(r.timing.median_ms, 0);
  EXPECT_GE(r.timing.runs, 3);
  EXPECT_EQ(r.costs_s.size(), static_cast<size_t>(r.timing.runs));
  EXPECT_GT(r.compile_ms, 0);
  EXPECT_TRUE(std::isfinite(r.median_ms()));
}

// The 128×128×128 matmul of the example CPU schedule: its naive nest and its tiled lowering.
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
  ir::LoopNest naive = Ok(ir::LowerNaive(resolved.dag));
  return {resolved.dag, std::move(naive), std::move(lowered.nest)};
}

TEST(HostRunnerTest, NaiveAndTiledMatmulAreCorrectWithInterpreterReference) {
  MatmulTask task = LoadMatmul();
  std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), FastOptions()));
  std::vector<MeasureResult> r = m->Run(task.dag, {Candidate(task.naive), Candidate(task.tiled)});
  ASSERT_EQ(r.size(), 2u);
  ExpectMeasured(r[0]);
  ExpectMeasured(r[1]);
  EXPECT_EQ(r[0].check.checked_elements, FastOptions().check_trials * 128 * 128);
}

TEST(HostRunnerTest, TiledMatmulIsCorrectWithCompiledNaiveReference) {
  MatmulTask task = LoadMatmul();
  MeasureOptions options = FastOptions();
  options.interpreter_reference_max_ops = 0;  // reference: the naive program JIT-compiled
  std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), options));
  std::vector<MeasureResult> r = m->Run(task.dag, {Candidate(task.tiled)});
  ASSERT_EQ(r.size(), 1u);
  ExpectMeasured(r[0]);
}

// Y[i] = X[i] · 2 over 1024 elements, and hand-built nests for it.
constexpr int64_t kN = 1024;

ir::ComputeDAG Doubling() {
  ir::Tensor x = Ok(ir::Placeholder("X", {kN}));
  ir::Tensor y = Ok(ir::Compute("Y", {kN}, [&](const Axes& ax) { return x(ax[0]) * 2.0; }));
  return Ok(ir::ComputeDAG::Create({y}));
}

ir::LoopNest Nest(ir::Stmt body) {
  ir::LoopNest nest;
  nest.name = "doubling";
  nest.params = {ir::BufferDecl{"X", ir::ScalarType::kFloat32, {kN}},
                 ir::BufferDecl{"Y", ir::ScalarType::kFloat32, {kN}}};
  nest.num_inputs = 1;
  nest.body = std::move(body);
  return nest;
}

ir::Expr LoadX(ir::Expr index) {
  return ir::LoadNode::Make(ir::ScalarType::kFloat32, "X", {index});
}

// for i in [0, kN): Y[i + offset] = X[i] · factor
ir::LoopNest Scale(double factor, int64_t offset = 0) {
  ir::Expr i = ir::MakeVar("i");
  return Nest(ir::ForNode::Make(
      i, ir::IntConst(0), ir::IntConst(kN), ir::ForKind::kSerial,
      ir::StoreNode::Make("Y", {i + ir::IntConst(offset)}, LoadX(i) * ir::FloatConst(factor))));
}

// for j in [0, 2^40): Y[0] = Y[0] + X[j mod kN] (a float sum: no closed form, never finishes)
ir::LoopNest Endless() {
  ir::Expr j = ir::MakeVar("j");
  ir::Expr y0 = ir::LoadNode::Make(ir::ScalarType::kFloat32, "Y", {ir::IntConst(0)});
  return Nest(ir::ForNode::Make(
      j, ir::IntConst(0), ir::IntConst(int64_t{1} << 40), ir::ForKind::kSerial,
      ir::StoreNode::Make("Y", {ir::IntConst(0)}, y0 + LoadX(j % ir::IntConst(kN)))));
}

TEST(HostRunnerTest, FaultsAndHangsCostOnlyTheirCandidate) {
  ir::ComputeDAG dag = Doubling();
  MeasureOptions options = FastOptions();
  options.run_timeout_ms = 1000;
  std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), options));
  std::vector<BuildResult> candidates = {
      Candidate(Scale(2.0)),                    // 0: correct
      Candidate(Scale(3.0)),                    // 1: wrong value
      Candidate(Scale(2.0, int64_t{1} << 40)),  // 2: stores 2^40 elements past Y
      Candidate(Ok(ir::LowerNaive(dag))),       // 3: correct
      Candidate(Endless()),                     // 4: hangs
      Candidate(Scale(2.0)),                    // 5: correct
  };
  std::vector<MeasureResult> r = m->Run(dag, candidates);
  ASSERT_EQ(r.size(), candidates.size());
  ExpectMeasured(r[0]);
  EXPECT_EQ(r[1].error, MeasureError::kWrongAnswer);
  EXPECT_GT(r[1].check.mismatches, 0);
  EXPECT_THAT(r[1].message, HasSubstr("outside tolerance"));
  EXPECT_THAT(r[1].check.first_mismatch, HasSubstr("trial 0"));
  EXPECT_TRUE(std::isinf(r[1].median_ms()));
  EXPECT_EQ(r[2].error, MeasureError::kRuntimeError) << r[2].message;
  EXPECT_THAT(r[2].message, HasSubstr("while running candidate 2"));
  EXPECT_THAT(r[2].message, HasSubstr("killed by signal"));
  ExpectMeasured(r[3]);
  EXPECT_EQ(r[4].error, MeasureError::kRunTimeout) << r[4].message;
  EXPECT_THAT(r[4].message, HasSubstr("1000 ms"));
  ExpectMeasured(r[5]);
}

TEST(HostRunnerTest, WrongAnswerIsCountedPerElement) {
  // Y = X · 2 except Y[7] = X[7] · 2 + 1: exactly one mismatch per trial, at [7].
  ir::ComputeDAG dag = Doubling();
  ir::Expr i = ir::MakeVar("i");
  ir::Expr value = LoadX(i) * ir::FloatConst(2.0) +
                   ir::Select(i == ir::IntConst(7), ir::FloatConst(1.0), ir::FloatConst(0.0));
  ir::LoopNest off_by_one =
      Nest(ir::ForNode::Make(i, ir::IntConst(0), ir::IntConst(kN), ir::ForKind::kSerial,
                             ir::StoreNode::Make("Y", {i}, value)));
  std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), FastOptions()));
  std::vector<MeasureResult> r = m->Run(dag, {Candidate(off_by_one)});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].error, MeasureError::kWrongAnswer);
  const int trials = FastOptions().check_trials;
  EXPECT_EQ(r[0].check.mismatches, trials);
  EXPECT_EQ(r[0].check.checked_elements, trials * kN);
  EXPECT_THAT(r[0].check.first_mismatch, HasSubstr("Y[7]: got"));
}

// D[r] = Σ_k X[r, k] − Σ_k X[r, k] over K = 4096: exactly 0, with M = 2 Σ|X[r, k]| (about 4096
// for inputs uniform in [-1, 1)), so the precision rule allows 16 · 2^-24 · M ≈ 3.9e-3 where the
// plain screen allows 1e-4. A candidate off by 1e-3 everywhere (what a float32 kernel summing the
// two rows in another order may be off by) passes only through the screen's allowance: the
// arbitration is off. One off by 0.1 fails. Both reference paths: the interpreter's magnitudes
// (small task) and the JIT-compiled magnitude program (interpreter limit 0).
TEST(HostRunnerTest, CancellationAllowanceComesFromTheMagnitudes) {
  constexpr int64_t kRows = 8, kK = 4096;
  ir::Tensor x = Ok(ir::Placeholder("X", {kRows, kK}));
  auto row_sum = [&](const std::string& name) {
    return Ok(ir::Reduce(name, {kRows}, ir::ReduceKind::kSum, {kK},
                         [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]); }));
  };
  ir::Tensor s1 = row_sum("S1");
  ir::Tensor s2 = row_sum("S2");
  ir::Tensor d = Ok(ir::Compute("D", {kRows}, [&](const Axes& ax) { return s1(ax) - s2(ax); }));
  const ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({d}));
  auto constant = [&](double value) {
    ir::Expr r = ir::MakeVar("r");
    ir::LoopNest nest;
    nest.name = "cancel";
    nest.params = {ir::BufferDecl{"X", ir::ScalarType::kFloat32, {kRows, kK}},
                   ir::BufferDecl{"D", ir::ScalarType::kFloat32, {kRows}}};
    nest.num_inputs = 1;
    nest.body = ir::ForNode::Make(r, ir::IntConst(0), ir::IntConst(kRows), ir::ForKind::kSerial,
                                  ir::StoreNode::Make("D", {r}, ir::FloatConst(value)));
    return Candidate(std::move(nest));
  };
  for (double interpreter_limit : {1e12, 0.0}) {
    SCOPED_TRACE(interpreter_limit);
    MeasureOptions o = FastOptions();
    o.arbitration_max_elements = 0;
    o.distributions = {CheckDistribution::kUniformSymmetric};
    o.interpreter_reference_max_ops = interpreter_limit;
    std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), o));
    std::vector<MeasureResult> r = m->Run(dag, {constant(1e-3), constant(0.1)});
    ASSERT_EQ(r.size(), 2u);
    ExpectMeasured(r[0]);
    EXPECT_NEAR(r[0].check.max_abs_error, 1e-3, 1e-9);  // outside 1e-4, inside 16 u M
    EXPECT_EQ(r[1].error, MeasureError::kWrongAnswer) << r[1].message;
    EXPECT_EQ(r[1].check.mismatches, o.check_trials * kRows);
  }
}

TEST(HostRunnerTest, BuildErrorsAreMappedWithoutRunning) {
  ir::ComputeDAG dag = Doubling();
  std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), FastOptions()));
  std::vector<BuildResult> c(3);
  c[0].build_status = absl::DeadlineExceededError("compile_timeout: over 10000 ms");
  c[1].build_status = absl::FailedPreconditionError("invalid_schedule: 2048 threads per block");
  c[2].build_status = absl::InternalError("ptxas rejected the code");
  c[2].compile_ms = 12;
  std::vector<MeasureResult> r = m->Run(dag, c);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].error, MeasureError::kCompileTimeout);
  EXPECT_EQ(r[1].error, MeasureError::kInvalidSchedule);
  EXPECT_THAT(r[1].message, HasSubstr("2048 threads per block"));
  EXPECT_EQ(r[2].error, MeasureError::kCompileError);
  EXPECT_THAT(r[2].message, HasSubstr("ptxas rejected the code"));
  EXPECT_EQ(r[2].compile_ms, 12);
}

TEST(HostRunnerTest, MismatchedParametersAreInvalidSchedules) {
  ir::ComputeDAG dag = Doubling();
  // Writes its result into 'W', which is not a tensor of the task.
  ir::Expr i = ir::MakeVar("i");
  ir::LoopNest renamed =
      Nest(ir::ForNode::Make(i, ir::IntConst(0), ir::IntConst(kN), ir::ForKind::kSerial,
                             ir::StoreNode::Make("W", {i}, LoadX(i) * 2.0)));
  renamed.params[1].name = "W";
  std::unique_ptr<Runner> m = Ok(CreateRunner(Target::HostCpu(), FastOptions()));
  std::vector<MeasureResult> r = m->Run(dag, {Candidate(renamed)});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].error, MeasureError::kInvalidSchedule) << r[0].message;
  EXPECT_THAT(r[0].message, HasSubstr("'W' is not a tensor of the task"));
}

TEST(HostRunnerTest, CreateRejectsOtherTargetsAndBadOptions) {
  EXPECT_THAT(CreateHostRunner(Target::H200(), MeasureOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu target")));
  MeasureOptions bad;
  bad.check_trials = -1;
  EXPECT_THAT(CreateRunner(Target::HostCpu(), bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("check_trials")));
  bad = {};
  bad.run_timeout_ms = 0;
  EXPECT_THAT(CreateHostRunner(Target::HostCpu(), bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("run_timeout_ms")));
}

}  // namespace
}  // namespace tilesearch::measure
