// eigen_gemm: the CPU baseline of the tuned matmul (bench/scripts/cpu_tune_matmul_vs_eigen.sh).
// Times Eigen's float32 GEMM C[M, N] = A[M, K] · B[K, N] (row-major, as tilesearch's matmul) with
// the method of runtime::TimeRepeated (warm-up, then runs until a minimum count and a minimum
// summed time, median) and measure/host_runner.cc's cache flush (a 64 MiB buffer written before
// every timed run, outside the timed region), so both sides of the comparison are timed alike.
// Before timing, sampled entries of C are checked against a float64 dot product.
//
// Usage: eigen_gemm --m 512 --n 512 --k 512 --threads 1 [--min-runs 10 --min-time-ms 50 ...]
// Prints one line of key=value pairs (median_ms, gflops, ...); exit status 1 when the check fails.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/timing.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Options {
  int64_t m = 512;
  int64_t n = 512;
  int64_t k = 512;
  int threads = 1;
  uint64_t seed = 1;
  tilesearch::runtime::TimingOptions timing;  // tilesearch's defaults
};

// Checks `samples` entries of c (corners included) against a float64 dot product of a's row and
// b's column. Tolerance: the worst-case float32 summation bound K · 2⁻²⁴ · Σ|a·b| (Higham, 3.1),
// plus 1e-30 for all-zero rows. Returns the number of entries outside it; prints the first.
int64_t CheckSamples(const RowMatrix& a, const RowMatrix& b, const RowMatrix& c, int samples,
                     uint64_t seed, double* max_abs_error) {
  std::mt19937_64 rng(seed ^ 0x636865636bull);
  std::vector<std::pair<int64_t, int64_t>> points = {
      {0, 0}, {0, c.cols() - 1}, {c.rows() - 1, 0}, {c.rows() - 1, c.cols() - 1}};
  std::uniform_int_distribution<int64_t> row(0, c.rows() - 1);
  std::uniform_int_distribution<int64_t> col(0, c.cols() - 1);
  while (static_cast<int>(points.size()) < samples) points.push_back({row(rng), col(rng)});
  int64_t bad = 0;
  *max_abs_error = 0;
  const double unit = std::ldexp(1.0, -24);
  for (const auto& [i, j] : points) {
    double ref = 0;
    double magnitude = 0;
    for (int64_t p = 0; p < a.cols(); ++p) {
      const double term = static_cast<double>(a(i, p)) * static_cast<double>(b(p, j));
      ref += term;
      magnitude += std::fabs(term);
    }
    const double error = std::fabs(static_cast<double>(c(i, j)) - ref);
    *max_abs_error = std::max(*max_abs_error, error);
    const double tolerance = static_cast<double>(a.cols()) * unit * magnitude + 1e-30;
    if (!(error <= tolerance)) {
      if (bad == 0) {
        std::cerr << "eigen_gemm: C[" << i << ", " << j << "] = " << c(i, j) << ", float64 " << ref
                  << " (tolerance " << tolerance << ")\n";
      }
      ++bad;
    }
  }
  return bad;
}

int Run(const Options& options) {
  Eigen::setNbThreads(options.threads);
  if (Eigen::nbThreads() != options.threads) {
    std::cerr << "eigen_gemm: asked for " << options.threads << " threads, Eigen uses "
              << Eigen::nbThreads()
              << " (built without OpenMP? Eigen threads its GEMM only through OpenMP)\n";
    return 2;
  }
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  RowMatrix a(options.m, options.k);
  RowMatrix b(options.k, options.n);
  RowMatrix c(options.m, options.n);
  for (int64_t i = 0; i < a.size(); ++i) a.data()[i] = uniform(rng);
  for (int64_t i = 0; i < b.size(); ++i) b.data()[i] = uniform(rng);

  c.setConstant(std::nanf(""));
  c.noalias() = a * b;
  double max_abs_error = 0;
  const int64_t bad = CheckSamples(a, b, c, 64, options.seed, &max_abs_error);
  if (bad > 0) {
    std::cerr << "eigen_gemm: " << bad << " of 64 sampled entries outside tolerance\n";
    return 1;
  }

  std::vector<unsigned char> flush(size_t{64} << 20);
  unsigned char fill = 0;
  auto run_once = [&]() -> absl::StatusOr<double> {
    if (options.timing.flush_cache) std::memset(flush.data(), ++fill, flush.size());
    const auto t0 = std::chrono::steady_clock::now();
    c.noalias() = a * b;
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  absl::StatusOr<tilesearch::runtime::TimingStats> stats =
      tilesearch::runtime::TimeRepeated(run_once, options.timing);
  if (!stats.ok()) {
    std::cerr << "eigen_gemm: " << stats.status().ToString() << "\n";
    return 2;
  }
  // Keeps the product observable.
  volatile float sink = c(0, 0);
  (void)sink;
  const double flops = 2.0 * static_cast<double>(options.m) * static_cast<double>(options.n) *
                       static_cast<double>(options.k);
  std::cout << absl::StrFormat(
                   "eigen_gemm m=%d n=%d k=%d threads=%d median_ms=%.4f p10_ms=%.4f p90_ms=%.4f "
                   "min_ms=%.4f runs=%d gflops=%.2f check_max_abs_error=%.3g eigen=%d.%d.%d "
                   "simd=\"%s\"",
                   options.m, options.n, options.k, options.threads, stats->median_ms,
                   stats->p10_ms, stats->p90_ms, stats->min_ms, stats->runs,
                   flops / (stats->median_ms * 1e6), max_abs_error, EIGEN_WORLD_VERSION,
                   EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse())
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app("Eigen float32 GEMM timed like tilesearch's host measurer");
  app.add_option("--m", options.m, "rows of A and C")->check(CLI::Range(1, 1 << 16));
  app.add_option("--n", options.n, "columns of B and C")->check(CLI::Range(1, 1 << 16));
  app.add_option("--k", options.k, "columns of A, rows of B")->check(CLI::Range(1, 1 << 16));
  app.add_option("--threads", options.threads, "Eigen::setNbThreads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--seed", options.seed, "input seed")->capture_default_str();
  app.add_option("--min-runs", options.timing.min_runs)->capture_default_str();
  app.add_option("--min-time-ms", options.timing.min_total_ms)->capture_default_str();
  app.add_option("--warmup", options.timing.warmup_runs)->capture_default_str();
  app.add_option("--max-wall-ms", options.timing.max_wall_ms)->capture_default_str();
  bool no_flush = false;
  app.add_flag("--no-flush", no_flush, "do not write 64 MiB before each timed run");
  CLI11_PARSE(app, argc, argv);
  options.timing.flush_cache = !no_flush;
  if (options.timing.max_runs < options.timing.min_runs)
    options.timing.max_runs = options.timing.min_runs;
  return Run(options);
}
