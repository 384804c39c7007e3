// cp.async in the PTX of the multi-stage shared-tile pipeline (software_pipeline$3 / $4): async
// copies of 16-byte vectors become cp.async.cg.shared.global, of 8-byte vectors
// cp.async.ca.shared.global, commits cp.async.commit_group and waits cp.async.wait_group S-2;
// ptxas -arch=sm_90 assembles the kernels (skipped where ptxas is absent). The host compiler
// rejects async copies. The hand schedules bench/schedules/matmul_cuda_4096_128x128_cp_async{3,4}
// compile with cp.async.
#include <filesystem>
#include <string>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/stmt.h"
#include "nlohmann/json.hpp"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::codegen {
namespace {

using testing::CompileScheduleText;
using testing::Count;
using testing::ExpectPtxasAccepts;
using ::testing::HasSubstr;

// `ptx` without tabs (the NVPTX printer separates opcodes and operands by one).
std::string Untabbed(const std::string& ptx) {
  std::string out;
  for (char c : ptx) {
    if (c != '\t') out.push_back(c);
  }
  return out;
}
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

// The hand-written 4096^3 structure (bench/schedules/matmul_cuda_4096_128x128.json) on 128x128x256,
// fetch vectors of `vector` floats, pipeline pragma software_pipeline$`stages` (without the
// unroll pragma: smaller code, faster to compile).
std::string HandMatmulText(int stages, int vector) {
  nlohmann::json steps = nlohmann::json::parse(R"([
    ["CHW", 2, "local"], ["SP", 2, 0, 128, [2, 16, 1, 4], 1], ["SP", 2, 5, 128, [2, 16, 1, 4], 1],
    ["SP", 2, 10, 256, [8, 4], 1], ["RE", 2, [0, 5, 1, 6, 2, 7, 10, 11, 3, 8, 12, 4, 9]],
    ["FSP", 3, 0, 1, 3], ["FSP", 3, 4, 2, 3], ["RE", 3, [0, 4, 1, 5, 2, 6, 3, 7]],
    ["CA", 2, 3, 5], ["CHR", 1, "shared", [2]], ["CA", 2, 3, 6], ["CHR", 0, "shared", [3]],
    ["CA", 1, 4, 6], ["FU", 5, [0, 1]], ["FU", 5, [1, 2]], ["FU", 5, [2, 3]], ["AN", 5, 0, 5],
    ["AN", 5, 1, 4], ["AN", 5, 2, 6], ["FU", 3, [0, 1]], ["SP", 3, 0, 0, [4], 1],
    ["AN", 3, 1, 2], ["FFSP", 3, 0, [1, 2], 1, 1], ["AN", 3, 1, 6], ["FU", 1, [0, 1]],
    ["SP", 1, 0, 0, [4], 1], ["AN", 1, 1, 2], ["FFSP", 1, 0, [1, 2], 1, 1], ["AN", 1, 1, 6]])");
  steps[20][4] = {vector};
  steps[25][4] = {vector};
  steps.push_back({"PR", 4, 0, "software_pipeline$" + std::to_string(stages)});
  nlohmann::json file = {
      {"version", 1},
      {"workload", {{"op", "matmul"}, {"shapes", {{128, 256}, {256, 128}}}, {"dtype", "float32"}}},
      {"target", "cuda -arch=sm_90"},
      {"steps", steps}};
  return file.dump();
}

TEST(AsyncCopyPtx, SixteenByteCopiesCommitsAndWaits) {
  for (int stages : {3, 4}) {
    absl::StatusOr<testing::CompiledSchedule> c = CompileScheduleText(HandMatmulText(stages, 4));
    ASSERT_THAT(c, IsOk());
    const std::string ptx = Untabbed(c->ptx);
    EXPECT_GT(Count(ptx, "cp.async.cg.shared.global"), 0) << ptx;
    EXPECT_EQ(Count(ptx, "cp.async.ca.shared.global"), 0);
    EXPECT_THAT(ptx, HasSubstr(", 16;"));
    // The prologue's S-1 commits and the loop's one (loops may be unrolled: at least S).
    EXPECT_GE(Count(ptx, "cp.async.commit_group"), stages) << ptx;
    EXPECT_GE(Count(ptx, "cp.async.wait_group " + std::to_string(stages - 2) + ";"), 1) << ptx;
    // The staged register copies of the other pipelines are gone: no st.shared in the fetches
    // (the compute only reads shared memory).
    EXPECT_EQ(Count(ptx, "st.shared"), 0) << ptx;
    ExpectPtxasAccepts(c->ptx, "async_copy_matmul_s" + std::to_string(stages));
  }
}

TEST(AsyncCopyPtx, EightByteCopiesUseTheCaVariant) {
  absl::StatusOr<testing::CompiledSchedule> c = CompileScheduleText(HandMatmulText(3, 2));
  ASSERT_THAT(c, IsOk());
  EXPECT_GT(Count(c->ptx, "cp.async.ca.shared.global"), 0) << c->ptx;
  EXPECT_EQ(Count(c->ptx, "cp.async.cg.shared.global"), 0);
  EXPECT_THAT(c->ptx, HasSubstr(", 8;"));
  ExpectPtxasAccepts(c->ptx, "async_copy_matmul_v2");
}

TEST(AsyncCopyPtx, HostCompilerRejectsAsyncCopies) {
  // S[i] = async_copy G[i]; commit; wait 0; O[i] = S[i]
  ir::Expr i = ir::MakeVar("i");
  const ir::BufferDecl g{"G", ir::ScalarType::kFloat32, {16}, ir::MemoryScope::kGlobal};
  const ir::BufferDecl o{"O", ir::ScalarType::kFloat32, {16}, ir::MemoryScope::kGlobal};
  const ir::BufferDecl s{"S", ir::ScalarType::kFloat32, {16}, ir::MemoryScope::kShared};
  auto load = [&](const std::string& b) {
    return ir::LoadNode::Make(ir::ScalarType::kFloat32, b, {i});
  };
  ir::LoopNest nest;
  nest.name = "async_host";
  nest.params = {g, o};
  nest.num_inputs = 1;
  nest.body = ir::AllocateNode::Make(
      s, ir::SeqNode::Make(
             {ir::ForNode::Make(i, ir::IntConst(0), ir::IntConst(16), ir::ForKind::kSerial,
                                ir::StoreNode::Make("S", {i}, load("G"), /*async_copy=*/true)),
              ir::AsyncGroupNode::Commit(), ir::AsyncGroupNode::Wait(0),
              ir::ForNode::Make(i, ir::IntConst(0), ir::IntConst(16), ir::ForKind::kSerial,
                                ir::StoreNode::Make("O", {i}, load("S")))}));
  EXPECT_THAT(CompileForHost(nest).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("GPU-only")));
  // The same nest on the GPU: scalar 4-byte copies (.ca).
  absl::StatusOr<GpuModule> m = CompileToPtx(nest, {});
  ASSERT_THAT(m, IsOk());
  EXPECT_GT(Count(m->ptx, "cp.async.ca.shared.global"), 0) << m->ptx;
  EXPECT_THAT(Untabbed(m->ptx), HasSubstr("cp.async.wait_group 0;"));
  ExpectPtxasAccepts(m->ptx, "async_copy_scalar");
}

// The 128x128 hand schedules with 3- and 4-stage cp.async rings.
TEST(AsyncCopyPtx, HandPipelineSchedulesCompileWithCpAsync) {
  const std::filesystem::path dir = std::filesystem::path(TS_BENCH_SCHEDULES_DIR);
  for (const char* name :
       {"matmul_cuda_4096_128x128_cp_async3.json", "matmul_cuda_4096_128x128_cp_async4.json"}) {
    const std::filesystem::path f = dir / name;
    absl::StatusOr<std::string> text = testing::ReadTextFile(f.string());
    ASSERT_THAT(text, IsOk());
    absl::StatusOr<testing::CompiledSchedule> c = CompileScheduleText(*text);
    ASSERT_THAT(c, IsOk()) << f;
    EXPECT_GT(Count(c->ptx, "cp.async.cg.shared.global"), 0) << f;
    EXPECT_GT(Count(c->ptx, "cp.async.wait_group"), 0) << f;
    ExpectPtxasAccepts(c->ptx, f.stem().string());
  }
}

}  // namespace
}  // namespace tilesearch::codegen
