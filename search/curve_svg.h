// Tuning-curve plots: best-so-far throughput against trials as a standalone SVG file, one polyline
// per series (a (workload, target) of a log, or a whole log when several logs are compared, e.g.
// an XGBoost run and a RandomModel run of one task), with axes, "nice" ticks (1, 2, 5 × 10^k),
// tick labels, axis titles and a legend. A small writer of its own: no plotting dependency.
//
// Geometry (PlotOptions): the plot area is the rectangle [margin_left, width − margin_right] ×
// [margin_top, height − margin_bottom]. The x axis runs linearly from 0 at the left edge to x_max
// at the right edge, the y axis from 0 at the bottom edge to y_max at the top edge, where
// (x_max, x step) and (y_max, y step) are AxisFor the largest x and y of all series. Each tick is a
// <line class="tick-x|tick-y"> on the axis and a <text class="tick-x| tick-y"> label whose anchor
// position (x for tick-x, y for tick-y) is the tick's coordinate. Each series is one <polyline
// class="series" points="x1,y1 x2,y2 ..."> (coordinates with 2 decimals), in series order, with a
// matching legend entry; a series without points draws only its legend entry. Text is XML-escaped.
// The image grows wider than `width` when the legend's longest label needs more than margin_right
// (about 7 px per character); the plot area does not change.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tilesearch::search {

/// One polyline: (x, y) points drawn in the given order; `label` names it in the legend.
struct CurveSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // x: trials, y: throughput (finite, ≥ 0)
};

struct PlotOptions {
  std::string title = "tuning curve";
  std::string x_label = "trials";
  std::string y_label = "best throughput so far";
  int width = 800;   // px
  int height = 480;  // px
  int margin_left = 80;
  int margin_right = 220;  // room for the legend
  int margin_top = 40;
  int margin_bottom = 60;
};

/// The smallest value v = m · 10^e ≥ x with m ∈ {1, 2, 5, 10} (x > 0); 1 for x ≤ 0 or non-finite.
double NiceCeiling(double x);

/// An axis from 0 to `max` with ticks every `step`.
struct AxisRange {
  double max = 1;
  double step = 0.2;
};

/// The axis for data up to `data_max`: step = NiceCeiling(data_max / 5) (a 1-2-5 value), max =
/// the smallest multiple of step ≥ data_max (2 to 5 intervals). Data ≤ 0 or non-finite: 0 to 1
/// in steps of 0.2. E.g. 128 → 0..150 by 50, 25500 → 0..30000 by 10000, 7 → 0..8 by 2.
AxisRange AxisFor(double data_max);

/// Tick values 0, step, 2·step, ..., max of `axis`.
std::vector<double> AxisTicks(const AxisRange& axis);

/// The SVG document (a complete file, starting with "<?xml" and ending with "</svg>\n").
/// Errors: kInvalidArgument for a non-finite or negative coordinate ("series 'a' point 3: y -1
/// is not a finite number >= 0") or a plot area of non-positive size.
absl::StatusOr<std::string> CurveSvg(const std::vector<CurveSeries>& series,
                                     const PlotOptions& options = {});

/// XML text escaping of &, <, >, " and '.
std::string XmlEscape(const std::string& text);

}  // namespace tilesearch::search
