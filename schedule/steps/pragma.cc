// pragma auto_unroll_max_step=N on a stage (Ansor PragmaStep with "auto_unroll_max_step$N").
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {
namespace {
constexpr char kPrefix[] = "auto_unroll_max_step$";
}  // namespace

absl::StatusOr<State> PragmaStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  RETURN_IF_ERROR(internal::CheckIterId(stage, iter_id, text));
  if (auto_unroll_max_step < 0) {
    return internal::StepError(
        text, absl::StrCat("auto_unroll_max_step ", auto_unroll_max_step, " is negative"));
  }
  State out = s;
  out.MutableStage(stage_id).auto_unroll_max_step = auto_unroll_max_step;
  out.AppendStep(*this);
  return out;
}

nlohmann::json PragmaStep::ToJson() const {
  return {"PR", stage_id, iter_id, absl::StrCat(kPrefix, auto_unroll_max_step)};
}

absl::StatusOr<PragmaStep> PragmaStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "PR", 4));
  PragmaStep s;
  ASSIGN_OR_RETURN(int64_t stage, internal::JsonInt(j, 1, "PR"));
  ASSIGN_OR_RETURN(int64_t iter, internal::JsonInt(j, 2, "PR"));
  ASSIGN_OR_RETURN(std::string pragma, internal::JsonString(j, 3, "PR"));
  int64_t value = 0;
  if (!absl::StartsWith(pragma, kPrefix) ||
      !absl::SimpleAtoi(pragma.substr(sizeof(kPrefix) - 1), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown pragma '", pragma, "' (expected auto_unroll_max_step$N)"));
  }
  s.stage_id = static_cast<int>(stage);
  s.iter_id = static_cast<int>(iter);
  s.auto_unroll_max_step = value;
  return s;
}

std::string PragmaStep::ToString() const {
  return absl::StrCat("pragma(", stage_id, ", ", iter_id,
                      ", auto_unroll_max_step=", auto_unroll_max_step, ")");
}

}  // namespace tilesearch::schedule
