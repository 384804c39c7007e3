// Staged timing on the host runner: a candidate whose fastest check run is more than twice the
// screen (and over 1 ms) keeps its check runs as its timing (as many runs as check trials, no
// flushed timing); one within the screen is timed fully; a kernel under the 1 ms floor goes
// through the flushed short timing (its three runs) before it is screened.
#include <memory>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "base/target.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/lower_naive.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/linear.h"
#include "measure/measure.h"
#include "measure/runner.h"

namespace tilesearch::measure {
namespace {

using ::tilesearch::testing::Ok;

constexpr int kCheckTrials = 2;  // differs from the short timing's 3 runs on purpose

MeasureOptions Options(double screen_above_ms) {
  MeasureOptions o;
  o.check_trials = kCheckTrials;
  o.timing.warmup_runs = 1;
  o.timing.min_runs = 4;
  o.timing.max_runs = 4;
  o.timing.min_total_ms = 0;
  o.host_threads = 1;
  o.interpreter_reference_max_ops = 0;  // the compiled naive reference, in the worker
  o.screen_above_ms = screen_above_ms;
  return o;
}

BuildResult Candidate(const ir::ComputeDAG& dag) {
  BuildResult c;
  c.nest = std::make_shared<const ir::LoopNest>(Ok(ir::LowerNaive(dag)));
  return c;
}

// The naive 384³ matmul: 57 M multiply-adds on one thread, well over the 1 ms floor.
ir::ComputeDAG SlowMatmul() { return Ok(ir::MatmulDAG({384, 384}, {384, 384})); }

TEST(HostRunnerScreen, AClearLoserKeepsItsCheckRuns) {
  const ir::ComputeDAG dag = SlowMatmul();
  std::unique_ptr<Runner> runner = Ok(CreateRunner(Target::HostCpu(), Options(0.001)));
  std::vector<MeasureResult> r = runner->Run(dag, {Candidate(dag)});
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].error, MeasureError::kNone) << r[0].message;
  EXPECT_EQ(r[0].check.trials, kCheckTrials);
  EXPECT_TRUE(r[0].screened);
  EXPECT_EQ(r[0].timing.runs, kCheckTrials);
  EXPECT_GT(r[0].timing.min_ms, 1.0);
  EXPECT_EQ(r[0].costs_s.size(), static_cast<size_t>(kCheckTrials));
}

TEST(HostRunnerScreen, ACandidateWithinTheScreenIsTimedFully) {
  const ir::ComputeDAG dag = SlowMatmul();
  std::unique_ptr<Runner> runner = Ok(CreateRunner(Target::HostCpu(), Options(1e6)));
  std::vector<MeasureResult> r = runner->Run(dag, {Candidate(dag)});
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].error, MeasureError::kNone) << r[0].message;
  EXPECT_FALSE(r[0].screened);
  EXPECT_EQ(r[0].timing.runs, 4);
}

TEST(HostRunnerScreen, AKernelUnderTheFloorGetsTheFlushedShortTiming) {
  // relu over 4096 elements: microseconds, so its check runs (first touches included) do not
  // screen it; the short timing's three flushed runs do.
  const ir::ComputeDAG dag = Ok(ir::UnaryDAG(ir::UnaryOp::kRelu, {4096}));
  std::unique_ptr<Runner> runner = Ok(CreateRunner(Target::HostCpu(), Options(1e-6)));
  std::vector<MeasureResult> r = runner->Run(dag, {Candidate(dag)});
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].error, MeasureError::kNone) << r[0].message;
  EXPECT_TRUE(r[0].screened);
  EXPECT_EQ(r[0].timing.runs, 3);
}

}  // namespace
}  // namespace tilesearch::measure
