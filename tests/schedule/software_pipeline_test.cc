// The register-staged prefetch of shared tiles (schedule/software_pipeline.h): Lower applies it to
// GPU matmuls whose reduction loop fetches shared tiles, the pipelined nest still matches the
// naive program (divisible and guarded non-divisible tiles), and loops it must not touch (one
// iteration, fetches that do not depend on the loop) are left alone.
#include "schedule/software_pipeline.h"

#include <map>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using testing::ExpectMatchesReference;
using testing::LocalAllocations;
using testing::Sched;
using tilesearch::testing::IsOk;

// Ansor's GPU matmul structure: C.local per thread (2x2), 4x8 threads, k split by `k_inner`, A
// and B cached in shared memory at k.0 and fetched by all 32 threads.
State Schedule(const ir::ComputeDAG& dag, int64_t k_inner) {
  Sched s = testing::GpuMatmulSched(dag, {.i = {4, 2}, .j = {8, 2}, .k_inner = k_inner});
  EXPECT_THAT(s.status(), IsOk());
  return s.state();
}

TEST(SoftwarePipeline, MatmulFetchesAreStagedAndStillCorrect) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});
  State st = Schedule(dag, 4);  // 6 iterations of k.0
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_THAT(LocalAllocations(k->nest.body),
              ::testing::IsSupersetOf({"A.shared.stage", "B.shared.stage"}))
      << k->nest;
  ExpectMatchesReference(dag, st, Target::H200(), /*exact=*/true);
}

TEST(SoftwarePipeline, GuardedNonDivisibleTilesStillCorrect) {
  // 30 = 7·4 + 2: the last k tile and the fetches are guarded.
  ir::ComputeDAG dag = *ir::MatmulDAG({21, 30}, {30, 37});
  State st = Schedule(dag, 4);
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_THAT(LocalAllocations(k->nest.body), ::testing::Contains("A.shared.stage")) << k->nest;
  for (uint64_t seed : {1, 2, 3}) ExpectMatchesReference(dag, st, Target::H200(), true, seed);
}

TEST(SoftwarePipeline, SingleIterationLoopIsLeftAlone) {
  ir::ComputeDAG dag = *ir::MatmulDAG({16, 8}, {8, 16});
  State st = Schedule(dag, 8);  // k.0 has one iteration: nothing to overlap
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_THAT(LocalAllocations(k->nest.body), ::testing::Not(::testing::Contains("A.shared.stage")))
      << k->nest;
  ExpectMatchesReference(dag, st, Target::H200(), /*exact=*/true);
}

TEST(SoftwarePipeline, LoopWithoutFetchesIsUnchanged) {
  // for k { shared[t] = 1; barrier; out[k] = shared[0]; barrier }: the fetch reads no buffer.
  ir::Expr t = ir::MakeVar("t"), kv = ir::MakeVar("k");
  ir::Stmt body = ir::SeqNode::Make(
      {ir::ForNode::Make(t, ir::IntConst(0), ir::IntConst(32), ir::ForKind::kThreadIdxX,
                         ir::StoreNode::Make("S", {t}, ir::FloatConst(1.0))),
       ir::BarrierNode::Make(),
       ir::StoreNode::Make("O", {kv},
                           ir::LoadNode::Make(ir::ScalarType::kFloat32, "S", {ir::IntConst(0)})),
       ir::BarrierNode::Make()});
  ir::BufferDecl shared{"S", ir::ScalarType::kFloat32, {32}, ir::MemoryScope::kShared};
  ir::Stmt kernel = ir::AllocateNode::Make(
      shared, ir::ForNode::Make(kv, ir::IntConst(0), ir::IntConst(4), ir::ForKind::kSerial, body));
  EXPECT_TRUE(PipelineSharedFetches(kernel).same_as(kernel));
}

// Shared-buffer shapes and the number of barriers inside serial loops of a nest.
struct DoubleBufferFacts {
  std::map<std::string, std::vector<int64_t>> shared_shapes;
  int barriers_in_loops = 0;
};

DoubleBufferFacts InspectNest(const ir::Stmt& s) {
  class V : public ir::StmtVisitor {
   public:
    DoubleBufferFacts facts;

   protected:
    void VisitAllocate(const ir::AllocateNode* op, const ir::Stmt& s) override {
      if (op->buffer.scope == ir::MemoryScope::kShared)
        facts.shared_shapes[op->buffer.name] = op->buffer.shape;
      ir::StmtVisitor::VisitAllocate(op, s);
    }
    void VisitFor(const ir::ForNode* op, const ir::Stmt& s) override {
      serial_ += op->for_kind == ir::ForKind::kSerial;
      ir::StmtVisitor::VisitFor(op, s);
      serial_ -= op->for_kind == ir::ForKind::kSerial;
    }
    void VisitBarrier(const ir::BarrierNode*, const ir::Stmt&) override {
      if (serial_ > 0) ++facts.barriers_in_loops;
    }

   private:
    int serial_ = 0;
  };
  V v;
  v.Visit(s);
  return v.facts;
}

State WithPipelinePragma(const State& st, int value) {
  PragmaStep p;
  p.stage_id = st.StageId("C");
  p.iter_id = 0;
  p.software_pipeline = value;
  absl::StatusOr<State> out = ApplyStep(st, p);
  EXPECT_THAT(out, IsOk());
  return out.ok() ? *out : st;
}

TEST(SoftwarePipeline, DoubleBufferedSharedTilesKeepOneBarrierPerIteration) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});
  const State single = Schedule(dag, 4);
  const State doubled = WithPipelinePragma(single, 2);
  absl::StatusOr<LoweredKernel> k1 = Lower(dag, single, Target::H200());
  absl::StatusOr<LoweredKernel> k2 = Lower(dag, doubled, Target::H200());
  ASSERT_THAT(k1, IsOk());
  ASSERT_THAT(k2, IsOk());
  DoubleBufferFacts f1 = InspectNest(k1->nest.body), f2 = InspectNest(k2->nest.body);
  // Block tile 8×16 (4·2 × 8·2), k tile 4: A.shared 8×4, B.shared 4×16; two of each doubled.
  EXPECT_EQ(f1.shared_shapes["A.shared"], (std::vector<int64_t>{8, 4})) << k1->nest;
  EXPECT_EQ(f2.shared_shapes["A.shared"], (std::vector<int64_t>{2, 8, 4})) << k2->nest;
  EXPECT_EQ(f2.shared_shapes["B.shared"], (std::vector<int64_t>{2, 4, 16})) << k2->nest;
  EXPECT_EQ(f1.barriers_in_loops, 2) << k1->nest;
  EXPECT_EQ(f2.barriers_in_loops, 1) << k2->nest;
  EXPECT_EQ(k2->launches[0].shared_memory_bytes, 2 * k1->launches[0].shared_memory_bytes);
  ExpectMatchesReference(dag, doubled, Target::H200(), /*exact=*/true);
}

TEST(SoftwarePipeline, DoubleBufferedGuardedNonDivisibleTilesStillCorrect) {
  ir::ComputeDAG dag = *ir::MatmulDAG({21, 30}, {30, 37});  // 30 = 7·4 + 2
  const State doubled = WithPipelinePragma(Schedule(dag, 4), 2);
  for (uint64_t seed : {1, 2, 3}) ExpectMatchesReference(dag, doubled, Target::H200(), true, seed);
}

TEST(SoftwarePipeline, DoubleBufferingNeedsEveryAccessInsideTheLoop) {
  // S is filled in the loop but also read after it: doubling it would change that read, so the
  // kernel is left unchanged.
  ir::Expr t = ir::MakeVar("t"), kv = ir::MakeVar("k");
  ir::Stmt body = ir::SeqNode::Make(
      {ir::ForNode::Make(
           t, ir::IntConst(0), ir::IntConst(32), ir::ForKind::kThreadIdxX,
           ir::StoreNode::Make("S", {t},
                               ir::LoadNode::Make(ir::ScalarType::kFloat32, "G", {kv * 32 + t}))),
       ir::BarrierNode::Make(),
       ir::StoreNode::Make("O", {kv},
                           ir::LoadNode::Make(ir::ScalarType::kFloat32, "S", {ir::IntConst(0)})),
       ir::BarrierNode::Make()});
  ir::BufferDecl shared{"S", ir::ScalarType::kFloat32, {32}, ir::MemoryScope::kShared};
  ir::Stmt kernel = ir::AllocateNode::Make(
      shared, ir::SeqNode::Make({ir::ForNode::Make(kv, ir::IntConst(0), ir::IntConst(4),
                                                   ir::ForKind::kSerial, body),
                                 ir::StoreNode::Make("O", {ir::IntConst(4)},
                                                     ir::LoadNode::Make(ir::ScalarType::kFloat32,
                                                                        "S", {ir::IntConst(1)}))}));
  EXPECT_TRUE(PipelineSharedFetches(kernel, /*double_buffer=*/true).same_as(kernel));
  EXPECT_FALSE(PipelineSharedFetches(kernel, /*double_buffer=*/false).same_as(kernel));
}

}  // namespace
}  // namespace tilesearch::schedule
