// Helpers shared by the step implementations (schedule/steps/*.cc): error messages, id checks,
// the stage-level loop transforms (split, fuse, reorder) that both the steps and the rebuilding of
// attached stages use, and the finishing of a step (refreshing attached regions, recording it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/tensor.h"
#include "nlohmann/json.hpp"
#include "schedule/state.h"
#include "schedule/step.h"

namespace tilesearch::schedule::internal {

/// kInvalidArgument "<step>: <reason>".
absl::Status StepError(const std::string& step, const std::string& reason);

/// Errors (naming `step`) for a stage id out of range.
absl::Status CheckStageId(const State& state, int stage_id, const std::string& step);
/// Errors for an iterator id out of range of `stage`.
absl::Status CheckIterId(const Stage& stage, int iter_id, const std::string& step);
/// Errors when the stage is a placeholder or inlined (`what` says what was attempted).
absl::Status CheckSchedulable(const Stage& stage, const std::string& step);

/// True when the stage's iterators are exactly its op's axes then reduce axes, untransformed.
bool HasInitialIterators(const Stage& stage);
/// True when `stage` is an output of the State's DAG (by name).
bool IsOutput(const State& state, const Stage& stage);
/// True when some stage is attached at an iterator of stage `stage_id`.
bool HasAttachedStages(const State& state, int stage_id);

/// Resets `stage` to its initial iterators with the given extents of its output axes (reduce
/// axes keep the op's extents) and replays `stage.loop_steps` on them. Sets axis_extents.
absl::Status RebuildStage(Stage& stage, const std::vector<int64_t>& axis_extents);

/// Stage-level split with concrete lengths; returns the names of the new iterators (outermost
/// first). Errors (reason only, no step text) for name clashes.
absl::StatusOr<std::vector<std::string>> SplitIter(Stage& stage, int iter_id,
                                                   const std::vector<int64_t>& lengths,
                                                   bool inner_to_outer);
/// Stage-level fuse of consecutive iterators; returns the fused name.
absl::StatusOr<std::string> FuseIters(Stage& stage, const std::vector<int>& ids);
/// Stage-level reorder (`order` must be a permutation).
absl::Status ReorderIters(Stage& stage, const std::vector<int>& order);

/// Shared by split, follow_split and follow_fused_split: checks and applies a split of
/// `iter_id` of `stage_id` with `lengths` (errors for unfilled or < 1 lengths), moving stages
/// attached at the split iterator to the innermost new one, then finishes the step.
absl::StatusOr<State> ApplySplit(const State& state, int stage_id, int iter_id,
                                 const std::vector<std::optional<int64_t>>& lengths,
                                 bool inner_to_outer, int64_t recorded_extent, const Step& step);

/// Recomputes axis_extents (InferRegion) of every stage attached, transitively, below
/// `stage_id` (and of `stage_id` itself when `include_self`), rebuilding those whose region
/// changed. Errors name `step`.
absl::Status RefreshAttached(State& state, int stage_id, bool include_self,
                             const std::string& step);

/// Refreshes the stages attached below `stage_id` (unless `regions_unchanged`), then appends
/// `step`.
absl::StatusOr<State> Finish(State state, int stage_id, const Step& step,
                             bool regions_unchanged = false);

/// Ids of the stages attached, transitively, inside stage `stage_id`.
std::vector<int> AttachedBelow(const State& state, int stage_id);
/// True for blockIdx, threadIdx and vthread (the annotations that relax regions).
bool IsThreadAnnotation(IteratorAnnotation a);
/// True when changing iterators [first, last] of stage `stage_id` (split, or fuse into the
/// iterator at `last`) cannot change the region of any stage attached to it: none of them is
/// thread-bound and every attach point is at or after `last`, or inside [first, last] only at
/// `last` (a split's attach point moves to its innermost part, a fuse's to the fused iterator).
bool LoopChangeKeepsRegions(const State& state, int stage_id, int first, int last);

/// `e` with every Load of buffer `from` reading `to` instead (same indices; producer = `to`).
ir::Expr RedirectLoads(const ir::Expr& e, const std::string& from,
                       const std::shared_ptr<const ir::TensorNode>& to);
/// True when `op`'s body or init loads buffer `name`.
bool ReadsBuffer(const ir::TensorNode& op, const std::string& name);
/// `base` when no stage has that name, else "<base>.1", "<base>.2", ...
std::string UniqueStageName(const State& state, const std::string& base);

// JSON helpers: read element `i` of array `j` as the given type, with errors naming `what`.
absl::Status CheckArity(const nlohmann::json& j, const char* prefix, size_t arity);
absl::StatusOr<int64_t> JsonInt(const nlohmann::json& j, size_t i, const char* prefix);
/// A stage or iterator id: an integer in 0 .. INT_MAX; kInvalidArgument naming the field otherwise.
absl::StatusOr<int> JsonId(const nlohmann::json& j, size_t i, const char* prefix);
absl::StatusOr<std::vector<int>> JsonIntList(const nlohmann::json& j, size_t i, const char* prefix);
absl::StatusOr<std::string> JsonString(const nlohmann::json& j, size_t i, const char* prefix);
/// "shared" / "local" / "global".
absl::StatusOr<ir::MemoryScope> ParseScope(const std::string& name);
/// "[1, 2, 3]".
std::string IdList(const std::vector<int>& ids);

}  // namespace tilesearch::schedule::internal
