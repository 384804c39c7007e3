#include "ir/lower_naive.h"

#include <set>

#include "base/status.h"

namespace tilesearch::ir {
namespace {

// Compute bodies load tensors (Loads carry a producer); in a loop nest a Load names a buffer only.
class DropProducers : public ExprMutator {
 protected:
  Expr MutateLoad(const LoadNode* op, const Expr& e) override {
    std::vector<Expr> indices;
    bool changed = op->producer != nullptr;
    for (const Expr& i : op->indices) {
      indices.push_back(Mutate(i));
      changed |= !indices.back().same_as(i);
    }
    if (!changed) return e;
    return LoadNode::Make(op->type, op->buffer, std::move(indices));
  }
};

Expr ToLoopNestExpr(const Expr& e) {
  DropProducers mutator;
  return mutator.Mutate(e);
}

std::vector<Expr> AxisVars(const std::vector<IterVar>& axes) {
  std::vector<Expr> vars;
  for (const IterVar& iv : axes) vars.push_back(iv.var());
  return vars;
}

// Wraps `body` in serial loops over `axes`, the first axis outermost.
Stmt WrapLoops(const std::vector<IterVar>& axes, Stmt body) {
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
    body = ForNode::Make(it->var(), IntConst(0), IntConst(it->extent), ForKind::kSerial,
                         std::move(body));
  }
  return body;
}

// The perfect nest computing one stage at root.
Stmt StageNest(const TensorNode& t) {
  const std::vector<Expr> out_index = AxisVars(t.axes);
  if (t.reduce == ReduceKind::kNone) {
    return WrapLoops(t.axes, StoreNode::Make(t.name, out_index, ToLoopNestExpr(t.body)));
  }
  Stmt init = StoreNode::Make(t.name, out_index, ToLoopNestExpr(t.init));
  Expr acc = LoadNode::Make(t.dtype, t.name, out_index);
  Stmt update =
      StoreNode::Make(t.name, out_index, ReduceCombine(t.reduce, acc, ToLoopNestExpr(t.body)));
  return WrapLoops(t.axes, SeqNode::Make({init, WrapLoops(t.reduce_axes, update)}));
}

BufferDecl Decl(const Tensor& t) {
  return BufferDecl{t.name(), t.dtype(), t.shape(), MemoryScope::kGlobal};
}

}  // namespace

absl::StatusOr<LoopNest> LowerNaive(const ComputeDAG& dag) {
  if (dag.output_ids().empty()) {
    return absl::InvalidArgumentError("cannot lower a compute DAG without outputs");
  }
  LoopNest nest;
  nest.name = dag.stage(dag.output_ids().back()).name();
  for (int id : dag.input_ids()) nest.params.push_back(Decl(dag.stage(id)));
  nest.num_inputs = static_cast<int>(dag.input_ids().size());
  const std::set<int> outputs(dag.output_ids().begin(), dag.output_ids().end());
  for (int id : dag.output_ids()) nest.params.push_back(Decl(dag.stage(id)));

  std::vector<Stmt> stages;
  std::vector<BufferDecl> intermediates;
  for (int id = 0; id < dag.num_stages(); ++id) {
    const Tensor& t = dag.stage(id);
    if (t->is_placeholder) continue;
    stages.push_back(StageNest(*t.node()));
    if (!outputs.count(id)) intermediates.push_back(Decl(t));
  }
  Stmt body = SeqNode::Make(std::move(stages));
  for (auto it = intermediates.rbegin(); it != intermediates.rend(); ++it) {
    body = AllocateNode::Make(*it, std::move(body));
  }
  nest.body = std::move(body);
  return nest;
}

}  // namespace tilesearch::ir
