// Tuning-curve SVG: the document is well-formed XML (checked by a small independent parser
// below), every polyline point equals its curve value mapped through the axes as the tick marks
// define them (a linear map fitted from the first and last tick labels and positions), labels are
// escaped, nice axis bounds and ticks are the expected 1-2-5 values, and bad input is an error.
#include "search/curve_svg.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::search {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tilesearch::testing::StatusIs;

// One element of the parsed document.
struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // character data directly inside, entities decoded
};

std::string Decode(const std::string& s, bool* ok) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') *ok = false;
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string::npos) {
      *ok = false;
      return out;
    }
    const std::string entity = s.substr(i + 1, semi - i - 1);
    static const std::map<std::string, char> kEntities = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    auto it = kEntities.find(entity);
    if (it == kEntities.end()) {
      *ok = false;
    } else {
      out += it->second;
    }
    i = semi;
  }
  return out;
}

// A minimal XML parser: an optional <?xml ...?> declaration, then one root element; tags must nest,
// attribute values must be quoted and unique, text and attribute values may only use the five
// predefined entities. Returns false on any violation; `elements` in document order.
bool ParseXml(const std::string& doc, std::vector<Element>* elements) {
  size_t i = 0;
  if (doc.rfind("<?xml", 0) == 0) {
    i = doc.find("?>");
    if (i == std::string::npos) return false;
    i += 2;
  }
  std::vector<size_t> open;  // indices into elements
  bool seen_root = false;
  bool ok = true;
  while (i < doc.size()) {
    const size_t lt = doc.find('<', i);
    const std::string text = doc.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (!open.empty()) {
      (*elements)[open.back()].text += Decode(text, &ok);
    } else if (text.find_first_not_of(" \n\t\r") != std::string::npos) {
      return false;  // text outside the root
    }
    if (lt == std::string::npos) break;
    const size_t gt = doc.find('>', lt);
    if (gt == std::string::npos) return false;
    std::string tag = doc.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (!tag.empty() && tag[0] == '/') {
      if (open.empty() || (*elements)[open.back()].name != tag.substr(1)) return false;
      open.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    Element e;
    size_t p = 0;
    while (p < tag.size() && !std::isspace(static_cast<unsigned char>(tag[p]))) ++p;
    e.name = tag.substr(0, p);
    if (e.name.empty()) return false;
    while (true) {
      while (p < tag.size() && std::isspace(static_cast<unsigned char>(tag[p]))) ++p;
      if (p >= tag.size()) break;
      const size_t eq = tag.find('=', p);
      if (eq == std::string::npos || eq + 1 >= tag.size()) return false;
      const std::string key = tag.substr(p, eq - p);
      const char quote = tag[eq + 1];
      if (quote != '"' && quote != '\'') return false;
      const size_t end = tag.find(quote, eq + 2);
      if (end == std::string::npos) return false;
      if (!e.attrs.emplace(key, Decode(tag.substr(eq + 2, end - eq - 2), &ok)).second) return false;
      p = end + 1;
    }
    if (open.empty()) {
      if (seen_root) return false;
      seen_root = true;
    }
    elements->push_back(e);
    if (!self_closing) open.push_back(elements->size() - 1);
  }
  return ok && seen_root && open.empty();
}

// A linear map fitted through (value, position) of the first and last tick of a class.
struct Axis {
  double v0 = 0, p0 = 0, v1 = 0, p1 = 0;
  double Map(double v) const { return p0 + (v - v0) * (p1 - p0) / (v1 - v0); }
};

Axis AxisFromTicks(const std::vector<Element>& elements, const std::string& cls,
                   const std::string& coordinate) {
  std::vector<std::pair<double, double>> ticks;  // (label value, position)
  for (const Element& e : elements) {
    if (e.name == "text" && e.attrs.count("class") && e.attrs.at("class") == cls) {
      ticks.emplace_back(std::strtod(e.text.c_str(), nullptr),
                         std::strtod(e.attrs.at(coordinate).c_str(), nullptr));
    }
  }
  EXPECT_GE(ticks.size(), 2u) << cls;
  if (ticks.size() < 2) return {};
  return {ticks.front().first, ticks.front().second, ticks.back().first, ticks.back().second};
}

std::vector<std::pair<double, double>> ParsePoints(const std::string& text) {
  std::vector<std::pair<double, double>> points;
  const char* p = text.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    const double x = std::strtod(p, &end);
    if (end == p || *end != ',') {
      ADD_FAILURE() << "bad points text: " << text;
      return points;
    }
    p = end + 1;
    const double y = std::strtod(p, &end);
    points.emplace_back(x, y);
    p = end;
    while (*p == ' ') ++p;
  }
  return points;
}

std::vector<const Element*> Polylines(const std::vector<Element>& elements) {
  std::vector<const Element*> out;
  for (const Element& e : elements)
    if (e.name == "polyline") out.push_back(&e);
  return out;
}

TEST(CurveSvgTest, PolylinePointsAreTheCurveMappedThroughTheAxes) {
  // Best-so-far GFLOP/s of two runs (step curves as `inspect` builds them).
  CurveSeries xgb{"xgb.jsonl", {{1, 10}, {2, 10}, {3, 42.5}, {4, 42.5}, {5, 97}, {6, 130}}};
  CurveSeries random{"random.jsonl", {{2, 5}, {3, 5}, {4, 20}, {5, 20}, {6, 61.25}, {7, 61.25}}};
  absl::StatusOr<std::string> svg = CurveSvg({xgb, random});
  ASSERT_TRUE(svg.ok()) << svg.status();
  std::vector<Element> elements;
  ASSERT_TRUE(ParseXml(*svg, &elements)) << *svg;
  ASSERT_FALSE(elements.empty());
  EXPECT_EQ(elements[0].name, "svg");

  const Axis x = AxisFromTicks(elements, "tick-x", "x");
  const Axis y = AxisFromTicks(elements, "tick-y", "y");
  // Axis bounds by hand: x data up to 7 → steps of 2 (7/5 = 1.4 → 2) up to 8; y data up to 130 →
  // steps of 50 (26 → 50) up to 150; both start at 0.
  EXPECT_EQ(x.v0, 0);
  EXPECT_EQ(x.v1, 8);
  EXPECT_EQ(y.v0, 0);
  EXPECT_EQ(y.v1, 150);
  EXPECT_GT(x.p1, x.p0);  // x grows rightwards
  EXPECT_LT(y.p1, y.p0);  // y grows upwards

  const std::vector<const Element*> lines = Polylines(elements);
  ASSERT_EQ(lines.size(), 2u);
  const std::vector<CurveSeries> series = {xgb, random};
  for (size_t s = 0; s < series.size(); ++s) {
    SCOPED_TRACE(series[s].label);
    // Its <title> child (the next element in document order) names it.
    const size_t index = static_cast<size_t>(lines[s] - elements.data());
    ASSERT_LT(index + 1, elements.size());
    EXPECT_EQ(elements[index + 1].name, "title");
    EXPECT_EQ(elements[index + 1].text, series[s].label);
    const auto points = ParsePoints(lines[s]->attrs.at("points"));
    ASSERT_EQ(points.size(), series[s].points.size());
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_NEAR(points[i].first, x.Map(series[s].points[i].first), 0.01) << i;
      EXPECT_NEAR(points[i].second, y.Map(series[s].points[i].second), 0.01) << i;
    }
  }
  // A legend entry per series, in order.
  std::vector<std::string> legend;
  for (const Element& e : elements) {
    if (e.name == "text" && e.attrs.at("class") == "legend") legend.push_back(e.text);
  }
  EXPECT_THAT(legend, ElementsAre("xgb.jsonl", "random.jsonl"));
}

TEST(CurveSvgTest, TextIsEscapedAndEmptySeriesDrawOnlyALegend) {
  PlotOptions options;
  options.title = "matmul <512> & \"friends\"";
  options.y_label = "GB/s 'so far'";
  absl::StatusOr<std::string> svg =
      CurveSvg({{"a<b&c", {{1, 0.25}, {2, 0.5}}}, {"never valid", {}}}, options);
  ASSERT_TRUE(svg.ok()) << svg.status();
  std::vector<Element> elements;
  ASSERT_TRUE(ParseXml(*svg, &elements)) << *svg;
  EXPECT_THAT(*svg, HasSubstr("a&lt;b&amp;c"));
  std::map<std::string, std::string> texts;
  for (const Element& e : elements)
    if (e.name == "text" && e.attrs.count("class")) texts[e.attrs.at("class")] = e.text;
  EXPECT_EQ(texts["title"], "matmul <512> & \"friends\"");
  EXPECT_EQ(texts["y-label"], "GB/s 'so far'");
  EXPECT_EQ(Polylines(elements).size(), 1u);
  int legends = 0;
  for (const Element& e : elements) legends += e.name == "text" && e.attrs.at("class") == "legend";
  EXPECT_EQ(legends, 2);
  // y data up to 0.5 → steps of 0.1 up to 0.5; the 0.5 point sits on the top tick.
  const Axis y = AxisFromTicks(elements, "tick-y", "y");
  EXPECT_EQ(y.v1, 0.5);
  const auto points = ParsePoints(Polylines(elements)[0]->attrs.at("points"));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_NEAR(points[1].second, y.p1, 0.01);
}

TEST(CurveSvgTest, NothingToDrawStillMakesAnEmptyPlot) {
  absl::StatusOr<std::string> svg = CurveSvg({});
  ASSERT_TRUE(svg.ok()) << svg.status();
  std::vector<Element> elements;
  EXPECT_TRUE(ParseXml(*svg, &elements));
  EXPECT_TRUE(Polylines(elements).empty());
}

TEST(CurveSvgTest, NiceBoundsAndTicks) {
  EXPECT_EQ(NiceCeiling(0.3), 0.5);
  EXPECT_EQ(NiceCeiling(7), 10);
  EXPECT_EQ(NiceCeiling(10), 10);
  EXPECT_EQ(NiceCeiling(11), 20);
  EXPECT_EQ(NiceCeiling(2), 2);
  EXPECT_EQ(NiceCeiling(1234), 2000);
  EXPECT_EQ(NiceCeiling(25001), 50000);
  EXPECT_EQ(NiceCeiling(0), 1);
  EXPECT_EQ(NiceCeiling(-3), 1);
  // AxisFor by hand: step = 1-2-5 ceiling of max / 5, max = next multiple of the step.
  const AxisRange a128 = AxisFor(128);  // 25.6 → 50: 0..150
  EXPECT_EQ(a128.step, 50);
  EXPECT_EQ(a128.max, 150);
  EXPECT_THAT(AxisTicks(a128), ElementsAre(0, 50, 100, 150));
  const AxisRange a25k = AxisFor(25530);  // 5106 → 10000: 0..30000
  EXPECT_EQ(a25k.step, 10000);
  EXPECT_EQ(a25k.max, 30000);
  const AxisRange a10 = AxisFor(10);  // 2 → 2: exactly 5 intervals
  EXPECT_EQ(a10.max, 10);
  EXPECT_THAT(AxisTicks(a10), ElementsAre(0, 2, 4, 6, 8, 10));
  const AxisRange a3 = AxisFor(0.3);  // 0.06 → 0.1: 0..0.3
  EXPECT_DOUBLE_EQ(a3.step, 0.1);
  EXPECT_DOUBLE_EQ(a3.max, 0.3);
  const AxisRange empty = AxisFor(0);
  EXPECT_EQ(empty.max, 1);
  EXPECT_EQ(AxisTicks(empty).size(), 6u);
}

TEST(CurveSvgTest, RejectsBadPointsAndAnEmptyPlotArea) {
  EXPECT_THAT(CurveSvg({{"s", {{1, 2}, {2, -1}}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("series 's' point 1: y -1 is not a finite number >= 0")));
  EXPECT_THAT(CurveSvg({{"s", {{std::nan(""), 2}}}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("point 0: x nan")));
  PlotOptions tiny;
  tiny.width = 100;
  EXPECT_THAT(CurveSvg({}, tiny),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plot area is empty")));
}

}  // namespace
}  // namespace tilesearch::search
