// A deterministic cost model for the search tests: a program's score is the sum of every feature
// of every store, so programs that differ in loop structure score differently and the search runs
// all its generations (a RandomModel caps them at 2); a program without stores scores -infinity.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"

namespace tilesearch::search::testing {

class FeatureSumModel : public costmodel::CostModel {
 public:
  FeatureSumModel() = default;
  /// Sums only the first `entries` entries of each row (e.g. costmodel::kLaunchOffset: the
  /// features before the launch group, for a test whose precondition was set by that ranking).
  explicit FeatureSumModel(int entries) : entries_(entries) {}
  absl::Status Update(const std::vector<costmodel::TrainingSample>&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> Predict(
      const std::vector<costmodel::ProgramFeatures>& programs) override {
    std::vector<double> out;
    for (const auto& p : programs) {
      if (p.stores.empty()) {
        out.push_back(-INFINITY);
        continue;
      }
      double s = 0;
      for (const auto& row : p.stores) {
        const size_t n =
            entries_ < 0 ? row.size() : std::min(row.size(), static_cast<size_t>(entries_));
        for (size_t i = 0; i < n; ++i) s += row[i];
      }
      out.push_back(s);
    }
    return out;
  }
  absl::Status Save(const std::string&) const override { return absl::OkStatus(); }
  absl::Status Load(const std::string&) override { return absl::OkStatus(); }
  std::string Name() const override { return "feature_sum"; }

 private:
  int entries_ = -1;  // < 0: every entry
};

}  // namespace tilesearch::search::testing
