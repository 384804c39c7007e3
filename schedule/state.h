// State: a ComputeDAG's initial schedule plus the transform steps applied to it (Ansor, OSDI'20,
// §4.1 and TVM auto_scheduler loop_state.h). Per stage it records the loop iterators (outermost
// first), the compute location and how each original axis is computed from the iterators. States
// are values: copying one is cheap (stages are shared until a step changes them) and replaying the
// same steps on the same DAG gives an identical state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/compute_dag.h"
#include "ir/expr.h"
#include "ir/stmt.h"
#include "ir/tensor.h"
#include "schedule/step.h"

namespace tilesearch::schedule {

enum class IteratorKind : uint8_t { kSpace, kReduce, kMixed };
const char* IteratorKindName(IteratorKind kind);

/// One loop of a stage.
struct Iterator {
  std::string name;  // unique within the stage: "i", "i.0", "i.1", "i.0@j.0"
  int64_t extent = 1;
  IteratorKind kind = IteratorKind::kSpace;
  IteratorAnnotation annotation = IteratorAnnotation::kNone;
};

enum class ComputeLocation : uint8_t { kRoot, kInlined, kAttached };

/// One stage of a State.
struct Stage {
  /// The definition. Cache stages, rfactor and readers whose inputs were redirected get new
  /// TensorNodes; Loads inside bodies name their producer by buffer name (the `producer` pointer of
  /// a rewritten body may be stale: resolve producers by name through the State).
  std::shared_ptr<const ir::TensorNode> op;
  std::vector<Iterator> iters;
  ComputeLocation location = ComputeLocation::kRoot;
  /// kAttached: the consumer stage id and the name of its iterator this stage is computed inside.
  int attach_stage = -1;
  std::string attach_iter;
  /// For each original axis (op->axes, then op->reduce_axes): its value as an int64 expression of
  /// the iterator variables (a Var per iterator, named by Iterator::name). For a stage attached by
  /// compute_at, the value is relative to the start of the region the consumer needs (lowering adds
  /// the region's start).
  std::vector<ir::Expr> axis_values;
  /// Conditions over iterator variables that must hold for an iteration to be real (from
  /// non-divisible splits: `axis_value < extent`).
  std::vector<ir::Expr> guards;
  /// Buffer scope (cache stages: shared / local; others global).
  ir::MemoryScope scope = ir::MemoryScope::kGlobal;
  /// pragma auto_unroll_max_step (0 = none).
  int64_t auto_unroll_max_step = 0;
  /// pragma software_pipeline: -1 = not set, 0 = off, 1 = on, 2 = on with double-buffered shared
  /// tiles, 3 / 4 = cp.async pipeline of that many stages. The GPU kernel of a root stage is
  /// pipelined (schedule/software_pipeline.h) unless it or a stage attached into it has 0, with
  /// the largest value among them.
  int software_pipeline = -1;
  /// pragma min_blocks_per_sm (0 = none): blocks per SM the kernel of this stage's root asks
  /// ptxas to fit (the largest over the root and the stages attached into it counts).
  int min_blocks_per_sm = 0;
  /// storage_align: dimension (-1 = none), factor, offset.
  int storage_align_dim = -1;
  int64_t storage_align_factor = 0;
  int64_t storage_align_offset = 0;
  /// tensor_core: the step that maps this stage onto tensor cores (its kernel is built by
  /// schedule/tensor_core_lower.cc; the stage's own iterators no longer change).
  std::optional<TensorCoreStep> tensor_core;
  /// For an elementwise consumer applied in the epilogue of a tensor_core stage: that stage's id
  /// (its kernel computes this stage); -1 otherwise.
  int epilogue_of = -1;
  /// Extent of each output axis (op->axes) the stage computes: the shape for root stages, the
  /// region its consumer needs (InferRegion) for attached ones. The space iterators were derived
  /// from these extents by `loop_steps`.
  std::vector<int64_t> axis_extents;
  /// The loop transforms applied to this stage since its iterators were last initial (splits with
  /// their resolved lengths, fuses, reorders, annotations). When the region of an attached stage
  /// changes (its consumer is split, bound, ...), the iterators are rebuilt by replaying these on
  /// the new axis_extents, so iterator extents always match the current consumer (as Ansor's
  /// InferBound does after replay).
  std::vector<Step> loop_steps;

  bool is_placeholder() const { return op->is_placeholder; }
  const std::string& name() const { return op->name; }
  /// Index of the iterator named `name`, or -1.
  int IterIndex(const std::string& name) const;
};

class State {
 public:
  State() = default;
  /// One stage per DAG stage (same ids), at root, iterators = the axes then the reduce axes.
  static State Initial(const ir::ComputeDAG& dag);

  const ir::ComputeDAG& dag() const { return *dag_; }
  int num_stages() const { return static_cast<int>(stages_.size()); }
  const Stage& stage(int id) const { return *stages_[id]; }
  /// Stage id by name, or -1.
  int StageId(const std::string& name) const;
  /// Steps applied so far, in order.
  const std::vector<Step>& steps() const { return *steps_; }

  // Mutation, used by steps (copy-on-write: only the touched stage is copied).
  /// A writable copy of stage `id` (replaces the shared one in this State).
  Stage& MutableStage(int id);
  /// Inserts a stage at `id`, shifting later stages and every attach_stage >= id.
  void InsertStage(int id, Stage stage);
  /// Records a step (after it was applied successfully).
  void AppendStep(const Step& step);

  /// Stable multi-line text: each stage with its location, loops (name, extent, annotation) and
  /// the steps. Equal states print equally.
  std::string ToString() const;
  /// 64-bit hash of ToString() (FNV-1a), for deduplicating candidates.
  uint64_t Hash() const;

 private:
  std::shared_ptr<const ir::ComputeDAG> dag_;
  std::vector<std::shared_ptr<const Stage>> stages_;
  std::shared_ptr<const std::vector<Step>> steps_ = std::make_shared<std::vector<Step>>();
};

/// The root stage whose kernel stage `sid` is computed in: `sid` followed along attach_stage
/// while attached (itself when it is at root or inlined). The walk is bounded by the stage count
/// and stops at an out-of-range attach_stage, so a malformed chain ends somewhere. CHECK-fails
/// when `sid` is not a stage id.
int KernelRootStage(const State& state, int sid);

}  // namespace tilesearch::schedule
