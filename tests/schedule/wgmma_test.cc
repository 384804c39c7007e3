// The tensor_core step with wgmma (TensorCoreStep::warpgroup): the JSON form, the shapes it
// refuses, the layout functions against their definition, and random wgmma schedules (every
// operand layout, non-divisible shapes, convolutions as implicit GEMM, fused epilogues, split-k)
// run in the interpreter against the unscheduled program. The interpreter reads each operand
// element through ir::WgmmaLayoutOffset and ir::WgmmaSwizzle while the lowered fill writes it
// through its own IR arithmetic, so a disagreement between the two shows up as a wrong result.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "lower_test_util.h"
#include "nlohmann/json.hpp"
#include "schedule/step_json.h"
#include "schedule/wgmma_layout.h"

namespace tilesearch::schedule {
namespace {

using testing::BuildOpOrDie;
using testing::CudaTarget;
using testing::RunLowered;
using testing::SumReductionStage;

TensorCoreStep Wgmma(int stage, const std::string& kind, int64_t bm, int64_t bn, int64_t bk,
                     int64_t wm, int64_t wn) {
  TensorCoreStep t = testing::TileStep(kind, bm, bn, bk, wm, wn);
  t.stage_id = stage;
  t.warpgroup = true;
  return t;
}

TEST(WgmmaStep, JsonRoundTrip) {
  TensorCoreStep t = Wgmma(2, "bf16", 128, 256, 64, 64, 256);
  t.raster = 8;
  const nlohmann::json j = t.ToJson();
  EXPECT_EQ(j.dump(), R"(["TC",2,"bf16",[128,256,64],[64,256],3,0,8,0,1,"wgmma"])");
  absl::StatusOr<Step> back = StepFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  t.split_k = 4;
  back = StepFromJson(t.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  // An explicit "mma.sync" reads as the warp-level step.
  back = StepFromJson(
      nlohmann::json::parse(R"(["TC",2,"bf16",[128,128,32],[64,64],3,8,1,0,1,"mma.sync"])"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(std::get<TensorCoreStep>(*back).warpgroup);
  for (const char* bad : {R"(["TC",2,"bf16",[128,128,32],[64,64],3,0,1,0,1,"wmma"])",
                          R"(["TC",2,"bf16",[128,128,32],[64,64],3,0,1,0,0,"wgmma"])",
                          R"(["TC",2,"bf16",[128,128,32],[64,64],3,0,1,0,1,7])"}) {
    EXPECT_FALSE(StepFromJson(nlohmann::json::parse(bad)).ok()) << bad;
  }
}

TEST(WgmmaStep, RefusesShapesAndKindsItCannotTake) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{256, 256}, {256, 256}}, ir::ScalarType::kBFloat16);
  const State s = State::Initial(dag);
  const int stage = SumReductionStage(s);
  struct Bad {
    TensorCoreStep step;
    std::string says;
  };
  std::vector<Bad> bad;
  bad.push_back({Wgmma(stage, "bf16", 64, 64, 32, 32, 64), "m64nNk16"});    // warp_m 32
  bad.push_back({Wgmma(stage, "bf16", 64, 512, 32, 64, 512), "m64nNk16"});  // n 512
  bad.push_back({Wgmma(stage, "bf16", 64, 64, 48, 64, 64), "32, 64 or 128 bytes"});
  bad.push_back({Wgmma(stage, "bf16", 128, 256, 64, 128, 256), "accumulator registers"});
  TensorCoreStep padded = Wgmma(stage, "bf16", 64, 64, 32, 64, 64);
  padded.pad = 8;
  bad.push_back({padded, "swizzled"});
  // 128 accumulators per thread fit the 255 registers of a small block but not a thread's share
  // of a large one: four 64x256 warpgroups (512 threads, 128 registers each), three consumers
  // of a producer warpgroup (512 threads, 152 each after the reallocation).
  bad.push_back({Wgmma(stage, "bf16", 256, 256, 64, 64, 256), "block of 512 threads"});
  TensorCoreStep three = Wgmma(stage, "bf16", 192, 256, 64, 64, 256);
  three.tma = three.warp_specialized = true;
  bad.push_back({three, "gives each consumer thread 152"});
  // 64 warpgroups: the block's thread limit, named before the registers it would starve.
  bad.push_back(
      {Wgmma(stage, "bf16", 256, 256, 64, 64, 16), "block of 8192 threads (at most 1024)"});
  for (const Bad& b : bad) {
    absl::StatusOr<State> st = ApplyStep(s, b.step);
    ASSERT_FALSE(st.ok()) << b.step.ToString();
    EXPECT_NE(st.status().message().find(b.says), std::string::npos) << st.status();
  }
  // Half the tile fits both: 64 accumulators beside 104 or more registers.
  EXPECT_TRUE(ApplyStep(s, Wgmma(stage, "bf16", 128, 256, 64, 64, 128)).ok());
  three.block_n = three.warp_n = 128;
  EXPECT_TRUE(ApplyStep(s, three).ok());
  // Two consumers of a producer warpgroup: 40 and 232 registers (CUTLASS's split at 384
  // threads); one consumer, or none of a producer, keeps its share (no reallocation).
  TensorCoreStep two = Wgmma(stage, "bf16", 128, 256, 64, 64, 256);
  two.tma = two.warp_specialized = true;
  ASSERT_TRUE(WsRegisterSplit(two).has_value());
  EXPECT_EQ(WsRegisterSplit(two)->first, 40);
  EXPECT_EQ(WsRegisterSplit(two)->second, 232);
  // For every count of consumer warpgroups a block can hold: where there is a split, the
  // producer's and the consumers' limits fit the pool ptxas allocates at launch under
  // .minnctapersm 1 (65536 / threads per thread, in granules of 8), raise the consumers above
  // their launch share, and are counts setmaxnreg takes; the split stops once nothing is gained.
  for (int64_t consumers = 2; consumers <= 7; ++consumers) {
    TensorCoreStep many = Wgmma(stage, "bf16", 64 * consumers, 128, 64, 64, 128);
    many.tma = many.warp_specialized = true;
    const int64_t threads = 128 * (consumers + 1);
    EXPECT_EQ(WgmmaBlockThreads(many), threads);
    const int64_t launch = std::min<int64_t>(255, 65536 / threads / 8 * 8);
    const std::optional<std::pair<int64_t, int64_t>> split = WsRegisterSplit(many);
    if (!split.has_value()) {
      EXPECT_GE(consumers, 6) << "no split at " << threads << " threads";
      continue;
    }
    SCOPED_TRACE(threads);
    EXPECT_LE(split->first * 128 + split->second * 128 * consumers, launch * threads);
    EXPECT_GT(split->second, launch);
    EXPECT_EQ(split->second % 8, 0);
    EXPECT_GE(split->first, 24);
    EXPECT_LE(split->second, 256);
  }
  two.block_m = 64;
  EXPECT_FALSE(WsRegisterSplit(two).has_value());
  EXPECT_EQ(WgmmaThreadRegisters(two), 255);  // 256 threads: a thread's most
  two.warp_specialized = false;
  two.block_m = 128;
  EXPECT_FALSE(WsRegisterSplit(two).has_value());
  // float32 operands: TF32 rows of k are 4-byte elements (block_k 8, 16 or 32); with tf32x3 each
  // thread holds a tile accumulator beside the accumulator (at most 64 of each), one-pass tf32
  // accumulates in place (at most 128).
  const ir::ComputeDAG f32 =
      BuildOpOrDie("matmul", {{256, 256}, {256, 256}}, ir::ScalarType::kFloat32);
  const State s32 = State::Initial(f32);
  const int stage32 = SumReductionStage(s32);
  EXPECT_TRUE(ApplyStep(s32, Wgmma(stage32, "tf32x3", 64, 64, 32, 64, 64)).ok());
  EXPECT_TRUE(ApplyStep(s32, Wgmma(stage32, "tf32", 128, 128, 32, 128, 128)).ok());
  for (const Bad& b :
       {Bad{Wgmma(stage32, "tf32x3", 64, 64, 64, 64, 64), "32, 64 or 128 bytes"},
        Bad{Wgmma(stage32, "tf32x3", 128, 128, 16, 128, 128), "accumulator registers"},
        Bad{Wgmma(stage32, "tf32", 128, 256, 32, 128, 256), "accumulator registers"},
        Bad{Wgmma(stage32, "bf16", 64, 64, 32, 64, 64), "needs bfloat16"}}) {
    absl::StatusOr<State> st = ApplyStep(s32, b.step);
    const absl::StatusOr<LoweredKernel> k =
        st.ok() ? Lower(f32, *st, CudaTarget()) : absl::StatusOr<LoweredKernel>(st.status());
    ASSERT_FALSE(k.ok()) << b.step.ToString();
    EXPECT_NE(k.status().message().find(b.says), std::string::npos) << k.status();
  }
  // B [k][n] is n-contiguous: its warpgroup tiles must be whole 64-column swizzle atoms.
  absl::StatusOr<State> st = ApplyStep(s, Wgmma(stage, "bf16", 64, 64, 32, 64, 32));
  ASSERT_TRUE(st.ok()) << st.status();
  absl::StatusOr<LoweredKernel> k = Lower(dag, *st, CudaTarget());
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("multiples of 64"), std::string::npos) << k.status();
  // wgmma is Hopper's: an sm_80 target is refused by the lowering, by name.
  st = ApplyStep(s, Wgmma(stage, "bf16", 64, 64, 32, 64, 64));
  ASSERT_TRUE(st.ok()) << st.status();
  k = Lower(dag, *st, CudaTarget("sm_80"));
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("sm_80"), std::string::npos) << k.status();
  // The arch-specific sm_90a is a target of its own and runs wgmma.
  absl::StatusOr<Target> sm90a = ParseTarget("cuda -arch=sm_90a");
  ASSERT_TRUE(sm90a.ok()) << sm90a.status();
  EXPECT_EQ(sm90a->arch, "sm_90a");
  EXPECT_TRUE(Lower(dag, *st, *sm90a).ok());
  EXPECT_FALSE(ParseTarget("cuda -arch=sm_a").ok());
  EXPECT_FALSE(ParseTarget("cuda -arch=sm_90b").ok());
}

// The layout function against PTX's canonical layouts written out element by element: every
// element of a tile lands on a distinct byte, 16-byte chunks stay whole, and the swizzle permutes
// chunks only within their 128-byte line.
TEST(WgmmaLayout, PlacesEveryElementOnceAndSwizzlesWithinLines) {
  for (const bool k_major : {true, false}) {
    for (const int64_t sw : {32, 64, 128}) {
      if (!k_major && sw != 128) continue;
      ir::WgmmaLayout l;
      l.k_major = k_major;
      l.swizzle = sw;
      const int64_t rows = 128, depth = k_major ? sw / 2 : 64;
      l.sbo = 8 * sw;
      l.lbo = k_major ? 16 : depth * 128;
      std::set<int64_t> seen;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t k = 0; k < depth; ++k) {
          const int64_t raw = ir::WgmmaLayoutOffset(l, r, k);
          const int64_t at = ir::WgmmaSwizzle(raw, sw);
          EXPECT_TRUE(seen.insert(at).second) << "row " << r << " k " << k;
          EXPECT_EQ(at / 128, raw / 128);
          EXPECT_EQ(at % 16, raw % 16);
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), rows * depth);
      EXPECT_EQ(*seen.rbegin(), 2 * rows * depth - 2);
    }
  }
  // The 128-byte swizzle of K-major row r moves chunk c to c ^ (r % 8) (CUTLASS Swizzle<3,4,3>).
  ir::WgmmaLayout l;
  l.swizzle = 128;
  l.sbo = 1024;
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 8; ++c) {
      EXPECT_EQ(ir::WgmmaSwizzle(ir::WgmmaLayoutOffset(l, r, 8 * c), 128),
                r * 128 + 16 * (c ^ (r % 8)));
    }
  }
}

using Case = testing::TensorCoreCase;

Case RandomCase(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  Case c;
  c.dtype = testing::DrawMmaKind(rng, &c.step);
  const int64_t m = pick(1, 150), n = pick(1, 150), k = pick(1, 140);
  switch (rng() % 6) {
    case 0:
    case 1: {
      testing::OpCase mm = testing::RandomLayoutMatmul(rng, m, n, k);
      c.op = mm.op;
      c.shapes = mm.shapes;
      c.attrs = mm.attrs;
      break;
    }
    case 2:
      c.op = "dense_bias_relu";
      c.shapes = {{m, k}, {n, k}, {n}};
      break;
    case 3:
      c.op = "batch_matmul";
      c.shapes = {{pick(1, 2), m, k}, {1, k, n}};
      c.shapes[1][0] = c.shapes[0][0];
      break;
    case 4: {
      const bool nhwc = rng() % 2;
      c.op = nhwc ? "conv2d_nhwc" : "conv2d_nchw";
      const int64_t ch = pick(1, 16), kout = pick(1, 70);
      const int64_t r = pick(1, 3), stride = pick(1, 2), pad = pick(0, 1);
      const int64_t hw = pick(std::max<int64_t>(3, r), 10);
      c.attrs = {{"stride", std::to_string(stride)}, {"padding", std::to_string(pad)}};
      c.shapes = nhwc ? std::vector<std::vector<int64_t>>{{1, hw, hw, ch}, {r, r, ch, kout}}
                      : std::vector<std::vector<int64_t>>{{1, ch, hw, hw}, {kout, ch, r, r}};
      break;
    }
    default:
      c.op = "matmul_scale_residual";
      c.shapes = {{m, k}, {k, n}, {m, n}};
      break;
  }
  TensorCoreStep& t = c.step;
  const bool tf32 = c.dtype == ir::ScalarType::kFloat32;
  t.warpgroup = true;
  t.warp_m = 64 * pick(1, 2);
  const int64_t ns[] = {8, 16, 32, 64, 128, 192, 256};
  t.warp_n = ns[rng() % 7];
  // At most 128 accumulators per thread; the TF32 kinds hold a tile accumulator beside them.
  const int64_t max_n = (tf32 ? 64 : 128) * 128 / t.warp_m;
  if (t.warp_n > max_n) t.warp_n = max_n;
  t.block_m = t.warp_m * pick(1, 2);
  t.block_n = t.warp_n * (t.warp_n <= 128 ? pick(1, 2) : 1);
  const int64_t ks[] = {16, 32, 64};
  t.block_k = ks[rng() % 3] / (tf32 ? 2 : 1);  // rows of k of 32, 64 or 128 bytes
  t.pipeline = static_cast<int>(pick(1, 4));
  t.pad = 0;
  t.raster = pick(1, 3);
  t.split_k = (rng() % 4 == 0) ? 2 : 1;
  testing::FitWgmmaRegisters(&t);
  return c;
}

// One float16 / bfloat16 ulp near 1; float32 accuracy for 3xTF32; TF32's 11 significant bits
// (relative 2^-11 per operand, over sums of up to 140 products of inputs in [-1, 1]).
TEST(WgmmaStep, RandomSchedulesMatchTheUnscheduledProgram) {
  std::mt19937_64 rng(20261202);
  int run = 0, refused = 0;
  for (int trial = 0; run < 160 && trial < 1000; ++trial) {
    Case c = RandomCase(rng);
    const ir::ComputeDAG dag = BuildOpOrDie(c.op, c.shapes, c.dtype, c.attrs);
    const State s = State::Initial(dag);
    c.step.stage_id = SumReductionStage(s);
    ASSERT_GE(c.step.stage_id, 0) << c.op;
    absl::StatusOr<State> st = testing::ApplyWithEpilogue(s, c.step);
    ASSERT_TRUE(st.ok()) << c.op << ": " << st.status();
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, CudaTarget());
    if (!testing::LoweredOrWithinLimits(k)) {
      ++refused;
      continue;
    }
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 2000 + trial);
    absl::StatusOr<ir::BufferMap> got = RunLowered(k->nest, inputs);
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << StepToString(st->steps().back());
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_LE(testing::MaxRelError(dag, *got, *ref), testing::TensorCoreTolerance(c.step, c.dtype))
        << c.op << " " << StepToString(st->steps().back());
    ++run;
  }
  EXPECT_GE(run, 160);
  EXPECT_GT(refused, 0);  // the refusal path was exercised too
}

// Tiles that divide the problem, with an output of the operands' type along the innermost axis,
// stage the output through a shared operand ring (A's when it holds the tile, else B's) and store
// whole 16-byte chunks; the result still matches the unscheduled program, fused epilogues
// included.
TEST(WgmmaStep, StagedEpilogueMatchesTheUnscheduledProgram) {
  struct Staged {
    std::string op;
    std::vector<std::vector<int64_t>> shapes;
    ir::ScalarType dtype;
    int pipeline;
  };
  const Staged cases[] = {
      {"matmul", {{256, 128}, {128, 256}}, ir::ScalarType::kBFloat16, 4},  // A's ring
      {"dense_bias_relu", {{128, 192}, {256, 192}, {256}}, ir::ScalarType::kFloat16, 3},  // B's
      {"batch_matmul", {{2, 128, 64}, {2, 64, 256}}, ir::ScalarType::kBFloat16, 4},
  };
  for (const Staged& c : cases) {
    const ir::ComputeDAG dag = BuildOpOrDie(c.op, c.shapes, c.dtype);
    const State s = State::Initial(dag);
    TensorCoreStep t =
        Wgmma(SumReductionStage(s), c.dtype == ir::ScalarType::kFloat16 ? "f16" : "bf16", 128, 256,
              64, 64, 256);
    t.pipeline = c.pipeline;
    absl::StatusOr<State> st;
    for (int e = 3; e >= 0; --e) {
      t.epilogue = e;
      st = ApplyStep(s, t);
      if (st.ok()) break;
    }
    ASSERT_TRUE(st.ok()) << c.op << ": " << st.status();
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, CudaTarget());
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_NE(ir::ToString(k->nest).find(".stage.v"), std::string::npos) << c.op << " not staged";
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 77);
    absl::StatusOr<ir::BufferMap> got = RunLowered(k->nest, inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_LE(testing::MaxRelError(dag, *got, *ref), testing::TensorCoreTolerance(t, c.dtype))
        << c.op;
  }
}

}  // namespace
}  // namespace tilesearch::schedule
