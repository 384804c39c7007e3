// Timing statistics and the repeat-until-stable timing loop (design.md, "Measurement method").
#include "runtime/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"

namespace tilesearch::runtime {
namespace {

// Percentile `q` in [0, 1] of sorted samples by linear interpolation between closest ranks
// (position q · (n − 1); numpy's default "linear" method).
double Percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

// Fixed three decimals for ordinary times; significant digits for sub-10-microsecond ones.
std::string FormatMs(double ms) {
  return std::fabs(ms) >= 0.01 || ms == 0 ? absl::StrFormat("%.3f", ms)
                                          : absl::StrFormat("%.3g", ms);
}

}  // namespace

std::string TimingStats::ToString() const {
  return absl::StrCat(FormatMs(median_ms), " ms median (p10 ", FormatMs(p10_ms), ", p90 ",
                      FormatMs(p90_ms), ", ", runs, runs == 1 ? " run)" : " runs)");
}

double WallLimitFor(double max_wall_ms, double min_total_ms) {
  return max_wall_ms > 0 ? std::max(max_wall_ms, 2 * min_total_ms) : max_wall_ms;
}

TimingStats Summarize(std::vector<double> samples_ms) {
  CHECK(!samples_ms.empty()) << "Summarize of no samples";
  for (double s : samples_ms) CHECK(std::isfinite(s)) << "non-finite timing sample " << s;
  TimingStats stats;
  stats.runs = static_cast<int>(samples_ms.size());
  std::vector<double> sorted = samples_ms;
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  stats.min_ms = sorted.front();
  stats.max_ms = sorted.back();
  stats.median_ms = Percentile(sorted, 0.5);
  stats.p10_ms = Percentile(sorted, 0.1);
  stats.p90_ms = Percentile(sorted, 0.9);
  stats.mean_ms = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  if (sorted.size() > 1) {
    double ss = 0;
    for (double s : sorted) ss += (s - stats.mean_ms) * (s - stats.mean_ms);
    stats.stddev_ms = std::sqrt(ss / (n - 1));
  }
  stats.samples_ms = std::move(samples_ms);
  return stats;
}

absl::StatusOr<TimingStats> TimeRepeated(const std::function<absl::StatusOr<double>()>& run_once,
                                         const TimingOptions& options) {
  if (options.min_runs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing min_runs must be at least 1, got ", options.min_runs));
  }
  if (options.max_runs < options.min_runs) {
    return absl::InvalidArgumentError(absl::StrCat("timing max_runs ", options.max_runs,
                                                   " is below min_runs ", options.min_runs));
  }
  if (options.warmup_runs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing warmup_runs must not be negative, got ", options.warmup_runs));
  }
  if (!(options.min_total_ms >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing min_total_ms must not be negative, got ", options.min_total_ms));
  }
  if (!(options.max_wall_ms >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing max_wall_ms must not be negative, got ", options.max_wall_ms));
  }
  if (!(options.soak_ms >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing soak_ms must not be negative, got ", options.soak_ms));
  }
  const auto warmup_start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.warmup_runs; ++i) {
    absl::StatusOr<double> ms = run_once();
    if (!ms.ok()) return ms.status();
  }
  while (options.soak_ms > 0 &&
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warmup_start)
                 .count() < options.soak_ms) {
    absl::StatusOr<double> ms = run_once();
    if (!ms.ok()) return ms.status();
  }
  std::vector<double> samples;
  double total = 0;
  const auto start = std::chrono::steady_clock::now();
  auto wall_left = [&] {
    return options.max_wall_ms == 0 ||
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                   .count() < options.max_wall_ms;
  };
  while (static_cast<int>(samples.size()) < options.max_runs &&
         (static_cast<int>(samples.size()) < options.min_runs ||
          (total < options.min_total_ms && wall_left()))) {
    absl::StatusOr<double> ms = run_once();
    if (!ms.ok()) return ms.status();
    if (!std::isfinite(*ms) || *ms < 0) {
      return absl::InternalError(absl::StrCat("timed run returned ", *ms, " ms"));
    }
    samples.push_back(*ms);
    total += *ms;
  }
  TimingStats stats = Summarize(std::move(samples));
  stats.soak_ms = options.soak_ms;
  return stats;
}

}  // namespace tilesearch::runtime
