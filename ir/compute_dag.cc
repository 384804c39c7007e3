#include "ir/compute_dag.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace tilesearch::ir {

const char* StageKindName(StageKind kind) {
  switch (kind) {
    case StageKind::kPlaceholder:
      return "placeholder";
    case StageKind::kElementwise:
      return "elementwise";
    case StageKind::kInjective:
      return "injective";
    case StageKind::kReduction:
      return "reduction";
  }
  return "?";
}

uint64_t Fnv1a64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64-bit offset basis
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV 64-bit prime
  }
  return h;
}

namespace {

// Every Load of a stage (body first, then init), in pre-order: the order of first use.
class LoadCollector : public ExprVisitor {
 public:
  std::vector<const LoadNode*> loads;

 protected:
  void VisitLoad(const LoadNode* op, const Expr& e) override {
    loads.push_back(op);
    ExprVisitor::VisitLoad(op, e);
  }
};

std::vector<const LoadNode*> StageLoads(const TensorNode& t) {
  LoadCollector c;
  c.Visit(t.body);
  c.Visit(t.init);
  return c.loads;
}

// Names of all variables in an expression.
class VarCollector : public ExprVisitor {
 public:
  std::set<std::string> names;

 protected:
  void VisitVar(const VarNode* op, const Expr&) override { names.insert(op->name); }
};

bool IsArithmetic(ExprKind k) {
  return k == ExprKind::kAdd || k == ExprKind::kSub || k == ExprKind::kMul || k == ExprKind::kDiv ||
         k == ExprKind::kMod || k == ExprKind::kMin || k == ExprKind::kMax;
}

// Value operations of one evaluation of `e`: arithmetic nodes not of the int64 index type and
// math calls count 1 each; loads (with their index arithmetic), casts, comparisons and logic count
// 0; a select counts its condition plus the costlier branch, since only one branch runs.
double CountOps(const Expr& e) {
  if (!e.defined()) return 0;
  if (IsBinaryKind(e.kind())) {
    auto [a, b] = BinaryOperands(e);
    double self = IsArithmetic(e.kind()) && e.type() != ScalarType::kInt64 ? 1 : 0;
    return self + CountOps(a) + CountOps(b);
  }
  switch (e.kind()) {
    case ExprKind::kNot:
      return CountOps(e.as<NotNode>()->a);
    case ExprKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      return CountOps(s->cond) + std::max(CountOps(s->true_value), CountOps(s->false_value));
    }
    case ExprKind::kCast:
      return CountOps(e.as<CastNode>()->value);
    case ExprKind::kCall: {
      double n = 1;
      for (const Expr& a : e.as<CallNode>()->args) n += CountOps(a);
      return n;
    }
    default:
      return 0;  // constants, variables, loads
  }
}

double Points(const std::vector<IterVar>& axes) {
  double n = 1;
  for (const IterVar& iv : axes) n *= static_cast<double>(iv.extent);
  return n;
}

// Exact text of a double: %.17g reads back as the same value.
std::string ExactFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.17g", v);
}

const char* ShortType(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return "f32";
    case ScalarType::kFloat16:
      return "f16";
    case ScalarType::kBFloat16:
      return "bf16";
    case ScalarType::kInt32:
      return "i32";
    case ScalarType::kInt64:
      return "i64";
    case ScalarType::kBool:
      return "bool";
  }
  return "?";
}

// Prints an expression in canonical form: every constant with its type, every variable by its
// canonical axis name, every Load by the canonical name of its producer. Prefix notation so the
// text does not depend on the readable printer's choices.
class CanonicalPrinter {
 public:
  CanonicalPrinter(const std::unordered_map<std::string, std::string>& vars,
                   const std::unordered_map<const TensorNode*, int>& ids)
      : vars_(vars), ids_(ids) {}

  void Print(std::ostream& os, const Expr& e) const {
    if (!e.defined()) {
      os << "none";
      return;
    }
    if (IsBinaryKind(e.kind())) {
      auto [a, b] = BinaryOperands(e);
      os << ExprKindName(e.kind()) << "." << ShortType(e.type()) << "(";
      Print(os, a);
      os << ", ";
      Print(os, b);
      os << ")";
      return;
    }
    switch (e.kind()) {
      case ExprKind::kIntImm:
        os << e.as<IntImmNode>()->value << ":" << ShortType(e.type());
        return;
      case ExprKind::kFloatImm:
        os << ExactFloat(e.as<FloatImmNode>()->value) << ":" << ShortType(e.type());
        return;
      case ExprKind::kVar: {
        const auto* v = e.as<VarNode>();
        auto it = vars_.find(v->name);
        // Bodies only use their stage's axes (Compute checks it); keep any other name verbatim.
        os << (it == vars_.end() ? absl::StrCat("?", v->name) : it->second);
        if (e.type() != ScalarType::kInt64) os << ":" << ShortType(e.type());
        return;
      }
      case ExprKind::kNot:
        os << "Not(";
        Print(os, e.as<NotNode>()->a);
        os << ")";
        return;
      case ExprKind::kSelect: {
        const auto* s = e.as<SelectNode>();
        os << "Select(";
        Print(os, s->cond);
        os << ", ";
        Print(os, s->true_value);
        os << ", ";
        Print(os, s->false_value);
        os << ")";
        return;
      }
      case ExprKind::kCast:
        os << "Cast." << ShortType(e.type()) << "(";
        Print(os, e.as<CastNode>()->value);
        os << ")";
        return;
      case ExprKind::kCall: {
        const auto* c = e.as<CallNode>();
        os << CallOpName(c->op) << "." << ShortType(e.type()) << "(";
        for (size_t i = 0; i < c->args.size(); ++i) {
          if (i) os << ", ";
          Print(os, c->args[i]);
        }
        os << ")";
        return;
      }
      case ExprKind::kLoad: {
        const auto* l = e.as<LoadNode>();
        auto it = ids_.find(l->producer.get());
        if (it == ids_.end()) {
          os << "?" << l->buffer;
        } else {
          os << "T" << it->second;
        }
        os << "[";
        for (size_t i = 0; i < l->indices.size(); ++i) {
          if (i) os << ", ";
          Print(os, l->indices[i]);
        }
        os << "]";
        return;
      }
      default:
        os << "?";
        return;
    }
  }

 private:
  const std::unordered_map<std::string, std::string>& vars_;
  const std::unordered_map<const TensorNode*, int>& ids_;
};

std::string AxesText(const std::vector<IterVar>& axes) {
  std::vector<std::string> parts;
  for (const IterVar& iv : axes) parts.push_back(iv.name);
  return absl::StrJoin(parts, ", ");
}

std::string ShapeText(ScalarType t, const std::vector<int64_t>& shape) {
  return absl::StrCat(TypeName(t), "[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

absl::StatusOr<ComputeDAG> ComputeDAG::Create(const std::vector<Tensor>& outputs) {
  if (outputs.empty()) return absl::InvalidArgumentError("compute dag without outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("output ", i, " of the compute dag is undefined"));
    }
    if (outputs[i]->is_placeholder) {
      return absl::InvalidArgumentError(
          absl::StrCat("output ", i, " of the compute dag is placeholder '", outputs[i].name(),
                       "'; outputs must be computed"));
    }
  }

  ComputeDAG dag;
  std::unordered_map<const TensorNode*, int> ids;
  std::unordered_map<std::string, const TensorNode*> by_name;
  std::unordered_set<const TensorNode*> on_path;
  absl::Status status;

  // Post-order DFS: a stage is appended after all its producers, producers in order of first use.
  std::function<void(const std::shared_ptr<const TensorNode>&)> visit =
      [&](const std::shared_ptr<const TensorNode>& node) {
        if (!status.ok() || ids.count(node.get())) return;
        auto [it, inserted] = by_name.emplace(node->name, node.get());
        if (!inserted && it->second != node.get()) {
          status = absl::InvalidArgumentError(
              absl::StrCat("two different stages are named '", node->name, "'"));
          return;
        }
        // Tensors are immutable and built producer-first, so a cycle cannot be constructed.
        CHECK(on_path.insert(node.get()).second) << "cycle through stage '" << node->name << "'";
        for (const LoadNode* load : StageLoads(*node)) {
          if (!load->producer) {
            status = absl::InvalidArgumentError(absl::StrCat(
                "stage '", node->name, "' reads buffer '", load->buffer, "' that is not a tensor"));
            return;
          }
          visit(load->producer);
          if (!status.ok()) return;
        }
        on_path.erase(node.get());
        ids[node.get()] = static_cast<int>(dag.stages_.size());
        dag.stages_.push_back(Tensor(node));
      };
  for (const Tensor& out : outputs) {
    visit(out.node());
    RETURN_IF_ERROR(status);
  }

  for (const Tensor& out : outputs) {
    int id = ids.at(out.node().get());
    if (std::find(dag.output_ids_.begin(), dag.output_ids_.end(), id) != dag.output_ids_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage '", out.name(), "' is given twice as an output"));
    }
    dag.output_ids_.push_back(id);
  }

  const int n = dag.num_stages();
  dag.consumers_.assign(n, {});
  dag.producers_.assign(n, {});
  for (int id = 0; id < n; ++id) {
    if (dag.stages_[id]->is_placeholder) dag.input_ids_.push_back(id);
    std::set<int> producers;
    for (const LoadNode* load : StageLoads(*dag.stages_[id].node())) {
      producers.insert(ids.at(load->producer.get()));
    }
    dag.producers_[id].assign(producers.begin(), producers.end());
    for (int p : producers) dag.consumers_[p].push_back(id);  // id ascends: stays sorted
  }
  return dag;
}

int ComputeDAG::StageId(const std::string& name) const {
  for (int id = 0; id < num_stages(); ++id) {
    if (stages_[id].name() == name) return id;
  }
  return -1;
}

StageKind ComputeDAG::Kind(int id) const {
  const TensorNode& t = *stages_[id].node();
  if (t.is_placeholder) return StageKind::kPlaceholder;
  if (t.reduce != ReduceKind::kNone || !t.reduce_axes.empty()) return StageKind::kReduction;
  for (const LoadNode* load : StageLoads(t)) {
    if (load->indices.size() != t.axes.size()) return StageKind::kInjective;
    // Same indices but another shape is a crop (or an out-of-range read), not a pointwise map.
    if (load->producer && load->producer->shape != t.shape) return StageKind::kInjective;
    for (size_t d = 0; d < t.axes.size(); ++d) {
      const auto* v = load->indices[d].as<VarNode>();
      if (!v || v->name != t.axes[d].name) return StageKind::kInjective;
    }
  }
  return StageKind::kElementwise;
}

bool ComputeDAG::NeedsMultiLevelTiling(int id) const {
  const TensorNode& t = *stages_[id].node();
  if (t.is_placeholder) return false;
  // Variables used in the indices of each tensor read, over all its reads.
  std::vector<const TensorNode*> order;
  std::unordered_map<const TensorNode*, VarCollector> used;
  for (const LoadNode* load : StageLoads(t)) {
    auto [it, inserted] = used.try_emplace(load->producer.get());
    if (inserted) order.push_back(load->producer.get());
    for (const Expr& index : load->indices) it->second.Visit(index);
  }
  int n_missing = 0;
  for (const TensorNode* producer : order) {
    const std::set<std::string>& names = used.at(producer).names;
    for (const IterVar& axis : t.axes) {
      if (axis.extent > 1 && !names.count(axis.name)) {
        ++n_missing;
        break;
      }
    }
  }
  return n_missing >= 2 || (n_missing >= 1 && !t.reduce_axes.empty());
}

bool ComputeDAG::IsInlinable(int id) const {
  const TensorNode& t = *stages_[id].node();
  if (t.is_placeholder || t.reduce != ReduceKind::kNone || !t.reduce_axes.empty()) return false;
  return std::find(output_ids_.begin(), output_ids_.end(), id) == output_ids_.end();
}

double ComputeDAG::StageFlops(int id) const {
  const TensorNode& t = *stages_[id].node();
  if (t.is_placeholder) return 0;
  double out_points = Points(t.axes);
  if (t.reduce == ReduceKind::kNone) return out_points * CountOps(t.body);
  // One body evaluation and one combine per reduce point, plus the init once per output point.
  return out_points * (Points(t.reduce_axes) * (CountOps(t.body) + 1) + CountOps(t.init));
}

double ComputeDAG::Flops() const {
  double total = 0;
  for (int id = 0; id < num_stages(); ++id) total += StageFlops(id);
  return total;
}

int64_t ComputeDAG::InputBytes() const {
  int64_t bytes = 0;
  for (int id : input_ids_) bytes += stages_[id].NumElements() * BytesOf(stages_[id].dtype());
  return bytes;
}

int64_t ComputeDAG::OutputBytes() const {
  int64_t bytes = 0;
  for (int id : output_ids_) bytes += stages_[id].NumElements() * BytesOf(stages_[id].dtype());
  return bytes;
}

std::string ComputeDAG::CanonicalText() const {
  std::unordered_map<const TensorNode*, int> ids;
  for (int id = 0; id < num_stages(); ++id) ids[stages_[id].node().get()] = id;
  std::ostringstream os;
  for (int id = 0; id < num_stages(); ++id) {
    const TensorNode& t = *stages_[id].node();
    os << "T" << id << " = " << StageKindName(Kind(id)) << " " << ShapeText(t.dtype, t.shape);
    if (!t.is_placeholder) {
      std::unordered_map<std::string, std::string> vars;
      for (size_t d = 0; d < t.axes.size(); ++d) vars[t.axes[d].name] = absl::StrCat("i", d);
      for (size_t d = 0; d < t.reduce_axes.size(); ++d) {
        vars[t.reduce_axes[d].name] = absl::StrCat("r", d);
      }
      CanonicalPrinter printer(vars, ids);
      std::vector<int64_t> reduce_shape;
      for (const IterVar& iv : t.reduce_axes) reduce_shape.push_back(iv.extent);
      os << " reduce " << ReduceKindName(t.reduce) << "[" << absl::StrJoin(reduce_shape, ", ")
         << "] body ";
      printer.Print(os, t.body);
      os << " init ";
      printer.Print(os, t.init);
    }
    os << "\n";
  }
  std::vector<std::string> outs;
  for (int id : output_ids_) outs.push_back(absl::StrCat("T", id));
  os << "outputs " << absl::StrJoin(outs, ", ") << "\n";
  return os.str();
}

std::string ComputeDAG::WorkloadKey() const {
  return absl::StrFormat("%016x", Fnv1a64(CanonicalText()));
}

std::string ComputeDAG::ToString() const {
  std::ostringstream os;
  for (int id = 0; id < num_stages(); ++id) {
    const TensorNode& t = *stages_[id].node();
    StageKind kind = Kind(id);
    os << "[" << id << "] ";
    if (t.is_placeholder) {
      os << t.name;
    } else {
      os << t.name << "[" << AxesText(t.axes) << "] = ";
      if (t.reduce != ReduceKind::kNone) {
        std::vector<std::string> raxes;
        for (const IterVar& iv : t.reduce_axes)
          raxes.push_back(absl::StrCat(iv.name, "[", iv.extent, "]"));
        os << "reduce_" << ReduceKindName(t.reduce) << " over " << absl::StrJoin(raxes, ", ")
           << " of " << ir::ToString(t.body);
        if (!StructurallyEqual(t.init, ReduceIdentity(t.reduce, t.dtype))) {
          os << " from " << ir::ToString(t.init);
        }
      } else {
        os << ir::ToString(t.body);
      }
    }
    os << "  : " << ShapeText(t.dtype, t.shape) << "  (" << StageKindName(kind);
    if (NeedsMultiLevelTiling(id)) os << ", multi-level tiling";
    if (IsInlinable(id)) os << ", inlinable";
    if (std::find(output_ids_.begin(), output_ids_.end(), id) != output_ids_.end())
      os << ", output";
    os << ")\n";
    if (!t.is_placeholder) {
      os << "      FLOPs: " << absl::StrFormat("%.0f", StageFlops(id));
      if (!t.tag.empty()) os << "  tag: " << t.tag;
      os << "\n";
    }
    if (!consumers_[id].empty()) {
      std::vector<std::string> names;
      for (int c : consumers_[id]) names.push_back(stages_[c].name());
      os << "      consumers: " << absl::StrJoin(names, ", ") << "\n";
    }
  }
  double flops = Flops();
  os << absl::StrFormat("FLOPs: %.0f (%.6f GFLOP)\n", flops, flops / 1e9);
  os << "input bytes: " << InputBytes() << ", output bytes: " << OutputBytes() << "\n";
  os << "workload key: " << WorkloadKey() << "\n";
  return os.str();
}

}  // namespace tilesearch::ir
