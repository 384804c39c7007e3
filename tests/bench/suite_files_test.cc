// The committed suites (bench/suites/level1.json, level2.json) and the planted-cheat suite
// (bench/harness/cheats/suite.json): they parse, every problem builds with this build's operator
// library, the sizes meet the suites' rules (>= 0.5 ms of estimated eager time unless tagged
// "small", or "kernelbench_shape" for a shape KernelBench fixes: then >= 0.05 ms), and a sample of
// output shapes and FLOP counts match hand-computed values.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/suite.h"

namespace tilesearch::bench {
namespace {

Suite LoadSuite(const std::string& path) {
  absl::StatusOr<Suite> s = Suite::Load(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Suite{};
}

// The brief's estimate of PyTorch eager on an H200: 50 TFLOP/s fp32, 4 TB/s.
double EstimatedEagerMs(const ir::ComputeDAG& dag) {
  return std::max(dag.Flops() / 50e12, MinimumBytes(dag) / 4e12) * 1e3;
}

std::vector<int64_t> OutputShape(const ir::ComputeDAG& dag) {
  return dag.stage(dag.output_ids()[0]).shape();
}

TEST(SuiteFilesTest, Level1HasEnoughProblemsAndEveryOneBuilds) {
  const Suite s = LoadSuite(std::string(TS_BENCH_SUITES_DIR) + "/level1.json");
  EXPECT_EQ(s.name, "level1");
  int large = 0, small = 0;
  std::set<std::string> ops;
  for (const Problem& p : s.problems) {
    SCOPED_TRACE(p.name);
    EXPECT_FALSE(p.is_fused());
    absl::StatusOr<ir::ComputeDAG> dag = BuildProblem(p);
    ASSERT_TRUE(dag.ok()) << dag.status();
    EXPECT_EQ(dag->input_ids().size(), p.inputs.size());
    const double ms = EstimatedEagerMs(*dag);
    if (p.is_small()) {
      ++small;
      EXPECT_LT(ms, 0.05) << "a 'small' problem should be latency-bound";
    } else if (std::find(p.tags.begin(), p.tags.end(), "kernelbench_shape") != p.tags.end()) {
      // A shape KernelBench fixes (not sized by this rule): at least not latency-bound.
      EXPECT_GE(ms, 0.05) << "a KernelBench shape should not be latency-bound";
    } else {
      ++large;
      EXPECT_GE(ms, 0.5) << "estimated eager time below 0.5 ms";
    }
    ops.insert(p.workload.op);
  }
  EXPECT_GE(large, 24);
  EXPECT_GE(small, 3);
  for (const char* op : {"matmul", "batch_matmul", "gemv", "dense", "conv2d_nchw",
                         "depthwise_conv2d_nchw", "reduce_sum", "softmax", "log_softmax",
                         "layernorm", "rmsnorm", "relu", "gelu", "max_pool2d", "avg_pool2d"}) {
    EXPECT_TRUE(ops.count(op)) << "level 1 lacks " << op;
  }
}

TEST(SuiteFilesTest, Level1ShapesAndFlopsMatchHandComputedValues) {
  const Suite s = LoadSuite(std::string(TS_BENCH_SUITES_DIR) + "/level1.json");
  struct Expect {
    std::vector<int64_t> shape;
    double flops;  // < 0: not checked
  };
  const std::map<std::string, Expect> expected = {
      {"matmul_square_4096", {{4096, 4096}, 2.0 * 4096 * 4096 * 4096}},
      {"matmul_irregular", {{4001, 2999}, 2.0 * 4001 * 2999 * 3007}},
      {"matmul_transpose_b", {{4096, 4096}, 2.0 * 4096 * 4096 * 2048}},
      {"batch_matmul_qk", {{192, 1024, 1024}, 2.0 * 192 * 1024 * 1024 * 64}},
      {"gemv_8192x65536", {{8192}, 2.0 * 8192 * 65536}},
      // (224 + 2·3 − 7) / 2 + 1 = 112.
      {"conv2d_7x7_stride2_stem", {{128, 64, 112, 112}, 2.0 * 128 * 64 * 112 * 112 * 3 * 49}},
      {"conv2d_3x3_resnet", {{32, 128, 56, 56}, 2.0 * 32 * 128 * 56 * 56 * 128 * 9}},
      {"depthwise_conv2d_3x3", {{64, 384, 112, 112}, 2.0 * 64 * 384 * 112 * 112 * 9}},
      // (112 + 2 − 3) / 2 + 1 = 56.
      {"max_pool2d_3x3_stride2", {{256, 128, 56, 56}, -1}},
      {"avg_pool2d_2x2", {{128, 256, 56, 56}, -1}},
      {"reduce_sum_outer", {{32768}, -1}},
      {"reduce_mean_middle", {{128, 1024}, -1}},
      {"transpose_2d", {{16384, 16384}, -1}},
      {"layernorm_16x64x256x256", {{16, 64, 256, 256}, -1}},
      {"reduce_sum_dim1_keepdim_8gb", {{128, 1, 4095}, -1}},
      {"gemv_2pow31", {{32768}, 2.0 * 32768 * 65536}},
  };
  for (const auto& [name, e] : expected) {
    SCOPED_TRACE(name);
    const Problem* p = s.Find(name);
    ASSERT_NE(p, nullptr);
    absl::StatusOr<ir::ComputeDAG> dag = BuildProblem(*p);
    ASSERT_TRUE(dag.ok()) << dag.status();
    EXPECT_EQ(OutputShape(*dag), e.shape);
    // The library may count a multiply-add as 2 FLOPs plus epilogue work: within 1%.
    if (e.flops > 0) {
      EXPECT_NEAR(dag->Flops(), e.flops, 0.01 * e.flops);
    }
  }
}

TEST(SuiteFilesTest, Level2ProblemsBuildWithPlaceholdersInArgumentOrder) {
  const Suite s = LoadSuite(std::string(TS_BENCH_SUITES_DIR) + "/level2.json");
  EXPECT_EQ(s.name, "level2");
  EXPECT_GE(s.problems.size(), 10u);
  for (const Problem& p : s.problems) {
    SCOPED_TRACE(p.name);
    EXPECT_TRUE(p.is_fused());
    absl::StatusOr<ir::ComputeDAG> dag = BuildProblem(p);
    ASSERT_TRUE(dag.ok()) << dag.status();
    // The fused-workload form numbers placeholders in the DAG's canonical input order (kernel
    // argument order): p0, p1, ... must come out in that order.
    ASSERT_EQ(dag->input_ids().size(), p.workload.args.shapes.size());
    for (size_t i = 0; i < dag->input_ids().size(); ++i) {
      EXPECT_EQ(dag->stage(dag->input_ids()[i]).name(), absl::StrCat("p", i));
    }
    if (!p.is_small()) {
      EXPECT_GE(EstimatedEagerMs(*dag), 0.5);
    }
  }
  const Problem* attn = s.Find("attention_softmax_qk");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(OutputShape(*BuildProblem(*attn)), (std::vector<int64_t>{192, 1024, 1024}));
  const Problem* swiglu = s.Find("swiglu_gate");
  ASSERT_NE(swiglu, nullptr);
  EXPECT_EQ(OutputShape(*BuildProblem(*swiglu)), (std::vector<int64_t>{2048, 5632}));
}

TEST(SuiteFilesTest, HopperSuiteGemmsAreTheLlama3ProjectionsInBothHalfTypes) {
  const Suite s = LoadSuite(std::string(TS_BENCH_SUITES_DIR) + "/hopper.json");
  EXPECT_EQ(s.name, "hopper");
  // (M, N, K) at M = 4096 tokens: Llama-3-8B hidden 4096, MLP 14336; -70B hidden 8192, MLP 28672.
  struct Gemm {
    const char* name;
    int64_t m, n, k;
  };
  const Gemm gemms[] = {
      {"matmul_square_4096", 4096, 4096, 4096}, {"matmul_square_8192", 8192, 8192, 8192},
      {"llama3_8b_gate_up", 4096, 14336, 4096}, {"llama3_8b_down", 4096, 4096, 14336},
      {"llama3_70b_qo", 4096, 8192, 8192},      {"llama3_70b_gate_up", 4096, 28672, 8192},
      {"llama3_70b_down", 4096, 8192, 28672}};
  for (const char* suffix : {"_bf16", "_f16"}) {
    for (const Gemm& g : gemms) {
      const std::string name = absl::StrCat(g.name, suffix);
      SCOPED_TRACE(name);
      const Problem* p = s.Find(name);
      ASSERT_NE(p, nullptr);
      absl::StatusOr<ir::ComputeDAG> dag = BuildProblem(*p);
      ASSERT_TRUE(dag.ok()) << dag.status();
      EXPECT_EQ(OutputShape(*dag), (std::vector<int64_t>{g.m, g.n}));
      const double flops = 2.0 * g.m * g.n * g.k;
      EXPECT_NEAR(dag->Flops(), flops, 0.01 * flops);
      EXPECT_EQ(dag->stage(dag->input_ids()[0]).shape(), (std::vector<int64_t>{g.m, g.k}));
    }
  }
  const Problem* attn = s.Find("attention_scores_softmax_32x4096x128_bf16");
  ASSERT_NE(attn, nullptr);
  absl::StatusOr<ir::ComputeDAG> dag = BuildProblem(*attn);
  ASSERT_TRUE(dag.ok()) << dag.status();
  EXPECT_EQ(OutputShape(*dag), (std::vector<int64_t>{32, 4096, 4096}));
  EXPECT_EQ(s.problems.size(), 2 * std::size(gemms) + 1);
}

TEST(SuiteFilesTest, CheatSuiteBuildsAndEachElementwiseProblemKeepsItsShape) {
  const Suite s = LoadSuite(std::string(TS_BENCH_CHEATS_DIR) + "/suite.json");
  EXPECT_EQ(s.name, "cheats");
  for (const Problem& p : s.problems) {
    SCOPED_TRACE(p.name);
    absl::StatusOr<ir::ComputeDAG> dag = BuildProblem(p);
    ASSERT_TRUE(dag.ok()) << dag.status();
  }
  // The kernels of bench/harness/cheats/*.cu hard-code these sizes (common.cuh: ROWS, COLS,
  // LARGE_N).
  ASSERT_NE(s.Find("cheat_rowsum"), nullptr);
  EXPECT_EQ(OutputShape(*BuildProblem(*s.Find("cheat_rowsum"))), (std::vector<int64_t>{4096}));
  ASSERT_NE(s.Find("cheat_relu_large"), nullptr);
  EXPECT_EQ(OutputShape(*BuildProblem(*s.Find("cheat_relu_large"))),
            (std::vector<int64_t>{16384, 16384}));
}

}  // namespace
}  // namespace tilesearch::bench
