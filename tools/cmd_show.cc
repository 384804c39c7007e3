// `tilesearch show`: builds one operator from command-line arguments and prints its ComputeDAG and
// naive loop nest.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/compute_dag.h"
#include "ir/lower_naive.h"
#include "ir/ops/registry.h"
#include "ir/simplify.h"
#include "ir/stmt.h"
#include "ir/type.h"
#include "tools/commands.h"

namespace tilesearch::tools {
namespace {

struct ShowOptions {
  std::string op;
  std::vector<std::string> shapes;
  std::vector<std::string> attrs;
  std::string dtype = "float32";
};

absl::StatusOr<ir::OpArgs> ParseArgs(const ShowOptions& options) {
  ir::OpArgs args;
  for (const std::string& text : options.shapes) {
    absl::StatusOr<std::vector<int64_t>> shape = ir::ParseShape(text);
    if (!shape.ok()) return shape.status();
    args.shapes.push_back(*std::move(shape));
  }
  for (const std::string& text : options.attrs) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", text, "' is not of the form name=value"));
    }
    std::string name = text.substr(0, eq);
    if (!args.attrs.emplace(name, text.substr(eq + 1)).second) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' given twice"));
    }
  }
  ASSIGN_OR_RETURN(args.dtype, ir::ParseType(options.dtype));
  return args;
}

absl::Status Show(const ShowOptions& options) {
  ASSIGN_OR_RETURN(ir::OpArgs args, ParseArgs(options));
  ASSIGN_OR_RETURN(ir::ComputeDAG dag, ir::BuildOp(options.op, args));
  ASSIGN_OR_RETURN(ir::LoopNest nest, ir::LowerNaive(dag));
  nest.body = ir::Simplify(nest.body);
  std::cout << dag.ToString() << "\n" << ir::ToString(nest) << "\n";
  return absl::OkStatus();
}

}  // namespace

CommandAction AddShowCommand(CLI::App& app) {
  auto options = std::make_shared<ShowOptions>();
  app.add_option("--op", options->op, "operator name (see 'tilesearch ops')")->required();
  app.add_option("--shape", options->shapes,
                 "input shape, e.g. 1x64x56x56 or 1,64,56,56; once per input, in order");
  app.add_option("--attr", options->attrs, "operator attribute name=value, e.g. padding=1");
  app.add_option("--dtype", options->dtype, "element type: float32, float16, bfloat16, ...")
      ->capture_default_str();
  return [options]() { return Show(*options); };
}

}  // namespace tilesearch::tools
