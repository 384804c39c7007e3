// Sketch rule SplitReductionAcrossBlocks (search/sketch_rules.cc): on CUDA, a reduction with few
// output points and a long reduce extent also gets a sketch that reduces chunks in separate blocks
// ("X.rf") and then the partials; its chunk length is drawn from gpu_block_reduction_chunks and
// mutated among them. Annotated states lower to two kernels per split reduction and compute what
// float64 loops compute. Many output points, short reductions and CPU targets get no such sketch;
// very long reductions get no sketch that sums them in one thread.
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/pool.h"
#include "ir/reference.h"
#include "schedule/lower.h"
#include "search/annotation.h"
#include "search/mutation_internal.h"
#include "search/sketch.h"
#include "search/sketch_rules.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::IteratorAnnotation;
using schedule::IteratorKind;
using schedule::State;
using tilesearch::testing::IsOk;

// Stages of `s` whose name ends in ".rf".
int RfactorStages(const State& s) {
  int n = 0;
  for (int i = 0; i < s.num_stages(); ++i) n += absl::EndsWith(s.stage(i).name(), ".rf");
  return n;
}

std::vector<State> SplitSketches(const std::vector<State>& sketches) {
  std::vector<State> out;
  for (const State& s : sketches) {
    if (RfactorStages(s) > 0) out.push_back(s);
  }
  return out;
}

// True when every reduce iterator of stage `sid` is unbound (one thread sums the whole extent).
bool SequentialReduction(const State& s, int sid) {
  bool any = false;
  for (const auto& it : s.stage(sid).iters) {
    if (it.kind != IteratorKind::kReduce) continue;
    any = true;
    if (it.annotation == IteratorAnnotation::kThreadIdxX) return false;
  }
  return any && s.stage(sid).location == schedule::ComputeLocation::kRoot;
}

// Row sums of x [rows, cols] in float64.
std::vector<double> RowSums(const ir::HostBuffer& x) {
  const int64_t rows = x.shape[0], cols = x.shape[1];
  std::vector<double> out(rows, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out[i] += x.at({i, j});
  }
  return out;
}

TEST(SplitReductionSketch, FewLongRowsGetASplitSketchBesideTheOneBlockPerRowSketch) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {4, 32768}, {1}));
  auto sketches = GenerateSketches(TuneContext(dag, Target::H200()));
  ASSERT_THAT(sketches.status(), IsOk());
  const std::vector<State> split = SplitSketches(*sketches);
  ASSERT_EQ(split.size(), 1u);
  EXPECT_LT(split.size(), sketches->size());
  const State& s = split[0];
  const int rf = s.StageId(dag.stage(dag.output_ids()[0]).name() + ".rf");
  ASSERT_GE(rf, 0) << s.ToString();
  // Both stages reduce across threads; the block-reduction split precedes the rfactor step.
  EXPECT_TRUE(HasCrossThreadReduction(s, rf)) << s.ToString();
  EXPECT_TRUE(HasCrossThreadReduction(s, rf + 1)) << s.ToString();
  int block_splits = 0;
  for (int i = 0; i < static_cast<int>(s.steps().size()); ++i) {
    block_splits += internal::IsBlockReductionSplit(s.steps(), i);
  }
  EXPECT_EQ(block_splits, 1);
}

TEST(SplitReductionSketch, AnnotatedSumsRunAsTwoKernelsAndMatchFloat64Loops) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {3, 20000}, {1}));
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  const std::vector<State> split = SplitSketches(*sketches);
  ASSERT_EQ(split.size(), 1u);
  const std::string out = dag.stage(dag.output_ids()[0]).name();
  std::mt19937_64 rng(7);
  std::set<int64_t> chunks;
  for (int n = 0; n < 8; ++n) {
    SCOPED_TRACE(n);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(split[0], dag, target, rng);
    ASSERT_THAT(c.status(), IsOk()) << split[0].ToString();
    for (int i = 0; i < static_cast<int>(c->state.steps().size()); ++i) {
      if (!internal::IsBlockReductionSplit(c->state.steps(), i)) continue;
      const auto& sp = std::get<schedule::SplitStep>(c->state.steps()[i]);
      ASSERT_TRUE(sp.lengths[0].has_value());
      // 20000 elements: chunks of 256 .. 8192 (at most half the extent), 20000 not divisible.
      EXPECT_GE(*sp.lengths[0], 256);
      EXPECT_LE(*sp.lengths[0], 10000);
      chunks.insert(*sp.lengths[0]);
    }
    const schedule::LoweredKernel& k = *c->lowered;
    ASSERT_EQ(k.launches.size(), 2u) << k.nest;
    // The partial kernel has more blocks than the 3 rows.
    EXPECT_GT(k.launches[0].grid[0], 3) << k.nest;
    ir::BufferMap inputs = ir::MakeRandomInputs(dag, 31 + n);
    absl::StatusOr<ir::BufferMap> got = schedule::testing::RunLowered(k.nest, inputs);
    ASSERT_THAT(got.status(), IsOk()) << k.nest;
    const std::vector<double> want = RowSums(inputs.at("X"));
    const ir::HostBuffer& y = got->at(out);
    ASSERT_EQ(y.data.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y.data[i], want[i], 1e-3) << i;
  }
  EXPECT_GE(chunks.size(), 2u) << "the chunk length is a sampled decision";
}

TEST(SplitReductionSketch, LayerNormMeanAndVarianceBothSplitAndMatchFloat64) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::LayerNormDAG({2, 16, 2048}, 2));
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  const State* both = nullptr;
  for (const State& s : *sketches) {
    if (RfactorStages(s) == 2) both = &s;
  }
  ASSERT_NE(both, nullptr);
  std::mt19937_64 rng(3);
  for (int n = 0; n < 4; ++n) {
    SCOPED_TRACE(n);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(*both, dag, target, rng);
    ASSERT_THAT(c.status(), IsOk()) << both->ToString();
    absl::StatusOr<double> err = schedule::testing::RelErrorToFloat64(dag, c->lowered->nest, 5 + n);
    ASSERT_THAT(err.status(), IsOk()) << c->lowered->nest;
    EXPECT_LE(*err, 1e-4);
  }
}

TEST(SplitReductionSketch, NoSplitForManyRowsShortRowsOrCpu) {
  auto many = GenerateSketches(TuneContext(
      testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {512, 32768}, {1})), Target::H200()));
  ASSERT_THAT(many.status(), IsOk());
  EXPECT_TRUE(SplitSketches(*many).empty());
  auto short_rows = GenerateSketches(TuneContext(
      testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {4, 8192}, {1})), Target::H200()));
  ASSERT_THAT(short_rows.status(), IsOk());
  EXPECT_TRUE(SplitSketches(*short_rows).empty());
  // AddRfactor (CPU) writes split + rfactor too, of both parts; none of them is a
  // block-reduction split (their lengths are ordinary tile sizes, not chunks).
  auto cpu = GenerateSketches(TuneContext(
      testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {4, 32768}, {1})), Target::HostCpu()));
  ASSERT_THAT(cpu.status(), IsOk());
  int rfactors = 0;
  for (const State& s : *cpu) {
    rfactors += RfactorStages(s);
    for (int i = 0; i < static_cast<int>(s.steps().size()); ++i) {
      EXPECT_FALSE(internal::IsBlockReductionSplit(s.steps(), i)) << s.ToString();
    }
  }
  EXPECT_GE(rfactors, 2);
}

TEST(SplitReductionSketch, VeryLongReductionsAreNeverSummedByOneThread) {
  const ir::ComputeDAG dag =
      testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {2, 1 << 17}, {1}));
  auto sketches = GenerateSketches(TuneContext(dag, Target::H200()));
  ASSERT_THAT(sketches.status(), IsOk());
  ASSERT_GE(sketches->size(), 2u);
  for (const State& s : *sketches) {
    for (int sid = 0; sid < s.num_stages(); ++sid) {
      if (s.stage(sid).is_placeholder()) continue;
      EXPECT_FALSE(SequentialReduction(s, sid)) << s.ToString();
    }
  }
  // Shorter ones keep that sketch (small problems may prefer it).
  auto shorter = GenerateSketches(TuneContext(
      testing::MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {2, 4096}, {1})), Target::H200()));
  ASSERT_THAT(shorter.status(), IsOk());
  bool sequential = false;
  for (const State& s : *shorter) sequential |= SequentialReduction(s, s.num_stages() - 1);
  EXPECT_TRUE(sequential);
}

// FuseShortReductionIntoConsumer: avg_pool2d's 2×2 window sum, too short for a cross-thread
// reduction, is also computed at its elementwise division, one point per thread: one kernel
// (instead of a second one reading the sums back), matching the float64 definition; the unfused
// sketch stays, and the CPU gets no such sketch.
TEST(SplitReductionSketch, ShortReductionIsFusedIntoItsElementwiseConsumer) {
  ir::Pool2dParams params;
  params.kernel = {2, 2};
  const ir::ComputeDAG dag =
      testing::MustBuild(ir::AvgPool2dDAG({2, 3, 10, 12}, ir::ScalarType::kFloat32, params));
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  std::vector<State> fused;
  for (const State& s : *sketches) {
    const int sum = s.StageId("pool_sum");
    if (sum >= 0 && s.stage(sum).location == schedule::ComputeLocation::kAttached) {
      fused.push_back(s);
    }
  }
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_LT(fused.size(), sketches->size());
  EXPECT_EQ(fused[0].stage(fused[0].stage(fused[0].StageId("pool_sum")).attach_stage).name(), "Y");
  std::mt19937_64 rng(11);
  for (int n = 0; n < 6; ++n) {
    SCOPED_TRACE(n);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(fused[0], dag, target, rng);
    ASSERT_THAT(c.status(), IsOk()) << fused[0].ToString();
    ASSERT_EQ(c->lowered->launches.size(), 1u) << c->lowered->nest;
    ir::BufferMap inputs = ir::MakeRandomInputs(dag, 40 + n);
    absl::StatusOr<ir::BufferMap> got = schedule::testing::RunLowered(c->lowered->nest, inputs);
    ASSERT_THAT(got.status(), IsOk()) << c->lowered->nest;
    const ir::HostBuffer& x = inputs.at("X");
    const ir::HostBuffer& y = got->at("Y");
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t ch = 0; ch < 3; ++ch) {
        for (int64_t i = 0; i < 5; ++i) {
          for (int64_t j = 0; j < 6; ++j) {
            double want = 0;
            for (int64_t di = 0; di < 2; ++di) {
              for (int64_t dj = 0; dj < 2; ++dj) want += x.at({b, ch, 2 * i + di, 2 * j + dj});
            }
            ASSERT_NEAR(y.at({b, ch, i, j}), want / 4, 1e-6) << b << ch << i << j;
          }
        }
      }
    }
  }
  auto cpu = GenerateSketches(TuneContext(dag, Target::HostCpu()));
  ASSERT_THAT(cpu.status(), IsOk());
  for (const State& s : *cpu) {
    const int sum = s.StageId("pool_sum");
    // CPU sketches leave compute locations to annotation (ChangeComputeLocation), not to rules.
    EXPECT_NE(s.stage(sum).location, schedule::ComputeLocation::kAttached) << s.ToString();
  }
}

TEST(SplitReductionSketch, ChunkCandidatesStayWithinHalfTheExtent) {
  AnnotationOptions o;
  EXPECT_THAT(internal::BlockChunkCandidates(1 << 22, o),
              ::testing::ElementsAreArray(o.gpu_block_reduction_chunks));
  EXPECT_THAT(internal::BlockChunkCandidates(3000, o), ::testing::ElementsAre(256, 512, 1024));
  EXPECT_THAT(internal::BlockChunkCandidates(300, o), ::testing::ElementsAre(256));
  schedule::SplitStep sp;
  sp.extent = 3000;
  sp.lengths = {512};
  EXPECT_THAT(internal::OtherBlockChunks(sp, o), ::testing::ElementsAre(256, 1024));
}

}  // namespace
}  // namespace tilesearch::search
