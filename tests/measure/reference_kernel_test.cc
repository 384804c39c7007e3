// The GPU reference kernel (measure/reference.h) as PTX: every float32 sum compensated, no fused
// multiply-add (the compensation needs each operation rounded on its own), accepted by ptxas.
#include <string>

#include "base/status_matchers.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "measure/reference.h"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::measure {
namespace {

using ::tilesearch::codegen::testing::Count;
using ::tilesearch::codegen::testing::ExpectPtxasAccepts;
using ::tilesearch::testing::Ok;

using Axes = std::vector<ir::Expr>;

TEST(ReferenceKernelTest, MatmulReferenceSumsAreCompensatedWithoutFma) {
  ir::Tensor a = Ok(ir::Placeholder("A", {64, 4096}));
  ir::Tensor b = Ok(ir::Placeholder("B", {4096, 32}));
  ir::Tensor c = Ok(
      ir::Reduce("C", {64, 32}, ir::ReduceKind::kSum, {4096},
                 [&](const Axes& ax, const Axes& r) { return a(ax[0], r[0]) * b(r[0], ax[1]); }));
  const ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({c}));
  const codegen::GpuModule module = Ok(BuildGpuReference(dag, Target::H200()));
  EXPECT_EQ(Count(module.ptx, "fma."), 0) << module.ptx;
  // Per term: the product, y = t − c, s = X + y, (s − X) and (s − X) − y.
  EXPECT_GE(Count(module.ptx, "mul.rn.f32"), 1) << module.ptx;
  EXPECT_GE(Count(module.ptx, "sub.rn.f32"), 3) << module.ptx;
  EXPECT_GE(Count(module.ptx, "add.rn.f32"), 1) << module.ptx;
  ExpectPtxasAccepts(module.ptx, "reference_matmul");
}

}  // namespace
}  // namespace tilesearch::measure
