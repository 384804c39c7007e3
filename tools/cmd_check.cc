// `tilesearch check`: runs a schedule's lowered loop nest in the reference interpreter and compares
// it element by element with the naive program on the same seeded random inputs.
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/compute_dag.h"
#include "ir/host_buffer.h"
#include "ir/interpreter.h"
#include "ir/reference.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
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
  double rtol = -1;  // < 0: the dtype's tolerance
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

// Allowed |got - ref| / max(1, |ref|): float32's reductions may be reassociated by a schedule;
// float16 / bfloat16 round every store to 11 / 8 significant bits.
double Tolerance(ir::ScalarType t) {
  switch (t) {
    case ir::ScalarType::kFloat32:
      return 1e-5;
    case ir::ScalarType::kFloat16:
      return 1e-2;
    case ir::ScalarType::kBFloat16:
      return 4e-2;
    default:
      return 0;
  }
}

struct Comparison {
  double max_abs = 0;
  double max_rel = 0;  // |got - ref| / max(1, |ref|)
  int64_t mismatches = 0;
  int64_t first = -1;  // flat index of the first mismatch
};

Comparison Compare(const ir::HostBuffer& got, const ir::HostBuffer& ref, double tolerance) {
  Comparison c;
  for (size_t i = 0; i < ref.data.size(); ++i) {
    const double g = got.data[i], r = ref.data[i];
    double abs = 0, rel = 0;
    if (std::isnan(g) || std::isnan(r)) {
      if (!(std::isnan(g) && std::isnan(r))) abs = rel = std::numeric_limits<double>::infinity();
    } else if (g != r) {  // equal infinities match
      abs = std::fabs(g - r);
      rel = std::isinf(abs) ? abs : abs / std::max(1.0, std::fabs(r));
    }
    c.max_abs = std::max(c.max_abs, abs);
    c.max_rel = std::max(c.max_rel, rel);
    if (rel > tolerance) {
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
    auto want = ref->find(t.name());
    if (got == buffers.end() || want == ref->end() ||
        got->second.data.size() != want->second.data.size()) {
      return absl::InternalError(absl::StrCat("output '", t.name(), "' is missing or mis-sized"));
    }
    const double tolerance = options.rtol >= 0 ? options.rtol : Tolerance(t.dtype());
    const Comparison c = Compare(got->second, want->second, tolerance);
    std::cout << "output " << t.name() << " " << ShapeString(t.shape()) << " "
              << ir::TypeName(t.dtype()) << ": max abs error " << c.max_abs << ", max rel error "
              << c.max_rel << " (tolerance " << tolerance << " x max(1, |ref|))";
    if (c.mismatches == 0) {
      std::cout << (c.max_abs == 0 ? ": exact\n" : ": within tolerance\n");
      continue;
    }
    ok = false;
    std::cout << ": " << c.mismatches << " of " << want->second.data.size()
              << " elements differ, first at " << ShapeString(Unflatten(c.first, t.shape()))
              << ": got " << std::setprecision(9) << got->second.data[c.first] << ", expected "
              << want->second.data[c.first] << std::setprecision(6) << "\n";
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
  app.add_option("--rtol", options->rtol,
                 "allowed |scheduled - naive| / max(1, |naive|) (default: float32 1e-5, float16 "
                 "1e-2, bfloat16 4e-2, integers 0)")
      ->check(CLI::NonNegativeNumber);
  return [options]() { return Check(*options); };
}

}  // namespace tilesearch::tools
