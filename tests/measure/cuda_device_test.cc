// CUDA device objects on a real GPU (skipped with "no CUDA driver: ..." where the probe finds
// none): device properties, buffers, PTX from codegen loaded and run against hand-written loops,
// JIT error logs, launch limits and the GPU timer. Each test body runs in a forked child, so this
// process never initializes CUDA (the runner tests in the same binary fork workers).
#include "runtime/cuda_device.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/host_buffer.h"
#include "measure/loaded_module.h"
#include "runtime/cuda_driver.h"
#include "runtime/tensor_map.h"
#include "tests/codegen/nest_builders.h"
#include "tests/measure/cuda_device_test_util.h"
#include "tests/measure/cuda_test_util.h"

namespace tilesearch::measure {
namespace cuda = runtime::cuda;
using runtime::CudaContext;
using runtime::CudaModule;
using runtime::DeviceBuffer;
using runtime::DeviceInfo;
using runtime::GpuTimer;
using runtime::Launch;
using runtime::TargetFromDevice;
using runtime::TimingOptions;
using runtime::TimingStats;
namespace {

using ::testing::HasSubstr;
using testing_util::MakeContext;
using testing_util::ProbedDevice;
using testing_util::RunForked;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Allocates one buffer per module argument; inputs get `inputs[i]` (by argument position).
struct Buffers {
  std::vector<DeviceBuffer> buffers;
  std::vector<cuda::CUdeviceptr> ptrs;
};

Buffers AllocateFor(const CudaContext& ctx, const codegen::GpuModule& module,
                    const std::vector<std::vector<float>>& inputs) {
  Buffers b;
  for (size_t i = 0; i < module.args.size(); ++i) {
    absl::StatusOr<DeviceBuffer> d =
        DeviceBuffer::Allocate(ctx.driver(), module.args[i].buffer.NumElements() * 4);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return b;
    if (i < inputs.size()) {
      EXPECT_THAT(d->Upload(inputs[i].data(), inputs[i].size() * 4), IsOk());
    } else {
      EXPECT_THAT(d->Memset32(0x7FC00000u), IsOk());  // NaN
    }
    b.ptrs.push_back(d->ptr());
    b.buffers.push_back(std::move(*d));
  }
  return b;
}

TEST(CudaDeviceTest, DeviceInfoIsSaneAndGivesTheTarget) {
  TS_SKIP_WITHOUT_DEVICE();
  const DeviceInfo& probed = *ProbedDevice();
  EXPECT_FALSE(probed.name.empty());
  EXPECT_GT(probed.sm_count, 0);
  EXPECT_GT(probed.l2_bytes, 0);
  EXPECT_EQ(probed.warp_size, 32);
  EXPECT_GE(probed.max_threads_per_block, 256);
  EXPECT_GE(probed.shared_per_block_optin, probed.shared_per_block);
  EXPECT_GT(probed.total_memory_bytes, int64_t{1} << 30);
  EXPECT_GE(probed.compute_major, 7);
  Target t = TargetFromDevice(probed);
  EXPECT_EQ(t.arch,
            "sm_" + std::to_string(probed.compute_major) + std::to_string(probed.compute_minor));
  EXPECT_THAT(t.arch, ::testing::MatchesRegex("sm_[0-9]+"));
  EXPECT_EQ(t.sm_count, probed.sm_count);
  EXPECT_EQ(t.l2_bytes, probed.l2_bytes);
  std::printf("device: %s, driver %d\n", probed.ToString().c_str(), probed.driver_version);
  RunForked([&] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(ctx->info().name, probed.name);
    EXPECT_EQ(ctx->info().sm_count, probed.sm_count);
  });
}

TEST(CudaDeviceTest, BufferUploadMemsetDownload) {
  TS_SKIP_WITHOUT_DEVICE();
  RunForked([] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(ctx->driver(), 4096);
    ASSERT_TRUE(b.ok()) << b.status();
    std::vector<uint32_t> in(1024);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint32_t>(i * 2654435761u);
    ASSERT_THAT(b->Upload(in.data(), 4096), IsOk());
    std::vector<uint32_t> out(1024, 0);
    ASSERT_THAT(b->Download(out.data(), 4096), IsOk());
    EXPECT_EQ(out, in);
    ASSERT_THAT(b->Memset32(0xDEADBEEFu), IsOk());
    ASSERT_THAT(b->Download(out.data(), 4096), IsOk());
    EXPECT_EQ(out, std::vector<uint32_t>(1024, 0xDEADBEEFu));
    ASSERT_THAT(b->Memset8(0x5A), IsOk());
    ASSERT_THAT(b->Download(out.data(), 4096), IsOk());
    EXPECT_EQ(out, std::vector<uint32_t>(1024, 0x5A5A5A5Au));
    EXPECT_THAT(b->Upload(in.data(), 8192),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("upload of 8192 bytes")));
  });
}

// cuTensorMapEncodeTiled accepts TensorMapEncodeArgs' arguments over a device buffer, and a source
// address off the 16-byte grid is refused before the driver is asked.
TEST(CudaDeviceTest, TensorMapEncodesOverADeviceBuffer) {
  TS_SKIP_WITHOUT_DEVICE();
  if (ProbedDevice()->compute_major < 9) GTEST_SKIP() << "TMA needs sm_90 or newer";
  RunForked([] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    const ir::TensorMapSpec map{"A", {256, 128}, {128, 64}, 128};
    absl::StatusOr<DeviceBuffer> a = DeviceBuffer::Allocate(ctx->driver(), 256 * 128 * 2);
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<runtime::TensorMapBytes> bytes =
        runtime::EncodeTensorMap(ctx->driver(), "A_map", map, ir::ScalarType::kBFloat16, a->ptr());
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_NE(*bytes, runtime::TensorMapBytes{});
    EXPECT_THAT(runtime::EncodeTensorMap(ctx->driver(), "A_map", map, ir::ScalarType::kBFloat16,
                                         a->ptr() + 8),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("tensor map 'A_map' of 'A': source address 0x")));
  });
}

TEST(CudaDeviceTest, ElementwiseKernelMatchesHandLoop) {
  TS_SKIP_WITHOUT_DEVICE();
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(96, 130);
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<ir::LoopNest> nest = testing_util::AddNest(*dag, /*scale=*/2.0);
  ASSERT_TRUE(nest.ok()) << nest.status();
  absl::StatusOr<codegen::GpuModule> module = codegen::CompileToPtx(*nest, {});
  ASSERT_TRUE(module.ok()) << module.status();
  RunForked([&] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    absl::StatusOr<std::unique_ptr<LoadedGpuModule>> loaded = LoadedGpuModule::Load(*ctx, *module);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_GT((*loaded)->load_ms(), 0);
    ASSERT_EQ((*loaded)->resources().size(), 1u);
    EXPECT_GT((*loaded)->resources()[0].registers_per_thread, 0);
    const size_t n = 96 * 130;
    std::vector<float> a = RandomFloats(n, 1), b = RandomFloats(n, 2);
    Buffers bufs = AllocateFor(*ctx, *module, {a, b});
    ASSERT_EQ(bufs.ptrs.size(), 3u);
    ASSERT_THAT((*loaded)->LaunchAll(bufs.ptrs, /*synchronize=*/true), IsOk());
    std::vector<float> c(n);
    ASSERT_THAT(bufs.buffers[2].Download(c.data(), n * 4), IsOk());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(c[i], (a[i] + b[i]) * 2.0f) << "element " << i;
    }
  });
}

TEST(CudaDeviceTest, TiledMatmulMatchesNaiveMatmul) {
  TS_SKIP_WITHOUT_DEVICE();
  const int64_t m = 64, n = 96, k = 48;
  ir::LoopNest nest = codegen::testing::GpuTiledMatmul(m, n, k);
  absl::StatusOr<codegen::GpuModule> module = codegen::CompileToPtx(nest, {});
  ASSERT_TRUE(module.ok()) << module.status();
  RunForked([&] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    absl::StatusOr<std::unique_ptr<LoadedGpuModule>> loaded = LoadedGpuModule::Load(*ctx, *module);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_EQ((*loaded)->resources().size(), 1u);
    // Two shared tiles of 32×8 and 8×32 floats.
    EXPECT_GE((*loaded)->resources()[0].static_shared_bytes, 2 * 32 * 8 * 4);
    ir::HostBuffer ha = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {m, k});
    ir::HostBuffer hb = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {k, n});
    ir::FillRandom(ha, 3);
    ir::FillRandom(hb, 4);
    std::vector<float> a(ha.data.begin(), ha.data.end()), b(hb.data.begin(), hb.data.end());
    Buffers bufs = AllocateFor(*ctx, *module, {a, b});
    ASSERT_EQ(bufs.ptrs.size(), 3u);
    ASSERT_THAT((*loaded)->LaunchAll(bufs.ptrs, /*synchronize=*/true), IsOk());
    std::vector<float> c(m * n);
    ASSERT_THAT(bufs.buffers[2].Download(c.data(), c.size() * 4), IsOk());
    std::vector<float> want = codegen::testing::NaiveMatmul(ha, hb, m, n, k);
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_NEAR(c[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "element " << i;
    }
  });
}

TEST(CudaDeviceTest, InvalidPtxReportsTheJitError) {
  TS_SKIP_WITHOUT_DEVICE();
  RunForked([] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    const std::string ptx =
        ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus_op; }\n";
    EXPECT_THAT(CudaModule::LoadPtx(ctx->driver(), ptx),
                StatusIs(absl::StatusCode::kInternal,
                         HasSubstr("cuModuleLoadData: CUDA_ERROR_INVALID_PTX")));
  });
}

TEST(CudaDeviceTest, LaunchOutsideTheLimitsIsRefusedBeforeLaunching) {
  TS_SKIP_WITHOUT_DEVICE();
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(4, 32);
  ASSERT_TRUE(dag.ok());
  absl::StatusOr<ir::LoopNest> nest = testing_util::AddNest(*dag, 1.0);
  ASSERT_TRUE(nest.ok());
  absl::StatusOr<codegen::GpuModule> module = codegen::CompileToPtx(*nest, {});
  ASSERT_TRUE(module.ok()) << module.status();
  RunForked([&] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    absl::StatusOr<std::unique_ptr<CudaModule>> m = CudaModule::LoadPtx(ctx->driver(), module->ptx);
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<cuda::CUfunction> f = (*m)->GetFunction(module->kernels[0].name);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_THAT((*m)->GetFunction("no_such_kernel"),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr("no_such_kernel")));
    codegen::GpuKernelInfo k = module->kernels[0];
    k.block = {4096, 1, 1};
    Buffers bufs = AllocateFor(*ctx, *module, {});
    EXPECT_THAT(Launch(*ctx, *f, k.name, KernelLaunch(k), bufs.ptrs, true),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device limits")));
    // The context is still usable.
    EXPECT_THAT(Launch(*ctx, *f, k.name, KernelLaunch(module->kernels[0]), bufs.ptrs, true),
                IsOk());
  });
}

TEST(CudaDeviceTest, GpuTimerGivesPositiveSamples) {
  TS_SKIP_WITHOUT_DEVICE();
  ir::LoopNest nest = codegen::testing::GpuTiledMatmul(256, 256, 256);
  absl::StatusOr<codegen::GpuModule> module = codegen::CompileToPtx(nest, {});
  ASSERT_TRUE(module.ok()) << module.status();
  RunForked([&] {
    std::unique_ptr<CudaContext> ctx = MakeContext();
    ASSERT_NE(ctx, nullptr);
    absl::StatusOr<std::unique_ptr<LoadedGpuModule>> loaded = LoadedGpuModule::Load(*ctx, *module);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    std::vector<float> a = RandomFloats(256 * 256, 5), b = RandomFloats(256 * 256, 6);
    Buffers bufs = AllocateFor(*ctx, *module, {a, b});
    absl::StatusOr<std::unique_ptr<GpuTimer>> timer = GpuTimer::Create(*ctx);
    ASSERT_TRUE(timer.ok()) << timer.status();
    TimingOptions options;
    options.warmup_runs = 2;
    options.min_runs = 7;
    options.min_total_ms = 1;
    options.max_runs = 50;
    const LoadedGpuModule& mod = **loaded;
    absl::StatusOr<TimingStats> stats =
        (*timer)->Time([&] { return mod.LaunchAll(bufs.ptrs, false); }, options);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_GE(stats->runs, 7);
    EXPECT_EQ(stats->samples_ms.size(), static_cast<size_t>(stats->runs));
    for (double s : stats->samples_ms) EXPECT_GT(s, 0);
    std::printf("tiled matmul 256^3: %s\n", stats->ToString().c_str());
  });
}

}  // namespace
}  // namespace tilesearch::measure
