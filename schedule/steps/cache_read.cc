// cache_read: a new stage copies a stage's buffer into shared or local memory and the given
// readers load the copy (Ansor CacheReadStep; TVM te cache_read).
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {

absl::StatusOr<State> CacheReadStep::Apply(const State& s) const {
  const std::string text = ToString();
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  if (stage.location == ComputeLocation::kInlined) {
    return internal::StepError(text, absl::StrCat("stage '", stage.name(), "' is inlined"));
  }
  if (scope == ir::MemoryScope::kGlobal) {
    return internal::StepError(text, "cache_read needs scope shared or local");
  }
  if (reader_stage_ids.empty()) return internal::StepError(text, "no reader stages");
  for (size_t k = 0; k < reader_stage_ids.size(); ++k) {
    const int r = reader_stage_ids[k];
    RETURN_IF_ERROR(internal::CheckStageId(s, r, text));
    if (std::find(reader_stage_ids.begin(), reader_stage_ids.begin() + k, r) !=
        reader_stage_ids.begin() + k) {
      return internal::StepError(text, absl::StrCat("reader stage ", r, " is listed twice"));
    }
    const Stage& reader = s.stage(r);
    if (r == stage_id || reader.is_placeholder() ||
        !internal::ReadsBuffer(*reader.op, stage.name())) {
      return internal::StepError(text, absl::StrCat("stage '", reader.name(),
                                                    "' does not read stage '", stage.name(), "'"));
    }
  }

  // The copy: cache[ax0, ax1, ...] = original[ax0, ax1, ...].
  auto cache = std::make_shared<ir::TensorNode>();
  cache->name =
      internal::UniqueStageName(s, absl::StrCat(stage.name(), ".", ir::MemoryScopeName(scope)));
  cache->dtype = stage.op->dtype;
  cache->shape = stage.op->shape;
  std::vector<ir::Expr> indices;
  for (size_t d = 0; d < cache->shape.size(); ++d) {
    cache->axes.push_back({absl::StrCat("ax", d), cache->shape[d]});
    indices.push_back(cache->axes.back().var());
  }
  cache->body = ir::LoadNode::Make(cache->dtype, stage.name(), indices, stage.op);
  cache->tag = "cache_read";

  Stage cache_stage;
  cache_stage.op = cache;
  for (const ir::IterVar& axis : cache->axes) {
    cache_stage.iters.push_back({axis.name, axis.extent, IteratorKind::kSpace});
    cache_stage.axis_values.push_back(axis.var());
  }
  cache_stage.axis_extents = cache->shape;
  cache_stage.scope = scope;

  State out = s;
  for (int r : reader_stage_ids) {
    Stage& m = out.MutableStage(r);
    auto op = std::make_shared<ir::TensorNode>(*m.op);
    op->body = internal::RedirectLoads(op->body, stage.name(), cache);
    op->init = internal::RedirectLoads(op->init, stage.name(), cache);
    m.op = std::move(op);
  }
  out.InsertStage(stage_id + 1, std::move(cache_stage));
  for (int r : reader_stage_ids) {
    const int id = r > stage_id ? r + 1 : r;
    RETURN_IF_ERROR(internal::RefreshAttached(out, id, false, text));
  }
  out.AppendStep(*this);
  return out;
}

nlohmann::json CacheReadStep::ToJson() const {
  return {"CHR", stage_id, ir::MemoryScopeName(scope), reader_stage_ids};
}

absl::StatusOr<CacheReadStep> CacheReadStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "CHR", 4));
  CacheReadStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "CHR"));
  ASSIGN_OR_RETURN(std::string scope, internal::JsonString(j, 2, "CHR"));
  ASSIGN_OR_RETURN(s.scope, internal::ParseScope(scope));
  ASSIGN_OR_RETURN(s.reader_stage_ids, internal::JsonIntList(j, 3, "CHR"));
  s.stage_id = static_cast<int>(stage);
  return s;
}

std::string CacheReadStep::ToString() const {
  return absl::StrCat("cache_read(", stage_id, ", ", ir::MemoryScopeName(scope), ", ",
                      internal::IdList(reader_stage_ids), ")");
}

}  // namespace tilesearch::schedule
