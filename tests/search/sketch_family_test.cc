// Measured sketch-family shares: the best valid time per family (tensor-core, SIMT) over a task's
// records, the share rule, the context that draws with the share (counted over sampled states of a
// bf16 matmul's real sketches), and the round line's field.
#include "search/sketch_family.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/registry.h"
#include "nlohmann/json.hpp"
#include "search/annotation.h"
#include "search/evolutionary_search.h"
#include "search/measure_record.h"
#include "search/sketch.h"
#include "search/tensor_core_space.h"
#include "tests/search/feature_sum_model.h"
#include "tests/search/record_test_util.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

schedule::TensorCoreStep SomeTensorCoreStep() {
  schedule::TensorCoreStep t;
  t.stage_id = 2;
  t.kind = "bf16";
  return t;
}

// A record of `key` with a tensor_core step (or a plain split) timed at `ms`; `ms` < 0: failed.
MeasureRecord Record(const std::string& key, bool tensor_core, double ms) {
  const schedule::Workload w = testing::Matmul(64);
  MeasureRecord r = testing::TimedRecord(w, key, Target::H200(), 1, std::abs(ms));
  if (tensor_core) {
    r.steps.push_back(SomeTensorCoreStep());
  } else {
    r.steps.push_back(schedule::SplitStep{});
  }
  if (ms < 0) r.result.error = measure::MeasureError::kRuntimeError;
  return r;
}

TEST(SketchFamily, BestPerFamilyTakesTheFastestValidRecordOfTheTaskPerFamily) {
  const std::vector<MeasureRecord> records = {
      Record("task", false, 3.79),  Record("task", true, 0.469), Record("task", true, 0.229),
      Record("task", false, 6.06),  Record("task", true, -0.1),  // failed: not a best
      Record("other", false, 0.01),                              // another workload
  };
  const FamilyBests bests = BestPerFamily(records, "task");
  EXPECT_DOUBLE_EQ(bests.tensor_core_ms, 0.229);
  EXPECT_DOUBLE_EQ(bests.simt_ms, 3.79);
  const FamilyBests none = BestPerFamily(records, "missing");
  EXPECT_EQ(none.tensor_core_ms, kInf);
  EXPECT_EQ(none.simt_ms, kInf);
}

TEST(SketchFamily, ShareFollowsTheDominantFamilyAndKeepsAFloor) {
  // Half-precision matmul of the committed logs: wgmma 0.229 ms, SIMT 3.79 ms.
  EXPECT_DOUBLE_EQ(TensorCoreShareFor({0.229, 3.79}, 0.5, 2.0, 0.1), 0.9);
  // SIMT twice as fast (a small odd shape): the tensor-core sketches keep the floor.
  EXPECT_DOUBLE_EQ(TensorCoreShareFor({2.0, 1.0}, 0.5, 2.0, 0.1), 0.1);
  // Within 2x (fp32: SIMT against 3xTF32): the base share.
  EXPECT_DOUBLE_EQ(TensorCoreShareFor({1.7, 3.0}, 0.5, 2.0, 0.1), 0.5);
  EXPECT_DOUBLE_EQ(TensorCoreShareFor({3.0, 1.7}, 0.5, 2.0, 0.1), 0.5);
  // A family without a valid record: nothing to compare yet.
  EXPECT_DOUBLE_EQ(TensorCoreShareFor({kInf, 1.0}, 0.5, 2.0, 0.1), 0.5);
  EXPECT_DOUBLE_EQ(TensorCoreShareFor({0.2, kInf}, 0.5, 2.0, 0.1), 0.5);
  // Off.
  EXPECT_DOUBLE_EQ(TensorCoreShareFor({0.229, 3.79}, 0.5, 0.0, 0.1), 0.5);
  // The boundary belongs to the rule: exactly dominance times slower.
  EXPECT_DOUBLE_EQ(TensorCoreShareFor({1.0, 2.0}, 0.5, 2.0, 0.1), 0.9);
}

// The share the context carries is the share of fresh states annotation draws from tensor-core
// sketches: counted over 300 states of a bf16 matmul's sketches (both families present).
TEST(SketchFamily, ContextWithShareDrawsThatShareOfTensorCoreStates) {
  ir::OpArgs args;
  args.shapes = {{256, 128}, {128, 256}};
  args.dtype = ir::ScalarType::kBFloat16;
  const ir::ComputeDAG dag = testing::MustBuild(ir::BuildOp("matmul", args));
  const TuneContext base(dag, Target::H200(), SearchOptions{}, 7);
  absl::StatusOr<std::vector<schedule::State>> sketches = GenerateSketches(base);
  ASSERT_TRUE(sketches.ok()) << sketches.status();
  int tensor_core_sketches = 0;
  for (const schedule::State& s : *sketches) tensor_core_sketches += HasTensorCoreStep(s);
  ASSERT_GT(tensor_core_sketches, 0);
  ASSERT_LT(tensor_core_sketches, static_cast<int>(sketches->size()));
  constexpr int kStates = 300;
  for (const double share : {0.9, 0.1}) {
    SCOPED_TRACE(share);
    TuneContext ctx = base.WithTensorCoreShare(share);
    EXPECT_DOUBLE_EQ(ctx.annotation().tensor_core_share, share);
    EXPECT_DOUBLE_EQ(base.annotation().tensor_core_share, 0.5);  // the original is unchanged
    const std::vector<schedule::State> states = SampleInitialPopulation(*sketches, kStates, ctx);
    ASSERT_GE(states.size(), 250u);
    int tc = 0;
    for (const schedule::State& s : states) tc += HasTensorCoreStep(s);
    const double fraction = static_cast<double>(tc) / states.size();
    // Binomial(300, share): 4.5 standard deviations is 0.078; duplicates drawn again shift it
    // a little.
    EXPECT_NEAR(fraction, share, 0.1) << tc << " of " << states.size();
  }
}

// A model that scores states by the sum of their features, or its negation: one of the two
// prefers the SIMT states of a bf16 matmul (they have more stores and loops).
class SignedFeatureSumModel : public testing::FeatureSumModel {
 public:
  explicit SignedFeatureSumModel(double sign) : sign_(sign) {}
  absl::StatusOr<std::vector<double>> Predict(
      const std::vector<costmodel::ProgramFeatures>& programs) override {
    absl::StatusOr<std::vector<double>> out = FeatureSumModel::Predict(programs);
    if (out.ok()) {
      for (double& v : *out) v = std::isfinite(v) ? sign_ * v : v;
    }
    return out;
  }

 private:
  double sign_;
};

// The model-ranked picks of an evolutionary search give a family drawn for less than half of the
// fresh states at most that share of them, even where the model prefers that family.
TEST(SketchFamily, DominatedFamilyGetsAtMostItsShareOfTheModelRankedPicks) {
  ir::OpArgs args;
  args.shapes = {{256, 128}, {128, 256}};
  args.dtype = ir::ScalarType::kBFloat16;
  const ir::ComputeDAG dag = testing::MustBuild(ir::BuildOp("matmul", args));
  SearchOptions options;
  options.population = 64;
  options.generations = 2;
  options.init_min_population = 32;
  options.eps_greedy = 0;  // every pick model-ranked
  options.num_threads = 2;
  const TuneContext base(dag, Target::H200(), options, 11);
  absl::StatusOr<std::vector<schedule::State>> sketches = GenerateSketches(base);
  ASSERT_TRUE(sketches.ok()) << sketches.status();
  constexpr int kPicks = 20;
  const auto simt_picks = [&](double sign, double share) -> int {
    SignedFeatureSumModel model(sign);
    TuneContext ctx = base.WithTensorCoreShare(share);
    absl::StatusOr<std::vector<Candidate>> out =
        EvolutionarySearch(ctx, *sketches, model, {}, {}, kPicks);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return -1;
    EXPECT_EQ(out->size(), static_cast<size_t>(kPicks));
    int simt = 0;
    for (const Candidate& c : *out) simt += HasTensorCoreStep(c.state) ? 0 : 1;
    return simt;
  };
  // The sign whose model picks the most SIMT states at the base share (no cap).
  const int plus = simt_picks(1, 0.5);
  const int minus = simt_picks(-1, 0.5);
  const double sign = plus >= minus ? 1 : -1;
  const int uncapped = std::max(plus, minus);
  const int cap = static_cast<int>(std::ceil(0.1 * kPicks));  // 2
  ASSERT_GT(uncapped, cap) << "neither model prefers SIMT states: the test shows nothing";
  EXPECT_LE(simt_picks(sign, 0.9), cap);
  // The other way round: tensor-core states capped at 0.1 when the SIMT family dominates.
  SignedFeatureSumModel other(-sign);
  TuneContext ctx = base.WithTensorCoreShare(0.1);
  absl::StatusOr<std::vector<Candidate>> out =
      EvolutionarySearch(ctx, *sketches, other, {}, {}, kPicks);
  ASSERT_TRUE(out.ok()) << out.status();
  int tensor_core = 0;
  for (const Candidate& c : *out) tensor_core += HasTensorCoreStep(c.state) ? 1 : 0;
  EXPECT_LE(tensor_core, cap);
}

TEST(SketchFamily, RoundLineCarriesTheShareOnlyWhenSetAndRefusesOneOutsideZeroToOne) {
  RoundRecord r;
  r.workload_key = "0123456789abcdef";
  r.target = Target::H200();
  r.round = 2;
  r.first_trial = 3;
  r.trials = 1;
  r.valid = 1;
  r.model = "xgboost";
  r.predicted = {0.5};
  r.timestamp = "2026-12-02T00:00:00.000Z";
  EXPECT_FALSE(RoundRecordToJson(r).contains("tensor_core_share"));
  absl::StatusOr<RoundRecord> absent = RoundRecordFromJson(RoundRecordToJson(r));
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_LT(absent->tensor_core_share, 0);
  r.tensor_core_share = 0.9;
  const std::string line = RoundRecordToLine(r);
  // Written in field order: after the round's counts, before the model.
  EXPECT_THAT(line, HasSubstr(R"("valid":1,"tensor_core_share":0.9,"model":"xgboost")"));
  absl::StatusOr<RoundRecord> back = RoundRecordFromJson(json::parse(line));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->tensor_core_share, 0.9);
  json wrong = json::parse(line);
  wrong["tensor_core_share"] = 1.5;
  EXPECT_THAT(RoundRecordFromJson(wrong).status().message(),
              HasSubstr("field 'tensor_core_share' must be a number in [0, 1], got 1.5"));
  wrong["tensor_core_share"] = "most";
  EXPECT_FALSE(RoundRecordFromJson(wrong).ok());
}

}  // namespace
}  // namespace tilesearch::search
