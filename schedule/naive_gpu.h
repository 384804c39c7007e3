// The naive GPU schedule of a ComputeDAG: the GPU reference kernel of the measurement method
// (design.md). Every stage is computed at root (elementwise producers stay separate stages, so
// each kernel is as simple as the definition), and its spatial iterators are fused into one and
// split by `threads_per_block`, the outer part bound to blockIdx.x and the inner to threadIdx.x;
// reduction iterators run serially inside the thread, in definition order. One kernel per stage.
#pragma once

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"

namespace tilesearch::schedule {

/// The naive GPU state of `dag` (steps on State(dag): fuse, split, bind annotations). A stage
/// without spatial iterators (a full reduction) becomes a 1×1 launch. A stage whose fused spatial
/// extent needs more than 2^31 − 1 blocks is split further (grid y). Errors: kInvalidArgument
/// for threads_per_block outside [1, target.max_threads_per_block]; step errors (none expected).
[[nodiscard]] absl::StatusOr<State> NaiveGpuSchedule(const ir::ComputeDAG& dag,
                                                     const Target& target,
                                                     int threads_per_block = 256);

}  // namespace tilesearch::schedule
