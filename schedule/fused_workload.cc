#include "schedule/fused_workload.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace tilesearch::schedule {
namespace {

absl::Status Fused(const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat("fused workload: ", status.message()));
}

std::string PlaceholderName(int index) { return absl::StrCat("p", index); }

}  // namespace

std::string FusedOperand::ToString() const { return absl::StrCat(is_node ? "n" : "p", index); }

absl::StatusOr<FusedOperand> ParseFusedOperand(const std::string& text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("must be \"p<index>\" or \"n<index>\", got '", text, "'"));
  };
  if (text.size() < 2 || (text[0] != 'p' && text[0] != 'n')) return bad();
  for (size_t i = 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return bad();
  }
  // No leading zeros: one text per operand.
  if (text.size() > 2 && text[1] == '0') return bad();
  int index = 0;
  if (!absl::SimpleAtoi(text.substr(1), &index)) return bad();
  return FusedOperand{text[0] == 'n', index};
}

absl::Status ValidateFusedNodes(const std::vector<FusedNode>& nodes, int num_placeholders,
                                const std::string& field) {
  if (nodes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", field, "' must list at least one node"));
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    const FusedNode& node = nodes[k];
    const std::string node_field = absl::StrCat(field, "[", k, "]");
    absl::StatusOr<const ir::GraphOpInfo*> info = ir::FindGraphOp(node.op);
    if (!info.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", node_field, ".op': ", info.status().message()));
    }
    // The operator's input count first: a missing operand would otherwise surface as "placeholder
    // p1 is not read by any node", far from its cause.
    const int n = static_cast<int>(node.inputs.size());
    if (n < (*info)->min_inputs || n > (*info)->max_inputs) {
      const std::string expected =
          (*info)->min_inputs == (*info)->max_inputs
              ? absl::StrCat((*info)->min_inputs)
              : absl::StrCat((*info)->min_inputs, " to ", (*info)->max_inputs);
      return absl::InvalidArgumentError(
          absl::StrCat("field '", node_field, ".inputs': ", node.op, " takes ", expected, " input",
                       (*info)->max_inputs == 1 ? "" : "s", ", got ", n));
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const FusedOperand& in = node.inputs[i];
      const std::string in_field = absl::StrCat(node_field, ".inputs[", i, "]");
      if (in.index < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("field '", in_field, "': negative index in ", in.ToString()));
      }
      if (!in.is_node && in.index >= num_placeholders) {
        return absl::InvalidArgumentError(
            absl::StrCat("field '", in_field, "': placeholder ", in.ToString(),
                         " does not exist (the workload has ", num_placeholders, " shapes)"));
      }
      if (in.is_node && in.index >= static_cast<int>(k)) {
        return absl::InvalidArgumentError(absl::StrCat("field '", in_field, "': ", in.ToString(),
                                                       " is not an earlier node (node ", k,
                                                       " reads placeholders and nodes before it)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::ComputeDAG> BuildFusedDAG(const std::vector<FusedNode>& nodes,
                                             const std::vector<std::vector<int64_t>>& shapes,
                                             ir::ScalarType dtype) {
  const int num_placeholders = static_cast<int>(shapes.size());
  absl::Status valid = ValidateFusedNodes(nodes, num_placeholders, "nodes");
  if (!valid.ok()) return Fused(valid);

  // Every placeholder and every node but the last is read (a DAG has one output and no dead
  // stages, so the form is canonical).
  std::vector<bool> placeholder_read(num_placeholders, false);
  std::vector<bool> node_read(nodes.size(), false);
  for (const FusedNode& node : nodes) {
    for (const FusedOperand& in : node.inputs) {
      (in.is_node ? node_read[in.index] : placeholder_read[in.index]) = true;
    }
  }
  for (int i = 0; i < num_placeholders; ++i) {
    if (!placeholder_read[i]) {
      return Fused(absl::InvalidArgumentError(
          absl::StrCat("placeholder ", PlaceholderName(i), " is not read by any node")));
    }
  }
  for (size_t k = 0; k + 1 < nodes.size(); ++k) {
    if (!node_read[k]) {
      return Fused(absl::InvalidArgumentError(
          absl::StrCat("node n", k, " (", nodes[k].op,
                       ") is not read by a later node (only the last node is an output)")));
    }
  }

  std::vector<ir::Tensor> placeholders;
  for (int i = 0; i < num_placeholders; ++i) {
    absl::StatusOr<ir::Tensor> p = ir::Placeholder(PlaceholderName(i), shapes[i], dtype);
    if (!p.ok()) return Fused(p.status());
    placeholders.push_back(*std::move(p));
  }
  std::vector<ir::Tensor> outputs;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const FusedNode& node = nodes[k];
    std::vector<ir::Tensor> operands;
    for (const FusedOperand& in : node.inputs) {
      operands.push_back(in.is_node ? outputs[in.index] : placeholders[in.index]);
    }
    absl::StatusOr<ir::Tensor> out =
        ir::BuildGraphOp(node.op, operands, node.attrs, absl::StrCat(node.op, "_", k));
    if (!out.ok()) {
      return Fused(absl::InvalidArgumentError(
          absl::StrCat("nodes[", k, "] (", node.op, "): ", out.status().message())));
    }
    outputs.push_back(*std::move(out));
  }
  absl::StatusOr<ir::ComputeDAG> dag = ir::ComputeDAG::Create({outputs.back()});
  if (!dag.ok()) return Fused(dag.status());

  // Kernel argument i must be placeholder pI: the numbering follows the DAG's canonical order.
  std::vector<std::string> order;
  for (int sid : dag->input_ids()) order.push_back(dag->stage(sid).name());
  bool canonical = static_cast<int>(order.size()) == num_placeholders;
  for (size_t i = 0; canonical && i < order.size(); ++i) {
    canonical = order[i] == PlaceholderName(static_cast<int>(i));
  }
  if (!canonical) {
    return Fused(absl::InvalidArgumentError(
        absl::StrCat("placeholders must be numbered in the order the DAG reads them: it reads ",
                     absl::StrJoin(order, ", "), " (renumber them p0, p1, ... in that order)")));
  }
  return dag;
}

std::string FusedNodesToString(const std::vector<FusedNode>& nodes) {
  std::vector<std::string> parts;
  for (const FusedNode& node : nodes) {
    std::vector<std::string> inputs;
    for (const FusedOperand& in : node.inputs) inputs.push_back(in.ToString());
    std::string part = absl::StrCat(node.op, "(", absl::StrJoin(inputs, ","), ")");
    if (!node.attrs.empty()) {
      std::vector<std::string> attrs;
      for (const auto& [name, value] : node.attrs) attrs.push_back(absl::StrCat(name, "=", value));
      absl::StrAppend(&part, "{", absl::StrJoin(attrs, ","), "}");
    }
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace tilesearch::schedule
