// Sketch rule AddRowCacheRead (search/sketch_rules.h): on CUDA, softmax / log_softmax /
// layernorm get a sketch whose input row is copied once into shared memory at the normalize
// stage's row loop (besides the uncached sketch); annotated states of it lower, read the input
// from global memory in one loop only, stay within the launch limits and compute what hand-written
// float64 loops (softmax, log_softmax) or the unscheduled program (layernorm) compute. Rows over
// half the static shared-memory limit and CPU targets get no such sketch.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/reference.h"
#include "nlohmann/json.hpp"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/annotation.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::ComputeLocation;
using schedule::State;
using tilesearch::testing::IsOk;

// The sketches with an "X.shared" stage.
std::vector<State> RowCacheSketches(const std::vector<State>& sketches) {
  std::vector<State> out;
  for (const State& s : sketches) {
    if (s.StageId("X.shared") >= 0) out.push_back(s);
  }
  return out;
}

// Loads of buffer `name` in a loop nest (load sites, not executions).
int LoadSites(const ir::Stmt& body, const std::string& name) {
  class V : public ir::StmtVisitor {
   public:
    explicit V(const std::string& n) : n_(n) {}
    int sites = 0;
    void VisitExpr(const ir::Expr& e) override {
      class L : public ir::ExprVisitor {
       public:
        explicit L(const std::string& n) : n_(n) {}
        int found = 0;

       protected:
        void VisitLoad(const ir::LoadNode* op, const ir::Expr& e) override {
          found += op->buffer == n_;
          ir::ExprVisitor::VisitLoad(op, e);
        }

       private:
        const std::string& n_;
      };
      L l(n_);
      l.Visit(e);
      sites += l.found;
    }

   private:
    const std::string& n_;
  };
  V v(name);
  v.Visit(body);
  return v.sites;
}

// softmax (log = false) or log_softmax of each row of x [rows, cols], in float64.
std::vector<double> SoftmaxRows(const ir::HostBuffer& x, bool log) {
  const int64_t rows = x.shape[0], cols = x.shape[1];
  std::vector<double> out(rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, x.at({i, j}));
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x.at({i, j}) - mx);
    for (int64_t j = 0; j < cols; ++j) {
      const double d = x.at({i, j}) - mx;
      out[i * cols + j] = log ? d - std::log(sum) : std::exp(d) / sum;
    }
  }
  return out;
}

void CheckAnnotatedRowCache(const ir::ComputeDAG& dag, int samples, bool softmax_like, bool log) {
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  const std::vector<State> cached = RowCacheSketches(*sketches);
  ASSERT_EQ(cached.size(), 1u);
  ASSERT_LT(cached.size(), sketches->size()) << "the uncached sketch is kept";
  const State& sketch = cached[0];
  const int x_shared = sketch.StageId("X.shared");
  EXPECT_EQ(sketch.stage(x_shared).location, ComputeLocation::kAttached);
  EXPECT_EQ(sketch.stage(x_shared).scope, ir::MemoryScope::kShared);
  const int out = sketch.StageId(dag.stage(dag.output_ids()[0]).name());
  EXPECT_EQ(sketch.stage(x_shared).attach_stage, out);

  std::mt19937_64 rng(99);
  for (int n = 0; n < samples; ++n) {
    SCOPED_TRACE(n);
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(sketch, dag, target, rng);
    ASSERT_THAT(c.status(), IsOk()) << sketch.ToString();
    const schedule::LoweredKernel& k = *c->lowered;
    ASSERT_EQ(k.launches.size(), 1u) << k.nest;
    EXPECT_LE(k.launches[0].shared_memory_bytes, target.max_shared_memory_per_block);
    // One global read site of X: the cooperative copy.
    EXPECT_EQ(LoadSites(k.nest.body, "X"), 1) << k.nest;
    ir::BufferMap inputs = ir::MakeRandomInputs(dag, 17 + n);
    absl::StatusOr<ir::BufferMap> got = schedule::testing::RunLowered(k.nest, inputs);
    ASSERT_THAT(got.status(), IsOk()) << k.nest;
    const ir::HostBuffer& y = got->at(dag.stage(dag.output_ids()[0]).name());
    if (softmax_like) {
      const std::vector<double> want = SoftmaxRows(inputs.at("X"), log);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(y.data[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i]))) << i;
      }
    } else {
      absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs, ir::Precision::kFloat64);
      ASSERT_THAT(ref.status(), IsOk());
      EXPECT_LE(schedule::testing::MaxRelError(dag, *got, *ref), 1e-4);
    }
  }
}

TEST(RowCacheSketch, SoftmaxRowIsReadOnceAndMatchesFloat64Loops) {
  CheckAnnotatedRowCache(testing::MustBuild(ir::SoftmaxDAG({3, 256})), 12, true, false);
}

TEST(RowCacheSketch, LogSoftmaxRowIsReadOnceAndMatchesFloat64Loops) {
  CheckAnnotatedRowCache(testing::MustBuild(ir::LogSoftmaxDAG({2, 200})), 8, true, true);
}

TEST(RowCacheSketch, LayerNormRowIsReadOnceAndMatchesTheUnscheduledProgram) {
  CheckAnnotatedRowCache(testing::MustBuild(ir::LayerNormDAG({3, 128})), 8, false, false);
}

TEST(RowCacheSketch, Softmax4096RowsAnnotateValidly) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::SoftmaxDAG({4096, 4096}));
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  const std::vector<State> cached = RowCacheSketches(*sketches);
  ASSERT_EQ(cached.size(), 1u);
  std::mt19937_64 rng(5);
  int valid = 0;
  for (int n = 0; n < 20; ++n)
    valid += testing::StateOf(testing::AnnotateInContext(cached[0], dag, target, rng)).ok();
  EXPECT_GE(valid, 18);
}

// UntiledRowNormalize: softmax(S · 0.125 + M) with a mask M[i, j] broadcast over the batch (which
// makes the normalize stage a multi-level tiling candidate) also gets the sketch with its max and
// sum computed at the untiled normalize stage; annotated, it is one kernel that matches the
// float64 definition.
TEST(RowCacheSketch, MaskedSoftmaxGetsAOneKernelSketch) {
  const nlohmann::json workload = nlohmann::json::parse(R"({
    "op": "fused", "dtype": "float32", "shapes": [[3, 4, 96], [4, 96]],
    "nodes": [{"op": "scale", "inputs": ["p0"], "attrs": {"scale": "0.125"}},
              {"op": "add", "inputs": ["n0", "p1"]},
              {"op": "softmax", "inputs": ["n1"]}]})");
  absl::StatusOr<schedule::Workload> w = schedule::WorkloadFromJson(workload);
  ASSERT_THAT(w.status(), IsOk());
  const ir::ComputeDAG dag = testing::MustBuild(w->Build());
  const Target target = Target::H200();
  auto sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  int one_kernel = 0;
  std::mt19937_64 rng(8);
  for (const State& sketch : *sketches) {
    absl::StatusOr<Candidate> c = testing::AnnotateInContext(sketch, dag, target, rng);
    if (!c.ok() || c->lowered->launches.size() != 1) continue;
    ++one_kernel;
    absl::StatusOr<double> err = schedule::testing::RelErrorToFloat64(dag, c->lowered->nest, 9);
    ASSERT_THAT(err.status(), IsOk()) << c->lowered->nest;
    EXPECT_LE(*err, 1e-5) << c->lowered->nest;
  }
  EXPECT_GE(one_kernel, 1);
}

TEST(RowCacheSketch, NoRowCacheOverHalfTheSharedLimitOrOnCpu) {
  // 16384 float32 = 64 KiB per row > 24 KiB.
  auto big =
      GenerateSketches(TuneContext(testing::MustBuild(ir::SoftmaxDAG({2, 16384})), Target::H200()));
  ASSERT_THAT(big.status(), IsOk());
  EXPECT_TRUE(RowCacheSketches(*big).empty());
  auto cpu = GenerateSketches(
      TuneContext(testing::MustBuild(ir::SoftmaxDAG({4, 256})), Target::HostCpu()));
  ASSERT_THAT(cpu.status(), IsOk());
  EXPECT_TRUE(RowCacheSketches(*cpu).empty());
}

}  // namespace
}  // namespace tilesearch::search
