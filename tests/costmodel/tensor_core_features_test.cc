// Features of tensor-core kernels: a warp mma (mma.sync) and a warpgroup mma (wgmma) are each
// featurized as the per-thread multiply-accumulate they amount to, so their rows count the
// problem's multiplies. Checked against M·N·K of the matmul (an independent count), for both
// instructions and a ring deep enough that the wgmma loop is peeled into two statements. A TMA
// fill (the step's tma) moves the operand tiles' bytes from global memory as the per-thread
// cp.async fill of the same tiling does: (block_m + block_n) · K · 2 bytes per block.
#include <cmath>
#include <string>
#include <vector>

#include "costmodel/features.h"
#include "gtest/gtest.h"
#include "ir/ops/registry.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"

namespace tilesearch::costmodel {
namespace {

struct Config {
  bool wgmma;
  int pipeline;
};

class TensorCoreFeatures : public ::testing::TestWithParam<Config> {};

TEST_P(TensorCoreFeatures, MmaRowsCountTheProblemsMultiplies) {
  const int64_t m = 512, n = 256, k = 384;
  ir::OpArgs args;
  args.shapes = {{m, k}, {k, n}};
  args.dtype = ir::ScalarType::kBFloat16;
  absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp("matmul", args);
  ASSERT_TRUE(dag.ok()) << dag.status();
  schedule::State s = schedule::State::Initial(*dag);
  schedule::TensorCoreStep t;
  for (int i = 0; i < s.num_stages(); ++i) {
    if (s.stage(i).op->reduce == ir::ReduceKind::kSum) t.stage_id = i;
  }
  t.kind = "bf16";
  t.warpgroup = GetParam().wgmma;
  t.block_m = 128;
  t.block_n = 128;
  t.block_k = 64;
  t.warp_m = 64;
  t.warp_n = t.warpgroup ? 128 : 64;
  t.pipeline = GetParam().pipeline;
  t.pad = t.warpgroup ? 0 : 8;
  absl::StatusOr<schedule::State> st = schedule::ApplyStep(s, t);
  ASSERT_TRUE(st.ok()) << st.status();
  const Target target = Target::H200();
  absl::StatusOr<schedule::LoweredKernel> kernel = schedule::Lower(*dag, *st, target);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  FeatureOptions raw;
  raw.log_scale = false;
  absl::StatusOr<StoreFeatures> rows = ExtractFeatures(kernel->nest, target, raw);
  ASSERT_TRUE(rows.ok()) << rows.status();
  double float_mul = 0;
  for (const std::vector<float>& row : *rows) {
    for (float v : row) ASSERT_TRUE(std::isfinite(v));
    float_mul += row[kComputationOffset + 1];
  }
  // Only the mma rows multiply floats here (the fills copy, the epilogue casts).
  EXPECT_NEAR(float_mul, static_cast<double>(m * n * k), 1e-3 * m * n * k);
}

// Bytes moved from and to global memory per block (launch feature 169), summed over the rows of
// the wgmma kernel 128x128x64 with `tma` or cp.async fills.
double GlobalBytesPerBlock(bool tma) {
  const int64_t m = 512, n = 256, k = 384;
  ir::OpArgs args;
  args.shapes = {{m, k}, {k, n}};
  args.dtype = ir::ScalarType::kBFloat16;
  absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp("matmul", args);
  EXPECT_TRUE(dag.ok()) << dag.status();
  schedule::State s = schedule::State::Initial(*dag);
  schedule::TensorCoreStep t;
  for (int i = 0; i < s.num_stages(); ++i) {
    if (s.stage(i).op->reduce == ir::ReduceKind::kSum) t.stage_id = i;
  }
  t.kind = "bf16";
  t.warpgroup = true;
  t.tma = tma;
  t.block_m = t.block_n = 128;
  t.block_k = 64;
  t.warp_m = 64;
  t.warp_n = 128;
  t.pipeline = 3;
  t.pad = 0;
  t.epilogue = 1;
  absl::StatusOr<schedule::State> st = schedule::ApplyStep(s, t);
  EXPECT_TRUE(st.ok()) << st.status();
  const Target target = Target::H200();
  absl::StatusOr<schedule::LoweredKernel> kernel = schedule::Lower(*dag, *st, target);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  FeatureOptions raw;
  raw.log_scale = false;
  absl::StatusOr<StoreFeatures> rows = ExtractFeatures(kernel->nest, target, raw);
  EXPECT_TRUE(rows.ok()) << rows.status();
  double bytes = 0;
  for (const std::vector<float>& row : *rows) bytes += row[kLaunchOffset + 10];
  return bytes;
}

TEST(TensorCoreFeatures, TmaFillsMoveTheTilesBytesAsCpAsyncFills) {
  const double tma = GlobalBytesPerBlock(true);
  const double copies = GlobalBytesPerBlock(false);
  // The operand tiles over the whole reduction: (128 + 128) rows of 384 bfloat16.
  const double tiles = (128 + 128) * 384 * 2.0;
  EXPECT_GE(tma, tiles);
  EXPECT_NEAR(tma / copies, 1.0, 0.1) << tma << " vs " << copies;
}

INSTANTIATE_TEST_SUITE_P(Instructions, TensorCoreFeatures,
                         ::testing::Values(Config{false, 3}, Config{true, 2}, Config{true, 4}));

}  // namespace
}  // namespace tilesearch::costmodel
