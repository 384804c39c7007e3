// `tilesearch show`: an operator's ComputeDAG and naive loop nest, or (with --schedule or
// --target) a scheduled workload: its steps, the lowered loop nest and the GPU launches.
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/compute_dag.h"
#include "ir/lower_naive.h"
#include "ir/simplify.h"
#include "ir/stmt.h"
#include "schedule/apply_step.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "tools/commands.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

absl::Status ShowNaive(const WorkloadOptions& options) {
  if (options.op.empty()) return absl::InvalidArgumentError("give --op NAME or --schedule FILE");
  ASSIGN_OR_RETURN(ir::OpArgs args, ParseOpArgs(options));
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, ir::BuildOp(options.op, args));
  ASSIGN_OR_RETURN(ir::LoopNest nest, ir::LowerNaive(dag));
  nest.body = ir::Simplify(nest.body);
  std::cout << dag.ToString() << "\n" << ir::ToString(nest) << "\n";
  return absl::OkStatus();
}

absl::Status ShowSchedule(const WorkloadOptions& options) {
  ASSIGN_OR_RETURN(schedule::ScheduleFile file, ScheduleFromOptions(options));
  ASSIGN_OR_RETURN(schedule::ResolvedSchedule resolved, file.Resolve());
  ASSIGN_OR_RETURN(schedule::LoweredKernel kernel, LowerScheduleFile(file, resolved));
  std::cout << "schedule: " << file.source << "\n";
  if (!file.comment.empty()) std::cout << "comment: " << file.comment << "\n";
  std::cout << "workload: " << file.workload.ToString() << "\n"
            << "target: " << file.target.ToString() << "\n\n"
            << resolved.dag.ToString() << "\n"
            << "steps (" << file.steps.size() << "):\n";
  for (size_t i = 0; i < file.steps.size(); ++i) {
    std::cout << "  " << i << ": " << schedule::StepToString(file.steps[i]) << "\n";
  }
  std::cout << "\nloop nest:\n" << ir::ToString(kernel.nest) << "\n";
  if (!file.target.is_gpu()) {
    std::cout << "launches: none (cpu target)\n";
    return absl::OkStatus();
  }
  std::cout << "launches (" << kernel.launches.size() << "):\n";
  for (size_t i = 0; i < kernel.launches.size(); ++i) {
    std::cout << "  kernel " << i << ": " << kernel.launches[i].ToString() << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

CommandAction AddShowCommand(CLI::App& app) {
  auto options = std::make_shared<WorkloadOptions>();
  AddWorkloadOptions(app, *options);
  return [options]() {
    if (options->schedule.empty() && options->target.empty()) return ShowNaive(*options);
    return ShowSchedule(*options);
  };
}

}  // namespace tilesearch::tools
