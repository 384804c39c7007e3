// compute_at: computes a stage inside a loop of a consumer, only the region one iteration of that
// loop needs (Ansor ComputeAtStep; the extents come from InferRegion).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/bound_inference.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> ComputeAtStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  RETURN_IF_ERROR(internal::CheckStageId(s, target_stage_id, text));
  const Stage& stage = s.stage(stage_id);
  const Stage& target = s.stage(target_stage_id);
  if (stage_id == target_stage_id) {
    return internal::StepError(text,
                               absl::StrCat("cannot compute stage '", stage.name(), "' at itself"));
  }
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  if (target.is_placeholder()) {
    return internal::StepError(text,
                               absl::StrCat("target stage '", target.name(), "' is a placeholder"));
  }
  if (target.location == ComputeLocation::kInlined) {
    return internal::StepError(text, absl::StrCat("target stage '", target.name(), "' is inlined"));
  }
  RETURN_IF_ERROR(internal::CheckIterId(target, target_iter_id, text));
  // The target must not be computed inside the stage (a cycle).
  int up = target_stage_id;
  for (int depth = 0; up >= 0 && depth <= s.num_stages(); ++depth) {
    const Stage& u = s.stage(up);
    if (u.location != ComputeLocation::kAttached) break;
    if (u.attach_stage == stage_id) {
      return internal::StepError(
          text, absl::StrCat("target stage '", target.name(), "' is computed inside stage '",
                             stage.name(), "'"));
    }
    up = u.attach_stage;
  }
  const std::string iter_name = target.iters[target_iter_id].name;
  State out = s;
  {
    Stage& m = out.MutableStage(stage_id);
    m.location = ComputeLocation::kAttached;
    m.attach_stage = target_stage_id;
    m.attach_iter = iter_name;
  }
  absl::StatusOr<std::vector<RegionDim>> region =
      InferRegion(out, stage_id, target_stage_id, iter_name);
  if (!region.ok()) return internal::StepError(text, std::string(region.status().message()));
  std::vector<int64_t> extents;
  for (const RegionDim& d : *region) extents.push_back(d.extent);
  absl::Status st = internal::RebuildStage(out.MutableStage(stage_id), extents);
  if (!st.ok()) {
    return internal::StepError(text, absl::StrCat("cannot rebuild the loops of stage '",
                                                  stage.name(), "': ", st.message()));
  }
  return internal::Finish(std::move(out), stage_id, *this);
}

nlohmann::json ComputeAtStep::ToJson() const {
  return {"CA", stage_id, target_stage_id, target_iter_id};
}

absl::StatusOr<ComputeAtStep> ComputeAtStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "CA", 4));
  ComputeAtStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "CA"));
  ASSIGN_OR_RETURN(int target, internal::JsonId(j, 2, "CA"));
  ASSIGN_OR_RETURN(int iter, internal::JsonId(j, 3, "CA"));
  s.stage_id = static_cast<int>(stage);
  s.target_stage_id = static_cast<int>(target);
  s.target_iter_id = static_cast<int>(iter);
  return s;
}

std::string ComputeAtStep::ToString() const {
  return absl::StrCat("compute_at(", stage_id, ", ", target_stage_id, ", ", target_iter_id, ")");
}

}  // namespace tilesearch::schedule
