// The public C++ API: tasks reject unbuildable workloads; targets parse, and the default target is
// the cpu when no CUDA driver answers; ApplyHistoryBest picks the faster of two hand-made records
// and the loaded Kernel computes the matmul of a float64 triple loop on host data; Run rejects
// wrong buffers; a cuda kernel without a driver fails to load with the driver's reason; Tune
// through the API fills the log to the budget.
#include "search/api.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "search/log_io.h"
#include "tests/search/record_test_util.h"
#include "tests/search/scratch_dir.h"

namespace tilesearch {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

std::string TempPath(const std::string& name) { return ::tilesearch::testing::ScratchPath(name); }

// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? ::setenv(name_, old_.c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// CPU tiled matmul (examples/schedules/matmul_cpu_tiled.json): 32×32 tiles on parallel threads,
// a local accumulator with 4×8 register tiles, vectorized stores.
constexpr char kCpuTiled[] = R"({
  "version": 1,
  "workload": {"op": "matmul", "shapes": [[128, 128], [128, 128]]},
  "target": "cpu",
  "steps": [
    ["CHW", 2, "local"], ["SP", 3, 0, 128, [32], 1], ["SP", 3, 2, 128, [32], 1],
    ["RE", 3, [0, 2, 1, 3]], ["FU", 3, [0, 1]], ["AN", 3, 0, 3], ["CA", 2, 3, 0],
    ["SP", 2, 0, 32, [4], 1], ["SP", 2, 2, 32, [8], 1], ["SP", 2, 4, 128, [4], 1],
    ["RE", 2, [0, 2, 4, 1, 5, 3]], ["AN", 2, 3, 1], ["AN", 2, 4, 1], ["AN", 2, 5, 2],
    ["SP", 3, 2, 32, [8], 1], ["AN", 3, 3, 2]
  ]
})";

constexpr char kCudaSimple[] = R"({
  "version": 1,
  "workload": {"op": "matmul", "shapes": [[64, 64], [64, 64]]},
  "target": "cuda -arch=sm_90",
  "steps": [
    ["SP", 2, 0, 64, [16], 1], ["SP", 2, 2, 64, [16], 1], ["RE", 2, [0, 2, 1, 3, 4]],
    ["FU", 2, [0, 1]], ["AN", 2, 0, 5], ["FU", 2, [1, 2]], ["AN", 2, 1, 6]
  ]
})";

MeasureRecord RecordOf(const char* schedule_text, int64_t trial, double median_ms,
                       bool use_steps = true) {
  absl::StatusOr<schedule::ScheduleFile> file = schedule::ScheduleFile::Parse(schedule_text);
  CHECK(file.ok()) << file.status();
  absl::StatusOr<ir::ComputeDAG> dag = file->workload.Build();
  CHECK(dag.ok()) << dag.status();
  MeasureRecord r = search::testing::TimedRecord(file->workload, dag->WorkloadKey(), file->target,
                                                 trial, median_ms);
  if (use_steps) r.steps = file->steps;
  return r;
}

std::string WriteLog(const std::string& name, const std::vector<MeasureRecord>& records) {
  const std::string path = TempPath(name);
  absl::StatusOr<search::LogWriter> writer = search::LogWriter::Open(path);
  CHECK(writer.ok()) << writer.status();
  CHECK(writer->Append(records).ok());
  return path;
}

TEST(ApiTest, TaskRejectsAnUnbuildableWorkload) {
  EXPECT_THAT(Task::Create("matmul", {{4, 3}, {5, 2}}, Target::HostCpu()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("matmul 4x3 5x2")));
  EXPECT_THAT(Task::Create("no_such_op", {{4}}, Target::HostCpu()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no_such_op")));
  absl::StatusOr<Task> ok = Task::Create("matmul", {{4, 3}, {3, 2}}, Target::HostCpu());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->ToString(), "matmul 4x3 3x2 float32 on cpu");
}

TEST(ApiTest, TargetsParseAndDefaultToTheCpuWithoutADriver) {
  absl::StatusOr<Target> sm80 = TargetFromString("cuda -arch=sm_80");
  ASSERT_TRUE(sm80.ok()) << sm80.status();
  EXPECT_TRUE(sm80->is_gpu());
  EXPECT_EQ(sm80->arch, "sm_80");
  EXPECT_THAT(TargetFromString("tpu"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown target 'tpu'")));
  ScopedEnv no_driver("TILESEARCH_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
  EXPECT_FALSE(DefaultTarget().is_gpu());
  absl::StatusOr<Target> automatic = TargetFromString("auto");
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->ToString(), "cpu");
}

TEST(ApiTest, BestRecordRunsOnHostDataAndComputesTheMatmul) {
  constexpr int64_t kN = 128;
  // The naive schedule measured slower (3 ms) than the tiled one (1 ms).
  const std::string log = WriteLog(
      "two.jsonl", {RecordOf(kCpuTiled, 0, 3.0, /*use_steps=*/false), RecordOf(kCpuTiled, 1, 1.0)});
  absl::StatusOr<Task> task = Task::Create("matmul", {{kN, kN}, {kN, kN}}, Target::HostCpu());
  ASSERT_TRUE(task.ok()) << task.status();
  absl::StatusOr<HistoryBest> best = ApplyHistoryBest(log, *task);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->record.trial, 1);
  EXPECT_EQ(best->record.steps.size(), 16u);
  absl::StatusOr<KernelArtifact> artifact = BuildKernel(*best);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  absl::StatusOr<Kernel> kernel = Kernel::Load(*artifact);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_EQ(kernel->params().size(), 3u);
  EXPECT_EQ(kernel->params()[0].buffer.name, "A");

  std::vector<ir::HostBuffer> buffers = kernel->MakeBuffers();
  ir::FillRandom(buffers[0], 5);
  ir::FillRandom(buffers[1], 6);
  for (double& x : buffers[2].data) x = std::nan("");
  ASSERT_TRUE(kernel->Run({&buffers[0], &buffers[1], &buffers[2]}).ok());
  const std::vector<double>& a = buffers[0].data;
  const std::vector<double>& b = buffers[1].data;
  for (int64_t i = 0; i < kN; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < kN; ++k) sum += a[i * kN + k] * b[k * kN + j];
      ASSERT_NEAR(buffers[2].data[i * kN + j], sum, 1e-4) << "C[" << i << ", " << j << "]";
    }
  }
  EXPECT_GT(kernel->last_run_ms(), 0);
}

TEST(ApiTest, ApplyHistoryBestOrPredictTransfersToAnUntunedShape) {
  const std::string log =
      WriteLog("tuned128.jsonl",
               {RecordOf(kCpuTiled, 0, 3.0, /*use_steps=*/false), RecordOf(kCpuTiled, 1, 1.0)});
  // The tuned shape itself: the record, not a prediction.
  absl::StatusOr<Task> tuned = Task::Create("matmul", {{128, 128}, {128, 128}}, Target::HostCpu());
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  absl::StatusOr<HistoryBest> same = ApplyHistoryBestOrPredict(log, *tuned);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_FALSE(same->predicted);
  EXPECT_EQ(same->record.trial, 1);

  // Another shape: ApplyHistoryBest has nothing, the fallback transfers the faster record.
  constexpr int64_t kM = 96, kK = 128, kN = 160;
  absl::StatusOr<Task> task = Task::Create("matmul", {{kM, kK}, {kK, kN}}, Target::HostCpu());
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_THAT(ApplyHistoryBest(log, *task),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no record")));
  absl::StatusOr<HistoryBest> best = ApplyHistoryBestOrPredict(log, *task);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_TRUE(best->predicted);
  EXPECT_THAT(best->prediction, HasSubstr("trial 1 of matmul 128x128 128x128"));
  absl::StatusOr<KernelArtifact> artifact = BuildKernel(*best);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  absl::StatusOr<Kernel> kernel = Kernel::Load(*artifact);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<ir::HostBuffer> buffers = kernel->MakeBuffers();
  ir::FillRandom(buffers[0], 8);
  ir::FillRandom(buffers[1], 9);
  for (double& x : buffers[2].data) x = std::nan("");
  ASSERT_TRUE(kernel->Run({&buffers[0], &buffers[1], &buffers[2]}).ok());
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < kK; ++k) {
        sum += buffers[0].data[i * kK + k] * buffers[1].data[k * kN + j];
      }
      ASSERT_NEAR(buffers[2].data[i * kN + j], sum, 1e-4) << "C[" << i << ", " << j << "]";
    }
  }

  // Another operator: nothing to transfer, no model: the prediction's error with the lookup's.
  absl::StatusOr<Task> relu = Task::Create("relu", {{64}}, Target::HostCpu());
  ASSERT_TRUE(relu.ok()) << relu.status();
  EXPECT_THAT(ApplyHistoryBestOrPredict(log, *relu),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("no tuned workload of relu"), HasSubstr("no record"))));
}

TEST(ApiTest, RunRejectsWrongBuffers) {
  absl::StatusOr<KernelArtifact> artifact = BuildKernel(RecordOf(kCpuTiled, 0, 1.0, false));
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  absl::StatusOr<Kernel> kernel = Kernel::Load(*artifact);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<ir::HostBuffer> buffers = kernel->MakeBuffers();
  EXPECT_THAT(kernel->Run({&buffers[0], &buffers[1]}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes 3 buffers, got 2")));
  ir::HostBuffer wrong = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {128, 64});
  EXPECT_THAT(kernel->Run({&buffers[0], &wrong, &buffers[2]}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("buffer 1 ('B') is float32 [128, 64] with 8192 values, the "
                                 "kernel expects float32 [128, 128]")));
  EXPECT_THAT(kernel->Run({&buffers[0], nullptr, &buffers[2]}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is null")));
}

TEST(ApiTest, CudaKernelWithoutADriverFailsToLoadWithTheReason) {
  absl::StatusOr<KernelArtifact> artifact = BuildKernel(RecordOf(kCudaSimple, 0, 1.0));
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  ScopedEnv no_driver("TILESEARCH_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
  EXPECT_THAT(Kernel::Load(*artifact),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no CUDA driver found")));
}

TEST(ApiTest, TuneFillsTheLogToTheBudget) {
  absl::StatusOr<Task> task = Task::Create("matmul", {{16, 16}, {16, 16}}, Target::HostCpu());
  ASSERT_TRUE(task.ok()) << task.status();
  TuneOptions options;
  options.trials = 3;
  options.per_round = 3;
  options.log_path = TempPath("tune.jsonl");
  options.use_xgboost = false;
  options.search.population = 16;
  options.search.generations = 1;
  options.search.init_min_population = 4;
  options.measure.timing.min_runs = 1;
  options.measure.timing.min_total_ms = 0;
  options.measure.timing.warmup_runs = 0;
  options.quiet = true;
  absl::StatusOr<TuneResult> result = Tune(*task, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->trials, 3);
  // One line per trial (plus the round's metadata lines, which have no "result").
  std::ifstream in(options.log_path);
  int records = 0;
  for (std::string line; std::getline(in, line);) {
    records += nlohmann::json::parse(line).contains("result") ? 1 : 0;
  }
  EXPECT_EQ(records, 3);
}

}  // namespace
}  // namespace tilesearch
