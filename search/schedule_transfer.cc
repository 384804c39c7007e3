#include "search/schedule_transfer.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ir/stmt.h"
#include "schedule/apply_step.h"
#include "schedule/matmul_like.h"
#include "schedule/wgmma_layout.h"
#include "search/annotation.h"
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

// Bytes of an operand element of t's kind: 2 (f16, bf16) or 4 (the TF32 kinds' float32).
int64_t ElementBytes(const TensorCoreStep& t) {
  return ir::BytesOf(ir::MmaOperandType(ir::ParseMmaKind(t.kind).value_or(ir::MmaKind::kF16)));
}

// t with the deepest pipeline not above its own that fits `target` (shared memory above all),
// down to the space's shallowest (2 for wgmma, 1 for mma.sync); nullopt when none fits.
std::optional<TensorCoreStep> FitPipeline(TensorCoreStep t, const Target& target) {
  const int least = std::min(t.pipeline, t.warpgroup ? 2 : 1);
  for (; t.pipeline >= least; --t.pipeline) {
    if (TensorCoreStepFits(t, target)) return t;
  }
  return std::nullopt;
}

// t's block tile doubled along m (`along_m`) or n within the space's values
// (search/tensor_core_space.cc): the warp (group) tile doubled where it stays at most 64 (wgmma:
// 128 rows, 256 columns) and its accumulators fit, otherwise one more warp (group) per block side
// (at most 4; wgmma 2). A wide warp tile comes first: both tuned bests the transferred tiles
// missed on the H200 held-out study have 64-row warpgroup tiles spanning the block's columns. The
// pipeline is then lowered until the ring fits (FitPipeline). Nullopt when no layout fits.
std::optional<TensorCoreStep> Doubled(const TensorCoreStep& t, bool along_m, const Target& target) {
  const int64_t max_warp = !t.warpgroup ? 64 : along_m ? 128 : 256;
  const int64_t max_per_side = t.warpgroup ? 2 : 4;
  for (bool widen : {true, false}) {
    TensorCoreStep c = t;
    int64_t& block = along_m ? c.block_m : c.block_n;
    int64_t& warp = along_m ? c.warp_m : c.warp_n;
    if (widen ? 2 * warp > max_warp : 2 * (block / warp) > max_per_side) continue;
    if (widen) warp *= 2;
    block *= 2;
    if (std::optional<TensorCoreStep> fit = FitPipeline(c, target)) return fit;
  }
  return std::nullopt;
}

// t's k tile doubled within the space's values (wgmma: rows of at most 128 bytes; mma.sync: at
// most 4 instruction k's, 8 for TF32's k of 8), the pipeline fitted (FitPipeline) and split_k
// refitted to the longer tiles (FittedSplitK). Nullopt when the space has no deeper k tile or
// no pipeline fits.
std::optional<TensorCoreStep> KDoubled(TensorCoreStep t, const schedule::MatmulLike& mm,
                                       const Target& target) {
  const int64_t kk = ir::MmaK(ir::ParseMmaKind(t.kind).value_or(ir::MmaKind::kF16));
  const int64_t max_k = t.warpgroup ? 128 / ElementBytes(t) : kk * 4 * (kk == 8 ? 2 : 1);
  if (2 * t.block_k > max_k) return std::nullopt;
  t.block_k *= 2;
  t.split_k = FittedSplitK(t, mm);
  return FitPipeline(t, target);
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
        // A vector split's width must divide the new extent (else the vector loop is guarded and
        // runs as scalars): the widest power of two no wider than before that does.
        if (internal::SplitThenAnnotated(steps, static_cast<int>(i),
                                         schedule::IteratorAnnotation::kVectorize) != nullptr &&
            split->lengths[0].has_value()) {
          int64_t w = 1;
          while (w * 2 <= *split->lengths[0] && extent % (w * 2) == 0) w *= 2;
          split->lengths[0] = w;
        }
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

  // Many blocks: the block tile doubled along n, then m, each also with a doubled k tile, where
  // the doubled grid has fewer blocks and still at least kEnlargedBlocksPerSm per SM. Only a side
  // no longer than the other is doubled: an m x n tile loads m + n elements per k for m n
  // products, so doubling 64 x 256 to 128 x 256 raises that reuse by 67 %, to 64 x 512 by 11 %.
  for (const TensorCoreStep& base : k_loops) {
    // Split-K adds blocks to a grid of too few; a grid with blocks to spare gets one k range.
    if (base.split_k != 1) continue;
    for (bool along_m : {false, true}) {
      if ((along_m ? base.block_m : base.block_n) > (along_m ? base.block_n : base.block_m)) {
        continue;
      }
      std::optional<TensorCoreStep> big = Doubled(base, along_m, target);
      if (!big) continue;
      const int64_t blocks = GridBlocks(*big, *mm);
      if (blocks >= GridBlocks(base, *mm) ||
          static_cast<double>(blocks) < kEnlargedBlocksPerSm * target.sm_count) {
        continue;
      }
      tried.push_back(*big);
      if (std::optional<TensorCoreStep> deep = KDoubled(*big, *mm, target)) tried.push_back(*deep);
    }
  }

  std::vector<schedule::State> out;
  std::vector<TensorCoreStep> kept;
  for (TensorCoreStep c : tried) {
    // Multicast clusters only where the new problem's tile rows pair up (and one k range): an
    // odd number would replay and fail only when lowered.
    c.multicast = c.multicast && MulticastFits(c, *mm);
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
