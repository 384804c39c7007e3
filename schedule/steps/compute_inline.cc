// compute_inline: a stage's body is substituted into its consumers (Ansor ComputeInlineStep).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> ComputeInlineStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  if (stage.is_placeholder()) {
    return internal::StepError(text, absl::StrCat("stage '", stage.name(), "' is a placeholder"));
  }
  if (internal::IsOutput(s, stage)) {
    return internal::StepError(text,
                               absl::StrCat("stage '", stage.name(), "' is an output of the DAG"));
  }
  if (stage.op->reduce != ir::ReduceKind::kNone) {
    return internal::StepError(text, absl::StrCat("stage '", stage.name(), "' has a reduction"));
  }
  for (int i = 0; i < s.num_stages(); ++i) {
    const Stage& a = s.stage(i);
    if (a.location == ComputeLocation::kAttached && a.attach_stage == stage_id) {
      return internal::StepError(
          text, absl::StrCat("stage '", a.name(), "' is attached at '", a.attach_iter,
                             "' of stage '", stage.name(), "'"));
    }
  }
  State out = s;
  Stage& m = out.MutableStage(stage_id);
  m.location = ComputeLocation::kInlined;
  m.attach_stage = -1;
  m.attach_iter.clear();
  out.AppendStep(*this);
  return out;
}

nlohmann::json ComputeInlineStep::ToJson() const { return {"CI", stage_id}; }

absl::StatusOr<ComputeInlineStep> ComputeInlineStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "CI", 2));
  ComputeInlineStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "CI"));
  s.stage_id = static_cast<int>(stage);
  return s;
}

std::string ComputeInlineStep::ToString() const {
  return absl::StrCat("compute_inline(", stage_id, ")");
}

}  // namespace tilesearch::schedule
