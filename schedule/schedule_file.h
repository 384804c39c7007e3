// Schedule files: one self-describing JSON document that names a workload (operator, input shapes,
// dtype, attributes), a target and the transform steps of a schedule, so the file alone rebuilds
// the ComputeDAG, replays the State and lowers it (`tilesearch show|check --schedule FILE`).
//
// Format, version 1 (every field but "comment", "workload.dtype" and "workload.attrs" required;
// any other field is an error):
//
//   {
//     "version": 1,
//     "comment": "free text, kept on a round trip",
//     "workload": {"op": "matmul", "shapes": [[64, 64], [64, 64]], "dtype": "float32",
//                  "attrs": {"transpose_b": "false"}},
//     "target": "cuda -arch=sm_90",
//     "steps": [["CHW", 2, "local"], ["SP", 3, 0, 64, [2, 4, 2], 1], ...]
//   }
//
// "steps" is the bare step array of schedule/step_json.h: a version-1 schedule file holds steps in
// step-list format version 1 (the file's version covers both). Stage and iterator ids in the steps
// are positions in the state each step is applied to, as in tuning logs. "dtype" defaults to
// float32 and "attrs" to none; an attribute value is a string, or an integer or boolean that is
// read as its text ("padding": 1 means "padding": "1"). Floating-point attribute values must be
// written as strings so their text is exact.
//
// `Workload` is the reusable part (tuning logs and benchmark suites name workloads the same way):
// an operator of the library (ir/ops/registry.h) and its generic arguments, or a fused workload
// (op "fused", schedule/fused_workload.h): graph operators composed into one DAG, with a "nodes"
// field after "attrs":
//
//     "workload": {"op": "fused", "shapes": [[16, 32], [24, 32], [24]], "dtype": "float32",
//                  "attrs": {}, "nodes": [{"op": "dense", "inputs": ["p0", "p1"], "attrs": {}},
//                                         {"op": "add", "inputs": ["n0", "p2"], "attrs": {}},
//                                         {"op": "relu", "inputs": ["n1"], "attrs": {}}]}
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/target.h"
#include "ir/compute_dag.h"
#include "ir/ops/registry.h"
#include "nlohmann/json_fwd.hpp"
#include "schedule/fused_workload.h"
#include "schedule/state.h"
#include "schedule/step.h"

namespace tilesearch::schedule {

/// Version of the schedule file format this build writes and the newest it reads.
inline constexpr int kScheduleFileVersion = 1;

/// An operator of the library with its arguments: what `ir::BuildOp(op, args)` builds; or, when
/// `op` is kFusedWorkloadOp, a fused workload: `nodes` composed on placeholders of `args.shapes`
/// (all of `args.dtype`; `args.attrs` empty), schedule/fused_workload.h.
struct Workload {
  std::string op;   // operator name, e.g. "matmul", or "fused"
  ir::OpArgs args;  // input shapes in the operator's input order, dtype, attributes as text
  /// Fused workloads only: the operator nodes, the last one the output. Empty otherwise.
  std::vector<FusedNode> nodes;

  /// True when op is kFusedWorkloadOp.
  bool is_fused() const { return op == kFusedWorkloadOp; }
  /// Builds the DAG. Errors: those of ir::BuildOp (unknown operator, wrong number of shapes,
  /// unknown or unparsable attribute, shape errors of the operator); fused workloads:
  /// BuildFusedDAG's, and kInvalidArgument "fused workload: attributes belong to its nodes, got
  /// attrs {...}"; kInvalidArgument "workload 'matmul' lists nodes; only a \"fused\" workload
  /// does" for nodes on a registry operator.
  absl::StatusOr<ir::ComputeDAG> Build() const;
  /// One line in the CLI's own argument syntax: "matmul 64x32 32x16 float32 transpose_b=false";
  /// fused: "fused[dense(p0,p1) add(n0,p2) relu(n1)] 16x32 24x32 24 float32".
  std::string ToString() const;
  bool operator==(const Workload& other) const;
};

/// `j` for an error message: ≤ 80 characters, nesting below 4 levels shown as [...] / {...} (safe
/// on adversarial input: json::dump recurses once per level).
std::string ShortJson(const nlohmann::json& j);

/// Rejects keys of the JSON object `j` outside `allowed`, naming the first one:
/// kInvalidArgument "unknown field '<prefix><key>' (expected a, b, c)". Shared by every reader of
/// our JSON formats (schedule files, log records, benchmark suites).
absl::Status CheckJsonKeys(const nlohmann::json& j, const std::vector<std::string>& allowed,
                           const std::string& prefix);

/// {"op": ..., "shapes": [[...], ...], "dtype": ..., "attrs": {...}} (all four fields written),
/// plus "nodes": [{"op": ..., "inputs": ["p0", "n1", ...], "attrs": {...}}, ...] for a fused
/// workload (registry workloads are written without it, exactly as before).
nlohmann::json WorkloadToJson(const Workload& workload);
/// Reads the object written by WorkloadToJson ("dtype" and "attrs" optional). `field` names the
/// object in error messages, which are kInvalidArgument and name the offending field, e.g.
/// "field 'workload.shapes' must be a list of shapes", "field 'workload.shapes[1]' must be a list
/// of positive integers, got [4,0]", "unknown field 'workload.axes' (expected op, shapes, dtype,
/// attrs, nodes)", "field 'workload.dtype': unknown dtype 'float33' (...)". The operator itself is
/// not looked up here (Build does that). Fused workloads ("op": "fused"): "nodes" is required and
/// "attrs" must be empty; the nodes' structure is checked (ValidateFusedNodes: graph operators
/// known, operands "p<I>" of an existing shape or "n<K>" of an earlier node), e.g. "field
/// 'workload.nodes[1].inputs[0]': n2 is not an earlier node (...)", "field 'workload.nodes' is
/// only valid in a \"fused\" workload (op is 'matmul')"; shapes are checked by Build.
absl::StatusOr<Workload> WorkloadFromJson(const nlohmann::json& j,
                                          const std::string& field = "workload");

/// A DAG and the state its steps replay to.
struct ResolvedSchedule {
  ir::ComputeDAG dag;
  State state;
};

/// A parsed schedule file.
struct ScheduleFile {
  /// Where it was read from (the path, or the name given to Parse); prefixes every error message.
  std::string source = "<schedule>";
  std::string comment;
  Workload workload;
  Target target;
  std::vector<Step> steps;

  /// Reads and parses the file at `path` (`source` = `path`). Errors: kNotFound / kInvalidArgument
  /// "cannot read schedule file 'x': <reason>", and every error of Parse.
  static absl::StatusOr<ScheduleFile> Load(const std::string& path);
  /// Parses the text of a schedule file. Errors (kInvalidArgument, "<source>: ..."): not JSON or
  /// not an object, unknown field, missing / non-integer / newer ("version 2 is newer than this
  /// build reads (1)") / non-positive version, each workload field (see WorkloadFromJson), target
  /// not a string or unknown, steps not a list or a malformed step ("field 'steps': step 3: ...").
  static absl::StatusOr<ScheduleFile> Parse(const std::string& text,
                                            const std::string& source = "<schedule>");
  /// The file's text: pretty-printed with one step per line; Parse(ToText()) gives an equal file.
  std::string ToText() const;

  /// Builds the workload's DAG and replays the steps on it. Errors (kInvalidArgument,
  /// "<source>: ..."): the workload's build errors ("<source>: workload: ..."), and the first step
  /// that fails to apply ("<source>: step 3: split(...): ...").
  absl::StatusOr<ResolvedSchedule> Resolve() const;
};

}  // namespace tilesearch::schedule
