// Virtual-thread injection (lower_internal::InjectVirtualThreads, run by Lower on GPU kernels):
// matmuls with vthread tiles still match the naive program (divisible and guarded tiles, with and
// without software pipelining), no vthread loop is left, each shared tile is fetched once per
// reduction step (not once per virtual thread), and the accumulator gets one copy per virtual
// thread. Hand-built nests check the cases lowering rarely makes: an accumulation that does not
// mention the vthread variable, and a guard on it.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/lower_internal.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using testing::ExpectMatchesReference;
using testing::RunLowered;
using testing::Sched;
using tilesearch::testing::IsOk;

// Facts about a lowered nest: vthread loops left, and for each shared buffer the elements its
// stores write per execution of the reduction loop `k_loop` (product of the extents of the loops
// around each store, except blockIdx loops and `k_loop`).
struct NestFacts {
  int vthread_loops = 0;
  std::map<std::string, int64_t> shared_stores;
  std::map<std::string, std::vector<int64_t>> shapes;
};

NestFacts Inspect(const ir::Stmt& s, const std::string& k_loop) {
  class V : public ir::StmtVisitor {
   public:
    explicit V(const std::string& k) : k_(k) {}
    NestFacts facts;

   protected:
    void VisitFor(const ir::ForNode* op, const ir::Stmt& s) override {
      if (op->for_kind == ir::ForKind::kVThread) ++facts.vthread_loops;
      // threadIdx loops share the hardware index: only the innermost one counts.
      const bool thread = ir::IsThreadBound(op->for_kind);
      const bool counted = !thread && !ir::IsBlockBound(op->for_kind) && op->var_name() != k_;
      const int64_t e = counted ? ir::AsConstInt(op->extent).value_or(-1000000) : 1;
      extents_.push_back(e);
      if (thread) threads_.push_back(ir::AsConstInt(op->extent).value_or(-1000000));
      ir::StmtVisitor::VisitFor(op, s);
      if (thread) threads_.pop_back();
      extents_.pop_back();
    }
    void VisitAllocate(const ir::AllocateNode* op, const ir::Stmt& s) override {
      facts.shapes[op->buffer.name] = op->buffer.shape;
      if (op->buffer.scope == ir::MemoryScope::kShared) shared_.insert(op->buffer.name);
      ir::StmtVisitor::VisitAllocate(op, s);
    }
    void VisitStore(const ir::StoreNode* op, const ir::Stmt& s) override {
      if (shared_.count(op->buffer)) {
        int64_t n = threads_.empty() ? 1 : threads_.back();
        for (int64_t e : extents_) n *= e;
        facts.shared_stores[op->buffer] += n;
      }
      ir::StmtVisitor::VisitStore(op, s);
    }

   private:
    std::string k_;
    std::vector<int64_t> extents_;
    std::vector<int64_t> threads_;
    std::set<std::string> shared_;
  };
  V v(k_loop);
  v.Visit(s);
  return v.facts;
}

// 2×2 virtual threads of 4×8 threads, each computing 2×2 outputs per virtual thread.
Sched VThreadMatmul(const ir::ComputeDAG& dag, int64_t k_inner) {
  return testing::GpuMatmulSched(dag, {.i = {2, 4, 2}, .j = {2, 8, 2}, .k_inner = k_inner});
}

TEST(InjectVirtualThreads, SharedTilesAreFetchedOncePerReductionStep) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 64});
  Sched s = VThreadMatmul(dag, 4);
  ASSERT_THAT(s.status(), IsOk());
  absl::StatusOr<LoweredKernel> k = Lower(dag, s.state(), Target::H200());
  ASSERT_THAT(k, IsOk());
  NestFacts f = Inspect(k->nest.body, "C.local.k.0");
  EXPECT_EQ(f.vthread_loops, 0) << k->nest;
  // Block tile 16×32 (i: 2·4·2, j: 2·8·2), k tile 4: A.shared 16×4, B.shared 4×32.
  EXPECT_EQ(f.shapes["A.shared"], (std::vector<int64_t>{16, 4})) << k->nest;
  EXPECT_EQ(f.shared_stores["A.shared"], 16 * 4) << k->nest;
  EXPECT_EQ(f.shared_stores["B.shared"], 4 * 32) << k->nest;
  // The accumulator: one 2×2 copy per virtual thread.
  EXPECT_EQ(f.shapes["C.local"], (std::vector<int64_t>{4, 2, 2})) << k->nest;
  ExpectMatchesReference(dag, s.state(), Target::H200(), /*exact=*/true);
}

TEST(InjectVirtualThreads, GuardedNonDivisibleTilesStillCorrect) {
  // 30 = 7·4 + 2 along k; 21 rows and 37 columns leave partial block tiles.
  ir::ComputeDAG dag = *ir::MatmulDAG({21, 30}, {30, 37});
  Sched s = VThreadMatmul(dag, 4);
  ASSERT_THAT(s.status(), IsOk());
  for (uint64_t seed : {1, 2, 3})
    ExpectMatchesReference(dag, s.state(), Target::H200(), true, seed);
}

TEST(InjectVirtualThreads, CorrectWithoutSoftwarePipelining) {
  ir::ComputeDAG dag = *ir::MatmulDAG({32, 24}, {24, 64});
  Sched s = VThreadMatmul(dag, 4);
  ASSERT_THAT(s.status(), IsOk());
  PragmaStep off;
  off.stage_id = s.state().StageId("C");
  off.iter_id = 0;
  off.software_pipeline = 0;
  absl::StatusOr<State> st = ApplyStep(s.state(), off);
  ASSERT_THAT(st, IsOk());
  absl::StatusOr<LoweredKernel> k = Lower(dag, *st, Target::H200());
  ASSERT_THAT(k, IsOk());
  EXPECT_THAT(testing::LocalAllocations(k->nest.body),
              ::testing::Not(::testing::Contains("A.shared.stage")))
      << k->nest;
  ExpectMatchesReference(dag, *st, Target::H200(), /*exact=*/true);
}

// Runs `body` (over buffers In[8] input and Out[4] output) as written and after injection.
void ExpectSameResult(const ir::Stmt& body) {
  ir::LoopNest nest;
  nest.name = "k";
  nest.params = {{"In", ir::ScalarType::kFloat32, {8}, ir::MemoryScope::kGlobal},
                 {"Out", ir::ScalarType::kFloat32, {4}, ir::MemoryScope::kGlobal}};
  nest.num_inputs = 1;
  nest.body = body;
  ir::LoopNest injected = nest;
  injected.body = lower_internal::InjectVirtualThreads(body);
  ir::BufferMap in;
  in["In"] = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {8});
  for (int i = 0; i < 8; ++i) in["In"].data[i] = 1.5 * i - 3;
  absl::StatusOr<ir::BufferMap> a = RunLowered(nest, in);
  absl::StatusOr<ir::BufferMap> b = RunLowered(injected, in);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk()) << injected;
  EXPECT_EQ(a->at("Out").data, b->at("Out").data) << injected;
}

ir::Expr Ld(const std::string& buf, std::vector<ir::Expr> idx) {
  return ir::LoadNode::Make(ir::ScalarType::kFloat32, buf, std::move(idx));
}

TEST(InjectVirtualThreads, AccumulationWithoutTheVariableGetsOneCopyPerVirtualThread) {
  // for v in 4 vthread { L[0] = 0; for r in 8 { L[0] = L[0] + In[r] }; Out[v] = L[0] * v }
  ir::Expr v = ir::MakeVar("v"), r = ir::MakeVar("r");
  ir::BufferDecl l{"L", ir::ScalarType::kFloat32, {1}, ir::MemoryScope::kLocal};
  ir::Stmt inner = ir::SeqNode::Make(
      {ir::StoreNode::Make("L", {ir::IntConst(0)}, ir::FloatConst(0)),
       ir::ForNode::Make(
           r, ir::IntConst(0), ir::IntConst(8), ir::ForKind::kSerial,
           ir::StoreNode::Make("L", {ir::IntConst(0)}, Ld("L", {ir::IntConst(0)}) + Ld("In", {r}))),
       ir::StoreNode::Make("Out", {v},
                           Ld("L", {ir::IntConst(0)}) * ir::Cast(ir::ScalarType::kFloat32, v))});
  ir::Stmt body = ir::ForNode::Make(v, ir::IntConst(0), ir::IntConst(4), ir::ForKind::kVThread,
                                    ir::AllocateNode::Make(l, inner));
  ExpectSameResult(body);
}

TEST(InjectVirtualThreads, GuardOnTheVariableStaysAroundItsStatement) {
  // for v in 4 vthread { if (v < 3) { Out[v] = In[2v] } else { Out[v] = In[v] + 1 } }
  ir::Expr v = ir::MakeVar("v");
  ir::Stmt body = ir::ForNode::Make(
      v, ir::IntConst(0), ir::IntConst(4), ir::ForKind::kVThread,
      ir::IfThenElseNode::Make(v < 3, ir::StoreNode::Make("Out", {v}, Ld("In", {v * 2})),
                               ir::StoreNode::Make("Out", {v}, Ld("In", {v}) + 1.0)));
  ExpectSameResult(body);
}

}  // namespace
}  // namespace tilesearch::schedule
