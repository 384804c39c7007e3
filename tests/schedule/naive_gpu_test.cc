// The naive GPU schedule: for every operator of the library it lowers to one kernel per compute
// stage with at most threads_per_block threads along x and a grid covering the stage, and the
// lowered nest run in the interpreter's GPU thread model equals the naive program
// (ir::RunReference) on random inputs, including extents the block size does not divide. Large
// shapes (a 4096³ matmul, a 2^40-element tensor that needs grid y) lower without being run.
#include "schedule/naive_gpu.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/expr.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/linear.h"
#include "ir/ops/registry.h"
#include "ir/simplify.h"
#include "schedule/lower.h"
#include "tests/schedule/lower_test_util.h"

namespace tilesearch::schedule {
namespace {

using ::testing::HasSubstr;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One small argument set per operator, with extents most block sizes do not divide. A new
// operator must add one here (EveryOperatorHasAnExample fails otherwise).
std::map<std::string, ir::OpArgs> Examples() {
  auto args = [](std::vector<std::vector<int64_t>> shapes,
                 std::map<std::string, std::string> attrs = {}) {
    ir::OpArgs a;
    a.shapes = std::move(shapes);
    a.attrs = std::move(attrs);
    return a;
  };
  return {
      {"matmul", args({{5, 9}, {9, 7}})},
      {"batch_matmul", args({{2, 3, 5}, {2, 5, 7}})},
      {"dense", args({{3, 6}, {5, 6}})},
      {"gemv", args({{7, 9}, {9}})},
      {"conv1d", args({{1, 2, 9}, {3, 2, 3}}, {{"padding", "1"}})},
      {"conv2d_nchw", args({{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}})},
      {"conv2d_nhwc", args({{1, 6, 5, 2}, {3, 3, 2, 3}}, {{"stride", "2"}})},
      {"conv2d_nchw_padded", args({{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}})},
      {"depthwise_conv2d_nchw", args({{1, 2, 6, 5}, {2, 1, 3, 3}}, {{"padding", "1"}})},
      {"max_pool2d", args({{1, 2, 6, 5}}, {{"kernel", "2"}})},
      {"avg_pool2d", args({{1, 2, 6, 5}}, {{"kernel", "3"}, {"stride", "1"}})},
      {"conv2d_bias_relu", args({{1, 2, 6, 5}, {3, 2, 3, 3}, {3}})},
      {"dense_bias_relu", args({{3, 5}, {4, 5}, {4}})},
      {"matmul_scale_residual", args({{3, 5}, {5, 4}, {3, 4}}, {{"scale", "0.5"}})},
      {"reduce_sum", args({{3, 7}}, {{"axes", "1"}})},
      {"reduce_mean", args({{3, 7}})},  // all axes: a stage without spatial iterators
      {"reduce_max", args({{3, 7}}, {{"axes", "0"}, {"keepdim", "true"}})},
      {"reduce_min", args({{4, 3, 5}}, {{"axes", "0,2"}})},
      {"softmax", args({{3, 17}})},
      {"log_softmax", args({{5, 7}}, {{"axis", "0"}})},
      {"layernorm", args({{3, 16}, {16}, {16}})},
      {"rmsnorm", args({{3, 16}, {16}})},
      {"relu", args({{3, 37}})},
      {"leaky_relu", args({{3, 37}})},
      {"gelu", args({{3, 37}})},
      {"sigmoid", args({{3, 37}})},
      {"tanh", args({{3, 37}})},
      {"swish", args({{3, 37}})},
      {"softplus", args({{3, 37}})},
      {"elu", args({{3, 37}})},
      {"hardtanh", args({{3, 37}})},
      {"add", args({{3, 7}, {7}})},
      {"sub", args({{3, 1}, {7}})},
      {"mul", args({{3, 7}, {3, 7}})},
      {"div", args({{3, 7}, {1}})},
      {"maximum", args({{3, 7}, {3, 1}})},
      {"minimum", args({{7}, {3, 7}})},
      {"scale", args({{3, 7}}, {{"scale", "0.5"}})},
      {"transpose", args({{3, 7, 2}}, {{"perm", "2,0,1"}})},
  };
}

// Launch checks: one kernel per compute stage, in stage order; threads only along x, at most
// `threads_per_block`; the grid covers the stage's elements with no block entirely past them; a
// stage without spatial axes is one block of one thread.
void ExpectLaunchesCoverStages(const ir::ComputeDAG& dag, const LoweredKernel& k,
                               int threads_per_block) {
  std::vector<int> compute;
  for (int id = 0; id < dag.num_stages(); ++id) {
    if (!dag.stage(id)->is_placeholder) compute.push_back(id);
  }
  ASSERT_EQ(k.launches.size(), compute.size()) << k.nest;
  for (size_t n = 0; n < compute.size(); ++n) {
    const ir::Tensor& t = dag.stage(compute[n]);
    const LaunchConfig& l = k.launches[n];
    SCOPED_TRACE(t.name() + ": " + l.ToString());
    EXPECT_LE(l.block[0], threads_per_block);
    EXPECT_EQ(l.block[1], 1);
    EXPECT_EQ(l.block[2], 1);
    EXPECT_EQ(l.grid[1], 1);
    EXPECT_EQ(l.grid[2], 1);
    EXPECT_EQ(l.shared_memory_bytes, 0);
    if (t->axes.empty()) {
      EXPECT_EQ(l.grid[0], 1);
      EXPECT_EQ(l.block[0], 1);
      continue;
    }
    const int64_t elements = t.NumElements();
    EXPECT_EQ(l.block[0], std::min<int64_t>(elements, threads_per_block));
    EXPECT_GE(l.grid[0] * l.block[0], elements);
    EXPECT_LT((l.grid[0] - 1) * l.block[0], elements);
  }
}

TEST(NaiveGpu, EveryOperatorHasAnExample) {
  const std::map<std::string, ir::OpArgs> examples = Examples();
  for (const ir::OpInfo& op : ir::OpLibrary()) {
    EXPECT_TRUE(examples.count(op.name)) << "no example for operator '" << op.name << "'";
  }
}

TEST(NaiveGpu, EveryOperatorLowersToOneKernelPerStageAndMatchesTheReference) {
  const std::map<std::string, ir::OpArgs> examples = Examples();
  const Target gpu = Target::H200();
  for (const ir::OpInfo& op : ir::OpLibrary()) {
    auto ex = examples.find(op.name);
    if (ex == examples.end()) continue;  // reported above
    absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp(op.name, ex->second);
    ASSERT_THAT(dag, IsOk()) << op.name;
    for (int threads : {1, 4, 32, 256}) {
      SCOPED_TRACE(op.name + " with " + std::to_string(threads) + " threads per block");
      absl::StatusOr<State> state = NaiveGpuSchedule(*dag, gpu, threads);
      ASSERT_THAT(state, IsOk());
      for (int id = 0; id < state->num_stages(); ++id) {
        EXPECT_EQ(state->stage(id).location, ComputeLocation::kRoot) << state->ToString();
      }
      absl::StatusOr<LoweredKernel> k = Lower(*dag, *state, gpu);
      ASSERT_THAT(k, IsOk()) << state->ToString();
      ExpectLaunchesCoverStages(*dag, *k, threads);
      testing::ExpectMatchesReference(*dag, *state, gpu, /*exact=*/true, /*seed=*/threads);
    }
  }
}

TEST(NaiveGpu, NonDivisibleExtentIsGuarded) {
  // 3000 elements on 256 threads: 12 blocks, the last 72 threads of the last one idle.
  ir::ComputeDAG dag = *ir::UnaryDAG(ir::UnaryOp::kRelu, {1000, 3});
  absl::StatusOr<State> state = NaiveGpuSchedule(dag, Target::H200(), 256);
  ASSERT_THAT(state, IsOk());
  absl::StatusOr<LoweredKernel> k = Lower(dag, *state, Target::H200());
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 1u);
  EXPECT_EQ(k->launches[0].grid[0], 12);
  EXPECT_EQ(k->launches[0].block[0], 256);
  testing::ExpectMatchesReference(dag, *state, Target::H200(), /*exact=*/true, /*seed=*/3);
}

TEST(NaiveGpu, Matmul4096LowersToOneThreadPerOutput) {
  ir::ComputeDAG dag = *ir::MatmulDAG({4096, 4096}, {4096, 4096});
  absl::StatusOr<State> state = NaiveGpuSchedule(dag, Target::H200());
  ASSERT_THAT(state, IsOk());
  absl::StatusOr<LoweredKernel> k = Lower(dag, *state, Target::H200());
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 1u);
  const LaunchConfig& l = k->launches[0];
  EXPECT_EQ(l.block[0], 256) << l.ToString();
  EXPECT_EQ(l.grid[0], 4096 * 4096 / 256) << l.ToString();
  EXPECT_GE(l.grid[0] * l.block[0], int64_t{4096} * 4096);
  // The reduction stays a serial loop of 4096 inside the thread.
  const Stage& c = state->stage(dag.output_ids()[0]);
  ASSERT_EQ(c.iters.size(), 3u);
  EXPECT_EQ(c.iters[2].kind, IteratorKind::kReduce);
  EXPECT_EQ(c.iters[2].extent, 4096);
  EXPECT_EQ(c.iters[2].annotation, IteratorAnnotation::kNone);
}

TEST(NaiveGpu, StageWithoutSpatialAxesIsAOneThreadKernel) {
  // total = Σ X (rank 0), then out[i] = X[i, 0] · total: a 1×1 kernel, then a bound one.
  ir::Tensor x = *ir::Placeholder("X", {5, 3});
  absl::StatusOr<ir::Tensor> total = ir::Reduce(
      "total", {}, ir::ReduceKind::kSum, {5, 3},
      [&](const std::vector<ir::Expr>&, const std::vector<ir::Expr>& r) { return x(r[0], r[1]); });
  ASSERT_THAT(total, IsOk());
  absl::StatusOr<ir::Tensor> out = ir::Compute("out", {5}, [&](const std::vector<ir::Expr>& i) {
    return x(i[0], int64_t{0}) * (*total)(std::vector<ir::Expr>{});
  });
  ASSERT_THAT(out, IsOk());
  absl::StatusOr<ir::ComputeDAG> dag = ir::ComputeDAG::Create({*out});
  ASSERT_THAT(dag, IsOk());
  absl::StatusOr<State> state = NaiveGpuSchedule(*dag, Target::H200(), 2);
  ASSERT_THAT(state, IsOk());
  absl::StatusOr<LoweredKernel> k = Lower(*dag, *state, Target::H200());
  ASSERT_THAT(k, IsOk()) << state->ToString();
  ExpectLaunchesCoverStages(*dag, *k, 2);
  ASSERT_EQ(k->launches.size(), 2u);
  EXPECT_EQ(k->launches[1].grid[0], 3);
  EXPECT_EQ(k->launches[1].block[0], 2);
  testing::ExpectMatchesReference(*dag, *state, Target::H200(), /*exact=*/true, /*seed=*/5);
}

// Value of `e` with the iterator variables set to `values`.
int64_t EvalAt(const ir::Expr& e, const std::vector<std::pair<std::string, int64_t>>& values) {
  std::vector<std::pair<std::string, ir::Expr>> subst;
  for (const auto& [name, v] : values) subst.push_back({name, ir::IntConst(v)});
  std::optional<int64_t> c = ir::AsConstInt(ir::Simplify(ir::Substitute(e, subst)));
  EXPECT_TRUE(c.has_value()) << e;
  return c.value_or(-1);
}

TEST(NaiveGpu, MoreThanGridXBlocksUseGridY) {
  // 2^40 elements with 2 threads per block: 2^39 blocks > 2^31 − 1, so 257 rows of grid y.
  const int64_t rows = int64_t{1} << 20, cols = int64_t{1} << 20, threads = 2;
  ir::ComputeDAG dag = *ir::UnaryDAG(ir::UnaryOp::kRelu, {rows, cols});
  absl::StatusOr<State> state = NaiveGpuSchedule(dag, Target::H200(), threads);
  ASSERT_THAT(state, IsOk());
  absl::StatusOr<LoweredKernel> k = Lower(dag, *state, Target::H200());
  ASSERT_THAT(k, IsOk());
  ASSERT_EQ(k->launches.size(), 1u);
  const LaunchConfig& l = k->launches[0];
  const int64_t blocks = rows * cols / threads;
  EXPECT_EQ(l.grid[1], CeilDiv(blocks, (int64_t{1} << 31) - 1)) << l.ToString();
  EXPECT_LE(l.grid[0], (int64_t{1} << 31) - 1) << l.ToString();
  EXPECT_EQ(l.block[0], threads);
  EXPECT_GE(l.grid[1] * l.grid[0] * l.block[0], rows * cols) << l.ToString();
  // No row of grid y lies entirely past the tensor.
  EXPECT_LT((l.grid[1] - 1) * l.grid[0] * l.block[0], rows * cols) << l.ToString();

  // The iterators (y, x, t) address element ((y · grid_x + x) · threads + t) in row-major order.
  const Stage& s = state->stage(dag.output_ids()[0]);
  ASSERT_EQ(s.iters.size(), 3u);
  EXPECT_EQ(s.iters[0].annotation, IteratorAnnotation::kBlockIdxY);
  EXPECT_EQ(s.iters[1].annotation, IteratorAnnotation::kBlockIdxX);
  EXPECT_EQ(s.iters[2].annotation, IteratorAnnotation::kThreadIdxX);
  ASSERT_EQ(s.axis_values.size(), 2u);
  const int64_t gx = s.iters[1].extent;
  for (const auto& [y, x, t] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {0, 0, 0}, {0, 0, 1}, {0, gx - 1, 1}, {1, 0, 0}, {100, 12345, 1}}) {
    const std::vector<std::pair<std::string, int64_t>> at = {
        {s.iters[0].name, y}, {s.iters[1].name, x}, {s.iters[2].name, t}};
    const int64_t flat = (y * gx + x) * threads + t;
    EXPECT_EQ(EvalAt(s.axis_values[0], at), flat / cols) << y << " " << x << " " << t;
    EXPECT_EQ(EvalAt(s.axis_values[1], at), flat % cols) << y << " " << x << " " << t;
  }
}

TEST(NaiveGpu, ThreadsPerBlockOutsideTheTargetLimitIsRejected) {
  ir::ComputeDAG dag = *ir::MatmulDAG({8, 8}, {8, 8});
  EXPECT_THAT(NaiveGpuSchedule(dag, Target::H200(), 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("threads_per_block 0 is outside [1, 1024]")));
  EXPECT_THAT(NaiveGpuSchedule(dag, Target::H200(), 4096),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("threads_per_block 4096 is outside [1, 1024]")));
  EXPECT_THAT(NaiveGpuSchedule(dag, Target::H200(), 1024), IsOk());
}

}  // namespace
}  // namespace tilesearch::schedule
