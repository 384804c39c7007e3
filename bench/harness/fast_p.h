// KernelBench's scoring arithmetic (Ouyang et al., 2025, §3.3; KernelBench src/kernelbench/
// score.py fastp / geometric_mean_speed_ratio_correct_only):
//   speedup_i = T_baseline,i / T_ours,i
//   fast_p    = (1/N) · Σ_i 1(correct_i ∧ speedup_i > p)     (strict >, N counts every problem)
//   geomean   = exp(mean over correct problems of log speedup_i)
// plus the speed-of-light sanity bound of KernelBench v0.1: no kernel can run faster than
// max(FLOPs / peak FLOP/s, bytes / bandwidth); a time below it is reported as suspect (a
// measurement or checking error, not a result). bench/score.py implements the same functions in
// Python (bench/test_score_logic.py checks them against the same hand-computed values).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tilesearch::bench {

/// One problem's outcome against one baseline.
struct ProblemScore {
  std::string name;
  bool correct = false;    // passed every correctness check
  double ours_ms = 0;      // our kernel's time (median); ignored when !correct
  double baseline_ms = 0;  // the baseline's time, same method
};

/// baseline_ms / ours_ms. Errors: kInvalidArgument "speedup of 'x': times must be positive and
/// finite, got ours 0 ms, baseline 1.5 ms".
absl::StatusOr<double> Speedup(const ProblemScore& score);

/// fast_p over all `scores` (incorrect problems count in the denominator, never in the
/// numerator). Errors: kInvalidArgument for no scores, a negative or non-finite p, and Speedup's
/// errors for a correct problem.
absl::StatusOr<double> FastP(const std::vector<ProblemScore>& scores, double p);

/// Geometric mean of the speedups of the correct problems. Errors: kInvalidArgument when no
/// problem is correct, and Speedup's errors.
absl::StatusOr<double> GeomeanSpeedup(const std::vector<ProblemScore>& scores);

/// The device's limits: peak FLOP/s (measured fp32 FMA peak) and bandwidth (measured copy
/// bandwidth, bytes/s).
struct DeviceLimits {
  double peak_flops_per_s = 0;
  double bandwidth_bytes_per_s = 0;
};

/// The speed-of-light time in ms: max(flops / peak, bytes / bandwidth) · 1e3. Errors:
/// kInvalidArgument for non-positive limits or negative work.
absl::StatusOr<double> SpeedOfLightMs(double flops, double bytes, const DeviceLimits& limits);

/// True when `ours_ms` is below the speed-of-light time (the result cannot be real). Errors:
/// SpeedOfLightMs's, and a non-positive or non-finite time.
absl::StatusOr<bool> IsSuspect(double ours_ms, double flops, double bytes,
                               const DeviceLimits& limits);

}  // namespace tilesearch::bench
