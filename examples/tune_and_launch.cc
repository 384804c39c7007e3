// Tunes a float32 matmul C = A · B on the default target (the GPU when there is one, else this
// CPU), picks the best schedule back out of the tuning log, rebuilds its kernel, launches it on
// random inputs and compares the result with a naive triple loop.
//
//   tune_and_launch [N [TRIALS [LOG [TARGET]]]]   (defaults: 256, 64, tune_and_launch.jsonl, auto)
//   N: 1..8192, TRIALS: 1..1000000; anything else ("abc", "12x") is refused with exit code 2.
//
// Running it again with the same log resumes the job: measured trials count toward TRIALS.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "search/api.h"

// Prints a failed status and exits: an example's error handling.
template <typename T>
T Must(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(value.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(value);
}

// The positional argument `text` as an integer in [min, max], or a message and exit code 2 (the
// whole text must be a decimal number: "abc", "12x" and "" are refused, not read as 0 or 12).
int64_t ParseCount(const char* what, const char* text, int64_t min, int64_t max) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || value < min || value > max) {
    std::fprintf(stderr, "error: %s must be an integer from %lld to %lld, got '%s'\n", what,
                 static_cast<long long>(min), static_cast<long long>(max), text);
    std::fprintf(stderr, "usage: tune_and_launch [N [TRIALS [LOG [TARGET]]]]\n");
    std::exit(2);
  }
  return value;
}

int main(int argc, char** argv) {
  if (argc > 5) {
    std::fprintf(stderr, "usage: tune_and_launch [N [TRIALS [LOG [TARGET]]]]\n");
    return 2;
  }
  const int64_t n = argc > 1 ? ParseCount("N (the matrix size)", argv[1], 1, 8192) : 256;
  const int trials = argc > 2 ? static_cast<int>(ParseCount("TRIALS", argv[2], 1, 1000000)) : 64;
  const std::string log = argc > 3 ? argv[3] : "tune_and_launch.jsonl";
  const std::string target = argc > 4 ? argv[4] : "auto";

  // 1. The task: which operator, on which shapes, for which hardware.
  tilesearch::Task task = Must(tilesearch::Task::Create(
      "matmul", {{n, n}, {n, n}}, Must(tilesearch::TargetFromString(target))));
  std::printf("tuning %s for %d trials\n", task.ToString().c_str(), trials);

  // 2. Tune: every measured schedule is appended to the log.
  tilesearch::TuneOptions options;
  options.trials = trials;
  options.per_round = std::min(trials, 16);
  options.log_path = log;
  options.search.population = 256;  // a small search, for a quick demo
  Must(tilesearch::Tune(task, options));

  // 3. The fastest valid record of the task in the log, rebuilt into a kernel and loaded.
  tilesearch::HistoryBest best = Must(tilesearch::ApplyHistoryBest(log, task));
  tilesearch::KernelArtifact artifact = Must(tilesearch::BuildKernel(best));
  tilesearch::Kernel kernel = Must(tilesearch::Kernel::Load(artifact));

  // 4. Launch on random inputs: buffers are A, B (inputs) and C (output), row-major.
  std::vector<tilesearch::ir::HostBuffer> buffers = kernel.MakeBuffers();
  tilesearch::ir::FillRandom(buffers[0], /*seed=*/1);
  tilesearch::ir::FillRandom(buffers[1], /*seed=*/2);
  if (absl::Status s = kernel.Run({&buffers[0], &buffers[1], &buffers[2]}); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }

  // 5. Compare with a naive triple loop in double precision.
  const std::vector<double>& a = buffers[0].data;
  const std::vector<double>& b = buffers[1].data;
  double max_error = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += a[i * n + k] * b[k * n + j];
      max_error = std::max(max_error, std::abs(buffers[2].data[i * n + j] - sum));
    }
  }
  std::printf("best: trial %lld, tuned median %.4f ms (%.2f GFLOP/s)\n",
              static_cast<long long>(best.record.trial), best.record.median_ms(),
              artifact.gflops());
  std::printf("launch: %.4f ms, max abs error vs naive loop %.3g\n", kernel.last_run_ms(),
              max_error);
  return max_error <= 1e-3 * static_cast<double>(n) ? 0 : 1;
}
