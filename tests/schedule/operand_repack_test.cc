// The tensor_core step's `repack` (schedule/operand_repack.h): the plan for convolutions (which
// reduce axis goes innermost, the padded workspace shapes), the operands it refuses, the JSON
// field, and random repacked tensor-core schedules of convolutions (NCHW and NHWC, stride,
// padding, dilation, channel counts that do and do not take 16-byte copies; mma.sync and wgmma;
// f16, bf16, tf32x3 and one-pass tf32) run in the interpreter against the float64 reference.
#include "schedule/operand_repack.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "gtest/gtest.h"
#include "ir/reference.h"
#include "lower_test_util.h"
#include "nlohmann/json.hpp"
#include "schedule/matmul_like.h"
#include "schedule/step_json.h"

namespace tilesearch::schedule {
namespace {

using testing::BuildOpOrDie;
using testing::CudaTarget;
using testing::SumReductionStage;

MatmulLike RolesOf(const State& s, int stage) {
  absl::StatusOr<MatmulLike> mm = AnalyzeMatmulLike(*s.stage(stage).op, s.stage(stage).op->body);
  EXPECT_TRUE(mm.ok()) << mm.status();
  return *mm;
}

TEST(OperandRepack, PadsAnNchwConvolutionIntoNhwc) {
  // x[2, 8, 9, 7] * w[5, 8, 3, 3], padding 1, stride 2, dilation 1.
  const ir::ComputeDAG dag =
      BuildOpOrDie("conv2d_nchw", {{2, 8, 9, 7}, {5, 8, 3, 3}}, ir::ScalarType::kFloat32,
                   {{"padding", "1"}, {"stride", "2"}});
  const State s = State::Initial(dag);
  const int stage = SumReductionStage(s);
  const MatmulLike mm = RolesOf(s, stage);
  EXPECT_TRUE(mm.repackable);
  absl::StatusOr<OperandRepack> plan = PlanOperandRepack(*s.stage(stage).op, mm);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The input channel (reduce axis 0) goes innermost.
  EXPECT_EQ(plan->inner_k, 0);
  EXPECT_EQ(plan->a.source, "X");
  EXPECT_EQ(plan->a.order, (std::vector<int>{0, 2, 3, 1}));
  // Output rows 0..4 at stride 2 with a 3-row window read rows -1..9 of 0..8: one row of padding
  // above and one below (11 rows); columns 0..3 read -1..7 of 0..6 (9 columns).
  EXPECT_EQ(plan->a.offset, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(plan->a.shape, (std::vector<int64_t>{2, 11, 9, 8}));
  EXPECT_EQ(plan->b.order, (std::vector<int>{0, 2, 3, 1}));
  EXPECT_EQ(plan->b.offset, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(plan->b.shape, (std::vector<int64_t>{5, 3, 3, 8}));
}

// acc[i, j] = sum_k f(X, i, k) * W[k, j] for a factor f of X.
ir::ComputeDAG MatmulOf(
    const std::function<ir::Expr(const ir::Tensor&, const ir::Expr&, const ir::Expr&)>& factor,
    int64_t x_cols) {
  ir::Tensor x = *ir::Placeholder("X", {8, x_cols});
  ir::Tensor w = *ir::Placeholder("W", {16, 8});
  ir::Tensor acc = *ir::Reduce(
      "acc", {8, 8}, ir::ReduceKind::kSum, {16},
      [&](const std::vector<ir::Expr>& a, const std::vector<ir::Expr>& r) {
        return factor(x, a[0], r[0]) * w(r[0], a[1]);
      },
      ir::Expr(), ir::ComputeOptions{{"i", "j"}, {"k"}, ""});
  return *ir::ComputeDAG::Create({acc});
}

// The error of repacking `dag`'s reduction, through Apply (and the plan), containing `want`.
void ExpectRepackRefused(const ir::ComputeDAG& dag, const std::string& want) {
  const State s = State::Initial(dag);
  const int stage = SumReductionStage(s);
  const MatmulLike mm = RolesOf(s, stage);
  EXPECT_FALSE(mm.repackable);
  absl::StatusOr<OperandRepack> plan = PlanOperandRepack(*s.stage(stage).op, mm);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(want), std::string::npos) << plan.status();
  TensorCoreStep t;
  t.stage_id = stage;
  t.kind = "tf32x3";
  t.block_m = t.block_n = 32;
  t.block_k = 16;
  t.warp_m = t.warp_n = 16;
  t.pad = 4;
  t.repack = true;
  absl::StatusOr<State> st = ApplyStep(s, t);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("invalid_schedule"), std::string::npos) << st.status();
  EXPECT_NE(st.status().message().find("'acc'"), std::string::npos) << st.status();
  EXPECT_NE(st.status().message().find(want), std::string::npos) << st.status();
}

TEST(OperandRepack, PlainMatmulsNeedNoRepackAndOtherReadsRefuseIt) {
  // A plain matmul repacks but gains nothing (every index a bare variable): not drawn.
  const ir::ComputeDAG plain = MatmulOf(
      [](const ir::Tensor& x, const ir::Expr& i, const ir::Expr& k) { return x(i, k); }, 16);
  const State ps = State::Initial(plain);
  const MatmulLike pm = RolesOf(ps, SumReductionStage(ps));
  EXPECT_FALSE(pm.repackable);
  EXPECT_TRUE(PlanOperandRepack(*ps.stage(SumReductionStage(ps)).op, pm).ok());
  // X read at 2k: no reduce axis is a whole index of both operands.
  ExpectRepackRefused(MatmulOf([](const ir::Tensor& x, const ir::Expr& i,
                                  const ir::Expr& k) { return x(i, k * ir::IntConst(2)); },
                               32),
                      "no reduce axis is a whole index of both");
  // A triangular mask is no bounds test of X's indices: its zeros cannot be written out.
  ExpectRepackRefused(
      MatmulOf([](const ir::Tensor& x, const ir::Expr& i,
                  const ir::Expr& k) { return ir::Select(k < i, x(i, k), ir::FloatConst(0.0)); },
               16),
      "is not a bounds test");
}

TEST(OperandRepack, JsonRoundTripAndMalformedField) {
  TensorCoreStep t;
  t.stage_id = 2;
  t.kind = "tf32";
  t.block_m = 128;
  t.block_n = 128;
  t.block_k = 16;
  t.warp_m = 64;
  t.warp_n = 128;
  t.pipeline = 4;
  t.pad = 0;
  t.warpgroup = true;
  t.repack = true;
  const nlohmann::json j = t.ToJson();
  EXPECT_EQ(j.size(), 12u);
  EXPECT_EQ(j[11], "repack");
  absl::StatusOr<TensorCoreStep> back = TensorCoreStep::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, t);
  t.warpgroup = false;  // mma.sync with repack: the instruction is written too
  absl::StatusOr<TensorCoreStep> back2 = TensorCoreStep::FromJson(t.ToJson());
  ASSERT_TRUE(back2.ok()) << back2.status();
  EXPECT_EQ(*back2, t);
  nlohmann::json bad = j;
  bad[11] = "nhwc";
  absl::StatusOr<TensorCoreStep> err = TensorCoreStep::FromJson(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("is not an option in place"), std::string::npos)
      << err.status();
  // "repack" in the instruction's place: the message says where it goes.
  nlohmann::json early = {"TC", 2, "tf32", {128, 128, 16}, {64, 128}, 4, 0, 1, 0, 1, "repack"};
  absl::StatusOr<TensorCoreStep> misplaced = TensorCoreStep::FromJson(early);
  ASSERT_FALSE(misplaced.ok());
  EXPECT_NE(misplaced.status().message().find("comes after split_k and the instruction"),
            std::string::npos)
      << misplaced.status();
}

using Case = testing::TensorCoreCase;

Case RandomCase(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  Case c;
  c.dtype = testing::DrawMmaKind(rng, &c.step);
  const bool nhwc = rng() % 3 == 0;
  c.op = nhwc ? "conv2d_nhwc" : "conv2d_nchw";
  // Channel counts that take 16-byte copies of 4 and 8 elements, and some that do not.
  const int64_t channels[] = {3, 4, 5, 8, 12, 16, 24};
  const int64_t ch = channels[rng() % 7], kout = pick(1, 40);
  const int64_t r = pick(1, 3), stride = pick(1, 2), pad = pick(0, 2), dil = pick(1, 2);
  const int64_t hw = pick(std::max<int64_t>(3, (r - 1) * dil + 1), 9);
  c.attrs = {{"stride", std::to_string(stride)},
             {"padding", std::to_string(pad)},
             {"dilation", std::to_string(dil)}};
  const int64_t batch = pick(1, 2);
  c.shapes = nhwc ? std::vector<std::vector<int64_t>>{{batch, hw, hw, ch}, {r, r, ch, kout}}
                  : std::vector<std::vector<int64_t>>{{batch, ch, hw, hw}, {kout, ch, r, r}};
  TensorCoreStep& t = c.step;
  const bool tf32 = c.dtype == ir::ScalarType::kFloat32;
  t.repack = true;
  t.warpgroup = rng() % 3 != 0;
  t.raster = pick(1, 3);
  t.split_k = (rng() % 4 == 0) ? 2 : 1;
  if (t.warpgroup) {
    t.warp_m = 64;
    const int64_t ns[] = {8, 16, 32, 64};
    t.warp_n = ns[rng() % 4];
    t.block_m = t.warp_m * pick(1, 2);
    t.block_n = t.warp_n * pick(1, 2);
    const int64_t ks[] = {16, 32, 64};
    t.block_k = ks[rng() % 3] / (tf32 ? 2 : 1);
    t.pipeline = static_cast<int>(pick(1, 4));
    t.pad = 0;
  } else {
    t.warp_m = 16 * pick(1, 2);
    t.warp_n = 8 * pick(1, 2);
    t.block_m = t.warp_m * pick(1, 2);
    t.block_n = t.warp_n * pick(1, 2);
    t.block_k = tf32 ? 8 * pick(1, 4) : 16 * pick(1, 2);
    t.pipeline = static_cast<int>(pick(1, 4));
    t.pad = rng() % 2 ? 16 / (tf32 ? 4 : 2) : 0;
  }
  return c;
}

// A repacked step of `kind`: a block tile of bm x bn x bk, warp (wgmma: warpgroup) tiles of
// wm x wn, a 3-stage ring.
TensorCoreStep Repacked(const char* kind, bool wgmma, int64_t bm, int64_t bn, int64_t bk,
                        int64_t wm, int64_t wn) {
  TensorCoreStep t = testing::TileStep(kind, bm, bn, bk, wm, wn);
  t.warpgroup = wgmma;
  t.repack = true;
  return t;
}

// `dag` with `t` applied to its sum reduction, lowered for sm_90.
absl::StatusOr<LoweredKernel> LowerWith(const ir::ComputeDAG& dag, TensorCoreStep t) {
  const State s = State::Initial(dag);
  t.stage_id = SumReductionStage(s);
  ASSIGN_OR_RETURN(State st, ApplyStep(s, t));
  return Lower(dag, st, CudaTarget());
}

TEST(OperandRepack, RandomRepackedConvolutionsMatchTheReference) {
  std::mt19937_64 rng(20261204);
  int run = 0, chunked = 0;
  for (int trial = 0; run < 120 && trial < 600; ++trial) {
    Case c = RandomCase(rng);
    const ir::ComputeDAG dag = BuildOpOrDie(c.op, c.shapes, c.dtype, c.attrs);
    const State s = State::Initial(dag);
    c.step.stage_id = SumReductionStage(s);
    ASSERT_GE(c.step.stage_id, 0) << c.op;
    absl::StatusOr<State> st = ApplyStep(s, c.step);
    ASSERT_TRUE(st.ok()) << c.op << ": " << st.status();
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, CudaTarget());
    if (!testing::LoweredOrWithinLimits(k)) continue;
    // The workspaces' kernels come first: the nest has the GEMM's kernel(s) after them.
    const std::string text = ir::ToString(k->nest);
    EXPECT_NE(text.find(".repacked"), std::string::npos);
    // A 16-byte chunked fill: A's fill loop vectorized over a whole 16 bytes, asynchronously.
    const int vec = c.dtype == ir::ScalarType::kFloat32 ? 4 : 8;
    const bool is_chunked =
        text.find(absl::StrCat(".A.shared.v in [0, ", vec, ") vectorize")) != std::string::npos &&
        text.find("async_copy") != std::string::npos;
    const int64_t ch = c.shapes[0][c.op == "conv2d_nhwc" ? 3 : 1];
    EXPECT_EQ(is_chunked, ch % vec == 0) << c.op << " " << nlohmann::json(c.shapes).dump();
    if (is_chunked) ++chunked;
    absl::StatusOr<double> err = testing::RelErrorToFloat64(dag, k->nest, 3000 + trial);
    ASSERT_TRUE(err.ok()) << err.status() << "\n" << StepToString(st->steps().back());
    EXPECT_LE(*err, testing::TensorCoreTolerance(c.step, c.dtype))
        << c.op << " " << nlohmann::json(c.shapes).dump() << " " << nlohmann::json(c.attrs).dump()
        << " " << StepToString(st->steps().back());
    ++run;
  }
  EXPECT_GE(run, 120);
  EXPECT_GT(chunked, 20);  // 16-byte copies along k were exercised, and the other fills too
}

// One-pass TF32 reads repacked tiles as they are, so its repack kernels store TF32-rounded
// values; 3xTF32 on wgmma stores both truncated parts (a second workspace of the small ones) and
// copies nothing in the GEMM; 3xTF32 on mma.sync (which splits each fragment itself) and the half
// kinds store the values unchanged.
TEST(OperandRepack, TensorCoreKindsChooseWhatTheirRepackStores) {
  struct Want {
    const char* kind;
    bool wgmma;
    bool rounded, split;
  };
  for (const Want& w : {Want{"tf32", true, true, false}, Want{"tf32x3", true, false, true},
                        Want{"tf32x3", false, false, false}}) {
    SCOPED_TRACE(absl::StrCat(w.kind, w.wgmma ? " wgmma" : " mma.sync"));
    const ir::ComputeDAG dag = BuildOpOrDie("conv2d_nchw", {{1, 16, 6, 20}, {8, 16, 3, 3}},
                                            ir::ScalarType::kFloat32, {{"padding", "1"}});
    absl::StatusOr<LoweredKernel> k =
        LowerWith(dag, w.wgmma ? Repacked(w.kind, true, 64, 16, 32, 64, 16)
                               : Repacked(w.kind, false, 32, 16, 16, 16, 8));
    ASSERT_TRUE(k.ok()) << k.status();
    const std::string text = ir::ToString(k->nest);
    const std::string repacks = text.substr(0, text.find(".A.shared"));
    EXPECT_EQ(repacks.find("tf32_round") != std::string::npos, w.rounded) << repacks;
    EXPECT_EQ(repacks.find("tf32_truncate") != std::string::npos, w.split) << repacks;
    EXPECT_EQ(text.find(".repacked.small") != std::string::npos, w.split);
    // Presplit: the GEMM reads both parts from rings of their own, with no TF32 tile copies.
    EXPECT_EQ(text.find(".A.small.shared") != std::string::npos, w.split);
    EXPECT_EQ(text.find(".B.small.shared") != std::string::npos, w.split);
    if (w.split) {
      EXPECT_EQ(text.find("shared.tf32"), std::string::npos) << text;
    }
  }
}

// Inputs with values exactly at TF32 (bits past the tenth mantissa bit zero), values whose 13 low
// bits are all set, negative zeros and subnormals: the presplit GEMM of a plain matmul gives the
// same answer, bit for bit, as the in-kernel split of the same tiling, which stores the same parts
// and issues the same products in the same order (every third case has whole tiles, so that the
// float32 output is staged through a ring).
TEST(OperandRepack, PresplitTf32x3MatchesTheInKernelSplitBitForBit) {
  std::mt19937_64 rng(41);
  int compared = 0, staged = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t wns[] = {16, 32, 64};
    const int64_t wn = wns[rng() % 3];
    const int64_t bn = wn * static_cast<int64_t>(1 + rng() % 2);
    const bool whole = trial % 3 == 0;
    const int64_t m = whole ? 128 : 64 + static_cast<int64_t>(rng() % 80);
    const int64_t n = whole ? 2 * bn : 16 + static_cast<int64_t>(rng() % 60);
    const int64_t kdim = 8 + static_cast<int64_t>(rng() % 90);
    const testing::OpCase c = testing::RandomLayoutMatmul(rng, m, n, kdim);
    const ir::ComputeDAG dag = BuildOpOrDie(c.op, c.shapes, ir::ScalarType::kFloat32, c.attrs);
    TensorCoreStep t = Repacked("tf32x3", true, 64, bn, rng() % 2 ? 16 : 32, 64, wn);
    t.pipeline = static_cast<int>(1 + rng() % 4);
    t.raster = 1 + rng() % 3;
    if (whole) {  // a ring large enough to stage the 64 x bn float32 output tile in
      t.block_k = 32;
      t.pipeline = 4;
    }
    absl::StatusOr<LoweredKernel> presplit = LowerWith(dag, t);
    t.repack = false;
    absl::StatusOr<LoweredKernel> in_kernel = LowerWith(dag, t);
    if (!testing::LoweredOrWithinLimits(presplit) || !testing::LoweredOrWithinLimits(in_kernel)) {
      continue;
    }
    const std::string text = ir::ToString(presplit->nest);
    ASSERT_NE(text.find(".A.small.shared"), std::string::npos);
    // Whole tiles of a float32 output: staged through the A ring (a second Y.acc.stage loop).
    if (whole && text.find(".acc.stage") != std::string::npos) ++staged;
    ir::BufferMap inputs = ir::MakeRandomInputs(dag, 900 + trial);
    for (auto& [name, buf] : inputs) {
      for (size_t i = 0; i < buf.data.size(); i += 7) {
        uint32_t bits;
        float f = static_cast<float>(buf.data[i]);
        std::memcpy(&bits, &f, 4);
        switch (i % 4) {
          case 0:
            bits |= 0x1fffu;  // every low bit set
            break;
          case 1:
            bits &= ~0x1fffu;  // exactly TF32
            break;
          case 2:
            bits = 0x80000000u;  // -0
            break;
          default:
            bits = (bits & 0x80000000u) | 0x2f3a5u;  // a subnormal
        }
        std::memcpy(&f, &bits, 4);
        buf.data[i] = f;
      }
    }
    absl::StatusOr<ir::BufferMap> a = testing::RunLowered(presplit->nest, inputs);
    absl::StatusOr<ir::BufferMap> b = testing::RunLowered(in_kernel->nest, inputs);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    const std::string& out = dag.stage(dag.output_ids()[0]).name();
    ASSERT_EQ(a->at(out).data.size(), b->at(out).data.size());
    for (size_t i = 0; i < a->at(out).data.size(); ++i) {
      ASSERT_EQ(a->at(out).data[i], b->at(out).data[i])
          << "element " << i << " of " << m << "x" << n << "x" << kdim << " "
          << StepToString(TensorCoreStep(t));
    }
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs, ir::Precision::kFloat64);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_LE(testing::MaxRelError(dag, *a, *ref), 1e-4);
    ++compared;
  }
  EXPECT_GE(compared, 12);
  EXPECT_GE(staged, 4);
}

// One-pass TF32 on wgmma reads repacked tiles straight from the ring; with 3 channels (no 16-byte
// copies along k) the ring is filled element by element, each element placed at its 16-byte
// chunk's swizzled place plus its offset in the chunk (a single element's own address swizzled as
// if it began a chunk collapsed a chunk's elements onto one slot: infinities from the poison).
TEST(OperandRepack, ElementFilledWgmmaTilesPlaceEachElementInItsChunk) {
  const ir::ComputeDAG dag = BuildOpOrDie("conv2d_nchw", {{1, 3, 8, 8}, {16, 3, 3, 3}},
                                          ir::ScalarType::kFloat32, {{"padding", "1"}});
  const TensorCoreStep t = Repacked("tf32", true, 64, 16, 32, 64, 16);
  absl::StatusOr<LoweredKernel> k = LowerWith(dag, t);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<double> err = testing::RelErrorToFloat64(dag, k->nest, 5);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LE(*err, testing::TensorCoreTolerance(t, ir::ScalarType::kFloat32));
}

// Inputs wide enough for the tiled transpose (rows of 16 or more along both the source's
// innermost dimension and the channels), tiles cut at the edges: the result still matches.
TEST(OperandRepack, TiledTransposeOfWideInputsMatchesTheReference) {
  struct Wide {
    std::vector<std::vector<int64_t>> shapes;
    std::map<std::string, std::string> attrs;
    ir::ScalarType dtype;
    const char* kind;
    bool vector;  // rows of whole 16-byte vectors: the transpose loads them as vectors
  };
  const Wide cases[] = {
      {{{1, 36, 5, 40}, {8, 36, 3, 3}},
       {{"padding", "1"}},
       ir::ScalarType::kFloat32,
       "tf32x3",
       true},
      {{{2, 16, 3, 33}, {16, 16, 1, 1}}, {}, ir::ScalarType::kFloat16, "f16", false},
      {{{1, 20, 2, 70}, {8, 20, 1, 3}},
       {{"padding", "1"}},
       ir::ScalarType::kFloat32,
       "tf32x3",
       false},
      {{{1, 48, 4, 17}, {24, 48, 3, 3}},
       {{"padding", "2"}, {"stride", "2"}},
       ir::ScalarType::kBFloat16,
       "bf16",
       false},
      // Two tiles along w (72 = 64 + 8: the second partial), padding on both sides, TF32
      // rounding; 100 channels (a partial tile along c); float16 vectors of 8 with padding 3;
      // bfloat16 with stride 2; a 1x1 without padding.
      {{{1, 100, 3, 72}, {8, 100, 3, 3}},
       {{"padding", "1"}},
       ir::ScalarType::kFloat32,
       "tf32",
       true},
      {{{2, 16, 2, 64}, {16, 16, 3, 7}}, {{"padding", "3"}}, ir::ScalarType::kFloat16, "f16", true},
      {{{1, 32, 5, 24}, {16, 32, 3, 3}},
       {{"padding", "2"}, {"stride", "2"}},
       ir::ScalarType::kBFloat16,
       "bf16",
       true},
      {{{2, 64, 2, 16}, {16, 64, 1, 1}}, {}, ir::ScalarType::kFloat32, "tf32x3", true},
  };
  for (const Wide& c : cases) {
    SCOPED_TRACE(nlohmann::json(c.shapes).dump());
    const ir::ComputeDAG dag = BuildOpOrDie("conv2d_nchw", c.shapes, c.dtype, c.attrs);
    const TensorCoreStep t = Repacked(c.kind, false, 64, 32, 16, 32, 16);
    absl::StatusOr<LoweredKernel> k = LowerWith(dag, t);
    ASSERT_TRUE(k.ok()) << k.status();
    // The input's repack is the tiled transpose: a shared tile and a barrier in the first kernel.
    const std::string text = ir::ToString(k->nest);
    const size_t gemm = text.find(".A.shared");
    ASSERT_NE(gemm, std::string::npos);
    EXPECT_LT(text.find(".repacked.tile"), gemm) << text.substr(0, 3000);
    EXPECT_EQ(text.find(".repacked.vec") < gemm, c.vector) << text.substr(0, 3000);
    absl::StatusOr<double> err = testing::RelErrorToFloat64(dag, k->nest, 17);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LE(*err, testing::TensorCoreTolerance(t, c.dtype)) << nlohmann::json(c.shapes).dump();
  }
}

}  // namespace
}  // namespace tilesearch::schedule
