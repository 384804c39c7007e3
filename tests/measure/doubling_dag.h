// The smallest workload of the measurement tests: Y[i] = X[i] * 2 over 256 float32 elements.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "base/status.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"

namespace tilesearch::measure::testing_util {

/// Y[i] = X[i] * 2, i < 256 (CHECK-fails only if the IR builders reject it).
inline ir::ComputeDAG Doubling() {
  absl::StatusOr<ir::Tensor> x = ir::Placeholder("X", {256});
  CHECK(x.ok()) << x.status();
  absl::StatusOr<ir::Tensor> y =
      ir::Compute("Y", {256}, [&](const std::vector<ir::Expr>& ax) { return (*x)(ax[0]) * 2.0; });
  CHECK(y.ok()) << y.status();
  absl::StatusOr<ir::ComputeDAG> dag = ir::ComputeDAG::Create({*y});
  CHECK(dag.ok()) << dag.status();
  return *std::move(dag);
}

}  // namespace tilesearch::measure::testing_util
