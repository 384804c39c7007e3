// The feature and throughput columns of a list of training samples, for the cost-model tests that
// train on synthetic programs and compare predictions with known speeds.
#pragma once

#include <vector>

#include "costmodel/cost_model.h"

namespace tilesearch::costmodel::testing {

/// Each sample's program features, in order.
inline std::vector<ProgramFeatures> FeaturesOf(const std::vector<TrainingSample>& samples) {
  std::vector<ProgramFeatures> out;
  for (const TrainingSample& s : samples) out.push_back(s.features);
  return out;
}

/// Each sample's measured throughput, in order.
inline std::vector<double> ThroughputOf(const std::vector<TrainingSample>& samples) {
  std::vector<double> out;
  for (const TrainingSample& s : samples) out.push_back(s.throughput);
  return out;
}

}  // namespace tilesearch::costmodel::testing
