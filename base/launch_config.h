// The launch configuration of one GPU kernel: what the scheduler derives from a lowered kernel's
// thread bindings (schedule::Lower), what codegen annotates the PTX with, and what the runtime
// passes to cuLaunchKernel. One struct for every layer, so no layer copies it into its own.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tilesearch {
/// Grid, block, shared memory and occupancy request of one GPU kernel launch.
struct LaunchConfig {
  std::array<int64_t, 3> grid = {1, 1, 1};   // blockIdx.x/y/z extents (blocks per grid)
  std::array<int64_t, 3> block = {1, 1, 1};  // threadIdx.x/y/z extents (threads per block)
  /// Shared memory per block, bytes. From schedule::Lower: its estimate of the kernel's static
  /// shared memory (codegen reports the exact amount in codegen::GpuKernelInfo). Given to
  /// runtime::Launch: the dynamic shared memory of the launch (cuLaunchKernel's sharedMemBytes).
  int64_t shared_memory_bytes = 0;
  /// Blocks per SM ptxas is asked to fit (PTX .minnctapersm, from the min_blocks_per_sm pragma;
  /// it bounds registers per thread); 0 = no request. Not used by the launch itself.
  int64_t min_blocks_per_sm = 0;

  /// "grid (64, 1, 1) block (256, 1, 1) shared 8192 B" (+ " min 2 blocks/SM" when requested).
  std::string ToString() const;
};

}  // namespace tilesearch
