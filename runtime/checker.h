// The correctness check of the measurement method (design.md): fresh inputs from several
// distributions, NaN-poisoned outputs, every output element compared with the reference under a
// dtype-aware tolerance, and the reference itself spot-checked against float64 point evaluation.
// Also the typed packing of host buffers into the bytes a kernel reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "runtime/measure.h"

namespace tilesearch::runtime {

/// |got − ref| <= atol + rtol · |ref| passes.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

/// The default tolerance of `dtype` (float32 1e-4/1e-4, float16 and bfloat16 1e-2/1e-2, integers
/// and bool exact), with `atol` / `rtol` taking over where they are > 0.
Tolerance ToleranceFor(ir::ScalarType dtype, double atol = 0, double rtol = 0);

/// One fresh buffer per placeholder of `dag` (keyed by tensor name) drawn from `distribution`
/// with `seed`, each value rounded to the buffer's dtype. Each buffer's generator is seeded from
/// `seed` and the tensor's name (so adding a placeholder does not change the others). Integer
/// buffers: integers uniform in [-16, 16) / [0, 16), or the normal rounded to an integer; bool 0/1.
ir::BufferMap MakeCheckInputs(const ir::ComputeDAG& dag, CheckDistribution distribution,
                              uint64_t seed);

/// Compares output `name` of one trial element by element and accumulates into `report`
/// (max errors, mismatch count, first mismatch with its multi-index). A NaN or Inf in `got` where
/// `expected` is finite is a mismatch; where `expected` is NaN, `got` must be NaN; where it is
/// ±Inf, `got` must be the same Inf. Shapes must match (CHECKed).
void CompareOutput(const std::string& name, const ir::HostBuffer& got,
                   const ir::HostBuffer& expected, const Tolerance& tolerance, int trial,
                   CheckDistribution distribution, CheckReport* report);

/// Spot-checks `outputs` (a reference computed by some kernel from `inputs`) against float64
/// point evaluation (ir::EvaluatePoint) on `samples` seeded random elements per output plus the
/// first and last element. Errors: kInternal "reference output 'C' disagrees with float64 point
/// evaluation at [i, j]: got x, expected y" under ToleranceFor(dtype) widened 10×; the errors of
/// EvaluatePoint.
[[nodiscard]] absl::Status VerifyReferenceSamples(const ir::ComputeDAG& dag,
                                                  const ir::BufferMap& inputs,
                                                  const ir::BufferMap& outputs, int samples,
                                                  uint64_t seed);

/// Bytes of one element of `dtype` in device / kernel layout (bool: 1).
int64_t StorageBytes(ir::ScalarType dtype);
/// The buffer's values in its dtype's storage layout (float16 / bfloat16 bit patterns, bool one
/// byte 0/1, row-major), as a kernel reads them.
std::vector<std::byte> PackBuffer(const ir::HostBuffer& buffer);
/// Reads `buffer->NumElements()` values of `buffer->dtype` from `bytes` into `buffer->data` (a bool
/// byte other than 0 / 1, e.g. the poison, reads as its byte value so that it never matches).
/// Errors: kInvalidArgument when `size` is not exactly the buffer's byte size.
[[nodiscard]] absl::Status UnpackBuffer(const void* bytes, size_t size, ir::HostBuffer* buffer);
/// Fills `count` elements of `dtype` at `bytes` with the poison value: quiet NaN for floats, the
/// byte pattern 0x5A for integers and bool (a value no kernel writes by accident).
void PoisonBytes(void* bytes, ir::ScalarType dtype, int64_t count);

}  // namespace tilesearch::runtime
