// cache_write: a new stage computes a stage's body into shared or local memory; the original
// becomes a copy of it (Ansor CacheWriteStep; TVM te cache_write).
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> CacheWriteStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  if (scope == ir::MemoryScope::kGlobal) {
    return internal::StepError(text, "cache_write needs scope shared or local");
  }
  if (!internal::HasInitialIterators(stage)) {
    return internal::StepError(text, absl::StrCat("cache_write must come before other loop ",
                                                  "transforms of stage '", stage.name(), "'"));
  }
  const ir::TensorNode& op = *stage.op;
  for (int i = 0; i < s.num_stages(); ++i) {
    const Stage& a = s.stage(i);
    if (a.location != ComputeLocation::kAttached || a.attach_stage != stage_id) continue;
    const int it = stage.IterIndex(a.attach_iter);
    if (it >= static_cast<int>(op.axes.size())) {
      return internal::StepError(
          text, absl::StrCat("stage '", a.name(), "' is attached at reduce iterator '",
                             a.attach_iter, "' of stage '", stage.name(), "'"));
    }
  }

  // The cache computes what the original did, under a new name.
  auto cache = std::make_shared<ir::TensorNode>(op);
  cache->name =
      internal::UniqueStageName(s, absl::StrCat(stage.name(), ".", ir::MemoryScopeName(scope)));
  // The original copies the cache: out[axes] = cache[axes].
  auto copy = std::make_shared<ir::TensorNode>();
  copy->name = op.name;
  copy->dtype = op.dtype;
  copy->shape = op.shape;
  copy->axes = op.axes;
  copy->tag = op.tag;
  std::vector<ir::Expr> indices;
  for (const ir::IterVar& axis : op.axes) indices.push_back(axis.var());
  copy->body = ir::LoadNode::Make(op.dtype, cache->name, indices, cache);

  Stage cache_stage;
  cache_stage.op = cache;
  cache_stage.scope = scope;
  RETURN_IF_ERROR(internal::RebuildStage(cache_stage, op.shape));

  State out = s;
  {
    Stage& m = out.MutableStage(stage_id);
    m.op = copy;
    m.loop_steps.clear();
    std::vector<int64_t> extents = m.axis_extents;
    RETURN_IF_ERROR(internal::RebuildStage(m, extents));
  }
  out.InsertStage(stage_id, std::move(cache_stage));
  return internal::Finish(std::move(out), stage_id + 1, *this);
}

nlohmann::json CacheWriteStep::ToJson() const {
  return {"CHW", stage_id, ir::MemoryScopeName(scope)};
}

absl::StatusOr<CacheWriteStep> CacheWriteStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "CHW", 3));
  CacheWriteStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "CHW"));
  ASSIGN_OR_RETURN(std::string scope, internal::JsonString(j, 2, "CHW"));
  ASSIGN_OR_RETURN(s.scope, internal::ParseScope(scope));
  s.stage_id = static_cast<int>(stage);
  return s;
}

std::string CacheWriteStep::ToString() const {
  return absl::StrCat("cache_write(", stage_id, ", ", ir::MemoryScopeName(scope), ")");
}

}  // namespace tilesearch::schedule
