// Internal to codegen: the MLIR-free analysis of a loop nest before emission. Splits the body into
// kernels (top-level statements under the global Allocates), collects the scratch buffers, derives
// and checks each kernel's launch (blockIdx / threadIdx extents, guards) and the host restrictions
// on GPU-style kernels.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/codegen.h"
#include "ir/stmt.h"

namespace tilesearch::codegen::internal {

struct KernelPlan {
  ir::Stmt body;                             // the kernel's statement
  std::string name;                          // entry symbol
  std::array<int64_t, 3> grid = {1, 1, 1};   // launch grid (covers every blockIdx loop)
  std::array<int64_t, 3> block = {1, 1, 1};  // launch block (covers every threadIdx loop)
  int64_t min_blocks_per_sm = 0;             // LaunchConfig::min_blocks_per_sm
  int64_t cluster = 1;  // blocks per cluster along x (cluster barriers, multicast TMA); 1: none
  bool has_thread_loops = false;
  bool has_barrier = false;
};

struct ModulePlan {
  std::string name;             // sanitized nest name (a valid PTX / C identifier)
  std::vector<KernelArg> args;  // params then scratch buffers
  std::vector<KernelPlan> kernels;
};

/// A valid identifier from `name` ([A-Za-z_][A-Za-z0-9_]*; other characters become '_').
std::string SanitizeName(const std::string& name);

/// Splits `nest` into kernels with their launches (see CompileToPtx for the rules and errors).
absl::StatusOr<ModulePlan> PlanGpuModule(const ir::LoopNest& nest,
                                         const std::vector<LaunchConfig>& launches);

/// The same split for the host; every kernel runs in order in one function. Errors:
/// kUnimplemented for a kernel with threadIdx loops and a Barrier, or with a local Allocate that
/// encloses a threadIdx loop (serial emulation would share it between threads).
absl::StatusOr<ModulePlan> PlanHostModule(const ir::LoopNest& nest);

/// Loop kinds as the dimension they bind: 0..2, or -1.
int BoundDim(ir::ForKind kind);

}  // namespace tilesearch::codegen::internal
