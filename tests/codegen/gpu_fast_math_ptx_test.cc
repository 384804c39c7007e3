// Fast GPU float32 math (codegen/emitter.h, Exp and FloatDiv): on the cuda target exp is CUDA's
// __expf (ex2.approx.ftz of x * log2 e) and a / b is a * rcp.approx(b), so the one-pass softmax
// normalize takes one reciprocal per row and no div.rn.f32; the PTX passes ptxas (skipped where
// it is absent). The quotients of the rational approximations take div.approx, not div.rn (tanh
// in the tanh gelu; erf on the GPU has no quotient: tests/codegen/fast_math_test.cc). The host
// JIT keeps the accurate exp and division: a host softmax matches a float64
// softmax of the same float32 inputs to 1e-6 relative.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/lower_naive.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "tests/codegen/nest_builders.h"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::codegen {
namespace {

using testing::Count;
using testing::ExpectPtxasAccepts;
using ::testing::HasSubstr;
using ::testing::Not;
using ::tilesearch::testing::IsOk;

absl::StatusOr<std::string> SoftmaxOnePassPtx() {
  ASSIGN_OR_RETURN(std::string text,
                   testing::ReadTextFile(TS_BENCH_SCHEDULES_DIR "/softmax_cuda_4096_onepass.json"));
  ASSIGN_OR_RETURN(testing::CompiledSchedule c, testing::CompileScheduleText(text));
  return c.ptx;
}

TEST(GpuFastMathPtxTest, OnePassSoftmaxUsesEx2AndOneReciprocalPerRow) {
  absl::StatusOr<std::string> ptx = SoftmaxOnePassPtx();
  ASSERT_THAT(ptx, IsOk());
  // Both exponentials (row sum and normalize) are ex2.approx.ftz of x * log2(e) ...
  EXPECT_GE(Count(*ptx, "ex2.approx.ftz.f32"), 2) << *ptx;
  EXPECT_THAT(*ptx, HasSubstr("0f3FB8AA3B")) << *ptx;  // log2(e) in f32
  // ... not the range-reduced polynomial (its floor is cvt.rmi).
  EXPECT_THAT(*ptx, Not(HasSubstr("cvt.rmi.f32.f32"))) << *ptx;
  // The normalize x / rowsum: one reciprocal per row (one block per row) and multiplies.
  EXPECT_THAT(*ptx, Not(HasSubstr("div.rn.f32"))) << *ptx;
  EXPECT_THAT(*ptx, Not(HasSubstr("div."))) << *ptx;
  EXPECT_EQ(Count(*ptx, "rcp.approx.f32"), 1) << *ptx;
  ExpectPtxasAccepts(*ptx, "gpu_fast_math_test");
}

// The PTX of `op` on one [64, 256] float32 input (or two for binary ops), its naive nest bound to
// blocks and threads.
absl::StatusOr<std::string> NaiveGpuPtx(const std::string& op, int inputs,
                                        std::map<std::string, std::string> attrs = {}) {
  std::vector<std::vector<int64_t>> shapes(inputs, std::vector<int64_t>{64, 256});
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, ir::BuildOp(op, testing::Args(shapes, std::move(attrs))));
  ASSIGN_OR_RETURN(ir::LoopNest nest, ir::LowerNaive(dag));
  ASSIGN_OR_RETURN(GpuModule m, CompileToPtx(testing::BindNaive(nest), {}));
  return m.ptx;
}

// The rational approximations' own P(x) / Q(x) (tanh here) take div.approx (a few ulp, like the
// approximation itself) instead of div.rn.f32's Newton sequence; the program's divisions keep
// the emitter's reciprocal form.
TEST(GpuFastMathPtxTest, ApproximationQuotientsTakeTheApproximateDivision) {
  absl::StatusOr<std::string> gelu = NaiveGpuPtx("gelu", 1, {{"approximate", "tanh"}});
  ASSERT_THAT(gelu, IsOk());
  EXPECT_GE(Count(*gelu, "div.approx.f32"), 1) << *gelu;
  EXPECT_THAT(*gelu, Not(HasSubstr("div.rn.f32"))) << *gelu;
  ExpectPtxasAccepts(*gelu, "gpu_fast_math_gelu");
  absl::StatusOr<std::string> div = NaiveGpuPtx("div", 2);
  ASSERT_THAT(div, IsOk());
  EXPECT_THAT(*div, Not(HasSubstr("div.approx.f32"))) << *div;
  EXPECT_GE(Count(*div, "rcp.approx.f32"), 1) << *div;
}

TEST(GpuFastMathPtxTest, HostSoftmaxKeepsAccurateExpAndDivision) {
  constexpr int64_t kRows = 8;
  constexpr int64_t kCols = 16;
  absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp("softmax", testing::Args({{kRows, kCols}}));
  ASSERT_THAT(dag, IsOk());
  absl::StatusOr<ir::LoopNest> nest = ir::LowerNaive(*dag);
  ASSERT_THAT(nest, IsOk());
  ASSERT_EQ(nest->params.size(), 2u);
  absl::StatusOr<std::unique_ptr<HostKernel>> kernel = CompileForHost(*nest);
  ASSERT_THAT(kernel, IsOk());

  // Inputs over [-20, 20] (exp arguments down to -40 after the max shift), float32 values.
  std::vector<double> x(kRows * kCols);
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    x[i] = static_cast<float>(-20.0 + 40.0 * std::fmod(i * 0.6180339887, 1.0));
  }
  // The placeholder (the one input) and the other param, the output.
  const ir::BufferMap placeholders = ir::MakeRandomInputs(*dag, 1);
  ASSERT_EQ(placeholders.size(), 1u);
  const std::string in = placeholders.begin()->first;
  const std::string out = nest->params[0].name == in ? nest->params[1].name : nest->params[0].name;
  ir::BufferMap buffers;
  buffers[in] = ir::HostBuffer{ir::ScalarType::kFloat32, {kRows, kCols}, x, nullptr};
  buffers[out] = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {kRows, kCols});
  ASSERT_THAT(RunOnBuffers(**kernel, *nest, buffers), IsOk());

  const std::vector<double>& got = buffers.at(out).data;
  for (int64_t r = 0; r < kRows; ++r) {
    double mx = -INFINITY;
    for (int64_t c = 0; c < kCols; ++c) mx = std::max(mx, x[r * kCols + c]);
    // The kernel's shifted argument x - max is a float32 (its rounding, up to 2^-20 absolute at
    // |x - max| ~ 40, is not exp's error); everything after it is float64.
    auto shifted = [&](int64_t c) {
      return static_cast<double>(static_cast<float>(x[r * kCols + c] - mx));
    };
    double sum = 0;
    for (int64_t c = 0; c < kCols; ++c) sum += std::exp(shifted(c));
    for (int64_t c = 0; c < kCols; ++c) {
      const double want = std::exp(shifted(c)) / sum;
      EXPECT_NEAR(got[r * kCols + c], want, 1e-6 * want) << "row " << r << " col " << c;
    }
  }
}

}  // namespace
}  // namespace tilesearch::codegen
