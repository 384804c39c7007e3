// The correctness check's element comparison on the GPU: a hand-written PTX module (ISA 7.0,
// sm_75, so the driver JIT accepts it on any newer device) with two kernels, loaded once per
// measurement worker, that leave their results in small "slots" of device memory, so that a
// candidate's check downloads 32 bytes per output instead of the output itself.
//
//   tilesearch_compare_f32(got, expected, n, atol, rtol, slot, list, capacity, magnitude,
//     allowance): compares n float32 elements under measure::CompareElement's rule (checker.h), in
//     float64 like the host loop, so verdicts and errors are bit-identical to CompareOutput's; with
//     a magnitude buffer (n float32 values of M, ir/magnitude_dag.h; 0: none) the bound of each
//     element widens by allowance · M, the precision rule's cancellation allowance. Each thread
//     walks the elements grid-stride, the warp reduces with shfl, lane 0 adds to the slot with
//     64-bit atomics. With capacity > 0, the first `capacity` mismatches found (in no particular
//     order) are also written to `list` as pairs of 64-bit words (flat index, the got value as
//     float64 bits), counted in slot word 4 (which may exceed the capacity): float64 arbitration
//     needs only them, not the output on the host.
//   tilesearch_compare_f16 / tilesearch_compare_bf16: the same over float16 / bfloat16 elements,
//     widened to float32 exactly.
//   tilesearch_bytes_differ(a, b, bytes, slot): counts the differing 32-bit words (and tail bytes)
//     of two buffers into slot word 0 (used to see whether a candidate wrote into the resident
//     check inputs or references).
//
// Slot layout (kCompareSlotWords unsigned 64-bit words, initialized with InitCompareSlot):
//   [0] mismatches (atomic add), [1] bits of max_abs_error (atomic max: the bit patterns of
//   non-negative doubles order as the doubles), [2] bits of max_rel_error, [3] first mismatching
//   flat index (atomic min; all ones when none), [4] mismatches offered to the list (atomic add).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/type.h"
#include "measure/checker.h"
#include "runtime/cuda_api.h"
#include "runtime/cuda_device.h"

namespace tilesearch::measure {

/// Unsigned 64-bit words of one result slot.
inline constexpr int kCompareSlotWords = 5;
using CompareSlot = std::array<uint64_t, kCompareSlotWords>;

/// The PTX text of the compare module (entries tilesearch_compare_f32 and tilesearch_bytes_differ;
/// see the file comment). Built once; the same text every call.
const std::string& DeviceComparePtx();

/// A slot before any kernel wrote to it: zero counts and maxima, first index all ones, list count
/// 0.
CompareSlot InitialCompareSlot();

/// The CompareSummary of a slot written by tilesearch_compare_f32 over `elements` elements
/// (first_mismatch -1 when the slot holds no mismatch).
CompareSummary DecodeCompareSlot(const CompareSlot& slot, int64_t elements);

/// The compare module loaded into a context. Launches go to the default stream, asynchronously
/// (their errors show up at the next synchronizing call, e.g. the slot's download).
class DeviceComparer {
 public:
  /// Loads DeviceComparePtx() (driver JIT). Errors: CudaModule::LoadPtx's and GetFunction's.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DeviceComparer>> Create(
      const runtime::CudaContext& context);

  /// Whether Compare reads `dtype` elements (float32, float16, bfloat16).
  static bool Supports(ir::ScalarType dtype);

  /// Enqueues the comparison of `n` >= 0 `dtype` values at `got` with those at `expected` under
  /// `tolerance`, accumulating into the slot at `slot` (kCompareSlotWords words of device memory),
  /// and listing up to `list_capacity` mismatches at `list` (16 bytes each; 0 and 0: no list).
  /// With `magnitude` (n float32 magnitudes M; 0: none) an element's bound widens by
  /// tolerance.allowance · M where M is finite, as CompareElement with that magnitude.
  /// Nothing is launched for n == 0. Errors: kInvalidArgument for n < 0, a negative capacity, a
  /// capacity without a list, or a dtype Supports refuses; cuLaunchKernel's.
  absl::Status Compare(ir::ScalarType dtype, runtime::cuda::CUdeviceptr got,
                       runtime::cuda::CUdeviceptr expected, int64_t n, const Tolerance& tolerance,
                       runtime::cuda::CUdeviceptr slot, runtime::cuda::CUdeviceptr list,
                       int64_t list_capacity, runtime::cuda::CUdeviceptr magnitude = 0) const;

  /// Compare of float32 values without a list.
  absl::Status CompareFloat32(runtime::cuda::CUdeviceptr got, runtime::cuda::CUdeviceptr expected,
                              int64_t n, const Tolerance& tolerance,
                              runtime::cuda::CUdeviceptr slot) const;

  /// Enqueues counting the differing 32-bit words of the first `bytes` bytes of `a` and `b` (the
  /// last bytes % 4 bytes compared one by one) into word 0 of the slot at `slot`. Errors: as
  /// CompareFloat32.
  absl::Status CountDifferences(runtime::cuda::CUdeviceptr a, runtime::cuda::CUdeviceptr b,
                                int64_t bytes, runtime::cuda::CUdeviceptr slot) const;

 private:
  DeviceComparer() = default;
  const runtime::CudaContext* context_ = nullptr;
  std::unique_ptr<runtime::CudaModule> module_;
  runtime::cuda::CUfunction compare_f32_ = nullptr;
  runtime::cuda::CUfunction compare_f16_ = nullptr;
  runtime::cuda::CUfunction compare_bf16_ = nullptr;
  runtime::cuda::CUfunction bytes_differ_ = nullptr;
};

}  // namespace tilesearch::measure
