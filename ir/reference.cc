#include "ir/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "ir/compensated_sum.h"
#include "ir/lower_naive.h"
#include "ir/magnitude_dag.h"

namespace tilesearch::ir {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Errors: a missing input, or one whose dtype, shape or value count differ from the placeholder's;
// a generated input (HostBuffer::source) where `allow_generated` is false (whole-program
// interpretation writes and reads `data`).
absl::Status CheckInput(const Tensor& t, const BufferMap& inputs, bool allow_generated) {
  auto it = inputs.find(t.name());
  if (it == inputs.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing input '", t.name(), "'"));
  }
  const HostBuffer& b = it->second;
  if (b.generated() && !allow_generated) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", t.name(), "' is generated on demand (", t.NumElements(),
                     " elements); interpreting the whole program needs its values in memory"));
  }
  const int64_t values = b.generated() ? b.NumElements() : static_cast<int64_t>(b.data.size());
  if (b.dtype != t.dtype() || b.shape != t.shape() || values != t.NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", t.name(), "' is ", TypeName(b.dtype), " ", ShapeText(b.shape), " with ", values,
        " values; the placeholder is ", TypeName(t.dtype()), " ", ShapeText(t.shape())));
  }
  return absl::OkStatus();
}

int64_t RowMajorOffset(const std::vector<int64_t>& shape, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d) offset = offset * shape[d] + index[d];
  return offset;
}

// A value of an expression: `i` for int and bool types, `f` for float types, and `m` the float64
// magnitude of the terms `f` is made of (EvaluatePointWithMagnitude's propagation rules).
struct Val {
  int64_t i = 0;
  double f = 0;
  double m = 0;
};

// A float value whose magnitude is its own (an input, a constant, a converted integer).
Val Leaf(double f) { return {0, f, std::fabs(f)}; }

// The first-order magnitude of f(x) for a unary function with slope `slope` at x:
// |f'(x)| · M(x) + |f(x)|.
Val Unary(double value, double slope, double mx) {
  return {0, value, std::fabs(slope) * mx + std::fabs(value)};
}

int64_t Wrap(int64_t v, ScalarType t) {
  if (t == ScalarType::kInt32) return static_cast<int32_t>(static_cast<uint32_t>(v));
  if (t == ScalarType::kBool) return v != 0;
  return v;
}

int64_t WrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t WrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t WrappingMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Evaluates stage definitions pointwise in float64 (integers exactly, with the IR's floor
// division and int32 wrap-around), memoizing every stage element it computes.
class PointEvaluator {
 public:
  /// `round_to_type`: round every float result to its expression's type and every stage element
  /// to its dtype, as the naive program does (float32 arithmetic without FMA); the magnitudes are
  /// then meaningless.
  PointEvaluator(const ComputeDAG& dag, const BufferMap& inputs, bool round_to_type = false)
      : dag_(dag), inputs_(inputs), round_(round_to_type) {}

  absl::Status status() const { return status_; }
  /// Stage bodies evaluated so far (one per non-memoized element, plus one per reduce iteration).
  int64_t steps() const { return steps_; }

  Val Stage(int id, const std::vector<int64_t>& index) {
    if (!status_.ok()) return {};
    const Tensor& t = dag_.stage(id);
    const int64_t offset = RowMajorOffset(t.shape(), index);
    if (t->is_placeholder) {
      auto it = inputs_.find(t.name());
      if (it == inputs_.end()) {
        Fail(absl::InvalidArgumentError(absl::StrCat("missing input '", t.name(), "'")));
        return {};
      }
      const double v = it->second.value(offset);
      return IsFloat(t.dtype()) ? Leaf(v) : Val{static_cast<int64_t>(v), 0};
    }
    auto memo = memo_.find(std::make_pair(id, offset));
    if (memo != memo_.end()) return memo->second;

    Env env;
    for (size_t d = 0; d < t->axes.size(); ++d) env.emplace_back(t->axes[d].name, index[d]);
    Val result;
    if (t->reduce == ReduceKind::kNone) {
      ++steps_;
      result = Eval(t->body, env);
      if (round_ && IsFloat(t.dtype())) result.f = RoundToType(result.f, t.dtype());
    } else {
      result = Eval(t->init, env);
      // A max / min reduction's infinite identity contributes no magnitude.
      if ((t->reduce == ReduceKind::kMax || t->reduce == ReduceKind::kMin) &&
          std::isinf(result.f)) {
        result.m = 0;
      }
      const size_t base = env.size();
      for (const IterVar& r : t->reduce_axes) env.emplace_back(r.name, 0);
      // Odometer over the reduce domain, last reduce axis fastest.
      while (true) {
        ++steps_;
        result = Combine(t->reduce, t.dtype(), result, Eval(t->body, env));
        if (round_ && IsFloat(t.dtype())) result.f = RoundToType(result.f, t.dtype());
        if (!status_.ok()) return {};
        int d = static_cast<int>(t->reduce_axes.size()) - 1;
        while (d >= 0 && ++env[base + d].second == t->reduce_axes[d].extent) {
          env[base + d].second = 0;
          --d;
        }
        if (d < 0) break;
      }
    }
    memo_.emplace(std::make_pair(id, offset), result);
    return result;
  }

  absl::Status CheckInputs() {
    for (int id : dag_.input_ids()) {
      RETURN_IF_ERROR(CheckInput(dag_.stage(id), inputs_, /*allow_generated=*/true));
    }
    return absl::OkStatus();
  }

 private:
  using Env = std::vector<std::pair<std::string, int64_t>>;

  void Fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }

  static Val Combine(ReduceKind kind, ScalarType t, Val acc, Val x) {
    if (IsFloat(t)) {
      switch (kind) {
        case ReduceKind::kSum:
          return {0, acc.f + x.f, acc.m + x.m};
        case ReduceKind::kProd:
          return {0, acc.f * x.f, acc.m * x.m};
        case ReduceKind::kMax:
        case ReduceKind::kMin: {
          // The value of the chosen term; the largest M of the terms (a tiny error near a tie
          // may flip the choice).
          const bool take =
              std::isnan(x.f) || (kind == ReduceKind::kMax ? x.f > acc.f : x.f < acc.f);
          return {0, take ? x.f : acc.f, std::max(acc.m, x.m)};
        }
        case ReduceKind::kNone:
          break;
      }
    } else {
      switch (kind) {
        case ReduceKind::kSum:
          return {Wrap(WrappingAdd(acc.i, x.i), t), 0};
        case ReduceKind::kProd:
          return {Wrap(WrappingMul(acc.i, x.i), t), 0};
        case ReduceKind::kMax:
          return {std::max(acc.i, x.i), 0};
        case ReduceKind::kMin:
          return {std::min(acc.i, x.i), 0};
        case ReduceKind::kNone:
          break;
      }
    }
    CHECK(false) << "combine of reduce kind none";
    return {};
  }

  Val Eval(const Expr& e, const Env& env) {
    Val v = EvalExact(e, env);
    if (round_ && IsFloat(e.type())) v.f = RoundToType(v.f, e.type());
    return v;
  }

  Val EvalExact(const Expr& e, const Env& env) {
    if (!status_.ok()) return {};
    switch (e.kind()) {
      case ExprKind::kIntImm:
        return {e.as<IntImmNode>()->value, 0};
      case ExprKind::kFloatImm:
        return Leaf(e.as<FloatImmNode>()->value);
      case ExprKind::kVar: {
        const std::string& name = e.as<VarNode>()->name;
        for (auto it = env.rbegin(); it != env.rend(); ++it) {
          if (it->first == name) return {it->second, 0};
        }
        Fail(absl::InvalidArgumentError(absl::StrCat("unknown variable '", name, "'")));
        return {};
      }
      case ExprKind::kNot:
        return {Eval(e.as<NotNode>()->a, env).i == 0, 0};
      case ExprKind::kSelect: {
        const auto* op = e.as<SelectNode>();
        const bool cond = Eval(op->cond, env).i != 0;
        Val taken = cond ? Eval(op->true_value, env) : Eval(op->false_value, env);
        // A condition on computed values (a relu-like kink): either branch's M, the larger.
        // (Magnitudes are meaningless when rounding; the condition's kind is cached per node, since
        // a padding select is evaluated once per reduction step.)
        if (!round_ && IsFloat(e.type()) && IsValueCondition(op)) {
          const Val other = cond ? Eval(op->false_value, env) : Eval(op->true_value, env);
          taken.m = std::max(taken.m, other.m);
        }
        return taken;
      }
      case ExprKind::kCast:
        return EvalCast(e.as<CastNode>(), env);
      case ExprKind::kCall:
        return EvalCall(e.as<CallNode>(), env);
      case ExprKind::kLoad:
        return EvalLoad(e, env);
      default:
        break;
    }
    CHECK(IsBinaryKind(e.kind())) << "unhandled expression kind " << ExprKindName(e.kind());
    auto [ea, eb] = BinaryOperands(e);
    const Val a = Eval(ea, env);
    const Val b = Eval(eb, env);
    const ScalarType t = ea.type();
    if (IsFloat(t)) {
      // Division by a constant is a product with its reciprocal: M(a) / |c| (a mean, a pool).
      if (e.kind() == ExprKind::kDiv && eb.kind() == ExprKind::kFloatImm) {
        return {0, a.f / b.f, a.m / std::fabs(b.f)};
      }
      return EvalFloatBinary(e.kind(), a, b);
    }
    return EvalIntBinary(e, t, a.i, b.i);
  }

  static Val EvalFloatBinary(ExprKind kind, const Val& va, const Val& vb) {
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    const double a = va.f, b = vb.f;
    switch (kind) {
      case ExprKind::kAdd:
        return {0, a + b, va.m + vb.m};
      case ExprKind::kSub:
        return {0, a - b, va.m + vb.m};
      case ExprKind::kMul:
        return {0, a * b, va.m * vb.m};
      case ExprKind::kDiv:
        // a · (1/b), the reciprocal by the unary rule: slope 1/b², value 1/b.
        return {0, a / b, va.m * (vb.m / (b * b) + 1 / std::fabs(b))};
      case ExprKind::kMod: {
        const double q = std::floor(a / b);
        return {0, a - b * q, va.m + std::fabs(q) * vb.m};
      }
      // min / max: the chosen value, the larger M (|max(a', b') − max(a, b)| <= the larger error).
      case ExprKind::kMin:
        if (std::isnan(a) || std::isnan(b)) return {0, kNaN, kNaN};
        return {0, b < a ? b : a, std::max(va.m, vb.m)};
      case ExprKind::kMax:
        if (std::isnan(a) || std::isnan(b)) return {0, kNaN, kNaN};
        return {0, b > a ? b : a, std::max(va.m, vb.m)};
      case ExprKind::kEQ:
        return {a == b, 0};
      case ExprKind::kNE:
        return {a != b, 0};
      case ExprKind::kLT:
        return {a < b, 0};
      case ExprKind::kLE:
        return {a <= b, 0};
      case ExprKind::kGT:
        return {a > b, 0};
      case ExprKind::kGE:
        return {a >= b, 0};
      default:
        break;
    }
    CHECK(false) << "float operands for " << ExprKindName(kind);
    return {};
  }

  Val EvalIntBinary(const Expr& e, ScalarType t, int64_t a, int64_t b) {
    switch (e.kind()) {
      case ExprKind::kAdd:
        return {Wrap(WrappingAdd(a, b), t), 0};
      case ExprKind::kSub:
        return {Wrap(WrappingSub(a, b), t), 0};
      case ExprKind::kMul:
        return {Wrap(WrappingMul(a, b), t), 0};
      case ExprKind::kDiv:
      case ExprKind::kMod: {
        if (b == 0) {
          Fail(absl::InvalidArgumentError(
              absl::StrCat("integer division by zero in ", ToString(e))));
          return {};
        }
        const bool mod = e.kind() == ExprKind::kMod;
        if (b == -1) return {mod ? 0 : Wrap(WrappingSub(0, a), t), 0};
        int64_t q = a / b;
        int64_t r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) {
          --q;
          r += b;
        }
        return {Wrap(mod ? r : q, t), 0};
      }
      case ExprKind::kMin:
        return {std::min(a, b), 0};
      case ExprKind::kMax:
        return {std::max(a, b), 0};
      case ExprKind::kEQ:
        return {a == b, 0};
      case ExprKind::kNE:
        return {a != b, 0};
      case ExprKind::kLT:
        return {a < b, 0};
      case ExprKind::kLE:
        return {a <= b, 0};
      case ExprKind::kGT:
        return {a > b, 0};
      case ExprKind::kGE:
        return {a >= b, 0};
      case ExprKind::kAnd:
        return {(a != 0) && (b != 0), 0};
      case ExprKind::kOr:
        return {(a != 0) || (b != 0), 0};
      default:
        break;
    }
    CHECK(false) << "unhandled binary kind " << ExprKindName(e.kind());
    return {};
  }

  Val EvalCast(const CastNode* op, const Env& env) {
    const Val v = Eval(op->value, env);
    const bool from_float = IsFloat(op->value.type());
    if (IsFloat(op->type)) return from_float ? v : Leaf(static_cast<double>(v.i));
    if (op->type == ScalarType::kBool) return {from_float ? v.f != 0 : v.i != 0, 0};
    if (!from_float) return {Wrap(v.i, op->type), 0};
    if (!std::isfinite(v.f)) return {0, 0};
    return {Wrap(static_cast<int64_t>(std::trunc(v.f)), op->type), 0};
  }

  Val EvalCall(const CallNode* op, const Env& env) {
    const Val a = Eval(op->args[0], env);
    if (!IsFloat(op->type)) {
      CHECK(op->op == CallOp::kAbs) << CallOpName(op->op) << " of an integer";
      return {Wrap(a.i < 0 ? WrappingSub(0, a.i) : a.i, op->type), 0};
    }
    const double x = a.f;
    const double mx = a.m;
    switch (op->op) {
      case CallOp::kExp: {
        const double y = std::exp(x);
        return Unary(y, y, mx);
      }
      case CallOp::kLog:
        return Unary(std::log(x), 1 / x, mx);
      case CallOp::kSqrt: {
        const double y = std::sqrt(x);
        return Unary(y, 0.5 / y, mx);
      }
      case CallOp::kRsqrt: {
        const double y = 1.0 / std::sqrt(x);
        return Unary(y, 0.5 * y / x, mx);
      }
      case CallOp::kTanh: {
        const double y = std::tanh(x);
        return Unary(y, 1 - y * y, mx);
      }
      case CallOp::kErf:
        return Unary(std::erf(x), 2 / std::sqrt(std::numbers::pi) * std::exp(-x * x), mx);
      case CallOp::kSigmoid: {
        const double y = 1.0 / (1.0 + std::exp(-x));
        return Unary(y, y * (1 - y), mx);
      }
      case CallOp::kAbs:
        return {0, std::fabs(x), mx};
      case CallOp::kPow: {
        const Val e = Eval(op->args[1], env);
        const double y = std::pow(x, e.f);
        // Slopes in x (e · x^(e−1)) and in the exponent (x^e · ln x); the latter only where the
        // exponent is computed (a constant's error is its own rounding) and x > 0.
        const double dx = e.f == 0 ? 0 : e.f * std::pow(x, e.f - 1);
        const double de = x > 0 ? y * std::log(x) : 0;
        return {0, y, std::fabs(dx) * mx + std::fabs(de) * e.m + std::fabs(y)};
      }
      case CallOp::kFloor:
        return Unary(std::floor(x), 1, mx);
      case CallOp::kTf32Round:
        return Unary(Tf32RoundValue(static_cast<float>(x)), 1, mx);
      case CallOp::kTf32Truncate:
        return Unary(Tf32TruncateValue(static_cast<float>(x)), 1, mx);
    }
    CHECK(false) << "unhandled call";
    return {};
  }

  Val EvalLoad(const Expr& e, const Env& env) {
    const auto* op = e.as<LoadNode>();
    const int id = dag_.StageId(op->buffer);
    if (id < 0) {
      Fail(absl::InvalidArgumentError(
          absl::StrCat("load of '", op->buffer, "', which is not a stage of the compute DAG")));
      return {};
    }
    const Tensor& t = dag_.stage(id);
    std::vector<int64_t> index;
    index.reserve(op->indices.size());
    for (size_t d = 0; d < op->indices.size(); ++d) {
      const int64_t i = Eval(op->indices[d], env).i;
      if (!status_.ok()) return {};
      if (i < 0 || i >= t.shape()[d]) {
        Fail(absl::OutOfRangeError(absl::StrCat("index ", i, " out of range [0, ", t.shape()[d],
                                                ") in dimension ", d, " of tensor '", t.name(),
                                                "' in ", ToString(e))));
        return {};
      }
      index.push_back(i);
    }
    const Val v = Stage(id, index);
    // A load of another type than its tensor's (not produced by Compute) converts like a cast.
    if (IsFloat(op->type) != IsFloat(t.dtype())) {
      return IsFloat(op->type) ? Leaf(static_cast<double>(v.i)) : Val{static_cast<int64_t>(v.f), 0};
    }
    return v;
  }

  bool IsValueCondition(const SelectNode* op) {
    auto [it, inserted] = value_condition_.try_emplace(op, false);
    if (inserted) it->second = ReadsFloatValues(op->cond);
    return it->second;
  }

  const ComputeDAG& dag_;
  const BufferMap& inputs_;
  const bool round_;
  absl::flat_hash_map<const SelectNode*, bool> value_condition_;
  absl::Status status_;
  int64_t steps_ = 0;
  absl::flat_hash_map<std::pair<int, int64_t>, Val> memo_;
};

}  // namespace

BufferMap MakeRandomInputs(const ComputeDAG& dag, uint64_t seed) {
  BufferMap inputs;
  uint64_t i = 0;
  for (int id : dag.input_ids()) {
    const Tensor& t = dag.stage(id);
    HostBuffer b = HostBuffer::Zeros(t.dtype(), t.shape());
    FillRandom(b, seed + i++);
    inputs.emplace(t.name(), std::move(b));
  }
  return inputs;
}

namespace {

// Runs `nest` (a lowering of `dag`) on `inputs`; the output buffers keyed by tensor name.
absl::StatusOr<BufferMap> RunNest(const ComputeDAG& dag, const LoopNest& nest,
                                  const BufferMap& inputs, Precision precision) {
  BufferMap buffers;
  for (int id : dag.input_ids()) {
    const Tensor& t = dag.stage(id);
    RETURN_IF_ERROR(CheckInput(t, inputs, /*allow_generated=*/false));
    buffers.emplace(t.name(), inputs.at(t.name()));
  }
  for (int id : dag.output_ids()) {
    const Tensor& t = dag.stage(id);
    buffers.emplace(t.name(), HostBuffer::Zeros(t.dtype(), t.shape()));
  }
  RETURN_IF_ERROR(Interpret(nest, buffers, InterpretOptions{precision}));
  BufferMap outputs;
  for (int id : dag.output_ids()) {
    const std::string& name = dag.stage(id).name();
    outputs.emplace(name, std::move(buffers.at(name)));
  }
  return outputs;
}

}  // namespace

absl::StatusOr<BufferMap> RunReference(const ComputeDAG& dag, const BufferMap& inputs,
                                       Precision precision) {
  ASSIGN_OR_RETURN(LoopNest nest, LowerNaive(dag));
  return RunNest(dag, nest, inputs, precision);
}

absl::StatusOr<BufferMap> RunCompensatedReference(const ComputeDAG& dag, const BufferMap& inputs) {
  ASSIGN_OR_RETURN(LoopNest nest, LowerNaive(dag));
  return RunNest(dag, CompensateFloatSums(nest), inputs, Precision::kNative);
}

namespace {

// Errors of a point's stage id and index (EvaluatePoint's).
absl::Status CheckPoint(const ComputeDAG& dag, int stage_id, const std::vector<int64_t>& index) {
  if (stage_id < 0 || stage_id >= dag.num_stages()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage id ", stage_id, " out of range [0, ", dag.num_stages(), ")"));
  }
  const Tensor& t = dag.stage(stage_id);
  if (index.size() != t.shape().size()) {
    return absl::InvalidArgumentError(absl::StrCat("index of rank ", index.size(), " for stage '",
                                                   t.name(), "' of rank ", t.shape().size()));
  }
  for (size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= t.shape()[d]) {
      return absl::OutOfRangeError(absl::StrCat("index ", index[d], " out of range [0, ",
                                                t.shape()[d], ") in dimension ", d, " of stage '",
                                                t.name(), "'"));
    }
  }
  return absl::OkStatus();
}

// One point evaluated by a PointEvaluator (rounding or not).
absl::StatusOr<PointValue> EvaluateOnePoint(const ComputeDAG& dag, int stage_id,
                                            const std::vector<int64_t>& index,
                                            const BufferMap& inputs, int64_t* steps,
                                            bool round_to_type) {
  RETURN_IF_ERROR(CheckPoint(dag, stage_id, index));
  PointEvaluator evaluator(dag, inputs, round_to_type);
  RETURN_IF_ERROR(evaluator.CheckInputs());
  const Val v = evaluator.Stage(stage_id, index);
  if (steps != nullptr) *steps = evaluator.steps();
  RETURN_IF_ERROR(evaluator.status());
  if (!IsFloat(dag.stage(stage_id).dtype())) {
    const double value = static_cast<double>(v.i);
    return PointValue{value, std::fabs(value)};
  }
  return PointValue{v.f, v.m};
}

}  // namespace

absl::StatusOr<PointValue> EvaluatePointWithMagnitude(const ComputeDAG& dag, int stage_id,
                                                      const std::vector<int64_t>& index,
                                                      const BufferMap& inputs, int64_t* steps) {
  return EvaluateOnePoint(dag, stage_id, index, inputs, steps, /*round_to_type=*/false);
}

absl::StatusOr<double> EvaluatePointRounded(const ComputeDAG& dag, int stage_id,
                                            const std::vector<int64_t>& index,
                                            const BufferMap& inputs, int64_t* steps) {
  ASSIGN_OR_RETURN(const PointValue v,
                   EvaluateOnePoint(dag, stage_id, index, inputs, steps, /*round_to_type=*/true));
  return v.value;
}

absl::StatusOr<std::vector<double>> EvaluateStage(const ComputeDAG& dag, int stage_id,
                                                  const BufferMap& inputs) {
  if (stage_id < 0 || stage_id >= dag.num_stages()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage id ", stage_id, " out of range [0, ", dag.num_stages(), ")"));
  }
  const Tensor& t = dag.stage(stage_id);
  PointEvaluator evaluator(dag, inputs);
  RETURN_IF_ERROR(evaluator.CheckInputs());
  const int64_t n = t.NumElements();
  std::vector<double> values(static_cast<size_t>(n));
  std::vector<int64_t> index(t.shape().size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    const Val v = evaluator.Stage(stage_id, index);
    RETURN_IF_ERROR(evaluator.status());
    values[static_cast<size_t>(flat)] = IsFloat(t.dtype()) ? v.f : static_cast<double>(v.i);
    // Row-major odometer, last dimension fastest.
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
    }
  }
  return values;
}

absl::StatusOr<double> EvaluatePoint(const ComputeDAG& dag, int stage_id,
                                     const std::vector<int64_t>& index, const BufferMap& inputs,
                                     int64_t* steps) {
  ASSIGN_OR_RETURN(const PointValue v,
                   EvaluatePointWithMagnitude(dag, stage_id, index, inputs, steps));
  return v.value;
}

}  // namespace tilesearch::ir
