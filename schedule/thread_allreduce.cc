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
Stmt BuildWarpAllReduce(const AllReduceSpec& spec,
                        const std::function<std::string(const std::string&)>& fresh) {
  const LoopInfo& tl = spec.reduce_loops[spec.thread_loop];
  const int64_t threads = tl.extent;
  const int64_t warps = threads / kWarp;
  int64_t warps_pow2 = 1;
  while (warps_pow2 < warps) warps_pow2 *= 2;

  std::vector<Expr> group_index;
  std::vector<int64_t> group_shape;
  for (const LoopInfo& g : spec.thread_groups) {
    group_shape.push_back(g.extent);
    group_index.push_back(ir::MakeVar(g.var));
  }
  auto slot = [&](Expr t) {
    std::vector<Expr> idx = group_index;
    idx.push_back(std::move(t));
    return idx;
  };
  auto shared = [&](const std::string& name, int64_t last) {
    ir::BufferDecl d;
    d.name = name;
    d.dtype = spec.dtype;
    d.scope = ir::MemoryScope::kShared;
    d.shape = group_shape;
    d.shape.push_back(last);
    return d;
  };
  const ir::BufferDecl xchg = shared(fresh(spec.stage + ".shfl"), threads);
  const ir::BufferDecl partials = shared(fresh(spec.stage + ".warp_partials"), warps);
  ir::BufferDecl acc;
  acc.name = fresh(spec.stage + ".red_local");
  acc.dtype = spec.dtype;
  acc.scope = ir::MemoryScope::kLocal;
  acc.shape = {1};
  const Expr acc_load = ir::LoadNode::Make(spec.dtype, acc.name, {ir::IntConst(0)});
  auto set_acc = [&](Expr v) { return ir::StoreNode::Make(acc.name, {ir::IntConst(0)}, v); };
  auto thread_loop = [&](const std::string& var, Stmt body) {
    return ir::ForNode::Make(ir::MakeVar(var), ir::IntConst(0), ir::IntConst(threads), tl.kind,
                             std::move(body));
  };

  std::vector<Stmt> seq;
  // 1. Each thread folds its share into acc (from the combiner's identity).
  Stmt update = Guarded(spec.guards, set_acc(ir::ReduceCombine(spec.kind, acc_load, spec.body)));
  for (int i = static_cast<int>(spec.reduce_loops.size()) - 1; i >= 0; --i) {
    if (i == spec.thread_loop) continue;
    const LoopInfo& l = spec.reduce_loops[i];
    update = ir::ForNode::Make(ir::MakeVar(l.var), ir::IntConst(0), ir::IntConst(l.extent), l.kind,
                               update);
  }
  seq.push_back(thread_loop(
      tl.var, ir::SeqNode::Make({set_acc(ir::ReduceIdentity(spec.kind, spec.dtype)), update})));

  // Butterflies over lanes with offsets first_offset, first_offset / 2, ..., 1.
  auto butterflies = [&](int64_t first_offset) {
    for (int64_t m = first_offset; m >= 1; m /= 2) {
      const std::string ts = fresh(tl.var + ".shfl_put");
      const std::string tr = fresh(tl.var + ".shfl_get");
      const Expr t = ir::MakeVar(tr);
      const Expr partner =
          t + ir::IntConst(m) - ir::IntConst(2 * m) * ((t / ir::IntConst(m)) % ir::IntConst(2));
      seq.push_back(
          thread_loop(ts, ir::StoreNode::Make(xchg.name, slot(ir::MakeVar(ts)), acc_load)));
      seq.push_back(ir::BarrierNode::Make());
      seq.push_back(thread_loop(
          tr, set_acc(ir::ReduceCombine(
                  spec.kind, acc_load, ir::LoadNode::Make(spec.dtype, xchg.name, slot(partner))))));
      seq.push_back(ir::BarrierNode::Make());
    }
  };
  // 2. Within each warp: afterwards every lane holds its warp's total.
  butterflies(kWarp / 2);
  // 3. Across warps: lane 0 of each warp publishes; every warp combines the totals again.
  if (warps > 1) {
    const std::string tp = fresh(tl.var + ".warp_put");
    const Expr p = ir::MakeVar(tp);
    seq.push_back(thread_loop(
        tp, ir::IfThenElseNode::Make(
                p % ir::IntConst(kWarp) == ir::IntConst(0),
                ir::StoreNode::Make(partials.name, slot(p / ir::IntConst(kWarp)), acc_load))));
    seq.push_back(ir::BarrierNode::Make());
    const std::string tg = fresh(tl.var + ".warp_get");
    const Expr lane = ir::MakeVar(tg) % ir::IntConst(warps_pow2);
    Expr value = ir::LoadNode::Make(spec.dtype, partials.name, slot(lane));
    if (warps_pow2 != warps) {
      value =
          ir::Select(lane < ir::IntConst(warps), value, ir::ReduceIdentity(spec.kind, spec.dtype));
    }
    seq.push_back(thread_loop(tg, set_acc(value)));
    butterflies(warps_pow2 / 2);
  }
  // 4. The result (init combined with the total) is stored by thread 0, or by every thread when it
  // lives in per-thread memory; a barrier publishes it (and frees the partials for the next use).
  const std::string t3 = fresh(tl.var + ".store");
  std::vector<Expr> store_conds;
  if (!spec.store_from_all_threads) store_conds.push_back(ir::MakeVar(t3) == ir::IntConst(0));
  store_conds.insert(store_conds.end(), spec.space_guards.begin(), spec.space_guards.end());
  seq.push_back(thread_loop(
      t3, Guarded(store_conds,
                  ir::StoreNode::Make(spec.buffer, spec.store_indices,
                                      ir::ReduceCombine(spec.kind, spec.init, acc_load)))));

  Stmt out = ir::AllocateNode::Make(acc, ir::SeqNode::Make(std::move(seq)));
  out = ir::AllocateNode::Make(xchg, out);
  if (warps > 1) out = ir::AllocateNode::Make(partials, out);
  // The closing barrier sits outside the allocations so that it merges with a barrier the
  // consumer's lowering places right after (RemoveRedundantBarriers).
  return ir::SeqNode::Make({out, ir::BarrierNode::Make()});
}

}  // namespace

Stmt BuildAllReduce(const AllReduceSpec& spec,
                    const std::function<std::string(const std::string&)>& fresh) {
  CHECK(spec.thread_loop >= 0 && spec.thread_loop < static_cast<int>(spec.reduce_loops.size()))
      << "cross-thread reduction of '" << spec.stage << "' without its thread loop";
  const LoopInfo& tl = spec.reduce_loops[spec.thread_loop];
  const int64_t threads = tl.extent;
  if (tl.kind == ir::ForKind::kThreadIdxX && threads % kWarp == 0) {
    return BuildWarpAllReduce(spec, fresh);
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
