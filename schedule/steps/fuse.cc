// fuse: adjacent iterators into one of the product extent (Ansor FuseStep).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> FuseStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  std::vector<std::string> old_names;
  for (int id : fused_ids) {
    RETURN_IF_ERROR(internal::CheckIterId(stage, id, text));
    old_names.push_back(stage.iters[id].name);
  }
  const bool keeps_regions =
      !fused_ids.empty() &&
      internal::LoopChangeKeepsRegions(s, stage_id, fused_ids.front(), fused_ids.back());
  State out = s;
  Stage& m = out.MutableStage(stage_id);
  absl::StatusOr<std::string> name = internal::FuseIters(m, fused_ids);
  if (!name.ok()) return internal::StepError(text, std::string(name.status().message()));
  m.loop_steps.push_back(*this);
  for (int i = 0; i < out.num_stages(); ++i) {
    const Stage& a = out.stage(i);
    if (a.location == ComputeLocation::kAttached && a.attach_stage == stage_id &&
        std::find(old_names.begin(), old_names.end(), a.attach_iter) != old_names.end()) {
      out.MutableStage(i).attach_iter = *name;
    }
  }
  return internal::Finish(std::move(out), stage_id, *this, keeps_regions);
}

nlohmann::json FuseStep::ToJson() const { return {"FU", stage_id, fused_ids}; }

absl::StatusOr<FuseStep> FuseStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "FU", 3));
  FuseStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "FU"));
  ASSIGN_OR_RETURN(s.fused_ids, internal::JsonIntList(j, 2, "FU"));
  s.stage_id = static_cast<int>(stage);
  return s;
}

std::string FuseStep::ToString() const {
  return absl::StrCat("fuse(", stage_id, ", ", internal::IdList(fused_ids), ")");
}

}  // namespace tilesearch::schedule
