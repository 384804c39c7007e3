// LoopNest encoding: lowered schedules of every statement kind (CPU tiling, GPU shared-memory
// tiles, mma.sync with cp.async, wgmma, wgmma with A in registers) survive the round trip exactly,
// shared expressions stay shared, and truncated or corrupted bytes give an error, never a crash.
#include "ir/loop_nest_codec.h"

#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/lower_naive.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"

namespace tilesearch::ir {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::Ok;
using ::tilesearch::testing::StatusIs;

LoopNest Lowered(const std::string& path) {
  schedule::ScheduleFile file = Ok(schedule::ScheduleFile::Load(path));
  schedule::ResolvedSchedule resolved = Ok(file.Resolve());
  return Ok(schedule::Lower(resolved.dag, resolved.state, file.target)).nest;
}

std::vector<std::string> SchedulePaths() {
  const std::string examples = TS_EXAMPLE_SCHEDULES_DIR;
  const std::string bench = TS_BENCH_SCHEDULES_DIR;
  return {examples + "/matmul_cpu_tiled.json",
          examples + "/matmul_cuda_sssrrsrs.json",
          examples + "/softmax_cuda.json",
          examples + "/dense_bias_relu_cuda_tensor_core.json",
          bench + "/matmul_cuda_4096_128x128_cp_async4.json",
          bench + "/matmul_bfloat16_cuda_4096_wgmma_128x256.json",
          bench + "/conv2d_float32_cuda_resnet1x1_tf32_wgmma_pixels.json"};
}

TEST(LoopNestCodecTest, LoweredSchedulesRoundTripExactly) {
  for (const std::string& path : SchedulePaths()) {
    const LoopNest nest = Lowered(path);
    const std::string bytes = EncodeLoopNest(nest);
    const LoopNest back = Ok(DecodeLoopNest(bytes));
    EXPECT_EQ(back.name, nest.name) << path;
    EXPECT_EQ(back.num_inputs, nest.num_inputs) << path;
    ASSERT_EQ(back.params.size(), nest.params.size()) << path;
    EXPECT_EQ(ToString(back), ToString(nest)) << path;
    // Every field the encoder writes came back: encoding the decoded nest gives the same bytes.
    EXPECT_EQ(EncodeLoopNest(back), bytes) << path;
  }
}

TEST(LoopNestCodecTest, PrintedFormShowsWhatTheCodecCarries) {
  // The tensor-core and wgmma schedules print their warp_mma / wgmma / cp.async statements, so
  // the round trip above compares those nodes too.
  const std::vector<std::string> paths = SchedulePaths();
  EXPECT_THAT(ToString(Lowered(paths[3])), HasSubstr("mma"));
  EXPECT_THAT(ToString(Lowered(paths[5])), HasSubstr("wgmma"));
  // One-pass TF32 with A read into registers from a plain tile (WgmmaLayout::registers) and a
  // raw float32 B the tensor cores truncate (WgmmaLayout::truncated).
  const std::string tf32 = ToString(Lowered(paths[6]));
  // The 1x1 input is pixel-contiguous: rows 1 apart, k rows 128 + 8 (padding) apart.
  EXPECT_THAT(tf32, HasSubstr("[registers row 1 k 136]"));
  EXPECT_THAT(tf32, HasSubstr(" truncated]"));
}

TEST(LoopNestCodecTest, SharedExpressionsStaySharedAndSmall) {
  // x + x nested 40 deep: 2^40 nodes as a tree, 41 distinct nodes as a DAG.
  Expr e = MakeVar("i");
  for (int d = 0; d < 40; ++d) e = e + e;
  LoopNest nest;
  nest.name = "shared";
  nest.params = {BufferDecl{"Y", ScalarType::kInt64, {4}}};
  nest.num_inputs = 0;
  nest.body = ForNode::Make(MakeVar("i"), IntConst(0), IntConst(4), ForKind::kSerial,
                            StoreNode::Make("Y", {MakeVar("i")}, e));
  const std::string bytes = EncodeLoopNest(nest);
  EXPECT_LT(bytes.size(), 2000u);
  const LoopNest back = Ok(DecodeLoopNest(bytes));
  const auto* store = back.body.as<ForNode>()->body.as<StoreNode>();
  ASSERT_NE(store, nullptr);
  const auto [a, b] = BinaryOperands(store->value);
  EXPECT_TRUE(a.same_as(b));
}

// A register reallocation round-trips; a count setmaxnreg cannot take (23, 257, 36: outside
// 24..256 or not a multiple of 8) in the bytes is an error, never a crash.
TEST(LoopNestCodecTest, RegisterReallocationCountsAreChecked) {
  LoopNest nest;
  nest.name = "realloc";
  nest.params = {{"out", ScalarType::kFloat32, {1}}};
  nest.body = SeqNode::Make({SetMaxNRegNode::Make(232, true), SetMaxNRegNode::Make(40, false),
                             StoreNode::Make("out", {IntConst(0)}, FloatConst(1.0))});
  const std::string bytes = EncodeLoopNest(nest);
  const LoopNest back = Ok(DecodeLoopNest(bytes));
  EXPECT_EQ(ToString(back), ToString(nest));
  EXPECT_THAT(ToString(back), HasSubstr("setmaxnreg.inc 232"));
  EXPECT_THAT(ToString(back), HasSubstr("setmaxnreg.dec 40"));
  // 232 as the encoder writes it (8 bytes, little-endian) and the increase flag after it.
  const std::string count("\xE8\0\0\0\0\0\0\0\x01", 9);
  const size_t at = bytes.find(count);
  ASSERT_NE(at, std::string::npos);
  for (const int64_t bad : {23, 257, 36}) {
    std::string b = bytes;
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>((bad >> (8 * i)) & 0xFF);
    EXPECT_THAT(DecodeLoopNest(b),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("setmaxnreg count")))
        << bad;
  }
}

TEST(LoopNestCodecTest, TruncatedOrCorruptedBytesAreErrors) {
  const std::string bytes = EncodeLoopNest(Lowered(SchedulePaths()[0]));
  for (size_t n = 0; n < bytes.size(); n += 7) {
    EXPECT_THAT(DecodeLoopNest(bytes.substr(0, n)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("corrupt loop nest")))
        << n;
  }
  EXPECT_THAT(DecodeLoopNest(bytes + "x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trailing bytes")));
  // Random byte flips: decoded or refused, never a crash.
  std::mt19937_64 rng(7);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bad = bytes;
    bad[rng() % bad.size()] = static_cast<char>(rng());
    if (!DecodeLoopNest(bad).ok()) ++refused;
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace tilesearch::ir
