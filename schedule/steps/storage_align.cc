// storage_align: pads one dimension of a stage's buffer so its stride is ≡ offset (mod factor)
// (Ansor StorageAlignStep; shared-memory bank conflicts).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> StorageAlignStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  const int ndim = static_cast<int>(stage.op->shape.size());
  if (iter_id < 0 || iter_id >= ndim) {
    return internal::StepError(
        text, absl::StrCat("dimension ", iter_id, " is out of range (", "stage '", stage.name(),
                           "' has ", ndim, " dimensions)"));
  }
  if (factor < 1) {
    return internal::StepError(text, absl::StrCat("factor ", factor, " must be >= 1"));
  }
  if (offset < 0 || offset >= factor) {
    return internal::StepError(text,
                               absl::StrCat("offset ", offset, " must be in [0, ", factor, ")"));
  }
  State out = s;
  Stage& m = out.MutableStage(stage_id);
  m.storage_align_dim = iter_id;
  m.storage_align_factor = factor;
  m.storage_align_offset = offset;
  out.AppendStep(*this);
  return out;
}

nlohmann::json StorageAlignStep::ToJson() const {
  return {"SA", stage_id, iter_id, factor, offset};
}

absl::StatusOr<StorageAlignStep> StorageAlignStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "SA", 5));
  StorageAlignStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "SA"));
  ASSIGN_OR_RETURN(int iter, internal::JsonId(j, 2, "SA"));
  ASSIGN_OR_RETURN(s.factor, internal::JsonInt(j, 3, "SA"));
  ASSIGN_OR_RETURN(s.offset, internal::JsonInt(j, 4, "SA"));
  s.stage_id = static_cast<int>(stage);
  s.iter_id = static_cast<int>(iter);
  return s;
}

std::string StorageAlignStep::ToString() const {
  return absl::StrCat("storage_align(", stage_id, ", ", iter_id, ", ", factor, ", ", offset, ")");
}

}  // namespace tilesearch::schedule
