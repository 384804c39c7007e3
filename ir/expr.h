// Scalar expressions: the language of compute bodies and of loop-nest index and value arithmetic.
//
// Semantics (stated once, here):
// - Nodes are immutable and shared (std::shared_ptr<const ExprNode>); an Expr is a cheap handle.
// - Every node has a ScalarType. Binary arithmetic needs both operands of the same type (the
//   factories CHECK it; the operator overloads below promote a constant operand to the other side's
//   type). Comparisons and Not/And/Or produce bool; And/Or/Not need bool operands.
// - Integer arithmetic is two's complement in the node's type (int32 wraps; int64 never overflows
//   for the index ranges tilesearch produces). Integer Div and Mod use FLOOR semantics:
//   a / b = floor(a / b) and a % b = a - b * floor(a / b), so -7 / 2 = -4 and -7 % 2 = 1 (the
//   result of % has the sign of b). Integer division by zero is an error of the evaluator.
// - Float Div is IEEE division; float Mod is a - b * floor(a / b).
// - float32 arithmetic rounds every operation to float32; float16 / bfloat16 values are widened to
//   float32 for arithmetic and rounded only when stored (they are storage types).
// - Select(c, t, f) evaluates only the branch it takes, like an if-then-else: a Load in the branch
//   not taken is never performed (padding in conv2d relies on this).
// - Evaluation order of operands is unspecified; expressions have no side effects.
// - Index expressions (loop variables, tensor indices) are int64.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ir/type.h"

namespace tilesearch::ir {

struct TensorNode;  // defined in ir/tensor.h; Loads in compute bodies point at their producer

/// One X-macro lists the expression node kinds (Halide's design).
#define TS_EXPR_NODE_KINDS(X) \
  X(IntImm)                   \
  X(FloatImm)                 \
  X(Var)                      \
  X(Add)                      \
  X(Sub)                      \
  X(Mul)                      \
  X(Div)                      \
  X(Mod)                      \
  X(Min)                      \
  X(Max)                      \
  X(EQ)                       \
  X(NE)                       \
  X(LT)                       \
  X(LE)                       \
  X(GT)                       \
  X(GE)                       \
  X(And)                      \
  X(Or)                       \
  X(Not)                      \
  X(Select)                   \
  X(Cast)                     \
  X(Call)                     \
  X(Load)

enum class ExprKind : uint8_t {
#define TS_DECLARE_KIND(name) k##name,
  TS_EXPR_NODE_KINDS(TS_DECLARE_KIND)
#undef TS_DECLARE_KIND
};

/// Name of a kind without the `k` ("Add", "Load").
const char* ExprKindName(ExprKind kind);

/// Base of all expression nodes.
struct ExprNode {
  ExprNode(ExprKind k, ScalarType t) : kind(k), type(t) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const ScalarType type;
};

/// A handle to an immutable expression node; may be undefined (null).
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  ExprKind kind() const { return node_->kind; }
  ScalarType type() const { return node_->type; }
  /// True when both handles point at the same node (identity, not structural equality).
  bool same_as(const Expr& other) const { return node_ == other.node_; }

  /// The node as `T` when its kind is `T::kKind`, else nullptr.
  template <typename T>
  const T* as() const {
    if (node_ && node_->kind == T::kKind) return static_cast<const T*>(node_.get());
    return nullptr;
  }

 private:
  std::shared_ptr<const ExprNode> node_;
};

// ---------------------------------------------------------------------------------------------
// Nodes. Each has a static Make that CHECKs its operands and returns an Expr.

struct IntImmNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kIntImm;
  IntImmNode(ScalarType t, int64_t v) : ExprNode(kKind, t), value(v) {}
  /// `t` must be int32, int64 or bool.
  static Expr Make(ScalarType t, int64_t value);
  const int64_t value;
};

struct FloatImmNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kFloatImm;
  FloatImmNode(ScalarType t, double v) : ExprNode(kKind, t), value(v) {}
  /// `t` must be a float type; the value is rounded to it.
  static Expr Make(ScalarType t, double value);
  const double value;
};

/// A variable, identified by its name (names are unique within one loop nest or compute body).
struct VarNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kVar;
  VarNode(ScalarType t, std::string n) : ExprNode(kKind, t), name(std::move(n)) {}
  static Expr Make(std::string name, ScalarType t = ScalarType::kInt64);
  const std::string name;
};

/// The operands every binary node holds; BinaryOperands reads them through this base.
struct BinaryNodeBase : ExprNode {
  BinaryNodeBase(ExprKind k, ScalarType t, Expr x, Expr y)
      : ExprNode(k, t), a(std::move(x)), b(std::move(y)) {}
  const Expr a;
  const Expr b;
};

/// Binary nodes share one layout; `K` tells them apart.
template <ExprKind K>
struct BinaryNode : BinaryNodeBase {
  static constexpr ExprKind kKind = K;
  BinaryNode(ScalarType t, Expr x, Expr y) : BinaryNodeBase(K, t, std::move(x), std::move(y)) {}
  /// CHECKs that both operands are defined and of one type (bool for And/Or, not bool for
  /// arithmetic). Comparisons produce bool.
  static Expr Make(Expr a, Expr b);
};

using AddNode = BinaryNode<ExprKind::kAdd>;
using SubNode = BinaryNode<ExprKind::kSub>;
using MulNode = BinaryNode<ExprKind::kMul>;
using DivNode = BinaryNode<ExprKind::kDiv>;
using ModNode = BinaryNode<ExprKind::kMod>;
using MinNode = BinaryNode<ExprKind::kMin>;
using MaxNode = BinaryNode<ExprKind::kMax>;
using EQNode = BinaryNode<ExprKind::kEQ>;
using NENode = BinaryNode<ExprKind::kNE>;
using LTNode = BinaryNode<ExprKind::kLT>;
using LENode = BinaryNode<ExprKind::kLE>;
using GTNode = BinaryNode<ExprKind::kGT>;
using GENode = BinaryNode<ExprKind::kGE>;
using AndNode = BinaryNode<ExprKind::kAnd>;
using OrNode = BinaryNode<ExprKind::kOr>;

/// True for Add..Or (the kinds laid out as BinaryNode).
bool IsBinaryKind(ExprKind kind);
/// Operands of a binary node (CHECKs IsBinaryKind).
std::pair<const Expr&, const Expr&> BinaryOperands(const Expr& e);
/// Rebuilds a binary node of `kind` from two operands.
Expr MakeBinary(ExprKind kind, Expr a, Expr b);

struct NotNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kNot;
  explicit NotNode(Expr x) : ExprNode(kKind, ScalarType::kBool), a(std::move(x)) {}
  static Expr Make(Expr a);
  const Expr a;
};

struct SelectNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kSelect;
  SelectNode(Expr c, Expr t, Expr f)
      : ExprNode(kKind, t.type()),
        cond(std::move(c)),
        true_value(std::move(t)),
        false_value(std::move(f)) {}
  /// `cond` is bool; both values share one type. Only the taken branch is evaluated.
  static Expr Make(Expr cond, Expr true_value, Expr false_value);
  const Expr cond;
  const Expr true_value;
  const Expr false_value;
};

struct CastNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCast;
  CastNode(ScalarType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  /// Float → int truncates toward zero; anything → bool is `!= 0`.
  static Expr Make(ScalarType t, Expr value);
  const Expr value;
};

/// Math functions. All take float operands except abs (any numeric); pow takes two.
enum class CallOp : uint8_t {
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kErf,
  kSigmoid,
  kAbs,
  kPow,
  kFloor,
  kTf32Round,    // float32 → TF32 value, round half away from zero (cvt.rna.tf32.f32)
  kTf32Truncate  // float32 → TF32 value, the low 13 mantissa bits cleared
};
const char* CallOpName(CallOp op);

struct CallNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCall;
  CallNode(ScalarType t, CallOp o, std::vector<Expr> a)
      : ExprNode(kKind, t), op(o), args(std::move(a)) {}
  static Expr Make(CallOp op, std::vector<Expr> args);
  const CallOp op;
  const std::vector<Expr> args;
};

/// Reads one element of a multi-dimensional buffer. In a compute body `producer` points at the
/// tensor read (so a ComputeDAG can be found from its outputs); in a loop nest it is null and
/// `buffer` names a parameter or an allocation.
struct LoadNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLoad;
  LoadNode(ScalarType t, std::string b, std::vector<Expr> i, std::shared_ptr<const TensorNode> p)
      : ExprNode(kKind, t), buffer(std::move(b)), indices(std::move(i)), producer(std::move(p)) {}
  /// Indices must be int64.
  static Expr Make(ScalarType t, std::string buffer, std::vector<Expr> indices,
                   std::shared_ptr<const TensorNode> producer = nullptr);
  const std::string buffer;
  const std::vector<Expr> indices;
  const std::shared_ptr<const TensorNode> producer;
};

// ---------------------------------------------------------------------------------------------
// Builders (the readable way to write bodies).

Expr IntConst(int64_t value, ScalarType t = ScalarType::kInt64);
Expr FloatConst(double value, ScalarType t = ScalarType::kFloat32);
Expr BoolConst(bool value);
/// A constant `value` of type `t` (int, float or bool).
Expr MakeConst(ScalarType t, double value);
Expr MakeVar(std::string name, ScalarType t = ScalarType::kInt64);

/// Constant value of an IntImm, else nullopt.
std::optional<int64_t> AsConstInt(const Expr& e);
/// Constant value of an IntImm or FloatImm, else nullopt.
std::optional<double> AsConstNumber(const Expr& e);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
// Mixed with C++ numbers: the number takes the type of the Expr side.
Expr operator+(Expr a, double b);
Expr operator+(double a, Expr b);
Expr operator-(Expr a, double b);
Expr operator-(double a, Expr b);
Expr operator*(Expr a, double b);
Expr operator*(double a, Expr b);
Expr operator/(Expr a, double b);
Expr operator/(double a, Expr b);
Expr operator%(Expr a, double b);
Expr operator<(Expr a, double b);
Expr operator<=(Expr a, double b);
Expr operator>(Expr a, double b);
Expr operator>=(Expr a, double b);
Expr operator==(Expr a, double b);
Expr operator!=(Expr a, double b);

Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr Select(Expr cond, Expr true_value, Expr false_value);
Expr Cast(ScalarType t, Expr value);
Expr Exp(Expr x);
Expr Log(Expr x);
Expr Sqrt(Expr x);
Expr Rsqrt(Expr x);
Expr Tanh(Expr x);
Expr Erf(Expr x);
Expr Sigmoid(Expr x);
Expr Abs(Expr x);
Expr Pow(Expr x, Expr y);
Expr Floor(Expr x);
/// A float32 value rounded to the TF32 value the tensor cores read (cvt.rna.tf32.f32: 10 of the 23
/// mantissa bits, half away from zero; non-finite values unchanged), still a float32.
Expr Tf32Round(Expr x);
/// The value of Tf32Round.
float Tf32RoundValue(float x);
/// x with the low 13 mantissa bits cleared: the TF32 value that truncates x (one integer and; the
/// 3xTF32 split's parts, as ir::MmaOperandValue defines them).
Expr Tf32Truncate(Expr x);
/// x with the low 13 mantissa bits cleared (the TF32 value mma.sync reads of a raw float32).
float Tf32TruncateValue(float x);

/// Structural equality (same kinds, types, constants, names, buffer names and operands).
bool StructurallyEqual(const Expr& a, const Expr& b);

/// Number of nodes of `e`, operands, load indices and call arguments included (0 for an undefined
/// expression): the simplifier's "does not grow" measure and the emitter's unroll-budget unit.
int64_t ExprSize(const Expr& e);

/// Readable infix form, e.g. "((i*4) + j)", "A[i, k]", "select((x > 0f), x, 0f)".
/// Defined with the printer.
std::string ToString(const Expr& e);
std::ostream& operator<<(std::ostream& os, const Expr& e);

// ---------------------------------------------------------------------------------------------
// Traversal.

/// Read-only pre-order visitor. Override Visit<Kind> to act; call the base to keep descending.
class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;
  virtual void Visit(const Expr& e);

 protected:
#define TS_DECLARE_VISIT(name) virtual void Visit##name(const name##Node* op, const Expr& e);
  TS_EXPR_NODE_KINDS(TS_DECLARE_VISIT)
#undef TS_DECLARE_VISIT
};

/// Rewrites an expression bottom-up. Each Mutate<Kind> returns the new node, or `e` itself when
/// nothing below it changed (Halide's rule: return, never stash in members).
class ExprMutator {
 public:
  virtual ~ExprMutator() = default;
  virtual Expr Mutate(const Expr& e);

 protected:
#define TS_DECLARE_MUTATE(name) virtual Expr Mutate##name(const name##Node* op, const Expr& e);
  TS_EXPR_NODE_KINDS(TS_DECLARE_MUTATE)
#undef TS_DECLARE_MUTATE
};

/// Replaces variables by name (e.g. a compute body's axes by loop indices).
Expr Substitute(const Expr& e, const std::vector<std::pair<std::string, Expr>>& replacements);

}  // namespace tilesearch::ir
