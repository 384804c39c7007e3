// Group 8 of the features (the kernel launch against the SMs) checked against counts made by hand
// from the grid, block and buffers of small kernels and the sm_90 limits in costmodel/features.h.
#include <cmath>
#include <string>
#include <vector>

#include "costmodel/features.h"
#include "gtest/gtest.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"

namespace tilesearch::costmodel {
namespace {

enum LaunchEntry {
  kBlocks = kLaunchOffset,
  kThreads,
  kSharedBytes,
  kRegisters,
  kResident,
  kOccupancy,
  kBlocksPerSmCount,
  kWaves,
  kLastWaveFill,
  kFloatOpsPerBlock,
  kGlobalBytesPerBlock,
  kKTiles,
  kPipelineStages,
  kStagesPerKTile,
};

ir::Stmt Loop(const char* var, int64_t extent, ir::Stmt body, ir::ForKind kind) {
  return ir::ForNode::Make(ir::MakeVar(var), ir::IntConst(0), ir::IntConst(extent), kind,
                           std::move(body));
}

// B[b * 256 + t] = A[b * 256 + t] + 1 over `blocks` blocks of 256 threads, inside a shared
// Allocate of `shared_floats` floats (never accessed: it only takes shared memory).
ir::LoopNest ScaledCopy(int64_t blocks, int64_t shared_floats) {
  const ir::Expr b = ir::MakeVar("b"), t = ir::MakeVar("t");
  const ir::Expr i = b * ir::IntConst(256) + t;
  ir::LoopNest nest;
  nest.name = "copy";
  nest.params = {{"A", ir::ScalarType::kFloat32, {blocks * 256}},
                 {"B", ir::ScalarType::kFloat32, {blocks * 256}}};
  nest.num_inputs = 1;
  const ir::Stmt store = ir::StoreNode::Make(
      "B", {i}, ir::LoadNode::Make(ir::ScalarType::kFloat32, "A", {i}) + ir::FloatConst(1.0f));
  const ir::Stmt threads = Loop("t", 256, store, ir::ForKind::kThreadIdxX);
  const ir::BufferDecl scratch{
      "S", ir::ScalarType::kFloat32, {shared_floats}, ir::MemoryScope::kShared};
  nest.body = Loop("b", blocks, ir::AllocateNode::Make(scratch, threads), ir::ForKind::kBlockIdxX);
  return nest;
}

FeatureOptions Raw() {
  FeatureOptions o;
  o.log_scale = false;
  return o;
}

TEST(LaunchFeatures, SharedMemoryLimitsResidentBlocksAndSetsTheWaves) {
  // 2200 blocks of 256 threads (8 warps), 48 KiB of shared memory each: 233472 / (49152 + 1024)
  // = 4 blocks per SM by shared memory (warps: 64 / 8 = 8; registers: 32 per thread, 1024 per
  // warp, 65536 / 8192 = 8), so a wave is 132 x 4 = 528 blocks: 2200 = 4 x 528 + 88.
  auto rows = ExtractFeatures(ScaledCopy(2200, 12288), Target::H200(), Raw());
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  const std::vector<float>& f = (*rows)[0];
  EXPECT_EQ(f[kBlocks], 2200);
  EXPECT_EQ(f[kThreads], 256);
  EXPECT_EQ(f[kSharedBytes], 49152);
  EXPECT_EQ(f[kRegisters], 32);
  EXPECT_EQ(f[kResident], 4);
  EXPECT_FLOAT_EQ(f[kOccupancy], 4.0f * 8 / 64);
  EXPECT_FLOAT_EQ(f[kBlocksPerSmCount], 2200.0f / 132);
  EXPECT_EQ(f[kWaves], 5);
  EXPECT_FLOAT_EQ(f[kLastWaveFill], 88.0f / 528);
  // One float add per element, 256 per block; 4 bytes read and 4 written per element.
  EXPECT_FLOAT_EQ(f[kFloatOpsPerBlock], 256);
  EXPECT_FLOAT_EQ(f[kGlobalBytesPerBlock], 256 * 8);
  EXPECT_EQ(f[kKTiles], 1);
  EXPECT_EQ(f[kPipelineStages], 0);
}

TEST(LaunchFeatures, ThreadsLimitResidentBlocksWithoutSharedMemory) {
  // No shared memory (an Allocate of 1 float is 4 bytes: 233472 / 1028 = 227 blocks, no limit):
  // 8 blocks per SM by warps and registers, 1056 per wave; 300 blocks fill one wave partly.
  auto rows = ExtractFeatures(ScaledCopy(300, 1), Target::H200(), Raw());
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::vector<float>& f = (*rows)[0];
  EXPECT_EQ(f[kResident], 8);
  EXPECT_EQ(f[kWaves], 1);
  EXPECT_FLOAT_EQ(f[kLastWaveFill], 300.0f / 1056);
  EXPECT_FLOAT_EQ(f[kOccupancy], 1.0f);
}

TEST(LaunchFeatures, HostTargetsHaveNone) {
  Target cpu = Target::HostCpu();
  auto rows = ExtractFeatures(ScaledCopy(4, 1), cpu, Raw());
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (int i = kLaunchOffset; i < kNumFeatures; ++i) EXPECT_EQ((*rows)[0][i], 0) << i;
}

// The tiled 128^3 matmul of examples/schedules (4 blocks of 128 threads, 64 x 8 A and B tiles in
// shared memory, 4 x 4 x 2 accumulators per thread, 16 k tiles), lowered with the given pipeline.
class MatmulLaunch : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    auto file = schedule::ScheduleFile::Load(std::string(TS_EXAMPLE_SCHEDULES_DIR) +
                                             "/matmul_cuda_sssrrsrs.json");
    ASSERT_TRUE(file.ok()) << file.status();
    auto resolved = file->Resolve();
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    schedule::PragmaStep pipeline;
    pipeline.stage_id = resolved->state.StageId("C");
    pipeline.software_pipeline = GetParam();
    auto state = schedule::ApplyStep(resolved->state, pipeline);
    ASSERT_TRUE(state.ok()) << state.status();
    auto kernel = schedule::Lower(resolved->dag, *state, file->target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    ASSERT_EQ(kernel->launches.size(), 1u);
    shared_bytes_ = static_cast<double>(kernel->launches[0].shared_memory_bytes);
    auto rows = ExtractLoweredFeatures(*state, *kernel, file->target);
    ASSERT_TRUE(rows.ok()) << rows.status();
    rows_ = *rows;
  }
  double shared_bytes_ = 0;
  std::vector<std::vector<float>> rows_;
};

TEST_P(MatmulLaunch, EveryStoreSeesTheKernelsLaunch) {
  // Registers: 32 accumulators + 32 = 64 per thread, 2048 per warp, 4 warps: 65536 / 8192 = 8
  // blocks per SM (warps allow 16, shared memory at least 40): one wave of 4 blocks. The
  // pipeline stages each thread's next A and B elements in registers (64 x 8 / 128 = 4 of each):
  // 72 registers, 2304 per warp, 65536 / 9216 = 7 blocks per SM.
  const double regs = GetParam() == 0 ? 64 : 72;
  const double resident = GetParam() == 0 ? 8 : 7;
  ASSERT_FALSE(rows_.empty());
  for (const auto& f : rows_) {
    EXPECT_FLOAT_EQ(f[kBlocks], LogScale(4));
    EXPECT_FLOAT_EQ(f[kThreads], LogScale(128));
    EXPECT_FLOAT_EQ(f[kSharedBytes], LogScale(shared_bytes_));
    EXPECT_FLOAT_EQ(f[kRegisters], LogScale(regs));
    EXPECT_FLOAT_EQ(f[kResident], LogScale(resident));
    EXPECT_FLOAT_EQ(f[kOccupancy], LogScale(resident * 4 / 64));
    EXPECT_FLOAT_EQ(f[kWaves], LogScale(1));
    EXPECT_FLOAT_EQ(f[kLastWaveFill], LogScale(4.0 / (132 * resident)));
    EXPECT_FLOAT_EQ(f[kPipelineStages], LogScale(GetParam()));
  }
}

TEST_P(MatmulLaunch, TheUpdateDoesAQuarterOfTheFlopsPerBlockOverSixteenKTiles) {
  // The update row: the one with 2 x 128^3 float ops (an add and a multiply per (i, j, k)).
  int found = 0;
  for (const auto& f : rows_) {
    if (f[0] != LogScale(128.0 * 128 * 128) || f[1] != LogScale(128.0 * 128 * 128)) continue;
    ++found;
    EXPECT_FLOAT_EQ(f[kFloatOpsPerBlock], LogScale(2.0 * 128 * 128 * 128 / 4));
    EXPECT_FLOAT_EQ(f[kGlobalBytesPerBlock], 0);  // shared and local operands only
    EXPECT_FLOAT_EQ(f[kKTiles], LogScale(16));
    EXPECT_FLOAT_EQ(f[kStagesPerKTile], LogScale(GetParam() / 16.0));
  }
  EXPECT_EQ(found, 1);
}

INSTANTIATE_TEST_SUITE_P(Pipelines, MatmulLaunch, ::testing::Values(0, 2));

}  // namespace
}  // namespace tilesearch::costmodel
