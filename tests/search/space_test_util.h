// Workloads shared by the schedule-space tests (sketch, annotation, mutation): small shapes of the
// library's operators, so that lowering and interpreting every sampled program stays fast.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "costmodel/cost_model.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/ops/conv.h"
#include "ir/ops/elementwise.h"
#include "ir/ops/fused.h"
#include "ir/ops/layout.h"
#include "ir/ops/linear.h"
#include "ir/ops/norm.h"
#include "ir/ops/pool.h"
#include "ir/ops/reduce.h"
#include "schedule/lower.h"
#include "search/annotation.h"
#include "search/evolutionary_search.h"
#include "search/local_search.h"
#include "search/tune_context.h"

namespace tilesearch::search::testing {

struct Workload {
  std::string name;
  ir::ComputeDAG dag;
};

inline ir::ComputeDAG MustBuild(absl::StatusOr<ir::ComputeDAG> dag) {
  EXPECT_TRUE(dag.ok()) << dag.status();
  return *std::move(dag);
}

/// A context whose sketches are the SIMT ones only (no tensor_core step): for tests of the
/// multi-level tiling structure itself.
inline TuneContext SimtContext(const ir::ComputeDAG& dag, const Target& target) {
  SketchOptions sketch;
  sketch.tensor_cores = false;
  return TuneContext(dag, target, SearchOptions{}, 0, sketch);
}

/// The state of a candidate, or its error (tests that look at the state only).
inline absl::StatusOr<schedule::State> StateOf(absl::StatusOr<Candidate> c) {
  if (!c.ok()) return c.status();
  return std::move(c->state);
}

/// The states of candidates, in order.
inline std::vector<schedule::State> StatesOf(std::vector<Candidate> candidates) {
  std::vector<schedule::State> out;
  for (Candidate& c : candidates) out.push_back(std::move(c.state));
  return out;
}

/// SampleInitialPopulation in a context of (dag, target, options) whose generator continues the
/// test's `rng` (its state after the call is the context's).
inline std::vector<schedule::State> SampleInContext(const std::vector<schedule::State>& sketches,
                                                    const ir::ComputeDAG& dag, const Target& target,
                                                    int n, std::mt19937_64& rng,
                                                    const AnnotationOptions& options = {}) {
  TuneContext ctx(dag, target, options);
  ctx.rng() = rng;
  std::vector<schedule::State> out = SampleInitialPopulation(sketches, n, ctx);
  rng = ctx.rng();
  return out;
}

/// AnnotateSketch in a context of (dag, target, options) whose generator continues the test's
/// `rng`.
inline absl::StatusOr<Candidate> AnnotateInContext(const schedule::State& sketch,
                                                   const ir::ComputeDAG& dag, const Target& target,
                                                   std::mt19937_64& rng,
                                                   const AnnotationOptions& options = {}) {
  TuneContext ctx(dag, target, options);
  ctx.rng() = rng;
  absl::StatusOr<Candidate> out = AnnotateSketch(sketch, ctx);
  rng = ctx.rng();
  return out;
}

/// Candidates of `states` for ctx.target(), each lowered with schedule::Lower (a null lowering when
/// it fails), as the tuner makes them of logged records.
inline std::vector<Candidate> LoweredCandidates(const std::vector<schedule::State>& states,
                                                const TuneContext& ctx) {
  std::vector<Candidate> out;
  for (const schedule::State& s : states) {
    Candidate c{s, nullptr, 0};
    absl::StatusOr<schedule::LoweredKernel> k = schedule::Lower(ctx.dag(), s, ctx.target());
    if (k.ok()) c.lowered = std::make_shared<const schedule::LoweredKernel>(*std::move(k));
    out.push_back(std::move(c));
  }
  return out;
}

/// EvolutionarySearch in a context of (dag, target, options) whose generator continues the test's
/// `rng`; `best_states` are lowered into candidates (LoweredCandidates); the states come back.
inline absl::StatusOr<std::vector<schedule::State>> EvolveInContext(
    const ir::ComputeDAG& dag, const Target& target, const std::vector<schedule::State>& sketches,
    costmodel::CostModel& model, const std::unordered_set<uint64_t>& measured,
    const std::vector<schedule::State>& best_states, int n_out, const SearchOptions& options,
    std::mt19937_64& rng, SearchProfile* profile = nullptr) {
  TuneContext ctx(dag, target, options);
  ctx.rng() = rng;
  absl::StatusOr<std::vector<Candidate>> out = EvolutionarySearch(
      ctx, sketches, model, measured, LoweredCandidates(best_states, ctx), n_out, profile);
  rng = ctx.rng();
  if (!out.ok()) return out.status();
  return StatesOf(*std::move(out));
}

/// The model's scores of `states` (lowered with LoweredCandidates, then ScoreCandidates).
inline absl::StatusOr<std::vector<double>> ScoreInContext(
    const ir::ComputeDAG& dag, const Target& target, const std::vector<schedule::State>& states,
    costmodel::CostModel& model) {
  TuneContext ctx(dag, target);
  return ScoreCandidates(LoweredCandidates(states, ctx), ctx, model);
}

/// NeighborStates in a context of (dag, target, options); the states come back.
inline absl::StatusOr<std::vector<schedule::State>> NeighborsInContext(
    const schedule::State& state, const ir::ComputeDAG& dag, const Target& target,
    const AnnotationOptions& options = {}) {
  absl::StatusOr<std::vector<Candidate>> out =
      NeighborStates(state, TuneContext(dag, target, options));
  if (!out.ok()) return out.status();
  return StatesOf(*std::move(out));
}

/// LocalSearchCandidates in a context of (dag, target, options), `best_states` lowered into
/// candidates (LoweredCandidates); the states come back.
inline absl::StatusOr<std::vector<schedule::State>> LocalInContext(
    const ir::ComputeDAG& dag, const Target& target,
    const std::vector<schedule::State>& best_states, const std::unordered_set<uint64_t>& measured,
    int n_out, int max_states, costmodel::CostModel& model, const AnnotationOptions& options = {}) {
  TuneContext ctx(dag, target, options);
  absl::StatusOr<std::vector<Candidate>> out = LocalSearchCandidates(
      ctx, LoweredCandidates(best_states, ctx), measured, n_out, max_states, model);
  if (!out.ok()) return out.status();
  return StatesOf(*std::move(out));
}

/// One small instance of (nearly) every kind of library operator.
inline std::vector<Workload> LibraryWorkloads() {
  ir::Conv2dParams pad1;
  pad1.padding = {1, 1};
  ir::Conv2dParams strided;
  strided.stride = {2, 2};
  strided.padding = {1, 1};
  ir::Pool2dParams pool;
  pool.kernel = {3, 3};
  pool.stride = std::array<int64_t, 2>{2, 2};
  return {
      {"matmul", MustBuild(ir::MatmulDAG({16, 12}, {12, 20}))},
      {"batch_matmul", MustBuild(ir::BatchMatmulDAG({2, 8, 6}, {2, 6, 10}))},
      {"dense_bias_relu", MustBuild(ir::DenseBiasReluDAG({8, 12}, {16, 12}, {16}))},
      {"matmul_scale_residual", MustBuild(ir::MatmulScaleResidualDAG(
                                    {8, 6}, {6, 12}, {8, 12}, ir::ScalarType::kFloat32, 0.5))},
      {"gemv", MustBuild(ir::GemvDAG({12, 40}, {40}))},
      {"conv2d_padded", MustBuild(ir::Conv2dNchwPaddedDAG({1, 4, 6, 6}, {8, 4, 3, 3},
                                                          ir::ScalarType::kFloat32, pad1))},
      {"conv2d_strided",
       MustBuild(ir::Conv2dNchwDAG({1, 2, 6, 6}, {4, 2, 3, 3}, ir::ScalarType::kFloat32, strided))},
      {"softmax", MustBuild(ir::SoftmaxDAG({4, 64}))},
      {"layernorm", MustBuild(ir::LayerNormDAG({4, 48}))},
      {"reduce_sum", MustBuild(ir::ReduceDAG(ir::ReduceOp::kSum, {4, 50, 3}, {1}))},
      {"relu", MustBuild(ir::UnaryDAG(ir::UnaryOp::kRelu, {5, 7}))},
      {"add_broadcast", MustBuild(ir::BinaryDAG(ir::BinaryOp::kAdd, {4, 1}, {1, 6}))},
      {"transpose", MustBuild(ir::TransposeDAG({3, 4, 5}, {2, 0, 1}))},
      {"max_pool2d", MustBuild(ir::MaxPool2dDAG({1, 2, 7, 7}, ir::ScalarType::kFloat32, pool))},
  };
}

}  // namespace tilesearch::search::testing
