// The operator library: gathers every family's OpInfo entries, looks them up by name and builds
// them from generic arguments after checking the arguments every operator shares.
#include "ir/ops/registry.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/status.h"
#include "ir/ops/registry_internal.h"

namespace tilesearch::ir {
namespace {

std::vector<OpInfo> GatherOps() {
  std::vector<OpInfo> ops;
  ops_internal::AppendLinearOps(ops);
  ops_internal::AppendConvOps(ops);
  ops_internal::AppendPoolOps(ops);
  ops_internal::AppendFusedOps(ops);
  ops_internal::AppendReduceOps(ops);
  ops_internal::AppendNormOps(ops);
  ops_internal::AppendElementwiseOps(ops);
  ops_internal::AppendLayoutOps(ops);
  std::sort(ops.begin(), ops.end(),
            [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
  for (size_t i = 1; i < ops.size(); ++i) {
    CHECK(ops[i - 1].name != ops[i].name) << "operator '" << ops[i].name << "' registered twice";
  }
  return ops;
}

/// Levenshtein distance, for suggesting near names.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// An input whose description says it is optional: "(optional ...)" or "(only with ...)".
bool IsOptionalInput(const std::string& description) {
  return description.find("(optional") != std::string::npos ||
         description.find("(only with") != std::string::npos;
}

}  // namespace

const std::vector<OpInfo>& OpLibrary() {
  static const std::vector<OpInfo>* const library = new std::vector<OpInfo>(GatherOps());
  return *library;
}

absl::StatusOr<const OpInfo*> FindOp(const std::string& name) {
  const std::vector<OpInfo>& ops = OpLibrary();
  auto it = std::lower_bound(ops.begin(), ops.end(), name,
                             [](const OpInfo& op, const std::string& n) { return op.name < n; });
  if (it != ops.end() && it->name == name) return &*it;

  // Near names: small edit distance, or one name containing the other.
  std::vector<std::string> near;
  const size_t max_distance = std::max<size_t>(2, name.size() / 4);
  for (const OpInfo& op : ops) {
    bool contains = name.size() >= 3 && (op.name.find(name) != std::string::npos ||
                                         name.find(op.name) != std::string::npos);
    if (contains || EditDistance(name, op.name) <= max_distance) near.push_back(op.name);
  }
  std::string message = absl::StrCat("unknown operator '", name, "'");
  if (!near.empty()) {
    absl::StrAppend(&message, " (did you mean ", absl::StrJoin(near, ", "), "?)");
  } else {
    absl::StrAppend(&message, " (run 'tilesearch ops' to list operators)");
  }
  return absl::NotFoundError(message);
}

absl::StatusOr<ComputeDAG> BuildOp(const std::string& name, const OpArgs& args) {
  absl::StatusOr<const OpInfo*> found = FindOp(name);
  if (!found.ok()) return absl::InvalidArgumentError(found.status().message());
  const OpInfo& op = **found;

  // Inputs documented as optional ("b[N] (only with bias=true)") may be left out; the operator's
  // build checks the exact count its attributes call for.
  size_t required = 0;
  for (const std::string& input : op.inputs) {
    if (!IsOptionalInput(input)) ++required;
  }
  if (required == op.inputs.size()) {
    RETURN_IF_ERROR(ops_internal::ExpectInputs(args, op.name, op.inputs.size()));
  } else if (args.shapes.size() < required || args.shapes.size() > op.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op.name, ": expected ", required, " to ",
                                                   op.inputs.size(), " input shapes, got ",
                                                   args.shapes.size()));
  }
  for (const auto& [attr, value] : args.attrs) {
    bool known = std::any_of(op.attrs.begin(), op.attrs.end(),
                             [&](const OpAttrInfo& info) { return info.name == attr; });
    if (known) continue;
    std::vector<std::string> valid;
    for (const OpAttrInfo& info : op.attrs) valid.push_back(info.name);
    return absl::InvalidArgumentError(absl::StrCat(
        op.name, ": unknown attribute '", attr,
        "' (valid: ", valid.empty() ? std::string("none") : absl::StrJoin(valid, ", "), ")"));
  }
  return op.build(args);
}

absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& text) {
  absl::string_view stripped = absl::StripAsciiWhitespace(text);
  if (stripped.empty()) return absl::InvalidArgumentError("empty shape");
  const bool has_x = stripped.find('x') != absl::string_view::npos ||
                     stripped.find('X') != absl::string_view::npos;
  const bool has_comma = stripped.find(',') != absl::string_view::npos;
  if (has_x && has_comma) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape '", text, "' mixes 'x' and ',' separators"));
  }
  std::vector<absl::string_view> pieces = absl::StrSplit(stripped, absl::ByAnyChar(",xX"));
  std::vector<int64_t> shape;
  for (absl::string_view piece : pieces) {
    absl::string_view digits = absl::StripAsciiWhitespace(piece);
    int64_t extent = 0;
    if (digits.empty() || !absl::SimpleAtoi(digits, &extent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape '", text, "': '", std::string(digits), "' is not an integer extent"));
    }
    if (extent < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape '", text, "': extent ", extent, " is not positive"));
    }
    shape.push_back(extent);
  }
  return shape;
}

}  // namespace tilesearch::ir
