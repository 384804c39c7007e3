// The emitted MLIR of the tiled GPU matmul, checked with FileCheck (llvm-22-tools) where the exact
// text matters: kernel signature, workgroup buffers, thread / block ids, barriers, the local
// accumulator, unrolled loops and 16-byte vector copies. Plus plan errors for launches and
// bindings that do not match.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codegen/nest_builders.h"

namespace tilesearch::codegen {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using namespace ::tilesearch::codegen::testing;  // NOLINT: nest builders

constexpr char kFileCheck[] = "/usr/lib/llvm-22/bin/FileCheck";

// Runs FileCheck with `checks` on `input`; returns its exit code and output.
std::pair<int, std::string> FileCheck(const std::string& input, const std::string& checks) {
  // Per process: ctest runs this binary's cases in parallel processes sharing TempDir().
  const std::string stem = ::testing::TempDir() + "/mlir_text_" + std::to_string(::getpid());
  const std::string in = stem + "_input.mlir";
  const std::string chk = stem + "_checks.txt";
  const std::string log = stem + "_filecheck.log";
  std::ofstream(in) << input;
  std::ofstream(chk) << checks;
  const std::string cmd =
      std::string(kFileCheck) + " " + chk + " --input-file=" + in + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(log);
  return {rc, std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>())};
}

constexpr char kTiledMatmulChecks[] = R"(
CHECK: module attributes {gpu.container_module}
CHECK: gpu.module @matmul_tiled
CHECK: gpu.func @matmul_tiled(%[[A:.*]]: memref<64x32xf32> {llvm.align = 16 : i64, llvm.noalias}, %[[B:.*]]: memref<32x64xf32> {{.*}}, %[[C:.*]]: memref<64x64xf32> {{.*}}) workgroup(%[[AS:.*]] : memref<32x8xf32, #gpu.address_space<workgroup>>, %[[BS:.*]] : memref<8x32xf32, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 8, 8, 1>, known_grid_size = array<i32: 2, 2, 1>}
CHECK: %[[ACC:.*]] = memref.alloca() {alignment = 16 : i64} : memref<4x4xf32>
CHECK: gpu.block_id  y
CHECK: gpu.block_id  x
CHECK: gpu.thread_id  y
CHECK: gpu.thread_id  x
CHECK: scf.for
CHECK: vector.load %[[A]][{{.*}}] {alignment = 16 : i64} : memref<64x32xf32>, vector<4xf32>
CHECK: vector.store {{.*}}, %[[AS]][{{.*}}] {alignment = 16 : i64} : memref<32x8xf32, #gpu.address_space<workgroup>>, vector<4xf32>
CHECK: vector.load %[[B]]
CHECK: vector.store {{.*}}, %[[BS]]
CHECK: gpu.barrier
CHECK: scf.for
CHECK-NOT: scf.for
CHECK: memref.load %[[AS]]
CHECK: memref.load %[[BS]]
CHECK: arith.mulf {{.*}} fastmath<contract>
CHECK: arith.addf {{.*}} fastmath<contract>
CHECK: memref.store {{.*}}, %[[ACC]]
CHECK-COUNT-15: arith.mulf {{.*}} fastmath<contract>
CHECK-NOT: arith.mulf
CHECK: gpu.barrier
CHECK: vector.store {{.*}}, %[[C]][{{.*}}] {alignment = 16 : i64} : memref<64x64xf32>, vector<4xf32>
CHECK: gpu.return
)";

TEST(MlirTextTest, TiledMatmulEmitsTheExpectedGpuDialectCode) {
  if (!std::filesystem::exists(kFileCheck)) {
    GTEST_SKIP() << "FileCheck not found at " << kFileCheck;
  }
  GpuCompileOptions options;
  options.keep_mlir = true;
  LaunchConfig launch;
  launch.grid = {2, 2, 1};
  launch.block = {8, 8, 1};
  absl::StatusOr<GpuModule> module = CompileToPtx(GpuTiledMatmul(64, 64, 32), {launch}, options);
  ASSERT_THAT(module, IsOk());
  auto [rc, log] = FileCheck(module->mlir, kTiledMatmulChecks);
  EXPECT_EQ(rc, 0) << log << "\n" << module->mlir;
}

TEST(MlirTextTest, LargerLaunchGuardsThreadLoops) {
  GpuCompileOptions options;
  options.keep_mlir = true;
  LaunchConfig launch;
  launch.grid = {3, 2, 1};    // one block more than the blockIdx.x loop needs
  launch.block = {16, 8, 1};  // twice the threadIdx.x extent
  absl::StatusOr<GpuModule> module = CompileToPtx(GpuSimpleMatmul(16, 16, 4), {launch}, options);
  ASSERT_THAT(module, IsOk());
  EXPECT_EQ(module->kernels[0].grid, (std::array<int64_t, 3>{3, 2, 1}));
  if (!std::filesystem::exists(kFileCheck)) GTEST_SKIP() << "no FileCheck";
  auto [rc, log] = FileCheck(module->mlir, R"(
CHECK: %[[BX:.*]] = gpu.block_id  x
CHECK: %[[BX64:.*]] = arith.index_cast %[[BX]] : index to i64
CHECK: arith.cmpi slt, %[[BX64]], %{{.*}} : i64
CHECK: scf.if
CHECK: gpu.thread_id  y
CHECK-NOT: scf.if
CHECK: %[[TX:.*]] = gpu.thread_id  x
CHECK: %[[TX64:.*]] = arith.index_cast %[[TX]] : index to i64
CHECK: arith.cmpi slt, %[[TX64]], %{{.*}} : i64
CHECK: scf.if
)");
  EXPECT_EQ(rc, 0) << log << "\n" << module->mlir;
}

TEST(MlirTextTest, LaunchesThatDoNotCoverTheLoopsAreRejected) {
  LaunchConfig small;
  small.grid = {2, 2, 1};
  small.block = {4, 8, 1};
  EXPECT_THAT(CompileToPtx(GpuSimpleMatmul(16, 16, 4), {small}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("threadIdx.x loops need 8 but the launch has blockDim.x = 4")));
  EXPECT_THAT(CompileToPtx(GpuSimpleMatmul(16, 16, 4), {small, small}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("got 2 launch configurations for 1 kernels")));
}

TEST(MlirTextTest, BarrierUnderAThreadGuardIsRejected) {
  LaunchConfig launch;
  launch.grid = {2, 2, 1};
  launch.block = {16, 8, 1};  // threadIdx.x loop of extent 8 would be guarded around a barrier
  EXPECT_THAT(CompileToPtx(GpuTiledMatmul(64, 64, 32), {launch}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("barrier under the guard")));
}

TEST(MlirTextTest, NonConstantThreadExtentAndBadArchAreRejected) {
  ir::Stmt body = ir::ForNode::Make(V("tx"), C(0), V("n"), ir::ForKind::kThreadIdxX,
                                    St("Y", {V("tx")}, ir::FloatConst(0)));
  const ir::LoopNest nest{"bad", {Decl("Y", {4})}, 0, Loop("n", 4, body)};
  EXPECT_THAT(CompileToPtx(nest, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-constant extent")));
  GpuCompileOptions options;
  options.arch = "compute_xx";
  EXPECT_THAT(CompileToPtx(GpuSimpleMatmul(8, 8, 1), {}, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown CUDA arch")));
}

TEST(MlirTextTest, GlobalAllocateInsideAKernelIsUnimplemented) {
  ir::Stmt body =
      Loop("bx", 4, ir::AllocateNode::Make(Decl("T", {4}), St("Y", {V("bx")}, ir::FloatConst(0))),
           ir::ForKind::kBlockIdxX);
  const ir::LoopNest nest{"inner_global", {Decl("Y", {4})}, 0, body};
  EXPECT_THAT(CompileToPtx(nest, {}), StatusIs(absl::StatusCode::kUnimplemented,
                                               HasSubstr("global allocate 'T' inside a kernel")));
  EXPECT_THAT(CompileForHost(nest), StatusIs(absl::StatusCode::kUnimplemented,
                                             HasSubstr("global allocate 'T' inside a kernel")));
}

}  // namespace
}  // namespace tilesearch::codegen
