// The CUDA runner keeps one worker per task across Run calls (on a real GPU; skipped with "no
// CUDA driver: ..." where the probe finds none): the second call of a task sets up no worker and
// builds no task data (also when the calls come from threads that have ended since, as the
// tuner's overlapped rounds make them), its results equal a fresh runner's; a candidate that
// faults in a later call costs one setup and the next candidate measures fine; one that writes
// into its inputs is a wrong answer and the worker set up after it checks on pristine copies;
// another task gets its own worker; Prepare sets a task up ahead of its first Run.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "runtime/cuda_device.h"
#include "tests/codegen/nest_builders.h"
#include "tests/measure/cuda_device_test_util.h"
#include "tests/measure/cuda_test_util.h"

namespace tilesearch::measure {
namespace {

using runtime::TargetFromDevice;
using ::testing::HasSubstr;
using testing_util::ProbedDevice;
using ::tilesearch::testing::Ok;

// The naive GPU kernel as the reference (interpreter limit 0): the setup a kept worker saves.
MeasureOptions KernelReferenceOptions() {
  MeasureOptions o;
  o.timing.warmup_runs = 1;
  o.timing.min_runs = 5;
  o.timing.min_total_ms = 1;
  o.timing.max_runs = 20;
  o.interpreter_reference_max_ops = 0;
  return o;
}

std::unique_ptr<Runner> MakeRunner(const MeasureOptions& options) {
  absl::StatusOr<std::unique_ptr<Runner>> m =
      CreateCudaRunner(TargetFromDevice(*ProbedDevice()), options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

void ExpectFine(const MeasureResult& r) {
  EXPECT_EQ(r.error, MeasureError::kNone) << r.message;
  EXPECT_EQ(r.check.trials, MeasureOptions().check_trials);
  EXPECT_EQ(r.check.mismatches, 0);
  EXPECT_GT(r.check.checked_elements, 0);
  EXPECT_GT(r.timing.median_ms, 0);
}

struct AddTask {
  ir::ComputeDAG dag;
  BuildResult good;
  BuildResult doubled;
};

AddTask MakeAddTask(int64_t m, int64_t n) {
  ir::ComputeDAG dag = Ok(testing_util::AddDag(m, n));
  return {dag, Ok(testing_util::AddCandidate(dag, 1.0)), Ok(testing_util::AddCandidate(dag, 2.0))};
}

TEST(CudaRunnerKeptWorkerGpuTest, SecondRunOfATaskSetsUpNoWorkerAndMatchesAFreshRunner) {
  TS_SKIP_WITHOUT_DEVICE();
  AddTask task = MakeAddTask(128, 256);
  std::unique_ptr<Runner> kept = MakeRunner(KernelReferenceOptions());
  ASSERT_NE(kept, nullptr);
  // Each call from its own thread, ended before the next call: the worker must outlive them.
  std::vector<MeasureResult> first, second;
  RunUsage first_usage, second_usage;
  std::thread([&] {
    first = kept->Run(task.dag, {task.good, task.doubled});
    first_usage = kept->last_run_usage();
  }).join();
  std::thread([&] {
    second = kept->Run(task.dag, {task.doubled, task.good});
    second_usage = kept->last_run_usage();
  }).join();
  EXPECT_EQ(first_usage.worker_setups, 1);
  EXPECT_GT(first_usage.setup_ms, 0);
  EXPECT_GT(first_usage.prepare_ms, 0);
  EXPECT_EQ(second_usage.worker_setups, 0);
  EXPECT_EQ(second_usage.setup_ms, 0);
  EXPECT_EQ(second_usage.prepare_ms, 0);
  EXPECT_GT(second_usage.item_ms, 0);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  ExpectFine(first[0]);
  EXPECT_EQ(first[1].error, MeasureError::kWrongAnswer) << first[1].message;
  EXPECT_EQ(second[0].error, MeasureError::kWrongAnswer) << second[0].message;
  ExpectFine(second[1]);

  std::unique_ptr<Runner> fresh = MakeRunner(KernelReferenceOptions());
  ASSERT_NE(fresh, nullptr);
  std::vector<MeasureResult> again = fresh->Run(task.dag, {task.doubled, task.good});
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(fresh->last_run_usage().worker_setups, 1);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(second[i].error, again[i].error) << i;
    EXPECT_EQ(second[i].check.mismatches, again[i].check.mismatches) << i;
    EXPECT_EQ(second[i].check.checked_elements, again[i].check.checked_elements) << i;
    EXPECT_EQ(second[i].check.first_mismatch, again[i].check.first_mismatch) << i;
    EXPECT_EQ(second[i].check.f64_max_abs_error, again[i].check.f64_max_abs_error) << i;
  }
  EXPECT_EQ(second[1].check.max_abs_error, again[1].check.max_abs_error);
}

// Prepare (the tuner calls it from a thread while it searches and builds the first round) sets the
// task up ahead: the first Run then reports that setup and the task's data but sets up no other
// worker, and measures as a fresh runner does. A second Prepare of the same task does nothing;
// Prepare of another task replaces the worker.
TEST(CudaRunnerKeptWorkerGpuTest, PrepareSetsUpTheTaskBeforeTheFirstRun) {
  TS_SKIP_WITHOUT_DEVICE();
  AddTask task = MakeAddTask(128, 256);
  std::unique_ptr<Runner> m = MakeRunner(KernelReferenceOptions());
  ASSERT_NE(m, nullptr);
  std::thread([&] { m->Prepare(task.dag); }).join();
  m->Prepare(task.dag);  // already set up
  std::vector<MeasureResult> first = m->Run(task.dag, {task.good, task.doubled});
  const RunUsage usage = m->last_run_usage();
  EXPECT_EQ(usage.worker_setups, 1);  // the one Prepare set up
  EXPECT_GT(usage.setup_ms, 0);
  EXPECT_GT(usage.prepare_ms, 0);
  ASSERT_EQ(first.size(), 2u);
  ExpectFine(first[0]);
  EXPECT_EQ(first[1].error, MeasureError::kWrongAnswer) << first[1].message;
  std::vector<MeasureResult> second = m->Run(task.dag, {task.good});
  EXPECT_EQ(m->last_run_usage().worker_setups, 0);
  EXPECT_EQ(m->last_run_usage().prepare_ms, 0);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].check.max_abs_error, first[0].check.max_abs_error);

  AddTask other = MakeAddTask(64, 32);
  m->Prepare(other.dag);
  ExpectFine(m->Run(other.dag, {other.good})[0]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);
}

TEST(CudaRunnerKeptWorkerGpuTest, FaultInALaterRunCostsOneSetupAndTheNextCandidateRuns) {
  TS_SKIP_WITHOUT_DEVICE();
  AddTask task = MakeAddTask(64, 96);
  // Row 2^32 of a 96-column float matrix: 1.5 TiB past the buffer.
  BuildResult faulting = Ok(testing_util::AddCandidate(task.dag, 1.0, int64_t{1} << 32));
  std::unique_ptr<Runner> m = MakeRunner(KernelReferenceOptions());
  ASSERT_NE(m, nullptr);
  ExpectFine(m->Run(task.dag, {task.good})[0]);
  ASSERT_EQ(m->last_run_usage().worker_setups, 1);
  std::vector<MeasureResult> r = m->Run(task.dag, {task.good, faulting, task.doubled, task.good});
  ASSERT_EQ(r.size(), 4u);
  ExpectFine(r[0]);
  EXPECT_EQ(r[1].error, MeasureError::kRuntimeError) << r[1].message;
  EXPECT_THAT(r[1].message, HasSubstr("CUDA_ERROR"));
  EXPECT_EQ(r[2].error, MeasureError::kWrongAnswer) << r[2].message;
  ExpectFine(r[3]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);  // the one after the poisoned context
  ExpectFine(m->Run(task.dag, {task.good})[0]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 0);  // that one is kept
}

TEST(CudaRunnerKeptWorkerGpuTest, CandidateWritingIntoItsInputsReplacesTheKeptWorker) {
  TS_SKIP_WITHOUT_DEVICE();
  using codegen::testing::Ld;
  using codegen::testing::Loop;
  using codegen::testing::Seq;
  using codegen::testing::St;
  using codegen::testing::V;
  AddTask task = MakeAddTask(64, 96);
  ir::LoopNest nest = Ok(testing_util::AddNest(task.dag, 1.0));
  // C = A + B, then A = 0 (each thread its own element, after reading it).
  nest.body = Loop(
      "i", 64,
      Loop("j", 96,
           Seq({St("C", {V("i"), V("j")}, Ld("A", {V("i"), V("j")}) + Ld("B", {V("i"), V("j")})),
                St("A", {V("i"), V("j")}, ir::FloatConst(0.0))}),
           ir::ForKind::kThreadIdxX),
      ir::ForKind::kBlockIdxX);
  BuildResult writer = Ok(testing_util::CandidateFromNest(nest));
  std::unique_ptr<Runner> m = MakeRunner(KernelReferenceOptions());
  ASSERT_NE(m, nullptr);
  ExpectFine(m->Run(task.dag, {task.good})[0]);
  std::vector<MeasureResult> r = m->Run(task.dag, {writer, task.good, task.doubled});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].error, MeasureError::kWrongAnswer) << r[0].message;
  EXPECT_THAT(r[0].message, HasSubstr("candidate wrote into its input 'A'"));
  ExpectFine(r[1]);
  EXPECT_EQ(r[2].error, MeasureError::kWrongAnswer) << r[2].message;
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);
}

TEST(CudaRunnerKeptWorkerGpuTest, AnotherTaskGetsItsOwnWorker) {
  TS_SKIP_WITHOUT_DEVICE();
  AddTask small = MakeAddTask(64, 96);
  AddTask large = MakeAddTask(128, 256);
  std::unique_ptr<Runner> m = MakeRunner(KernelReferenceOptions());
  ASSERT_NE(m, nullptr);
  ExpectFine(m->Run(small.dag, {small.good})[0]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);
  std::vector<MeasureResult> r = m->Run(large.dag, {large.good, large.doubled});
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);
  EXPECT_GT(m->last_run_usage().prepare_ms, 0);
  ExpectFine(r[0]);
  EXPECT_EQ(r[1].error, MeasureError::kWrongAnswer) << r[1].message;
  ExpectFine(m->Run(large.dag, {large.good})[0]);
  EXPECT_EQ(m->last_run_usage().worker_setups, 0);
  // A candidate of the small task still checks against the small task's reference.
  r = m->Run(small.dag, {small.good, small.doubled});
  EXPECT_EQ(m->last_run_usage().worker_setups, 1);
  ExpectFine(r[0]);
  EXPECT_EQ(r[1].error, MeasureError::kWrongAnswer) << r[1].message;
}

}  // namespace
}  // namespace tilesearch::measure
