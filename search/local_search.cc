// Local search around the best measured states (our addition; see local_search.h).
#include "search/local_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <variant>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/apply_step.h"
#include "schedule/matmul_like.h"
#include "search/evolutionary_search.h"
#include "search/measure_record.h"
#include "search/mutation_internal.h"
#include "search/tensor_core_space.h"

namespace tilesearch::search {

using schedule::State;
using schedule::Step;

namespace {

// The distinct prime factors of n ≥ 1, ascending.
std::vector<int64_t> PrimeFactors(int64_t n) {
  std::vector<int64_t> p;
  for (int64_t f = 2; f * f <= n; ++f) {
    if (n % f != 0) continue;
    p.push_back(f);
    while (n % f == 0) n /= f;
  }
  if (n > 1) p.push_back(n);
  return p;
}

// Collects the valid, distinct neighbors of one state.
class Neighbors {
 public:
  Neighbors(const TuneContext& ctx, const std::vector<Step>& steps) : ctx_(ctx) {
    seen_.insert(StepsHash(steps));
  }

  // Adds `edited` when it is new and valid.
  void Add(const std::vector<Step>& edited) {
    if (!seen_.insert(StepsHash(edited)).second) return;
    absl::StatusOr<Candidate> c = internal::FinishEdit(ctx_, edited);
    if (c.ok()) out_.push_back(*std::move(c));
  }

  std::vector<Candidate> Take() { return std::move(out_); }

 private:
  const TuneContext& ctx_;
  std::unordered_set<uint64_t> seen_;
  std::vector<Candidate> out_;
};

// (a) One prime factor of one level of split steps[i] moved to another level.
void AddFactorMoves(const TuneContext& ctx, const std::vector<Step>& steps, int i, Neighbors& out) {
  const AnnotationOptions& options = ctx.annotation();
  const auto& sp = std::get<schedule::SplitStep>(steps[i]);
  const internal::SplitLevels levels = internal::LevelsOf(sp);
  const std::vector<int64_t>& v = levels.levels;
  const int n = static_cast<int>(v.size());
  for (int src = 0; src < n; ++src) {
    for (int64_t p : PrimeFactors(v[src])) {
      for (int dst = 0; dst < n; ++dst) {
        if (dst == src) continue;
        std::vector<int64_t> w = v;
        w[src] /= p;
        w[dst] *= p;
        if (!internal::InnermostAllowed(v, w, options)) continue;
        std::vector<Step> edited = steps;
        internal::SetLevels(std::get<schedule::SplitStep>(edited[i]), {w, levels.divisible});
        if (!internal::GpuTileRunFits(ctx, edited, i)) continue;
        internal::RefreshLaterSplitExtents(ctx.dag(), edited, i);
        out.Add(edited);
      }
    }
  }
}

}  // namespace

// (e) Every one-decision edit of a tensor_core step (search/tensor_core_space.h).
void AddTensorCoreEdits(const State& state, const TuneContext& ctx, const std::vector<Step>& steps,
                        int i, const schedule::TensorCoreStep& tc, Neighbors& out) {
  if (tc.stage_id < 0 || tc.stage_id >= state.num_stages()) return;
  const schedule::Stage& st = state.stage(tc.stage_id);
  absl::StatusOr<schedule::MatmulLike> mm = schedule::AnalyzeMatmulLike(*st.op, st.op->body);
  if (!mm.ok()) return;
  for (int d = 0; d < kTensorCoreDecisions; ++d) {
    for (const schedule::TensorCoreStep& v :
         TensorCoreStepVariants(tc, *mm, state, ctx.target(), d)) {
      std::vector<Step> edited = steps;
      edited[i] = v;
      out.Add(edited);
    }
  }
}

absl::StatusOr<std::vector<Candidate>> NeighborStates(const State& state, const TuneContext& ctx) {
  const ir::ComputeDAG& dag = ctx.dag();
  const Target& target = ctx.target();
  const AnnotationOptions& options = ctx.annotation();
  const std::vector<Step>& steps = state.steps();
  {
    absl::StatusOr<State> replayed = schedule::ReplaySteps(dag, steps);
    if (!replayed.ok()) {
      return absl::Status(replayed.status().code(),
                          absl::StrCat("local search: the state does not replay on ",
                                       dag.WorkloadKey(), ": ", replayed.status().message()));
    }
  }
  const bool gpu = target.is_gpu();
  Neighbors out(ctx, steps);
  bool has_pipeline = false;
  int max_pipeline = 0;
  std::vector<int> vector_splits;
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    if (const auto* sp = std::get_if<schedule::SplitStep>(&steps[i])) {
      if (gpu && internal::IsVectorSplit(steps, i)) {
        vector_splits.push_back(i);
        for (int64_t w : internal::VectorWidthCandidates(ctx, steps, i)) {
          if (w == *sp->lengths[0]) continue;
          std::vector<Step> edited = steps;
          internal::SetVectorWidth(edited, i, w);
          out.Add(edited);
        }
        continue;
      }
      if (!internal::HasMovableFactors(*sp)) continue;
      if (internal::IsThreadSplit(steps, i)) {
        if (!gpu) continue;
        for (int64_t c : internal::ThreadCountCandidates(*sp, options)) {
          std::vector<Step> edited = steps;
          std::get<schedule::SplitStep>(edited[i]).lengths[0] = c;
          out.Add(edited);
        }
        continue;
      }
      if (internal::IsBlockReductionSplit(steps, i)) {
        for (int64_t c : internal::OtherBlockChunks(*sp, options)) {
          std::vector<Step> edited = steps;
          std::get<schedule::SplitStep>(edited[i]).lengths[0] = c;
          out.Add(edited);
        }
        continue;
      }
      AddFactorMoves(ctx, steps, i, out);
    } else if (const auto* tc = std::get_if<schedule::TensorCoreStep>(&steps[i])) {
      AddTensorCoreEdits(state, ctx, steps, i, *tc, out);
    } else if (const auto* p = std::get_if<schedule::PragmaStep>(&steps[i])) {
      if (p->software_pipeline >= 0) {
        has_pipeline = true;
        max_pipeline = std::max(max_pipeline, p->software_pipeline);
        const int n = internal::MaxSoftwarePipeline(p->software_pipeline, options);
        for (int v = 0; v <= n; ++v) {
          if (v == p->software_pipeline) continue;
          std::vector<Step> edited = steps;
          std::get<schedule::PragmaStep>(edited[i]).software_pipeline = v;
          out.Add(edited);
        }
      } else if (p->min_blocks_per_sm < 0) {
        const auto& values = gpu ? options.gpu_unroll_steps : options.cpu_unroll_steps;
        for (int64_t v : values) {
          if (v == p->auto_unroll_max_step) continue;
          std::vector<Step> edited = steps;
          std::get<schedule::PragmaStep>(edited[i]).auto_unroll_max_step = v;
          out.Add(edited);
        }
      }
    }
  }
  // (d) The cp.async pipelines need vectorized fetches: widest fetches with pipeline 3, and 4.
  if (has_pipeline) {
    std::vector<Step> widest = steps;
    for (int i : vector_splits) {
      const std::vector<int64_t> widths = internal::VectorWidthCandidates(ctx, widest, i);
      if (!widths.empty()) internal::SetVectorWidth(widest, i, widths.back());
    }
    const int top = internal::MaxSoftwarePipeline(max_pipeline, options);
    for (int v : {3, 4}) {
      if (v > top) continue;
      std::vector<Step> edited = widest;
      for (Step& step : edited) {
        auto* p = std::get_if<schedule::PragmaStep>(&step);
        if (p != nullptr && p->software_pipeline >= 0) p->software_pipeline = v;
      }
      out.Add(edited);
    }
  }
  return out.Take();
}

absl::StatusOr<std::vector<Candidate>> LocalSearchCandidates(
    const TuneContext& ctx, const std::vector<Candidate>& best,
    const std::unordered_set<uint64_t>& measured, int n_out, int max_states,
    costmodel::CostModel& model) {
  if (n_out < 0 || max_states < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local search: n_out and max_states must be >= 0, got ", n_out, " and ", max_states));
  }
  std::vector<Candidate> out;
  if (n_out == 0) return out;
  const size_t n_states = std::min(best.size(), static_cast<size_t>(max_states));
  std::vector<std::vector<Candidate>> lists;
  for (size_t k = 0; k < n_states; ++k) {
    ASSIGN_OR_RETURN(std::vector<Candidate> neighbors, NeighborStates(best[k].state, ctx));
    std::vector<Candidate> fresh;
    for (Candidate& c : neighbors) {
      if (!measured.contains(StepsHash(c.state.steps()))) fresh.push_back(std::move(c));
    }
    ASSIGN_OR_RETURN(std::vector<double> scores, ScoreCandidates(fresh, ctx, model));
    CHECK(scores.size() == fresh.size())
        << "the model gave " << scores.size() << " scores for " << fresh.size() << " states";
    for (double& s : scores) {
      if (std::isnan(s)) s = -std::numeric_limits<double>::infinity();
    }
    std::vector<size_t> order(fresh.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    std::vector<Candidate> ranked;
    ranked.reserve(order.size());
    for (size_t i : order) ranked.push_back(std::move(fresh[i]));
    lists.push_back(std::move(ranked));
  }
  std::unordered_set<uint64_t> taken;
  for (size_t rank = 0; out.size() < static_cast<size_t>(n_out); ++rank) {
    bool any = false;
    for (size_t k = 0; k < lists.size() && out.size() < static_cast<size_t>(n_out); ++k) {
      if (rank >= lists[k].size()) continue;
      any = true;
      if (taken.insert(StepsHash(lists[k][rank].state.steps())).second) {
        out.push_back(lists[k][rank]);
      }
    }
    if (!any) break;
  }
  return out;
}

}  // namespace tilesearch::search
