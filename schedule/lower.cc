// Lowering a State to a loop nest (TVM ScheduleOps + InferBound + storage flattening, smaller).
//
// Each stage that is neither a placeholder nor inlined becomes one perfect nest of its iterators
// (outermost first). Inlined stages are substituted into their readers' bodies. A stage computed
// at (consumer, iterator) is built inside that loop of the consumer: its region is inferred from
// the consumer's lowered loads below the loop (absolute coordinates, so compute_at chains such as
// a shared cache inside a local cache_write stage work), its buffer is allocated with the region's
// shape, and every access to it subtracts the region's start. As in TVM's InferBound, a shared
// buffer's region is relaxed over the threadIdx and vthread loops around it (all threads of a
// block fill and read one copy). On GPU targets an attached stage of global scope lives in local
// memory under a threadIdx / vthread loop and in shared memory directly under a blockIdx loop
// (TVM's default storage scope rule). A root stage without any binding on a GPU target becomes a
// one-block, one-thread kernel: allowed (it is valid CUDA), but slow.
#include "schedule/lower.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/simplify.h"
#include "ir/stmt_contains.h"
#include "schedule/lower_internal.h"
#include "schedule/software_pipeline.h"
#include "schedule/tensor_core_lower.h"

namespace tilesearch::schedule {

namespace {

// The largest min_blocks_per_sm pragma among the kernel's root stage and the stages attached
// into it.
int64_t KernelMinBlocksPerSm(const State& state, int kernel_stage) {
  int64_t best = 0;
  for (int sid = 0; sid < state.num_stages(); ++sid) {
    if (state.stage(sid).min_blocks_per_sm > best && KernelRootStage(state, sid) == kernel_stage) {
      best = state.stage(sid).min_blocks_per_sm;
    }
  }
  return best;
}

using ir::Expr;
using ir::ForKind;
using ir::Stmt;
using lower_internal::LoopInfo;

ForKind ToForKind(IteratorAnnotation a) {
  switch (a) {
    case IteratorAnnotation::kNone:
      return ForKind::kSerial;
    case IteratorAnnotation::kUnroll:
      return ForKind::kUnrolled;
    case IteratorAnnotation::kVectorize:
      return ForKind::kVectorized;
    case IteratorAnnotation::kParallel:
      return ForKind::kParallel;
    case IteratorAnnotation::kVThread:
      return ForKind::kVThread;
    case IteratorAnnotation::kBlockIdxX:
      return ForKind::kBlockIdxX;
    case IteratorAnnotation::kBlockIdxY:
      return ForKind::kBlockIdxY;
    case IteratorAnnotation::kBlockIdxZ:
      return ForKind::kBlockIdxZ;
    case IteratorAnnotation::kThreadIdxX:
      return ForKind::kThreadIdxX;
    case IteratorAnnotation::kThreadIdxY:
      return ForKind::kThreadIdxY;
    case IteratorAnnotation::kThreadIdxZ:
      return ForKind::kThreadIdxZ;
  }
  return ForKind::kSerial;
}

bool IsGpuOnly(ForKind k) {
  return ir::IsBlockBound(k) || ir::IsThreadBound(k) || k == ForKind::kVThread;
}

std::string Sanitize(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    if (!ok) c = '_';
  }
  return out;
}

Expr AndAll(const std::vector<Expr>& conds) {
  Expr out;
  for (const Expr& c : conds) out = out.defined() ? (out && c) : c;
  return out;
}

Stmt Guarded(const std::vector<Expr>& conds, Stmt s) {
  Expr c = AndAll(conds);
  return c.defined() ? ir::IfThenElseNode::Make(c, std::move(s)) : s;
}

Stmt MakeFor(const LoopInfo& l, Stmt body) {
  return ir::ForNode::Make(ir::MakeVar(l.var), ir::IntConst(0), ir::IntConst(l.extent), l.kind,
                           std::move(body));
}

bool Reads(const Stmt& s, const std::string& buffer) {
  return lower_internal::InferAccessRegion(buffer, {}, {s}, {}).accessed;
}

// Upper bound (exclusive) on `value` that a guard `value < c` / `value <= c` states, or nullopt.
std::optional<int64_t> GuardLimit(const Expr& guard, const Expr& value) {
  if (const auto* lt = guard.as<ir::LTNode>()) {
    auto c = ir::AsConstInt(lt->b);
    if (c && ir::StructurallyEqual(lt->a, value)) return *c;
  }
  if (const auto* le = guard.as<ir::LENode>()) {
    auto c = ir::AsConstInt(le->b);
    if (c && ir::StructurallyEqual(le->a, value)) return *c + 1;
  }
  if (const auto* a = guard.as<ir::AndNode>()) {
    auto x = GuardLimit(a->a, value);
    auto y = GuardLimit(a->b, value);
    if (x && y) return std::min(*x, *y);
    return x ? x : y;
  }
  return std::nullopt;
}

using Alignments = std::map<std::string, lower_internal::Alignment>;

// One root stage's kernel while the passes after BuildStage run over it.
struct RootKernel {
  int stage = -1;  // the root stage's id
  std::string name;
  Stmt body;
};

// The stage BuildStage is lowering, in loop variables.
struct StageNest {
  int s = -1;
  const Stage* st = nullptr;
  const ir::TensorNode* op = nullptr;
  int n = 0;      // iterators
  int naxes = 0;  // space axes of the tensor
  int nred = 0;   // reduce axes of the tensor
  bool is_reduce = false;
  bool attached = false;
  std::string buf;
  std::set<std::string> own;                           // loop variables AutoUnroll may unroll
  std::vector<LoopInfo> loops;                         // one per iterator, outermost first
  std::vector<std::pair<std::string, Expr>> iter_sub;  // iterator name -> loop variable
  ir::RangeMap own_ranges;                             // ranges of the loop variables
  std::vector<Expr> rel;  // axis values relative to the buffer (its region when attached)
  std::vector<Expr> abs;  // axis values in tensor coordinates
  std::vector<Expr> store_idx;
  std::vector<Expr> guards;
  std::vector<Expr> space_guards;  // the guards that use no reduce loop variable
  Expr init;                       // the reduction's init value
  Expr body;                       // the stored value, or the term a reduction combines
  int first_reduce = 0;            // first reduce (or mixed) iterator; n when none
  bool has_mixed = false;          // an iterator fused across space and reduce axes
  ir::RangeMap reduce_vars;        // variables of the reduce loops
  int thread_reduce = -1;          // the threadIdx-bound reduce iterator, or -1
  bool full_init = false;          // initialize the whole buffer before the nest
};

class Lowerer {
 public:
  Lowerer(const ir::ComputeDAG& dag, const State& state, const Target& target)
      : dag_(dag),
        state_(state),
        target_(target),
        inlined_(state.num_stages(), std::nullopt),
        rmin_(state.num_stages()),
        shape_(state.num_stages()),
        scope_(state.num_stages(), ir::MemoryScope::kGlobal),
        built_(state.num_stages(), false) {}

  // Lowers the state; call once.
  absl::StatusOr<LoweredKernel> Run();

 private:
  // The kernel's parameters (the DAG's inputs, then its outputs), their names taken.
  absl::Status DeclareParams(ir::LoopNest* nest);
  // The nest of every root stage, in stage order; the root stages that are not parameters go to
  // `globals` (intermediate buffers in global memory).
  absl::StatusOr<std::vector<RootKernel>> BuildRootStages(std::vector<ir::BufferDecl>* globals);
  // The storage_align layouts; errors for a stage never built or an aligned parameter.
  absl::StatusOr<Alignments> StorageAlignments() const;
  // The software pipelining the kernel of root stage `stage` asks for (software_pipeline.h).
  Stmt PipelineSharedTiles(const Stmt& kernel, int stage) const;
  // The launch configuration of a final GPU kernel; errors name the root stage.
  absl::StatusOr<LaunchConfig> KernelLaunch(const Stmt& kernel, const RootKernel& root) const;
  // A kernel of several top-level statements, wrapped in a one-block blockIdx.x loop.
  Stmt OneLaunch(const Stmt& kernel, const RootKernel& root);
  // The kernels in sequence inside the Allocates of the global intermediate buffers (padded as
  // storage_align asks).
  static Stmt WithGlobalBuffers(const std::vector<RootKernel>& kernels,
                                std::vector<ir::BufferDecl> globals, const Alignments& align);
  // Errors for states Lower cannot build (checked before any loop is built); fills attached_.
  absl::Status CheckState();
  // Every split length is filled (a sketch's are not).
  absl::Status CheckSplitsFilled() const;
  // A computed stage's axis values, guards and iterator annotations are well formed.
  absl::Status CheckStageDefinition(const Stage& st) const;
  // Stage `s` is attached to a lowered loop of a stage, without a cycle; records it in attached_.
  absl::Status CheckAttachment(int s);
  absl::StatusOr<Expr> InlinedBody(int s);
  // The kernel of a tensor_core stage and its epilogue stages (schedule/tensor_core_lower.h).
  absl::StatusOr<lower_internal::TensorCoreKernels> BuildTensorCoreStage(int s);
  // Whether stage `s` is computed inside a tensor_core kernel without a buffer of its own: the
  // stage itself when it has an epilogue, and every epilogue stage but the last.
  bool FusedAway(int s) const;
  absl::StatusOr<Expr> Inline(const Expr& e, const std::string& reader, int depth);
  std::string Fresh(const std::string& base);
  ir::MemoryScope EffectiveScope(int s, const std::vector<LoopInfo>& enclosing) const;
  // The loop nest of stage `s` inside the loops `enclosing` (with the stages attached to its
  // loops), steps below.
  absl::StatusOr<Stmt> BuildStage(int s, const std::vector<LoopInfo>& enclosing);
  // One loop per iterator, with fresh variable names.
  StageNest StageLoops(int s);
  // Axis values in loop variables and the guards that keep the stage inside its buffer / domain.
  absl::Status StageIndices(const std::vector<LoopInfo>& enclosing, StageNest* b);
  // The stored value (inlined producers substituted) and the reduction's init value.
  absl::Status StageValues(StageNest* b);
  // Where the reduce iterators start, whether one is bound to threads, and the space guards.
  absl::Status ClassifyIterators(StageNest* b) const;
  // The cross-thread reduction replacing the reduce loops (lower_internal::BuildAllReduce).
  absl::StatusOr<Stmt> CrossThreadReduction(const StageNest& b,
                                            const std::vector<LoopInfo>& enclosing);
  // The init nest placed just before the first reduce loop, over the space loops inside it.
  Stmt InitNest(StageNest* b);
  // The init of the whole buffer, before the nest (iterators fused across space and reduce axes).
  absl::StatusOr<Stmt> FullInitNest(StageNest* b);
  absl::StatusOr<Stmt> AttachAt(int s, int p, const std::vector<LoopInfo>& enclosing, Stmt content);
  // The guards of reduction `b` that use no variable of its reduce loops or of loops inside
  // them, to be tested once around the reduce loops; `store_guards` gets the rest. Without the
  // hoist the combine `out[i] = out[i] + x` sits under a branch in every reduce iteration and
  // LLVM keeps the accumulator in memory (a load and a store per unrolled step). Empty (all
  // guards stay at the store) when a stage is attached inside the reduce loops.
  std::vector<Expr> HoistableReduceGuards(const StageNest& b,
                                          std::vector<Expr>* store_guards) const;
  absl::Status CheckLoops(int s, const std::vector<LoopInfo>& loops) const;
  ir::BufferDecl Decl(int s) const;

  const ir::ComputeDAG& dag_;
  const State& state_;
  const Target& target_;
  std::set<std::string> names_;
  std::set<std::string> params_;
  std::vector<std::optional<Expr>> inlined_;
  std::map<std::pair<int, int>, std::vector<int>> attached_;
  std::vector<std::vector<Expr>> rmin_;
  std::vector<std::vector<int64_t>> shape_;
  std::vector<ir::MemoryScope> scope_;
  std::vector<bool> built_;
};

std::string Lowerer::Fresh(const std::string& base) {
  std::string name = Sanitize(base);
  for (int k = 1; !names_.insert(name).second; ++k) name = absl::StrCat(Sanitize(base), "_", k);
  return name;
}

absl::Status Lowerer::CheckState() {
  RETURN_IF_ERROR(CheckSplitsFilled());
  const int n = state_.num_stages();
  for (int s = 0; s < n; ++s) {
    const Stage& st = state_.stage(s);
    if (!st.op) return absl::InvalidArgumentError(absl::StrCat("stage ", s, " has no definition"));
    const std::string& name = st.name();
    if (st.is_placeholder()) {
      if (st.location != ComputeLocation::kRoot) {
        return absl::InvalidArgumentError(absl::StrCat("placeholder '", name, "' is not at root"));
      }
      continue;
    }
    RETURN_IF_ERROR(CheckStageDefinition(st));
    if (st.location == ComputeLocation::kInlined) {
      if (st.op->reduce != ir::ReduceKind::kNone) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage '", name, "' is inlined but has a reduction"));
      }
      if (params_.count(name)) {
        return absl::InvalidArgumentError(absl::StrCat("output stage '", name, "' is inlined"));
      }
    }
    if (st.location == ComputeLocation::kAttached) RETURN_IF_ERROR(CheckAttachment(s));
  }
  return absl::OkStatus();
}

absl::Status Lowerer::CheckSplitsFilled() const {
  for (const Step& step : state_.steps()) {
    if (const auto* sp = std::get_if<SplitStep>(&step)) {
      for (const auto& l : sp->lengths) {
        if (!l.has_value()) {
          return absl::InvalidArgumentError(
              absl::StrCat(StepToString(step),
                           ": unfilled split length (a sketch); fill the tile sizes before "
                           "lowering"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Lowerer::CheckStageDefinition(const Stage& st) const {
  const std::string& name = st.name();
  const size_t naxes = st.op->axes.size() + st.op->reduce_axes.size();
  if (st.axis_values.size() != naxes) {
    return absl::InvalidArgumentError(absl::StrCat("stage '", name, "' has ", st.axis_values.size(),
                                                   " axis values for ", naxes, " axes"));
  }
  for (const Expr& v : st.axis_values) {
    if (!v.defined() || v.type() != ir::ScalarType::kInt64) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage '", name, "' has an axis value that is not an int64 expression"));
    }
  }
  for (const Expr& g : st.guards) {
    if (!g.defined() || g.type() != ir::ScalarType::kBool) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage '", name, "' has a guard that is not a bool expression"));
    }
  }
  for (const Iterator& it : st.iters) {
    if (it.extent < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("iterator '", it.name, "' of stage '", name, "' has extent ", it.extent));
    }
    ForKind k = ToForKind(it.annotation);
    if (!target_.is_gpu() && IsGpuOnly(k)) {
      return absl::InvalidArgumentError(
          absl::StrCat("iterator '", it.name, "' of stage '", name, "' is annotated ",
                       AnnotationName(it.annotation), ", which needs a GPU target (target is ",
                       target_.ToString(), ")"));
    }
    if (it.kind != IteratorKind::kSpace && (k == ForKind::kParallel || ir::IsBlockBound(k))) {
      return absl::InvalidArgumentError(
          absl::StrCat("reduce iterator '", it.name, "' of stage '", name, "' is annotated ",
                       AnnotationName(it.annotation), " (a race on the accumulator)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Lowerer::CheckAttachment(int s) {
  const Stage& st = state_.stage(s);
  const std::string& name = st.name();
  const int n = state_.num_stages();
  if (params_.count(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output stage '", name, "' is computed at another stage; outputs stay at root"));
  }
  if (st.attach_stage < 0 || st.attach_stage >= n || st.attach_stage == s) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage '", name, "' is computed at an invalid stage id ", st.attach_stage));
  }
  const Stage& target = state_.stage(st.attach_stage);
  if (target.is_placeholder() || target.location == ComputeLocation::kInlined) {
    return absl::InvalidArgumentError(absl::StrCat("stage '", name, "' is computed at '",
                                                   target.name(),
                                                   "', which is not lowered as a loop nest"));
  }
  int it = target.IterIndex(st.attach_iter);
  if (it < 0) {
    return absl::InvalidArgumentError(absl::StrCat("stale compute_at: stage '", target.name(),
                                                   "' has no iterator '", st.attach_iter,
                                                   "' for stage '", name, "'"));
  }
  // The chain of attachments must end at a root stage.
  int cur = s;
  for (int steps = 0; state_.stage(cur).location == ComputeLocation::kAttached; ++steps) {
    if (steps > n) {
      return absl::InvalidArgumentError(
          absl::StrCat("compute_at of stage '", name, "' forms a cycle"));
    }
    cur = state_.stage(cur).attach_stage;
    if (cur < 0 || cur >= n) break;
  }
  attached_[{st.attach_stage, it}].push_back(s);
  return absl::OkStatus();
}

absl::StatusOr<Expr> Lowerer::Inline(const Expr& e, const std::string& reader, int depth) {
  class Inliner : public ir::ExprMutator {
   public:
    Inliner(Lowerer* l, const std::string& reader, int depth)
        : l_(l), reader_(reader), depth_(depth) {}
    absl::Status status;

   protected:
    Expr MutateLoad(const ir::LoadNode* op, const Expr& e) override {
      std::vector<Expr> idx;
      for (const Expr& i : op->indices) idx.push_back(Mutate(i));
      int id = l_->state_.StageId(op->buffer);
      if (id < 0) {
        if (status.ok()) {
          status = absl::InvalidArgumentError(
              absl::StrCat("stage '", reader_, "' reads '", op->buffer, "', which is not a stage"));
        }
        return e;
      }
      const Stage& p = l_->state_.stage(id);
      if (p.location != ComputeLocation::kInlined) {
        return ir::LoadNode::Make(op->type, op->buffer, std::move(idx), nullptr);
      }
      if (depth_ > l_->state_.num_stages()) {
        if (status.ok()) status = absl::InvalidArgumentError("inlined stages form a cycle");
        return e;
      }
      absl::StatusOr<Expr> body = l_->InlinedBody(id);
      if (!body.ok()) {
        if (status.ok()) status = body.status();
        return e;
      }
      if (p.op->axes.size() != idx.size()) {
        if (status.ok()) {
          status = absl::InvalidArgumentError(
              absl::StrCat("stage '", reader_, "' reads '", op->buffer, "' with ", idx.size(),
                           " indices for ", p.op->axes.size(), " axes"));
        }
        return e;
      }
      std::vector<std::pair<std::string, Expr>> sub;
      for (size_t k = 0; k < idx.size(); ++k) sub.emplace_back(p.op->axes[k].name, idx[k]);
      return ir::Substitute(*body, sub);
    }

   private:
    Lowerer* l_;
    const std::string& reader_;
    int depth_;
  };
  Inliner in(this, reader, depth);
  Expr out = in.Mutate(e);
  RETURN_IF_ERROR(in.status);
  return out;
}

absl::StatusOr<Expr> Lowerer::InlinedBody(int s) {
  if (inlined_[s]) return *inlined_[s];
  const Stage& st = state_.stage(s);
  ASSIGN_OR_RETURN(Expr body, Inline(st.op->body, st.name(), 0));
  inlined_[s] = body;
  return body;
}

ir::MemoryScope Lowerer::EffectiveScope(int s, const std::vector<LoopInfo>& enclosing) const {
  const Stage& st = state_.stage(s);
  if (st.scope != ir::MemoryScope::kGlobal) return st.scope;
  if (!target_.is_gpu()) return ir::MemoryScope::kLocal;
  for (auto it = enclosing.rbegin(); it != enclosing.rend(); ++it) {
    if (ir::IsThreadBound(it->kind) || it->kind == ForKind::kVThread) {
      return ir::MemoryScope::kLocal;
    }
    if (ir::IsBlockBound(it->kind)) return ir::MemoryScope::kShared;
  }
  return ir::MemoryScope::kLocal;
}

ir::BufferDecl Lowerer::Decl(int s) const {
  ir::BufferDecl d;
  d.name = state_.stage(s).name();
  d.dtype = state_.stage(s).op->dtype;
  d.shape = shape_[s];
  d.scope = scope_[s];
  return d;
}

absl::Status Lowerer::CheckLoops(int s, const std::vector<LoopInfo>& loops) const {
  if (!target_.is_gpu()) return absl::OkStatus();
  const Stage& st = state_.stage(s);
  bool block_dim[3] = {false, false, false};
  bool thread_dim[3] = {false, false, false};
  for (size_t i = 0; i < loops.size(); ++i) {
    const LoopInfo& l = loops[i];
    const std::string& it = st.iters[i].name;
    if (l.kind == ForKind::kVThread && l.extent > target_.max_vthread_extent) {
      return absl::FailedPreconditionError(
          absl::StrCat("invalid_schedule: vthread '", it, "' of stage '", st.name(),
                       "' has extent ", l.extent, " > ", target_.max_vthread_extent));
    }
    if (l.kind == ForKind::kVectorized &&
        l.extent * ir::BytesOf(st.op->dtype) > target_.max_vector_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "invalid_schedule: vectorized loop '", it, "' of stage '", st.name(), "' is ", l.extent,
          " x ", ir::BytesOf(st.op->dtype), " B = ", l.extent * ir::BytesOf(st.op->dtype),
          " B wide, more than ", target_.max_vector_bytes, " B"));
    }
    if (ir::IsBlockBound(l.kind)) {
      int d = static_cast<int>(l.kind) - static_cast<int>(ForKind::kBlockIdxX);
      if (st.location != ComputeLocation::kRoot) {
        return absl::FailedPreconditionError(absl::StrCat("invalid_schedule: stage '", st.name(),
                                                          "' is computed inside another stage but "
                                                          "binds '",
                                                          it, "' to ", ir::ForKindName(l.kind)));
      }
      if (block_dim[d]) {
        return absl::FailedPreconditionError(absl::StrCat(
            "invalid_schedule: stage '", st.name(), "' binds ", ir::ForKindName(l.kind), " twice"));
      }
      block_dim[d] = true;
    }
    if (ir::IsThreadBound(l.kind)) {
      int d = static_cast<int>(l.kind) - static_cast<int>(ForKind::kThreadIdxX);
      if (thread_dim[d]) {
        return absl::FailedPreconditionError(absl::StrCat(
            "invalid_schedule: stage '", st.name(), "' binds ", ir::ForKindName(l.kind), " twice"));
      }
      thread_dim[d] = true;
      // (A thread-bound reduce iterator is a cross-thread reduction, whose result every thread
      // receives.)
      if (st.location == ComputeLocation::kAttached && scope_[s] == ir::MemoryScope::kLocal &&
          l.extent > 1 && st.iters[i].kind != IteratorKind::kReduce) {
        return absl::FailedPreconditionError(
            absl::StrCat("invalid_schedule: stage '", st.name(),
                         "' lives in per-thread (local) memory but "
                         "binds '",
                         it, "' to ", ir::ForKindName(l.kind),
                         ", so each thread would compute only part of its copy"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Stmt> Lowerer::BuildStage(int s, const std::vector<LoopInfo>& enclosing) {
  StageNest b = StageLoops(s);
  RETURN_IF_ERROR(CheckLoops(s, b.loops));
  RETURN_IF_ERROR(StageIndices(enclosing, &b));
  RETURN_IF_ERROR(StageValues(&b));
  RETURN_IF_ERROR(ClassifyIterators(&b));

  // The innermost statement: the store (a combine for a reduction), or the whole cross-thread
  // reduction, which replaces the reduce loops.
  Stmt content;
  int p_start = b.n - 1;  // the innermost loop around `content`
  // A reduction's guards that hold for all its reduce iterations, tested once around the reduce
  // loops instead of at every combine (HoistableReduceGuards).
  std::vector<Expr> hoisted;
  std::vector<Expr> store_guards = b.guards;
  if (b.thread_reduce >= 0) {
    ASSIGN_OR_RETURN(content, CrossThreadReduction(b, enclosing));
    p_start = b.first_reduce - 1;
  } else if (b.is_reduce) {
    Expr acc = ir::LoadNode::Make(b.op->dtype, b.buf, b.store_idx);
    hoisted = HoistableReduceGuards(b, &store_guards);
    content = Guarded(
        store_guards,
        ir::StoreNode::Make(b.buf, b.store_idx, ir::ReduceCombine(b.op->reduce, acc, b.body)));
  } else {
    content = Guarded(b.guards, ir::StoreNode::Make(b.buf, b.store_idx, b.body));
  }
  Stmt init_nest = InitNest(&b);
  // The loops from the innermost out; the stages attached at a loop are built inside it, before
  // the content they feed (AttachAt).
  for (int p = p_start; p >= 0; --p) {
    std::vector<LoopInfo> around = enclosing;
    around.insert(around.end(), b.loops.begin(), b.loops.begin() + p + 1);
    ASSIGN_OR_RETURN(content, AttachAt(s, p, around, content));
    Stmt loop = MakeFor(b.loops[p], content);
    if (p == b.first_reduce) loop = Guarded(hoisted, loop);
    content =
        (p == b.first_reduce && init_nest.defined()) ? ir::SeqNode::Make({init_nest, loop}) : loop;
  }
  if (b.n == 0 && init_nest.defined()) content = ir::SeqNode::Make({init_nest, content});
  if (b.full_init) {
    ASSIGN_OR_RETURN(Stmt nest, FullInitNest(&b));
    content = ir::SeqNode::Make({nest, content});
  }
  if (b.st->auto_unroll_max_step > 0) {
    content = lower_internal::AutoUnroll(content, b.own, b.st->auto_unroll_max_step);
  }
  built_[s] = true;
  return content;
}

StageNest Lowerer::StageLoops(int s) {
  StageNest b;
  b.s = s;
  b.st = &state_.stage(s);
  b.op = b.st->op.get();
  b.n = static_cast<int>(b.st->iters.size());
  b.naxes = static_cast<int>(b.op->axes.size());
  b.nred = static_cast<int>(b.op->reduce_axes.size());
  b.is_reduce = b.op->reduce != ir::ReduceKind::kNone;
  b.attached = b.st->location == ComputeLocation::kAttached;
  b.buf = b.st->name();
  // Loop variables, unique in the whole nest.
  b.loops.resize(b.n);
  for (int i = 0; i < b.n; ++i) {
    const Iterator& it = b.st->iters[i];
    b.loops[i] = {Fresh(b.buf + "." + it.name), it.extent, ToForKind(it.annotation)};
    b.own.insert(b.loops[i].var);
    b.iter_sub.emplace_back(it.name, ir::MakeVar(b.loops[i].var));
    b.own_ranges[b.loops[i].var] = {0, it.extent - 1};
  }
  return b;
}

absl::Status Lowerer::StageIndices(const std::vector<LoopInfo>& enclosing, StageNest* b) {
  const ir::TensorNode& op = *b->op;
  const int naxes = b->naxes;
  ir::RangeMap all_ranges = b->own_ranges;
  for (const LoopInfo& l : enclosing) all_ranges[l.var] = {0, l.extent - 1};

  // Axis values: relative to the region for an attached stage (its buffer's index), absolute for
  // the body.
  std::vector<Expr>& rel = b->rel;
  std::vector<Expr>& abs = b->abs;
  rel.resize(naxes + b->nred);
  abs.resize(naxes + b->nred);
  for (int k = 0; k < naxes + b->nred; ++k) {
    rel[k] = ir::Substitute(b->st->axis_values[k], b->iter_sub);
    abs[k] = (b->attached && k < naxes) ? rel[k] + rmin_[b->s][k] : rel[k];
  }
  b->store_idx.assign(rel.begin(), rel.begin() + naxes);

  std::vector<Expr> state_guards;
  for (const Expr& g : b->st->guards) state_guards.push_back(ir::Substitute(g, b->iter_sub));
  std::vector<Expr>& guards = b->guards;
  guards = state_guards;
  for (int k = 0; k < naxes; ++k) {
    // The stage's own iterations must cover its buffer (the region for an attached stage) and
    // never leave the tensor's domain.
    auto bound = lower_internal::ConstBound(rel[k], b->own_ranges);
    std::optional<int64_t> limit;
    for (const Expr& g : state_guards) {
      auto l = GuardLimit(g, rel[k]);
      if (l) limit = limit ? std::min(*limit, *l) : *l;
    }
    const int64_t extent = shape_[b->s][k];
    if (bound) {
      int64_t hi = limit ? std::min(bound->max, *limit - 1) : bound->max;
      if (bound->min > 0 || hi < extent - 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("stale region: stage '", b->buf, "' computes indices [", bound->min, ", ",
                         hi, "] of axis '", op.axes[k].name, "' but ",
                         b->attached ? "its consumer needs [0, " : "its shape is [0, ", extent - 1,
                         "] (re-apply compute_at after changing the consumer's loops)"));
      }
      if (hi > extent - 1) guards.push_back(rel[k] < ir::IntConst(extent));
    } else {
      guards.push_back(rel[k] >= ir::IntConst(0));
      guards.push_back(rel[k] < ir::IntConst(extent));
    }
    if (b->attached) {
      auto ab = lower_internal::ConstBound(abs[k], all_ranges);
      if (!ab || ab->min < 0) guards.push_back(abs[k] >= ir::IntConst(0));
      if (!ab || ab->max >= op.shape[k]) guards.push_back(abs[k] < ir::IntConst(op.shape[k]));
    }
  }
  return absl::OkStatus();
}

absl::Status Lowerer::StageValues(StageNest* b) {
  const ir::TensorNode& op = *b->op;
  std::vector<std::pair<std::string, Expr>> axis_sub;
  for (int k = 0; k < b->naxes; ++k) axis_sub.emplace_back(op.axes[k].name, b->abs[k]);
  b->init = b->is_reduce ? ir::Substitute(op.init, axis_sub) : Expr();
  for (int r = 0; r < b->nred; ++r) {
    axis_sub.emplace_back(op.reduce_axes[r].name, b->abs[b->naxes + r]);
  }
  ASSIGN_OR_RETURN(Expr body, InlinedBody(b->s));
  b->body = ir::Substitute(body, axis_sub);
  if (b->is_reduce) {
    ASSIGN_OR_RETURN(Expr init_inlined, Inline(b->init, b->buf, 0));
    b->init = init_inlined;
  }
  return absl::OkStatus();
}

absl::Status Lowerer::ClassifyIterators(StageNest* b) const {
  const Stage& st = *b->st;
  const int n = b->n;
  b->first_reduce = n;
  b->has_mixed = false;
  for (int i = 0; i < n; ++i) {
    if (st.iters[i].kind != IteratorKind::kSpace) {
      b->first_reduce = std::min(b->first_reduce, i);
      b->reduce_vars[b->loops[i].var] = b->own_ranges.at(b->loops[i].var);
    }
    b->has_mixed |= st.iters[i].kind == IteratorKind::kMixed;
  }
  if (!b->is_reduce && b->first_reduce < n) {
    return absl::InvalidArgumentError(absl::StrCat("stage '", b->buf, "' has reduce iterator '",
                                                   st.iters[b->first_reduce].name,
                                                   "' but no reduction"));
  }
  b->full_init = b->is_reduce && (b->has_mixed || b->first_reduce == n);
  b->thread_reduce = -1;
  if (target_.is_gpu() && b->is_reduce) {
    for (int i = 0; i < n; ++i) {
      if (st.iters[i].kind != IteratorKind::kSpace && ir::IsThreadBound(b->loops[i].kind)) {
        if (b->thread_reduce >= 0) {
          return absl::FailedPreconditionError(absl::StrCat(
              "invalid_schedule: stage '", b->buf,
              "' binds two reduce iterators to threads (one cross-thread reduction axis is "
              "supported)"));
        }
        b->thread_reduce = i;
      }
    }
  }
  for (const Expr& g : b->guards) {
    if (!lower_internal::UsesAnyVar(g, b->reduce_vars)) b->space_guards.push_back(g);
  }
  return absl::OkStatus();
}

std::vector<Expr> Lowerer::HoistableReduceGuards(const StageNest& b,
                                                 std::vector<Expr>* store_guards) const {
  // A stage attached inside the reduce loops may hold barriers (shared fetches): a guard around
  // them would let some threads skip a barrier. Nothing is hoisted then.
  if (b.first_reduce < 0 || b.first_reduce >= b.n) return {};
  for (int p = b.first_reduce; p < b.n; ++p) {
    if (attached_.count({b.s, p})) return {};
  }
  ir::RangeMap inner;  // loop variables of the reduce loops and of anything inside them
  for (int p = b.first_reduce; p < b.n; ++p) inner[b.loops[p].var] = {0, b.loops[p].extent - 1};
  std::vector<Expr> hoisted;
  store_guards->clear();
  for (const Expr& g : b.guards) {
    (lower_internal::UsesAnyVar(g, inner) ? store_guards : &hoisted)->push_back(g);
  }
  return hoisted;
}

absl::StatusOr<Stmt> Lowerer::CrossThreadReduction(const StageNest& b,
                                                   const std::vector<LoopInfo>& enclosing) {
  const Stage& st = *b.st;
  const std::string& buf = b.buf;
  if (b.has_mixed) {
    return absl::FailedPreconditionError(
        absl::StrCat("invalid_schedule: cross-thread reduction in stage '", buf,
                     "' with an iterator fused across space and reduce axes"));
  }
  for (int i = b.first_reduce; i < b.n; ++i) {
    if (st.iters[i].kind != IteratorKind::kReduce) {
      return absl::FailedPreconditionError(
          absl::StrCat("invalid_schedule: cross-thread reduction in stage '", buf,
                       "' needs its space "
                       "iterators outside the reduce iterators, but '",
                       st.iters[i].name, "' is inside"));
    }
    if (attached_.count({b.s, i})) {
      return absl::FailedPreconditionError(
          absl::StrCat("invalid_schedule: a stage is computed at reduce iterator '",
                       st.iters[i].name, "' of the cross-thread reduction in stage '", buf, "'"));
    }
  }
  lower_internal::AllReduceSpec spec;
  spec.stage = buf;
  spec.buffer = buf;
  spec.dtype = b.op->dtype;
  spec.kind = b.op->reduce;
  spec.init = b.init;
  spec.body = b.body;
  spec.reduce_loops.assign(b.loops.begin() + b.first_reduce, b.loops.end());
  spec.thread_loop = b.thread_reduce - b.first_reduce;
  spec.guards = b.guards;
  spec.space_guards = b.space_guards;
  spec.store_indices = b.store_idx;
  spec.store_from_all_threads = scope_[b.s] == ir::MemoryScope::kLocal;
  std::vector<LoopInfo> around = enclosing;
  around.insert(around.end(), b.loops.begin(), b.loops.begin() + b.first_reduce);
  for (const LoopInfo& l : around) {
    if (!ir::IsThreadBound(l.kind)) continue;
    if (l.kind == b.loops[b.thread_reduce].kind) {
      return absl::FailedPreconditionError(
          absl::StrCat("invalid_schedule: cross-thread reduction of stage '", buf, "' over ",
                       ir::ForKindName(l.kind), " inside another ", ir::ForKindName(l.kind),
                       " loop '", l.var, "'"));
    }
    spec.thread_groups.push_back(l);
  }
  return lower_internal::BuildAllReduce(spec,
                                        [this](const std::string& base) { return Fresh(base); });
}

Stmt Lowerer::InitNest(StageNest* b) {
  if (!b->is_reduce || b->full_init || b->thread_reduce >= 0) return Stmt();
  std::vector<std::pair<std::string, Expr>> init_sub;
  std::vector<LoopInfo> init_loops;
  for (int i = b->first_reduce + 1; i < b->n; ++i) {
    if (b->st->iters[i].kind != IteratorKind::kSpace) continue;
    LoopInfo l = b->loops[i];
    l.var = Fresh(b->loops[i].var + ".init");
    b->own.insert(l.var);
    init_sub.emplace_back(b->loops[i].var, ir::MakeVar(l.var));
    init_loops.push_back(l);
  }
  std::vector<Expr> idx;
  for (const Expr& e : b->store_idx) idx.push_back(ir::Substitute(e, init_sub));
  std::vector<Expr> conds;
  for (const Expr& g : b->space_guards) conds.push_back(ir::Substitute(g, init_sub));
  Stmt init_nest =
      Guarded(conds, ir::StoreNode::Make(b->buf, idx, ir::Substitute(b->init, init_sub)));
  for (auto it = init_loops.rbegin(); it != init_loops.rend(); ++it) {
    init_nest = MakeFor(*it, init_nest);
  }
  return init_nest;
}

absl::StatusOr<Stmt> Lowerer::FullInitNest(StageNest* b) {
  const ir::TensorNode& op = *b->op;
  std::vector<LoopInfo> init_loops;
  std::vector<Expr> idx;
  std::vector<std::pair<std::string, Expr>> sub;
  for (int k = 0; k < b->naxes; ++k) {
    LoopInfo l{Fresh(b->buf + ".init." + op.axes[k].name), shape_[b->s][k], ForKind::kSerial};
    b->own.insert(l.var);
    idx.push_back(ir::MakeVar(l.var));
    Expr a = b->attached ? ir::MakeVar(l.var) + rmin_[b->s][k] : ir::MakeVar(l.var);
    sub.emplace_back(op.axes[k].name, a);
    init_loops.push_back(l);
  }
  ASSIGN_OR_RETURN(Expr full_init_value, Inline(op.init, b->buf, 0));
  Stmt nest = ir::StoreNode::Make(b->buf, idx, ir::Substitute(full_init_value, sub));
  for (auto it = init_loops.rbegin(); it != init_loops.rend(); ++it) nest = MakeFor(*it, nest);
  return nest;
}

absl::StatusOr<Stmt> Lowerer::AttachAt(int s, int p, const std::vector<LoopInfo>& enclosing,
                                       Stmt content) {
  auto found = attached_.find({s, p});
  if (found == attached_.end()) return content;
  const std::vector<int>& ids = found->second;
  const int m = static_cast<int>(ids.size());
  std::vector<Stmt> nests(m);
  for (int i = m - 1; i >= 0; --i) {
    const int P = ids[i];
    const Stage& ps = state_.stage(P);
    scope_[P] = EffectiveScope(P, enclosing);
    ir::RangeMap relaxed;
    for (const LoopInfo& l : enclosing) {
      bool relax = false;
      if (scope_[P] == ir::MemoryScope::kShared) {
        relax = ir::IsThreadBound(l.kind) || l.kind == ForKind::kVThread;
      } else if (scope_[P] == ir::MemoryScope::kGlobal) {
        relax = IsGpuOnly(l.kind);
      }
      if (relax) relaxed[l.var] = {0, l.extent - 1};
    }
    std::vector<Stmt> below(nests.begin() + i + 1, nests.end());
    below.push_back(content);
    lower_internal::AccessRegion region =
        lower_internal::InferAccessRegion(ps.name(), ps.op->shape, below, relaxed);
    if (!region.accessed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage '", ps.name(), "' is computed at loop '", ps.attach_iter, "' of stage '",
          state_.stage(s).name(), "' but nothing inside that loop reads it"));
    }
    rmin_[P] = region.min;
    shape_[P] = region.extent;
    const std::vector<Expr> mins = region.min;
    auto relative = [&mins](const std::vector<Expr>& idx) {
      std::vector<Expr> out = idx;
      for (size_t k = 0; k < out.size() && k < mins.size(); ++k) {
        if (ir::AsConstInt(mins[k]) != std::optional<int64_t>(0)) out[k] = out[k] - mins[k];
      }
      return out;
    };
    for (int j = i + 1; j < m; ++j)
      nests[j] = lower_internal::RewriteLoads(nests[j], ps.name(), relative);
    content = lower_internal::RewriteLoads(content, ps.name(), relative);
    ASSIGN_OR_RETURN(nests[i], BuildStage(P, enclosing));
  }

  const bool gpu = target_.is_gpu();
  std::vector<Stmt> seq;
  bool any_shared = false;
  for (int i = 0; i < m; ++i) {
    seq.push_back(nests[i]);
    const bool shared = gpu && scope_[ids[i]] == ir::MemoryScope::kShared;
    any_shared |= shared;
    if (!shared || i + 1 == m) continue;
    for (int j = i + 1; j < m; ++j) {
      if (Reads(nests[j], state_.stage(ids[i]).name())) {
        seq.push_back(ir::BarrierNode::Make());
        break;
      }
    }
  }
  // Barriers around the shared fills: after the fill (its readers are other threads) and after
  // the use (before the next iteration's fill overwrites it).
  if (any_shared) seq.push_back(ir::BarrierNode::Make());
  seq.push_back(content);
  if (any_shared) seq.push_back(ir::BarrierNode::Make());
  Stmt body = ir::SeqNode::Make(std::move(seq));
  for (int i = m - 1; i >= 0; --i) body = ir::AllocateNode::Make(Decl(ids[i]), body);
  return body;
}

// The lowering, pass by pass (the order matters: each pass says what it needs from the ones
// before it).
absl::StatusOr<LoweredKernel> Lowerer::Run() {
  LoweredKernel out;
  // Parameters first: their names are taken before any loop variable is named.
  RETURN_IF_ERROR(DeclareParams(&out.nest));
  // Malformed states (unfilled splits, bad compute_at, GPU bindings on a CPU) fail before any
  // loop is built; also records which stages attach to which loops.
  RETURN_IF_ERROR(CheckState());
  // One nest per root stage; inside it, per stage: bound inference of attached stages, guards,
  // inlining, cross-thread reductions (thread_allreduce.cc), auto-unroll.
  std::vector<ir::BufferDecl> globals;
  ASSIGN_OR_RETURN(std::vector<RootKernel> kernels, BuildRootStages(&globals));
  // storage_align needs every buffer's final shape, known once all stages are built.
  ASSIGN_OR_RETURN(Alignments align, StorageAlignments());
  for (RootKernel& kernel : kernels) {
    Stmt& k = kernel.body;
    // Padded indices of storage_align; Loads drop their producer tensors (lower_passes.cc).
    k = lower_internal::Finalize(k, align);
    // Folds the index arithmetic of splits, fusions and regions.
    k = ir::Simplify(k);
    if (!target_.is_gpu()) continue;
    // vthread loops pushed inward: shared fetches once per block, local buffers one copy per
    // virtual thread (inject_vthread.cc); then the per-vthread indices folded.
    k = lower_internal::InjectVirtualThreads(k);
    k = ir::Simplify(k);
    // Shared memory is one per block: its Allocates move to the blockIdx loops' body
    // (gpu_validity.cc), out of the reduction loops whose iterations the pipeliner overlaps.
    k = lower_internal::HoistSharedAllocations(k);
    // Barriers that order nothing (a second one in a row, one at a block's end) go before the
    // pipeliner matches its fetch / barrier / compute / barrier loops.
    k = lower_internal::RemoveRedundantBarriers(k);
    // Prefetch of shared tiles, as the software_pipeline pragma asks (software_pipeline.cc);
    // tensor_core kernels are built with their own pipeline.
    if (!state_.stage(kernel.stage).tensor_core) k = PipelineSharedTiles(k, kernel.stage);
    // Grid, block and shared memory of the final kernel, checked against the target's limits.
    ASSIGN_OR_RETURN(LaunchConfig launch, KernelLaunch(k, kernel));
    out.launches.push_back(launch);
    // One launch per top-level statement: several statements stay together in one block.
    k = OneLaunch(k, kernel);
  }
  out.nest.body = WithGlobalBuffers(kernels, globals, align);
  // Every access inside the Allocate of its buffer (a reader outside its producer's loop fails).
  RETURN_IF_ERROR(lower_internal::CheckBufferScopes(out.nest.body, out.nest.params));
  return out;
}

absl::Status Lowerer::DeclareParams(ir::LoopNest* nest) {
  nest->name = dag_.num_stages() > 0 ? dag_.stage(dag_.output_ids().front()).name() : "kernel";
  for (int id : dag_.input_ids()) {
    const ir::Tensor& t = dag_.stage(id);
    nest->params.push_back({t.name(), t.dtype(), t.shape(), ir::MemoryScope::kGlobal});
  }
  nest->num_inputs = static_cast<int>(nest->params.size());
  for (int id : dag_.output_ids()) {
    const ir::Tensor& t = dag_.stage(id);
    nest->params.push_back({t.name(), t.dtype(), t.shape(), ir::MemoryScope::kGlobal});
  }
  for (const auto& p : nest->params) {
    params_.insert(p.name);
    names_.insert(p.name);
    int id = state_.StageId(p.name);
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the state has no stage for kernel parameter '", p.name, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RootKernel>> Lowerer::BuildRootStages(
    std::vector<ir::BufferDecl>* globals) {
  const int n = state_.num_stages();
  for (int s = 0; s < n; ++s) names_.insert(state_.stage(s).name());
  for (int s = 0; s < n; ++s) {
    const Stage& st = state_.stage(s);
    if (st.is_placeholder() || st.location != ComputeLocation::kRoot) continue;
    shape_[s] = st.op->shape;
    if (!params_.count(st.name()) && !FusedAway(s)) {
      globals->push_back({st.name(), st.op->dtype, st.op->shape, ir::MemoryScope::kGlobal});
    }
  }
  std::vector<RootKernel> kernels;
  for (int s = 0; s < n; ++s) {
    const Stage& st = state_.stage(s);
    if (st.is_placeholder() || st.location != ComputeLocation::kRoot) continue;
    if (st.epilogue_of >= 0) continue;  // built with its tensor_core stage
    if (st.tensor_core) {
      ASSIGN_OR_RETURN(lower_internal::TensorCoreKernels tc, BuildTensorCoreStage(s));
      for (Stmt& k : tc.kernels) kernels.push_back({s, st.name(), k});
      for (ir::BufferDecl& w : tc.workspaces) globals->push_back(std::move(w));
      continue;
    }
    ASSIGN_OR_RETURN(Stmt k, BuildStage(s, {}));
    kernels.push_back({s, st.name(), k});
  }
  return kernels;
}

// `e` with every Load of `buffer` replaced by `value` (an epilogue reading the value it follows).
Expr ReplaceLoadsOf(const Expr& e, const std::string& buffer, const Expr& value) {
  class Replace : public ir::ExprMutator {
   public:
    Replace(const std::string& b, const Expr& v) : b_(b), v_(v) {}

   protected:
    Expr MutateLoad(const ir::LoadNode* op, const Expr& e) override {
      if (op->buffer == b_) return v_;
      return ir::ExprMutator::MutateLoad(op, e);
    }

   private:
    const std::string& b_;
    const Expr& v_;
  };
  return Replace(buffer, value).Mutate(e);
}

bool Lowerer::FusedAway(int s) const {
  const Stage& st = state_.stage(s);
  if (st.tensor_core) return st.tensor_core->epilogue > 0;
  if (st.epilogue_of < 0) return false;
  for (int e = s + 1; e < state_.num_stages(); ++e) {
    if (state_.stage(e).epilogue_of == st.epilogue_of) return true;
  }
  return false;
}

absl::StatusOr<lower_internal::TensorCoreKernels> Lowerer::BuildTensorCoreStage(int s) {
  const Stage& st = state_.stage(s);
  if (!attached_.empty()) {
    for (const auto& [at, stages] : attached_) {
      if (at.first == s && !stages.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("invalid_schedule: stage '", st.name(),
                         "' has a tensor_core step and stages attached "
                         "to its loops"));
      }
    }
  }
  lower_internal::TensorCoreKernel k;
  k.op = st.op.get();
  ASSIGN_OR_RETURN(k.body, InlinedBody(s));
  k.config = *st.tensor_core;
  std::vector<int> chain;
  std::vector<Expr> bodies;
  for (int e = s + 1; e < state_.num_stages(); ++e) {
    if (state_.stage(e).epilogue_of != s) continue;
    chain.push_back(e);
    ASSIGN_OR_RETURN(Expr body, InlinedBody(e));
    bodies.push_back(body);
    built_[e] = true;
  }
  if (static_cast<int>(chain.size()) != st.tensor_core->epilogue) {
    return absl::InvalidArgumentError(absl::StrCat("stage '", st.name(), "' has ", chain.size(),
                                                   " epilogue stages; its tensor_core step says ",
                                                   st.tensor_core->epilogue));
  }
  k.out_buffer = chain.empty() ? st.name() : state_.stage(chain.back()).name();
  k.out_dtype = chain.empty() ? st.op->dtype : state_.stage(chain.back()).op->dtype;
  k.epilogue = [this, s, chain, bodies](const Expr& acc,
                                        const std::vector<Expr>& axes) -> absl::StatusOr<Expr> {
    const Stage& root = state_.stage(s);
    // What a Load of the stage's buffer would give: the value rounded to its element type.
    Expr v = root.op->dtype == ir::ScalarType::kFloat32 ? acc : ir::Cast(root.op->dtype, acc);
    std::string prev = root.name();
    for (size_t i = 0; i < chain.size(); ++i) {
      const Stage& e = state_.stage(chain[i]);
      Expr body = ReplaceLoadsOf(bodies[i], prev, v);
      std::vector<std::pair<std::string, Expr>> sub;
      for (size_t d = 0; d < e.op->axes.size() && d < axes.size(); ++d) {
        sub.emplace_back(e.op->axes[d].name, axes[d]);
      }
      v = ir::Substitute(body, sub);
      if (i + 1 < chain.size() && v.type() != e.op->dtype) v = ir::Cast(e.op->dtype, v);
      prev = e.name();
    }
    return v;
  };
  k.fresh = [this](const std::string& base) { return Fresh(base); };
  k.is_param = [this](const std::string& name) { return params_.count(name) > 0; };
  k.buffer_shape = [this](const std::string& name) -> std::optional<std::vector<int64_t>> {
    for (int i = 0; i < state_.num_stages(); ++i) {
      if (state_.stage(i).name() == name) return state_.stage(i).op->shape;
    }
    return std::nullopt;
  };
  built_[s] = true;
  return lower_internal::BuildTensorCoreKernel(k, target_);
}

absl::StatusOr<Alignments> Lowerer::StorageAlignments() const {
  Alignments align;
  for (int s = 0; s < state_.num_stages(); ++s) {
    const Stage& st = state_.stage(s);
    if (st.is_placeholder() || st.location == ComputeLocation::kInlined) continue;
    if (!built_[s]) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage '", st.name(), "' is computed at a loop that is never lowered"));
    }
    if (st.storage_align_dim >= 0) {
      auto a = lower_internal::MakeAlignment(shape_[s], st.storage_align_dim,
                                             st.storage_align_factor, st.storage_align_offset);
      if (a && params_.count(st.name())) {
        return absl::InvalidArgumentError(absl::StrCat("storage_align on kernel parameter '",
                                                       st.name(), "' (its layout is fixed)"));
      }
      if (a) align[st.name()] = *a;
    }
  }
  return align;
}

Stmt Lowerer::PipelineSharedTiles(const Stmt& kernel, int stage) const {
  // Off only when a pragma software_pipeline$0 says so; software_pipeline$3 / $4: the cp.async
  // pipeline of that many stages.
  if (!SoftwarePipelineEnabled(state_, stage)) return kernel;
  const int stages = SoftwarePipelineStages(state_, stage);
  return stages >= 3 ? PipelineSharedFetchesAsync(kernel, stages)
                     : PipelineSharedFetches(kernel, SoftwarePipelineDoubleBuffered(state_, stage));
}

absl::StatusOr<LaunchConfig> Lowerer::KernelLaunch(const Stmt& kernel,
                                                   const RootKernel& root) const {
  auto launch = lower_internal::AnalyzeKernel(kernel, target_);
  if (!launch.ok()) {
    return absl::Status(
        launch.status().code(),
        absl::StrCat(launch.status().message(), " (kernel of stage '", root.name, "')"));
  }
  launch->min_blocks_per_sm = KernelMinBlocksPerSm(state_, root.stage);
  if (launch->min_blocks_per_sm > 1 && ir::ContainsStmtKind(kernel, ir::StmtKind::kSetMaxNReg)) {
    // The reallocation divides one block's share of the register file (WsRegisterSplit).
    return absl::FailedPreconditionError(absl::StrCat(
        "invalid_schedule: the kernel of stage '", root.name,
        "' reallocates registers between its warpgroups (setmaxnreg), which needs one block per "
        "multiprocessor; its min_blocks_per_sm pragma asks for ",
        launch->min_blocks_per_sm));
  }
  return launch;
}

Stmt Lowerer::OneLaunch(const Stmt& kernel, const RootKernel& root) {
  if (!kernel.as<ir::SeqNode>()) return kernel;
  return ir::ForNode::Make(ir::MakeVar(Fresh(root.name + ".block")), ir::IntConst(0),
                           ir::IntConst(1), ForKind::kBlockIdxX, kernel);
}

Stmt Lowerer::WithGlobalBuffers(const std::vector<RootKernel>& kernels,
                                std::vector<ir::BufferDecl> globals, const Alignments& align) {
  for (auto& g : globals) {
    auto it = align.find(g.name);
    if (it != align.end()) g.shape = it->second.padded;
  }
  std::vector<Stmt> final_kernels;
  for (const RootKernel& k : kernels) final_kernels.push_back(k.body);
  Stmt body = ir::SeqNode::Make(final_kernels);
  if (!body.defined()) body = ir::SeqNode::Make({});
  for (auto it = globals.rbegin(); it != globals.rend(); ++it) {
    body = ir::AllocateNode::Make(*it, body);
  }
  return body;
}

}  // namespace

absl::StatusOr<LoweredKernel> Lower(const ir::ComputeDAG& dag, const State& state,
                                    const Target& target) {
  Lowerer l(dag, state, target);
  return l.Run();
}

}  // namespace tilesearch::schedule
