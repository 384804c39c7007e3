// Per-store features of a lowered loop nest, after Ansor (Zheng et al., OSDI'20, §5.2 and
// Appendix B; TVM src/auto_scheduler/feature.cc): the cost model sees a program as the set of its
// Store statements, each described by one fixed-length vector of what it computes, how its loops
// are annotated and bound, which buffers it touches with what locality, its arithmetic intensity,
// the allocations around it and its outer loop scope. A program's score is the sum of its stores'
// scores ("pack-sum", costmodel/xgboost_model.h).
//
// Definitions shared by the features below. For one Store, its loop stack is the For loops that
// enclose it, outermost (depth 0) to innermost (depth n-1). A loop's extent is its constant extent
// (or the upper bound of a non-constant one); its *effective* extent is the extent, except that a
// threadIdx.d loop nested inside another threadIdx.d loop counts 1 (both use the same hardware
// index, ir/stmt.h), so products of effective extents count real executions. outer_prod = product
// of the effective extents of the whole stack = the number of times the store executes (over all
// threads and blocks). An access is one Load in the stored value or the Store itself; accesses are
// grouped by buffer. A loop *touches* a buffer when its variable occurs in an index of one of the
// buffer's accesses. The region of a buffer at level l is, per dimension, the hull of the index
// ranges of all its accesses when the loops at depth >= l run over their ranges and the outer loops
// sit at their min (interval bounds, ir::BoundOf; clipped to the buffer shape); its size is the
// product of the per-dimension range lengths (elements). Level n (no loop running) is the set of
// points of one execution. A cache line is 128 bytes on GPU targets and 64 bytes on CPU targets.
//
// Every value is finally scaled by log2(1 + x) (values are >= 0; one-hot entries stay 0 or 1).
// Layout, kNumFeatures = 173 entries (index: name — meaning):
//
// Group 1, computation [0, 12): operation counts of one execution of the store (the stored value,
// the store's and its loads' index expressions), times outer_prod. Both branches of a Select count.
//   0 float_addsub   float Add/Sub            6 int_mul       int Mul
//   1 float_mul      float Mul                7 int_divmod    int Div/Mod
//   2 float_divmod   float Div/Mod            8 int_cmp       comparisons of ints, int Min/Max
//   3 float_cmp      comparisons of floats,   9 bool_op       And/Or/Not
//                    float Min/Max           10 select_op     Select
//   4 float_math     math calls (exp, ...)   11 cast_op       Cast
//   5 int_addsub     int Add/Sub
// Group 2, loop annotations [12, 42): for kind k = vectorize (base 12), unroll (22), parallel (32):
//   base+0 {k}_num   number of loops of that kind in the stack
//   base+1 {k}_prod  product of their extents
//   base+2 {k}_len   extent of the innermost one
//   base+3..base+9   {k}_pos one-hot of the innermost one: none, inner_spatial, middle_spatial,
//                    outer_spatial, inner_reduce, middle_reduce, outer_reduce. Spatial: its
//                    variable occurs in the store's indices, else reduce. Inner: it is the
//                    innermost loop of the stack; outer: the outermost (and not innermost); middle
//                    otherwise.
// Group 3, GPU [42, 50):
//   42 is_gpu        1 for CUDA targets
//   43..45 blockIdx_{x,y,z}_len   largest extent of a blockIdx.d loop in the stack (1 if none)
//   46..48 threadIdx_{x,y,z}_len  largest extent of a threadIdx.d loop in the stack (1 if none)
//   49 vthread_len   product of the extents of vthread loops in the stack (1 if none)
// Group 4, buffer accesses [50, 140): up to 5 buffers, sorted by bytes, then lines (both
// descending), then name; buffer b occupies [50 + 18b, 68 + 18b); missing buffers are all zero.
//   +0..+2 acc_{read,write,rw}   one-hot: only loaded, only stored, both
//   +3  bytes            element bytes x accesses x outer_prod (bytes moved, with repeats)
//   +4  unique_bytes     element bytes x region size at level 0 (distinct bytes touched)
//   +5  lines            cache lines moved, with repeats: the stride loop is the innermost loop
//                        along which an access's row-major flat index changes, with stride s
//                        elements; one run of it touches min(e, e*s*bytes/line) lines (at least 1),
//                        repeated for every iteration of the loops outside it; 1 when no loop
//                        changes the index
//   +6  unique_lines     distinct cache lines of the level-0 region: trailing dimensions covered
//                        whole are merged into one contiguous run, whose lines are counted once per
//                        point of the outer dimensions
//   +7..+9 reuse_{loop,serial,none}  one-hot reuse type: loop = some loop does not touch the
//                        buffer (the innermost such loop is the reuse loop); serial = no such loop
//                        but the store accesses the buffer more than once; none otherwise
//   +10 reuse_dis_iter   loop: product of the effective extents of the loops inside the reuse
//                        loop (iterations between reuses); serial: 1; none: 0
//   +11 reuse_dis_bytes  loop: sum over all buffers of the store of element bytes x region size at
//                        the level just inside the reuse loop; serial: bytes of all accesses of
//                        one execution; none: 0
//   +12 reuse_ct         loop: effective extent of the reuse loop; serial: accesses - 1; none: 0
//   +13..+16 {bytes, unique_bytes, lines, unique_lines}_d_reuse_ct  those divided by
//                        max(1, reuse_ct)
//   +17 stride           s of the stride loop (elements; 0 when no loop changes the index)
// Group 5, arithmetic intensity [140, 150): points (x_l, y_l) for levels l = n..0 with
// x_l = log2(product of effective extents at depth >= l) and y_l = float ops of those iterations /
// sum over buffers of element bytes x region size at level l; sampled at x = x_0 (j+1)/10,
// j = 0..9, linearly interpolated between neighbouring points (x below the first point takes y_n,
// equal x take the outer point).
// Group 6, allocation [150, 155):
//   150 store_alloc_bytes       bytes of the buffer the store writes, if an enclosing Allocate
//                               declares it (shared/local/global scratch), else 0
//   151 store_alloc_outer_prod  product of the effective extents of the loops around that Allocate
//   152 shared_bytes_in_scope   total bytes of the shared-scope Allocates enclosing the store
//   153 local_bytes_in_scope    total bytes of the local-scope Allocates enclosing the store
//   154 num_allocs_in_scope     number of Allocates enclosing the store
// Group 7, outer scope [155, 159):
//   155 outer_prod   156 num_loops (loops in the stack)
//   157 auto_unroll_max_step  the pragma of the stage writing the store's buffer (options)
//   158 num_guards   number of IfThenElse enclosing the store (non-divisible tiles)
// Group 8, launch [159, 173): the kernel launch the store belongs to, against the target's SMs;
// why: on short kernels the blocks against the SMs (waves, the last wave's fill, resident blocks)
// decide more than the per-store counts above. GPU targets only (0 on the host). The kernel is
// FeatureOptions::launches[i] for the i-th top-level statement under the nest's global Allocates
// when their numbers agree; else the store's loop stack: blocks = product over d of the largest
// blockIdx.d extent, threads likewise, shared bytes and local elements of the Allocates around it.
//   159 launch_blocks        thread blocks of the grid
//   160 launch_threads       threads per block
//   161 launch_shared_bytes  shared memory per block (bytes)
//   162 launch_registers     estimated registers per thread: local elements of the kernel + 32,
//                            at most 255
//   163 resident_blocks_per_sm  min(32, 64 / warps per block, 233472 / (shared bytes + 1024),
//                            65536 / (registers per warp rounded up to 256 x warps)), floored,
//                            at least 1 (sm_80 / sm_90 limits)
//   164 occupancy            resident warps / 64
//   165 blocks_per_sm_count  blocks / target.sm_count
//   166 waves                ceil(blocks / (sm_count x resident))
//   167 last_wave_fill       blocks of the last wave / (sm_count x resident), in (0, 1]
//   168 float_ops_per_block  the store's float ops (group 1's float entries) / blocks
//   169 global_bytes_per_block  bytes the store moves from and to global buffers (with repeats)
//                            / blocks
//   170 k_tiles              extent of the outermost serial loop of extent > 1 in the stack
//                            (a tiled reduction's k-tile loop), 1 if none
//   171 pipeline_stages      FeatureOptions::pipeline_stages
//   172 stages_per_k_tile    pipeline_stages / k_tiles
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/launch_config.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "ir/stmt.h"
#include "schedule/lower.h"
#include "schedule/state.h"

namespace tilesearch::costmodel {

/// Version of the feature definition; saved models record it and refuse another.
/// Version 2 adds group 8 (the launch against the SMs).
inline constexpr int kFeatureVersion = 2;
/// Number of entries of one store's feature vector.
inline constexpr int kNumFeatures = 173;
/// Number of buffer-access groups per store and entries per group.
inline constexpr int kMaxBuffers = 5;
inline constexpr int kBufferFeatures = 18;
/// Offsets of the groups (see the header comment for each entry).
inline constexpr int kComputationOffset = 0;
inline constexpr int kVectorizeOffset = 12;
inline constexpr int kUnrollOffset = 22;
inline constexpr int kParallelOffset = 32;
inline constexpr int kGpuOffset = 42;
inline constexpr int kBufferOffset = 50;
inline constexpr int kIntensityOffset = 140;
inline constexpr int kAllocationOffset = 150;
inline constexpr int kOuterOffset = 155;
inline constexpr int kLaunchOffset = 159;

/// The features of one program: one kNumFeatures-long row per Store, in pre-order of the nest.
using StoreFeatures = std::vector<std::vector<float>>;

struct FeatureOptions {
  /// Scale every value by log2(1 + x) (the model's input); false gives the raw values (tests).
  bool log_scale = true;
  /// auto_unroll_max_step of the stage that writes each buffer (by buffer name); 0 when absent.
  std::map<std::string, int64_t> auto_unroll_max_step;
  /// One launch per kernel of the nest (schedule::LoweredKernel::launches); empty: group 8 reads
  /// each store's loop stack instead.
  std::vector<LaunchConfig> launches;
  /// The deepest software pipeline of the program: the largest software_pipeline pragma or
  /// tensor_core pipeline of its stages (0 when none is set).
  int pipeline_stages = 0;
};

/// The kNumFeatures names in order, e.g. "float_addsub", "vec_pos_inner_spatial",
/// "buf2_reuse_dis_bytes", "ai_curve_7".
const std::vector<std::string>& FeatureNames();

/// Scales a raw value: sign(x) log2(1 + |x|).
float LogScale(double x);

/// Features of every Store of `nest` (one row each, pre-order). Loop extents that do not simplify
/// to constants use their upper bound. Errors: kInvalidArgument when a Load or Store names a
/// buffer that is neither a parameter nor an enclosing Allocate ("store to unknown buffer 'X'").
absl::StatusOr<StoreFeatures> ExtractFeatures(const ir::LoopNest& nest, const Target& target,
                                              const FeatureOptions& options = {});

/// Features of `kernel`, the lowering of `state` for `target` (schedule::Lower), with each stage's
/// auto_unroll_max_step attached to the stores of the buffer named like the stage. Errors:
/// ExtractFeatures'.
absl::StatusOr<StoreFeatures> ExtractLoweredFeatures(const schedule::State& state,
                                                     const schedule::LoweredKernel& kernel,
                                                     const Target& target);

/// Lowers `state` for `target` (schedule::Lower), then ExtractLoweredFeatures. Errors: those of
/// schedule::Lower (an invalid state has no features; Ansor scores it -inf).
absl::StatusOr<StoreFeatures> ExtractStateFeatures(const ir::ComputeDAG& dag,
                                                   const schedule::State& state,
                                                   const Target& target);

}  // namespace tilesearch::costmodel
