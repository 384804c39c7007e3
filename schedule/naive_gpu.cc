// The naive GPU schedule: per stage at root, fuse the spatial iterators, split by the block size,
// bind blockIdx.x / threadIdx.x (blockIdx.y above when the grid would exceed 2^31 − 1 blocks).
#include "schedule/naive_gpu.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/tensor.h"
#include "schedule/apply_step.h"

namespace tilesearch::schedule {
namespace {

// CUDA grid limits (compute capability ≥ 3.0): x up to 2^31 − 1 blocks, y up to 65535.
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxGridY = 65535;

constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Even one thread per block never needs more than grid y rows of grid x blocks.
static_assert(CeilDiv(ir::kMaxElements, kMaxGridX) <= kMaxGridY);

absl::Status Apply(State& state, const Step& step) {
  ASSIGN_OR_RETURN(state, ApplyStep(state, step));
  return absl::OkStatus();
}

SplitStep InnerSplit(const State& state, int stage_id, int iter_id, int64_t factor) {
  SplitStep s;
  s.stage_id = stage_id;
  s.iter_id = iter_id;
  s.extent = state.stage(stage_id).iters[iter_id].extent;
  s.lengths = {factor};
  s.inner_to_outer = true;
  return s;
}

AnnotationStep Bind(int stage_id, int iter_id, IteratorAnnotation a) {
  AnnotationStep s;
  s.stage_id = stage_id;
  s.iter_id = iter_id;
  s.annotation = a;
  return s;
}

// Schedules one root stage; its iterators are still the initial ones (axes, then reduce axes).
absl::Status ScheduleStage(State& state, int stage_id, int64_t threads_per_block) {
  const int num_space = static_cast<int>(state.stage(stage_id).op->axes.size());
  // No spatial iterator (a full reduction): left unbound, which Lower makes a 1×1 kernel.
  if (num_space == 0) return absl::OkStatus();
  if (num_space > 1) {
    FuseStep fuse;
    fuse.stage_id = stage_id;
    for (int i = 0; i < num_space; ++i) fuse.fused_ids.push_back(i);
    RETURN_IF_ERROR(Apply(state, fuse));
  }
  // [fused] → [blocks, threads] (threads extent min(threads_per_block, fused extent); a guard
  // drops the tail when the block size does not divide the extent).
  RETURN_IF_ERROR(Apply(state, InnerSplit(state, stage_id, 0, threads_per_block)));
  const int64_t blocks = state.stage(stage_id).iters[0].extent;
  if (blocks <= kMaxGridX) {
    RETURN_IF_ERROR(Apply(state, Bind(stage_id, 0, IteratorAnnotation::kBlockIdxX)));
    RETURN_IF_ERROR(Apply(state, Bind(stage_id, 1, IteratorAnnotation::kThreadIdxX)));
    return absl::OkStatus();
  }
  // [blocks] → [grid y, grid x] with grid x as even as the limit allows. A tensor has at most
  // ir::kMaxElements = 2^40 elements, so grid y ≤ 513.
  const int64_t grid_y = CeilDiv(blocks, kMaxGridX);
  CHECK(grid_y <= kMaxGridY) << "stage '" << state.stage(stage_id).name() << "' needs " << blocks
                             << " blocks";
  RETURN_IF_ERROR(Apply(state, InnerSplit(state, stage_id, 0, CeilDiv(blocks, grid_y))));
  RETURN_IF_ERROR(Apply(state, Bind(stage_id, 0, IteratorAnnotation::kBlockIdxY)));
  RETURN_IF_ERROR(Apply(state, Bind(stage_id, 1, IteratorAnnotation::kBlockIdxX)));
  RETURN_IF_ERROR(Apply(state, Bind(stage_id, 2, IteratorAnnotation::kThreadIdxX)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<State> NaiveGpuSchedule(const ir::ComputeDAG& dag, const Target& target,
                                       int threads_per_block) {
  if (threads_per_block < 1 || threads_per_block > target.max_threads_per_block) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_block ", threads_per_block,
                                                   " is outside [1, ", target.max_threads_per_block,
                                                   "] for target ", target.ToString()));
  }
  State state = State::Initial(dag);
  // No step here inserts stages, so State ids equal DAG ids throughout.
  for (int id = 0; id < state.num_stages(); ++id) {
    if (state.stage(id).is_placeholder()) continue;
    RETURN_IF_ERROR(ScheduleStage(state, id, threads_per_block));
  }
  return state;
}

}  // namespace tilesearch::schedule
