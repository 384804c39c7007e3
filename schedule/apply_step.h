// Applying steps to states.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"
#include "schedule/step.h"

namespace tilesearch::schedule {

/// Applies one step, returning the new state (the input is unchanged) with the step appended.
/// Errors: kInvalidArgument naming the step and the reason, e.g.
/// "split(C, k, [7]): stage 'C' is inlined", "fuse(C, [0, 2]): iterators are not adjacent".
[[nodiscard]] absl::StatusOr<State> ApplyStep(const State& state, const Step& step);

/// Replays `steps` on the DAG's initial state. Errors: the first failing step, with its index.
[[nodiscard]] absl::StatusOr<State> ReplaySteps(const ir::ComputeDAG& dag,
                                                const std::vector<Step>& steps);

}  // namespace tilesearch::schedule
