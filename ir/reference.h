// Reference results for a ComputeDAG: random inputs, the naive program run by the interpreter, and
// point evaluation of one output element straight from the definition in float64.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"

namespace tilesearch::ir {

/// One random buffer per placeholder (values in [-1, 1), seeded), keyed by tensor name.
BufferMap MakeRandomInputs(const ComputeDAG& dag, uint64_t seed);

/// Lowers naively and interprets; returns the output buffers keyed by tensor name.
/// Errors: missing / mis-shaped inputs, interpreter errors.
absl::StatusOr<BufferMap> RunReference(const ComputeDAG& dag, const BufferMap& inputs,
                                       Precision precision = Precision::kNative);

/// RunReference of the naive program with every float32 sum compensated
/// (ir/compensated_sum.h: Kahan summation, error about 2u·Σ|terms| whatever the reduction's
/// length), each operation rounded to float32: the correctness check's reference. Errors as
/// RunReference.
absl::StatusOr<BufferMap> RunCompensatedReference(const ComputeDAG& dag, const BufferMap& inputs);

/// Value of stage `stage_id` at `index`, computed from the definitions in float64 (producers are
/// evaluated pointwise, memoized). `steps`, when given, receives the number of stage bodies
/// evaluated (one per element computed, one per reduce iteration; inputs are not counted): a
/// deterministic measure of the call's work (a matmul element: K). Errors: bad stage id, index
/// rank or range, missing input.
absl::StatusOr<double> EvaluatePoint(const ComputeDAG& dag, int stage_id,
                                     const std::vector<int64_t>& index, const BufferMap& inputs,
                                     int64_t* steps = nullptr);

}  // namespace tilesearch::ir
