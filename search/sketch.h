// Sketch generation (Ansor, OSDI'20 §4.1; TVM v0.19 SketchPolicyNode::GenerateSketches): derives
// the high-level structures of a task's programs by applying the sketch rules (search/
// sketch_rules.h) to every stage, from the output backwards. A sketch is a schedule::State whose
// SplitSteps may have unfilled lengths (nullopt); annotation (search/annotation.h) fills them and
// adds the thread bindings, parallel / vectorize / unroll annotations.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"
#include "search/sketch_rules.h"

namespace tilesearch::search {

/// The sketches of ctx.dag() for ctx.target(), in generation order (at most
/// ctx.sketch_options().max_sketches).
/// Each sketch's steps() is its step list with unfilled split lengths; its stages show the
/// structure with every unfilled length taken as 1. Like TVM, the split before every rfactor is
/// left unfilled. Walk: a list of (partial sketch, stage id) starting at (initial state, last
/// stage); for each, the rules are tried in order; kApply forks, kApplyAndSkipRest stops the scan;
/// a sketch is complete when its stage id is < 0. Errors: kInternal when no sketch results (the
/// skip rule always applies, so this means a rule bug).
[[nodiscard]] absl::StatusOr<std::vector<schedule::State>> GenerateSketches(const TuneContext& ctx);

/// A sketch's steps with every unfilled split length set to 1 (a valid, untuned schedule).
std::vector<schedule::Step> FillUnfilledWithOnes(const std::vector<schedule::Step>& steps);

}  // namespace tilesearch::search
