// follow_fused_split: splits by the product of the lengths at one level of earlier SplitSteps
// (TVM FollowFusedSplitStep::ExtractSplitLength; cooperative fetching).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> FollowFusedSplitStep::Apply(const State& s) const {
  const std::string text = ToString();
  if (src_step_ids.empty()) return internal::StepError(text, "no source steps");
  std::optional<int64_t> length = 1;
  for (int id : src_step_ids) {
    if (id < 0 || id >= static_cast<int>(s.steps().size())) {
      return internal::StepError(
          text, absl::StrCat("source step ", id, " is out of range (the state has ",
                             s.steps().size(), " steps)"));
    }
    const auto* src = std::get_if<SplitStep>(&s.steps()[id]);
    if (src == nullptr) {
      return internal::StepError(text, absl::StrCat("source step ", id, " is ",
                                                    StepToString(s.steps()[id]), ", not a split"));
    }
    if (level < 0 || level >= static_cast<int>(src->lengths.size())) {
      return internal::StepError(
          text, absl::StrCat("level ", level, " is out of range for ", "source step ", id, " (",
                             src->lengths.size(), " lengths)"));
    }
    if (!src->lengths[level].has_value()) {
      length = std::nullopt;
    } else if (length.has_value()) {
      *length *= *src->lengths[level];
    }
  }
  return internal::ApplySplit(s, stage_id, iter_id, {length}, factor_or_nparts, 0, *this);
}

nlohmann::json FollowFusedSplitStep::ToJson() const {
  return {"FFSP", stage_id, iter_id, src_step_ids, level, factor_or_nparts ? 1 : 0};
}

absl::StatusOr<FollowFusedSplitStep> FollowFusedSplitStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "FFSP", 6));
  FollowFusedSplitStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "FFSP"));
  ASSIGN_OR_RETURN(int iter, internal::JsonId(j, 2, "FFSP"));
  ASSIGN_OR_RETURN(s.src_step_ids, internal::JsonIntList(j, 3, "FFSP"));
  ASSIGN_OR_RETURN(int64_t level, internal::JsonInt(j, 4, "FFSP"));
  ASSIGN_OR_RETURN(int64_t factor, internal::JsonInt(j, 5, "FFSP"));
  s.stage_id = static_cast<int>(stage);
  s.iter_id = static_cast<int>(iter);
  s.level = static_cast<int>(level);
  s.factor_or_nparts = factor != 0;
  return s;
}

std::string FollowFusedSplitStep::ToString() const {
  return absl::StrCat("follow_fused_split(", stage_id, ", ", iter_id, ", src ",
                      internal::IdList(src_step_ids), ", level ", level, ", ",
                      factor_or_nparts ? "factor" : "nparts", ")");
}

}  // namespace tilesearch::schedule
