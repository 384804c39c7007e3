// The tensor-core part of the search space: sketches for matmul-like stages per mma kind, random
// annotation of the tensor_core decisions (every candidate fits the target and computes the
// right values in the interpreter), and mutation of one decision.
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "ir/interpreter.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "search/annotation.h"
#include "search/mutation.h"
#include "search/sketch.h"
#include "search/tensor_core_space.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::State;
using schedule::TensorCoreStep;

ir::ComputeDAG Build(const std::string& op, std::vector<std::vector<int64_t>> shapes,
                     ir::ScalarType dtype) {
  ir::OpArgs args;
  args.shapes = std::move(shapes);
  args.dtype = dtype;
  return testing::MustBuild(ir::BuildOp(op, args));
}

const TensorCoreStep* TensorCoreOf(const State& s) {
  for (const auto& step : s.steps()) {
    if (const auto* t = std::get_if<TensorCoreStep>(&step)) return t;
  }
  return nullptr;
}

std::vector<const TensorCoreStep*> TensorCoreSketches(const std::vector<State>& sketches) {
  std::vector<const TensorCoreStep*> out;
  for (const State& s : sketches) {
    if (const TensorCoreStep* t = TensorCoreOf(s)) out.push_back(t);
  }
  return out;
}

TEST(TensorCoreSearch, HalfMatmulGetsOneSketchWithTheCastAsEpilogue) {
  const ir::ComputeDAG dag = Build("matmul", {{64, 32}, {32, 48}}, ir::ScalarType::kFloat16);
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(dag, Target::H200()));
  ASSERT_TRUE(sketches.ok()) << sketches.status();
  const auto tc = TensorCoreSketches(*sketches);
  ASSERT_EQ(tc.size(), 1u);
  EXPECT_EQ(tc[0]->kind, "f16");
  EXPECT_EQ(tc[0]->epilogue, 1);  // C = float16(C_acc)
  // The SIMT sketches stay: the search decides.
  EXPECT_GT(sketches->size(), 1u);
}

// A matmul without consumers gets one tensor-core sketch: tensorizing a cache_write stage with its
// copy-out as the epilogue would build the same kernel again.
TEST(TensorCoreSearch, PlainMatmulGetsOneSketchAndNoneOnACacheWriteStage) {
  const ir::ComputeDAG dag = Build("matmul", {{64, 32}, {32, 48}}, ir::ScalarType::kFloat32);
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(dag, Target::H200()));
  ASSERT_TRUE(sketches.ok()) << sketches.status();
  const auto tc = TensorCoreSketches(*sketches);
  ASSERT_EQ(tc.size(), 1u);
  EXPECT_EQ(tc[0]->kind, "tf32x3");
  EXPECT_EQ(tc[0]->epilogue, 0);
  for (const State& s : *sketches) {
    if (TensorCoreOf(s) == nullptr) continue;
    for (const auto& step : s.steps()) {
      EXPECT_FALSE(std::holds_alternative<schedule::CacheWriteStep>(step))
          << "a tensor-core sketch with a cache_write step";
    }
  }
}

TEST(TensorCoreSearch, Float32UsesThreeTf32AndMostlyOnePassTf32WhereAllowed) {
  const ir::ComputeDAG dag =
      Build("dense_bias_relu", {{64, 32}, {48, 32}, {48}}, ir::ScalarType::kFloat32);
  absl::StatusOr<std::vector<State>> strict = GenerateSketches(TuneContext(dag, Target::H200()));
  ASSERT_TRUE(strict.ok()) << strict.status();
  auto tc = TensorCoreSketches(*strict);
  ASSERT_EQ(tc.size(), 1u);
  EXPECT_EQ(tc[0]->kind, "tf32x3");
  EXPECT_EQ(tc[0]->epilogue, 1);  // Y = relu(dense + bias)
  SketchOptions loose;
  loose.allow_tf32 = true;
  absl::StatusOr<std::vector<State>> both =
      GenerateSketches(TuneContext(dag, Target::H200(), {}, 0, loose));
  ASSERT_TRUE(both.ok()) << both.status();
  tc = TensorCoreSketches(*both);
  std::set<std::string> kinds;
  for (const auto* t : tc) kinds.insert(t->kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"tf32x3", "tf32"}));
  // Tensor-core picks draw one-pass tf32 three times as often as 3xTF32.
  AnnotationOptions always;
  always.tensor_core_share = 1.0;
  std::mt19937_64 rng(11);
  int one_pass = 0;
  constexpr int kPicks = 4000;
  for (int i = 0; i < kPicks; ++i) {
    const TensorCoreStep* t = TensorCoreOf(PickSketch(*both, always, rng));
    ASSERT_NE(t, nullptr);
    one_pass += t->kind == "tf32";
  }
  EXPECT_NEAR(one_pass / static_cast<double>(kPicks), 0.75, 0.03);
  SketchOptions off;
  off.tensor_cores = false;
  absl::StatusOr<std::vector<State>> none =
      GenerateSketches(TuneContext(dag, Target::H200(), {}, 0, off));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(TensorCoreSketches(*none).empty());
  // No tensor cores on the CPU, nor for a gemv (no n axis).
  absl::StatusOr<std::vector<State>> cpu = GenerateSketches(TuneContext(dag, Target()));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(TensorCoreSketches(*cpu).empty());
  const ir::ComputeDAG gemv = Build("gemv", {{64, 32}, {32}}, ir::ScalarType::kFloat16);
  absl::StatusOr<std::vector<State>> g = GenerateSketches(TuneContext(gemv, Target::H200()));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(TensorCoreSketches(*g).empty());
}

// Annotated tensor-core candidates: varied decisions, each within the target's limits, each
// computing the operator (interpreter against the unscheduled program), wgmma and mma.sync
// tilings both drawn on Hopper, for half operands and for float32's 3xTF32.
TEST(TensorCoreSearch, AnnotationDrawsValidConfigurations) {
  for (const ir::ScalarType dtype : {ir::ScalarType::kBFloat16, ir::ScalarType::kFloat32}) {
    const ir::ComputeDAG dag = Build("matmul", {{72, 40}, {40, 56}}, dtype);
    TuneContext ctx(dag, Target::H200(), SearchOptions{}, 7);
    absl::StatusOr<std::vector<State>> sketches = GenerateSketches(ctx);
    ASSERT_TRUE(sketches.ok()) << sketches.status();
    const State* sketch = nullptr;
    for (const State& s : *sketches) {
      if (TensorCoreOf(s)) sketch = &s;
    }
    ASSERT_NE(sketch, nullptr);
    std::set<std::string> configs;
    std::set<bool> instructions;
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 3);
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    // One bfloat16 ulp near 1; float32 accuracy for 3xTF32.
    const double tol = dtype == ir::ScalarType::kFloat32 ? 1e-4 : 1.6e-2;
    for (int i = 0; i < 24; ++i) {
      absl::StatusOr<Candidate> c = AnnotateSketch(*sketch, ctx);
      ASSERT_TRUE(c.ok()) << c.status();
      const TensorCoreStep* t = TensorCoreOf(c->state);
      ASSERT_NE(t, nullptr);
      EXPECT_TRUE(TensorCoreStepFits(*t, Target::H200())) << t->ToString();
      configs.insert(t->ToString());
      instructions.insert(t->warpgroup);
      ir::BufferMap bufs = inputs;
      for (size_t p = c->lowered->nest.num_inputs; p < c->lowered->nest.params.size(); ++p) {
        const ir::BufferDecl& d = c->lowered->nest.params[p];
        bufs[d.name] = ir::HostBuffer::Zeros(d.dtype, d.shape);
      }
      ASSERT_TRUE(ir::Interpret(c->lowered->nest, bufs).ok());
      const ir::HostBuffer& got = bufs.at("C");
      const ir::HostBuffer& want = ref->at("C");
      for (size_t e = 0; e < want.data.size(); ++e) {
        ASSERT_NEAR(got.data[e], want.data[e], tol * std::max(1.0, std::fabs(want.data[e])))
            << t->ToString() << " element " << e;
      }
    }
    EXPECT_GE(configs.size(), 12u) << ir::TypeName(dtype);  // drawn, not fixed
    EXPECT_EQ(instructions.size(), 2u) << ir::TypeName(dtype);
  }
}

// On Hopper, wgmma draws fill by TMA three times in four where both operands are parameters with
// rows of whole 16-byte chunks, and add a producer warpgroup to one TMA draw in four; never
// where a row is not (k = 100 bfloat16: 200 bytes).
TEST(TensorCoreSearch, SamplingDrawsTmaAndProducerWarpgroupsAtTheirRates) {
  for (const int64_t k : {512, 100}) {
    const ir::ComputeDAG dag = Build("matmul", {{512, k}, {k, 512}}, ir::ScalarType::kBFloat16);
    const State s = State::Initial(dag);
    TensorCoreStep base;
    base.kind = "bf16";
    for (int i = 0; i < s.num_stages(); ++i) {
      if (s.stage(i).op->reduce == ir::ReduceKind::kSum) base.stage_id = i;
    }
    std::mt19937_64 rng(12);
    int wgmma = 0, tma = 0, ws = 0, persistent = 0, pingpong = 0, one_group = 0;
    int multicast = 0, pairable = 0;
    for (int i = 0; i < 1200; ++i) {
      absl::StatusOr<TensorCoreStep> t = SampleTensorCoreStep(base, s, Target::H200(), rng);
      ASSERT_TRUE(t.ok()) << t.status();
      wgmma += t->warpgroup;
      tma += t->tma;
      ws += t->warp_specialized;
      persistent += t->persistent;
      pingpong += t->pingpong;
      one_group += t->persistent && t->block_m == t->warp_m && t->block_n == t->warp_n;
      multicast += t->multicast;
      // (512 rows: every block_m of the space gives an even number of tile rows.)
      pairable += t->tma && !t->pingpong && t->split_k == 1;
      EXPECT_TRUE(!t->multicast || (t->tma && !t->pingpong && t->split_k == 1)) << t->ToString();
      EXPECT_TRUE(!t->pingpong ||
                  (t->persistent && t->block_m == t->warp_m && t->block_n == t->warp_n))
          << t->ToString();
      EXPECT_TRUE(!t->warp_specialized || t->tma) << t->ToString();
      EXPECT_TRUE(!t->persistent || (t->warp_specialized && t->split_k == 1)) << t->ToString();
      EXPECT_TRUE(!t->tma || t->warpgroup) << t->ToString();
    }
    if (k == 100) {
      EXPECT_EQ(tma, 0);
      continue;
    }
    ASSERT_GT(wgmma, 600);
    EXPECT_NEAR(static_cast<double>(tma) / wgmma, 0.75, 0.06) << tma << " of " << wgmma;
    EXPECT_NEAR(static_cast<double>(ws) / tma, 0.25, 0.07) << ws << " of " << tma;
    // Half of the producer warpgroups without split_k are persistent.
    EXPECT_GT(persistent, 0);
    EXPECT_LT(persistent, ws);
    // Half of the persistent blocks of one warpgroup tile have ping-pong consumers.
    EXPECT_GT(pingpong, 0);
    EXPECT_LT(pingpong, one_group);
    // One in eight TMA rings without ping-pong consumers or split_k runs in multicast clusters.
    ASSERT_GT(pairable, 200);
    EXPECT_NEAR(static_cast<double>(multicast) / pairable, 0.125, 0.05)
        << multicast << " of " << pairable;
  }
}

// Stream-k is drawn only for persistent grids without ping-pong or multicast that end in a
// partial wave (none at 512 x 512 on 132 multiprocessors: at most 64 tiles), about one in eight
// of those at 4096 x 4096; mutation's decision 16 toggles it where it would split.
TEST(TensorCoreSearch, StreamKIsDrawnOnlyWhereItSplitsTheLastWaves) {
  for (const int64_t size : {512, 4096}) {
    const ir::ComputeDAG dag =
        Build("matmul", {{size, size}, {size, size}}, ir::ScalarType::kBFloat16);
    const State s = State::Initial(dag);
    TensorCoreStep base;
    base.kind = "bf16";
    for (int i = 0; i < s.num_stages(); ++i) {
      if (s.stage(i).op->reduce == ir::ReduceKind::kSum) base.stage_id = i;
    }
    const absl::StatusOr<schedule::MatmulLike> mm =
        schedule::AnalyzeMatmulLike(*s.stage(base.stage_id).op, s.stage(base.stage_id).op->body);
    ASSERT_TRUE(mm.ok()) << mm.status();
    std::mt19937_64 rng(31);
    int eligible = 0, drawn = 0, toggled = 0;
    for (int i = 0; i < 10000; ++i) {
      absl::StatusOr<TensorCoreStep> t = SampleTensorCoreStep(base, s, Target::H200(), rng);
      ASSERT_TRUE(t.ok()) << t.status();
      const bool splits = StreamKSplits(*t, *mm, Target::H200());
      eligible += t->persistent && !t->pingpong && !t->multicast && splits;
      drawn += t->stream_k;
      EXPECT_TRUE(!t->stream_k || (t->persistent && !t->pingpong && !t->multicast && splits))
          << t->ToString();
      if (t->persistent && !t->pingpong && !t->multicast) {
        const std::vector<TensorCoreStep> v =
            TensorCoreStepVariants(*t, *mm, s, Target::H200(), 16);
        if (splits || t->stream_k) {
          ASSERT_EQ(v.size(), 1u) << t->ToString();
          EXPECT_NE(v[0].stream_k, t->stream_k);
          ++toggled;
        } else {
          EXPECT_TRUE(v.empty()) << t->ToString();
        }
      }
    }
    if (size == 512) {
      EXPECT_EQ(eligible, 0);
      EXPECT_EQ(drawn, 0);
      continue;
    }
    ASSERT_GT(eligible, 200);
    EXPECT_NEAR(static_cast<double>(drawn) / eligible, 0.125, 0.06) << drawn << " of " << eligible;
    EXPECT_GT(toggled, 200);
  }
}

// A plain float32 matmul repacks only for wgmma tf32x3 tilings (whose repack kernels then store
// the split parts), three times in four; mma.sync tilings never repack it (they would only copy).
// A float16 plain matmul never repacks.
TEST(TensorCoreSearch, PlainFloat32MatmulsRepackForPresplitWgmmaOnly) {
  for (const ir::ScalarType dtype : {ir::ScalarType::kFloat32, ir::ScalarType::kFloat16}) {
    const ir::ComputeDAG dag = Build("matmul", {{512, 256}, {256, 384}}, dtype);
    const State s = State::Initial(dag);
    TensorCoreStep base;
    base.kind = dtype == ir::ScalarType::kFloat32 ? "tf32x3" : "f16";
    for (int i = 0; i < s.num_stages(); ++i) {
      if (s.stage(i).op->reduce == ir::ReduceKind::kSum) base.stage_id = i;
    }
    absl::StatusOr<schedule::MatmulLike> mm =
        schedule::AnalyzeMatmulLike(*s.stage(base.stage_id).op, s.stage(base.stage_id).op->body);
    ASSERT_TRUE(mm.ok()) << mm.status();
    EXPECT_FALSE(mm->repackable);  // plain operands: repack alone gains nothing
    EXPECT_EQ(mm->repack_plannable, dtype == ir::ScalarType::kFloat32);
    std::mt19937_64 rng(5);
    int wgmma = 0, repacked = 0;
    for (int i = 0; i < 800; ++i) {
      absl::StatusOr<TensorCoreStep> t = SampleTensorCoreStep(base, s, Target::H200(), rng);
      ASSERT_TRUE(t.ok()) << t.status();
      wgmma += t->warpgroup;
      repacked += t->repack;
      EXPECT_TRUE(!t->repack || (t->warpgroup && dtype == ir::ScalarType::kFloat32))
          << t->ToString();
    }
    if (dtype == ir::ScalarType::kFloat16) {
      EXPECT_EQ(repacked, 0);
      continue;
    }
    ASSERT_GT(wgmma, 300);
    EXPECT_NEAR(static_cast<double>(repacked) / wgmma, 0.75, 0.07) << repacked << " of " << wgmma;
  }
}

TEST(TensorCoreSearch, MutationChangesOneDecisionOfTheStep) {
  const ir::ComputeDAG dag = Build("matmul", {{128, 64}, {64, 128}}, ir::ScalarType::kFloat16);
  TuneContext ctx(dag, Target::H200(), SearchOptions{}, 11);
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(ctx);
  ASSERT_TRUE(sketches.ok());
  const State* sketch = nullptr;
  for (const State& s : *sketches) {
    if (TensorCoreOf(s)) sketch = &s;
  }
  ASSERT_NE(sketch, nullptr);
  absl::StatusOr<Candidate> parent = AnnotateSketch(*sketch, ctx);
  ASSERT_TRUE(parent.ok()) << parent.status();
  int changed = 0;
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<Candidate> child = MutateTileSize(parent->state, ctx);
    if (!child.ok()) continue;
    const TensorCoreStep& a = *TensorCoreOf(parent->state);
    const TensorCoreStep& b = *TensorCoreOf(child->state);
    // Switching the instruction (mma.sync <-> wgmma) is one decision that re-tiles the block;
    // turning TMA off takes its producer warpgroup (and persistence, and ping-pong) with it.
    // Multicast clusters go with a move that leaves no TMA ring to pair (ws, split_k, odd tile
    // rows); a move of their own is the one decision.
    const int others = a.warpgroup != b.warpgroup
                           ? 1
                           : (a.block_k != b.block_k) + (a.pipeline != b.pipeline) +
                                 (a.pad != b.pad) + (a.raster != b.raster) +
                                 (a.split_k != b.split_k) +
                                 (a.tma != b.tma || a.warp_specialized != b.warp_specialized ||
                                  a.persistent != b.persistent || a.pingpong != b.pingpong ||
                                  a.stream_k != b.stream_k) +
                                 (a.warp_m != b.warp_m || a.block_m != b.block_m) +
                                 (a.warp_n != b.warp_n || a.block_n != b.block_n);
    const int diffs = others + (others == 0 && a.multicast != b.multicast);
    EXPECT_EQ(diffs, 1) << a.ToString() << " -> " << b.ToString();
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.epilogue, b.epilogue);
    ++changed;
  }
  EXPECT_GE(changed, 30);
}

}  // namespace
}  // namespace tilesearch::search
