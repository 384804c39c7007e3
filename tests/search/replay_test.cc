// Replay of tuning logs into kernel artifacts: a log written by search::Tune on the cpu target
// gives back its fastest valid record (found independently by scanning the log's JSON), whose
// object file, linked by the C compiler and called through its C entry, computes the matmul of a
// float64 triple loop, and whose re-check passes; broken logs give the reasons (failure counts,
// records whose steps no longer replay: skipped for the next best, other targets, a missing
// file). A GPU record rebuilds into PTX that ptxas -arch=sm_90 accepts, with the launches
// schedule::Lower derives, a C header that compiles against cuda.h, and a re-check that says
// "not re-checked" without a driver.
#include "search/replay.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/log_io.h"
#include "search/tuner.h"
#include "tests/search/record_test_util.h"
#include "tests/search/scratch_dir.h"

namespace tilesearch::search {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::KeyOf;
using testing::Matmul;
using testing::ReadText;
using testing::TimedRecord;
using ::tilesearch::testing::StatusIs;

// ---------------------------------------------------------------------------------------------
// Scratch files.

std::string TempPath(const std::string& name) { return ::tilesearch::testing::ScratchPath(name); }

bool HaveProgram(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// ---------------------------------------------------------------------------------------------
// Records.

// A trial of `w` on `target` with `steps`: median `median_ms` when `error` is kNone.
MeasureRecord Record(const schedule::Workload& w, const Target& target,
                     std::vector<schedule::Step> steps, int64_t trial, double median_ms,
                     measure::MeasureError error = measure::MeasureError::kNone) {
  MeasureRecord r = TimedRecord(w, KeyOf(w), target, trial, median_ms);
  r.steps = std::move(steps);
  if (error != measure::MeasureError::kNone) {
    r.result = measure::MeasureResult();
    r.result.error = error;
    r.result.message = "failed";
  }
  return r;
}

// A split of the matmul's output stage by `factor`: distinct steps for records that must not count
// as one schedule measured twice.
std::vector<schedule::Step> Split(int64_t factor) {
  return {schedule::SplitStep{2, 0, 16, {factor}, true}};
}

std::string WriteLog(const std::string& name, const std::vector<MeasureRecord>& records) {
  const std::string path = TempPath(name);
  absl::StatusOr<LogWriter> writer = LogWriter::Open(path);
  CHECK(writer.ok()) << writer.status();
  CHECK(writer->Append(records).ok());
  return path;
}

// The Ansor-style GPU matmul of examples/schedules/matmul_cuda_sssrrsrs.json (128³: 64×64 tiles
// per block, 128 threads, A and B cached in shared memory).
constexpr char kCudaMatmul[] = R"({
  "version": 1,
  "workload": {"op": "matmul", "shapes": [[128, 128], [128, 128]], "dtype": "float32"},
  "target": "cuda -arch=sm_90",
  "steps": [
    ["CHW", 2, "local"], ["SP", 3, 0, 128, [2, 8, 4], 1], ["SP", 3, 4, 128, [2, 16, 2], 1],
    ["RE", 3, [0, 4, 1, 5, 2, 6, 3, 7]], ["FU", 3, [0, 1]], ["FU", 3, [1, 2]], ["FU", 3, [2, 3]],
    ["AN", 3, 0, 5], ["AN", 3, 1, 4], ["AN", 3, 2, 6], ["CA", 2, 3, 2],
    ["SP", 2, 2, 128, [8], 1], ["RE", 2, [2, 3, 0, 1]], ["CHR", 0, "shared", [2]],
    ["CA", 1, 3, 0], ["CHR", 2, "shared", [3]], ["CA", 3, 4, 0], ["FU", 1, [0, 1]],
    ["SP", 1, 0, 512, [128], 1], ["AN", 1, 1, 6], ["FU", 3, [0, 1]], ["SP", 3, 0, 512, [128], 1],
    ["AN", 3, 1, 6], ["PR", 5, 0, "auto_unroll_max_step$16"]
  ]
})";

schedule::ScheduleFile CudaMatmulSchedule() {
  absl::StatusOr<schedule::ScheduleFile> file = schedule::ScheduleFile::Parse(kCudaMatmul);
  CHECK(file.ok()) << file.status();
  return *file;
}

// A log with one valid GPU record (trial 3) of the schedule above and a slower naive one.
std::string CudaLog(const std::string& name) {
  const schedule::ScheduleFile s = CudaMatmulSchedule();
  return WriteLog(name, {Record(s.workload, s.target, {}, 0, 5.0),
                         Record(s.workload, s.target, s.steps, 3, 0.02)});
}

// Loads the shared library `so`, calls `int entry(const float* A, const float* B, float* C)` on
// random n×n inputs and compares C with a float64 triple loop. Returns the library's `calls`
// counter (-1 when it has none).
int ExpectLibraryComputesMatmul(const std::string& so, const std::string& entry_name, int64_t n) {
  void* lib = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr) << ::dlerror();
  if (lib == nullptr) return -1;
  using Entry = int (*)(const float*, const float*, float*);
  auto entry = reinterpret_cast<Entry>(::dlsym(lib, entry_name.c_str()));
  EXPECT_NE(entry, nullptr) << "no symbol " << entry_name;
  int calls = -1;
  if (entry != nullptr) {
    std::mt19937 gen(11);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> a(n * n), b(n * n), c(n * n, std::nanf(""));
    for (float& x : a) x = dist(gen);
    for (float& x : b) x = dist(gen);
    EXPECT_EQ(entry(a.data(), b.data(), c.data()), 0);
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += double{a[i * n + k]} * b[k * n + j];
        if (!(std::abs(c[i * n + j] - sum) <= 1e-5 * n) && mismatches++ < 3) {
          ADD_FAILURE() << "C[" << i << ", " << j << "] = " << c[i * n + j] << ", expected " << sum;
        }
      }
    }
    if (auto* counter = static_cast<int*>(::dlsym(lib, "calls"))) calls = *counter;
  }
  ::dlclose(lib);
  return calls;
}

// ---------------------------------------------------------------------------------------------
// cpu: tuned log → object file.

TEST(ReplayTest, TunedCpuLogReplaysToACheckedObjectComputingTheMatmul) {
  constexpr int64_t kN = 24;
  const std::string log = TempPath("tuned.jsonl");
  TuneOptions tune;
  tune.trials = 6;
  tune.per_round = 6;
  tune.log_path = log;
  tune.seed = 3;
  tune.search.population = 32;
  tune.search.generations = 1;
  tune.search.init_min_population = 8;
  tune.measure.timing.min_runs = 2;
  tune.measure.timing.min_total_ms = 0;
  tune.measure.timing.warmup_runs = 0;
  tune.measure.host_threads = 1;
  tune.quiet = true;
  ASSERT_TRUE(Tune(Matmul(kN), Target::HostCpu(), tune).ok());

  // The fastest valid record, found from the log's JSON alone.
  int64_t best_trial = -1;
  double best_ms = std::numeric_limits<double>::infinity();
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const json r = json::parse(line);
    if (!r.contains("result")) continue;  // a round's metadata line
    if (r["result"]["error"] != "none") continue;
    const double ms = r["result"]["timing"]["median_ms"].get<double>();
    if (ms < best_ms) best_ms = ms, best_trial = r["trial"].get<int64_t>();
  }
  ASSERT_GE(best_trial, 0) << "no valid record in the tuned log";

  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(log, Matmul(kN), Target::HostCpu());
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->record.trial, best_trial);
  EXPECT_DOUBLE_EQ(best->record.median_ms(), best_ms);

  absl::StatusOr<KernelArtifact> artifact = BuildKernel(*best);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  ASSERT_TRUE(artifact->host.has_value());
  EXPECT_EQ(artifact->host->bytes.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(artifact->num_params, 3);

  absl::StatusOr<CheckOutcome> check = CheckKernel(*artifact);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->checked);
  EXPECT_TRUE(check->passed) << check->note;
  EXPECT_GT(check->result.check.checked_elements, 0);

  // The re-check judges by the record's precision: the same kernel on the same inputs, read as a
  // tf32 record, has its error measured against TF32's far larger allowance (16 · 2^-11 · M).
  KernelArtifact as_tf32 = *artifact;
  as_tf32.record.precision = measure::Fp32Precision::kTf32;
  absl::StatusOr<CheckOutcome> tf32_check = CheckKernel(as_tf32);
  ASSERT_TRUE(tf32_check.ok()) << tf32_check.status();
  EXPECT_TRUE(tf32_check->passed) << tf32_check->note;
  EXPECT_GT(check->result.check.f64_max_ratio, 0);
  EXPECT_LT(tf32_check->result.check.f64_max_ratio, check->result.check.f64_max_ratio / 10);

  const std::string out = TempPath("cpu_out");
  absl::StatusOr<std::vector<std::string>> written = WriteArtifacts(*artifact, out, &*check);
  ASSERT_TRUE(written.ok()) << written.status();
  const std::string base = out + "/" + artifact->name;
  EXPECT_EQ(*written, (std::vector<std::string>{base + ".o", base + ".h", base + ".json"}));
  const json j = json::parse(ReadText(base + ".json"));
  EXPECT_EQ(j["trial"], best_trial);
  EXPECT_DOUBLE_EQ(j["median_ms"].get<double>(), best_ms);
  EXPECT_EQ(j["workload_key"], KeyOf(Matmul(kN)));
  EXPECT_EQ(j["target"], "cpu");
  EXPECT_EQ(j["entries"], json::array({artifact->name}));
  ASSERT_EQ(j["arguments"].size(), 3u);
  EXPECT_EQ(j["arguments"][0]["kind"], "input");
  EXPECT_EQ(j["arguments"][2]["kind"], "output");
  EXPECT_EQ(j["arguments"][2]["shape"], json::array({kN, kN}));
  EXPECT_DOUBLE_EQ(j["gflops"].get<double>(), 2.0 * kN * kN * kN / (best_ms * 1e-3) * 1e-9);
  EXPECT_EQ(j["check"]["passed"], true);

  // The object, linked into a shared library by the C compiler and called through its C entry,
  // computes A · B.
  if (!HaveProgram("cc")) GTEST_SKIP() << "no C compiler: the object was not linked";
  const std::string so = out + "/libkernel.so";
  ASSERT_EQ(std::system(("cc -shared -o " + so + " " + base + ".o").c_str()), 0);
  ExpectLibraryComputesMatmul(so, artifact->name, kN);
}

TEST(ReplayTest, ObjectParallelLoopsGoThroughAParallelForTheProgramCanReplace) {
  // The tiled CPU schedule of examples/schedules/matmul_cpu_tiled.json: a parallel outer loop.
  constexpr int64_t kN = 128;
  absl::StatusOr<schedule::ScheduleFile> file = schedule::ScheduleFile::Parse(R"({
    "version": 1, "workload": {"op": "matmul", "shapes": [[128, 128], [128, 128]]},
    "target": "cpu",
    "steps": [
      ["CHW", 2, "local"], ["SP", 3, 0, 128, [32], 1], ["SP", 3, 2, 128, [32], 1],
      ["RE", 3, [0, 2, 1, 3]], ["FU", 3, [0, 1]], ["AN", 3, 0, 3], ["CA", 2, 3, 0],
      ["SP", 2, 0, 32, [4], 1], ["SP", 2, 2, 32, [8], 1], ["SP", 2, 4, 128, [4], 1],
      ["RE", 2, [0, 2, 4, 1, 5, 3]], ["AN", 2, 3, 1], ["AN", 2, 4, 1], ["AN", 2, 5, 2],
      ["SP", 3, 2, 32, [8], 1], ["AN", 3, 3, 2]]})");
  ASSERT_TRUE(file.ok()) << file.status();
  BuildOptions options;
  options.name = "tiled";
  absl::StatusOr<KernelArtifact> artifact =
      BuildKernel(Record(file->workload, file->target, file->steps, 0, 1.0), options);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  const std::string out = TempPath("tiled_out");
  ASSERT_TRUE(WriteArtifacts(*artifact, out).ok());
  EXPECT_THAT(ReadText(out + "/tiled.h"), HasSubstr("int tiled(const float* A, const float* B, "
                                                    "float* C);"));
  if (!HaveProgram("cc")) GTEST_SKIP() << "no C compiler: the object was not linked";
  // One chunk per iteration, last first, counted: the schedule's parallel loop must call it.
  std::ofstream(out + "/pfor.c")
      << "#include <stdint.h>\n"
         "int calls = 0;\n"
         "void tilesearch_parallel_for(void* reserved, void (*body)(void*, int64_t, int64_t),\n"
         "                             void* captures, int64_t min, int64_t extent) {\n"
         "  ++calls;\n"
         "  for (int64_t i = min + extent - 1; i >= min; --i) body(captures, i, i + 1);\n"
         "}\n";
  const std::string so = out + "/libtiled.so";
  const std::string cmd = "cc -shared -fPIC -o " + so + " " + out + "/pfor.c " + out + "/tiled.o";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_GT(ExpectLibraryComputesMatmul(so, "tiled", kN), 0);
}

// ---------------------------------------------------------------------------------------------
// Logs without a usable record.

TEST(ReplayTest, AllFailedLogGivesTheFailureCounts) {
  using E = measure::MeasureError;
  const Target cpu = Target::HostCpu();
  const std::string log =
      WriteLog("failed.jsonl", {Record(Matmul(16), cpu, Split(1), 0, 0, E::kCompileError),
                                Record(Matmul(16), cpu, Split(2), 1, 0, E::kWrongAnswer),
                                Record(Matmul(16), cpu, Split(4), 2, 0, E::kCompileError),
                                Record(Matmul(16), cpu, Split(8), 3, 0, E::kCompileError)});
  EXPECT_THAT(ApplyHistoryBest(log, Matmul(16), cpu),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("all 4 trials failed: 3 compile_error, 1 wrong_answer")));
}

TEST(ReplayTest, RecordWhoseStepsNoLongerReplayIsSkippedForTheNextBest) {
  const Target cpu = Target::HostCpu();
  // Stage 9 does not exist in a matmul DAG (A, B, C).
  const std::vector<schedule::Step> broken = {schedule::SplitStep{9, 0, 16, {4}, true}};
  const std::vector<schedule::Step> broken2 = {schedule::SplitStep{9, 0, 16, {2}, true}};
  const std::string log = WriteLog(
      "broken.jsonl", {Record(Matmul(16), cpu, {}, 0, 2.0), Record(Matmul(16), cpu, broken, 5, 1.0),
                       Record(Matmul(16), cpu, broken2, 6, 1.5)});
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(log, Matmul(16), cpu);
  ASSERT_THAT(best.status(), tilesearch::testing::IsOk());
  EXPECT_EQ(best->record.trial, 0);
  // Both faster records were tried, best first, and named.
  ASSERT_EQ(best->warnings.size(), 2u);
  EXPECT_THAT(best->warnings[0], HasSubstr("trial 5"));
  EXPECT_THAT(best->warnings[0], HasSubstr("step 0"));
  EXPECT_THAT(best->warnings[1], HasSubstr("trial 6"));
}

TEST(ReplayTest, WhenNoValidRecordReplaysTheBestOnesErrorNamesItsTrial) {
  const Target cpu = Target::HostCpu();
  const std::vector<schedule::Step> broken = {schedule::SplitStep{9, 0, 16, {4}, true}};
  const std::vector<schedule::Step> broken2 = {schedule::SplitStep{9, 0, 16, {2}, true}};
  const std::string log = WriteLog("all_broken.jsonl", {Record(Matmul(16), cpu, broken2, 3, 2.0),
                                                        Record(Matmul(16), cpu, broken, 5, 1.0)});
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(log, Matmul(16), cpu);
  EXPECT_THAT(best, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trial 5: step 0")));
  EXPECT_THAT(best, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(log)));
}

TEST(ReplayTest, RecordOfAnotherWorkloadVersionIsRefused) {
  MeasureRecord r = Record(Matmul(16), Target::HostCpu(), {}, 2, 1.0);
  r.workload_key = "0123456789abcdef";
  EXPECT_THAT(ReplayRecord(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("trial 2: workload key 0123456789abcdef")));
}

TEST(ReplayTest, MissingLogAndRecordsOnlyOnOtherTargetsAreNamed) {
  EXPECT_THAT(ApplyHistoryBest(TempPath("absent.jsonl"), Matmul(16), Target::HostCpu()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  const std::string log = CudaLog("gpu_only.jsonl");
  absl::StatusOr<ReplayedRecord> best =
      ApplyHistoryBest(log, CudaMatmulSchedule().workload, Target::HostCpu());
  EXPECT_THAT(best, StatusIs(absl::StatusCode::kNotFound, HasSubstr("no record for workload")));
  EXPECT_THAT(best, StatusIs(absl::StatusCode::kNotFound, HasSubstr("2 on cuda -arch=sm_90")));
}

TEST(ReplayTest, ArtifactNameMustBeACIdentifier) {
  const std::string log = CudaLog("name.jsonl");
  const schedule::ScheduleFile s = CudaMatmulSchedule();
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(log, s.workload, s.target);
  ASSERT_TRUE(best.ok()) << best.status();
  BuildOptions options;
  options.name = "my-kernel";
  EXPECT_THAT(BuildKernel(*best, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'my-kernel'")));
}

// ---------------------------------------------------------------------------------------------
// cuda: a GPU record → PTX, cubin, launches, header.

TEST(ReplayTest, GpuRecordRebuildsIntoPtxWithTheLaunchesOfLower) {
  const schedule::ScheduleFile s = CudaMatmulSchedule();
  const std::string log = CudaLog("gpu.jsonl");
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(log, s.workload, s.target);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->record.trial, 3);
  absl::StatusOr<KernelArtifact> artifact = BuildKernel(*best);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  ASSERT_NE(artifact->gpu, nullptr);

  // The launches lowering derives on its own from the schedule file.
  absl::StatusOr<schedule::ResolvedSchedule> resolved = s.Resolve();
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  absl::StatusOr<schedule::LoweredKernel> lowered =
      schedule::Lower(resolved->dag, resolved->state, s.target);
  ASSERT_TRUE(lowered.ok()) << lowered.status();

  const std::string out = TempPath("gpu_out");
  ASSERT_TRUE(WriteArtifacts(*artifact, out).ok());
  const std::string base = out + "/" + artifact->name;
  const json j = json::parse(ReadText(base + ".json"));
  ASSERT_EQ(j["launches"].size(), lowered->launches.size());
  for (size_t k = 0; k < lowered->launches.size(); ++k) {
    EXPECT_EQ(j["launches"][k]["grid"], json(lowered->launches[k].grid)) << "kernel " << k;
    EXPECT_EQ(j["launches"][k]["block"], json(lowered->launches[k].block)) << "kernel " << k;
    const std::string entry = j["launches"][k]["entry"];
    EXPECT_THAT(ReadText(base + ".ptx"), HasSubstr(".entry " + entry));
  }
  // 64×64 tiles of a 128×128 output: 4 blocks of 8·16 threads.
  EXPECT_EQ(j["launches"][0]["grid"], json::array({4, 1, 1}));
  EXPECT_EQ(j["launches"][0]["block"], json::array({128, 1, 1}));
  ASSERT_EQ(j["arguments"].size(), 3u);
  EXPECT_EQ(j["arguments"][0]["shape"], json::array({128, 128}));
  EXPECT_EQ(j["arguments"][0]["dtype"], "float32");
  EXPECT_EQ(j["target"], "cuda -arch=sm_90");

  // ptxas accepts the PTX (run here independently of the artifact's own cubin).
  const char* ptxas = "/usr/local/cuda/bin/ptxas";
  if (::access(ptxas, X_OK) != 0) GTEST_SKIP() << "no ptxas at " << ptxas;
  EXPECT_FALSE(artifact->cubin.empty());
  EXPECT_TRUE(std::filesystem::exists(base + ".cubin"));
  const std::string cmd =
      std::string(ptxas) + " -arch=sm_90 -o " + out + "/check.cubin " + base + ".ptx";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(ReplayTest, GpuHeaderLauncherCompilesAgainstCudaH) {
  const std::string log = CudaLog("header.jsonl");
  const schedule::ScheduleFile s = CudaMatmulSchedule();
  absl::StatusOr<ReplayedRecord> best = ApplyHistoryBest(log, s.workload, s.target);
  ASSERT_TRUE(best.ok()) << best.status();
  BuildOptions options;
  options.name = "mm";
  options.cubin = false;
  absl::StatusOr<KernelArtifact> artifact = BuildKernel(*best, options);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_TRUE(artifact->cubin.empty());
  const std::string header = ArtifactHeader(*artifact);
  EXPECT_THAT(header, HasSubstr("mm_launch(const CUfunction functions[1], CUdeviceptr d_A, "
                                "CUdeviceptr d_B, CUdeviceptr d_C, CUstream stream)"));
  EXPECT_THAT(header, HasSubstr("cuLaunchKernel(functions[0], 4, 1, 1, 128, 1, 1, 0, stream"));

  if (!HaveProgram("cc") || !std::filesystem::exists("/usr/local/cuda/include/cuda.h")) {
    GTEST_SKIP() << "no cc or no /usr/local/cuda/include/cuda.h: header not compiled";
  }
  const std::string out = TempPath("header_out");
  ASSERT_TRUE(WriteArtifacts(*artifact, out).ok());
  std::ofstream(out + "/driver.c") << "#include \"mm.h\"\n"
                                      "CUresult go(CUmodule m, CUdeviceptr a, CUdeviceptr b,\n"
                                      "            CUdeviceptr c) {\n"
                                      "  CUfunction f[MM_NUM_KERNELS];\n"
                                      "  CUresult r = mm_get_functions(m, f);\n"
                                      "  if (r != CUDA_SUCCESS) return r;\n"
                                      "  return mm_launch(f, a, b, c, 0);\n"
                                      "}\n";
  const std::string cmd = "cc -std=c99 -Wall -Werror -fsyntax-only -I/usr/local/cuda/include -I" +
                          out + " " + out + "/driver.c";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// A TMA-fed wgmma schedule of a bf16 matmul [256, 128] · [128, 192]: A and B reach shared memory
// through tensor maps (kernel arguments after the parameters).
constexpr char kTmaMatmul[] = R"({
  "version": 1,
  "workload": {"op": "matmul", "shapes": [[256, 128], [128, 192]], "dtype": "bfloat16"},
  "target": "cuda -arch=sm_90",
  "steps": [["TC", 2, "bf16", [128, 192, 64], [64, 192], 3, 0, 1, 0, 1, "wgmma", "tma"]]
})";

absl::StatusOr<KernelArtifact> TmaArtifact() {
  ASSIGN_OR_RETURN(schedule::ScheduleFile s, schedule::ScheduleFile::Parse(kTmaMatmul));
  ASSIGN_OR_RETURN(ReplayedRecord replayed,
                   ReplayRecord(Record(s.workload, s.target, s.steps, 1, 0.01)));
  BuildOptions options;
  options.name = "tma_mm";
  options.cubin = false;
  return BuildKernel(replayed, options);
}

TEST(ReplayTest, TensorMapArgumentsDescribeTheirSourceInTheJson) {
  absl::StatusOr<KernelArtifact> artifact = TmaArtifact();
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  // Through text and back, as a reader of the artifact sees it.
  const json j = json::parse(ArtifactToJson(*artifact).dump());
  std::map<std::string, json> by_name;
  for (const json& a : j["arguments"]) by_name[a["name"].get<std::string>()] = a;
  int maps = 0;
  for (const json& a : j["arguments"]) {
    if (a["kind"] != "tensor_map") {
      EXPECT_FALSE(a.contains("tensor_map")) << a.dump();
      continue;
    }
    ++maps;
    EXPECT_EQ(a["dtype"], "int64");
    EXPECT_EQ(a["shape"], json::array({16}));
    EXPECT_EQ(a["bytes"], 128);
    const json& m = a["tensor_map"];
    // The source is found by the "name" of its own argument entry, an input here.
    ASSERT_TRUE(by_name.count(m["source"].get<std::string>()) > 0) << m.dump();
    const json& source = by_name[m["source"].get<std::string>()];
    EXPECT_EQ(source["kind"], "input");
    // Whatever its boxes, a map covers its source's elements.
    int64_t dims = 1, elements = 1;
    for (const json& d : m["dims"]) dims *= d.get<int64_t>();
    for (const json& d : source["shape"]) elements *= d.get<int64_t>();
    EXPECT_EQ(dims, elements) << m.dump();
    EXPECT_EQ(m["swizzle"], 128);
    // The same spec as the kernel argument it was written from.
    const codegen::KernelArg& arg = artifact->args[a["index"].get<size_t>()];
    ASSERT_TRUE(arg.buffer.tensor_map.has_value());
    EXPECT_EQ(m["source"], arg.buffer.tensor_map->source);
    EXPECT_EQ(m["dims"].get<std::vector<int64_t>>(), arg.buffer.tensor_map->dims);
    EXPECT_EQ(m["box"].get<std::vector<int64_t>>(), arg.buffer.tensor_map->box);
  }
  EXPECT_EQ(maps, 2);  // A's and B's
  EXPECT_EQ(by_name.at(j["arguments"][2]["name"].get<std::string>())["kind"], "output");
}

TEST(ReplayTest, GpuHeaderLauncherEncodesTensorMaps) {
  absl::StatusOr<KernelArtifact> artifact = TmaArtifact();
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  const std::string header = ArtifactHeader(*artifact);
  // A [256, 128] bf16 in boxes of 128 rows × 64 columns: dims and box innermost first, rows of
  // 256 bytes.
  EXPECT_THAT(header, HasSubstr("static const cuuint64_t dims[2] = {128, 256};"));
  EXPECT_THAT(header, HasSubstr("static const cuuint64_t strides[1] = {256};"));
  EXPECT_THAT(header, HasSubstr("static const cuuint32_t box[2] = {64, 128};"));
  EXPECT_THAT(header, HasSubstr("cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, "
                                "(void*)(uintptr_t)d_A,"));
  EXPECT_THAT(header, HasSubstr("CU_TENSOR_MAP_SWIZZLE_128B"));
  EXPECT_THAT(header, HasSubstr("#if CUDA_VERSION < 12000"));
  // The maps are copied before the first launch.
  ASSERT_NE(header.find("cuMemcpyHtoDAsync("), std::string::npos);
  EXPECT_LT(header.find("cuMemcpyHtoDAsync("), header.find("cuLaunchKernel("));

  if (!HaveProgram("cc") || !std::filesystem::exists("/usr/local/cuda/include/cuda.h")) {
    GTEST_SKIP() << "no cc or no /usr/local/cuda/include/cuda.h: header not compiled";
  }
  const std::string out = TempPath("tma_header_out");
  ASSERT_TRUE(WriteArtifacts(*artifact, out).ok());
  std::ofstream(out + "/driver.c") << "#include \"tma_mm.h\"\n"
                                      "CUfunction f[TMA_MM_NUM_KERNELS];\n";
  const std::string cmd = "cc -std=c99 -Wall -Werror -fsyntax-only -I/usr/local/cuda/include -I" +
                          out + " " + out + "/driver.c";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(ReplayTest, GpuRecheckWithoutADriverIsReportedNotFailed) {
  ASSERT_EQ(::setenv("TILESEARCH_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1), 0);
  const std::string log = CudaLog("nodriver.jsonl");
  const schedule::ScheduleFile s = CudaMatmulSchedule();
  absl::StatusOr<KernelArtifact> artifact = [&]() -> absl::StatusOr<KernelArtifact> {
    ASSIGN_OR_RETURN(ReplayedRecord best, ApplyHistoryBest(log, s.workload, s.target));
    BuildOptions options;
    options.cubin = false;
    return BuildKernel(best, options);
  }();
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  absl::StatusOr<CheckOutcome> check = CheckKernel(*artifact);
  ::unsetenv("TILESEARCH_CUDA_DRIVER");
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_FALSE(check->checked);
  EXPECT_FALSE(check->passed);
  EXPECT_THAT(check->note, HasSubstr("not re-checked: no CUDA driver found"));
}

}  // namespace
}  // namespace tilesearch::search
