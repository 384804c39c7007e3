// WarpMma kernels (tests/codegen/warp_mma_nests.h) on a real GPU: every kind, operand layout and
// shared-row padding, compiled by codegen (ldmatrix / scalar fragment loads, mma.sync), run and
// compared element by element with the interpreter, whose semantics fix the fragment layouts
// (ir/stmt.h WarpMmaNode). This is what checks the fragment mappings against the hardware. Skipped
// with "no CUDA driver: ..." where the probe finds no device; each body runs in a forked child.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gtest/gtest.h"
#include "ir/interpreter.h"
#include "measure/checker.h"
#include "measure/loaded_module.h"
#include "runtime/cuda_device.h"
#include "tests/codegen/warp_mma_nests.h"
#include "tests/measure/cuda_device_test_util.h"

namespace tilesearch::measure {
namespace {

using codegen::testing::WarpMmaCase;
using runtime::CudaContext;
using runtime::DeviceBuffer;
using testing_util::MakeContext;
using testing_util::RunForked;
using ::tilesearch::testing::IsOk;

// Allowed |gpu − interpreter| relative to the interpreter's value, and as much absolute near zero:
// float32 accumulation-order differences only (1e-5) for f16, bf16 and tf32x3; TF32's precision
// (1e-3) for tf32.
double Tolerance(ir::MmaKind kind) { return kind == ir::MmaKind::kTF32 ? 1e-3 : 1e-5; }

class WarpMmaGpuTest : public ::testing::TestWithParam<WarpMmaCase> {};

TEST_P(WarpMmaGpuTest, MatchesTheInterpreter) {
  TS_SKIP_WITHOUT_DEVICE();
  const WarpMmaCase& c = GetParam();
  const ir::LoopNest nest = codegen::testing::WarpMmaMatmul(c);
  absl::StatusOr<codegen::GpuModule> module = codegen::CompileToPtx(nest, {});
  ASSERT_TRUE(module.ok()) << module.status();
  const ir::BufferMap inputs = codegen::testing::WarpMmaInputs(c, 21);
  ir::BufferMap want = inputs;
  ASSERT_THAT(ir::Interpret(nest, want), IsOk());
  RunForked([&] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    absl::StatusOr<std::unique_ptr<LoadedGpuModule>> loaded = LoadedGpuModule::Load(*ctx, *module);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    std::vector<DeviceBuffer> buffers;
    std::vector<runtime::cuda::CUdeviceptr> ptrs;
    for (const codegen::KernelArg& arg : module->args) {
      const std::vector<std::byte> bytes = PackBuffer(inputs.at(arg.buffer.name));
      absl::StatusOr<DeviceBuffer> d = DeviceBuffer::Allocate(ctx->driver(), bytes.size());
      ASSERT_TRUE(d.ok()) << d.status();
      if (arg.kind == codegen::KernelArg::Kind::kInput) {
        ASSERT_THAT(d->Upload(bytes.data(), bytes.size()), IsOk());
      } else {
        ASSERT_THAT(d->Memset32(0x7FC00000u), IsOk());  // NaN: every element must be written
      }
      ptrs.push_back(d->ptr());
      buffers.push_back(*std::move(d));
    }
    ASSERT_THAT((*loaded)->LaunchAll(ptrs, /*synchronize=*/true), IsOk());
    const ir::HostBuffer& expected = want.at("C");
    ir::HostBuffer got = ir::HostBuffer::Zeros(expected.dtype, expected.shape);
    std::vector<std::byte> out(got.data.size() * 4);
    ASSERT_EQ(module->args.back().buffer.name, "C");
    ASSERT_THAT(buffers.back().Download(out.data(), out.size()), IsOk());
    ASSERT_THAT(UnpackBuffer(out.data(), out.size(), &got), IsOk());
    const double tol = Tolerance(c.kind);
    const int64_t cols = expected.shape[1];
    double max_err = 0;
    for (size_t i = 0; i < got.data.size(); ++i) {
      const double w = expected.data[i];
      ASSERT_NEAR(got.data[i], w, tol * std::fabs(w) + tol)
          << codegen::testing::WarpMmaCaseName(c) << ": C[" << i / cols << ", " << i % cols << "]";
      max_err = std::max(max_err, std::fabs(got.data[i] - w));
    }
    std::printf("%s: max |gpu - interpreter| = %.3g\n",
                codegen::testing::WarpMmaCaseName(c).c_str(), max_err);
  });
}

INSTANTIATE_TEST_SUITE_P(AllKindsAndLayouts, WarpMmaGpuTest,
                         ::testing::ValuesIn(codegen::testing::AllWarpMmaCases()),
                         [](const ::testing::TestParamInfo<WarpMmaCase>& info) {
                           return codegen::testing::WarpMmaCaseName(info.param);
                         });

}  // namespace
}  // namespace tilesearch::measure
