// Property test with fixed seeds: random valid step sequences on operators of the library
// (splits with random, often non-divisible, factors; fuses; reorders; compute_at / compute_root;
// inlining; cache_read / cache_write; rfactor; storage_align; annotations; pragmas) are lowered,
// and the interpreter's output equals the naive program's on random inputs within 1e-5 (reorders
// may change the reduction order).
// GPU: random tile sizes of the Ansor-style shared-memory matmul on random shapes.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/conv.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/fused.h"
#include "ir/ops/layout.h"
#include "ir/ops/linear.h"
#include "ir/ops/norm.h"
#include "ir/ops/pool.h"
#include "ir/ops/reduce.h"
#include "schedule/lower.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using testing::MaxRelError;
using testing::RunLowered;

struct Workload {
  std::string name;
  ir::ComputeDAG dag;
};

std::vector<Workload> Workloads() {
  std::vector<Workload> w;
  auto add = [&](const std::string& name, absl::StatusOr<ir::ComputeDAG> dag) {
    EXPECT_TRUE(dag.ok()) << name << ": " << dag.status();
    if (dag.ok()) w.push_back({name, *std::move(dag)});
  };
  ir::Conv2dParams pad1;
  pad1.padding = {1, 1};
  ir::Conv2dParams strided;
  strided.stride = {2, 2};
  strided.padding = {1, 1};
  ir::Pool2dParams pool;
  pool.kernel = {3, 3};
  pool.stride = std::array<int64_t, 2>{2, 2};
  add("matmul", ir::MatmulDAG({7, 5}, {5, 6}));
  add("batch_matmul", ir::BatchMatmulDAG({2, 4, 3}, {2, 3, 5}));
  add("dense_bias_relu", ir::DenseBiasReluDAG({6, 5}, {4, 5}, {4}));
  add("matmul_scale_residual",
      ir::MatmulScaleResidualDAG({5, 4}, {4, 6}, {5, 6}, ir::ScalarType::kFloat32, 0.5));
  add("gemv", ir::GemvDAG({6, 5}, {5}));
  add("conv2d_padded",
      ir::Conv2dNchwPaddedDAG({1, 2, 5, 5}, {3, 2, 3, 3}, ir::ScalarType::kFloat32, pad1));
  add("conv2d_strided",
      ir::Conv2dNchwDAG({1, 2, 6, 6}, {3, 2, 3, 3}, ir::ScalarType::kFloat32, strided));
  add("softmax", ir::SoftmaxDAG({3, 10}));
  add("layernorm", ir::LayerNormDAG({4, 6}));
  add("reduce_sum", ir::ReduceDAG(ir::ReduceOp::kSum, {4, 5, 3}, {1}));
  add("relu", ir::UnaryDAG(ir::UnaryOp::kRelu, {5, 7}));
  add("add_broadcast", ir::BinaryDAG(ir::BinaryOp::kAdd, {4, 1}, {1, 6}));
  add("transpose", ir::TransposeDAG({3, 4, 5}, {2, 0, 1}));
  add("max_pool2d", ir::MaxPool2dDAG({1, 2, 7, 7}, ir::ScalarType::kFloat32, pool));
  return w;
}

bool ReadsBuffer(const ir::TensorNode& op, const std::string& name) {
  class V : public ir::ExprVisitor {
   public:
    explicit V(const std::string& n) : name_(n) {}
    bool found = false;

   protected:
    void VisitLoad(const ir::LoadNode* op, const ir::Expr& e) override {
      found |= op->buffer == name_;
      ir::ExprVisitor::VisitLoad(op, e);
    }

   private:
    const std::string& name_;
  };
  V v(name);
  v.Visit(op.body);
  if (op.init.defined()) v.Visit(op.init);
  return v.found;
}

// One random step, or nothing when the pick does not apply.
std::optional<Step> RandomStep(const State& s, std::mt19937_64& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  std::vector<int> stages;
  for (int i = 0; i < s.num_stages(); ++i) {
    const Stage& st = s.stage(i);
    if (!st.is_placeholder() && st.location != ComputeLocation::kInlined) stages.push_back(i);
  }
  if (stages.empty()) return std::nullopt;
  const int sid = stages[pick(static_cast<int>(stages.size()))];
  const Stage& st = s.stage(sid);
  const int n = static_cast<int>(st.iters.size());
  switch (pick(15)) {
    case 12: {
      std::vector<int> reduce;
      for (int i = 0; i < n; ++i) {
        if (st.iters[i].kind == IteratorKind::kReduce) reduce.push_back(i);
      }
      if (reduce.empty()) return std::nullopt;
      RfactorStep rf;
      rf.stage_id = sid;
      rf.iter_id = reduce[pick(static_cast<int>(reduce.size()))];
      rf.factor_iter_id = pick(static_cast<int>(st.op->axes.size()) + 1);
      return rf;
    }
    case 13: {
      // Kernel parameters keep their layout (lowering rejects padding them).
      for (int id : s.dag().output_ids()) {
        if (s.dag().stage(id).name() == st.name()) return std::nullopt;
      }
      StorageAlignStep sa;
      sa.stage_id = sid;
      sa.iter_id = pick(n);
      sa.factor = 1 << pick(4);
      sa.offset = pick(static_cast<int>(sa.factor));
      return sa;
    }
    case 14:
      return ComputeRootStep{sid};
    case 0:
    case 1:
    case 2: {
      SplitStep sp;
      sp.stage_id = sid;
      sp.iter_id = pick(n);
      sp.extent = st.iters[sp.iter_id].extent;
      const int parts = 1 + pick(2);
      for (int k = 0; k < parts; ++k) {
        sp.lengths.push_back(1 + pick(static_cast<int>(std::min<int64_t>(sp.extent, 5))));
      }
      sp.inner_to_outer = pick(4) != 0;
      return sp;
    }
    case 3: {
      if (n < 2) return std::nullopt;
      FuseStep f;
      f.stage_id = sid;
      int i = pick(n - 1);
      f.fused_ids = {i, i + 1};
      return f;
    }
    case 4: {
      ReorderStep r;
      r.stage_id = sid;
      for (int i = 0; i < n; ++i) r.after_ids.push_back(i);
      std::shuffle(r.after_ids.begin(), r.after_ids.end(), rng);
      return r;
    }
    case 5:
      // Inlining moves the stage's reads into its readers: not when it reads an attached stage
      // (its readers would read that buffer outside the attach loop).
      for (int p = 0; p < s.num_stages(); ++p) {
        if (s.stage(p).location == ComputeLocation::kAttached &&
            ReadsBuffer(*st.op, s.stage(p).name())) {
          return std::nullopt;
        }
      }
      return ComputeInlineStep{sid};
    case 6:
    case 7: {
      std::vector<int> readers;
      for (int c = 0; c < s.num_stages(); ++c) {
        const Stage& cs = s.stage(c);
        if (c != sid && !cs.is_placeholder() && ReadsBuffer(*cs.op, st.name())) {
          readers.push_back(c);
        }
      }
      // With several readers (inlined ones included), the others would read the buffer outside the
      // attach loop (lowering rejects that).
      if (readers.size() != 1 || s.stage(readers[0]).location == ComputeLocation::kInlined) {
        return std::nullopt;
      }
      ComputeAtStep ca;
      ca.stage_id = sid;
      ca.target_stage_id = readers[pick(static_cast<int>(readers.size()))];
      ca.target_iter_id = pick(static_cast<int>(s.stage(ca.target_stage_id).iters.size()));
      return ca;
    }
    case 8: {
      CacheWriteStep cw;
      cw.stage_id = sid;
      cw.scope = ir::MemoryScope::kLocal;
      return cw;
    }
    case 9: {
      // cache_read of any stage (placeholders included) for all of its readers.
      const int src = pick(s.num_stages());
      CacheReadStep cr;
      cr.stage_id = src;
      cr.scope = ir::MemoryScope::kLocal;
      for (int c = 0; c < s.num_stages(); ++c) {
        const Stage& cs = s.stage(c);
        if (c != src && !cs.is_placeholder() && cs.location != ComputeLocation::kInlined &&
            ReadsBuffer(*cs.op, s.stage(src).name())) {
          cr.reader_stage_ids.push_back(c);
        }
      }
      if (cr.reader_stage_ids.empty()) return std::nullopt;
      return cr;
    }
    case 10: {
      AnnotationStep a;
      a.stage_id = sid;
      a.iter_id = pick(n);
      const IteratorAnnotation kinds[] = {IteratorAnnotation::kUnroll,
                                          IteratorAnnotation::kVectorize,
                                          IteratorAnnotation::kParallel};
      a.annotation = kinds[pick(3)];
      // Lowering rejects parallel reduce loops (a race on the accumulator).
      if (a.annotation == IteratorAnnotation::kParallel &&
          st.iters[a.iter_id].kind != IteratorKind::kSpace) {
        return std::nullopt;
      }
      return a;
    }
    default: {
      PragmaStep p;
      p.stage_id = sid;
      p.iter_id = 0;
      p.auto_unroll_max_step = 1 << pick(6);
      return p;
    }
  }
}

TEST(LowerProperty, RandomCpuSchedulesMatchTheNaiveProgram) {
  std::mt19937_64 rng(20261129);
  constexpr int kTrials = 150;
  int lowered = 0;
  std::vector<int> applied(std::variant_size_v<Step>, 0);
  for (const Workload& w : Workloads()) {
    ir::BufferMap inputs = ir::MakeRandomInputs(w.dag, 5);
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(w.dag, inputs);
    ASSERT_TRUE(ref.ok()) << w.name << ": " << ref.status();
    for (int trial = 0; trial < kTrials; ++trial) {
      State st = State::Initial(w.dag);
      const int want = 1 + static_cast<int>(rng() % 10);
      for (int attempt = 0; attempt < 40 && static_cast<int>(st.steps().size()) < want; ++attempt) {
        std::optional<Step> step = RandomStep(st, rng);
        if (!step) continue;
        absl::StatusOr<State> next = ApplyStep(st, *step);
        if (!next.ok()) continue;
        st = *std::move(next);
        ++applied[step->index()];
      }
      absl::StatusOr<LoweredKernel> k = Lower(w.dag, st, Target::HostCpu());
      ASSERT_TRUE(k.ok()) << w.name << " trial " << trial << ": " << k.status() << "\n"
                          << st.ToString();
      absl::StatusOr<ir::BufferMap> got = RunLowered(k->nest, inputs);
      ASSERT_TRUE(got.ok()) << w.name << " trial " << trial << ": " << got.status() << "\n"
                            << st.ToString() << "\n"
                            << k->nest;
      ASSERT_LE(MaxRelError(w.dag, *got, *ref), 1e-5) << w.name << " trial " << trial << "\n"
                                                      << st.ToString() << "\n"
                                                      << k->nest;
      ++lowered;
    }
  }
  EXPECT_EQ(lowered, kTrials * static_cast<int>(Workloads().size()));
  // The schedules exercise every kind of step the generator makes.
  for (const Step& kind :
       {Step(SplitStep{}), Step(FuseStep{}), Step(ReorderStep{}), Step(ComputeAtStep{}),
        Step(ComputeInlineStep{}), Step(CacheReadStep{}), Step(CacheWriteStep{}),
        Step(AnnotationStep{}), Step(PragmaStep{}), Step(RfactorStep{}), Step(StorageAlignStep{}),
        Step(ComputeRootStep{})}) {
    EXPECT_GE(applied[kind.index()], 50) << StepToString(kind);
  }
}

// Simple GPU sketches on every workload: elementwise stages inlined at random; each remaining
// stage's space iterators fused and split over blocks and threads, or (reductions, at random) its
// reduce iterators fused and split with the inner part bound to threadIdx.x: a cross-thread
// reduction. A stage with one reader is at random computed at that reader's block loop instead
// (in shared memory, filled by the block's threads).
TEST(LowerProperty, RandomGpuBindingsMatchTheNaiveProgram) {
  std::mt19937_64 rng(99);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  int checked = 0, cross_thread = 0, attached = 0;
  for (const Workload& w : Workloads()) {
    for (int trial = 0; trial < 12; ++trial) {
      testing::Sched s(w.dag);
      for (int id = 0; id < w.dag.num_stages(); ++id) {
        const bool output = std::count(w.dag.output_ids().begin(), w.dag.output_ids().end(), id);
        if (w.dag.IsInlinable(id) && !output && pick(0, 1)) s.Inline(w.dag.stage(id).name());
      }
      std::map<std::string, std::string> block_iter;  // scheduled root stage → its block loop
      for (int id = w.dag.num_stages() - 1; id >= 0; --id) {
        const std::string name = w.dag.stage(id).name();
        if (s.state().stage(s.state().StageId(name)).is_placeholder() ||
            s.state().stage(s.state().StageId(name)).location == ComputeLocation::kInlined) {
          continue;
        }
        std::vector<std::string> readers;
        for (int c = 0; c < s.state().num_stages(); ++c) {
          const Stage& cs = s.state().stage(c);
          if (!cs.is_placeholder() && cs.name() != name && ReadsBuffer(*cs.op, name)) {
            readers.push_back(cs.name());
          }
        }
        const bool attach = readers.size() == 1 && block_iter.count(readers[0]) && pick(0, 2) == 0;
        if (attach) {
          s.ComputeAt(name, readers[0], block_iter[readers[0]]);
          ++attached;
        }
        const Stage& st = s.state().stage(s.state().StageId(name));
        std::vector<std::string> space, reduce;
        for (const Iterator& it : st.iters) {
          (it.kind == IteratorKind::kSpace ? space : reduce).push_back(it.name);
        }
        if (space.size() > 1) s.Fuse(name, space);
        const std::string f = absl::StrJoin(space, "@");
        if (!reduce.empty() && pick(0, 1)) {
          if (reduce.size() > 1) s.Fuse(name, reduce);
          const std::string r = absl::StrJoin(reduce, "@");
          s.Split(name, r, {pick(1, 16)});
          s.Annotate(name, r + ".1", IteratorAnnotation::kThreadIdxX);
          if (!attach) {
            s.Annotate(name, f, IteratorAnnotation::kBlockIdxX);
            block_iter[name] = f;
          }
          ++cross_thread;
        } else {
          s.Split(name, f, {pick(1, 64)});
          s.Annotate(name, f + ".1", IteratorAnnotation::kThreadIdxX);
          if (!attach) {
            s.Annotate(name, f + ".0", IteratorAnnotation::kBlockIdxX);
            block_iter[name] = f + ".0";
          }
        }
      }
      ASSERT_THAT(s.status(), tilesearch::testing::IsOk()) << w.name;
      testing::ExpectMatchesReference(w.dag, s.state(), Target::H200(), /*exact=*/false, trial);
      if (HasFatalFailure()) return;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12 * static_cast<int>(Workloads().size()));
  EXPECT_GE(cross_thread, 20);
  EXPECT_GE(attached, 10);
}

// The shared-memory matmul of lower_gpu_test with random shapes and tile sizes.
TEST(LowerProperty, RandomGpuMatmulTilesMatchTheNaiveProgram) {
  std::mt19937_64 rng(7);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t m = pick(1, 40), n = pick(1, 40), kk = pick(1, 24);
    ir::ComputeDAG dag = *ir::MatmulDAG({m, kk}, {kk, n});
    // i and j: {vthread, threadIdx, inner}; all the threads fetch the shared tiles.
    testing::Sched s = testing::GpuMatmulSched(dag, {.i = {pick(1, 2), pick(1, 4), pick(1, 3)},
                                                     .j = {pick(1, 2), pick(1, 8), pick(1, 3)},
                                                     .k_inner = pick(1, 6)});
    ASSERT_THAT(s.status(), tilesearch::testing::IsOk()) << m << "x" << n << "x" << kk;
    testing::ExpectMatchesReference(dag, s.state(), Target::H200(), /*exact=*/true, trial);
    if (HasFatalFailure()) return;
    ++checked;
  }
  EXPECT_EQ(checked, 40);
}

}  // namespace
}  // namespace tilesearch::schedule
