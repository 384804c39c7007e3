// `tilesearch ops [NAME]`: lists the operator library.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/ops/registry.h"
#include "tools/commands.h"

namespace tilesearch::tools {
namespace {

std::string AttrSummary(const ir::OpAttrInfo& attr) {
  return attr.default_value.empty() ? absl::StrCat(attr.name, " (required)")
                                    : absl::StrCat(attr.name, "=", attr.default_value);
}

void PrintTable() {
  const std::vector<ir::OpInfo>& ops = ir::OpLibrary();
  size_t width = 0;
  for (const ir::OpInfo& op : ops) width = std::max(width, op.name.size());
  width += 2;
  const std::string indent(width, ' ');
  std::cout << ops.size() << " operators (tilesearch ops NAME for details)\n\n";
  for (const ir::OpInfo& op : ops) {
    std::cout << op.name << std::string(width - op.name.size(), ' ') << op.summary << "\n";
    std::cout << indent << "inputs: " << absl::StrJoin(op.inputs, ", ") << "\n";
    if (!op.attrs.empty()) {
      std::vector<std::string> attrs;
      for (const ir::OpAttrInfo& attr : op.attrs) attrs.push_back(AttrSummary(attr));
      std::cout << indent << "attrs:  " << absl::StrJoin(attrs, ", ") << "\n";
    }
  }
}

absl::Status PrintOne(const std::string& name) {
  ASSIGN_OR_RETURN(const ir::OpInfo* op, ir::FindOp(name));
  std::cout << op->name << ": " << op->summary << "\n\ninputs:\n";
  for (const std::string& input : op->inputs) std::cout << "  " << input << "\n";
  std::cout << "\nattributes:\n";
  if (op->attrs.empty()) std::cout << "  (none)\n";
  std::vector<std::string> usages;
  size_t width = 0;
  for (const ir::OpAttrInfo& attr : op->attrs) {
    usages.push_back(absl::StrCat("--attr ", attr.name, "=",
                                  attr.default_value.empty() ? "<value>" : attr.default_value));
    width = std::max(width, usages.back().size());
  }
  for (size_t i = 0; i < usages.size(); ++i) {
    std::cout << "  " << usages[i] << std::string(width + 2 - usages[i].size(), ' ')
              << op->attrs[i].doc << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

CommandAction AddOpsCommand(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  app.add_option("name", *name, "show one operator with its attribute docs");
  return [name]() -> absl::Status {
    if (name->empty()) {
      PrintTable();
      return absl::OkStatus();
    }
    return PrintOne(*name);
  };
}

}  // namespace tilesearch::tools
