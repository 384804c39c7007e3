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
#include "tests/codegen/nest_builders.h"

namespace tilesearch::codegen {
namespace {

using ::tilesearch::testing::IsOk;
using namespace ::tilesearch::codegen::testing;  // NOLINT: examples, merging

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
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].first);
    absl::StatusOr<ir::ComputeDAG> dag = ir::BuildOp(cases[i].first, cases[i].second);
    ASSERT_THAT(dag, IsOk());
    absl::StatusOr<ir::LoopNest> naive = ir::LowerNaive(*dag);
    ASSERT_THAT(naive, IsOk());
    Workload w{absl::StrCat(cases[i].first, " ", ir::TypeName(cases[i].second.dtype)),
               absl::StrCat("op", i, "_"), *dag, *naive};
    workloads.push_back(std::move(w));
  }
  std::vector<ir::LoopNest> nests;
  std::vector<std::string> prefixes;
  for (const Workload& w : workloads) {
    nests.push_back(w.naive);
    prefixes.push_back(w.prefix);
  }
  const ir::LoopNest merged = MergeNests("all_ops", nests, prefixes);

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
  const std::map<std::string, ir::OpArgs> examples = OpExamples();
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
