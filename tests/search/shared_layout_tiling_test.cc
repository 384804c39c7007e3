// Sketch rule SharedLayoutTiling (search/sketch_rules.h): on CUDA, a transpose or permute whose
// input's innermost dimension is indexed by another axis than the output's innermost one gets a
// sketch that caches the input in padded shared memory at a block tile (besides the untiled
// sketch); plain elementwise operators and matmuls get none. Annotated states of it lower, fill
// the tile in one cooperative copy, and store what the permutation, computed here by hand (2-D) or
// by the unscheduled program (3-D), stores — also for tiles that do not divide the shape, and with
// a fused elementwise producer inlined into the copy.
#include <algorithm>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/reference.h"
#include "schedule/fused_workload.h"
#include "schedule/lower.h"
#include "search/annotation.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::ComputeLocation;
using schedule::State;
using tilesearch::testing::IsOk;

// The sketches that pad a shared copy (no other GPU rule writes storage_align).
std::vector<State> TiledSketches(const ir::ComputeDAG& dag) {
  auto sketches = GenerateSketches(TuneContext(dag, Target::H200()));
  EXPECT_THAT(sketches.status(), IsOk());
  std::vector<State> out;
  if (!sketches.ok()) return out;
  for (const State& s : *sketches) {
    for (const schedule::Step& step : s.steps()) {
      if (std::holds_alternative<schedule::StorageAlignStep>(step)) {
        out.push_back(s);
        break;
      }
    }
  }
  EXPECT_LT(out.size(), sketches->size()) << "the untiled sketch is kept";
  return out;
}

// Expects exactly one tiled sketch, caching "X" in shared memory at the output stage.
State OneTiledSketch(const ir::ComputeDAG& dag) {
  const std::vector<State> tiled = TiledSketches(dag);
  EXPECT_EQ(tiled.size(), 1u);
  if (tiled.empty()) return State::Initial(dag);
  const State& s = tiled[0];
  const int cache = s.StageId("X.shared");
  EXPECT_GE(cache, 0) << s.ToString();
  if (cache < 0) return s;
  EXPECT_EQ(s.stage(cache).scope, ir::MemoryScope::kShared);
  EXPECT_EQ(s.stage(cache).location, ComputeLocation::kAttached);
  EXPECT_EQ(s.stage(s.stage(cache).attach_stage).name(), dag.stage(dag.output_ids()[0]).name());
  return s;
}

// Annotates `sketch` with a few seeds; each state must lower to one kernel with a shared tile
// within the limit and match `check` on random inputs.
template <typename Check>
void SampleAndCheck(const ir::ComputeDAG& dag, const State& sketch, int samples, Check check) {
  const Target target = Target::H200();
  int valid = 0;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(samples); ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(sketch, dag, target, rng);
    if (!c.ok()) continue;  // rejected draws are resampled in the search
    ++valid;
    const schedule::LoweredKernel& k = *c->lowered;
    ASSERT_EQ(k.launches.size(), 1u) << k.nest;
    EXPECT_GT(k.launches[0].shared_memory_bytes, 0) << k.nest;
    EXPECT_LE(k.launches[0].shared_memory_bytes, target.max_shared_memory_optin);
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 100 + seed);
    absl::StatusOr<ir::BufferMap> got = schedule::testing::RunLowered(k.nest, inputs);
    ASSERT_THAT(got.status(), IsOk()) << k.nest;
    check(inputs, *got, k.nest);
  }
  EXPECT_GE(valid, samples / 2) << "most draws are valid";
}

// out[i, j] == X[j, i] for every element, from the buffers directly.
void CheckTranspose2d(const ir::ComputeDAG& dag, int samples) {
  const State sketch = OneTiledSketch(dag);
  const std::string out = dag.stage(dag.output_ids()[0]).name();
  SampleAndCheck(dag, sketch, samples,
                 [&](const ir::BufferMap& in, const ir::BufferMap& got, const ir::LoopNest& nest) {
                   const ir::HostBuffer& x = in.at("X");
                   const ir::HostBuffer& y = got.at(out);
                   ASSERT_EQ(y.shape, (std::vector<int64_t>{x.shape[1], x.shape[0]}));
                   for (int64_t i = 0; i < y.shape[0]; ++i) {
                     for (int64_t j = 0; j < y.shape[1]; ++j) {
                       ASSERT_EQ(y.at({i, j}), x.at({j, i})) << i << "," << j << "\n" << nest;
                     }
                   }
                 });
}

TEST(SharedLayoutTiling, Transpose2dMatchesTheTransposedInput) {
  CheckTranspose2d(testing::MustBuild(ir::TransposeDAG({64, 96}, {1, 0})), 8);
}

TEST(SharedLayoutTiling, NonDivisibleTilesMatchTheTransposedInput) {
  CheckTranspose2d(testing::MustBuild(ir::TransposeDAG({100, 70}, {1, 0})), 8);
}

// The tile sampler counts the padded rows: a [65536, 2] transpose pads each 2-element row of its
// shared tile to 33 elements, so tiles sized by their unpadded bytes (a 2048-long o tile: 16 KB,
// 270 KB padded) fail to lower (a sixth of the draws did). No draw may exceed the limit.
TEST(SharedLayoutTiling, TileDrawsCountThePaddedRows) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::TransposeDAG({65536, 2}, {1, 0}));
  const State sketch = OneTiledSketch(dag);
  const Target target = Target::H200();
  int valid = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(sketch, dag, target, rng);
    if (c.ok()) {
      ++valid;
      EXPECT_LE(c->lowered->launches[0].shared_memory_bytes, target.max_shared_memory_optin);
    } else {
      EXPECT_THAT(std::string(c.status().message()),
                  ::testing::Not(::testing::HasSubstr("bytes of shared memory")))
          << seed;
    }
  }
  EXPECT_GE(valid, 50);
}

// Along the output's innermost axis the draws take threads in whole warps and one point per
// thread: a warp stores 32 consecutive elements and reads 32 padded shared rows, one bank each.
// (The 64-trial tune of transpose 16384² had found 16 threads × 4 points: half its shared loads
// conflicted, 0.656 ms against 0.533 for such tiles on the H200.)
TEST(SharedLayoutTiling, OutputRowsGoToWholeWarpsOnePointPerThread) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::TransposeDAG({512, 768}, {1, 0}));
  const State sketch = OneTiledSketch(dag);
  const Target target = Target::H200();
  const std::string out = dag.stage(dag.output_ids()[0]).name();
  int valid = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(sketch, dag, target, rng);
    if (!c.ok()) continue;
    ++valid;
    const schedule::SplitStep* inner_axis = nullptr;  // the split of i1 (iterator 4 once i0 is)
    for (const schedule::Step& step : c->state.steps()) {
      const auto* sp = std::get_if<schedule::SplitStep>(&step);
      // (Recorded before the cache stage shifted the output's id.)
      if (sp != nullptr && sp->iter_id == 4 && sp->lengths.size() == 3) {
        inner_axis = sp;
      }
    }
    ASSERT_NE(inner_axis, nullptr) << c->state.ToString();
    EXPECT_EQ(*inner_axis->lengths[1] % target.warp_size, 0) << c->state.ToString();
    EXPECT_EQ(*inner_axis->lengths[2], 1) << c->state.ToString();
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 300 + seed);
    absl::StatusOr<ir::BufferMap> got = schedule::testing::RunLowered(c->lowered->nest, inputs);
    ASSERT_THAT(got.status(), IsOk());
    const ir::HostBuffer& x = inputs.at("X");
    const ir::HostBuffer& y = got->at(out);
    for (int64_t i = 0; i < y.shape[0]; i += 37) {
      for (int64_t j = 0; j < y.shape[1]; ++j) ASSERT_EQ(y.at({i, j}), x.at({j, i}));
    }
  }
  EXPECT_GE(valid, 12);
}

TEST(SharedLayoutTiling, HalfPrecisionTransposeMatchesTheTransposedInput) {
  CheckTranspose2d(testing::MustBuild(ir::TransposeDAG({48, 40}, {1, 0}, ir::ScalarType::kFloat16)),
                   4);
  CheckTranspose2d(
      testing::MustBuild(ir::TransposeDAG({40, 56}, {1, 0}, ir::ScalarType::kBFloat16)), 4);
}

TEST(SharedLayoutTiling, Permute3dMatchesTheUnscheduledProgram) {
  // NCHW -> NHWC-like: out[n, w, c] = X[n, c, w]; and a rotation, out[a, b, c] = X[b, c, a].
  for (const std::vector<int64_t>& perm : {std::vector<int64_t>{0, 2, 1}, {2, 0, 1}}) {
    SCOPED_TRACE(perm[1]);
    const ir::ComputeDAG dag = testing::MustBuild(ir::TransposeDAG({3, 20, 36}, perm));
    const State sketch = OneTiledSketch(dag);
    SampleAndCheck(
        dag, sketch, 6,
        [&](const ir::BufferMap& in, const ir::BufferMap& got, const ir::LoopNest& nest) {
          absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, in);
          ASSERT_THAT(ref.status(), IsOk());
          EXPECT_EQ(schedule::testing::MaxRelError(dag, got, *ref), 0.0) << nest;
        });
  }
}

TEST(SharedLayoutTiling, FusedProducerIsInlinedIntoTheSharedCopy) {
  // relu then transpose: the relu is computed once per element, in the cooperative copy.
  const std::vector<schedule::FusedNode> nodes = {{"relu", {{false, 0}}, {}},
                                                  {"transpose", {{true, 0}}, {{"perm", "1,0"}}}};
  const ir::ComputeDAG dag =
      testing::MustBuild(schedule::BuildFusedDAG(nodes, {{40, 72}}, ir::ScalarType::kFloat32));
  const std::vector<State> tiled = TiledSketches(dag);
  ASSERT_EQ(tiled.size(), 1u);
  const State& sketch = tiled[0];
  ASSERT_GE(sketch.StageId("relu_0.shared"), 0) << sketch.ToString();
  EXPECT_EQ(sketch.stage(sketch.StageId("relu_0")).location, ComputeLocation::kInlined);
  SampleAndCheck(
      dag, sketch, 6,
      [&](const ir::BufferMap& in, const ir::BufferMap& got, const ir::LoopNest& nest) {
        const ir::HostBuffer& x = in.at("p0");
        const ir::HostBuffer& y = got.at("transpose_1");
        for (int64_t i = 0; i < y.shape[0]; ++i) {
          for (int64_t j = 0; j < y.shape[1]; ++j) {
            ASSERT_EQ(y.at({i, j}), std::max(0.0, x.at({j, i}))) << i << "," << j << "\n" << nest;
          }
        }
      });
}

TEST(SharedLayoutTiling, PadsTheRowsTheWarpReadsAcross) {
  const State sketch = OneTiledSketch(testing::MustBuild(ir::TransposeDAG({64, 64}, {1, 0})));
  const schedule::Stage& cache = sketch.stage(sketch.StageId("X.shared"));
  // Rows of 4-byte elements: the stride of dimension 0 is ≡ 1 (mod 32).
  EXPECT_EQ(cache.storage_align_dim, 0);
  EXPECT_EQ(cache.storage_align_factor, 32);
  EXPECT_EQ(cache.storage_align_offset, 1);
  const State half = OneTiledSketch(
      testing::MustBuild(ir::TransposeDAG({64, 64}, {1, 0}, ir::ScalarType::kFloat16)));
  const schedule::Stage& half_cache = half.stage(half.StageId("X.shared"));
  EXPECT_EQ(half_cache.storage_align_factor, 64);
  EXPECT_EQ(half_cache.storage_align_offset, 2);
}

TEST(SharedLayoutTiling, NoTiledSketchForElementwiseMatmulOrCpu) {
  EXPECT_TRUE(
      TiledSketches(testing::MustBuild(ir::UnaryDAG(ir::UnaryOp::kRelu, {64, 64}))).empty());
  EXPECT_TRUE(TiledSketches(testing::MustBuild(ir::MatmulDAG({64, 32}, {32, 48}))).empty());
  // Softmax's normalize stage reads max[i] and sum[i]: broadcasts, not a layout change.
  EXPECT_TRUE(TiledSketches(testing::MustBuild(ir::SoftmaxDAG({8, 64}))).empty());
  // A permute that keeps the innermost axis needs no staging.
  EXPECT_TRUE(TiledSketches(testing::MustBuild(ir::TransposeDAG({4, 6, 32}, {1, 0, 2}))).empty());
  auto cpu = GenerateSketches(
      TuneContext(testing::MustBuild(ir::TransposeDAG({64, 64}, {1, 0})), Target::HostCpu()));
  ASSERT_THAT(cpu.status(), IsOk());
  for (const State& s : *cpu) EXPECT_LT(s.StageId("X.shared"), 0) << s.ToString();
}

}  // namespace
}  // namespace tilesearch::search
