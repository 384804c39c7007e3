// Schedules for untuned shapes: split lengths adapted to new extents, step lists transferred
// between shapes of one operator (each transferred program run in the interpreter against the
// naive program), and PredictSchedule choosing among transferred and sampled candidates.
#include "search/predict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "costmodel/cost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/norm.h"
#include "schedule/apply_step.h"
#include "search/annotation.h"
#include "search/schedule_transfer.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::Ok;
using ::tilesearch::testing::StatusIs;
using Lengths = std::vector<std::optional<int64_t>>;

schedule::Workload MatmulWorkload(int64_t m, int64_t k, int64_t n) {
  schedule::Workload w;
  w.op = "matmul";
  w.args.shapes = {{m, k}, {k, n}};
  w.args.dtype = ir::ScalarType::kFloat32;
  return w;
}

TEST(AdaptSplitLengthsTest, KeepsTilesThatFitAndCutsFromTheOuterEnd) {
  // inner_to_outer: lengths are inner parts, the innermost kept first.
  EXPECT_EQ(AdaptSplitLengths({8, 4}, true, 1024), (Lengths{8, 4}));
  EXPECT_EQ(AdaptSplitLengths({8, 4}, true, 16), (Lengths{4, 4}));
  EXPECT_EQ(AdaptSplitLengths({8, 4}, true, 3), (Lengths{1, 3}));
  EXPECT_EQ(AdaptSplitLengths({8, 4}, true, 100), (Lengths{8, 4}));  // guarded remainder
  // Outer parts: the outermost kept first.
  EXPECT_EQ(AdaptSplitLengths({8, 4}, false, 16), (Lengths{8, 2}));
  EXPECT_EQ(AdaptSplitLengths({Lengths::value_type(), 4}, true, 2),
            (Lengths{Lengths::value_type(), 2}));
}

TEST(WorkloadDistanceTest, LogRatiosOfTwinsOnly) {
  EXPECT_DOUBLE_EQ(WorkloadDistance(MatmulWorkload(512, 512, 512), MatmulWorkload(1024, 512, 256)),
                   2);  // A's m doubled, B's n halved
  EXPECT_DOUBLE_EQ(WorkloadDistance(MatmulWorkload(64, 64, 64), MatmulWorkload(64, 64, 64)), 0);
  schedule::Workload t = MatmulWorkload(64, 64, 64);
  t.args.attrs["transpose_b"] = "true";
  EXPECT_TRUE(std::isinf(WorkloadDistance(MatmulWorkload(64, 64, 64), t)));
  schedule::Workload h = MatmulWorkload(64, 64, 64);
  h.args.dtype = ir::ScalarType::kFloat16;
  EXPECT_TRUE(std::isinf(WorkloadDistance(MatmulWorkload(64, 64, 64), h)));
}

// Every state sampled for one matmul shape, transferred to another (non-divisible) shape, lowers
// and computes the same as the naive program there.
void ExpectTransfersRun(const Target& target, int samples) {
  const ir::ComputeDAG from = Ok(MatmulWorkload(64, 64, 64).Build());
  const ir::ComputeDAG to = Ok(MatmulWorkload(40, 72, 24).Build());
  TuneContext ctx(from, target, SearchOptions{}, 3);
  const std::vector<schedule::State> sketches = Ok(GenerateSketches(ctx));
  const std::vector<schedule::State> states = SampleInitialPopulation(sketches, samples, ctx);
  ASSERT_GE(static_cast<int>(states.size()), samples / 2);
  TuneContext to_ctx(to, target);
  size_t lowered = 0;
  for (const schedule::State& s : states) {
    absl::StatusOr<schedule::State> moved = TransferSteps(s.steps(), to);
    ASSERT_TRUE(moved.ok()) << moved.status() << "\n" << s.ToString();
    absl::StatusOr<Candidate> c = LowerCandidate(*moved, to_ctx);
    if (!c.ok()) continue;  // over a limit of the new shape: predict skips it the same way
    ++lowered;
    schedule::testing::ExpectMatchesReference(to, *moved, target, /*exact=*/false);
  }
  EXPECT_GE(lowered, states.size() * 3 / 4);
}

TEST(TransferStepsTest, CpuSchedulesOfOneMatmulRunCorrectlyOnAnother) {
  ExpectTransfersRun(Target::HostCpu(), 24);
}

TEST(TransferStepsTest, GpuSchedulesOfOneMatmulRunCorrectlyOnAnother) {
  ExpectTransfersRun(Target::H200(), 24);
}

// A vector split keeps a width that divides the new extent: a bfloat16 softmax drawn with 8 per
// thread on rows of 2048 moves to rows of 1002 (8 divides neither a row nor 6 rows) with a
// narrower vector of 2 or more, and the moved schedule still computes the softmax.
TEST(TransferStepsTest, VectorWidthsDivideTheNewExtent) {
  const ir::ComputeDAG from =
      testing::MustBuild(ir::SoftmaxDAG({6, 2048}, -1, ir::ScalarType::kBFloat16));
  const ir::ComputeDAG to =
      testing::MustBuild(ir::SoftmaxDAG({6, 1002}, -1, ir::ScalarType::kBFloat16));
  TuneContext ctx(from, Target::H200(), SearchOptions{}, 4);
  const std::vector<schedule::State> sketches = Ok(GenerateSketches(ctx));
  int moved_rows = 0;
  for (int n = 0; n < 40 && moved_rows < 3; ++n) {
    absl::StatusOr<Candidate> c = AnnotateSketch(sketches[n % sketches.size()], ctx);
    if (!c.ok()) continue;
    const auto& steps = c->state.steps();
    int vec = -1;
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      const auto* an = std::get_if<schedule::AnnotationStep>(&steps[i + 1]);
      if (std::holds_alternative<schedule::SplitStep>(steps[i]) && an != nullptr &&
          an->annotation == schedule::IteratorAnnotation::kVectorize &&
          c->state.stage(an->stage_id).name() == "softmax") {
        vec = static_cast<int>(i);
      }
    }
    if (vec < 0 || *std::get<schedule::SplitStep>(steps[vec]).lengths[0] != 8) continue;
    absl::StatusOr<schedule::State> moved = TransferSteps(steps, to);
    ASSERT_THAT(moved.status(), IsOk()) << c->state.ToString();
    const int64_t w = *std::get<schedule::SplitStep>(moved->steps()[vec]).lengths[0];
    EXPECT_TRUE(w == 2 || w == 4) << moved->ToString();
    absl::StatusOr<Candidate> lowered = LowerCandidate(*moved, TuneContext(to, Target::H200()));
    ASSERT_THAT(lowered.status(), IsOk()) << moved->ToString();
    absl::StatusOr<double> err =
        schedule::testing::RelErrorToFloat64(to, lowered->lowered->nest, 2);
    ASSERT_THAT(err.status(), IsOk());
    EXPECT_LE(*err, 2e-5);
    ++moved_rows;
  }
  EXPECT_GE(moved_rows, 1);
}

TEST(TransferStepsTest, AnotherOperatorsStepsAreAnError) {
  const ir::ComputeDAG mm = Ok(MatmulWorkload(64, 64, 64).Build());
  TuneContext ctx(mm, Target::HostCpu(), SearchOptions{}, 1);
  const std::vector<schedule::State> states =
      SampleInitialPopulation(Ok(GenerateSketches(ctx)), 1, ctx);
  ASSERT_EQ(states.size(), 1u);
  schedule::Workload relu;
  relu.op = "relu";
  relu.args.shapes = {{64}};
  EXPECT_THAT(TransferSteps(states[0].steps(), Ok(relu.Build())),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("step ")));
}

// Records of valid trials of `states` on `workload`, with the given median times.
std::vector<MeasureRecord> RecordsOf(const schedule::Workload& workload, const Target& target,
                                     const std::vector<schedule::State>& states,
                                     const std::vector<double>& ms) {
  const ir::ComputeDAG dag = Ok(workload.Build());
  std::vector<MeasureRecord> out;
  for (size_t i = 0; i < states.size(); ++i) {
    MeasureRecord r;
    r.workload = workload;
    r.workload_key = dag.WorkloadKey();
    r.target = target;
    r.steps = states[i].steps();
    r.result.timing.median_ms = ms[i];
    r.trial = static_cast<int64_t>(i);
    out.push_back(r);
  }
  return out;
}

TEST(PredictScheduleTest, WithoutAModelTheNearestFastestRecordIsTransferred) {
  const Target target = Target::HostCpu();
  const schedule::Workload near = MatmulWorkload(64, 64, 64);
  const schedule::Workload far = MatmulWorkload(8, 8, 8);
  TuneContext ctx(Ok(near.Build()), target, SearchOptions{}, 5);
  const std::vector<schedule::State> states =
      SampleInitialPopulation(Ok(GenerateSketches(ctx)), 3, ctx);
  ASSERT_EQ(states.size(), 3u);
  std::vector<MeasureRecord> records = RecordsOf(near, target, states, {0.3, 0.1, 0.2});
  for (MeasureRecord& r : RecordsOf(far, target, {states[0]}, {0.01})) records.push_back(r);

  const schedule::Workload task = MatmulWorkload(48, 80, 56);
  const ir::ComputeDAG dag = Ok(task.Build());
  const PredictedSchedule p = Ok(PredictSchedule(dag, task, target, records, nullptr));
  EXPECT_THAT(p.origin, HasSubstr("trial 1 of matmul 64x64 64x64"));  // 0.1 ms, the nearest
  EXPECT_EQ(p.transferred, 3);  // the far record's schedule transfers to the same as trial 0
  EXPECT_EQ(p.sampled, 0);
  EXPECT_TRUE(std::isnan(p.score));
  schedule::testing::ExpectMatchesReference(dag, p.state, target, /*exact=*/false);
}

TEST(PredictScheduleTest, AModelRanksTransfersAndSamplesOnlyWhereNothingTransfers) {
  const Target target = Target::H200();
  const schedule::Workload tuned = MatmulWorkload(64, 64, 64);
  TuneContext ctx(Ok(tuned.Build()), target, SearchOptions{}, 9);
  const std::vector<schedule::State> states =
      SampleInitialPopulation(Ok(GenerateSketches(ctx)), 2, ctx);
  ASSERT_EQ(states.size(), 2u);
  const std::vector<MeasureRecord> records = RecordsOf(tuned, target, states, {0.2, 0.1});

  const schedule::Workload task = MatmulWorkload(96, 32, 80);
  const ir::ComputeDAG dag = Ok(task.Build());
  costmodel::RandomModel model(4);
  PredictOptions o;
  o.fresh_samples = 6;
  const PredictedSchedule p = Ok(PredictSchedule(dag, task, target, records, &model, o));
  EXPECT_EQ(p.transferred, 2);
  EXPECT_EQ(p.sampled, 0);  // transfers exist: no samples
  EXPECT_THAT(p.origin, HasSubstr("transferred from trial"));
  EXPECT_TRUE(p.score >= 0 && p.score < 1) << p.score;  // a RandomModel score
  schedule::testing::ExpectMatchesReference(dag, p.state, target, /*exact=*/false);

  // No record of the operator: the model ranks fresh samples.
  const PredictedSchedule fresh = Ok(PredictSchedule(dag, task, target, {}, &model, o));
  EXPECT_EQ(fresh.transferred, 0);
  EXPECT_GT(fresh.sampled, 0);
  EXPECT_LE(fresh.sampled, 6);
  EXPECT_EQ(fresh.origin, "sampled");
  schedule::testing::ExpectMatchesReference(dag, fresh.state, target, /*exact=*/false);
}

// A tensor_core step (schedule/step.h) of the given tiles on stage 2 (the matmul's, dense's and
// batch matmul's reduction).
schedule::TensorCoreStep Tc(std::string kind, int64_t bm, int64_t bn, int64_t bk, int64_t wm,
                            int64_t wn, int pipeline, int split_k, bool warpgroup) {
  schedule::TensorCoreStep t;
  t.stage_id = 2;
  t.kind = std::move(kind);
  t.block_m = bm;
  t.block_n = bn;
  t.block_k = bk;
  t.warp_m = wm;
  t.warp_n = wn;
  t.pipeline = pipeline;
  t.split_k = split_k;
  t.warpgroup = warpgroup;
  t.pad = warpgroup ? 0 : 4;
  return t;
}

// The tensor_core steps of TransferVariants of `t` transferred to `dag`.
std::vector<schedule::TensorCoreStep> VariantSteps(const schedule::TensorCoreStep& t,
                                                   const ir::ComputeDAG& dag) {
  const schedule::State moved = Ok(TransferSteps({t}, dag));
  std::vector<schedule::TensorCoreStep> out;
  for (const schedule::State& v : TransferVariants(moved, dag, Target::H200())) {
    EXPECT_THAT(schedule::ReplaySteps(dag, v.steps()), IsOk());
    for (const schedule::Step& st : v.steps()) {
      if (const auto* tc = std::get_if<schedule::TensorCoreStep>(&st)) out.push_back(*tc);
    }
  }
  return out;
}

bool Contains(const std::vector<schedule::TensorCoreStep>& v, const schedule::TensorCoreStep& t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

schedule::Workload Op(std::string op, std::vector<std::vector<int64_t>> shapes,
                      ir::ScalarType dtype = ir::ScalarType::kFloat32) {
  schedule::Workload w;
  w.op = std::move(op);
  w.args.shapes = std::move(shapes);
  w.args.dtype = dtype;
  return w;
}

TEST(TransferVariantsTest, FewKTilesCapThePipelineAtAQuarterOfThem) {
  // bf16 wgmma, block_k 32, a 6-deep ring: K = 128 has 4 k tiles, K = 1024 has 32.
  // The bf16 matmul's output cast is its epilogue.
  schedule::TensorCoreStep t = Tc("bf16", 128, 128, 32, 64, 128, 6, 1, true);
  t.epilogue = 1;
  const ir::ComputeDAG short_k =
      Ok(Op("matmul", {{512, 128}, {128, 512}}, ir::ScalarType::kBFloat16).Build());
  schedule::TensorCoreStep capped = t;
  capped.pipeline = std::max(2, (128 / 32) / 4);  // 2, the floor
  EXPECT_TRUE(Contains(VariantSteps(t, short_k), capped));

  // 32 k tiles: a quarter is 8, above the ring's 6, so the ring is kept.
  const ir::ComputeDAG long_k =
      Ok(Op("matmul", {{512, 1024}, {1024, 512}}, ir::ScalarType::kBFloat16).Build());
  for (const schedule::TensorCoreStep& v : VariantSteps(t, long_k)) EXPECT_EQ(v.pipeline, 6);
}

TEST(TransferVariantsTest, SplitKIsRefittedToTheNewKAndItsRangesGetCappedPipelines) {
  // The study's case: a 64x512x1024 batch matmul's best on a 32x384x256 one. 256 / 32 = 8 k tiles:
  // split_k 8 leaves 1 per range; 2 keeps the space's 4 per range (search/tensor_core_space.h).
  const schedule::TensorCoreStep t = Tc("tf32x3", 64, 128, 32, 64, 64, 5, 8, true);
  const ir::ComputeDAG dag = Ok(Op("batch_matmul", {{32, 384, 256}, {32, 256, 384}}).Build());
  const std::vector<schedule::TensorCoreStep> got = VariantSteps(t, dag);
  for (int split : {2, 1}) {
    schedule::TensorCoreStep fitted = t;
    fitted.split_k = split;
    EXPECT_TRUE(Contains(got, fitted)) << split;
    fitted.pipeline = std::max(2, 8 / split / 4);
    EXPECT_TRUE(Contains(got, fitted)) << split;
  }
  // 32 x (384 / 64) x (384 / 128) = 576 blocks at split_k 1: more than the 132 SMs, so no tile
  // is halved.
  for (const schedule::TensorCoreStep& v : got) {
    EXPECT_GE(v.block_m, 64);
    EXPECT_GE(v.block_n, 128);
    EXPECT_NE(v.split_k, 8);
  }
}

TEST(TransferVariantsTest, FewWavesHalveTheBlockTileAndTheHalvesComputeTheMatmul) {
  // 96 x 80 in 64 x 64 blocks: 2 x 2 = 4 blocks, far under the 132 SMs.
  const schedule::TensorCoreStep t = Tc("tf32x3", 64, 64, 16, 32, 32, 2, 1, false);
  const ir::ComputeDAG dag = Ok(Op("matmul", {{96, 32}, {32, 80}}).Build());
  const std::vector<schedule::TensorCoreStep> got = VariantSteps(t, dag);
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (const schedule::TensorCoreStep& v : got) {
    EXPECT_EQ(v.block_m % v.warp_m, 0);
    EXPECT_EQ(v.block_n % v.warp_n, 0);
    blocks.emplace_back(v.block_m, v.block_n);
  }
  EXPECT_THAT(blocks, ::testing::UnorderedElementsAre(std::pair<int64_t, int64_t>{32, 64},
                                                      std::pair<int64_t, int64_t>{64, 32},
                                                      std::pair<int64_t, int64_t>{32, 32}));
  TuneContext ctx(dag, Target::H200());
  const schedule::State moved = Ok(TransferSteps({t}, dag));
  for (const schedule::State& v : TransferVariants(moved, dag, Target::H200())) {
    EXPECT_THAT(LowerCandidate(v, ctx), IsOk());
    schedule::testing::ExpectMatchesReference(dag, v, Target::H200(), /*exact=*/false);
  }

  // A 4096 x 4096 output in 128 x 128 blocks: 1024 blocks, enough to keep the tile (or double it).
  const schedule::TensorCoreStep big = Tc("tf32x3", 128, 128, 16, 64, 32, 2, 1, false);
  const ir::ComputeDAG large = Ok(Op("matmul", {{4096, 64}, {64, 4096}}).Build());
  for (const schedule::TensorCoreStep& v : VariantSteps(big, large)) {
    EXPECT_GE(v.block_m, 128);
    EXPECT_GE(v.block_n, 128);
  }
}

// A multicast TMA tiling moved to a problem of three 128-row tile rows: no variant keeps clusters
// whose tile rows cannot pair up (or with split_k); every variant lowers, and one without
// clusters is among them.
TEST(TransferVariantsTest, MulticastOnlyWhereTheNewTileRowsPairUp) {
  schedule::TensorCoreStep t = Tc("bf16", 128, 256, 64, 64, 256, 4, 1, true);
  t.tma = t.multicast = true;
  t.epilogue = 1;
  const ir::ComputeDAG dag =
      Ok(Op("matmul", {{384, 256}, {256, 512}}, ir::ScalarType::kBFloat16).Build());
  TuneContext ctx(dag, Target::H200());
  const schedule::State moved = Ok(TransferSteps({t}, dag));
  int plain = 0;
  for (const schedule::State& v : TransferVariants(moved, dag, Target::H200())) {
    EXPECT_THAT(LowerCandidate(v, ctx), IsOk());
    for (const schedule::Step& st : v.steps()) {
      const auto* tc = std::get_if<schedule::TensorCoreStep>(&st);
      if (tc == nullptr) continue;
      plain += !tc->multicast;
      if (tc->multicast) {
        EXPECT_EQ(384 / tc->block_m % 2, 0) << tc->ToString();
        EXPECT_EQ(tc->split_k, 1) << tc->ToString();
      }
    }
  }
  EXPECT_GT(plain, 0);
}

TEST(TransferVariantsTest, ManyBlocksDoubleTheBlockTileAndTheDoublesComputeTheMatmul) {
  // A 16 x 16 tile sized for a small shape, on a 64 x 64 output: 4 x 4 = 16 blocks on a target of
  // 8 SMs (2 per SM: none halved). Doubled, 8 blocks (1 per SM, at least the half required).
  Target target = Target::H200();
  target.sm_count = 8;
  const schedule::TensorCoreStep t = Tc("tf32x3", 16, 16, 16, 16, 8, 2, 1, false);
  const ir::ComputeDAG dag = Ok(Op("matmul", {{64, 32}, {32, 64}}).Build());
  const schedule::State moved = Ok(TransferSteps({t}, dag));
  const std::vector<schedule::State> variants = TransferVariants(moved, dag, target);
  // The space's mma.sync warp tiles go up to 64 x 64, so each doubled side widens the warp tile
  // (16 x 8 -> 16 x 16 along n, 32 x 8 along m); the k tile doubles from 16 to 32 (2 of TF32's
  // k of 8 -> 4; K = 32 is one such tile, so split_k stays 1). The 2-stage rings keep their depth:
  // at most 2 x (16 x 36 + 32 x 36) floats = 14 KiB.
  using Tiles = std::array<int64_t, 5>;  // block m, n, k, warp m, n
  std::vector<Tiles> tiles;
  TuneContext ctx(dag, target);
  for (const schedule::State& v : variants) {
    for (const schedule::Step& st : v.steps()) {
      if (const auto* tc = std::get_if<schedule::TensorCoreStep>(&st)) {
        tiles.push_back({tc->block_m, tc->block_n, tc->block_k, tc->warp_m, tc->warp_n});
        EXPECT_EQ(tc->pipeline, 2);
        EXPECT_EQ(tc->split_k, 1);
      }
    }
    EXPECT_THAT(LowerCandidate(v, ctx), IsOk());
    schedule::testing::ExpectMatchesReference(dag, v, target, /*exact=*/false);
  }
  EXPECT_THAT(tiles,
              ::testing::UnorderedElementsAre(Tiles{16, 32, 16, 16, 16}, Tiles{16, 32, 32, 16, 16},
                                              Tiles{32, 16, 16, 32, 8}, Tiles{32, 16, 32, 32, 8}));

  // On the H200's 132 SMs, 8 doubled blocks are under half a block per SM: nothing is doubled
  // (the 16 blocks get halved tiles instead).
  for (const schedule::TensorCoreStep& v : VariantSteps(t, dag)) {
    EXPECT_LE(v.block_m, 16);
    EXPECT_LE(v.block_n, 16);
  }
}

TEST(TransferVariantsTest, NoDoubledTileWhereItsRingExceedsSharedMemory) {
  // tf32x3 wgmma 128 x 128 x 32 (warpgroups of 64 x 128, 2 along m), a 2-stage ring: each stage
  // (128 + 128) x 32 floats = 32 KiB, and the ring plus the TF32 tile sets (2 + 2 x 2 tiles)
  // 192 KiB of the 227 KiB opt-in. Along n, a 64 x 256 warpgroup tile would hold 2 x 64 x 256 /
  // 128 = 256 accumulators a thread (over 128), so a second warpgroup column it is: 128 x 256,
  // (128 + 256) x 32 x 4 = 48 KiB a tile, 6 tiles = 288 KiB at the shallowest ring. Along m
  // (the tile is square) neither a 128-row warpgroup tile (256 accumulators) nor 4 warpgroups
  // a side fits. 2048 x 2048 in 128 x 128 blocks: 256 blocks, many enough to double. The step's
  // k loop needs no other variant (64 k tiles, 1 range, a ring of 2).
  const schedule::TensorCoreStep t = Tc("tf32x3", 128, 128, 32, 64, 128, 2, 1, true);
  const ir::ComputeDAG dag = Ok(Op("matmul", {{2048, 2048}, {2048, 2048}}).Build());
  EXPECT_THAT(VariantSteps(t, dag), ::testing::IsEmpty());

  // With 288 KiB of shared memory the doubled tile along n would fit its ring, but not the
  // registers: four tf32x3 warpgroups (512 threads, 128 registers a thread) of 128 accumulators
  // plus the tile accumulator's each need 160 (the step refuses it, schedule::
  // WgmmaThreadRegisters), so no variant again.
  Target roomy = Target::H200();
  roomy.max_shared_memory_optin = 6 * (128 + 256) * 32 * 4;
  const schedule::State moved = Ok(TransferSteps({t}, dag));
  EXPECT_THAT(TransferVariants(moved, dag, roomy), ::testing::IsEmpty());
}

TEST(TransferVariantsTest, SimtSchedulesGetNone) {
  const ir::ComputeDAG dag = Ok(MatmulWorkload(64, 64, 64).Build());
  TuneContext ctx(dag, Target::HostCpu(), SearchOptions{}, 2);
  const std::vector<schedule::State> states =
      SampleInitialPopulation(Ok(GenerateSketches(ctx)), 2, ctx);
  ASSERT_FALSE(states.empty());
  for (const schedule::State& s : states)
    EXPECT_TRUE(TransferVariants(s, dag, Target::H200()).empty());
}

TEST(PredictScheduleTest, ADenseWithAnEpilogueTransfersFromAPlainDense) {
  // No dense with bias and GELU was tuned; a plain dense was (its step has no epilogue).
  const Target target = Target::H200();
  const schedule::Workload plain = Op("dense", {{64, 32}, {48, 32}});
  const ir::ComputeDAG plain_dag = Ok(plain.Build());
  const schedule::State tuned =
      Ok(schedule::ReplaySteps(plain_dag, {Tc("tf32x3", 32, 32, 16, 16, 16, 2, 1, false)}));
  std::vector<MeasureRecord> records = RecordsOf(plain, target, {tuned}, {0.01});
  // A relu's record is no relative (no matmul-like stage).
  const schedule::Workload relu = Op("relu", {{64}});
  TuneContext relu_ctx(Ok(relu.Build()), target, SearchOptions{}, 1);
  for (MeasureRecord& r :
       RecordsOf(relu, target, SampleInitialPopulation(Ok(GenerateSketches(relu_ctx)), 1, relu_ctx),
                 {0.001})) {
    records.push_back(r);
  }

  schedule::Workload task = Op("dense", {{40, 32}, {56, 32}, {56}});
  task.args.attrs = {{"bias", "true"}, {"activation", "gelu"}};
  const ir::ComputeDAG dag = Ok(task.Build());
  const PredictedSchedule p = Ok(PredictSchedule(dag, task, target, records, nullptr));
  EXPECT_TRUE(p.related);
  EXPECT_EQ(p.transferred, 1);
  EXPECT_GE(p.variants, 1);  // the epilogue extended over bias + GELU, at least
  EXPECT_THAT(p.origin, HasSubstr("trial 0 of dense 64x32 48x32"));
  schedule::testing::ExpectMatchesReference(dag, p.state, target, /*exact=*/false);

  // The variant that fuses the epilogue is among the candidates and computes the same.
  const schedule::State moved = Ok(TransferSteps(tuned.steps(), dag));
  bool fused = false;
  for (const schedule::State& v : TransferVariants(moved, dag, target)) {
    const auto& tc = std::get<schedule::TensorCoreStep>(v.steps().back());
    if (tc.epilogue != 1) continue;
    fused = true;
    schedule::testing::ExpectMatchesReference(dag, v, target, /*exact=*/false);
  }
  EXPECT_TRUE(fused);

  // A model ranks the transfer and its variants; the pick passes the check too.
  costmodel::RandomModel model(3);
  const PredictedSchedule ranked = Ok(PredictSchedule(dag, task, target, records, &model));
  EXPECT_EQ(ranked.sampled, 0);
  schedule::testing::ExpectMatchesReference(dag, ranked.state, target, /*exact=*/false);
}

TEST(PredictScheduleTest, NothingToTransferWithoutAModelIsNotFound) {
  const schedule::Workload task = MatmulWorkload(48, 80, 56);
  const ir::ComputeDAG dag = Ok(task.Build());
  EXPECT_THAT(PredictSchedule(dag, task, Target::HostCpu(), {}, nullptr),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no tuned workload of matmul float32 on cpu")));
  PredictOptions bad;
  bad.nearest_workloads = 0;
  EXPECT_THAT(PredictSchedule(dag, task, Target::HostCpu(), {}, nullptr, bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nearest_workloads")));
}

}  // namespace
}  // namespace tilesearch::search
