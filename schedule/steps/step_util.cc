#include "schedule/steps/step_util.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "schedule/bound_inference.h"

namespace tilesearch::schedule::internal {

absl::Status StepError(const std::string& step, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(step, ": ", reason));
}

absl::Status CheckStageId(const State& state, int stage_id, const std::string& step) {
  if (stage_id < 0 || stage_id >= state.num_stages()) {
    return StepError(step, absl::StrCat("stage id ", stage_id, " is out of range (the state has ",
                                        state.num_stages(), " stages)"));
  }
  return absl::OkStatus();
}

absl::Status CheckIterId(const Stage& stage, int iter_id, const std::string& step) {
  if (iter_id < 0 || iter_id >= static_cast<int>(stage.iters.size())) {
    return StepError(step, absl::StrCat("iterator id ", iter_id, " is out of range (stage '",
                                        stage.name(), "' has ", stage.iters.size(), " iterators)"));
  }
  return absl::OkStatus();
}

absl::Status CheckSchedulable(const Stage& stage, const std::string& step) {
  if (stage.is_placeholder()) {
    return StepError(step, absl::StrCat("stage '", stage.name(), "' is a placeholder"));
  }
  if (stage.location == ComputeLocation::kInlined) {
    return StepError(step, absl::StrCat("stage '", stage.name(), "' is inlined"));
  }
  if (stage.tensor_core) {
    return StepError(step,
                     absl::StrCat("stage '", stage.name(),
                                  "' is computed by a tensor_core step (its loops are fixed)"));
  }
  if (stage.epilogue_of >= 0) {
    return StepError(
        step, absl::StrCat("stage '", stage.name(), "' is the epilogue of a tensor_core stage"));
  }
  return absl::OkStatus();
}

bool HasInitialIterators(const Stage& stage) {
  const ir::TensorNode& op = *stage.op;
  if (stage.iters.size() != op.axes.size() + op.reduce_axes.size()) return false;
  if (!stage.guards.empty()) return false;
  for (size_t i = 0; i < stage.iters.size(); ++i) {
    const std::string& name =
        i < op.axes.size() ? op.axes[i].name : op.reduce_axes[i - op.axes.size()].name;
    if (stage.iters[i].name != name) return false;
  }
  return true;
}

bool IsOutput(const State& state, const Stage& stage) {
  for (int id : state.dag().output_ids()) {
    if (state.dag().stage(id).name() == stage.name()) return true;
  }
  return false;
}

bool HasAttachedStages(const State& state, int stage_id) {
  for (int i = 0; i < state.num_stages(); ++i) {
    const Stage& s = state.stage(i);
    if (s.location == ComputeLocation::kAttached && s.attach_stage == stage_id) return true;
  }
  return false;
}

absl::StatusOr<std::vector<std::string>> SplitIter(Stage& stage, int iter_id,
                                                   const std::vector<int64_t>& lengths,
                                                   bool inner_to_outer) {
  CHECK(iter_id >= 0 && iter_id < static_cast<int>(stage.iters.size()));
  const Iterator it = stage.iters[iter_id];
  int64_t product = 1;
  for (int64_t l : lengths) {
    CHECK(l >= 1);
    if (product > (int64_t{1} << 40) / l) {
      return absl::InvalidArgumentError(
          absl::StrCat("the product of the lengths overflows (iterator '", it.name, "')"));
    }
    product *= l;
  }
  // Part k's extent and stride (the product of the lengths inside it). With inner_to_outer the
  // lengths are factors applied innermost first, each extent tightened to what is left of the
  // iterator (TVM PassDownDomain: min(factor, parent extent)), so a stage attached with a small
  // region keeps its tiling without redundant iterations. Without it the lengths are outer part
  // counts and the rest is innermost.
  std::vector<int64_t> extents(lengths.size() + 1), strides(lengths.size() + 1);
  if (inner_to_outer) {
    int64_t left = it.extent, stride = 1;
    for (size_t k = lengths.size(); k >= 1; --k) {
      extents[k] = std::min(lengths[k - 1], left);
      strides[k] = stride;
      stride *= lengths[k - 1];
      left = (left + lengths[k - 1] - 1) / lengths[k - 1];
    }
    extents[0] = left;
    strides[0] = stride;
  } else {
    std::copy(lengths.begin(), lengths.end(), extents.begin());
    extents.back() = (it.extent + product - 1) / product;
    int64_t stride = 1;
    for (size_t k = extents.size(); k >= 1; --k) {
      strides[k - 1] = stride;
      stride *= extents[k - 1];
    }
  }

  std::vector<Iterator> parts;
  std::vector<std::string> names;
  for (size_t k = 0; k < extents.size(); ++k) {
    std::string name = absl::StrCat(it.name, ".", k);
    int existing = stage.IterIndex(name);
    if (existing >= 0 && existing != iter_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("iterator name '", name, "' already exists in stage '", stage.name(), "'"));
    }
    parts.push_back({name, extents[k], it.kind, IteratorAnnotation::kNone});
    names.push_back(name);
  }
  // x = ((x.0 * s0/s1 + x.1) * s1/s2 + x.2) ...: each part's index times its stride; parts
  // never overlap, and a guard drops the iterations past the original extent.
  ir::Expr recombined = ir::MakeVar(names[0]);
  int64_t max_value = (extents[0] - 1) * strides[0];
  for (size_t k = 1; k < names.size(); ++k) {
    recombined = recombined * ir::IntConst(strides[k - 1] / strides[k]) + ir::MakeVar(names[k]);
    max_value += (extents[k] - 1) * strides[k];
  }
  const std::vector<std::pair<std::string, ir::Expr>> subst = {{it.name, recombined}};
  for (ir::Expr& v : stage.axis_values) v = ir::Substitute(v, subst);
  for (ir::Expr& g : stage.guards) g = ir::Substitute(g, subst);
  if (max_value >= it.extent) stage.guards.push_back(recombined < ir::IntConst(it.extent));

  stage.iters.erase(stage.iters.begin() + iter_id);
  stage.iters.insert(stage.iters.begin() + iter_id, parts.begin(), parts.end());
  return names;
}

absl::StatusOr<std::string> FuseIters(Stage& stage, const std::vector<int>& ids) {
  const int n = static_cast<int>(stage.iters.size());
  if (ids.empty()) return absl::InvalidArgumentError("no iterators to fuse");
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= n) {
      return absl::InvalidArgumentError(absl::StrCat("iterator id ", ids[k],
                                                     " is out of range (stage '", stage.name(),
                                                     "' has ", n, " iterators)"));
    }
    if (k > 0 && ids[k] != ids[k - 1] + 1) {
      return absl::InvalidArgumentError(absl::StrCat("iterators are not adjacent (", ids[k - 1],
                                                     " and ", ids[k], " in stage '", stage.name(),
                                                     "')"));
    }
  }
  std::vector<std::string> names;
  int64_t extent = 1;
  bool any_space = false, any_reduce = false;
  for (int id : ids) {
    const Iterator& it = stage.iters[id];
    names.push_back(it.name);
    if (extent > (int64_t{1} << 40) / std::max<int64_t>(it.extent, 1)) {
      return absl::InvalidArgumentError("the fused extent overflows");
    }
    extent *= it.extent;
    any_space |= it.kind == IteratorKind::kSpace || it.kind == IteratorKind::kMixed;
    any_reduce |= it.kind == IteratorKind::kReduce || it.kind == IteratorKind::kMixed;
  }
  const std::string name = absl::StrJoin(names, "@");
  for (int i = 0; i < n; ++i) {
    if (stage.iters[i].name == name && (i < ids.front() || i > ids.back())) {
      return absl::InvalidArgumentError(
          absl::StrCat("iterator name '", name, "' already exists in stage '", stage.name(), "'"));
    }
  }
  IteratorKind kind = any_space && any_reduce ? IteratorKind::kMixed
                      : any_reduce            ? IteratorKind::kReduce
                                              : IteratorKind::kSpace;
  if (ids.size() == 1) kind = stage.iters[ids[0]].kind;

  // a := f / (Eb * Ec), b := f / Ec % Eb, c := f % Ec.
  const ir::Expr f = ir::MakeVar(name);
  std::vector<std::pair<std::string, ir::Expr>> subst;
  int64_t inner = 1;
  for (int k = static_cast<int>(ids.size()) - 1; k >= 0; --k) {
    const Iterator& it = stage.iters[ids[k]];
    ir::Expr value = inner == 1 ? f : f / ir::IntConst(inner);
    if (k > 0) value = value % ir::IntConst(it.extent);
    subst.push_back({it.name, value});
    inner *= it.extent;
  }
  if (ids.size() > 1) {
    for (ir::Expr& v : stage.axis_values) v = ir::Substitute(v, subst);
    for (ir::Expr& g : stage.guards) g = ir::Substitute(g, subst);
  }
  Iterator fused{name, extent, kind, IteratorAnnotation::kNone};
  if (ids.size() == 1) fused.annotation = stage.iters[ids[0]].annotation;
  stage.iters.erase(stage.iters.begin() + ids.front(), stage.iters.begin() + ids.back() + 1);
  stage.iters.insert(stage.iters.begin() + ids.front(), fused);
  return name;
}

absl::Status ReorderIters(Stage& stage, const std::vector<int>& order) {
  const int n = static_cast<int>(stage.iters.size());
  if (static_cast<int>(order.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("the order has ", order.size(),
                                                   " ids but stage '", stage.name(), "' has ", n,
                                                   " iterators (not a permutation)"));
  }
  std::vector<bool> seen(n, false);
  for (int id : order) {
    if (id < 0 || id >= n || seen[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("the order is not a permutation of 0..", n - 1, " (id ", id,
                       id < 0 || id >= n ? " is out of range)" : " repeats)"));
    }
    seen[id] = true;
  }
  std::vector<Iterator> iters;
  for (int id : order) iters.push_back(stage.iters[id]);
  stage.iters = std::move(iters);
  return absl::OkStatus();
}

absl::Status RebuildStage(Stage& stage, const std::vector<int64_t>& axis_extents) {
  const ir::TensorNode& op = *stage.op;
  CHECK(axis_extents.size() == op.axes.size());
  stage.iters.clear();
  stage.axis_values.clear();
  stage.guards.clear();
  for (size_t d = 0; d < op.axes.size(); ++d) {
    stage.iters.push_back({op.axes[d].name, axis_extents[d], IteratorKind::kSpace});
    stage.axis_values.push_back(op.axes[d].var());
  }
  for (const ir::IterVar& axis : op.reduce_axes) {
    stage.iters.push_back({axis.name, axis.extent, IteratorKind::kReduce});
    stage.axis_values.push_back(axis.var());
  }
  stage.axis_extents = axis_extents;
  for (const Step& step : stage.loop_steps) {
    if (const auto* s = std::get_if<SplitStep>(&step)) {
      std::vector<int64_t> lengths;
      for (const auto& l : s->lengths) lengths.push_back(*l);
      if (s->iter_id >= static_cast<int>(stage.iters.size())) {
        return absl::InvalidArgumentError("replayed split names a missing iterator");
      }
      absl::StatusOr<std::vector<std::string>> r =
          SplitIter(stage, s->iter_id, lengths, s->inner_to_outer);
      if (!r.ok()) return r.status();
    } else if (const auto* s = std::get_if<FuseStep>(&step)) {
      absl::StatusOr<std::string> r = FuseIters(stage, s->fused_ids);
      if (!r.ok()) return r.status();
    } else if (const auto* s = std::get_if<ReorderStep>(&step)) {
      RETURN_IF_ERROR(ReorderIters(stage, s->after_ids));
    } else if (const auto* s = std::get_if<AnnotationStep>(&step)) {
      if (s->iter_id < 0 || s->iter_id >= static_cast<int>(stage.iters.size())) {
        return absl::InvalidArgumentError("replayed annotation names a missing iterator");
      }
      stage.iters[s->iter_id].annotation = s->annotation;
    } else {
      CHECK(false) << "unexpected loop step " << StepToString(step);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<State> ApplySplit(const State& state, int stage_id, int iter_id,
                                 const std::vector<std::optional<int64_t>>& lengths,
                                 bool inner_to_outer, int64_t recorded_extent, const Step& step) {
  const std::string text = StepToString(step);
  RETURN_IF_ERROR(CheckStageId(state, stage_id, text));
  const Stage& stage = state.stage(stage_id);
  RETURN_IF_ERROR(CheckSchedulable(stage, text));
  RETURN_IF_ERROR(CheckIterId(stage, iter_id, text));
  if (lengths.empty()) return StepError(text, "a split needs at least one length");
  std::vector<int64_t> concrete;
  for (size_t k = 0; k < lengths.size(); ++k) {
    if (!lengths[k].has_value()) {
      return StepError(text, absl::StrCat("length ", k, " is unfilled (fill the tile sizes of ",
                                          "the sketch before applying it)"));
    }
    if (*lengths[k] < 1) {
      return StepError(text, absl::StrCat("length ", k, " is ", *lengths[k], " (must be >= 1)"));
    }
    concrete.push_back(*lengths[k]);
  }
  const Iterator& it = stage.iters[iter_id];
  if (recorded_extent > 0 && stage.location != ComputeLocation::kAttached &&
      recorded_extent != it.extent) {
    return StepError(
        text, absl::StrCat("the step was recorded for extent ", recorded_extent, " but iterator '",
                           it.name, "' of stage '", stage.name(), "' has extent ", it.extent));
  }
  const std::string old_name = it.name;
  const bool keeps_regions = LoopChangeKeepsRegions(state, stage_id, iter_id, iter_id);
  State out = state;
  Stage& m = out.MutableStage(stage_id);
  absl::StatusOr<std::vector<std::string>> names = SplitIter(m, iter_id, concrete, inner_to_outer);
  if (!names.ok()) return StepError(text, std::string(names.status().message()));
  SplitStep record;
  record.stage_id = stage_id;
  record.iter_id = iter_id;
  record.lengths.assign(concrete.begin(), concrete.end());
  record.inner_to_outer = inner_to_outer;
  m.loop_steps.push_back(record);
  for (int i = 0; i < out.num_stages(); ++i) {
    const Stage& s = out.stage(i);
    if (s.location == ComputeLocation::kAttached && s.attach_stage == stage_id &&
        s.attach_iter == old_name) {
      out.MutableStage(i).attach_iter = names->back();
    }
  }
  return Finish(std::move(out), stage_id, step, keeps_regions);
}

absl::Status RefreshAttached(State& state, int stage_id, bool include_self,
                             const std::string& step) {
  std::vector<int> order;
  std::set<int> seen = {stage_id};
  if (include_self) order.push_back(stage_id);
  std::deque<int> queue = {stage_id};
  while (!queue.empty()) {
    const int x = queue.front();
    queue.pop_front();
    // Consumers before producers among siblings: a producer's region may include the reads of
    // a sibling consumer attached deeper.
    for (int i = state.num_stages() - 1; i >= 0; --i) {
      const Stage& s = state.stage(i);
      if (s.location == ComputeLocation::kAttached && s.attach_stage == x && !seen.count(i)) {
        seen.insert(i);
        order.push_back(i);
        queue.push_back(i);
      }
    }
  }
  for (int id : order) {
    const Stage& s = state.stage(id);
    if (s.location != ComputeLocation::kAttached) continue;
    absl::StatusOr<std::vector<RegionDim>> region =
        InferRegion(state, id, s.attach_stage, s.attach_iter);
    if (!region.ok()) {
      return StepError(step, absl::StrCat("cannot infer the region of stage '", s.name(),
                                          "': ", region.status().message()));
    }
    std::vector<int64_t> extents;
    for (const RegionDim& d : *region) extents.push_back(d.extent);
    if (extents == s.axis_extents) continue;
    absl::Status st = RebuildStage(state.MutableStage(id), extents);
    if (!st.ok()) {
      return StepError(
          step, absl::StrCat("cannot rebuild the loops of stage '", s.name(), "': ", st.message()));
    }
  }
  return absl::OkStatus();
}

std::vector<int> AttachedBelow(const State& state, int stage_id) {
  std::vector<int> out;
  std::vector<int> frontier = {stage_id};
  std::set<int> seen = {stage_id};
  while (!frontier.empty()) {
    const int x = frontier.back();
    frontier.pop_back();
    for (int i = 0; i < state.num_stages(); ++i) {
      const Stage& s = state.stage(i);
      if (s.location == ComputeLocation::kAttached && s.attach_stage == x &&
          seen.insert(i).second) {
        out.push_back(i);
        frontier.push_back(i);
      }
    }
  }
  return out;
}

bool IsThreadAnnotation(IteratorAnnotation a) {
  switch (a) {
    case IteratorAnnotation::kVThread:
    case IteratorAnnotation::kBlockIdxX:
    case IteratorAnnotation::kBlockIdxY:
    case IteratorAnnotation::kBlockIdxZ:
    case IteratorAnnotation::kThreadIdxX:
    case IteratorAnnotation::kThreadIdxY:
    case IteratorAnnotation::kThreadIdxZ:
      return true;
    default:
      return false;
  }
}

bool LoopChangeKeepsRegions(const State& state, int stage_id, int first, int last) {
  const Stage& stage = state.stage(stage_id);
  for (int i = first; i <= last; ++i) {
    if (IsThreadAnnotation(stage.iters[i].annotation)) return false;
  }
  for (int i = 0; i < state.num_stages(); ++i) {
    const Stage& a = state.stage(i);
    if (a.location != ComputeLocation::kAttached || a.attach_stage != stage_id) continue;
    const int pos = stage.IterIndex(a.attach_iter);
    if (pos < last && pos >= first) return false;
    if (pos < first) return false;
  }
  return true;
}

absl::StatusOr<State> Finish(State state, int stage_id, const Step& step, bool regions_unchanged) {
  if (!regions_unchanged && stage_id >= 0 && stage_id < state.num_stages()) {
    RETURN_IF_ERROR(RefreshAttached(state, stage_id, false, StepToString(step)));
  }
  state.AppendStep(step);
  return state;
}

namespace {

class LoadRedirector : public ir::ExprMutator {
 public:
  LoadRedirector(const std::string& from, std::shared_ptr<const ir::TensorNode> to)
      : from_(from), to_(std::move(to)) {}

 protected:
  ir::Expr MutateLoad(const ir::LoadNode* op, const ir::Expr& e) override {
    ir::Expr mutated = ir::ExprMutator::MutateLoad(op, e);
    if (op->buffer != from_) return mutated;
    const auto* load = mutated.as<ir::LoadNode>();
    return ir::LoadNode::Make(load->type, to_->name, load->indices, to_);
  }

 private:
  const std::string& from_;
  std::shared_ptr<const ir::TensorNode> to_;
};

class BufferReadFinder : public ir::ExprVisitor {
 public:
  explicit BufferReadFinder(const std::string& name) : name_(name) {}
  bool found() const { return found_; }

 protected:
  void VisitLoad(const ir::LoadNode* op, const ir::Expr& e) override {
    if (op->buffer == name_) found_ = true;
    ir::ExprVisitor::VisitLoad(op, e);
  }

 private:
  const std::string& name_;
  bool found_ = false;
};

}  // namespace

ir::Expr RedirectLoads(const ir::Expr& e, const std::string& from,
                       const std::shared_ptr<const ir::TensorNode>& to) {
  if (!e.defined()) return e;
  LoadRedirector r(from, to);
  return r.Mutate(e);
}

bool ReadsBuffer(const ir::TensorNode& op, const std::string& name) {
  BufferReadFinder f(name);
  if (op.body.defined()) f.Visit(op.body);
  if (op.init.defined()) f.Visit(op.init);
  return f.found();
}

std::string UniqueStageName(const State& state, const std::string& base) {
  if (state.StageId(base) < 0) return base;
  for (int k = 1;; ++k) {
    std::string name = absl::StrCat(base, ".", k);
    if (state.StageId(name) < 0) return name;
  }
}

absl::Status CheckArity(const nlohmann::json& j, const char* prefix, size_t arity) {
  if (!j.is_array() || j.size() != arity) {
    return absl::InvalidArgumentError(
        absl::StrCat("step '", prefix, "' needs ", arity, " fields, got ", j.dump()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> JsonInt(const nlohmann::json& j, size_t i, const char* prefix) {
  if (!j[i].is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field ", i, " of step '", prefix, "' is not an integer: ", j[i].dump()));
  }
  // (Past 2^63 - 1 the JSON reader holds an unsigned value, which int64 would wrap negative.)
  if (j[i].is_number_unsigned() &&
      j[i].get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
    return absl::InvalidArgumentError(
        absl::StrCat("field ", i, " of step '", prefix, "' is out of range: ", j[i].dump()));
  }
  return j[i].get<int64_t>();
}

absl::StatusOr<int> JsonId(const nlohmann::json& j, size_t i, const char* prefix) {
  ASSIGN_OR_RETURN(int64_t v, JsonInt(j, i, prefix));
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field ", i, " of step '", prefix, "' is out of range: ", j[i].dump()));
  }
  return static_cast<int>(v);
}

absl::StatusOr<std::vector<int>> JsonIntList(const nlohmann::json& j, size_t i,
                                             const char* prefix) {
  if (!j[i].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("field ", i, " of step '", prefix,
                                                   "' is not a list of integers: ", j[i].dump()));
  }
  std::vector<int> out;
  for (const nlohmann::json& e : j[i]) {
    if (!e.is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat("field ", i, " of step '", prefix,
                                                     "' is not a list of integers: ", j[i].dump()));
    }
    const int64_t v = e.get<int64_t>();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max() ||
        (e.is_number_unsigned() && e.get<uint64_t>() > uint64_t{std::numeric_limits<int>::max()})) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field ", i, " of step '", prefix, "' has an out-of-range integer: ", j[i].dump()));
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

absl::StatusOr<std::string> JsonString(const nlohmann::json& j, size_t i, const char* prefix) {
  if (!j[i].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field ", i, " of step '", prefix, "' is not a string: ", j[i].dump()));
  }
  return j[i].get<std::string>();
}

absl::StatusOr<ir::MemoryScope> ParseScope(const std::string& name) {
  if (name == "shared") return ir::MemoryScope::kShared;
  if (name == "local") return ir::MemoryScope::kLocal;
  if (name == "global") return ir::MemoryScope::kGlobal;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown scope '", name, "' (expected shared, local or global)"));
}

std::string IdList(const std::vector<int>& ids) {
  return absl::StrCat("[", absl::StrJoin(ids, ", "), "]");
}

}  // namespace tilesearch::schedule::internal
