// Warp-shuffle code generation for lowered cross-thread reductions (codegen/emitter.h, "warp
// exchanges"): each butterfly window becomes one shfl.sync.bfly (two for 64-bit values) and no
// barrier; thread counts that are not a multiple of the warp, or do not cover blockDim.x, keep
// the shared-memory form. The one-pass softmax schedule (bench/schedules/) reads each input
// element once with 16-byte loads; a bfloat16 softmax whose row split has a vector part moves its
// rows in 16-byte vectors. PTX passes ptxas (skipped where it is absent).
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::codegen {
namespace {

using testing::Count;
using ::testing::HasSubstr;
using ::testing::Not;
using ::tilesearch::testing::IsOk;

using Compiled = testing::CompiledSchedule;

// Lowers a schedule file's text and compiles it (its launches, or `block_x` threads when > 0).
absl::StatusOr<Compiled> Compile(const std::string& text, int64_t block_x = 0) {
  return testing::CompileScheduleText(text, block_x);
}

void ExpectPtxasAccepts(const std::string& ptx) {
  testing::ExpectPtxasAccepts(ptx, "warp_shuffle_test");
}

// reduce_<op> over axis 1 of [rows, cols], one row per block, `threads` on threadIdx.x.
std::string RowReduce(const std::string& op, const std::string& dtype, int64_t cols,
                      int64_t threads) {
  return absl::StrCat(R"({"version": 1, "workload": {"op": ")", op, R"(", "shapes": [[4, )", cols,
                      R"(]], "dtype": ")", dtype,
                      R"(", "attrs": {"axes": "1"}}, "target": "cuda -arch=sm_90", "steps": [)",
                      R"(["SP", 1, 1, )", cols, ", [", threads, R"(], 1], ["AN", 1, 0, 5],)",
                      R"( ["AN", 1, 2, 6]]})");
}

TEST(WarpShufflePtxTest, EightWarpSumIsEightShufflesAndOneBarrier) {
  absl::StatusOr<Compiled> c = Compile(RowReduce("reduce_sum", "float32", 1024, 256));
  ASSERT_THAT(c, IsOk());
  // 5 butterflies within each warp, 3 across the 8 warp totals; one barrier publishes the totals
  // (the closing barrier is dropped at the end of the block).
  EXPECT_EQ(Count(c->ptx, "shfl.sync.bfly.b32"), 8) << c->ptx;
  EXPECT_EQ(Count(c->ptx, "bar.sync"), 1) << c->ptx;
  ExpectPtxasAccepts(c->ptx);
}

TEST(WarpShufflePtxTest, OneWarpNeedsNoBarrier) {
  absl::StatusOr<Compiled> c = Compile(RowReduce("reduce_max", "float32", 100, 32));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(Count(c->ptx, "shfl.sync.bfly.b32"), 5) << c->ptx;
  EXPECT_EQ(Count(c->ptx, "bar.sync"), 0) << c->ptx;
  ExpectPtxasAccepts(c->ptx);
}

TEST(WarpShufflePtxTest, IntegerTypesShuffleInThirtyTwoBitHalves) {
  // Three warps: 5 + 2 butterflies (the warp totals padded to 4 with the identity).
  absl::StatusOr<Compiled> i32 = Compile(RowReduce("reduce_min", "int32", 300, 96));
  ASSERT_THAT(i32, IsOk());
  EXPECT_EQ(Count(i32->ptx, "shfl.sync.bfly.b32"), 7) << i32->ptx;
  ExpectPtxasAccepts(i32->ptx);
  absl::StatusOr<Compiled> i64 = Compile(RowReduce("reduce_sum", "int64", 300, 64));
  ASSERT_THAT(i64, IsOk());
  EXPECT_EQ(Count(i64->ptx, "shfl.sync.bfly.b32"), 2 * 6) << i64->ptx;
  ExpectPtxasAccepts(i64->ptx);
}

TEST(WarpShufflePtxTest, NonWarpMultipleKeepsSharedMemory) {
  absl::StatusOr<Compiled> c = Compile(RowReduce("reduce_sum", "float32", 300, 48));
  ASSERT_THAT(c, IsOk());
  EXPECT_THAT(c->ptx, Not(HasSubstr("shfl.sync")));
  EXPECT_THAT(c->ptx, HasSubstr("bar.sync"));
  ExpectPtxasAccepts(c->ptx);
}

TEST(WarpShufflePtxTest, ReductionNarrowerThanTheBlockKeepsSharedMemory) {
  // 64 reduction threads in a 128-thread launch: lanes 64..127 skip the loops, so a full-mask
  // shuffle would be wrong; the windows stay shared-memory exchanges with barriers.
  absl::StatusOr<Compiled> c = Compile(RowReduce("reduce_sum", "float32", 256, 64), 128);
  ASSERT_THAT(c, IsOk());
  EXPECT_THAT(c->ptx, Not(HasSubstr("shfl.sync")));
  EXPECT_GE(Count(c->ptx, "bar.sync"), 12) << c->ptx;
  ExpectPtxasAccepts(c->ptx);
}

TEST(WarpShufflePtxTest, OnePassSoftmaxReadsTheRowOnceWithVectorAccesses) {
  absl::StatusOr<std::string> text =
      testing::ReadTextFile(TS_BENCH_SCHEDULES_DIR "/softmax_cuda_4096_onepass.json");
  ASSERT_THAT(text, IsOk());
  absl::StatusOr<Compiled> c = Compile(*text);
  ASSERT_THAT(c, IsOk());
  ASSERT_EQ(c->kernel.launches.size(), 1u);
  EXPECT_EQ(c->kernel.launches[0].block[0], 256);
  // 4096 floats per row, 256 threads: the row copy is 4 (unrolled) 16-byte loads per thread and
  // the only global read; every global access is 16 bytes wide.
  EXPECT_EQ(Count(c->ptx, "ld.global.nc.v4.b32") + Count(c->ptx, "ld.global.v4.b32"), 4) << c->ptx;
  EXPECT_EQ(Count(c->ptx, "ld.global"), 4) << c->ptx;
  EXPECT_GE(Count(c->ptx, "st.global.v4.b32"), 1) << c->ptx;
  EXPECT_EQ(Count(c->ptx, "st.global"), Count(c->ptx, "st.global.v4.b32")) << c->ptx;
  // Two reductions of 8 butterflies each; barriers: after the row copy, and per reduction one
  // for the warp totals and one publishing the result.
  EXPECT_EQ(Count(c->ptx, "shfl.sync.bfly.b32"), 16) << c->ptx;
  EXPECT_EQ(Count(c->ptx, "bar.sync"), 5) << c->ptx;
  ExpectPtxasAccepts(c->ptx);
}

// bfloat16 softmax over [64, 4096] as CrossThreadReduction's sketch draws it: the normalize
// stage's row split into [rest, 128 threads, `width`] (the vector part vectorized), the max and
// the sum following both splits (their vector part unrolled) and computed at the row.
std::string RowVectorSoftmax(int64_t width) {
  return absl::StrCat(
      R"({"version": 1, "workload": {"op": "softmax", "shapes": [[64, 4096]], "dtype": )",
      R"("bfloat16", "attrs": {}}, "target": "cuda -arch=sm_90", "steps": [)",
      R"(["SP", 3, 1, 4096, [)", width, R"(], 1], ["AN", 3, 2, 2], ["SP", 3, 1, 0, [128], 1],)",
      R"( ["AN", 3, 2, 6], ["FSP", 2, 1, 0, 1], ["FSP", 2, 1, 2, 1], ["AN", 2, 2, 6],)",
      R"( ["AN", 2, 3, 1], ["CA", 2, 3, 0], ["FSP", 1, 1, 0, 1], ["FSP", 1, 1, 2, 1],)",
      R"( ["AN", 1, 2, 6], ["AN", 1, 3, 1], ["CA", 1, 3, 0], ["AN", 3, 0, 5]]})");
}

TEST(WarpShufflePtxTest, HalfSoftmaxRowsMoveInSixteenByteVectors) {
  absl::StatusOr<Compiled> wide = Compile(RowVectorSoftmax(8));
  ASSERT_THAT(wide, IsOk());
  ASSERT_EQ(wide->kernel.launches.size(), 1u);
  // 4096 bfloat16 per row, 128 threads of 8: four 16-byte loads per thread and pass, at least
  // for the max and the normalize; every store is 16 bytes.
  EXPECT_GE(Count(wide->ptx, "ld.global.nc.v4.b32"), 8) << wide->ptx;
  EXPECT_EQ(Count(wide->ptx, "st.global.v4.b32"), 4) << wide->ptx;
  EXPECT_EQ(Count(wide->ptx, "st.global"), 4) << wide->ptx;
  ExpectPtxasAccepts(wide->ptx);
  // Width 1 (TVM's thread split): 2-byte accesses only.
  absl::StatusOr<Compiled> narrow = Compile(RowVectorSoftmax(1));
  ASSERT_THAT(narrow, IsOk());
  EXPECT_EQ(Count(narrow->ptx, ".v4."), 0) << narrow->ptx;
  EXPECT_GE(Count(narrow->ptx, "st.global.b16"), 1) << narrow->ptx;
}

}  // namespace
}  // namespace tilesearch::codegen
