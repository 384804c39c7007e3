#include "ir/compute_dag.h"

#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

Tensor P(const std::string& name, std::vector<int64_t> shape,
         ScalarType t = ScalarType::kFloat32) {
  auto r = Placeholder(name, std::move(shape), t);
  EXPECT_THAT(r, IsOk());
  return *r;
}

// C[i, j] = sum_k A[i, k] * B[k, j]
Tensor Matmul(const std::string& name, const Tensor& a, const Tensor& b,
              const std::vector<std::string>& axis_names = {"i", "j"},
              const std::string& k_name = "k") {
  int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  ComputeOptions options;
  options.axis_names = axis_names;
  options.reduce_axis_names = {k_name};
  auto r = Reduce(
      name, {m, n}, ReduceKind::kSum, {k},
      [&](const std::vector<Expr>& ax, const std::vector<Expr>& r) {
        return a(ax[0], r[0]) * b(r[0], ax[1]);
      },
      Expr(), options);
  EXPECT_THAT(r, IsOk());
  return *r;
}

// D[i, j] = C[i, j] + bias[j]
Tensor BiasAdd(const std::string& name, const Tensor& c, const Tensor& bias) {
  auto r = Compute(name, c.shape(), [&](const std::vector<Expr>& ax) {
    return c(ax[0], ax[1]) + bias(ax[1]);
  });
  EXPECT_THAT(r, IsOk());
  return *r;
}

TEST(ComputeDAGTest, MatmulBiasStagesInCanonicalOrder) {
  Tensor a = P("A", {64, 32});
  Tensor b = P("B", {32, 48});
  Tensor bias = P("bias", {48});
  Tensor c = Matmul("C", a, b);
  Tensor d = BiasAdd("D", c, bias);
  auto dag = ComputeDAG::Create({d});
  ASSERT_THAT(dag, IsOk());
  ASSERT_EQ(dag->num_stages(), 5);
  std::vector<std::string> names;
  for (const Tensor& t : dag->stages()) names.push_back(t.name());
  EXPECT_THAT(names, ElementsAre("A", "B", "C", "bias", "D"));
  EXPECT_THAT(dag->input_ids(), ElementsAre(0, 1, 3));
  EXPECT_THAT(dag->output_ids(), ElementsAre(4));
  EXPECT_EQ(dag->Kind(0), StageKind::kPlaceholder);
  EXPECT_EQ(dag->Kind(2), StageKind::kReduction);
  EXPECT_EQ(dag->Kind(4), StageKind::kInjective);
  EXPECT_THAT(dag->Consumers(2), ElementsAre(4));
  EXPECT_THAT(dag->Producers(4), ElementsAre(2, 3));
  EXPECT_TRUE(dag->NeedsMultiLevelTiling(2));
  EXPECT_FALSE(dag->NeedsMultiLevelTiling(4));
  EXPECT_EQ(dag->StageFlops(2), 2.0 * 64 * 48 * 32);
  EXPECT_EQ(dag->StageFlops(4), 64.0 * 48);
  EXPECT_EQ(dag->InputBytes(), (64 * 32 + 32 * 48 + 48) * 4);
  EXPECT_EQ(dag->OutputBytes(), 64 * 48 * 4);
  EXPECT_EQ(dag->WorkloadKey().size(), 16u);
}

}  // namespace
}  // namespace tilesearch::ir
