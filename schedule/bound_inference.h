// Bound inference for compute_at: the region of a producer that one iteration of a consumer's loop
// needs (TVM InferBound, restricted to what our lowering needs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/expr.h"
#include "schedule/state.h"

namespace tilesearch::schedule {

/// One dimension of a region: indices [min, min + extent). `min` is an int64 expression of the
/// consumer's iterator variables at or outside the attach loop (stage-local iterator names);
/// `extent` is a constant upper bound of the region's size over all those iterations.
struct RegionDim {
  ir::Expr min;
  int64_t extent = 0;
};

/// The region of stage `producer` read by stage `consumer` (its body and the stages attached
/// inside it below `attach_iter`, transitively) during one iteration of the consumer's loop
/// `attach_iter` — i.e. the loops after it vary over their full ranges, the loops up to and
/// including it are fixed. Index expressions that are affine in the varying iterators get an exact
/// box; others fall back to the producer's whole dimension (min 0, full extent). The region is
/// clamped to the producer's shape.
/// Errors: kInvalidArgument when the consumer does not read the producer or the iterator is unknown.
absl::StatusOr<std::vector<RegionDim>> InferRegion(const State& state, int producer, int consumer,
                                                   const std::string& attach_iter);

}  // namespace tilesearch::schedule
