// Naive lowering of ComputeDAGs: parameter order, loop structure, reduction init, intermediate
// allocations, and the values the lowered program computes (against naive C++ loops).
#include "ir/lower_naive.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"

namespace tilesearch::ir {
namespace {

using ::testing::ElementsAre;
using ::tilesearch::testing::IsOk;

using Axes = std::vector<Expr>;
constexpr ScalarType kF32 = ScalarType::kFloat32;

using ::tilesearch::testing::Ok;

ComputeOptions Names(std::vector<std::string> axes, std::vector<std::string> reduce = {}) {
  ComputeOptions o;
  o.axis_names = std::move(axes);
  o.reduce_axis_names = std::move(reduce);
  return o;
}

std::vector<std::string> ParamNames(const LoopNest& nest) {
  std::vector<std::string> names;
  for (const BufferDecl& p : nest.params) names.push_back(p.name);
  return names;
}

// Counts loops, allocations and the statements of a nest.
class Census : public StmtVisitor {
 public:
  std::vector<const ForNode*> loops;
  std::vector<const AllocateNode*> allocs;

 protected:
  void VisitFor(const ForNode* op, const Stmt& s) override {
    loops.push_back(op);
    StmtVisitor::VisitFor(op, s);
  }
  void VisitAllocate(const AllocateNode* op, const Stmt& s) override {
    allocs.push_back(op);
    StmtVisitor::VisitAllocate(op, s);
  }
};

// A[m, k], B[k, n], bias[n]; C = A·B (intermediate); D = C + bias (output).
struct MatmulBias {
  static constexpr int64_t m = 5, n = 6, k = 7;
  Tensor a = Ok(Placeholder("A", {m, k}));
  Tensor b = Ok(Placeholder("B", {k, n}));
  Tensor bias = Ok(Placeholder("bias", {n}));
  Tensor c = Ok(Reduce(
      "C", {m, n}, ReduceKind::kSum, {k},
      [this](const Axes& ax, const Axes& r) { return a(ax[0], r[0]) * b(r[0], ax[1]); }, Expr(),
      Names({"i", "j"}, {"k"})));
  Tensor d = Ok(Compute(
      "D", {m, n}, [this](const Axes& ax) { return c(ax[0], ax[1]) + bias(ax[1]); },
      Names({"i", "j"})));
};

TEST(LowerNaiveTest, MatmulBiasParamsAreInputsThenOutputs) {
  MatmulBias g;
  const ComputeDAG dag = Ok(ComputeDAG::Create({g.d}));
  const LoopNest nest = Ok(LowerNaive(dag));
  EXPECT_EQ(nest.name, "D");
  EXPECT_EQ(nest.num_inputs, 3);
  ASSERT_EQ(nest.params.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(nest.params[i].name, dag.stage(dag.input_ids()[i]).name());
  }
  EXPECT_EQ(nest.params[3].name, "D");
  const std::vector<std::string> names = ParamNames(nest);
  std::vector<std::string> sorted_inputs(names.begin(), names.begin() + 3);
  std::sort(sorted_inputs.begin(), sorted_inputs.end());
  EXPECT_THAT(sorted_inputs, ElementsAre("A", "B", "bias"));
  for (const BufferDecl& p : nest.params) {
    const Tensor& t = dag.stage(dag.StageId(p.name));
    EXPECT_EQ(p.shape, t.shape()) << p.name;
    EXPECT_EQ(p.dtype, kF32) << p.name;
    EXPECT_EQ(p.scope, MemoryScope::kGlobal) << p.name;
  }
}

TEST(LowerNaiveTest, MatmulBiasLoopStructure) {
  MatmulBias g;
  const LoopNest nest = Ok(LowerNaive(Ok(ComputeDAG::Create({g.d}))));
  Census census;
  census.Visit(nest.body);
  // C: i, j, k; D: i, j. All serial, from 0.
  ASSERT_EQ(census.loops.size(), 5u);
  std::vector<std::string> vars;
  for (const ForNode* f : census.loops) {
    vars.push_back(f->var_name());
    EXPECT_EQ(f->for_kind, ForKind::kSerial);
    EXPECT_EQ(AsConstInt(f->min), 0);
  }
  EXPECT_THAT(vars, ElementsAre("i", "j", "k", "i", "j"));
  EXPECT_EQ(AsConstInt(census.loops[2]->extent), 7);
  // The intermediate C is a global allocation around everything.
  ASSERT_EQ(census.allocs.size(), 1u);
  EXPECT_EQ(census.allocs[0]->buffer.name, "C");
  EXPECT_EQ(census.allocs[0]->buffer.scope, MemoryScope::kGlobal);
  EXPECT_EQ(census.allocs[0]->buffer.shape, (std::vector<int64_t>{5, 6}));
  ASSERT_TRUE(nest.body.as<AllocateNode>());
  // Under C's j loop: the init store of 0, then the k loop.
  const auto* j_body = census.loops[1]->body.as<SeqNode>();
  ASSERT_TRUE(j_body);
  ASSERT_EQ(j_body->stmts.size(), 2u);
  const auto* init = j_body->stmts[0].as<StoreNode>();
  ASSERT_TRUE(init);
  EXPECT_EQ(init->buffer, "C");
  EXPECT_EQ(AsConstNumber(init->value), 0.0);
  EXPECT_TRUE(j_body->stmts[1].as<ForNode>());
}

TEST(LowerNaiveTest, MatmulBiasComputesNaiveValues) {
  MatmulBias g;
  const LoopNest nest = Ok(LowerNaive(Ok(ComputeDAG::Create({g.d}))));
  const int64_t m = MatmulBias::m, n = MatmulBias::n, k = MatmulBias::k;
  BufferMap buffers;
  buffers["A"] = HostBuffer::Zeros(kF32, {m, k});
  buffers["B"] = HostBuffer::Zeros(kF32, {k, n});
  buffers["bias"] = HostBuffer::Zeros(kF32, {n});
  buffers["D"] = HostBuffer::Zeros(kF32, {m, n});
  FillRandom(buffers["A"], 1);
  FillRandom(buffers["B"], 2);
  FillRandom(buffers["bias"], 3);
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  const auto& a = buffers["A"].data;
  const auto& b = buffers["B"].data;
  const auto& bias = buffers["bias"].data;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t r = 0; r < k; ++r) {
        const float prod = static_cast<float>(a[i * k + r]) * static_cast<float>(b[r * n + j]);
        acc = acc + prod;
      }
      const float expected = acc + static_cast<float>(bias[j]);
      EXPECT_EQ(buffers["D"].data[i * n + j], expected) << i << ", " << j;
    }
  }
}

// Two outputs, one of them also read by the other: rowmax[i] = max_j X[i, j] (init -inf),
// Y[i, j] = X[i, j] - rowmax[i].
TEST(LowerNaiveTest, TwoOutputsWithSharedReduction) {
  const int64_t rows = 4, cols = 9;
  Tensor x = Ok(Placeholder("X", {rows, cols}));
  Tensor rowmax = Ok(Reduce(
      "rowmax", {rows}, ReduceKind::kMax, {cols},
      [&](const Axes& ax, const Axes& r) { return x(ax[0], r[0]); }, Expr(), Names({"i"}, {"j"})));
  Tensor y = Ok(Compute(
      "Y", {rows, cols}, [&](const Axes& ax) { return x(ax[0], ax[1]) - rowmax(ax[0]); },
      Names({"i", "j"})));
  const ComputeDAG dag = Ok(ComputeDAG::Create({y, rowmax}));
  const LoopNest nest = Ok(LowerNaive(dag));
  EXPECT_EQ(nest.name, "rowmax");  // named after the last output
  EXPECT_THAT(ParamNames(nest), ElementsAre("X", "Y", "rowmax"));
  EXPECT_EQ(nest.num_inputs, 1);
  Census census;
  census.Visit(nest.body);
  EXPECT_TRUE(census.allocs.empty());  // every computed stage is an output
  EXPECT_EQ(census.loops.size(), 4u);

  BufferMap buffers;
  buffers["X"] = HostBuffer::Zeros(kF32, {rows, cols});
  FillRandom(buffers["X"], 7);
  buffers["Y"] = HostBuffer::Zeros(kF32, {rows, cols});
  buffers["rowmax"] = HostBuffer::Zeros(kF32, {rows});
  ASSERT_THAT(Interpret(nest, buffers), IsOk());
  const auto& xd = buffers["X"].data;
  for (int64_t i = 0; i < rows; ++i) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, xd[i * cols + j]);
    EXPECT_EQ(buffers["rowmax"].data[i], mx);
    for (int64_t j = 0; j < cols; ++j) {
      EXPECT_EQ(buffers["Y"].data[i * cols + j],
                static_cast<float>(static_cast<float>(xd[i * cols + j]) - static_cast<float>(mx)));
    }
  }
}

}  // namespace
}  // namespace tilesearch::ir
