#include "schedule/apply_step.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::schedule {

std::string StepToString(const Step& step) {
  return std::visit([](const auto& s) { return s.ToString(); }, step);
}

absl::StatusOr<State> ApplyStep(const State& state, const Step& step) {
  return std::visit([&](const auto& s) { return s.Apply(state); }, step);
}

absl::StatusOr<State> ReplaySteps(const ir::ComputeDAG& dag, const std::vector<Step>& steps) {
  State state = State::Initial(dag);
  for (size_t i = 0; i < steps.size(); ++i) {
    absl::StatusOr<State> next = ApplyStep(state, steps[i]);
    if (!next.ok()) {
      return absl::Status(next.status().code(),
                          absl::StrCat("step ", i, ": ", next.status().message()));
    }
    state = *std::move(next);
  }
  return state;
}

}  // namespace tilesearch::schedule
