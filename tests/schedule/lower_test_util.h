// Test helpers for lowering: a schedule builder that names stages and iterators (ids shift as
// steps add stages), and running a lowered kernel in the interpreter against the naive program.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/state.h"
#include "schedule/wgmma_layout.h"

namespace tilesearch::schedule::testing {

/// Applies steps by stage and iterator name; the first failing step is kept in status().
class Sched {
 public:
  explicit Sched(const ir::ComputeDAG& dag) : state_(State::Initial(dag)) {}

  const State& state() const { return state_; }
  const absl::Status& status() const { return status_; }

  int StageId(const std::string& stage) {
    int id = state_.StageId(stage);
    if (id < 0) Fail(absl::StrCat("no stage '", stage, "'"));
    return id;
  }
  int IterId(const std::string& stage, const std::string& iter) {
    int s = StageId(stage);
    if (s < 0) return 0;
    int i = state_.stage(s).IterIndex(iter);
    if (i < 0) Fail(absl::StrCat("stage '", stage, "' has no iterator '", iter, "'"));
    return std::max(i, 0);
  }

  Sched& Split(const std::string& stage, const std::string& iter, std::vector<int64_t> lengths,
               bool inner_to_outer = true) {
    SplitStep s;
    s.stage_id = StageId(stage);
    s.iter_id = IterId(stage, iter);
    s.extent = s.stage_id >= 0 ? state_.stage(s.stage_id).iters[s.iter_id].extent : 0;
    for (int64_t l : lengths) s.lengths.push_back(l);
    s.inner_to_outer = inner_to_outer;
    return Apply(s);
  }
  Sched& Fuse(const std::string& stage, const std::vector<std::string>& iters) {
    FuseStep s;
    s.stage_id = StageId(stage);
    for (const auto& it : iters) s.fused_ids.push_back(IterId(stage, it));
    return Apply(s);
  }
  Sched& Reorder(const std::string& stage, const std::vector<std::string>& iters) {
    ReorderStep s;
    s.stage_id = StageId(stage);
    for (const auto& it : iters) s.after_ids.push_back(IterId(stage, it));
    return Apply(s);
  }
  Sched& ComputeAt(const std::string& stage, const std::string& target, const std::string& iter) {
    ComputeAtStep s;
    s.stage_id = StageId(stage);
    s.target_stage_id = StageId(target);
    s.target_iter_id = IterId(target, iter);
    return Apply(s);
  }
  Sched& Inline(const std::string& stage) {
    ComputeInlineStep s;
    s.stage_id = StageId(stage);
    return Apply(s);
  }
  Sched& CacheRead(const std::string& stage, ir::MemoryScope scope,
                   const std::vector<std::string>& readers) {
    CacheReadStep s;
    s.stage_id = StageId(stage);
    s.scope = scope;
    for (const auto& r : readers) s.reader_stage_ids.push_back(StageId(r));
    return Apply(s);
  }
  Sched& CacheWrite(const std::string& stage, ir::MemoryScope scope) {
    CacheWriteStep s;
    s.stage_id = StageId(stage);
    s.scope = scope;
    return Apply(s);
  }
  Sched& Annotate(const std::string& stage, const std::string& iter, IteratorAnnotation a) {
    AnnotationStep s;
    s.stage_id = StageId(stage);
    s.iter_id = IterId(stage, iter);
    s.annotation = a;
    return Apply(s);
  }
  Sched& Pragma(const std::string& stage, const std::string& iter, int64_t max_step) {
    PragmaStep s;
    s.stage_id = StageId(stage);
    s.iter_id = IterId(stage, iter);
    s.auto_unroll_max_step = max_step;
    return Apply(s);
  }
  Sched& Rfactor(const std::string& stage, const std::string& iter, int factor_iter) {
    RfactorStep s;
    s.stage_id = StageId(stage);
    s.iter_id = IterId(stage, iter);
    s.factor_iter_id = factor_iter;
    return Apply(s);
  }
  Sched& StorageAlign(const std::string& stage, const std::string& iter, int64_t factor,
                      int64_t offset) {
    StorageAlignStep s;
    s.stage_id = StageId(stage);
    s.iter_id = IterId(stage, iter);
    s.factor = factor;
    s.offset = offset;
    return Apply(s);
  }

 private:
  void Fail(const std::string& msg) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(msg);
  }
  Sched& Apply(const Step& step) {
    if (!status_.ok()) return *this;
    absl::StatusOr<State> next = ApplyStep(state_, step);
    if (!next.ok()) {
      status_ = next.status();
    } else {
      state_ = *std::move(next);
    }
    return *this;
  }

  State state_;
  absl::Status status_;
};

/// Tile sizes of GpuMatmulSched: `i` and `j` are the split lengths below blockIdx, either
/// {vthread, threadIdx, inner} or {threadIdx, inner}; `k_inner` the inner reduce tile;
/// `fetch_threads` the threads that fetch each shared tile (0: the threadIdx extent).
struct GpuMatmulTiles {
  std::vector<int64_t> i;
  std::vector<int64_t> j;
  int64_t k_inner = 1;
  int64_t fetch_threads = 0;
};

/// Ansor's GPU multi-level tiling of a matmul DAG (stages A, B, C over i, j, k): C.local
/// (cache_write) computed per thread; C's i and j split into blockIdx / [vthread /] threadIdx /
/// inner tiles; k into outer and inner; A and B cached in shared memory at the outer reduce tile
/// and fetched cooperatively by `fetch_threads` threads. The first failing step is in status().
inline Sched GpuMatmulSched(const ir::ComputeDAG& dag, const GpuMatmulTiles& t) {
  const int levels = static_cast<int>(t.i.size()) + 1;  // blockIdx, [vthread,] threadIdx, inner
  CHECK(t.i.size() == t.j.size() && (levels == 3 || levels == 4))
      << "GpuMatmulSched takes 2 or 3 split lengths for both i and j";
  Sched s(dag);
  s.CacheWrite("C", ir::MemoryScope::kLocal);
  s.Split("C", "i", t.i).Split("C", "j", t.j);
  std::vector<std::string> order;
  for (int l = 0; l < levels; ++l) {
    order.push_back(absl::StrCat("i.", l));
    order.push_back(absl::StrCat("j.", l));
  }
  s.Reorder("C", order);
  std::vector<IteratorAnnotation> bindings = {IteratorAnnotation::kBlockIdxX};
  if (levels == 4) bindings.push_back(IteratorAnnotation::kVThread);
  bindings.push_back(IteratorAnnotation::kThreadIdxX);
  for (int l = 0; l + 1 < levels; ++l) s.Fuse("C", {absl::StrCat("i.", l), absl::StrCat("j.", l)});
  for (int l = 0; l + 1 < levels; ++l) {
    s.Annotate("C", absl::StrCat("i.", l, "@j.", l), bindings[l]);
  }
  const std::string thread_iter = absl::StrCat("i.", levels - 2, "@j.", levels - 2);
  s.ComputeAt("C.local", "C", thread_iter);
  s.Split("C.local", "k", {t.k_inner}).Reorder("C.local", {"k.0", "k.1", "i", "j"});
  s.CacheRead("A", ir::MemoryScope::kShared, {"C.local"});
  s.CacheRead("B", ir::MemoryScope::kShared, {"C.local"});
  s.ComputeAt("A.shared", "C.local", "k.0").ComputeAt("B.shared", "C.local", "k.0");
  if (!s.status().ok()) return s;
  const int64_t threads =
      t.fetch_threads > 0
          ? t.fetch_threads
          : s.state().stage(s.StageId("C")).iters[s.IterId("C", thread_iter)].extent;
  for (const std::string name : {"A.shared", "B.shared"}) {
    const Stage& st = s.state().stage(s.state().StageId(name));
    std::vector<std::string> iters;
    for (const Iterator& it : st.iters) iters.push_back(it.name);
    s.Fuse(name, iters);
    const std::string fused = s.state().stage(s.state().StageId(name)).iters[0].name;
    s.Split(name, fused, {threads});
    s.Annotate(name, fused + ".1", IteratorAnnotation::kThreadIdxX);
  }
  return s;
}

/// Runs a lowered kernel on `inputs` (outputs start as zeros); returns every parameter buffer.
inline absl::StatusOr<ir::BufferMap> RunLowered(const ir::LoopNest& nest,
                                                const ir::BufferMap& inputs) {
  ir::BufferMap buffers;
  for (int i = 0; i < static_cast<int>(nest.params.size()); ++i) {
    const ir::BufferDecl& p = nest.params[i];
    if (i < nest.num_inputs) {
      auto it = inputs.find(p.name);
      if (it == inputs.end()) return absl::NotFoundError(absl::StrCat("no input ", p.name));
      buffers[p.name] = it->second;
    } else {
      buffers[p.name] = ir::HostBuffer::Zeros(p.dtype, p.shape);
    }
  }
  absl::Status st = ir::Interpret(nest, buffers);
  if (!st.ok()) return st;
  return buffers;
}

/// Largest |a - b| / max(1, |b|) over the output buffers of `dag` (reference `ref`).
inline double MaxRelError(const ir::ComputeDAG& dag, const ir::BufferMap& got,
                          const ir::BufferMap& ref) {
  double worst = 0;
  for (int id : dag.output_ids()) {
    const std::string& name = dag.stage(id).name();
    const ir::HostBuffer& a = got.at(name);
    const ir::HostBuffer& b = ref.at(name);
    if (a.data.size() != b.data.size()) return INFINITY;
    for (size_t i = 0; i < a.data.size(); ++i) {
      double d = std::fabs(a.data[i] - b.data[i]) / std::max(1.0, std::fabs(b.data[i]));
      if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
  }
  return worst;
}

/// Runs a lowered nest on random inputs of `seed` and returns MaxRelError of its outputs against
/// the float64 reference of `dag`. Errors: the interpreter's and the reference's.
inline absl::StatusOr<double> RelErrorToFloat64(const ir::ComputeDAG& dag, const ir::LoopNest& nest,
                                                uint64_t seed) {
  const ir::BufferMap inputs = ir::MakeRandomInputs(dag, seed);
  absl::StatusOr<ir::BufferMap> got = RunLowered(nest, inputs);
  if (!got.ok()) return got.status();
  absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs, ir::Precision::kFloat64);
  if (!ref.ok()) return ref.status();
  return MaxRelError(dag, *got, *ref);
}

/// Lowers `state`, runs it on seeded random inputs, and compares with ir::RunReference: exactly
/// when `exact`, else within 1e-5 relative.
inline void ExpectMatchesReference(const ir::ComputeDAG& dag, const State& state,
                                   const Target& target, bool exact, uint64_t seed = 7) {
  absl::StatusOr<LoweredKernel> k = Lower(dag, state, target);
  ASSERT_TRUE(k.ok()) << k.status() << "\n" << state.ToString();
  ir::BufferMap inputs = ir::MakeRandomInputs(dag, seed);
  absl::StatusOr<ir::BufferMap> got = RunLowered(k->nest, inputs);
  ASSERT_TRUE(got.ok()) << got.status() << "\n" << k->nest;
  absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  double err = MaxRelError(dag, *got, *ref);
  if (exact) {
    EXPECT_EQ(err, 0.0) << k->nest;
  } else {
    EXPECT_LE(err, 1e-5) << k->nest;
  }
}

/// Names of the local-scope allocations in a nest, in pre-order.
inline std::vector<std::string> LocalAllocations(const ir::Stmt& s) {
  class V : public ir::StmtVisitor {
   public:
    std::vector<std::string> names;

   protected:
    void VisitAllocate(const ir::AllocateNode* op, const ir::Stmt& s) override {
      if (op->buffer.scope == ir::MemoryScope::kLocal) names.push_back(op->buffer.name);
      ir::StmtVisitor::VisitAllocate(op, s);
    }
  };
  V v;
  v.Visit(s);
  return v.names;
}

/// A cuda target of `arch` with the default (H200) limits.
inline Target CudaTarget(const std::string& arch = "sm_90") {
  Target t;
  t.kind = TargetKind::kCuda;
  t.arch = arch;
  return t;
}

/// The registry's operator `op` (CHECK-fails on a bad test case).
inline ir::ComputeDAG BuildOpOrDie(const std::string& op, std::vector<std::vector<int64_t>> shapes,
                                   ir::ScalarType dtype,
                                   std::map<std::string, std::string> attrs = {}) {
  ir::OpArgs args;
  args.shapes = std::move(shapes);
  args.dtype = dtype;
  args.attrs = std::move(attrs);
  absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp(op, args);
  CHECK(dag.ok()) << dag.status();
  return *std::move(dag);
}

/// The id of the state's first sum reduction (the stage a tensor_core step takes), -1 if none.
inline int SumReductionStage(const State& s) {
  for (int i = 0; i < s.num_stages(); ++i) {
    if (s.stage(i).op->reduce == ir::ReduceKind::kSum) return i;
  }
  return -1;
}

/// An operator, its input shapes and attributes.
struct OpCase {
  std::string op;
  std::vector<std::vector<int64_t>> shapes;
  std::map<std::string, std::string> attrs;
};

/// matmul m×n×k with each operand transposed or not at random (all four layouts).
inline OpCase RandomLayoutMatmul(std::mt19937_64& rng, int64_t m, int64_t n, int64_t k) {
  const bool ta = rng() & 1, tb = rng() & 1;
  OpCase c;
  c.op = "matmul";
  c.attrs = {{"transpose_a", ta ? "true" : "false"}, {"transpose_b", tb ? "true" : "false"}};
  c.shapes = {ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
              tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}};
  return c;
}

/// A tensor_core step of `kind` with a block tile of bm x bn x bk, warp (wgmma: warpgroup) tiles
/// of wm x wn, a 3-stage ring and no padding; stage, instruction and repack left to the caller.
inline TensorCoreStep TileStep(const std::string& kind, int64_t bm, int64_t bn, int64_t bk,
                               int64_t wm, int64_t wn) {
  TensorCoreStep t;
  t.kind = kind;
  t.block_m = bm;
  t.block_n = bn;
  t.block_k = bk;
  t.warp_m = wm;
  t.warp_n = wn;
  t.pipeline = 3;
  t.pad = 0;
  return t;
}

/// For random valid tensor-core steps: whether `k` lowered. A refusal is expected to be one of
/// the limits a valid step may still meet (the wgmma tiles' 1024-byte rule, shared memory, and
/// with `tma` the operands a TMA box cannot take).
inline bool LoweredOrWithinLimits(const absl::StatusOr<LoweredKernel>& k, bool tma = false) {
  if (k.ok()) return true;
  const std::string why(k.status().message());
  EXPECT_TRUE(why.find("wgmma operand") != std::string::npos ||
              why.find("shared memory") != std::string::npos ||
              (tma && why.find("tma: operand") != std::string::npos))
      << why;
  return false;
}

/// One random tensor-core problem (an operator of the registry) and its step.
struct TensorCoreCase {
  std::string op;
  std::vector<std::vector<int64_t>> shapes;
  std::map<std::string, std::string> attrs;
  ir::ScalarType dtype;
  TensorCoreStep step;
};

/// Shrinks a drawn warpgroup tiling until its accumulators fit what a consumer thread of its
/// block gets (the step's register rule, schedule::WgmmaThreadRegisters): first one warpgroup
/// tile per block, then narrower warpgroup tiles.
inline void FitWgmmaRegisters(TensorCoreStep* t) {
  auto needs = [&] { return schedule::WgmmaAccumulators(*t) + schedule::kWgmmaRegisterOverhead; };
  while (needs() > schedule::WgmmaThreadRegisters(*t)) {
    if (t->block_m > t->warp_m) {
      t->block_m = t->warp_m;
    } else if (t->block_n > t->warp_n) {
      t->block_n = t->warp_n;
    } else if (t->warp_n > 8) {
      t->warp_n = t->block_n = std::max<int64_t>(8, t->warp_n / 2 / 8 * 8);
    } else {
      return;
    }
  }
}

/// `t` applied with the most epilogue stages that apply (3 down to 0): a fused operator's bias
/// and activation join the accumulators where the step takes them. Errors: the last ApplyStep's.
inline absl::StatusOr<State> ApplyWithEpilogue(const State& s, TensorCoreStep t) {
  absl::Status last;
  for (int e = 3; e >= 0; --e) {
    t.epilogue = e;
    absl::StatusOr<State> out = ApplyStep(s, t);
    if (out.ok()) return out;
    last = out.status();
  }
  return last;
}

/// One of the four mma kinds drawn uniformly (one draw of `rng`): f16, bf16, tf32x3 or tf32,
/// written into t->kind. Returns the element type its operands have (float16, bfloat16, float32).
inline ir::ScalarType DrawMmaKind(std::mt19937_64& rng, TensorCoreStep* t) {
  static const char* const kKinds[] = {"f16", "bf16", "tf32x3", "tf32"};
  const uint64_t k = rng() % 4;
  t->kind = kKinds[k];
  return k == 0   ? ir::ScalarType::kFloat16
         : k == 1 ? ir::ScalarType::kBFloat16
                  : ir::ScalarType::kFloat32;
}

/// The largest relative error to float64 the tensor-core tests allow a kernel of t's kind on
/// operands of `dtype`: one-pass TF32 2e-2, 3xTF32 1e-4 (float32's), float16 2e-3 and bfloat16
/// 1.6e-2 (their rounded inputs, float32 accumulation).
inline double TensorCoreTolerance(const TensorCoreStep& t, ir::ScalarType dtype) {
  if (t.kind == "tf32") return 2e-2;
  if (t.kind == "tf32x3") return 1e-4;
  return dtype == ir::ScalarType::kFloat16 ? 2e-3 : 1.6e-2;
}

}  // namespace tilesearch::schedule::testing
