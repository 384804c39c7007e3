// The CUDA runner on a real GPU (skipped with "no CUDA driver: ..." where the probe finds
// none): a correct candidate is timed, a candidate that writes twice the value is a wrong answer,
// one that stores far out of bounds is a runtime error and the candidate after it still measures
// fine (the faulted worker is replaced); the naive GPU kernel serves as the reference for tasks
// above the interpreter limit; inputs generated on demand judge as held ones; a shared-memory
// tiled matmul measures fine; a one-pass TF32
// tensor-core matmul passes the check under the tf32 precision (the device compare's cancellation
// allowance, from the magnitude kernel) and fails it under ieee; a TMA-fed wgmma matmul passes
// with its tensor maps encoded over every set of inputs it runs on.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "ir/ops/registry.h"
#include "measure/builder.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "nlohmann/json.hpp"
#include "runtime/cuda_device.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/step_json.h"
#include "tests/codegen/nest_builders.h"
#include "tests/measure/cuda_device_test_util.h"
#include "tests/measure/cuda_test_util.h"

namespace tilesearch::measure {
using runtime::TargetFromDevice;
namespace {

using ::testing::HasSubstr;
using testing_util::ProbedDevice;

MeasureOptions QuickOptions() {
  MeasureOptions o;
  o.timing.warmup_runs = 1;
  o.timing.min_runs = 5;
  o.timing.min_total_ms = 1;
  o.timing.max_runs = 20;
  return o;
}

std::unique_ptr<Runner> MakeRunner(const MeasureOptions& options) {
  absl::StatusOr<std::unique_ptr<Runner>> m =
      CreateCudaRunner(TargetFromDevice(*ProbedDevice()), options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

// Checked runs of a candidate under the default options (MeasureOptions::check_trials).
const int kDefaultTrials = MeasureOptions().check_trials;

void ExpectMeasuredFine(const MeasureResult& r, int trials) {
  EXPECT_EQ(r.error, MeasureError::kNone) << r.message;
  EXPECT_EQ(r.check.trials, trials);
  EXPECT_EQ(r.check.mismatches, 0);
  EXPECT_GT(r.check.checked_elements, 0);
  EXPECT_GE(r.costs_s.size(), 5u);
  for (double c : r.costs_s) EXPECT_GT(c, 0);
  EXPECT_GT(r.timing.median_ms, 0);
  EXPECT_GT(r.load_ms, 0);
  EXPECT_EQ(r.kernels.size(), 1u);
}

// C = A · B, 128 × 64 × 96, and its shared-memory tiled GPU kernel.
constexpr int64_t kTiledM = 128, kTiledN = 64, kTiledK = 96;
absl::StatusOr<ir::ComputeDAG> TiledMatmulDag() {
  ASSIGN_OR_RETURN(ir::Tensor a, ir::Placeholder("A", {kTiledM, kTiledK}));
  ASSIGN_OR_RETURN(ir::Tensor b, ir::Placeholder("B", {kTiledK, kTiledN}));
  ASSIGN_OR_RETURN(ir::Tensor c, ir::Matmul(a, b, {}, "C"));
  return ir::ComputeDAG::Create({c});
}
absl::StatusOr<BuildResult> TiledMatmulCandidate() {
  return testing_util::CandidateFromNest(
      codegen::testing::GpuTiledMatmul(kTiledM, kTiledN, kTiledK));
}

TEST(CudaRunnerGpuTest, CorrectWrongFaultingThenCorrectAgain) {
  TS_SKIP_WITHOUT_DEVICE();
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(64, 96);
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<BuildResult> good = testing_util::AddCandidate(*dag, 1.0);
  absl::StatusOr<BuildResult> doubled = testing_util::AddCandidate(*dag, 2.0);
  // Row 2^32 of a 96-column float matrix: 1.5 TiB past the buffer.
  absl::StatusOr<BuildResult> faulting = testing_util::AddCandidate(*dag, 1.0, int64_t{1} << 32);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  ASSERT_TRUE(faulting.ok()) << faulting.status();
  BuildResult failed_build;
  failed_build.build_status = absl::InternalError("ptxas: error");
  std::unique_ptr<Runner> m = MakeRunner(QuickOptions());
  ASSERT_NE(m, nullptr);
  std::vector<MeasureResult> r = m->Run(*dag, {*good, *doubled, *faulting, *good, failed_build});
  ASSERT_EQ(r.size(), 5u);
  ExpectMeasuredFine(r[0], kDefaultTrials);
  EXPECT_EQ(r[1].error, MeasureError::kWrongAnswer) << r[1].message;
  EXPECT_THAT(r[1].check.first_mismatch, HasSubstr("C["));
  // Every element but those where A + B is within the tolerance of 0.
  EXPECT_GT(r[1].check.mismatches, 64 * 96 * 9 / 10);
  EXPECT_EQ(r[2].error, MeasureError::kRuntimeError) << r[2].message;
  EXPECT_THAT(r[2].message, HasSubstr("CUDA_ERROR"));
  ExpectMeasuredFine(r[3], kDefaultTrials);
  EXPECT_EQ(r[4].error, MeasureError::kCompileError);
}

TEST(CudaRunnerGpuTest, NaiveKernelIsTheReferenceAboveTheInterpreterLimit) {
  TS_SKIP_WITHOUT_DEVICE();
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(128, 256);
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<BuildResult> good = testing_util::AddCandidate(*dag, 1.0);
  absl::StatusOr<BuildResult> doubled = testing_util::AddCandidate(*dag, 2.0);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  MeasureOptions options = QuickOptions();
  options.interpreter_reference_max_ops = 0;
  options.check_trials = 3;
  std::unique_ptr<Runner> m = MakeRunner(options);
  ASSERT_NE(m, nullptr);
  std::vector<MeasureResult> r = m->Run(*dag, {*good, *doubled});
  ASSERT_EQ(r.size(), 2u);
  ExpectMeasuredFine(r[0], 3);
  EXPECT_EQ(r[1].error, MeasureError::kWrongAnswer) << r[1].message;
}

// Inputs generated on demand (never held on the host, uploaded in chunks, read by the float64
// point evaluation from their generator) judge candidates as held inputs do: the elementwise sum
// and a tiled matmul pass, the doubled sum is a wrong answer.
TEST(CudaRunnerGpuTest, InputsGeneratedOnDemandJudgeAsHeldOnes) {
  TS_SKIP_WITHOUT_DEVICE();
  MeasureOptions options = QuickOptions();
  options.interpreter_reference_max_ops = 0;
  options.generated_inputs_min_elements = 1;
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(128, 256);
  ASSERT_TRUE(dag.ok()) << dag.status();
  ASSERT_TRUE(CheckInputsOnDemand(*dag, options, TargetFromDevice(*ProbedDevice())));
  absl::StatusOr<BuildResult> good = testing_util::AddCandidate(*dag, 1.0);
  absl::StatusOr<BuildResult> doubled = testing_util::AddCandidate(*dag, 2.0);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  absl::StatusOr<ir::ComputeDAG> matmul = TiledMatmulDag();
  ASSERT_TRUE(matmul.ok()) << matmul.status();
  absl::StatusOr<BuildResult> tiled = TiledMatmulCandidate();
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  std::unique_ptr<Runner> runner = MakeRunner(options);
  ASSERT_NE(runner, nullptr);
  std::vector<MeasureResult> r = runner->Run(*dag, {*good, *doubled});
  ASSERT_EQ(r.size(), 2u);
  ExpectMeasuredFine(r[0], kDefaultTrials);
  EXPECT_EQ(r[1].error, MeasureError::kWrongAnswer) << r[1].message;
  EXPECT_GT(r[1].check.mismatches, 128 * 256 * 9 / 10);
  r = runner->Run(*matmul, {*tiled});
  ASSERT_EQ(r.size(), 1u);
  ExpectMeasuredFine(r[0], kDefaultTrials);
  // The float64 sampled points were evaluated from the generated inputs.
  EXPECT_GT(r[0].check.f64_points, 0);
}

TEST(CudaRunnerGpuTest, TiledMatmulMeasuresFine) {
  TS_SKIP_WITHOUT_DEVICE();
  absl::StatusOr<ir::ComputeDAG> dag = TiledMatmulDag();
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<BuildResult> cand = TiledMatmulCandidate();
  ASSERT_TRUE(cand.ok()) << cand.status();
  std::unique_ptr<Runner> measurer = MakeRunner(QuickOptions());
  ASSERT_NE(measurer, nullptr);
  std::vector<MeasureResult> r = measurer->Run(*dag, {*cand});
  ASSERT_EQ(r.size(), 1u);
  ExpectMeasuredFine(r[0], kDefaultTrials);
  EXPECT_GT(r[0].kernels[0].static_shared_bytes, 0);
}

// The candidate of `dag` scheduled by the steps of schedule-file JSON `steps_json`, lowered for
// the probed device and built in process. Errors: those of parsing, replay, Lower and the build.
absl::StatusOr<BuildResult> BuildFromSteps(const ir::ComputeDAG& dag,
                                           const std::string& steps_json) {
  ASSIGN_OR_RETURN(std::vector<schedule::Step> steps,
                   schedule::StepsFromJson(nlohmann::json::parse(steps_json)));
  ASSIGN_OR_RETURN(schedule::State state, schedule::ReplaySteps(dag, steps));
  const Target target = TargetFromDevice(*ProbedDevice());
  ASSIGN_OR_RETURN(schedule::LoweredKernel lowered, schedule::Lower(dag, state, target));
  BuildInput input;
  input.lowered = std::make_shared<const schedule::LoweredKernel>(std::move(lowered));
  BuildResult cand = Builder(target).BuildInProcess(input);
  if (!cand.build_status.ok()) return cand.build_status;
  return cand;
}

// C = A · B with K = 2048 by one TF32 mma.sync per product: a third or more of its elements are
// outside the plain 1e-4 compare (TF32 keeps 10 mantissa bits of each operand), every one within
// the rule's TF32 allowance 16 · 2^-11 · M. The arbitration is off (cap 0), so only the device
// compare with the magnitudes can accept it.
TEST(CudaRunnerGpuTest, OnePassTf32PassesUnderTf32PrecisionOnly) {
  TS_SKIP_WITHOUT_DEVICE();
  ir::OpArgs args;
  args.shapes = {{256, 2048}, {2048, 256}};
  absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp("matmul", args);
  ASSERT_TRUE(dag.ok()) << dag.status();
  const int stage = dag->StageId(dag->stage(dag->output_ids()[0]).name());
  absl::StatusOr<BuildResult> built =
      BuildFromSteps(*dag, absl::StrCat(R"({"version": 1, "steps": [["TC", )", stage,
                                        R"(, "tf32", [128, 128, 32], [64, 64], 3, 0, 8, 0]]})"));
  ASSERT_TRUE(built.ok()) << built.status();
  const BuildResult& cand = *built;
  for (Fp32Precision precision : {Fp32Precision::kTf32, Fp32Precision::kIeee}) {
    SCOPED_TRACE(Fp32PrecisionName(precision));
    MeasureOptions options = QuickOptions();
    options.precision = precision;
    options.arbitration_max_elements = 0;
    options.interpreter_reference_max_ops = 0;  // the naive GPU kernel and its magnitude kernel
    std::unique_ptr<Runner> m = MakeRunner(options);
    ASSERT_NE(m, nullptr);
    std::vector<MeasureResult> r = m->Run(*dag, {cand});
    ASSERT_EQ(r.size(), 1u);
    if (precision == Fp32Precision::kTf32) {
      ExpectMeasuredFine(r[0], kDefaultTrials);
      // Not a float32 result: the plain compare's maximum error is far above 1e-4.
      EXPECT_GT(r[0].check.max_abs_error, 1e-3);
    } else {
      EXPECT_EQ(r[0].error, MeasureError::kWrongAnswer) << r[0].message;
    }
  }
}

// A TMA-fed wgmma bf16 matmul: its two tensor maps are encoded over each trial's inputs and over
// the timing inputs (a map left over another set's buffers would read the wrong data: a wrong
// answer), never poisoned, and the check passes.
TEST(CudaRunnerGpuTest, TmaMatmulMeasuresFine) {
  TS_SKIP_WITHOUT_DEVICE();
  if (ProbedDevice()->compute_major < 9) GTEST_SKIP() << "TMA needs sm_90 or newer";
  ir::OpArgs args;
  args.shapes = {{256, 128}, {128, 192}};
  args.dtype = ir::ScalarType::kBFloat16;
  absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp("matmul", args);
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<BuildResult> built =
      BuildFromSteps(*dag, R"({"version": 1, "steps": [["TC", 2, "bf16", [128, 192, 64], )"
                           R"([64, 192], 3, 0, 1, 0, 1, "wgmma", "tma"]]})");
  ASSERT_TRUE(built.ok()) << built.status();
  const BuildResult& cand = *built;
  int maps = 0;
  for (const codegen::KernelArg& a : cand.gpu_module->args) {
    maps += a.kind == codegen::KernelArg::Kind::kTensorMap;
  }
  EXPECT_EQ(maps, 2);
  std::unique_ptr<Runner> m = MakeRunner(QuickOptions());
  ASSERT_NE(m, nullptr);
  std::vector<MeasureResult> r = m->Run(*dag, {cand, cand});
  ASSERT_EQ(r.size(), 2u);
  for (const MeasureResult& one : r) {
    EXPECT_EQ(one.error, MeasureError::kNone) << one.message;
    EXPECT_EQ(one.check.trials, kDefaultTrials);
    EXPECT_EQ(one.check.mismatches, 0);
    EXPECT_GT(one.timing.median_ms, 0);
  }
}

// Staged timing: with a screen below any kernel's time, a correct candidate keeps its two check
// runs' times (screened, no full timing); a wrong one is still a wrong answer; with the screen
// off the same candidate gets the full timing.
TEST(CudaRunnerGpuTest, ScreenedCandidatesKeepTheirCheckRunTimes) {
  TS_SKIP_WITHOUT_DEVICE();
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(256, 512);
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<BuildResult> good = testing_util::AddCandidate(*dag, 1.0);
  absl::StatusOr<BuildResult> doubled = testing_util::AddCandidate(*dag, 2.0);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  std::unique_ptr<Runner> m = MakeRunner(QuickOptions());
  ASSERT_NE(m, nullptr);
  m->SetScreenAboveMs(1e-6);
  std::vector<MeasureResult> screened = m->Run(*dag, {*good, *doubled});
  ASSERT_EQ(screened.size(), 2u);
  EXPECT_EQ(screened[0].error, MeasureError::kNone) << screened[0].message;
  EXPECT_TRUE(screened[0].screened);
  const int trials = QuickOptions().check_trials;
  EXPECT_EQ(screened[0].check.trials, trials);
  EXPECT_EQ(screened[0].timing.runs, trials);
  ASSERT_EQ(screened[0].costs_s.size(), static_cast<size_t>(trials));
  for (double c : screened[0].costs_s) EXPECT_GT(c, 0);
  EXPECT_EQ(screened[1].error, MeasureError::kWrongAnswer) << screened[1].message;
  EXPECT_FALSE(screened[1].screened);
  m->SetScreenAboveMs(0);
  std::vector<MeasureResult> full = m->Run(*dag, {*good});
  ASSERT_EQ(full.size(), 1u);
  EXPECT_FALSE(full[0].screened);
  ExpectMeasuredFine(full[0], kDefaultTrials);
}

}  // namespace
}  // namespace tilesearch::measure
