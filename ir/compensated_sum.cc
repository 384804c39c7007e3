#include "ir/compensated_sum.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tilesearch::ir {
namespace {

// Every buffer name the nest declares (parameters and allocations), so that fresh names differ.
class BufferNames : public StmtVisitor {
 public:
  explicit BufferNames(const LoopNest& nest) {
    for (const BufferDecl& p : nest.params) names_.insert(p.name);
    Visit(nest.body);
  }
  std::set<std::string> take() { return std::move(names_); }

 protected:
  void VisitAllocate(const AllocateNode* op, const Stmt& s) override {
    names_.insert(op->buffer.name);
    StmtVisitor::VisitAllocate(op, s);
  }

 private:
  std::set<std::string> names_;
};

// True when `e` mentions a variable named in `vars`.
bool UsesAny(const Expr& e, const std::vector<std::string>& vars) {
  class Finder : public ExprVisitor {
   public:
    explicit Finder(const std::vector<std::string>& v) : vars_(v) {}
    bool found = false;

   protected:
    void VisitVar(const VarNode* op, const Expr& e) override {
      for (const std::string& v : vars_) found |= op->name == v;
      ExprVisitor::VisitVar(op, e);
    }

   private:
    const std::vector<std::string>& vars_;
  };
  Finder f(vars);
  f.Visit(e);
  return f.found;
}

// An accumulation found at a loop chain: the store and the term it adds.
struct Accumulation {
  const StoreNode* store = nullptr;
  Expr current;  // the Load X[idx] the store adds to
  Expr term;     // t
};

// The accumulation at the bottom of the serial / unrolled loop chain starting at `loop`, if any.
bool MatchChain(const ForNode* loop, Accumulation* out) {
  std::vector<std::string> vars;
  Stmt s;
  for (const ForNode* f = loop; f != nullptr; f = s.as<ForNode>()) {
    if (f->for_kind != ForKind::kSerial && f->for_kind != ForKind::kUnrolled) return false;
    vars.push_back(f->var_name());
    s = f->body;
  }
  const StoreNode* store = s.as<StoreNode>();
  if (store == nullptr || store->async_copy) return false;
  const AddNode* add = store->value.as<AddNode>();
  if (add == nullptr || add->type != ScalarType::kFloat32) return false;
  for (int side = 0; side < 2; ++side) {
    const Expr& current = side == 0 ? add->a : add->b;
    const LoadNode* load = current.as<LoadNode>();
    if (load == nullptr || load->buffer != store->buffer ||
        load->indices.size() != store->indices.size()) {
      continue;
    }
    bool same = true;
    for (size_t i = 0; i < load->indices.size(); ++i) {
      same &= StructurallyEqual(load->indices[i], store->indices[i]) &&
              !UsesAny(store->indices[i], vars);
    }
    if (!same) continue;
    *out = {store, current, side == 0 ? add->b : add->a};
    return true;
  }
  return false;
}

// Rebuilds the chain at `loop` around `body` (the loops keep their variables, bounds and kinds).
Stmt RebuildChain(const ForNode* loop, Stmt body) {
  if (const ForNode* inner = loop->body.as<ForNode>()) body = RebuildChain(inner, std::move(body));
  return ForNode::Make(loop->var, loop->min, loop->extent, loop->for_kind, std::move(body));
}

class Compensator : public StmtMutator {
 public:
  explicit Compensator(std::set<std::string> names) : names_(std::move(names)) {}

 protected:
  Stmt MutateFor(const ForNode* op, const Stmt& s) override {
    Accumulation acc;
    if (!MatchChain(op, &acc)) return StmtMutator::MutateFor(op, s);
    const std::string c = Fresh(acc.store->buffer + ".kahan_c");
    const std::string y = Fresh(acc.store->buffer + ".kahan_y");
    const std::string t = Fresh(acc.store->buffer + ".kahan_s");
    constexpr ScalarType f32 = ScalarType::kFloat32;
    auto at = [&](const std::string& b) { return LoadNode::Make(f32, b, {IntConst(0)}); };
    auto set = [&](const std::string& b, Expr v) {
      return StoreNode::Make(b, {IntConst(0)}, std::move(v));
    };
    Stmt step = SeqNode::Make({
        set(y, acc.term - at(c)),
        set(t, acc.current + at(y)),
        set(c, (at(t) - acc.current) - at(y)),
        StoreNode::Make(acc.store->buffer, acc.store->indices, at(t)),
    });
    Stmt out = SeqNode::Make({set(c, FloatConst(0.0)), RebuildChain(op, std::move(step))});
    for (const std::string& b : {t, y, c}) {
      out = AllocateNode::Make(BufferDecl{b, f32, {1}, MemoryScope::kLocal}, std::move(out));
    }
    return out;
  }

 private:
  std::string Fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; names_.count(name) != 0; ++i) name = absl::StrCat(base, i);
    names_.insert(name);
    return name;
  }
  std::set<std::string> names_;
};

}  // namespace

LoopNest CompensateFloatSums(const LoopNest& nest) {
  Compensator compensator(BufferNames(nest).take());
  LoopNest out = nest;
  out.body = compensator.Mutate(nest.body);
  return out;
}

}  // namespace tilesearch::ir
