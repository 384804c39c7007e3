#include "bench/harness/fast_p.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tilesearch::bench {

absl::StatusOr<double> Speedup(const ProblemScore& s) {
  if (!(s.ours_ms > 0) || !(s.baseline_ms > 0) || !std::isfinite(s.ours_ms) ||
      !std::isfinite(s.baseline_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat("speedup of '", s.name, "': times must be positive and finite, got ours ",
                     s.ours_ms, " ms, baseline ", s.baseline_ms, " ms"));
  }
  return s.baseline_ms / s.ours_ms;
}

absl::StatusOr<double> FastP(const std::vector<ProblemScore>& scores, double p) {
  if (scores.empty()) return absl::InvalidArgumentError("fast_p of no problems");
  if (!(p >= 0) || !std::isfinite(p)) {
    return absl::InvalidArgumentError(absl::StrCat("fast_p: p must be >= 0 and finite, got ", p));
  }
  int fast = 0;
  for (const ProblemScore& s : scores) {
    if (!s.correct) continue;
    absl::StatusOr<double> speedup = Speedup(s);
    if (!speedup.ok()) return speedup.status();
    if (*speedup > p) ++fast;
  }
  return static_cast<double>(fast) / static_cast<double>(scores.size());
}

absl::StatusOr<double> GeomeanSpeedup(const std::vector<ProblemScore>& scores) {
  double log_sum = 0;
  int n = 0;
  for (const ProblemScore& s : scores) {
    if (!s.correct) continue;
    absl::StatusOr<double> speedup = Speedup(s);
    if (!speedup.ok()) return speedup.status();
    log_sum += std::log(*speedup);
    ++n;
  }
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat("geometric-mean speedup: none of the ",
                                                   scores.size(), " problems is correct"));
  }
  return std::exp(log_sum / n);
}

absl::StatusOr<double> SpeedOfLightMs(double flops, double bytes, const DeviceLimits& limits) {
  if (!(limits.peak_flops_per_s > 0) || !(limits.bandwidth_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("speed of light: limits must be positive, got peak ", limits.peak_flops_per_s,
                     " FLOP/s, bandwidth ", limits.bandwidth_bytes_per_s, " B/s"));
  }
  if (!(flops >= 0) || !(bytes >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("speed of light: work must be >= 0, got ", flops, " FLOP, ", bytes, " bytes"));
  }
  return std::max(flops / limits.peak_flops_per_s, bytes / limits.bandwidth_bytes_per_s) * 1e3;
}

absl::StatusOr<bool> IsSuspect(double ours_ms, double flops, double bytes,
                               const DeviceLimits& limits) {
  if (!(ours_ms > 0) || !std::isfinite(ours_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat("speed of light: time must be positive and finite, got ", ours_ms, " ms"));
  }
  absl::StatusOr<double> sol = SpeedOfLightMs(flops, bytes, limits);
  if (!sol.ok()) return sol.status();
  return ours_ms < *sol;
}

}  // namespace tilesearch::bench
