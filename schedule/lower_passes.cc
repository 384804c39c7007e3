// Passes over a lowered nest used by Lower: auto-unrolling, storage_align layouts, the final
// rewrite of Loads, and the check that every access names a buffer in scope.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/lower_internal.h"

namespace tilesearch::schedule::lower_internal {
namespace {

using ir::Expr;
using ir::ForKind;
using ir::Stmt;

// Number of stores one execution of `s` performs (auto_unroll_max_step counts these).
int64_t StepCount(const Stmt& s) {
  constexpr int64_t kMany = int64_t{1} << 40;
  if (!s.defined()) return 0;
  switch (s.kind()) {
    case ir::StmtKind::kFor: {
      const auto* op = s.as<ir::ForNode>();
      auto e = ir::AsConstInt(op->extent);
      int64_t body = StepCount(op->body);
      if (!e) return kMany;
      return std::min(kMany, *e * std::max<int64_t>(body, 1));
    }
    case ir::StmtKind::kSeq: {
      int64_t n = 0;
      for (const Stmt& c : s.as<ir::SeqNode>()->stmts) n = std::min(kMany, n + StepCount(c));
      return n;
    }
    case ir::StmtKind::kAllocate:
      return StepCount(s.as<ir::AllocateNode>()->body);
    case ir::StmtKind::kIfThenElse: {
      const auto* op = s.as<ir::IfThenElseNode>();
      return StepCount(op->then_case) + StepCount(op->else_case);
    }
    case ir::StmtKind::kBarrier:
      return 0;
    default:
      return 1;
  }
}

// pragma auto_unroll_max_step: serial loops of one stage whose whole execution performs at most
// `max_steps` stores become unrolled (TVM's UnrollLoop with auto_max_step).
class AutoUnroller : public ir::StmtMutator {
 public:
  AutoUnroller(const std::set<std::string>& own, int64_t max_steps)
      : own_(own), max_steps_(max_steps) {}

 protected:
  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    Stmt m = ir::StmtMutator::MutateFor(op, s);
    const auto* f = m.as<ir::ForNode>();
    if (f->for_kind != ForKind::kSerial || !own_.count(f->var_name())) return m;
    if (!ir::AsConstInt(f->extent) || StepCount(m) > max_steps_) return m;
    return ir::ForNode::Make(f->var, f->min, f->extent, ForKind::kUnrolled, f->body);
  }

 private:
  const std::set<std::string>& own_;
  int64_t max_steps_;
};

std::vector<Expr> AlignIndices(const Alignment& a, const std::vector<Expr>& idx) {
  std::vector<Expr> out(idx.begin(), idx.begin() + a.dim + 1);
  Expr lin;
  for (size_t d = a.dim + 1; d < idx.size(); ++d) {
    lin = lin.defined() ? lin * ir::IntConst(a.shape[d]) + idx[d] : idx[d];
  }
  out.push_back(lin);
  return out;
}

// Final rewrite of a lowered statement: padded layouts of storage-aligned buffers, and Loads no
// longer pointing at their producer tensors (loop-nest Loads name buffers only).
class Finalizer : public ir::StmtMutator {
 public:
  explicit Finalizer(const std::map<std::string, Alignment>& align)
      : exprs_(align), align_(align) {}
  Expr MutateExpr(const Expr& e) override { return exprs_.Mutate(e); }

 protected:
  Stmt MutateStore(const ir::StoreNode* op, const Stmt& s) override {
    Stmt m = ir::StmtMutator::MutateStore(op, s);
    const auto* st = m.as<ir::StoreNode>();
    auto it = align_.find(st->buffer);
    if (it == align_.end()) return m;
    return ir::StoreNode::Make(st->buffer, AlignIndices(it->second, st->indices), st->value,
                               st->async_copy);
  }
  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    Stmt body = Mutate(op->body);
    ir::BufferDecl decl = op->buffer;
    auto it = align_.find(decl.name);
    if (it == align_.end() && body.same_as(op->body)) return s;
    if (it != align_.end()) decl.shape = it->second.padded;
    return ir::AllocateNode::Make(decl, body);
  }

 private:
  class Exprs : public ir::ExprMutator {
   public:
    explicit Exprs(const std::map<std::string, Alignment>& align) : align_(align) {}

   protected:
    Expr MutateLoad(const ir::LoadNode* op, const Expr& e) override {
      std::vector<Expr> idx;
      bool changed = op->producer != nullptr;
      for (const Expr& i : op->indices) {
        idx.push_back(Mutate(i));
        changed |= !idx.back().same_as(i);
      }
      auto it = align_.find(op->buffer);
      if (!changed && it == align_.end()) return e;
      if (it != align_.end()) idx = AlignIndices(it->second, idx);
      return ir::LoadNode::Make(op->type, op->buffer, std::move(idx), nullptr);
    }

   private:
    const std::map<std::string, Alignment>& align_;
  };
  Exprs exprs_;
  const std::map<std::string, Alignment>& align_;
};

// Checks that every Load and Store names a parameter or an enclosing Allocate.
class ScopeChecker {
 public:
  explicit ScopeChecker(const std::vector<ir::BufferDecl>& params) {
    for (const auto& p : params) in_scope_.insert(p.name);
  }
  absl::Status Check(const Stmt& s) {
    if (!s.defined()) return absl::OkStatus();
    switch (s.kind()) {
      case ir::StmtKind::kFor:
        return Check(s.as<ir::ForNode>()->body);
      case ir::StmtKind::kSeq:
        for (const Stmt& c : s.as<ir::SeqNode>()->stmts) RETURN_IF_ERROR(Check(c));
        return absl::OkStatus();
      case ir::StmtKind::kStore: {
        const auto* op = s.as<ir::StoreNode>();
        if (!in_scope_.count(op->buffer)) return OutOfScope(op->buffer);
        for (const Expr& i : op->indices) RETURN_IF_ERROR(CheckExpr(i));
        return CheckExpr(op->value);
      }
      case ir::StmtKind::kAllocate: {
        const auto* op = s.as<ir::AllocateNode>();
        bool fresh = in_scope_.insert(op->buffer.name).second;
        RETURN_IF_ERROR(Check(op->body));
        if (fresh) in_scope_.erase(op->buffer.name);
        return absl::OkStatus();
      }
      case ir::StmtKind::kIfThenElse: {
        const auto* op = s.as<ir::IfThenElseNode>();
        RETURN_IF_ERROR(CheckExpr(op->cond));
        RETURN_IF_ERROR(Check(op->then_case));
        return Check(op->else_case);
      }
      case ir::StmtKind::kEvaluate:
        return CheckExpr(s.as<ir::EvaluateNode>()->value);
      case ir::StmtKind::kWarpMma: {
        const auto* op = s.as<ir::WarpMmaNode>();
        for (const std::string* b : {&op->acc, &op->a, &op->b}) {
          if (!in_scope_.count(*b)) return OutOfScope(*b);
        }
        return absl::OkStatus();
      }
      case ir::StmtKind::kWgmma: {
        const auto* op = s.as<ir::WgmmaNode>();
        for (const std::string* b : {&op->acc, &op->a, &op->b}) {
          if (!in_scope_.count(*b)) return OutOfScope(*b);
        }
        return absl::OkStatus();
      }
      case ir::StmtKind::kTmaLoad: {
        const auto* op = s.as<ir::TmaLoadNode>();
        for (const std::string* b : {&op->tensor_map, &op->dst, &op->barrier}) {
          if (!in_scope_.count(*b)) return OutOfScope(*b);
        }
        return absl::OkStatus();
      }
      case ir::StmtKind::kMbarrier: {
        const auto* op = s.as<ir::MbarrierNode>();
        if (!in_scope_.count(op->buffer)) return OutOfScope(op->buffer);
        return absl::OkStatus();
      }
      default:
        return absl::OkStatus();
    }
  }

 private:
  absl::Status CheckExpr(const Expr& e) {
    class Finder : public ir::ExprVisitor {
     public:
      explicit Finder(const std::set<std::string>& scope) : scope_(scope) {}
      std::string missing;

     protected:
      void VisitLoad(const ir::LoadNode* op, const Expr& e) override {
        if (missing.empty() && !scope_.count(op->buffer)) missing = op->buffer;
        ir::ExprVisitor::VisitLoad(op, e);
      }

     private:
      const std::set<std::string>& scope_;
    };
    Finder f(in_scope_);
    f.Visit(e);
    return f.missing.empty() ? absl::OkStatus() : OutOfScope(f.missing);
  }
  static absl::Status OutOfScope(const std::string& buffer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer '", buffer,
        "' is accessed outside the loop it is computed in (a reader is not inside the compute_at "
        "loop of '",
        buffer, "')"));
  }
  std::set<std::string> in_scope_;
};

}  // namespace

std::optional<Alignment> MakeAlignment(const std::vector<int64_t>& shape, int dim, int64_t factor,
                                       int64_t offset) {
  const int n = static_cast<int>(shape.size());
  if (dim < 0 || dim >= n - 1 || factor <= 0) return std::nullopt;
  int64_t stride = 1;
  for (int d = dim + 1; d < n; ++d) stride *= shape[d];
  int64_t pad = (((offset - stride) % factor) + factor) % factor;
  if (pad == 0) return std::nullopt;
  Alignment a;
  a.shape = shape;
  a.dim = dim;
  a.padded.assign(shape.begin(), shape.begin() + dim + 1);
  a.padded.push_back(stride + pad);
  return a;
}

Stmt AutoUnroll(const Stmt& s, const std::set<std::string>& loop_vars, int64_t max_steps) {
  AutoUnroller u(loop_vars, max_steps);
  return u.Mutate(s);
}

Stmt Finalize(const Stmt& s, const std::map<std::string, Alignment>& align) {
  Finalizer f(align);
  return f.Mutate(s);
}

absl::Status CheckBufferScopes(const Stmt& body, const std::vector<ir::BufferDecl>& params) {
  ScopeChecker c(params);
  return c.Check(body);
}

}  // namespace tilesearch::schedule::lower_internal
