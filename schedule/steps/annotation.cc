// annotation: unroll / vectorize / parallel / vthread, or a blockIdx / threadIdx binding
// (Ansor AnnotationStep).
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "schedule/steps/step_util.h"

namespace tilesearch::schedule {
namespace {

constexpr int kMaxAnnotation = static_cast<int>(IteratorAnnotation::kThreadIdxZ);

bool IsBlockBinding(IteratorAnnotation a) {
  return a == IteratorAnnotation::kBlockIdxX || a == IteratorAnnotation::kBlockIdxY ||
         a == IteratorAnnotation::kBlockIdxZ;
}
bool IsThreadBinding(IteratorAnnotation a) {
  return a == IteratorAnnotation::kThreadIdxX || a == IteratorAnnotation::kThreadIdxY ||
         a == IteratorAnnotation::kThreadIdxZ;
}

}  // namespace

const char* AnnotationName(IteratorAnnotation a) {
  switch (a) {
    case IteratorAnnotation::kNone:
      return "none";
    case IteratorAnnotation::kUnroll:
      return "unroll";
    case IteratorAnnotation::kVectorize:
      return "vectorize";
    case IteratorAnnotation::kParallel:
      return "parallel";
    case IteratorAnnotation::kVThread:
      return "vthread";
    case IteratorAnnotation::kBlockIdxX:
      return "blockIdx.x";
    case IteratorAnnotation::kThreadIdxX:
      return "threadIdx.x";
    case IteratorAnnotation::kBlockIdxY:
      return "blockIdx.y";
    case IteratorAnnotation::kThreadIdxY:
      return "threadIdx.y";
    case IteratorAnnotation::kBlockIdxZ:
      return "blockIdx.z";
    case IteratorAnnotation::kThreadIdxZ:
      return "threadIdx.z";
  }
  return "?";
}

absl::StatusOr<IteratorAnnotation> ParseAnnotation(const std::string& name) {
  for (int i = 0; i <= kMaxAnnotation; ++i) {
    auto a = static_cast<IteratorAnnotation>(i);
    if (name == AnnotationName(a)) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown annotation '", name,
      "' (expected none, unroll, vectorize, parallel, vthread, blockIdx.x/y/z, threadIdx.x/y/z)"));
}

absl::StatusOr<State> AnnotationStep::Apply(const State& s) const {
  const std::string text = ToString();
  if (static_cast<int>(annotation) > kMaxAnnotation) {
    return internal::StepError(text,
                               absl::StrCat("unknown annotation ", static_cast<int>(annotation)));
  }
  RETURN_IF_ERROR(internal::CheckStageId(s, stage_id, text));
  const Stage& stage = s.stage(stage_id);
  RETURN_IF_ERROR(internal::CheckSchedulable(stage, text));
  RETURN_IF_ERROR(internal::CheckIterId(stage, iter_id, text));
  const Iterator& it = stage.iters[iter_id];
  const int n = static_cast<int>(stage.iters.size());
  if (annotation == IteratorAnnotation::kVectorize && iter_id != n - 1) {
    return internal::StepError(
        text, absl::StrCat("vectorize needs the innermost iterator, but '", it.name, "' is ",
                           iter_id, " of ", n, " in stage '", stage.name(), "'"));
  }
  if ((IsBlockBinding(annotation) || annotation == IteratorAnnotation::kVThread) &&
      it.kind != IteratorKind::kSpace) {
    return internal::StepError(
        text, absl::StrCat("cannot bind ", IteratorKindName(it.kind), " iterator '", it.name,
                           "' of stage '", stage.name(), "' to ", AnnotationName(annotation)));
  }
  if (IsBlockBinding(annotation) || IsThreadBinding(annotation)) {
    for (int i = 0; i < n; ++i) {
      if (i != iter_id && stage.iters[i].annotation == annotation) {
        return internal::StepError(
            text, absl::StrCat("stage '", stage.name(), "' already binds iterator '",
                               stage.iters[i].name, "' to ", AnnotationName(annotation)));
      }
    }
  }
  // Only thread bindings relax regions (bound inference), and only of the buffers they are
  // shared over: blockIdx of global ones, threadIdx and vthread of global and shared ones.
  bool keeps_regions = true;
  for (IteratorAnnotation a : {it.annotation, annotation}) {
    if (!internal::IsThreadAnnotation(a)) continue;
    const bool block = IsBlockBinding(a);
    for (int d : internal::AttachedBelow(s, stage_id)) {
      const ir::MemoryScope scope = s.stage(d).scope;
      if (scope == ir::MemoryScope::kGlobal || (!block && scope == ir::MemoryScope::kShared)) {
        keeps_regions = false;
      }
    }
  }
  State out = s;
  Stage& m = out.MutableStage(stage_id);
  m.iters[iter_id].annotation = annotation;
  m.loop_steps.push_back(*this);
  return internal::Finish(std::move(out), stage_id, *this, keeps_regions);
}

nlohmann::json AnnotationStep::ToJson() const {
  return {"AN", stage_id, iter_id, static_cast<int>(annotation)};
}

absl::StatusOr<AnnotationStep> AnnotationStep::FromJson(const nlohmann::json& j) {
  RETURN_IF_ERROR(internal::CheckArity(j, "AN", 4));
  AnnotationStep s;
  ASSIGN_OR_RETURN(int stage, internal::JsonId(j, 1, "AN"));
  ASSIGN_OR_RETURN(int iter, internal::JsonId(j, 2, "AN"));
  ASSIGN_OR_RETURN(int64_t ann, internal::JsonInt(j, 3, "AN"));
  if (ann < 0 || ann > kMaxAnnotation) {
    return absl::InvalidArgumentError(absl::StrCat("field 3 of step 'AN' is annotation ", ann,
                                                   " (known: 0..", kMaxAnnotation, ")"));
  }
  s.stage_id = static_cast<int>(stage);
  s.iter_id = static_cast<int>(iter);
  s.annotation = static_cast<IteratorAnnotation>(ann);
  return s;
}

std::string AnnotationStep::ToString() const {
  const char* name =
      static_cast<int>(annotation) <= kMaxAnnotation ? AnnotationName(annotation) : "?";
  return absl::StrCat("annotation(", stage_id, ", ", iter_id, ", ", name, ")");
}

}  // namespace tilesearch::schedule
