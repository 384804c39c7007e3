// The correctness check of the measurement method (design.md): fresh inputs from several
// distributions, NaN-poisoned outputs, every output element compared with the reference under a
// dtype-aware tolerance, and the reference itself spot-checked against float64 point evaluation.
// Also the typed packing of host buffers into the bytes a kernel reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/stmt.h"
#include "measure/measure.h"
#include "measure/precision_rule.h"

namespace tilesearch::measure {

/// |got − ref| <= atol + rtol · |ref| + allowance · M passes, where M is the element's magnitude
/// of the terms (measure/precision_rule.h) where the comparison has one, and 0 otherwise (or when
/// M is not finite). `allowance` is c · u of the precision rule (kCancellationFactor ·
/// ArithmeticUnitRoundoff); 0 gives the plain KernelBench-style comparison.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
  double allowance = 0;
};

/// The default tolerance of `dtype` (float32 1e-4/1e-4, float16 and bfloat16 1e-2/1e-2, integers
/// and bool exact), with `atol` / `rtol` taking over where they are > 0.
Tolerance ToleranceFor(ir::ScalarType dtype, double atol = 0, double rtol = 0);

/// One fresh buffer per placeholder of `dag` (keyed by tensor name) drawn from `distribution`
/// with `seed`, each value rounded to the buffer's dtype. Each value is a function of (`seed`, the
/// tensor's name, the element's flat index) only (a counter-based generator,
/// measure/check_inputs_fill.h: FillCheckInput with CheckInputStreamSeed(seed, name)), so adding
/// a placeholder does not change the others and buffers of 2^20 elements or more are filled by
/// several threads with the same values as one. Integer buffers: integers uniform in [-16, 16) /
/// [0, 16), or the normal rounded to an integer; bool 0/1 (every distribution).
ir::BufferMap MakeCheckInputs(const ir::ComputeDAG& dag, CheckDistribution distribution,
                              uint64_t seed);

/// MakeCheckInputs' buffers without their values: each is generated (ir::HostBuffer::source,
/// CheckInputSource) and holds no data, element i having MakeCheckInputs' value of element i bit
/// for bit. For inputs too large to hold on the host
/// (MeasureOptions::generated_inputs_min_elements): the measurers upload them in chunks and the
/// float64 point evaluation reads only what it needs.
ir::BufferMap MakeGeneratedCheckInputs(const ir::ComputeDAG& dag, CheckDistribution distribution,
                                       uint64_t seed);

/// Compares output `name` of one trial element by element and accumulates into `report`
/// (max errors, mismatch count, first mismatch with its multi-index). A NaN or Inf in `got` where
/// `expected` is finite is a mismatch; where `expected` is NaN, `got` must be NaN; where it is
/// ±Inf, `got` must be the same Inf. Shapes must match (CHECKed).
void CompareOutput(const std::string& name, const ir::HostBuffer& got,
                   const ir::HostBuffer& expected, const Tolerance& tolerance, int trial,
                   CheckDistribution distribution, CheckReport* report);

/// What comparing one element contributes (the rule of CompareOutput and of the device compare
/// kernel, measure/device_compare.h). `ok`: NaN expected needs NaN; ±Inf expected needs the same
/// Inf; otherwise `got` must be finite and |got − expected| <= atol + rtol · |expected| (in
/// float64, the product rounded before the sum). Only a finite `expected` contributes errors:
/// `abs_error` is |got − expected| (+Inf for a non-finite `got`); `rel_error` is abs_error /
/// max(|expected|, 1e-30), given only where |expected| > atol.
struct ElementComparison {
  bool ok = true;
  bool has_abs_error = false;
  double abs_error = 0;
  bool has_rel_error = false;
  double rel_error = 0;
};
ElementComparison CompareElement(double got, double expected, const Tolerance& tolerance,
                                 double magnitude = 0);

/// The outcome of comparing one output of one trial, as the device compare kernel reports it.
struct CompareSummary {
  int64_t elements = 0;
  int64_t mismatches = 0;
  double max_abs_error = 0;     // max over CompareElement's abs_error (0 when none)
  double max_rel_error = 0;     // max over rel_error (0 when none)
  int64_t first_mismatch = -1;  // the lowest flat index that is not ok; -1 when none
};

/// CompareSummary of `n` float64 elements under CompareElement (with the magnitudes at
/// `magnitude`, n values, when it is not null), split over `threads` chunks whose summaries merge
/// in index order (the same summary for every `threads`). CompareOutput is this with
/// ThreadsFor(n) followed by AccumulateSummary.
CompareSummary SummarizeDoubles(const double* got, const double* expected, int64_t n,
                                const Tolerance& tolerance, int threads,
                                const double* magnitude = nullptr);

/// CompareSummary of `n` float32 elements (the host mirror of the device compare kernel; each value
/// is widened to float64 exactly before CompareElement), with the magnitudes at `magnitude` (n
/// float32 values) when it is not null.
CompareSummary SummarizeFloat32(const float* got, const float* expected, int64_t n,
                                const Tolerance& tolerance, const float* magnitude = nullptr);

/// The CheckReport text of a mismatch at flat index `flat` of output `name` of shape `shape`:
/// "C[3, 17]: got nan, expected 1.25 (trial 1, normal)" (values with %.9g).
std::string MismatchText(const std::string& name, const std::vector<int64_t>& shape, int64_t flat,
                         double got, double expected, int trial, CheckDistribution distribution);

/// Accumulates `summary` into `report` exactly as CompareOutput would have for the same elements:
/// maxima, mismatch and element counts, and, when the report has no mismatch yet, the first
/// mismatch's text from the values at summary.first_mismatch (`got_at_first`, `expected_at_first`;
/// ignored when there is no mismatch).
void AccumulateSummary(const std::string& name, const std::vector<int64_t>& shape,
                       const CompareSummary& summary, double got_at_first, double expected_at_first,
                       int trial, CheckDistribution distribution, CheckReport* report);

/// Limits of ArbitrateMismatches (MeasureOptions::arbitration_max_elements and
/// arbitration_max_steps).
struct ArbitrationOptions {
  /// At most this many mismatches of one output are re-judged; more: no arbitration. 0 disables.
  int64_t max_elements = 1024;
  /// Work limit of the float64 point evaluations of one output, in stage-body evaluations
  /// (ir::EvaluatePoint's `steps`: K per matmul element); deterministic, unlike a time budget.
  int64_t max_steps = int64_t{1} << 26;
  /// The arithmetic float32 outputs may use: u of the rule (UnitRoundoff).
  Fp32Precision precision = Fp32Precision::kIeee;
};

/// One mismatch re-judged by ArbitrateMismatches.
struct ArbitratedElement {
  int64_t flat = -1;       // flat (row-major) index in the output
  double got = 0;          // the candidate's value
  double ref32 = 0;        // the float32 reference's value
  double ref64 = 0;        // ir::EvaluatePoint's value (0 when not evaluated or it failed)
  double magnitude = 0;    // M of the element (ir::EvaluatePointWithMagnitude)
  bool evaluated = false;  // false: EvaluatePoint failed
  bool passed = false;     // ArbitrationElementPasses(got, ref64, magnitude, rule)
};

/// What comparing one output of one trial against its float32 reference, then arbitrating the
/// mismatches in float64, found.
struct ArbitrationSummary {
  CompareSummary compare;     // the plain comparison (CompareElement against the float32 reference)
  bool attempted = false;     // the mismatches were re-judged (0 < mismatches <= cap, in limit)
  int64_t arbitrated = 0;     // mismatches re-judged and passed
  int64_t still_failing = 0;  // mismatches that did not pass (all of them when not attempted)
  /// When attempted and some failed: "C[3, 17]: got x, ref32 y, ref64 z" of the lowest failing
  /// flat index. When skipped over the step limit: why. Empty otherwise (no mismatches, over the
  /// cap, arbitration disabled, or all passed).
  std::string note;
  /// The re-judged mismatches in flat-index order (empty when not attempted; at most the cap).
  std::vector<ArbitratedElement> judged;
  /// Every mismatch of the plain comparison passed arbitration (true when there was none).
  bool passed() const { return compare.mismatches == arbitrated; }
};

/// Float64 arbitration of float32 mismatches (our addition to the KernelBench-style check).
///
/// Compares `got` with `expected` (the float32 reference: the interpreter or the naive program,
/// output stage `output_id` of `dag`, computed from `inputs`) element by element under
/// CompareElement: the cheap float32 screen. When 0 < mismatches <= options.max_elements, each
/// mismatching element is re-judged by the precision rule (measure/precision_rule.h) against
/// ref64 and M = ir::EvaluatePointWithMagnitude(dag, output_id, index, inputs):
///   |got − ref64| <= atol + rtol · |ref64| + c · u · M,
/// u by the output's dtype and options.precision. Non-finite values keep CompareElement's verdict
/// (a failure: they were mismatches). More mismatches than the cap (or a cap of 0): no
/// arbitration, still_failing = mismatches (a real bug usually mismatches many elements).
///
/// The screen accepts an element the rule would reject only where the reference itself is off
/// from ref64 by more than c · u · M (|got − ref64| <= |got − ref32| + |ref32 − ref64|), in the
/// direction of the candidate's error. Small tasks' reference is float64 from the definitions,
/// rounded once (InterpreterReference, measure/reference.h): the screen is sound there. Larger
/// tasks' is the naive float32 program (one sequential sum per element): with cancelling terms its
/// error is about u · M, inside the allowance; with same-sign terms it is typically about sqrt(K)/3
/// · u · M, but there |ref64| ≈ M and the excess over the allowance is about 4 % of rtol · |ref64|
/// at K = 2^16 (float32: rtol · M is about 1700 u · M). VerifyReferenceSamples checks the reference
/// by the rule on sampled elements each batch, and SampleFloat64Reference records both errors on
/// sampled points.
///
/// Why: a float32 reference summed in one order is not exact. On the H200 the naive (no-FMA) GPU
/// reference of swiglu_gate (K = 2048) was off by 3.7e-4 from float64 at an element where every
/// FMA candidate was off by 1.5e-4 (tolerance 1.35e-4), and over the output the reference had
/// 4571 elements outside 1e-4 of float64, the candidates 4550; every candidate of swiglu_gate and
/// of matmul_large_k (K = 65536) was rejected as wrong_answer although more accurate than it.
///
/// Cost: one float64 point evaluation per mismatch, each about the reduction volume of the output
/// (K multiply-adds for a matmul, more through fused producers), run on up to
/// min(usable cores, 32) threads. The first element is evaluated alone and its steps counted
/// (ir::EvaluatePoint); when steps × mismatches exceeds options.max_steps, arbitration is skipped
/// (note says so) and the output fails exactly as the plain check would have. The verdict does not
/// depend on time or load (with a wall-clock budget the same correct kernel could pass on an idle
/// machine and fail on a loaded one). About 180 ns per step on this project's 2-core
/// machine: the default 2^26 steps (1024 mismatches of a K = 65536 matmul) is 12 s on one core.
/// Errors of EvaluatePoint (missing inputs) count as failures with their message in `note`.
/// Shapes must match (CHECKed), `output_id` must be an output of `dag` with got's shape.
/// With `magnitude` (M of every element, InterpreterMagnitudes / the magnitude kernel, got's
/// shape) and tolerance.allowance > 0 the screen already applies the cancellation allowance, as
/// the device compare does, so that only elements outside the whole rule are re-judged.
ArbitrationSummary ArbitrateMismatches(const ir::ComputeDAG& dag, int output_id,
                                       const ir::BufferMap& inputs, const ir::HostBuffer& got,
                                       const ir::HostBuffer& expected, const Tolerance& tolerance,
                                       const ArbitrationOptions& options,
                                       const ir::HostBuffer* magnitude = nullptr);

/// ArbitrateMismatches for mismatches found elsewhere (the device compare,
/// measure/device_compare.h, lists them without the output leaving the GPU): `compare` summarizes
/// the plain comparison of the whole output, `flats` holds every mismatching flat index in
/// ascending order (all compare.mismatches of them when 0 < mismatches <= options.max_elements; may
/// be empty otherwise), `got` and `ref32` their candidate and float32 reference values. Same
/// verdicts, notes and limits as ArbitrateMismatches, which calls it. Sizes must agree (CHECKed).
ArbitrationSummary ArbitrateListed(const ir::ComputeDAG& dag, int output_id,
                                   const ir::BufferMap& inputs, const CompareSummary& compare,
                                   const std::vector<int64_t>& flats,
                                   const std::vector<double>& got, const std::vector<double>& ref32,
                                   const Tolerance& tolerance, const ArbitrationOptions& options);

/// Accumulates an arbitrated output into `report` as CompareOutputWithArbitration does (below);
/// `got_at_first` / `expected_at_first` are the values at a.compare.first_mismatch when the
/// arbitration did not pass (ignored otherwise).
void AccumulateArbitration(const ir::ComputeDAG& dag, int output_id, const ArbitrationSummary& a,
                           double got_at_first, double expected_at_first, int trial,
                           CheckDistribution distribution, CheckReport* report);

/// CompareOutput of output `output_id` of `dag` with float64 arbitration (ArbitrateMismatches):
/// when every mismatch passes arbitration, the output accumulates into `report` as matching
/// (maxima and element count as CompareOutput, no mismatches) and report->arbitrated grows by
/// their number; otherwise it accumulates exactly as CompareOutput, and a failed or skipped
/// arbitration's text, "float64 arbitration of N mismatches of C (trial t, dist): M still fail,
/// first C[i, j]: got x, ref32 y, ref64 z", is kept in report->arbitration (the first only).
/// `magnitude`: as ArbitrateMismatches.
void CompareOutputWithArbitration(const ir::ComputeDAG& dag, int output_id,
                                  const ir::BufferMap& inputs, const ir::HostBuffer& got,
                                  const ir::HostBuffer& expected, const Tolerance& tolerance,
                                  const ArbitrationOptions& options, int trial,
                                  CheckDistribution distribution, CheckReport* report,
                                  const ir::HostBuffer* magnitude = nullptr);

/// The rule of `dtype` outputs under `tolerance` and `precision` (atol, rtol and
/// ArithmeticUnitRoundoff, intermediates not rounded to a half type).
PrecisionRule RuleFor(ir::ScalarType dtype, const Tolerance& tolerance, Fp32Precision precision);
/// The rule of output `output_id` of `dag`: RuleFor its dtype, with the half type's u where a
/// computed stage other than the output is stored in float16 / bfloat16 (a fused chain of
/// half-precision operators rounds between them).
PrecisionRule RuleFor(const ir::ComputeDAG& dag, int output_id, const Tolerance& tolerance,
                      Fp32Precision precision);

/// The arbitration rule of one element (ArbitrateMismatches): ref64 finite, got not NaN and
/// PassesPrecisionRule(rule, got, ref64, magnitude) (an infinite got only as the overflow of the
/// output's type that the rule allows).
bool ArbitrationElementPasses(double got, double ref64, double magnitude,
                              const PrecisionRule& rule);

/// Spot-checks `outputs` (a reference computed by some kernel from `inputs`) against float64
/// point evaluation (ir::EvaluatePointWithMagnitude) on `samples` seeded random elements per output
/// plus the first and last element, by the precision rule with ToleranceFor(dtype)'s atol and rtol
/// widened 10× and the dtype's u (a float32 reference: 2^-24). The points are evaluated in
/// parallel; where the first element's evaluation takes more than `max_steps` / (samples + 2)
/// stage-body steps (a reduction over millions of elements per point), the points are cut to what
/// fits in `max_steps` (the first and last element always checked). Errors: kInternal "reference
/// output 'C' disagrees with float64 point evaluation at [i, j]: got x, expected y (allowed error
/// e)"; the errors of EvaluatePoint.
[[nodiscard]] absl::Status VerifyReferenceSamples(const ir::ComputeDAG& dag,
                                                  const ir::BufferMap& inputs,
                                                  const ir::BufferMap& outputs, int samples,
                                                  uint64_t seed,
                                                  int64_t max_steps = int64_t{1} << 28);

/// The float64 reference of one output at sampled points (SampleFloat64Reference).
struct SampledOutput {
  std::string name;               // the output tensor
  PrecisionRule rule;             // the output's rule (tolerance, dtype and precision)
  std::vector<int64_t> flats;     // flat indices: first, last, then the seeded samples
  std::vector<double> ref64;      // ir::EvaluatePointWithMagnitude's value at each flat index
  std::vector<double> magnitude;  // and its M
  /// The plain float32 program's largest |ref32 − ref64| over the points.
  double reference_max_abs_error = 0;
};

/// Evaluates every float output of `dag` in float64 with magnitudes
/// (ir::EvaluatePointWithMagnitude) at its first and last element and options.precision_samples
/// seeded elements (seed and the output's name: CheckInputStreamSeed), once per batch so that each
/// candidate's error on the same points costs nothing more than reading them. The first point is
/// evaluated alone and its steps counted: when all would exceed options.arbitration_max_steps, only
/// as many points as fit (at least the first) are kept. reference_max_abs_error is the plain
/// float32 program's error at the points: from `reference` (its outputs on the same `inputs`) where
/// it holds the output, else point-evaluated with float32 rounding (ir::EvaluatePointRounded; the
/// check's own reference may be compensated or float64, far more accurate than a float32
/// kernel, and the 3xTF32 acceptance compares with a float32 kernel). The rule of each output:
/// ToleranceFor(dtype, options.atol, options.rtol) and UnitRoundoff(dtype, options.precision).
/// Integer and bool outputs are skipped. Errors: those of EvaluatePointWithMagnitude.
absl::StatusOr<std::vector<SampledOutput>> SampleFloat64Reference(const ir::ComputeDAG& dag,
                                                                  const ir::BufferMap& inputs,
                                                                  const ir::BufferMap& reference,
                                                                  const MeasureOptions& options,
                                                                  uint64_t seed);

/// Accumulates a candidate's error on the sampled points of one output into `report`'s f64_*
/// fields: f64_points grows by the number of points, f64_max_ratio / f64_max_abs_error /
/// reference_f64_max_abs_error take the maxima (ErrorRatio; a non-finite got is +inf). `got_at`
/// returns the candidate's value at a flat index.
void RecordSampledError(const SampledOutput& sampled, const std::function<double(int64_t)>& got_at,
                        CheckReport* report);

/// True when `nest` holds an MMA statement of `kind` (e.g. a 3xTF32 candidate:
/// ir::MmaKind::kTF32x3).
bool UsesMmaKind(const ir::LoopNest& nest, ir::MmaKind kind);

/// The ieee acceptance of a 3xTF32 candidate: its largest float64 error on the sampled points is
/// no larger than the float32 reference's on the same points, up to kTf32x3ErrorFactor (the
/// largest of a few hundred errors of two equally accurate float32 kernels differs by tens of
/// percent from one to the other, so a strict comparison would reject about half of them at
/// random; one-pass TF32 is about 2^13 times less accurate), or negligible (f64_max_ratio <=
/// kTf32x3NegligibleRatio: within the rule with c = 1, for references that are exact). Returns ""
/// when it passes (never without sampled points), else why (for MeasureResult::message).
inline constexpr double kTf32x3ErrorFactor = 2;
inline constexpr double kTf32x3NegligibleRatio = 1.0 / 16;
std::string Tf32x3Verdict(const CheckReport& report);

/// Bytes of one element of `dtype` in device / kernel layout (bool: 1).
int64_t StorageBytes(ir::ScalarType dtype);
/// The buffer's values in its dtype's storage layout (float16 / bfloat16 bit patterns, bool one
/// byte 0/1, row-major), as a kernel reads them. Buffers of 2^20 elements or more are packed by
/// several threads (ThreadsFor, measure/check_inputs_fill.h); the bytes do not depend on it.
std::vector<std::byte> PackBuffer(const ir::HostBuffer& buffer);
/// PackBuffer split over `threads` chunks (ParallelChunks); the same bytes for every `threads`.
std::vector<std::byte> PackBufferWithThreads(const ir::HostBuffer& buffer, int threads);
/// Reads `buffer->NumElements()` values of `buffer->dtype` from `bytes` into `buffer->data` (a bool
/// byte other than 0 / 1, e.g. the poison, reads as its byte value so that it never matches).
/// Errors: kInvalidArgument when `size` is not exactly the buffer's byte size. Parallel like
/// PackBuffer.
[[nodiscard]] absl::Status UnpackBuffer(const void* bytes, size_t size, ir::HostBuffer* buffer);
/// Packs a generated buffer (ir::HostBuffer::source) chunk by chunk: for each range of at most
/// `chunk_elements` elements in order, fills the values (several threads, ThreadsFor), packs them
/// as PackBuffer would and calls `sink(byte offset of the chunk, its bytes)`, so the caller never
/// holds more than one chunk. The concatenated bytes equal PackBuffer of the filled buffer. Stops
/// at the first error `sink` returns. Errors: kInvalidArgument for a buffer without a source, a
/// negative size or chunk_elements < 1; `sink`'s.
[[nodiscard]] absl::Status PackGeneratedChunks(
    const ir::HostBuffer& generated, int64_t chunk_elements,
    const std::function<absl::Status(int64_t offset, const std::vector<std::byte>& bytes)>& sink);
/// UnpackBuffer split over `threads` chunks; the same values for every `threads`.
[[nodiscard]] absl::Status UnpackBufferWithThreads(const void* bytes, size_t size,
                                                   ir::HostBuffer* buffer, int threads);
/// Fills `count` elements of `dtype` at `bytes` with the poison value: quiet NaN for floats, the
/// byte pattern 0x5A for integers and bool (a value no kernel writes by accident). Parallel like
/// PackBuffer.
void PoisonBytes(void* bytes, ir::ScalarType dtype, int64_t count);

}  // namespace tilesearch::measure
