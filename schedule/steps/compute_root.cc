// compute_root: a stage goes back to the root, over its whole shape (Ansor ComputeRootStep).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> ComputeRootStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  if (stage.is_placeholder()) {
    return internal::StepError(text, absl::StrCat("stage '", stage.name(), "' is a placeholder"));
  }
  State out = s;
  Stage& m = out.MutableStage(stage_id);
  m.location = ComputeLocation::kRoot;
  m.attach_stage = -1;
  m.attach_iter.clear();
  if (m.axis_extents != m.op->shape) {
    absl::Status st = internal::RebuildStage(m, m.op->shape);
    if (!st.ok()) {
      return internal::StepError(text, absl::StrCat("cannot rebuild the loops of stage '",
                                                    stage.name(), "': ", st.message()));
    }
  }
  return internal::Finish(std::move(out), stage_id, *this);
}

nlohmann::json ComputeRootStep::ToJson() const { return {"CR", stage_id}; }

absl::StatusOr<ComputeRootStep> ComputeRootStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "CR", 2));
  ComputeRootStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "CR"));
  s.stage_id = static_cast<int>(stage);
  return s;
}

std::string ComputeRootStep::ToString() const {
  return absl::StrCat("compute_root(", stage_id, ")");
}

}  // namespace tilesearch::schedule
