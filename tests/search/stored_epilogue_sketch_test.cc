// KeepStoredEpilogue (search/sketch_rules.cc): where a matmul's elementwise chain ends in a stage
// read by several stages (softmax over Q·Kᵀ·scale), the tensor-core sketches include one whose
// epilogue computes and stores that chain (the scaled half-precision scores) besides the one that
// inlines it into every reader; annotated, those programs match the float64 definition. Where
// the chain ends in the output (dense + bias + relu) nothing changes.
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/schedule_file.h"
#include "search/annotation.h"
#include "search/sketch.h"
#include "tests/schedule/lower_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::State;
using schedule::TensorCoreStep;
using tilesearch::testing::IsOk;

ir::ComputeDAG ScoresSoftmax(const std::string& dtype, int64_t batch, int64_t rows, int64_t cols,
                             int64_t depth) {
  nlohmann::json workload = {
      {"op", "fused"},
      {"dtype", dtype},
      {"shapes", {{batch, rows, depth}, {batch, cols, depth}}},
      {"nodes",
       {{{"op", "batch_matmul"}, {"inputs", {"p0", "p1"}}, {"attrs", {{"transpose_b", "true"}}}},
        {{"op", "scale"}, {"inputs", {"n0"}}, {"attrs", {{"scale", "0.125"}}}},
        {{"op", "softmax"}, {"inputs", {"n1"}}}}}};
  absl::StatusOr<schedule::Workload> w = schedule::WorkloadFromJson(workload);
  EXPECT_THAT(w.status(), IsOk());
  return testing::MustBuild(w->Build());
}

const TensorCoreStep* TensorCoreOf(const State& s) {
  for (const auto& step : s.steps()) {
    if (const auto* t = std::get_if<TensorCoreStep>(&step)) return t;
  }
  return nullptr;
}

// The names of the stages a state computes as the tensor-core stage's epilogue.
std::vector<std::string> EpilogueStages(const State& s) {
  std::vector<std::string> out;
  for (int i = 0; i < s.num_stages(); ++i) {
    if (s.stage(i).epilogue_of >= 0) out.push_back(s.stage(i).name());
  }
  return out;
}

TEST(StoredEpilogueSketch, ScaledHalfScoresAreStoredOnceForTheSoftmax) {
  const ir::ComputeDAG dag = ScoresSoftmax("bfloat16", 2, 128, 64, 64);
  const Target target = Target::H200();
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(dag, target));
  ASSERT_THAT(sketches.status(), IsOk());
  std::vector<const State*> stored;
  int inlined = 0;
  for (const State& s : *sketches) {
    const TensorCoreStep* t = TensorCoreOf(s);
    if (t == nullptr) continue;
    if (t->epilogue == 0) {
      ++inlined;
      continue;
    }
    // acc -> bfloat16 cast -> scale: the scale stage is what the softmax stages read.
    EXPECT_EQ(t->epilogue, 2) << s.ToString();
    EXPECT_EQ(EpilogueStages(s), (std::vector<std::string>{"batch_matmul_0", "scale_1"}));
    stored.push_back(&s);
  }
  EXPECT_GE(inlined, 1);  // the inlined sketches stay
  // A chain kept root is for the tensor cores only: no SIMT sketch stores its links one by one.
  for (const State& s : *sketches) {
    const int cast = s.StageId("batch_matmul_0");
    if (s.stage(cast).location == schedule::ComputeLocation::kRoot) {
      EXPECT_NE(TensorCoreOf(s), nullptr) << s.ToString();
    }
  }
  ASSERT_GE(stored.size(), 1u);
  std::mt19937_64 rng(21);
  int checked = 0;
  for (const State* sketch : stored) {
    for (int n = 0; n < 6; ++n) {
      absl::StatusOr<Candidate> c = testing::AnnotateInContext(*sketch, dag, target, rng);
      if (!c.ok()) continue;
      ++checked;
      // The scores are stored once, in bfloat16: no float32 score buffer is allocated.
      const std::string text = ir::ToString(c->lowered->nest);
      EXPECT_THAT(text, ::testing::HasSubstr("allocate scale_1: bfloat16[2, 128, 64] global"));
      EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("batch_matmul_0_acc: float32")));
      absl::StatusOr<double> err = schedule::testing::RelErrorToFloat64(dag, c->lowered->nest, 5);
      ASSERT_THAT(err.status(), IsOk()) << c->state.ToString();
      // Probabilities near 1/64; bfloat16 scores and outputs err by a few 1e-5 here, and a
      // softmax of unscaled scores would be off by ~1e-3.
      EXPECT_LE(*err, 2e-4) << c->state.ToString();
    }
  }
  EXPECT_GE(checked, 4);
}

TEST(StoredEpilogueSketch, NotWhereTheChainEndsInTheOutputOrWithoutTensorCores) {
  const Target target = Target::H200();
  const ir::ComputeDAG dense = testing::MustBuild(ir::BuildOp("dense_bias_relu", [] {
    ir::OpArgs a;
    a.shapes = {{64, 32}, {48, 32}, {48}};
    a.dtype = ir::ScalarType::kBFloat16;
    return a;
  }()));
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(TuneContext(dense, target));
  ASSERT_THAT(sketches.status(), IsOk());
  for (const State& s : *sketches) {
    const TensorCoreStep* t = TensorCoreOf(s);
    if (t == nullptr) continue;
    // The whole chain to the output, its links inlined (one epilogue stage).
    EXPECT_EQ(t->epilogue, 1) << s.ToString();
  }
  // Without tensor cores the scores' cast is inlined as before (the scale stays root only where a
  // row cache reads it).
  SketchOptions off;
  off.tensor_cores = false;
  const ir::ComputeDAG scores = ScoresSoftmax("bfloat16", 2, 128, 64, 64);
  absl::StatusOr<std::vector<State>> simt =
      GenerateSketches(TuneContext(scores, target, {}, 0, off));
  ASSERT_THAT(simt.status(), IsOk());
  for (const State& s : *simt) {
    const int cast = s.StageId("batch_matmul_0");
    ASSERT_GE(cast, 0);
    EXPECT_EQ(s.stage(cast).location, schedule::ComputeLocation::kInlined) << s.ToString();
  }
}

}  // namespace
}  // namespace tilesearch::search
