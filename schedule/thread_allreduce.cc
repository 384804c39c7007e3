// Cross-thread reduction: a reduce iterator bound to threadIdx (TVM's LowerThreadAllreduce, in its
// simplest shared-memory form).
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

}  // namespace

Stmt BuildAllReduce(const AllReduceSpec& spec,
                    const std::function<std::string(const std::string&)>& fresh) {
  CHECK(spec.thread_loop >= 0 && spec.thread_loop < static_cast<int>(spec.reduce_loops.size()))
      << "cross-thread reduction of '" << spec.stage << "' without its thread loop";
  const LoopInfo& tl = spec.reduce_loops[spec.thread_loop];
  const int64_t threads = tl.extent;

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
