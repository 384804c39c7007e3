#include "ir/expr.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <unordered_map>

#include "base/status.h"

namespace tilesearch::ir {

const char* ExprKindName(ExprKind kind) {
  switch (kind) {
#define TS_KIND_NAME(name) \
  case ExprKind::k##name:  \
    return #name;
    TS_EXPR_NODE_KINDS(TS_KIND_NAME)
#undef TS_KIND_NAME
  }
  return "?";
}

const char* CallOpName(CallOp op) {
  switch (op) {
    case CallOp::kExp:
      return "exp";
    case CallOp::kLog:
      return "log";
    case CallOp::kSqrt:
      return "sqrt";
    case CallOp::kRsqrt:
      return "rsqrt";
    case CallOp::kTanh:
      return "tanh";
    case CallOp::kErf:
      return "erf";
    case CallOp::kSigmoid:
      return "sigmoid";
    case CallOp::kAbs:
      return "abs";
    case CallOp::kPow:
      return "pow";
    case CallOp::kFloor:
      return "floor";
    case CallOp::kTf32Round:
      return "tf32_round";
    case CallOp::kTf32Truncate:
      return "tf32_truncate";
  }
  return "?";
}

Expr IntImmNode::Make(ScalarType t, int64_t value) {
  CHECK(IsInt(t) || IsBool(t)) << "IntImm of type " << TypeName(t);
  if (t == ScalarType::kBool) value = value != 0;
  if (t == ScalarType::kInt32) value = static_cast<int32_t>(static_cast<uint32_t>(value));
  return Expr(std::make_shared<IntImmNode>(t, value));
}

Expr FloatImmNode::Make(ScalarType t, double value) {
  CHECK(IsFloat(t)) << "FloatImm of type " << TypeName(t);
  return Expr(std::make_shared<FloatImmNode>(t, RoundToType(value, t)));
}

Expr VarNode::Make(std::string name, ScalarType t) {
  CHECK(!name.empty()) << "variable without a name";
  return Expr(std::make_shared<VarNode>(t, std::move(name)));
}

namespace {
constexpr bool IsComparison(ExprKind k) {
  return k == ExprKind::kEQ || k == ExprKind::kNE || k == ExprKind::kLT || k == ExprKind::kLE ||
         k == ExprKind::kGT || k == ExprKind::kGE;
}
constexpr bool IsLogical(ExprKind k) { return k == ExprKind::kAnd || k == ExprKind::kOr; }
}  // namespace

template <ExprKind K>
Expr BinaryNode<K>::Make(Expr a, Expr b) {
  CHECK(a.defined() && b.defined()) << ExprKindName(K) << " of an undefined operand";
  CHECK(a.type() == b.type()) << ExprKindName(K) << " of mismatched types " << TypeName(a.type())
                              << " and " << TypeName(b.type()) << ": " << a << ", " << b;
  ScalarType result = a.type();
  if constexpr (IsLogical(K)) {
    CHECK(a.type() == ScalarType::kBool) << ExprKindName(K) << " of non-bool operands";
  } else if constexpr (IsComparison(K)) {
    result = ScalarType::kBool;
  } else {
    CHECK(a.type() != ScalarType::kBool) << "arithmetic " << ExprKindName(K) << " on bool";
  }
  return Expr(std::make_shared<BinaryNode<K>>(result, std::move(a), std::move(b)));
}

#define TS_INSTANTIATE_BINARY(name) template struct BinaryNode<ExprKind::k##name>;
TS_INSTANTIATE_BINARY(Add)
TS_INSTANTIATE_BINARY(Sub)
TS_INSTANTIATE_BINARY(Mul)
TS_INSTANTIATE_BINARY(Div)
TS_INSTANTIATE_BINARY(Mod)
TS_INSTANTIATE_BINARY(Min)
TS_INSTANTIATE_BINARY(Max)
TS_INSTANTIATE_BINARY(EQ)
TS_INSTANTIATE_BINARY(NE)
TS_INSTANTIATE_BINARY(LT)
TS_INSTANTIATE_BINARY(LE)
TS_INSTANTIATE_BINARY(GT)
TS_INSTANTIATE_BINARY(GE)
TS_INSTANTIATE_BINARY(And)
TS_INSTANTIATE_BINARY(Or)
#undef TS_INSTANTIATE_BINARY

bool IsBinaryKind(ExprKind kind) { return kind >= ExprKind::kAdd && kind <= ExprKind::kOr; }

std::pair<const Expr&, const Expr&> BinaryOperands(const Expr& e) {
  CHECK(e.defined() && IsBinaryKind(e.kind())) << "not a binary node";
  const auto* node = static_cast<const BinaryNodeBase*>(e.get());
  return {node->a, node->b};
}

Expr MakeBinary(ExprKind kind, Expr a, Expr b) {
  switch (kind) {
#define TS_MAKE_BINARY(name) \
  case ExprKind::k##name:    \
    return name##Node::Make(std::move(a), std::move(b));
    TS_MAKE_BINARY(Add)
    TS_MAKE_BINARY(Sub)
    TS_MAKE_BINARY(Mul)
    TS_MAKE_BINARY(Div)
    TS_MAKE_BINARY(Mod)
    TS_MAKE_BINARY(Min)
    TS_MAKE_BINARY(Max)
    TS_MAKE_BINARY(EQ)
    TS_MAKE_BINARY(NE)
    TS_MAKE_BINARY(LT)
    TS_MAKE_BINARY(LE)
    TS_MAKE_BINARY(GT)
    TS_MAKE_BINARY(GE)
    TS_MAKE_BINARY(And)
    TS_MAKE_BINARY(Or)
#undef TS_MAKE_BINARY
    default:
      CHECK(false) << "MakeBinary of non-binary kind " << ExprKindName(kind);
  }
  return Expr();
}

Expr NotNode::Make(Expr a) {
  CHECK(a.defined() && a.type() == ScalarType::kBool) << "Not of a non-bool operand";
  return Expr(std::make_shared<NotNode>(std::move(a)));
}

Expr SelectNode::Make(Expr cond, Expr t, Expr f) {
  CHECK(cond.defined() && t.defined() && f.defined()) << "Select of an undefined operand";
  CHECK(cond.type() == ScalarType::kBool) << "Select condition is " << TypeName(cond.type());
  CHECK(t.type() == f.type()) << "Select of mismatched types " << TypeName(t.type()) << " and "
                              << TypeName(f.type());
  return Expr(std::make_shared<SelectNode>(std::move(cond), std::move(t), std::move(f)));
}

Expr CastNode::Make(ScalarType t, Expr value) {
  CHECK(value.defined()) << "Cast of an undefined operand";
  return Expr(std::make_shared<CastNode>(t, std::move(value)));
}

Expr CallNode::Make(CallOp op, std::vector<Expr> args) {
  size_t arity = op == CallOp::kPow ? 2 : 1;
  CHECK(args.size() == arity) << CallOpName(op) << " takes " << arity << " arguments, got "
                              << args.size();
  for (const Expr& a : args) {
    CHECK(a.defined()) << CallOpName(op) << " of an undefined argument";
    CHECK(a.type() == args[0].type()) << CallOpName(op) << " of mismatched argument types";
  }
  ScalarType t = args[0].type();
  if (op == CallOp::kAbs) {
    CHECK(IsFloat(t) || IsInt(t)) << "abs of " << TypeName(t);
  } else if (op == CallOp::kTf32Round || op == CallOp::kTf32Truncate) {
    CHECK(t == ScalarType::kFloat32) << CallOpName(op) << " of " << TypeName(t);
  } else {
    CHECK(IsFloat(t)) << CallOpName(op) << " of non-float type " << TypeName(t);
  }
  return Expr(std::make_shared<CallNode>(t, op, std::move(args)));
}

Expr LoadNode::Make(ScalarType t, std::string buffer, std::vector<Expr> indices,
                    std::shared_ptr<const TensorNode> producer) {
  CHECK(!buffer.empty()) << "Load from a buffer without a name";
  for (const Expr& i : indices) {
    CHECK(i.defined() && i.type() == ScalarType::kInt64)
        << "index of Load from '" << buffer << "' is not int64";
  }
  return Expr(
      std::make_shared<LoadNode>(t, std::move(buffer), std::move(indices), std::move(producer)));
}

// ---------------------------------------------------------------------------------------------

Expr IntConst(int64_t value, ScalarType t) { return IntImmNode::Make(t, value); }
Expr FloatConst(double value, ScalarType t) { return FloatImmNode::Make(t, value); }
Expr BoolConst(bool value) { return IntImmNode::Make(ScalarType::kBool, value); }
Expr MakeVar(std::string name, ScalarType t) { return VarNode::Make(std::move(name), t); }

Expr MakeConst(ScalarType t, double value) {
  if (IsFloat(t)) return FloatImmNode::Make(t, value);
  return IntImmNode::Make(t, static_cast<int64_t>(value));
}

std::optional<int64_t> AsConstInt(const Expr& e) {
  if (const auto* imm = e.as<IntImmNode>()) return imm->value;
  return std::nullopt;
}

std::optional<double> AsConstNumber(const Expr& e) {
  if (const auto* imm = e.as<IntImmNode>()) return static_cast<double>(imm->value);
  if (const auto* imm = e.as<FloatImmNode>()) return imm->value;
  return std::nullopt;
}

namespace {
// Promotes a constant operand to the other operand's type so `x + 1` works for float x.
void Promote(Expr& a, Expr& b) {
  if (a.type() == b.type()) return;
  if (auto v = AsConstNumber(a); v && !b.as<IntImmNode>() && !b.as<FloatImmNode>()) {
    a = MakeConst(b.type(), *v);
  } else if (auto w = AsConstNumber(b)) {
    b = MakeConst(a.type(), *w);
  }
}
}  // namespace

#define TS_BINARY_OPERATOR(op, name)                     \
  Expr operator op(Expr a, Expr b) {                     \
    Promote(a, b);                                       \
    return name##Node::Make(std::move(a), std::move(b)); \
  }                                                      \
  Expr operator op(Expr a, double b) {                   \
    Expr c = MakeConst(a.type(), b);                     \
    return name##Node::Make(std::move(a), std::move(c)); \
  }
TS_BINARY_OPERATOR(+, Add)
TS_BINARY_OPERATOR(-, Sub)
TS_BINARY_OPERATOR(*, Mul)
TS_BINARY_OPERATOR(/, Div)
TS_BINARY_OPERATOR(%, Mod)
TS_BINARY_OPERATOR(<, LT)
TS_BINARY_OPERATOR(<=, LE)
TS_BINARY_OPERATOR(>, GT)
TS_BINARY_OPERATOR(>=, GE)
TS_BINARY_OPERATOR(==, EQ)
#undef TS_BINARY_OPERATOR

// The constant is made in its own statement: function arguments are evaluated in an unspecified
// order, so `MakeConst(b.type(), a) + std::move(b)` may read `b` after it was moved from.
#define TS_BINARY_OPERATOR_LEFT(op)      \
  Expr operator op(double a, Expr b) {   \
    Expr c = MakeConst(b.type(), a);     \
    return std::move(c) op std::move(b); \
  }
TS_BINARY_OPERATOR_LEFT(+)
TS_BINARY_OPERATOR_LEFT(-)
TS_BINARY_OPERATOR_LEFT(*)
TS_BINARY_OPERATOR_LEFT(/)
#undef TS_BINARY_OPERATOR_LEFT
Expr operator-(Expr a) {
  Expr zero = MakeConst(a.type(), 0);
  return std::move(zero) - std::move(a);
}
Expr operator!=(Expr a, Expr b) {
  Promote(a, b);
  return NENode::Make(std::move(a), std::move(b));
}
Expr operator!=(Expr a, double b) {
  Expr c = MakeConst(a.type(), b);
  return NENode::Make(std::move(a), std::move(c));
}
Expr operator&&(Expr a, Expr b) { return AndNode::Make(std::move(a), std::move(b)); }
Expr operator||(Expr a, Expr b) { return OrNode::Make(std::move(a), std::move(b)); }
Expr operator!(Expr a) { return NotNode::Make(std::move(a)); }

Expr Min(Expr a, Expr b) {
  Promote(a, b);
  return MinNode::Make(std::move(a), std::move(b));
}
Expr Max(Expr a, Expr b) {
  Promote(a, b);
  return MaxNode::Make(std::move(a), std::move(b));
}
Expr Select(Expr cond, Expr t, Expr f) {
  Promote(t, f);
  return SelectNode::Make(std::move(cond), std::move(t), std::move(f));
}
Expr Cast(ScalarType t, Expr value) {
  if (value.type() == t) return value;
  return CastNode::Make(t, std::move(value));
}
Expr Exp(Expr x) { return CallNode::Make(CallOp::kExp, {std::move(x)}); }
Expr Log(Expr x) { return CallNode::Make(CallOp::kLog, {std::move(x)}); }
Expr Sqrt(Expr x) { return CallNode::Make(CallOp::kSqrt, {std::move(x)}); }
Expr Rsqrt(Expr x) { return CallNode::Make(CallOp::kRsqrt, {std::move(x)}); }
Expr Tanh(Expr x) { return CallNode::Make(CallOp::kTanh, {std::move(x)}); }
Expr Erf(Expr x) { return CallNode::Make(CallOp::kErf, {std::move(x)}); }
Expr Sigmoid(Expr x) { return CallNode::Make(CallOp::kSigmoid, {std::move(x)}); }
Expr Abs(Expr x) { return CallNode::Make(CallOp::kAbs, {std::move(x)}); }
Expr Pow(Expr x, Expr y) {
  Promote(x, y);
  return CallNode::Make(CallOp::kPow, {std::move(x), std::move(y)});
}
Expr Floor(Expr x) { return CallNode::Make(CallOp::kFloor, {std::move(x)}); }
namespace {
// TF32 keeps the sign, the exponent and 10 mantissa bits: the low 13 bits of a float32 go.
constexpr uint32_t kTf32Mask = 0xFFFFE000u;
}  // namespace

float Tf32TruncateValue(float x) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & kTf32Mask);
}
float Tf32RoundValue(float x) {
  // cvt.rna.tf32.f32: add half of the dropped range to the magnitude, then truncate.
  if (!std::isfinite(x)) return x;
  return std::bit_cast<float>((std::bit_cast<uint32_t>(x) + 0x1000u) & kTf32Mask);
}
Expr Tf32Round(Expr x) { return CallNode::Make(CallOp::kTf32Round, {std::move(x)}); }
Expr Tf32Truncate(Expr x) { return CallNode::Make(CallOp::kTf32Truncate, {std::move(x)}); }

// ---------------------------------------------------------------------------------------------

bool StructurallyEqual(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a.kind() != b.kind() || a.type() != b.type()) return false;
  if (IsBinaryKind(a.kind())) {
    auto [a0, a1] = BinaryOperands(a);
    auto [b0, b1] = BinaryOperands(b);
    return StructurallyEqual(a0, b0) && StructurallyEqual(a1, b1);
  }
  switch (a.kind()) {
    case ExprKind::kIntImm:
      return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
    case ExprKind::kFloatImm: {
      double x = a.as<FloatImmNode>()->value, y = b.as<FloatImmNode>()->value;
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    case ExprKind::kVar:
      return a.as<VarNode>()->name == b.as<VarNode>()->name;
    case ExprKind::kNot:
      return StructurallyEqual(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case ExprKind::kSelect: {
      const auto* x = a.as<SelectNode>();
      const auto* y = b.as<SelectNode>();
      return StructurallyEqual(x->cond, y->cond) &&
             StructurallyEqual(x->true_value, y->true_value) &&
             StructurallyEqual(x->false_value, y->false_value);
    }
    case ExprKind::kCast:
      return StructurallyEqual(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case ExprKind::kCall: {
      const auto* x = a.as<CallNode>();
      const auto* y = b.as<CallNode>();
      if (x->op != y->op || x->args.size() != y->args.size()) return false;
      for (size_t i = 0; i < x->args.size(); ++i) {
        if (!StructurallyEqual(x->args[i], y->args[i])) return false;
      }
      return true;
    }
    case ExprKind::kLoad: {
      const auto* x = a.as<LoadNode>();
      const auto* y = b.as<LoadNode>();
      if (x->buffer != y->buffer || x->indices.size() != y->indices.size()) return false;
      for (size_t i = 0; i < x->indices.size(); ++i) {
        if (!StructurallyEqual(x->indices[i], y->indices[i])) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Visitor

void ExprVisitor::Visit(const Expr& e) {
  if (!e.defined()) return;
  switch (e.kind()) {
#define TS_DISPATCH(name)                                    \
  case ExprKind::k##name:                                    \
    Visit##name(static_cast<const name##Node*>(e.get()), e); \
    break;
    TS_EXPR_NODE_KINDS(TS_DISPATCH)
#undef TS_DISPATCH
  }
}

void ExprVisitor::VisitIntImm(const IntImmNode*, const Expr&) {}
void ExprVisitor::VisitFloatImm(const FloatImmNode*, const Expr&) {}
void ExprVisitor::VisitVar(const VarNode*, const Expr&) {}
#define TS_VISIT_BINARY(name)                                        \
  void ExprVisitor::Visit##name(const name##Node* op, const Expr&) { \
    Visit(op->a);                                                    \
    Visit(op->b);                                                    \
  }
TS_VISIT_BINARY(Add)
TS_VISIT_BINARY(Sub)
TS_VISIT_BINARY(Mul)
TS_VISIT_BINARY(Div)
TS_VISIT_BINARY(Mod)
TS_VISIT_BINARY(Min)
TS_VISIT_BINARY(Max)
TS_VISIT_BINARY(EQ)
TS_VISIT_BINARY(NE)
TS_VISIT_BINARY(LT)
TS_VISIT_BINARY(LE)
TS_VISIT_BINARY(GT)
TS_VISIT_BINARY(GE)
TS_VISIT_BINARY(And)
TS_VISIT_BINARY(Or)
#undef TS_VISIT_BINARY
void ExprVisitor::VisitNot(const NotNode* op, const Expr&) { Visit(op->a); }
void ExprVisitor::VisitSelect(const SelectNode* op, const Expr&) {
  Visit(op->cond);
  Visit(op->true_value);
  Visit(op->false_value);
}
void ExprVisitor::VisitCast(const CastNode* op, const Expr&) { Visit(op->value); }
void ExprVisitor::VisitCall(const CallNode* op, const Expr&) {
  for (const Expr& a : op->args) Visit(a);
}
void ExprVisitor::VisitLoad(const LoadNode* op, const Expr&) {
  for (const Expr& i : op->indices) Visit(i);
}

// ---------------------------------------------------------------------------------------------
// Mutator

Expr ExprMutator::Mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e.kind()) {
#define TS_DISPATCH(name) \
  case ExprKind::k##name: \
    return Mutate##name(static_cast<const name##Node*>(e.get()), e);
    TS_EXPR_NODE_KINDS(TS_DISPATCH)
#undef TS_DISPATCH
  }
  return e;
}

Expr ExprMutator::MutateIntImm(const IntImmNode*, const Expr& e) { return e; }
Expr ExprMutator::MutateFloatImm(const FloatImmNode*, const Expr& e) { return e; }
Expr ExprMutator::MutateVar(const VarNode*, const Expr& e) { return e; }
#define TS_MUTATE_BINARY(name)                                          \
  Expr ExprMutator::Mutate##name(const name##Node* op, const Expr& e) { \
    Expr a = Mutate(op->a);                                             \
    Expr b = Mutate(op->b);                                             \
    if (a.same_as(op->a) && b.same_as(op->b)) return e;                 \
    return name##Node::Make(std::move(a), std::move(b));                \
  }
TS_MUTATE_BINARY(Add)
TS_MUTATE_BINARY(Sub)
TS_MUTATE_BINARY(Mul)
TS_MUTATE_BINARY(Div)
TS_MUTATE_BINARY(Mod)
TS_MUTATE_BINARY(Min)
TS_MUTATE_BINARY(Max)
TS_MUTATE_BINARY(EQ)
TS_MUTATE_BINARY(NE)
TS_MUTATE_BINARY(LT)
TS_MUTATE_BINARY(LE)
TS_MUTATE_BINARY(GT)
TS_MUTATE_BINARY(GE)
TS_MUTATE_BINARY(And)
TS_MUTATE_BINARY(Or)
#undef TS_MUTATE_BINARY
Expr ExprMutator::MutateNot(const NotNode* op, const Expr& e) {
  Expr a = Mutate(op->a);
  return a.same_as(op->a) ? e : NotNode::Make(std::move(a));
}
Expr ExprMutator::MutateSelect(const SelectNode* op, const Expr& e) {
  Expr c = Mutate(op->cond);
  Expr t = Mutate(op->true_value);
  Expr f = Mutate(op->false_value);
  if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return e;
  return SelectNode::Make(std::move(c), std::move(t), std::move(f));
}
Expr ExprMutator::MutateCast(const CastNode* op, const Expr& e) {
  Expr v = Mutate(op->value);
  return v.same_as(op->value) ? e : CastNode::Make(op->type, std::move(v));
}
Expr ExprMutator::MutateCall(const CallNode* op, const Expr& e) {
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr& a : op->args) {
    args.push_back(Mutate(a));
    changed |= !args.back().same_as(a);
  }
  return changed ? CallNode::Make(op->op, std::move(args)) : e;
}
Expr ExprMutator::MutateLoad(const LoadNode* op, const Expr& e) {
  std::vector<Expr> indices;
  bool changed = false;
  for (const Expr& i : op->indices) {
    indices.push_back(Mutate(i));
    changed |= !indices.back().same_as(i);
  }
  return changed ? LoadNode::Make(op->type, op->buffer, std::move(indices), op->producer) : e;
}

namespace {
class Substituter : public ExprMutator {
 public:
  explicit Substituter(const std::vector<std::pair<std::string, Expr>>& r) {
    for (const auto& [name, value] : r) map_[name] = value;
  }

 protected:
  Expr MutateVar(const VarNode* op, const Expr& e) override {
    auto it = map_.find(op->name);
    return it == map_.end() ? e : it->second;
  }

 private:
  std::unordered_map<std::string, Expr> map_;
};
}  // namespace

Expr Substitute(const Expr& e, const std::vector<std::pair<std::string, Expr>>& replacements) {
  if (replacements.empty()) return e;
  Substituter s(replacements);
  return s.Mutate(e);
}

int64_t ExprSize(const Expr& e) {
  if (!e.defined()) return 0;
  if (IsBinaryKind(e.kind())) {
    auto [a, b] = BinaryOperands(e);
    return 1 + ExprSize(a) + ExprSize(b);
  }
  switch (e.kind()) {
    case ExprKind::kNot:
      return 1 + ExprSize(e.as<NotNode>()->a);
    case ExprKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      return 1 + ExprSize(s->cond) + ExprSize(s->true_value) + ExprSize(s->false_value);
    }
    case ExprKind::kCast:
      return 1 + ExprSize(e.as<CastNode>()->value);
    case ExprKind::kCall: {
      int64_t n = 1;
      for (const Expr& a : e.as<CallNode>()->args) n += ExprSize(a);
      return n;
    }
    case ExprKind::kLoad: {
      int64_t n = 1;
      for (const Expr& i : e.as<LoadNode>()->indices) n += ExprSize(i);
      return n;
    }
    default:
      return 1;
  }
}

}  // namespace tilesearch::ir
