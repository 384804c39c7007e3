// Lowering a scheduled State to a loop nest (TVM's ScheduleOps + InferBound, smaller): materializes
// splits (guards for non-divisible tails), fusions (div/mod index recovery), reorders, compute_at
// with bound inference, cache stages sized by their consumers' footprint, inlining, rfactor, and
// annotations (bindings become thread-bound loops); inserts barriers around shared-memory fills.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/launch_config.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "ir/stmt.h"
#include "schedule/state.h"

namespace tilesearch::schedule {

/// The lowered program. On GPU targets each top-level statement of `nest.body` (under the global
/// Allocates of intermediate buffers) is one kernel launch, in order: `launches[i]` configures the
/// i-th. Stages computed at root with their own block bindings (softmax's max, sum, normalize) thus
/// become consecutive kernels; stages attached with compute_at live inside their consumer's kernel.
/// CPU targets have no launches.
struct LoweredKernel {
  ir::LoopNest nest;
  std::vector<LaunchConfig> launches;
};

/// Lowers `state` (whose DAG is `dag`) for `target`. The kernel's parameters are the DAG's
/// placeholders then its outputs, like ir::LowerNaive, so the two can be compared directly.
/// Errors: kInvalidArgument for schedules that cannot be lowered (a sketch with unfilled tile
/// sizes, a stale compute_at region) and kFailedPrecondition "invalid_schedule: ..." for GPU
/// limits: threads per block > target limit, shared memory > limit, vthread > 8, vector width > 16
/// bytes, threads without blocks, barriers some threads would skip, grid extents over CUDA's limits
/// (blockIdx.x ≤ 2^31 − 1, blockIdx.y/z ≤ 65535; threadIdx.z ≤ 64). A GPU root stage with no
/// bindings at all becomes a 1-block, 1-thread kernel (valid, slow).
[[nodiscard]] absl::StatusOr<LoweredKernel> Lower(const ir::ComputeDAG& dag, const State& state,
                                                  const Target& target);

}  // namespace tilesearch::schedule
