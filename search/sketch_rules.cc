// Sketch rules after TVM v0.19 sketch_policy_rules.cc (see sketch_rules.h for the differences).
#include "search/sketch_rules.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/expr.h"
#include "schedule/apply_step.h"
#include "schedule/matmul_like.h"
#include "schedule/tensor_core_lower.h"
#include "search/annotation.h"
#include "search/tensor_core_space.h"

namespace tilesearch::search {

using schedule::ComputeLocation;
using schedule::IteratorAnnotation;
using schedule::IteratorKind;
using schedule::Stage;
using schedule::State;
using schedule::Step;

namespace {

class LoadCollector : public ir::ExprVisitor {
 public:
  std::vector<const ir::LoadNode*> loads;
  bool expensive = false;  // a math call or a select

 protected:
  void VisitLoad(const ir::LoadNode* op, const ir::Expr& e) override {
    loads.push_back(op);
    ir::ExprVisitor::VisitLoad(op, e);
  }
  void VisitCall(const ir::CallNode* op, const ir::Expr& e) override {
    expensive = true;
    ir::ExprVisitor::VisitCall(op, e);
  }
  void VisitSelect(const ir::SelectNode* op, const ir::Expr& e) override {
    expensive = true;
    ir::ExprVisitor::VisitSelect(op, e);
  }
};

LoadCollector CollectLoads(const ir::TensorNode& op) {
  LoadCollector c;
  if (op.body.defined()) c.Visit(op.body);
  if (op.init.defined()) c.Visit(op.init);
  return c;
}

class VarCollector : public ir::ExprVisitor {
 public:
  std::set<std::string> names;

 protected:
  void VisitVar(const ir::VarNode* op, const ir::Expr&) override { names.insert(op->name); }
};

bool Reads(const ir::TensorNode& op, const std::string& buffer) {
  for (const ir::LoadNode* l : CollectLoads(op).loads) {
    if (l->buffer == buffer) return true;
  }
  return false;
}

bool IsOutput(const State& s, int id) {
  for (int o : s.dag().output_ids()) {
    if (s.dag().stage(o).name() == s.stage(id).name()) return true;
  }
  return false;
}

bool HasReduceIter(const Stage& st) {
  for (const auto& it : st.iters) {
    if (it.kind == IteratorKind::kReduce) return true;
  }
  return false;
}

// The axis an iterator comes from: "k.0" -> "k" (names of split parts end in ".<digits>").
std::string OriginalName(const std::string& name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return OriginalName(name.substr(0, dot));
}

// TVM GetLastReduceIteratorInOutermostReduceTile: the first iterator at which every reduce axis
// has appeared once. -1 when the stage has no reduce iterator.
int LastReduceIterInOutermostReduceTile(const Stage& st) {
  const size_t n = st.op->reduce_axes.size();
  std::set<std::string> seen;
  for (int i = 0; i < static_cast<int>(st.iters.size()); ++i) {
    if (st.iters[i].kind != IteratorKind::kReduce) continue;
    seen.insert(OriginalName(st.iters[i].name));
    if (seen.size() >= n) return i;
  }
  return -1;
}

bool HasLocalCache(const State& s, int id) {
  return s.StageId(s.stage(id).name() + ".local") >= 0 ||
         absl::EndsWith(s.stage(id).name(), ".local");
}

using Result = absl::StatusOr<std::vector<std::pair<PartialSketch, int>>>;

// Splits iterator `iter` of stage `sid` into n parts with unfilled lengths; returns the part names.
absl::StatusOr<std::vector<std::string>> SplitUnfilled(PartialSketch& p, int sid, int iter, int n) {
  schedule::SplitStep sp;
  sp.stage_id = sid;
  sp.iter_id = iter;
  sp.extent = p.shadow().stage(sid).iters[iter].extent;
  sp.lengths.assign(n - 1, std::nullopt);
  RETURN_IF_ERROR(p.Apply(sp));
  std::vector<std::string> names;
  for (int k = 0; k < n; ++k) names.push_back(p.shadow().stage(sid).iters[iter + k].name);
  return names;
}

absl::Status ReorderByName(PartialSketch& p, int sid, const std::vector<std::string>& order) {
  const Stage& st = p.shadow().stage(sid);
  schedule::ReorderStep r;
  r.stage_id = sid;
  std::set<int> used;
  for (const std::string& name : order) {
    int idx = st.IterIndex(name);
    if (idx < 0) return absl::InternalError(absl::StrCat("no iterator ", name));
    r.after_ids.push_back(idx);
    used.insert(idx);
  }
  for (int i = 0; i < static_cast<int>(st.iters.size()); ++i) {
    if (!used.count(i)) r.after_ids.push_back(i);
  }
  bool identity = true;
  for (int i = 0; i < static_cast<int>(r.after_ids.size()); ++i) identity &= r.after_ids[i] == i;
  if (identity) return absl::OkStatus();
  return p.Apply(r);
}

// TVM DoMultiLevelTiling: every space iterator split into #S parts, every reduce iterator into #R
// parts (lengths unfilled), reordered by `structure`. `space_split_ids` gets the split steps of
// the space iterators, in iterator order.
absl::Status DoMultiLevelTiling(PartialSketch& p, int sid, const std::string& structure,
                                std::vector<int>* space_split_ids) {
  const int n_s = static_cast<int>(std::count(structure.begin(), structure.end(), 'S'));
  const int n_r = static_cast<int>(std::count(structure.begin(), structure.end(), 'R'));
  std::vector<std::vector<std::string>> space(n_s), reduce(n_r);
  const std::vector<schedule::Iterator> iters = p.shadow().stage(sid).iters;
  for (const schedule::Iterator& it : iters) {
    const bool is_space = it.kind == IteratorKind::kSpace;
    const int n = is_space ? n_s : n_r;
    auto& levels = is_space ? space : reduce;
    if (n == 0) return absl::InvalidArgumentError("structure has no level for an iterator kind");
    if (n == 1) {
      levels[0].push_back(it.name);
      continue;
    }
    if (is_space) space_split_ids->push_back(static_cast<int>(p.steps().size()));
    ASSIGN_OR_RETURN(std::vector<std::string> parts,
                     SplitUnfilled(p, sid, p.shadow().stage(sid).IterIndex(it.name), n));
    for (int k = 0; k < n; ++k) levels[k].push_back(parts[k]);
  }
  std::vector<std::string> order;
  int si = 0, ri = 0;
  for (char c : structure) {
    const auto& level = c == 'S' ? space[si++] : reduce[ri++];
    order.insert(order.end(), level.begin(), level.end());
  }
  return ReorderByName(p, sid, order);
}

// TVM FollowTiling: the consumer's space iterators follow the producer's space splits with n_split
// lengths, reordered level by level.
absl::Status FollowTiling(PartialSketch& p, int target, const std::vector<int>& split_ids,
                          int n_split) {
  std::vector<std::string> space;
  for (const auto& it : p.shadow().stage(target).iters) {
    if (it.kind == IteratorKind::kSpace) space.push_back(it.name);
  }
  if (space.size() != split_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("consumer has ", space.size(),
                                                   " space iterators, producer ", split_ids.size(),
                                                   " space splits"));
  }
  std::vector<std::vector<std::string>> parts(n_split + 1);
  for (size_t j = 0; j < space.size(); ++j) {
    const int idx = p.shadow().stage(target).IterIndex(space[j]);
    schedule::FollowSplitStep fs;
    fs.stage_id = target;
    fs.iter_id = idx;
    fs.src_step_id = split_ids[j];
    fs.n_split = n_split;
    RETURN_IF_ERROR(p.Apply(fs));
    for (int k = 0; k <= n_split; ++k) {
      parts[k].push_back(p.shadow().stage(target).iters[idx + k].name);
    }
  }
  std::vector<std::string> order;
  for (const auto& level : parts) order.insert(order.end(), level.begin(), level.end());
  return ReorderByName(p, target, order);
}

// Fuses all reduce iterators of stage `sid` (they are innermost in an untransformed stage);
// returns the fused iterator's index.
absl::StatusOr<int> FuseReduceIters(PartialSketch& p, int sid) {
  std::vector<int> ids;
  const Stage& st = p.shadow().stage(sid);
  for (int i = 0; i < static_cast<int>(st.iters.size()); ++i) {
    if (st.iters[i].kind == IteratorKind::kReduce) ids.push_back(i);
  }
  if (ids.empty()) return absl::InvalidArgumentError("no reduce iterator");
  if (ids.size() > 1) RETURN_IF_ERROR(p.Apply(schedule::FuseStep{sid, ids}));
  return ids.front();
}

// Leading output axes of `consumer` by which it reads `producer` directly (every read indexes
// dimension d by the consumer's axis d) and which are still its untransformed outer iterators.
int NumCommonOuterIterators(const State& s, int producer, int consumer) {
  const Stage& c = s.stage(consumer);
  const std::string& buf = s.stage(producer).name();
  int common = static_cast<int>(std::min(c.op->axes.size(), s.stage(producer).op->axes.size()));
  bool any = false;
  for (const ir::LoadNode* l : CollectLoads(*c.op).loads) {
    if (l->buffer != buf) continue;
    any = true;
    int k = 0;
    while (k < common && k < static_cast<int>(l->indices.size())) {
      const auto* v = l->indices[k].as<ir::VarNode>();
      if (!v || v->name != c.op->axes[k].name) break;
      ++k;
    }
    common = k;
  }
  if (!any) return 0;
  int k = 0;
  while (k < common && k < static_cast<int>(c.iters.size()) &&
         c.iters[k].name == c.op->axes[k].name) {
    ++k;
  }
  return k;
}

// The stage a cross-thread reduction can be computed at: the single consumer, or (our extension)
// the consumer T when every other consumer is computed at T. -1 when none.
int FusionTarget(const State& s, int sid) {
  std::vector<int> cons = StageConsumers(s, sid);
  if (cons.empty()) return -1;
  if (cons.size() == 1) return cons[0];
  for (int t : cons) {
    bool ok = true;
    for (int c : cons) {
      if (c == t) continue;
      const Stage& cs = s.stage(c);
      ok &= cs.location == ComputeLocation::kAttached && cs.attach_stage == t;
    }
    if (ok) return t;
  }
  return -1;
}

// A root stage no step has transformed yet: its initial iterators, none annotated.
bool Untouched(const State& s, int sid) {
  const Stage& st = s.stage(sid);
  if (st.is_placeholder() || st.location != ComputeLocation::kRoot ||
      st.iters.size() != st.op->axes.size() + st.op->reduce_axes.size()) {
    return false;
  }
  for (const auto& it : st.iters) {
    if (it.annotation != IteratorAnnotation::kNone) return false;
  }
  return true;
}

// A root stage multi-level tiling has not touched: no local cache, and at most the splits of its
// innermost iterator that a fused cross-thread reduction adds (UntiledRowNormalize's sketch: the
// row's vector and thread splits).
bool LeftUntiled(const State& s, int sid) {
  const Stage& st = s.stage(sid);
  return !st.is_placeholder() && st.location == ComputeLocation::kRoot && !st.tensor_core &&
         st.epilogue_of < 0 && !HasLocalCache(s, sid) &&
         st.iters.size() <= st.op->axes.size() + st.op->reduce_axes.size() + 2;
}

// A stage computed whole at a consumer's loop with its initial iterators (UntiledLowReuse's
// window sum at its cast): untiled, as a root stage no step has touched.
bool UntiledAtConsumer(const State& s, int sid) {
  const Stage& st = s.stage(sid);
  if (st.is_placeholder() || st.location != ComputeLocation::kAttached ||
      st.scope != ir::MemoryScope::kGlobal ||
      st.iters.size() != st.op->axes.size() + st.op->reduce_axes.size()) {
    return false;
  }
  for (const auto& it : st.iters) {
    if (it.annotation != IteratorAnnotation::kNone) return false;
  }
  return true;
}

std::vector<std::pair<PartialSketch, int>> One(PartialSketch p, int next) {
  std::vector<std::pair<PartialSketch, int>> v;
  v.emplace_back(std::move(p), next);
  return v;
}

// ------------------------------------------------------------------------------------------------

class AddCacheRead : public SketchRule {
 public:
  const char* name() const override { return "AddCacheRead"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext&) const override {
    const State& s = p.shadow();
    std::vector<int> cons = StageConsumers(s, sid);
    if (cons.empty()) return RuleCondition::kPass;
    const int t = cons[0];
    if (s.stage(t).tensor_core) return RuleCondition::kPass;  // stages its own operands
    if (!NeedsMultiLevelTiling(s, t) || HasCrossThreadReduction(s, t)) return RuleCondition::kPass;
    // A consumer left untiled (UntiledLowReuse) reads its inputs straight from global memory.
    if (Untouched(s, t) || UntiledAtConsumer(s, t)) return RuleCondition::kPass;
    if (!Reads(*s.stage(t).op, s.stage(sid).name())) return RuleCondition::kPass;
    if (LastReduceIterInOutermostReduceTile(s.stage(t)) < 0) return RuleCondition::kPass;
    return RuleCondition::kApplyAndSkipRest;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    PartialSketch q = p;
    const std::vector<int> cons = StageConsumers(p.shadow(), sid);
    int offset = 0;
    for (int c : cons) {
      const int target = c + offset;
      RETURN_IF_ERROR(q.Apply(schedule::CacheReadStep{sid, ir::MemoryScope::kShared, {target}}));
      ++offset;
      const int added = sid + 1;
      const int moved = target + 1;
      const int at = LastReduceIterInOutermostReduceTile(q.shadow().stage(moved));
      if (at < 0) return absl::InvalidArgumentError("consumer has no reduce iterator");
      RETURN_IF_ERROR(q.Apply(schedule::ComputeAtStep{added, moved, at}));
    }
    return One(std::move(q), sid);
  }
};

// Our addition (not in TVM): a stage read by a cross-thread-reduction row group (reductions
// computed at their normalize stage T, and T itself: softmax, log_softmax, layernorm) is cached in
// shared memory at T's row loop, so the row is read from global memory once instead of once per
// stage. Applies (kApply: the uncached sketch stays) when the per-row footprint fits in half of the
// static shared-memory limit. Annotation makes the copy a cooperative, vectorized fetch that
// follows T's thread split.
class AddRowCacheRead : public SketchRule {
 public:
  const char* name() const override { return "AddRowCacheRead"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    return AttachIter(p.shadow(), sid, target) >= 0 ? RuleCondition::kApply : RuleCondition::kPass;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    const State& s = p.shadow();
    const int at = AttachIter(s, sid, target);
    if (at < 0) return absl::InvalidArgumentError("no row group to cache for");
    const int t = FusionTarget(s, sid);
    PartialSketch q = p;
    RETURN_IF_ERROR(
        q.Apply(schedule::CacheReadStep{sid, ir::MemoryScope::kShared, StageConsumers(s, sid)}));
    // The cache stage is inserted at sid + 1; every consumer moves up by one.
    RETURN_IF_ERROR(q.Apply(schedule::ComputeAtStep{sid + 1, t + 1, at}));
    return One(std::move(q), sid - 1);
  }

 private:
  // The iterator of T at which the row group is computed, or -1 when the rule does not apply.
  static int AttachIter(const State& s, int sid, const Target& target) {
    if (!target.is_gpu()) return -1;
    const Stage& st = s.stage(sid);
    if (st.location == ComputeLocation::kInlined || absl::EndsWith(st.name(), ".shared") ||
        s.StageId(st.name() + ".shared") >= 0) {
      return -1;
    }
    const std::vector<int> cons = StageConsumers(s, sid);
    const int t = FusionTarget(s, sid);
    if (cons.size() < 2 || t < 0 || !HasCrossThreadReduction(s, t)) return -1;
    const Stage& ts = s.stage(t);
    if (ts.location != ComputeLocation::kRoot) return -1;
    std::string iter;
    for (int c : cons) {
      if (c == t) continue;
      const Stage& cs = s.stage(c);
      if (!HasReduceIter(cs) || (!iter.empty() && cs.attach_iter != iter)) return -1;
      iter = cs.attach_iter;
    }
    int at = -1;
    for (int i = 0; i < static_cast<int>(ts.iters.size()); ++i) {
      if (ts.iters[i].name == iter) at = i;
    }
    if (at < 0) return -1;
    // Footprint of one row: T's iterators inside the attach point (split parts multiply back to
    // at least the axis extent, also with the shadow's placeholder lengths).
    int64_t elements = 1;
    for (int i = at + 1; i < static_cast<int>(ts.iters.size()); ++i) elements *= ts.iters[i].extent;
    const int64_t bytes = elements * ir::BytesOf(st.op->dtype);
    return bytes * 2 <= target.max_shared_memory_per_block ? at : -1;
  }
};

// The longest elementwise chain a tensor-core sketch takes as its epilogue.
constexpr int kMaxEpilogueLinks = 8;

// Whether stage `r` is an epilogue link of stage `p`: elementwise, of p's shape, and reading p
// only at its own index (what a tensor_core step's epilogue chain accepts, schedule/step.h).
bool IsEpilogueLink(const State& s, int p, int r) {
  const ir::TensorNode& rop = *s.stage(r).op;
  const ir::TensorNode& pop = *s.stage(p).op;
  if (rop.is_placeholder || !rop.reduce_axes.empty() || rop.shape != pop.shape) return false;
  bool any = false;
  for (const ir::LoadNode* l : CollectLoads(rop).loads) {
    if (l->buffer != pop.name) continue;
    any = true;
    if (l->indices.size() != rop.axes.size()) return false;
    for (size_t d = 0; d < l->indices.size(); ++d) {
      const auto* v = l->indices[d].as<ir::VarNode>();
      if (!v || v->name != rop.axes[d].name) return false;
    }
  }
  return any;
}

// The stages whose definitions read stage `id` (inlined or not: the DAG's edges).
std::vector<int> DirectReaders(const State& s, int id) {
  std::vector<int> out;
  for (int c = 0; c < s.num_stages(); ++c) {
    if (c != id && !s.stage(c).is_placeholder() && Reads(*s.stage(c).op, s.stage(id).name())) {
      out.push_back(c);
    }
  }
  return out;
}

// For an elementwise stage on a chain that a tensor-core matmul could compute as its stored
// epilogue — matmul-like root stage M → links each read only by the next → E, where E is no
// output and has several readers or one that is no link (softmax's max, sum and normalize over
// Q·Kᵀ·scale; a LayerNorm of a dense) — the id of E; -1 otherwise.
int StoredEpilogueEnd(const State& s, int sid, const TuneContext& ctx) {
  if (!schedule::lower_internal::TargetHasMmaSync(ctx.target()) ||
      !ctx.sketch_options().tensor_cores) {
    return -1;
  }
  // Back to the matmul: each link reads one computed stage, which only it reads. At most
  // kMaxEpilogueLinks links (MultiLevelTilingTensorCore's chain).
  int links = 0;
  for (int cur = sid;; ++links) {
    if (links >= kMaxEpilogueLinks) return -1;
    const Stage& cs = s.stage(cur);
    if (cs.is_placeholder() || !cs.op->reduce_axes.empty() || IsOutput(s, cur)) return -1;
    int producer = -1;
    for (const ir::LoadNode* l : CollectLoads(*cs.op).loads) {
      const int id = s.StageId(l->buffer);
      if (id < 0 || s.stage(id).is_placeholder() || id == producer) continue;
      if (producer >= 0) return -1;
      producer = id;
    }
    if (producer < 0 || !IsEpilogueLink(s, producer, cur) ||
        DirectReaders(s, producer) != std::vector<int>{cur}) {
      return -1;
    }
    const Stage& ps = s.stage(producer);
    if (ps.location != ComputeLocation::kRoot || ps.tensor_core) return -1;
    if (!ps.op->reduce_axes.empty()) {
      // (An output matmul takes no epilogue.)
      absl::StatusOr<schedule::MatmulLike> mm = schedule::AnalyzeMatmulLike(*ps.op, ps.op->body);
      if (!mm.ok() || TensorCoreKinds(*mm, ctx.sketch_options().allow_tf32).empty() ||
          IsOutput(s, producer)) {
        return -1;
      }
      break;
    }
    if (IsOutput(s, producer)) return -1;
    cur = producer;
  }
  // Forward to the chain's end.
  for (int cur = sid;; ++links) {
    if (links >= kMaxEpilogueLinks) return -1;
    const std::vector<int> readers = DirectReaders(s, cur);
    // An attached reader (a row cache of E) ends the chain: it reads what the epilogue stores.
    if (readers.size() == 1 && IsEpilogueLink(s, cur, readers[0]) &&
        s.stage(readers[0]).location != ComputeLocation::kAttached) {
      if (IsOutput(s, readers[0])) return -1;  // an ordinary epilogue: nothing to store early
      cur = readers[0];
      continue;
    }
    if (readers.empty() || IsOutput(s, cur)) return -1;
    // E's readers as they stand (its readers come later, so they have been visited): several,
    // a reduction, or a row cache. Readers that inlining joins into one elementwise stage (an
    // activation written x · sigmoid(x) over two stages) are one: the chain runs on to it.
    const std::vector<int> consumers = StageConsumers(s, cur);
    bool stored = consumers.size() >= 2;
    for (int c : consumers) {
      stored = stored || !s.stage(c).op->reduce_axes.empty() ||
               absl::EndsWith(s.stage(c).name(), ".shared");
    }
    return stored ? cur : -1;
  }
}

// The tensor-core epilogue stored for several readers (ours; Ansor inlines every elementwise
// stage on GPU): where a matmul-like stage's elementwise chain ends in a stage E read by several
// stages, inlining E makes each reader recompute it from the float32 accumulators, which the
// matmul then stores in float32. For softmax(Q·Kᵀ·scale) in bfloat16 that is 4 bytes per score
// written and read where E (the scaled bfloat16 scores, as PyTorch stores them) takes 2, and the
// kernels are bound by those bytes. The rule keeps E and its links root as well (the tensor_core
// sketch then takes them as its epilogue), beside the inlined sketches: measurement decides.
class KeepStoredEpilogue : public SketchRule {
 public:
  const char* name() const override { return "KeepStoredEpilogue"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const State& s = p.shadow();
    if (!ShouldAlwaysBeInlined(s, sid, ctx.target())) return RuleCondition::kPass;
    const int end = StoredEpilogueEnd(s, sid, ctx);
    if (end < 0) return RuleCondition::kPass;
    // A link before E follows E's choice: root with E, inlined (AlwaysInline) without it.
    if (end != sid && s.stage(end).location != ComputeLocation::kRoot) {
      return RuleCondition::kPass;
    }
    return RuleCondition::kApplyAndSkipRest;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    std::vector<std::pair<PartialSketch, int>> out;
    out.emplace_back(p, sid - 1);  // kept root
    if (StoredEpilogueEnd(p.shadow(), sid, ctx) == sid) {
      // Inlined, as AlwaysInline would (not where a row cache reads E).
      PartialSketch q = p;
      if (q.Apply(schedule::ComputeInlineStep{sid}).ok()) out.emplace_back(std::move(q), sid - 1);
    }
    return out;
  }
};

class AlwaysInline : public SketchRule {
 public:
  const char* name() const override { return "AlwaysInline"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    return ShouldAlwaysBeInlined(p.shadow(), sid, target) ? RuleCondition::kApplyAndSkipRest
                                                          : RuleCondition::kPass;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    PartialSketch q = p;
    RETURN_IF_ERROR(q.Apply(schedule::ComputeInlineStep{sid}));
    return One(std::move(q), sid - 1);
  }
};

// Whether every load of `op` that uses axis `axis` reads it as its last (contiguous) index, and
// some load does.
bool ReadsAlongLastIndex(const ir::TensorNode& op, const std::string& axis) {
  const std::vector<const ir::LoadNode*> loads = internal::LoadsUsing(op, axis);
  for (const ir::LoadNode* l : loads) {
    const auto* last = l->indices.empty() ? nullptr : l->indices.back().as<ir::VarNode>();
    if (last == nullptr || last->name != axis) return false;
  }
  return !loads.empty();
}

// Whether a row reduction `r` (one reduce axis) and the consumer `t` it is fused into both read
// their rows contiguously: r's reduce axis and t's innermost axis are each the last index of the
// loads that use them (softmax over the last axis; not over an outer one), so that a vector of
// consecutive row elements per thread is a vector load.
bool RowIsContiguous(const State& s, int r, int t) {
  const ir::TensorNode& rop = *s.stage(r).op;
  const ir::TensorNode& top = *s.stage(t).op;
  return rop.reduce_axes.size() == 1 && !top.axes.empty() &&
         ReadsAlongLastIndex(rop, rop.reduce_axes[0].name) &&
         ReadsAlongLastIndex(top, top.axes.back().name);
}

// Whether step i splits a stage's iterator and the next step vectorizes the inner part (the vector
// split CrossThreadReduction makes on a consumer's row before its thread split).
bool IsRowVectorSplit(const std::vector<Step>& steps, int i) {
  return internal::SplitThenAnnotated(steps, i, IteratorAnnotation::kVectorize) != nullptr;
}

class CrossThreadReduction : public SketchRule {
 public:
  static constexpr int64_t kLongReduce = 65536;
  static constexpr int64_t kMaxGemvReuse = 4;
  const char* name() const override { return "CrossThreadReduction"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location != ComputeLocation::kRoot) return RuleCondition::kPass;
    if (HasLocalCache(s, sid) || !HasReduceIter(st)) return RuleCondition::kPass;
    auto [space, reduce] = CumulativeSpaceAndReduceLength(st);
    if (NeedsMultiLevelTiling(s, sid)) {
      // TVM: few output points and a longer reduction; otherwise multi-level tiling is better.
      if (space <= target.max_threads_per_block && space < reduce) return RuleCondition::kApply;
      // Ours: a GEMV-like stage (a matrix-vector product, a dense layer with batch 1-4) reads
      // its largest input at most kMaxGemvReuse times, so tiling for reuse saves no DRAM traffic:
      // one block per output point whose threads split the row reads each row once, coalesced,
      // at any number of points. Measured on gemv 8192x65536 (H200): multi-level tiling's best
      // was 77% of the read bandwidth. kApply: the tiled sketches stay and measurement decides.
      return reduce > target.warp_size && LargestReadReuse(s, sid) <= kMaxGemvReuse
                 ? RuleCondition::kApply
                 : RuleCondition::kPass;
    }
    if (reduce <= target.warp_size) return RuleCondition::kPass;
    // Ours: from kLongReduce elements on, one thread's sequential float32 sum over the whole
    // extent is both slow and imprecise (LayerNorm rows of 4 M elements missed the check by 8×
    // with the plain program), so the sketch without a cross-thread reduction is not derived.
    return reduce >= kLongReduce ? RuleCondition::kApplyAndSkipRest : RuleCondition::kApply;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    PartialSketch q = p;
    ASSIGN_OR_RETURN(int fused, FuseReduceIters(q, sid));
    const State& s = q.shadow();
    const int t = FusionTarget(s, sid);
    int common = t >= 0 ? NumCommonOuterIterators(s, sid, t) : 0;
    std::vector<int> split_ids;
    // A consumer multi-level tiling would take is fusible when it was left untiled
    // (UntiledRowNormalize).
    bool fusible = t >= 0 && common > 0 && (!NeedsMultiLevelTiling(s, t) || LeftUntiled(s, t)) &&
                   s.stage(t).location == ComputeLocation::kRoot;
    if (fusible) {
      const std::string& tname = s.stage(t).name();
      for (int i = 0; i < static_cast<int>(q.steps().size()); ++i) {
        if (std::holds_alternative<schedule::SplitStep>(q.steps()[i]) &&
            q.step_stage_names()[i] == tname) {
          split_ids.push_back(i);
        }
      }
      if (split_ids.empty()) {
        if (HasReduceIter(s.stage(t))) {
          fusible = false;
        } else {
          // TVM's thread split of the consumer's innermost iterator (bound to threadIdx.x), which
          // the reduction follows. Ours: where the row is contiguous, a vector split before it
          // ([rest, threads, vector]): a vector of consecutive elements per thread (annotation
          // draws 1 to 16 bytes' worth), so that bfloat16 rows load and store 16 bytes per
          // instruction instead of 2. With a width of 1 this is TVM's thread split.
          const int last = static_cast<int>(s.stage(t).iters.size()) - 1;
          const bool vector = RowIsContiguous(s, sid, t);
          if (vector) {
            split_ids.push_back(static_cast<int>(q.steps().size()));
            RETURN_IF_ERROR(SplitUnfilled(q, t, last, 2).status());
            RETURN_IF_ERROR(
                q.Apply(schedule::AnnotationStep{t, last + 1, IteratorAnnotation::kVectorize}));
          }
          split_ids.push_back(static_cast<int>(q.steps().size()));
          schedule::SplitStep threads;
          threads.stage_id = t;
          threads.iter_id = last;
          // (After a vector: the rest, known once annotation draws the width.)
          threads.extent = vector ? 0 : q.shadow().stage(t).iters[last].extent;
          threads.lengths = {std::nullopt};
          RETURN_IF_ERROR(q.Apply(threads));
          RETURN_IF_ERROR(
              q.Apply(schedule::AnnotationStep{t, last + 1, IteratorAnnotation::kThreadIdxX}));
        }
      }
      // One thread split (TVM's form, as older sketches and other rules make it), or the vector
      // split then the thread split made above.
      fusible &= split_ids.size() == 1 ||
                 (split_ids.size() == 2 && IsRowVectorSplit(q.steps(), split_ids[0]));
    }
    if (fusible) {
      // Follows the consumer's splits in the order they were made ([rest, threads] or [rest,
      // threads, vector]); the reduction's vector part is unrolled (one vector load per run).
      for (size_t k = 0; k < split_ids.size(); ++k) {
        schedule::FollowSplitStep fs;
        fs.stage_id = sid;
        fs.iter_id = fused;
        fs.src_step_id = split_ids[k];
        fs.n_split = 1;
        RETURN_IF_ERROR(q.Apply(fs));
      }
      RETURN_IF_ERROR(
          q.Apply(schedule::AnnotationStep{sid, fused + 1, IteratorAnnotation::kThreadIdxX}));
      if (split_ids.size() == 2) {
        RETURN_IF_ERROR(
            q.Apply(schedule::AnnotationStep{sid, fused + 2, IteratorAnnotation::kUnroll}));
      }
      RETURN_IF_ERROR(q.Apply(schedule::ComputeAtStep{sid, t, common - 1}));
    } else {
      RETURN_IF_ERROR(SplitUnfilled(q, sid, fused, 2).status());
      RETURN_IF_ERROR(
          q.Apply(schedule::AnnotationStep{sid, fused + 1, IteratorAnnotation::kThreadIdxX}));
    }
    return One(std::move(q), sid - 1);
  }
};

// Ours (TVM's GPU rules reduce each output point within one block): a reduction with few output
// points and a long reduce extent (a LayerNorm over 4 M-element rows, a sum along one long axis)
// is split across blocks. The fused reduce iterator is split into chunks (a block-reduction
// split: annotation draws the chunk length from gpu_block_reduction_chunks), the chunk index is
// factored out (rfactor) as a space axis of "X.rf", whose blocks each reduce one chunk with a
// cross-thread reduction, and X reduces the partials with another cross-thread reduction.
// Deterministic (no atomics), and precise: a thread's sequential float32 run is chunk / threads
// long instead of extent / threads, then combined in two trees. kApply: the one-block-per-point
// sketch stays and measurement decides.
class SplitReductionAcrossBlocks : public SketchRule {
 public:
  // Output points below which blocks are too few to fill the GPU (per SM), and the shortest
  // reduce extent split (16 elements per thread at 1024 threads).
  static constexpr int64_t kMaxPointsPerSm = 2;
  static constexpr int64_t kMinReduce = 16384;

  const char* name() const override { return "SplitReductionAcrossBlocks"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    if (!target.is_gpu() || !Untouched(s, sid) || HasLocalCache(s, sid) || !HasReduceIter(st) ||
        NeedsMultiLevelTiling(s, sid) || absl::EndsWith(st.name(), ".rf") ||
        s.StageId(st.name() + ".rf") >= 0) {
      return RuleCondition::kPass;
    }
    auto [space, reduce] = CumulativeSpaceAndReduceLength(st);
    return space < kMaxPointsPerSm * target.sm_count && reduce >= kMinReduce ? RuleCondition::kApply
                                                                             : RuleCondition::kPass;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    PartialSketch q = p;
    ASSIGN_OR_RETURN(int fused, FuseReduceIters(q, sid));
    int n_space = 0;
    for (const auto& it : q.shadow().stage(sid).iters) n_space += it.kind == IteratorKind::kSpace;
    // [chunk index, element of the chunk]; the chunk index becomes X.rf's last axis.
    RETURN_IF_ERROR(SplitUnfilled(q, sid, fused, 2).status());
    RETURN_IF_ERROR(q.Apply(schedule::RfactorStep{sid, fused, n_space}));
    // X.rf (now at sid) and X (sid + 1) start from their initial iterators: X.rf's axes then its
    // one reduce iterator (the chunk's elements), X's axes then the chunk index.
    // Their thread splits record no extent: both extents follow the chunk length, which mutation
    // changes.
    for (auto [stage, iter] : {std::pair{sid, n_space + 1}, std::pair{sid + 1, n_space}}) {
      schedule::SplitStep sp;
      sp.stage_id = stage;
      sp.iter_id = iter;
      sp.extent = 0;
      sp.lengths = {std::nullopt};
      RETURN_IF_ERROR(q.Apply(sp));
      RETURN_IF_ERROR(
          q.Apply(schedule::AnnotationStep{stage, iter + 1, IteratorAnnotation::kThreadIdxX}));
    }
    return One(std::move(q), sid - 1);
  }
};

// Ours: a normalize stage (no reduction of its own) that multi-level tiling would take because it
// reads a broadcast 2-D tensor (scale_mask_softmax's additive mask M[i, j], reused over the batch)
// but that also reads row reductions a cross-thread reduction can compute (its max and sum) is
// also left untiled, so CrossThreadReduction fuses those reductions into it: one kernel reading
// the input once per row, where the tiled sketch runs each reduction as a kernel of its own (the
// H200's scale_mask_softmax: three kernels, each at 86 % of DRAM peak, 49 % of the problem's
// bandwidth). kApply: the tiled sketch stays.
class UntiledRowNormalize : public SketchRule {
 public:
  const char* name() const override { return "UntiledRowNormalize"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    if (!ctx.target().is_gpu() || !Untouched(s, sid) || HasReduceIter(st) ||
        !NeedsMultiLevelTiling(s, sid)) {
      return RuleCondition::kPass;
    }
    for (int i = 0; i < sid; ++i) {
      const Stage& r = s.stage(i);
      if (r.is_placeholder() || r.location != ComputeLocation::kRoot || !HasReduceIter(r) ||
          NeedsMultiLevelTiling(s, i) || !Reads(*st.op, r.name())) {
        continue;
      }
      if (CumulativeSpaceAndReduceLength(r).second > ctx.target().warp_size) {
        return RuleCondition::kApply;
      }
    }
    return RuleCondition::kPass;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    return One(p, sid - 1);
  }
};

// Ours: a stage multi-level tiling would take whose largest input is read at most kMaxReuse times
// and whose reduction is short (a depthwise convolution's 3x3 window) gains nothing from tiling for
// reuse: its neighbours' inputs come from L1 / L2 anyway, and the shared-memory tiles of the tiled
// sketches cost barriers and occupancy. So the stage is also left untiled, one output point per
// thread (bound by annotation). Measured on depthwise_conv2d 3x3 over [64, 384, 112, 112] (H200):
// the tiled sketches' best ran at 15 % of the copy bandwidth, 0.72x eager. kApply: the tiled
// sketches stay and measurement decides.
class UntiledLowReuse : public SketchRule {
 public:
  static constexpr int64_t kMaxReuse = 4;
  const char* name() const override { return "UntiledLowReuse"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    if (!ctx.target().is_gpu() || st.is_placeholder() || st.location != ComputeLocation::kRoot ||
        !Untouched(s, sid) || HasLocalCache(s, sid) || !NeedsMultiLevelTiling(s, sid) ||
        HasCrossThreadReduction(s, sid)) {
      return RuleCondition::kPass;
    }
    const int64_t reduce = CumulativeSpaceAndReduceLength(st).second;
    return reduce <= ctx.target().warp_size && LargestReadReuse(s, sid) <= kMaxReuse
               ? RuleCondition::kApply
               : RuleCondition::kPass;
  }
  // The stage left untiled; and where one consumer reads it elementwise (a half-precision
  // convolution's cast to bfloat16), also computed at that consumer's innermost iterator, so
  // that one kernel reads the 2-byte inputs and writes the 2-byte output instead of storing and
  // re-reading a float32 intermediate. Annotation then splits the consumer's points per thread.
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    std::vector<std::pair<PartialSketch, int>> out;
    out.emplace_back(p, sid - 1);
    const State& s = p.shadow();
    const int t = SingleElementwiseMatchedConsumer(s, sid);
    if (t >= 0 && !IsOutput(s, sid) && Untouched(s, t) && !HasReduceIter(s.stage(t)) &&
        !s.stage(t).iters.empty()) {
      PartialSketch q = p;
      const int last = static_cast<int>(s.stage(t).iters.size()) - 1;
      // Where the step does not apply, the untiled sketch above still stands.
      if (q.Apply(schedule::ComputeAtStep{sid, t, last}).ok())
        out.emplace_back(std::move(q), sid - 1);
    }
    return out;
  }
};

// Ours: a plain reduction left untiled (no reuse, one output point per thread) whose consecutive
// output points read consecutive input elements (a sum over an outer axis: [128, 4096, 4095] over
// dim 1) loads, per warp and input row, 32 consecutive elements: 5 sectors instead of 4 where rows
// are not 128-byte aligned, and the L2 bounds it. Here each thread takes `points` consecutive
// outputs along the innermost space axis (2, 4 or 8: a warp's loads of one row span 8-32 sectors,
// and LLVM merges the aligned ones into vector loads), their sums in a local stage computed at the
// thread with the reduce loops outside the points (one accumulator per point, in registers).
// Measured on that sum (H200, hand schedules, `tilesearch measure`): one point per thread 2.278 ms,
// two 2.122, four 1.975 (eager 2.09). kApply: the one-point sketch stays and measurement decides.
class PointsPerThreadReduction : public SketchRule {
 public:
  static constexpr int64_t kPoints[] = {2, 4, 8};
  const char* name() const override { return "PointsPerThreadReduction"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    if (!ctx.target().is_gpu() || !Untouched(s, sid) || HasLocalCache(s, sid) ||
        !HasReduceIter(st) || NeedsMultiLevelTiling(s, sid) || st.op->axes.empty()) {
      return RuleCondition::kPass;
    }
    const std::string& inner = st.op->axes.back().name;
    if (st.op->shape.back() < kPoints[0] * ctx.target().warp_size) return RuleCondition::kPass;
    // Every load's innermost index is the innermost space axis itself.
    const std::vector<const ir::LoadNode*> loads = CollectLoads(*st.op).loads;
    for (const ir::LoadNode* l : loads) {
      const auto* v = l->indices.empty() ? nullptr : l->indices.back().as<ir::VarNode>();
      if (v == nullptr || v->name != inner) return RuleCondition::kPass;
    }
    return loads.empty() ? RuleCondition::kPass : RuleCondition::kApply;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    std::vector<std::pair<PartialSketch, int>> out;
    const int64_t inner_extent = p.shadow().stage(sid).op->shape.back();
    for (int64_t points : kPoints) {
      if (inner_extent < points * ctx.target().warp_size) continue;
      PartialSketch q = p;
      RETURN_IF_ERROR(q.Apply(schedule::CacheWriteStep{sid, ir::MemoryScope::kLocal}));
      const int local = sid;
      const int stage = sid + 1;
      const int n_space = static_cast<int>(q.shadow().stage(stage).iters.size());
      // [.., inner] -> [.., inner.0, inner.1 (points)] -> [fused, inner.1]
      schedule::SplitStep per_thread;
      per_thread.stage_id = stage;
      per_thread.iter_id = n_space - 1;
      per_thread.extent = inner_extent;
      per_thread.lengths = {points};
      RETURN_IF_ERROR(q.Apply(per_thread));
      schedule::FuseStep fuse;
      fuse.stage_id = stage;
      for (int i = 0; i < n_space; ++i) fuse.fused_ids.push_back(i);
      RETURN_IF_ERROR(q.Apply(fuse));
      // [fused, inner.1] -> [blocks, threads, inner.1]; annotation draws the threads.
      RETURN_IF_ERROR(SplitUnfilled(q, stage, 0, 2).status());
      RETURN_IF_ERROR(q.Apply(schedule::AnnotationStep{stage, 1, IteratorAnnotation::kThreadIdxX}));
      RETURN_IF_ERROR(q.Apply(schedule::AnnotationStep{stage, 0, IteratorAnnotation::kBlockIdxX}));
      RETURN_IF_ERROR(q.Apply(schedule::ComputeAtStep{local, stage, 1}));
      // The local stage: reduce iterators first, the points innermost.
      const Stage& l = q.shadow().stage(local);
      schedule::ReorderStep order;
      order.stage_id = local;
      for (IteratorKind kind : {IteratorKind::kReduce, IteratorKind::kSpace}) {
        for (int i = 0; i < static_cast<int>(l.iters.size()); ++i) {
          if (l.iters[i].kind == kind) order.after_ids.push_back(i);
        }
      }
      RETURN_IF_ERROR(q.Apply(order));
      out.emplace_back(std::move(q), sid - 1);
    }
    return out;
  }
};

class AddCacheWrite : public SketchRule {
 public:
  const char* name() const override { return "AddCacheWrite"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    const State& s = p.shadow();
    if (s.stage(sid).location != ComputeLocation::kRoot || HasLocalCache(s, sid)) {
      return RuleCondition::kPass;
    }
    if (!NeedsMultiLevelTiling(s, sid) || SingleElementwiseMatchedConsumer(s, sid) >= 0) {
      return RuleCondition::kPass;
    }
    return target.is_gpu() ? RuleCondition::kApplyAndSkipRest : RuleCondition::kApply;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    PartialSketch q = p;
    RETURN_IF_ERROR(q.Apply(schedule::CacheWriteStep{sid, ir::MemoryScope::kLocal}));
    return One(std::move(q), sid);
  }
};

class MultiLevelTilingWithFusion : public SketchRule {
 public:
  const char* name() const override { return "MultiLevelTilingWithFusion"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    const State& s = p.shadow();
    if (s.stage(sid).location != ComputeLocation::kRoot || !NeedsMultiLevelTiling(s, sid) ||
        SingleElementwiseMatchedConsumer(s, sid) < 0) {
      return RuleCondition::kPass;
    }
    // Always fuse a cache_write stage, and always on GPU.
    return target.is_gpu() || absl::EndsWith(s.stage(sid).name(), ".local")
               ? RuleCondition::kApplyAndSkipRest
               : RuleCondition::kApply;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    const SketchOptions& options = ctx.sketch_options();
    const std::string& structure = target.is_gpu() ? options.gpu_structure : options.cpu_structure;
    PartialSketch base = p;
    const int consumer = SingleElementwiseMatchedConsumer(p.shadow(), sid);
    std::vector<int> split_ids;
    RETURN_IF_ERROR(DoMultiLevelTiling(base, sid, structure, &split_ids));
    std::vector<int> levels = target.is_gpu() ? std::vector<int>{3} : std::vector<int>{1, 2};
    std::vector<std::pair<PartialSketch, int>> out;
    for (int level : levels) {
      if (level > static_cast<int>(structure.size()) || structure[level - 1] != 'S') continue;
      PartialSketch q = base;
      RETURN_IF_ERROR(FollowTiling(q, consumer, split_ids, level));
      const int at = level * static_cast<int>(split_ids.size()) - 1;
      RETURN_IF_ERROR(q.Apply(schedule::ComputeAtStep{sid, consumer, at}));
      out.emplace_back(std::move(q), sid - 1);
    }
    return out;
  }
};

class MultiLevelTiling : public SketchRule {
 public:
  const char* name() const override { return "MultiLevelTiling"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext&) const override {
    const State& s = p.shadow();
    return s.stage(sid).location == ComputeLocation::kRoot && NeedsMultiLevelTiling(s, sid)
               ? RuleCondition::kApplyAndSkipRest
               : RuleCondition::kPass;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    const SketchOptions& options = ctx.sketch_options();
    PartialSketch q = p;
    std::vector<int> split_ids;
    RETURN_IF_ERROR(DoMultiLevelTiling(
        q, sid, target.is_gpu() ? options.gpu_structure : options.cpu_structure, &split_ids));
    return One(std::move(q), sid - 1);
  }
};

class AddRfactor : public SketchRule {
 public:
  const char* name() const override { return "AddRfactor"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const Target& target = ctx.target();
    const State& s = p.shadow();
    if (s.stage(sid).location != ComputeLocation::kRoot || HasLocalCache(s, sid)) {
      return RuleCondition::kPass;
    }
    return NeedsRfactor(s, sid, target) ? RuleCondition::kApply : RuleCondition::kPass;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    PartialSketch split = p;
    ASSIGN_OR_RETURN(int fused, FuseReduceIters(split, sid));
    int n_space = 0;
    for (const auto& it : split.shadow().stage(sid).iters)
      n_space += it.kind == IteratorKind::kSpace;
    RETURN_IF_ERROR(SplitUnfilled(split, sid, fused, 2).status());
    std::vector<std::pair<PartialSketch, int>> out;
    for (int which = 0; which < 2; ++which) {
      PartialSketch q = split;
      RETURN_IF_ERROR(q.Apply(schedule::RfactorStep{sid, fused + which, n_space}));
      // The rfactor stage is inserted at `sid`. With the inner part as its new axis, that axis is
      // moved innermost (vectorizable partial sums).
      if (which == 1) {
        const Stage& rf = q.shadow().stage(sid);
        std::vector<std::string> order;
        for (int i = 0; i < static_cast<int>(rf.iters.size()); ++i) {
          if (i != n_space) order.push_back(rf.iters[i].name);
        }
        order.push_back(rf.iters[n_space].name);
        RETURN_IF_ERROR(ReorderByName(q, sid, order));
      }
      out.emplace_back(std::move(q), sid - 1);
    }
    return out;
  }
};

// MultiLevelTilingTensorCore (MetaSchedule's rule of that name, as one tensor_core step): a
// matmul-like root stage also gets a tensor-core sketch per mma kind its operands allow, with its
// chain of elementwise consumers as the epilogue. The step's configuration is a placeholder that
// annotation draws (search/tensor_core_space.h). kApply: the SIMT sketches are derived too, and
// measurement decides (small and odd shapes may prefer them).
class MultiLevelTilingTensorCore : public SketchRule {
 public:
  const char* name() const override { return "MultiLevelTilingTensorCore"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    if (!schedule::lower_internal::TargetHasMmaSync(ctx.target()) ||
        !ctx.sketch_options().tensor_cores) {
      return RuleCondition::kPass;
    }
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location != ComputeLocation::kRoot || st.tensor_core ||
        st.epilogue_of >= 0 || st.iters.size() != st.op->axes.size() + st.op->reduce_axes.size()) {
      return RuleCondition::kPass;
    }
    // A cache_write stage (AddCacheWrite) tensorized with its copy-out as the epilogue is the
    // kernel of the stage tensorized directly: the accumulators are registers either way, and the
    // PTX was identical (on matmul 4096³, 16% of the tensor-core trials of a 1024-trial tune
    // measured a kernel already measured, bench/NOTES.md). One sketch of the two.
    if (absl::EndsWith(st.name(), ".local")) return RuleCondition::kPass;
    absl::StatusOr<schedule::MatmulLike> mm = schedule::AnalyzeMatmulLike(*st.op, st.op->body);
    if (!mm.ok() || TensorCoreKinds(*mm, ctx.sketch_options().allow_tf32).empty()) {
      return RuleCondition::kPass;
    }
    // A chain kept root for a stored epilogue (KeepStoredEpilogue) is for the tensor cores: the
    // SIMT sketches come from the inlined branch, and here would store each link on its own.
    int end = sid;
    for (int n = 0; n < kMaxEpilogueLinks; ++n) {
      const int next = SingleElementwiseMatchedConsumer(s, end);
      if (next < 0) break;
      end = next;
    }
    return end != sid && !IsOutput(s, end) ? RuleCondition::kApplyAndSkipRest
                                           : RuleCondition::kApply;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    ASSIGN_OR_RETURN(schedule::MatmulLike mm, schedule::AnalyzeMatmulLike(*st.op, st.op->body));
    // The longest chain of single elementwise consumers (bias, activation, cast, ...).
    int chain = 0;
    for (int at = sid; chain < kMaxEpilogueLinks; ++chain) {
      at = SingleElementwiseMatchedConsumer(s, at);
      if (at < 0) break;
    }
    std::vector<std::pair<PartialSketch, int>> out;
    for (const std::string& kind : TensorCoreKinds(mm, ctx.sketch_options().allow_tf32)) {
      for (int epilogue = chain; epilogue >= 0; --epilogue) {
        schedule::TensorCoreStep t;
        t.stage_id = sid;
        t.kind = kind;
        t.epilogue = epilogue;
        PartialSketch q = p;
        if (q.Apply(t).ok()) {
          out.emplace_back(std::move(q), sid - 1);
          break;
        }
      }
    }
    if (out.empty()) return absl::InvalidArgumentError("no tensor_core step applies");
    return out;
  }
};

// CPU elementwise stages (ours; Ansor leaves them to annotation alone, which on a 1-D stage gives
// two states: parallel or not): all iterators fused, then split into outer × grain × vector parts
// with unfilled lengths. Annotation then parallelizes the outer part and vectorizes the inner
// one, so the search draws the vector width and the serial work per parallel iteration (grain ×
// vector). The middle part is not annotated for unrolling: its sampled length is not bounded
// (annotation bounds only the innermost factor), and an unrolled loop of thousands of
// iterations times out compiling. The plain sketch stays (kApply).
class CpuElementwiseTiling : public SketchRule {
 public:
  const char* name() const override { return "CpuElementwiseTiling"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext&) const override {
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    // The output stage of an elementwise task: one more sketch per task.
    if (sid != s.num_stages() - 1 || st.is_placeholder() || st.location != ComputeLocation::kRoot ||
        st.iters.empty() || NeedsMultiLevelTiling(s, sid)) {
      return RuleCondition::kPass;
    }
    int64_t extent = 1;
    for (const auto& it : st.iters) {
      if (it.kind != IteratorKind::kSpace || it.annotation != IteratorAnnotation::kNone) {
        return RuleCondition::kPass;
      }
      extent *= it.extent;
    }
    // Elementwise tasks only: every other computed stage already inlined (the output stage is
    // visited first, so in practice single-stage operators: relu, gelu, add, transpose, ...);
    // softmax's or layernorm's reductions keep their own sketches.
    for (int other = 0; other < s.num_stages(); ++other) {
      const Stage& o = s.stage(other);
      if (other != sid && !o.is_placeholder() && o.location != ComputeLocation::kInlined) {
        return RuleCondition::kPass;
      }
    }
    return extent >= kMinExtent ? RuleCondition::kApply : RuleCondition::kPass;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    PartialSketch out = p;
    const int n = static_cast<int>(out.shadow().stage(sid).iters.size());
    if (n > 1) {
      schedule::FuseStep fuse;
      fuse.stage_id = sid;
      for (int i = 0; i < n; ++i) fuse.fused_ids.push_back(i);
      RETURN_IF_ERROR(out.Apply(fuse));
    }
    RETURN_IF_ERROR(SplitUnfilled(out, sid, 0, 3).status());
    return One(out, sid - 1);
  }

 private:
  static constexpr int64_t kMinExtent = 64;  // below it the loop is too short to split three ways
};

// Our addition (not in TVM): the tiled transpose. An injective root stage that reads a buffer with
// its axes permuted so that the buffer's innermost dimension is indexed by an axis `p` other than
// the stage's innermost axis `o` (transpose, permutes of the last two axes, NCHW <-> NHWC) cannot
// be coalesced on both sides by a thread layout alone: threads along `o` read with the buffer's
// row stride, threads along `p` write with the output's. So `p` and `o` are tiled (block, vthread,
// thread, inner; lengths unfilled, drawn jointly by annotation within the shared-memory limit),
// every other axis is left whole at the block level, and the buffer is cached in shared memory at
// the block tile. Annotation binds the tile loops to blocks and the thread level along `o` (so the
// stores are coalesced) and makes the copy a cooperative fetch over the buffer's own innermost
// dimension (so the loads are). The copy's rows are padded (storage_align) so that the threads of
// a warp, stepping along `o`, read successive 4-byte banks. kApply: the untiled sketch stays and
// measurement decides.
class SharedLayoutTiling : public SketchRule {
 public:
  const char* name() const override { return "SharedLayoutTiling"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    if (!ctx.target().is_gpu()) return RuleCondition::kPass;
    return Analyze(p.shadow(), sid).has_value() ? RuleCondition::kApply : RuleCondition::kPass;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    const std::optional<Layout> layout = Analyze(p.shadow(), sid);
    if (!layout) return absl::InvalidArgumentError("no permuted read to tile");
    const Stage& st = p.shadow().stage(sid);
    const std::string stage = st.name();
    const std::vector<ir::IterVar> axes = st.op->axes;
    const int n = static_cast<int>(axes.size());
    PartialSketch q = p;
    // The other axes first, with lengths fixed at 1 (whole at the block level), so that the
    // unfilled splits of `p` and `o` form one run that annotation draws jointly.
    std::vector<std::vector<std::string>> parts(n);
    for (int pass = 0; pass < 2; ++pass) {
      for (int a = 0; a < n; ++a) {
        const bool tiled = a == layout->p || a == n - 1;
        if (tiled != (pass == 1)) continue;
        const int idx = q.shadow().stage(sid).IterIndex(axes[a].name);
        if (tiled) {
          ASSIGN_OR_RETURN(parts[a], SplitUnfilled(q, sid, idx, kParts));
        } else {
          schedule::SplitStep sp;
          sp.stage_id = sid;
          sp.iter_id = idx;
          sp.extent = axes[a].extent;
          sp.lengths.assign(kParts - 1, int64_t{1});
          RETURN_IF_ERROR(q.Apply(sp));
          for (int k = 0; k < kParts; ++k) {
            parts[a].push_back(q.shadow().stage(sid).iters[idx + k].name);
          }
        }
      }
    }
    std::vector<std::string> order;
    for (int k = 0; k < kParts; ++k) {
      for (int a = 0; a < n; ++a) order.push_back(parts[a][k]);
    }
    RETURN_IF_ERROR(ReorderByName(q, sid, order));
    for (const auto& [buffer, dim] : layout->buffers) {
      const int consumer = q.shadow().StageId(stage);
      RETURN_IF_ERROR(q.Apply(schedule::CacheReadStep{
          q.shadow().StageId(buffer), ir::MemoryScope::kShared, {consumer}}));
      const int cache = q.shadow().StageId(buffer + ".shared");
      if (cache < 0) return absl::InternalError(absl::StrCat("no cache stage of ", buffer));
      // At the last block-level iterator: one copy per block tile.
      RETURN_IF_ERROR(q.Apply(schedule::ComputeAtStep{cache, q.shadow().StageId(stage), n - 1}));
      // Pads the stride of the dimension `o` indexes to 4 bytes past a multiple of the 32 banks'
      // 128 bytes: a warp's reads along `o` then hit distinct banks.
      const int64_t bytes = ir::BytesOf(q.shadow().stage(cache).op->dtype);
      const int64_t factor = std::max<int64_t>(1, 128 / bytes);
      const int64_t offset = std::clamp<int64_t>(4 / bytes, 1, factor - 1);
      if (factor > 1) {
        RETURN_IF_ERROR(q.Apply(schedule::StorageAlignStep{cache, dim, factor, offset}));
      }
    }
    // The stage that was below `sid` (cache stages were inserted under it).
    const int next = sid > 0 ? q.shadow().StageId(p.shadow().stage(sid - 1).name()) : -1;
    return One(std::move(q), next);
  }

 private:
  static constexpr int kParts = 4;  // block, vthread, thread, inner

  struct Layout {
    int p = -1;  // the stage axis indexing the cached buffers' innermost dimension
    // Each cached buffer with the dimension the stage's innermost axis indexes.
    std::vector<std::pair<std::string, int>> buffers;
  };

  // The permuted reads of stage `sid`, or nullopt when the rule does not apply: the stage is an
  // untransformed injective root stage of rank ≥ 2 with nothing attached, and some buffer of rank
  // ≥ 2 is read only at plain axis variables, its innermost dimension by an axis p other than the
  // innermost axis o, and o indexes another of its dimensions (a broadcast row such as softmax's
  // max[i] is not a layout change). Every such buffer with the same p is cached.
  static std::optional<Layout> Analyze(const State& s, int sid) {
    const Stage& st = s.stage(sid);
    if (st.is_placeholder() || st.location != ComputeLocation::kRoot || st.tensor_core ||
        st.epilogue_of >= 0 || st.scope != ir::MemoryScope::kGlobal || HasReduceIter(st) ||
        !st.op->reduce_axes.empty()) {
      return std::nullopt;
    }
    const std::vector<ir::IterVar>& axes = st.op->axes;
    const int n = static_cast<int>(axes.size());
    if (n < 2 || st.iters.size() != axes.size() || axes[n - 1].extent < 2) return std::nullopt;
    for (int a = 0; a < n; ++a) {
      if (st.iters[a].name != axes[a].name || st.iters[a].annotation != IteratorAnnotation::kNone) {
        return std::nullopt;
      }
    }
    for (int i = 0; i < s.num_stages(); ++i) {
      const Stage& o = s.stage(i);
      if (o.location == ComputeLocation::kAttached && o.attach_stage == sid) return std::nullopt;
    }
    auto axis_of = [&](const ir::Expr& e) {
      const auto* v = e.as<ir::VarNode>();
      for (int a = 0; v != nullptr && a < n; ++a) {
        if (axes[a].name == v->name) return a;
      }
      return -1;
    };
    // Per buffer: (p, the dimension o indexes) of its first read; (-1, -1) once a read is not
    // permuted that way.
    std::vector<std::string> order;
    std::map<std::string, std::pair<int, int>> reads;
    for (const ir::LoadNode* l : CollectLoads(*st.op).loads) {
      const int rank = static_cast<int>(l->indices.size());
      int p = rank >= 2 ? axis_of(l->indices[rank - 1]) : -1, dim = -1;
      for (int d = 0; d < rank; ++d) {
        const int a = axis_of(l->indices[d]);
        if (a < 0) p = -1;
        if (a == n - 1) dim = d;
      }
      std::pair<int, int> read(-1, -1);
      if (p >= 0 && p != n - 1 && dim >= 0 && axes[p].extent >= 2) read = {p, dim};
      auto [it, inserted] = reads.try_emplace(l->buffer, read);
      if (inserted) order.push_back(l->buffer);
      if (it->second != read) it->second = {-1, -1};
    }
    Layout layout;
    for (const std::string& buffer : order) {
      const auto [p, dim] = reads.at(buffer);
      const int producer = s.StageId(buffer);
      if (p < 0 || producer < 0 || s.StageId(buffer + ".shared") >= 0 ||
          s.stage(producer).location == ComputeLocation::kInlined) {
        continue;
      }
      if (layout.p < 0) layout.p = p;
      if (p == layout.p) layout.buffers.emplace_back(buffer, dim);
    }
    if (layout.buffers.empty()) return std::nullopt;
    return layout;
  }
};

// Ours: a reduction too short for a cross-thread reduction (a 2×2 pooling window) whose one
// consumer reads it elementwise (avg_pool's Y = sum / 4) is computed at the consumer's innermost
// iterator, one point per thread, instead of in a kernel of its own whose output the consumer
// reads back: on the H200 the unfused avg_pool2d moved 2.87 GB for its 2.05 GB (70 % of the
// bandwidth) with each kernel at 86 % of DRAM peak. kApply: the unfused sketch stays.
class FuseShortReductionIntoConsumer : public SketchRule {
 public:
  const char* name() const override { return "FuseShortReductionIntoConsumer"; }
  RuleCondition Condition(const PartialSketch& p, int sid, const TuneContext& ctx) const override {
    const State& s = p.shadow();
    const Stage& st = s.stage(sid);
    if (!ctx.target().is_gpu() || !Untouched(s, sid) || !HasReduceIter(st) ||
        NeedsMultiLevelTiling(s, sid) || HasLocalCache(s, sid)) {
      return RuleCondition::kPass;
    }
    const int t = SingleElementwiseMatchedConsumer(s, sid);
    if (t < 0) return RuleCondition::kPass;
    const Stage& ts = s.stage(t);
    if (!Untouched(s, t) || HasReduceIter(ts) || ts.iters.empty()) {
      return RuleCondition::kPass;  // the consumer is already tiled or fused elsewhere
    }
    return RuleCondition::kApply;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    PartialSketch q = p;
    const int t = SingleElementwiseMatchedConsumer(p.shadow(), sid);
    const int last = static_cast<int>(p.shadow().stage(t).iters.size()) - 1;
    RETURN_IF_ERROR(q.Apply(schedule::ComputeAtStep{sid, t, last}));
    return One(std::move(q), sid - 1);
  }
};

class SkipStage : public SketchRule {
 public:
  const char* name() const override { return "SkipStage"; }
  RuleCondition Condition(const PartialSketch&, int, const TuneContext&) const override {
    return RuleCondition::kApply;
  }
  Result Apply(const PartialSketch& p, int sid, const TuneContext&) const override {
    return One(p, sid - 1);
  }
};

}  // namespace

// ------------------------------------------------------------------------------------------------

PartialSketch::PartialSketch(const ir::ComputeDAG& dag) : shadow_(State::Initial(dag)) {}

absl::Status PartialSketch::Apply(const Step& step) {
  Step filled = step;
  if (auto* sp = std::get_if<schedule::SplitStep>(&filled)) {
    for (auto& l : sp->lengths) {
      if (!l.has_value()) l = 1;
    }
  }
  const int sid = std::visit([](const auto& st) { return st.stage_id; }, step);
  const std::string name =
      sid >= 0 && sid < shadow_.num_stages() ? shadow_.stage(sid).name() : std::string();
  ASSIGN_OR_RETURN(shadow_, schedule::ApplyStep(shadow_, filled));
  steps_.push_back(step);
  step_stage_names_.push_back(name);
  return absl::OkStatus();
}

State PartialSketch::ToState() const {
  State out = State::Initial(shadow_.dag());
  for (int i = out.num_stages(); i < shadow_.num_stages(); ++i) {
    out.InsertStage(i, shadow_.stage(i));
  }
  for (int i = 0; i < shadow_.num_stages(); ++i) out.MutableStage(i) = shadow_.stage(i);
  for (const Step& st : steps_) out.AppendStep(st);
  return out;
}

const std::vector<std::unique_ptr<SketchRule>>& GpuSketchRules() {
  static const auto* rules = [] {
    auto* v = new std::vector<std::unique_ptr<SketchRule>>();
    v->push_back(std::make_unique<AddCacheRead>());
    v->push_back(std::make_unique<AddRowCacheRead>());
    v->push_back(std::make_unique<KeepStoredEpilogue>());
    v->push_back(std::make_unique<AlwaysInline>());
    v->push_back(std::make_unique<MultiLevelTilingTensorCore>());
    v->push_back(std::make_unique<SplitReductionAcrossBlocks>());
    v->push_back(std::make_unique<CrossThreadReduction>());
    v->push_back(std::make_unique<PointsPerThreadReduction>());
    v->push_back(std::make_unique<UntiledRowNormalize>());
    v->push_back(std::make_unique<UntiledLowReuse>());
    v->push_back(std::make_unique<AddCacheWrite>());
    v->push_back(std::make_unique<MultiLevelTilingWithFusion>());
    v->push_back(std::make_unique<MultiLevelTiling>());
    v->push_back(std::make_unique<SharedLayoutTiling>());
    v->push_back(std::make_unique<FuseShortReductionIntoConsumer>());
    v->push_back(std::make_unique<SkipStage>());
    return v;
  }();
  return *rules;
}

const std::vector<std::unique_ptr<SketchRule>>& CpuSketchRules() {
  static const auto* rules = [] {
    auto* v = new std::vector<std::unique_ptr<SketchRule>>();
    v->push_back(std::make_unique<AlwaysInline>());
    v->push_back(std::make_unique<AddRfactor>());
    v->push_back(std::make_unique<AddCacheWrite>());
    v->push_back(std::make_unique<MultiLevelTilingWithFusion>());
    v->push_back(std::make_unique<MultiLevelTiling>());
    v->push_back(std::make_unique<CpuElementwiseTiling>());
    v->push_back(std::make_unique<SkipStage>());
    return v;
  }();
  return *rules;
}

bool NeedsMultiLevelTiling(const State& s, int stage_id) {
  const ir::TensorNode& t = *s.stage(stage_id).op;
  if (t.is_placeholder) return false;
  std::vector<std::string> order;
  std::map<std::string, VarCollector> used;
  for (const ir::LoadNode* load : CollectLoads(t).loads) {
    auto [it, inserted] = used.try_emplace(load->buffer);
    if (inserted) order.push_back(load->buffer);
    for (const ir::Expr& index : load->indices) it->second.Visit(index);
  }
  int n_missing = 0, n_missing_2d = 0;
  for (const std::string& buf : order) {
    const std::set<std::string>& names = used.at(buf).names;
    for (const ir::IterVar& axis : t.axes) {
      if (axis.extent > 1 && !names.count(axis.name)) {
        ++n_missing;
        n_missing_2d += names.size() >= 2;
        break;
      }
    }
  }
  if (!t.reduce_axes.empty()) return n_missing >= 1;
  // Without a reduction, vectors broadcast along an axis (softmax's max[i], layernorm's gamma[j])
  // are no reuse worth tiling: only reads indexed by ≥ 2 loop variables count.
  return n_missing_2d >= 2;
}

bool IsStrictlyInlineable(const State& s, int stage_id) {
  const ir::TensorNode& t = *s.stage(stage_id).op;
  if (t.is_placeholder || !t.reduce_axes.empty()) return false;
  LoadCollector c = CollectLoads(t);
  if (c.expensive) return false;
  for (const ir::LoadNode* l : c.loads) {
    std::set<std::string> seen;
    size_t next_axis = 0;
    for (const ir::Expr& index : l->indices) {
      const auto* v = index.as<ir::VarNode>();
      if (!v || !seen.insert(v->name).second) return false;
      // Same order as the stage's axes.
      while (next_axis < t.axes.size() && t.axes[next_axis].name != v->name) ++next_axis;
      if (next_axis == t.axes.size()) return false;
    }
  }
  return true;
}

bool ShouldAlwaysBeInlined(const State& s, int stage_id, const Target& target) {
  const Stage& st = s.stage(stage_id);
  if (st.is_placeholder() || st.location != ComputeLocation::kRoot || IsOutput(s, stage_id)) {
    return false;
  }
  if (!st.op->reduce_axes.empty() || st.scope != ir::MemoryScope::kGlobal) return false;
  return target.is_gpu() || IsStrictlyInlineable(s, stage_id);
}

std::vector<int> StageConsumers(const State& s, int stage_id) {
  std::set<int> out;
  std::vector<int> todo = {stage_id};
  std::set<int> visited;
  while (!todo.empty()) {
    const int p = todo.back();
    todo.pop_back();
    if (!visited.insert(p).second) continue;
    const std::string& name = s.stage(p).name();
    for (int c = 0; c < s.num_stages(); ++c) {
      const Stage& cs = s.stage(c);
      if (c == p || cs.is_placeholder() || !Reads(*cs.op, name)) continue;
      if (cs.location == ComputeLocation::kInlined) {
        todo.push_back(c);
      } else {
        out.insert(c);
      }
    }
  }
  return std::vector<int>(out.begin(), out.end());
}

int SingleElementwiseMatchedConsumer(const State& s, int stage_id) {
  std::vector<int> cons = StageConsumers(s, stage_id);
  if (cons.size() != 1) return -1;
  const int c = cons[0];
  const Stage& cs = s.stage(c);
  const Stage& ps = s.stage(stage_id);
  if (absl::EndsWith(cs.name(), ".shared")) return -1;
  if (!cs.op->reduce_axes.empty() && !ps.op->reduce_axes.empty()) return -1;
  if (cs.op->shape != ps.op->shape) return -1;
  bool any = false;
  for (const ir::LoadNode* l : CollectLoads(*cs.op).loads) {
    if (l->buffer != ps.name()) continue;
    any = true;
    if (l->indices.size() != cs.op->axes.size()) return -1;
    for (size_t d = 0; d < l->indices.size(); ++d) {
      const auto* v = l->indices[d].as<ir::VarNode>();
      if (!v || v->name != cs.op->axes[d].name) return -1;
    }
  }
  return any ? c : -1;
}

bool HasCrossThreadReduction(const State& s, int stage_id) {
  auto check = [](const Stage& st) {
    for (const auto& it : st.iters) {
      if (it.kind == IteratorKind::kReduce && it.annotation == IteratorAnnotation::kThreadIdxX) {
        return true;
      }
    }
    return false;
  };
  if (check(s.stage(stage_id))) return true;
  for (int i = 0; i < s.num_stages(); ++i) {
    const Stage& a = s.stage(i);
    if (a.location == ComputeLocation::kAttached && a.attach_stage == stage_id && check(a)) {
      return true;
    }
  }
  return false;
}

int64_t LargestReadReuse(const State& s, int stage_id) {
  const ir::TensorNode& t = *s.stage(stage_id).op;
  if (t.is_placeholder) return 0;
  std::vector<const ir::IterVar*> axes;
  for (const ir::IterVar& a : t.axes) axes.push_back(&a);
  for (const ir::IterVar& a : t.reduce_axes) axes.push_back(&a);
  std::map<std::string, VarCollector> used;
  for (const ir::LoadNode* load : CollectLoads(t).loads) {
    VarCollector& c = used[load->buffer];
    for (const ir::Expr& index : load->indices) c.Visit(index);
  }
  int64_t largest = 0, reuse = 0;
  for (const auto& [buffer, c] : used) {
    int64_t indexed = 1, missed = 1;
    for (const ir::IterVar* a : axes) (c.names.count(a->name) ? indexed : missed) *= a->extent;
    if (indexed > largest || (indexed == largest && missed < reuse)) {
      largest = indexed;
      reuse = missed;
    }
  }
  return reuse;
}

std::pair<int64_t, int64_t> CumulativeSpaceAndReduceLength(const Stage& stage) {
  int64_t space = 1, reduce = 1;
  for (const auto& it : stage.iters) {
    (it.kind == IteratorKind::kReduce ? reduce : space) *= it.extent;
  }
  return {space, reduce};
}

bool NeedsRfactor(const State& s, int stage_id, const Target& target) {
  const Stage& st = s.stage(stage_id);
  if (st.is_placeholder() || st.op->reduce_axes.empty()) return false;
  auto [space, reduce] = CumulativeSpaceAndReduceLength(st);
  const int64_t cores = std::max(1, target.host_cores);
  if (NeedsMultiLevelTiling(s, stage_id)) {
    return space <= reduce && space <= cores * 16;
  }
  return reduce > cores;
}

}  // namespace tilesearch::search
