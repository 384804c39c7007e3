// Measured sketch-family shares: how many of a round's fresh states the tensor-core sketches get,
// from what the task's records say about the two families (tensor-core and SIMT). Ansor draws
// its initial population uniformly over sketches whatever was measured; on Hopper a
// half-precision matmul's best SIMT state is 10-95x slower than its best wgmma state
// (bench/NOTES.md), so a fixed share spends half the fresh states on a family that cannot win.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "search/measure_record.h"

namespace tilesearch::search {

/// Best valid median run time (ms) of each sketch family among records; +infinity for a family
/// with no valid record. A record is a tensor-core one when its steps hold a tensor_core step.
struct FamilyBests {
  double tensor_core_ms = std::numeric_limits<double>::infinity();
  double simt_ms = std::numeric_limits<double>::infinity();
};

/// FamilyBests over the valid records of `records` logged under `workload_key`.
FamilyBests BestPerFamily(const std::vector<MeasureRecord>& records,
                          const std::string& workload_key);

/// The share of fresh states drawn from tensor-core sketches: `floor` when the tensor-core best
/// is at least `dominance` times the SIMT best, 1 - `floor` when the SIMT best is at least
/// `dominance` times the tensor-core best, otherwise (and when either family has no valid
/// record, or dominance < 1 disables the rule) `base`. Expects floor in [0, 0.5] and base in
/// [0, 1].
double TensorCoreShareFor(const FamilyBests& bests, double base, double dominance, double floor);

}  // namespace tilesearch::search
