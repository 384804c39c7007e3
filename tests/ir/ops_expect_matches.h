// Shared check for operator tests: the naive program (RunReference) and float64 point evaluation
// (EvaluatePoint) both agree with an independent reference computed by the test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/reference.h"

namespace tilesearch::ir::testing_ops {

/// Row-major multi-index of element `flat` in `shape`.
inline std::vector<int64_t> Unflatten(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

/// Runs the DAG on `inputs` and checks its first output against `want` (row-major): RunReference
/// within 1e-5 relative (absolute below magnitude 1), EvaluatePoint within 1e-6 at sampled
/// elements.
inline void ExpectMatches(const ComputeDAG& dag, const BufferMap& inputs,
                          const std::vector<double>& want) {
  using ::tilesearch::testing::IsOk;
  const int id = dag.output_ids()[0];
  const Tensor& out = dag.stage(id);
  absl::StatusOr<BufferMap> got = RunReference(dag, inputs);
  ASSERT_THAT(got, IsOk());
  const HostBuffer& y = got->at(out.name());
  ASSERT_EQ(y.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(y.data[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
  const int64_t n = static_cast<int64_t>(want.size());
  for (int64_t flat : {int64_t{0}, n / 3, n / 2, n - 1, (n * 7) / 11}) {
    absl::StatusOr<double> v = EvaluatePoint(dag, id, Unflatten(flat, out.shape()), inputs);
    ASSERT_THAT(v, IsOk());
    EXPECT_NEAR(*v, want[flat], 1e-6 * std::max(1.0, std::abs(want[flat]))) << "point " << flat;
  }
}

}  // namespace tilesearch::ir::testing_ops
