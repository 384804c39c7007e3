// The edit rules of MutateTileSize and MutateAutoUnroll (search/mutation.cc) as single steps,
// shared with the exhaustive neighbor enumeration of local search (search/local_search.cc): which
// splits and pragmas are decisions, the values each may take, and the validity check of an edited
// step list. Not a public interface.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "schedule/lower.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "search/annotation.h"
#include "search/tune_context.h"

namespace tilesearch::search::internal {

/// Replays `steps` on ctx.dag() and lowers and checks the program once (LowerCandidate); with a
/// ctx.lowering_cache(), a step list tried before returns its stored outcome. Errors: the
/// replay's, Lower's or the register check's.
absl::StatusOr<Candidate> FinishEdit(const TuneContext& ctx,
                                     const std::vector<schedule::Step>& steps);

/// Uniform double in [0, 1) from the top 53 bits of one draw of `rng` (the same on every
/// platform).
double Uniform01(std::mt19937_64& rng);

/// True when steps[i] is a one-length split whose inner part the next step vectorizes (the vector
/// width of a GPU cooperative fetch).
bool IsVectorSplit(const std::vector<schedule::Step>& steps, int i);

/// True when `sp` has a known extent > 1 and all lengths known: a split whose factors
/// MutateTileSize may move (thread-count and vector splits are recognized separately, before).
bool HasMovableFactors(const schedule::SplitStep& sp);

/// The vector widths (VectorWidths: 1 to 16 elements) that vector split steps[i] (IsVectorSplit: a
/// cooperative fetch, a vectorized elementwise stage, a row's vector) may take: those dividing the
/// fused extent (known from the replayed prefix steps[0, i) on ctx.dag()) whose bytes fit
/// ctx.target().max_vector_bytes, ascending, the current one included. Empty when the prefix does
/// not replay or the split's iterator is out of range.
std::vector<int64_t> VectorWidthCandidates(const TuneContext& ctx,
                                           const std::vector<schedule::Step>& steps, int i);

/// Sets the width of vector split steps[i] to `width`; a later split of the same iterator whose
/// extent was the rest (a vectorized root stage's thread split) follows the new rest.
void SetVectorWidth(std::vector<schedule::Step>& steps, int i, int64_t width);

/// After an edit of split steps[i]: every later split of the same stage that records an extent
/// records the one its iterator has once steps[0, j) replay on `dag` (an untiled stage's points
/// per thread are split before the fused rest's thread split, whose extent follows them). Leaves
/// the steps as they are (without replaying) where no split of that stage with a recorded extent
/// follows a later fuse of it, or where the steps do not replay.
void RefreshLaterSplitExtents(const ir::ComputeDAG& dag, std::vector<schedule::Step>& steps, int i);

/// The thread counts a thread-count split (IsThreadSplit) may change to: the values of
/// options.gpu_thread_candidates ≤ sp.extent (all of them when the step records no extent, 0)
/// other than the current one, in that order.
std::vector<int64_t> ThreadCountCandidates(const schedule::SplitStep& sp,
                                           const AnnotationOptions& options);

/// The levels of a split whose lengths are all known: [outer rest] + lengths, the outer rest
/// (extent / product) present only when the product divides the extent (`divisible`).
struct SplitLevels {
  std::vector<int64_t> levels;
  bool divisible = false;
};
SplitLevels LevelsOf(const schedule::SplitStep& sp);

/// Writes `levels` (as LevelsOf gives them, edited) back into sp.lengths.
void SetLevels(schedule::SplitStep& sp, const SplitLevels& levels);

/// The chunk lengths a block-reduction split (IsBlockReductionSplit) may change to:
/// BlockChunkCandidates(sp.extent) other than the current one, in that order.
std::vector<int64_t> OtherBlockChunks(const schedule::SplitStep& sp,
                                      const AnnotationOptions& options);
/// Whether a factor move from `before` to `after` (levels, innermost last) keeps the innermost
/// bound: the new innermost is ≤ options.max_innermost_split_factor or not larger than before.
bool InnermostAllowed(const std::vector<int64_t>& before, const std::vector<int64_t>& after,
                      const AnnotationOptions& options);

/// The largest software_pipeline value mutation reaches from a pragma now at `current`:
/// max(options.gpu_max_software_pipeline, current).
int MaxSoftwarePipeline(int current, const AnnotationOptions& options);

}  // namespace tilesearch::search::internal
