// Fused subgraph tasks as workloads, end to end on the cpu: TaskWorkload's workload rebuilds each
// partition task's DAG (equal keys) and computes, with kernel argument I bound to the subgraph's
// input I, what the graph's nodes compute one by one; fused DAGs (dense + add + relu, conv2d +
// bias + relu, layernorm + add) get sketches whose sampled programs lower and match the
// reference; a cpu Tune of dense + bias + relu writes a log whose best record replays into a
// kernel that matches the graph reference and naive loops; the task scheduler tunes a graph with
// a fused task into one log and resumes from it.
#include "schedule/fused_workload.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph.h"
#include "ir/reference.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/annotation.h"
#include "search/api.h"
#include "search/log_io.h"
#include "search/partition.h"
#include "search/replay.h"
#include "search/sketch.h"
#include "search/task_scheduler.h"
#include "search/task_scheduler_tuner.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/scratch_dir.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using ir::Graph;
using ir::Value;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using tilesearch::testing::IsOk;

/// relu(dense(x[m, k], w[n, k]) + b[n]).
Graph DenseBiasRelu(int64_t m, int64_t k, int64_t n) {
  Graph g;
  Value x = g.Input("x", {m, k});
  Value w = g.Param("w", {n, k});
  Value b = g.Param("b", {n});
  g.MarkOutput(g.Relu(g.Add(g.Dense(x, w), b)));
  return g;
}

/// relu(conv2d(x, w, padding 1) + b[8, 1, 1]), x [1, 4, 6, 6], w [8, 4, 3, 3].
Graph ConvBiasRelu() {
  Graph g;
  Value x = g.Input("x", {1, 4, 6, 6});
  Value w = g.Param("w", {8, 4, 3, 3});
  Value b = g.Param("b", {8, 1, 1});
  ir::Conv2dParams p;
  p.padding = {1, 1};
  g.MarkOutput(g.Relu(g.Add(g.Conv2d(x, w, p), b)));
  return g;
}

/// layernorm(x[4, 48]) + r[4, 48].
Graph LayerNormAdd() {
  Graph g;
  Value x = g.Input("x", {4, 48});
  Value r = g.Input("r", {4, 48});
  Value gamma = g.Param("gamma", {48});
  Value beta = g.Param("beta", {48});
  g.MarkOutput(g.Add(g.LayerNorm(x, gamma, beta), r));
  return g;
}

/// softmax(0.25 · q·kᵀ) on [2, 8, 16] heads, then a reshape: tasks batch_matmul + scale (fused),
/// softmax (a registry operator) and a lone reshape (not a registry operator: fused form).
Graph Attention() {
  Graph g;
  Value q = g.Input("q", {2, 8, 16});
  Value k = g.Input("k", {2, 8, 16});
  ir::MatmulOptions o;
  o.transpose_b = true;
  Value s = g.Softmax(g.Scale(g.BatchMatMul(q, k, o), 0.25));
  g.MarkOutput(g.Reshape(s, {16, 8}));
  return g;
}

/// Two dense + bias + relu layers of the same shape and a third one (a task of weight 2 and one of
/// weight 1), with a residual add between.
Graph Mlp() {
  Graph g;
  Value x = g.Input("x", {8, 16});
  Value h = x;
  for (int i = 0; i < 2; ++i) {
    Value w = g.Param("w" + std::to_string(i), {16, 16});
    Value b = g.Param("b" + std::to_string(i), {16});
    h = g.Relu(g.Add(g.Dense(h, w), b));
  }
  Value w = g.Param("w2", {8, 16});
  g.MarkOutput(g.Dense(g.Add(h, x), w));
  return g;
}

/// The node-by-node reference value of every node of `g` (leaves: `in`).
std::map<int, ir::HostBuffer> NodeValues(const Graph& g, const ir::BufferMap& in) {
  absl::StatusOr<ir::BufferMap> all = ir::RunGraphReference(g, in, /*all_nodes=*/true);
  EXPECT_THAT(all.status(), IsOk());
  std::map<int, ir::HostBuffer> values;
  for (const ir::GraphNode& node : g.nodes()) {
    values[node.id] = node.kind == ir::NodeKind::kOp ? all->at(node.name) : in.at(node.name);
  }
  return values;
}

double MaxAbsDiff(const ir::HostBuffer& a, const ir::HostBuffer& b) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.data.size() != b.data.size()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (size_t i = 0; i < a.data.size(); ++i) d = std::max(d, std::abs(a.data[i] - b.data[i]));
  return d;
}

TEST(TaskWorkload, RebuildsEveryTaskOfEveryGraphWithItsKeyAndArgumentOrder) {
  const std::vector<std::pair<std::string, Graph>> graphs = {
      {"dense_bias_relu", DenseBiasRelu(16, 32, 24)},
      {"conv_bias_relu", ConvBiasRelu()},
      {"layernorm_add", LayerNormAdd()},
      {"attention", Attention()},
      {"mlp", Mlp()}};
  int fused_tasks = 0;
  for (const auto& [name, g] : graphs) {
    SCOPED_TRACE(name);
    ASSERT_THAT(g.Validate(), IsOk());
    absl::StatusOr<GraphPartition> p = PartitionGraph(g);
    ASSERT_THAT(p.status(), IsOk());
    const std::map<int, ir::HostBuffer> values = NodeValues(g, ir::MakeRandomGraphInputs(g, 5));
    for (int t = 0; t < static_cast<int>(p->tasks.size()); ++t) {
      const GraphTask& task = p->tasks[t];
      SCOPED_TRACE(task.name);
      absl::StatusOr<schedule::Workload> w = TaskWorkload(g, *p, t);
      ASSERT_THAT(w.status(), IsOk());
      const Subgraph& first = p->subgraphs[task.subgraphs.front()];
      // One registry operator keeps the registry form; anything else is fused.
      const bool registry = first.nodes.size() == 1 && g.node(first.nodes[0]).op != "reshape";
      EXPECT_EQ(w->is_fused(), !registry) << w->ToString();
      if (w->is_fused()) {
        ++fused_tasks;
        EXPECT_EQ(w->nodes.size(), first.nodes.size());
        EXPECT_EQ(w->args.shapes.size(), first.inputs.size());
      }
      absl::StatusOr<ir::ComputeDAG> dag = w->Build();
      ASSERT_THAT(dag.status(), IsOk());
      EXPECT_EQ(dag->WorkloadKey(), task.workload_key);
      // The JSON form reads back equal and builds the same key.
      absl::StatusOr<schedule::Workload> back =
          schedule::WorkloadFromJson(schedule::WorkloadToJson(*w));
      ASSERT_THAT(back.status(), IsOk());
      EXPECT_EQ(*back, *w);
      // Every subgraph of the task: kernel argument I (the DAG's input I) bound to the
      // subgraph's input I gives the subgraph's output node's value.
      for (int s : task.subgraphs) {
        const Subgraph& sg = p->subgraphs[s];
        ASSERT_EQ(dag->input_ids().size(), sg.inputs.size());
        ir::BufferMap buffers;
        for (size_t i = 0; i < sg.inputs.size(); ++i) {
          buffers[dag->stage(dag->input_ids()[i]).name()] = values.at(sg.inputs[i]);
        }
        absl::StatusOr<ir::BufferMap> out = ir::RunReference(*dag, buffers);
        ASSERT_THAT(out.status(), IsOk());
        const std::string& out_name = dag->stage(dag->output_ids()[0]).name();
        EXPECT_LE(MaxAbsDiff(out->at(out_name), values.at(sg.output)), 1e-9) << "subgraph " << s;
      }
    }
  }
  // dense_add_relu, conv2d_add_relu, layernorm_add, batch_matmul_scale, reshape, and the MLP's
  // two dense_add_relu tasks and its add_dense... at least these six.
  EXPECT_GE(fused_tasks, 6);
}

/// The workload of the one task of `g` whose name is `name`.
schedule::Workload TaskWorkloadNamed(const Graph& g, const std::string& name) {
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  EXPECT_THAT(p.status(), IsOk());
  for (int t = 0; t < static_cast<int>(p->tasks.size()); ++t) {
    if (p->tasks[t].name != name) continue;
    absl::StatusOr<schedule::Workload> w = TaskWorkload(g, *p, t);
    EXPECT_THAT(w.status(), IsOk());
    return *w;
  }
  ADD_FAILURE() << "no task " << name << " in\n" << p->ToString();
  return {};
}

TEST(FusedSketches, FusedTasksGetSketchesWhoseProgramsLowerAndMatchTheReference) {
  const std::vector<std::pair<std::string, schedule::Workload>> workloads = {
      {"dense_add_relu", TaskWorkloadNamed(DenseBiasRelu(16, 32, 24), "dense_add_relu")},
      {"conv2d_nchw_add_relu", TaskWorkloadNamed(ConvBiasRelu(), "conv2d_nchw_add_relu")},
      {"layernorm_add", TaskWorkloadNamed(LayerNormAdd(), "layernorm_add")}};
  for (const auto& [name, w] : workloads) {
    ASSERT_TRUE(w.is_fused()) << name;
    absl::StatusOr<ir::ComputeDAG> dag = w.Build();
    ASSERT_THAT(dag.status(), IsOk());
    for (const Target& target : {Target::HostCpu(), Target::H200()}) {
      SCOPED_TRACE(name + " on " + target.ToString());
      absl::StatusOr<std::vector<schedule::State>> sketches =
          GenerateSketches(TuneContext(*dag, target));
      ASSERT_THAT(sketches.status(), IsOk());
      ASSERT_FALSE(sketches->empty());
      std::mt19937_64 rng(17);
      const std::vector<schedule::State> population =
          testing::SampleInContext(*sketches, *dag, target, 6, rng);
      ASSERT_EQ(population.size(), 6u);
      for (size_t i = 0; i < population.size(); ++i) {
        schedule::testing::ExpectMatchesReference(*dag, population[i], target, /*exact=*/false,
                                                  i + 1);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(FusedSketches, CudaRecordsOfFusedTasksCompileToPtx) {
  // The cuda path cannot run here; a sampled program of each fused DAG must still replay from a
  // record, lower and compile to PTX (and assemble with ptxas where it is installed).
  const std::vector<schedule::Workload> workloads = {
      TaskWorkloadNamed(DenseBiasRelu(64, 32, 48), "dense_add_relu"),
      TaskWorkloadNamed(LayerNormAdd(), "layernorm_add")};
  const Target h200 = Target::H200();
  for (const schedule::Workload& w : workloads) {
    SCOPED_TRACE(w.ToString());
    absl::StatusOr<ir::ComputeDAG> dag = w.Build();
    ASSERT_THAT(dag.status(), IsOk());
    absl::StatusOr<std::vector<schedule::State>> sketches =
        GenerateSketches(TuneContext(*dag, h200));
    ASSERT_THAT(sketches.status(), IsOk());
    std::mt19937_64 rng(3);
    const std::vector<schedule::State> states =
        testing::SampleInContext(*sketches, *dag, h200, 1, rng);
    ASSERT_EQ(states.size(), 1u);
    MeasureRecord record;
    record.workload = w;
    record.workload_key = dag->WorkloadKey();
    record.target = h200;
    record.steps = states[0].steps();
    record.result.timing.median_ms = 1.0;
    absl::StatusOr<KernelArtifact> artifact = BuildKernel(record);
    ASSERT_THAT(artifact.status(), IsOk());
    ASSERT_TRUE(artifact->gpu != nullptr);
    EXPECT_THAT(artifact->gpu->ptx, HasSubstr(".entry"));
    if (FindPtxas().has_value()) {
      EXPECT_FALSE(artifact->cubin.empty());
    }
    EXPECT_THAT(ArtifactHeader(*artifact), HasSubstr("d_p0"));
  }
}

TuneOptions SmallTune(const std::string& log, int trials, int per_round) {
  TuneOptions o;
  o.trials = trials;
  o.per_round = per_round;
  o.log_path = log;
  o.seed = 7;
  o.use_xgboost = false;  // random model: the fastest rounds
  o.search.population = 32;
  o.search.generations = 1;
  o.search.init_min_population = 8;
  o.measure.timing.min_runs = 2;
  o.measure.timing.min_total_ms = 0;
  o.measure.timing.warmup_runs = 0;
  if (o.measure.timing.max_runs < o.measure.timing.min_runs) {
    o.measure.timing.max_runs = o.measure.timing.min_runs;
  }
  o.measure.host_threads = 1;
  o.model_threads = 1;
  o.quiet = true;
  return o;
}

TEST(FusedTune, CpuTuneOfDenseBiasReluReplaysIntoAKernelMatchingTheGraph) {
  constexpr int64_t kM = 16, kK = 32, kN = 24;
  const Graph g = DenseBiasRelu(kM, kK, kN);
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->tasks.size(), 1u);
  absl::StatusOr<schedule::Workload> w = TaskWorkload(g, *p, 0);
  ASSERT_THAT(w.status(), IsOk());
  ASSERT_TRUE(w->is_fused());
  const Target cpu = Target::HostCpu();

  const std::string log = tilesearch::testing::ScratchPath("fused.jsonl");
  absl::StatusOr<TuneResult> tuned = Tune(*w, cpu, SmallTune(log, 16, 8));
  ASSERT_THAT(tuned.status(), IsOk());
  EXPECT_EQ(tuned->trials, 16);
  ASSERT_TRUE(tuned->best.has_value());

  // The log names the fused workload in every record; the reader's key check accepts them all.
  ReadOptions read;
  read.verify_workload_keys = true;
  absl::StatusOr<LogContents> contents = ReadLog(log, read);
  ASSERT_THAT(contents.status(), IsOk());
  EXPECT_EQ(contents->records.size(), 16u);
  EXPECT_EQ(contents->inconsistent_records, 0);
  for (const MeasureRecord& r : contents->records) {
    EXPECT_EQ(r.workload, *w);
    EXPECT_EQ(r.workload_key, p->tasks[0].workload_key);
  }
  const std::vector<WorkloadSummary> summaries = SummarizeLog(contents->records);
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0].workload, *w);
  EXPECT_DOUBLE_EQ(summaries[0].flops, 2.0 * kM * kN * kK + 2.0 * kM * kN);

  // Replay through the public API (a Task of the fused workload) and by key.
  absl::StatusOr<Task> task = Task::FromWorkload(*w, cpu);
  ASSERT_THAT(task.status(), IsOk());
  EXPECT_THAT(task->ToString(), StartsWith("fused[dense(p0,p1) add(n0,p2) relu(n1)] 16x32 24x32 "
                                           "24 float32 on cpu"));
  absl::StatusOr<HistoryBest> best = tilesearch::ApplyHistoryBest(log, *task);
  ASSERT_THAT(best.status(), IsOk());
  EXPECT_DOUBLE_EQ(best->record.median_ms(), tuned->best->median_ms());
  absl::StatusOr<ReplayedRecord> by_key = ApplyHistoryBestByKey(log, p->tasks[0].workload_key, cpu);
  ASSERT_THAT(by_key.status(), IsOk());
  EXPECT_EQ(by_key->record.trial, best->record.trial);
  absl::StatusOr<KernelArtifact> artifact = BuildKernel(*best);
  ASSERT_THAT(artifact.status(), IsOk());
  EXPECT_THAT(artifact->name, StartsWith("fused_"));
  absl::StatusOr<tilesearch::Kernel> kernel = tilesearch::Kernel::Load(*artifact);
  ASSERT_THAT(kernel.status(), IsOk());
  ASSERT_EQ(kernel->params().size(), 4u);  // p0 = x, p1 = w, p2 = b, then the output

  // Kernel argument I is the subgraph's input I (graph leaves x, w, b here).
  const ir::BufferMap in = ir::MakeRandomGraphInputs(g, 23);
  const Subgraph& sg = p->subgraphs[0];
  std::vector<ir::HostBuffer> buffers = kernel->MakeBuffers();
  for (size_t i = 0; i < sg.inputs.size(); ++i) buffers[i] = in.at(g.node(sg.inputs[i]).name);
  for (double& v : buffers[3].data) v = std::nan("");
  ASSERT_THAT(kernel->Run({&buffers[0], &buffers[1], &buffers[2], &buffers[3]}), IsOk());

  absl::StatusOr<ir::BufferMap> graph_out = ir::RunGraphReference(g, in);
  ASSERT_THAT(graph_out.status(), IsOk());
  absl::StatusOr<ir::BufferMap> partition_out = RunPartitionReference(g, *p, in);
  ASSERT_THAT(partition_out.status(), IsOk());
  const std::string out_name = g.node(g.outputs()[0]).name;
  EXPECT_LE(MaxAbsDiff(buffers[3], graph_out->at(out_name)), 1e-4);
  EXPECT_LE(MaxAbsDiff(buffers[3], partition_out->at(out_name)), 1e-4);
  // And naive loops in double.
  const std::vector<double>& x = in.at("x").data;
  const std::vector<double>& wt = in.at("w").data;
  const std::vector<double>& b = in.at("b").data;
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double acc = b[j];
      for (int64_t r = 0; r < kK; ++r) acc += x[i * kK + r] * wt[j * kK + r];
      ASSERT_NEAR(buffers[3].data[i * kN + j], std::max(0.0, acc), 1e-4) << i << ", " << j;
    }
  }
}

TEST(FusedArtifact, UnscheduledCpuRecordWithScratchBuffersRechecksAndWritesItsHeader) {
  // No steps: on the cpu every stage is computed at the root, so dense_0 and add_1 are scratch
  // buffers the entry allocates itself; the header documents the four parameters only.
  absl::StatusOr<schedule::Workload> w =
      TaskWorkload(DenseBiasRelu(16, 32, 24), *PartitionGraph(DenseBiasRelu(16, 32, 24)), 0);
  ASSERT_THAT(w.status(), IsOk());
  MeasureRecord record;
  record.workload = *w;
  record.workload_key = w->Build()->WorkloadKey();
  record.target = Target::HostCpu();
  record.result.timing.median_ms = 1.0;
  absl::StatusOr<KernelArtifact> artifact = BuildKernel(record);
  ASSERT_THAT(artifact.status(), IsOk());
  ASSERT_EQ(artifact->num_params, 4);
  ASSERT_EQ(artifact->args.size(), 6u);
  absl::StatusOr<CheckOutcome> check = CheckKernel(*artifact);
  ASSERT_THAT(check.status(), IsOk());
  EXPECT_TRUE(check->checked);
  EXPECT_TRUE(check->passed) << check->note;
  const std::string header = ArtifactHeader(*artifact);
  EXPECT_THAT(header, HasSubstr("(plus 2 scratch buffer(s) the function allocates itself)"));
  EXPECT_THAT(header, HasSubstr("(const float* p0, const float* p1, const float* p2, float* "
                                "relu_2);"));
  absl::StatusOr<std::vector<std::string>> written =
      WriteArtifacts(*artifact, tilesearch::testing::ScratchPath("artifact"), &*check);
  ASSERT_THAT(written.status(), IsOk());
  EXPECT_EQ(written->size(), 3u);  // .o, .h, .json
}

TEST(FusedTask, FromWorkloadRefusesAWorkloadThatDoesNotBuild) {
  schedule::Workload w;
  w.op = schedule::kFusedWorkloadOp;
  w.args.shapes = {{4, 8}, {6, 9}};
  w.nodes = {{"dense", {{false, 0}, {false, 1}}, {}}};
  EXPECT_THAT(Task::FromWorkload(w, Target::HostCpu()),
              tilesearch::testing::StatusIs(
                  absl::StatusCode::kInvalidArgument,
                  HasSubstr("workload fused[dense(p0,p1)] 4x8 6x9 float32: fused workload: "
                            "nodes[0] (dense): ")));
}

TEST(FusedTune, TaskSchedulerTunesAGraphWithAFusedTaskIntoOneLogAndResumes) {
  // x[8, 16] → dense + bias + relu (fused) → softmax (a registry operator).
  Graph g;
  Value x = g.Input("x", {8, 16});
  Value w = g.Param("w", {16, 16});
  Value b = g.Param("b", {16});
  g.MarkOutput(g.Softmax(g.Relu(g.Add(g.Dense(x, w), b))));
  absl::StatusOr<GraphPartition> p = PartitionGraph(g);
  ASSERT_THAT(p.status(), IsOk());
  ASSERT_EQ(p->tasks.size(), 2u) << p->ToString();
  std::vector<schedule::Workload> workloads;
  for (int t = 0; t < 2; ++t) {
    absl::StatusOr<schedule::Workload> tw = TaskWorkload(g, *p, t);
    ASSERT_THAT(tw.status(), IsOk());
    workloads.push_back(*tw);
  }
  EXPECT_TRUE(workloads[0].is_fused());
  EXPECT_EQ(workloads[1].op, "softmax");

  const std::string log = tilesearch::testing::ScratchPath("graph.jsonl");
  const Target cpu = Target::HostCpu();
  const std::vector<SchedulerTask> tasks = SchedulerTasksOf(*p);
  TaskSchedulerOptions options;
  options.trials = 6;
  options.per_round = 2;
  auto run = [&]() -> absl::StatusOr<TaskSchedulerResult> {
    absl::StatusOr<std::unique_ptr<TunerTaskRunner>> runner =
        TunerTaskRunner::Create(workloads, cpu, SmallTune(log, 1, 1));
    if (!runner.ok()) return runner.status();
    return RunTaskScheduler(tasks, **runner, options);
  };
  absl::StatusOr<TaskSchedulerResult> first = run();
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(first->trials, 6);
  EXPECT_TRUE(first->dead_tasks.empty());

  // Against the log: per task its records (the fused task's name the fused workload) and best.
  auto check_against_log = [&](const TaskSchedulerResult& r) {
    ReadOptions read;
    read.verify_workload_keys = true;
    absl::StatusOr<LogContents> contents = ReadLog(log, read);
    ASSERT_THAT(contents.status(), IsOk());
    EXPECT_EQ(contents->inconsistent_records, 0);
    for (int t = 0; t < 2; ++t) {
      int64_t count = 0;
      double best_ms = std::numeric_limits<double>::infinity();
      for (const MeasureRecord& rec : contents->records) {
        if (rec.workload_key != p->tasks[t].workload_key) continue;
        EXPECT_EQ(rec.workload, workloads[t]);
        ++count;
        if (rec.valid()) best_ms = std::min(best_ms, rec.median_ms());
      }
      EXPECT_EQ(count, r.tasks[t].restored_trials + r.tasks[t].trials) << "task " << t;
      ASSERT_TRUE(std::isfinite(best_ms)) << "task " << t << ": no valid record";
      EXPECT_DOUBLE_EQ(r.tasks[t].best_latency_s, best_ms * 1e-3) << "task " << t;
    }
  };
  check_against_log(*first);
  EXPECT_GE(first->tasks[0].trials, 2);  // the fused task was tuned, not only warmed up

  // A second run restores both tasks from the log and adds 2 trials.
  options.trials = 2;
  absl::StatusOr<TaskSchedulerResult> second = run();
  ASSERT_THAT(second.status(), IsOk());
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(second->tasks[t].restored_trials, first->tasks[t].trials) << "task " << t;
  }
  check_against_log(*second);

  // The fused task's best record replays from the shared log by its workload.
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(log, workloads[0], cpu);
  ASSERT_THAT(best.status(), IsOk());
  EXPECT_TRUE(best->record.workload.is_fused());
}

}  // namespace
}  // namespace tilesearch::search
