// Subcommands of the tilesearch CLI. Each Add*Command registers its options on a CLI11 app and
// returns the action to run after parsing; actions print to stdout and report user errors as a
// Status (main prints "tilesearch: error: <message>" and exits 2).
#pragma once

#include <functional>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace tilesearch::tools {

using CommandAction = std::function<absl::Status()>;

/// `tilesearch ops [NAME]`: the operator library as a table (name, summary, inputs, attributes
/// with defaults), or one operator in detail with attribute docs.
CommandAction AddOpsCommand(CLI::App& app);

/// `tilesearch show --op NAME --shape 1x64x56x56 [--shape ...] [--attr k=v ...] [--dtype T]`:
/// the ComputeDAG (stages, FLOPs, workload key) and its naive loop nest, simplified.
CommandAction AddShowCommand(CLI::App& app);

}  // namespace tilesearch::tools
