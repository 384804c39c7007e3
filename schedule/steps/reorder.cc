// reorder: a new loop order given as a permutation of the iterator ids (Ansor ReorderStep).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> ReorderStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  RETURN_IF_ERROR(internal::CheckSchedulable(s.stage(stage_id), text));
  State out = s;
  Stage& m = out.MutableStage(stage_id);
  absl::Status st = internal::ReorderIters(m, after_ids);
  if (!st.ok()) return internal::StepError(text, std::string(st.message()));
  m.loop_steps.push_back(*this);
  return internal::Finish(std::move(out), stage_id, *this);
}

nlohmann::json ReorderStep::ToJson() const { return {"RE", stage_id, after_ids}; }

absl::StatusOr<ReorderStep> ReorderStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "RE", 3));
  ReorderStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "RE"));
  ASSIGN_OR_RETURN(s.after_ids, internal::JsonIntList(j, 2, "RE"));
  s.stage_id = static_cast<int>(stage);
  return s;
}

std::string ReorderStep::ToString() const {
  return absl::StrCat("reorder(", stage_id, ", ", internal::IdList(after_ids), ")");
}

}  // namespace tilesearch::schedule
