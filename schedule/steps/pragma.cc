// pragmas on a stage (Ansor PragmaStep): "auto_unroll_max_step$N", "software_pipeline$0..4" and
// "min_blocks_per_sm$N".
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {
namespace {
constexpr char kUnrollPrefix[] = "auto_unroll_max_step$";
constexpr char kPipelinePrefix[] = "software_pipeline$";
constexpr char kMinBlocksPrefix[] = "min_blocks_per_sm$";
constexpr int kMaxMinBlocks = 32;      // sm_90's resident blocks per SM
constexpr int kMaxPipelineStages = 4;  // software_pipeline$3 / $4: cp.async stages
}  // namespace

absl::StatusOr<State> PragmaStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  RETURN_IF_ERROR(internal::CheckIterId(stage, iter_id, text));
  State out = s;
  if (min_blocks_per_sm >= 0) {
    if (min_blocks_per_sm > kMaxMinBlocks) {
      return internal::StepError(text, absl::StrCat("min_blocks_per_sm ", min_blocks_per_sm,
                                                    " is not in 0..", kMaxMinBlocks));
    }
    out.MutableStage(stage_id).min_blocks_per_sm = min_blocks_per_sm;
  } else if (software_pipeline >= 0) {
    if (software_pipeline > kMaxPipelineStages) {
      return internal::StepError(
          text, absl::StrCat("software_pipeline ", software_pipeline, " is not 0, 1, 2, 3 or 4"));
    }
    out.MutableStage(stage_id).software_pipeline = software_pipeline;
  } else {
    if (auto_unroll_max_step < 0) {
      return internal::StepError(
          text, absl::StrCat("auto_unroll_max_step ", auto_unroll_max_step, " is negative"));
    }
    out.MutableStage(stage_id).auto_unroll_max_step = auto_unroll_max_step;
  }
  out.AppendStep(*this);
  return out;
}

nlohmann::json PragmaStep::ToJson() const {
  if (min_blocks_per_sm >= 0) {
    return {"PR", stage_id, iter_id, absl::StrCat(kMinBlocksPrefix, min_blocks_per_sm)};
  }
  if (software_pipeline >= 0) {
    return {"PR", stage_id, iter_id, absl::StrCat(kPipelinePrefix, software_pipeline)};
  }
  return {"PR", stage_id, iter_id, absl::StrCat(kUnrollPrefix, auto_unroll_max_step)};
}

absl::StatusOr<PragmaStep> PragmaStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "PR", 4));
  PragmaStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "PR"));
  ASSIGN_OR_RETURN(int iter, internal::JsonId(j, 2, "PR"));
  ASSIGN_OR_RETURN(std::string pragma, internal::JsonString(j, 3, "PR"));
  s.stage_id = static_cast<int>(stage);
  s.iter_id = static_cast<int>(iter);
  int64_t value = 0;
  if (absl::StartsWith(pragma, kUnrollPrefix) &&
      absl::SimpleAtoi(pragma.substr(sizeof(kUnrollPrefix) - 1), &value)) {
    s.auto_unroll_max_step = value;
    return s;
  }
  if (absl::StartsWith(pragma, kMinBlocksPrefix)) {
    const std::string v = pragma.substr(sizeof(kMinBlocksPrefix) - 1);
    int n = -1;
    if (v.size() > 2 || !absl::SimpleAtoi(v, &n) || n < 0 || n > kMaxMinBlocks) {
      return absl::InvalidArgumentError(absl::StrCat("bad pragma '", pragma,
                                                     "': min_blocks_per_sm takes 0..",
                                                     kMaxMinBlocks, ", got '", v, "'"));
    }
    s.min_blocks_per_sm = n;
    return s;
  }
  if (absl::StartsWith(pragma, kPipelinePrefix)) {
    const std::string v = pragma.substr(sizeof(kPipelinePrefix) - 1);
    if (v.size() != 1 || v[0] < '0' || v[0] > '0' + kMaxPipelineStages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad pragma '", pragma, "': software_pipeline takes 0, 1, 2, 3 or 4, got '", v, "'"));
    }
    s.software_pipeline = v[0] - '0';
    return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pragma '", pragma,
                   "' (expected auto_unroll_max_step$N, software_pipeline$0..4 or "
                   "min_blocks_per_sm$N)"));
}

std::string PragmaStep::ToString() const {
  if (min_blocks_per_sm >= 0) {
    return absl::StrCat("pragma(", stage_id, ", ", iter_id,
                        ", min_blocks_per_sm=", min_blocks_per_sm, ")");
  }
  if (software_pipeline >= 0) {
    return absl::StrCat("pragma(", stage_id, ", ", iter_id,
                        ", software_pipeline=", software_pipeline, ")");
  }
  return absl::StrCat("pragma(", stage_id, ", ", iter_id,
                      ", auto_unroll_max_step=", auto_unroll_max_step, ")");
}

}  // namespace tilesearch::schedule
