#include "measure/builder.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/ptxas.h"

namespace tilesearch::measure {

BuildInput BuildInput::FromLowering(absl::StatusOr<schedule::LoweredKernel> lowered,
                                    double lower_ms) {
  BuildInput input;
  input.lower_ms = lower_ms;
  if (lowered.ok()) {
    input.lowered = std::make_shared<const schedule::LoweredKernel>(*std::move(lowered));
  } else {
    input.lower_status = lowered.status();
  }
  return input;
}

Builder::Builder(Target target, BuilderOptions options)
    : target_(std::move(target)), options_(std::move(options)) {
  if (target_.is_gpu() && options_.assemble_cubin && options_.gpu.ptxas.empty()) {
    options_.gpu.ptxas = codegen::FindPtxas().value_or("");
  }
}

codegen::GpuCompileOptions Builder::GpuOptions() const {
  codegen::GpuCompileOptions gpu = options_.gpu;
  gpu.arch = target_.arch;
  return gpu;
}

BuildResult Builder::Prepare(const BuildInput& input) const {
  BuildResult r;
  r.compile_ms = input.lower_ms;
  if (input.lowered == nullptr) {
    const std::string msg(input.lower_status.ok() ? "candidate was not lowered"
                                                  : input.lower_status.message());
    r.build_status = absl::FailedPreconditionError(
        msg.rfind("invalid_schedule", 0) == 0 ? msg : absl::StrCat("invalid_schedule: ", msg));
    return r;
  }
  // The nest stays inside the shared lowered kernel (aliasing pointer, no copy).
  r.nest = std::shared_ptr<const ir::LoopNest>(input.lowered, &input.lowered->nest);
  r.launches = input.lowered->launches;
  return r;
}

std::vector<BuildResult> Builder::Build(
    const std::vector<BuildInput>& inputs,
    const std::function<void(size_t, const BuildResult&)>& on_done,
    const std::atomic<bool>* cancel) const {
  std::vector<BuildResult> results;
  results.reserve(inputs.size());
  std::vector<codegen::GpuCompileJob> jobs;
  std::vector<size_t> job_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    results.push_back(Prepare(inputs[i]));
    const BuildResult& r = results.back();
    if (r.nest != nullptr && target_.is_gpu()) {
      jobs.push_back({r.nest, r.launches});
      job_index.push_back(i);
    } else if (on_done) {
      on_done(i, r);
    }
  }
  if (jobs.empty()) return results;
  std::vector<bool> reported(job_index.size(), false);
  auto finish = [&](size_t j, const absl::StatusOr<codegen::GpuModule>& module) {
    if (j >= job_index.size() || reported[j]) return;
    reported[j] = true;
    BuildResult& r = results[job_index[j]];
    if (!module.ok()) {
      r.build_status = module.status();
    } else {
      r.compile_ms += module->compile_ms;
      r.gpu_module = std::make_shared<const codegen::GpuModule>(*module);
    }
    if (on_done) on_done(job_index[j], r);
  };
  codegen::ParallelCompileOptions parallel = options_.parallel;
  parallel.cancel = cancel;
  const std::vector<absl::StatusOr<codegen::GpuModule>> modules =
      codegen::CompileManyToPtx(jobs, GpuOptions(), parallel, finish);
  // Jobs the pool finished without a report, and a short answer from it: never "built" without
  // a module.
  for (size_t j = 0; j < job_index.size(); ++j) {
    if (reported[j]) continue;
    finish(j, j < modules.size()
                  ? modules[j]
                  : absl::StatusOr<codegen::GpuModule>(absl::InternalError(
                        absl::StrCat("compile_error: the compile pool returned ", modules.size(),
                                     " modules for ", job_index.size(), " candidates"))));
  }
  return results;
}

BuildResult Builder::BuildInProcess(const BuildInput& input) const {
  BuildResult r = Prepare(input);
  if (r.nest == nullptr || !target_.is_gpu()) return r;
  absl::StatusOr<codegen::GpuModule> module =
      codegen::CompileToPtx(*r.nest, r.launches, GpuOptions());
  if (!module.ok()) {
    r.build_status = module.status();
    return r;
  }
  r.compile_ms += module->compile_ms;
  r.gpu_module = std::make_shared<const codegen::GpuModule>(*std::move(module));
  return r;
}

}  // namespace tilesearch::measure
