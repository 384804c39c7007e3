// Tunes a 64×64×64 float32 matmul on this CPU for 16 trials through tilesearch's public C++ API,
// rebuilds the best schedule from the log, runs it and checks the result against a naive loop.
//
//   tune_matmul [LOG]   (default tune_matmul.jsonl; an existing log of the task is resumed)
//
// Exit status 0 when the tuning measured 16 trials, at least one is valid and the best kernel's
// output matches the loop; 1 otherwise, with the reason on stderr.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "search/api.h"

namespace {

constexpr int64_t kN = 64;
constexpr int kTrials = 16;

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "tune_matmul: %s: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string log = argc > 1 ? argv[1] : "tune_matmul.jsonl";

  auto cpu = tilesearch::TargetFromString("cpu");
  if (!cpu.ok()) return Fail("target", cpu.status());
  absl::StatusOr<tilesearch::Task> task =
      tilesearch::Task::Create("matmul", {{kN, kN}, {kN, kN}}, *cpu);
  if (!task.ok()) return Fail("task", task.status());

  // A small search (two rounds of 8; the XGBoost model trains on the first) with short timing.
  tilesearch::TuneOptions options;
  options.trials = kTrials;
  options.per_round = 8;
  options.log_path = log;
  options.search.population = 64;
  options.search.generations = 1;
  options.measure.timing.warmup_runs = 0;
  options.measure.timing.min_runs = 1;
  options.measure.timing.min_total_ms = 0;
  options.quiet = true;
  absl::StatusOr<tilesearch::TuneResult> result = tilesearch::Tune(*task, options);
  if (!result.ok()) return Fail("tune", result.status());
  if (result->trials != kTrials || !result->best.has_value()) {
    std::fprintf(stderr, "tune_matmul: %lld trials in the log (expected %d), %s\n",
                 static_cast<long long>(result->trials), kTrials,
                 result->best.has_value() ? "a valid best" : "none valid");
    return 1;
  }

  absl::StatusOr<tilesearch::HistoryBest> best = tilesearch::ApplyHistoryBest(log, *task);
  if (!best.ok()) return Fail("best record", best.status());
  absl::StatusOr<tilesearch::KernelArtifact> artifact = tilesearch::BuildKernel(*best);
  if (!artifact.ok()) return Fail("build", artifact.status());
  absl::StatusOr<tilesearch::Kernel> kernel = tilesearch::Kernel::Load(*artifact);
  if (!kernel.ok()) return Fail("load", kernel.status());

  // Buffers A, B (inputs) and C (output), row-major.
  std::vector<tilesearch::ir::HostBuffer> buffers = kernel->MakeBuffers();
  tilesearch::ir::FillRandom(buffers[0], /*seed=*/1);
  tilesearch::ir::FillRandom(buffers[1], /*seed=*/2);
  if (absl::Status s = kernel->Run({&buffers[0], &buffers[1], &buffers[2]}); !s.ok()) {
    return Fail("run", s);
  }
  const std::vector<double>& a = buffers[0].data;
  const std::vector<double>& b = buffers[1].data;
  const std::vector<double>& c = buffers[2].data;
  double max_error = 0;
  for (int64_t i = 0; i < kN; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < kN; ++k) sum += a[i * kN + k] * b[k * kN + j];
      max_error = std::max(max_error, std::abs(c[i * kN + j] - sum));
    }
  }

  int64_t failed = 0;
  for (const auto& [kind, count] : result->errors) failed += count;
  std::printf("%s: %lld trials, %lld valid, best trial %lld at %.4f ms (%.2f GFLOP/s)\n",
              task->ToString().c_str(), static_cast<long long>(result->trials),
              static_cast<long long>(result->trials - failed),
              static_cast<long long>(best->record.trial), best->record.median_ms(),
              artifact->gflops());
  // float32 products summed over 64 terms of magnitude ≤ 1: a few 1e-6 of rounding.
  const double tolerance = 1e-4;
  std::printf("max abs error vs naive loop %.3g (tolerance %.3g)\n", max_error, tolerance);
  return max_error <= tolerance ? 0 : 1;
}
