// The magnitude program (ir/magnitude_dag.h): M(expression) as an expression.
#include "ir/magnitude_dag.h"

#include <cmath>
#include <map>
#include <numbers>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/tensor.h"

namespace tilesearch::ir {
namespace {

constexpr ScalarType kF32 = ScalarType::kFloat32;

// A float value as float32 (the magnitude program computes in float32).
Expr F32(const Expr& e) { return Cast(kF32, e); }

// |f'(x)| · M(x) + |f(x)|, the first-order rule of a unary function.
Expr UnaryRule(const Expr& value, const Expr& slope, const Expr& mx) {
  return Abs(slope) * mx + Abs(value);
}

// Builds M(e) for float expressions of one stage body; `magnitude_of` maps a computed float
// stage's name to its magnitude stage.
class MagnitudeBuilder {
 public:
  explicit MagnitudeBuilder(const std::map<std::string, Tensor>& magnitude_of)
      : magnitude_of_(magnitude_of) {}

  // M(e) of a float expression `e` (float32).
  Expr M(const Expr& e) const {
    switch (e.kind()) {
      case ExprKind::kFloatImm:
        return FloatConst(std::fabs(e.as<FloatImmNode>()->value));
      case ExprKind::kLoad:
        return LoadRule(e);
      case ExprKind::kCast: {
        const Expr& value = e.as<CastNode>()->value;
        return IsFloat(value.type()) ? M(value) : Abs(F32(e));
      }
      case ExprKind::kSelect: {
        // On computed values (a kink): the larger M of both; on indices (padding): the taken one's
        // (the other branch may read out of bounds there).
        const auto* op = e.as<SelectNode>();
        if (ReadsFloatValues(op->cond)) return Max(M(op->true_value), M(op->false_value));
        return Select(op->cond, M(op->true_value), M(op->false_value));
      }
      case ExprKind::kCall:
        return CallRule(e.as<CallNode>());
      default:
        break;
    }
    CHECK(IsBinaryKind(e.kind())) << "no magnitude rule for " << ExprKindName(e.kind());
    auto [a, b] = BinaryOperands(e);
    return BinaryRule(e.kind(), a, b);
  }

 private:
  Expr LoadRule(const Expr& e) const {
    const auto* op = e.as<LoadNode>();
    auto it = magnitude_of_.find(op->buffer);
    const bool same_kind =
        op->producer == nullptr || IsFloat(op->producer->dtype) == IsFloat(e.type());
    // A computed float stage read as a float: its magnitude stage at the same element.
    if (it != magnitude_of_.end() && same_kind) return it->second(op->indices);
    // An input, or an integer converted by the load: its own |value|.
    return Abs(F32(e));
  }

  Expr BinaryRule(ExprKind kind, const Expr& a, const Expr& b) const {
    switch (kind) {
      case ExprKind::kAdd:
      case ExprKind::kSub:
        return M(a) + M(b);
      case ExprKind::kMul:
        return M(a) * M(b);
      case ExprKind::kDiv: {
        // By a constant: a product with its reciprocal. Else a · (1/b) with 1/b by the unary rule.
        if (b.kind() == ExprKind::kFloatImm) {
          return M(a) / FloatConst(std::fabs(b.as<FloatImmNode>()->value));
        }
        const Expr fb = F32(b);
        return M(a) * (M(b) / (fb * fb) + FloatConst(1.0) / Abs(fb));
      }
      case ExprKind::kMod:
        return M(a) + Abs(Floor(F32(a) / F32(b))) * M(b);
      case ExprKind::kMin:
      case ExprKind::kMax:
        return Max(M(a), M(b));
      default:
        break;
    }
    CHECK(false) << "no magnitude rule for float " << ExprKindName(kind);
    return {};
  }

  Expr CallRule(const CallNode* op) const {
    const Expr x = F32(op->args[0]);
    const Expr mx = M(op->args[0]);
    switch (op->op) {
      case CallOp::kExp: {
        const Expr y = Exp(x);
        return UnaryRule(y, y, mx);
      }
      case CallOp::kLog:
        return UnaryRule(Log(x), FloatConst(1.0) / x, mx);
      case CallOp::kSqrt: {
        const Expr y = Sqrt(x);
        return UnaryRule(y, FloatConst(0.5) / y, mx);
      }
      case CallOp::kRsqrt: {
        const Expr y = Rsqrt(x);
        return UnaryRule(y, FloatConst(0.5) * y / x, mx);
      }
      case CallOp::kTanh: {
        // tanh' = 1 − tanh² cancels in float32 where tanh saturates (its relative error reached
        // 5 % of M in a tanh-GELU on the H200, and the check then dropped the allowance); the same
        // slope as 4z / (1 + z)², z = e^(−2|x|), has no cancellation and no overflow.
        const Expr z = Exp(FloatConst(-2.0) * Abs(x));
        const Expr one_z = FloatConst(1.0) + z;
        return UnaryRule(Tanh(x), FloatConst(4.0) * z / (one_z * one_z), mx);
      }
      case CallOp::kErf:
        return UnaryRule(Erf(x), FloatConst(2 / std::sqrt(std::numbers::pi)) * Exp(-(x * x)), mx);
      case CallOp::kSigmoid: {
        // σ' = σ(1 − σ) as z / (1 + z)², z = e^(−|x|): no cancellation where σ saturates (as tanh).
        const Expr z = Exp(-Abs(x));
        const Expr one_z = FloatConst(1.0) + z;
        return UnaryRule(Sigmoid(x), z / (one_z * one_z), mx);
      }
      case CallOp::kAbs:
        return mx;
      case CallOp::kPow: {
        const Expr e = F32(op->args[1]);
        const Expr y = Pow(x, e);
        // Slopes in x (e · x^(e−1), 0 for e = 0) and, where x > 0, in the exponent (x^e · ln x).
        const Expr dx =
            Select(e == FloatConst(0.0), FloatConst(0.0), e * Pow(x, e - FloatConst(1.0)));
        const Expr de = Select(x > FloatConst(0.0), y * Log(x), FloatConst(0.0));
        return Abs(dx) * mx + Abs(de) * M(op->args[1]) + Abs(y);
      }
      case CallOp::kFloor:
        return UnaryRule(Floor(x), FloatConst(1.0), mx);
      case CallOp::kTf32Round:
        return UnaryRule(Tf32Round(x), FloatConst(1.0), mx);
      case CallOp::kTf32Truncate:
        return UnaryRule(Tf32Truncate(x), FloatConst(1.0), mx);
    }
    CHECK(false) << "no magnitude rule for " << CallOpName(op->op);
    return {};
  }

  const std::map<std::string, Tensor>& magnitude_of_;
};

std::vector<int64_t> Extents(const std::vector<IterVar>& vars) {
  std::vector<int64_t> extents;
  for (const IterVar& v : vars) extents.push_back(v.extent);
  return extents;
}

std::vector<std::string> Names(const std::vector<IterVar>& vars) {
  std::vector<std::string> names;
  for (const IterVar& v : vars) names.push_back(v.name);
  return names;
}

// The magnitude stage of the float compute stage `s`.
absl::StatusOr<Tensor> MagnitudeStage(const Tensor& s, const MagnitudeBuilder& builder) {
  const TensorNode& n = *s.node();
  ComputeOptions options;
  options.axis_names = Names(n.axes);
  options.reduce_axis_names = Names(n.reduce_axes);
  options.tag = "magnitude";
  const std::string name = n.name + kMagnitudeSuffix;
  if (n.reduce == ReduceKind::kNone) {
    const Expr body = builder.M(n.body);
    return Compute(
        name, n.shape, [&](const std::vector<Expr>&) { return body; }, options);
  }
  const Expr init = n.init.defined() ? n.init : ReduceIdentity(n.reduce, n.dtype);
  const Expr term = builder.M(n.body);
  if (n.reduce == ReduceKind::kSum || n.reduce == ReduceKind::kProd) {
    return Reduce(
        name, n.shape, n.reduce, Extents(n.reduce_axes),
        [&](const std::vector<Expr>&, const std::vector<Expr>&) { return term; }, builder.M(init),
        options);
  }
  // Max / min: the largest M of the terms (and of a finite init).
  const Expr init_m =
      std::isinf(AsConstNumber(init).value_or(0.0)) ? FloatConst(0.0) : builder.M(init);
  return Reduce(
      name, n.shape, ReduceKind::kMax, Extents(n.reduce_axes),
      [&](const std::vector<Expr>&, const std::vector<Expr>&) { return term; }, init_m, options);
}

}  // namespace

bool ReadsFloatValues(const Expr& e) {
  class Finder : public ExprVisitor {
   public:
    bool found = false;
    void Visit(const Expr& x) override {
      if (found) return;
      if (IsFloat(x.type())) {
        found = true;
        return;
      }
      ExprVisitor::Visit(x);
    }
  };
  Finder finder;
  finder.Visit(e);
  return finder.found;
}

BufferMap KeyedBySource(const MagnitudeProgram& program, const ComputeDAG& source,
                        BufferMap computed) {
  BufferMap by_source;
  for (size_t k = 0; k < program.source_output.size(); ++k) {
    const std::string& name = program.dag.stage(program.dag.output_ids()[k]).name();
    const std::string& source_name =
        source.stage(source.output_ids()[program.source_output[k]]).name();
    by_source.emplace(source_name, std::move(computed.at(name)));
  }
  return by_source;
}

absl::StatusOr<MagnitudeProgram> BuildMagnitudeProgram(const ComputeDAG& source) {
  std::map<std::string, Tensor> magnitude_of;
  const MagnitudeBuilder builder(magnitude_of);
  for (const Tensor& s : source.stages()) {
    if (s->is_placeholder || !IsFloat(s.dtype())) continue;
    const std::string name = s.name() + kMagnitudeSuffix;
    if (source.StageId(name) >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("magnitude program: stage '", name,
                       "' of the compute DAG takes the name of the magnitude "
                       "stage of '",
                       s.name(), "'"));
    }
    ASSIGN_OR_RETURN(Tensor m, MagnitudeStage(s, builder));
    magnitude_of.emplace(s.name(), std::move(m));
  }
  MagnitudeProgram program;
  std::vector<Tensor> outputs;
  for (size_t k = 0; k < source.output_ids().size(); ++k) {
    const Tensor& out = source.stage(source.output_ids()[k]);
    auto it = magnitude_of.find(out.name());
    if (it == magnitude_of.end()) continue;
    outputs.push_back(it->second);
    program.source_output.push_back(static_cast<int>(k));
  }
  if (outputs.empty()) {
    return absl::InvalidArgumentError("magnitude program: the compute DAG has no float output");
  }
  ASSIGN_OR_RETURN(program.dag, ComputeDAG::Create(outputs));
  return program;
}

}  // namespace tilesearch::ir
