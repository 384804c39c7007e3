// Number formatting shared by the CLI's reports.
#pragma once

#include <iomanip>
#include <sstream>
#include <string>

namespace tilesearch::tools {

/// `value` with exactly `digits` digits after the point: Fixed(0.41234, 3) == "0.412".
inline std::string Fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

/// `value` with 3 significant digits, exponent when needed: Sci(0.000123456) == "0.000123".
inline std::string Sci(double value) {
  std::ostringstream out;
  out << std::setprecision(3) << value;
  return out.str();
}

}  // namespace tilesearch::tools
