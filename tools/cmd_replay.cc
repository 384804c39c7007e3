// `tilesearch replay`: the best logged record of a workload rebuilt into a kernel artifact
// (search/replay.h): re-lowered, compiled, re-checked against the unscheduled program and written
// out (PTX / cubin / launch JSON / C launcher for cuda, object file + C header for cpu). A registry
// workload is named by --op/--shape/--attr/--dtype or its key; a fused workload (a graph task) by
// its key, and the record's workload rebuilds its DAG.
#include <iomanip>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "schedule/schedule_file.h"
#include "search/api.h"
#include "search/log_io.h"
#include "search/replay.h"
#include "tools/commands.h"
#include "tools/number_text.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

struct ReplayCommandOptions {
  std::string log;
  WorkloadOptions workload;  // op / shapes / attrs / dtype / target (no schedule file)
  std::string workload_key;
  std::string out;
  std::string name;
  bool no_check = false;
  std::string precision = "ieee";  // --precision: the records of that precision only
  bool allow_unreadable_lines = false;
};

// Without --target: the one target the log holds records of the workload for.
absl::StatusOr<Target> LogTarget(const std::string& log, const std::string& key,
                                 const std::string& op) {
  search::ReadOptions read;
  read.workload_key = key;
  read.verify_workload_keys = true;  // as ApplyHistoryBest reads it
  ASSIGN_OR_RETURN(search::LogContents contents, search::ReadLog(log, read));
  std::vector<Target> targets;
  for (const search::MeasureRecord& r : contents.records) {
    bool seen = false;
    for (const Target& t : targets) seen = seen || search::SameTarget(t, r.target);
    if (!seen) targets.push_back(r.target);
  }
  if (targets.empty()) {
    const std::string others = search::OtherWorkloadsText(contents, op);
    return absl::NotFoundError(
        absl::StrCat(log, ": no record for workload ", key, others.empty() ? "" : "; ", others));
  }
  if (targets.size() > 1) {
    std::vector<std::string> names;
    for (const Target& t : targets) names.push_back(t.ToString());
    return absl::InvalidArgumentError(absl::StrCat(log, ": the workload has records on ",
                                                   targets.size(), " targets (",
                                                   absl::StrJoin(names, ", "), "): give --target"));
  }
  return targets[0];
}

absl::StatusOr<int> Replay(const ReplayCommandOptions& options) {
  const bool by_op = !options.workload.op.empty();
  if (by_op == !options.workload_key.empty()) {
    return absl::InvalidArgumentError("give either --op NAME (with --shape) or --workload-key KEY");
  }
  if (options.workload.op == schedule::kFusedWorkloadOp) {
    return absl::InvalidArgumentError(
        "a fused workload (a graph task) is selected by --workload-key KEY, not --op fused "
        "('tilesearch inspect --log FILE' prints every workload's key)");
  }
  if (!by_op && (!options.workload.shapes.empty() || !options.workload.attrs.empty() ||
                 !options.workload.dtype.empty())) {
    return absl::InvalidArgumentError(
        "--shape, --attr and --dtype go with --op, not --workload-key");
  }
  // Cheap checks first: a bad --name or --out must not wait for a rebuild and a re-check.
  if (!options.name.empty()) RETURN_IF_ERROR(search::ValidateArtifactName(options.name));
  RETURN_IF_ERROR(search::ValidateArtifactDir(options.out));  // created only when writing
  std::string key = options.workload_key;
  if (by_op) {
    schedule::Workload workload;
    workload.op = options.workload.op;
    ASSIGN_OR_RETURN(workload.args, ParseOpArgs(options.workload));
    absl::StatusOr<ir::ComputeDAG> dag = workload.Build();
    if (!dag.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("workload ", workload.ToString(), ": ",
                                                     std::string(dag.status().message())));
    }
    key = measure::PrecisionWorkloadKey(dag->WorkloadKey(), PrecisionOption(options.precision));
  }
  Target target;
  if (options.workload.target.empty()) {
    ASSIGN_OR_RETURN(target, LogTarget(options.log, key, options.workload.op));
  } else {
    ASSIGN_OR_RETURN(target, TargetFromString(options.workload.target));
  }
  ASSIGN_OR_RETURN(
      search::ReplayedRecord best,
      search::ApplyHistoryBestByKey(options.log, key, target, options.allow_unreadable_lines));
  for (const std::string& w : best.warnings) std::cerr << "warning: " << w << "\n";
  search::BuildOptions build;
  build.name = options.name;
  ASSIGN_OR_RETURN(search::KernelArtifact artifact, search::BuildKernel(best, build));

  const search::MeasureRecord& r = artifact.record;
  std::cout << "workload: " << r.workload.ToString() << " (key " << r.workload_key << ")\n"
            << "target: " << r.target.ToString()
            << (r.device_name.empty() ? "" : " (" + r.device_name + ")") << "\n"
            << "record: trial " << r.trial << ", median " << Fixed(r.median_ms(), 4) << " ms, "
            << Fixed(artifact.gflops(), 2) << " GFLOP/s, " << r.steps.size() << " steps\n";
  if (artifact.is_gpu()) {
    for (const codegen::GpuKernelInfo& k : artifact.gpu->kernels) {
      std::cout << "kernel: " << k.name << " grid (" << absl::StrJoin(k.grid, ", ") << ") block ("
                << absl::StrJoin(k.block, ", ") << ") dynamic shared " << k.dynamic_shared_bytes
                << " B\n";
    }
  } else {
    std::cout << "entry: " << artifact.host->entry_name << " (" << artifact.host->target_triple
              << ", cpu " << artifact.host->cpu << ")\n";
  }
  for (const std::string& note : artifact.notes) std::cout << "note: " << note << "\n";

  std::unique_ptr<search::CheckOutcome> check;
  if (options.no_check) {
    std::cout << "re-check: skipped (--no-check)\n";
  } else {
    ASSIGN_OR_RETURN(search::CheckOutcome outcome, search::CheckKernel(artifact));
    check = std::make_unique<search::CheckOutcome>(std::move(outcome));
    const measure::CheckReport& report = check->result.check;
    if (!check->checked) {
      std::cout << "re-check: " << check->note << "\n";
    } else if (check->passed) {
      std::cout << "re-check: passed (" << report.trials
                << " trials on fresh inputs, max abs error " << Sci(report.max_abs_error)
                << ", max rel error " << Sci(report.max_rel_error) << ")\n";
    } else {
      std::cout << "re-check: FAILED: " << check->note << "\n"
                << "artifacts not written\n";
      return 1;
    }
  }
  ASSIGN_OR_RETURN(std::vector<std::string> written,
                   search::WriteArtifacts(artifact, options.out, check.get()));
  for (const std::string& path : written) std::cout << "wrote: " << path << "\n";
  return 0;
}

}  // namespace

ExitCodeAction AddReplayCommand(CLI::App& app) {
  auto options = std::make_shared<ReplayCommandOptions>();
  app.add_option("--log", options->log, "tuning log (JSON Lines) to pick the best record from")
      ->required();
  app.add_option("--op", options->workload.op,
                 "operator name of the workload (see 'tilesearch ops')");
  app.add_option("--shape", options->workload.shapes,
                 "input shape, e.g. 512x512; once per input, in order");
  app.add_option("--attr", options->workload.attrs, "operator attribute name=value");
  app.add_option("--dtype", options->workload.dtype, "element type (default float32)");
  AddPrecisionOption(app, &options->precision);
  app.add_option("--workload-key", options->workload_key,
                 "the workload by its key (as `tune` and `inspect` print it), instead of --op; "
                 "the way to select a fused workload (a graph task: op \"fused\")");
  app.add_option("--target", options->workload.target,
                 "auto, cpu, cuda or cuda -arch=sm_XX (default: the target of the log's records "
                 "of the workload, when there is one)");
  app.add_option("--out", options->out,
                 "directory to write the artifacts to (checked first, created when writing; the "
                 "files appear all together or not at all)")
      ->required();
  app.add_option("--name", options->name,
                 "artifact base name, a C identifier that is no C/C++ keyword and does not "
                 "start with '_' (default <op>_<first 8 of the key>)")
      ->check([](const std::string& v) {
        return v.empty() ? std::string("an empty name: leave --name out for the default")
                         : std::string();
      });
  app.add_flag("--allow-unreadable-lines", options->allow_unreadable_lines,
               "replay from the lines that could be read even when skipped lines (corrupt, "
               "truncated or over-long) may hold a record of the workload (refused by default: "
               "the best record may be among them)");
  app.add_flag("--no-check", options->no_check,
               "do not re-check the rebuilt kernel against the unscheduled program");
  return [options]() { return Replay(*options); };
}

}  // namespace tilesearch::tools
