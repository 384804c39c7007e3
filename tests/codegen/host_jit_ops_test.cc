// Host JIT of every operator of the library: the naive loop nests of all operators (small example
// shapes, float32, plus float16 / bfloat16 variants) are merged into one module (buffers renamed
// per operator), JIT-compiled once, run on random inputs and compared with the reference
// interpreter within 1e-5 relative (float32; one storage ulp for the narrow types).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/lower_naive.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"

namespace tilesearch::codegen {
namespace {

using ::tilesearch::testing::IsOk;

ir::OpArgs Args(std::vector<std::vector<int64_t>> shapes,
                std::map<std::string, std::string> attrs = {},
                ir::ScalarType dtype = ir::ScalarType::kFloat32) {
  ir::OpArgs a;
  a.shapes = std::move(shapes);
  a.attrs = std::move(attrs);
  a.dtype = dtype;
  return a;
}

// Example arguments per operator (odd extents exercise non-multiple-of-vector sizes).
std::map<std::string, ir::OpArgs> Examples() {
  return {
      {"matmul", Args({{5, 9}, {9, 12}})},
      {"batch_matmul", Args({{2, 3, 5}, {2, 5, 8}})},
      {"dense", Args({{3, 6}, {4, 6}})},
      {"gemv", Args({{7, 9}, {9}})},
      {"conv1d", Args({{1, 2, 9}, {3, 2, 3}}, {{"padding", "1"}})},
      {"conv2d_nchw", Args({{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}})},
      {"conv2d_nhwc", Args({{1, 6, 5, 2}, {3, 3, 2, 3}}, {{"stride", "2"}})},
      {"conv2d_nchw_padded", Args({{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}})},
      {"depthwise_conv2d_nchw", Args({{1, 2, 6, 5}, {2, 1, 3, 3}}, {{"padding", "1"}})},
      {"max_pool2d", Args({{1, 2, 6, 5}}, {{"kernel", "2"}})},
      {"avg_pool2d", Args({{1, 2, 6, 5}}, {{"kernel", "3"}, {"stride", "1"}})},
      {"conv2d_bias_relu", Args({{1, 2, 6, 5}, {3, 2, 3, 3}, {3}})},
      {"dense_bias_relu", Args({{3, 5}, {4, 5}, {4}})},
      {"matmul_scale_residual", Args({{3, 5}, {5, 4}, {3, 4}}, {{"scale", "0.5"}})},
      {"reduce_sum", Args({{3, 7}}, {{"axes", "1"}})},
      {"reduce_mean", Args({{3, 7}})},
      {"reduce_max", Args({{3, 7}}, {{"axes", "0"}, {"keepdim", "true"}})},
      {"reduce_min", Args({{4, 3, 5}}, {{"axes", "0,2"}})},
      {"softmax", Args({{3, 17}})},
      {"log_softmax", Args({{5, 7}}, {{"axis", "0"}})},
      {"layernorm", Args({{3, 16}, {16}, {16}})},
      {"rmsnorm", Args({{3, 16}, {16}})},
      {"relu", Args({{3, 37}})},
      {"leaky_relu", Args({{3, 37}})},
      {"gelu", Args({{3, 37}})},
      {"sigmoid", Args({{3, 37}})},
      {"tanh", Args({{3, 37}})},
      {"swish", Args({{3, 37}})},
      {"softplus", Args({{3, 37}})},
      {"elu", Args({{3, 37}})},
      {"hardtanh", Args({{3, 37}})},
      {"add", Args({{3, 7}, {7}})},
      {"sub", Args({{3, 1}, {7}})},
      {"mul", Args({{3, 7}, {3, 7}})},
      {"div", Args({{3, 7}, {1}})},
      {"maximum", Args({{3, 7}, {3, 1}})},
      {"minimum", Args({{7}, {3, 7}})},
      {"scale", Args({{3, 7}}, {{"scale", "0.5"}})},
      {"transpose", Args({{3, 7, 2}}, {{"perm", "2,0,1"}})},
  };
}

// Renames every buffer of a nest (params, allocations, loads, stores) with a prefix.
class RenameExprBuffers : public ir::ExprMutator {
 public:
  explicit RenameExprBuffers(std::string prefix) : prefix_(std::move(prefix)) {}

 protected:
  ir::Expr MutateLoad(const ir::LoadNode* op, const ir::Expr&) override {
    std::vector<ir::Expr> indices;
    for (const ir::Expr& i : op->indices) indices.push_back(Mutate(i));
    return ir::LoadNode::Make(op->type, prefix_ + op->buffer, std::move(indices));
  }

 private:
  std::string prefix_;
};

class RenameBuffers : public ir::StmtMutator {
 public:
  explicit RenameBuffers(std::string prefix) : prefix_(prefix), exprs_(std::move(prefix)) {}
  ir::Expr MutateExpr(const ir::Expr& e) override { return exprs_.Mutate(e); }

 protected:
  ir::Stmt MutateStore(const ir::StoreNode* op, const ir::Stmt&) override {
    std::vector<ir::Expr> indices;
    for (const ir::Expr& i : op->indices) indices.push_back(MutateExpr(i));
    return ir::StoreNode::Make(prefix_ + op->buffer, std::move(indices), MutateExpr(op->value));
  }
  ir::Stmt MutateAllocate(const ir::AllocateNode* op, const ir::Stmt&) override {
    ir::BufferDecl decl = op->buffer;
    decl.name = prefix_ + decl.name;
    return ir::AllocateNode::Make(decl, Mutate(op->body));
  }

 private:
  std::string prefix_;
  RenameExprBuffers exprs_;
};

struct Workload {
  std::string label;
  std::string prefix;
  ir::ComputeDAG dag;
  ir::LoopNest naive;
};

double Tolerance(ir::ScalarType t) {
  switch (t) {
    case ir::ScalarType::kFloat16:
      return 2e-3;
    case ir::ScalarType::kBFloat16:
      return 1.6e-2;
    default:
      return 1e-5;
  }
}

// Builds all workloads, merges them into one nest, JIT-compiles it, runs it on random inputs
// and compares every output with the interpreter's.
void CheckMergedAgainstReference(const std::vector<std::pair<std::string, ir::OpArgs>>& cases) {
  std::vector<Workload> workloads;
  ir::LoopNest merged;
  merged.name = "all_ops";
  std::vector<ir::Stmt> bodies;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].first);
    absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp(cases[i].first, cases[i].second);
    ASSERT_THAT(dag, IsOk());
    absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(*dag);
    ASSERT_THAT(naive, IsOk());
    Workload w{absl::StrCat(cases[i].first, " ", ir::TypeName(cases[i].second.dtype)),
               absl::StrCat("op", i, "_"), *dag, *naive};
    RenameBuffers rename(w.prefix);
    for (ir::BufferDecl p : naive->params) {
      p.name = w.prefix + p.name;
      merged.params.push_back(p);
    }
    bodies.push_back(rename.Mutate(naive->body));
    workloads.push_back(std::move(w));
  }
  merged.body = ir::SeqNode::Make(bodies);

  absl::StatusOr<std::unique_ptr<HostKernel>> kernel = CompileForHost(merged);
  ASSERT_THAT(kernel, IsOk());

  ir::BufferMap buffers;
  std::vector<ir::BufferMap> inputs;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const Workload& w = workloads[i];
    inputs.push_back(ir::MakeRandomInputs(w.dag, 100 + i));
    for (const ir::BufferDecl& p : w.naive.params) {
      auto it = inputs.back().find(p.name);
      buffers[w.prefix + p.name] =
          it != inputs.back().end() ? it->second : ir::HostBuffer::Zeros(p.dtype, p.shape);
    }
  }
  ASSERT_THAT(RunOnBuffers(**kernel, merged, buffers), IsOk());

  for (size_t i = 0; i < workloads.size(); ++i) {
    const Workload& w = workloads[i];
    SCOPED_TRACE(w.label);
    absl::StatusOr<ir::BufferMap> expected = ir::RunReference(w.dag, inputs[i]);
    ASSERT_THAT(expected, IsOk());
    for (const auto& [name, want] : *expected) {
      const ir::HostBuffer& got = buffers.at(w.prefix + name);
      ASSERT_EQ(got.data.size(), want.data.size()) << name;
      const double tol = Tolerance(want.dtype);
      int bad = 0;
      for (size_t e = 0; e < want.data.size() && bad < 5; ++e) {
        const double diff = std::fabs(got.data[e] - want.data[e]);
        if (!(diff <= tol * std::fabs(want.data[e]) + tol * 0.1)) {
          ADD_FAILURE() << w.label << " output " << name << "[" << e << "] = " << got.data[e]
                        << ", interpreter " << want.data[e];
          ++bad;
        }
      }
    }
  }
}

TEST(HostJitOpsTest, EveryOperatorMatchesTheInterpreter) {
  const std::map<std::string, ir::OpArgs> examples = Examples();
  std::vector<std::pair<std::string, ir::OpArgs>> cases;
  for (const ir::OpInfo& op : ir::OpLibrary()) {
    auto it = examples.find(op.name);
    ASSERT_NE(it, examples.end()) << "no example for operator '" << op.name << "'";
    cases.emplace_back(op.name, it->second);
  }
  CheckMergedAgainstReference(cases);
}

TEST(HostJitOpsTest, NarrowStorageTypesMatchTheInterpreter) {
  using ir::ScalarType;
  CheckMergedAgainstReference({
      {"add", Args({{3, 7}, {7}}, {}, ScalarType::kFloat16)},
      {"relu", Args({{3, 37}}, {}, ScalarType::kBFloat16)},
      {"softmax", Args({{3, 17}}, {}, ScalarType::kFloat16)},
      {"matmul", Args({{5, 9}, {9, 12}}, {}, ScalarType::kBFloat16)},
      {"layernorm", Args({{3, 16}, {16}, {16}}, {}, ScalarType::kFloat16)},
  });
}

}  // namespace
}  // namespace tilesearch::codegen
