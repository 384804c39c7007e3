#include "search/schedule_transfer.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "schedule/apply_step.h"
#include "schedule/matmul_like.h"
#include "schedule/wgmma_layout.h"
#include "search/tensor_core_space.h"

namespace tilesearch::search {
namespace {

using schedule::TensorCoreStep;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of the step's main kernel: batch x m tiles x n tiles x k ranges.
int64_t GridBlocks(const TensorCoreStep& t, const schedule::MatmulLike& mm) {
  return mm.batch * CeilDiv(mm.m, t.block_m) * CeilDiv(mm.n, t.block_n) * t.split_k;
}

// The largest split_k of the space's values not above t's that keeps 4 k tiles per range.
int FittedSplitK(const TensorCoreStep& t, const schedule::MatmulLike& mm) {
  const int64_t k_tiles = CeilDiv(mm.k, t.block_k);
  int split = 1;
  for (int s : {2, 4, 8, 16}) {
    if (s <= t.split_k && k_tiles >= 4 * static_cast<int64_t>(s)) split = s;
  }
  return split;
}

// t's block tile halved along m (`along_m`) or n; the warp (group) tile becomes the halved side
// where the block no longer holds a whole number of them. Nullopt when the halved side is below
// the instruction's (16 rows, 8 columns; 64 rows for wgmma) or not a multiple of it.
std::optional<TensorCoreStep> Halved(TensorCoreStep t, bool along_m) {
  int64_t& block = along_m ? t.block_m : t.block_n;
  int64_t& warp = along_m ? t.warp_m : t.warp_n;
  const int64_t unit = along_m ? (t.warpgroup ? 64 : 16) : 8;
  const int64_t half = block / 2;
  if (block % 2 != 0 || half < unit || half % unit != 0) return std::nullopt;
  block = half;
  if (block % warp != 0) warp = block;
  return t;
}

// t's epilogue extended to the longest chain of elementwise consumers that replays (the sketch
// rule's chain is at most 8 stages long).
TensorCoreStep LongestEpilogue(const TensorCoreStep& t, std::vector<schedule::Step> steps,
                               size_t at, const ir::ComputeDAG& dag) {
  for (int e = 8; e > t.epilogue; --e) {
    TensorCoreStep c = t;
    c.epilogue = e;
    steps[at] = c;
    if (schedule::ReplaySteps(dag, steps).ok()) return c;
  }
  return t;
}

}  // namespace

std::vector<std::optional<int64_t>> AdaptSplitLengths(
    const std::vector<std::optional<int64_t>>& lengths, bool inner_to_outer, int64_t extent) {
  std::vector<std::optional<int64_t>> out = lengths;
  const int n = static_cast<int>(out.size());
  int64_t left = std::max<int64_t>(extent, 1);
  for (int k = 0; k < n; ++k) {
    std::optional<int64_t>& len = out[inner_to_outer ? n - 1 - k : k];
    if (!len.has_value()) continue;
    len = std::clamp<int64_t>(*len, 1, left);
    left = (left + *len - 1) / *len;
  }
  return out;
}

absl::StatusOr<schedule::State> TransferSteps(const std::vector<schedule::Step>& steps,
                                              const ir::ComputeDAG& dag) {
  schedule::State state = schedule::State::Initial(dag);
  for (size_t i = 0; i < steps.size(); ++i) {
    schedule::Step step = steps[i];
    if (auto* split = std::get_if<schedule::SplitStep>(&step)) {
      if (split->stage_id < 0 || split->stage_id >= state.num_stages() || split->iter_id < 0 ||
          split->iter_id >= static_cast<int>(state.stage(split->stage_id).iters.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("step ", i, ": ", schedule::StepToString(step),
                         ": no such stage or iterator in this workload's state"));
      }
      const schedule::Stage& stage = state.stage(split->stage_id);
      if (stage.location != schedule::ComputeLocation::kAttached) {
        const int64_t extent = stage.iters[split->iter_id].extent;
        split->lengths = AdaptSplitLengths(split->lengths, split->inner_to_outer, extent);
        split->extent = extent;
      }
    }
    absl::StatusOr<schedule::State> next = schedule::ApplyStep(state, step);
    if (!next.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("step ", i, ": ", next.status().message()));
    }
    state = *std::move(next);
  }
  return state;
}

std::vector<schedule::State> TransferVariants(const schedule::State& state,
                                              const ir::ComputeDAG& dag, const Target& target) {
  const std::vector<schedule::Step>& steps = state.steps();
  size_t at = steps.size();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (std::holds_alternative<TensorCoreStep>(steps[i])) at = i;
  }
  if (at == steps.size()) return {};
  const TensorCoreStep& t = std::get<TensorCoreStep>(steps[at]);
  if (t.stage_id < 0 || t.stage_id >= state.num_stages()) return {};
  const schedule::Stage& st = state.stage(t.stage_id);
  absl::StatusOr<schedule::MatmulLike> mm = schedule::AnalyzeMatmulLike(*st.op, st.op->body);
  if (!mm.ok()) return {};

  std::vector<TensorCoreStep> tried;
  const TensorCoreStep fused = LongestEpilogue(t, steps, at, dag);
  tried.push_back(fused);
  // The k loop: split_k refitted (and 1: one range, one kernel), each with its pipeline capped.
  std::vector<TensorCoreStep> k_loops;
  for (int split : {FittedSplitK(fused, *mm), 1}) {
    TensorCoreStep fitted = fused;
    fitted.split_k = split;
    TensorCoreStep capped = fitted;
    const int64_t range_tiles = CeilDiv(CeilDiv(mm->k, fitted.block_k), fitted.split_k);
    capped.pipeline =
        static_cast<int>(std::min<int64_t>(fitted.pipeline, std::max<int64_t>(2, range_tiles / 4)));
    k_loops.push_back(fitted);
    k_loops.push_back(capped);
  }
  tried.insert(tried.end(), k_loops.begin(), k_loops.end());
  for (const TensorCoreStep& base : k_loops) {
    if (GridBlocks(base, *mm) >= kFewWaves * target.sm_count) continue;
    std::optional<TensorCoreStep> m = Halved(base, /*along_m=*/true);
    std::optional<TensorCoreStep> n = Halved(base, /*along_m=*/false);
    if (m) tried.push_back(*m);
    if (n) tried.push_back(*n);
    if (m && n) {
      if (std::optional<TensorCoreStep> mn = Halved(*m, /*along_m=*/false)) tried.push_back(*mn);
    }
  }

  std::vector<schedule::State> out;
  std::vector<TensorCoreStep> kept;
  for (const TensorCoreStep& c : tried) {
    if (c == t || std::find(kept.begin(), kept.end(), c) != kept.end()) continue;
    if (!TensorCoreStepFits(c, target)) continue;
    if (c.warpgroup && !schedule::PlanWgmmaLayouts(c, *mm).ok()) continue;
    std::vector<schedule::Step> edited = steps;
    edited[at] = c;
    absl::StatusOr<schedule::State> replayed = schedule::ReplaySteps(dag, edited);
    if (!replayed.ok()) continue;
    kept.push_back(c);
    out.push_back(*std::move(replayed));
  }
  return out;
}

}  // namespace tilesearch::search
