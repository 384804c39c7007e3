// The tensor_core step's TMA fills (TensorCoreStep::tma): the JSON form, the tensor-map limits
// (ir::CheckTensorMap), the operands it refuses, and random TMA-fed wgmma schedules (every matmul
// layout, dense, batch_matmul, non-divisible shapes, 1–4 ring slots, split-k, multicast clusters)
// run in the interpreter against the unscheduled program. The interpreter places each box element
// through the tensor map's row-major box and ir::WgmmaSwizzle and reads it back through the wgmma
// layout, and performs a box copy only when a wait completes its mbarrier's phase: a wrong box, a
// wrong coordinate or a missing wait shows up as a wrong answer or an error.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/codegen.h"
#include "gtest/gtest.h"
#include "ir/loop_nest_codec.h"
#include "ir/reference.h"
#include "ir/simplify.h"
#include "lower_test_util.h"
#include "nlohmann/json.hpp"
#include "schedule/step_json.h"

namespace tilesearch::schedule {
namespace {

using testing::BuildOpOrDie;
using testing::CudaTarget;
using testing::RunLowered;
using testing::SumReductionStage;

TensorCoreStep TmaStep(const std::string& kind, int64_t bm, int64_t bn, int64_t bk, int64_t wm,
                       int64_t wn, int pipeline) {
  TensorCoreStep t = testing::TileStep(kind, bm, bn, bk, wm, wn);
  t.warpgroup = true;
  t.tma = true;
  t.pad = 0;
  t.pipeline = pipeline;
  return t;
}

// The nest without its mbarrier arrivals (slot releases): a ring that depends on them deadlocks.
class DropArrivals : public ir::StmtMutator {
 protected:
  ir::Stmt MutateMbarrier(const ir::MbarrierNode* op, const ir::Stmt& s) override {
    if (op->op == ir::MbarrierNode::Op::kArrive) return ir::SeqNode::Make({});
    return s;
  }
};

// How often `what` occurs in `text`.
int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// `t` applied to `s` is refused with a message that contains `why`.
void ExpectRefused(const State& s, const TensorCoreStep& t, const std::string& why) {
  absl::StatusOr<State> st = ApplyStep(s, t);
  ASSERT_FALSE(st.ok()) << t.ToString();
  EXPECT_NE(st.status().message().find(why), std::string::npos) << st.status();
}

// `t` (a persistent step) applied to the GEMM stage of `dag` and lowered for a target of
// `sm_count` multiprocessors: its consumers' tile loop must read `tile_loop` (e.g. ".consume.tile
// in [0, 3)") and the kernel must match the float64 reference on inputs of `seed`. The kernel
// (nullopt after a failure).
std::optional<LoweredKernel> ExpectWalkMatches(const ir::ComputeDAG& dag, TensorCoreStep t,
                                               int sm_count, const std::string& tile_loop,
                                               uint64_t seed) {
  const State s = State::Initial(dag);
  t.stage_id = SumReductionStage(s);
  absl::StatusOr<State> st = testing::ApplyWithEpilogue(s, t);
  EXPECT_TRUE(st.ok()) << st.status();
  if (!st.ok()) return std::nullopt;
  Target target = CudaTarget();
  target.sm_count = sm_count;
  absl::StatusOr<LoweredKernel> k = Lower(dag, *st, target);
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return std::nullopt;
  const std::string text = ir::ToString(k->nest);
  EXPECT_NE(text.find(tile_loop), std::string::npos) << text;
  absl::StatusOr<double> err = testing::RelErrorToFloat64(dag, k->nest, seed);
  EXPECT_TRUE(err.ok()) << err.status() << "\n" << text;
  if (err.ok()) {
    EXPECT_LE(*err, testing::TensorCoreTolerance(t, ir::ScalarType::kBFloat16));
  }
  return *std::move(k);
}

TEST(TmaStep, JsonRoundTrip) {
  TensorCoreStep t = TmaStep("bf16", 128, 256, 64, 64, 256, 4);
  t.stage_id = 2;
  const nlohmann::json j = t.ToJson();
  EXPECT_EQ(j.dump(), R"(["TC",2,"bf16",[128,256,64],[64,256],4,0,1,0,1,"wgmma","tma"])");
  absl::StatusOr<Step> back = StepFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  t.repack = true;
  back = StepFromJson(t.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  t.repack = false;
  t.warp_specialized = true;
  EXPECT_EQ(t.ToJson().dump(),
            R"(["TC",2,"bf16",[128,256,64],[64,256],4,0,1,0,1,"wgmma","tma","ws"])");
  back = StepFromJson(t.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  t.persistent = true;
  EXPECT_EQ(t.ToJson().dump(),
            R"(["TC",2,"bf16",[128,256,64],[64,256],4,0,1,0,1,"wgmma","tma","ws","persistent"])");
  back = StepFromJson(t.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  t.block_m = 64;
  t.pingpong = true;
  EXPECT_EQ(t.ToJson().dump(), R"(["TC",2,"bf16",[64,256,64],[64,256],4,0,1,0,1,"wgmma","tma",)"
                               R"("ws","persistent","pingpong"])");
  back = StepFromJson(t.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  TensorCoreStep m = TmaStep("bf16", 128, 256, 64, 64, 256, 4);
  m.stage_id = 2;
  m.multicast = true;
  EXPECT_EQ(m.ToJson().dump(),
            R"(["TC",2,"bf16",[128,256,64],[64,256],4,0,1,0,1,"wgmma","tma","multicast"])");
  back = StepFromJson(m.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == m);
  for (const char* bad :
       {R"(["TC",2,"bf16",[128,128,64],[64,128],3,0,1,0,1,"wgmma","tma","repack"])",
        R"(["TC",2,"bf16",[64,128,64],[64,128],3,0,1,0,1,"wgmma","tma","ws","pingpong",)"
        R"("persistent"])",
        R"(["TC",2,"bf16",[64,128,64],[64,128],3,0,1,0,1,"wgmma","tma","ws","persistent",)"
        R"("pingpong","pingpong"])",
        R"(["TC",2,"bf16",[128,128,64],[64,128],3,0,1,0,1,"wgmma","tma","persistent","ws"])",
        R"(["TC",2,"bf16",[128,128,64],[64,128],3,0,1,0,1,"wgmma","tma","ws","persistent",)"
        R"("persistent"])",
        R"(["TC",2,"bf16",[128,128,64],[64,128],3,0,1,0,1,"wgmma","tma","tma"])",
        R"(["TC",2,"bf16",[128,128,64],[64,128],3,0,1,0,1,"wgmma","TMA"])",
        R"(["TC",2,"bf16",[128,128,64],[64,128],3,0,1,0,1,"wgmma","ws","tma"])",
        R"(["TC",2,"bf16",[128,128,64],[64,128],3,0,1,0,1,"wgmma","tma","multicast","ws"])",
        R"(["TC",2,"bf16",[64,128,64],[64,128],3,0,1,0,1,"wgmma","tma","ws","persistent",)"
        R"("multicast","pingpong"])",
        R"(["TC",2,"bf16",[128,128,64],[64,128],3,0,1,0,1,"wgmma","tma","multicast",)"
        R"("multicast"])"}) {
    EXPECT_FALSE(StepFromJson(nlohmann::json::parse(bad)).ok()) << bad;
  }
}

// Multicast clusters share the TMA ring's B tiles: without tma, with ping-pong consumers or with
// split_k the step is refused by name, and an odd number of tile rows by the lowering.
TEST(TmaStep, MulticastNeedsTheTmaRingAndEvenTileRows) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{192, 256}, {256, 128}}, ir::ScalarType::kBFloat16);
  const State s = State::Initial(dag);
  TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 2);
  t.stage_id = SumReductionStage(s);
  t.multicast = true;
  t.tma = false;
  ExpectRefused(s, t, "it needs tma");
  t.tma = true;
  t.warp_specialized = t.persistent = t.pingpong = true;
  ExpectRefused(s, t, "not with pingpong");
  t.warp_specialized = t.persistent = t.pingpong = false;
  t.split_k = 2;
  ExpectRefused(s, t, "not with split_k");
  t.split_k = 1;
  absl::StatusOr<State> st = ApplyStep(s, t);
  ASSERT_TRUE(st.ok()) << st.status();
  // 192 rows in tiles of 64: three tile rows cannot pair up.
  absl::StatusOr<LoweredKernel> k = Lower(dag, *st, CudaTarget());
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("3 tile rows of 64 are not an even number"),
            std::string::npos)
      << k.status();
}

// Persistent blocks walk the tiles of a producer warpgroup's ring: without ws or with split_k the
// step is refused by name.
TEST(TmaStep, PersistentBlocksNeedAProducerWarpgroupAndOneKRange) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{128, 256}, {256, 128}}, ir::ScalarType::kBFloat16);
  const State s = State::Initial(dag);
  TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 2);
  t.stage_id = SumReductionStage(s);
  t.persistent = true;
  ExpectRefused(s, t, "they need ws");
  t.warp_specialized = true;
  t.split_k = 2;
  ExpectRefused(s, t, "not with split_k");
}

// A batch's tiles join the persistent walk: 3 batches of 2 x 2 tiles (12) on a 5-multiprocessor
// target are 5 blocks walking up to 3 tiles each across batches, with no blockIdx.y; ping-pong
// consumers too (the attention scores' 32-head batch_matmul); both match the reference.
TEST(TmaStep, PersistentBlocksWalkTheTilesOfEveryBatch) {
  const ir::ComputeDAG bmm =
      BuildOpOrDie("batch_matmul", {{3, 128, 192}, {3, 192, 128}}, ir::ScalarType::kBFloat16);
  for (const bool pingpong : {false, true}) {
    SCOPED_TRACE(pingpong);
    TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 2);
    t.warp_specialized = t.persistent = true;
    t.pingpong = pingpong;
    std::optional<LoweredKernel> k = ExpectWalkMatches(bmm, t, 5, ".consume.tile in [0, 3)", 79);
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(k->launches.front().grid[0], 5);
    EXPECT_EQ(k->launches.front().grid[1], 1);
    EXPECT_EQ(ir::ToString(k->nest).find("blockIdx.y"), std::string::npos);
  }
}

// A persistent kernel launches min(tiles, sm_count) blocks and each walks its tiles in a serial
// loop guarded where the grid does not divide them; on a target of 3 multiprocessors, 8 tiles
// take 3 blocks of up to 3 tiles, and the result matches the reference.
TEST(TmaStep, PersistentBlocksWalkTheirTiles) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{128, 320}, {320, 256}}, ir::ScalarType::kBFloat16);
  TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 3);
  t.warp_specialized = true;
  t.persistent = true;
  t.raster = 2;
  std::optional<LoweredKernel> k = ExpectWalkMatches(dag, t, 3, ".consume.tile in [0, 3)", 77);
  ASSERT_TRUE(k.has_value());
  const std::string text = ir::ToString(k->nest);
  EXPECT_NE(text.find("in [0, 3) blockIdx.x"), std::string::npos) << text;
  EXPECT_NE(text.find(".produce.tile in [0, 3)"), std::string::npos) << text;
}

// Stream-k: the JSON form ("streamk" after "persistent"), and the step refuses it without
// persistent blocks and with ping-pong consumers or multicast clusters, by name.
TEST(TmaStep, StreamKJsonAndWhatItNeeds) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{256, 256}, {256, 256}}, ir::ScalarType::kBFloat16);
  const State s = State::Initial(dag);
  TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 3);
  t.stage_id = SumReductionStage(s);
  t.warp_specialized = t.persistent = t.stream_k = true;
  const nlohmann::json j = t.ToJson();
  EXPECT_EQ(j.dump(), absl::StrCat(R"(["TC",)", t.stage_id,
                                   R"(,"bf16",[64,64,64],[64,64],3,0,1,0,1,"wgmma","tma","ws",)"
                                   R"("persistent","streamk"])"));
  absl::StatusOr<Step> back = StepFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  for (const char* bad :
       {R"(["TC",2,"bf16",[64,64,64],[64,64],3,0,1,0,1,"wgmma","tma","ws","streamk","persistent"])",
        R"(["TC",2,"bf16",[64,64,64],[64,64],3,0,1,0,1,"wgmma","tma","ws","persistent","streamk",)"
        R"("streamk"])",
        R"(["TC",2,"bf16",[64,64,64],[64,64],3,0,1,0,1,"wgmma","tma","ws","persistent","pingpong",)"
        R"("streamk"])"}) {
    absl::StatusOr<Step> refused = StepFromJson(nlohmann::json::parse(bad));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("not an option in place"), std::string::npos)
        << refused.status();
  }
  TensorCoreStep lone = t;
  lone.persistent = false;
  ExpectRefused(s, lone, "it needs persistent blocks");
  TensorCoreStep turns = t;
  turns.pingpong = true;
  ExpectRefused(s, turns, "not with pingpong");
  TensorCoreStep pairs = t;
  pairs.multicast = true;
  ExpectRefused(s, pairs, "not with multicast");
}

// Stream-k on 8 tiles of 64 x 64 over 3 blocks, k = 320 (5 k tiles): 3 tiles walked whole, the
// other 5 tiles' 25 k tiles split 8 / 8 / 9, so tiles 1 and 3 are each computed in two parts
// (blocks 0 and 1, blocks 1 and 2) and joined by the fixup kernel. The launches are the GEMM's 3
// blocks and the fixup's; the result matches float64 with a bf16 output (staged epilogue for
// whole tiles), a float32 one, a raster order, and with a batch walked across.
TEST(TmaStep, StreamKSplitsTheLastWavesAndJoinsTheParts) {
  struct Case {
    const char* what;
    ir::ComputeDAG dag;
    int64_t raster;
  };
  const Case cases[] = {
      {"bf16", BuildOpOrDie("matmul", {{128, 320}, {320, 256}}, ir::ScalarType::kBFloat16), 1},
      {"bf16 raster 2", BuildOpOrDie("matmul", {{128, 320}, {320, 256}}, ir::ScalarType::kBFloat16),
       2},
      {"dense_bias_relu (float32 output)",
       BuildOpOrDie("dense_bias_relu", {{128, 320}, {256, 320}, {256}}, ir::ScalarType::kBFloat16),
       1},
      {"batch_matmul",
       BuildOpOrDie("batch_matmul", {{2, 64, 320}, {2, 320, 256}}, ir::ScalarType::kBFloat16), 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 3);
    t.warp_specialized = t.persistent = t.stream_k = true;
    t.raster = c.raster;
    std::optional<LoweredKernel> k = ExpectWalkMatches(c.dag, t, 3, ".parts", 91);
    ASSERT_TRUE(k.has_value());
    ASSERT_EQ(k->launches.size(), 2u);
    EXPECT_EQ(k->launches[0].grid[0], 3);
    // The fixup: one 256-thread block per 256 elements of a 64 x 64 tile, for blocks 1 and 2.
    EXPECT_EQ(k->launches[1].grid[0], 2 * 16);
  }
}

// PlanStreamKSplit against a walk of the ranges it describes: the stream-k tiles number more than
// the grid and fewer than twice it, every block's range of (tile, k tile) is at least one tile's
// k tiles long, and a split is returned exactly when some tile's k tiles fall into two blocks'
// ranges. With one k tile per tile (k = block_k) nothing is split, and the lowering then emits no
// fixup kernel.
TEST(TmaStep, StreamKSplitIsReturnedExactlyWhereATileMeetsTwoRanges) {
  int split_cases = 0;
  for (int64_t grid = 1; grid <= 12; ++grid) {
    for (int64_t tiles = 1; tiles <= 40; ++tiles) {
      for (int64_t k_tiles = 1; k_tiles <= 6; ++k_tiles) {
        SCOPED_TRACE(absl::StrCat(tiles, " tiles over ", grid, " blocks, ", k_tiles, " k tiles"));
        const std::optional<StreamKSplit> split = PlanStreamKSplit(tiles, grid, k_tiles);
        if (tiles <= grid || tiles % grid == 0) {
          EXPECT_FALSE(split.has_value());
          continue;
        }
        // The walk: the last grid + tiles mod grid tiles' k tiles, block b taking
        // [b · iters / grid, (b + 1) · iters / grid).
        const int64_t whole = (tiles / grid - 1) * grid;
        const int64_t rest = tiles - whole;
        const int64_t iters = rest * k_tiles;
        EXPECT_GT(rest, grid);
        EXPECT_LT(rest, 2 * grid);
        std::vector<std::set<int64_t>> blocks_of_tile(rest);
        for (int64_t b = 0; b < grid; ++b) {
          EXPECT_GE((b + 1) * iters / grid - b * iters / grid, k_tiles) << "block " << b;
          for (int64_t i = b * iters / grid; i < (b + 1) * iters / grid; ++i) {
            blocks_of_tile[i / k_tiles].insert(b);
          }
        }
        const bool shared = std::any_of(blocks_of_tile.begin(), blocks_of_tile.end(),
                                        [](const std::set<int64_t>& b) { return b.size() > 1; });
        ASSERT_EQ(split.has_value(), shared);
        if (!shared) continue;
        ++split_cases;
        EXPECT_EQ(split->whole, whole);
        EXPECT_EQ(split->iters, iters);
      }
    }
  }
  EXPECT_GT(split_cases, 500);
  EXPECT_FALSE(PlanStreamKSplit(8, 3, 1).has_value());
  // Lowered: 8 tiles of 64 x 64 over 3 blocks with k = 64, one k tile per tile: no fixup kernel.
  TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 3);
  t.warp_specialized = t.persistent = t.stream_k = true;
  std::optional<LoweredKernel> k =
      ExpectWalkMatches(BuildOpOrDie("matmul", {{128, 64}, {64, 256}}, ir::ScalarType::kBFloat16),
                        t, 3, ".consume.tile in [0, 3)", 93);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->launches.size(), 1u);
}

// Ping-pong consumers take whole block tiles in turn: without persistent blocks, or with a block
// tile of two warpgroup tiles, the step is refused by name.
TEST(TmaStep, PingPongNeedsPersistentBlocksOfOneWarpgroupTile) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{256, 256}, {256, 256}}, ir::ScalarType::kBFloat16);
  const State s = State::Initial(dag);
  TensorCoreStep t = TmaStep("bf16", 64, 128, 64, 64, 128, 3);
  t.stage_id = SumReductionStage(s);
  t.warp_specialized = true;
  t.pingpong = true;
  ExpectRefused(s, t, "they need persistent blocks");
  t.persistent = true;
  t.block_m = 128;
  ExpectRefused(s, t, "the warp tile 64x128 must be the block tile 128x128");
}

// `nest` without its mbarrier waits on buffers whose names contain `part`.
ir::LoopNest WithoutWaitsOn(const ir::LoopNest& nest, const std::string& part) {
  class DropWaits : public ir::StmtMutator {
   public:
    explicit DropWaits(std::string part) : part_(std::move(part)) {}

   protected:
    ir::Stmt MutateMbarrier(const ir::MbarrierNode* op, const ir::Stmt& s) override {
      const bool match = op->buffer.find(part_) != std::string::npos;
      return match && op->op == ir::MbarrierNode::Op::kWait ? ir::SeqNode::Make({}) : s;
    }

   private:
    std::string part_;
  };
  ir::LoopNest out = nest;
  out.body = DropWaits(part).Mutate(out.body);
  return out;
}

// Ping-pong: two consumer warpgroups of a 3-multiprocessor target's blocks take the block's
// tiles in turn (12 tiles of 64 x 64: blocks of 4 tiles, each consumer 2), each slot released
// by the consumer that read it; the result matches the reference, with 1 and 3 ring slots (the
// producer then runs ahead into the other consumer's tiles).
TEST(TmaStep, PingPongConsumersTakeTilesInTurn) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{256, 320}, {320, 192}}, ir::ScalarType::kBFloat16);
  for (const int pipeline : {3, 1}) {
    SCOPED_TRACE(pipeline);
    TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, pipeline);
    t.warp_specialized = t.persistent = t.pingpong = true;
    std::optional<LoweredKernel> k = ExpectWalkMatches(dag, t, 3, ".consume.tile in [0, 4)", 78);
    ASSERT_TRUE(k.has_value());
    ASSERT_EQ(k->launches.size(), 1u);
    // A producer warpgroup and two consumers.
    EXPECT_EQ(k->launches[0].block[0] * k->launches[0].block[1], 3 * 128);
    // Without the turn waits, a consumer runs ahead into its next tile's slots, two phases ahead
    // of their barriers: an error (extra arrivals, a deadlock) or a wrong answer.
    absl::StatusOr<double> bad =
        testing::RelErrorToFloat64(dag, WithoutWaitsOn(k->nest, ".turn"), 78);
    EXPECT_TRUE(!bad.ok() || *bad > 0.1) << "no turn waits and still right";
  }
}

// Shared bytes of the nest's shared buffers whose names do not contain `skip`, each on the
// code generator's 1024-byte period for wgmma kernels.
int64_t SharedBytesWithout(const ir::Stmt& body, const std::string& skip) {
  struct Sum : ir::StmtVisitor {
    std::string skip;
    int64_t total = 0;
    void VisitAllocate(const ir::AllocateNode* op, const ir::Stmt& s) override {
      if (op->buffer.scope == ir::MemoryScope::kShared &&
          op->buffer.name.find(skip) == std::string::npos) {
        total += (op->buffer.Bytes() + 1023) / 1024 * 1024;
      }
      ir::StmtVisitor::VisitAllocate(op, s);
    }
  } sum;
  sum.skip = skip;
  sum.Visit(body);
  return sum.total;
}

// The element count of the consumers' staging buffer in the nest's text (".out.staged: T[N]"),
// 0 without one.
int64_t StagedElements(const std::string& text) {
  const size_t at = text.find(".out.staged: ");
  if (at == std::string::npos) return 0;
  const size_t open = text.find('[', at);
  return std::stoll(text.substr(open + 1, text.find(']', open) - open - 1));
}

// A warp-specialized consumer stores its bfloat16 output through shared memory, each warp through
// two buffers and an mbarrier of its own: persistent blocks in chunks of 64 columns (they fit
// beside the ring in the H200's 227 KB); a block that is not persistent in chunks of 16, the
// widest that keeps its four blocks per multiprocessor; under a limit with room for no more, 16
// (four chunks per 64-column tile, the buffers alternating across a persistent consumer's
// tiles); where nothing fits, not at all (the fragment-layout stores). Every form matches
// float64, with one consumer warpgroup, persistent blocks and ping-pong consumers; without the
// warps' waits a lane stores pieces its neighbours have not put yet, a wrong answer.
TEST(TmaStep, WarpSpecializedConsumersStageTheirOutput) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{128, 320}, {320, 256}}, ir::ScalarType::kBFloat16);
  struct Case {
    bool persistent, pingpong;
    int64_t wide_cols;
  };
  for (const Case c : {Case{false, false, 16}, Case{true, false, 64}, Case{true, true, 64}}) {
    SCOPED_TRACE(absl::StrCat("persistent ", c.persistent, " pingpong ", c.pingpong));
    const State s = State::Initial(dag);
    TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 3);
    t.warp_specialized = true;
    t.persistent = c.persistent;
    t.pingpong = c.pingpong;
    t.stage_id = SumReductionStage(s);
    absl::StatusOr<State> st = testing::ApplyWithEpilogue(s, t);
    ASSERT_TRUE(st.ok()) << st.status();
    Target target = CudaTarget();
    target.sm_count = 3;  // 8 tiles: blocks of up to 3 (persistent)
    const int64_t warps = c.pingpong ? 8 : 4;
    absl::StatusOr<LoweredKernel> wide = Lower(dag, *st, target);
    ASSERT_TRUE(wide.ok()) << wide.status();
    const std::string text = ir::ToString(wide->nest);
    // The cast to bfloat16 is the kernel's epilogue: [warps][2][16 rows][columns] of it.
    EXPECT_NE(text.find(".out.staged: bfloat16["), std::string::npos) << text;
    EXPECT_EQ(StagedElements(text), warps * 2 * 16 * c.wide_cols) << text;
    absl::StatusOr<double> err = testing::RelErrorToFloat64(dag, wide->nest, 81);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LE(*err, testing::TensorCoreTolerance(t, ir::ScalarType::kBFloat16));

    const int64_t rest = SharedBytesWithout(wide->nest.body, ".out.staged");
    // Room for 16 columns (warps · 2 · 16 · 16 bfloat16) and the barriers, not for 32.
    target.max_shared_memory_per_block = target.max_shared_memory_optin =
        rest + warps * 2 * 16 * 16 * 2 + 1024;
    absl::StatusOr<LoweredKernel> narrow = Lower(dag, *st, target);
    ASSERT_TRUE(narrow.ok()) << narrow.status();
    EXPECT_EQ(StagedElements(ir::ToString(narrow->nest)), warps * 2 * 16 * 16);
    err = testing::RelErrorToFloat64(dag, narrow->nest, 82);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LE(*err, testing::TensorCoreTolerance(t, ir::ScalarType::kBFloat16));

    absl::StatusOr<double> bad =
        testing::RelErrorToFloat64(dag, WithoutWaitsOn(narrow->nest, ".out.staged.bar"), 82);
    EXPECT_TRUE(!bad.ok() || *bad > 0.1) << "no staging waits and still right";

    target.max_shared_memory_per_block = target.max_shared_memory_optin = rest + 1024;
    absl::StatusOr<LoweredKernel> none = Lower(dag, *st, target);
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_EQ(StagedElements(ir::ToString(none->nest)), 0);
    err = testing::RelErrorToFloat64(dag, none->nest, 83);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LE(*err, testing::TensorCoreTolerance(t, ir::ScalarType::kBFloat16));
  }
}

// The staged output of persistent warp-specialized consumers in the other tile shapes: a 128-row
// warpgroup tile (two fragment rows per warp, 32 staged rows), two consumer warpgroups along n
// (their register reallocation too), three chunks per tile (the buffers' alternation then
// crosses tiles at odd uses), and a batch walked by the persistent blocks: each matches float64.
TEST(TmaStep, StagedOutputOfEveryTileShape) {
  struct Case {
    const char* what;
    const char* op;
    std::vector<std::vector<int64_t>> shapes;
    int64_t bm, bn, wm, wn;
    int64_t warps;  // consumer warps
    int64_t rows;   // staged rows per warp
  };
  const std::vector<Case> cases = {
      {"warpgroup tile 128x128", "matmul", {{256, 128}, {128, 256}}, 128, 128, 128, 128, 4, 32},
      {"two warpgroups along n", "matmul", {{128, 128}, {128, 256}}, 64, 256, 64, 128, 8, 16},
      {"three chunks per tile", "matmul", {{128, 128}, {128, 384}}, 64, 192, 64, 192, 4, 16},
      {"a batch", "batch_matmul", {{3, 64, 128}, {3, 128, 128}}, 64, 64, 64, 64, 4, 16},
  };
  uint64_t seed = 90;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const ir::ComputeDAG dag = BuildOpOrDie(c.op, c.shapes, ir::ScalarType::kBFloat16);
    const State s = State::Initial(dag);
    TensorCoreStep t = TmaStep("bf16", c.bm, c.bn, 64, c.wm, c.wn, 2);
    t.warp_specialized = t.persistent = true;
    t.stage_id = SumReductionStage(s);
    absl::StatusOr<State> st = testing::ApplyWithEpilogue(s, t);
    ASSERT_TRUE(st.ok()) << st.status();
    Target target = CudaTarget();
    target.sm_count = 2;
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, target);
    ASSERT_TRUE(k.ok()) << k.status();
    const std::string text = ir::ToString(k->nest);
    EXPECT_EQ(StagedElements(text), c.warps * 2 * c.rows * 64) << text;
    // Two consumer warpgroups of 64 accumulators each (no second block fits): 40 registers for
    // the producer, 232 for them (384 threads).
    const bool realloc = c.warps == 8;
    EXPECT_EQ(text.find("setmaxnreg.dec 40") != std::string::npos, realloc) << text;
    EXPECT_EQ(text.find("setmaxnreg.inc 232") != std::string::npos, realloc) << text;
    absl::StatusOr<ir::LoopNest> back = ir::DecodeLoopNest(ir::EncodeLoopNest(k->nest));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(ir::ToString(*back), text);
    absl::StatusOr<double> err = testing::RelErrorToFloat64(dag, k->nest, ++seed);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LE(*err, testing::TensorCoreTolerance(t, ir::ScalarType::kBFloat16));
  }
}

// A kernel that reallocates registers divides one block's share of the register file: a
// min_blocks_per_sm pragma above 1 on its stage is refused by name (ptxas would give each thread
// 80 registers, and the consumers' increase to 232 would wait forever); 1 is what it asks anyway.
TEST(TmaStep, RegisterReallocationRefusesMoreThanOneBlockPerSm) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{128, 128}, {128, 256}}, ir::ScalarType::kBFloat16);
  for (const int blocks : {2, 1}) {
    SCOPED_TRACE(blocks);
    State s = State::Initial(dag);
    const int stage = SumReductionStage(s);
    PragmaStep pragma;
    pragma.stage_id = stage;
    pragma.min_blocks_per_sm = blocks;
    absl::StatusOr<State> st = ApplyStep(s, pragma);
    ASSERT_TRUE(st.ok()) << st.status();
    TensorCoreStep t = TmaStep("bf16", 128, 128, 64, 64, 128, 2);
    t.warp_specialized = true;
    t.stage_id = stage;
    st = ApplyStep(*st, t);
    ASSERT_TRUE(st.ok()) << st.status();
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, CudaTarget());
    if (blocks == 1) {
      ASSERT_TRUE(k.ok()) << k.status();
      continue;
    }
    ASSERT_FALSE(k.ok());
    EXPECT_NE(k.status().message().find("min_blocks_per_sm pragma asks for 2"), std::string::npos)
        << k.status();
  }
}

TEST(TmaStep, AProducerWarpgroupNeedsTma) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{64, 64}, {64, 64}}, ir::ScalarType::kBFloat16);
  const State s = State::Initial(dag);
  TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 2);
  t.stage_id = SumReductionStage(s);
  t.tma = false;
  t.warp_specialized = true;
  ExpectRefused(s, t, "needs tma");
}

// TMA copies f16 / bf16 parameter tiles as they are: float32 kinds (split into TF32 tiles or read
// through registers) and repacked operands (workspaces) are refused by the step, by name.
TEST(TmaStep, RefusesTf32KindsAndRepackedOperands) {
  const ir::ComputeDAG f32 = BuildOpOrDie("matmul", {{64, 64}, {64, 64}}, ir::ScalarType::kFloat32);
  const State s = State::Initial(f32);
  TensorCoreStep t = TmaStep("tf32x3", 64, 64, 32, 64, 64, 2);
  t.stage_id = SumReductionStage(s);
  ExpectRefused(s, t, "not kind tf32x3");
  const ir::ComputeDAG conv = BuildOpOrDie("conv2d_nhwc", {{1, 8, 8, 16}, {3, 3, 16, 64}},
                                           ir::ScalarType::kBFloat16, {{"padding", "1"}});
  const State c = State::Initial(conv);
  t = TmaStep("bf16", 64, 64, 16, 64, 64, 2);
  t.stage_id = SumReductionStage(c);
  t.repack = true;
  ExpectRefused(c, t, "not repacked operands");
}

TEST(TmaStep, NeedsWarpgroupTiles) {
  const ir::ComputeDAG dag =
      BuildOpOrDie("matmul", {{64, 64}, {64, 64}}, ir::ScalarType::kBFloat16);
  const State s = State::Initial(dag);
  TensorCoreStep t = testing::TileStep("bf16", 64, 64, 32, 32, 32);
  t.stage_id = SumReductionStage(s);
  t.tma = true;
  ExpectRefused(s, t, "warpgroup");
}

TEST(TensorMap, CheckNamesEachLimit) {
  const ir::BufferDecl a{"A", ir::ScalarType::kBFloat16, {4096, 4096}};
  ir::TensorMapSpec ok{"A", {4096, 4096}, {128, 64}, 128};
  EXPECT_TRUE(ir::CheckTensorMap(ok, a).ok());
  struct Bad {
    ir::TensorMapSpec map;
    ir::BufferDecl source;
    const char* says;
  };
  const ir::BufferDecl odd{"A", ir::ScalarType::kBFloat16, {64, 100}};
  const std::vector<Bad> bad = {
      {{"A", {4096, 4096, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}, 128}, a, "rank 6"},
      {{"A", {4096, 4096}, {128}, 128}, a, "box rank 1"},
      {{"A", {4096, 4096}, {128, 64}, 16}, a, "swizzle 16"},
      {{"A", {4096, 2048}, {128, 64}, 128}, a, "cover 8388608 elements"},
      {{"A", {4096, 4096}, {512, 64}, 128}, a, "box dim 0 extent 512"},
      {{"A", {4096, 4096}, {128, 4}, 0}, a, "inner 8 bytes"},
      {{"A", {4096, 4096}, {128, 128}, 128}, a, "exceed the 128-byte swizzle"},
      {{"A", {64, 100}, {64, 32}, 64}, odd, "stride 200 bytes"},
      // Signed 32-bit coordinates; products that would overflow int64 are refused, not wrapped.
      {{"A", {int64_t{1} << 31, 2}, {64, 8}, 0}, a, "extent 2147483648"},
      {{"A", {2000000000, 2000000000, 2000000000}, {1, 1, 8}, 0}, a, "more than 2^63"},
  };
  for (const Bad& b : bad) {
    absl::Status st = ir::CheckTensorMap(b.map, b.source);
    EXPECT_FALSE(st.ok()) << b.says;
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
  }
}

// A TMA schedule of a bf16 matmul [m, k] · [k, n] (K-major A, MN-major B).
absl::StatusOr<LoweredKernel> LowerTma(int64_t m, int64_t n, int64_t k, const TensorCoreStep& t,
                                       ir::ComputeDAG* dag) {
  *dag = BuildOpOrDie("matmul", {{m, k}, {k, n}}, ir::ScalarType::kBFloat16);
  const State s = State::Initial(*dag);
  TensorCoreStep step = t;
  step.stage_id = SumReductionStage(s);
  absl::StatusOr<State> st = ApplyStep(s, step);
  if (!st.ok()) return st.status();
  return Lower(*dag, *st, CudaTarget());
}

TEST(TmaStep, RefusesOperandsItCannotBox) {
  ir::ComputeDAG dag;
  // Rows of 100 bf16 (200 bytes) are not 16-byte multiples: no tensor map can stride them.
  absl::StatusOr<LoweredKernel> k =
      LowerTma(64, 64, 100, TmaStep("bf16", 64, 64, 64, 64, 64, 2), &dag);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("tma: operand A"), std::string::npos) << k.status();
  // A convolution's input is a gather, not a plain tile.
  dag = BuildOpOrDie("conv2d_nhwc", {{1, 8, 8, 16}, {3, 3, 16, 64}}, ir::ScalarType::kBFloat16,
                     {{"stride", "1"}, {"padding", "1"}});
  const State s = State::Initial(dag);
  TensorCoreStep t = TmaStep("bf16", 64, 64, 16, 64, 64, 2);
  t.stage_id = SumReductionStage(s);
  absl::StatusOr<State> st = ApplyStep(s, t);
  ASSERT_TRUE(st.ok()) << st.status();
  k = Lower(dag, *st, CudaTarget());
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("tma: operand"), std::string::npos) << k.status();
}

// The lowered nest holds one tensor map per operand (kernel arguments after the parameters), an
// mbarrier ring, and survives the loop-nest codec.
TEST(TmaStep, KernelArgumentsAndCodec) {
  ir::ComputeDAG dag;
  absl::StatusOr<LoweredKernel> k =
      LowerTma(256, 192, 128, TmaStep("bf16", 128, 192, 64, 64, 192, 3), &dag);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<std::vector<codegen::KernelArg>> args = codegen::KernelArgs(k->nest);
  ASSERT_TRUE(args.ok()) << args.status();
  std::vector<ir::TensorMapSpec> maps;
  for (const codegen::KernelArg& a : *args) {
    if (a.kind == codegen::KernelArg::Kind::kTensorMap) maps.push_back(*a.buffer.tensor_map);
  }
  ASSERT_EQ(maps.size(), 2u);
  // A [256, 128] K-major: boxes of 128 rows × 64 k; B [128, 192] MN-major: 64 k × 64 columns.
  EXPECT_EQ(maps[0].source, "A");
  EXPECT_EQ(maps[0].box, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(maps[1].source, "B");
  EXPECT_EQ(maps[1].box, (std::vector<int64_t>{64, 64}));
  const std::string text = ir::ToString(k->nest);
  EXPECT_NE(text.find("tma_load"), std::string::npos);
  EXPECT_NE(text.find("mbarrier_wait"), std::string::npos);
  absl::StatusOr<ir::LoopNest> back = ir::DecodeLoopNest(ir::EncodeLoopNest(k->nest));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ir::ToString(*back), text);
  ASSERT_EQ(back->params.size(), k->nest.params.size());
}

// The TMA loads of a nest, its blockIdx.x loop and (persistent blocks) the producer's tile loop.
class TmaLoads : public ir::StmtVisitor {
 public:
  std::vector<const ir::TmaLoadNode*> loads;
  std::string block_var, tile_var;
  int64_t blocks = 0, tiles = 1;

 protected:
  void VisitFor(const ir::ForNode* op, const ir::Stmt& s) override {
    if (op->for_kind == ir::ForKind::kBlockIdxX) {
      block_var = op->var_name();
      blocks = ir::AsConstInt(op->extent).value_or(0);
    }
    if (op->var_name().find(".produce.tile") != std::string::npos) {
      tile_var = op->var_name();
      tiles = ir::AsConstInt(op->extent).value_or(1);
    }
    ir::StmtVisitor::VisitFor(op, s);
  }
  void VisitTmaLoad(const ir::TmaLoadNode* op, const ir::Stmt& s) override {
    loads.push_back(op);
    ir::StmtVisitor::VisitTmaLoad(op, s);
  }
};

// What the interpreter cannot see (it has every block start all its boxes itself): blocks 2p and
// 2p + 1 start each multicast box at the same coordinates (one block's copy serves both), and
// each plain box (A's rows) at different ones. Evaluated at every pair's block indices (and
// persistent blocks' every tile step).
void ExpectPairsShareTheMulticastBoxes(const ir::LoopNest& nest) {
  TmaLoads v;
  v.Visit(nest.body);
  ASSERT_FALSE(v.block_var.empty());
  int multicast = 0;
  for (const ir::TmaLoadNode* t : v.loads) {
    multicast += t->multicast > 1;
    for (int64_t p = 0; p < v.blocks / 2; ++p) {
      for (int64_t i = 0; i < v.tiles; ++i) {
        bool same = true;
        for (const ir::Expr& c : t->coords) {
          auto at = [&](int64_t b) {
            std::vector<std::pair<std::string, ir::Expr>> values = {{v.block_var, ir::IntConst(b)}};
            if (!v.tile_var.empty()) values.emplace_back(v.tile_var, ir::IntConst(i));
            return ir::Simplify(ir::Substitute(c, values));
          };
          same = same && ir::StructurallyEqual(at(2 * p), at(2 * p + 1));
        }
        EXPECT_EQ(same, t->multicast > 1)
            << "pair " << p << " tile step " << i << " box of " << t->tensor_map;
      }
    }
  }
  EXPECT_GT(multicast, 0);
}

// Blocks 2p and 2p + 1 take tile rows 2r and 2r + 1 of one tile column: B's boxes are started by
// one block each for both (multicast from rank 0 and rank 1), A's by each block for itself; one
// barrier spans the cluster (after the mbarrier initialization) and a slot is refilled once both
// blocks released it (arrivals in each of the two blocks). Every tile is computed once (the
// result matches the reference, non-divisible n and k and rasters 1-3 included), each pair starts
// the multicast boxes at the same coordinates, and the nest survives the codec.
TEST(TmaStep, MulticastPairsBlocksOnTheTileRowsOfOneColumn) {
  // (With three slots, the k tile two before the current one frees its slot, which the next
  // k tile refills: the releases run from the third k tile to the last but one.)
  for (const auto& [m, n, kk, raster] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{256, 192, 320, 1},
        {512, 200, 136, 2},
        {128, 384, 64, 3}}) {
    SCOPED_TRACE(absl::StrCat(m, "x", n, "x", kk, " raster ", raster));
    TensorCoreStep t = TmaStep("bf16", 64, 128, 64, 64, 128, 3);
    t.multicast = true;
    t.raster = raster;
    ir::ComputeDAG dag;
    absl::StatusOr<LoweredKernel> k = LowerTma(m, n, kk, t, &dag);
    ASSERT_TRUE(k.ok()) << k.status();
    const std::string text = ir::ToString(k->nest);
    EXPECT_NE(text.find("multicast 2 from rank 0"), std::string::npos) << text;
    EXPECT_NE(text.find("multicast 2 from rank 1"), std::string::npos) << text;
    EXPECT_NE(text.find("cluster_barrier 2"), std::string::npos) << text;
    // A slot is released where it is refilled: from the third k tile to the last but one.
    EXPECT_EQ(text.find("in each of 2 cluster blocks") != std::string::npos, (kk + 63) / 64 >= 4)
        << text;
    EXPECT_EQ(k->launches.front().grid[0] % 2, 0);
    ExpectPairsShareTheMulticastBoxes(k->nest);
    absl::StatusOr<double> err = testing::RelErrorToFloat64(dag, k->nest, 91);
    ASSERT_TRUE(err.ok()) << err.status() << "\n" << text;
    EXPECT_LE(*err, testing::TensorCoreTolerance(t, ir::ScalarType::kBFloat16));
    absl::StatusOr<ir::LoopNest> back = ir::DecodeLoopNest(ir::EncodeLoopNest(k->nest));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(ir::ToString(*back), text);
  }
}

// Multicast with a producer warpgroup: each consumer warp releases a slot in both blocks (the
// empty barriers expect one arrival per consumer warp of the cluster), cluster barriers frame the
// roles, and persistent pairs walk paired tiles over an even grid (three multiprocessors: a grid
// of two, each block walking four of the 4 x 2 tiles). Correct against float64 (non-divisible n
// and k too), each pair's multicast boxes at equal coordinates on every tile step.
TEST(TmaStep, MulticastWithAProducerWarpgroupPairsEveryTileStep) {
  for (const auto& [n, kk, persistent] :
       {std::tuple<int64_t, int64_t, bool>{192, 320, false}, {256, 136, true}, {200, 384, true}}) {
    SCOPED_TRACE(absl::StrCat("256x", n, "x", kk, persistent ? " persistent" : ""));
    const ir::ComputeDAG dag =
        BuildOpOrDie("matmul", {{256, kk}, {kk, n}}, ir::ScalarType::kBFloat16);
    TensorCoreStep t = TmaStep("bf16", 64, 128, 64, 64, 128, 3);
    t.warp_specialized = t.multicast = true;
    t.persistent = persistent;
    t.raster = 2;
    const int64_t tiles = 4 * ((n + 127) / 128);
    std::optional<LoweredKernel> k =
        ExpectWalkMatches(dag, t, 3, persistent ? ".consume.tile in [0, 4)" : "multicast 2", 17);
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(k->launches.front().grid[0], persistent ? 2 : tiles);
    const std::string text = ir::ToString(k->nest);
    EXPECT_NE(text.find("in each of 2 cluster blocks"), std::string::npos) << text;
    // Consumer warps: 4 per warpgroup, one warpgroup; two blocks.
    EXPECT_NE(text.find("mbarrier_init C_acc.empty[0] 8"), std::string::npos) << text;
    EXPECT_EQ(CountOf(text, "cluster_barrier 2"), 2) << text;
    ExpectPairsShareTheMulticastBoxes(k->nest);
  }
}

// A warp-specialized kernel whose consumers never release a slot leaves the producer waiting:
// the interpreter reports the deadlock (with a ring shorter than the k loop) instead of hanging.
TEST(TmaStep, ConsumersThatNeverReleaseASlotAreADeadlock) {
  ir::ComputeDAG dag;
  TensorCoreStep t = TmaStep("bf16", 64, 64, 64, 64, 64, 2);
  t.warp_specialized = true;
  absl::StatusOr<LoweredKernel> k = LowerTma(64, 64, 256, t, &dag);
  ASSERT_TRUE(k.ok()) << k.status();
  const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 6);
  absl::StatusOr<ir::BufferMap> good = RunLowered(k->nest, inputs);
  ASSERT_TRUE(good.ok()) << good.status();
  ir::LoopNest broken = k->nest;
  broken.body = DropArrivals().Mutate(broken.body);
  absl::StatusOr<ir::BufferMap> bad = RunLowered(broken, inputs);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("deadlock"), std::string::npos) << bad.status();
}

// The plain TMA ring (no producer warpgroup) refills a slot once every warp released it: with
// the releases dropped, thread 0's wait for the first refill never completes and the interpreter
// reports the deadlock; with them the kernel matches the reference.
TEST(TmaStep, APlainRingRefillsOnlyReleasedSlots) {
  for (int stages : {2, 3}) {
    ir::ComputeDAG dag;
    absl::StatusOr<LoweredKernel> k =
        LowerTma(128, 64, 384, TmaStep("bf16", 64, 64, 64, 64, 64, stages), &dag);
    ASSERT_TRUE(k.ok()) << k.status();
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 7);
    absl::StatusOr<ir::BufferMap> good = RunLowered(k->nest, inputs);
    ASSERT_TRUE(good.ok()) << good.status();
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
    ASSERT_TRUE(ref.ok());
    EXPECT_LE(testing::MaxRelError(dag, *good, *ref), 1.6e-2) << stages;
    ir::LoopNest broken = k->nest;
    broken.body = DropArrivals().Mutate(broken.body);
    absl::StatusOr<ir::BufferMap> bad = RunLowered(broken, inputs);
    ASSERT_FALSE(bad.ok()) << stages;
    EXPECT_NE(bad.status().message().find("deadlock"), std::string::npos) << bad.status();
  }
}

// A ring whose wgmma's stay in flight longer than the releases assume (every wgmma leaving three
// groups running, the waits between them dropped): thread 0 refills a slot a group in flight still
// reads, which the interpreter reports when the copy starts (its copy would land only at a later
// wait, after the group may have been retired).
TEST(TmaStep, ARefillUnderAWgmmaInFlightIsRefused) {
  ir::ComputeDAG dag;
  absl::StatusOr<LoweredKernel> k =
      LowerTma(128, 64, 384, TmaStep("bf16", 64, 64, 64, 64, 64, 3), &dag);
  ASSERT_TRUE(k.ok()) << k.status();
  class LeaveInFlight : public ir::StmtMutator {
   protected:
    ir::Stmt MutateWgmma(const ir::WgmmaNode* op, const ir::Stmt& /*s*/) override {
      return ir::WgmmaNode::Make(op->kind, op->m_tiles, op->n, op->k_steps, op->acc, op->a,
                                 op->a_offset, op->a_layout, op->b, op->b_offset, op->b_layout,
                                 op->thread, 3, op->proxy_fence);
    }
    ir::Stmt MutateAsyncGroup(const ir::AsyncGroupNode* op, const ir::Stmt& s) override {
      if (op->wgmma) return ir::SeqNode::Make({});
      return s;
    }
  };
  ir::LoopNest broken = k->nest;
  broken.body = LeaveInFlight().Mutate(broken.body);
  const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 8);
  ASSERT_TRUE(RunLowered(k->nest, inputs).ok());
  absl::StatusOr<ir::BufferMap> bad = RunLowered(broken, inputs);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("wgmma group(s) in flight still read them"),
            std::string::npos)
      << bad.status();
}

// Without its waits the boxes are never copied (the interpreter writes them at a wait that finds
// their phase complete): the check fails, as it would on the device.
TEST(TmaStep, AMissingWaitIsAWrongAnswer) {
  ir::ComputeDAG dag;
  absl::StatusOr<LoweredKernel> k =
      LowerTma(128, 64, 128, TmaStep("bf16", 64, 64, 64, 64, 64, 2), &dag);
  ASSERT_TRUE(k.ok()) << k.status();
  class DropWaits : public ir::StmtMutator {
   protected:
    ir::Stmt MutateMbarrier(const ir::MbarrierNode* op, const ir::Stmt& s) override {
      if (op->op == ir::MbarrierNode::Op::kWait) return ir::SeqNode::Make({});
      return s;
    }
  };
  ir::LoopNest broken = k->nest;
  broken.body = DropWaits().Mutate(broken.body);
  const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 5);
  absl::StatusOr<ir::BufferMap> good = RunLowered(k->nest, inputs);
  ASSERT_TRUE(good.ok()) << good.status();
  absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
  ASSERT_TRUE(ref.ok());
  EXPECT_LE(testing::MaxRelError(dag, *good, *ref), 1.6e-2);
  absl::StatusOr<ir::BufferMap> bad = RunLowered(broken, inputs);
  EXPECT_TRUE(!bad.ok() || testing::MaxRelError(dag, *bad, *ref) > 0.1);
}

// An mbarrier phase completes at the arrival that brings in its last expected one (as on the
// hardware), not at the next wait: a one-arrival barrier takes two arrivals in a row (two
// phases), and a wait for parity 1 then finds phase 1 complete. A thread that arrives on a
// two-arrival barrier and then waits for parity 1 passes at once (the phase before phase 0 counts
// as complete): the hardware's try_wait.parity, and the hazard that ping-pong's two turn
// barriers avoid.
TEST(Mbarrier, APhaseCompletesAtItsLastArrival) {
  auto run = [](int64_t arrivals, int arrive_times) {
    const ir::Expr tx = ir::MakeVar("tx");
    std::vector<ir::Stmt> body = {ir::MbarrierNode::Init("bar", ir::IntConst(0), arrivals)};
    for (int a = 0; a < arrive_times; ++a) {
      body.push_back(ir::MbarrierNode::Arrive("bar", ir::IntConst(0)));
    }
    body.push_back(ir::MbarrierNode::Wait("bar", ir::IntConst(0), ir::IntConst(1)));
    body.push_back(ir::StoreNode::Make("out", {ir::IntConst(0)}, ir::FloatConst(1.0)));
    ir::Stmt s = ir::ForNode::Make(tx, ir::IntConst(0), ir::IntConst(1), ir::ForKind::kThreadIdxX,
                                   ir::SeqNode::Make(body));
    s = ir::AllocateNode::Make({"bar", ir::ScalarType::kInt64, {1}, ir::MemoryScope::kShared}, s);
    const ir::Expr bx = ir::MakeVar("bx");
    s = ir::ForNode::Make(bx, ir::IntConst(0), ir::IntConst(1), ir::ForKind::kBlockIdxX, s);
    ir::LoopNest nest;
    nest.name = "phases";
    nest.params = {{"out", ir::ScalarType::kFloat32, {1}}};
    nest.num_inputs = 0;
    nest.body = s;
    ir::BufferMap bufs;
    bufs["out"] = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {1});
    absl::Status st = ir::Interpret(nest, bufs);
    return st.ok() ? absl::StatusOr<double>(bufs["out"].data[0]) : absl::StatusOr<double>(st);
  };
  absl::StatusOr<double> two_phases = run(1, 2);
  ASSERT_TRUE(two_phases.ok()) << two_phases.status();
  EXPECT_EQ(*two_phases, 1.0);
  absl::StatusOr<double> early = run(2, 1);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_EQ(*early, 1.0);
  // Three arrivals on a one-arrival barrier: phases 0, 1 and 2 complete, the current phase is 3,
  // and a wait for parity 1 never returns.
  absl::StatusOr<double> stuck = run(1, 3);
  ASSERT_FALSE(stuck.ok());
  EXPECT_NE(stuck.status().message().find("waits for phase 3"), std::string::npos)
      << stuck.status();
}

using Case = testing::TensorCoreCase;

Case RandomCase(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  Case c;
  const bool f16 = rng() % 2;
  c.dtype = f16 ? ir::ScalarType::kFloat16 : ir::ScalarType::kBFloat16;
  c.step.kind = f16 ? "f16" : "bf16";
  // Rows of whole 16-byte chunks (tensor-map strides) in every layout: m, n and k multiples of 8.
  const int64_t m = 8 * pick(1, 30), n = 8 * pick(1, 30), k = 8 * pick(1, 24);
  switch (rng() % 4) {
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
    default:
      c.op = "batch_matmul";
      c.shapes = {{pick(1, 3), m, k}, {1, k, n}};
      c.shapes[1][0] = c.shapes[0][0];
      break;
  }
  TensorCoreStep& t = c.step;
  t.warpgroup = true;
  t.tma = true;
  t.pad = 0;
  t.warp_m = 64 * pick(1, 2);
  const int64_t ns[] = {8, 16, 32, 64, 128, 192, 256};
  t.warp_n = std::min<int64_t>(ns[rng() % 7], 128 * 128 / t.warp_m);
  t.block_m = t.warp_m * pick(1, 2);
  t.block_n = t.warp_n * (t.warp_n <= 128 ? pick(1, 2) : 1);
  const int64_t ks[] = {16, 32, 64};
  t.block_k = ks[rng() % 3];
  t.pipeline = static_cast<int>(pick(1, 4));
  t.raster = pick(1, 3);
  t.split_k = (rng() % 4 == 0) ? 2 : 1;
  t.warp_specialized = rng() % 2;
  t.persistent = t.warp_specialized && t.split_k == 1 && rng() % 2;
  // Ping-pong blocks compute one warpgroup tile per consumer.
  if (t.persistent && rng() % 2) {
    t.pingpong = true;
    t.block_m = t.warp_m;
    t.block_n = t.warp_n;
  }
  testing::FitWgmmaRegisters(&t);
  // Clusters of two where the tile rows pair up.
  t.multicast =
      !t.pingpong && t.split_k == 1 && (m + t.block_m - 1) / t.block_m % 2 == 0 && rng() % 2;
  return c;
}

TEST(TmaStep, RandomSchedulesMatchTheUnscheduledProgram) {
  std::mt19937_64 rng(20261204);
  int run = 0, refused = 0, specialized = 0, persistent = 0, walking = 0, pingpong = 0;
  int multicast = 0;
  // One multiprocessor, so that a persistent block walks every tile.
  Target small = CudaTarget();
  small.sm_count = 1;
  for (int trial = 0; run < 120 && trial < 1000; ++trial) {
    Case c = RandomCase(rng);
    const ir::ComputeDAG dag = BuildOpOrDie(c.op, c.shapes, c.dtype, c.attrs);
    const State s = State::Initial(dag);
    c.step.stage_id = SumReductionStage(s);
    ASSERT_GE(c.step.stage_id, 0) << c.op;
    absl::StatusOr<State> st = testing::ApplyWithEpilogue(s, c.step);
    ASSERT_TRUE(st.ok()) << c.op << ": " << st.status();
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, small);
    if (!testing::LoweredOrWithinLimits(k, /*tma=*/true)) {
      ++refused;
      continue;
    }
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 3000 + trial);
    absl::StatusOr<ir::BufferMap> got = RunLowered(k->nest, inputs);
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << StepToString(st->steps().back());
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_LE(testing::MaxRelError(dag, *got, *ref), testing::TensorCoreTolerance(c.step, c.dtype))
        << c.op << " " << StepToString(st->steps().back());
    ++run;
    specialized += c.step.warp_specialized;
    persistent += c.step.persistent;
    pingpong += c.step.pingpong;
    multicast += c.step.multicast;
    if (c.step.multicast) ExpectPairsShareTheMulticastBoxes(k->nest);
    // A block walking two or more tiles keeps its tile loop (one of extent 1 is simplified away).
    walking += ir::ToString(k->nest).find(".consume.tile in [0, ") != std::string::npos;
  }
  EXPECT_GE(run, 120);
  EXPECT_GE(specialized, 40);
  EXPECT_GE(persistent, 15);
  EXPECT_GE(walking, 8);
  EXPECT_GE(pingpong, 6);
  EXPECT_GE(multicast, 8);
  EXPECT_GT(refused, 0);
}

// Random stream-k schedules (every matmul layout, dense, batch_matmul, non-divisible shapes, 1–4
// ring slots, staged and unstaged outputs) on targets of 2–4 multiprocessors, so that the last
// waves split at many offsets into a tile: each matches the unscheduled program.
TEST(TmaStep, RandomStreamKSchedulesMatchTheUnscheduledProgram) {
  std::mt19937_64 rng(20261206);
  int split = 0;
  for (int trial = 0; split < 30 && trial < 3000; ++trial) {
    Case c = RandomCase(rng);
    TensorCoreStep& t = c.step;
    t.split_k = 1;
    t.warp_specialized = t.persistent = t.stream_k = true;
    t.pingpong = t.multicast = false;
    const ir::ComputeDAG dag = BuildOpOrDie(c.op, c.shapes, c.dtype, c.attrs);
    const State s = State::Initial(dag);
    t.stage_id = SumReductionStage(s);
    ASSERT_GE(t.stage_id, 0) << c.op;
    absl::StatusOr<State> st = testing::ApplyWithEpilogue(s, t);
    ASSERT_TRUE(st.ok()) << c.op << ": " << st.status();
    Target target = CudaTarget();
    target.sm_count = static_cast<int>(2 + rng() % 3);
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, target);
    if (!testing::LoweredOrWithinLimits(k, /*tma=*/true)) continue;
    // Grids that divide the tiles walk them whole (the other persistent tests run those).
    if (ir::ToString(k->nest).find(".parts") == std::string::npos) continue;
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 5000 + trial);
    absl::StatusOr<ir::BufferMap> got = RunLowered(k->nest, inputs);
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << StepToString(st->steps().back());
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_LE(testing::MaxRelError(dag, *got, *ref), testing::TensorCoreTolerance(t, c.dtype))
        << c.op << " " << StepToString(st->steps().back()) << " on " << target.sm_count
        << " multiprocessors";
    ++split;
  }
  EXPECT_GE(split, 30);
}

}  // namespace
}  // namespace tilesearch::schedule
