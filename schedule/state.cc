#include "schedule/state.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace tilesearch::schedule {

const char* IteratorKindName(IteratorKind kind) {
  switch (kind) {
    case IteratorKind::kSpace:
      return "space";
    case IteratorKind::kReduce:
      return "reduce";
    case IteratorKind::kMixed:
      return "mixed";
  }
  return "?";
}

int Stage::IterIndex(const std::string& iter_name) const {
  for (size_t i = 0; i < iters.size(); ++i) {
    if (iters[i].name == iter_name) return static_cast<int>(i);
  }
  return -1;
}

State State::Initial(const ir::ComputeDAG& dag) {
  State state;
  state.dag_ = std::make_shared<const ir::ComputeDAG>(dag);
  for (const ir::Tensor& t : dag.stages()) {
    auto stage = std::make_shared<Stage>();
    stage->op = t.node();
    for (const ir::IterVar& axis : t->axes) {
      stage->iters.push_back({axis.name, axis.extent, IteratorKind::kSpace});
      stage->axis_values.push_back(axis.var());
      stage->axis_extents.push_back(axis.extent);
    }
    for (const ir::IterVar& axis : t->reduce_axes) {
      stage->iters.push_back({axis.name, axis.extent, IteratorKind::kReduce});
      stage->axis_values.push_back(axis.var());
    }
    state.stages_.push_back(std::move(stage));
  }
  return state;
}

int State::StageId(const std::string& name) const {
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (stages_[i]->name() == name) return static_cast<int>(i);
  }
  return -1;
}

Stage& State::MutableStage(int id) {
  CHECK(id >= 0 && id < num_stages()) << "stage id " << id << " out of range";
  // Every Stage is created non-const (make_shared<Stage>), so writing through the pointer is
  // allowed; a stage shared with another State is copied first.
  if (stages_[id].use_count() != 1) stages_[id] = std::make_shared<Stage>(*stages_[id]);
  return const_cast<Stage&>(*stages_[id]);
}

void State::InsertStage(int id, Stage stage) {
  CHECK(id >= 0 && id <= num_stages()) << "stage id " << id << " out of range";
  for (int i = 0; i < num_stages(); ++i) {
    if (stages_[i]->location == ComputeLocation::kAttached && stages_[i]->attach_stage >= id) {
      MutableStage(i).attach_stage += 1;
    }
  }
  if (stage.location == ComputeLocation::kAttached && stage.attach_stage >= id) {
    stage.attach_stage += 1;
  }
  stages_.insert(stages_.begin() + id, std::make_shared<Stage>(std::move(stage)));
}

void State::AppendStep(const Step& step) {
  auto steps = std::make_shared<std::vector<Step>>(*steps_);
  steps->push_back(step);
  steps_ = std::move(steps);
}

namespace {

std::string LocationText(const State& state, const Stage& stage) {
  switch (stage.location) {
    case ComputeLocation::kRoot:
      return "root";
    case ComputeLocation::kInlined:
      return "inlined";
    case ComputeLocation::kAttached: {
      std::string target = stage.attach_stage >= 0 && stage.attach_stage < state.num_stages()
                               ? state.stage(stage.attach_stage).name()
                               : absl::StrCat("#", stage.attach_stage);
      return absl::StrCat("compute_at ", target, " ", stage.attach_iter);
    }
  }
  return "?";
}

}  // namespace

std::string State::ToString() const {
  std::string out;
  for (int id = 0; id < num_stages(); ++id) {
    const Stage& s = stage(id);
    absl::StrAppend(&out, "stage ", id, " ", s.name(), ": ");
    if (s.is_placeholder()) {
      absl::StrAppend(&out, "placeholder\n");
      continue;
    }
    absl::StrAppend(&out, LocationText(*this, s), ", ", ir::MemoryScopeName(s.scope));
    if (s.auto_unroll_max_step > 0) {
      absl::StrAppend(&out, ", auto_unroll_max_step=", s.auto_unroll_max_step);
    }
    if (s.software_pipeline >= 0) {
      absl::StrAppend(&out, ", software_pipeline=", s.software_pipeline);
    }
    if (s.storage_align_dim >= 0) {
      absl::StrAppend(&out, ", storage_align(", s.storage_align_dim, ", ", s.storage_align_factor,
                      ", ", s.storage_align_offset, ")");
    }
    absl::StrAppend(&out, "\n");
    for (const Iterator& it : s.iters) {
      absl::StrAppend(&out, "  for ", it.name, " (", it.extent, ") ", IteratorKindName(it.kind));
      if (it.annotation != IteratorAnnotation::kNone) {
        absl::StrAppend(&out, " ", AnnotationName(it.annotation));
      }
      absl::StrAppend(&out, "\n");
    }
    for (const ir::Expr& g : s.guards) absl::StrAppend(&out, "  if ", ir::ToString(g), "\n");
  }
  absl::StrAppend(&out, "steps:\n");
  for (const Step& step : steps()) absl::StrAppend(&out, "  ", StepToString(step), "\n");
  return out;
}

uint64_t State::Hash() const { return ir::Fnv1a64(ToString()); }

int KernelRootStage(const State& state, int sid) {
  CHECK(sid >= 0 && sid < state.num_stages()) << "stage id " << sid;
  for (int hops = 0; hops <= state.num_stages(); ++hops) {
    const Stage& st = state.stage(sid);
    if (st.location != ComputeLocation::kAttached || st.attach_stage < 0 ||
        st.attach_stage >= state.num_stages()) {
      break;
    }
    sid = st.attach_stage;
  }
  return sid;
}

}  // namespace tilesearch::schedule
