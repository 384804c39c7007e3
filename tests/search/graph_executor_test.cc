// The graph executor on the cpu: unscheduled and tuned kernels bound to the partition's buffers,
// outputs against hand-written loops and the interpreter (ir::RunGraphReference), timing
// structure, and the errors a user meets (no log, no record, unset inputs, a foreign partition).
// The cuda path runs where a device answers and is skipped elsewhere.
#include "search/graph_executor.h"

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status.h"
#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "examples/models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph.h"
#include "runtime/cuda_driver.h"
#include "schedule/lower.h"
#include "schedule/naive_gpu.h"
#include "search/log_io.h"
#include "search/partition.h"
#include "search/task_scheduler.h"
#include "search/task_scheduler_tuner.h"
#include "tests/measure/cuda_device_test_util.h"
#include "tests/search/scratch_dir.h"

namespace tilesearch::search {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

constexpr int64_t kM = 8, kK = 16, kN = 16;

// y = relu(dense(x, w1) + dense(x, w2)) + bias: two equal denses (one task of weight 2), an add
// fed by both, a relu, a broadcast add.
ir::Graph TwoDenseGraph(int64_t k = kK) {
  ir::Graph g;
  ir::Value x = g.Input("x", {kM, k});
  ir::Value w1 = g.Param("w1", {kN, k});
  ir::Value w2 = g.Param("w2", {kN, k});
  ir::Value bias = g.Param("bias", {kN});
  g.MarkOutput(g.Add(g.Relu(g.Add(g.Dense(x, w1), g.Dense(x, w2))), bias));
  return g;
}

// The same in float64 loops.
std::vector<double> TwoDenseNaive(const ir::BufferMap& in) {
  const std::vector<double>& x = in.at("x").data;
  const std::vector<double>& w1 = in.at("w1").data;
  const std::vector<double>& w2 = in.at("w2").data;
  const std::vector<double>& bias = in.at("bias").data;
  std::vector<double> y(kM * kN);
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double a = 0, b = 0;
      for (int64_t k = 0; k < kK; ++k) {
        a += x[i * kK + k] * w1[j * kK + k];
        b += x[i * kK + k] * w2[j * kK + k];
      }
      y[i * kN + j] = std::max(a + b, 0.0) + bias[j];
    }
  }
  return y;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::abs(want[i])) << "element " << i;
  }
}

GraphPartition Partition(const ir::Graph& g, bool fuse) {
  absl::StatusOr<GraphPartition> p = PartitionGraph(g, {.fuse = fuse});
  CHECK(p.ok()) << p.status();
  return *std::move(p);
}

GraphExecutorOptions OneThread() { return {.host_threads = 1}; }

std::string EmptyLog() {
  const std::string path = tilesearch::testing::ScratchPath("empty.jsonl");
  std::ofstream(path).flush();
  return path;
}

TEST(GraphExecutorTest, UnscheduledKernelsComputeTheGraphFusedAndUnfused) {
  const ir::Graph g = TwoDenseGraph();
  const ir::BufferMap inputs = ir::MakeRandomGraphInputs(g, 11);
  const std::vector<double> want = TwoDenseNaive(inputs);
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    const GraphPartition p = Partition(g, fuse);
    absl::StatusOr<std::unique_ptr<GraphExecutor>> exec =
        GraphExecutor::CreateUnscheduled(g, p, Target::HostCpu(), OneThread());
    ASSERT_TRUE(exec.ok()) << exec.status();
    absl::StatusOr<ir::BufferMap> out = (*exec)->Run(inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::string name = g.node(g.outputs()[0]).name;
    ASSERT_EQ(out->count(name), 1u);
    EXPECT_EQ(out->at(name).shape, (std::vector<int64_t>{kM, kN}));
    ExpectNear(out->at(name).data, want);
    // Each task reports where its kernel came from.
    ASSERT_EQ((*exec)->tasks().size(), p.tasks.size());
    for (const ExecutorTask& t : (*exec)->tasks()) EXPECT_FALSE(t.tuned) << t.name;
    // A second run on other inputs reuses the buffers and gives the new answer.
    const ir::BufferMap other = ir::MakeRandomGraphInputs(g, 12);
    absl::StatusOr<ir::BufferMap> again = (*exec)->Run(other);
    ASSERT_TRUE(again.ok()) << again.status();
    ExpectNear(again->at(name).data, TwoDenseNaive(other));
  }
}

TEST(GraphExecutorTest, EqualSubgraphsShareOneTaskAndBindTheirOwnBuffers) {
  const ir::Graph g = TwoDenseGraph();
  const GraphPartition p = Partition(g, /*fuse=*/false);
  // dense (weight 2), add, relu, add with bias: the two denses are one task.
  ASSERT_EQ(p.tasks[0].name, "dense");
  ASSERT_EQ(p.tasks[0].weight, 2);
  absl::StatusOr<std::unique_ptr<GraphExecutor>> exec =
      GraphExecutor::CreateUnscheduled(g, p, Target::HostCpu(), OneThread());
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ((*exec)->tasks()[0].weight, 2);
  // Buffers: x, w1, w2, bias, both denses, the first add, relu, the output; float32.
  EXPECT_EQ((*exec)->buffer_bytes(), 4 * (kM * kK + 2 * kN * kK + kN + 5 * kM * kN));
  // With w2 = 0 the second dense contributes nothing: it read its own weights.
  ir::BufferMap inputs = ir::MakeRandomGraphInputs(g, 5);
  for (double& v : inputs.at("w2").data) v = 0;
  absl::StatusOr<ir::BufferMap> out = (*exec)->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(out->at(g.node(g.outputs()[0]).name).data, TwoDenseNaive(inputs));
}

TEST(GraphExecutorTest, CheckComparesWithTheInterpreterAndTheUnscheduledProgram) {
  const ir::Graph g = TwoDenseGraph();
  const GraphPartition p = Partition(g, /*fuse=*/true);
  absl::StatusOr<std::unique_ptr<GraphExecutor>> exec =
      GraphExecutor::CreateUnscheduled(g, p, Target::HostCpu(), OneThread());
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (GraphReference ref : {GraphReference::kInterpreter, GraphReference::kUnscheduled}) {
    absl::StatusOr<GraphCheck> check = (*exec)->Check({.reference = ref});
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->passed) << check->report.first_mismatch;
    EXPECT_EQ(check->report.checked_elements, kM * kN);
    EXPECT_EQ(check->reference, ref);
  }
}

TEST(GraphExecutorTest, TimeReportsEveryTaskWithItsWeightAndShare) {
  const ir::Graph g = TwoDenseGraph();
  const GraphPartition p = Partition(g, /*fuse=*/false);
  absl::StatusOr<std::unique_ptr<GraphExecutor>> exec =
      GraphExecutor::CreateUnscheduled(g, p, Target::HostCpu(), OneThread());
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->SetInputs(ir::MakeRandomGraphInputs(g, 1)).ok());
  runtime::TimingOptions timing;
  timing.warmup_runs = 1;
  timing.min_runs = 3;
  timing.min_total_ms = 0;
  timing.flush_cache = false;
  absl::StatusOr<GraphTiming> t = (*exec)->Time(timing);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->end_to_end.runs, 3);
  ASSERT_EQ(t->tasks.size(), p.tasks.size());
  double shares = 0, total = 0;
  for (size_t i = 0; i < t->tasks.size(); ++i) {
    const TaskTiming& task = t->tasks[i];
    EXPECT_EQ(task.name, p.tasks[i].name);
    EXPECT_EQ(task.weight, p.tasks[i].weight);
    EXPECT_GT(task.ms_per_call, 0) << task.name;
    EXPECT_DOUBLE_EQ(task.total_ms, task.ms_per_call * task.weight) << task.name;
    shares += task.share;
    total += task.total_ms;
  }
  EXPECT_NEAR(shares, 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(t->sum_of_tasks_ms, total);
  EXPECT_THAT(t->ToString(), HasSubstr("end to end:"));
  // The timing runs left valid outputs behind.
  absl::StatusOr<ir::BufferMap> out = (*exec)->Outputs();
  ASSERT_TRUE(out.ok()) << out.status();
}

TEST(GraphExecutorTest, MissingLogOrRecordIsNotFoundNamingTheTaskAndKey) {
  const ir::Graph g = TwoDenseGraph();
  const GraphPartition p = Partition(g, /*fuse=*/false);
  const Target cpu = Target::HostCpu();
  EXPECT_THAT(GraphExecutor::Create(g, p, tilesearch::testing::ScratchPath("none.jsonl"), cpu),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  const std::string log = EmptyLog();
  EXPECT_THAT(
      GraphExecutor::Create(g, p, log, cpu, OneThread()),
      StatusIs(absl::StatusCode::kNotFound, ::testing::AllOf(HasSubstr("task 0 ('dense')"),
                                                             HasSubstr(p.tasks[0].workload_key))));
  // allow_untuned: the unscheduled program, with the reason.
  GraphExecutorOptions untuned = OneThread();
  untuned.allow_untuned = true;
  absl::StatusOr<std::unique_ptr<GraphExecutor>> exec =
      GraphExecutor::Create(g, p, log, cpu, untuned);
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (const ExecutorTask& t : (*exec)->tasks()) {
    EXPECT_FALSE(t.tuned);
    EXPECT_THAT(t.note, HasSubstr("no record for workload " + t.workload_key));
  }
}

TEST(GraphExecutorTest, RunningWithoutInputsOrWithWrongOnesIsAnError) {
  const ir::Graph g = TwoDenseGraph();
  const GraphPartition p = Partition(g, /*fuse=*/true);
  absl::StatusOr<std::unique_ptr<GraphExecutor>> exec =
      GraphExecutor::CreateUnscheduled(g, p, Target::HostCpu(), OneThread());
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_THAT((*exec)->Execute(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("inputs not set")));
  EXPECT_THAT((*exec)->Outputs(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("has not run")));
  ir::BufferMap inputs = ir::MakeRandomGraphInputs(g, 1);
  inputs.erase("w2");
  EXPECT_THAT((*exec)->SetInputs(inputs), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("missing buffer for param 'w2'")));
  inputs["w2"] = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kN, kK + 1});
  EXPECT_THAT((*exec)->SetInputs(inputs),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'w2'")));
}

// A graph whose buffers exceed the machine's memory (a huge --batch) is a kResourceExhausted
// error naming the need, not a CHECK failure in the allocator: relu of 2^39 float32 values needs
// 4 TiB for its input and output.
TEST(GraphExecutorTest, BuffersBeyondHostMemoryAreResourceExhaustedNotACrash) {
  ir::Graph g;
  g.MarkOutput(g.Relu(g.Input("x", {int64_t{1} << 20, int64_t{1} << 19})));
  ASSERT_TRUE(g.Validate().ok()) << g.Validate();
  const GraphPartition p = Partition(g, /*fuse=*/true);
  EXPECT_THAT(GraphExecutor::CreateUnscheduled(g, p, Target::HostCpu(), OneThread()),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::AllOf(HasSubstr("4096.00 GiB"), HasSubstr("host memory"))));
}

TEST(GraphExecutorTest, APartitionOfAnotherGraphIsRefusedAtItsKernelParameters) {
  // Same structure and node ids, another reduction length: the kernels built for the partition
  // take [8, 16] inputs where the graph's values are [8, 32].
  const ir::Graph small = TwoDenseGraph(kK);
  const ir::Graph wide = TwoDenseGraph(2 * kK);
  const GraphPartition p = Partition(small, /*fuse=*/false);
  EXPECT_THAT(GraphExecutor::CreateUnscheduled(wide, p, Target::HostCpu(), OneThread()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("task 0 ('dense'): kernel parameter 0")));
}

// Tunes every task of `p` for 2 trials with the task scheduler into `log` (cpu, a tiny search).
absl::Status TuneAllTasks(const ir::Graph& g, const GraphPartition& p, const std::string& log) {
  std::vector<schedule::Workload> workloads;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    ASSIGN_OR_RETURN(schedule::Workload w, TaskWorkload(g, p, static_cast<int>(i)));
    workloads.push_back(std::move(w));
  }
  TuneOptions tune;
  tune.log_path = log;
  tune.seed = 5;
  tune.use_xgboost = false;
  tune.search.population = 16;
  tune.search.generations = 1;
  tune.search.init_min_population = 4;
  tune.measure.timing = {
      .warmup_runs = 0, .min_runs = 1, .min_total_ms = 0, .max_runs = 1, .flush_cache = false};
  tune.measure.host_threads = 1;
  tune.model_threads = 1;
  tune.quiet = true;
  ASSIGN_OR_RETURN(std::unique_ptr<TunerTaskRunner> runner,
                   TunerTaskRunner::Create(workloads, Target::HostCpu(), tune));
  TaskSchedulerOptions sched;
  sched.trials = static_cast<int64_t>(2 * p.tasks.size());
  sched.per_round = 2;
  ASSIGN_OR_RETURN(TaskSchedulerResult result,
                   RunTaskScheduler(SchedulerTasksOf(p), *runner, sched));
  if (!result.dead_tasks.empty()) return absl::InternalError("a task found no valid schedule");
  return absl::OkStatus();
}

// The executor on a log the scheduler wrote: every task runs the log's best valid record, the
// outputs match the loops and the check passes.
void ExpectTunedGraphComputes(const ir::Graph& g, const GraphPartition& p, const std::string& log) {
  const Target cpu = Target::HostCpu();
  absl::StatusOr<std::unique_ptr<GraphExecutor>> exec =
      GraphExecutor::Create(g, p, log, cpu, OneThread());
  ASSERT_TRUE(exec.ok()) << exec.status();
  absl::StatusOr<LogContents> contents = ReadLog(log);
  ASSERT_TRUE(contents.ok()) << contents.status();
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const ExecutorTask& t = (*exec)->tasks()[i];
    EXPECT_TRUE(t.tuned) << t.name;
    absl::StatusOr<MeasureRecord> best = BestRecord(contents->records, t.workload_key, cpu);
    ASSERT_TRUE(best.ok()) << best.status();
    EXPECT_EQ(t.trial, best->trial) << t.name;
    EXPECT_DOUBLE_EQ(t.logged_ms, best->median_ms()) << t.name;
  }
  const ir::BufferMap inputs = ir::MakeRandomGraphInputs(g, 21);
  absl::StatusOr<ir::BufferMap> out = (*exec)->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(out->at(g.node(g.outputs()[0]).name).data, TwoDenseNaive(inputs));
  absl::StatusOr<GraphCheck> check = (*exec)->Check();
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->passed) << check->report.first_mismatch;
}

TEST(GraphExecutorTest, TunedSingleOperatorKernelsFromTheSchedulersLogComputeTheGraph) {
  const ir::Graph g = TwoDenseGraph();
  const GraphPartition p = Partition(g, /*fuse=*/false);
  const std::string log = tilesearch::testing::ScratchPath("tuned.jsonl");
  const absl::Status tuned = TuneAllTasks(g, p, log);
  ASSERT_TRUE(tuned.ok()) << tuned;
  ExpectTunedGraphComputes(g, p, log);
}

// Fused tasks (a dense with the adds and relu it takes) bind their kernels' arguments to the
// subgraph's inputs in Subgraph::inputs order.
TEST(GraphExecutorTest, TunedFusedKernelsFromTheSchedulersLogComputeTheGraph) {
  const ir::Graph g = TwoDenseGraph();
  const GraphPartition p = Partition(g, /*fuse=*/true);
  ASSERT_LT(p.tasks.size(), g.num_nodes() - g.leaves().size()) << "nothing fused";
  const std::string log = tilesearch::testing::ScratchPath("fused.jsonl");
  const absl::Status tuned = TuneAllTasks(g, p, log);
  ASSERT_TRUE(tuned.ok()) << tuned;
  ExpectTunedGraphComputes(g, p, log);
}

// What a cuda executor builds for tasks without records and for Check's unscheduled reference:
// every task of the three model layers, fused and unfused, at full size, lowered with the naive
// GPU schedule and compiled to PTX (loading needs a device).
TEST(GraphExecutorCudaTest, UnscheduledGpuKernelsOfTheModelLayersCompileToPtx) {
  const Target h200 = Target::H200();
  for (const std::string& model : models::ModelNames()) {
    absl::StatusOr<ir::Graph> g = models::BuildModel(model);
    ASSERT_TRUE(g.ok()) << g.status();
    for (bool fuse : {false, true}) {
      for (const GraphTask& task : Partition(*g, fuse).tasks) {
        SCOPED_TRACE(model + " " + task.name);
        absl::StatusOr<schedule::State> state = schedule::NaiveGpuSchedule(task.dag, h200);
        ASSERT_TRUE(state.ok()) << state.status();
        absl::StatusOr<schedule::LoweredKernel> lowered = schedule::Lower(task.dag, *state, h200);
        ASSERT_TRUE(lowered.ok()) << lowered.status();
        absl::StatusOr<codegen::GpuModule> module =
            codegen::CompileToPtx(lowered->nest, lowered->launches);
        ASSERT_TRUE(module.ok()) << module.status();
        EXPECT_GE(module->kernels.size(), 1u);
      }
    }
  }
}

TEST(GraphExecutorCudaTest, WithoutADriverCreationFailsBeforeCompiling) {
  if (runtime::CudaDriver::Load().ok()) GTEST_SKIP() << "a CUDA driver is present";
  const ir::Graph g = TwoDenseGraph();
  EXPECT_THAT(GraphExecutor::CreateUnscheduled(g, Partition(g, true), Target::H200()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no CUDA driver")));
}

TEST(GraphExecutorCudaTest, UnscheduledKernelsOnTheDeviceMatchTheLoops) {
  TS_SKIP_WITHOUT_DEVICE();
  measure::testing_util::RunForked([] {
    const ir::Graph g = TwoDenseGraph();
    const Target gpu = runtime::TargetFromDevice(*measure::testing_util::ProbedDevice());
    absl::StatusOr<std::unique_ptr<GraphExecutor>> exec =
        GraphExecutor::CreateUnscheduled(g, Partition(g, true), gpu);
    ASSERT_TRUE(exec.ok()) << exec.status();
    const ir::BufferMap inputs = ir::MakeRandomGraphInputs(g, 3);
    absl::StatusOr<ir::BufferMap> out = (*exec)->Run(inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(out->at(g.node(g.outputs()[0]).name).data, TwoDenseNaive(inputs));
    absl::StatusOr<GraphTiming> t = (*exec)->Time({.warmup_runs = 1, .min_runs = 3});
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->tasks.size(), (*exec)->tasks().size());
  });
}

}  // namespace
}  // namespace tilesearch::search
