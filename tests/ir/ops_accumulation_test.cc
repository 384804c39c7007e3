// float16 / bfloat16 reductions accumulate in float32 (PyTorch's acc_type): long sums of values
// that a float16 accumulator could not hold exactly (4096 ones: an fp16 running sum sticks at 2048)
// must match float64 references computed here by direct loops.
#include <cmath>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/ops/conv.h"
#include "ir/ops/linear.h"
#include "ir/ops/norm.h"
#include "ir/ops/pool.h"
#include "ir/ops/reduce.h"
#include "ir/reference.h"

namespace tilesearch::ir {
namespace {

constexpr int64_t kN = 4096;

HostBuffer Filled(ScalarType t, std::vector<int64_t> shape, double value) {
  HostBuffer b = HostBuffer::Zeros(t, std::move(shape));
  for (double& v : b.data) v = RoundToType(value, t);
  return b;
}

// Runs the DAG's reference (naive lowering + interpreter, native precision) and returns the
// single output's buffer.
HostBuffer RunOutput(const ComputeDAG& dag, const BufferMap& inputs) {
  absl::StatusOr<BufferMap> out = RunReference(dag, inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return HostBuffer();
  const Tensor& y = dag.stage(dag.output_ids().at(0));
  EXPECT_EQ(y.dtype(), inputs.begin()->second.dtype) << "output keeps the requested dtype";
  return out->at(y.name());
}

class HalfTypes : public ::testing::TestWithParam<ScalarType> {};

TEST_P(HalfTypes, SumOf4096OnesIs4096) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dag = ReduceDAG(ReduceOp::kSum, {kN}, {}, false, t);
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer x = Filled(t, {kN}, 1.0);
  double expected = 0;  // float64 reference
  for (double v : x.data) expected += v;
  HostBuffer y = RunOutput(*dag, {{"X", x}});
  ASSERT_EQ(y.data.size(), 1u);
  EXPECT_EQ(y.data[0], RoundToType(expected, t));
  EXPECT_EQ(y.data[0], 4096.0);
}

TEST_P(HalfTypes, MeanOf4096OnesIsOne) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dag = ReduceDAG(ReduceOp::kMean, {kN}, {}, false, t);
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer y = RunOutput(*dag, {{"X", Filled(t, {kN}, 1.0)}});
  ASSERT_EQ(y.data.size(), 1u);
  EXPECT_EQ(y.data[0], 1.0);
}

TEST_P(HalfTypes, MatmulInnerProductOf4096OnesIs4096) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dag = MatmulDAG({1, kN}, {kN, 1}, t);
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer a = Filled(t, {1, kN}, 1.0);
  HostBuffer b = Filled(t, {kN, 1}, 1.0);
  double expected = 0;
  for (int64_t k = 0; k < kN; ++k) expected += a.data[k] * b.data[k];
  HostBuffer c = RunOutput(*dag, {{"A", a}, {"B", b}});
  ASSERT_EQ(c.data.size(), 1u);
  EXPECT_EQ(c.data[0], RoundToType(expected, t));
  EXPECT_EQ(c.data[0], 4096.0);
}

TEST_P(HalfTypes, DenseAndGemvAccumulateInFloat32) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dense = DenseDAG({1, kN}, {1, kN}, std::nullopt, t, Activation::kNone);
  ASSERT_TRUE(dense.ok()) << dense.status();
  HostBuffer y =
      RunOutput(*dense, {{"X", Filled(t, {1, kN}, 1.0)}, {"W", Filled(t, {1, kN}, 1.0)}});
  ASSERT_EQ(y.data.size(), 1u);
  EXPECT_EQ(y.data[0], 4096.0);
  absl::StatusOr<ComputeDAG> gemv = GemvDAG({1, kN}, {kN}, t);
  ASSERT_TRUE(gemv.ok()) << gemv.status();
  HostBuffer z = RunOutput(*gemv, {{"A", Filled(t, {1, kN}, 1.0)}, {"x", Filled(t, {kN}, 1.0)}});
  ASSERT_EQ(z.data.size(), 1u);
  EXPECT_EQ(z.data[0], 4096.0);
}

TEST_P(HalfTypes, Conv1dOver4096ChannelsOfOnesIs4096) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dag = Conv1dDAG({1, kN, 1}, {1, kN, 1}, t, Conv1dParams{});
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer y =
      RunOutput(*dag, {{"X", Filled(t, {1, kN, 1}, 1.0)}, {"W", Filled(t, {1, kN, 1}, 1.0)}});
  ASSERT_EQ(y.data.size(), 1u);
  EXPECT_EQ(y.data[0], 4096.0);
}

TEST_P(HalfTypes, SoftmaxOf4096ZerosIsOneOver4096) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dag = SoftmaxDAG({kN}, -1, t);
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer y = RunOutput(*dag, {{"X", Filled(t, {kN}, 0.0)}});
  ASSERT_EQ(y.data.size(), static_cast<size_t>(kN));
  // float64 reference: exp(0) / sum of 4096 exp(0).
  double sum = 0;
  for (int64_t i = 0; i < kN; ++i) sum += std::exp(0.0);
  const double expected = RoundToType(std::exp(0.0) / sum, t);
  for (int64_t i = 0; i < kN; i += 511) EXPECT_EQ(y.data[i], expected) << "element " << i;
}

TEST_P(HalfTypes, LogSoftmaxOf4096ZerosIsMinusLog4096) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dag = LogSoftmaxDAG({kN}, -1, t);
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer y = RunOutput(*dag, {{"X", Filled(t, {kN}, 0.0)}});
  ASSERT_EQ(y.data.size(), static_cast<size_t>(kN));
  const double expected = -std::log(static_cast<double>(kN));
  EXPECT_NEAR(y.data[0], expected, 0.01 * std::abs(expected));
  EXPECT_NEAR(y.data[kN - 1], expected, 0.01 * std::abs(expected));
}

TEST_P(HalfTypes, LayerNormOfAConstantIsNearZero) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dag = LayerNormDAG({kN}, 1, 1e-5, t);
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer x = Filled(t, {kN}, 0.3);
  // float64 reference: x − mean(x) is exactly 0 for a constant x, so y = beta = 0.
  double mean = 0;
  for (double v : x.data) mean += v / kN;
  HostBuffer y =
      RunOutput(*dag, {{"X", x}, {"gamma", Filled(t, {kN}, 1.0)}, {"beta", Filled(t, {kN}, 0.0)}});
  ASSERT_EQ(y.data.size(), static_cast<size_t>(kN));
  for (int64_t i = 0; i < kN; i += 257) {
    const double expected = (x.data[i] - mean) / std::sqrt(0.0 + 1e-5);
    EXPECT_NEAR(y.data[i], expected, 0.05) << "element " << i;
  }
}

TEST_P(HalfTypes, RmsNormOfOnesIsOne) {
  const ScalarType t = GetParam();
  absl::StatusOr<ComputeDAG> dag = RmsNormDAG({kN}, 1, 1e-6, t);
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer y = RunOutput(*dag, {{"X", Filled(t, {kN}, 1.0)}, {"gamma", Filled(t, {kN}, 1.0)}});
  ASSERT_EQ(y.data.size(), static_cast<size_t>(kN));
  const double expected = 1.0 / std::sqrt(1.0 + 1e-6);  // float64 reference
  EXPECT_NEAR(y.data[0], expected, 0.01);
  EXPECT_NEAR(y.data[kN - 1], expected, 0.01);
}

TEST_P(HalfTypes, AvgPoolOfOnesIsOne) {
  const ScalarType t = GetParam();
  Pool2dParams p;
  p.kernel = {64, 64};  // 4096 terms per window
  absl::StatusOr<ComputeDAG> dag = AvgPool2dDAG({1, 1, 64, 64}, t, p);
  ASSERT_TRUE(dag.ok()) << dag.status();
  HostBuffer y = RunOutput(*dag, {{"X", Filled(t, {1, 1, 64, 64}, 1.0)}});
  ASSERT_EQ(y.data.size(), 1u);
  EXPECT_EQ(y.data[0], 1.0);
}

INSTANTIATE_TEST_SUITE_P(Float16AndBFloat16, HalfTypes,
                         ::testing::Values(ScalarType::kFloat16, ScalarType::kBFloat16),
                         [](const ::testing::TestParamInfo<ScalarType>& info) {
                           return std::string(TypeName(info.param));
                         });

TEST(AccumulationStages, Float16MatmulHasAFloat32ReductionAndACastStageWith2MNKFlops) {
  absl::StatusOr<ComputeDAG> dag = MatmulDAG({8, 16}, {16, 4}, ScalarType::kFloat16);
  ASSERT_TRUE(dag.ok()) << dag.status();
  // A, B, the float32 reduction and the cast to float16.
  ASSERT_EQ(dag->num_stages(), 4);
  const Tensor& out = dag->stage(dag->output_ids().at(0));
  EXPECT_EQ(out.name(), "C");
  EXPECT_EQ(out.dtype(), ScalarType::kFloat16);
  bool found_acc = false;
  for (int id = 0; id < dag->num_stages(); ++id) {
    const Tensor& s = dag->stage(id);
    if (s->reduce != ReduceKind::kNone) {
      found_acc = true;
      EXPECT_EQ(s.name(), "C_acc");
      EXPECT_EQ(s.dtype(), ScalarType::kFloat32);
    }
  }
  EXPECT_TRUE(found_acc);
  EXPECT_EQ(dag->Flops(), 2.0 * 8 * 16 * 4);
}

TEST(AccumulationStages, Float32MatmulIsOneReductionStage) {
  absl::StatusOr<ComputeDAG> dag = MatmulDAG({8, 16}, {16, 4}, ScalarType::kFloat32);
  ASSERT_TRUE(dag.ok()) << dag.status();
  EXPECT_EQ(dag->num_stages(), 3);
  EXPECT_EQ(dag->Flops(), 2.0 * 8 * 16 * 4);
}

}  // namespace
}  // namespace tilesearch::ir
