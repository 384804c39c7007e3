// split: one iterator into lengths.size() + 1 nested iterators (Ansor SplitStep).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> SplitStep::Apply(const State& s) const {
  return internal::ApplySplit(s, stage_id, iter_id, lengths, inner_to_outer, extent, *this);
}

nlohmann::json SplitStep::ToJson() const {
  nlohmann::json lens = nlohmann::json::array();
  for (const auto& l : lengths) lens.push_back(l.has_value() ? nlohmann::json(*l) : nullptr);
  return {"SP", stage_id, iter_id, extent, lens, inner_to_outer ? 1 : 0};
}

absl::StatusOr<SplitStep> SplitStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "SP", 6));
  SplitStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "SP"));
  ASSIGN_OR_RETURN(int iter, internal::JsonId(j, 2, "SP"));
  ASSIGN_OR_RETURN(s.extent, internal::JsonInt(j, 3, "SP"));
  ASSIGN_OR_RETURN(int64_t inner_to_outer, internal::JsonInt(j, 5, "SP"));
  s.stage_id = static_cast<int>(stage);
  s.iter_id = static_cast<int>(iter);
  s.inner_to_outer = inner_to_outer != 0;
  if (!j[4].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 4 of step 'SP' is not a list of lengths: ", j[4].dump()));
  }
  for (const nlohmann::json& l : j[4]) {
    if (l.is_null()) {
      s.lengths.push_back(std::nullopt);
    } else if (l.is_number_integer()) {
      s.lengths.push_back(l.get<int64_t>());
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("field 4 of step 'SP' is not a list of lengths: ", j[4].dump()));
    }
  }
  return s;
}

std::string SplitStep::ToString() const {
  std::vector<std::string> lens;
  for (const auto& l : lengths) lens.push_back(l.has_value() ? absl::StrCat(*l) : "?");
  return absl::StrCat("split(", stage_id, ", ", iter_id, ", [", absl::StrJoin(lens, ", "), "]",
                      inner_to_outer ? "" : ", outer_to_inner", ")");
}

}  // namespace tilesearch::schedule
