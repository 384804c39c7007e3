// rfactor: factorizes a reduction (Ansor RfactorStep; TVM te rfactor). For a reduce iterator r of
// stage X, a new stage "X.rf" computes partial reductions over X's other reduce iterators, with r
// as a new space axis at position factor_iter_id; X then reduces over r:
//   X.rf[.., r, ..] = combine over the other reduce iterators of body (guarded by their splits)
//   X[axes]        = combine over r of X.rf[.., r, ..]   (starting from X's init)
// As in Ansor, both stages start from their initial iterators. X.rf is inserted at X's id.
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {
namespace {

class VarNames : public ir::ExprVisitor {
 public:
  std::set<std::string> names;

 protected:
  void VisitVar(const ir::VarNode* op, const ir::Expr&) override { names.insert(op->name); }
};

// The rfactor stage's space axes (X's axes with the factor iterator inserted at
// factor_iter_id) and reduce axes (X's other reduce iterators), names and extents.
struct RfactorLayout {
  std::set<std::string> reduce_iters;  // names of all of X's reduce iterators
  std::vector<std::string> axis_names;
  std::vector<int64_t> shape;
  std::vector<std::string> reduce_names;
  std::vector<int64_t> reduce_shape;
};

absl::StatusOr<RfactorLayout> MakeRfactorLayout(const Stage& stage, int iter_id, int factor_iter_id,
                                                const std::string& text) {
  const ir::TensorNode& op = *stage.op;
  const Iterator& factor_it = stage.iters[iter_id];
  const int ndim = static_cast<int>(op.axes.size());
  RfactorLayout layout;
  std::set<std::string>& reduce_iters = layout.reduce_iters;
  std::vector<std::string>& rf_axis_names = layout.axis_names;
  std::vector<int64_t>& rf_shape = layout.shape;
  for (int d = 0; d < ndim; ++d) {
    rf_axis_names.push_back(op.axes[d].name);
    rf_shape.push_back(op.axes[d].extent);
  }
  rf_axis_names.insert(rf_axis_names.begin() + factor_iter_id, factor_it.name);
  rf_shape.insert(rf_shape.begin() + factor_iter_id, factor_it.extent);
  for (int i = 0; i < static_cast<int>(stage.iters.size()); ++i) {
    const Iterator& it = stage.iters[i];
    if (it.kind == IteratorKind::kMixed) {
      return internal::StepError(text, absl::StrCat("iterator '", it.name, "' of stage '",
                                                    stage.name(), "' mixes space and reduce"));
    }
    if (it.kind != IteratorKind::kReduce) continue;
    reduce_iters.insert(it.name);
    if (i == iter_id) continue;
    layout.reduce_names.push_back(it.name);
    layout.reduce_shape.push_back(it.extent);
  }
  for (const std::string& name : rf_axis_names) {
    if (name != factor_it.name && reduce_iters.count(name)) {
      return internal::StepError(text,
                                 absl::StrCat("axis name '", name, "' of stage '", stage.name(),
                                              "' clashes with a reduce iterator"));
    }
  }
  return layout;
}

// The partial body: the original reduce axes recovered from the reduce iterators; iterations
// cut off by non-divisible splits of reduce iterators contribute the identity.
ir::Expr PartialBody(const Stage& stage, const std::set<std::string>& reduce_iters) {
  const ir::TensorNode& op = *stage.op;
  const int ndim = static_cast<int>(op.axes.size());
  std::vector<std::pair<std::string, ir::Expr>> subst;
  for (size_t r = 0; r < op.reduce_axes.size(); ++r) {
    subst.push_back({op.reduce_axes[r].name, stage.axis_values[ndim + r]});
  }
  ir::Expr body = ir::Substitute(op.body, subst);
  ir::Expr cond;
  for (const ir::Expr& g : stage.guards) {
    VarNames names;
    names.Visit(g);
    bool reduce_only = true;
    for (const std::string& n : names.names) reduce_only &= reduce_iters.count(n) > 0;
    if (!reduce_only) continue;
    cond = cond.defined() ? (cond && g) : g;
  }
  if (cond.defined()) body = ir::Select(cond, body, ir::ReduceIdentity(op.reduce, op.dtype));
  return body;
}

}  // namespace

absl::StatusOr<State> RfactorStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  const ir::TensorNode& op = *stage.op;
  if (op.reduce == ir::ReduceKind::kNone) {
    return internal::StepError(text, absl::StrCat("stage '", stage.name(), "' has no reduction"));
  }
  RETURN_IF_ERROR(internal::CheckIterId(stage, iter_id, text));
  const Iterator& factor_it = stage.iters[iter_id];
  if (factor_it.kind != IteratorKind::kReduce) {
    return internal::StepError(text, absl::StrCat("iterator '", factor_it.name, "' of stage '",
                                                  stage.name(), "' is not a reduce iterator"));
  }
  const int ndim = static_cast<int>(op.axes.size());
  if (factor_iter_id < 0 || factor_iter_id > ndim) {
    return internal::StepError(
        text, absl::StrCat("factor_iter_id ", factor_iter_id, " must be in [0, ", ndim, "]"));
  }
  ASSIGN_OR_RETURN(const RfactorLayout layout,
                   MakeRfactorLayout(stage, iter_id, factor_iter_id, text));
  const ir::Expr body = PartialBody(stage, layout.reduce_iters);

  const std::string rf_name = internal::UniqueStageName(s, absl::StrCat(stage.name(), ".rf"));
  ir::ComputeOptions rf_options;
  rf_options.axis_names = layout.axis_names;
  rf_options.reduce_axis_names = layout.reduce_names;
  rf_options.tag = "rfactor";
  absl::StatusOr<ir::Tensor> rf =
      layout.reduce_shape.empty()
          ? ir::Compute(
                rf_name, layout.shape, [&](const std::vector<ir::Expr>&) { return body; },
                rf_options)
          : ir::Reduce(
                rf_name, layout.shape, op.reduce, layout.reduce_shape,
                [&](const std::vector<ir::Expr>&, const std::vector<ir::Expr>&) { return body; },
                ir::Expr(), rf_options);
  if (!rf.ok()) {
    return internal::StepError(
        text, absl::StrCat("cannot build stage '", rf_name, "': ", rf.status().message()));
  }

  // The original reduces the partial results over the factor axis.
  ir::ComputeOptions options;
  for (const ir::IterVar& axis : op.axes) options.axis_names.push_back(axis.name);
  options.reduce_axis_names = {factor_it.name};
  options.tag = op.tag;
  const ir::Tensor rf_tensor = *rf;
  absl::StatusOr<ir::Tensor> final_op = ir::Reduce(
      op.name, op.shape, op.reduce, {factor_it.extent},
      [&](const std::vector<ir::Expr>& axes, const std::vector<ir::Expr>& r) {
        std::vector<ir::Expr> indices = axes;
        indices.insert(indices.begin() + factor_iter_id, r[0]);
        return rf_tensor(indices);
      },
      op.init, options);
  if (!final_op.ok()) {
    return internal::StepError(text, absl::StrCat("cannot rebuild stage '", stage.name(),
                                                  "': ", final_op.status().message()));
  }

  Stage rf_stage;
  rf_stage.op = rf->node();
  RETURN_IF_ERROR(internal::RebuildStage(rf_stage, layout.shape));

  State out = s;
  {
    Stage& m = out.MutableStage(stage_id);
    m.op = final_op->node();
    m.loop_steps.clear();
    const std::vector<int64_t> extents = m.axis_extents;
    absl::Status st = internal::RebuildStage(m, extents);
    if (!st.ok()) return internal::StepError(text, std::string(st.message()));
  }
  out.InsertStage(stage_id, std::move(rf_stage));
  return internal::Finish(std::move(out), stage_id + 1, *this);
}

nlohmann::json RfactorStep::ToJson() const { return {"RF", stage_id, iter_id, factor_iter_id}; }

absl::StatusOr<RfactorStep> RfactorStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "RF", 4));
  RfactorStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "RF"));
  ASSIGN_OR_RETURN(int iter, internal::JsonId(j, 2, "RF"));
  ASSIGN_OR_RETURN(int64_t factor, internal::JsonInt(j, 3, "RF"));
  s.stage_id = static_cast<int>(stage);
  s.iter_id = static_cast<int>(iter);
  s.factor_iter_id = static_cast<int>(factor);
  return s;
}

std::string RfactorStep::ToString() const {
  return absl::StrCat("rfactor(", stage_id, ", ", iter_id, ", ", factor_iter_id, ")");
}

}  // namespace tilesearch::schedule
