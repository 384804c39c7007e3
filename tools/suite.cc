#include "tools/suite.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/read_file.h"
#include "base/status.h"
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

// Names the expression's evaluator (bench/harness/score.py) binds itself.
bool IsReservedName(const std::string& s) { return s == "torch" || s == "F"; }

absl::StatusOr<std::vector<std::string>> StringList(const json& j, const std::string& field) {
  if (!j.is_array())
    return FieldError(field, "must be a list of strings, got " + schedule::ShortJson(j));
  std::vector<std::string> out;
  for (const json& e : j) {
    if (!e.is_string())
      return FieldError(field, "must be a list of strings, got " + schedule::ShortJson(j));
    out.push_back(e.get<std::string>());
  }
  return out;
}

absl::StatusOr<std::string> RequiredString(const json& j, const std::string& key,
                                           const std::string& field) {
  if (!j.contains(key)) return FieldError(field, "is missing");
  if (!j[key].is_string() || j[key].get<std::string>().empty()) {
    return FieldError(field, "must be a non-empty string, got " + schedule::ShortJson(j[key]));
  }
  return j[key].get<std::string>();
}

absl::StatusOr<Problem> ProblemFromJson(const json& j, const std::string& field) {
  if (!j.is_object()) return FieldError(field, "must be an object, got " + schedule::ShortJson(j));
  RETURN_IF_ERROR(schedule::CheckJsonKeys(
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
  // The workload fields (fused problems: with their nodes), read by the schedule files' own
  // reader: same syntax and messages.
  json w = json::object();
  for (const char* key : {"op", "shapes", "dtype", "attrs", "nodes"}) {
    if (j.contains(key)) w[key] = j[key];
  }
  ASSIGN_OR_RETURN(p.workload, schedule::WorkloadFromJson(w, field));
  const int num_shapes = static_cast<int>(p.workload.args.shapes.size());

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
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "suite file"));
  return Parse(text, path);
}

absl::StatusOr<Suite> Suite::Parse(const std::string& text, const std::string& source) {
  const std::string pre = source + ": ";
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers out of range (1e400)
    return absl::InvalidArgumentError(absl::StrCat(pre, "not valid JSON: ", e.what()));
  }
  if (!j.is_object()) return absl::InvalidArgumentError(pre + "must be a JSON object");
  if (absl::Status s =
          schedule::CheckJsonKeys(j, {"version", "suite", "description", "problems"}, "");
      !s.ok()) {
    return Prefixed(pre, s);
  }
  if (!j.contains("version")) return Prefixed(pre, FieldError("version", "is missing"));
  if (!j["version"].is_number_integer() || j["version"].get<int64_t>() < 1) {
    return Prefixed(pre, FieldError("version", "must be a positive integer, got " +
                                                   schedule::ShortJson(j["version"])));
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
  absl::StatusOr<ir::ComputeDAG> dag = problem.workload.Build();
  if (!dag.ok()) return Prefixed(absl::StrCat("problem '", problem.name, "': "), dag.status());
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
