// follow_split: splits like an earlier SplitStep (TVM FollowSplitStep::ExtractSplitLengths).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> FollowSplitStep::Apply(const State& s) const {
  const std::string text = ToString();
  if (src_step_id < 0 || src_step_id >= static_cast<int>(s.steps().size())) {
    return internal::StepError(
        text, absl::StrCat("source step ", src_step_id, " is out of range (the state has ",
                           s.steps().size(), " steps)"));
  }
  const auto* src = std::get_if<SplitStep>(&s.steps()[src_step_id]);
  if (src == nullptr) {
    return internal::StepError(text,
                               absl::StrCat("source step ", src_step_id, " is ",
                                            StepToString(s.steps()[src_step_id]), ", not a split"));
  }
  const int n_lengths = static_cast<int>(src->lengths.size());
  if (n_split < 1 || n_split > n_lengths + 1) {
    return internal::StepError(text,
                               absl::StrCat("n_split ", n_split, " must be in [1, ", n_lengths + 1,
                                            "] for source step ", src_step_id));
  }
  // The first n_split - 1 lengths, then the product of the rest (one length when n_split - 1 of
  // them are taken).
  std::vector<std::optional<int64_t>> lengths(src->lengths.begin(),
                                              src->lengths.begin() + (n_split - 1));
  std::optional<int64_t> last = 1;
  for (int j = n_split - 1; j < n_lengths; ++j) {
    if (!src->lengths[j].has_value()) {
      last = std::nullopt;
      break;
    }
    *last *= *src->lengths[j];
  }
  lengths.push_back(last);
  return internal::ApplySplit(s, stage_id, iter_id, lengths, /*inner_to_outer=*/true, 0, *this);
}

nlohmann::json FollowSplitStep::ToJson() const {
  return {"FSP", stage_id, iter_id, src_step_id, n_split};
}

absl::StatusOr<FollowSplitStep> FollowSplitStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "FSP", 5));
  FollowSplitStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "FSP"));
  ASSIGN_OR_RETURN(int iter, internal::JsonId(j, 2, "FSP"));
  ASSIGN_OR_RETURN(int64_t src, internal::JsonInt(j, 3, "FSP"));
  ASSIGN_OR_RETURN(int64_t n, internal::JsonInt(j, 4, "FSP"));
  s.stage_id = static_cast<int>(stage);
  s.iter_id = static_cast<int>(iter);
  s.src_step_id = static_cast<int>(src);
  s.n_split = static_cast<int>(n);
  return s;
}

std::string FollowSplitStep::ToString() const {
  return absl::StrCat("follow_split(", stage_id, ", ", iter_id, ", src ", src_step_id, ", n ",
                      n_split, ")");
}

}  // namespace tilesearch::schedule
