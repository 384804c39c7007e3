// Local search around the best measured states (search/local_search.h).
// NeighborStates on small cpu and cuda matmuls (cuda lowers and checks validity without a GPU)
// against an enumeration written here: per tile split, the length vectors reachable by moving one
// prime factor (by trial division) between two levels, the outer rest a level when the lengths
// divide the extent, filtered by the public validity checks; per pragma, every other value. Every
// neighbor differs from its state in one decision (or is the coupled widest-fetch + cp.async
// edit), replays, lowers, and none repeats or equals the state. The 128×128 hand schedule of
// matmul 4096³ and its state in the 704-trial log (bench/NOTES.md). LocalSearchCandidates: the
// measured set, n_out, the round-robin order under a deterministic model. Tune with
// local_search_fraction 1: every later candidate is a neighbor of a state measured before its
// round. Option errors.
#include "search/local_search.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include "base/status_matchers.h"
#include "costmodel/cost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ops/linear.h"
#include "ir/ops/registry.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/matmul_like.h"
#include "schedule/schedule_file.h"
#include "search/annotation.h"
#include "search/log_io.h"
#include "search/measure_record.h"
#include "search/sketch.h"
#include "search/tensor_core_space.h"
#include "search/tuner.h"
#include "tests/search/feature_sum_model.h"
#include "tests/search/space_test_util.h"
#include "tests/search/tiny_tune_options.h"

namespace tilesearch::search {
namespace {

using schedule::PragmaStep;
using schedule::SplitStep;
using schedule::State;
using schedule::Step;
using ::testing::HasSubstr;
using tilesearch::testing::IsOk;
using tilesearch::testing::StatusIs;

// Local search enumerates split and pragma edits: the states come from the SIMT sketches (a
// tensor_core step's decisions are mutation's, search/tensor_core_space.h).
std::vector<State> Sample(const ir::ComputeDAG& dag, const Target& target, int n, uint64_t seed) {
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(testing::SimtContext(dag, target));
  EXPECT_THAT(sketches, IsOk());
  std::mt19937_64 rng(seed);
  return testing::SampleInContext(*sketches, dag, target, n, rng);
}

// Indices of the steps in which a and b (same length) differ.
std::vector<int> Diff(const std::vector<Step>& a, const std::vector<Step>& b) {
  std::vector<int> d;
  if (a.size() != b.size()) return {-1};
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i])) d.push_back(static_cast<int>(i));
  }
  return d;
}

bool OneLengthAnnotated(const std::vector<Step>& steps, int i, schedule::IteratorAnnotation an) {
  const auto* sp = std::get_if<SplitStep>(&steps[i]);
  if (sp == nullptr || sp->lengths.size() != 1 || i + 1 >= static_cast<int>(steps.size())) {
    return false;
  }
  const auto* a = std::get_if<schedule::AnnotationStep>(&steps[i + 1]);
  return a != nullptr && a->stage_id == sp->stage_id && a->iter_id == sp->iter_id + 1 &&
         a->annotation == an;
}
bool IsFetchWidth(const std::vector<Step>& steps, int i) {
  return OneLengthAnnotated(steps, i, schedule::IteratorAnnotation::kVectorize);
}
bool IsThreadCount(const std::vector<Step>& steps, int i) {
  return OneLengthAnnotated(steps, i, schedule::IteratorAnnotation::kThreadIdxX);
}

// A tile split by this file's reading of the rules: known extent > 1, all lengths known, and (on
// GPU) neither a fetch width nor a thread count.
bool IsTileSplit(const std::vector<Step>& steps, int i, bool gpu) {
  const auto* sp = std::get_if<SplitStep>(&steps[i]);
  if (sp == nullptr || sp->extent <= 1) return false;
  for (const auto& l : sp->lengths) {
    if (!l.has_value()) return false;
  }
  if (gpu && (IsFetchWidth(steps, i) || IsThreadCount(steps, i))) return false;
  return true;
}

std::vector<int64_t> Lengths(const SplitStep& sp) {
  std::vector<int64_t> out;
  for (const auto& l : sp.lengths) out.push_back(*l);
  return out;
}

// The length vectors reachable from split `sp` by moving one prime factor between two levels.
std::set<std::vector<int64_t>> NaiveFactorMoves(const SplitStep& sp, int64_t max_innermost) {
  std::vector<int64_t> lengths = Lengths(sp);
  int64_t prod = 1;
  for (int64_t l : lengths) prod *= l;
  const bool with_rest = sp.extent % prod == 0;
  std::vector<int64_t> levels;
  if (with_rest) levels.push_back(sp.extent / prod);
  levels.insert(levels.end(), lengths.begin(), lengths.end());
  std::set<std::vector<int64_t>> out;
  for (size_t src = 0; src < levels.size(); ++src) {
    for (int64_t p = 2; p <= levels[src]; ++p) {
      bool prime = true;
      for (int64_t q = 2; q < p; ++q) prime = prime && p % q != 0;
      if (!prime || levels[src] % p != 0) continue;
      for (size_t dst = 0; dst < levels.size(); ++dst) {
        if (dst == src) continue;
        std::vector<int64_t> w = levels;
        w[src] /= p;
        w[dst] *= p;
        if (w.back() > max_innermost && w.back() > levels.back()) continue;
        out.insert(std::vector<int64_t>(w.begin() + (with_rest ? 1 : 0), w.end()));
      }
    }
  }
  return out;
}

// Replays and lowers (+ the GPU limits the search enforces): the validity of an edited step list.
bool Valid(const ir::ComputeDAG& dag, const std::vector<Step>& steps, int edited,
           const Target& target) {
  const AnnotationOptions options;
  if (!internal::GpuTileRunFits(TuneContext(dag, target, options), steps, edited)) return false;
  absl::StatusOr<State> s = schedule::ReplaySteps(dag, steps);
  if (!s.ok()) return false;
  absl::StatusOr<schedule::LoweredKernel> k = schedule::Lower(dag, *s, target);
  return k.ok() && internal::CheckRegisterEstimate(*k, target, options).ok();
}

// The largest of {4, 2, 1} dividing the fetched extent of fetch-width split steps[i] whose bytes
// (float32) fit the target's vector.
int64_t WidestFetch(const ir::ComputeDAG& dag, const std::vector<Step>& steps, int i,
                    const Target& target) {
  const auto& sp = std::get<SplitStep>(steps[i]);
  absl::StatusOr<State> prefix =
      schedule::ReplaySteps(dag, std::vector<Step>(steps.begin(), steps.begin() + i));
  EXPECT_THAT(prefix, IsOk());
  const int64_t extent = prefix->stage(sp.stage_id).iters[sp.iter_id].extent;
  for (int64_t w : {4, 2, 1}) {
    if (extent % w == 0 && w * 4 <= target.max_vector_bytes) return w;
  }
  return 1;
}

struct NeighborCounts {
  int total = 0;
  int tile = 0;
  int coupled = 0;
};

// Checks NeighborStates(state) against the naive enumeration; returns the counts.
NeighborCounts CheckNeighbors(const ir::ComputeDAG& dag, const State& state, const Target& target) {
  const bool gpu = target.is_gpu();
  const AnnotationOptions options;
  absl::StatusOr<std::vector<State>> neighbors = testing::NeighborsInContext(state, dag, target);
  EXPECT_THAT(neighbors, IsOk());
  if (!neighbors.ok()) return {};
  const std::vector<Step>& steps = state.steps();
  NeighborCounts counts;
  counts.total = static_cast<int>(neighbors->size());
  std::set<uint64_t> hashes;
  // Per edited step: the neighbors' versions of it.
  std::map<int, std::vector<Step>> single;
  for (const State& n : *neighbors) {
    EXPECT_TRUE(hashes.insert(StepsHash(n.steps())).second) << "a neighbor repeats";
    EXPECT_NE(StepsHash(n.steps()), StepsHash(steps)) << "the state itself is a neighbor";
    absl::StatusOr<State> replayed = schedule::ReplaySteps(dag, n.steps());
    EXPECT_THAT(replayed, IsOk());
    if (replayed.ok()) {
      EXPECT_THAT(schedule::Lower(dag, *replayed, target), IsOk());
    }
    const std::vector<int> all = Diff(steps, n.steps());
    if (all.empty() || all[0] == -1) {
      ADD_FAILURE() << "a neighbor equal to the state or with another step count";
      continue;
    }
    // A fetch width carries along the recorded extent of its root stage's later split (the rest
    // of the vector split): differences in a split's extent alone are not decisions.
    std::vector<int> d;
    for (int i : all) {
      const auto* a = std::get_if<SplitStep>(&steps[i]);
      const auto* b = std::get_if<SplitStep>(&n.steps()[i]);
      if (a != nullptr && b != nullptr && a->extent != b->extent) {
        SplitStep same = *b;
        same.extent = a->extent;
        if (same == *a) continue;
      }
      d.push_back(i);
    }
    if (d.empty()) {
      ADD_FAILURE() << "only extents differ";
      continue;
    }
    if (d.size() > 1) {
      // The coupled neighbor: every fetch at its widest, every pipeline pragma at 3 or 4.
      const bool fetch_or_pipeline_only = std::all_of(d.begin(), d.end(), [&](int i) {
        const auto* p = std::get_if<PragmaStep>(&n.steps()[i]);
        return (gpu && IsFetchWidth(steps, i)) || (p != nullptr && p->software_pipeline >= 0);
      });
      if (!fetch_or_pipeline_only) {
        ADD_FAILURE() << "a neighbor differs in " << d.size() << " steps";
        continue;
      }
      int pipeline = -1;
      for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
        if (gpu && IsFetchWidth(steps, i)) {
          EXPECT_EQ(*std::get<SplitStep>(n.steps()[i]).lengths[0],
                    WidestFetch(dag, steps, i, target));
        } else if (const auto* p = std::get_if<PragmaStep>(&n.steps()[i]);
                   p != nullptr && p->software_pipeline >= 0) {
          EXPECT_TRUE(p->software_pipeline == 3 || p->software_pipeline == 4);
          if (pipeline >= 0) {
            EXPECT_EQ(p->software_pipeline, pipeline);
          }
          pipeline = p->software_pipeline;
        }
      }
      ++counts.coupled;
      continue;
    }
    single[d[0]].push_back(n.steps()[d[0]]);
  }
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    std::vector<Step> expected;  // the valid single edits of step i, by this file's enumeration
    if (IsTileSplit(steps, i, gpu)) {
      for (const auto& lengths :
           NaiveFactorMoves(std::get<SplitStep>(steps[i]), options.max_innermost_split_factor)) {
        std::vector<Step> edited = steps;
        auto& sp = std::get<SplitStep>(edited[i]);
        for (size_t k = 0; k < lengths.size(); ++k) sp.lengths[k] = lengths[k];
        if (Valid(dag, edited, i, target)) expected.push_back(edited[i]);
      }
    } else if (const auto* p = std::get_if<PragmaStep>(&steps[i])) {
      std::vector<int64_t> values;
      if (p->software_pipeline >= 0) {
        values = {0, 1, 2, 3, 4};
      } else {
        values = gpu ? options.gpu_unroll_steps : options.cpu_unroll_steps;
      }
      for (int64_t v : values) {
        std::vector<Step> edited = steps;
        auto& q = std::get<PragmaStep>(edited[i]);
        if (p->software_pipeline >= 0) {
          if (v == p->software_pipeline) continue;
          q.software_pipeline = static_cast<int>(v);
        } else {
          if (v == p->auto_unroll_max_step) continue;
          q.auto_unroll_max_step = v;
        }
        if (Valid(dag, edited, i, target)) expected.push_back(edited[i]);
      }
    } else {
      continue;  // fetch widths and thread counts: checked as single edits above
    }
    std::vector<Step> got = single[i];
    auto less = [](const Step& a, const Step& b) {
      return schedule::StepToString(a) < schedule::StepToString(b);
    };
    std::sort(got.begin(), got.end(), less);
    std::sort(expected.begin(), expected.end(), less);
    EXPECT_EQ(got.size(), expected.size()) << "step " << i << ": " << StepToString(steps[i]);
    EXPECT_TRUE(got == expected) << "step " << i << ": " << StepToString(steps[i]);
    if (IsTileSplit(steps, i, gpu)) counts.tile += static_cast<int>(got.size());
  }
  // Every single edit is of a decision: a tile split, a pragma, or (GPU) a fetch width or thread
  // count.
  for (const auto& [i, edits] : single) {
    const bool decision = IsTileSplit(steps, i, gpu) ||
                          std::holds_alternative<PragmaStep>(steps[i]) ||
                          (gpu && (IsFetchWidth(steps, i) || IsThreadCount(steps, i)));
    EXPECT_TRUE(decision) << "edited step " << i << ": " << StepToString(steps[i]);
  }
  return counts;
}

TEST(NeighborStates, CpuMatmulMatchesTheNaiveEnumeration) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}));
  const std::vector<State> states = Sample(dag, Target::HostCpu(), 4, 5);
  ASSERT_GE(states.size(), 2u);
  for (const State& s : states) {
    const NeighborCounts c = CheckNeighbors(dag, s, Target::HostCpu());
    EXPECT_GT(c.tile, 0);
    EXPECT_EQ(c.coupled, 0);  // no pipeline pragmas on cpu
  }
}

TEST(NeighborStates, CudaMatmulMatchesTheNaiveEnumeration) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({64, 64}, {64, 64}));
  const std::vector<State> states = Sample(dag, Target::H200(), 4, 9);
  ASSERT_GE(states.size(), 2u);
  for (const State& s : states) {
    const NeighborCounts c = CheckNeighbors(dag, s, Target::H200());
    EXPECT_GT(c.tile, 0);
  }
}

// A tensor-core state's neighbors: each differs from it in one decision of its tensor_core step,
// and there is one per fitting value of each decision.
TEST(NeighborStates, TensorCoreStepEditsOneDecisionEach) {
  ir::OpArgs args;
  args.shapes = {{128, 256}, {256, 128}};
  args.dtype = ir::ScalarType::kFloat16;
  const ir::ComputeDAG dag = testing::MustBuild(ir::BuildOp("matmul", args));
  TuneContext ctx(dag, Target::H200());
  absl::StatusOr<std::vector<State>> sketches = GenerateSketches(ctx);
  ASSERT_THAT(sketches, IsOk());
  const State* sketch = nullptr;
  for (const State& s : *sketches) {
    for (const Step& st : s.steps()) {
      if (std::holds_alternative<schedule::TensorCoreStep>(st)) sketch = &s;
    }
  }
  ASSERT_NE(sketch, nullptr);
  absl::StatusOr<Candidate> c = AnnotateSketch(*sketch, ctx);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<std::vector<Candidate>> n = NeighborStates(c->state, ctx);
  ASSERT_THAT(n.status(), IsOk());
  int tc_step = -1;
  for (int i = 0; i < static_cast<int>(c->state.steps().size()); ++i) {
    if (std::holds_alternative<schedule::TensorCoreStep>(c->state.steps()[i])) tc_step = i;
  }
  ASSERT_GE(tc_step, 0);
  const auto& t = std::get<schedule::TensorCoreStep>(c->state.steps()[tc_step]);
  const schedule::Stage& st = c->state.stage(t.stage_id);
  absl::StatusOr<schedule::MatmulLike> mm = schedule::AnalyzeMatmulLike(*st.op, st.op->body);
  ASSERT_THAT(mm.status(), IsOk());
  std::set<std::string> expected;
  for (int d = 0; d < kTensorCoreDecisions; ++d) {
    for (const auto& v : TensorCoreStepVariants(t, *mm, c->state, Target::H200(), d)) {
      expected.insert(v.ToString());
    }
  }
  std::set<std::string> got;
  for (const Candidate& nb : *n) {
    const std::vector<int> d = Diff(c->state.steps(), nb.state.steps());
    ASSERT_EQ(d, std::vector<int>{tc_step});
    // Exactly one decision moved (warp rows and warps along m move block_m together, and so on).
    const auto& u = std::get<schedule::TensorCoreStep>(nb.state.steps()[tc_step]);
    // Switching the instruction (mma.sync <-> wgmma) is one decision that re-tiles the block;
    // turning TMA off takes its producer warpgroup (and persistence, ping-pong, stream-k) with it.
    const int decisions = t.warpgroup != u.warpgroup
                              ? 1
                              : (t.block_k != u.block_k) + (t.pipeline != u.pipeline) +
                                    (t.pad != u.pad) + (t.raster != u.raster) +
                                    (t.split_k != u.split_k) +
                                    (t.tma != u.tma || t.warp_specialized != u.warp_specialized ||
                                     t.persistent != u.persistent || t.pingpong != u.pingpong ||
                                     t.stream_k != u.stream_k) +
                                    (t.warp_m != u.warp_m || t.block_m != u.block_m) +
                                    (t.warp_n != u.warp_n || t.block_n != u.block_n);
    EXPECT_EQ(decisions, 1) << t.ToString() << " -> " << u.ToString();
    EXPECT_EQ(u.kind, t.kind);
    EXPECT_EQ(u.epilogue, t.epilogue);
    got.insert(StepToString(nb.state.steps()[tc_step]));
  }
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(got, expected);
}

TEST(NeighborStates, DeterministicAndErrors) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}));
  const std::vector<State> states = Sample(dag, Target::HostCpu(), 1, 3);
  ASSERT_EQ(states.size(), 1u);
  auto a = testing::NeighborsInContext(states[0], dag, Target::HostCpu());
  auto b = testing::NeighborsInContext(states[0], dag, Target::HostCpu());
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_TRUE((*a)[i].steps() == (*b)[i].steps());
  // A state of another workload does not replay on this one.
  const ir::ComputeDAG other = testing::MustBuild(ir::MatmulDAG({8, 4}, {4, 6}));
  EXPECT_THAT(testing::NeighborsInContext(states[0], other, Target::HostCpu()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not replay")));
  // The initial state has no decisions: no neighbors.
  auto none = testing::NeighborsInContext(State::Initial(dag), dag, Target::HostCpu());
  ASSERT_THAT(none, IsOk());
  EXPECT_TRUE(none->empty());
}

State LoadHandSchedule(ir::ComputeDAG* dag, Target* target) {
  absl::StatusOr<schedule::ScheduleFile> file =
      schedule::ScheduleFile::Load(std::string(TILESEARCH_SOURCE_DIR) +
                                   "/bench/schedules/matmul_cuda_4096_128x128_cp_async4.json");
  EXPECT_THAT(file, IsOk());
  absl::StatusOr<schedule::ResolvedSchedule> r = file->Resolve();
  EXPECT_THAT(r, IsOk());
  *dag = r->dag;
  *target = file->target;
  return r->state;
}

// The hand schedule of matmul 4096³ ([[2,16,1,4],[2,16,1,4],[8,4]], unroll 512, widths 4/4,
// software_pipeline 4) and the state of its family measured in the 704-trial log
// ([[2,16,2,2],[1,16,2,4],[8,2]], unroll 1024, pipeline 2, widths 1/2): the coupled edit takes the
// latter to widths 4/4 with pipeline 4 in one step.
TEST(NeighborStates, HandScheduleOfMatmul4096) {
  ir::ComputeDAG dag;
  Target target;
  const State hand = LoadHandSchedule(&dag, &target);
  ASSERT_TRUE(target.is_gpu());
  const NeighborCounts c = CheckNeighbors(dag, hand, target);
  std::cout << "hand schedule: " << c.total << " neighbors (" << c.tile << " tile moves, "
            << c.coupled << " coupled)\n";
  ::testing::Test::RecordProperty("hand_schedule_neighbors", c.total);
  EXPECT_GT(c.tile, 20);

  std::vector<Step> logged = hand.steps();
  std::get<SplitStep>(logged[1]).lengths = {2, 16, 2, 2};
  std::get<SplitStep>(logged[2]).lengths = {1, 16, 2, 4};
  std::get<SplitStep>(logged[3]).lengths = {8, 2};
  std::get<SplitStep>(logged[20]).lengths = {1};
  std::get<SplitStep>(logged[25]).lengths = {2};
  std::get<PragmaStep>(logged[29]).auto_unroll_max_step = 1024;
  std::get<PragmaStep>(logged[30]).software_pipeline = 2;
  absl::StatusOr<State> near = schedule::ReplaySteps(dag, logged);
  ASSERT_THAT(near, IsOk());
  const NeighborCounts cn = CheckNeighbors(dag, *near, target);
  EXPECT_EQ(cn.coupled, 2);  // widths 4/4 with pipeline 3, and with 4
  std::vector<Step> coupled = logged;
  std::get<SplitStep>(coupled[20]).lengths = {4};
  std::get<SplitStep>(coupled[25]).lengths = {4};
  std::get<PragmaStep>(coupled[30]).software_pipeline = 4;
  auto neighbors = testing::NeighborsInContext(*near, dag, target);
  ASSERT_THAT(neighbors, IsOk());
  EXPECT_TRUE(std::any_of(neighbors->begin(), neighbors->end(),
                          [&](const State& s) { return s.steps() == coupled; }));
}

std::unordered_set<uint64_t> HashesOf(const std::vector<State>& states) {
  std::unordered_set<uint64_t> out;
  for (const State& s : states) out.insert(StepsHash(s.steps()));
  return out;
}

TEST(LocalSearchCandidates, ExcludesMeasuredAndInterleavesFromTheBestState) {
  const ir::ComputeDAG dag = testing::MustBuild(ir::MatmulDAG({32, 16}, {16, 24}));
  const Target target = Target::HostCpu();
  const std::vector<State> best = Sample(dag, target, 3, 17);
  ASSERT_EQ(best.size(), 3u);
  std::vector<std::vector<State>> neighbors;
  for (const State& s : best) {
    auto n = testing::NeighborsInContext(s, dag, target);
    ASSERT_THAT(n, IsOk());
    ASSERT_GE(n->size(), 4u);
    neighbors.push_back(*n);
  }
  // Measured: the best states and best[0]'s two best-scored neighbors.
  testing::FeatureSumModel model;
  auto scores0 = testing::ScoreInContext(dag, target, neighbors[0], model);
  ASSERT_THAT(scores0, IsOk());
  std::vector<size_t> order(neighbors[0].size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*scores0)[a] > (*scores0)[b]; });
  std::unordered_set<uint64_t> measured = HashesOf(best);
  measured.insert(StepsHash(neighbors[0][order[0]].steps()));
  measured.insert(StepsHash(neighbors[0][order[1]].steps()));

  auto out = testing::LocalInContext(dag, target, best, measured, 5, 2, model);
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->size(), 5u);
  const auto n0 = HashesOf(neighbors[0]);
  const auto n1 = HashesOf(neighbors[1]);
  std::set<uint64_t> seen;
  for (const State& s : *out) {
    const uint64_t h = StepsHash(s.steps());
    EXPECT_FALSE(measured.contains(h));
    EXPECT_TRUE(seen.insert(h).second);
    // max_states 2: neighbors of best[0] or best[1] only.
    EXPECT_TRUE(n0.contains(h) || n1.contains(h));
  }
  // First: best[0]'s best unmeasured neighbor (its third by score).
  EXPECT_TRUE((*out)[0].steps() == neighbors[0][order[2]].steps());
  // Round-robin: the second comes from best[1] (unless it is best[0]'s next one too).
  EXPECT_TRUE(n1.contains(StepsHash((*out)[1].steps())));

  // n_out bounds; 0 gives none; a large n_out gives every unmeasured neighbor of the states once.
  auto zero = testing::LocalInContext(dag, target, best, measured, 0, 3, model);
  ASSERT_THAT(zero, IsOk());
  EXPECT_TRUE(zero->empty());
  auto all = testing::LocalInContext(dag, target, best, measured, 100000, 3, model);
  ASSERT_THAT(all, IsOk());
  std::unordered_set<uint64_t> expected;
  for (const auto& list : neighbors) {
    for (const State& s : list) {
      if (!measured.contains(StepsHash(s.steps()))) expected.insert(StepsHash(s.steps()));
    }
  }
  EXPECT_EQ(HashesOf(*all), expected);
  EXPECT_EQ(all->size(), expected.size());

  EXPECT_THAT(testing::LocalInContext(dag, target, best, measured, -1, 2, model),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("n_out")));
  EXPECT_THAT(testing::LocalInContext(dag, target, best, measured, 4, -1, model),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_states")));
}

std::string TempLog(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/local_search_test_" +
                           std::to_string(::getpid()) + "_" + name + ".jsonl";
  std::remove(path.c_str());
  return path;
}

TuneOptions TinyTune(const std::string& log) {
  TuneOptions o = testing::TinyCpuTuneOptions(log, /*trials=*/12, /*per_round=*/4, /*seed=*/3);
  o.search.local_search_fraction = 1;
  o.search.local_search_states = 2;
  return o;
}

schedule::Workload Matmul32() { return testing::SquareMatmul(32); }

TEST(TuneWithLocalSearch, EveryLaterCandidateNeighborsAMeasuredState) {
  const std::string log = TempLog("all_local");
  const TuneOptions options = TinyTune(log);
  absl::StatusOr<TuneResult> r = Tune(Matmul32(), Target::HostCpu(), options);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->rounds.size(), 3u);
  ASSERT_EQ(r->local_search_trials.size(), 3u);
  EXPECT_EQ(r->local_search_trials[0], 0);  // nothing measured before the first round
  absl::StatusOr<LogContents> contents = ReadLog(log);
  ASSERT_THAT(contents, IsOk());
  const std::vector<MeasureRecord>& records = contents->records;
  ASSERT_EQ(records.size(), 12u);
  // Each round line in the log says how many of its trials came from local search, and the
  // fraction it ran with (every round: the fraction is > 0, the first round has 0 trials from it).
  ASSERT_EQ(contents->rounds.size(), 3u);
  for (size_t round = 0; round < contents->rounds.size(); ++round) {
    SCOPED_TRACE(round);
    EXPECT_EQ(contents->rounds[round].local_search_trials, r->local_search_trials[round]);
    EXPECT_EQ(contents->rounds[round].local_search_fraction, 1.0);
    EXPECT_EQ(r->rounds[round].local_search_trials, r->local_search_trials[round]);
  }
  const ir::ComputeDAG dag = testing::MustBuild(Matmul32().Build());
  for (size_t round = 1; round < r->rounds.size(); ++round) {
    const int64_t first = r->rounds[round].first_trial;
    EXPECT_EQ(r->local_search_trials[round], r->rounds[round].trials);
    // The neighbors of every valid state measured before the round.
    std::unordered_set<uint64_t> near;
    for (int64_t t = 0; t < first; ++t) {
      if (!records[t].valid()) continue;
      auto s = schedule::ReplaySteps(dag, records[t].steps);
      ASSERT_THAT(s, IsOk());
      auto n = testing::NeighborsInContext(*s, dag, Target::HostCpu());
      ASSERT_THAT(n, IsOk());
      for (const State& x : *n) near.insert(StepsHash(x.steps()));
    }
    for (int64_t t = first; t < first + r->local_search_trials[round]; ++t) {
      EXPECT_TRUE(near.contains(StepsHash(records[t].steps))) << "trial " << t;
    }
  }
  std::remove(log.c_str());
}

// The best measured states local search starts from do not depend on the population: with a
// population of 4, init_measured_ratio · population rounds to 0 seeds, and local search still
// takes every later round (it took none before the fix).
TEST(TuneWithLocalSearch, SmallPopulationStillSearchesLocally) {
  const std::string log = TempLog("small_population");
  TuneOptions o = TinyTune(log);
  o.search.population = 4;
  o.search.init_min_population = 4;
  ASSERT_EQ(static_cast<int>(o.search.init_measured_ratio * o.search.population), 0);
  absl::StatusOr<TuneResult> r = Tune(Matmul32(), Target::HostCpu(), o);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->rounds.size(), 3u);
  ASSERT_EQ(r->local_search_trials.size(), 3u);
  for (size_t round = 1; round < r->rounds.size(); ++round) {
    EXPECT_GT(r->local_search_trials[round], 0) << "round " << round;
    EXPECT_EQ(r->local_search_trials[round], r->rounds[round].trials) << "round " << round;
  }
  std::remove(log.c_str());
}

TEST(TuneWithLocalSearch, OptionErrors) {
  const std::string log = TempLog("errors");
  TuneOptions o = TinyTune(log);
  o.search.local_search_fraction = 1.5;
  EXPECT_THAT(Tune(Matmul32(), Target::HostCpu(), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("local_search_fraction")));
  o.search.local_search_fraction = std::nan("");
  EXPECT_THAT(Tune(Matmul32(), Target::HostCpu(), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("local_search_fraction")));
  o.search.local_search_fraction = 0.5;
  o.search.local_search_states = 0;
  EXPECT_THAT(Tune(Matmul32(), Target::HostCpu(), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("local_search_states")));
  std::remove(log.c_str());
}

}  // namespace
}  // namespace tilesearch::search
