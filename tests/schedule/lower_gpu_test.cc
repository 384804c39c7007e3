// Lowering of GPU schedules: a hand-written Ansor-style matmul (shared-memory tiles filled
// cooperatively, a local accumulator, vthreads) and a softmax with cross-thread reductions run in
// the interpreter's thread model and match the naive program; barriers are what make them
// correct; launch configurations and the validity checks follow from the bindings.
#include <sstream>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/linear.h"
#include "ir/ops/norm.h"
#include "ir/ops/reduce.h"
#include "schedule/lower.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using testing::ExpectMatchesReference;
using ::testing::HasSubstr;
using testing::Sched;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

Target Gpu() { return Target::H200(); }

// Tile sizes of the matmul schedule below.
constexpr int64_t kVi = 2, kTi = 4, kIi = 2;  // i: vthread, threadIdx, inner
constexpr int64_t kVj = 2, kTj = 8, kIj = 2;  // j: vthread, threadIdx, inner
constexpr int64_t kKi = 8;                    // k: inner
constexpr int64_t kThreads = kTi * kTj;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Ansor's GPU multi-level tiling (testing::GpuMatmulSched) with the tiles above, the shared
// tiles fetched by `fetch_threads` threads.
State GpuMatmulSchedule(const ir::ComputeDAG& dag, int64_t fetch_threads = kThreads) {
  Sched s = testing::GpuMatmulSched(
      dag,
      {.i = {kVi, kTi, kIi}, .j = {kVj, kTj, kIj}, .k_inner = kKi, .fetch_threads = fetch_threads});
  EXPECT_THAT(s.status(), IsOk());
  return s.state();
}

// Removes every Barrier (to show that the lowering's barriers are what makes the result right).
class StripBarriers : public ir::StmtMutator {
 protected:
  ir::Stmt MutateBarrier(const ir::BarrierNode*, const ir::Stmt&) override { return ir::Stmt(); }
};

int CountBarriers(const ir::Stmt& s) {
  class V : public ir::StmtVisitor {
   public:
    int n = 0;

   protected:
    void VisitBarrier(const ir::BarrierNode*, const ir::Stmt&) override { ++n; }
  };
  V v;
  v.Visit(s);
  return v.n;
}

void CheckMatmul(int64_t m, int64_t n, int64_t k) {
  ir::ComputeDAG dag = *ir::MatmulDAG({m, k}, {k, n});
  State st = GpuMatmulSchedule(dag);
  ExpectMatchesReference(dag, st, Gpu(), /*exact=*/true);

  absl::StatusOr<LoweredKernel> lowered = Lower(dag, st, Gpu());
  ASSERT_THAT(lowered, IsOk());
  ASSERT_EQ(lowered->launches.size(), 1u) << lowered->nest;
  const LaunchConfig& l = lowered->launches[0];
  const int64_t tile_i = kVi * kTi * kIi, tile_j = kVj * kTj * kIj;
  EXPECT_EQ(l.grid[0], CeilDiv(m, tile_i) * CeilDiv(n, tile_j)) << l.ToString();
  EXPECT_EQ(l.grid[1], 1);
  EXPECT_EQ(l.block[0], kThreads) << l.ToString();
  EXPECT_EQ(l.block[1], 1);
  // A tile [tile_i, kKi] and a B tile [kKi, tile_j] of float32.
  EXPECT_EQ(l.shared_memory_bytes, (tile_i * kKi + kKi * tile_j) * 4) << lowered->nest;
}

TEST(LowerGpu, SharedMemoryMatmulMatchesNaive64) { CheckMatmul(64, 64, 64); }

TEST(LowerGpu, SharedMemoryMatmulMatchesNaiveNonDivisible) { CheckMatmul(50, 70, 30); }

TEST(LowerGpu, MatmulWithoutBarriersGivesAWrongAnswer) {
  ir::ComputeDAG dag = *ir::MatmulDAG({64, 64}, {64, 64});
  absl::StatusOr<LoweredKernel> k = Lower(dag, GpuMatmulSchedule(dag), Gpu());
  ASSERT_THAT(k, IsOk());
  EXPECT_GE(CountBarriers(k->nest.body), 2);
  StripBarriers strip;
  ir::LoopNest racy = k->nest;
  racy.body = strip.Mutate(k->nest.body);
  ASSERT_EQ(CountBarriers(racy.body), 0);
  ir::BufferMap inputs = ir::MakeRandomInputs(dag, 11);
  absl::StatusOr<ir::BufferMap> got = testing::RunLowered(racy, inputs);
  absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
  ASSERT_THAT(ref, IsOk());
  // Either the interpreter reports reading a never-written element or the values differ.
  if (got.ok()) {
    EXPECT_GT(testing::MaxRelError(dag, *got, *ref), 1e-3);
  }
}

// softmax over rows of 100: every stage's rows on blocks, the columns on 32 threads.
State SoftmaxSchedule(const ir::ComputeDAG& dag, bool attach) {
  Sched s(dag);
  s.Split("softmax", "i1", {32});
  s.Annotate("softmax", "i0", IteratorAnnotation::kBlockIdxX)
      .Annotate("softmax", "i1.1", IteratorAnnotation::kThreadIdxX);
  for (const std::string stat : {"softmax_max", "softmax_expsum"}) {
    if (attach) {
      s.ComputeAt(stat, "softmax", "i0");
    } else {
      s.Annotate(stat, "i0", IteratorAnnotation::kBlockIdxX);
    }
    s.Split(stat, "r0", {32}).Annotate(stat, "r0.1", IteratorAnnotation::kThreadIdxX);
  }
  EXPECT_THAT(s.status(), IsOk());
  return s.state();
}

TEST(LowerGpu, SoftmaxCrossThreadReductionsAsThreeKernels) {
  ir::ComputeDAG dag = *ir::SoftmaxDAG({7, 100});
  State st = SoftmaxSchedule(dag, /*attach=*/false);
  ExpectMatchesReference(dag, st, Gpu(), /*exact=*/false);
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Gpu());
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 3u) << k->nest;
  for (const LaunchConfig& l : k->launches) {
    EXPECT_EQ(l.grid[0], 7) << l.ToString();
    EXPECT_EQ(l.block[0], 32) << l.ToString();
  }
  // The two reductions exchange 32 float32 partials through shared memory; normalize none.
  EXPECT_EQ(k->launches[0].shared_memory_bytes, 32 * 4);
  EXPECT_EQ(k->launches[1].shared_memory_bytes, 32 * 4);
  EXPECT_EQ(k->launches[2].shared_memory_bytes, 0);
}

TEST(LowerGpu, SoftmaxCrossThreadReductionsComputedAtTheRow) {
  ir::ComputeDAG dag = *ir::SoftmaxDAG({7, 100});
  State st = SoftmaxSchedule(dag, /*attach=*/true);
  ExpectMatchesReference(dag, st, Gpu(), /*exact=*/false);
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Gpu());
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 1u) << k->nest;
  EXPECT_EQ(k->launches[0].grid[0], 7);
  EXPECT_EQ(k->launches[0].block[0], 32);
  // Partials of both reductions plus the two row statistics, all float32.
  EXPECT_EQ(k->launches[0].shared_memory_bytes, (32 + 32 + 1 + 1) * 4) << k->nest;
}

TEST(LowerGpu, CrossThreadReductionIntoPerThreadMemory) {
  // Four rows per block on threadIdx.y; each row's statistics reduced over threadIdx.x into a
  // local buffer that every thread of the row receives.
  ir::ComputeDAG dag = *ir::SoftmaxDAG({7, 100});
  Sched s(dag);
  s.Split("softmax", "i0", {4}).Split("softmax", "i1", {32});
  s.Reorder("softmax", {"i0.0", "i0.1", "i1.0", "i1.1"});
  s.Annotate("softmax", "i0.0", IteratorAnnotation::kBlockIdxX)
      .Annotate("softmax", "i0.1", IteratorAnnotation::kThreadIdxY)
      .Annotate("softmax", "i1.1", IteratorAnnotation::kThreadIdxX);
  for (const std::string stat : {"softmax_max", "softmax_expsum"}) {
    s.ComputeAt(stat, "softmax", "i0.1");
    s.Split(stat, "r0", {32}).Annotate(stat, "r0.1", IteratorAnnotation::kThreadIdxX);
  }
  ASSERT_THAT(s.status(), IsOk());
  ExpectMatchesReference(dag, s.state(), Gpu(), /*exact=*/false);
  absl::StatusOr<LoweredKernel> k = Lower(dag, s.state(), Gpu());
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 1u);
  EXPECT_EQ(k->launches[0].grid[0], 2);
  EXPECT_EQ(k->launches[0].block[0], 32);
  EXPECT_EQ(k->launches[0].block[1], 4);
  // Partials: 4 rows × 32 threads per reduction.
  EXPECT_EQ(k->launches[0].shared_memory_bytes, 2 * 4 * 32 * 4) << k->nest;
}

TEST(LowerGpu, UnboundRootStageIsOneThreadKernel) {
  ir::ComputeDAG dag = *ir::MatmulDAG({5, 3}, {3, 4});
  absl::StatusOr<LoweredKernel> k = Lower(dag, State::Initial(dag), Gpu());
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 1u);
  EXPECT_EQ(k->launches[0].grid, (std::array<int64_t, 3>{1, 1, 1}));
  EXPECT_EQ(k->launches[0].block, (std::array<int64_t, 3>{1, 1, 1}));
  ExpectMatchesReference(dag, State::Initial(dag), Gpu(), /*exact=*/true);
}

// Where the guard of an untiled reduction sits: around the reduce loop when it does not change
// along it (the thread split leaves a partial last block), so that the combine is unconditional
// (LLVM then keeps the accumulator in a register); at the combine when it uses the reduce
// variable (a padded window).
struct GuardPlace {
  int reduce_loops_under_guard = 0;  // reduce loops whose nearest enclosing statement is an if
  int guards_inside_reduce_loops = 0;
  std::string nest;  // the lowered nest, for failure messages
};
GuardPlace FindGuards(const ir::Stmt& s, const std::string& reduce_var_part) {
  class V : public ir::StmtVisitor {
   public:
    explicit V(std::string part) : part_(std::move(part)) {}
    GuardPlace g;

   protected:
    void VisitIfThenElse(const ir::IfThenElseNode* op, const ir::Stmt& s) override {
      if (depth_ > 0) ++g.guards_inside_reduce_loops;
      if (const auto* f = op->then_case.as<ir::ForNode>()) {
        if (f->var_name().find(part_) != std::string::npos) ++g.reduce_loops_under_guard;
      }
      ir::StmtVisitor::VisitIfThenElse(op, s);
    }
    void VisitFor(const ir::ForNode* op, const ir::Stmt& s) override {
      const bool reduce = op->var_name().find(part_) != std::string::npos;
      depth_ += reduce;
      ir::StmtVisitor::VisitFor(op, s);
      depth_ -= reduce;
    }

   private:
    std::string part_;
    int depth_ = 0;
  };
  V v(reduce_var_part);
  v.Visit(s);
  return v.g;
}

// Sum over the middle axis of [3, 37, 5] with keepdim: its 15 outputs fused, over 2 blocks of 8
// threads (the last thread of the second block out of range); its 37-long reduce axis split by
// `reduce_split` when > 0. Checked exactly against the naive program; returns where the guards
// ended up.
GuardPlace UntiledSumGuards(int64_t reduce_split) {
  ir::ComputeDAG dag = *ir::ReduceDAG(ir::ReduceOp::kSum, {3, 37, 5}, {1}, /*keepdim=*/true);
  const std::string name = dag.stage(dag.output_ids().front()).name();
  Sched s(dag);
  std::vector<std::string> space;
  std::string reduce;
  for (const Iterator& it : s.state().stage(s.StageId(name)).iters) {
    (it.kind == IteratorKind::kSpace ? space.push_back(it.name) : void(reduce = it.name));
  }
  EXPECT_EQ(space.size(), 3u);
  if (reduce_split > 0) s.Split(name, reduce, {reduce_split});
  s.Fuse(name, space);
  const std::string fused = s.state().stage(s.StageId(name)).iters[0].name;
  s.Split(name, fused, {8});
  s.Annotate(name, fused + ".0", IteratorAnnotation::kBlockIdxX);
  s.Annotate(name, fused + ".1", IteratorAnnotation::kThreadIdxX);
  EXPECT_THAT(s.status(), IsOk());
  ExpectMatchesReference(dag, s.state(), Gpu(), /*exact=*/true);
  absl::StatusOr<LoweredKernel> k = Lower(dag, s.state(), Gpu());
  EXPECT_THAT(k, IsOk());
  if (!k.ok()) return {};
  GuardPlace g = FindGuards(k->nest.body, ".r");
  std::ostringstream text;
  text << k->nest;
  g.nest = text.str();
  return g;
}

TEST(LowerGpu, UntiledReductionTestsItsSpaceGuardOnceAroundTheReduceLoop) {
  GuardPlace g = UntiledSumGuards(/*reduce_split=*/0);
  EXPECT_EQ(g.reduce_loops_under_guard, 1) << g.nest;
  EXPECT_EQ(g.guards_inside_reduce_loops, 0) << g.nest;
}

TEST(LowerGpu, GuardOfASplitReduceAxisStaysAtTheCombine) {
  // The reduce guard (r.0 * 8 + r.1 < 37) stays at the combine; the space guard still goes
  // around the reduce loops.
  GuardPlace g = UntiledSumGuards(/*reduce_split=*/8);
  EXPECT_EQ(g.reduce_loops_under_guard, 1) << g.nest;
  EXPECT_EQ(g.guards_inside_reduce_loops, 1) << g.nest;
}

TEST(LowerGpuInvalid, TooManyThreadsPerBlock) {
  ir::ComputeDAG dag = *ir::UnaryDAG(ir::UnaryOp::kRelu, {4, 2048});
  const std::string out = dag.stage(dag.output_ids()[0]).name();
  Sched s(dag);
  s.Annotate(out, "i0", IteratorAnnotation::kBlockIdxX)
      .Annotate(out, "i1", IteratorAnnotation::kThreadIdxX);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_THAT(
      Lower(dag, s.state(), Gpu()),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("invalid_schedule: 2048 threads per block exceed the limit 1024")));
}

TEST(LowerGpuInvalid, ThreadsWithoutBlocks) {
  ir::ComputeDAG dag = *ir::UnaryDAG(ir::UnaryOp::kRelu, {4, 64});
  const std::string out = dag.stage(dag.output_ids()[0]).name();
  Sched s(dag);
  s.Annotate(out, "i1", IteratorAnnotation::kThreadIdxX);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_THAT(Lower(dag, s.state(), Gpu()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("invalid_schedule: a kernel binds threadIdx but no blockIdx")));
}

// A [16, K] float32 tile of A per block, cached in shared memory at the block loop.
absl::StatusOr<LoweredKernel> LowerWithSharedATile(int64_t k) {
  ir::ComputeDAG dag = *ir::MatmulDAG({64, k}, {k, 64});
  Sched s(dag);
  s.Split("C", "i", {16}).Split("C", "j", {16}).Reorder("C", {"i.0", "j.0", "i.1", "j.1", "k"});
  s.Fuse("C", {"i.0", "j.0"}).Fuse("C", {"i.1", "j.1"});
  s.Annotate("C", "i.0@j.0", IteratorAnnotation::kBlockIdxX)
      .Annotate("C", "i.1@j.1", IteratorAnnotation::kThreadIdxX);
  s.CacheRead("A", ir::MemoryScope::kShared, {"C"}).ComputeAt("A.shared", "C", "i.0@j.0");
  if (!s.status().ok()) return s.status();
  return Lower(dag, s.state(), Gpu());
}

TEST(LowerGpuInvalid, TooMuchSharedMemory) {
  // 16 x 4096 x 4 B = 256 KiB > the H200's opt-in maximum of 227 KiB.
  EXPECT_THAT(LowerWithSharedATile(4096),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("invalid_schedule: 262144 bytes of shared memory per block "
                                 "exceed the limit 232448")));
}

TEST(LowerGpu, SharedMemoryAboveTheStaticLimitIsValid) {
  // 16 x 1024 x 4 B = 64 KiB: above the static 48 KiB, within the opt-in maximum (the runtime
  // launches it with dynamic shared memory).
  absl::StatusOr<LoweredKernel> k = LowerWithSharedATile(1024);
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 1u);
  EXPECT_EQ(k->launches[0].shared_memory_bytes, 16 * 1024 * 4);
}

TEST(LowerGpuInvalid, VthreadTooLarge) {
  ir::ComputeDAG dag = *ir::MatmulDAG({64, 8}, {8, 64});
  Sched s(dag);
  s.Split("C", "i", {16}).Split("C", "j", {16});
  s.Reorder("C", {"i.0", "j.0", "i.1", "j.1", "k"});
  s.Annotate("C", "i.0", IteratorAnnotation::kBlockIdxX)
      .Annotate("C", "j.0", IteratorAnnotation::kVThread)
      .Annotate("C", "j.1", IteratorAnnotation::kThreadIdxX);
  ASSERT_THAT(s.status(), IsOk());
  // j.0 has extent 4: fine; bind a 16-wide loop to vthread instead.
  Sched t(dag);
  t.Split("C", "i", {16}).Reorder("C", {"i.0", "i.1", "j", "k"});
  t.Annotate("C", "i.0", IteratorAnnotation::kBlockIdxX)
      .Annotate("C", "i.1", IteratorAnnotation::kVThread)
      .Annotate("C", "j", IteratorAnnotation::kThreadIdxX);
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_THAT(Lower(dag, s.state(), Gpu()), IsOk());
  EXPECT_THAT(
      Lower(dag, t.state(), Gpu()),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("invalid_schedule: vthread 'i.1' of stage 'C' has extent 16 > 8")));
}

TEST(LowerGpuInvalid, VectorTooWide) {
  ir::ComputeDAG dag = *ir::UnaryDAG(ir::UnaryOp::kRelu, {4, 64});
  const std::string out = dag.stage(dag.output_ids()[0]).name();
  auto schedule = [&](int64_t width) {
    Sched s(dag);
    s.Split(out, "i1", {width});
    s.Annotate(out, "i0", IteratorAnnotation::kBlockIdxX)
        .Annotate(out, "i1.0", IteratorAnnotation::kThreadIdxX)
        .Annotate(out, "i1.1", IteratorAnnotation::kVectorize);
    EXPECT_THAT(s.status(), IsOk());
    return s.state();
  };
  EXPECT_THAT(Lower(dag, schedule(4), Gpu()), IsOk());  // 16 bytes
  EXPECT_THAT(Lower(dag, schedule(8), Gpu()), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                       HasSubstr("32 B wide, more than 16 B")));
}

TEST(LowerGpu, LaunchConfigText) {
  LaunchConfig l;
  l.grid = {64, 1, 1};
  l.block = {256, 1, 1};
  l.shared_memory_bytes = 8192;
  EXPECT_EQ(l.ToString(), "grid (64, 1, 1) block (256, 1, 1) shared 8192 B");
}

TEST(LowerGpuInvalid, BarrierInsideANarrowerThreadLoop) {
  // The fill uses 64 threads, the compute loop only 32: the barriers inside the compute loop
  // would be skipped by threads 32..63.
  ir::ComputeDAG dag = *ir::MatmulDAG({64, 64}, {64, 64});
  EXPECT_THAT(Lower(dag, GpuMatmulSchedule(dag, 2 * kThreads), Gpu()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("threads would diverge")));
}

TEST(LowerGpuInvalid, LocalStageBoundToThreads) {
  ir::ComputeDAG dag = *ir::MatmulDAG({64, 64}, {64, 64});
  Sched s(dag);
  s.CacheWrite("C", ir::MemoryScope::kLocal);
  s.Split("C", "i", {8}).Split("C", "j", {8}).Reorder("C", {"i.0", "j.0", "i.1", "j.1"});
  s.Annotate("C", "i.0", IteratorAnnotation::kBlockIdxX)
      .Annotate("C", "j.0", IteratorAnnotation::kThreadIdxX);
  s.ComputeAt("C.local", "C", "j.0").Annotate("C.local", "i", IteratorAnnotation::kThreadIdxY);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_THAT(Lower(dag, s.state(), Gpu()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("lives in per-thread (local) memory")));
}

TEST(LowerGpuInvalid, BlockBindingInsideAnotherStage) {
  ir::ComputeDAG dag = *ir::SoftmaxDAG({7, 100});
  Sched s(dag);
  s.Annotate("softmax", "i0", IteratorAnnotation::kBlockIdxX)
      .Annotate("softmax", "i1", IteratorAnnotation::kThreadIdxX);
  s.ComputeAt("softmax_expsum", "softmax", "i0");
  s.Annotate("softmax_expsum", "i0", IteratorAnnotation::kBlockIdxY);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_THAT(Lower(dag, s.state(), Gpu()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is computed inside another stage but binds")));
}

TEST(LowerGpuInvalid, CrossThreadReductionInsideSameThreadDimension) {
  ir::ComputeDAG dag = *ir::SoftmaxDAG({7, 100});
  Sched s(dag);
  s.Split("softmax", "i1", {32});
  s.Annotate("softmax", "i0", IteratorAnnotation::kBlockIdxX)
      .Annotate("softmax", "i1.1", IteratorAnnotation::kThreadIdxX);
  s.ComputeAt("softmax_max", "softmax", "i1.1");
  s.Split("softmax_max", "r0", {4})
      .Annotate("softmax_max", "r0.1", IteratorAnnotation::kThreadIdxX);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_THAT(Lower(dag, s.state(), Gpu()), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                     HasSubstr("inside another threadIdx.x loop")));
}

}  // namespace
}  // namespace tilesearch::schedule
