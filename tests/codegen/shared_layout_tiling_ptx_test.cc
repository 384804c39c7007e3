// PTX of the shared-memory tiled transpose (sketch rule SharedLayoutTiling, search/sketch_rules.h):
// sampled states of a 2-D float32 transpose compile to PTX that ptxas accepts for sm_90, and the
// kernel stages its tile through shared memory (st.shared, then bar.sync, then ld.shared).
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gtest/gtest.h"
#include "ir/ops/layout.h"
#include "search/annotation.h"
#include "search/sketch.h"
#include "search/tune_context.h"
#include "tests/codegen/ptx_test_util.h"

namespace tilesearch::codegen {
namespace {

using ::tilesearch::testing::IsOk;

// The sketch of `dag` whose steps pad a shared copy (SharedLayoutTiling's).
absl::StatusOr<schedule::State> TiledSketch(const ir::ComputeDAG& dag, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<schedule::State> sketches,
                   search::GenerateSketches(search::TuneContext(dag, target)));
  for (const schedule::State& s : sketches) {
    for (const schedule::Step& step : s.steps()) {
      if (std::holds_alternative<schedule::StorageAlignStep>(step)) return s;
    }
  }
  return absl::NotFoundError("no tiled sketch");
}

TEST(SharedLayoutTilingPtx, TiledTransposeStagesThroughSharedMemoryAndAssembles) {
  absl::StatusOr<ir::ComputeDAG> dag = ir::TransposeDAG({1024, 768}, {1, 0});
  ASSERT_THAT(dag.status(), IsOk());
  const Target target = Target::H200();
  absl::StatusOr<schedule::State> sketch = TiledSketch(*dag, target);
  ASSERT_THAT(sketch.status(), IsOk());
  int compiled = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    search::TuneContext ctx(*dag, target);
    ctx.rng().seed(seed);
    absl::StatusOr<search::Candidate> c = search::AnnotateSketch(*sketch, ctx);
    if (!c.ok()) continue;
    absl::StatusOr<GpuModule> m = CompileToPtx(c->lowered->nest, c->lowered->launches);
    ASSERT_THAT(m.status(), IsOk()) << c->lowered->nest;
    ++compiled;
    const std::string& ptx = m->ptx;
    const size_t store = ptx.find("st.shared");
    const size_t barrier = ptx.find("bar.sync");
    const size_t load = ptx.rfind("ld.shared");
    ASSERT_NE(store, std::string::npos) << ptx;
    ASSERT_NE(barrier, std::string::npos) << ptx;
    ASSERT_NE(load, std::string::npos) << ptx;
    // The fill, the barrier, then the reads (in program order of a straight-line kernel body).
    EXPECT_LT(store, barrier);
    EXPECT_LT(barrier, load);
    testing::ExpectPtxasAccepts(ptx, "shared_layout_tiling_" + std::to_string(seed));
  }
  EXPECT_GE(compiled, 2);
}

}  // namespace
}  // namespace tilesearch::codegen
