#include "schedule/bound_inference.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::schedule {
namespace {

using ir::Expr;
using IndexList = std::vector<Expr>;
using VaryingMap = std::map<std::string, int64_t>;  // varying iterator → extent

constexpr int kMaxDepth = 64;

// ---------------------------------------------------------------------------------------------
// Thread scopes (TVM ThreadScope / StorageRank / NeedRelax).

// blockIdx: 0; threadIdx and vthread: 1; other annotations: none.
std::optional<int> ThreadRank(IteratorAnnotation a) {
  switch (a) {
    case IteratorAnnotation::kBlockIdxX:
    case IteratorAnnotation::kBlockIdxY:
    case IteratorAnnotation::kBlockIdxZ:
      return 0;
    case IteratorAnnotation::kThreadIdxX:
    case IteratorAnnotation::kThreadIdxY:
    case IteratorAnnotation::kThreadIdxZ:
    case IteratorAnnotation::kVThread:
      return 1;
    default:
      return std::nullopt;
  }
}

int StorageRank(ir::MemoryScope scope) {
  switch (scope) {
    case ir::MemoryScope::kGlobal:
      return 0;
    case ir::MemoryScope::kShared:
      return 1;
    case ir::MemoryScope::kLocal:
      return 3;
  }
  return 0;
}

// A loop bound to a thread of rank r around the attach point varies over the region of a buffer of
// storage rank s when s <= r: shared buffers are filled by all threads of a block.
bool Relaxed(IteratorAnnotation a, ir::MemoryScope scope) {
  std::optional<int> rank = ThreadRank(a);
  return rank.has_value() && StorageRank(scope) <= *rank;
}

// Calls fn(stage id, iterator index) for every loop around the attach point (`consumer`'s loops
// up to `pos`, then those of the stages it is attached in, up to their attach points).
template <typename Fn>
void ForEachEnclosingLoop(const State& state, int consumer, int pos, Fn fn) {
  int x = consumer;
  for (int depth = 0; depth < kMaxDepth && x >= 0; ++depth) {
    const Stage& s = state.stage(x);
    for (int i = 0; i <= pos && i < static_cast<int>(s.iters.size()); ++i) fn(x, i);
    if (s.location != ComputeLocation::kAttached || s.attach_stage < 0 ||
        s.attach_stage >= state.num_stages()) {
      break;
    }
    pos = state.stage(s.attach_stage).IterIndex(s.attach_iter);
    x = s.attach_stage;
  }
}

ir::MemoryScope ScopeAt(const State& state, ir::MemoryScope scope, int consumer, int pos) {
  if (scope != ir::MemoryScope::kGlobal) return scope;
  int innermost = -1;
  ForEachEnclosingLoop(state, consumer, pos, [&](int x, int i) {
    std::optional<int> rank = ThreadRank(state.stage(x).iters[i].annotation);
    if (rank.has_value()) innermost = std::max(innermost, *rank);
  });
  if (innermost == 1) return ir::MemoryScope::kLocal;
  if (innermost == 0) return ir::MemoryScope::kShared;
  return ir::MemoryScope::kGlobal;
}

// ---------------------------------------------------------------------------------------------
// Collecting the loads of a producer.

// Index lists of the Loads of `producer` in an expression; Loads of inlined stages are expanded
// (their body with the axes replaced by the Load's indices).
class LoadCollector : public ir::ExprVisitor {
 public:
  LoadCollector(const State& state, const std::string& producer, std::vector<IndexList>* out,
                int depth)
      : state_(state), producer_(producer), out_(out), depth_(depth) {}

 protected:
  void VisitLoad(const ir::LoadNode* op, const Expr& e) override {
    ir::ExprVisitor::VisitLoad(op, e);
    if (op->buffer == producer_) {
      out_->push_back(op->indices);
      return;
    }
    const int id = state_.StageId(op->buffer);
    if (id < 0 || depth_ >= kMaxDepth) return;
    const Stage& s = state_.stage(id);
    if (s.location != ComputeLocation::kInlined || !s.op->body.defined()) return;
    std::vector<std::pair<std::string, Expr>> subst;
    for (size_t d = 0; d < s.op->axes.size() && d < op->indices.size(); ++d) {
      subst.push_back({s.op->axes[d].name, op->indices[d]});
    }
    LoadCollector inner(state_, producer_, out_, depth_ + 1);
    inner.Visit(ir::Substitute(s.op->body, subst));
  }

 private:
  const State& state_;
  const std::string& producer_;
  std::vector<IndexList>* out_;
  int depth_;
};

Expr Rename(const Expr& e, const std::vector<std::pair<std::string, Expr>>& subst) {
  return subst.empty() ? e : ir::Substitute(e, subst);
}

// Converts an expression in the frame of stage `from` (its iterators by plain name) to the frame
// of stage `to`: from's iterators become qualified, to's qualified iterators become plain.
std::vector<std::pair<std::string, Expr>> FrameChange(const Stage& from, const Stage& to) {
  std::vector<std::pair<std::string, Expr>> subst;
  for (const Iterator& it : from.iters) {
    subst.push_back({it.name, ir::MakeVar(QualifiedIterName(from.name(), it.name))});
  }
  for (const Iterator& it : to.iters) {
    subst.push_back({QualifiedIterName(to.name(), it.name), ir::MakeVar(it.name)});
  }
  return subst;
}

absl::StatusOr<std::vector<RegionDim>> InferRegionImpl(const State& state, int producer,
                                                       int consumer, const std::string& attach_iter,
                                                       int depth);

// The min of stage x's region inside the stage it is attached in, in x's frame (undefined
// Exprs for a stage at root).
absl::StatusOr<std::vector<Expr>> Origin(const State& state, int x, int depth) {
  const Stage& s = state.stage(x);
  std::vector<Expr> origin(s.op->axes.size());
  if (s.location != ComputeLocation::kAttached) return origin;
  if (depth >= kMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("the compute_at chain of stage '", s.name(), "' is too deep (a cycle?)"));
  }
  if (s.attach_stage < 0 || s.attach_stage >= state.num_stages()) {
    return absl::InvalidArgumentError(absl::StrCat("stage '", s.name(), "' is attached to stage ",
                                                   s.attach_stage, ", which does not exist"));
  }
  ASSIGN_OR_RETURN(std::vector<RegionDim> region,
                   InferRegionImpl(state, x, s.attach_stage, s.attach_iter, depth + 1));
  const Stage& parent = state.stage(s.attach_stage);
  std::vector<std::pair<std::string, Expr>> subst;
  for (const Iterator& it : parent.iters) {
    subst.push_back({it.name, ir::MakeVar(QualifiedIterName(parent.name(), it.name))});
  }
  for (size_t d = 0; d < origin.size() && d < region.size(); ++d) {
    origin[d] = Rename(region[d].min, subst);
  }
  return origin;
}

// The loads of `producer` by stage x's own body and init, in x's frame: x's axes replaced by
// their values (plus x's region origin when x is attached).
absl::StatusOr<std::vector<IndexList>> OwnAccesses(const State& state, int x,
                                                   const std::string& producer, int depth) {
  const Stage& s = state.stage(x);
  std::vector<IndexList> loads;
  if (s.is_placeholder()) return loads;
  LoadCollector collector(state, producer, &loads, 0);
  if (s.op->body.defined()) collector.Visit(s.op->body);
  if (s.op->init.defined()) collector.Visit(s.op->init);
  if (loads.empty()) return loads;
  ASSIGN_OR_RETURN(std::vector<Expr> origin, Origin(state, x, depth));
  std::vector<std::pair<std::string, Expr>> subst;
  const ir::TensorNode& op = *s.op;
  for (size_t d = 0; d < op.axes.size() + op.reduce_axes.size(); ++d) {
    const bool space = d < op.axes.size();
    const std::string& name = space ? op.axes[d].name : op.reduce_axes[d - op.axes.size()].name;
    if (d >= s.axis_values.size()) break;
    Expr value = s.axis_values[d];
    if (space && origin[d].defined()) value = origin[d] + value;
    subst.push_back({name, value});
  }
  for (IndexList& idx : loads) {
    for (Expr& e : idx) e = Rename(e, subst);
  }
  return loads;
}

// The loads of `producer` by stage x and every stage attached inside it, in x's frame; adds the
// iterators of the stages inside (qualified) to `varying`.
absl::Status AccessesWithin(const State& state, int x, const std::string& producer, int depth,
                            std::vector<IndexList>* out, VaryingMap* varying) {
  if (depth >= kMaxDepth) {
    return absl::InvalidArgumentError("the compute_at nesting is too deep (a cycle?)");
  }
  ASSIGN_OR_RETURN(std::vector<IndexList> own, OwnAccesses(state, x, producer, depth));
  out->insert(out->end(), own.begin(), own.end());
  const Stage& sx = state.stage(x);
  for (int t = 0; t < state.num_stages(); ++t) {
    const Stage& st = state.stage(t);
    if (st.location != ComputeLocation::kAttached || st.attach_stage != x) continue;
    std::vector<IndexList> inner;
    VaryingMap inner_varying;
    RETURN_IF_ERROR(AccessesWithin(state, t, producer, depth + 1, &inner, &inner_varying));
    for (const Iterator& it : st.iters) inner_varying[it.name] = it.extent;
    const auto subst = FrameChange(st, sx);
    for (IndexList& idx : inner) {
      for (Expr& e : idx) e = Rename(e, subst);
      out->push_back(std::move(idx));
    }
    // Names in t's frame: t's own iterators are plain, deeper ones already qualified.
    for (const auto& [name, extent] : inner_varying) {
      const bool own = st.IterIndex(name) >= 0 && name.find('/') == std::string::npos;
      (*varying)[own ? QualifiedIterName(st.name(), name) : name] = extent;
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Affine analysis: index = Σ c_v·v (varying) + Σ c_a·a (fixed atoms) + constant. A varying "v"
// is a varying loop variable or a non-affine subexpression of varying loop variables only (a
// fused loop's div / mod), with its value range from interval arithmetic (TVM's IntSet).

struct Range {
  int64_t lo = 0;
  int64_t hi = 0;
};

int64_t FloorDivide(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Value range of `e` when every variable lies in `ranges` (all must), or nullopt.
std::optional<Range> IntervalOf(const Expr& e, const std::map<std::string, Range>& ranges) {
  if (auto c = ir::AsConstInt(e); c.has_value() && ir::IsInt(e.type())) return Range{*c, *c};
  if (const auto* v = e.as<ir::VarNode>()) {
    auto it = ranges.find(v->name);
    if (it == ranges.end()) return std::nullopt;
    return it->second;
  }
  if (const auto* sel = e.as<ir::SelectNode>()) {
    std::optional<Range> t = IntervalOf(sel->true_value, ranges);
    std::optional<Range> f = IntervalOf(sel->false_value, ranges);
    if (!t || !f) return std::nullopt;
    return Range{std::min(t->lo, f->lo), std::max(t->hi, f->hi)};
  }
  if (!ir::IsBinaryKind(e.kind())) return std::nullopt;
  auto [a_expr, b_expr] = ir::BinaryOperands(e);
  std::optional<Range> a = IntervalOf(a_expr, ranges);
  std::optional<Range> b = IntervalOf(b_expr, ranges);
  if (!a || !b) return std::nullopt;
  switch (e.kind()) {
    case ir::ExprKind::kAdd:
      return Range{a->lo + b->lo, a->hi + b->hi};
    case ir::ExprKind::kSub:
      return Range{a->lo - b->hi, a->hi - b->lo};
    case ir::ExprKind::kMul: {
      const int64_t p[4] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
      return Range{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case ir::ExprKind::kDiv:
      if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
      return Range{FloorDivide(a->lo, b->lo), FloorDivide(a->hi, b->lo)};
    case ir::ExprKind::kMod:
      if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
      if (FloorDivide(a->lo, b->lo) == FloorDivide(a->hi, b->lo)) {
        return Range{a->lo - b->lo * FloorDivide(a->lo, b->lo),
                     a->hi - b->lo * FloorDivide(a->hi, b->lo)};
      }
      return Range{0, b->lo - 1};
    case ir::ExprKind::kMin:
      return Range{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
    case ir::ExprKind::kMax:
      return Range{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    default:
      return std::nullopt;
  }
}

// A structural hash of an expression, the key of a non-variable atom (printing every atom to
// compare them was the cost of region inference).
uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t StructuralHash(const Expr& e) {
  uint64_t h = Mix(static_cast<uint64_t>(e.kind()), static_cast<uint64_t>(e.type()));
  if (const auto* i = e.as<ir::IntImmNode>()) return Mix(h, static_cast<uint64_t>(i->value));
  if (const auto* f = e.as<ir::FloatImmNode>()) return Mix(h, std::hash<double>()(f->value));
  if (const auto* v = e.as<ir::VarNode>()) return Mix(h, std::hash<std::string>()(v->name));
  if (ir::IsBinaryKind(e.kind())) {
    auto [a, b] = ir::BinaryOperands(e);
    return Mix(Mix(h, StructuralHash(a)), StructuralHash(b));
  }
  if (const auto* n = e.as<ir::NotNode>()) return Mix(h, StructuralHash(n->a));
  if (const auto* c = e.as<ir::CastNode>()) return Mix(h, StructuralHash(c->value));
  if (const auto* sel = e.as<ir::SelectNode>()) {
    return Mix(Mix(Mix(h, StructuralHash(sel->cond)), StructuralHash(sel->true_value)),
               StructuralHash(sel->false_value));
  }
  if (const auto* call = e.as<ir::CallNode>()) {
    h = Mix(h, static_cast<uint64_t>(call->op));
    for (const Expr& arg : call->args) h = Mix(h, StructuralHash(arg));
    return h;
  }
  if (const auto* load = e.as<ir::LoadNode>()) {
    h = Mix(h, std::hash<std::string>()(load->buffer));
    for (const Expr& i : load->indices) h = Mix(h, StructuralHash(i));
    return h;
  }
  return h;
}

std::string AtomKey(const Expr& e) {
  if (const auto* v = e.as<ir::VarNode>()) return v->name;
  return absl::StrCat("#", StructuralHash(e));
}

struct Term {
  int64_t coeff = 0;
  Range range;
};

struct Linear {
  std::map<std::string, Term> varying;
  std::map<std::string, std::pair<Expr, int64_t>> fixed;
  int64_t constant = 0;
  bool IsConstant() const { return varying.empty() && fixed.empty(); }
};

class VarCollector : public ir::ExprVisitor {
 public:
  std::set<std::string> names;

 protected:
  void VisitVar(const ir::VarNode* op, const Expr&) override { names.insert(op->name); }
};

Linear Scale(Linear l, int64_t c) {
  Linear out;
  if (c == 0) return out;
  for (auto& [k, v] : l.varying) out.varying[k] = {v.coeff * c, v.range};
  for (auto& [k, v] : l.fixed) out.fixed[k] = {v.first, v.second * c};
  out.constant = l.constant * c;
  return out;
}

Linear Combine(Linear a, const Linear& b, int64_t sign) {
  for (const auto& [k, v] : b.varying) {
    auto it = a.varying.find(k);
    if (it == a.varying.end()) {
      a.varying[k] = {sign * v.coeff, v.range};
    } else if ((it->second.coeff += sign * v.coeff) == 0) {
      a.varying.erase(it);
    }
  }
  for (const auto& [k, v] : b.fixed) {
    auto it = a.fixed.find(k);
    if (it == a.fixed.end()) {
      a.fixed[k] = {v.first, sign * v.second};
    } else if ((it->second.second += sign * v.second) == 0) {
      a.fixed.erase(it);
    }
  }
  a.constant += sign * b.constant;
  return a;
}

Linear Atom(const Expr& e) {
  Linear l;
  l.fixed[AtomKey(e)] = {e, 1};
  return l;
}

std::optional<Linear> Linearize(const Expr& e, const VaryingMap& varying) {
  if (auto c = ir::AsConstInt(e); c.has_value() && ir::IsInt(e.type())) {
    Linear l;
    l.constant = *c;
    return l;
  }
  if (const auto* v = e.as<ir::VarNode>()) {
    auto it = varying.find(v->name);
    if (it == varying.end()) return Atom(e);
    Linear l;
    l.varying[v->name] = {1, {0, it->second - 1}};
    return l;
  }
  if (e.kind() == ir::ExprKind::kAdd || e.kind() == ir::ExprKind::kSub) {
    auto [a, b] = ir::BinaryOperands(e);
    std::optional<Linear> la = Linearize(a, varying);
    std::optional<Linear> lb = Linearize(b, varying);
    if (!la || !lb) return std::nullopt;
    return Combine(*la, *lb, e.kind() == ir::ExprKind::kAdd ? 1 : -1);
  }
  if (e.kind() == ir::ExprKind::kMul) {
    // Index products are built as expr * constant; a product of two non-constant factors is an
    // atom (analyzed once, below, rather than linearizing its factors first).
    auto [a, b] = ir::BinaryOperands(e);
    if (auto c = ir::AsConstInt(b)) {
      std::optional<Linear> la = Linearize(a, varying);
      return la ? std::optional<Linear>(Scale(*la, *c)) : std::nullopt;
    }
    if (auto c = ir::AsConstInt(a)) {
      std::optional<Linear> lb = Linearize(b, varying);
      return lb ? std::optional<Linear>(Scale(*lb, *c)) : std::nullopt;
    }
  }
  VarCollector vars;
  vars.Visit(e);
  std::map<std::string, Range> ranges;
  for (const std::string& name : vars.names) {
    auto it = varying.find(name);
    if (it != varying.end()) ranges[name] = {0, it->second - 1};
  }
  if (ranges.empty()) return Atom(e);
  // Varying and fixed variables mixed under a non-affine operation: not analyzable.
  if (ranges.size() != vars.names.size()) return std::nullopt;
  std::optional<Range> r = IntervalOf(e, ranges);
  if (!r) return std::nullopt;
  Linear l;
  l.varying[AtomKey(e)] = {1, *r};
  return l;
}

std::map<std::string, int64_t> FixedCoefficients(const Linear& l) {
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : l.fixed) out[k] = v.second;
  return out;
}

Expr BuildFixed(const Linear& l, int64_t constant) {
  Expr sum;
  for (const auto& [key, atom] : l.fixed) {
    Expr term = atom.second == 1 ? atom.first : atom.first * ir::IntConst(atom.second);
    sum = sum.defined() ? sum + term : term;
  }
  if (!sum.defined()) return ir::IntConst(constant);
  if (constant != 0) sum = sum + ir::IntConst(constant);
  return sum;
}

RegionDim Box(const std::vector<IndexList>& accesses, size_t d, const VaryingMap& varying,
              int64_t dim) {
  std::optional<Linear> reference;
  int64_t lo_min = 0, hi_max = 0;
  for (const IndexList& idx : accesses) {
    if (d >= idx.size()) return {ir::IntConst(0), dim};
    std::optional<Linear> l = Linearize(idx[d], varying);
    if (!l) return {ir::IntConst(0), dim};
    int64_t lo = l->constant, hi = l->constant;
    for (const auto& [name, t] : l->varying) {
      lo += t.coeff > 0 ? t.coeff * t.range.lo : t.coeff * t.range.hi;
      hi += t.coeff > 0 ? t.coeff * t.range.hi : t.coeff * t.range.lo;
    }
    if (!reference) {
      reference = *l;
      lo_min = lo;
      hi_max = hi;
    } else {
      if (FixedCoefficients(*l) != FixedCoefficients(*reference)) return {ir::IntConst(0), dim};
      lo_min = std::min(lo_min, lo);
      hi_max = std::max(hi_max, hi);
    }
  }
  if (!reference) return {ir::IntConst(0), dim};
  const int64_t extent = hi_max - lo_min + 1;
  if (extent >= dim) return {ir::IntConst(0), dim};
  return {BuildFixed(*reference, lo_min), extent};
}

absl::StatusOr<std::vector<RegionDim>> InferRegionImpl(const State& state, int producer,
                                                       int consumer, const std::string& attach_iter,
                                                       int depth) {
  const int n = state.num_stages();
  if (producer < 0 || producer >= n || consumer < 0 || consumer >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage ids ", producer, " and ", consumer, " must be in [0, ", n, ")"));
  }
  const Stage& p = state.stage(producer);
  const Stage& c = state.stage(consumer);
  if (producer == consumer) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage '", p.name(), "' cannot be its own consumer"));
  }
  const int pos = c.IterIndex(attach_iter);
  if (pos < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage '", c.name(), "' has no iterator '", attach_iter, "'"));
  }
  if (depth >= kMaxDepth) {
    return absl::InvalidArgumentError("the compute_at nesting is too deep (a cycle?)");
  }

  VaryingMap varying;
  ASSIGN_OR_RETURN(std::vector<IndexList> accesses, OwnAccesses(state, consumer, p.name(), depth));
  for (int t = 0; t < n; ++t) {
    const Stage& st = state.stage(t);
    if (t == producer || st.location != ComputeLocation::kAttached || st.attach_stage != consumer) {
      continue;
    }
    const int at = c.IterIndex(st.attach_iter);
    if (at < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage '", st.name(), "' is attached at iterator '", st.attach_iter,
                       "', which stage '", c.name(), "' does not have"));
    }
    if (at <= pos) continue;
    std::vector<IndexList> inner;
    VaryingMap inner_varying;
    RETURN_IF_ERROR(AccessesWithin(state, t, p.name(), depth + 1, &inner, &inner_varying));
    for (const Iterator& it : st.iters) inner_varying[it.name] = it.extent;
    const auto subst = FrameChange(st, c);
    for (IndexList& idx : inner) {
      for (Expr& e : idx) e = Rename(e, subst);
      accesses.push_back(std::move(idx));
    }
    for (const auto& [name, extent] : inner_varying) {
      const bool own = st.IterIndex(name) >= 0 && name.find('/') == std::string::npos;
      varying[own ? QualifiedIterName(st.name(), name) : name] = extent;
    }
  }
  if (accesses.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage '", c.name(), "' does not read stage '", p.name(), "'"));
  }

  for (int i = pos + 1; i < static_cast<int>(c.iters.size()); ++i) {
    varying[c.iters[i].name] = c.iters[i].extent;
  }
  const ir::MemoryScope scope = ScopeAt(state, p.scope, consumer, pos);
  ForEachEnclosingLoop(state, consumer, pos, [&](int x, int i) {
    const Iterator& it = state.stage(x).iters[i];
    if (!Relaxed(it.annotation, scope)) return;
    varying[x == consumer ? it.name : QualifiedIterName(state.stage(x).name(), it.name)] =
        it.extent;
  });

  std::vector<RegionDim> region;
  for (size_t d = 0; d < p.op->shape.size(); ++d) {
    region.push_back(Box(accesses, d, varying, p.op->shape[d]));
  }
  return region;
}

}  // namespace

std::string QualifiedIterName(const std::string& stage, const std::string& iter) {
  return absl::StrCat(stage, "/", iter);
}

ir::MemoryScope EffectiveScope(const State& state, int stage_id) {
  CHECK(stage_id >= 0 && stage_id < state.num_stages()) << "stage id " << stage_id;
  const Stage& s = state.stage(stage_id);
  if (s.location != ComputeLocation::kAttached || s.attach_stage < 0 ||
      s.attach_stage >= state.num_stages()) {
    return s.scope;
  }
  const int pos = state.stage(s.attach_stage).IterIndex(s.attach_iter);
  return ScopeAt(state, s.scope, s.attach_stage, pos);
}

absl::StatusOr<std::vector<RegionDim>> InferRegion(const State& state, int producer, int consumer,
                                                   const std::string& attach_iter) {
  return InferRegionImpl(state, producer, consumer, attach_iter, 0);
}

}  // namespace tilesearch::schedule
