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

// The naive program of `dag` measured by a fresh host runner with screen `screen_above_ms`.
MeasureResult MeasureNaive(const ir::ComputeDAG& dag, double screen_above_ms) {
  std::unique_ptr<Runner> runner = Ok(CreateRunner(Target::HostCpu(), Options(screen_above_ms)));
  std::vector<MeasureResult> r = runner->Run(dag, {Candidate(dag)});
  EXPECT_EQ(r.size(), 1u);
  if (r.empty()) return MeasureResult{};
  EXPECT_EQ(r[0].error, MeasureError::kNone) << r[0].message;
  EXPECT_EQ(r[0].check.trials, kCheckTrials);
  return r[0];
}

TEST(HostRunnerScreen, AClearLoserKeepsItsCheckRuns) {
  const MeasureResult r = MeasureNaive(SlowMatmul(), 0.001);
  EXPECT_TRUE(r.screened);
  EXPECT_EQ(r.timing.runs, kCheckTrials);
  EXPECT_GT(r.timing.min_ms, 1.0);
  EXPECT_EQ(r.costs_s.size(), static_cast<size_t>(kCheckTrials));
}

TEST(HostRunnerScreen, ACandidateWithinTheScreenIsTimedFully) {
  const MeasureResult r = MeasureNaive(SlowMatmul(), 1e6);
  EXPECT_FALSE(r.screened);
  EXPECT_EQ(r.timing.runs, 4);
}

TEST(HostRunnerScreen, AKernelUnderTheFloorGetsTheFlushedShortTiming) {
  // relu over 4096 elements: microseconds, so its check runs (first touches included) do not
  // screen it; the short timing's three flushed runs do.
  const MeasureResult r = MeasureNaive(Ok(ir::UnaryDAG(ir::UnaryOp::kRelu, {4096})), 1e-6);
  EXPECT_TRUE(r.screened);
  EXPECT_EQ(r.timing.runs, 3);
}

}  // namespace
}  // namespace tilesearch::measure
