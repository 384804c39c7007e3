#include "schedule/schedule_file.h"

#include <cstdint>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/read_file.h"
#include "base/status.h"
#include "nlohmann/json.hpp"
#include "schedule/apply_step.h"
#include "schedule/step_json.h"

namespace tilesearch::schedule {
namespace {

// A value for an error message (ShortJson): at most ~80 characters and never deeper than a few
// levels, so an adversarial file (100000 nested lists) cannot overflow the stack in json::dump.
void AppendShortJson(const nlohmann::json& j, int depth, std::string* out) {
  if (out->size() > 80) return;
  if (!j.is_structured()) {
    absl::StrAppend(out, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  if (depth >= 4) {
    absl::StrAppend(out, j.is_array() ? "[...]" : "{...}");
    return;
  }
  absl::StrAppend(out, j.is_array() ? "[" : "{");
  bool first = true;
  for (auto it = j.begin(); it != j.end() && out->size() <= 80; ++it) {
    if (!first) absl::StrAppend(out, ",");
    first = false;
    if (j.is_object()) absl::StrAppend(out, nlohmann::json(it.key()).dump(), ":");
    AppendShortJson(*it, depth + 1, out);
  }
  absl::StrAppend(out, j.is_array() ? "]" : "}");
}

}  // namespace

std::string ShortJson(const nlohmann::json& j) {
  std::string out;
  AppendShortJson(j, 0, &out);
  if (out.size() > 80) out = out.substr(0, 77) + "...";
  return out;
}

absl::Status CheckJsonKeys(const nlohmann::json& j, const std::vector<std::string>& allowed,
                           const std::string& prefix) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const std::string& a : allowed) known = known || a == it.key();
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown field '", prefix, it.key(), "' (expected ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

namespace {

using nlohmann::json;

// "field 'F' must be ...", or "field 'F': <reason>" when `what` starts with a colon.
absl::Status FieldError(const std::string& field, const std::string& what) {
  const char* sep = !what.empty() && what[0] == ':' ? "" : " ";
  return absl::InvalidArgumentError(absl::StrCat("field '", field, "'", sep, what));
}

absl::StatusOr<std::vector<int64_t>> ShapeFromJson(const json& j, const std::string& field) {
  auto bad = [&] {
    return FieldError(field, "must be a list of positive integers, got " + ShortJson(j));
  };
  if (!j.is_array() || j.empty()) return bad();
  std::vector<int64_t> shape;
  for (const json& e : j) {
    if (!e.is_number_integer() || e.get<int64_t>() < 1) return bad();
    shape.push_back(e.get<int64_t>());
  }
  return shape;
}

absl::StatusOr<std::string> AttrFromJson(const json& j, const std::string& field) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_boolean()) return std::string(j.get<bool>() ? "true" : "false");
  if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t{INT64_MAX}) {
    return FieldError(field, "is an integer past 2^63 - 1: " + ShortJson(j));
  }
  if (j.is_number_integer()) return absl::StrCat(j.get<int64_t>());
  return FieldError(field, "must be a string, an integer or a boolean, got " + ShortJson(j));
}

std::string ShapeText(const std::vector<int64_t>& shape) { return absl::StrJoin(shape, "x"); }

json AttrsJson(const std::map<std::string, std::string>& attrs) {
  json j = json::object();
  for (const auto& [name, value] : attrs) j[name] = value;
  return j;
}

// Reads {"name": value, ...} (values as AttrFromJson reads them) into `attrs`.
absl::Status AttrsFromJson(const json& j, const std::string& field,
                           std::map<std::string, std::string>* attrs) {
  if (!j.is_object()) {
    return FieldError(field, "must be an object of name: value, got " + ShortJson(j));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    ASSIGN_OR_RETURN(std::string value,
                     AttrFromJson(it.value(), absl::StrCat(field, ".", it.key())));
    (*attrs)[it.key()] = std::move(value);
  }
  return absl::OkStatus();
}

// The "nodes" list of a fused workload.
absl::StatusOr<std::vector<FusedNode>> FusedNodesFromJson(const json& j, const std::string& field) {
  if (!j.is_array()) {
    return FieldError(
        field, "must be a list of nodes {\"op\", \"inputs\", \"attrs\"}, got " + ShortJson(j));
  }
  std::vector<FusedNode> nodes;
  for (size_t k = 0; k < j.size(); ++k) {
    const json& n = j[k];
    const std::string node_field = absl::StrCat(field, "[", k, "]");
    if (!n.is_object()) {
      return FieldError(node_field,
                        "must be an object with fields op, inputs and attrs, got " + ShortJson(n));
    }
    RETURN_IF_ERROR(CheckJsonKeys(n, {"op", "inputs", "attrs"}, node_field + "."));
    FusedNode node;
    if (!n.contains("op")) return FieldError(node_field + ".op", "is missing");
    if (!n["op"].is_string() || n["op"].get<std::string>().empty()) {
      return FieldError(node_field + ".op",
                        "must be a graph operator name, got " + ShortJson(n["op"]));
    }
    node.op = n["op"].get<std::string>();
    const std::string inputs_field = node_field + ".inputs";
    if (!n.contains("inputs")) return FieldError(inputs_field, "is missing");
    if (!n["inputs"].is_array()) {
      return FieldError(inputs_field, "must be a list of operands such as \"p0\" or \"n1\", got " +
                                          ShortJson(n["inputs"]));
    }
    for (size_t i = 0; i < n["inputs"].size(); ++i) {
      const json& in = n["inputs"][i];
      const std::string in_field = absl::StrCat(inputs_field, "[", i, "]");
      if (!in.is_string()) {
        return FieldError(in_field, "must be \"p<index>\" or \"n<index>\", got " + ShortJson(in));
      }
      absl::StatusOr<FusedOperand> operand = ParseFusedOperand(in.get<std::string>());
      if (!operand.ok()) return FieldError(in_field, std::string(operand.status().message()));
      node.inputs.push_back(*operand);
    }
    if (n.contains("attrs")) {
      RETURN_IF_ERROR(AttrsFromJson(n["attrs"], node_field + ".attrs", &node.attrs));
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

// One-line JSON with a space after each comma and colon: ["SP", 2, 0, 64, [8, 4], 1].
std::string OneLine(const json& j) {
  if (j.is_array()) {
    std::vector<std::string> items;
    for (const json& e : j) items.push_back(OneLine(e));
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  if (j.is_object()) {
    std::vector<std::string> items;
    for (auto it = j.begin(); it != j.end(); ++it) {
      items.push_back(absl::StrCat(json(it.key()).dump(), ": ", OneLine(it.value())));
    }
    return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
  }
  return j.dump();
}

// Prefixes a status message with the file it came from, keeping the code.
absl::Status InFile(const std::string& source, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(source, ": ", status.message()));
}

absl::StatusOr<ScheduleFile> ParseJson(const json& j, const std::string& source) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "a schedule file is a JSON object with fields version, workload, target and steps");
  }
  RETURN_IF_ERROR(CheckJsonKeys(j, {"version", "comment", "workload", "target", "steps"}, ""));
  if (!j.contains("version")) return FieldError("version", "is missing");
  if (!j["version"].is_number_integer()) {
    return FieldError("version", "must be an integer, got " + ShortJson(j["version"]));
  }
  const int64_t version = j["version"].get<int64_t>();
  if (version > kScheduleFileVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "version ", version, " is newer than this build reads (", kScheduleFileVersion, ")"));
  }
  if (version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("version ", version, " is not valid (versions start at 1)"));
  }
  ScheduleFile file;
  file.source = source;
  if (j.contains("comment")) {
    if (!j["comment"].is_string()) return FieldError("comment", "must be a string");
    file.comment = j["comment"].get<std::string>();
  }
  if (!j.contains("workload")) return FieldError("workload", "is missing");
  ASSIGN_OR_RETURN(file.workload, WorkloadFromJson(j["workload"], "workload"));
  if (!j.contains("target")) return FieldError("target", "is missing");
  if (!j["target"].is_string()) {
    return FieldError("target", "must be a string such as \"cuda -arch=sm_90\" or \"cpu\", got " +
                                    ShortJson(j["target"]));
  }
  absl::StatusOr<Target> target = ParseTarget(j["target"].get<std::string>());
  if (!target.ok()) return FieldError("target", absl::StrCat(": ", target.status().message()));
  file.target = *std::move(target);
  if (!j.contains("steps")) return FieldError("steps", "is missing");
  if (!j["steps"].is_array()) {
    return FieldError("steps", "must be a list of steps, got " + ShortJson(j["steps"]));
  }
  // Version 1 files hold steps of step-list format version 1, parsed one by one in place (a copy
  // of the list would recurse once per nesting level of an adversarial step).
  const json& list = j["steps"];
  for (size_t i = 0; i < list.size(); ++i) {
    absl::StatusOr<Step> step = StepFromJson(list[i]);
    if (!step.ok()) {
      return FieldError("steps", absl::StrCat(": step ", i, ": ", step.status().message()));
    }
    file.steps.push_back(*std::move(step));
  }
  return file;
}

}  // namespace

absl::StatusOr<ir::ComputeDAG> Workload::Build() const {
  if (is_fused()) {
    if (!args.attrs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fused workload: attributes belong to its nodes, got attrs ",
                       AttrsJson(args.attrs).dump()));
    }
    return BuildFusedDAG(nodes, args.shapes, args.dtype);
  }
  if (!nodes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("workload '", op, "' lists nodes; only a \"",
                                                   kFusedWorkloadOp, "\" workload does"));
  }
  return ir::BuildOp(op, args);
}

std::string Workload::ToString() const {
  std::string out = op;
  if (is_fused() || !nodes.empty()) absl::StrAppend(&out, "[", FusedNodesToString(nodes), "]");
  for (const std::vector<int64_t>& shape : args.shapes)
    absl::StrAppend(&out, " ", ShapeText(shape));
  absl::StrAppend(&out, " ", ir::TypeName(args.dtype));
  for (const auto& [name, value] : args.attrs) absl::StrAppend(&out, " ", name, "=", value);
  return out;
}

bool Workload::operator==(const Workload& other) const {
  return op == other.op && args.shapes == other.args.shapes && args.dtype == other.args.dtype &&
         args.attrs == other.args.attrs && nodes == other.nodes;
}

json WorkloadToJson(const Workload& workload) {
  json j{{"op", workload.op},
         {"shapes", workload.args.shapes},
         {"dtype", ir::TypeName(workload.args.dtype)},
         {"attrs", AttrsJson(workload.args.attrs)}};
  // Registry workloads keep exactly the four fields of earlier logs.
  if (workload.is_fused() || !workload.nodes.empty()) {
    json nodes = json::array();
    for (const FusedNode& node : workload.nodes) {
      json inputs = json::array();
      for (const FusedOperand& in : node.inputs) inputs.push_back(in.ToString());
      nodes.push_back(
          json{{"op", node.op}, {"inputs", std::move(inputs)}, {"attrs", AttrsJson(node.attrs)}});
    }
    j["nodes"] = std::move(nodes);
  }
  return j;
}

absl::StatusOr<Workload> WorkloadFromJson(const json& j, const std::string& field) {
  if (!j.is_object()) {
    return FieldError(
        field, "must be an object with fields op, shapes, dtype and attrs, got " + ShortJson(j));
  }
  // "nodes" (fused workloads only) is checked below, once the operator is known. No copy of `j`:
  // copying a value recurses once per nesting level.
  RETURN_IF_ERROR(CheckJsonKeys(j, {"op", "shapes", "dtype", "attrs", "nodes"}, field + "."));
  Workload w;
  const std::string op_field = field + ".op";
  if (!j.contains("op")) return FieldError(op_field, "is missing");
  if (!j["op"].is_string() || j["op"].get<std::string>().empty()) {
    return FieldError(op_field, "must be an operator name, got " + ShortJson(j["op"]));
  }
  w.op = j["op"].get<std::string>();

  const std::string shapes_field = field + ".shapes";
  if (!j.contains("shapes")) return FieldError(shapes_field, "is missing");
  const json& shapes = j["shapes"];
  if (!shapes.is_array()) return FieldError(shapes_field, "must be a list of shapes");
  for (size_t i = 0; i < shapes.size(); ++i) {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                     ShapeFromJson(shapes[i], absl::StrCat(shapes_field, "[", i, "]")));
    w.args.shapes.push_back(std::move(shape));
  }

  if (j.contains("dtype")) {
    const std::string dtype_field = field + ".dtype";
    if (!j["dtype"].is_string()) {
      return FieldError(dtype_field,
                        "must be a string such as \"float32\", got " + ShortJson(j["dtype"]));
    }
    absl::StatusOr<ir::ScalarType> dtype = ir::ParseType(j["dtype"].get<std::string>());
    if (!dtype.ok()) return FieldError(dtype_field, absl::StrCat(": ", dtype.status().message()));
    w.args.dtype = *dtype;
  }

  if (j.contains("attrs")) {
    RETURN_IF_ERROR(AttrsFromJson(j["attrs"], field + ".attrs", &w.args.attrs));
  }

  const std::string nodes_field = field + ".nodes";
  if (!w.is_fused()) {
    if (j.contains("nodes")) {
      return FieldError(nodes_field, absl::StrCat("is only valid in a \"", kFusedWorkloadOp,
                                                  "\" workload (op is '", w.op, "')"));
    }
    return w;
  }
  if (!w.args.attrs.empty()) {
    return FieldError(field + ".attrs",
                      "must be empty in a fused workload (attributes belong to its nodes), got " +
                          ShortJson(j["attrs"]));
  }
  if (!j.contains("nodes")) {
    return FieldError(nodes_field, "is missing (a fused workload lists its operator nodes)");
  }
  ASSIGN_OR_RETURN(w.nodes, FusedNodesFromJson(j["nodes"], nodes_field));
  RETURN_IF_ERROR(ValidateFusedNodes(w.nodes, static_cast<int>(w.args.shapes.size()), nodes_field));
  return w;
}

absl::StatusOr<ScheduleFile> ScheduleFile::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "schedule file"));
  return Parse(text, path);
}

absl::StatusOr<ScheduleFile> ScheduleFile::Parse(const std::string& text,
                                                 const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers out of range (1e400)
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
  absl::StatusOr<ScheduleFile> file = ParseJson(j, source);
  if (!file.ok()) return InFile(source, file.status());
  return file;
}

std::string ScheduleFile::ToText() const {
  // Hand-formatted so the file reads like the examples: short fields on one line each, one step
  // per line.
  const Workload& w = workload;
  std::string out = absl::StrCat("{\n  \"version\": ", kScheduleFileVersion, ",\n");
  if (!comment.empty()) absl::StrAppend(&out, "  \"comment\": ", json(comment).dump(), ",\n");
  const json wj = WorkloadToJson(w);
  absl::StrAppend(&out, "  \"workload\": {\"op\": ", OneLine(wj["op"]),
                  ", \"shapes\": ", OneLine(wj["shapes"]), ", \"dtype\": ", OneLine(wj["dtype"]),
                  ", \"attrs\": ", OneLine(wj["attrs"]));
  if (wj.contains("nodes")) absl::StrAppend(&out, ", \"nodes\": ", OneLine(wj["nodes"]));
  absl::StrAppend(&out, "},\n");
  absl::StrAppend(&out, "  \"target\": ", json(target.ToString()).dump(), ",\n");
  if (steps.empty()) {
    absl::StrAppend(&out, "  \"steps\": []\n}\n");
    return out;
  }
  absl::StrAppend(&out, "  \"steps\": [\n");
  for (size_t i = 0; i < steps.size(); ++i) {
    absl::StrAppend(&out, "    ", OneLine(StepToJson(steps[i])),
                    i + 1 < steps.size() ? ",\n" : "\n");
  }
  absl::StrAppend(&out, "  ]\n}\n");
  return out;
}

absl::StatusOr<ResolvedSchedule> ScheduleFile::Resolve() const {
  absl::StatusOr<ir::ComputeDAG> dag = workload.Build();
  if (!dag.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": workload: ", dag.status().message()));
  }
  absl::StatusOr<State> state = ReplaySteps(*dag, steps);
  if (!state.ok())
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", state.status().message()));
  return ResolvedSchedule{*std::move(dag), *std::move(state)};
}

}  // namespace tilesearch::schedule
