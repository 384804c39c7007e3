// Target: what a kernel is compiled for and the hardware limits schedules are checked against.
// CUDA limits are read from the device when one is present (runtime::TargetFromDevice); the
// defaults describe an NVIDIA H200 (sm_90) and the host CPU. Every layer above base/ (schedule,
// codegen's callers, runtime, costmodel, search) reads the same struct.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tilesearch {
/// The kind of machine a kernel is generated for.
enum class TargetKind : uint8_t { kCuda, kCpu };
/// The compilation target and its hardware limits (CUDA fields for kCuda, host ones for kCpu).
struct Target {
  TargetKind kind = TargetKind::kCpu;
  std::string arch;  // "sm_90" for CUDA, "x86-64" for the host
  int max_threads_per_block = 1024;
  int64_t max_shared_memory_per_block = 49152;  // bytes (static limit; opt-in may allow more)
  int64_t max_shared_memory_optin = 232448;     // bytes (H200 opt-in)
  int max_registers_per_block = 65536;
  int warp_size = 32;
  int max_vthread_extent = 8;
  int max_vector_bytes = 16;
  int sm_count = 132;
  int64_t l2_bytes = 62914560;  // 60 MiB
  int host_cores = 1;           // CPU: worker threads for parallel loops
  int host_vector_bytes = 32;   // CPU: SIMD register width (AVX2)

  /// An H200 (sm_90) with its published limits.
  static Target H200();
  /// The machine this runs on (cores from std::thread::hardware_concurrency).
  static Target HostCpu();

  bool is_gpu() const { return kind == TargetKind::kCuda; }
  /// "cuda -arch=sm_90" or "cpu".
  std::string ToString() const;
};

/// Parses "cuda", "cuda -arch=sm_80", "sm_90", "sm_90a", "cpu", "llvm". Errors: kInvalidArgument
/// "unknown target 'x' (expected cuda[-arch=sm_XX] or cpu)".
absl::StatusOr<Target> ParseTarget(const std::string& text);

}  // namespace tilesearch
