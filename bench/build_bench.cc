// The build phase of tuning, one candidate at a time and timed by phase: for each candidate (a
// record of a tuning log, or a schedule file) the schedule is replayed and lowered, then compiled
// in this process (codegen::CompileToPtx, no fork, no time limit) through MLIR → LLVM → PTX and,
// with a ptxas, into a cubin. Prints one line per candidate (ms per phase, MLIR operations
// emitted, PTX instructions) and the sums and maxima over them. Single-threaded on purpose: the
// numbers are CPU time per candidate, what a tuning round pays per core.
//
//   build_bench --log LOG.jsonl [--error compile_timeout | --best 4 | --sample 64 --seed 1]
//   build_bench --schedule bench/schedules/x.json [--unroll-budget N] [--ptx-dir DIR]
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"
#include "codegen/codegen.h"
#include "codegen/ptxas.h"
#include "measure/measure.h"
#include "schedule/lower.h"
#include "schedule/schedule_file.h"
#include "search/log_io.h"
#include "search/replay.h"

namespace ts = tilesearch;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::vector<std::string> logs;
  std::vector<std::string> schedules;
  std::string error;  // keep only records with this error ("none", "compile_timeout", ...)
  int best = 0;
  int sample = 0;
  int limit = 0;
  uint64_t seed = 1;
  int64_t unroll_budget = -1;  // -1: GpuCompileOptions' default
  int opt_level = 3;
  bool no_ptxas = false;
  std::string ptx_dir;
};

// A candidate to build: a name for the report and its schedule.
struct Source {
  std::string name;
  ts::ir::ComputeDAG dag;
  ts::schedule::State state;
  ts::Target target;
};

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Instructions of a PTX text: statement lines (ending in ';') that are not directives.
int64_t PtxInstructions(const std::string& ptx) {
  int64_t n = 0;
  size_t pos = 0;
  while (pos < ptx.size()) {
    size_t end = ptx.find('\n', pos);
    if (end == std::string::npos) end = ptx.size();
    size_t first = ptx.find_first_not_of(" \t", pos);
    if (first < end && ptx[first] != '.' && ptx[first] != '/' && ptx[end - 1] == ';') ++n;
    pos = end + 1;
  }
  return n;
}

// The records of a log that the filters select, in log order.
std::vector<ts::search::MeasureRecord> SelectRecords(const Args& args,
                                                     std::vector<ts::search::MeasureRecord> recs) {
  if (!args.error.empty()) {
    std::erase_if(recs, [&](const ts::search::MeasureRecord& r) {
      return ts::measure::MeasureErrorName(r.result.error) != args.error;
    });
  }
  if (args.best > 0) {
    std::erase_if(recs, [](const ts::search::MeasureRecord& r) { return !r.valid(); });
    std::stable_sort(recs.begin(), recs.end(),
                     [](const auto& a, const auto& b) { return a.median_ms() < b.median_ms(); });
    if (static_cast<int>(recs.size()) > args.best) recs.resize(args.best);
  }
  if (args.sample > 0 && static_cast<int>(recs.size()) > args.sample) {
    std::mt19937_64 rng(args.seed);
    std::shuffle(recs.begin(), recs.end(), rng);
    recs.resize(args.sample);
    std::sort(recs.begin(), recs.end(),
              [](const auto& a, const auto& b) { return a.trial < b.trial; });
  }
  if (args.limit > 0 && static_cast<int>(recs.size()) > args.limit) recs.resize(args.limit);
  return recs;
}

absl::StatusOr<std::vector<Source>> LoadSources(const Args& args) {
  std::vector<Source> out;
  for (const std::string& path : args.logs) {
    ASSIGN_OR_RETURN(ts::search::LogContents log, ts::search::ReadLog(path));
    const std::string stem = std::filesystem::path(path).stem().string();
    for (const ts::search::MeasureRecord& r : SelectRecords(args, log.records)) {
      absl::StatusOr<ts::search::ReplayedRecord> rep = ts::search::ReplayRecord(r);
      if (!rep.ok()) {
        std::cerr << stem << " trial " << r.trial << ": " << rep.status() << "\n";
        continue;
      }
      out.push_back({absl::StrCat(stem, "-t", r.trial), rep->dag, rep->state, r.target});
    }
  }
  for (const std::string& path : args.schedules) {
    ASSIGN_OR_RETURN(ts::schedule::ScheduleFile file, ts::schedule::ScheduleFile::Load(path));
    ASSIGN_OR_RETURN(ts::schedule::ResolvedSchedule resolved, file.Resolve());
    out.push_back(
        {std::filesystem::path(path).stem().string(), resolved.dag, resolved.state, file.target});
  }
  return out;
}

// One candidate's phase times (ms) in table order, and its sizes.
enum Phase {
  kLower,
  kEmit,
  kMath,
  kScf,
  kNvvm,
  kCleanup,
  kTranslate,
  kOptimize,
  kCodegen,
  kPtxas,
  kTotal,
  kPhases
};
struct Row {
  std::array<double, kPhases> ms{};
  int64_t ops = 0, ptx = 0;
};

void PrintRow(const std::string& name, const Row& r) {
  const auto& t = r.ms;
  absl::PrintF("%-40s %8.1f %8.1f %7.1f %7.1f %7.1f %8.1f %8.1f %8.1f %8.1f %8.1f %9.1f %8d %7d\n",
               name, t[kLower], t[kEmit], t[kMath], t[kScf], t[kNvvm], t[kCleanup], t[kTranslate],
               t[kOptimize], t[kCodegen], t[kPtxas], t[kTotal], r.ops, r.ptx);
}

int Run(const Args& args) {
  absl::StatusOr<std::vector<Source>> sources = LoadSources(args);
  if (!sources.ok()) return std::cerr << sources.status() << "\n", 2;
  ts::codegen::GpuCompileOptions options;
  options.opt_level = args.opt_level;
  if (args.unroll_budget >= 0) options.unroll_budget = args.unroll_budget;
  if (!args.no_ptxas) options.ptxas = ts::codegen::FindPtxas().value_or("");
  if (!args.ptx_dir.empty()) std::filesystem::create_directories(args.ptx_dir);
  absl::PrintF("%-40s %8s %8s %7s %7s %7s %8s %8s %8s %8s %8s %9s %8s %7s\n", "candidate (ms)",
               "lower", "emit", "math", "scf2cf", "nvvm", "cleanup", "transl", "llvm-opt", "nvptx",
               "ptxas", "total", "mlir-ops", "ptx-ins");
  Row sum, max;
  int built = 0, failed = 0;
  for (const Source& src : *sources) {
    if (!src.target.is_gpu()) continue;
    Row r;
    const Clock::time_point start = Clock::now();
    absl::StatusOr<ts::schedule::LoweredKernel> lowered =
        ts::schedule::Lower(src.dag, src.state, src.target);
    r.ms[kLower] = MsSince(start);
    if (!lowered.ok()) {
      std::cerr << src.name << ": " << lowered.status() << "\n";
      ++failed;
      continue;
    }
    options.arch = src.target.arch;
    absl::StatusOr<ts::codegen::GpuModule> m =
        ts::codegen::CompileToPtx(lowered->nest, lowered->launches, options);
    if (!m.ok()) {
      std::cerr << src.name << ": " << m.status() << "\n";
      ++failed;
      continue;
    }
    if (!m->assemble_error.empty()) std::cerr << src.name << ": " << m->assemble_error << "\n";
    const auto& p = m->phases;
    r.ms = {r.ms[kLower],
            p.emit_ms,
            p.math_ms,
            p.scf_to_cf_ms,
            p.to_nvvm_ms,
            p.cleanup_ms,
            p.translate_ms,
            p.optimize_ms,
            p.codegen_ms,
            m->assemble_ms,
            r.ms[kLower] + m->compile_ms};
    r.ops = m->emitted_ops;
    r.ptx = PtxInstructions(m->ptx);
    PrintRow(src.name, r);
    std::fflush(stdout);
    if (!args.ptx_dir.empty()) {
      std::ofstream(args.ptx_dir + "/" + src.name + ".ptx") << m->ptx;
      if (!m->cubin.empty()) std::ofstream(args.ptx_dir + "/" + src.name + ".cubin") << m->cubin;
    }
    ++built;
    for (int i = 0; i < kPhases; ++i) {
      sum.ms[i] += r.ms[i];
      max.ms[i] = std::max(max.ms[i], r.ms[i]);
    }
    sum.ops += r.ops;
    sum.ptx += r.ptx;
    max.ops = std::max(max.ops, r.ops);
    max.ptx = std::max(max.ptx, r.ptx);
  }
  PrintRow(absl::StrCat("sum of ", built, " (", failed, " failed)"), sum);
  PrintRow("max", max);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"time the build of GPU candidates by phase, one at a time"};
  app.add_option("--log", args.logs, "tuning log (JSON Lines) whose records to build");
  app.add_option("--schedule", args.schedules, "schedule file to build");
  app.add_option("--error", args.error, "log records with this error only (none, ...)");
  app.add_option("--best", args.best, "the N fastest valid records of each log");
  app.add_option("--sample", args.sample, "N records of each log drawn at random (--seed)");
  app.add_option("--seed", args.seed, "seed of --sample");
  app.add_option("--limit", args.limit, "at most N records of each log");
  app.add_option("--unroll-budget", args.unroll_budget,
                 "GpuCompileOptions::unroll_budget (-1: its default, 0: none)");
  app.add_option("--opt-level", args.opt_level, "LLVM optimization level 0..3");
  app.add_flag("--no-ptxas", args.no_ptxas, "PTX only");
  app.add_option("--ptx-dir", args.ptx_dir, "write each PTX (and cubin) here as <name>.ptx");
  CLI11_PARSE(app, argc, argv);
  return Run(args);
}
