// CrossThreadReduction's row split with a vector part: a row normalize stage that the row
// reductions are fused into splits its row into [rest, threads, vector] (the vector annotated,
// the reductions following both splits), so that a thread reads up to 16 bytes of consecutive
// elements per load. The drawn widths stay within 16 bytes of the element type, reach 16 bytes
// for bfloat16 rows, and every drawn program matches the float64 definition.
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/norm.h"
#include "search/annotation.h"
#include "search/mutation.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::IteratorAnnotation;
using schedule::State;
using tilesearch::testing::IsOk;

// The width of the row's vector split in a state: the length of the split whose inner part the
// next step vectorizes, on stage `stage`; 0 when there is none.
int64_t RowVectorWidth(const State& s, const std::string& stage) {
  const auto& steps = s.steps();
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    const auto* sp = std::get_if<schedule::SplitStep>(&steps[i]);
    const auto* an = std::get_if<schedule::AnnotationStep>(&steps[i + 1]);
    if (sp == nullptr || an == nullptr || an->annotation != IteratorAnnotation::kVectorize ||
        an->stage_id != sp->stage_id || sp->lengths.size() != 1) {
      continue;
    }
    if (s.stage(sp->stage_id).name() == stage && sp->lengths[0].has_value()) {
      return *sp->lengths[0];
    }
  }
  return 0;
}

// Sketches whose normalize stage `stage` carries a row vector split.
std::vector<State> RowVectorSketches(const std::vector<State>& sketches, const std::string& stage) {
  std::vector<State> out;
  for (const State& s : sketches) {
    const auto& steps = s.steps();
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      const auto* an = std::get_if<schedule::AnnotationStep>(&steps[i + 1]);
      if (std::holds_alternative<schedule::SplitStep>(steps[i]) && an != nullptr &&
          an->annotation == IteratorAnnotation::kVectorize &&
          s.stage(an->stage_id).name() == stage) {
        out.push_back(s);
        break;
      }
    }
  }
  return out;
}

TEST(RowVectorSketch, WidthsAreWholeVectorsOfTheElementType) {
  const Target h200 = Target::H200();
  EXPECT_EQ(internal::VectorWidths(4096, 2, h200), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(internal::VectorWidths(4096, 4, h200), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(internal::VectorWidths(4096, 1, h200), (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(internal::VectorWidths(6, 2, h200), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(internal::VectorWidths(7, 4, h200), (std::vector<int64_t>{1}));
}

TEST(RowVectorSketch, HalfSoftmaxRowsDrawSixteenByteVectorsAndMatchFloat64) {
  for (const ir::ScalarType dtype : {ir::ScalarType::kBFloat16, ir::ScalarType::kFloat32}) {
    SCOPED_TRACE(ir::TypeName(dtype));
    const ir::ComputeDAG dag = testing::MustBuild(ir::SoftmaxDAG({6, 1024}, -1, dtype));
    const Target target = Target::H200();
    absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(dag, target));
    ASSERT_THAT(sketches.status(), IsOk());
    // The sketches with both reductions fused into the normalize stage (one kernel); others
    // leave the max a kernel of its own.
    std::vector<State> rows;
    for (const State& s : RowVectorSketches(*sketches, "softmax")) {
      if (s.stage(s.StageId("softmax_max")).location == schedule::ComputeLocation::kAttached) {
        rows.push_back(s);
      }
    }
    ASSERT_GE(rows.size(), 1u);
    std::mt19937_64 rng(13);
    std::set<int64_t> widths;
    int checked = 0;
    for (int n = 0; n < 30; ++n) {
      const State& sketch = rows[n % rows.size()];
      absl::StatusOr<Candidate> c = testing::AnnotateInContext(sketch, dag, target, rng);
      if (!c.ok()) continue;
      const int64_t w = RowVectorWidth(c->state, "softmax");
      ASSERT_GT(w, 0) << c->state.ToString();
      EXPECT_LE(w * ir::BytesOf(dtype), 16) << c->state.ToString();
      widths.insert(w);
      // One kernel: the max and the sum are computed at the normalize stage's row.
      EXPECT_EQ(c->lowered->launches.size(), 1u) << c->state.ToString();
      absl::StatusOr<double> err = schedule::testing::RelErrorToFloat64(dag, c->lowered->nest, 3);
      ASSERT_THAT(err.status(), IsOk()) << c->state.ToString();
      // Probabilities of 1024-wide rows of uniform [-1, 1) inputs lie in about [4e-4, 3e-3]:
      // one misplaced element errs by ~1e-3; rounding to bfloat16 by ~1e-5 at most.
      EXPECT_LE(*err, dtype == ir::ScalarType::kBFloat16 ? 2e-5 : 1e-7) << c->state.ToString();
      ++checked;
    }
    EXPECT_GE(checked, 20);
    const int64_t widest = 16 / ir::BytesOf(dtype);
    EXPECT_TRUE(widths.count(widest)) << "no 16-byte vector drawn";
    EXPECT_GE(widths.size(), 3u);
  }
}

// The row's thread count stays a decision after annotation: the thread split records the rest's
// extent once the width is drawn, so mutation moves the thread count (and the width).
TEST(RowVectorSketch, MutationMovesTheRowThreadCountAndWidth) {
  const ir::ComputeDAG dag =
      testing::MustBuild(ir::SoftmaxDAG({6, 2048}, -1, ir::ScalarType::kBFloat16));
  const Target target = Target::H200();
  TuneContext ctx(dag, target, SearchOptions{}, 5);
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(ctx);
  ASSERT_THAT(sketches.status(), IsOk());
  const std::vector<State> rows = RowVectorSketches(*sketches, "softmax");
  ASSERT_GE(rows.size(), 1u);
  absl::StatusOr<Candidate> parent = AnnotateSketch(rows[0], ctx);
  ASSERT_THAT(parent.status(), IsOk());
  // The thread split: the split after the vector split's annotation.
  auto threads_of = [](const State& s) -> int64_t {
    const auto& steps = s.steps();
    for (size_t i = 0; i + 3 < steps.size(); ++i) {
      const auto* an = std::get_if<schedule::AnnotationStep>(&steps[i + 1]);
      const auto* sp = std::get_if<schedule::SplitStep>(&steps[i + 2]);
      if (an != nullptr && an->annotation == IteratorAnnotation::kVectorize && sp != nullptr &&
          sp->stage_id == an->stage_id && s.stage(sp->stage_id).name() == "softmax") {
        EXPECT_GT(sp->extent, 0) << "the rest's extent is recorded";
        return *sp->lengths[0];
      }
    }
    return 0;
  };
  const int64_t threads = threads_of(parent->state);
  const int64_t width = RowVectorWidth(parent->state, "softmax");
  ASSERT_GT(threads, 0);
  std::set<int64_t> other_threads, other_widths;
  for (int i = 0; i < 60; ++i) {
    absl::StatusOr<Candidate> child = MutateTileSize(parent->state, ctx);
    if (!child.ok()) continue;
    if (threads_of(child->state) != threads) other_threads.insert(threads_of(child->state));
    if (RowVectorWidth(child->state, "softmax") != width) {
      other_widths.insert(RowVectorWidth(child->state, "softmax"));
    }
  }
  EXPECT_FALSE(other_threads.empty());
  EXPECT_FALSE(other_widths.empty());
}

// A softmax over an outer axis reads its rows with a stride: its sketches keep TVM's thread split
// (no vector part), and still compute the right values.
TEST(RowVectorSketch, StridedRowsGetNoVector) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::SoftmaxDAG({4, 256, 8}, 1));
  const Target target = Target::H200();
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  EXPECT_TRUE(RowVectorSketches(*sketches, "softmax").empty());
}

}  // namespace
}  // namespace tilesearch::search
