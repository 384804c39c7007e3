// Cross-thread reduction: a reduce iterator bound to threadIdx (TVM's LowerThreadAllreduce). Two
// forms: warp butterflies (threadIdx.x extents that are multiples of the warp) whose exchanges
// codegen turns into shfl.sync.bfly, and the plain shared-memory form for any other thread count.
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/lower_internal.h"

namespace tilesearch::schedule::lower_internal {
namespace {

using ir::Expr;
using ir::Stmt;

Expr AndAll(const std::vector<Expr>& conds) {
  Expr out;
  for (const Expr& c : conds) out = out.defined() ? (out && c) : c;
  return out;
}

Stmt Guarded(const std::vector<Expr>& conds, Stmt s) {
  Expr c = AndAll(conds);
  return c.defined() ? ir::IfThenElseNode::Make(c, std::move(s)) : s;
}

constexpr int64_t kWarp = 32;

// The block's threads combine their partials with butterflies: per step m, thread t combines its
// value with thread t ^ m's. In the loop nest an exchange is a window of four statements over a
// shared buffer named "*.shfl" (codegen/emitter.h: it becomes one shfl.sync.bfly):
//   for t: X[g, t] = acc[0];  barrier;  for t: acc[0] = combine(acc[0], X[g, t ^ m]);  barrier
// t ^ m is written with arithmetic: t + m - 2m * ((t / m) % 2).
class WarpAllReduce {
 public:
  WarpAllReduce(const AllReduceSpec& spec,
                const std::function<std::string(const std::string&)>& fresh)
      : spec_(spec),
        fresh_(fresh),
        tl_(spec.reduce_loops[spec.thread_loop]),
        threads_(tl_.extent),
        warps_(threads_ / kWarp) {
    while (warps_pow2_ < warps_) warps_pow2_ *= 2;
    for (const LoopInfo& g : spec.thread_groups) {
      group_shape_.push_back(g.extent);
      group_index_.push_back(ir::MakeVar(g.var));
    }
    xchg_ = Shared(fresh_(spec.stage + ".shfl"), threads_);
    partials_ = Shared(fresh_(spec.stage + ".warp_partials"), warps_);
    acc_.name = fresh_(spec.stage + ".red_local");
    acc_.dtype = spec.dtype;
    acc_.scope = ir::MemoryScope::kLocal;
    acc_.shape = {1};
    acc_load_ = ir::LoadNode::Make(spec.dtype, acc_.name, {ir::IntConst(0)});
  }

  Stmt Build() {
    FoldShares();
    // Within each warp: afterwards every lane holds its warp's total.
    Butterflies(kWarp / 2);
    if (warps_ > 1) CombineWarps();
    StoreResult();
    Stmt out = ir::AllocateNode::Make(acc_, ir::SeqNode::Make(std::move(seq_)));
    out = ir::AllocateNode::Make(xchg_, out);
    if (warps_ > 1) out = ir::AllocateNode::Make(partials_, out);
    // The closing barrier sits outside the allocations so that it merges with a barrier the
    // consumer's lowering places right after (RemoveRedundantBarriers).
    return ir::SeqNode::Make({out, ir::BarrierNode::Make()});
  }

 private:
  // Indices of thread `t`'s slot in a shared buffer: the thread group's, then `t`.
  std::vector<Expr> Slot(Expr t) const {
    std::vector<Expr> idx = group_index_;
    idx.push_back(std::move(t));
    return idx;
  }
  ir::BufferDecl Shared(const std::string& name, int64_t last) const {
    ir::BufferDecl d;
    d.name = name;
    d.dtype = spec_.dtype;
    d.scope = ir::MemoryScope::kShared;
    d.shape = group_shape_;
    d.shape.push_back(last);
    return d;
  }
  Stmt SetAcc(Expr v) const { return ir::StoreNode::Make(acc_.name, {ir::IntConst(0)}, v); }
  Stmt ThreadLoop(const std::string& var, Stmt body) const {
    return ir::ForNode::Make(ir::MakeVar(var), ir::IntConst(0), ir::IntConst(threads_), tl_.kind,
                             std::move(body));
  }

  // Each thread folds its share into acc (from the combiner's identity).
  void FoldShares() {
    Stmt update =
        Guarded(spec_.guards, SetAcc(ir::ReduceCombine(spec_.kind, acc_load_, spec_.body)));
    for (int i = static_cast<int>(spec_.reduce_loops.size()) - 1; i >= 0; --i) {
      if (i == spec_.thread_loop) continue;
      const LoopInfo& l = spec_.reduce_loops[i];
      update = ir::ForNode::Make(ir::MakeVar(l.var), ir::IntConst(0), ir::IntConst(l.extent),
                                 l.kind, update);
    }
    seq_.push_back(ThreadLoop(
        tl_.var, ir::SeqNode::Make({SetAcc(ir::ReduceIdentity(spec_.kind, spec_.dtype)), update})));
  }

  // Butterflies over lanes with offsets first_offset, first_offset / 2, ..., 1.
  void Butterflies(int64_t first_offset) {
    for (int64_t m = first_offset; m >= 1; m /= 2) {
      const std::string ts = fresh_(tl_.var + ".shfl_put");
      const std::string tr = fresh_(tl_.var + ".shfl_get");
      const Expr t = ir::MakeVar(tr);
      const Expr partner =
          t + ir::IntConst(m) - ir::IntConst(2 * m) * ((t / ir::IntConst(m)) % ir::IntConst(2));
      seq_.push_back(
          ThreadLoop(ts, ir::StoreNode::Make(xchg_.name, Slot(ir::MakeVar(ts)), acc_load_)));
      seq_.push_back(ir::BarrierNode::Make());
      seq_.push_back(ThreadLoop(
          tr,
          SetAcc(ir::ReduceCombine(spec_.kind, acc_load_,
                                   ir::LoadNode::Make(spec_.dtype, xchg_.name, Slot(partner))))));
      seq_.push_back(ir::BarrierNode::Make());
    }
  }

  // Across warps: lane 0 of each warp publishes; every warp combines the totals again.
  void CombineWarps() {
    const std::string tp = fresh_(tl_.var + ".warp_put");
    const Expr p = ir::MakeVar(tp);
    seq_.push_back(ThreadLoop(
        tp, ir::IfThenElseNode::Make(
                p % ir::IntConst(kWarp) == ir::IntConst(0),
                ir::StoreNode::Make(partials_.name, Slot(p / ir::IntConst(kWarp)), acc_load_))));
    seq_.push_back(ir::BarrierNode::Make());
    const std::string tg = fresh_(tl_.var + ".warp_get");
    const Expr lane = ir::MakeVar(tg) % ir::IntConst(warps_pow2_);
    Expr value = ir::LoadNode::Make(spec_.dtype, partials_.name, Slot(lane));
    if (warps_pow2_ != warps_) {
      value = ir::Select(lane < ir::IntConst(warps_), value,
                         ir::ReduceIdentity(spec_.kind, spec_.dtype));
    }
    seq_.push_back(ThreadLoop(tg, SetAcc(value)));
    Butterflies(warps_pow2_ / 2);
  }

  // The result (init combined with the total) is stored by thread 0, or by every thread when it
  // lives in per-thread memory; a barrier publishes it (and frees the partials for the next use).
  void StoreResult() {
    const std::string t3 = fresh_(tl_.var + ".store");
    std::vector<Expr> store_conds;
    if (!spec_.store_from_all_threads) store_conds.push_back(ir::MakeVar(t3) == ir::IntConst(0));
    store_conds.insert(store_conds.end(), spec_.space_guards.begin(), spec_.space_guards.end());
    seq_.push_back(ThreadLoop(
        t3, Guarded(store_conds,
                    ir::StoreNode::Make(spec_.buffer, spec_.store_indices,
                                        ir::ReduceCombine(spec_.kind, spec_.init, acc_load_)))));
  }

  const AllReduceSpec& spec_;
  const std::function<std::string(const std::string&)>& fresh_;
  const LoopInfo& tl_;     // the threadIdx-bound reduce loop
  const int64_t threads_;  // its extent
  const int64_t warps_;
  int64_t warps_pow2_ = 1;  // warps rounded up to a power of two
  std::vector<int64_t> group_shape_;
  std::vector<Expr> group_index_;
  ir::BufferDecl xchg_;      // the "*.shfl" exchange buffer
  ir::BufferDecl partials_;  // one total per warp
  ir::BufferDecl acc_;       // the thread's partial
  Expr acc_load_;
  std::vector<Stmt> seq_;
};

}  // namespace

Stmt BuildAllReduce(const AllReduceSpec& spec,
                    const std::function<std::string(const std::string&)>& fresh) {
  CHECK(spec.thread_loop >= 0 && spec.thread_loop < static_cast<int>(spec.reduce_loops.size()))
      << "cross-thread reduction of '" << spec.stage << "' without its thread loop";
  const LoopInfo& tl = spec.reduce_loops[spec.thread_loop];
  const int64_t threads = tl.extent;
  if (tl.kind == ir::ForKind::kThreadIdxX && threads % kWarp == 0) {
    return WarpAllReduce(spec, fresh).Build();
  }

  // Shared partials: one slot per thread of the reduction, per thread group.
  ir::BufferDecl partials;
  partials.name = fresh(spec.stage + ".red_shared");
  partials.dtype = spec.dtype;
  partials.scope = ir::MemoryScope::kShared;
  std::vector<Expr> group_index;
  for (const LoopInfo& g : spec.thread_groups) {
    partials.shape.push_back(g.extent);
    group_index.push_back(ir::MakeVar(g.var));
  }
  partials.shape.push_back(threads);
  auto slot = [&](Expr t) {
    std::vector<Expr> idx = group_index;
    idx.push_back(std::move(t));
    return idx;
  };

  // 1. Each thread folds its share into a local accumulator and publishes it.
  ir::BufferDecl acc;
  acc.name = fresh(spec.stage + ".red_local");
  acc.dtype = spec.dtype;
  acc.scope = ir::MemoryScope::kLocal;
  acc.shape = {1};
  Expr acc_load = ir::LoadNode::Make(spec.dtype, acc.name, {ir::IntConst(0)});
  Stmt update =
      Guarded(spec.guards, ir::StoreNode::Make(acc.name, {ir::IntConst(0)},
                                               ir::ReduceCombine(spec.kind, acc_load, spec.body)));
  for (int i = static_cast<int>(spec.reduce_loops.size()) - 1; i >= 0; --i) {
    if (i == spec.thread_loop) continue;
    const LoopInfo& l = spec.reduce_loops[i];
    update = ir::ForNode::Make(ir::MakeVar(l.var), ir::IntConst(0), ir::IntConst(l.extent), l.kind,
                               update);
  }
  Stmt partial = ir::AllocateNode::Make(
      acc, ir::SeqNode::Make({
               ir::StoreNode::Make(acc.name, {ir::IntConst(0)},
                                   ir::ReduceIdentity(spec.kind, spec.dtype)),
               update,
               ir::StoreNode::Make(partials.name, slot(ir::MakeVar(tl.var)), acc_load),
           }));
  Stmt phase1 = ir::ForNode::Make(ir::MakeVar(tl.var), ir::IntConst(0), ir::IntConst(threads),
                                  tl.kind, partial);

  // 2. Thread 0 combines init and the partials in thread order into slot 0.
  std::string t2 = fresh(tl.var + ".combine");
  std::string tk = fresh(spec.stage + ".red_k");
  ir::BufferDecl acc2 = acc;
  acc2.name = fresh(spec.stage + ".red_total");
  Expr acc2_load = ir::LoadNode::Make(spec.dtype, acc2.name, {ir::IntConst(0)});
  Stmt combine = ir::AllocateNode::Make(
      acc2,
      ir::SeqNode::Make({
          ir::StoreNode::Make(acc2.name, {ir::IntConst(0)}, spec.init),
          ir::ForNode::Make(
              ir::MakeVar(tk), ir::IntConst(0), ir::IntConst(threads), ir::ForKind::kSerial,
              ir::StoreNode::Make(acc2.name, {ir::IntConst(0)},
                                  ir::ReduceCombine(spec.kind, acc2_load,
                                                    ir::LoadNode::Make(spec.dtype, partials.name,
                                                                       slot(ir::MakeVar(tk)))))),
          ir::StoreNode::Make(partials.name, slot(ir::IntConst(0)), acc2_load),
      }));
  Stmt phase2 =
      ir::ForNode::Make(ir::MakeVar(t2), ir::IntConst(0), ir::IntConst(threads), tl.kind,
                        ir::IfThenElseNode::Make(ir::MakeVar(t2) == ir::IntConst(0), combine));

  // 3. The result is stored (by every thread when it lives in per-thread memory).
  std::string t3 = fresh(tl.var + ".store");
  std::vector<Expr> store_conds;
  if (!spec.store_from_all_threads) store_conds.push_back(ir::MakeVar(t3) == ir::IntConst(0));
  store_conds.insert(store_conds.end(), spec.space_guards.begin(), spec.space_guards.end());
  Stmt store = Guarded(
      store_conds,
      ir::StoreNode::Make(spec.buffer, spec.store_indices,
                          ir::LoadNode::Make(spec.dtype, partials.name, slot(ir::IntConst(0)))));
  Stmt phase3 =
      ir::ForNode::Make(ir::MakeVar(t3), ir::IntConst(0), ir::IntConst(threads), tl.kind, store);

  return ir::AllocateNode::Make(
      partials, ir::SeqNode::Make({phase1, ir::BarrierNode::Make(), phase2, ir::BarrierNode::Make(),
                                   phase3, ir::BarrierNode::Make()}));
}

}  // namespace tilesearch::schedule::lower_internal
