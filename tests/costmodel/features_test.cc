// Per-store features checked against values computed by hand from the feature definitions in
// costmodel/features.h (never copied from the extractor's output).
#include "costmodel/features.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/lower_naive.h"
#include "ir/ops/registry.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"

namespace tilesearch::costmodel {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

constexpr int kPosNone = 3, kPosInnerSpatial = 4;
// Offset of entry `i` of buffer group `b`.
int Buf(int b, int i) { return kBufferOffset + kBufferFeatures * b + i; }
enum BufEntry {
  kRead = 0,
  kWrite,
  kReadWrite,
  kBytes,
  kUniqueBytes,
  kLines,
  kUniqueLines,
  kReuseLoop,
  kReuseSerial,
  kReuseNone,
  kReuseDisIter,
  kReuseDisBytes,
  kReuseCt,
  kBytesDReuse,
  kUniqueBytesDReuse,
  kLinesDReuse,
  kUniqueLinesDReuse,
  kStride
};

FeatureOptions Raw() {
  FeatureOptions o;
  o.log_scale = false;
  return o;
}

ir::Stmt Loop(const char* var, int64_t extent, ir::Stmt body,
              ir::ForKind kind = ir::ForKind::kSerial) {
  return ir::ForNode::Make(ir::MakeVar(var), ir::IntConst(0), ir::IntConst(extent), kind,
                           std::move(body));
}

// B[i, j] = A[i, j] over 8 x 32 float32 on the CPU.
ir::LoopNest Copy2D(ir::ForKind inner_kind = ir::ForKind::kSerial) {
  ir::Expr i = ir::MakeVar("i"), j = ir::MakeVar("j");
  ir::LoopNest nest;
  nest.name = "copy";
  nest.params = {{"A", ir::ScalarType::kFloat32, {8, 32}},
                 {"B", ir::ScalarType::kFloat32, {8, 32}}};
  nest.num_inputs = 1;
  nest.body = Loop("i", 8,
                   Loop("j", 32,
                        ir::StoreNode::Make(
                            "B", {i, j}, ir::LoadNode::Make(ir::ScalarType::kFloat32, "A", {i, j})),
                        inner_kind));
  return nest;
}

TEST(FeatureNamesTest, OneUniqueNamePerFeature) {
  const auto& names = FeatureNames();
  ASSERT_EQ(names.size(), static_cast<size_t>(kNumFeatures));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_EQ(names[0], "float_addsub");
  EXPECT_EQ(names[kGpuOffset + 4], "threadIdx_x_len");
  EXPECT_EQ(names[Buf(2, kReuseDisBytes)], "buf2_reuse_dis_bytes");
  EXPECT_EQ(names[kIntensityOffset + 9], "ai_curve_9");
  EXPECT_EQ(names[kOuterOffset + 2], "auto_unroll_max_step");
}

TEST(ExtractFeaturesTest, Copy2DCountsBytesLinesAndNoReuse) {
  auto rows = ExtractFeatures(Copy2D(), Target::HostCpu(), Raw());
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  const std::vector<float>& f = (*rows)[0];
  ASSERT_EQ(f.size(), static_cast<size_t>(kNumFeatures));
  for (int k = 0; k < 12; ++k) EXPECT_EQ(f[k], 0) << FeatureNames()[k];
  EXPECT_EQ(f[kVectorizeOffset + kPosNone], 1);
  EXPECT_EQ(f[kVectorizeOffset], 0);
  EXPECT_EQ(f[kGpuOffset], 0);
  EXPECT_EQ(f[kGpuOffset + 4], 1);  // no threadIdx loop: extent 1
  // A and B move the same bytes and lines: sorted by name, A first.
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(f[Buf(b, b == 0 ? kRead : kWrite)], 1);
    EXPECT_EQ(f[Buf(b, kBytes)], 8 * 32 * 4);
    EXPECT_EQ(f[Buf(b, kUniqueBytes)], 8 * 32 * 4);
    // j sweeps 32 consecutive floats = 128 B = 2 lines of 64 B, for each of 8 rows.
    EXPECT_EQ(f[Buf(b, kLines)], 16);
    EXPECT_EQ(f[Buf(b, kUniqueLines)], 1024 / 64);
    EXPECT_EQ(f[Buf(b, kReuseNone)], 1);
    EXPECT_EQ(f[Buf(b, kReuseCt)], 0);
    EXPECT_EQ(f[Buf(b, kBytesDReuse)], 1024);
    EXPECT_EQ(f[Buf(b, kStride)], 1);
  }
  for (int b = 2; b < kMaxBuffers; ++b) EXPECT_EQ(f[Buf(b, kBytes)], 0);
  for (int j = 0; j < 10; ++j) EXPECT_EQ(f[kIntensityOffset + j], 0);  // no float ops
  EXPECT_EQ(f[kOuterOffset], 256);
  EXPECT_EQ(f[kOuterOffset + 1], 2);
}

TEST(ExtractFeaturesTest, VectorizedInnerLoopIsInnerSpatial) {
  auto rows = ExtractFeatures(Copy2D(ir::ForKind::kVectorized), Target::HostCpu(), Raw());
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::vector<float>& f = (*rows)[0];
  EXPECT_EQ(f[kVectorizeOffset + 0], 1);
  EXPECT_EQ(f[kVectorizeOffset + 1], 32);
  EXPECT_EQ(f[kVectorizeOffset + 2], 32);
  EXPECT_EQ(f[kVectorizeOffset + kPosInnerSpatial], 1);
  EXPECT_EQ(f[kVectorizeOffset + kPosNone], 0);
  EXPECT_EQ(f[kUnrollOffset + kPosNone], 1);
}

TEST(ExtractFeaturesTest, GpuTargetUses128ByteLines) {
  auto rows = ExtractFeatures(Copy2D(), Target::H200(), Raw());
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::vector<float>& f = (*rows)[0];
  EXPECT_EQ(f[kGpuOffset], 1);
  EXPECT_EQ(f[Buf(0, kLines)], 8);  // 128 B per row = one 128 B line
  EXPECT_EQ(f[Buf(0, kUniqueLines)], 1024 / 128);
}

TEST(ExtractFeaturesTest, DefaultScalingIsLog2OnePlusRaw) {
  auto raw = ExtractFeatures(Copy2D(ir::ForKind::kVectorized), Target::HostCpu(), Raw());
  auto scaled = ExtractFeatures(Copy2D(ir::ForKind::kVectorized), Target::HostCpu());
  ASSERT_TRUE(raw.ok() && scaled.ok());
  for (int k = 0; k < kNumFeatures; ++k) {
    EXPECT_FLOAT_EQ((*scaled)[0][k], static_cast<float>(std::log2(1.0 + (*raw)[0][k])))
        << FeatureNames()[k];
  }
}

// Naive matmul C[16, 8] = A[16, 32] B[32, 8]: loops i(16), j(8) {C = 0; k(32) {C += A*B}}.
class NaiveMatmulFeatures : public ::testing::Test {
 protected:
  void SetUp() override {
    ir::OpArgs args;
    args.shapes = {{16, 32}, {32, 8}};
    auto dag = ir::BuildOp("matmul", args);
    ASSERT_TRUE(dag.ok()) << dag.status();
    auto nest = ir::LowerNaive(*dag);
    ASSERT_TRUE(nest.ok()) << nest.status();
    auto rows = ExtractFeatures(*nest, Target::HostCpu(), Raw());
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 2u);
    init_ = (*rows)[0];
    update_ = (*rows)[1];
  }
  std::vector<float> init_, update_;
};

TEST_F(NaiveMatmulFeatures, OpCountsAreOneAddAndOneMulPerIteration) {
  const double mnk = 16 * 8 * 32;
  EXPECT_EQ(update_[0], mnk);  // float add
  EXPECT_EQ(update_[1], mnk);  // float mul
  for (int k = 2; k < 12; ++k) EXPECT_EQ(update_[k], 0) << FeatureNames()[k];
  for (int k = 0; k < 12; ++k) EXPECT_EQ(init_[k], 0) << FeatureNames()[k];
  EXPECT_EQ(update_[kOuterOffset], mnk);
  EXPECT_EQ(update_[kOuterOffset + 1], 3);
  EXPECT_EQ(init_[kOuterOffset], 16 * 8);
  EXPECT_EQ(init_[kOuterOffset + 1], 2);
}

TEST_F(NaiveMatmulFeatures, BuffersSortedByBytesThenLines) {
  // C is read and written (2 accesses): 2 * 4 * MNK bytes. A and B move 4 * MNK bytes each; B
  // (stride 8 floats = 32 B along k) moves more lines than A (stride 1), so the order is C, B, A.
  EXPECT_EQ(update_[Buf(0, kReadWrite)], 1);
  EXPECT_EQ(update_[Buf(0, kBytes)], 2 * 4 * 4096);
  EXPECT_EQ(update_[Buf(1, kRead)], 1);
  EXPECT_EQ(update_[Buf(1, kBytes)], 4 * 4096);
  EXPECT_EQ(update_[Buf(1, kStride)], 8);
  EXPECT_EQ(update_[Buf(2, kStride)], 1);
  // Lines: B: one k sweep = 32 steps of 32 B = 16 lines, per (i, j): 16 * 128.
  EXPECT_EQ(update_[Buf(1, kLines)], 16 * 16 * 8);
  // A: one k sweep = 128 B = 2 lines, per (i, j).
  EXPECT_EQ(update_[Buf(2, kLines)], 2 * 16 * 8);
  // C: k does not move it; a j sweep is 32 B (one line), per i.
  EXPECT_EQ(update_[Buf(0, kLines)], 16);
  EXPECT_EQ(update_[Buf(0, kUniqueBytes)], 16 * 8 * 4);
  EXPECT_EQ(update_[Buf(1, kUniqueBytes)], 32 * 8 * 4);
  EXPECT_EQ(update_[Buf(2, kUniqueBytes)], 16 * 32 * 4);
  EXPECT_EQ(update_[Buf(2, kUniqueLines)], 16 * 32 * 4 / 64);
}

TEST_F(NaiveMatmulFeatures, ReuseOfABAndC) {
  // C[i, j]: k does not touch it: reused 32 times, every iteration; one iteration of k's body
  // touches one element of each of A, B, C.
  EXPECT_EQ(update_[Buf(0, kReuseLoop)], 1);
  EXPECT_EQ(update_[Buf(0, kReuseCt)], 32);
  EXPECT_EQ(update_[Buf(0, kReuseDisIter)], 1);
  EXPECT_EQ(update_[Buf(0, kReuseDisBytes)], 12);
  // B[k, j]: i does not touch it: reused 16 times, 8 * 32 iterations apart; an i iteration touches
  // A[i, 0:32], B[0:32, 0:8], C[i, 0:8].
  EXPECT_EQ(update_[Buf(1, kReuseLoop)], 1);
  EXPECT_EQ(update_[Buf(1, kReuseCt)], 16);
  EXPECT_EQ(update_[Buf(1, kReuseDisIter)], 8 * 32);
  EXPECT_EQ(update_[Buf(1, kReuseDisBytes)], 4 * (32 + 32 * 8 + 8));
  EXPECT_EQ(update_[Buf(1, kBytesDReuse)], 4 * 4096 / 16);
  // A[i, k]: j does not touch it: reused 8 times, 32 iterations apart; a j iteration touches
  // A[i, 0:32], B[0:32, j], C[i, j].
  EXPECT_EQ(update_[Buf(2, kReuseLoop)], 1);
  EXPECT_EQ(update_[Buf(2, kReuseCt)], 8);
  EXPECT_EQ(update_[Buf(2, kReuseDisIter)], 32);
  EXPECT_EQ(update_[Buf(2, kReuseDisBytes)], 4 * (32 + 32 + 1));
  // The init store writes C once per (i, j): no reuse.
  EXPECT_EQ(init_[Buf(0, kWrite)], 1);
  EXPECT_EQ(init_[Buf(0, kReuseNone)], 1);
  EXPECT_EQ(init_[Buf(1, kBytes)], 0);
}

TEST_F(NaiveMatmulFeatures, ArithmeticIntensityCurve) {
  // Points (log2 iterations, flops / bytes): no loop: (0, 2/12); k: (5, 64/260);
  // j,k: (8, 512/(4*(32+256+8))); i,j,k: (12, 8192/(4*(512+256+128))). Samples at 1.2 (j+1).
  const double y3 = 2.0 / 12, y2 = 64.0 / 260, y1 = 512.0 / (4 * (32 + 256 + 8)),
               y0 = 8192.0 / (4 * (512 + 256 + 128));
  EXPECT_NEAR(update_[kIntensityOffset + 3], y3 + (y2 - y3) * 4.8 / 5, 1e-5);
  EXPECT_NEAR(update_[kIntensityOffset + 5], y2 + (y1 - y2) * (7.2 - 5) / 3, 1e-5);
  EXPECT_NEAR(update_[kIntensityOffset + 6], y1 + (y0 - y1) * (8.4 - 8) / 4, 1e-5);
  EXPECT_NEAR(update_[kIntensityOffset + 9], y0, 1e-5);
}

// The Ansor-style GPU matmul 128^3 (examples/schedules): blockIdx.x 4, vthread 4, threadIdx.x
// 128, A and B tiles in shared memory, C.local (4 x 2 floats) per thread, auto_unroll 16 on C.
class GpuMatmulFeatures : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = schedule::ScheduleFile::Load(std::string(TS_EXAMPLE_SCHEDULES_DIR) +
                                             "/matmul_cuda_sssrrsrs.json");
    ASSERT_TRUE(file.ok()) << file.status();
    auto resolved = file->Resolve();
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    // The five stores below are those of the unpipelined nest: software pipelining (on by
    // default) would add the register-staging stores of the two shared fills.
    schedule::PragmaStep off;
    off.stage_id = resolved->state.StageId("C");
    off.software_pipeline = 0;
    auto state = schedule::ApplyStep(resolved->state, off);
    ASSERT_TRUE(state.ok()) << state.status();
    resolved->state = *state;
    auto rows = ExtractStateFeatures(resolved->dag, resolved->state, file->target);
    ASSERT_TRUE(rows.ok()) << rows.status();
    scaled_ = *rows;
    auto kernel = schedule::Lower(resolved->dag, resolved->state, file->target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    FeatureOptions raw = Raw();
    raw.auto_unroll_max_step["C"] = 16;
    auto raw_rows = ExtractFeatures(kernel->nest, file->target, raw);
    ASSERT_TRUE(raw_rows.ok()) << raw_rows.status();
    rows_ = *raw_rows;
  }
  // The row whose first buffer group is the store's own buffer with the given bytes.
  std::vector<std::vector<float>> rows_, scaled_;
};

TEST_F(GpuMatmulFeatures, FiveStoresWithBindings) {
  // C.local init, A.shared fill, B.shared fill, C.local update, C write-back.
  ASSERT_EQ(rows_.size(), 5u);
  ASSERT_EQ(scaled_.size(), 5u);
  for (const auto& f : rows_) {
    EXPECT_EQ(f[kGpuOffset], 1);
    EXPECT_EQ(f[kGpuOffset + 1], 4);    // blockIdx.x
    EXPECT_EQ(f[kGpuOffset + 2], 1);    // blockIdx.y
    EXPECT_EQ(f[kGpuOffset + 4], 128);  // threadIdx.x
    // No vthread loop is left in the nest: lowering injects the 4 virtual threads as unrolled
    // loops at the innermost level (schedule/inject_vthread.cc).
    EXPECT_EQ(f[kGpuOffset + 7], 1);                      // vthread
    EXPECT_EQ(f[kAllocationOffset + 2], 2 * 64 * 8 * 4);  // A.shared + B.shared in scope
  }
}

TEST_F(GpuMatmulFeatures, UpdateDoesMnkMultiplyAdds) {
  const std::vector<float>& f = rows_[3];
  // Every (i, j, k) of the 128^3 matmul is one add and one multiply.
  EXPECT_EQ(f[0], 128.0 * 128 * 128);
  EXPECT_EQ(f[1], 128.0 * 128 * 128);
  // C.local: 4 x 2 floats per virtual thread, one copy for each of the 4 virtual threads.
  EXPECT_EQ(f[kAllocationOffset + 0], 4 * 4 * 2 * 4);  // writes C.local
  EXPECT_EQ(f[kAllocationOffset + 1], 4 * 128);        // one C.local per thread (4 blocks)
  EXPECT_EQ(f[kAllocationOffset + 3], 4 * 4 * 2 * 4);  // C.local in scope
  EXPECT_EQ(f[kOuterOffset + 2], 0);
}

TEST_F(GpuMatmulFeatures, WriteBackIsUnrolledAndCarriesThePragma) {
  const std::vector<float>& f = rows_[4];
  EXPECT_EQ(f[kOuterOffset], 128 * 128);  // each element of C written once
  EXPECT_EQ(f[Buf(0, kBytes)], 128 * 128 * 4);
  // i.3 (4) and j.3 (2) unrolled by the pragma, and the 4 virtual threads innermost.
  EXPECT_EQ(f[kUnrollOffset + 0], 3);
  EXPECT_EQ(f[kUnrollOffset + 1], 4 * 2 * 4);
  EXPECT_EQ(f[kUnrollOffset + 2], 4);
  EXPECT_EQ(f[kUnrollOffset + kPosInnerSpatial], 1);
  EXPECT_EQ(f[kOuterOffset + 2], 16);
  EXPECT_FLOAT_EQ(scaled_[4][kOuterOffset + 2], std::log2(17.0f));
}

TEST_F(GpuMatmulFeatures, SharedFillRunsOncePerThreadIndex) {
  // The A.shared fill: threadIdx.x (128) nested in the compute's threadIdx.x counts once.
  // Blocks (4) x k.0 (16) x ax0_ax1.0 (4) x 128 threads: once per reduction step, not once per
  // virtual thread (which would be 4x more).
  const std::vector<float>& f = rows_[1];
  EXPECT_EQ(f[kOuterOffset], 4.0 * 16 * 4 * 128);
  EXPECT_EQ(f[kGpuOffset + 4], 128);
}

TEST(ExtractFeaturesTest, UnknownBufferIsAnError) {
  ir::LoopNest nest = Copy2D();
  nest.params.pop_back();
  EXPECT_THAT(ExtractFeatures(nest, Target::HostCpu()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown buffer 'B'")));
}

}  // namespace
}  // namespace tilesearch::costmodel
