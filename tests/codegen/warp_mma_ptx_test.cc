// WarpMma statements on the GPU target: every kind (f16, bf16, tf32, tf32x3) with every operand
// layout compiles to mma.sync.aligned.m16n8kK.row.col.f32 instructions (three per fragment pair for
// tf32x3), 16-bit operands with 16-byte aligned rows load through ldmatrix (.trans for [k][m] A and
// [k][n] B) and unaligned or 32-bit ones through scalar shared loads, and ptxas -arch=sm_90
// assembles the PTX (skipped where ptxas is absent). The same kernels in the interpreter give the
// float64 matmul of the operand values (a check of the test's nest and of the interpreter's
// semantics; tests/measure/warp_mma_gpu_test.cc runs them on the GPU). Misuse is
// kInvalidArgument naming the buffer: the host target, operands outside shared memory or of the
// wrong dtype, a mis-shaped accumulator, a tile larger than its buffer.
#include <cmath>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/interpreter.h"
#include "tests/codegen/nest_builders.h"
#include "tests/codegen/ptx_test_util.h"
#include "tests/codegen/warp_mma_nests.h"

namespace tilesearch::codegen {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using namespace ::tilesearch::codegen::testing;  // NOLINT: nest builders
using ir::MmaKind;
using ir::Stmt;

// `ptx` without tabs (the NVPTX printer separates opcodes and operands by one).
std::string Untabbed(const std::string& ptx) {
  std::string out;
  for (char c : ptx) {
    if (c != '\t') out.push_back(c);
  }
  return out;
}

// The kind's mma.sync instruction as the NVPTX backend prints it.
std::string MmaInstruction(MmaKind kind) {
  switch (kind) {
    case MmaKind::kF16:
      return "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
    case MmaKind::kBF16:
      return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    default:
      return "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
  }
}

bool Is16Bit(MmaKind kind) { return kind == MmaKind::kF16 || kind == MmaKind::kBF16; }

class WarpMmaCaseTest : public ::testing::TestWithParam<WarpMmaCase> {};

TEST_P(WarpMmaCaseTest, CompilesToMmaSyncAndLdmatrixAndAssembles) {
  const WarpMmaCase& c = GetParam();
  absl::StatusOr<GpuModule> module = CompileToPtx(WarpMmaMatmul(c), {});
  ASSERT_THAT(module, IsOk());
  ASSERT_EQ(module->kernels.size(), 1u);
  EXPECT_EQ(module->kernels[0].block, (std::array<int64_t, 3>{32, 2, 1}));
  const std::string ptx = Untabbed(module->ptx);
  // One WarpMma is 2 (m) x 2 (n) x 2 (k steps) instructions, three each for tf32x3; LLVM may
  // unroll the K-chunk loop, so the counts are per WarpMma copy.
  const int per_copy = c.kind == MmaKind::kTF32x3 ? 24 : 8;
  const int mmas = Count(ptx, "mma.sync.aligned");
  ASSERT_GT(mmas, 0) << ptx;
  EXPECT_EQ(mmas % per_copy, 0) << ptx;
  EXPECT_EQ(Count(ptx, MmaInstruction(c.kind)), mmas) << ptx;
  const int copies = mmas / per_copy;
  // Per copy and k step: one .x4 per A fragment (2) and one .x4 for both B fragments.
  const bool ldmatrix = Is16Bit(c.kind) && c.pad % 8 == 0;
  const int a_x4 = ldmatrix ? 4 * copies : 0;
  const int b_x4 = ldmatrix ? 2 * copies : 0;
  EXPECT_EQ(Count(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
            (c.a_k_inner ? a_x4 : 0) + (c.b_k_inner ? b_x4 : 0))
      << ptx;
  EXPECT_EQ(Count(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"),
            (c.a_k_inner ? 0 : a_x4) + (c.b_k_inner ? 0 : b_x4))
      << ptx;
  EXPECT_EQ(Count(ptx, "ldmatrix"), a_x4 + b_x4) << ptx;
  // Shared tiles start on 16 bytes (ldmatrix rows).
  EXPECT_THAT(ptx, ::testing::ContainsRegex("\\.shared \\.align (16|32|64|128) "));
  ExpectPtxasAccepts(module->ptx, "warp_mma_" + WarpMmaCaseName(c));
}

TEST_P(WarpMmaCaseTest, InterpreterGivesTheFloat64MatmulOfTheOperandValues) {
  const WarpMmaCase& c = GetParam();
  const ir::LoopNest nest = WarpMmaMatmul(c);
  ir::BufferMap buffers = WarpMmaInputs(c, 11);
  std::vector<double> magnitude;
  const std::vector<double> want = WarpMmaReference(c, buffers, &magnitude);
  ASSERT_THAT(ir::Interpret(nest, buffers), IsOk());
  const ir::HostBuffer& got = buffers.at("C");
  ASSERT_EQ(got.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got.data[i], want[i], 1e-5 * magnitude[i] + 1e-7) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllKindsAndLayouts, WarpMmaCaseTest,
                         ::testing::ValuesIn(AllWarpMmaCases()),
                         [](const ::testing::TestParamInfo<WarpMmaCase>& info) {
                           return WarpMmaCaseName(info.param);
                         });

// ---- misuse ------------------------------------------------------------------------------------

// A one-thread kernel around a single f16 WarpMma on A_s [16][16], B_s [8][16] (shared unless
// `operand_scope` says otherwise, of `operand_type`) into acc of `acc_shape`.
ir::LoopNest SingleMmaNest(ir::MemoryScope operand_scope, ir::ScalarType operand_type,
                           std::vector<int64_t> acc_shape, int64_t b_rows = 8) {
  Stmt mma = ir::WarpMmaNode::Make(MmaKind::kF16, 1, 1, 1, "acc", "A_s", {C(0), C(0)}, true, "B_s",
                                   {C(0), C(0)}, true, V("tx"));
  Stmt body = ir::AllocateNode::Make(
      Decl("A_s", {16, 16}, operand_type, operand_scope),
      ir::AllocateNode::Make(
          Decl("B_s", {b_rows, 16}, operand_type, operand_scope),
          Loop("tx", 32,
               ir::AllocateNode::Make(
                   Decl("acc", acc_shape, ir::ScalarType::kFloat32, ir::MemoryScope::kLocal),
                   Seq({mma, St("C", {V("tx")}, Ld("acc", {C(0), C(0), C(0)}))})),
               ir::ForKind::kThreadIdxX)));
  return ir::LoopNest{"single_mma", {Decl("C", {32})}, 0, body};
}

TEST(WarpMmaErrorTest, HostTargetIsInvalidArgument) {
  // No thread loop on the host: the kernel is a plain serial one, and the emitter refuses the mma.
  Stmt mma = ir::WarpMmaNode::Make(MmaKind::kTF32, 1, 1, 1, "acc", "A_s", {C(0), C(0)}, true, "B_s",
                                   {C(0), C(0)}, true, C(0));
  Stmt body = ir::AllocateNode::Make(
      Decl("A_s", {16, 8}, ir::ScalarType::kFloat32, ir::MemoryScope::kShared),
      ir::AllocateNode::Make(
          Decl("B_s", {8, 8}, ir::ScalarType::kFloat32, ir::MemoryScope::kShared),
          ir::AllocateNode::Make(
              Decl("acc", {1, 1, 4}, ir::ScalarType::kFloat32, ir::MemoryScope::kLocal),
              Seq({mma, St("C", {C(0)}, Ld("acc", {C(0), C(0), C(0)}))}))));
  const ir::LoopNest nest{"host_mma", {Decl("C", {1})}, 0, body};
  EXPECT_THAT(CompileForHost(nest),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("warp mma is GPU-only")));
}

TEST(WarpMmaErrorTest, SingleWellFormedMmaCompiles) {
  absl::StatusOr<GpuModule> m = CompileToPtx(
      SingleMmaNest(ir::MemoryScope::kShared, ir::ScalarType::kFloat16, {1, 1, 4}), {});
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(Count(m->ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), 1);
  // A .x4 for A and a .x2 for the single B fragment.
  EXPECT_EQ(Count(m->ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"), 1);
  EXPECT_EQ(Count(m->ptx, "ldmatrix.sync.aligned.m8n8.x2.shared.b16"), 1);
  ExpectPtxasAccepts(m->ptx, "warp_mma_single");
}

TEST(WarpMmaErrorTest, OperandOutsideSharedMemoryIsInvalidArgument) {
  EXPECT_THAT(
      CompileToPtx(SingleMmaNest(ir::MemoryScope::kLocal, ir::ScalarType::kFloat16, {1, 1, 4}), {}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("operand A 'A_s' is in local memory; mma operands are shared buffers")));
}

TEST(WarpMmaErrorTest, OperandOfTheWrongDtypeIsInvalidArgument) {
  EXPECT_THAT(
      CompileToPtx(SingleMmaNest(ir::MemoryScope::kShared, ir::ScalarType::kBFloat16, {1, 1, 4}),
                   {}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("operand A 'A_s' is bfloat16 but mma kind f16 reads float16")));
}

TEST(WarpMmaErrorTest, MisShapedAccumulatorIsInvalidArgument) {
  EXPECT_THAT(
      CompileToPtx(SingleMmaNest(ir::MemoryScope::kShared, ir::ScalarType::kFloat16, {1, 4}), {}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("the accumulator 'acc' must be a local float32[1, 1, 4] buffer")));
}

TEST(WarpMmaErrorTest, TileLargerThanItsBufferIsInvalidArgument) {
  EXPECT_THAT(
      CompileToPtx(SingleMmaNest(ir::MemoryScope::kShared, ir::ScalarType::kFloat16, {1, 1, 4}, 4),
                   {}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("operand B 'B_s' cannot hold its 8x16 tile")));
}

}  // namespace
}  // namespace tilesearch::codegen
