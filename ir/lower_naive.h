// Naive lowering: a ComputeDAG → one loop nest where every stage is computed at root, in
// topological order, by a perfect nest over its axes (reductions: store the init, then an inner
// nest over the reduce axes accumulating with the combiner). Parameters: the DAG's placeholders
// (input_ids order), then its outputs (output_ids order); other stages are global Allocates.
// This is the unscheduled program every schedule is checked against.
#pragma once

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/stmt.h"

namespace tilesearch::ir {

/// Errors: none for DAGs built by ComputeDAG::Create (kept StatusOr for future stage kinds).
absl::StatusOr<LoopNest> LowerNaive(const ComputeDAG& dag);

}  // namespace tilesearch::ir
