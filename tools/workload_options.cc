#include "tools/workload_options.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "schedule/lower.h"
#include "search/api.h"

namespace tilesearch::tools {

void AddWorkloadOptions(CLI::App& app, WorkloadOptions& options) {
  app.add_option("--schedule", options.schedule,
                 "schedule file (JSON: workload, target, steps; see examples/schedules/)");
  app.add_option("--op", options.op,
                 "operator name (see 'tilesearch ops'); overrides the schedule file's");
  app.add_option("--shape", options.shapes,
                 "input shape, e.g. 1x64x56x56 or 1,64,56,56; once per input, in order "
                 "(replaces all of the schedule file's)");
  app.add_option("--attr", options.attrs,
                 "operator attribute name=value, e.g. padding=1 (sets one of the file's)");
  app.add_option("--dtype", options.dtype,
                 "element type: float32, float16, bfloat16, ... (default float32 or the file's)");
  app.add_option(
      "--target", options.target,
      "auto, cuda, cuda -arch=sm_XX or cpu (default cpu or the schedule file's; auto: cuda "
      "when a CUDA device answers, else cpu)");
}

absl::StatusOr<schedule::Target> ResolveTargetOption(const std::string& text) {
  return TargetFromString(text);
}

absl::StatusOr<ir::OpArgs> ParseOpArgs(const WorkloadOptions& options) {
  ir::OpArgs args;
  for (const std::string& text : options.shapes) {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ir::ParseShape(text));
    args.shapes.push_back(std::move(shape));
  }
  for (const std::string& text : options.attrs) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", text, "' is not of the form name=value"));
    }
    std::string name = text.substr(0, eq);
    if (!args.attrs.emplace(name, text.substr(eq + 1)).second) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' given twice"));
    }
  }
  if (!options.dtype.empty()) {
    ASSIGN_OR_RETURN(args.dtype, ir::ParseType(options.dtype));
  }
  return args;
}

absl::StatusOr<schedule::ScheduleFile> ScheduleFromOptions(const WorkloadOptions& options) {
  schedule::ScheduleFile file;
  if (!options.schedule.empty()) {
    ASSIGN_OR_RETURN(file, schedule::ScheduleFile::Load(options.schedule));
  } else if (options.op.empty()) {
    return absl::InvalidArgumentError("give --op NAME or --schedule FILE");
  } else {
    file.source = "<command line>";
    file.target = schedule::Target::HostCpu();
  }
  ASSIGN_OR_RETURN(ir::OpArgs args, ParseOpArgs(options));
  schedule::Workload& w = file.workload;
  if (options.op == schedule::kFusedWorkloadOp && !w.is_fused()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--op ", schedule::kFusedWorkloadOp,
        " needs its nodes: give a --schedule file whose workload is fused (or select logged "
        "fused workloads by --workload-key)"));
  }
  if (!options.op.empty()) {
    if (options.op != w.op) {
      w.args.attrs.clear();
      w.nodes.clear();
    }
    w.op = options.op;
  }
  if (!args.shapes.empty()) w.args.shapes = std::move(args.shapes);
  for (auto& [name, value] : args.attrs) w.args.attrs[name] = std::move(value);
  if (!options.dtype.empty()) w.args.dtype = args.dtype;
  if (!options.target.empty()) {
    ASSIGN_OR_RETURN(file.target, ResolveTargetOption(options.target));
  }
  return file;
}

absl::StatusOr<schedule::LoweredKernel> LowerScheduleFile(
    const schedule::ScheduleFile& file, const schedule::ResolvedSchedule& resolved) {
  absl::StatusOr<schedule::LoweredKernel> kernel =
      schedule::Lower(resolved.dag, resolved.state, file.target);
  if (!kernel.ok()) {
    return absl::Status(kernel.status().code(),
                        absl::StrCat(file.source, ": cannot lower for ", file.target.ToString(),
                                     ": ", kernel.status().message()));
  }
  return kernel;
}

void TimingOverrides::ApplyTo(runtime::TimingOptions& timing) const {
  if (min_runs >= 0) timing.min_runs = min_runs;
  if (min_time_ms >= 0) timing.min_total_ms = min_time_ms;
  if (warmup >= 0) timing.warmup_runs = warmup;
  if (timing.max_runs < timing.min_runs) timing.max_runs = timing.min_runs;
}

void AddCandidateTimingOptions(CLI::App& app, TimingOverrides* t) {
  const runtime::TimingOptions defaults;
  app.add_option("--min-runs", t->min_runs,
                 absl::StrCat("timed runs per candidate at least, 1..100000 (default ",
                              defaults.min_runs, ")"))
      ->check(CLI::Range(1, 100000));
  app.add_option("--min-time-ms", t->min_time_ms,
                 absl::StrCat("summed time of a candidate's timed runs at least, ms, 0..60000 "
                              "(default ",
                              defaults.min_total_ms, ")"))
      ->check(CLI::Range(0.0, 60000.0));
  app.add_option("--warmup", t->warmup,
                 absl::StrCat("untimed runs per candidate before timing, 0..10000 (default ",
                              defaults.warmup_runs, ")"))
      ->check(CLI::Range(0, 10000));
}

}  // namespace tilesearch::tools
