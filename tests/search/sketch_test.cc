// Sketch generation: the structures Ansor's rules give for matmul, fused dense, softmax,
// elementwise chains on cuda and cpu, and every sketch of the library's operators lowers once its
// unfilled tile sizes are set to 1.
#include "search/sketch.h"

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/interpreter.h"
#include "ir/reference.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "search/annotation.h"
#include "search/measure_record.h"
#include "tests/search/space_test_util.h"

namespace tilesearch::search {
namespace {

using schedule::ComputeLocation;
using schedule::IteratorAnnotation;
using schedule::IteratorKind;
using schedule::Stage;
using schedule::State;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::vector<std::string> StageNames(const State& s) {
  std::vector<std::string> out;
  for (int i = 0; i < s.num_stages(); ++i) out.push_back(s.stage(i).name());
  return out;
}

std::vector<std::string> IterNames(const State& s, const std::string& stage) {
  std::vector<std::string> out;
  for (const auto& it : s.stage(s.StageId(stage)).iters) out.push_back(it.name);
  return out;
}

int UnfilledSplits(const State& s) {
  int n = 0;
  for (const auto& st : s.steps()) {
    if (const auto* sp = std::get_if<schedule::SplitStep>(&st)) {
      n += std::any_of(sp->lengths.begin(), sp->lengths.end(),
                       [](const auto& l) { return !l.has_value(); });
    }
  }
  return n;
}

TEST(Sketch, CudaMatmulIsSssrrsrsWithSharedCaches) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({64, 32}, {32, 48}));
  auto sketches = GenerateSketches(testing::SimtContext(dag, Target::H200()));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  ASSERT_EQ(sketches->size(), 1u);
  const State& s = (*sketches)[0];
  EXPECT_THAT(StageNames(s), ElementsAre("A", "A.shared", "B", "B.shared", "C.local", "C"));
  // Space levels S S S, reduce R R, space S, reduce R, space S.
  EXPECT_THAT(IterNames(s, "C.local"), ElementsAre("i.0", "j.0", "i.1", "j.1", "i.2", "j.2", "k.0",
                                                   "k.1", "i.3", "j.3", "k.2", "i.4", "j.4"));
  // The output follows the tiling up to the thread level; C.local is computed at j.2.
  EXPECT_THAT(IterNames(s, "C"),
              ElementsAre("i.0", "j.0", "i.1", "j.1", "i.2", "j.2", "i.3", "j.3"));
  const Stage& local = s.stage(s.StageId("C.local"));
  EXPECT_EQ(local.location, ComputeLocation::kAttached);
  EXPECT_EQ(local.attach_stage, s.StageId("C"));
  EXPECT_EQ(local.attach_iter, "j.2");
  for (const std::string name : {"A.shared", "B.shared"}) {
    const Stage& sh = s.stage(s.StageId(name));
    EXPECT_EQ(sh.scope, ir::MemoryScope::kShared) << name;
    EXPECT_EQ(sh.location, ComputeLocation::kAttached) << name;
    EXPECT_EQ(sh.attach_stage, s.StageId("C.local")) << name;
    EXPECT_EQ(sh.attach_iter, "k.0") << name;
  }
  // i and j of C.local: 4 unfilled lengths each, k: 2.
  EXPECT_EQ(UnfilledSplits(s), 3);
}

TEST(Sketch, CudaDenseBiasReluFusesTheTiledStageIntoItsConsumer) {
  ir::ComputeDAG dag = testing::MustBuild(ir::DenseBiasReluDAG({64, 32}, {48, 32}, {48}));
  auto sketches = GenerateSketches(testing::SimtContext(dag, Target::H200()));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  ASSERT_EQ(sketches->size(), 1u);
  const State& s = (*sketches)[0];
  // No cache_write: the dense stage is tiled and computed inside the output's thread tile;
  // elementwise stages between them are inlined.
  int tiled = -1;
  for (int i = 0; i < s.num_stages(); ++i) {
    EXPECT_EQ(s.stage(i).scope == ir::MemoryScope::kLocal, false) << s.stage(i).name();
    if (!s.stage(i).is_placeholder() && s.stage(i).op->reduce_axes.size() == 1 &&
        s.stage(i).scope == ir::MemoryScope::kGlobal) {
      tiled = i;
    }
  }
  ASSERT_GE(tiled, 0) << s.ToString();
  const Stage& dense = s.stage(tiled);
  EXPECT_EQ(dense.location, ComputeLocation::kAttached) << s.ToString();
  const int out = s.StageId(dag.stage(dag.output_ids()[0]).name());
  EXPECT_EQ(dense.attach_stage, out);
  EXPECT_EQ(dense.iters.size(), 13u);
  for (int i = 0; i < s.num_stages(); ++i) {
    if (i != out && i != tiled && !s.stage(i).is_placeholder() &&
        s.stage(i).scope == ir::MemoryScope::kGlobal) {
      EXPECT_EQ(s.stage(i).location, ComputeLocation::kInlined) << s.stage(i).name();
    }
  }
}

bool HasThreadBoundReduce(const Stage& st) {
  for (const auto& it : st.iters) {
    if (it.kind == IteratorKind::kReduce && it.annotation == IteratorAnnotation::kThreadIdxX) {
      return true;
    }
  }
  return false;
}

TEST(Sketch, CudaSoftmaxUsesCrossThreadReduction) {
  ir::ComputeDAG dag = testing::MustBuild(ir::SoftmaxDAG({8, 512}));
  auto sketches = GenerateSketches(TuneContext(dag, Target::H200()));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  EXPECT_LT(sketches->size(), 10u);
  const int out_dag = dag.output_ids()[0];
  bool fused = false;
  for (const State& s : *sketches) {
    int reductions = 0, cross = 0, attached = 0;
    for (int i = 0; i < s.num_stages(); ++i) {
      const Stage& st = s.stage(i);
      if (st.is_placeholder() || st.op->reduce_axes.empty()) continue;
      ++reductions;
      cross += HasThreadBoundReduce(st);
      attached += st.location == ComputeLocation::kAttached &&
                  st.attach_stage == s.StageId(dag.stage(out_dag).name());
    }
    EXPECT_EQ(reductions, 2);
    // Both reductions cross-thread and computed at the row loop of the normalize stage: one kernel.
    if (cross == 2 && attached == 2) fused = true;
  }
  EXPECT_TRUE(fused);
}

TEST(Sketch, ElementwiseStagesAreInlinedIntoASimpleSketch) {
  // relu(x) + y: the relu stage is inlined (cpu: strictly inlineable; cuda: every injective stage).
  auto x = ir::Placeholder("X", {6, 10});
  auto y = ir::Placeholder("Y", {6, 10});
  ASSERT_TRUE(x.ok() && y.ok());
  auto r = ir::Compute("R", {6, 10}, [&](const std::vector<ir::Expr>& a) {
    return ir::Max((*x)(a), ir::FloatConst(0.0));
  });
  ASSERT_TRUE(r.ok());
  auto o =
      ir::Compute("O", {6, 10}, [&](const std::vector<ir::Expr>& a) { return (*r)(a) + (*y)(a); });
  ASSERT_TRUE(o.ok());
  ir::ComputeDAG dag = *ir::ComputeDAG::Create({*o});
  for (const Target& target : {Target::H200(), Target::HostCpu()}) {
    auto sketches = GenerateSketches(TuneContext(dag, target));
    ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
    ASSERT_EQ(sketches->size(), 1u) << target.ToString();
    const State& s = (*sketches)[0];
    ASSERT_EQ(s.steps().size(), 1u);
    EXPECT_TRUE(std::holds_alternative<schedule::ComputeInlineStep>(s.steps()[0]));
    EXPECT_EQ(s.stage(s.StageId("R")).location, ComputeLocation::kInlined);
  }
  // A single elementwise operator has nothing to derive.
  ir::ComputeDAG relu = testing::MustBuild(ir::UnaryDAG(ir::UnaryOp::kRelu, {5, 7}));
  auto sketches = GenerateSketches(TuneContext(relu, Target::H200()));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  ASSERT_EQ(sketches->size(), 1u);
  EXPECT_TRUE((*sketches)[0].steps().empty());
}

// A cpu elementwise stage gets a second sketch, fused and split into outer × grain × vector parts:
// sampled states draw the vector width and the parallel grain (the plain sketch alone gives
// relu 2 states), and each of them lowers to the same values as the naive program.
TEST(Sketch, CpuElementwiseSpaceDrawsVectorWidthAndGrain) {
  ir::ComputeDAG relu = testing::MustBuild(ir::UnaryDAG(ir::UnaryOp::kRelu, {64, 48}));
  const Target cpu = Target::HostCpu();
  auto sketches = GenerateSketches(TuneContext(relu, cpu));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  ASSERT_EQ(sketches->size(), 2u);
  std::mt19937_64 rng(11);
  const std::vector<State> states = testing::SampleInContext(*sketches, relu, cpu, 64, rng);
  std::set<std::string> distinct;
  std::set<int64_t> vector_widths;
  std::set<int64_t> parallel_extents;
  for (const State& s : states) {
    distinct.insert(StepsCanonicalText(s.steps()));
    const Stage& st = s.stage(s.num_stages() - 1);
    for (const auto& it : st.iters) {
      if (it.annotation == IteratorAnnotation::kVectorize) vector_widths.insert(it.extent);
      if (it.annotation == IteratorAnnotation::kParallel) parallel_extents.insert(it.extent);
    }
  }
  EXPECT_GE(distinct.size(), 8u);
  EXPECT_GE(vector_widths.size(), 3u);
  EXPECT_GE(parallel_extents.size(), 3u);
  // Every sampled state computes relu: its lowering, interpreted, gives max(x, 0) exactly.
  const ir::BufferMap inputs = ir::MakeRandomInputs(relu, 5);
  const ir::HostBuffer& x = inputs.begin()->second;
  for (const State& s : states) {
    absl::StatusOr<schedule::LoweredKernel> k = schedule::Lower(relu, s, cpu);
    ASSERT_TRUE(k.ok()) << k.status();
    ir::BufferMap bufs = inputs;
    for (size_t p = k->nest.num_inputs; p < k->nest.params.size(); ++p) {
      const ir::BufferDecl& d = k->nest.params[p];
      bufs[d.name] = ir::HostBuffer::Zeros(d.dtype, d.shape);
    }
    ASSERT_TRUE(ir::Interpret(k->nest, bufs).ok());
    const ir::HostBuffer& got = bufs.at(k->nest.params.back().name);
    ASSERT_EQ(got.data.size(), x.data.size());
    for (size_t e = 0; e < x.data.size(); ++e) {
      ASSERT_EQ(got.data[e], std::max(x.data[e], 0.0)) << StepsCanonicalText(s.steps());
    }
  }
}

TEST(Sketch, CpuMatmulIsSsrsrs) {
  ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({64, 32}, {32, 48}));
  auto sketches = GenerateSketches(TuneContext(dag, Target::HostCpu()));
  ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk());
  EXPECT_LT(sketches->size(), 10u);
  const std::vector<std::string> ssrsrs = {"i.0", "j.0", "i.1", "j.1", "k.0",
                                           "i.2", "j.2", "k.1", "i.3", "j.3"};
  bool plain = false, cached = false;
  for (const State& s : *sketches) {
    for (int i = 0; i < s.num_stages(); ++i) {
      std::vector<std::string> names;
      for (const auto& it : s.stage(i).iters) names.push_back(it.name);
      if (names != ssrsrs) continue;
      if (s.stage(i).name() == "C") plain = true;
      if (s.stage(i).name() == "C.local") {
        cached = s.stage(i).location == ComputeLocation::kAttached;
      }
    }
  }
  EXPECT_TRUE(plain);
  EXPECT_TRUE(cached);
}

TEST(Sketch, EverySketchOfTheLibraryIsValidOnceAnnotated) {
  int checked = 0;
  for (const auto& w : testing::LibraryWorkloads()) {
    for (const Target& target : {Target::H200(), Target::HostCpu()}) {
      auto sketches = GenerateSketches(TuneContext(w.dag, target));
      ASSERT_THAT(sketches.status(), tilesearch::testing::IsOk()) << w.name;
      EXPECT_LT(sketches->size(), 10u) << w.name;
      std::mt19937_64 rng(17);
      for (const State& sk : *sketches) {
        SCOPED_TRACE(w.name + " on " + target.ToString() + "\n" + sk.ToString());
        auto ones = schedule::ReplaySteps(w.dag, FillUnfilledWithOnes(sk.steps()));
        ASSERT_THAT(ones.status(), tilesearch::testing::IsOk());
        // On cpu unit tiles are already a valid program; GPU sketches need their bindings.
        if (!target.is_gpu()) {
          EXPECT_THAT(schedule::Lower(w.dag, *ones, target).status(), tilesearch::testing::IsOk());
        }
        absl::Status last;
        bool valid = false;
        for (int attempt = 0; attempt < 200 && !valid; ++attempt) {
          auto s = testing::StateOf(testing::AnnotateInContext(sk, w.dag, target, rng));
          valid = s.ok();
          if (!s.ok()) last = s.status();
        }
        EXPECT_TRUE(valid) << last;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 28);
}

TEST(Sketch, SketchesAreDeterministic) {
  ir::Conv2dParams pad1;
  pad1.padding = {1, 1};
  ir::ComputeDAG dag = testing::MustBuild(
      ir::Conv2dNchwPaddedDAG({1, 4, 6, 6}, {8, 4, 3, 3}, ir::ScalarType::kFloat32, pad1));
  for (const Target& target : {Target::H200(), Target::HostCpu()}) {
    auto a = GenerateSketches(TuneContext(dag, target));
    auto b = GenerateSketches(TuneContext(dag, target));
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].ToString(), (*b)[i].ToString());
  }
}

}  // namespace
}  // namespace tilesearch::search
