// The register-staged prefetch of shared tiles (schedule/software_pipeline.h): Lower applies it to
// GPU matmuls whose reduction loop fetches shared tiles, the pipelined nest still matches the
// naive program (divisible and guarded non-divisible tiles), and loops it must not touch (one
// iteration, fetches that do not depend on the loop) are left alone.
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "schedule/lower.h"
#include "schedule/software_pipeline.h"
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
       ir::StoreNode::Make("O", {kv}, ir::LoadNode::Make(ir::ScalarType::kFloat32, "S",
                                                         {ir::IntConst(0)})),
       ir::BarrierNode::Make()});
  ir::BufferDecl shared{"S", ir::ScalarType::kFloat32, {32}, ir::MemoryScope::kShared};
  ir::Stmt kernel = ir::AllocateNode::Make(
      shared, ir::ForNode::Make(kv, ir::IntConst(0), ir::IntConst(4), ir::ForKind::kSerial, body));
  EXPECT_TRUE(PipelineSharedFetches(kernel).same_as(kernel));
}

}  // namespace
}  // namespace tilesearch::schedule
