// Measured sketch-family shares (see sketch_family.h).
#include "search/sketch_family.h"

#include <algorithm>
#include <cmath>

#include "search/tensor_core_space.h"

namespace tilesearch::search {

FamilyBests BestPerFamily(const std::vector<MeasureRecord>& records,
                          const std::string& workload_key) {
  FamilyBests out;
  for (const MeasureRecord& r : records) {
    if (r.workload_key != workload_key || !r.valid()) continue;
    double& best = HasTensorCoreStep(r.steps) ? out.tensor_core_ms : out.simt_ms;
    best = std::min(best, r.median_ms());
  }
  return out;
}

double TensorCoreShareFor(const FamilyBests& bests, double base, double dominance, double floor) {
  if (!(dominance >= 1) || !std::isfinite(bests.tensor_core_ms) || !std::isfinite(bests.simt_ms)) {
    return base;
  }
  if (bests.tensor_core_ms >= dominance * bests.simt_ms) return floor;
  if (bests.simt_ms >= dominance * bests.tensor_core_ms) return 1 - floor;
  return base;
}

}  // namespace tilesearch::search
