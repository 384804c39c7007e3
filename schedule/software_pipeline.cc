// Register-staged pipelining of cooperative shared-memory fetches (schedule/software_pipeline.h).
#include "schedule/software_pipeline.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ir/expr.h"
#include "ir/simplify.h"
#include "schedule/lower_internal.h"

namespace tilesearch::schedule {
namespace {

using ir::Expr;
using ir::ForKind;
using ir::MemoryScope;
using ir::Stmt;

// Loads and variables an expression reads.
class ReadCollector : public ir::ExprVisitor {
 public:
  std::set<std::string> buffers;
  std::set<std::string> vars;

 protected:
  void VisitLoad(const ir::LoadNode* op, const Expr& e) override {
    buffers.insert(op->buffer);
    ir::ExprVisitor::VisitLoad(op, e);
  }
  void VisitVar(const ir::VarNode* op, const Expr& e) override {
    vars.insert(op->name);
    ir::ExprVisitor::VisitVar(op, e);
  }
};

// One level of a fetch nest above its Store: a loop or a guard.
struct Level {
  const ir::ForNode* loop = nullptr;          // set for a loop level
  const ir::IfThenElseNode* guard = nullptr;  // set for a guard level (no else branch)
};

// A cooperative fetch: levels from the outside in, then the Store to a shared buffer.
struct Fetch {
  std::vector<Level> levels;
  const ir::StoreNode* store = nullptr;
  int64_t stage_elements = 1;  // product of the non-thread loop extents
  Expr stage_index;            // linearized non-thread loop variables
};

// Whether every Load and Store of `buffer` in a statement has `rank` indices.
class RankChecker : public ir::StmtVisitor {
 public:
  RankChecker(const std::string& buffer, size_t rank) : buffer_(buffer), rank_(rank) {}
  bool ok = true;
  void VisitExpr(const Expr& e) override {
    class Loads : public ir::ExprVisitor {
     public:
      Loads(const std::string& b, size_t r, bool* ok) : b_(b), r_(r), ok_(ok) {}

     protected:
      void VisitLoad(const ir::LoadNode* op, const Expr& e) override {
        if (op->buffer == b_ && op->indices.size() != r_) *ok_ = false;
        ir::ExprVisitor::VisitLoad(op, e);
      }

     private:
      const std::string& b_;
      size_t r_;
      bool* ok_;
    };
    Loads l(buffer_, rank_, &ok);
    l.Visit(e);
  }

 protected:
  void VisitStore(const ir::StoreNode* op, const Stmt& s) override {
    if (op->buffer == buffer_ && op->indices.size() != rank_) ok = false;
    ir::StmtVisitor::VisitStore(op, s);
  }

 private:
  const std::string& buffer_;
  size_t rank_;
};

// A fetch statement with the reduction variable at `at` and its shared Store turned into an
// async copy into buffer `buf` (a new leading index).
class AsyncFetchRewriter : public ir::StmtMutator {
 public:
  AsyncFetchRewriter(const std::string& var, Expr at, Expr buf)
      : sub_{{var, std::move(at)}}, buf_(std::move(buf)) {}
  Expr MutateExpr(const Expr& e) override { return ir::Substitute(e, sub_); }

 protected:
  Stmt MutateStore(const ir::StoreNode* op, const Stmt&) override {
    std::vector<Expr> idx{buf_};
    for (const Expr& i : op->indices) idx.push_back(MutateExpr(i));
    return ir::StoreNode::Make(op->buffer, std::move(idx), MutateExpr(op->value),
                               /*async_copy=*/true);
  }

 private:
  std::vector<std::pair<std::string, Expr>> sub_;
  Expr buf_;
};

class Pipeliner : public ir::StmtMutator {
 public:
  Pipeliner(bool double_buffer, int async_stages)
      : double_buffer_(double_buffer), async_stages_(async_stages) {}
  bool failed = false;  // a multi-buffered buffer is also accessed outside its loop

 protected:
  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    scopes_[op->buffer.name] = op->buffer;
    Stmt m = ir::StmtMutator::MutateAllocate(op, s);
    auto copies = buffers_.find(op->buffer.name);
    if (copies == buffers_.end()) return m;
    const auto* a = m.as<ir::AllocateNode>();
    ir::BufferDecl decl = a->buffer;
    decl.shape.insert(decl.shape.begin(), copies->second);
    RankChecker rc(decl.name, decl.shape.size());
    rc.Visit(a->body);
    if (!rc.ok) failed = true;
    return ir::AllocateNode::Make(decl, a->body);
  }

  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    Stmt m = ir::StmtMutator::MutateFor(op, s);
    const auto* f = m.as<ir::ForNode>();
    if (f->for_kind != ForKind::kSerial) return m;
    auto extent = ir::AsConstInt(f->extent);
    if (!extent || *extent < 2) return m;
    const auto* seq = f->body.as<ir::SeqNode>();
    if (!seq || seq->stmts.size() < 3) return m;
    const std::string& var = f->var_name();

    std::vector<Fetch> fetches;
    size_t i = 0;
    for (; i < seq->stmts.size(); ++i) {
      auto fetch = MatchFetch(seq->stmts[i], var);
      if (!fetch) break;
      fetches.push_back(std::move(*fetch));
    }
    if (fetches.empty() || i >= seq->stmts.size() ||
        seq->stmts[i].kind() != ir::StmtKind::kBarrier ||
        seq->stmts.back().kind() != ir::StmtKind::kBarrier || i + 1 >= seq->stmts.size() - 1) {
      return m;
    }

    // Names of the staging arrays; each fetch writes a distinct shared buffer.
    std::vector<ir::BufferDecl> stages;
    std::set<std::string> seen;
    for (const Fetch& fe : fetches) {
      if (!seen.insert(fe.store->buffer).second) return m;
      ir::BufferDecl d;
      d.name = fe.store->buffer + ".stage";
      if (scopes_.count(d.name)) return m;
      d.dtype = scopes_.at(fe.store->buffer).dtype;
      d.shape = {fe.stage_elements};
      d.scope = MemoryScope::kLocal;
      stages.push_back(d);
    }

    Expr next = f->var + ir::IntConst(1);
    std::vector<Stmt> loads_next, loads_first, stores;
    for (size_t k = 0; k < fetches.size(); ++k) {
      loads_next.push_back(BuildLoadPart(fetches[k], stages[k], var, next));
      loads_first.push_back(BuildLoadPart(fetches[k], stages[k], var, f->min));
      stores.push_back(BuildStorePart(fetches[k], stages[k]));
    }
    if (async_stages_ >= 3 && AllAsyncCopyable(fetches)) {
      return AsyncPipelined(*f, *seq, i, fetches);
    }
    if (double_buffer_ || async_stages_ >= 3) return DoubleBuffered(*f, *seq, i, fetches, stages);
    std::vector<Stmt> body = stores;
    body.push_back(seq->stmts[i]);  // the barrier after the fetches
    body.push_back(ir::IfThenElseNode::Make(next < f->min + f->extent,
                                            ir::SeqNode::Make(std::move(loads_next))));
    for (size_t k = i + 1; k < seq->stmts.size(); ++k) body.push_back(seq->stmts[k]);
    Stmt loop = ir::ForNode::Make(f->var, f->min, f->extent, f->for_kind,
                                  ir::SeqNode::Make(std::move(body)));
    loads_first.push_back(loop);
    Stmt out = ir::SeqNode::Make(std::move(loads_first));
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
      out = ir::AllocateNode::Make(*it, out);
    }
    return out;
  }

 private:
  bool IsSharedOrLocal(const std::string& buffer) const {
    auto it = scopes_.find(buffer);
    return it != scopes_.end() && it->second.scope != MemoryScope::kGlobal;
  }

  // A fetch nest writing a shared buffer from global memory, depending on `loop_var`.
  std::optional<Fetch> MatchFetch(const Stmt& s, const std::string& loop_var) const {
    Fetch fe;
    Stmt cur = s;
    std::vector<Expr> index_terms;
    bool uses_loop_var = false;
    while (true) {
      if (const auto* loop = cur.as<ir::ForNode>()) {
        if (!ir::IsThreadBound(loop->for_kind)) {
          if (loop->for_kind == ForKind::kVThread || ir::IsBlockBound(loop->for_kind)) {
            return std::nullopt;
          }
          auto e = ir::AsConstInt(loop->extent);
          if (!e || *e < 1) return std::nullopt;
          fe.stage_index = fe.stage_index.defined()
                               ? fe.stage_index * ir::IntConst(*e) + (loop->var - loop->min)
                               : loop->var - loop->min;
          fe.stage_elements *= *e;
        }
        fe.levels.push_back({loop, nullptr});
        cur = loop->body;
      } else if (const auto* guard = cur.as<ir::IfThenElseNode>()) {
        if (guard->else_case.defined()) return std::nullopt;
        ReadCollector rc;
        rc.Visit(guard->cond);
        for (const std::string& b : rc.buffers) {
          if (IsSharedOrLocal(b)) return std::nullopt;
        }
        fe.levels.push_back({nullptr, guard});
        cur = guard->then_case;
      } else if (const auto* store = cur.as<ir::StoreNode>()) {
        auto it = scopes_.find(store->buffer);
        if (it == scopes_.end() || it->second.scope != MemoryScope::kShared) return std::nullopt;
        ReadCollector rc;
        rc.Visit(store->value);
        if (rc.buffers.empty()) return std::nullopt;
        for (const std::string& b : rc.buffers) {
          if (IsSharedOrLocal(b)) return std::nullopt;
        }
        uses_loop_var = rc.vars.count(loop_var) > 0;
        fe.store = store;
        break;
      } else {
        return std::nullopt;
      }
    }
    if (!uses_loop_var) return std::nullopt;
    if (!fe.stage_index.defined()) fe.stage_index = ir::IntConst(0);
    return fe;
  }

  // The fetch nest with its Store replaced by `leaf`, conditions rewritten by `sub`, and the
  // non-thread serial loops unrolled (so the staging array stays in registers).
  static Stmt Rebuild(const Fetch& fe, Stmt leaf,
                      const std::vector<std::pair<std::string, Expr>>& sub) {
    Stmt cur = std::move(leaf);
    for (auto it = fe.levels.rbegin(); it != fe.levels.rend(); ++it) {
      if (it->loop) {
        ForKind kind =
            it->loop->for_kind == ForKind::kSerial ? ForKind::kUnrolled : it->loop->for_kind;
        cur = ir::ForNode::Make(it->loop->var, it->loop->min, it->loop->extent, kind, cur);
      } else {
        cur = ir::IfThenElseNode::Make(ir::Substitute(it->guard->cond, sub), cur);
      }
    }
    return cur;
  }

  // stage[index] = the fetched global value at loop_var := at.
  static Stmt BuildLoadPart(const Fetch& fe, const ir::BufferDecl& stage,
                            const std::string& loop_var, const Expr& at) {
    std::vector<std::pair<std::string, Expr>> sub = {{loop_var, at}};
    Stmt leaf =
        ir::StoreNode::Make(stage.name, {fe.stage_index}, ir::Substitute(fe.store->value, sub));
    return Rebuild(fe, leaf, sub);
  }

  // shared[original index] = stage[index], under the original guards; with `buffer` defined,
  // shared[buffer, original index] (the double-buffered layout).
  // `sub` rewrites the guards (the tile the store is for: loop var := k + 1 or the loop's min).
  static Stmt BuildStorePart(const Fetch& fe, const ir::BufferDecl& stage,
                             const Expr& buffer = Expr(),
                             const std::vector<std::pair<std::string, Expr>>& sub = {}) {
    std::vector<Expr> idx;
    if (buffer.defined()) idx.push_back(buffer);
    for (const Expr& e : fe.store->indices) idx.push_back(ir::Substitute(e, sub));
    Stmt leaf = ir::StoreNode::Make(fe.store->buffer, std::move(idx),
                                    ir::LoadNode::Make(stage.dtype, stage.name, {fe.stage_index}));
    return Rebuild(fe, leaf, sub);
  }

  // for k { fetches; barrier; compute; barrier } with the fetches at [0, i) of `seq`, as the
  // double-buffered pipeline (header comment).
  Stmt DoubleBuffered(const ir::ForNode& f, const ir::SeqNode& seq, size_t i,
                      const std::vector<Fetch>& fetches,
                      const std::vector<ir::BufferDecl>& stages) {
    const std::string& var = f.var_name();
    const Expr next = f.var + ir::IntConst(1);
    const Expr cur_buf = (f.var - f.min) % ir::IntConst(2);
    const Expr next_buf = (next - f.min) % ir::IntConst(2);
    std::vector<Stmt> prologue, loads_next, stores_next;
    for (size_t k = 0; k < fetches.size(); ++k) {
      prologue.push_back(BuildLoadPart(fetches[k], stages[k], var, f.min));
      loads_next.push_back(BuildLoadPart(fetches[k], stages[k], var, next));
    }
    for (size_t k = 0; k < fetches.size(); ++k) {
      prologue.push_back(BuildStorePart(fetches[k], stages[k], ir::IntConst(0), {{var, f.min}}));
      stores_next.push_back(BuildStorePart(fetches[k], stages[k], next_buf, {{var, next}}));
    }
    prologue.push_back(seq.stmts[i]);  // barrier: buffer 0 is filled
    // The compute reads the current buffer.
    std::vector<Stmt> compute(seq.stmts.begin() + i + 1, seq.stmts.end() - 1);
    Stmt comp = ir::SeqNode::Make(std::move(compute));
    for (const Fetch& fe : fetches) {
      comp =
          lower_internal::RewriteLoads(comp, fe.store->buffer, [&](const std::vector<Expr>& idx) {
            std::vector<Expr> out{cur_buf};
            out.insert(out.end(), idx.begin(), idx.end());
            return out;
          });
      buffers_[fe.store->buffer] = 2;
    }
    const Expr more = next < f.min + f.extent;
    std::vector<Stmt> body;
    body.push_back(ir::IfThenElseNode::Make(more, ir::SeqNode::Make(std::move(loads_next))));
    body.push_back(comp);
    body.push_back(ir::IfThenElseNode::Make(more, ir::SeqNode::Make(std::move(stores_next))));
    body.push_back(seq.stmts.back());  // the one barrier per iteration
    prologue.push_back(
        ir::ForNode::Make(f.var, f.min, f.extent, f.for_kind, ir::SeqNode::Make(std::move(body))));
    Stmt out = ir::SeqNode::Make(std::move(prologue));
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
      out = ir::AllocateNode::Make(*it, out);
    }
    return out;
  }

  // Whether every fetch can be a cp.async copy: no guards, the innermost loop vectorized over
  // 4, 8 or 16 bytes, the value a Load of the same type as the shared buffer.
  bool AllAsyncCopyable(const std::vector<Fetch>& fetches) const {
    for (const Fetch& fe : fetches) {
      if (fe.levels.empty() || fe.levels.back().loop == nullptr) return false;
      for (const Level& l : fe.levels) {
        if (l.guard != nullptr) return false;
      }
      const ir::ForNode* inner = fe.levels.back().loop;
      const auto width = ir::AsConstInt(inner->extent);
      const ir::BufferDecl& shared = scopes_.at(fe.store->buffer);
      if (inner->for_kind != ForKind::kVectorized || !width) return false;
      const int64_t bytes = *width * ir::BytesOf(shared.dtype);
      if (bytes != 4 && bytes != 8 && bytes != 16) return false;
      const auto* load = fe.store->value.as<ir::LoadNode>();
      if (load == nullptr || load->type != shared.dtype) return false;
    }
    return true;
  }

  // for k { fetches; barrier; compute; barrier } with the fetches at [0, i) of `seq`, as the
  // cp.async pipeline of async_stages_ buffers (header comment).
  Stmt AsyncPipelined(const ir::ForNode& f, const ir::SeqNode& seq, size_t i,
                      const std::vector<Fetch>& fetches) {
    const int64_t stages = async_stages_;
    const int64_t n = *ir::AsConstInt(f.extent);
    const std::string& var = f.var_name();
    std::vector<Stmt> out;
    for (int64_t j = 0; j + 1 < stages; ++j) {
      if (j < n) {
        for (size_t k = 0; k < fetches.size(); ++k) {
          AsyncFetchRewriter r(var, f.min + ir::IntConst(j), ir::IntConst(j));
          out.push_back(r.Mutate(seq.stmts[k]));
        }
      }
      out.push_back(ir::AsyncGroupNode::Commit());  // also when empty: uniform group counts
    }
    const Expr ahead = f.var + ir::IntConst(stages - 1);
    const Expr ahead_buf = (f.var - f.min + ir::IntConst(stages - 1)) % ir::IntConst(stages);
    const Expr cur_buf = (f.var - f.min) % ir::IntConst(stages);
    std::vector<Stmt> copies;
    for (size_t k = 0; k < fetches.size(); ++k) {
      AsyncFetchRewriter r(var, ahead, ahead_buf);
      copies.push_back(r.Mutate(seq.stmts[k]));
    }
    std::vector<Stmt> compute(seq.stmts.begin() + i + 1, seq.stmts.end() - 1);
    Stmt comp = ir::SeqNode::Make(std::move(compute));
    for (const Fetch& fe : fetches) {
      comp =
          lower_internal::RewriteLoads(comp, fe.store->buffer, [&](const std::vector<Expr>& idx) {
            std::vector<Expr> o{cur_buf};
            o.insert(o.end(), idx.begin(), idx.end());
            return o;
          });
      buffers_[fe.store->buffer] = stages;
    }
    std::vector<Stmt> body;
    body.push_back(ir::AsyncGroupNode::Wait(stages - 2));
    body.push_back(seq.stmts[i]);  // the one barrier per iteration
    body.push_back(
        ir::IfThenElseNode::Make(ahead < f.min + f.extent, ir::SeqNode::Make(std::move(copies))));
    body.push_back(ir::AsyncGroupNode::Commit());
    body.push_back(comp);
    out.push_back(
        ir::ForNode::Make(f.var, f.min, f.extent, f.for_kind, ir::SeqNode::Make(std::move(body))));
    out.push_back(seq.stmts.back());  // the loop's last barrier, once after it
    return ir::SeqNode::Make(std::move(out));
  }

  std::map<std::string, ir::BufferDecl> scopes_;
  bool double_buffer_ = false;
  int async_stages_ = 0;
  // Shared buffers given a leading dimension, with its extent (2 or the async stage count).
  std::map<std::string, int64_t> buffers_;
};

Stmt RunPipeliner(const Stmt& kernel, bool double_buffer, int async_stages) {
  Pipeliner p(double_buffer, async_stages);
  Stmt out = p.Mutate(kernel);
  if (p.failed) return kernel;
  return out.same_as(kernel) ? out : ir::Simplify(out);
}

}  // namespace

Stmt PipelineSharedFetches(const Stmt& kernel, bool double_buffer) {
  return RunPipeliner(kernel, double_buffer, 0);
}

Stmt PipelineSharedFetchesAsync(const Stmt& kernel, int stages) {
  CHECK(stages == 3 || stages == 4) << "cp.async pipeline of " << stages << " stages";
  return RunPipeliner(kernel, false, stages);
}

bool SoftwarePipelineEnabled(const State& state, int kernel_stage) {
  CHECK(kernel_stage >= 0 && kernel_stage < state.num_stages()) << "stage id " << kernel_stage;
  for (int sid = 0; sid < state.num_stages(); ++sid) {
    if (state.stage(sid).software_pipeline == 0 && KernelRootStage(state, sid) == kernel_stage) {
      return false;
    }
  }
  return true;
}

}  // namespace tilesearch::schedule

namespace tilesearch::schedule {

int SoftwarePipelineStages(const State& state, int kernel_stage) {
  if (!SoftwarePipelineEnabled(state, kernel_stage)) return 0;
  int stages = 1;
  for (int sid = 0; sid < state.num_stages(); ++sid) {
    if (KernelRootStage(state, sid) == kernel_stage) {
      stages = std::max(stages, state.stage(sid).software_pipeline);
    }
  }
  return stages;
}

bool SoftwarePipelineDoubleBuffered(const State& state, int kernel_stage) {
  if (!SoftwarePipelineEnabled(state, kernel_stage)) return false;
  for (int sid = 0; sid < state.num_stages(); ++sid) {
    if (state.stage(sid).software_pipeline == 2 && KernelRootStage(state, sid) == kernel_stage) {
      return true;
    }
  }
  return false;
}

}  // namespace tilesearch::schedule
