// Workloads shared by the schedule-space tests (sketch, annotation, mutation): small shapes of the
// library's operators, so that lowering and interpreting every sampled program stays fast.
#pragma once

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/ops/conv.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/fused.h"
#include "ir/ops/layout.h"
#include "ir/ops/linear.h"
#include "ir/ops/norm.h"
#include "ir/ops/pool.h"
#include "ir/ops/reduce.h"

namespace tilesearch::search::testing {

struct Workload {
  std::string name;
  ir::ComputeDAG dag;
};

inline ir::ComputeDAG MustBuild(absl::StatusOr<ir::ComputeDAG> dag) {
  EXPECT_TRUE(dag.ok()) << dag.status();
  return *std::move(dag);
}

/// One small instance of (nearly) every kind of library operator.
inline std::vector<Workload> LibraryWorkloads() {
  ir::Conv2dParams pad1;
  pad1.padding = {1, 1};
  ir::Conv2dParams strided;
  strided.stride = {2, 2};
  strided.padding = {1, 1};
  ir::Pool2dParams pool;
  pool.kernel = {3, 3};
  pool.stride = std::array<int64_t, 2>{2, 2};
  return {
      {"matmul", MustBuild(ir::MatmulDAG({16, 12}, {12, 20}))},
      {"batch_matmul", MustBuild(ir::BatchMatmulDAG({2, 8, 6}, {2, 6, 10}))},
      {"dense_bias_relu", MustBuild(ir::DenseBiasReluDAG({8, 12}, {16, 12}, {16}))},
      {"matmul_scale_residual", MustBuild(ir::MatmulScaleResidualDAG(
                                    {8, 6}, {6, 12}, {8, 12}, ir::ScalarType::kFloat32, 0.5))},
      {"gemv", MustBuild(ir::GemvDAG({12, 40}, {40}))},
      {"conv2d_padded", MustBuild(ir::Conv2dNchwPaddedDAG({1, 4, 6, 6}, {8, 4, 3, 3},
                                                          ir::ScalarType::kFloat32, pad1))},
      {"conv2d_strided", MustBuild(ir::Conv2dNchwDAG({1, 2, 6, 6}, {4, 2, 3, 3},
                                                     ir::ScalarType::kFloat32, strided))},
      {"softmax", MustBuild(ir::SoftmaxDAG({4, 64}))},
      {"layernorm", MustBuild(ir::LayerNormDAG({4, 48}))},
      {"reduce_sum", MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {4, 50, 3}, {1}))},
      {"relu", MustBuild(ir::UnaryDAG(ir::UnaryOp::kRelu, {5, 7}))},
      {"add_broadcast", MustBuild(ir::BinaryDAG(ir::BinaryOp::kAdd, {4, 1}, {1, 6}))},
      {"transpose", MustBuild(ir::TransposeDAG({3, 4, 5}, {2, 0, 1}))},
      {"max_pool2d", MustBuild(ir::MaxPool2dDAG({1, 2, 7, 7}, ir::ScalarType::kFloat32, pool))},
  };
}

}  // namespace tilesearch::search::testing
