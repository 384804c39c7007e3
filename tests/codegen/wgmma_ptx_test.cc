// Tensor-core schedules with wgmma compile to PTX for sm_90a: a target of sm_90 is upgraded to the
// arch-specific sm_90a (the only one with wgmma), each warpgroup tile becomes m64nNk16 wgmma's
// with the operand layouts as transposes, the shared window is 1024-byte aligned, and
// ptxas -arch=sm_90a assembles the result (skipped where ptxas is absent). A module compiled for
// another arch is refused by name.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "gtest/gtest.h"
#include "ir/ops/registry.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/state.h"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::codegen {
namespace {

using namespace ::tilesearch::codegen::testing;  // NOLINT: PTX helpers

struct Problem {
  std::string kind;  // f16 / bf16 / tf32 / tf32x3
  bool transpose_b = false;
  int64_t wm = 64, wn = 128, bk = 64;
  int pipeline = 3;
  int64_t k = 192;          // the reduction (A is 256 x k)
  bool tma = false;         // TensorCoreStep::tma
  bool ws = false;          // TensorCoreStep::warp_specialized
  bool persistent = false;  // TensorCoreStep::persistent
  bool stream_k = false;    // TensorCoreStep::stream_k (on 3 multiprocessors, not 2)
  bool pingpong = false;    // TensorCoreStep::pingpong (one warpgroup tile per block tile)
  bool multicast = false;   // TensorCoreStep::multicast
  int epilogue = 0;         // TensorCoreStep::epilogue (1: the cast to the output type fused)
};

std::vector<LaunchConfig> Launches(const schedule::LoweredKernel& k) {
  std::vector<LaunchConfig> out;
  for (const auto& l : k.launches) {
    LaunchConfig c;
    c.grid = l.grid;
    c.block = l.block;
    out.push_back(c);
  }
  return out;
}

absl::StatusOr<schedule::LoweredKernel> LowerWgmma(const Problem& p) {
  ir::OpArgs args;
  args.shapes = {{256, p.k},
                 p.transpose_b ? std::vector<int64_t>{256, p.k} : std::vector<int64_t>{p.k, 256}};
  args.dtype = p.kind == "bf16"  ? ir::ScalarType::kBFloat16
               : p.kind == "f16" ? ir::ScalarType::kFloat16
                                 : ir::ScalarType::kFloat32;
  args.attrs = {{"transpose_b", p.transpose_b ? "true" : "false"}};
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, ir::BuildOp("matmul", args));
  schedule::State s = schedule::State::Initial(dag);
  schedule::TensorCoreStep t;
  for (int i = 0; i < s.num_stages(); ++i) {
    if (s.stage(i).op->reduce == ir::ReduceKind::kSum) t.stage_id = i;
  }
  t.kind = p.kind;
  t.warpgroup = true;
  t.block_m = p.pingpong ? p.wm : 2 * p.wm;
  t.block_n = p.wn;
  t.block_k = p.bk;
  t.warp_m = p.wm;
  t.warp_n = p.wn;
  t.pipeline = p.pipeline;
  t.pad = 0;
  t.tma = p.tma;
  t.warp_specialized = p.ws;
  t.persistent = p.persistent;
  t.stream_k = p.stream_k;
  t.pingpong = p.pingpong;
  t.multicast = p.multicast;
  t.epilogue = p.epilogue;
  ASSIGN_OR_RETURN(s, schedule::ApplyStep(s, t));
  Target target;
  target.kind = TargetKind::kCuda;
  target.arch = "sm_90";
  if (p.persistent) target.sm_count = p.stream_k ? 3 : 2;  // blocks walking the tiles
  return schedule::Lower(dag, s, target);
}

// The PTX of problem `p`'s kernel, which must target sm_90a.
std::string WgmmaPtx(const Problem& p) {
  absl::StatusOr<schedule::LoweredKernel> k = LowerWgmma(p);
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return "";
  absl::StatusOr<GpuModule> m = CompileToPtx(k->nest, Launches(*k));
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  EXPECT_NE(m->ptx.find(".target sm_90a"), std::string::npos) << p.kind;
  return m->ptx;
}

class WgmmaPtxTest : public ::testing::TestWithParam<Problem> {};

TEST_P(WgmmaPtxTest, CompilesForSm90aAndAssembles) {
  const Problem& p = GetParam();
  const std::string ptx = WgmmaPtx(p);
  ASSERT_FALSE(ptx.empty());
  EXPECT_NE(ptx.find(".align 1024"), std::string::npos);
  // A k tile of bk is bk / 16 steps of one m64 instruction per warpgroup tile row; with a
  // 3-stage ring the tiles' groups stay in flight (wait_group 1) and the last tile, peeled off the
  // loop, drains them (wait_group 0): the instructions appear twice.
  const std::string mma =
      absl::StrCat("wgmma.mma_async.sync.aligned.m64n", p.wn, "k16.f32.", p.kind, ".", p.kind);
  EXPECT_EQ(Count(ptx, mma), 2 * (p.bk / 16) * (p.wm / 64)) << ptx.substr(0, 4000);
  EXPECT_EQ(Count(ptx, "wgmma.fence.sync.aligned"), 2);
  EXPECT_EQ(Count(ptx, "wgmma.commit_group.sync.aligned"), 2);
  EXPECT_EQ(Count(ptx, "wgmma.wait_group.sync.aligned \t1;"), 1);
  EXPECT_EQ(Count(ptx, "wgmma.wait_group.sync.aligned \t0;"), 1);
  EXPECT_GE(Count(ptx, "fence.proxy.async.shared::cta"), 1);
  EXPECT_GE(Count(ptx, "cp.async.cg.shared.global"), 1);
  ExpectPtxasAccepts(ptx, "wgmma_" + p.kind, "sm_90a");
}

INSTANTIATE_TEST_SUITE_P(Layouts, WgmmaPtxTest,
                         ::testing::Values(Problem{"bf16", false, 64, 128, 64},
                                           Problem{"f16", true, 64, 64, 32},
                                           Problem{"bf16", true, 128, 128, 16},
                                           Problem{"f16", false, 64, 256, 64}));

// TMA fills (TensorCoreStep::tma): per k tile thread 0 raises its slot's mbarrier by the tile's
// bytes and starts the 2-D boxes (A K-major: 128-row boxes; B: one box per 64-column atom, or
// 128-row boxes when K-major), every thread waits on the slot's parity; no per-thread cp.async
// is left; the tensor maps are two more kernel parameters; ptxas accepts it for sm_90a.
TEST(WgmmaPtx, TmaFillsCompileForSm90aAndAssemble) {
  for (Problem p : {Problem{"bf16", false, 64, 128, 64, 3}, Problem{"f16", true, 64, 64, 32, 2},
                    Problem{"bf16", false, 64, 256, 64, 4}}) {
    p.tma = true;
    const std::string ptx = WgmmaPtx(p);
    ASSERT_FALSE(ptx.empty());
    const std::string copy =
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes";
    // A's tile (128 rows) is one box; B's is block_n / 64 boxes (MN-major) or one (K-major). The
    // issue code appears once per prologue tile (slots - 1, less one when the wgmma's pend) and
    // once in the k loop; the last tile issues nothing.
    const int64_t boxes = 1 + (p.transpose_b ? 1 : p.wn / 64);
    const int64_t issues = (p.pipeline - 1 - (p.pipeline >= 3 ? 1 : 0)) + 1;
    EXPECT_EQ(Count(ptx, copy), issues * boxes) << p.kind << " " << p.wn;
    EXPECT_GE(Count(ptx, "mbarrier.try_wait.parity.shared::cta.b64"), 2);
    // Per slot a full barrier and an empty one (one arrival per warp).
    EXPECT_EQ(Count(ptx, "mbarrier.init.shared::cta.b64"), 2 * p.pipeline);
    EXPECT_GE(Count(ptx, "mbarrier.arrive.expect_tx.shared::cta.b64"), 2);
    EXPECT_GE(Count(ptx, "mbarrier.arrive.shared::cta.b64"), 1);
    EXPECT_EQ(Count(ptx, "cp.async.cg.shared.global"), 0);
    // Slots are released through the empty barriers: the block barrier after the initialization
    // is the kernel's only one; only TMA writes the tiles: no proxy fence before the wgmma's.
    EXPECT_EQ(Count(ptx, "bar.sync"), 1);
    EXPECT_EQ(Count(ptx, "fence.proxy.async"), 0);
    // Two kernels (the product, then its cast to the output), each taking A, B, the output, the
    // float32 product between them and the two tensor maps.
    EXPECT_EQ(Count(ptx, ".param .u64"), 2 * 6);
    ExpectPtxasAccepts(ptx, "wgmma_tma_" + p.kind, "sm_90a");
  }
}

// Clusters of two blocks sharing B's tiles (TensorCoreStep::multicast): the product kernel is
// compiled for clusters of two (.reqnctapercluster 2, 1, 1; the cast kernel after it has none),
// B's boxes are started by one block each with .multicast::cluster under a %cluster_ctarank test
// while A's box stays a plain copy, a slot is refilled once both blocks released it (remote
// mbarrier arrivals); ptxas accepts it for sm_90a.
TEST(WgmmaPtx, MulticastClustersCompileForSm90aAndAssemble) {
  Problem p{"bf16", false, 64, 128, 64, 3};
  p.tma = p.multicast = true;
  p.k = 384;  // six k tiles: slots are released inside the loop too
  const std::string ptx = WgmmaPtx(p);
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(Count(ptx, ".reqnctapercluster 2, 1, 1"), 1) << ptx.substr(0, 3000);
  const std::string copy =
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes";
  // Per issue: A's one box plain, B's two 64-column boxes multicast (one per rank).
  const int64_t issues = (p.pipeline - 1 - 1) + 1;
  EXPECT_EQ(Count(ptx, copy + ".multicast::cluster"), issues * 2);
  EXPECT_EQ(Count(ptx, copy + " "), issues);
  EXPECT_GE(Count(ptx, "%cluster_ctarank"), 2);
  // One cluster barrier, after the mbarrier initialization; in the k loop thread 0 releases the
  // freed slot in both blocks (mapa, remote arrive) and waits for the release of the slot it
  // refills; the peeled last tile refills nothing and releases nothing (no arrival reaches a
  // block that may have finished).
  EXPECT_EQ(Count(ptx, "barrier.cluster.arrive;"), 1);
  EXPECT_EQ(Count(ptx, "barrier.cluster.wait;"), 1);
  EXPECT_EQ(Count(ptx, "mapa.shared::cluster.u32"), 2);
  EXPECT_EQ(Count(ptx, "mbarrier.arrive.shared::cluster.b64"), 2);
  ExpectPtxasAccepts(ptx, "wgmma_tma_multicast_bf16", "sm_90a");
}

// Multicast clusters with a producer warpgroup (and persistent pairs): the product kernel runs in
// clusters of two, the producer starts A's box plain and B's halves with .multicast::cluster,
// each consumer warp's first lane releases a slot in both blocks (mapa, remote arrive at each
// release site: inside the k loop and the last tile's two), and two cluster barriers frame the
// roles (after the initialization, before the exit); ptxas accepts both for sm_90a.
TEST(WgmmaPtx, MulticastWithAProducerWarpgroupCompilesForSm90aAndAssembles) {
  for (bool persistent : {false, true}) {
    Problem p{"bf16", false, 64, 128, 64, 4};
    p.tma = p.ws = p.multicast = true;
    p.persistent = persistent;
    p.k = 384;
    const std::string ptx = WgmmaPtx(p);
    ASSERT_FALSE(ptx.empty());
    EXPECT_EQ(Count(ptx, ".reqnctapercluster 2, 1, 1"), 1) << ptx.substr(0, 3000);
    const std::string copy =
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes";
    // (LLVM may unroll the producer's loop: two multicast B boxes per plain A box.)
    EXPECT_GE(Count(ptx, copy + " "), 1);
    EXPECT_EQ(Count(ptx, copy + ".multicast::cluster"), 2 * Count(ptx, copy + " "));
    EXPECT_EQ(Count(ptx, "barrier.cluster.arrive;"), 2);
    EXPECT_EQ(Count(ptx, "barrier.cluster.wait;"), 2);
    EXPECT_EQ(Count(ptx, "bar.sync"), 0);
    // Three release sites (in the loop, then the last tile's previous and own slots), each an
    // arrival in both blocks.
    EXPECT_EQ(Count(ptx, "mbarrier.arrive.shared::cluster.b64"), 3 * 2);
    EXPECT_EQ(Count(ptx, "mbarrier.arrive.shared::cta.b64"), 0);
    ExpectPtxasAccepts(ptx, persistent ? "wgmma_ws_multicast_persistent" : "wgmma_ws_multicast",
                       "sm_90a");
  }
}

// A producer warpgroup (TensorCoreStep::warp_specialized): one thread fills each slot once the
// consumers released it (mbarrier.arrive on the slot's second barrier), the consumers wait on
// the full barriers; no bar.sync in the k loop (the one after the barriers' initialization is
// the kernel's only one); ptxas accepts it for sm_90a, persistent blocks (a loop over the
// block's tiles around each role) too.
TEST(WgmmaPtx, WarpSpecializedTmaCompilesForSm90aAndAssembles) {
  Problem walking{"bf16", false, 64, 128, 64, 4};
  walking.persistent = true;
  for (Problem p :
       {Problem{"bf16", false, 64, 128, 64, 3}, Problem{"f16", true, 64, 256, 64, 4}, walking}) {
    p.tma = p.ws = true;
    const std::string ptx = WgmmaPtx(p);
    ASSERT_FALSE(ptx.empty());
    EXPECT_EQ(Count(ptx, "mbarrier.init.shared::cta.b64"), 2 * p.pipeline);
    EXPECT_GE(Count(ptx, "mbarrier.arrive.shared::cta.b64"), 2);
    EXPECT_GE(Count(ptx, "cp.async.bulk.tensor.2d"), 2);
    EXPECT_EQ(Count(ptx, "bar.sync"), 1);
    EXPECT_EQ(Count(ptx, "fence.proxy.async"), 0);
    // Two consumer warpgroups: the producer returns registers they take (384 threads: 168 each
    // at launch, 40 + 2 x 232 after).
    EXPECT_EQ(Count(ptx, "setmaxnreg.dec.sync.aligned.u32 \t40;"), 1);
    EXPECT_EQ(Count(ptx, "setmaxnreg.inc.sync.aligned.u32 \t232;"), 1);
    if (p.persistent) {
      absl::StatusOr<schedule::LoweredKernel> k = LowerWgmma(p);
      ASSERT_TRUE(k.ok()) << k.status();
      EXPECT_EQ(k->launches.front().grid[0], 2);  // the GEMM (the cast to bf16 follows)
      const std::string nest = ir::ToString(k->nest);
      EXPECT_NE(nest.find(".produce.tile in [0, 2)"), std::string::npos) << nest;
      EXPECT_NE(nest.find(".consume.tile in [0, 2)"), std::string::npos) << nest;
    }
    ExpectPtxasAccepts(ptx, "wgmma_ws_" + p.kind + (p.persistent ? "_persistent" : ""), "sm_90a");
  }
}

// Stream-k (TensorCoreStep::stream_k): 4 tiles of 128 x 128 with 3 k tiles each over 3 blocks,
// so every block takes 4 k tiles across a tile boundary; the GEMM stores the parts of the split
// tiles to the workspace and the fixup kernel adds them. ptxas accepts both kernels for sm_90a.
TEST(WgmmaPtx, StreamKCompilesForSm90aAndAssembles) {
  Problem p{"bf16", false, 64, 128, 64, 3};
  p.tma = p.ws = p.persistent = p.stream_k = true;
  absl::StatusOr<schedule::LoweredKernel> k = LowerWgmma(p);
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_GE(k->launches.size(), 2u);
  EXPECT_EQ(k->launches.front().grid[0], 3);
  const std::string nest = ir::ToString(k->nest);
  EXPECT_NE(nest.find(".parts"), std::string::npos) << nest;
  const std::string ptx = WgmmaPtx(p);
  ASSERT_FALSE(ptx.empty());
  EXPECT_GE(Count(ptx, ".entry"), 2);
  EXPECT_GE(Count(ptx, "wgmma.mma_async"), 1);
  ExpectPtxasAccepts(ptx, "wgmma_ws_bf16_stream_k", "sm_90a");
}

// Ping-pong consumers (TensorCoreStep::pingpong): two consumer warpgroups of 64 x 128 tiles take
// a 2-SM target's 8 tiles in turn (4 per block), with the ring's barriers plus two turn
// barriers; ptxas accepts it for sm_90a.
TEST(WgmmaPtx, PingPongConsumersCompileForSm90aAndAssemble) {
  Problem p{"bf16", false, 64, 128, 64, 3};
  p.tma = p.ws = p.persistent = p.pingpong = true;
  absl::StatusOr<schedule::LoweredKernel> k = LowerWgmma(p);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->launches.front().grid[0], 2);
  // A producer warpgroup and two consumers.
  EXPECT_EQ(k->launches.front().block[0] * k->launches.front().block[1], 3 * 128);
  const std::string nest = ir::ToString(k->nest);
  EXPECT_NE(nest.find(".consume.tile in [0, 4)"), std::string::npos) << nest;
  const std::string ptx = WgmmaPtx(p);
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(Count(ptx, "mbarrier.init.shared::cta.b64"), 2 * p.pipeline + 2);
  EXPECT_EQ(Count(ptx, "setmaxnreg.inc.sync.aligned.u32 \t232;"), 1);
  EXPECT_EQ(Count(ptx, "bar.sync"), 1);
  ExpectPtxasAccepts(ptx, "wgmma_ws_pingpong_" + p.kind, "sm_90a");
}

// The PTX of a block with two consumer warpgroups: one block per multiprocessor, the producer's
// setmaxnreg to 40 and the consumers' to 232, and ptxas (sm_90a) assembles it without the note it
// prints when it has to ignore a setmaxnreg.
void ExpectRegisterReallocationKept(const std::string& ptx, const std::string& stem) {
  EXPECT_EQ(Count(ptx, ".minnctapersm 1"), 1);
  EXPECT_EQ(Count(ptx, "setmaxnreg.dec.sync.aligned.u32 \t40;"), 1);
  EXPECT_EQ(Count(ptx, "setmaxnreg.inc.sync.aligned.u32 \t232;"), 1);
  std::optional<std::string> log = PtxasLog(ptx, stem, "sm_90a");
  if (!log.has_value()) GTEST_SKIP() << "ptxas not found at " << kPtxas;
  EXPECT_EQ(log->find("setmaxnreg"), std::string::npos) << *log;
}

// Persistent warp-specialized consumers with the cast to bfloat16 fused stage their output:
// per chunk of 64 columns the fragments go to shared memory (4-byte pieces), then each lane
// stores whole 16-byte row pieces, read back as 16-byte vectors: no 4-byte global store is left.
// One mbarrier per consumer warp besides the ring's; ptxas accepts it for sm_90a and keeps the
// register reallocation (it prints a note when it has to ignore a setmaxnreg).
TEST(WgmmaPtx, WarpSpecializedConsumersStageTheirOutput) {
  Problem p{"bf16", false, 64, 256, 64, 4};
  p.tma = p.ws = p.persistent = true;
  p.epilogue = 1;
  const std::string ptx = WgmmaPtx(p);
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(Count(ptx, "mbarrier.init.shared::cta.b64"), 2 * p.pipeline + 8);
  // A warp's 16 rows x wn columns of bfloat16: per lane wn / 8 fragments of two rows, one 4-byte
  // pair each put; 16 · wn · 2 bytes in 16-byte pieces over 32 lanes read back and stored.
  const int64_t pairs = p.wn / 8 * 2;
  const int64_t pieces = 16 * p.wn * 2 / 16 / 32;
  EXPECT_EQ(Count(ptx, "st.shared.b32"), pairs);
  EXPECT_EQ(Count(ptx, "ld.shared.v4"), pieces);
  EXPECT_EQ(Count(ptx, "st.global.v4"), pieces);
  EXPECT_EQ(Count(ptx, "st.global.b32"), 0);
  ExpectRegisterReallocationKept(ptx, "wgmma_ws_staged");
}

// Two consumer warpgroups of 64x64 tiles (32 accumulators, about 60 registers) fit two blocks
// per multiprocessor: no reallocation, no launch bound. Of 64x128 tiles (64 accumulators) they do
// not: the reallocation, compiled for one block per multiprocessor (.minnctapersm 1, without
// which ptxas gives the threads fewer registers than the block allows and ignores it: "unable to
// determine register count at entry"), and ptxas keeps both setmaxnreg.
TEST(WgmmaPtx, RegisterReallocationOnlyWhereRegistersHoldOneBlockPerSm) {
  Problem narrow{"bf16", false, 64, 64, 64, 2};
  narrow.tma = narrow.ws = true;
  std::string ptx = WgmmaPtx(narrow);
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(Count(ptx, "setmaxnreg"), 0);
  EXPECT_EQ(Count(ptx, ".minnctapersm"), 0);
  Problem wider{"bf16", false, 64, 128, 64, 2};
  wider.tma = wider.ws = true;
  ptx = WgmmaPtx(wider);
  ASSERT_FALSE(ptx.empty());
  ExpectRegisterReallocationKept(ptx, "wgmma_ws_wider");
}

// float32 operands on TF32 wgmma with an MN-major B: each k tile's ring slot is copied into
// K-major TF32 tiles (tf32 rounded, B only: its A goes through registers; tf32x3 big and small
// parts, truncated), then m64nNk8 instructions: tf32x3's three products per k step, tf32's one.
TEST(WgmmaPtx, Tf32KindsCompileForSm90aAndAssemble) {
  for (const Problem& p :
       {Problem{"tf32x3", false, 64, 64, 32}, Problem{"tf32x3", true, 64, 32, 16},
        Problem{"tf32", false, 64, 64, 8}}) {
    const std::string ptx = WgmmaPtx(p);
    ASSERT_FALSE(ptx.empty());
    const int64_t products = p.kind == "tf32x3" ? 3 : 1;
    const std::string mma =
        absl::StrCat("wgmma.mma_async.sync.aligned.m64n", p.wn, "k8.f32.tf32.tf32");
    // The products are issued twice (the first tile before the k loop, the next in it), each
    // group left in flight (wait_group 3); the two sums wait for them (wait_group 0), and tf32's
    // A register loads wait for every wgmma in flight first (wait_group 0 again).
    const bool a_registers = p.kind == "tf32";
    EXPECT_EQ(Count(ptx, mma), 2 * products * (p.bk / 8) * (p.wm / 64)) << p.kind;
    EXPECT_EQ(Count(ptx, "wgmma.commit_group.sync.aligned"), 2 * products) << p.kind;
    EXPECT_EQ(Count(ptx, "wgmma.wait_group.sync.aligned \t3;"), 2 * products) << p.kind;
    EXPECT_EQ(Count(ptx, "wgmma.wait_group.sync.aligned \t0;"), a_registers ? 4 : 2) << p.kind;
    if (a_registers) {  // a fragment's four values
      EXPECT_GE(Count(ptx, "ld.shared.b32"), 4);
    }
    // The TF32 mask (and.b32 with 0xFFFFE000); only tf32 rounds, which tests the exponent for
    // Inf / NaN (and.b32 with 0x7F800000 = 2139095040).
    EXPECT_GE(Count(ptx, "-8192"), 1) << p.kind;
    EXPECT_EQ(Count(ptx, "2139095040") > 0, p.kind == "tf32") << p.kind;
    ExpectPtxasAccepts(ptx, "wgmma_" + p.kind, "sm_90a");
  }
}

// conv2d_nchw with padding 1 on `shapes` of `dtype`, with wgmma step `t` applied to its sum
// reduction (pad 0), lowered for sm_90.
absl::StatusOr<schedule::LoweredKernel> LowerConv(std::vector<std::vector<int64_t>> shapes,
                                                  ir::ScalarType dtype, schedule::TensorCoreStep t,
                                                  std::map<std::string, std::string> attrs = {
                                                      {"padding", "1"}}) {
  ir::OpArgs args;
  args.shapes = std::move(shapes);
  args.dtype = dtype;
  args.attrs = std::move(attrs);
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, ir::BuildOp("conv2d_nchw", args));
  schedule::State s = schedule::State::Initial(dag);
  for (int i = 0; i < s.num_stages(); ++i) {
    if (s.stage(i).op->reduce == ir::ReduceKind::kSum) t.stage_id = i;
  }
  t.warpgroup = true;
  t.pad = 0;
  ASSIGN_OR_RETURN(s, schedule::ApplyStep(s, t));
  Target target;
  target.kind = TargetKind::kCuda;
  target.arch = "sm_90";
  return schedule::Lower(dag, s, target);
}

// A padded float32 convolution on TF32 wgmma gathers its input tile with zero-filling cp.async: a
// 4-byte copy whose source size is a register (4 inside the image, 0 in the padding), which
// ptxas accepts for sm_90a.
TEST(WgmmaPtx, ConvolutionGathersWithZeroFillingCopies) {
  schedule::TensorCoreStep t;
  t.kind = "tf32x3";
  t.block_m = t.warp_m = 64;
  t.block_n = t.warp_n = 32;
  t.block_k = 16;
  t.pipeline = 3;
  absl::StatusOr<schedule::LoweredKernel> k =
      LowerConv({{2, 16, 10, 10}, {32, 16, 3, 3}}, ir::ScalarType::kFloat32, t);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<GpuModule> m = CompileToPtx(k->nest, Launches(*k));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GE(Count(m->ptx, "cp.async.ca.shared.global"), 1);
  EXPECT_GE(Count(m->ptx, ", 4, %r"), 1) << m->ptx.substr(0, 4000);
  ExpectPtxasAccepts(m->ptx, "wgmma_conv_gather", "sm_90a");
}

// A repacked convolution (TensorCoreStep::repack): the GEMM's fill is 16-byte cp.async copies
// along k from the padded workspaces, with no 4-byte gathers; one-pass TF32 reads the repacked
// tiles as they are (rounded to TF32 by the repack kernels, no copy into TF32 tiles), and so does
// tf32x3 from four rings (both operands' big and small parts, split by the repack kernels); ptxas
// accepts every kind.
TEST(WgmmaPtx, RepackedConvolutionFillsWith16ByteCopies) {
  for (const std::string kind : {"tf32", "tf32x3", "bf16"}) {
    schedule::TensorCoreStep t;
    t.kind = kind;
    t.repack = true;
    t.block_m = 128;
    t.block_n = t.warp_n = 64;
    t.warp_m = 64;
    t.block_k = kind == "bf16" ? 32 : 16;
    t.pipeline = 4;
    t.epilogue = kind == "bf16" ? 1 : 0;  // the cast to bfloat16 on the accumulators
    absl::StatusOr<schedule::LoweredKernel> k =
        LowerConv({{2, 16, 10, 10}, {64, 16, 3, 3}},
                  kind == "bf16" ? ir::ScalarType::kBFloat16 : ir::ScalarType::kFloat32, t);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(k->launches.size(), 3u) << kind;  // the input's and the weights' repack, the GEMM
    absl::StatusOr<GpuModule> m = CompileToPtx(k->nest, Launches(*k));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_GE(Count(m->ptx, "cp.async.cg.shared.global"), 2) << kind;
    EXPECT_EQ(Count(m->ptx, "cp.async.ca.shared.global"), 0) << kind;
    // tf32: the repack kernels round to TF32 (the Inf / NaN exponent test, 0x7F800000); no kind
    // truncates here but tf32x3's split into big and small parts.
    EXPECT_EQ(Count(m->ptx, "2139095040") > 0, kind == "tf32") << kind;
    if (kind == "tf32") {
      EXPECT_GE(Count(m->ptx, "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"), 2);
    }
    if (kind == "tf32x3") {
      // The repack kernels truncate (and.b32 with 0xFFFFE000 = -8192, twice per value: big and
      // small); the GEMM, the last entry, truncates nothing (no in-kernel split) and takes both
      // operands' two workspaces.
      const size_t gemm = m->ptx.rfind(".entry");
      ASSERT_NE(gemm, std::string::npos);
      const std::string repacks = m->ptx.substr(0, gemm), main = m->ptx.substr(gemm);
      EXPECT_GE(Count(repacks, "-8192"), 4);
      EXPECT_EQ(Count(main, "-8192"), 0) << main;
      EXPECT_GE(Count(main, ".param .u64"), 5);  // X's two workspaces, W's two, the output
      EXPECT_GE(Count(main, "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"), 6);
    }
    ExpectPtxasAccepts(m->ptx, "wgmma_conv_repacked_" + kind, "sm_90a");
  }
}

// A 1×1 convolution without repack: the input tile is read as it lies (MN-major, contiguous
// along the pixels) by vector copies inside rows of w (16 bytes where w takes them, 8 for float16
// rows of 12), the weights [K, C, 1, 1] by 16-byte copies along C; no 4-byte gathers; ptxas
// accepts each kind.
TEST(WgmmaPtx, OneByOneConvolutionCopiesPixelVectors) {
  for (const std::string kind : {"tf32", "tf32x3", "f16"}) {
    for (int64_t w : {8, 12}) {
      schedule::TensorCoreStep t;
      t.kind = kind;
      t.block_m = t.warp_m = 64;
      t.block_n = t.warp_n = 64;
      t.block_k = kind == "f16" ? 16 : 8;
      t.pipeline = 3;
      t.epilogue = kind == "f16" ? 1 : 0;
      absl::StatusOr<schedule::LoweredKernel> k =
          LowerConv({{2, 16, 8, w}, {64, 16, 1, 1}},
                    kind == "f16" ? ir::ScalarType::kFloat16 : ir::ScalarType::kFloat32, t, {});
      ASSERT_TRUE(k.ok()) << k.status();
      absl::StatusOr<GpuModule> m = CompileToPtx(k->nest, Launches(*k));
      ASSERT_TRUE(m.ok()) << m.status();
      const bool eight = kind == "f16" && w == 12;
      // 16-byte copies: the weights' always, the input's too where w takes them.
      EXPECT_GE(Count(m->ptx, "cp.async.cg.shared.global"), eight ? 1 : 2) << kind << " " << w;
      EXPECT_EQ(Count(m->ptx, "cp.async.ca.shared.global") > 0, eight) << kind << " " << w;
      // Every 4- or 8-byte copy (.ca) is an 8-byte one.
      int64_t ca = 0, ca8 = 0;
      for (size_t at = m->ptx.find("cp.async.ca.shared.global"); at != std::string::npos;
           at = m->ptx.find("cp.async.ca.shared.global", at + 1)) {
        const std::string line = m->ptx.substr(at, m->ptx.find('\n', at) - at);
        ++ca;
        if (line.find("], 8;") != std::string::npos) ++ca8;
      }
      EXPECT_EQ(ca8, ca) << kind << " " << w;
      ExpectPtxasAccepts(m->ptx, absl::StrCat("wgmma_conv1x1_", kind, "_w", w), "sm_90a");
    }
  }
}

// The registers of `text`'s first brace list ("{%r1, %r2}") or, without braces, of its first
// comma-separated operand.
std::vector<std::string> Registers(const std::string& text) {
  const size_t open = text.find('{');
  std::string list = open == std::string::npos
                         ? text.substr(0, text.find(','))
                         : text.substr(open + 1, text.find('}', open) - open - 1);
  std::vector<std::string> out;
  for (size_t p = list.find('%'); p != std::string::npos; p = list.find('%', p + 1)) {
    size_t e = p + 1;
    while (e < list.size() && std::isalnum(static_cast<unsigned char>(list[e]))) ++e;
    out.push_back(list.substr(p, e - p));
  }
  return out;
}

// Per wgmma.fence ... wgmma.commit_group region of `ptx`: the instructions in it that write a
// register some wgmma of the region uses as its accumulator ("line: instruction"). Such a write
// (say the zeroing of one 64-row half while the other half's wgmma is in flight) makes ptxas
// inject warpgroup.arrive / warpgroup.wait and serialize the wgmma's.
std::vector<std::string> AccumulatorWritesInFencedRegions(const std::string& ptx) {
  std::vector<std::string> lines;
  for (size_t p = 0; p < ptx.size();) {
    const size_t e = std::min(ptx.find('\n', p), ptx.size());
    lines.push_back(ptx.substr(p, e - p));
    p = e + 1;
  }
  std::vector<std::string> bad;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("wgmma.fence.sync.aligned") == std::string::npos) continue;
    size_t end = i + 1;
    while (end < lines.size() && lines[end].find("wgmma.commit_group") == std::string::npos) ++end;
    std::set<std::string> acc;
    std::vector<std::pair<size_t, std::vector<std::string>>> writes;
    for (size_t j = i + 1; j < end; ++j) {
      const std::string& l = lines[j];
      const size_t op = l.find_first_not_of(" \t");
      if (op == std::string::npos || l[op] == '/' || l[op] == '{' || l[op] == '}' || l[op] == '.' ||
          l[op] == '$' || l.compare(op, 13, "setp.ne.b32 p") == 0) {
        continue;  // comments, the inline asm's braces and predicate, labels
      }
      const size_t args = l.find_first_of(" \t", op);
      if (args == std::string::npos) continue;
      if (l.find("wgmma.mma_async") != std::string::npos) {
        for (const std::string& r : Registers(l.substr(args))) acc.insert(r);
      } else if (l.compare(op, 2, "st") != 0) {  // a store writes memory, not its first operand
        writes.emplace_back(j, Registers(l.substr(args)));
      }
    }
    for (const auto& [j, regs] : writes) {
      for (const std::string& r : regs) {
        if (acc.count(r)) bad.push_back(absl::StrCat(j + 1, ": ", lines[j]));
      }
    }
    i = end;
  }
  return bad;
}

// ptxas serializes wgmma's whose accumulator registers are written after wgmma.fence (its notes
// C7519 "warpgroup.arrive is injected ... to allow use of registers in GMMA" and C7517). The TF32
// kinds clear their per-k-tile accumulator before every k tile, and with a 128-row warp tile (two
// 64-row halves) the zeros of one half were written after the other half's wgmma was issued; a
// bfloat16 kernel whose few k tiles are unrolled (4 tiles in a ring of 5) handed its first wgmma
// the cleared accumulator's zeros the same way. Every accumulator value is in its register before
// the fence.
TEST(WgmmaPtx, NoAccumulatorWriteBetweenFenceAndCommit) {
  for (const Problem& p :
       {Problem{"tf32x3", false, 128, 64, 16}, Problem{"tf32x3", true, 128, 32, 8},
        Problem{"tf32", false, 128, 32, 8}, Problem{"tf32x3", false, 64, 64, 32},
        Problem{"bf16", true, 128, 32, 16, 5, 64}, Problem{"bf16", true, 128, 128, 16}}) {
    SCOPED_TRACE(absl::StrCat(p.kind, " warp tile ", p.wm, "x", p.wn, " bk ", p.bk));
    const std::string ptx = WgmmaPtx(p);
    ASSERT_FALSE(ptx.empty());
    ASSERT_GE(Count(ptx, "wgmma.fence.sync.aligned"), 2);
    const std::vector<std::string> bad = AccumulatorWritesInFencedRegions(ptx);
    EXPECT_TRUE(bad.empty()) << bad.size() << " accumulator writes after wgmma.fence, first "
                             << (bad.empty() ? "" : bad[0]);
    const std::optional<std::string> log = PtxasLog(ptx, "wgmma_fenced_" + p.kind, "sm_90a");
    if (!log) GTEST_SKIP() << "ptxas not found at " << kPtxas << "; PTX not assembled";
    EXPECT_EQ(Count(*log, "C7519"), 0) << *log;
    EXPECT_EQ(Count(*log, "C7517"), 0) << *log;
  }
}

// The plain TMA ring issues each k tile's wgmma's with one group more in flight, starts the
// refill, then waits (wait_group 2, then 1): ptxas keeps them asynchronous (no C7519 / C7517),
// with 3 and 4 slots and a k loop long enough to refill every slot twice.
TEST(WgmmaPtx, TmaRingKeepsItsWgmmasAsynchronous) {
  for (int stages : {3, 4}) {
    Problem p{"bf16", false, 64, 128, 64, stages};
    p.tma = true;
    p.k = 64 * 4 * stages;
    SCOPED_TRACE(absl::StrCat(stages, " slots"));
    const std::string ptx = WgmmaPtx(p);
    ASSERT_FALSE(ptx.empty());
    EXPECT_GE(Count(ptx, "wgmma.wait_group.sync.aligned \t2;"), 1);
    EXPECT_GE(Count(ptx, "wgmma.wait_group.sync.aligned \t1;"), 1);
    EXPECT_TRUE(AccumulatorWritesInFencedRegions(ptx).empty());
    const std::optional<std::string> log = PtxasLog(ptx, "wgmma_tma_ring", "sm_90a");
    if (!log) GTEST_SKIP() << "ptxas not found at " << kPtxas << "; PTX not assembled";
    EXPECT_EQ(Count(*log, "C7519"), 0) << *log;
    EXPECT_EQ(Count(*log, "C7517"), 0) << *log;
  }
}

TEST(WgmmaPtx, AnotherArchIsRefused) {
  absl::StatusOr<schedule::LoweredKernel> k = LowerWgmma(Problem{"bf16", false, 64, 128, 64});
  ASSERT_TRUE(k.ok()) << k.status();
  GpuCompileOptions options;
  options.arch = "sm_100";
  absl::StatusOr<GpuModule> m = CompileToPtx(k->nest, Launches(*k), options);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("sm_90a"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace tilesearch::codegen
