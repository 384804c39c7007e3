#include "search/schedule_transfer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "schedule/apply_step.h"

namespace tilesearch::search {

std::vector<std::optional<int64_t>> AdaptSplitLengths(
    const std::vector<std::optional<int64_t>>& lengths, bool inner_to_outer, int64_t extent) {
  std::vector<std::optional<int64_t>> out = lengths;
  const int n = static_cast<int>(out.size());
  int64_t left = std::max<int64_t>(extent, 1);
  for (int k = 0; k < n; ++k) {
    std::optional<int64_t>& len = out[inner_to_outer ? n - 1 - k : k];
    if (!len.has_value()) continue;
    len = std::clamp<int64_t>(*len, 1, left);
    left = (left + *len - 1) / *len;
  }
  return out;
}

absl::StatusOr<schedule::State> TransferSteps(const std::vector<schedule::Step>& steps,
                                              const ir::ComputeDAG& dag) {
  schedule::State state = schedule::State::Initial(dag);
  for (size_t i = 0; i < steps.size(); ++i) {
    schedule::Step step = steps[i];
    if (auto* split = std::get_if<schedule::SplitStep>(&step)) {
      if (split->stage_id < 0 || split->stage_id >= state.num_stages() || split->iter_id < 0 ||
          split->iter_id >= static_cast<int>(state.stage(split->stage_id).iters.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("step ", i, ": ", schedule::StepToString(step),
                         ": no such stage or iterator in this workload's state"));
      }
      const schedule::Stage& stage = state.stage(split->stage_id);
      if (stage.location != schedule::ComputeLocation::kAttached) {
        const int64_t extent = stage.iters[split->iter_id].extent;
        split->lengths = AdaptSplitLengths(split->lengths, split->inner_to_outer, extent);
        split->extent = extent;
      }
    }
    absl::StatusOr<schedule::State> next = schedule::ApplyStep(state, step);
    if (!next.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("step ", i, ": ", next.status().message()));
    }
    state = *std::move(next);
  }
  return state;
}

}  // namespace tilesearch::search
