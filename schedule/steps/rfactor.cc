// rfactor: factorizes a reduction (Ansor RfactorStep; TVM te rfactor).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> RfactorStep::Apply(const State& s) const {
  return internal::StepError(ToString(), "rfactor is not implemented yet");
}

nlohmann::json RfactorStep::ToJson() const { return {"RF", stage_id, iter_id, factor_iter_id}; }

absl::StatusOr<RfactorStep> RfactorStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "RF", 4));
  RfactorStep s;
  ASSIGN_OR_RETURN(int64_t stage, internal::JsonInt(j, 1, "RF"));
  ASSIGN_OR_RETURN(int64_t iter, internal::JsonInt(j, 2, "RF"));
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
