// `tilesearch measure`: compiles one schedule, checks it against the unscheduled program and times
// it on its target through measure::Runner, then prints compile times, the kernels' launch
// configurations and resources, the check's errors, the median time and the throughput.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "ir/compute_dag.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "nlohmann/json.hpp"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/replay.h"
#include "tools/commands.h"
#include "tools/number_text.h"
#include "tools/workload_options.h"

namespace tilesearch::tools {
namespace {

struct MeasureCommandOptions {
  WorkloadOptions workload;
  uint64_t seed = 1;
  int min_runs = -1;        // < 0: runtime::TimingOptions' default
  double min_time_ms = -1;  // < 0: default
  int warmup = -1;          // < 0: default
  bool no_check = false;
  std::vector<std::string> inputs;  // --inputs: check input distributions; empty = default
  double atol = 0;                  // 0 = the dtype's tolerance
  double rtol = 0;
  std::string precision = "ieee";  // --precision
  std::string json;                // --json FILE; "" = none
  int host_threads = 0;       // --host-threads: cpu parallel-loop threads, 0 = every usable core
  int64_t unroll_budget = 0;  // --unroll-budget: codegen::GpuCompileOptions::unroll_budget
};

std::string Triple(const std::array<int64_t, 3>& v) {
  return absl::StrCat("(", v[0], ", ", v[1], ", ", v[2], ")");
}

measure::MeasureOptions ToMeasureOptions(const MeasureCommandOptions& options) {
  measure::MeasureOptions m;
  m.seed = options.seed;
  m.check = !options.no_check;
  if (!options.inputs.empty()) {
    // CLI11 checked the names; trials cover every distribution given.
    m.distributions.clear();
    for (const std::string& name : options.inputs)
      m.distributions.push_back(*measure::ParseCheckDistribution(name));
    m.check_trials = static_cast<int>(m.distributions.size());
  }
  m.atol = options.atol;
  m.rtol = options.rtol;
  m.precision = PrecisionOption(options.precision);
  if (options.min_runs >= 0) m.timing.min_runs = options.min_runs;
  if (options.min_time_ms >= 0) {
    m.timing.min_total_ms = options.min_time_ms;
    // The user asked for this much timed work: the wall-time cap on the extension must not cut it
    // short (flushes included, allow 4x).
    m.timing.max_wall_ms = std::max(m.timing.max_wall_ms, 4 * options.min_time_ms);
  }
  if (options.warmup >= 0) m.timing.warmup_runs = options.warmup;
  m.host_threads = options.host_threads;
  if (m.timing.max_runs < m.timing.min_runs) m.timing.max_runs = m.timing.min_runs;
  return m;
}

// Compile stage of a candidate (GPU: the module in this process), or the build error the runner
// reports.
measure::BuildResult BuildCandidate(const schedule::ScheduleFile& file,
                                    const schedule::LoweredKernel& kernel, int64_t unroll_budget) {
  measure::BuildInput input;
  input.lowered = std::make_shared<const schedule::LoweredKernel>(kernel);
  measure::BuilderOptions options;
  options.gpu.unroll_budget = unroll_budget;
  return measure::Builder(file.target, options).BuildInProcess(input);
}

absl::StatusOr<int> Measure(const MeasureCommandOptions& options) {
  ASSIGN_OR_RETURN(schedule::ScheduleFile file, ScheduleFromOptions(options.workload));
  ASSIGN_OR_RETURN(schedule::ResolvedSchedule resolved, file.Resolve());
  const ir::ComputeDAG& dag = resolved.dag;
  ASSIGN_OR_RETURN(schedule::LoweredKernel kernel, LowerScheduleFile(file, resolved));
  // The measurer first: without a driver nothing is compiled and nothing printed.
  ASSIGN_OR_RETURN(std::unique_ptr<measure::Runner> measurer,
                   measure::CreateRunner(file.target, ToMeasureOptions(options)));
  RETURN_IF_ERROR(measure::CheckMeasureHostMemory(dag, ToMeasureOptions(options), file.target));

  // An unwritable --json file is reported before anything is measured.
  std::ofstream json_out;
  if (!options.json.empty()) {
    json_out.open(options.json);
    if (!json_out) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write --json file '", options.json, "'"));
    }
  }

  const measure::BuildResult candidate = BuildCandidate(file, kernel, options.unroll_budget);
  std::vector<measure::MeasureResult> results = measurer->Run(dag, {candidate});
  if (results.size() != 1) {
    return absl::InternalError(
        absl::StrCat("the measurer returned ", results.size(), " results for one candidate"));
  }
  const measure::MeasureResult& r = results[0];
  if (r.error == measure::MeasureError::kNoDevice) {
    return absl::FailedPreconditionError(r.message);
  }

  const double flops = dag.Flops();
  const int64_t bytes = dag.InputBytes() + dag.OutputBytes();
  std::cout << "schedule: " << file.source << "\n"
            << "workload: " << file.workload.ToString() << " (" << Sci(flops) << " FLOP, " << bytes
            << " B of inputs + outputs)\n"
            << "target: " << file.target.ToString() << "\n";
  if (file.target.is_gpu()) {
    std::cout << "compile: " << Fixed(r.compile_ms, 1) << " ms MLIR -> PTX, " << Fixed(r.load_ms, 1)
              << " ms driver JIT (PTX -> cubin)\n";
  } else {
    std::cout << "compile: " << Fixed(r.compile_ms, 1) << " ms MLIR -> host code (JIT)\n";
  }
  const size_t num_kernels = candidate.gpu_module ? candidate.gpu_module->kernels.size() : 0;
  for (size_t i = 0; i < num_kernels; ++i) {
    const codegen::GpuKernelInfo& k = candidate.gpu_module->kernels[i];
    std::cout << "kernel " << i << " " << k.name << ": grid " << Triple(k.grid) << " block "
              << Triple(k.block);
    if (i < r.kernels.size()) {
      const runtime::KernelResources& res = r.kernels[i];
      std::cout << ", " << res.registers_per_thread << " registers/thread, shared "
                << res.static_shared_bytes << " B static + " << res.dynamic_shared_bytes
                << " B dynamic, local " << res.local_bytes_per_thread << " B/thread";
    } else {
      std::cout << ", shared " << k.static_shared_bytes << " B static + " << k.dynamic_shared_bytes
                << " B dynamic (compiler's count; not loaded)";
    }
    std::cout << "\n";
  }
  if (r.check.trials > 0) {
    std::cout << "check: " << r.check.trials << " trials, " << r.check.checked_elements
              << " elements, max abs error " << Sci(r.check.max_abs_error) << ", max rel error "
              << Sci(r.check.max_rel_error);
    if (r.check.arbitrated > 0) {
      std::cout << ", " << r.check.arbitrated
                << (r.check.arbitrated == 1 ? " element" : " elements")
                << " accepted by float64 arbitration";
    }
    if (r.check.mismatches > 0) {
      std::cout << ", " << r.check.mismatches << " mismatches, first " << r.check.first_mismatch;
    }
    std::cout << "\n";
    if (r.check.f64_points > 0) {
      std::cout << "float64 error on " << r.check.f64_points << " sampled points ("
                << options.precision << "): max " << Sci(r.check.f64_max_abs_error) << ", "
                << Fixed(r.check.f64_max_ratio, 3) << " of the allowed; the float32 reference's "
                << Sci(r.check.reference_f64_max_abs_error) << "\n";
    }
    // Why the float64 arbitration did not rescue the mismatches (failed or skipped).
    if (!r.ok() && !r.check.arbitration.empty()) {
      std::cout << "arbitration: " << r.check.arbitration << "\n";
    }
  } else if (options.no_check) {
    std::cout << "check: skipped (--no-check)\n";
  }

  double gflops = 0, gbps = 0;
  if (r.ok()) {
    const double median_ms = r.timing.median_ms;
    std::cout << "time: " << r.timing.ToString() << "\n";
    if (median_ms > 0) {
      gflops = flops / (median_ms * 1e6);
      gbps = static_cast<double>(bytes) / (median_ms * 1e6);
    }
    std::cout << "throughput: " << Fixed(gflops, 2) << " GFLOP/s, " << Fixed(gbps, 2) << " GB/s\n"
              << "OK\n";
  } else {
    std::cout << "FAILED: " << measure::MeasureErrorName(r.error) << ": " << r.message << "\n";
  }

  if (!options.json.empty()) {
    nlohmann::json j;
    j["schedule"] = file.source;
    j["workload"] = schedule::WorkloadToJson(file.workload);
    j["workload_key"] =
        measure::PrecisionWorkloadKey(dag.WorkloadKey(), PrecisionOption(options.precision));
    j["precision"] = options.precision;
    j["target"] = file.target.ToString();
    j["flops"] = flops;
    j["bytes"] = bytes;
    j["gflops_per_s"] = gflops;
    j["gbytes_per_s"] = gbps;
    nlohmann::json launches = nlohmann::json::array();
    for (size_t i = 0; i < num_kernels; ++i) {
      const codegen::GpuKernelInfo& k = candidate.gpu_module->kernels[i];
      launches.push_back(search::KernelLaunchJson(k));
      launches.back()["name"] = k.name;
    }
    j["launches"] = launches;
    if (candidate.gpu_module) {
      const codegen::GpuModule::Phases& p = candidate.gpu_module->phases;
      j["compile_phases_ms"] = {{"emit", p.emit_ms},
                                {"lower", p.lower_ms},
                                {"translate", p.translate_ms},
                                {"optimize", p.optimize_ms},
                                {"codegen", p.codegen_ms}};
    }
    j["result"] = measure::MeasureResultToJson(r);
    json_out << j.dump(2) << "\n";
    json_out.close();
    if (!json_out) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write --json file '", options.json, "'"));
    }
  }
  return r.ok() ? 0 : 1;
}

// A finite number in [lo, hi]: CLI11's Range lets NaN through and prints its bounds with
// 300 digits.
CLI::Validator NumberIn(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (!absl::SimpleAtod(text, &v) || !std::isfinite(v))
          return "'" + text + "' is not a number";
        if (v < lo || v > hi) {
          return absl::StrCat("'", text, "' is outside ", lo, "..", hi);
        }
        return "";
      },
      absl::StrCat("NUMBER in ", lo, "..", hi));
}

}  // namespace

ExitCodeAction AddMeasureCommand(CLI::App& app) {
  auto options = std::make_shared<MeasureCommandOptions>();
  AddWorkloadOptions(app, options->workload);
  app.add_option("--seed", options->seed, "seed of the check's random inputs")
      ->capture_default_str();
  const runtime::TimingOptions defaults;
  app.add_option("--min-runs", options->min_runs,
                 absl::StrCat("timed runs at least, 1..100000 (default ", defaults.min_runs, ")"))
      ->check(NumberIn(1, 100000));
  app.add_option("--min-time-ms", options->min_time_ms,
                 absl::StrCat("summed time of the timed runs at least, ms, 0..60000 (default ",
                              defaults.min_total_ms, "; the runs past --min-runs stop after ",
                              defaults.max_wall_ms, " ms of wall time, or 4x --min-time-ms)"))
      ->check(NumberIn(0, 60000));
  app.add_option(
         "--warmup", options->warmup,
         absl::StrCat("untimed runs before timing, 0..10000 (default ", defaults.warmup_runs, ")"))
      ->check(NumberIn(0, 10000));
  app.add_flag("--no-check", options->no_check,
               "time without checking the result against the unscheduled program");
  app.add_option(
         "--inputs", options->inputs,
         "check input distributions, one checked trial each: uniform [-1,1), uniform01 [0,1), "
         "normal (bench/score.py's: mean 2, sd 32; float16 mean 0.5, sd 4) "
         "(default uniform uniform01 normal)")
      ->check(CLI::IsMember({"uniform", "uniform01", "normal"}));
  AddPrecisionOption(app, &options->precision);
  app.add_option("--atol", options->atol, "absolute tolerance (default by dtype: float32 1e-4)")
      ->check(NumberIn(0, 1e30));
  app.add_option("--rtol", options->rtol, "relative tolerance (default by dtype: float32 1e-4)")
      ->check(NumberIn(0, 1e30));
  app.add_option("--host-threads", options->host_threads,
                 "cpu target: threads running parallel loops, 0..4096 (default 0: every core)")
      ->check(NumberIn(0, 4096));
  app.add_option("--unroll-budget", options->unroll_budget,
                 "cuda target: unrolled loops whose full unrolling exceeds this many loop-nest "
                 "nodes stay loops (0: none; codegen::GpuCompileOptions::unroll_budget)")
      ->check(NumberIn(0, 1e12))
      ->capture_default_str();
  app.add_option("--json", options->json,
                 "also write the result (runtime's MeasureResult JSON, workload, target, "
                 "launches, throughput) to this file");
  return [options]() { return Measure(*options); };
}

}  // namespace tilesearch::tools
