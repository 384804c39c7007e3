// The multi-stage cp.async pipeline of shared tiles (pragma software_pipeline$3 / $4,
// schedule/software_pipeline.h): the lowered matmul has S buffers per shared tile, async copies
// instead of staged stores, S-1 commits before the reduction loop, one wait, one commit and one
// barrier per iteration; the interpreter (copies land only at the wait that completes their
// group, so a wrong wait count reads stale or poisoned tiles) gives exactly the naive program's
// result; loops whose fetches cannot be async copies (guards of non-divisible tiles,
// fetches not vectorized) get the double-buffered pipeline instead.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "nlohmann/json.hpp"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "schedule/software_pipeline.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using testing::ExpectMatchesReference;
using testing::Sched;
using tilesearch::testing::IsOk;

// Ansor's GPU matmul (tests/schedule/lower_test_util.h GpuMatmulSched) with the cooperative
// fetch split as [outer, threadIdx.x, vectorize(vector)]: C.local per thread (ti x tj), tx x ty
// threads fused on threadIdx.x, k split by `k_inner`.
State VectorFetchMatmul(const ir::ComputeDAG& dag, std::vector<int64_t> i, std::vector<int64_t> j,
                        int64_t k_inner, int64_t vector) {
  Sched s(dag);
  s.CacheWrite("C", ir::MemoryScope::kLocal);
  s.Split("C", "i", i).Split("C", "j", j);
  s.Reorder("C", {"i.0", "j.0", "i.1", "j.1", "i.2", "j.2"});
  s.Fuse("C", {"i.0", "j.0"}).Fuse("C", {"i.1", "j.1"});
  s.Annotate("C", "i.0@j.0", IteratorAnnotation::kBlockIdxX);
  s.Annotate("C", "i.1@j.1", IteratorAnnotation::kThreadIdxX);
  s.ComputeAt("C.local", "C", "i.1@j.1");
  s.Split("C.local", "k", {k_inner}).Reorder("C.local", {"k.0", "k.1", "i", "j"});
  s.CacheRead("A", ir::MemoryScope::kShared, {"C.local"});
  s.CacheRead("B", ir::MemoryScope::kShared, {"C.local"});
  s.ComputeAt("A.shared", "C.local", "k.0").ComputeAt("B.shared", "C.local", "k.0");
  EXPECT_THAT(s.status(), IsOk());
  const int64_t threads = i[0] * j[0];
  for (const std::string name : {"A.shared", "B.shared"}) {
    const Stage& st = s.state().stage(s.state().StageId(name));
    std::vector<std::string> iters;
    for (const Iterator& it : st.iters) iters.push_back(it.name);
    s.Fuse(name, iters);
    const std::string fused = s.state().stage(s.state().StageId(name)).iters[0].name;
    s.Split(name, fused, {threads, vector});
    s.Annotate(name, fused + ".1", IteratorAnnotation::kThreadIdxX);
    s.Annotate(name, fused + ".2", IteratorAnnotation::kVectorize);
  }
  EXPECT_THAT(s.status(), IsOk());
  return s.state();
}

State WithPipelinePragma(const State& st, const std::string& stage, int value) {
  PragmaStep p;
  p.stage_id = st.StageId(stage);
  p.iter_id = 0;
  p.software_pipeline = value;
  absl::StatusOr<State> out = ApplyStep(st, p);
  EXPECT_THAT(out, IsOk());
  return out.ok() ? *out : st;
}

// What the pipeline leaves in a nest: shared shapes, and per loop depth (inside / outside the
// serial reduction loops) barriers, commits, waits and async copies.
struct AsyncFacts {
  std::map<std::string, std::vector<int64_t>> shared_shapes;
  int barriers_in_loops = 0;
  int commits_in_loops = 0, commits_outside = 0;
  std::vector<int64_t> waits_in_loops;
  int waits_outside = 0;
  int async_copies = 0, plain_shared_stores = 0;
  int local_stage_buffers = 0;
};

AsyncFacts Inspect(const ir::Stmt& s) {
  class V : public ir::StmtVisitor {
   public:
    AsyncFacts f;

   protected:
    void VisitAllocate(const ir::AllocateNode* op, const ir::Stmt& s) override {
      if (op->buffer.scope == ir::MemoryScope::kShared) {
        f.shared_shapes[op->buffer.name] = op->buffer.shape;
        shared_.insert(op->buffer.name);
      }
      if (op->buffer.name.ends_with(".stage")) ++f.local_stage_buffers;
      ir::StmtVisitor::VisitAllocate(op, s);
    }
    void VisitFor(const ir::ForNode* op, const ir::Stmt& s) override {
      serial_ += op->for_kind == ir::ForKind::kSerial;
      ir::StmtVisitor::VisitFor(op, s);
      serial_ -= op->for_kind == ir::ForKind::kSerial;
    }
    void VisitBarrier(const ir::BarrierNode*, const ir::Stmt&) override {
      if (serial_ > 0) ++f.barriers_in_loops;
    }
    void VisitAsyncGroup(const ir::AsyncGroupNode* op, const ir::Stmt&) override {
      if (op->is_commit()) {
        ++(serial_ > 0 ? f.commits_in_loops : f.commits_outside);
      } else if (serial_ > 0) {
        f.waits_in_loops.push_back(op->wait);
      } else {
        ++f.waits_outside;
      }
    }
    void VisitStore(const ir::StoreNode* op, const ir::Stmt& s) override {
      if (op->async_copy) ++f.async_copies;
      if (!op->async_copy && shared_.count(op->buffer)) ++f.plain_shared_stores;
      ir::StmtVisitor::VisitStore(op, s);
    }

   private:
    int serial_ = 0;
    std::set<std::string> shared_;
  };
  V v;
  v.Visit(s);
  return v.f;
}

TEST(AsyncPipeline, ThreeStageMatmulHasTheRingStructureAndMatchesTheNaiveProgram) {
  // 128x128x128, block tile 32x32 (8x8 threads of 4x4), k tile 8: 16 iterations of k.0.
  ir::ComputeDAG dag = *ir::MatmulDAG({128, 128}, {128, 128});
  const State st = WithPipelinePragma(VectorFetchMatmul(dag, {8, 4}, {8, 4}, 8, 4), "C", 3);
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  AsyncFacts f = Inspect(k->nest.body);
  EXPECT_EQ(f.shared_shapes["A.shared"], (std::vector<int64_t>{3, 32, 8})) << k->nest;
  EXPECT_EQ(f.shared_shapes["B.shared"], (std::vector<int64_t>{3, 8, 32})) << k->nest;
  EXPECT_EQ(f.barriers_in_loops, 1) << k->nest;
  EXPECT_EQ(f.commits_outside, 2) << k->nest;  // the prologue: tiles 0 and 1
  EXPECT_EQ(f.commits_in_loops, 1) << k->nest;
  EXPECT_EQ(f.waits_in_loops, (std::vector<int64_t>{1})) << k->nest;
  EXPECT_EQ(f.waits_outside, 0) << k->nest;
  // A and B, each in the prologue (twice) and in the loop; no staged register copies.
  EXPECT_EQ(f.async_copies, 2 * 3) << k->nest;
  EXPECT_EQ(f.plain_shared_stores, 0) << k->nest;
  EXPECT_EQ(f.local_stage_buffers, 0) << k->nest;
  // 3 stages of (32x8 + 8x32) floats.
  EXPECT_EQ(k->launches[0].shared_memory_bytes, 3 * 2 * 32 * 8 * 4);
  const std::string text = ir::ToString(k->nest);
  EXPECT_THAT(text, ::testing::HasSubstr("= async_copy A["));
  EXPECT_THAT(text, ::testing::HasSubstr("async_wait 1"));
  EXPECT_THAT(text, ::testing::HasSubstr("async_commit"));
  for (uint64_t seed : {1, 2}) ExpectMatchesReference(dag, st, Target::H200(), true, seed);
}

TEST(AsyncPipeline, FourStagesAndFewerIterationsThanStagesStillMatch) {
  ir::ComputeDAG dag = *ir::MatmulDAG({64, 64}, {64, 64});
  // k tile 32: two iterations, fewer than the three tiles a 4-stage prologue would fetch.
  const State st = WithPipelinePragma(VectorFetchMatmul(dag, {8, 4}, {8, 4}, 32, 4), "C", 4);
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  AsyncFacts f = Inspect(k->nest.body);
  EXPECT_EQ(f.shared_shapes["A.shared"], (std::vector<int64_t>{4, 32, 32})) << k->nest;
  EXPECT_EQ(f.commits_outside, 3) << k->nest;  // the third group is empty
  EXPECT_EQ(f.waits_in_loops, (std::vector<int64_t>{2})) << k->nest;
  EXPECT_EQ(f.barriers_in_loops, 1) << k->nest;
  ExpectMatchesReference(dag, st, Target::H200(), /*exact=*/true);
  // Four stages over sixteen iterations too.
  const State st16 = WithPipelinePragma(VectorFetchMatmul(dag, {8, 4}, {8, 4}, 4, 4), "C", 4);
  ExpectMatchesReference(dag, st16, Target::H200(), /*exact=*/true, 3);
}

TEST(AsyncPipeline, TwoFloatVectorsQualify) {
  ir::ComputeDAG dag = *ir::MatmulDAG({64, 32}, {32, 64});
  const State st = WithPipelinePragma(VectorFetchMatmul(dag, {8, 2}, {8, 2}, 4, 2), "C", 3);
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_GT(Inspect(k->nest.body).async_copies, 0) << k->nest;
  ExpectMatchesReference(dag, st, Target::H200(), /*exact=*/true);
}

// The hand-written 4096^3 kernel (bench/schedules/matmul_cuda_4096_128x128.json: 128x128 block, 256
// threads, 2x2 vthreads of 4x4, k tile 32, vectorized fetches) on 128x128x256.
State HandMatmulStructure(ir::ComputeDAG* dag, int stages) {
  nlohmann::json steps = nlohmann::json::parse(R"([
    ["CHW", 2, "local"], ["SP", 2, 0, 128, [2, 16, 1, 4], 1], ["SP", 2, 5, 128, [2, 16, 1, 4], 1],
    ["SP", 2, 10, 256, [8, 4], 1], ["RE", 2, [0, 5, 1, 6, 2, 7, 10, 11, 3, 8, 12, 4, 9]],
    ["FSP", 3, 0, 1, 3], ["FSP", 3, 4, 2, 3], ["RE", 3, [0, 4, 1, 5, 2, 6, 3, 7]],
    ["CA", 2, 3, 5], ["CHR", 1, "shared", [2]], ["CA", 2, 3, 6], ["CHR", 0, "shared", [3]],
    ["CA", 1, 4, 6], ["FU", 5, [0, 1]], ["FU", 5, [1, 2]], ["FU", 5, [2, 3]], ["AN", 5, 0, 5],
    ["AN", 5, 1, 4], ["AN", 5, 2, 6], ["FU", 3, [0, 1]], ["SP", 3, 0, 0, [4], 1],
    ["AN", 3, 1, 2], ["FFSP", 3, 0, [1, 2], 1, 1], ["AN", 3, 1, 6], ["FU", 1, [0, 1]],
    ["SP", 1, 0, 0, [4], 1], ["AN", 1, 1, 2], ["FFSP", 1, 0, [1, 2], 1, 1], ["AN", 1, 1, 6],
    ["PR", 4, 0, "auto_unroll_max_step$512"]])");
  steps.push_back({"PR", 4, 0, "software_pipeline$" + std::to_string(stages)});
  nlohmann::json file = {
      {"version", 1},
      {"workload", {{"op", "matmul"}, {"shapes", {{128, 256}, {256, 128}}}, {"dtype", "float32"}}},
      {"target", "cuda -arch=sm_90"},
      {"steps", steps}};
  absl::StatusOr<ScheduleFile> f = ScheduleFile::Parse(file.dump());
  EXPECT_THAT(f, IsOk());
  absl::StatusOr<ResolvedSchedule> r = f->Resolve();
  EXPECT_THAT(r, IsOk());
  *dag = r->dag;
  return r->state;
}

TEST(AsyncPipeline, HandMatmulStructureScaledDownMatchesTheNaiveProgram) {
  ir::ComputeDAG dag;
  for (int stages : {3, 4}) {
    const State st = HandMatmulStructure(&dag, stages);
    absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
    ASSERT_THAT(k, IsOk());
    AsyncFacts f = Inspect(k->nest.body);
    EXPECT_EQ(f.shared_shapes["A.shared"], (std::vector<int64_t>{stages, 128, 32})) << k->nest;
    EXPECT_EQ(f.shared_shapes["B.shared"], (std::vector<int64_t>{stages, 32, 128})) << k->nest;
    EXPECT_EQ(f.barriers_in_loops, 1) << k->nest;
    EXPECT_EQ(f.commits_outside, stages - 1) << k->nest;
    EXPECT_EQ(f.waits_in_loops, (std::vector<int64_t>{stages - 2})) << k->nest;
    EXPECT_EQ(f.plain_shared_stores, 0) << k->nest;
    ExpectMatchesReference(dag, st, Target::H200(), /*exact=*/true);
  }
}

TEST(AsyncPipeline, GuardedFetchesFallBackToDoubleBuffering) {
  // 30 = 7·4 + 2: the last k tile and the fetches are guarded.
  ir::ComputeDAG dag = *ir::MatmulDAG({21, 30}, {30, 37});
  const State st = WithPipelinePragma(VectorFetchMatmul(dag, {4, 2}, {8, 2}, 4, 4), "C", 3);
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  AsyncFacts f = Inspect(k->nest.body);
  EXPECT_EQ(f.async_copies, 0) << k->nest;
  EXPECT_EQ(f.commits_outside + f.commits_in_loops, 0) << k->nest;
  EXPECT_EQ(f.shared_shapes["A.shared"].size(), 3u) << k->nest;  // [2, tile...]
  EXPECT_EQ(f.shared_shapes["A.shared"][0], 2) << k->nest;
  EXPECT_EQ(f.barriers_in_loops, 1) << k->nest;
  for (uint64_t seed : {1, 2}) ExpectMatchesReference(dag, st, Target::H200(), true, seed);
}

TEST(AsyncPipeline, ScalarFetchesFallBackToDoubleBuffering) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 48});
  Sched s = testing::GpuMatmulSched(dag, {.i = {4, 2}, .j = {8, 2}, .k_inner = 4});
  ASSERT_THAT(s.status(), IsOk());
  const State st = WithPipelinePragma(s.state(), "C", 4);
  absl::StatusOr<LoweredKernel> k = Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  AsyncFacts f = Inspect(k->nest.body);
  EXPECT_EQ(f.async_copies, 0) << k->nest;
  EXPECT_EQ(f.shared_shapes["A.shared"], (std::vector<int64_t>{2, 8, 4})) << k->nest;
  ExpectMatchesReference(dag, st, Target::H200(), /*exact=*/true);
}

TEST(AsyncPipeline, StagesFollowThePragma) {
  ir::ComputeDAG dag = *ir::MatmulDAG({64, 64}, {64, 64});
  const State base = VectorFetchMatmul(dag, {8, 4}, {8, 4}, 8, 4);
  EXPECT_EQ(SoftwarePipelineStages(base, base.StageId("C")), 1);
  EXPECT_EQ(SoftwarePipelineStages(WithPipelinePragma(base, "C", 3), base.StageId("C")), 3);
  EXPECT_EQ(SoftwarePipelineStages(WithPipelinePragma(base, "C.local", 4), base.StageId("C")), 4);
  EXPECT_EQ(
      SoftwarePipelineStages(WithPipelinePragma(WithPipelinePragma(base, "C", 3), "C.local", 0),
                             base.StageId("C")),
      0);
}

}  // namespace
}  // namespace tilesearch::schedule
