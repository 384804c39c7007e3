// Checks shared by the operator tests: run an operator's DAG through the reference path (naive
// lowering + interpreter) and through float64 point evaluation, and compare both with values
// computed independently by the test (naive loops or Eigen, in double).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/reference.h"

namespace tilesearch::ir::ops_test {

/// |actual − expected| ≤ 1e-5·max(1, |expected|).
inline bool Close(double actual, double expected) {
  return std::abs(actual - expected) <= 1e-5 * std::max(1.0, std::abs(expected));
}

/// Row-major multi-index of `offset` in `shape`.
inline std::vector<int64_t> Unravel(int64_t offset, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = offset % shape[d];
    offset /= shape[d];
  }
  return index;
}

/// The DAG's single output: its stage id.
inline int OutputId(const ComputeDAG& dag) { return dag.output_ids().at(0); }

/// Runs the reference on `inputs` and expects the output to have `shape` and every element to be
/// Close to `expected` (row-major). Reports at most a few mismatches.
inline void ExpectReferenceMatches(const ComputeDAG& dag, const BufferMap& inputs,
                                   const std::vector<int64_t>& shape,
                                   const std::vector<double>& expected) {
  const Tensor& out = dag.stage(OutputId(dag));
  absl::StatusOr<BufferMap> result = RunReference(dag, inputs);
  ASSERT_TRUE(result.ok()) << result.status();
  auto it = result->find(out.name());
  ASSERT_NE(it, result->end()) << "no output buffer '" << out.name() << "'";
  const HostBuffer& y = it->second;
  ASSERT_EQ(y.shape, shape);
  ASSERT_EQ(y.data.size(), expected.size());
  int mismatches = 0;
  for (size_t i = 0; i < expected.size() && mismatches < 5; ++i) {
    if (!Close(y.data[i], expected[i])) {
      ++mismatches;
      ADD_FAILURE() << "element " << i << " (index "
                    << ::testing::PrintToString(Unravel(static_cast<int64_t>(i), shape))
                    << "): reference " << y.data[i] << ", expected " << expected[i];
    }
  }
}

/// Point evaluation of the output at `samples` random indices (seeded), plus the first and the
/// last element, against `expected`.
inline void ExpectPointsMatch(const ComputeDAG& dag, const BufferMap& inputs,
                              const std::vector<int64_t>& shape,
                              const std::vector<double>& expected, int samples = 8,
                              uint64_t seed = 7) {
  const int64_t n = static_cast<int64_t>(expected.size());
  ASSERT_GT(n, 0);
  std::vector<int64_t> offsets = {0, n - 1};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  for (int s = 0; s < samples; ++s) offsets.push_back(pick(rng));
  for (int64_t offset : offsets) {
    std::vector<int64_t> index = Unravel(offset, shape);
    absl::StatusOr<double> value = EvaluatePoint(dag, OutputId(dag), index, inputs);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_TRUE(Close(*value, expected[offset]))
        << "index " << ::testing::PrintToString(index) << ": point " << *value << ", expected "
        << expected[offset];
  }
}

/// Both checks on random inputs (seeded); returns the inputs for further checks.
inline BufferMap CheckOperator(const ComputeDAG& dag, const std::vector<int64_t>& shape,
                               const std::function<std::vector<double>(const BufferMap&)>& ref,
                               uint64_t seed = 1) {
  BufferMap inputs = MakeRandomInputs(dag, seed);
  std::vector<double> expected = ref(inputs);
  ExpectReferenceMatches(dag, inputs, shape, expected);
  ExpectPointsMatch(dag, inputs, shape, expected);
  return inputs;
}

}  // namespace tilesearch::ir::ops_test
