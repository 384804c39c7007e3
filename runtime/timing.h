// Timing statistics shared by the GPU (CUDA events) and host (steady clock) timers: warm-up, then
// repeated runs until both a minimum count and a minimum total time are reached (capped), then
// median and spread. design.md, "Measurement method".
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tilesearch::runtime {
/// Warm-up, repeats and stopping rule of TimeRepeated.
struct TimingOptions {
  /// Untimed runs before the first timed one (module load, first-touch, clocks ramping up).
  int warmup_runs = 3;
  /// After the warm-up runs, untimed runs (flushes included) go on until this much wall time has
  /// passed since the first of them, ms; 0 = none. A held timing then starts at the steady state
  /// the kernel itself brings the card to: a GPU repeating a 2.8 ms GEMM reaches its power limit
  /// within ~100 ms and its clock falls by a quarter, by how much depending on the kernel's
  /// energy per run, whereas a timing started cool, or after another kernel, measures the
  /// previous state (bench/NOTES.md, "bf16 GEMMs at the power limit").
  double soak_ms = 0;
  /// Timed runs: at least min_runs AND at least min_total_ms of summed run time, at most max_runs.
  int min_runs = 10;
  double min_total_ms = 50;
  int max_runs = 1000;
  /// Runs past min_runs (taken to reach min_total_ms) stop once the wall time of the timed phase,
  /// cache flushes included, exceeds this: a fast kernel behind a slow flush (a 64 MiB host
  /// memset costs milliseconds) must not take seconds per candidate. 0 = no limit.
  double max_wall_ms = 1000;
  /// Flush the L2 (GPU: write a buffer larger than the L2; host: write a buffer larger than the
  /// last-level cache) before every timed run, outside the timed region.
  bool flush_cache = true;
};

/// Statistics over the timed runs, milliseconds.
struct TimingStats {
  std::vector<double> samples_ms;  // every timed run, in order
  int runs = 0;
  double median_ms = 0;
  double mean_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double p10_ms = 0;  // 10th / 90th percentile (linear interpolation)
  double p90_ms = 0;
  double stddev_ms = 0;  // sample standard deviation (0 for one run)
  /// The soak the runs followed (TimingOptions::soak_ms; 0: none), so that a logged timing says
  /// whether it was taken at the steady state.
  double soak_ms = 0;
  /// (p90 − p10) / median: the spread we report beside the median.
  double relative_spread() const { return median_ms > 0 ? (p90_ms - p10_ms) / median_ms : 0; }
  /// "0.412 ms median (p10 0.410, p90 0.415, 120 runs)".
  std::string ToString() const;
};

/// Statistics of `samples_ms` (any order; must be non-empty and finite, CHECKed).
TimingStats Summarize(std::vector<double> samples_ms);

/// The wall limit (TimingOptions::max_wall_ms) of a timing asked for `min_total_ms` of runs
/// under a limit of `max_wall_ms`: twice the runs' time where that is longer, so that a held
/// timing (seconds of runs) is not cut at the default; 0 (no limit) stays 0.
double WallLimitFor(double max_wall_ms, double min_total_ms);

/// Runs `run_once` options.warmup_runs times untimed (then on, untimed, until options.soak_ms of
/// wall time), then until the stopping rule of
/// TimingOptions holds (min_runs always; then min_total_ms, within max_runs and max_wall_ms);
/// `run_once` returns one run's time in ms (it does its own cache flush and
/// clock reads); the statistics carry options.soak_ms. The first error of `run_once` is returned as
/// is. Errors: kInvalidArgument for options with min_runs < 1, max_runs < min_runs or a negative
/// warm-up / soak / min time / wall limit.
[[nodiscard]] absl::StatusOr<TimingStats> TimeRepeated(
    const std::function<absl::StatusOr<double>()>& run_once, const TimingOptions& options);

}  // namespace tilesearch::runtime
