// `tilesearch show`: an operator's ComputeDAG and naive loop nest, or (with --schedule or
// --target) a scheduled workload: its steps, the lowered loop nest and the GPU launches; with
// --emit, only the code generated for the lowered nest (MLIR, LLVM IR or PTX).
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/codegen.h"
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

// Compiles the lowered nest through codegen and prints only the requested text (so that
// `--emit ptx` can be piped to ptxas).
absl::Status EmitCode(const WorkloadOptions& options, const std::string& emit) {
  ASSIGN_OR_RETURN(schedule::ScheduleFile file, ScheduleFromOptions(options));
  ASSIGN_OR_RETURN(schedule::ResolvedSchedule resolved, file.Resolve());
  ASSIGN_OR_RETURN(schedule::LoweredKernel kernel, LowerScheduleFile(file, resolved));
  const std::string where =
      absl::StrCat(file.source, ": cannot compile for ", file.target.ToString(), ": ");
  if (file.target.is_gpu()) {
    codegen::GpuCompileOptions compile;
    compile.arch = file.target.arch;
    compile.keep_mlir = emit == "mlir";
    compile.keep_llvm_ir = emit == "llvm";
    absl::StatusOr<codegen::GpuModule> module =
        codegen::CompileToPtx(kernel.nest, kernel.launches, compile);
    if (!module.ok()) {
      return absl::Status(module.status().code(), where + std::string(module.status().message()));
    }
    std::cout << (emit == "mlir" ? module->mlir : emit == "llvm" ? module->llvm_ir : module->ptx);
    return absl::OkStatus();
  }
  if (emit == "ptx") {
    return absl::InvalidArgumentError(
        absl::StrCat("--emit ptx needs a cuda target, but the target is ", file.target.ToString(),
                     " (use --emit mlir or llvm, or --target cuda)"));
  }
  codegen::HostCompileOptions compile;
  compile.keep_mlir = emit == "mlir";
  compile.keep_llvm_ir = emit == "llvm";
  absl::StatusOr<std::unique_ptr<codegen::HostKernel>> host =
      codegen::CompileForHost(kernel.nest, compile);
  if (!host.ok()) {
    return absl::Status(host.status().code(), where + std::string(host.status().message()));
  }
  std::cout << (emit == "mlir" ? (*host)->mlir() : (*host)->llvm_ir());
  return absl::OkStatus();
}

}  // namespace

CommandAction AddShowCommand(CLI::App& app) {
  auto options = std::make_shared<WorkloadOptions>();
  auto emit = std::make_shared<std::string>();
  AddWorkloadOptions(app, *options);
  app.add_option("--emit", *emit,
                 "print only the generated code of the lowered nest: mlir (as emitted, before "
                 "lowering), llvm (LLVM IR after optimization) or ptx (cuda targets)")
      ->check(CLI::IsMember({"mlir", "llvm", "ptx"}));
  return [options, emit]() {
    if (!emit->empty()) return EmitCode(*options, *emit);
    if (options->schedule.empty() && options->target.empty()) return ShowNaive(*options);
    return ShowSchedule(*options);
  };
}

}  // namespace tilesearch::tools
