// Attribute readers shared by every operator family's OpInfo::build.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/status.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir::ops_internal {
namespace {

/// The attribute's text when present, nullptr otherwise.
const std::string* FindAttr(const OpArgs& args, const std::string& name) {
  auto it = args.attrs.find(name);
  return it == args.attrs.end() ? nullptr : &it->second;
}

absl::Status BadValue(const std::string& op, const std::string& name, const std::string& value,
                      const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("attribute '", name, "' of ", op, ": '", value, "' is not ", what));
}

bool ParseInt(const std::string& text, int64_t* out) {
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), out);
}

/// Integer attributes (strides, paddings, dilations, kernels, groups, axes) must lie in
/// [-(2^31 - 1), 2^31 - 1] so that window arithmetic on them cannot overflow int64.
constexpr int64_t kMaxIntAttr = (int64_t{1} << 31) - 1;

absl::Status CheckIntRange(const std::string& op, const std::string& name, int64_t value) {
  if (value > kMaxIntAttr || value < -kMaxIntAttr) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' of ", op, ": ", value,
                                                   " is out of range [", -kMaxIntAttr, ", ",
                                                   kMaxIntAttr, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> IntAttr(const OpArgs& args, const std::string& op, const std::string& name,
                                int64_t default_value) {
  const std::string* text = FindAttr(args, name);
  if (text == nullptr) return default_value;
  int64_t value = 0;
  if (!ParseInt(*text, &value)) return BadValue(op, name, *text, "an integer");
  RETURN_IF_ERROR(CheckIntRange(op, name, value));
  return value;
}

absl::StatusOr<double> FloatAttr(const OpArgs& args, const std::string& op, const std::string& name,
                                 double default_value) {
  const std::string* text = FindAttr(args, name);
  if (text == nullptr) return default_value;
  double value = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(*text), &value) || !std::isfinite(value)) {
    return BadValue(op, name, *text, "a finite number");
  }
  return value;
}

absl::StatusOr<bool> BoolAttr(const OpArgs& args, const std::string& op, const std::string& name,
                              bool default_value) {
  const std::string* text = FindAttr(args, name);
  if (text == nullptr) return default_value;
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(*text));
  if (lower == "true" || lower == "1") return true;
  if (lower == "false" || lower == "0") return false;
  return BadValue(op, name, *text, "a boolean (true/false/1/0)");
}

absl::StatusOr<std::string> StringAttr(const OpArgs& args, const std::string& op,
                                       const std::string& name, const std::string& default_value) {
  (void)op;
  const std::string* text = FindAttr(args, name);
  if (text == nullptr) return default_value;
  return std::string(absl::StripAsciiWhitespace(*text));
}

absl::StatusOr<std::vector<int64_t>> IntListAttr(const OpArgs& args, const std::string& op,
                                                 const std::string& name,
                                                 const std::vector<int64_t>& default_value) {
  const std::string* text = FindAttr(args, name);
  if (text == nullptr) return default_value;
  std::vector<int64_t> values;
  if (absl::StripAsciiWhitespace(*text).empty()) return values;
  for (absl::string_view piece : absl::StrSplit(*text, ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(piece), &value)) {
      return BadValue(op, name, *text, "a comma-separated list of integers");
    }
    RETURN_IF_ERROR(CheckIntRange(op, name, value));
    values.push_back(value);
  }
  return values;
}

absl::Status ExpectInputs(const OpArgs& args, const std::string& op, size_t n) {
  if (args.shapes.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expected ", n, " input shape", n == 1 ? "" : "s", ", got ", args.shapes.size()));
  }
  return absl::OkStatus();
}

}  // namespace tilesearch::ir::ops_internal
