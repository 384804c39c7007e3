// Bound inference for compute_at: the region of a producer that one iteration of a consumer's loop
// needs (TVM InferBound, restricted to what our lowering needs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/expr.h"
#include "ir/stmt.h"
#include "schedule/state.h"

namespace tilesearch::schedule {

/// One dimension of a region: indices [min, min + extent). `min` is an int64 expression of the
/// consumer's iterator variables at or outside the attach loop (stage-local iterator names); when
/// the consumer is itself attached, `min` also uses the iterators of the stages it is attached in
/// (its attach chain), named QualifiedIterName(stage, iterator). `extent` is a constant upper bound
/// of the region's size over all those iterations.
struct RegionDim {
  ir::Expr min;
  int64_t extent = 0;
};

/// "<stage>/<iterator>": how InferRegion names iterators of stages other than the consumer.
std::string QualifiedIterName(const std::string& stage, const std::string& iter);

/// The scope a stage's buffer lives in: Stage::scope when it is shared or local; for a global
/// (default) stage attached by compute_at, the scope implied by the innermost thread binding around
/// its attach point (TVM DefaultStorageRank): inside a threadIdx or vthread loop local, inside only
/// blockIdx loops shared, else global.
ir::MemoryScope EffectiveScope(const State& state, int stage_id);

/// The region of stage `producer` read by stage `consumer` (its body, the bodies of inlined stages
/// it reads, and the stages attached inside it below `attach_iter`, transitively) during one
/// iteration of the consumer's loop `attach_iter` — i.e. the loops after it vary over their full
/// ranges, the loops up to and including it are fixed, except thread-bound loops that TVM's
/// InferBound relaxes for the producer's scope (if the producer were attached there): for a shared
/// producer the threadIdx and vthread loops of the consumer and its attach chain vary too
/// (cooperative fetching), for a global one also blockIdx loops.
/// Coordinates are absolute indices of the producer: an attached consumer's region-relative axis
/// values are offset by its own region's min. Index expressions that are affine in the varying
/// iterators get an exact box (the union of the boxes of all loads when their mins differ by
/// constants); div / mod / min / max of varying iterators alone (fused loops) are bounded by
/// interval arithmetic; others (e.g. a division of fixed and varying iterators together) fall
/// back to the producer's whole dimension (min 0, full extent). An extent
/// that reaches the producer's dimension becomes the whole dimension (min 0). A min may be
/// negative or min + extent exceed the dimension (non-divisible tails, padding windows): the
/// lowering guards those elements.
/// Errors: kInvalidArgument when the consumer does not read the producer or the iterator is
/// unknown.
absl::StatusOr<std::vector<RegionDim>> InferRegion(const State& state, int producer, int consumer,
                                                   const std::string& attach_iter);

}  // namespace tilesearch::schedule
