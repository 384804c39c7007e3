#include "search/timing_parts.h"

#include <utility>

#include "base/status.h"
#include "runtime/timing.h"

namespace tilesearch::search {

std::vector<size_t> PassOrder(size_t n, int pass) {
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = pass % 2 == 0 ? k : n - 1 - k;
  return order;
}

measure::MeasureResult JoinParts(std::vector<measure::MeasureResult> parts, double soak_ms) {
  CHECK(!parts.empty()) << "JoinParts of no parts";
  for (measure::MeasureResult& part : parts) {
    if (!part.ok()) return std::move(part);
  }
  measure::MeasureResult joined = std::move(parts.front());
  std::vector<double> samples_ms = std::move(joined.timing.samples_ms);
  for (size_t k = 1; k < parts.size(); ++k) {
    const measure::MeasureResult& part = parts[k];
    joined.costs_s.insert(joined.costs_s.end(), part.costs_s.begin(), part.costs_s.end());
    samples_ms.insert(samples_ms.end(), part.timing.samples_ms.begin(),
                      part.timing.samples_ms.end());
    joined.load_ms += part.load_ms;
    joined.check_ms += part.check_ms;
    joined.run_wall_ms += part.run_wall_ms;
    joined.screened = joined.screened || part.screened;
  }
  // (A runner's timed result has its samples; the costs are the same runs in seconds.)
  if (!samples_ms.empty()) joined.timing = runtime::Summarize(std::move(samples_ms));
  joined.timing.soak_ms = soak_ms;
  return joined;
}

}  // namespace tilesearch::search
