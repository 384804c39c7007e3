// `tilesearch bench-compile`: the compile-time benchmark of the GPU build path. Builds many
// distinct GPU candidates of a square float32 matmul (the SSSRRSRS structure of
// examples/schedules/h200/matmul_cuda_4096.json with varied tile sizes: threads per block, register
// tile per thread, k tile), lowers them, compiles them all through MLIR → PTX with
// codegen::CompileManyToPtx on W workers, and reports the distribution of per-candidate compile
// times (ms, by phase) and the throughput (candidates per second of wall time). With --jit the
// PTX is also loaded by the CUDA driver (in a measurement worker; one untimed-check run each) and
// the distribution of driver JIT times is reported. With --log the candidates are instead the
// schedules of a tuning log's records (any operator, tensor-core ones included), so the build cost
// of what a tune really compiles can be split by phase here, without a GPU; --assemble adds the
// ptxas run the tuner's builds include. (bench/build_bench times one candidate at a time, in one
// process, for the CPU time per phase; this one builds as the tuner does, W workers at once, and
// its JSON holds each candidate's PTX hash, so that two builds can be compared for identical PTX.)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/cpu_count.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "codegen/ptxas.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "nlohmann/json.hpp"
#include "runtime/timing.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/log_io.h"
#include "search/replay.h"
#include "tools/commands.h"

namespace tilesearch::tools {
namespace {

struct BenchCompileOptions {
  int64_t size = 1024;
  int candidates = 200;
  int workers = 0;
  uint64_t seed = 1;
  bool jit = false;
  bool assemble = false;
  int opt_level = 3;
  std::string log;
  std::string arch = "sm_90";
  std::string json;
};

// Tile sizes of one candidate: threads ti × tj per block, each computing an ii × ij register
// tile; k in steps of tk with the A (ti·ii × tk) and B (tk × tj·ij) tiles in shared memory.
struct Tiling {
  int64_t ti, ii, tj, ij, tk;
  std::string ToString() const {
    return absl::StrCat("threads ", ti, "x", tj, " regs ", ii, "x", ij, " k ", tk);
  }
};

nlohmann::json MatmulSchedule(int64_t n, const Tiling& t) {
  using J = nlohmann::json;
  const int64_t threads = t.ti * t.tj;
  J steps = J::array({
      J::array({"CHW", 2, "local"}),
      J::array({"SP", 3, 0, n, J::array({t.ti, t.ii}), 1}),
      J::array({"SP", 3, 3, n, J::array({t.tj, t.ij}), 1}),
      J::array({"RE", 3, J::array({0, 3, 1, 4, 2, 5})}),
      J::array({"FU", 3, J::array({0, 1})}),
      J::array({"FU", 3, J::array({1, 2})}),
      J::array({"AN", 3, 0, 5}),
      J::array({"AN", 3, 1, 6}),
      J::array({"CA", 2, 3, 1}),
      J::array({"SP", 2, 2, n, J::array({t.tk}), 1}),
      J::array({"RE", 2, J::array({2, 3, 0, 1})}),
      J::array({"AN", 2, 2, 1}),
      J::array({"AN", 2, 3, 1}),
      J::array({"CHR", 0, "shared", J::array({2})}),
      J::array({"CA", 1, 3, 0}),
      J::array({"CHR", 2, "shared", J::array({3})}),
      J::array({"CA", 3, 4, 0}),
      J::array({"FU", 1, J::array({0, 1})}),
      J::array({"SP", 1, 0, t.ti * t.ii * t.tk, J::array({threads}), 1}),
      J::array({"AN", 1, 1, 6}),
      J::array({"FU", 3, J::array({0, 1})}),
      J::array({"SP", 3, 0, t.tk * t.tj * t.ij, J::array({threads}), 1}),
      J::array({"AN", 3, 1, 6}),
      J::array({"AN", 5, 2, 1}),
      J::array({"AN", 5, 3, 1}),
  });
  return J{{"version", 1},
           {"workload",
            {{"op", "matmul"},
             {"shapes", J::array({J::array({n, n}), J::array({n, n})})},
             {"dtype", "float32"},
             {"attrs", J::object()}}},
           {"target", "cuda -arch=sm_90"},
           {"steps", steps}};
}

// Every tiling of an n³ matmul within the usual GPU limits (32..1024 threads, ≤ 64 registers of
// accumulators, ≤ 48 KiB shared), in a seeded random order.
std::vector<Tiling> Tilings(int64_t n, uint64_t seed) {
  std::vector<Tiling> all;
  for (int64_t ti : {2, 4, 8, 16, 32})
    for (int64_t tj : {2, 4, 8, 16, 32})
      for (int64_t ii : {1, 2, 4, 8})
        for (int64_t ij : {1, 2, 4, 8})
          for (int64_t tk : {2, 4, 8, 16, 32}) {
            const int64_t threads = ti * tj;
            if (threads < 32 || threads > 1024 || ii * ij > 64) continue;
            if (n % (ti * ii) != 0 || n % (tj * ij) != 0 || n % tk != 0) continue;
            if ((ti * ii * tk + tk * tj * ij) * 4 > 48 * 1024) continue;
            all.push_back({ti, ii, tj, ij, tk});
          }
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  return all;
}

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One schedule to compile, replayed: its program, state and target, a name for messages, and
// the time the replay took (ms).
struct Candidate {
  std::string name;
  ir::ComputeDAG dag;
  schedule::State state;
  Target target;
  double replay_ms = 0;
};

// The first `o.candidates` records of `o.log` (read and replayed as the tuner resumes a log; a
// record that does not replay is reported and skipped), for the cuda arch `o.arch`.
absl::StatusOr<std::vector<Candidate>> LogCandidates(const BenchCompileOptions& o) {
  ASSIGN_OR_RETURN(search::LogContents log, search::ReadLog(o.log));
  for (const std::string& w : log.warnings) std::fprintf(stderr, "%s\n", w.c_str());
  std::vector<Candidate> out;
  for (const search::MeasureRecord& r : log.records) {
    if (static_cast<int>(out.size()) >= o.candidates) break;
    const auto start = Clock::now();
    absl::StatusOr<search::ReplayedRecord> replayed = search::ReplayRecord(r);
    if (!replayed.ok()) {
      std::fprintf(stderr, "%s: %s\n", o.log.c_str(),
                   std::string(replayed.status().message()).c_str());
      continue;
    }
    Target target = r.target;
    target.arch = o.arch;
    out.push_back({absl::StrCat(o.log, " trial ", r.trial), std::move(replayed->dag),
                   std::move(replayed->state), std::move(target), MsSince(start)});
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--log: '", o.log, "' has no record that replays"));
  }
  return out;
}

absl::StatusOr<std::vector<Candidate>> Candidates(const BenchCompileOptions& o) {
  if (!o.log.empty()) return LogCandidates(o);
  std::vector<Tiling> tilings = Tilings(o.size, o.seed);
  if (static_cast<int>(tilings.size()) > o.candidates) tilings.resize(o.candidates);
  std::vector<Candidate> out;
  for (const Tiling& t : tilings) {
    const auto start = Clock::now();
    const std::string name = "bench-compile " + t.ToString();
    ASSIGN_OR_RETURN(schedule::ScheduleFile file,
                     schedule::ScheduleFile::Parse(MatmulSchedule(o.size, t).dump(), name));
    ASSIGN_OR_RETURN(schedule::ResolvedSchedule resolved, file.Resolve());
    out.push_back(
        {name, std::move(resolved.dag), std::move(resolved.state), file.target, MsSince(start)});
  }
  return out;
}

nlohmann::json StatsJson(const runtime::TimingStats& s) {
  return {{"median", s.median_ms}, {"p10", s.p10_ms},   {"p90", s.p90_ms}, {"min", s.min_ms},
          {"max", s.max_ms},       {"mean", s.mean_ms}, {"count", s.runs}};
}

void PrintStats(const char* what, const std::vector<double>& ms) {
  if (ms.empty()) {
    std::printf("%-28s (none)\n", what);
    return;
  }
  const runtime::TimingStats s = runtime::Summarize(ms);
  std::printf("%-28s median %7.2f  p10 %7.2f  p90 %7.2f  max %7.2f  (n=%d)\n", what, s.median_ms,
              s.p10_ms, s.p90_ms, s.max_ms, s.runs);
}

// The candidates lowered for compiling; invalid schedules are counted, not compiled.
struct LoweredCandidates {
  std::vector<codegen::GpuCompileJob> jobs;
  std::vector<std::string> names;       // of jobs[i]
  std::vector<double> lower_ms;         // replay + lower, every candidate
  std::unique_ptr<ir::ComputeDAG> dag;  // the first valid candidate's
  int invalid = 0;
};

absl::StatusOr<LoweredCandidates> LowerCandidates(const std::vector<Candidate>& candidates) {
  LoweredCandidates out;
  for (const Candidate& c : candidates) {
    const auto start = Clock::now();
    absl::StatusOr<schedule::LoweredKernel> lowered = schedule::Lower(c.dag, c.state, c.target);
    out.lower_ms.push_back(c.replay_ms + MsSince(start));
    if (!lowered.ok()) {
      ++out.invalid;
      continue;
    }
    if (!out.dag) out.dag = std::make_unique<ir::ComputeDAG>(c.dag);
    codegen::GpuCompileJob job;
    job.nest = std::make_shared<ir::LoopNest>(std::move(lowered->nest));
    for (const LaunchConfig& l : lowered->launches)
      job.launches.push_back({l.grid, l.block, l.shared_memory_bytes});
    out.jobs.push_back(std::move(job));
    out.names.push_back(c.name);
  }
  if (out.jobs.empty()) return absl::InvalidArgumentError("no valid candidate to compile");
  return out;
}

// Per-candidate compile times by phase (ms), over the candidates that compiled.
struct PhaseTimes {
  std::vector<double> total, emit, lower, math, scf_to_cf, to_nvvm, cleanup, translate, optimize,
      codegen, assemble;

  void Add(const codegen::GpuModule& m, bool assembled) {
    total.push_back(m.compile_ms);
    emit.push_back(m.phases.emit_ms);
    lower.push_back(m.phases.lower_ms);
    math.push_back(m.phases.math_ms);
    scf_to_cf.push_back(m.phases.scf_to_cf_ms);
    to_nvvm.push_back(m.phases.to_nvvm_ms);
    cleanup.push_back(m.phases.cleanup_ms);
    translate.push_back(m.phases.translate_ms);
    optimize.push_back(m.phases.optimize_ms);
    codegen.push_back(m.phases.codegen_ms);
    if (assembled) assemble.push_back(m.assemble_ms);
  }

  void Print() const {
    PrintStats("MLIR->PTX ms (per candidate)", total);
    PrintStats("  emit ms", emit);
    PrintStats("  MLIR lowering ms", lower);
    PrintStats("    math ms", math);
    PrintStats("    scf -> cf ms", scf_to_cf);
    PrintStats("    gpu -> nvvm ms", to_nvvm);
    PrintStats("    cse + casts ms", cleanup);
    PrintStats("  translate ms", translate);
    PrintStats("  LLVM optimize ms", optimize);
    PrintStats("  NVPTX codegen ms", codegen);
    if (!assemble.empty()) PrintStats("  ptxas ms", assemble);
  }

  // compile_ms and phases_ms of the JSON (nothing when no candidate compiled).
  void AddTo(nlohmann::json& out) const {
    if (total.empty()) return;
    out["compile_ms"] = StatsJson(runtime::Summarize(total));
    out["phases_ms"] = {{"emit", StatsJson(runtime::Summarize(emit))},
                        {"lower", StatsJson(runtime::Summarize(lower))},
                        {"translate", StatsJson(runtime::Summarize(translate))},
                        {"optimize", StatsJson(runtime::Summarize(optimize))},
                        {"codegen", StatsJson(runtime::Summarize(codegen))}};
    if (!assemble.empty()) out["phases_ms"]["assemble"] = StatsJson(runtime::Summarize(assemble));
  }
};

absl::Status Run(const BenchCompileOptions& o) {
  if (o.size < 32) return absl::InvalidArgumentError("--size must be at least 32");
  if (o.candidates < 1) return absl::InvalidArgumentError("--candidates must be at least 1");
  if (o.workers < 0 || o.workers > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers must be in 0..1024 (0 = all cores), got ", o.workers));
  }
  // What can fail early does, before minutes of compiling: the --json file, the CUDA driver
  // (--jit) and, once the candidates are lowered, the arch (the first candidate alone).
  std::ofstream json_out;
  if (!o.json.empty()) {
    json_out.open(o.json);
    if (!json_out) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write --json file '", o.json, "'"));
    }
  }
  std::unique_ptr<measure::Runner> measurer;
  if (o.jit) {
    // The driver's JIT of each PTX, measured by the cuda measurer (one run per candidate, no
    // check: this measures loading, not correctness; `tilesearch measure` checks).
    measure::MeasureOptions mopts;
    mopts.check = false;
    mopts.timing.warmup_runs = 0;
    mopts.timing.min_runs = 1;
    mopts.timing.min_total_ms = 0;
    mopts.timing.flush_cache = false;
    Target target = Target::H200();
    target.arch = o.arch;
    ASSIGN_OR_RETURN(measurer, measure::CreateRunner(target, mopts));
  }
  ASSIGN_OR_RETURN(std::vector<Candidate> candidates, Candidates(o));

  ASSIGN_OR_RETURN(LoweredCandidates lowered, LowerCandidates(candidates));
  const std::vector<codegen::GpuCompileJob>& jobs = lowered.jobs;
  const std::vector<std::string>& kept = lowered.names;
  const std::vector<double>& lower_ms = lowered.lower_ms;
  const std::unique_ptr<ir::ComputeDAG>& dag = lowered.dag;
  const int invalid = lowered.invalid;

  codegen::GpuCompileOptions copts;
  copts.arch = o.arch;
  copts.opt_level = o.opt_level;
  if (o.assemble) {
    copts.ptxas = codegen::FindPtxas().value_or("");
    if (copts.ptxas.empty()) {
      return absl::FailedPreconditionError(
          "--assemble: no ptxas found (PATH, CUDA_HOME, /usr/local/cuda)");
    }
  }
  {
    absl::StatusOr<codegen::GpuModule> first =
        codegen::CompileToPtx(*jobs[0].nest, jobs[0].launches, copts);
    if (!first.ok()) return first.status();
  }
  codegen::ParallelCompileOptions popts;
  popts.num_workers = o.workers;
  const auto start = Clock::now();
  std::vector<absl::StatusOr<codegen::GpuModule>> modules =
      codegen::CompileManyToPtx(jobs, copts, popts);
  const double wall_ms = MsSince(start);

  PhaseTimes phases;
  int failed = 0;
  for (const auto& m : modules) {
    if (!m.ok()) {
      ++failed;
      std::fprintf(stderr, "compile failed: %s\n", std::string(m.status().message()).c_str());
      continue;
    }
    phases.Add(*m, o.assemble);
  }
  if (failed == static_cast<int>(modules.size())) {
    return absl::InternalError(absl::StrCat("every candidate failed to compile; the first: ",
                                            modules[0].status().message()));
  }
  const int workers = o.workers > 0 ? o.workers : UsableCores();
  const std::string what =
      o.log.empty() ? absl::StrCat("matmul ", o.size, "x", o.size, "x", o.size, " float32")
                    : absl::StrCat("the records of ", o.log);
  std::printf(
      "bench-compile: %zu candidates of %s for %s (%d invalid schedules skipped), %d workers\n",
      jobs.size(), what.c_str(), o.arch.c_str(), invalid, workers);
  PrintStats("schedule replay + lower ms", lower_ms);
  phases.Print();
  const double throughput = 1000.0 * static_cast<double>(jobs.size()) / wall_ms;
  std::printf("throughput: %.1f candidates/s (%zu in %.0f ms wall, %d failed)\n", throughput,
              jobs.size(), wall_ms, failed);

  nlohmann::json out = {{"size", o.size},
                        {"candidates", jobs.size()},
                        {"invalid", invalid},
                        {"failed", failed},
                        {"workers", workers},
                        {"wall_ms", wall_ms},
                        {"throughput_per_s", throughput}};
  phases.AddTo(out);
  out["lower_ms"] = StatsJson(runtime::Summarize(lower_ms));
  // Each candidate's PTX, by a hash (std::hash of the text): two builds (another --opt-level, a
  // compiler change) are compared candidate by candidate.
  nlohmann::json ptx_hashes = nlohmann::json::array();
  for (size_t i = 0; i < modules.size(); ++i) {
    ptx_hashes.push_back(
        {{"candidate", kept[i]},
         {"ptx_hash",
          modules[i].ok() ? absl::StrCat(std::hash<std::string>()(modules[i]->ptx)) : ""},
         {"ptx_bytes", modules[i].ok() ? modules[i]->ptx.size() : 0}});
  }
  out["ptx"] = ptx_hashes;

  if (measurer != nullptr) {
    std::vector<measure::BuildResult> candidates;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!modules[i].ok()) continue;
      measure::BuildResult c;
      c.nest = jobs[i].nest;
      c.launches = jobs[i].launches;
      c.gpu_module = std::make_shared<codegen::GpuModule>(*modules[i]);
      c.compile_ms = modules[i]->compile_ms;
      candidates.push_back(std::move(c));
    }
    std::vector<measure::MeasureResult> results = measurer->Run(*dag, candidates);
    std::vector<double> jit_ms, run_ms;
    std::map<std::string, int> errors;
    for (const measure::MeasureResult& r : results) {
      if (r.load_ms > 0) jit_ms.push_back(r.load_ms);
      if (r.ok())
        run_ms.push_back(r.timing.median_ms);
      else
        ++errors[measure::MeasureErrorName(r.error)];
    }
    PrintStats("driver JIT ms (per candidate)", jit_ms);
    PrintStats("one run ms (unchecked)", run_ms);
    for (const auto& [kind, count] : errors) std::printf("  %s: %d\n", kind.c_str(), count);
    if (!jit_ms.empty()) out["driver_jit_ms"] = StatsJson(runtime::Summarize(jit_ms));
    out["run_errors"] = errors;
  }
  if (!o.json.empty()) {
    json_out << out.dump(1) << "\n";
    json_out.close();
    if (!json_out) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write --json file '", o.json, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

CommandAction AddBenchCompileCommand(CLI::App& app) {
  auto o = std::make_shared<BenchCompileOptions>();
  app.add_option("--size", o->size, "matmul extent n (n x n x n float32)")->capture_default_str();
  app.add_option("--candidates", o->candidates, "distinct tilings to compile")
      ->capture_default_str();
  app.add_option("--workers", o->workers, "parallel compilations (0 = all cores)")
      ->capture_default_str();
  app.add_option("--seed", o->seed, "order of the tilings")->capture_default_str();
  app.add_option("--arch", o->arch, "NVPTX target sm_XX")->capture_default_str();
  app.add_flag("--jit", o->jit, "also load every PTX with the CUDA driver and time its JIT");
  app.add_option("--log", o->log,
                 "compile the schedules of this tuning log's records (the first --candidates; "
                 "each record's workload) instead of the matmul tilings");
  app.add_option("--opt-level", o->opt_level, "LLVM optimization level of the GPU builds")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  app.add_flag("--assemble", o->assemble,
               "also assemble each PTX with ptxas (as the tuner's builds do) and report its time");
  app.add_option("--json", o->json, "write the numbers as JSON to this file");
  return [o]() { return Run(*o); };
}

}  // namespace tilesearch::tools
