// Tuning-curve plots as SVG: axes with nice ticks, one polyline per series, a legend.
#include "search/curve_svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tilesearch::search {
namespace {

// Distinct colors for up to 8 series (Okabe–Ito, color-blind safe); more series cycle.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                   "#E69F00", "#56B4E9", "#000000", "#F0E442"};

std::string Num(double v) { return absl::StrFormat("%.2f", v); }

// A tick label: up to 6 significant digits, no trailing zeros ("0.6", "250", "1e+06").
std::string TickLabel(double v) {
  if (std::fabs(v) < 1e-12) return "0";
  return absl::StrFormat("%.6g", v);
}

}  // namespace

double NiceCeiling(double x) {
  if (!std::isfinite(x) || x <= 0) return 1;
  const double e = std::floor(std::log10(x));
  const double base = std::pow(10.0, e);
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    // A relative slack so that x = 2·10^e computed with rounding error stays 2·10^e.
    if (m * base >= x * (1 - 1e-12)) return m * base;
  }
  return 10 * base;
}

AxisRange AxisFor(double data_max) {
  if (!std::isfinite(data_max) || data_max <= 0) return {};
  AxisRange axis;
  axis.step = NiceCeiling(data_max / 5);
  // A relative slack so that data_max = k·step computed with rounding error stays k intervals.
  const double intervals = std::max(1.0, std::ceil(data_max / axis.step * (1 - 1e-12)));
  axis.max = intervals * axis.step;
  return axis;
}

std::vector<double> AxisTicks(const AxisRange& axis) {
  const int intervals = static_cast<int>(std::lround(axis.max / axis.step));
  std::vector<double> ticks;
  for (int i = 0; i <= intervals; ++i) ticks.push_back(axis.step * i);
  return ticks;
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

absl::StatusOr<std::string> CurveSvg(const std::vector<CurveSeries>& series,
                                     const PlotOptions& options) {
  // The legend needs about 7 px per character after its 46 px line sample: wider labels widen
  // the image, not squeeze the plot.
  size_t longest = 0;
  for (const CurveSeries& s : series) longest = std::max(longest, s.label.size());
  const int legend_width = 56 + 7 * static_cast<int>(longest);
  const int width = options.width + std::max(0, legend_width - options.margin_right);
  const double left = options.margin_left;
  const double right = options.width - options.margin_right;
  const double top = options.margin_top;
  const double bottom = options.height - options.margin_bottom;
  if (!(right > left) || !(bottom > top)) {
    return absl::InvalidArgumentError(
        absl::StrCat("plot area is empty: width ", options.width, " height ", options.height,
                     " margins ", options.margin_left, "/", options.margin_right, "/",
                     options.margin_top, "/", options.margin_bottom));
  }
  double x_data = 0, y_data = 0;
  for (const CurveSeries& s : series) {
    for (size_t i = 0; i < s.points.size(); ++i) {
      const auto [x, y] = s.points[i];
      for (const auto& [name, v] : {std::pair<const char*, double>{"x", x}, {"y", y}}) {
        if (!std::isfinite(v) || v < 0) {
          return absl::InvalidArgumentError(absl::StrCat("series '", s.label, "' point ", i, ": ",
                                                         name, " ", v,
                                                         " is not a finite number >= 0"));
        }
      }
      x_data = std::max(x_data, x);
      y_data = std::max(y_data, y);
    }
  }
  const AxisRange x_axis = AxisFor(x_data);
  const AxisRange y_axis = AxisFor(y_data);
  auto px = [&](double x) { return left + (right - left) * x / x_axis.max; };
  auto py = [&](double y) { return bottom - (bottom - top) * y / y_axis.max; };

  std::string svg = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width, "\" height=\"", options.height,
      "\" viewBox=\"0 0 ", width, " ", options.height,
      "\" font-family=\"sans-serif\" font-size=\"12\">\n", "<rect x=\"0\" y=\"0\" width=\"", width,
      "\" height=\"", options.height, "\" fill=\"white\"/>\n");
  absl::StrAppend(&svg, "<text class=\"title\" x=\"", Num((left + right) / 2), "\" y=\"",
                  Num(top / 2 + 6), "\" text-anchor=\"middle\" font-size=\"15\">",
                  XmlEscape(options.title), "</text>\n");
  // Grid lines and ticks.
  for (double t : AxisTicks(x_axis)) {
    const double x = px(t);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(x), "\" y1=\"", Num(top), "\" x2=\"",
                    Num(x), "\" y2=\"", Num(bottom), "\" stroke=\"#e0e0e0\"/>\n");
    absl::StrAppend(&svg, "<line class=\"tick-x\" x1=\"", Num(x), "\" y1=\"", Num(bottom),
                    "\" x2=\"", Num(x), "\" y2=\"", Num(bottom + 5), "\" stroke=\"black\"/>\n");
    absl::StrAppend(&svg, "<text class=\"tick-x\" x=\"", Num(x), "\" y=\"", Num(bottom + 18),
                    "\" text-anchor=\"middle\">", TickLabel(t), "</text>\n");
  }
  for (double t : AxisTicks(y_axis)) {
    const double y = py(t);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(left), "\" y1=\"", Num(y), "\" x2=\"",
                    Num(right), "\" y2=\"", Num(y), "\" stroke=\"#e0e0e0\"/>\n");
    absl::StrAppend(&svg, "<line class=\"tick-y\" x1=\"", Num(left - 5), "\" y1=\"", Num(y),
                    "\" x2=\"", Num(left), "\" y2=\"", Num(y), "\" stroke=\"black\"/>\n");
    absl::StrAppend(&svg, "<text class=\"tick-y\" x=\"", Num(left - 8), "\" y=\"", Num(y),
                    "\" text-anchor=\"end\" dominant-baseline=\"middle\">", TickLabel(t),
                    "</text>\n");
  }
  // Axes.
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Num(left), "\" y1=\"", Num(bottom),
                  "\" x2=\"", Num(right), "\" y2=\"", Num(bottom), "\" stroke=\"black\"/>\n");
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Num(left), "\" y1=\"", Num(top), "\" x2=\"",
                  Num(left), "\" y2=\"", Num(bottom), "\" stroke=\"black\"/>\n");
  absl::StrAppend(&svg, "<text class=\"x-label\" x=\"", Num((left + right) / 2), "\" y=\"",
                  Num(bottom + 42), "\" text-anchor=\"middle\">", XmlEscape(options.x_label),
                  "</text>\n");
  const double y_mid = (top + bottom) / 2;
  absl::StrAppend(&svg, "<text class=\"y-label\" x=\"18\" y=\"", Num(y_mid),
                  "\" text-anchor=\"middle\" transform=\"rotate(-90 18 ", Num(y_mid), ")\">",
                  XmlEscape(options.y_label), "</text>\n");
  // Series and legend.
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    const CurveSeries& s = series[i];
    if (!s.points.empty()) {
      std::string points;
      for (const auto& [x, y] : s.points) {
        if (!points.empty()) points += ' ';
        absl::StrAppend(&points, Num(px(x)), ",", Num(py(y)));
      }
      absl::StrAppend(&svg, "<polyline class=\"series\" fill=\"none\" stroke=\"", color,
                      "\" stroke-width=\"2\" points=\"", points, "\"><title>", XmlEscape(s.label),
                      "</title></polyline>\n");
    }
    const double ly = top + 10 + 20.0 * static_cast<double>(i);
    absl::StrAppend(&svg, "<line class=\"legend\" x1=\"", Num(right + 15), "\" y1=\"", Num(ly),
                    "\" x2=\"", Num(right + 40), "\" y2=\"", Num(ly), "\" stroke=\"", color,
                    "\" stroke-width=\"2\"/>\n");
    absl::StrAppend(&svg, "<text class=\"legend\" x=\"", Num(right + 46), "\" y=\"", Num(ly),
                    "\" dominant-baseline=\"middle\">", XmlEscape(s.label), "</text>\n");
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace tilesearch::search
