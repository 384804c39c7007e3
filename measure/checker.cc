// The correctness check: check inputs, element-wise comparison, float64 spot checks of a
// reference, and typed packing of host buffers (float16 / bfloat16 round to nearest even).
#include "measure/checker.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/cpu_count.h"
#include "base/status.h"
#include "ir/reference.h"
#include "measure/check_inputs_fill.h"

namespace tilesearch::measure {
namespace {

uint32_t FloatBits(float f) { return std::bit_cast<uint32_t>(f); }

float BitsFloat(uint32_t u) { return std::bit_cast<float>(u); }

// IEEE binary32 → binary16, round to nearest even; NaNs stay (quiet) NaNs.
uint16_t HalfBitsFromFloat(float f) {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((ax >> 13) & 0x3ffu);
  // 65520 = 0x477ff000 is the tie between 65504 (odd mantissa) and 2^16: it and above are inf.
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax < 0x38800000u) {
    // Below 2^-14: a subnormal in units of 2^-24 (the product is exact in double; nearbyint rounds
    // to even). 1024 units is the smallest normal, whose encoding is also 1024.
    const double units = std::nearbyint(static_cast<double>(BitsFloat(ax)) * 0x1.0p24);
    return sign | static_cast<uint16_t>(units);
  }
  const uint32_t exponent = (ax >> 23) - 127 + 15;
  const uint32_t mantissa = ax & 0x7fffffu;
  uint32_t h = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return sign | static_cast<uint16_t>(h);
}

double DoubleFromHalfBits(uint16_t h) {
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// IEEE binary32 → bfloat16, round to nearest even; NaNs stay quiet NaNs.
uint16_t Bf16BitsFromFloat(float f) {
  uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

double DoubleFromBf16Bits(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

std::string FormatValue(double v) { return absl::StrFormat("%.9g", v); }

std::string FormatIndex(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return absl::StrCat("[", absl::StrJoin(index, ", "), "]");
}

std::vector<int64_t> Unflatten(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// The element rule shared by CompareOutput and VerifyReferenceSamples.
bool Matches(double got, double expected, const Tolerance& tolerance, double magnitude) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  if (!std::isfinite(got)) return false;
  double allowed = tolerance.atol + tolerance.rtol * std::fabs(expected);
  if (std::isfinite(magnitude)) {
    const double allowance = tolerance.allowance * magnitude;  // rounded before the sum
    allowed = allowed + allowance;
  }
  return std::fabs(got - expected) <= allowed;
}

}  // namespace

Tolerance ToleranceFor(ir::ScalarType dtype, double atol, double rtol) {
  Tolerance t;
  switch (dtype) {
    case ir::ScalarType::kFloat32:
      t = {1e-4, 1e-4};
      break;
    case ir::ScalarType::kFloat16:
    case ir::ScalarType::kBFloat16:
      t = {1e-2, 1e-2};
      break;
    case ir::ScalarType::kInt32:
    case ir::ScalarType::kInt64:
    case ir::ScalarType::kBool:
      t = {0, 0};
      break;
  }
  if (atol > 0) t.atol = atol;
  if (rtol > 0) t.rtol = rtol;
  return t;
}

ir::BufferMap MakeCheckInputs(const ir::ComputeDAG& dag, CheckDistribution distribution,
                              uint64_t seed) {
  ir::BufferMap inputs;
  for (int id : dag.input_ids()) {
    const ir::Tensor& t = dag.stage(id);
    ir::HostBuffer b = ir::HostBuffer::Zeros(t.dtype(), t.shape());
    FillCheckInput(distribution, CheckInputStreamSeed(seed, t.name()), ThreadsFor(b.NumElements()),
                   &b);
    inputs.emplace(t.name(), std::move(b));
  }
  return inputs;
}

ir::BufferMap MakeGeneratedCheckInputs(const ir::ComputeDAG& dag, CheckDistribution distribution,
                                       uint64_t seed) {
  ir::BufferMap inputs;
  for (int id : dag.input_ids()) {
    const ir::Tensor& t = dag.stage(id);
    ir::HostBuffer b;
    b.dtype = t.dtype();
    b.shape = t.shape();
    b.source = CheckInputSource(distribution, CheckInputStreamSeed(seed, t.name()), t.dtype());
    inputs.emplace(t.name(), std::move(b));
  }
  return inputs;
}

ElementComparison CompareElement(double got, double expected, const Tolerance& tolerance,
                                 double magnitude) {
  ElementComparison c;
  c.ok = Matches(got, expected, tolerance, magnitude);
  if (std::isfinite(expected)) {
    c.has_abs_error = true;
    c.abs_error =
        std::isfinite(got) ? std::fabs(got - expected) : std::numeric_limits<double>::infinity();
    if (std::fabs(expected) > tolerance.atol) {
      c.has_rel_error = true;
      c.rel_error = c.abs_error / std::max(std::fabs(expected), 1e-30);
    }
  }
  return c;
}

CompareSummary SummarizeFloat32(const float* got, const float* expected, int64_t n,
                                const Tolerance& tolerance, const float* magnitude) {
  CompareSummary s;
  s.elements = n;
  for (int64_t i = 0; i < n; ++i) {
    const double m = magnitude != nullptr ? static_cast<double>(magnitude[i]) : 0.0;
    const ElementComparison c =
        CompareElement(static_cast<double>(got[i]), static_cast<double>(expected[i]), tolerance, m);
    if (c.has_abs_error) s.max_abs_error = std::max(s.max_abs_error, c.abs_error);
    if (c.has_rel_error) s.max_rel_error = std::max(s.max_rel_error, c.rel_error);
    if (!c.ok) {
      if (s.mismatches == 0) s.first_mismatch = i;
      ++s.mismatches;
    }
  }
  return s;
}

std::string MismatchText(const std::string& name, const std::vector<int64_t>& shape, int64_t flat,
                         double got, double expected, int trial, CheckDistribution distribution) {
  return absl::StrCat(name, FormatIndex(shape, flat), ": got ", FormatValue(got), ", expected ",
                      FormatValue(expected), " (trial ", trial, ", ",
                      CheckDistributionName(distribution), ")");
}

void AccumulateSummary(const std::string& name, const std::vector<int64_t>& shape,
                       const CompareSummary& summary, double got_at_first, double expected_at_first,
                       int trial, CheckDistribution distribution, CheckReport* report) {
  report->max_abs_error = std::max(report->max_abs_error, summary.max_abs_error);
  report->max_rel_error = std::max(report->max_rel_error, summary.max_rel_error);
  if (summary.mismatches > 0 && report->mismatches == 0 && report->first_mismatch.empty()) {
    report->first_mismatch = MismatchText(name, shape, summary.first_mismatch, got_at_first,
                                          expected_at_first, trial, distribution);
  }
  report->mismatches += summary.mismatches;
  report->checked_elements += summary.elements;
}

CompareSummary SummarizeDoubles(const double* got, const double* expected, int64_t n,
                                const Tolerance& tolerance, int threads, const double* magnitude) {
  // Per-chunk summaries merged in index order: maxima and counts are order-free, the first
  // mismatch is the lowest chunk's.
  std::vector<CompareSummary> parts(static_cast<size_t>(NumChunks(n, threads)));
  ParallelChunks(n, threads, [&](int64_t chunk, int64_t begin, int64_t end) {
    CompareSummary s;
    s.elements = end - begin;
    for (int64_t i = begin; i < end; ++i) {
      const ElementComparison c =
          CompareElement(got[i], expected[i], tolerance, magnitude != nullptr ? magnitude[i] : 0);
      if (c.has_abs_error) s.max_abs_error = std::max(s.max_abs_error, c.abs_error);
      if (c.has_rel_error) s.max_rel_error = std::max(s.max_rel_error, c.rel_error);
      if (!c.ok) {
        if (s.mismatches == 0) s.first_mismatch = i;
        ++s.mismatches;
      }
    }
    parts[static_cast<size_t>(chunk)] = s;
  });
  CompareSummary total;
  for (const CompareSummary& s : parts) {
    total.elements += s.elements;
    total.max_abs_error = std::max(total.max_abs_error, s.max_abs_error);
    total.max_rel_error = std::max(total.max_rel_error, s.max_rel_error);
    if (s.mismatches > 0 && total.mismatches == 0) total.first_mismatch = s.first_mismatch;
    total.mismatches += s.mismatches;
  }
  return total;
}

void CompareOutput(const std::string& name, const ir::HostBuffer& got,
                   const ir::HostBuffer& expected, const Tolerance& tolerance, int trial,
                   CheckDistribution distribution, CheckReport* report) {
  CHECK(got.shape == expected.shape) << "output '" << name << "' compared with a reference of "
                                     << "another shape";
  CHECK(got.data.size() == expected.data.size())
      << "output '" << name << "' holds " << got.data.size() << " values, the reference "
      << expected.data.size();
  const int64_t n = static_cast<int64_t>(expected.data.size());
  const CompareSummary summary =
      SummarizeDoubles(got.data.data(), expected.data.data(), n, tolerance, ThreadsFor(n));
  const int64_t first = summary.first_mismatch;
  AccumulateSummary(name, expected.shape, summary, first >= 0 ? got.data[first] : 0,
                    first >= 0 ? expected.data[first] : 0, trial, distribution, report);
}

PrecisionRule RuleFor(ir::ScalarType dtype, const Tolerance& tolerance, Fp32Precision precision) {
  return PrecisionRule{tolerance.atol, tolerance.rtol,
                       ArithmeticUnitRoundoff(dtype, /*rounded_intermediates=*/false, precision),
                       dtype};
}

PrecisionRule RuleFor(const ir::ComputeDAG& dag, int output_id, const Tolerance& tolerance,
                      Fp32Precision precision) {
  bool rounded = false;
  for (int id = 0; id < dag.num_stages(); ++id) {
    const ir::ScalarType t = dag.stage(id).dtype();
    rounded |= id != output_id && dag.Kind(id) != ir::StageKind::kPlaceholder &&
               (t == ir::ScalarType::kFloat16 || t == ir::ScalarType::kBFloat16);
  }
  const ir::ScalarType dtype = dag.stage(output_id).dtype();
  return PrecisionRule{tolerance.atol, tolerance.rtol,
                       ArithmeticUnitRoundoff(dtype, rounded, precision), dtype};
}

bool ArbitrationElementPasses(double got, double ref64, double magnitude,
                              const PrecisionRule& rule) {
  if (std::isnan(got) || !std::isfinite(ref64)) return false;
  return PassesPrecisionRule(rule, got, ref64, magnitude);
}

namespace {

// Threads for `n` point evaluations: the usable cores (affinity mask, TILESEARCH_THREADS) capped
// at kMaxParallelThreads and at n.
int ArbitrationThreads(int64_t n) {
  const int64_t threads = std::min<int64_t>(UsableCores(), kMaxParallelThreads);
  return static_cast<int>(std::max<int64_t>(1, std::min(threads, n)));
}

ArbitratedElement JudgeElement(const ir::ComputeDAG& dag, int output_id,
                               const ir::BufferMap& inputs, const std::vector<int64_t>& shape,
                               int64_t flat, double got, double ref32, const PrecisionRule& rule,
                               std::string* error, int64_t* steps = nullptr) {
  ArbitratedElement e;
  e.flat = flat;
  e.got = got;
  e.ref32 = ref32;
  absl::StatusOr<ir::PointValue> ref64 =
      ir::EvaluatePointWithMagnitude(dag, output_id, Unflatten(shape, flat), inputs, steps);
  if (!ref64.ok()) {
    *error = std::string(ref64.status().message());
    return e;
  }
  e.evaluated = true;
  e.ref64 = ref64->value;
  e.magnitude = ref64->magnitude;
  e.passed = ArbitrationElementPasses(got, e.ref64, e.magnitude, rule);
  return e;
}

// The flat indices of `got` that are not ok against `expected` under CompareElement, ascending.
std::vector<int64_t> MismatchIndices(const double* got, const double* expected, int64_t n,
                                     const Tolerance& tolerance, const double* magnitude) {
  std::vector<std::vector<int64_t>> parts(static_cast<size_t>(NumChunks(n, ThreadsFor(n))));
  ParallelChunks(n, ThreadsFor(n), [&](int64_t chunk, int64_t begin, int64_t end) {
    std::vector<int64_t>& part = parts[static_cast<size_t>(chunk)];
    for (int64_t i = begin; i < end; ++i) {
      const double m = magnitude != nullptr ? magnitude[i] : 0;
      if (!CompareElement(got[i], expected[i], tolerance, m).ok) part.push_back(i);
    }
  });
  std::vector<int64_t> all;
  for (const std::vector<int64_t>& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

}  // namespace

ArbitrationSummary ArbitrateListed(const ir::ComputeDAG& dag, int output_id,
                                   const ir::BufferMap& inputs, const CompareSummary& compare,
                                   const std::vector<int64_t>& flats,
                                   const std::vector<double>& got, const std::vector<double>& ref32,
                                   const Tolerance& tolerance, const ArbitrationOptions& options) {
  CHECK(output_id >= 0 && output_id < dag.num_stages()) << "stage id " << output_id;
  CHECK(got.size() == flats.size() && ref32.size() == flats.size())
      << flats.size() << " listed mismatches with " << got.size() << " values and " << ref32.size()
      << " reference values";
  const ir::Tensor& t = dag.stage(output_id);
  ArbitrationSummary s;
  s.compare = compare;
  s.still_failing = s.compare.mismatches;
  if (s.compare.mismatches == 0 || options.max_elements <= 0 ||
      s.compare.mismatches > options.max_elements) {
    return s;
  }
  CHECK(static_cast<int64_t>(flats.size()) == s.compare.mismatches)
      << "mismatch count " << s.compare.mismatches << " but " << flats.size() << " indices";
  const int64_t count = static_cast<int64_t>(flats.size());
  std::vector<ArbitratedElement> verdicts(flats.size());
  std::vector<std::string> errors(flats.size());
  for (size_t i = 0; i < flats.size(); ++i) {
    verdicts[i].flat = flats[i];
    verdicts[i].got = got[i];
    verdicts[i].ref32 = ref32[i];
  }
  const PrecisionRule rule = RuleFor(dag, output_id, tolerance, options.precision);
  auto judge = [&](int64_t i, int64_t* steps) {
    const size_t u = static_cast<size_t>(i);
    verdicts[u] = JudgeElement(dag, output_id, inputs, t.shape(), flats[u], got[u], ref32[u], rule,
                               &errors[u], steps);
  };

  // The first element alone, its steps counted: the estimate of the whole (deterministic).
  int64_t first_steps = 0;
  judge(0, &first_steps);
  const int64_t per_element = std::max<int64_t>(first_steps, 1);
  if (count > 1 && per_element > options.max_steps / count) {
    s.note = absl::StrFormat(
        "skipped: %d float64 point evaluations of about %d steps each, over the limit of %d steps",
        count, per_element, options.max_steps);
    return s;
  }
  s.attempted = true;
  ParallelChunks(count - 1, ArbitrationThreads(count - 1),
                 [&](int64_t, int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i) judge(i + 1, nullptr);
                 });

  int64_t first_failure = -1;
  for (int64_t i = 0; i < count; ++i) {
    if (verdicts[static_cast<size_t>(i)].passed) {
      ++s.arbitrated;
    } else if (first_failure < 0) {
      first_failure = i;
    }
  }
  s.still_failing = count - s.arbitrated;
  if (first_failure >= 0) {
    const ArbitratedElement& v = verdicts[static_cast<size_t>(first_failure)];
    const std::string& error = errors[static_cast<size_t>(first_failure)];
    const std::string where = absl::StrCat(t.name(), FormatIndex(t.shape(), v.flat));
    if (!error.empty()) {
      s.note = absl::StrCat(where, ": float64 point evaluation failed: ", error);
    } else {
      s.note = absl::StrCat(where, ": got ", FormatValue(v.got), ", ref32 ", FormatValue(v.ref32),
                            ", ref64 ", FormatValue(v.ref64), ", allowed ",
                            FormatValue(AllowedError(rule, v.ref64, v.magnitude)));
    }
  }
  s.judged = std::move(verdicts);
  return s;
}

ArbitrationSummary ArbitrateMismatches(const ir::ComputeDAG& dag, int output_id,
                                       const ir::BufferMap& inputs, const ir::HostBuffer& got,
                                       const ir::HostBuffer& expected, const Tolerance& tolerance,
                                       const ArbitrationOptions& options,
                                       const ir::HostBuffer* magnitude) {
  CHECK(output_id >= 0 && output_id < dag.num_stages()) << "stage id " << output_id;
  const ir::Tensor& t = dag.stage(output_id);
  CHECK(got.shape == expected.shape && expected.shape == t.shape())
      << "output '" << t.name() << "' arbitrated with buffers of another shape";
  CHECK(got.data.size() == expected.data.size() &&
        static_cast<int64_t>(expected.data.size()) == t.NumElements())
      << "output '" << t.name() << "' holds " << got.data.size() << " values, the reference "
      << expected.data.size();
  const int64_t n = static_cast<int64_t>(expected.data.size());
  CHECK(magnitude == nullptr || static_cast<int64_t>(magnitude->data.size()) == n)
      << "output '" << t.name() << "' judged with " << magnitude->data.size() << " magnitudes";
  const double* m = magnitude != nullptr ? magnitude->data.data() : nullptr;
  const CompareSummary compare =
      SummarizeDoubles(got.data.data(), expected.data.data(), n, tolerance, ThreadsFor(n), m);
  std::vector<int64_t> flats;
  std::vector<double> got_values, ref_values;
  if (compare.mismatches > 0 && options.max_elements > 0 &&
      compare.mismatches <= options.max_elements) {
    flats = MismatchIndices(got.data.data(), expected.data.data(), n, tolerance, m);
    for (int64_t f : flats) {
      got_values.push_back(got.data[f]);
      ref_values.push_back(expected.data[f]);
    }
  }
  return ArbitrateListed(dag, output_id, inputs, compare, flats, got_values, ref_values, tolerance,
                         options);
}

void AccumulateArbitration(const ir::ComputeDAG& dag, int output_id, const ArbitrationSummary& a,
                           double got_at_first, double expected_at_first, int trial,
                           CheckDistribution distribution, CheckReport* report) {
  const ir::Tensor& t = dag.stage(output_id);
  CompareSummary summary = a.compare;
  if (a.passed()) {
    report->arbitrated += a.arbitrated;
    summary.mismatches = 0;
    summary.first_mismatch = -1;
  } else if (!a.note.empty() && report->arbitration.empty()) {
    report->arbitration = absl::StrCat(
        "float64 arbitration of ", a.compare.mismatches, " mismatches of ", t.name(), " (trial ",
        trial, ", ", CheckDistributionName(distribution),
        "): ", a.attempted ? absl::StrCat(a.still_failing, " still fail, first ", a.note) : a.note);
  }
  AccumulateSummary(t.name(), t.shape(), summary, got_at_first, expected_at_first, trial,
                    distribution, report);
}

void CompareOutputWithArbitration(const ir::ComputeDAG& dag, int output_id,
                                  const ir::BufferMap& inputs, const ir::HostBuffer& got,
                                  const ir::HostBuffer& expected, const Tolerance& tolerance,
                                  const ArbitrationOptions& options, int trial,
                                  CheckDistribution distribution, CheckReport* report,
                                  const ir::HostBuffer* magnitude) {
  const ArbitrationSummary a =
      ArbitrateMismatches(dag, output_id, inputs, got, expected, tolerance, options, magnitude);
  const int64_t first = a.passed() ? -1 : a.compare.first_mismatch;
  AccumulateArbitration(dag, output_id, a, first >= 0 ? got.data[first] : 0,
                        first >= 0 ? expected.data[first] : 0, trial, distribution, report);
}

absl::Status VerifyReferenceSamples(const ir::ComputeDAG& dag, const ir::BufferMap& inputs,
                                    const ir::BufferMap& outputs, int samples, uint64_t seed,
                                    int64_t max_steps) {
  for (int id : dag.output_ids()) {
    const ir::Tensor& t = dag.stage(id);
    auto it = outputs.find(t.name());
    if (it == outputs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no reference output '", t.name(), "' to verify"));
    }
    const ir::HostBuffer& out = it->second;
    const int64_t n = t.NumElements();
    if (out.shape != t.shape() || static_cast<int64_t>(out.data.size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reference output '", t.name(), "' has ", out.data.size(), " values of shape [",
          absl::StrJoin(out.shape, ", "), "], expected [", absl::StrJoin(t.shape(), ", "), "]"));
    }
    if (n == 0) continue;
    std::vector<int64_t> flats = {0};
    if (n > 1) flats.push_back(n - 1);
    std::mt19937_64 rng(CheckInputStreamSeed(seed, t.name()));
    for (int s = 0; s < samples; ++s) flats.push_back(static_cast<int64_t>(rng() % n));
    const Tolerance tol = ToleranceFor(t.dtype());
    const PrecisionRule rule =
        RuleFor(dag, id, Tolerance{10 * tol.atol, 10 * tol.rtol}, Fp32Precision::kIeee);
    // The first point's cost decides how many fit in the budget.
    int64_t first_steps = 0;
    ASSIGN_OR_RETURN(
        const ir::PointValue first,
        ir::EvaluatePointWithMagnitude(dag, id, Unflatten(t.shape(), 0), inputs, &first_steps));
    const int64_t fit = max_steps / std::max<int64_t>(first_steps, 1);
    flats.resize(static_cast<size_t>(
        std::clamp<int64_t>(fit, std::min<int64_t>(2, static_cast<int64_t>(flats.size())),
                            static_cast<int64_t>(flats.size()))));
    const int64_t count = static_cast<int64_t>(flats.size());
    std::vector<ir::PointValue> expected(flats.size());
    expected[0] = first;
    std::vector<absl::Status> errors(flats.size());
    ParallelChunks(count, ArbitrationThreads(count), [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = std::max<int64_t>(begin, 1); i < end; ++i) {
        absl::StatusOr<ir::PointValue> v = ir::EvaluatePointWithMagnitude(
            dag, id, Unflatten(t.shape(), flats[static_cast<size_t>(i)]), inputs);
        if (v.ok()) {
          expected[static_cast<size_t>(i)] = *v;
        } else {
          errors[static_cast<size_t>(i)] = v.status();
        }
      }
    });
    for (const absl::Status& e : errors) RETURN_IF_ERROR(e);
    for (size_t k = 0; k < flats.size(); ++k) {
      const int64_t flat = flats[k];
      const double got = out.data[static_cast<size_t>(flat)];
      if (!PassesPrecisionRule(rule, got, expected[k].value, expected[k].magnitude)) {
        return absl::InternalError(absl::StrCat(
            "reference output '", t.name(), "' disagrees with float64 point evaluation at ",
            FormatIndex(t.shape(), flat), ": got ", FormatValue(got), ", expected ",
            FormatValue(expected[k].value), " (allowed error ",
            FormatValue(AllowedError(rule, expected[k].value, expected[k].magnitude)), ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SampledOutput>> SampleFloat64Reference(const ir::ComputeDAG& dag,
                                                                  const ir::BufferMap& inputs,
                                                                  const ir::BufferMap& reference,
                                                                  const MeasureOptions& options,
                                                                  uint64_t seed) {
  std::vector<SampledOutput> sampled;
  for (int id : dag.output_ids()) {
    const ir::Tensor& t = dag.stage(id);
    const int64_t n = t.NumElements();
    if (!ir::IsFloat(t.dtype()) || n == 0) continue;
    SampledOutput out;
    out.name = t.name();
    out.rule =
        RuleFor(dag, id, ToleranceFor(t.dtype(), options.atol, options.rtol), options.precision);
    out.flats = {0, n - 1};
    std::mt19937_64 rng(CheckInputStreamSeed(seed, t.name()));
    for (int i = 0; i < options.precision_samples; ++i) {
      out.flats.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(n)));
    }
    // Without the float32 reference's outputs (the reference is compensated or float64), the
    // plain float32 program's values at the points are evaluated too: twice the steps.
    const auto ref = reference.find(t.name());
    const bool have_plain = ref != reference.end() && ref->second.NumElements() == n;
    int64_t first_steps = 0;
    ASSIGN_OR_RETURN(
        const ir::PointValue first,
        ir::EvaluatePointWithMagnitude(dag, id, Unflatten(t.shape(), 0), inputs, &first_steps));
    const int64_t fit =
        options.arbitration_max_steps / (std::max<int64_t>(first_steps, 1) * (have_plain ? 1 : 2));
    out.flats.resize(
        static_cast<size_t>(std::clamp<int64_t>(fit, 1, static_cast<int64_t>(out.flats.size()))));
    const int64_t count = static_cast<int64_t>(out.flats.size());
    out.ref64.assign(out.flats.size(), 0);
    out.magnitude.assign(out.flats.size(), 0);
    out.ref64[0] = first.value;
    out.magnitude[0] = first.magnitude;
    std::vector<double> plain(out.flats.size(), 0);
    std::vector<absl::Status> errors(out.flats.size());
    ParallelChunks(count, ArbitrationThreads(count), [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const size_t k = static_cast<size_t>(i);
        const std::vector<int64_t> index = Unflatten(t.shape(), out.flats[k]);
        if (k > 0) {
          absl::StatusOr<ir::PointValue> v = ir::EvaluatePointWithMagnitude(dag, id, index, inputs);
          if (!v.ok()) {
            errors[k] = v.status();
            continue;
          }
          out.ref64[k] = v->value;
          out.magnitude[k] = v->magnitude;
        }
        if (have_plain) {
          plain[k] = ref->second.data[static_cast<size_t>(out.flats[k])];
        } else {
          absl::StatusOr<double> p = ir::EvaluatePointRounded(dag, id, index, inputs);
          if (!p.ok()) {
            errors[k] = p.status();
            continue;
          }
          plain[k] = *p;
        }
      }
    });
    for (const absl::Status& e : errors) RETURN_IF_ERROR(e);
    for (size_t k = 0; k < out.flats.size(); ++k) {
      const double e = std::fabs(plain[k] - out.ref64[k]);
      out.reference_max_abs_error = std::max(
          out.reference_max_abs_error, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
    }
    sampled.push_back(std::move(out));
  }
  return sampled;
}

void RecordSampledError(const SampledOutput& sampled, const std::function<double(int64_t)>& got_at,
                        CheckReport* report) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < sampled.flats.size(); ++k) {
    const double got = got_at(sampled.flats[k]);
    const double ref64 = sampled.ref64[k];
    report->f64_max_ratio =
        std::max(report->f64_max_ratio, ErrorRatio(sampled.rule, got, ref64, sampled.magnitude[k]));
    if (std::isfinite(ref64)) {
      const double e = std::isfinite(got) ? std::fabs(got - ref64) : kInf;
      report->f64_max_abs_error = std::max(report->f64_max_abs_error, e);
    }
  }
  report->f64_points += static_cast<int64_t>(sampled.flats.size());
  report->reference_f64_max_abs_error =
      std::max(report->reference_f64_max_abs_error, sampled.reference_max_abs_error);
}

namespace {

class MmaKindFinder : public ir::StmtVisitor {
 public:
  explicit MmaKindFinder(ir::MmaKind kind) : kind_(kind) {}
  bool found() const { return found_; }

 protected:
  void VisitWarpMma(const ir::WarpMmaNode* op, const ir::Stmt& s) override {
    if (op->kind == kind_) found_ = true;
    ir::StmtVisitor::VisitWarpMma(op, s);
  }
  void VisitWgmma(const ir::WgmmaNode* op, const ir::Stmt& s) override {
    if (op->kind == kind_) found_ = true;
    ir::StmtVisitor::VisitWgmma(op, s);
  }

 private:
  ir::MmaKind kind_;
  bool found_ = false;
};

}  // namespace

bool UsesMmaKind(const ir::LoopNest& nest, ir::MmaKind kind) {
  MmaKindFinder finder(kind);
  finder.Visit(nest.body);
  return finder.found();
}

std::string Tf32x3Verdict(const CheckReport& report) {
  if (report.f64_points == 0) {
    return "3xTF32 candidate not accepted: no float64 error was measured on sampled points to "
           "compare with the float32 reference's";
  }
  if (report.f64_max_abs_error <= kTf32x3ErrorFactor * report.reference_f64_max_abs_error ||
      report.f64_max_ratio <= kTf32x3NegligibleRatio) {
    return "";
  }
  return absl::StrFormat(
      "3xTF32 candidate less accurate than float32: max error against float64 %.3g on %d sampled "
      "points, over twice the float32 reference's %.3g (precision ieee; tf32 allows it)",
      report.f64_max_abs_error, report.f64_points, report.reference_f64_max_abs_error);
}

int64_t StorageBytes(ir::ScalarType dtype) { return ir::BytesOf(dtype); }

namespace {

// Packs values [begin, end) of `buffer` at `p` (the storage layout of PackBuffer).
void PackRange(const ir::HostBuffer& buffer, std::byte* p, int64_t begin, int64_t end) {
  const double* data = buffer.data.data();
  switch (buffer.dtype) {
    case ir::ScalarType::kFloat32:
      for (int64_t i = begin; i < end; ++i) {
        const float f = static_cast<float>(data[i]);
        std::memcpy(p + 4 * i, &f, 4);
      }
      break;
    case ir::ScalarType::kFloat16:
      for (int64_t i = begin; i < end; ++i) {
        // Rounding the double straight to float16 avoids double rounding through float32; the
        // rounded value is exact in float32 and converts exactly.
        const uint16_t h = HalfBitsFromFloat(
            static_cast<float>(ir::RoundToType(data[i], ir::ScalarType::kFloat16)));
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case ir::ScalarType::kBFloat16:
      for (int64_t i = begin; i < end; ++i) {
        const uint16_t h = Bf16BitsFromFloat(
            static_cast<float>(ir::RoundToType(data[i], ir::ScalarType::kBFloat16)));
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case ir::ScalarType::kInt32:
      for (int64_t i = begin; i < end; ++i) {
        const int32_t x = static_cast<int32_t>(ir::RoundToType(data[i], ir::ScalarType::kInt32));
        std::memcpy(p + 4 * i, &x, 4);
      }
      break;
    case ir::ScalarType::kInt64:
      for (int64_t i = begin; i < end; ++i) {
        const double t = ir::RoundToType(data[i], ir::ScalarType::kInt64);
        int64_t x = 0;
        if (t >= 0x1.0p63) {
          x = std::numeric_limits<int64_t>::max();
        } else if (t < -0x1.0p63) {
          x = std::numeric_limits<int64_t>::min();
        } else {
          x = static_cast<int64_t>(t);
        }
        std::memcpy(p + 8 * i, &x, 8);
      }
      break;
    case ir::ScalarType::kBool:
      for (int64_t i = begin; i < end; ++i) p[i] = data[i] != 0 ? std::byte{1} : std::byte{0};
      break;
  }
}

// Reads values [begin, end) of `dtype` at `p` into `out` (UnpackBuffer's conversions).
void UnpackRange(const unsigned char* p, ir::ScalarType dtype, double* out, int64_t begin,
                 int64_t end) {
  switch (dtype) {
    case ir::ScalarType::kFloat32:
      for (int64_t i = begin; i < end; ++i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out[i] = f;
      }
      break;
    case ir::ScalarType::kFloat16:
      for (int64_t i = begin; i < end; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = DoubleFromHalfBits(h);
      }
      break;
    case ir::ScalarType::kBFloat16:
      for (int64_t i = begin; i < end; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = DoubleFromBf16Bits(h);
      }
      break;
    case ir::ScalarType::kInt32:
      for (int64_t i = begin; i < end; ++i) {
        int32_t x;
        std::memcpy(&x, p + 4 * i, 4);
        out[i] = x;
      }
      break;
    case ir::ScalarType::kInt64:
      for (int64_t i = begin; i < end; ++i) {
        int64_t x;
        std::memcpy(&x, p + 8 * i, 8);
        out[i] = static_cast<double>(x);
      }
      break;
    case ir::ScalarType::kBool:
      // Any byte but 0 and 1 (e.g. the 0x5A poison) must not read as a valid bool.
      for (int64_t i = begin; i < end; ++i) {
        out[i] = p[i] == 0 ? 0.0 : p[i] == 1 ? 1.0 : static_cast<double>(p[i]);
      }
      break;
  }
}

}  // namespace

absl::Status PackGeneratedChunks(
    const ir::HostBuffer& generated, int64_t chunk_elements,
    const std::function<absl::Status(int64_t offset, const std::vector<std::byte>& bytes)>& sink) {
  const int64_t n = generated.NumElements();
  if (!generated.generated() || n < 0 || chunk_elements < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PackGeneratedChunks needs a generated buffer of a valid shape and chunks of at least one "
        "element (source ",
        generated.generated() ? "set" : "missing", ", ", n, " elements, chunks of ", chunk_elements,
        ")"));
  }
  const int64_t width = StorageBytes(generated.dtype);
  ir::HostBuffer chunk;
  chunk.dtype = generated.dtype;
  for (int64_t begin = 0; begin < n; begin += chunk_elements) {
    const int64_t m = std::min(chunk_elements, n - begin);
    chunk.shape = {m};
    chunk.data.resize(static_cast<size_t>(m));
    double* out = chunk.data.data();
    const int threads = ThreadsFor(m);
    ParallelChunks(m, threads, [&](int64_t, int64_t b, int64_t e) {
      generated.source->Fill(begin + b, begin + e, out + b);
    });
    RETURN_IF_ERROR(sink(begin * width, PackBufferWithThreads(chunk, threads)));
  }
  return absl::OkStatus();
}

std::vector<std::byte> PackBuffer(const ir::HostBuffer& buffer) {
  return PackBufferWithThreads(buffer, ThreadsFor(static_cast<int64_t>(buffer.data.size())));
}

std::vector<std::byte> PackBufferWithThreads(const ir::HostBuffer& buffer, int threads) {
  const int64_t n = static_cast<int64_t>(buffer.data.size());
  CHECK(n == buffer.NumElements())
      << "buffer holds " << n << " values for " << buffer.NumElements() << " elements";
  std::vector<std::byte> bytes(static_cast<size_t>(n * StorageBytes(buffer.dtype)));
  std::byte* p = bytes.data();
  ParallelChunks(n, threads,
                 [&](int64_t, int64_t begin, int64_t end) { PackRange(buffer, p, begin, end); });
  return bytes;
}

absl::Status UnpackBuffer(const void* bytes, size_t size, ir::HostBuffer* buffer) {
  return UnpackBufferWithThreads(bytes, size, buffer, ThreadsFor(buffer->NumElements()));
}

absl::Status UnpackBufferWithThreads(const void* bytes, size_t size, ir::HostBuffer* buffer,
                                     int threads) {
  const int64_t n = buffer->NumElements();
  CHECK(n >= 0) << "buffer shape with a negative extent or too many elements";
  const size_t expected = static_cast<size_t>(n * StorageBytes(buffer->dtype));
  if (size != expected) {
    return absl::InvalidArgumentError(absl::StrCat("cannot unpack ", size, " bytes into ", n,
                                                   " elements of ", ir::TypeName(buffer->dtype),
                                                   " (", expected, " bytes)"));
  }
  buffer->data.resize(static_cast<size_t>(n));
  const unsigned char* p = static_cast<const unsigned char*>(bytes);
  const ir::ScalarType dtype = buffer->dtype;
  double* out = buffer->data.data();
  ParallelChunks(n, threads, [&](int64_t, int64_t begin, int64_t end) {
    UnpackRange(p, dtype, out, begin, end);
  });
  return absl::OkStatus();
}

void PoisonBytes(void* bytes, ir::ScalarType dtype, int64_t count) {
  unsigned char* p = static_cast<unsigned char*>(bytes);
  const int64_t width = StorageBytes(dtype);
  ParallelChunks(count, ThreadsFor(count), [&](int64_t, int64_t begin, int64_t end) {
    switch (dtype) {
      case ir::ScalarType::kFloat32: {
        const uint32_t nan = 0x7fc00000u;
        for (int64_t i = begin; i < end; ++i) std::memcpy(p + 4 * i, &nan, 4);
        break;
      }
      case ir::ScalarType::kFloat16:
      case ir::ScalarType::kBFloat16: {
        const uint16_t nan = dtype == ir::ScalarType::kFloat16 ? 0x7e00u : 0x7fc0u;
        for (int64_t i = begin; i < end; ++i) std::memcpy(p + 2 * i, &nan, 2);
        break;
      }
      case ir::ScalarType::kInt32:
      case ir::ScalarType::kInt64:
      case ir::ScalarType::kBool:
        std::memset(p + begin * width, 0x5a, static_cast<size_t>((end - begin) * width));
        break;
    }
  });
}

}  // namespace tilesearch::measure
