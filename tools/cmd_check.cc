// `tilesearch check`: runs a schedule's lowered loop nest in the reference interpreter and judges
// every output element against the float64 value of the naive program on the same seeded random
// inputs, by the precision rule of the tuner's check and of bench/harness/score.py
// (measure/precision_rule.h): a schedule that reassociates a float32 sum (a tree or split
// reduction) is as correct there as here.
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "ir/reference.h"
#include "ir/stmt.h"
#include "measure/checker.h"
#include "measure/precision_rule.h"
#include "measure/reference.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "schedule/step.h"
#include "tools/commands.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

// Measured: the two programs of a 128^3 matmul (about 2^23.6 estimated operations) interpret in
// 0.5 s, so 2^28 keeps a check to about ten seconds.
constexpr double kMaxInterpretedOps = 268435456.0;

struct CheckOptions {
  WorkloadOptions workload;
  uint64_t seed = 1;
  bool force = false;
  double rtol = -1;                // < 0: the dtype's tolerance
  std::string precision = "ieee";  // --precision: tf32 judges with TF32's unit roundoff
};

// Operations both programs interpret: each runs every stage's body once per point (output points
// times reduce points) and its arithmetic (FLOPs).
double EstimateInterpretedOps(const ir::ComputeDAG& dag) {
  double points = 0;
  for (int id = 0; id < dag.num_stages(); ++id) {
    const ir::Tensor& t = dag.stage(id);
    if (t->is_placeholder) continue;
    double p = static_cast<double>(t.NumElements());
    for (const ir::IterVar& r : t->reduce_axes) p *= static_cast<double>(r.extent);
    points += p;
  }
  return 2 * (dag.Flops() + points);
}

// The precision rule of `output_id`'s elements: the dtype's tolerance and the cancellation
// allowance of the tuner's check, with atol and rtol replaced by `rtol` when it is >= 0; 0 also
// drops the allowance (an exact comparison with float64). `precision` as the tuner's: tf32 judges
// float32 outputs with TF32's unit roundoff (one-pass TF32 tensor-core schedules).
measure::PrecisionRule RuleOf(const ir::ComputeDAG& dag, int output_id, double rtol,
                              measure::Fp32Precision precision) {
  const ir::ScalarType dtype = dag.stage(output_id).dtype();
  measure::Tolerance tolerance = measure::ToleranceFor(dtype);
  if (rtol >= 0) tolerance.atol = tolerance.rtol = rtol;
  measure::PrecisionRule rule = measure::RuleFor(dag, output_id, tolerance, precision);
  if (rtol == 0) rule.unit_roundoff = 0;
  return rule;
}

struct Comparison {
  double max_abs = 0;         // |got - ref64|, over finite ref64
  double max_ratio = 0;       // |got - ref64| / the allowed error (<= 1 passes)
  bool same_as_naive = true;  // bit for bit equal to the naive float32 program
  int64_t mismatches = 0;
  int64_t first = -1;  // flat index of the first mismatch
};

// `magnitude`: M of each element (empty: no cancellation allowance, e.g. integer outputs).
Comparison Compare(const ir::HostBuffer& got, const ir::HostBuffer& ref64,
                   const ir::HostBuffer& naive, const std::vector<double>& magnitude,
                   const measure::PrecisionRule& rule) {
  Comparison c;
  for (size_t i = 0; i < ref64.data.size(); ++i) {
    const double g = got.data[i], r = ref64.data[i];
    const double m = magnitude.empty() ? 0.0 : magnitude[i];
    const bool equal_naive = g == naive.data[i] || (std::isnan(g) && std::isnan(naive.data[i]));
    c.same_as_naive &= equal_naive;
    if (std::isfinite(r)) c.max_abs = std::max(c.max_abs, std::fabs(g - r));
    const double ratio = measure::ErrorRatio(rule, g, r, m);
    if (!std::isnan(ratio)) c.max_ratio = std::max(c.max_ratio, ratio);
    if (!measure::PassesPrecisionRule(rule, g, r, m)) {
      if (c.first < 0) c.first = static_cast<int64_t>(i);
      ++c.mismatches;
    }
  }
  return c;
}

std::vector<int64_t> Unflatten(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<int> Check(const CheckOptions& options) {
  ASSIGN_OR_RETURN(schedule::ScheduleFile file, ScheduleFromOptions(options.workload));
  ASSIGN_OR_RETURN(schedule::ResolvedSchedule resolved, file.Resolve());
  const ir::ComputeDAG& dag = resolved.dag;
  const double ops = EstimateInterpretedOps(dag);
  if (ops > kMaxInterpretedOps && !options.force) {
    return absl::InvalidArgumentError(absl::StrCat(
        "workload '", file.workload.ToString(), "' needs about ", static_cast<int64_t>(ops),
        " interpreted operations, more than the limit ", static_cast<int64_t>(kMaxInterpretedOps),
        " (2^28, about ten seconds in the interpreter); give smaller --shape values or --force"));
  }
  ASSIGN_OR_RETURN(schedule::LoweredKernel kernel, LowerScheduleFile(file, resolved));

  std::cout << "schedule: " << file.source << "\n"
            << "workload: " << file.workload.ToString() << "\n"
            << "target: " << file.target.ToString() << "\n"
            << "steps: " << file.steps.size();
  if (file.target.is_gpu()) std::cout << ", kernels: " << kernel.launches.size();
  std::cout << "\ninputs: uniform in [-1, 1), seed " << options.seed << "\n";

  const ir::BufferMap inputs = ir::MakeRandomInputs(dag, options.seed);
  absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
  if (!ref.ok()) {
    return absl::Status(ref.status().code(),
                        absl::StrCat("the naive program failed: ", ref.status().message()));
  }
  absl::StatusOr<ir::BufferMap> ref64 = ir::RunReference(dag, inputs, ir::Precision::kFloat64);
  if (!ref64.ok()) {
    return absl::Status(ref64.status().code(), absl::StrCat("the naive program in float64 failed: ",
                                                            ref64.status().message()));
  }
  // M of each float output (the cancellation allowance); none without a float output.
  bool any_float = false;
  for (int id : dag.output_ids()) any_float |= ir::IsFloat(dag.stage(id).dtype());
  ir::BufferMap magnitudes;
  if (any_float) {
    absl::StatusOr<ir::BufferMap> m = measure::InterpreterMagnitudes(dag, inputs);
    if (!m.ok()) {
      return absl::Status(m.status().code(),
                          absl::StrCat("the magnitudes of the terms: ", m.status().message()));
    }
    magnitudes = *std::move(m);
  }
  // Outputs start as NaN (floating point) so an element the schedule never writes cannot pass.
  ir::BufferMap buffers;
  for (int i = 0; i < static_cast<int>(kernel.nest.params.size()); ++i) {
    const ir::BufferDecl& p = kernel.nest.params[i];
    if (i < kernel.nest.num_inputs) {
      auto it = inputs.find(p.name);
      if (it == inputs.end()) {
        return absl::InternalError(absl::StrCat("the lowered kernel's input '", p.name,
                                                "' is not an input of the workload"));
      }
      buffers[p.name] = it->second;
    } else {
      ir::HostBuffer out = ir::HostBuffer::Zeros(p.dtype, p.shape);
      if (ir::IsFloat(p.dtype)) out.data.assign(out.data.size(), std::nan(""));
      buffers[p.name] = std::move(out);
    }
  }
  absl::Status run = ir::Interpret(kernel.nest, buffers);
  if (!run.ok()) {
    std::cout << "the scheduled program failed in the interpreter: " << run.message() << "\n"
              << "MISMATCH\n";
    return 1;
  }

  bool ok = true;
  for (int id : dag.output_ids()) {
    const ir::Tensor& t = dag.stage(id);
    auto got = buffers.find(t.name());
    auto naive = ref->find(t.name());
    auto want = ref64->find(t.name());
    if (got == buffers.end() || want == ref64->end() || naive == ref->end() ||
        got->second.data.size() != want->second.data.size()) {
      return absl::InternalError(absl::StrCat("output '", t.name(), "' is missing or mis-sized"));
    }
    auto m = magnitudes.find(t.name());
    const std::vector<double> no_magnitude;
    const measure::PrecisionRule rule =
        RuleOf(dag, id, options.rtol, PrecisionOption(options.precision));
    const Comparison c = Compare(got->second, want->second, naive->second,
                                 m == magnitudes.end() ? no_magnitude : m->second.data, rule);
    std::cout << "output " << t.name() << " " << ShapeString(t.shape()) << " "
              << ir::TypeName(t.dtype()) << ": max abs error " << c.max_abs << " against float64, "
              << c.max_ratio << " of the allowed error (atol " << rule.atol << ", rtol "
              << rule.rtol << ", " << measure::kCancellationFactor << " u M with u "
              << rule.unit_roundoff << ")";
    if (c.mismatches == 0) {
      std::cout << (c.same_as_naive ? ": exact (as the naive program)\n" : ": within tolerance\n");
      continue;
    }
    ok = false;
    std::cout << ": " << c.mismatches << " of " << want->second.data.size()
              << " elements differ, first at " << ShapeString(Unflatten(c.first, t.shape()))
              << ": got " << std::setprecision(9) << got->second.data[c.first] << ", expected "
              << want->second.data[c.first] << " (float64)" << std::setprecision(6) << "\n";
  }
  if (!ok && options.precision == "ieee") {
    // One-pass TF32 tensor cores round the operands to 10 mantissa bits: they fail the float32
    // rule by design, and the tuner judges them only under --precision tf32.
    for (const schedule::Step& step : file.steps) {
      const auto* tc = std::get_if<schedule::TensorCoreStep>(&step);
      if (tc != nullptr && tc->kind == ir::MmaKindName(ir::MmaKind::kTF32)) {
        std::cout << "(the schedule uses one-pass TF32 tensor cores, which round their operands "
                     "to TF32: judge it with --precision tf32)\n";
        break;
      }
    }
  }
  std::cout << (ok ? "OK" : "MISMATCH") << "\n";
  return ok ? 0 : 1;
}

}  // namespace

ExitCodeAction AddCheckCommand(CLI::App& app) {
  auto options = std::make_shared<CheckOptions>();
  AddWorkloadOptions(app, options->workload);
  app.add_option("--seed", options->seed, "seed of the random inputs")->capture_default_str();
  app.add_flag("--force", options->force,
               "run even when the workload is estimated above 2^28 interpreted operations");
  app.add_option(
         "--rtol", options->rtol,
         "atol and rtol of the precision rule |got - ref64| <= atol + rtol |ref64| + 16 u M "
         "(default: float32 1e-4, float16 / bfloat16 1e-2, integers 0); 0 also drops "
         "16 u M: an exact comparison with float64")
      ->check(CLI::NonNegativeNumber);
  AddPrecisionOption(app, &options->precision);
  return [options]() { return Check(*options); };
}

}  // namespace tilesearch::tools
