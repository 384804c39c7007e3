// Sketch rules (Ansor, OSDI'20 §4.1 Table 1 and §4.3; TVM v0.19 sketch_policy_rules.cc): the
// derivation rules that turn a ComputeDAG's initial state into sketches, the high-level loop
// structures (tiling, caches, fusion, cross-thread reduction) whose tile sizes and annotations are
// left for random annotation (search/annotation.h) to fill.
//
// A rule is tried on one stage of a partial sketch; rules are tried in order (GpuSketchRules /
// CpuSketchRules) and the scan stops at the first that returns kApplyAndSkipRest. Stage ids are
// positions in the partial sketch's current state (cache stages shift them, as in Ansor).
//
// Differences from TVM, and why:
//  - SpecialComputeLocationGPU and SimplifyComputeWithConstTensor are not implemented: they serve
//    ops with the `simplify_const_tensor_indices` attribute (Winograd), which our library lacks.
//  - Cross-thread reduction also fuses a stage whose consumers are one stage T plus stages already
//    computed at T (softmax's max is read by the sum, which is attached to the normalize stage, and
//    by the normalize stage): TVM requires a single consumer and would leave the max as its own
//    kernel; the hand-written H200 softmax (examples/schedules/h200) fuses all three at 1.15×
//    eager.
//  - The thread split of a cross-thread reduction is left unfilled (TVM fixes it at warp_size and
//    lets mutation move it): annotation samples it from {32, 64, ..., 1024}.
//  - Shared-memory cache_read needs a consumer with reduce axes (its attach point is the last
//    iterator of the outermost reduce tile; TVM falls back to another iterator otherwise). Our
//    SharedLayoutTiling caches a permuted input of an injective stage at its block tile instead.
//  - KeepStoredEpilogue: where a matmul's elementwise chain ends in a stage read by several
//    stages (softmax over Q·Kᵀ·scale), that chain is also kept root and stored by the tensor-core
//    epilogue in its own type (TVM inlines every elementwise stage on GPU, so each reader
//    recomputes it from float32 accumulators that the matmul stores).
//  - A rule whose steps fail to apply (e.g. inlining a stage that reads an attached stage) is
//    treated as not applicable rather than aborting.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "schedule/state.h"
#include "schedule/step.h"
#include "search/tune_context.h"

namespace tilesearch::search {

/// A sketch being built: the steps with unfilled split lengths (nullopt), and a shadow State that
/// is the same steps applied with every unfilled length set to 1 (steps cannot apply unfilled
/// splits), so rules can look at stages, iterators and attach points.
class PartialSketch {
 public:
  explicit PartialSketch(const ir::ComputeDAG& dag);

  /// The shadow state (structure only: iterator extents follow the placeholder lengths of 1).
  const schedule::State& shadow() const { return shadow_; }
  /// The sketch's steps (split lengths may be nullopt).
  const std::vector<schedule::Step>& steps() const { return steps_; }
  /// Applies `step` (unfilled lengths as 1) to the shadow and records it. Errors: the step's.
  absl::Status Apply(const schedule::Step& step);
  /// Name of the stage each step was applied to (ids shift as cache stages are added; names
  /// do not), parallel to steps().
  const std::vector<std::string>& step_stage_names() const { return step_stage_names_; }
  /// The sketch as a State: the shadow's stages with the unfilled steps as its step list.
  schedule::State ToState() const;

 private:
  schedule::State shadow_;
  std::vector<schedule::Step> steps_;
  std::vector<std::string> step_stage_names_;
};

/// What a rule's condition says about a stage (TVM SketchGenerationRule::ConditionKind).
enum class RuleCondition { kPass, kApply, kApplyAndSkipRest };

/// One derivation rule.
class SketchRule {
 public:
  virtual ~SketchRule() = default;
  /// Rule name, e.g. "MultiLevelTilingWithFusion".
  virtual const char* name() const = 0;
  /// Whether the rule applies to stage `stage_id` of `s`.
  virtual RuleCondition Condition(const PartialSketch& s, int stage_id,
                                  const TuneContext& ctx) const = 0;
  /// The derived sketches, each with the stage id to visit next. Errors when a step fails.
  virtual absl::StatusOr<std::vector<std::pair<PartialSketch, int>>> Apply(
      const PartialSketch& s, int stage_id, const TuneContext& ctx) const = 0;
};

/// CUDA rules in Ansor's order (plus MultiLevelTilingTensorCore after AlwaysInline): AddCacheRead,
/// AddRowCacheRead (ours: a stage read by a group of cross-thread reductions and their normalize
/// stage T, like softmax's input, is copied once per row into shared memory at T's row loop when
/// the row takes at most half of the static shared-memory limit; the uncached sketch is kept too),
/// AlwaysInline, SplitReductionAcrossBlocks (ours: a reduction with fewer than 2 output points per
/// SM and ≥ 16384 reduced elements is also split into chunks reduced by separate blocks, "X.rf",
/// whose partials X reduces; the chunk length is drawn from gpu_block_reduction_chunks),
/// CrossThreadReduction (from 65536 reduced elements on without the one-thread alternative; ours:
/// also for GEMV-like stages, whose largest input is read at most 4 times, at any number of output
/// points), PointsPerThreadReduction (ours: a plain reduction without reuse whose consecutive
/// outputs read consecutive inputs, like a sum over an outer axis, also gets sketches with 2, 4 or
/// 8 consecutive outputs per thread, their sums in a local stage computed at the thread),
/// UntiledRowNormalize (ours: a normalize stage that reads a broadcast 2-D tensor, like a
/// softmax's additive mask, and row reductions is also left untiled so that the reductions fuse
/// into it as cross-thread reductions: one kernel), UntiledLowReuse (ours: a stage tiling would
/// take whose largest input is read at most 4 times and whose reduction is at most a warp long,
/// like a depthwise convolution, is also left untiled: annotation gives each thread a few output
/// points along the two innermost space axes, whose windows share loads), AddCacheWrite,
/// MultiLevelTilingWithFusion, MultiLevelTiling, SharedLayoutTiling (ours: an injective stage
/// reading a buffer whose innermost dimension is indexed by an axis p other than the stage's
/// innermost axis o — transpose, permute — gets a sketch with p and o tiled (block, vthread,
/// thread, inner; lengths unfilled), the buffer cached in shared memory at the block tile with its
/// rows padded against bank conflicts; the untiled sketch is kept), FuseShortReductionIntoConsumer
/// (ours: a reduction too short for a cross-thread reduction whose one consumer reads it
/// elementwise, like avg_pool's window sum, is also computed at that consumer's innermost iterator:
/// one kernel), SkipStage.
const std::vector<std::unique_ptr<SketchRule>>& GpuSketchRules();
/// CPU rules in Ansor's order: AlwaysInline, AddRfactor, AddCacheWrite,
/// MultiLevelTilingWithFusion, MultiLevelTiling, then CpuElementwiseTiling (ours: the output stage
/// of an elementwise task (every other computed stage already inlined: in practice single-stage
/// operators such as relu, gelu, add, transpose), without reduction or tiling need,
/// of at least 64 points: fused and split into outer × grain × vector parts, the plain sketch
/// kept), SkipStage.
const std::vector<std::unique_ptr<SketchRule>>& CpuSketchRules();

// Predicates on the stages of a State (TVM compute_dag.cc / utils.h), computed from the stage's
// current op (so cache stages and rfactor stages are judged by what they compute).

/// Ansor's NeedsMultiLevelTiling on the stage's op: counting read tensors whose accesses miss an
/// output axis of extent > 1, true when the stage reduces and ≥ 1 does. Without a reduction TVM
/// asks for ≥ 2 such tensors; we (change) count only tensors indexed by ≥ 2 loop variables: our
/// softmax and layernorm inline their elementwise parts into the normalize stage, which then
/// reads row vectors (max[i], sum[i], gamma[j]) and would be tiled like a matmul instead of fused
/// with its cross-thread reductions. False for placeholders.
bool NeedsMultiLevelTiling(const schedule::State& s, int stage_id);
/// TVM IsStrictlyInlineable: no reduction; every read indexes by plain axis variables in order
/// (no duplicates); no math call (exp, ...) and no select. Stages reading nothing qualify.
bool IsStrictlyInlineable(const schedule::State& s, int stage_id);
/// TVM ShouldAlwaysBeInlined: never placeholders, outputs or reductions; on GPU every other stage
/// (greedy inlining), on CPU the strictly inlineable ones.
bool ShouldAlwaysBeInlined(const schedule::State& s, int stage_id, const Target& target);
/// Consumers of stage `stage_id` (stages whose op reads its buffer), looking through inlined
/// consumers to their consumers (TVM GetConsumers). Ascending.
std::vector<int> StageConsumers(const schedule::State& s, int stage_id);
/// TVM HasSingleElementwiseMatchedConsumer: exactly one consumer, which reads the stage with its
/// own axes in order at the same shape, not both reductions, and is not a ".shared" stage.
/// Returns its id or -1.
int SingleElementwiseMatchedConsumer(const schedule::State& s, int stage_id);
/// True when stage `stage_id` or a stage attached at one of its iterators has a reduce iterator
/// bound to threadIdx.x (TVM HasCrossThreadReduction).
bool HasCrossThreadReduction(const schedule::State& s, int stage_id);
/// How many times the stage's loop nest reads each element of its largest input (by the extents
/// of the axes its reads index): the product of the extents of the stage's axes (space and
/// reduce) that the largest read does not index; ties go to the smaller reuse. 1 for a GEMV's
/// matrix, N for a matmul's A. 0 for placeholders and stages that read nothing.
int64_t LargestReadReuse(const schedule::State& s, int stage_id);
/// Product of the stage's space iterator extents and of its reduce iterator extents.
std::pair<int64_t, int64_t> CumulativeSpaceAndReduceLength(const schedule::Stage& stage);
/// TVM NeedsRfactor (CPU): a multi-level-tiled stage with space ≤ reduce and space ≤ cores·16,
/// or another reduction with reduce > cores.
bool NeedsRfactor(const schedule::State& s, int stage_id, const Target& target);

}  // namespace tilesearch::search
