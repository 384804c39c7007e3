// The operator library as data: every operator's name, parameters and a builder from generic
// arguments (input shapes, dtype, attributes) to a ComputeDAG. Used by the CLI (`tilesearch ops`,
// `tilesearch show --op`), by schedule files and by benchmark suites to name workloads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/compute_dag.h"
#include "ir/type.h"

namespace tilesearch::ir {

/// Generic operator arguments: one shape per input tensor, the element dtype, and attributes as
/// strings (parsed by each operator: "stride=2", "axes=1,2", "transpose_b=true").
struct OpArgs {
  std::vector<std::vector<int64_t>> shapes;
  ScalarType dtype = ScalarType::kFloat32;
  std::map<std::string, std::string> attrs;
};

struct OpAttrInfo {
  std::string name;
  std::string default_value;  // as text; "" when required
  std::string doc;
};

struct OpInfo {
  std::string name;                 // "conv2d_nchw"
  std::string summary;              // one line
  std::vector<std::string> inputs;  // e.g. {"X[N,C,H,W]", "W[K,C/groups,R,S]"}
  std::vector<OpAttrInfo> attrs;
  std::function<absl::StatusOr<ComputeDAG>(const OpArgs&)> build;
};

/// All operators, sorted by name.
const std::vector<OpInfo>& OpLibrary();

/// Errors: kNotFound "unknown operator 'x'" listing near names.
absl::StatusOr<const OpInfo*> FindOp(const std::string& name);

/// Builds an operator from generic arguments. Errors (kInvalidArgument, naming the operator and the
/// argument): unknown operator, wrong number of input shapes, unknown attribute, unparsable
/// attribute value, and every error of the operator itself.
absl::StatusOr<ComputeDAG> BuildOp(const std::string& name, const OpArgs& args);

/// Parses "64x128x3" or "64,128,3" into extents. Errors: empty, non-integer or < 1 extents.
absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& text);

}  // namespace tilesearch::ir
