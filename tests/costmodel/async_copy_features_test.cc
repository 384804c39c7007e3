// Features of a cp.async-pipelined kernel (software_pipeline$3, schedule/software_pipeline.h):
// an async copy is featurized exactly like the plain store it stands for, and the commit / wait
// statements add no rows. The reference is the same lowered nest with every async copy turned
// back into a plain Store and the AsyncGroup statements removed.
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "costmodel/features.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "ir/stmt.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::costmodel {
namespace {

using ::tilesearch::testing::IsOk;

// Async copies back to plain stores; commits and waits dropped.
class Synchronous : public ir::StmtMutator {
 public:
  int async_stores = 0;
  int groups = 0;

 protected:
  ir::Stmt MutateStore(const ir::StoreNode* op, const ir::Stmt& s) override {
    if (!op->async_copy) return s;
    ++async_stores;
    return ir::StoreNode::Make(op->buffer, op->indices, op->value);
  }
  ir::Stmt MutateAsyncGroup(const ir::AsyncGroupNode*, const ir::Stmt&) override {
    ++groups;
    return ir::SeqNode::Make({});
  }
};

// 64x64x64 matmul, block tile 32x32 (8x8 threads of 4x4), k tile 8, A and B fetched into shared
// memory in vectors of 4 floats, pragma software_pipeline$3.
schedule::State Pipelined(const ir::ComputeDAG& dag) {
  using schedule::IteratorAnnotation;
  schedule::testing::Sched s(dag);
  s.CacheWrite("C", ir::MemoryScope::kLocal);
  s.Split("C", "i", {8, 4}).Split("C", "j", {8, 4});
  s.Reorder("C", {"i.0", "j.0", "i.1", "j.1", "i.2", "j.2"});
  s.Fuse("C", {"i.0", "j.0"}).Fuse("C", {"i.1", "j.1"});
  s.Annotate("C", "i.0@j.0", IteratorAnnotation::kBlockIdxX);
  s.Annotate("C", "i.1@j.1", IteratorAnnotation::kThreadIdxX);
  s.ComputeAt("C.local", "C", "i.1@j.1");
  s.Split("C.local", "k", {8}).Reorder("C.local", {"k.0", "k.1", "i", "j"});
  s.CacheRead("A", ir::MemoryScope::kShared, {"C.local"});
  s.CacheRead("B", ir::MemoryScope::kShared, {"C.local"});
  s.ComputeAt("A.shared", "C.local", "k.0").ComputeAt("B.shared", "C.local", "k.0");
  for (const std::string name : {"A.shared", "B.shared"}) {
    s.Fuse(name, {"ax0", "ax1"});
    s.Split(name, "ax0@ax1", {64, 4});
    s.Annotate(name, "ax0@ax1.1", IteratorAnnotation::kThreadIdxX);
    s.Annotate(name, "ax0@ax1.2", IteratorAnnotation::kVectorize);
  }
  schedule::PragmaStep p;
  p.stage_id = s.StageId("C");
  p.software_pipeline = 3;
  absl::StatusOr<schedule::State> out = schedule::ApplyStep(s.state(), p);
  EXPECT_THAT(s.status(), IsOk());
  EXPECT_THAT(out, IsOk());
  return out.ok() ? *out : s.state();
}

TEST(AsyncCopyFeatures, AsyncCopiesAreFeaturizedLikeThePlainStores) {
  ir::ComputeDAG dag = *ir::MatmulDAG({64, 64}, {64, 64});
  const schedule::State st = Pipelined(dag);
  absl::StatusOr<schedule::LoweredKernel> k = schedule::Lower(dag, st, Target::H200());
  ASSERT_THAT(k, IsOk());
  Synchronous sync;
  ir::LoopNest plain = k->nest;
  plain.body = sync.Mutate(k->nest.body);
  ASSERT_GT(sync.async_stores, 0) << k->nest;  // the schedule really is pipelined
  ASSERT_GT(sync.groups, 0) << k->nest;
  FeatureOptions raw;
  raw.log_scale = false;
  absl::StatusOr<StoreFeatures> got = ExtractFeatures(k->nest, Target::H200(), raw);
  absl::StatusOr<StoreFeatures> want = ExtractFeatures(plain, Target::H200(), raw);
  ASSERT_THAT(got, IsOk());
  ASSERT_THAT(want, IsOk());
  EXPECT_EQ(*got, *want);
}

}  // namespace
}  // namespace tilesearch::costmodel
