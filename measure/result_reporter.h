// Delivers a runner's results to Runner::RunStreaming's callback in increasing index order as
// they become final (build failures at once, measured candidates as their workers finish them).
#pragma once

#include <cstddef>
#include <vector>

#include "measure/measure.h"
#include "measure/runner.h"

namespace tilesearch::measure {

/// Reports results[i] through `on_result` once it and every result before it are final.
class ResultReporter {
 public:
  /// `results` must outlive the reporter and keep its size; `on_result` may be empty (no reports).
  ResultReporter(const std::vector<MeasureResult>* results, Runner::ResultCallback on_result)
      : results_(results), on_result_(std::move(on_result)), final_(results->size(), false) {}

  /// results[i] is final: reports it and the final results after it, in order.
  void Final(size_t i) {
    final_[i] = true;
    for (; next_ < final_.size() && final_[next_]; ++next_) {
      if (on_result_) on_result_(next_, (*results_)[next_]);
    }
  }

 private:
  const std::vector<MeasureResult>* results_;
  Runner::ResultCallback on_result_;
  std::vector<bool> final_;
  size_t next_ = 0;
};

}  // namespace tilesearch::measure
