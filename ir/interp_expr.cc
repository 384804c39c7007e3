#include "ir/interp_expr.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace tilesearch::ir::interp_internal {

double PoisonValue(ScalarType t) {
  if (IsFloat(t)) return std::numeric_limits<double>::quiet_NaN();
  if (t == ScalarType::kBool) return 1;
  return -123456789;
}

int64_t CExpr::I(Ctx&) const {
  CHECK(false) << "integer evaluation of a float expression";
  return 0;
}
double CExpr::F(Ctx&) const {
  CHECK(false) << "float evaluation of an integer expression";
  return 0;
}

int Scope::FindVar(const std::string& name) const {
  for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  return -1;
}

const BufInfo* Scope::FindBuf(const std::string& name) const {
  for (auto it = bufs_.rbegin(); it != bufs_.rend(); ++it) {
    if ((*it)->name == name) return *it;
  }
  return nullptr;
}

bool Affine::AddTerm(int slot, int64_t coeff) {
  for (int k = 0; k < num_terms; ++k) {
    if (slots[k] == slot) {
      coeffs[k] += coeff;
      return true;
    }
  }
  if (num_terms == kMaxTerms) return false;
  slots[num_terms] = slot;
  coeffs[num_terms] = coeff;
  ++num_terms;
  return true;
}

namespace {

// Accumulates scale * e into `out`.
bool AccumulateAffine(const Expr& e, const Scope& scope, int64_t scale, Affine& out) {
  if (e.type() != ScalarType::kInt64) return false;
  switch (e.kind()) {
    case ExprKind::kIntImm:
      out.constant += scale * e.as<IntImmNode>()->value;
      return true;
    case ExprKind::kVar: {
      const int slot = scope.FindVar(e.as<VarNode>()->name);
      return slot >= 0 && out.AddTerm(slot, scale);
    }
    case ExprKind::kAdd: {
      const auto* op = e.as<AddNode>();
      return AccumulateAffine(op->a, scope, scale, out) &&
             AccumulateAffine(op->b, scope, scale, out);
    }
    case ExprKind::kSub: {
      const auto* op = e.as<SubNode>();
      return AccumulateAffine(op->a, scope, scale, out) &&
             AccumulateAffine(op->b, scope, -scale, out);
    }
    case ExprKind::kMul: {
      const auto* op = e.as<MulNode>();
      if (auto c = AsConstInt(op->b)) return AccumulateAffine(op->a, scope, scale * *c, out);
      if (auto c = AsConstInt(op->a)) return AccumulateAffine(op->b, scope, scale * *c, out);
      return false;
    }
    default:
      return false;
  }
}

}  // namespace

bool ToAffine(const Expr& e, const Scope& scope, Affine& out) {
  Affine a;
  if (!AccumulateAffine(e, scope, 1, a)) return false;
  // Drop terms that cancelled.
  out = Affine();
  out.constant = a.constant;
  for (int k = 0; k < a.num_terms; ++k) {
    if (a.coeffs[k] != 0) out.AddTerm(a.slots[k], a.coeffs[k]);
  }
  return true;
}

namespace {

// Float32 rounding of one operation result in kNative mode (double rounding through the exact
// double result is innocuous for + - * / and sqrt: double has more than 2·24+2 bits).
template <bool kRound>
inline double Rnd(double v) {
  if constexpr (kRound) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return v;
  }
}

inline int64_t Wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// Float → int conversion that is defined for every double (NaN and infinities give 0).
inline int64_t SafeToInt(double v) {
  if (!std::isfinite(v)) return 0;
  if (v >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

class IntConstExpr final : public CExpr {
 public:
  explicit IntConstExpr(int64_t v) : v_(v) {}
  int64_t I(Ctx&) const override { return v_; }

 private:
  int64_t v_;
};

class FloatConstExpr final : public CExpr {
 public:
  explicit FloatConstExpr(double v) : v_(v) {}
  double F(Ctx&) const override { return v_; }

 private:
  double v_;
};

class VarExpr final : public CExpr {
 public:
  explicit VarExpr(int slot) : slot_(slot) {}
  int64_t I(Ctx& c) const override { return c.vars[slot_]; }

 private:
  int slot_;
};

class AffineExpr final : public CExpr {
 public:
  explicit AffineExpr(const Affine& a) : a_(a) {}
  int64_t I(Ctx& c) const override { return a_.Eval(c); }

 private:
  Affine a_;
};

// ---- arithmetic ----------------------------------------------------------------------------

struct OpAdd {
  static double F(double a, double b) { return a + b; }
  static int64_t I(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
};
struct OpSub {
  static double F(double a, double b) { return a - b; }
  static int64_t I(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  }
};
struct OpMul {
  static double F(double a, double b) { return a * b; }
  static int64_t I(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  }
};
struct OpDiv {
  static double F(double a, double b) { return a / b; }
};
struct OpMod {
  static double F(double a, double b) { return a - b * std::floor(a / b); }
};
// Min / Max propagate NaN so that poisoned (uninitialized) values are not hidden by a max.
struct OpMin {
  static double F(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    return a < b ? a : b;
  }
  static int64_t I(int64_t a, int64_t b) { return a < b ? a : b; }
};
struct OpMax {
  static double F(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    return a > b ? a : b;
  }
  static int64_t I(int64_t a, int64_t b) { return a > b ? a : b; }
};

template <typename Op, bool kRound>
class FloatBinary final : public CExpr {
 public:
  FloatBinary(CExprPtr a, CExprPtr b) : a_(std::move(a)), b_(std::move(b)) {}
  double F(Ctx& c) const override { return Rnd<kRound>(Op::F(a_->F(c), b_->F(c))); }

 private:
  CExprPtr a_, b_;
};

template <typename Op, bool kInt32>
class IntBinary final : public CExpr {
 public:
  IntBinary(CExprPtr a, CExprPtr b) : a_(std::move(a)), b_(std::move(b)) {}
  int64_t I(Ctx& c) const override {
    const int64_t r = Op::I(a_->I(c), b_->I(c));
    return kInt32 ? Wrap32(r) : r;
  }

 private:
  CExprPtr a_, b_;
};

// Floor division and modulo; division by zero is reported as an error of the evaluation.
template <bool kMod, bool kInt32>
class IntDivMod final : public CExpr {
 public:
  IntDivMod(CExprPtr a, CExprPtr b, Expr source)
      : a_(std::move(a)), b_(std::move(b)), source_(std::move(source)) {}
  int64_t I(Ctx& c) const override {
    const int64_t a = a_->I(c);
    const int64_t b = b_->I(c);
    if (b == 0) {
      c.rt->Fail(
          absl::InvalidArgumentError(absl::StrCat("integer division by zero in ", ToString(source_),
                                                  " (", a, " ", kMod ? "%" : "/", " 0)")));
      return 0;
    }
    int64_t r;
    if (b == -1) {
      // a / -1 = -a (wrapping); a % -1 = 0. Avoids the overflow trap of INT64_MIN / -1.
      r = kMod ? 0 : static_cast<int64_t>(0 - static_cast<uint64_t>(a));
    } else if constexpr (kMod) {
      r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
    } else {
      r = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --r;
    }
    return kInt32 ? Wrap32(r) : r;
  }

 private:
  CExprPtr a_, b_;
  Expr source_;
};

// ---- comparisons and logic -------------------------------------------------------------------

struct CmpEQ {
  template <typename T>
  static bool Apply(T a, T b) {
    return a == b;
  }
};
struct CmpNE {
  template <typename T>
  static bool Apply(T a, T b) {
    return a != b;
  }
};
struct CmpLT {
  template <typename T>
  static bool Apply(T a, T b) {
    return a < b;
  }
};
struct CmpLE {
  template <typename T>
  static bool Apply(T a, T b) {
    return a <= b;
  }
};
struct CmpGT {
  template <typename T>
  static bool Apply(T a, T b) {
    return a > b;
  }
};
struct CmpGE {
  template <typename T>
  static bool Apply(T a, T b) {
    return a >= b;
  }
};

template <typename Cmp, bool kFloatOperands>
class Compare final : public CExpr {
 public:
  Compare(CExprPtr a, CExprPtr b) : a_(std::move(a)), b_(std::move(b)) {}
  int64_t I(Ctx& c) const override {
    if constexpr (kFloatOperands) {
      return Cmp::Apply(a_->F(c), b_->F(c));
    } else {
      return Cmp::Apply(a_->I(c), b_->I(c));
    }
  }

 private:
  CExprPtr a_, b_;
};

// And / Or evaluate both operands (operand evaluation order is unspecified and nothing promises
// short-circuiting; a guarded out-of-range load must use Select).
class AndExpr final : public CExpr {
 public:
  AndExpr(CExprPtr a, CExprPtr b) : a_(std::move(a)), b_(std::move(b)) {}
  int64_t I(Ctx& c) const override {
    const int64_t a = a_->I(c);
    const int64_t b = b_->I(c);
    return (a != 0) && (b != 0);
  }

 private:
  CExprPtr a_, b_;
};

class OrExpr final : public CExpr {
 public:
  OrExpr(CExprPtr a, CExprPtr b) : a_(std::move(a)), b_(std::move(b)) {}
  int64_t I(Ctx& c) const override {
    const int64_t a = a_->I(c);
    const int64_t b = b_->I(c);
    return (a != 0) || (b != 0);
  }

 private:
  CExprPtr a_, b_;
};

class NotExpr final : public CExpr {
 public:
  explicit NotExpr(CExprPtr a) : a_(std::move(a)) {}
  int64_t I(Ctx& c) const override { return a_->I(c) == 0; }

 private:
  CExprPtr a_;
};

// Lazy: only the taken branch is evaluated.
class SelectExpr final : public CExpr {
 public:
  SelectExpr(CExprPtr c, CExprPtr t, CExprPtr f)
      : c_(std::move(c)), t_(std::move(t)), f_(std::move(f)) {}
  int64_t I(Ctx& c) const override { return c_->I(c) ? t_->I(c) : f_->I(c); }
  double F(Ctx& c) const override { return c_->I(c) ? t_->F(c) : f_->F(c); }

 private:
  CExprPtr c_, t_, f_;
};

// ---- casts -----------------------------------------------------------------------------------

class CastToFloat final : public CExpr {
 public:
  CastToFloat(CExprPtr v, bool from_float, ScalarType to, bool round)
      : v_(std::move(v)), from_float_(from_float), to_(to), round_(round) {}
  double F(Ctx& c) const override {
    const double v = AsDouble(*v_, from_float_, c);
    return round_ ? RoundToType(v, to_) : v;
  }

 private:
  CExprPtr v_;
  bool from_float_;
  ScalarType to_;
  bool round_;
};

class CastToInt final : public CExpr {
 public:
  CastToInt(CExprPtr v, bool from_float, ScalarType to)
      : v_(std::move(v)), from_float_(from_float), to_(to) {}
  int64_t I(Ctx& c) const override {
    if (from_float_) {
      const double v = v_->F(c);
      if (to_ == ScalarType::kBool) return v != 0;
      const int64_t i = SafeToInt(v);  // truncates toward zero
      return to_ == ScalarType::kInt32 ? Wrap32(i) : i;
    }
    const int64_t v = v_->I(c);
    if (to_ == ScalarType::kBool) return v != 0;
    return to_ == ScalarType::kInt32 ? Wrap32(v) : v;
  }

 private:
  CExprPtr v_;
  bool from_float_;
  ScalarType to_;
};

// ---- math calls ------------------------------------------------------------------------------

template <CallOp kOp, bool kRound>
class FloatCall final : public CExpr {
 public:
  FloatCall(CExprPtr a, CExprPtr b) : a_(std::move(a)), b_(std::move(b)) {}
  double F(Ctx& c) const override {
    const double x = a_->F(c);
    double r;
    if constexpr (kOp == CallOp::kExp) {
      r = std::exp(x);
    } else if constexpr (kOp == CallOp::kLog) {
      r = std::log(x);
    } else if constexpr (kOp == CallOp::kSqrt) {
      r = std::sqrt(x);
    } else if constexpr (kOp == CallOp::kRsqrt) {
      r = 1.0 / std::sqrt(x);
    } else if constexpr (kOp == CallOp::kTanh) {
      r = std::tanh(x);
    } else if constexpr (kOp == CallOp::kErf) {
      r = std::erf(x);
    } else if constexpr (kOp == CallOp::kSigmoid) {
      r = 1.0 / (1.0 + std::exp(-x));
    } else if constexpr (kOp == CallOp::kAbs) {
      r = std::fabs(x);
    } else if constexpr (kOp == CallOp::kPow) {
      r = std::pow(x, b_->F(c));
    } else if constexpr (kOp == CallOp::kTf32Round) {
      r = Tf32RoundValue(static_cast<float>(x));
    } else if constexpr (kOp == CallOp::kTf32Truncate) {
      r = Tf32TruncateValue(static_cast<float>(x));
    } else {
      r = std::floor(x);
    }
    return Rnd<kRound>(r);
  }

 private:
  CExprPtr a_, b_;
};

template <bool kInt32>
class IntAbs final : public CExpr {
 public:
  explicit IntAbs(CExprPtr a) : a_(std::move(a)) {}
  int64_t I(Ctx& c) const override {
    const int64_t v = a_->I(c);
    const int64_t r = v < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(v)) : v;
    return kInt32 ? Wrap32(r) : r;
  }

 private:
  CExprPtr a_;
};

// ---- loads -----------------------------------------------------------------------------------

class LoadExpr final : public CExpr {
 public:
  LoadExpr(Access access, bool buffer_is_int) : access_(std::move(access)), int_(buffer_is_int) {}
  double F(Ctx& c) const override {
    const int64_t off = access_.Offset(c);
    if (off < 0) return 0;
    return c.bufs[access_.slot()][off];
  }
  int64_t I(Ctx& c) const override {
    const int64_t off = access_.Offset(c);
    if (off < 0) return 0;
    const double v = c.bufs[access_.slot()][off];
    return int_ ? static_cast<int64_t>(v) : SafeToInt(v);
  }

 private:
  Access access_;
  bool int_;
};

// ---- compilation -----------------------------------------------------------------------------

template <template <typename, bool> class Node, typename Op>
CExprPtr MakeFloatBinary(bool round, CExprPtr a, CExprPtr b) {
  if (round) return std::make_unique<Node<Op, true>>(std::move(a), std::move(b));
  return std::make_unique<Node<Op, false>>(std::move(a), std::move(b));
}

template <typename Op>
CExprPtr MakeIntBinary(bool int32, CExprPtr a, CExprPtr b) {
  if (int32) return std::make_unique<IntBinary<Op, true>>(std::move(a), std::move(b));
  return std::make_unique<IntBinary<Op, false>>(std::move(a), std::move(b));
}

template <typename Cmp>
CExprPtr MakeCompare(bool float_operands, CExprPtr a, CExprPtr b) {
  if (float_operands) return std::make_unique<Compare<Cmp, true>>(std::move(a), std::move(b));
  return std::make_unique<Compare<Cmp, false>>(std::move(a), std::move(b));
}

template <CallOp kOp>
CExprPtr MakeFloatCall(bool round, CExprPtr a, CExprPtr b) {
  if (round) return std::make_unique<FloatCall<kOp, true>>(std::move(a), std::move(b));
  return std::make_unique<FloatCall<kOp, false>>(std::move(a), std::move(b));
}

absl::StatusOr<CExprPtr> CompileBinary(const Expr& e, const Scope& scope, Precision precision) {
  auto [ea, eb] = BinaryOperands(e);
  ASSIGN_OR_RETURN(CExprPtr a, CompileExpr(ea, scope, precision));
  ASSIGN_OR_RETURN(CExprPtr b, CompileExpr(eb, scope, precision));
  const ScalarType operand_type = ea.type();
  const bool is_float = IsFloat(operand_type);
  const bool round = precision == Precision::kNative;
  const bool int32 = operand_type == ScalarType::kInt32;
  switch (e.kind()) {
    case ExprKind::kAdd:
      if (is_float) return MakeFloatBinary<FloatBinary, OpAdd>(round, std::move(a), std::move(b));
      return MakeIntBinary<OpAdd>(int32, std::move(a), std::move(b));
    case ExprKind::kSub:
      if (is_float) return MakeFloatBinary<FloatBinary, OpSub>(round, std::move(a), std::move(b));
      return MakeIntBinary<OpSub>(int32, std::move(a), std::move(b));
    case ExprKind::kMul:
      if (is_float) return MakeFloatBinary<FloatBinary, OpMul>(round, std::move(a), std::move(b));
      return MakeIntBinary<OpMul>(int32, std::move(a), std::move(b));
    case ExprKind::kMin:
      if (is_float) return MakeFloatBinary<FloatBinary, OpMin>(round, std::move(a), std::move(b));
      return MakeIntBinary<OpMin>(int32, std::move(a), std::move(b));
    case ExprKind::kMax:
      if (is_float) return MakeFloatBinary<FloatBinary, OpMax>(round, std::move(a), std::move(b));
      return MakeIntBinary<OpMax>(int32, std::move(a), std::move(b));
    case ExprKind::kDiv:
      if (is_float) return MakeFloatBinary<FloatBinary, OpDiv>(round, std::move(a), std::move(b));
      if (int32) return std::make_unique<IntDivMod<false, true>>(std::move(a), std::move(b), e);
      return std::make_unique<IntDivMod<false, false>>(std::move(a), std::move(b), e);
    case ExprKind::kMod:
      if (is_float) return MakeFloatBinary<FloatBinary, OpMod>(round, std::move(a), std::move(b));
      if (int32) return std::make_unique<IntDivMod<true, true>>(std::move(a), std::move(b), e);
      return std::make_unique<IntDivMod<true, false>>(std::move(a), std::move(b), e);
    case ExprKind::kEQ:
      return MakeCompare<CmpEQ>(is_float, std::move(a), std::move(b));
    case ExprKind::kNE:
      return MakeCompare<CmpNE>(is_float, std::move(a), std::move(b));
    case ExprKind::kLT:
      return MakeCompare<CmpLT>(is_float, std::move(a), std::move(b));
    case ExprKind::kLE:
      return MakeCompare<CmpLE>(is_float, std::move(a), std::move(b));
    case ExprKind::kGT:
      return MakeCompare<CmpGT>(is_float, std::move(a), std::move(b));
    case ExprKind::kGE:
      return MakeCompare<CmpGE>(is_float, std::move(a), std::move(b));
    case ExprKind::kAnd:
      return std::make_unique<AndExpr>(std::move(a), std::move(b));
    case ExprKind::kOr:
      return std::make_unique<OrExpr>(std::move(a), std::move(b));
    default:
      break;
  }
  CHECK(false) << "unhandled binary kind " << ExprKindName(e.kind());
  return nullptr;
}

absl::StatusOr<CExprPtr> CompileCall(const CallNode* op, const Scope& scope, Precision precision) {
  ASSIGN_OR_RETURN(CExprPtr a, CompileExpr(op->args[0], scope, precision));
  CExprPtr b;
  if (op->args.size() > 1) {
    ASSIGN_OR_RETURN(b, CompileExpr(op->args[1], scope, precision));
  }
  if (!IsFloat(op->type)) {
    CHECK(op->op == CallOp::kAbs) << CallOpName(op->op) << " of an integer";
    if (op->type == ScalarType::kInt32) return std::make_unique<IntAbs<true>>(std::move(a));
    return std::make_unique<IntAbs<false>>(std::move(a));
  }
  const bool round = precision == Precision::kNative;
  switch (op->op) {
#define TS_CALL_CASE(k) \
  case CallOp::k:       \
    return MakeFloatCall<CallOp::k>(round, std::move(a), std::move(b));
    TS_CALL_CASE(kExp)
    TS_CALL_CASE(kLog)
    TS_CALL_CASE(kSqrt)
    TS_CALL_CASE(kRsqrt)
    TS_CALL_CASE(kTanh)
    TS_CALL_CASE(kErf)
    TS_CALL_CASE(kSigmoid)
    TS_CALL_CASE(kAbs)
    TS_CALL_CASE(kPow)
    TS_CALL_CASE(kFloor)
    TS_CALL_CASE(kTf32Round)
    TS_CALL_CASE(kTf32Truncate)
#undef TS_CALL_CASE
  }
  CHECK(false) << "unhandled call";
  return nullptr;
}

}  // namespace

void Access::ReportOutOfRange(Ctx& c, int64_t dim, int64_t index) const {
  c.rt->Fail(absl::OutOfRangeError(absl::StrCat("index ", index, " out of range [0, ",
                                                dims_[dim].extent, ") in dimension ", dim,
                                                " of buffer '", buffer_, "' (", what_, ")")));
}

absl::StatusOr<Access> Access::Make(const std::string& buffer, const std::vector<Expr>& indices,
                                    const char* what, const Scope& scope, Precision precision) {
  const BufInfo* info = scope.FindBuf(buffer);
  if (info == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of unknown buffer '", buffer, "' (not a parameter or an allocation in scope)"));
  }
  if (indices.size() != info->shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of buffer '", buffer, "' with ",
                                                   indices.size(), " indices; it has ",
                                                   info->shape.size(), " dimensions"));
  }
  Access a;
  a.slot_ = info->slot;
  a.buffer_ = buffer;
  a.what_ = what;
  a.dims_.resize(indices.size());
  for (size_t d = 0; d < indices.size(); ++d) {
    const Expr& e = indices[d];
    AccessDim& dim = a.dims_[d];
    dim.extent = info->shape[d];
    dim.stride = info->strides[d];
    if (IsFloat(e.type())) {
      return absl::InvalidArgumentError(
          absl::StrCat("index ", ToString(e), " of buffer '", buffer, "' is not an integer"));
    }
    if (!ToAffine(e, scope, dim.affine)) {
      ASSIGN_OR_RETURN(dim.expr, CompileExpr(e, scope, precision));
    }
  }
  return a;
}

absl::StatusOr<CExprPtr> CompileExpr(const Expr& e, const Scope& scope, Precision precision) {
  CHECK(e.defined()) << "compiling an undefined expression";
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return std::make_unique<IntConstExpr>(e.as<IntImmNode>()->value);
    case ExprKind::kFloatImm:
      return std::make_unique<FloatConstExpr>(e.as<FloatImmNode>()->value);
    case ExprKind::kVar: {
      const auto* v = e.as<VarNode>();
      const int slot = scope.FindVar(v->name);
      if (slot < 0) {
        return absl::InvalidArgumentError(absl::StrCat("unknown variable '", v->name, "'"));
      }
      if (IsFloat(v->type)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable '", v->name, "' is ", TypeName(v->type), "; loop variables are int64"));
      }
      return std::make_unique<VarExpr>(slot);
    }
    case ExprKind::kNot: {
      ASSIGN_OR_RETURN(CExprPtr a, CompileExpr(e.as<NotNode>()->a, scope, precision));
      return std::make_unique<NotExpr>(std::move(a));
    }
    case ExprKind::kSelect: {
      const auto* op = e.as<SelectNode>();
      ASSIGN_OR_RETURN(CExprPtr c, CompileExpr(op->cond, scope, precision));
      ASSIGN_OR_RETURN(CExprPtr t, CompileExpr(op->true_value, scope, precision));
      ASSIGN_OR_RETURN(CExprPtr f, CompileExpr(op->false_value, scope, precision));
      return std::make_unique<SelectExpr>(std::move(c), std::move(t), std::move(f));
    }
    case ExprKind::kCast: {
      const auto* op = e.as<CastNode>();
      ASSIGN_OR_RETURN(CExprPtr v, CompileExpr(op->value, scope, precision));
      const bool from_float = IsFloat(op->value.type());
      if (IsFloat(op->type)) {
        // kFloat64 keeps float values in double; a cast from an integer is exact either way
        // except to narrow types, which kNative rounds.
        const bool round = precision == Precision::kNative;
        return std::make_unique<CastToFloat>(std::move(v), from_float, op->type, round);
      }
      return std::make_unique<CastToInt>(std::move(v), from_float, op->type);
    }
    case ExprKind::kCall:
      return CompileCall(e.as<CallNode>(), scope, precision);
    case ExprKind::kLoad: {
      const auto* op = e.as<LoadNode>();
      ASSIGN_OR_RETURN(Access access,
                       Access::Make(op->buffer, op->indices, "load", scope, precision));
      const BufInfo* info = scope.FindBuf(op->buffer);
      return std::make_unique<LoadExpr>(std::move(access), !IsFloat(info->dtype));
    }
    default:
      break;
  }
  if (IsBinaryKind(e.kind())) {
    const ExprKind k = e.kind();
    if (e.type() == ScalarType::kInt64 &&
        (k == ExprKind::kAdd || k == ExprKind::kSub || k == ExprKind::kMul)) {
      Affine affine;
      if (ToAffine(e, scope, affine)) return std::make_unique<AffineExpr>(affine);
    }
    return CompileBinary(e, scope, precision);
  }
  CHECK(false) << "unhandled expression kind " << ExprKindName(e.kind());
  return nullptr;
}

}  // namespace tilesearch::ir::interp_internal
