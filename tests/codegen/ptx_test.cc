// GPU code generation: hand-built GPU nests and naive operator nests bound to blocks and threads
// compile to PTX with the expected entries, barriers and shared memory, and the PTX passes ptxas
// (skipped with a message where /usr/local/cuda/bin/ptxas is absent).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/interpreter.h"
#include "ir/lower_naive.h"
#include "ir/ops/registry.h"
#include "tests/codegen/nest_builders.h"

namespace tilesearch::codegen {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using namespace ::tilesearch::codegen::testing;  // NOLINT: nest builders

constexpr char kPtxas[] = "/usr/local/cuda/bin/ptxas";

// Runs ptxas on `ptx`; returns its exit code and output.
std::pair<int, std::string> RunPtxas(const std::string& ptx, const std::string& arch) {
  // Per process: ctest runs this binary's cases in parallel processes sharing TempDir().
  const std::string stem = ::testing::TempDir() + "/codegen_test_" + std::to_string(::getpid());
  const std::string in = stem + ".ptx";
  const std::string out = stem + ".cubin";
  const std::string log = stem + ".log";
  std::ofstream(in) << ptx;
  const std::string cmd =
      std::string(kPtxas) + " -arch=" + arch + " -v " + in + " -o " + out + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(log);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return {rc, text};
}

void ExpectPtxasAccepts(const std::string& ptx) {
  if (!std::filesystem::exists(kPtxas)) {
    GTEST_SKIP() << "ptxas not found at " << kPtxas << "; PTX not assembled";
  }
  auto [rc, log] = RunPtxas(ptx, "sm_90");
  EXPECT_EQ(rc, 0) << log << "\n" << ptx;
}

TEST(PtxTest, TiledMatmulHasEntryBarriersSharedAndVectorCopies) {
  const ir::LoopNest nest = GpuTiledMatmul(64, 64, 32);
  LaunchConfig launch;
  launch.grid = {2, 2, 1};
  launch.block = {8, 8, 1};
  absl::StatusOr<GpuModule> module = CompileToPtx(nest, {launch});
  ASSERT_THAT(module, IsOk());
  const std::string& ptx = module->ptx;
  EXPECT_THAT(ptx, HasSubstr(".visible .entry matmul_tiled("));
  EXPECT_THAT(ptx, ::testing::AnyOf(HasSubstr("bar.sync"), HasSubstr("barrier.sync")));
  EXPECT_THAT(ptx, HasSubstr(".shared"));
  // 16-byte global loads and shared stores for the aligned 4-wide tile copies, 16-byte output
  // stores, and fused multiply-adds in the inner product.
  EXPECT_THAT(ptx, ::testing::ContainsRegex("ld\\.global(\\.nc)?\\.v4\\.[bf]32"));
  EXPECT_THAT(ptx, ::testing::ContainsRegex("st\\.shared\\.v4\\.[bf]32"));
  EXPECT_THAT(ptx, ::testing::ContainsRegex("st\\.global\\.v4\\.[bf]32"));
  EXPECT_THAT(ptx, HasSubstr("fma.rn.f32"));
  ASSERT_EQ(module->kernels.size(), 1u);
  EXPECT_EQ(module->kernels[0].static_shared_bytes, (32 * 8 + 8 * 32) * 4);
  EXPECT_EQ(module->kernels[0].dynamic_shared_bytes, 0);
  EXPECT_EQ(module->kernels[0].block, (std::array<int64_t, 3>{8, 8, 1}));
  ASSERT_EQ(module->args.size(), 3u);
  EXPECT_EQ(module->args[2].kind, KernelArg::Kind::kOutput);
  ExpectPtxasAccepts(ptx);
}

TEST(PtxTest, SharedMemoryAboveTheStaticCapBecomesDynamic) {
  GpuCompileOptions options;
  options.max_static_shared_bytes = 1024;
  absl::StatusOr<GpuModule> module = CompileToPtx(GpuTiledMatmul(64, 64, 32), {}, options);
  ASSERT_THAT(module, IsOk());
  EXPECT_EQ(module->kernels[0].static_shared_bytes, 0);
  EXPECT_EQ(module->kernels[0].dynamic_shared_bytes, (32 * 8 + 8 * 32) * 4);
  EXPECT_THAT(module->ptx, HasSubstr(".extern .shared .align 16 .b8 __dynamic_shmem__0[]"));
  ExpectPtxasAccepts(module->ptx);
}

TEST(PtxTest, NaiveOperatorsBoundToBlocksAndThreadsAssemble) {
  struct Case {
    std::string op;
    ir::OpArgs args;
  };
  std::vector<Case> cases = {
      {"softmax", {{{16, 64}}, ir::ScalarType::kFloat32, {}}},
      {"matmul", {{{32, 16}, {16, 48}}, ir::ScalarType::kFloat32, {}}},
      {"conv2d_nchw",
       {{{1, 4, 10, 10}, {8, 4, 3, 3}}, ir::ScalarType::kFloat32, {{"padding", "1"}}}},
      {"layernorm", {{{8, 32}, {32}, {32}}, ir::ScalarType::kFloat32, {}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp(c.op, c.args);
    ASSERT_THAT(dag, IsOk());
    absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(*dag);
    ASSERT_THAT(naive, IsOk());
    absl::StatusOr<GpuModule> module = CompileToPtx(BindNaive(*naive), {});
    ASSERT_THAT(module, IsOk());
    EXPECT_THAT(module->ptx, HasSubstr(".visible .entry"));
    ExpectPtxasAccepts(module->ptx);
  }
}

}  // namespace
}  // namespace tilesearch::codegen
