#include "bench/harness/suite.h"

#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/type.h"
#include "nlohmann/json.hpp"

namespace tilesearch::bench {
namespace {

using json = nlohmann::json;

absl::Status FieldError(const std::string& field, const std::string& what) {
  // `what` is a phrase ("is missing") or, after a colon, a message (": unknown ...").
  return absl::InvalidArgumentError(
      absl::StrCat("field '", field, "'", what.rfind(":", 0) == 0 ? "" : " ", what));
}

absl::Status CheckKeys(const json& j, const std::vector<std::string>& allowed,
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

bool IsProblemName(const std::string& s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

// Names the expression's evaluator (bench/score.py) binds itself.
bool IsReservedName(const std::string& s) { return s == "torch" || s == "F"; }

absl::StatusOr<std::vector<std::string>> StringList(const json& j, const std::string& field) {
  if (!j.is_array()) return FieldError(field, "must be a list of strings, got " + j.dump());
  std::vector<std::string> out;
  for (const json& e : j) {
    if (!e.is_string()) return FieldError(field, "must be a list of strings, got " + j.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

absl::StatusOr<std::string> RequiredString(const json& j, const std::string& key,
                                           const std::string& field) {
  if (!j.contains(key)) return FieldError(field, "is missing");
  if (!j[key].is_string() || j[key].get<std::string>().empty()) {
    return FieldError(field, "must be a non-empty string, got " + j[key].dump());
  }
  return j[key].get<std::string>();
}

// "p3" / "n0": (is_node, index).
absl::StatusOr<std::pair<bool, int>> ParseOperand(const std::string& text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("must be \"p<index>\" or \"n<index>\", got '", text, "'"));
  };
  if (text.size() < 2 || (text[0] != 'p' && text[0] != 'n') || text.size() > 7) return bad();
  int index = 0;
  for (size_t i = 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return bad();
    index = index * 10 + (text[i] - '0');
  }
  if (text.size() > 2 && text[1] == '0') return bad();
  return std::make_pair(text[0] == 'n', index);
}

absl::StatusOr<std::vector<SuiteNode>> NodesFromJson(const json& j, const std::string& field,
                                                     int num_placeholders) {
  if (!j.is_array() || j.empty()) return FieldError(field, "must be a non-empty list of nodes");
  std::vector<SuiteNode> nodes;
  for (size_t k = 0; k < j.size(); ++k) {
    const std::string node_field = absl::StrCat(field, "[", k, "]");
    const json& n = j[k];
    if (!n.is_object()) return FieldError(node_field, "must be an object, got " + n.dump());
    RETURN_IF_ERROR(CheckKeys(n, {"op", "inputs", "attrs"}, node_field + "."));
    SuiteNode node;
    ASSIGN_OR_RETURN(node.op, RequiredString(n, "op", node_field + ".op"));
    if (absl::StatusOr<const ir::GraphOpInfo*> info = ir::FindGraphOp(node.op); !info.ok()) {
      return FieldError(node_field + ".op",
                        absl::StrCat(": unknown graph operator '", node.op, "'"));
    }
    if (!n.contains("inputs")) return FieldError(node_field + ".inputs", "is missing");
    ASSIGN_OR_RETURN(node.inputs, StringList(n["inputs"], node_field + ".inputs"));
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::string in_field = absl::StrCat(node_field, ".inputs[", i, "]");
      absl::StatusOr<std::pair<bool, int>> operand = ParseOperand(node.inputs[i]);
      if (!operand.ok()) return FieldError(in_field, std::string(operand.status().message()));
      const auto [is_node, index] = *operand;
      if (!is_node && index >= num_placeholders) {
        return FieldError(
            in_field, absl::StrCat(": placeholder p", index, " does not exist (the problem has ",
                                   num_placeholders, " shapes)"));
      }
      if (is_node && index >= static_cast<int>(k)) {
        return FieldError(in_field, absl::StrCat(": n", index,
                                                 " is not an earlier node (a node reads "
                                                 "placeholders and nodes before it)"));
      }
    }
    if (n.contains("attrs")) {
      if (!n["attrs"].is_object()) {
        return FieldError(node_field + ".attrs", "must be an object of name: value");
      }
      for (auto it = n["attrs"].begin(); it != n["attrs"].end(); ++it) {
        if (it->is_string()) {
          node.attrs[it.key()] = it->get<std::string>();
        } else if (it->is_number_integer() || it->is_boolean()) {
          node.attrs[it.key()] = it->dump();
        } else {
          return FieldError(absl::StrCat(node_field, ".attrs.", it.key()),
                            "must be a string, an integer or a boolean, got " + it->dump());
        }
      }
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

absl::StatusOr<Problem> ProblemFromJson(const json& j, const std::string& field) {
  if (!j.is_object()) return FieldError(field, "must be an object, got " + j.dump().substr(0, 80));
  RETURN_IF_ERROR(CheckKeys(
      j, {"name", "op", "shapes", "dtype", "attrs", "inputs", "torch", "tags", "note", "nodes"},
      field + "."));
  Problem p;
  ASSIGN_OR_RETURN(p.name, RequiredString(j, "name", field + ".name"));
  if (!IsProblemName(p.name)) {
    return FieldError(field + ".name",
                      absl::StrCat(": name '", p.name,
                                   "' must be lower-case letters, digits and '_', starting with a "
                                   "letter"));
  }
  ASSIGN_OR_RETURN(std::string op, RequiredString(j, "op", field + ".op"));
  // The workload fields, read by the schedule files' own reader (same syntax and messages). A
  // fused problem is read under a stand-in operator name: its nodes are read here.
  json w = json::object();
  for (const char* key : {"op", "shapes", "dtype", "attrs"}) {
    if (j.contains(key)) w[key] = j[key];
  }
  const bool fused = op == "fused";
  if (fused) w["op"] = "relu";
  ASSIGN_OR_RETURN(p.workload, schedule::WorkloadFromJson(w, field));
  p.workload.op = op;
  const int num_shapes = static_cast<int>(p.workload.args.shapes.size());

  if (fused) {
    if (!p.workload.args.attrs.empty()) {
      return FieldError(field + ".attrs",
                        "must be empty in a fused problem (its nodes carry the "
                        "attributes)");
    }
    if (!j.contains("nodes")) return FieldError(field + ".nodes", "is missing (op is \"fused\")");
    ASSIGN_OR_RETURN(p.nodes, NodesFromJson(j["nodes"], field + ".nodes", num_shapes));
  } else if (j.contains("nodes")) {
    return FieldError(field + ".nodes",
                      absl::StrCat("is only valid in a \"fused\" problem (op is '", op, "')"));
  }

  if (!j.contains("inputs")) return FieldError(field + ".inputs", "is missing");
  ASSIGN_OR_RETURN(p.inputs, StringList(j["inputs"], field + ".inputs"));
  if (static_cast<int>(p.inputs.size()) != num_shapes) {
    return FieldError(field + ".inputs", absl::StrCat("names ", p.inputs.size(),
                                                      " inputs but 'shapes' lists ", num_shapes));
  }
  std::set<std::string> seen;
  for (const std::string& in : p.inputs) {
    if (!IsIdentifier(in) || IsReservedName(in)) {
      return FieldError(
          field + ".inputs",
          absl::StrCat(": input name '", in, "' must be an identifier other than torch and F"));
    }
    if (!seen.insert(in).second) {
      return FieldError(field + ".inputs", absl::StrCat(": input name '", in, "' is used twice"));
    }
  }
  ASSIGN_OR_RETURN(p.torch, RequiredString(j, "torch", field + ".torch"));
  if (j.contains("tags")) {
    ASSIGN_OR_RETURN(p.tags, StringList(j["tags"], field + ".tags"));
  }
  if (j.contains("note")) {
    if (!j["note"].is_string()) return FieldError(field + ".note", "must be a string");
    p.note = j["note"].get<std::string>();
  }
  return p;
}

absl::Status Prefixed(const std::string& prefix, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

}  // namespace

bool Problem::is_small() const {
  for (const std::string& t : tags) {
    if (t == "small") return true;
  }
  return false;
}

absl::StatusOr<Suite> Suite::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read suite file '", path, "': it does not exist or is not readable"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

absl::StatusOr<Suite> Suite::Parse(const std::string& text, const std::string& source) {
  const std::string pre = source + ": ";
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(pre + "not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError(pre + "must be a JSON object");
  if (absl::Status s = CheckKeys(j, {"version", "suite", "description", "problems"}, ""); !s.ok()) {
    return Prefixed(pre, s);
  }
  if (!j.contains("version")) return Prefixed(pre, FieldError("version", "is missing"));
  if (!j["version"].is_number_integer() || j["version"].get<int64_t>() < 1) {
    return Prefixed(
        pre, FieldError("version", "must be a positive integer, got " + j["version"].dump()));
  }
  const int64_t version = j["version"].get<int64_t>();
  if (version > kSuiteFileVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        pre, "version ", version, " is newer than this build reads (", kSuiteFileVersion, ")"));
  }
  Suite suite;
  suite.source = source;
  absl::StatusOr<std::string> name = RequiredString(j, "suite", "suite");
  if (!name.ok()) return Prefixed(pre, name.status());
  suite.name = *name;
  if (j.contains("description")) {
    if (!j["description"].is_string()) {
      return Prefixed(pre, FieldError("description", "must be a string"));
    }
    suite.description = j["description"].get<std::string>();
  }
  if (!j.contains("problems")) return Prefixed(pre, FieldError("problems", "is missing"));
  if (!j["problems"].is_array() || j["problems"].empty()) {
    return Prefixed(pre, FieldError("problems", "must be a non-empty list of problems"));
  }
  const json& problems = j["problems"];
  for (size_t i = 0; i < problems.size(); ++i) {
    std::string where = absl::StrCat(pre, "problem ", i);
    if (problems[i].is_object() && problems[i].contains("name") &&
        problems[i]["name"].is_string()) {
      absl::StrAppend(&where, " '", problems[i]["name"].get<std::string>(), "'");
    }
    absl::StatusOr<Problem> p = ProblemFromJson(problems[i], absl::StrCat("problems[", i, "]"));
    if (!p.ok()) return Prefixed(where + ": ", p.status());
    for (size_t k = 0; k < suite.problems.size(); ++k) {
      if (suite.problems[k].name == p->name) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": name '", p->name, "' is used by problem ", k, " too"));
      }
    }
    suite.problems.push_back(*std::move(p));
  }
  return suite;
}

const Problem* Suite::Find(const std::string& name) const {
  for (const Problem& p : problems) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::StatusOr<ir::ComputeDAG> BuildProblem(const Problem& problem) {
  const std::string pre = absl::StrCat("problem '", problem.name, "': ");
  if (!problem.is_fused()) {
    absl::StatusOr<ir::ComputeDAG> dag = problem.workload.Build();
    if (!dag.ok()) return Prefixed(pre, dag.status());
    return dag;
  }
  const ir::OpArgs& args = problem.workload.args;
  std::vector<ir::Tensor> placeholders;
  for (size_t i = 0; i < args.shapes.size(); ++i) {
    absl::StatusOr<ir::Tensor> t =
        ir::Placeholder(absl::StrCat("p", i), args.shapes[i], args.dtype);
    if (!t.ok()) return Prefixed(pre, t.status());
    placeholders.push_back(*t);
  }
  std::vector<bool> placeholder_read(placeholders.size(), false);
  std::vector<bool> node_read(problem.nodes.size(), false);
  std::vector<ir::Tensor> outs;
  for (size_t k = 0; k < problem.nodes.size(); ++k) {
    const SuiteNode& node = problem.nodes[k];
    std::vector<ir::Tensor> ins;
    for (const std::string& text : node.inputs) {
      absl::StatusOr<std::pair<bool, int>> operand = ParseOperand(text);
      if (!operand.ok()) return Prefixed(absl::StrCat(pre, "nodes[", k, "]: "), operand.status());
      const auto [is_node, index] = *operand;
      if (is_node ? index >= static_cast<int>(k) : index >= static_cast<int>(placeholders.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat(pre, "nodes[", k, "] (", node.op, "): operand '", text,
                         "' is not a placeholder or an earlier node"));
      }
      (is_node ? node_read : placeholder_read)[index] = true;
      ins.push_back(is_node ? outs[index] : placeholders[index]);
    }
    absl::StatusOr<ir::Tensor> out =
        ir::BuildGraphOp(node.op, ins, node.attrs, absl::StrCat(node.op, "_", k));
    if (!out.ok()) {
      return Prefixed(absl::StrCat(pre, "nodes[", k, "] (", node.op, "): "), out.status());
    }
    outs.push_back(*out);
  }
  for (size_t i = 0; i < placeholder_read.size(); ++i) {
    if (!placeholder_read[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat(pre, "placeholder p", i, " is not read by any node"));
    }
  }
  for (size_t k = 0; k + 1 < node_read.size(); ++k) {
    if (!node_read[k]) {
      return absl::InvalidArgumentError(
          absl::StrCat(pre, "node n", k, " (", problem.nodes[k].op,
                       ") is not read by a later node (only the last node is an output)"));
    }
  }
  absl::StatusOr<ir::ComputeDAG> dag = ir::ComputeDAG::Create({outs.back()});
  if (!dag.ok()) return Prefixed(pre, dag.status());
  return dag;
}

double MinimumBytes(const ir::ComputeDAG& dag) {
  double bytes = 0;
  auto add = [&](int id) {
    const ir::Tensor& t = dag.stage(id);
    double n = ir::BytesOf(t.dtype());
    for (int64_t e : t.shape()) n *= static_cast<double>(e);
    bytes += n;
  };
  for (int id : dag.input_ids()) add(id);
  for (int id : dag.output_ids()) add(id);
  return bytes;
}

}  // namespace tilesearch::bench
