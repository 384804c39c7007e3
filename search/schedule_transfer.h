// Transfer of a schedule between shapes of one operator: a step list measured on one workload
// replayed on another of the same structure (same operator, dtype and attributes, other extents),
// with every split's tile lengths adapted to the new iterator extents. The candidates a model
// ranks when it predicts a schedule for a shape that was never tuned (search/predict.h), as
// TVM's and Triton's users ask for warm starts from known-good configurations of nearby shapes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"
#include "schedule/step.h"

namespace tilesearch::search {

/// Tile lengths of one split adapted to a new extent. `lengths` are the split's given lengths
/// (outermost first); with `inner_to_outer` they are the inner parts and the outermost part is
/// derived (ceil(extent / product)), otherwise they are the outer parts and the innermost is
/// derived. Walking from the part farthest from the derived one (the innermost with
/// inner_to_outer: the vector, unroll and thread levels that decide a kernel's structure), each
/// length is kept while it is at most what is left of the extent and cut to what is left
/// otherwise; what is left is then ceil(left / length). So lengths never exceed the extent, a
/// shape that holds the old tiles keeps them exactly, and a non-divisible extent keeps the tiles
/// (the lowering guards the remainder). Unfilled lengths (nullopt) stay unfilled.
std::vector<std::optional<int64_t>> AdaptSplitLengths(
    const std::vector<std::optional<int64_t>>& lengths, bool inner_to_outer, int64_t extent);

/// Replays `steps` on `dag`'s initial state step by step; before each SplitStep of a stage that
/// is not attached by compute_at, its recorded extent becomes the iterator's extent in the state
/// reached so far and its lengths AdaptSplitLengths of it (an attached stage's splits are
/// replayed as recorded: their extents follow the consumer's tiling). Other steps are replayed as
/// they are (tensor_core tiles included: the tensor-core lowering guards partial tiles). The
/// state holds the adapted steps. Errors (kInvalidArgument): "step N: <ApplyStep's error>" when a
/// step does not apply to this DAG (another structure: a different operator or attributes), a
/// SplitStep naming a stage or iterator the state does not have.
[[nodiscard]] absl::StatusOr<schedule::State> TransferSteps(
    const std::vector<schedule::Step>& steps, const ir::ComputeDAG& dag);

}  // namespace tilesearch::search
