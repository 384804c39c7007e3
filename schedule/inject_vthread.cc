// Virtual-thread injection (TVM's InjectVirtualThread, simplified to the nests our lowering makes).
//
// A vthread loop of extent V stands for V virtual threads inside each real thread: the Ansor
// sketch binds the second space tile level to it so that one thread computes V sub-tiles that sit
// far apart (stride = threads × inner tile), which keeps a warp's shared-memory reads contiguous.
// Run as a plain loop around the whole thread program, every virtual thread would re-fetch the
// block's shared tiles (the fetch does not depend on the vthread variable) and pass every barrier
// V times. This pass pushes the loop inward instead:
//   - statements that do not use the variable and rewrite nothing they read (shared fetches,
//     barriers) run once;
//   - sequences are split (loop fission) and the loop goes into each part;
//   - loops and guards that do not depend on the variable are interchanged with it;
//   - a buffer allocated under the loop gets a leading dimension of extent V (one copy per virtual
//     thread), indexed by the variable;
//   - what is left (a store, a vectorized loop, a guard on the variable) is wrapped in the loop,
//     unrolled, so the virtual threads' statements interleave at the innermost level and share the
//     fragments they load (register reuse across sub-tiles).
// Fission assumes the virtual threads, like real ones, do not race: a statement of one virtual
// thread does not read what a later statement of another writes without a barrier between them.
// Lowering only makes such programs, and every measured candidate is checked against the
// unscheduled program, which would catch a violation.
#include <set>
#include <string>
#include <vector>

#include "schedule/lower_internal.h"

namespace tilesearch::schedule::lower_internal {
namespace {

using ir::Expr;
using ir::ForKind;
using ir::Stmt;

bool ExprUses(const Expr& e, const std::string& var) {
  for (const std::string& n : VarsOf(e)) {
    if (n == var) return true;
  }
  return false;
}

// Whether a statement mentions the variable, or contains something the pass does not move.
class UseFinder : public ir::StmtVisitor {
 public:
  explicit UseFinder(std::string var) : var_(std::move(var)) {}
  bool uses = false;
  bool has_evaluate = false;

  void VisitExpr(const Expr& e) override {
    if (!uses) uses = ExprUses(e, var_);
  }

 protected:
  void VisitEvaluate(const ir::EvaluateNode* op, const Stmt& s) override {
    has_evaluate = true;
    ir::StmtVisitor::VisitEvaluate(op, s);
  }
  // Async-copy groups count per thread: a vthread loop holding one stays a plain loop.
  void VisitAsyncGroup(const ir::AsyncGroupNode*, const Stmt&) override { has_evaluate = true; }

 private:
  std::string var_;
};

bool Uses(const Stmt& s, const std::string& var) {
  UseFinder f(var);
  f.Visit(s);
  return f.uses;
}

// Buffers read by Loads in an expression.
class LoadedBuffers : public ir::ExprVisitor {
 public:
  std::set<std::string> names;

 protected:
  void VisitLoad(const ir::LoadNode* op, const Expr& e) override {
    names.insert(op->buffer);
    ir::ExprVisitor::VisitLoad(op, e);
  }
};

// True when running `s` once has the effect of running it V times in a row: no store reads the
// buffer it writes (no accumulation) and nothing opaque (Evaluate) is inside.
class RunsOnceChecker : public ir::StmtVisitor {
 public:
  bool ok = true;

 protected:
  void VisitStore(const ir::StoreNode* op, const Stmt&) override {
    LoadedBuffers lb;
    for (const Expr& i : op->indices) lb.Visit(i);
    lb.Visit(op->value);
    if (lb.names.count(op->buffer)) ok = false;
  }
  void VisitEvaluate(const ir::EvaluateNode*, const Stmt&) override { ok = false; }
  void VisitAsyncGroup(const ir::AsyncGroupNode*, const Stmt&) override { ok = false; }
};

bool RunsOnce(const Stmt& s) {
  RunsOnceChecker c;
  c.Visit(s);
  return c.ok;
}

// True when every store to `buffer` in `s` is independent of `var` and does not read `buffer`:
// all virtual threads would write the same values, so one copy serves them.
class StoreChecker : public ir::StmtVisitor {
 public:
  StoreChecker(const std::string& buffer, const std::string& var) : buffer_(buffer), var_(var) {}
  bool alike = true;

 protected:
  void VisitStore(const ir::StoreNode* op, const Stmt& s) override {
    if (op->buffer != buffer_) return;
    if (Uses(s, var_) || !RunsOnce(s)) alike = false;
  }

 private:
  const std::string& buffer_;
  const std::string& var_;
};

bool FilledAlike(const Stmt& body, const std::string& buffer, const std::string& var) {
  StoreChecker c(buffer, var);
  c.Visit(body);
  return c.alike;
}

// Prepends `v` to the indices of every Store to `buffer` (Loads: lower_internal::RewriteLoads).
class LeadingStoreIndexAdder : public ir::StmtMutator {
 public:
  LeadingStoreIndexAdder(const std::string& buffer, const Expr& v) : buffer_(buffer), v_(v) {}

 protected:
  Stmt MutateStore(const ir::StoreNode* op, const Stmt& s) override {
    if (op->buffer != buffer_) return s;
    std::vector<Expr> idx{v_};
    idx.insert(idx.end(), op->indices.begin(), op->indices.end());
    return ir::StoreNode::Make(op->buffer, std::move(idx), op->value, op->async_copy);
  }

 private:
  const std::string& buffer_;
  const Expr& v_;
};

// `s` with `v` prepended to every index of `buffer` (its allocation got a leading dimension).
Stmt AddLeadingIndex(const Stmt& s, const std::string& buffer, const Expr& v) {
  LeadingStoreIndexAdder stores(buffer, v);
  return RewriteLoads(stores.Mutate(s), buffer, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> out{v};
    out.insert(out.end(), idx.begin(), idx.end());
    return out;
  });
}

class VThreadInjector : public ir::StmtMutator {
 protected:
  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    Stmt m = ir::StmtMutator::MutateFor(op, s);  // inner vthread loops first
    const auto* loop = m.as<ir::ForNode>();
    if (loop->for_kind != ForKind::kVThread) return m;
    UseFinder f(loop->var_name());
    f.Visit(loop->body);
    // Cross-thread reductions (Evaluate: shuffles) and async-copy groups keep the plain loop.
    if (f.has_evaluate) {
      return ir::ForNode::Make(loop->var, loop->min, loop->extent, ForKind::kSerial, loop->body);
    }
    return Push(*loop, loop->body);
  }

 private:
  static Stmt Wrap(const ir::ForNode& v, const Stmt& s) {
    const bool leaf = s.as<ir::StoreNode>() != nullptr;
    return ir::ForNode::Make(v.var, v.min, v.extent, leaf ? ForKind::kUnrolled : ForKind::kSerial,
                             s);
  }

  // A statement equivalent to `for v.var in v's range { s }`.
  Stmt Push(const ir::ForNode& v, const Stmt& s) {
    if (!s.defined()) return s;
    const std::string& name = v.var_name();
    if (!Uses(s, name)) return RunsOnce(s) ? s : Wrap(v, s);
    if (const auto* seq = s.as<ir::SeqNode>()) {
      std::vector<Stmt> parts;
      for (const Stmt& c : seq->stmts) parts.push_back(Push(v, c));
      return ir::SeqNode::Make(std::move(parts));
    }
    if (const auto* loop = s.as<ir::ForNode>()) {
      if (loop->for_kind == ForKind::kVectorized || ExprUses(loop->extent, name) ||
          ExprUses(loop->min, name)) {
        return Wrap(v, s);
      }
      return ir::ForNode::Make(loop->var, loop->min, loop->extent, loop->for_kind,
                               Push(v, loop->body));
    }
    if (const auto* alloc = s.as<ir::AllocateNode>()) {
      // A buffer every virtual thread fills with the same values (a shared tile) stays one;
      // any other gets one copy per virtual thread.
      if (FilledAlike(alloc->body, alloc->buffer.name, name)) {
        return ir::AllocateNode::Make(alloc->buffer, Push(v, alloc->body));
      }
      ir::BufferDecl decl = alloc->buffer;
      auto extent = ir::AsConstInt(v.extent);
      if (!extent) return Wrap(v, s);
      decl.shape.insert(decl.shape.begin(), *extent);
      return ir::AllocateNode::Make(
          decl, Push(v, AddLeadingIndex(alloc->body, decl.name, v.var - v.min)));
    }
    if (const auto* guard = s.as<ir::IfThenElseNode>()) {
      if (ExprUses(guard->cond, name)) return Wrap(v, s);
      return ir::IfThenElseNode::Make(guard->cond, Push(v, guard->then_case),
                                      Push(v, guard->else_case));
    }
    return Wrap(v, s);
  }
};

}  // namespace

Stmt InjectVirtualThreads(const Stmt& kernel) {
  VThreadInjector inj;
  return inj.Mutate(kernel);
}

}  // namespace tilesearch::schedule::lower_internal
