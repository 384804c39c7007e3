#include "codegen/emitter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/kernel_plan.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"

namespace tilesearch::codegen::internal {
namespace {

using ir::Expr;
using ir::ExprKind;
using ir::ScalarType;
using ir::Stmt;
namespace arith = mlir::arith;

// Whether an expression mentions a variable.
class UsesVar : public ir::ExprVisitor {
 public:
  explicit UsesVar(const std::string& name) : name_(name) {}
  bool found = false;

 protected:
  void VisitVar(const ir::VarNode* op, const Expr& e) override {
    if (op->name == name_) found = true;
    ir::ExprVisitor::VisitVar(op, e);
  }

 private:
  const std::string& name_;
};

bool ExprUsesVar(const Expr& e, const std::string& name) {
  UsesVar v(name);
  v.Visit(e);
  return v.found;
}

// Every load in an expression, or (unconditional) only those it performs whenever it is
// evaluated: none from a Select's branches. Loads inside index expressions count.
class LoadsIn : public ir::ExprVisitor {
 public:
  explicit LoadsIn(bool unconditional) : unconditional_(unconditional) {}
  std::vector<const ir::LoadNode*> loads;

 protected:
  void VisitLoad(const ir::LoadNode* op, const Expr& e) override {
    loads.push_back(op);
    ir::ExprVisitor::VisitLoad(op, e);
  }
  void VisitSelect(const ir::SelectNode* op, const Expr& e) override {
    if (!unconditional_) return ir::ExprVisitor::VisitSelect(op, e);
    Visit(op->cond);
  }

 private:
  bool unconditional_;
};

bool SameElement(const ir::LoadNode* a, const ir::LoadNode* b) {
  if (a->buffer != b->buffer || a->indices.size() != b->indices.size()) return false;
  for (size_t d = 0; d < a->indices.size(); ++d) {
    if (!ir::StructurallyEqual(a->indices[d], b->indices[d])) return false;
  }
  return true;
}

// Whether both branches of `sel` may be evaluated and one picked (arith.select) without
// performing a load the IR says is skipped (ir/expr.h): the branches load nothing, or only
// elements the condition itself loads unconditionally (softplus's Select(X[i] > t, X[i],
// log(1 + exp(X[i])))). The condition's load shows the address is valid whenever the select is
// evaluated, and an expression stores nothing, so the repeated load reads the same value. A
// padding select, whose index-only condition guards an input load, stays lazy. Eager selects
// keep the loop vectorizable and the kernel free of a branch per element.
bool EagerSelect(const ir::SelectNode* sel) {
  LoadsIn branches(/*unconditional=*/false);
  branches.Visit(sel->true_value);
  branches.Visit(sel->false_value);
  if (branches.loads.empty()) return true;
  LoadsIn proven(/*unconditional=*/true);
  proven.Visit(sel->cond);
  for (const ir::LoadNode* ld : branches.loads) {
    if (std::none_of(proven.loads.begin(), proven.loads.end(),
                     [&](const ir::LoadNode* p) { return SameElement(ld, p); })) {
      return false;
    }
  }
  return true;
}

// Whether an expression calls a function, holds a select or divides integers by a non-constant:
// a branch with none of them costs a few arithmetic operations when evaluated and thrown away,
// and cannot trap (INT_MIN / -1) or divide by a poison value where it was not taken.
class CostlyOrTrapping : public ir::ExprVisitor {
 public:
  bool found = false;

 protected:
  void VisitCall(const ir::CallNode*, const Expr&) override { found = true; }
  void VisitSelect(const ir::SelectNode*, const Expr&) override { found = true; }
  void VisitDiv(const ir::DivNode* op, const Expr& e) override {
    found |= ir::IsInt(op->type) && !ir::AsConstInt(op->b);
    ir::ExprVisitor::VisitDiv(op, e);
  }
  void VisitMod(const ir::ModNode* op, const Expr& e) override {
    found |= ir::IsInt(op->type) && !ir::AsConstInt(op->b);
    ir::ExprVisitor::VisitMod(op, e);
  }
};

bool IsVector(mlir::Value v) { return mlir::isa<mlir::VectorType>(v.getType()); }

// Element type of a scalar or vector type.
mlir::Type ElementOf(mlir::Type t) {
  if (auto vt = mlir::dyn_cast<mlir::VectorType>(t)) return vt.getElementType();
  return t;
}

// `elem` with the shape of `like` (scalar or vector).
mlir::Type ShapedLike(mlir::Type elem, mlir::Type like) {
  if (auto vt = mlir::dyn_cast<mlir::VectorType>(like))
    return mlir::VectorType::get(vt.getShape(), elem);
  return elem;
}

// ---- vectorization analysis -----------------------------------------------------------------

int64_t Gcd(int64_t a, int64_t b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

constexpr int64_t kManyNodes = int64_t{1} << 40;

int64_t SaturatingAdd(int64_t a, int64_t b) { return std::min(kManyNodes, a + b); }

int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kManyNodes / b ? kManyNodes : std::min(kManyNodes, a * b);
}

// UnrolledNodes of a loop.
int64_t UnrolledLoopNodes(const ir::ForNode* op) {
  const int64_t body = UnrolledNodes(op->body);
  const int64_t bounds = ir::ExprSize(op->min) + ir::ExprSize(op->extent);
  const std::optional<int64_t> extent = ir::AsConstInt(op->extent);
  if (op->for_kind == ir::ForKind::kUnrolled && extent) {
    return SaturatingAdd(bounds, SaturatingMul(std::max<int64_t>(*extent, 0), body));
  }
  return SaturatingAdd(bounds + 1, body);
}

}  // namespace

int64_t UnrolledNodes(const Stmt& s) {
  if (!s.defined()) return 0;
  switch (s.kind()) {
    case ir::StmtKind::kFor:
      return UnrolledLoopNodes(s.as<ir::ForNode>());
    case ir::StmtKind::kSeq: {
      int64_t n = 0;
      for (const Stmt& c : s.as<ir::SeqNode>()->stmts) n = SaturatingAdd(n, UnrolledNodes(c));
      return n;
    }
    case ir::StmtKind::kStore: {
      const auto* op = s.as<ir::StoreNode>();
      int64_t n = 1 + ir::ExprSize(op->value);
      for (const Expr& i : op->indices) n += ir::ExprSize(i);
      return n;
    }
    case ir::StmtKind::kAllocate:
      return UnrolledNodes(s.as<ir::AllocateNode>()->body);
    case ir::StmtKind::kIfThenElse: {
      const auto* op = s.as<ir::IfThenElseNode>();
      return SaturatingAdd(1 + ir::ExprSize(op->cond), SaturatingAdd(UnrolledNodes(op->then_case),
                                                                     UnrolledNodes(op->else_case)));
    }
    case ir::StmtKind::kEvaluate:
      return ir::ExprSize(s.as<ir::EvaluateNode>()->value);
    default:
      return 1;
  }
}

// Halide's modulus-remainder analysis, reduced to the remainder-0 case.
int64_t KnownMultiple(const Expr& e) {
  if (const auto c = ir::AsConstInt(e)) return *c < 0 ? -*c : *c;
  switch (e.kind()) {
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMin:
    case ExprKind::kMax: {
      auto [a, b] = ir::BinaryOperands(e);
      return Gcd(KnownMultiple(a), KnownMultiple(b));
    }
    case ExprKind::kMul: {
      auto [a, b] = ir::BinaryOperands(e);
      const int64_t ga = KnownMultiple(a);
      const int64_t gb = KnownMultiple(b);
      if (ga == 0 || gb == 0) return 0;
      if (ga > (int64_t{1} << 30) || gb > (int64_t{1} << 30)) return 1;
      return ga * gb;
    }
    case ExprKind::kMod: {
      // a % c = a - c * floor(a / c): a multiple of gcd(g(a), c).
      auto [a, b] = ir::BinaryOperands(e);
      const auto c = ir::AsConstInt(b);
      if (!c || *c == 0) return 1;
      return Gcd(KnownMultiple(a), *c);
    }
    case ExprKind::kSelect: {
      const auto* sel = e.as<ir::SelectNode>();
      return Gcd(KnownMultiple(sel->true_value), KnownMultiple(sel->false_value));
    }
    default:
      return 1;
  }
}

namespace {

// Offset of `e` in lane k (the variable at min + k) from its value in lane 0, when it is the
// same for every value of the other variables; nullopt when that cannot be shown. Division and
// modulo by a constant D keep lanes together when the lane-0 numerator is a known multiple of g
// and the lanes move it by less than gcd(g, D) (so no multiple of D is crossed).
std::optional<int64_t> LaneOffset(const Expr& e, const std::string& var, const Expr& min,
                                  int64_t k) {
  if (!ExprUsesVar(e, var)) return 0;
  if (const auto* v = e.as<ir::VarNode>()) return v->name == var ? std::optional<int64_t>(k) : 0;
  switch (e.kind()) {
    case ExprKind::kAdd:
    case ExprKind::kSub: {
      auto [a, b] = ir::BinaryOperands(e);
      const auto oa = LaneOffset(a, var, min, k);
      const auto ob = LaneOffset(b, var, min, k);
      if (!oa || !ob) return std::nullopt;
      return e.kind() == ExprKind::kAdd ? *oa + *ob : *oa - *ob;
    }
    case ExprKind::kMul: {
      auto [a, b] = ir::BinaryOperands(e);
      if (const auto cb = ir::AsConstInt(b)) {
        const auto oa = LaneOffset(a, var, min, k);
        if (oa) return *oa * *cb;
      }
      if (const auto ca = ir::AsConstInt(a)) {
        const auto ob = LaneOffset(b, var, min, k);
        if (ob) return *ob * *ca;
      }
      return std::nullopt;
    }
    case ExprKind::kDiv:
    case ExprKind::kMod: {
      auto [a, b] = ir::BinaryOperands(e);
      const auto d = ir::AsConstInt(b);
      if (!d || *d <= 0) return std::nullopt;
      const auto oa = LaneOffset(a, var, min, k);
      if (!oa) return std::nullopt;
      if (*oa == 0) return 0;
      const int64_t g = Gcd(KnownMultiple(ir::Substitute(a, {{var, min}})), *d);
      if (*oa < 0 || *oa >= g) return std::nullopt;
      return e.kind() == ExprKind::kDiv ? 0 : *oa;
    }
    default:
      return std::nullopt;
  }
}

class VectorCheck {
 public:
  VectorCheck(const ir::ForNode* op, int64_t extent, const ir::RangeMap& ranges,
              const ShapeOf& shape_of)
      : var_(op->var_name()),
        min_(op->min),
        extent_(extent),
        ranges_(ranges),
        shape_of_(shape_of) {}

  std::string Run(const Stmt& body) {
    std::vector<const ir::StoreNode*> stores;
    if (const auto* st = body.as<ir::StoreNode>()) {
      stores.push_back(st);
    } else if (const auto* seq = body.as<ir::SeqNode>()) {
      for (const Stmt& s : seq->stmts) {
        const auto* st = s.as<ir::StoreNode>();
        if (st == nullptr) return "the body is not a list of stores";
        stores.push_back(st);
      }
    } else {
      return "the body is not a list of stores";
    }
    for (const ir::StoreNode* st : stores) {
      if (stored_.count(st->buffer))
        return absl::StrCat("buffer '", st->buffer, "' is stored twice");
      stored_[st->buffer] = st;
    }
    for (const ir::StoreNode* st : stores) {
      if (std::string why = Access(st->buffer, st->indices, /*is_store=*/true); !why.empty()) {
        return why;
      }
      if (std::string why = CheckExpr(st->value); !why.empty()) return why;
    }
    return "";
  }

 private:
  bool Varies(const Expr& e) const { return ExprUsesVar(e, var_); }

  // Lane k addresses element base + k (Invariant: base + 0), shown structurally (LaneOffset) or
  // by the simplifier.
  bool Contiguous(const Expr& index) const { return Strided(index, 1); }
  bool Invariant(const Expr& index) const { return Strided(index, 0); }
  bool Strided(const Expr& index, int64_t stride) const {
    bool structural = true;
    for (int64_t k = 1; k < extent_ && structural; ++k) {
      const std::optional<int64_t> d = LaneOffset(index, var_, min_, k);
      structural = d && *d == k * stride;
    }
    if (structural) return true;
    const Expr base = ir::Simplify(ir::Substitute(index, {{var_, min_}}), ranges_);
    for (int64_t k = 1; k < extent_; ++k) {
      const Expr at = ir::Substitute(index, {{var_, min_ + ir::IntConst(k)}});
      const std::optional<int64_t> d = ir::AsConstInt(ir::Simplify(at - base, ranges_));
      if (!d || *d != k * stride) return false;
    }
    return true;
  }

  std::string Access(const std::string& buffer, const std::vector<Expr>& indices, bool is_store) {
    if (indices.empty()) {
      return is_store ? absl::StrCat("store to scalar buffer '", buffer, "'") : "";
    }
    // Leading indices must be the same in every lane (they are computed for lane 0).
    const size_t inner = ContiguousIndex(shape_of_ ? shape_of_(buffer) : nullptr, indices);
    for (size_t d = 0; d < indices.size(); ++d) {
      if (d == inner) continue;
      if (Varies(indices[d]) && !Invariant(indices[d])) {
        return absl::StrCat("index ", d, " of '", buffer, "' varies with the vectorized loop");
      }
      if (std::string why = CheckExpr(indices[d]); !why.empty()) return why;
    }
    const Expr& last = indices[inner];
    if (!Varies(last)) {
      if (is_store) return absl::StrCat("store to '", buffer, "' does not vary with the loop");
      return CheckExpr(last);
    }
    if (!Contiguous(last)) {
      return absl::StrCat("last index ", ir::ToString(last), " of '", buffer,
                          "' is not contiguous in '", var_, "'");
    }
    return "";
  }

  std::string CheckExpr(const Expr& e) {
    std::string why;
    Walk(e, why);
    return why;
  }

  void Walk(const Expr& e, std::string& why) {
    if (!why.empty()) return;
    if (const auto* ld = e.as<ir::LoadNode>()) {
      auto it = stored_.find(ld->buffer);
      if (it != stored_.end()) {
        const auto& si = it->second->indices;
        bool same = si.size() == ld->indices.size();
        for (size_t d = 0; same && d < si.size(); ++d) {
          same = ir::StructurallyEqual(si[d], ld->indices[d]);
        }
        if (!same) {
          why = absl::StrCat("buffer '", ld->buffer, "' is loaded and stored at different indices");
          return;
        }
      }
      why = Access(ld->buffer, ld->indices, /*is_store=*/false);
      return;
    }
    if (const auto* sel = e.as<ir::SelectNode>()) {
      // A lazy select is an scf.if, whose condition must be one scalar.
      if (Varies(sel->cond) && !EagerSelect(sel)) {
        why = "a select that depends on the vectorized loop guards a load";
        return;
      }
      Walk(sel->cond, why);
      Walk(sel->true_value, why);
      Walk(sel->false_value, why);
      return;
    }
    if (ir::IsBinaryKind(e.kind())) {
      auto [a, b] = ir::BinaryOperands(e);
      Walk(a, why);
      Walk(b, why);
      return;
    }
    if (const auto* n = e.as<ir::NotNode>()) return Walk(n->a, why);
    if (const auto* c = e.as<ir::CastNode>()) return Walk(c->value, why);
    if (const auto* c = e.as<ir::CallNode>()) {
      for (const Expr& a : c->args) Walk(a, why);
    }
  }

  std::string var_;
  Expr min_;
  int64_t extent_;
  const ir::RangeMap& ranges_;
  const ShapeOf& shape_of_;
  std::map<std::string, const ir::StoreNode*> stored_;
};

// ---- warp exchanges (emitter.h) --------------------------------------------------------------

constexpr int64_t kWarpSize = 32;

bool IsShuffleBufferName(const std::string& name) {
  constexpr char kSuffix[] = ".shfl";
  constexpr size_t kLen = sizeof(kSuffix) - 1;
  return name.size() > kLen && name.compare(name.size() - kLen, kLen, kSuffix) == 0;
}

// A threadIdx.x loop from 0 over a multiple of the warp size.
const ir::ForNode* WarpThreadLoop(const Stmt& s) {
  const auto* f = s.as<ir::ForNode>();
  if (f == nullptr || f->for_kind != ir::ForKind::kThreadIdxX) return nullptr;
  const auto mn = ir::AsConstInt(f->min);
  const auto ext = ir::AsConstInt(f->extent);
  if (!mn || *mn != 0 || !ext || *ext <= 0 || *ext % kWarpSize != 0) return nullptr;
  return f;
}

// The value of an index expression of the single variable `var` at `value` (floor division);
// nullopt for anything else.
std::optional<int64_t> EvalIndex(const Expr& e, const std::string& var, int64_t value) {
  if (const auto c = ir::AsConstInt(e)) return *c;
  if (const auto* v = e.as<ir::VarNode>()) {
    return v->name == var ? std::optional<int64_t>(value) : std::nullopt;
  }
  if (!ir::IsBinaryKind(e.kind())) return std::nullopt;
  auto [ea, eb] = ir::BinaryOperands(e);
  const auto a = EvalIndex(ea, var, value);
  const auto b = EvalIndex(eb, var, value);
  if (!a || !b) return std::nullopt;
  switch (e.kind()) {
    case ExprKind::kAdd:
      return *a + *b;
    case ExprKind::kSub:
      return *a - *b;
    case ExprKind::kMul:
      return *a * *b;
    case ExprKind::kDiv:
    case ExprKind::kMod: {
      if (*b == 0) return std::nullopt;
      int64_t q = *a / *b;
      if ((*a % *b != 0) && ((*a < 0) != (*b < 0))) --q;
      return e.kind() == ExprKind::kDiv ? q : *a - *b * q;
    }
    default:
      return std::nullopt;
  }
}

// Loads of one buffer in an expression, and whether any sits in a Select branch (evaluated lazily).
class BufferLoads : public ir::ExprVisitor {
 public:
  explicit BufferLoads(const std::string& buffer) : buffer_(buffer) {}
  std::vector<const ir::LoadNode*> loads;
  bool in_branch = false;

 protected:
  void VisitLoad(const ir::LoadNode* op, const Expr& e) override {
    if (op->buffer == buffer_) {
      loads.push_back(op);
      in_branch |= select_depth_ > 0;
    }
    ir::ExprVisitor::VisitLoad(op, e);
  }
  void VisitSelect(const ir::SelectNode* op, const Expr&) override {
    Visit(op->cond);
    ++select_depth_;
    Visit(op->true_value);
    Visit(op->false_value);
    --select_depth_;
  }

 private:
  const std::string& buffer_;
  int select_depth_ = 0;
};

// An exchange window over `buffer` at stmts[i] (emitter.h), checked structurally.
struct ExchangeWindow {
  const ir::ForNode* put = nullptr;
  const ir::ForNode* get = nullptr;
  const ir::StoreNode* put_store = nullptr;
  int64_t threads = 0;
  int64_t offset = 0;
  size_t length = 0;  // statements covered (3, or 4 with the closing barrier)
};

std::optional<ExchangeWindow> MatchExchangeWindow(const std::vector<Stmt>& stmts, size_t i,
                                                  const std::string& buffer) {
  if (i + 2 >= stmts.size() || stmts[i + 1].as<ir::BarrierNode>() == nullptr) return std::nullopt;
  ExchangeWindow w;
  w.put = WarpThreadLoop(stmts[i]);
  w.get = WarpThreadLoop(stmts[i + 2]);
  if (w.put == nullptr || w.get == nullptr) return std::nullopt;
  w.threads = *ir::AsConstInt(w.put->extent);
  if (*ir::AsConstInt(w.get->extent) != w.threads) return std::nullopt;
  // for t: X[g.., t] = A[c..]
  w.put_store = w.put->body.as<ir::StoreNode>();
  const ir::StoreNode* put = w.put_store;
  if (put == nullptr || put->buffer != buffer || put->indices.empty()) return std::nullopt;
  const auto* last = put->indices.back().as<ir::VarNode>();
  if (last == nullptr || last->name != w.put->var_name()) return std::nullopt;
  for (size_t d = 0; d + 1 < put->indices.size(); ++d) {
    if (ExprUsesVar(put->indices[d], w.put->var_name())) return std::nullopt;
  }
  const auto* value = put->value.as<ir::LoadNode>();
  if (value == nullptr || value->buffer == buffer) return std::nullopt;
  for (const Expr& idx : value->indices) {
    if (!ir::AsConstInt(idx)) return std::nullopt;
  }
  // for u: S = f(.., X[g.., u ^ m], ..), X read once, outside Select branches.
  const auto* get = w.get->body.as<ir::StoreNode>();
  if (get == nullptr || get->buffer == buffer) return std::nullopt;
  for (const Expr& idx : get->indices) {
    BufferLoads in_index(buffer);
    in_index.Visit(idx);
    if (!in_index.loads.empty()) return std::nullopt;
  }
  BufferLoads reads(buffer);
  reads.Visit(get->value);
  if (reads.loads.size() != 1 || reads.in_branch) return std::nullopt;
  const ir::LoadNode* ld = reads.loads[0];
  if (ld->indices.size() != put->indices.size()) return std::nullopt;
  for (size_t d = 0; d + 1 < put->indices.size(); ++d) {
    if (!ir::StructurallyEqual(ld->indices[d], put->indices[d])) return std::nullopt;
  }
  const std::string& u = w.get->var_name();
  const std::optional<int64_t> m = EvalIndex(ld->indices.back(), u, 0);
  if (!m || *m < 1 || *m >= kWarpSize || (*m & (*m - 1)) != 0) return std::nullopt;
  for (int64_t t = 0; t < w.threads; ++t) {
    if (EvalIndex(ld->indices.back(), u, t) != std::optional<int64_t>(t ^ *m)) return std::nullopt;
  }
  w.offset = *m;
  w.length = (i + 3 < stmts.size() && stmts[i + 3].as<ir::BarrierNode>() != nullptr) ? 4 : 3;
  return w;
}

// Whether every access of `buffer` in `body` is in an exchange window.
class ExchangeOnly : public ir::StmtVisitor {
 public:
  explicit ExchangeOnly(const std::string& buffer) : buffer_(buffer) {}
  bool Holds() const { return windows_ > 0 && loads_ == windows_ && stores_ == windows_; }

  void VisitExpr(const Expr& e) override {
    BufferLoads l(buffer_);
    l.Visit(e);
    loads_ += static_cast<int64_t>(l.loads.size());
  }

 protected:
  void VisitStore(const ir::StoreNode* op, const Stmt& s) override {
    if (op->buffer == buffer_) ++stores_;
    ir::StmtVisitor::VisitStore(op, s);
  }
  void VisitSeq(const ir::SeqNode* op, const Stmt& s) override {
    for (size_t i = 0; i < op->stmts.size(); ++i) {
      if (MatchExchangeWindow(op->stmts, i, buffer_)) ++windows_;
    }
    ir::StmtVisitor::VisitSeq(op, s);
  }

 private:
  const std::string& buffer_;
  int64_t loads_ = 0;
  int64_t stores_ = 0;
  int64_t windows_ = 0;
};

}  // namespace

size_t ContiguousIndex(const std::vector<int64_t>* shape, const std::vector<Expr>& indices) {
  size_t d = indices.size() - 1;
  if (shape == nullptr || shape->size() != indices.size()) return d;
  while (d > 0 && (*shape)[d] == 1) {
    const std::optional<int64_t> v = ir::AsConstInt(indices[d]);
    if (!v || *v != 0) break;
    --d;
  }
  return d;
}

std::string VectorizeBlocker(const ir::ForNode* op, int64_t extent, const ir::RangeMap& ranges,
                             const ShapeOf& shape_of) {
  VectorCheck check(op, extent, ranges, shape_of);
  return check.Run(op->body);
}

mlir::Type StorageType(mlir::MLIRContext* ctx, ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return mlir::Float32Type::get(ctx);
    case ScalarType::kFloat16:
      return mlir::Float16Type::get(ctx);
    case ScalarType::kBFloat16:
      return mlir::BFloat16Type::get(ctx);
    case ScalarType::kInt32:
      return mlir::IntegerType::get(ctx, 32);
    case ScalarType::kInt64:
      return mlir::IntegerType::get(ctx, 64);
    case ScalarType::kBool:
      return mlir::IntegerType::get(ctx, 8);
  }
  return {};
}

mlir::Type ValueType(mlir::MLIRContext* ctx, ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      return mlir::Float32Type::get(ctx);
    case ScalarType::kInt32:
      return mlir::IntegerType::get(ctx, 32);
    case ScalarType::kInt64:
      return mlir::IntegerType::get(ctx, 64);
    case ScalarType::kBool:
      return mlir::IntegerType::get(ctx, 1);
  }
  return {};
}

Emitter::Emitter(mlir::OpBuilder& builder, mlir::Location loc, const EmitConfig& config,
                 mlir::Block* alloca_block)
    : b_(builder), loc_(loc), config_(config), alloca_block_(alloca_block) {}

void Emitter::BindBuffer(const ir::BufferDecl& decl, mlir::Value memref) {
  bufs_.push_back(BufferBinding{decl, memref});
}

void Emitter::BindVar(const std::string& name, mlir::Value value,
                      std::optional<ir::Interval> range) {
  vars_.push_back(VarBinding{name, value});
  auto it = ranges_.find(name);
  shadowed_ranges_.push_back(it == ranges_.end() ? std::nullopt
                                                 : std::optional<ir::Interval>(it->second));
  if (range) {
    ranges_[name] = *range;
  } else {
    ranges_.erase(name);
  }
}

void Emitter::UnbindVar() {
  const std::string name = vars_.back().name;
  vars_.pop_back();
  if (shadowed_ranges_.back()) {
    ranges_[name] = *shadowed_ranges_.back();
  } else {
    ranges_.erase(name);
  }
  shadowed_ranges_.pop_back();
}

const BufferBinding* Emitter::FindBuffer(const std::string& name) const {
  for (auto it = bufs_.rbegin(); it != bufs_.rend(); ++it) {
    if (it->decl.name == name) return &*it;
  }
  return nullptr;
}

mlir::Value Emitter::I64(int64_t v) {
  return arith::ConstantOp::create(b_, loc_, b_.getI64IntegerAttr(v));
}

mlir::Value Emitter::Const(mlir::Type type, double value) {
  const mlir::Type elem = ElementOf(type);
  mlir::TypedAttr attr;
  if (mlir::isa<mlir::FloatType>(elem)) {
    attr = b_.getFloatAttr(elem, value);
  } else {
    attr = b_.getIntegerAttr(elem, static_cast<int64_t>(value));
  }
  if (auto vt = mlir::dyn_cast<mlir::VectorType>(type)) {
    return arith::ConstantOp::create(b_, loc_, mlir::DenseElementsAttr::get(vt, attr));
  }
  return arith::ConstantOp::create(b_, loc_, attr);
}

mlir::Type Emitter::MaybeVector(mlir::Type elem, bool vector) const {
  if (!vector || !lane_.active) return elem;
  return mlir::VectorType::get({lane_.width}, elem);
}

mlir::Value Emitter::SplatTo(mlir::Value v, int64_t width) {
  if (IsVector(v)) return v;
  return mlir::vector::BroadcastOp::create(b_, loc_, mlir::VectorType::get({width}, v.getType()),
                                           v);
}

mlir::Value Emitter::Splat(mlir::Value v, mlir::Value like) {
  if (!IsVector(like) || IsVector(v)) return v;
  return SplatTo(v, mlir::cast<mlir::VectorType>(like.getType()).getNumElements());
}

bool Emitter::Varying(const Expr& e) const { return lane_.active && ExprUsesVar(e, lane_.var); }

// ---- statements -------------------------------------------------------------------------------

absl::Status Emitter::EmitStmt(const Stmt& s) {
  if (!s.defined()) return absl::OkStatus();
  switch (s.kind()) {
    case ir::StmtKind::kFor:
      return EmitFor(s.as<ir::ForNode>());
    case ir::StmtKind::kSeq:
      return EmitSeq(s.as<ir::SeqNode>());
    case ir::StmtKind::kStore:
      return EmitStore(s.as<ir::StoreNode>());
    case ir::StmtKind::kAllocate:
      return EmitAllocate(s.as<ir::AllocateNode>());
    case ir::StmtKind::kIfThenElse:
      return EmitIf(s.as<ir::IfThenElseNode>());
    case ir::StmtKind::kBarrier:
      if (config_.target != EmitTarget::kGpu) return absl::OkStatus();
      if (s.as<ir::BarrierNode>()->cluster > 1) {
        // barrier.cluster.arrive (release) and .wait (acquire): the cluster's blocks pass together.
        // Not .aligned: a warp-specialized kernel reaches its last one from diverged roles (the
        // producer's one thread and its idle warps); it runs once or twice per kernel.
        b_.getContext()->getOrLoadDialect<mlir::NVVM::NVVMDialect>();
        mlir::NVVM::ClusterArriveOp::create(b_, loc_, mlir::UnitAttr());
        mlir::NVVM::ClusterWaitOp::create(b_, loc_, mlir::UnitAttr());
      } else {
        mlir::gpu::BarrierOp::create(b_, loc_);
      }
      return absl::OkStatus();
    case ir::StmtKind::kEvaluate:
      // Expressions have no side effects; still check that it is well formed.
      return EmitExpr(s.as<ir::EvaluateNode>()->value).status();
    case ir::StmtKind::kAsyncGroup: {
      const auto* g = s.as<ir::AsyncGroupNode>();
      if (config_.target != EmitTarget::kGpu) {
        return absl::InvalidArgumentError(
            "async copy group on the host target (cp.async pipelines are GPU-only)");
      }
      b_.getContext()->getOrLoadDialect<mlir::NVVM::NVVMDialect>();
      if (g->wgmma) {
        mlir::NVVM::WgmmaWaitGroupSyncOp::create(b_, loc_, b_.getI64IntegerAttr(g->wait));
      } else if (g->is_commit()) {
        mlir::NVVM::CpAsyncCommitGroupOp::create(b_, loc_);
      } else {
        mlir::NVVM::CpAsyncWaitGroupOp::create(b_, loc_, static_cast<uint32_t>(g->wait));
      }
      return absl::OkStatus();
    }
    case ir::StmtKind::kWarpMma:
      return EmitWarpMma(s.as<ir::WarpMmaNode>());
    case ir::StmtKind::kWgmma:
      return EmitWgmma(s.as<ir::WgmmaNode>());
    case ir::StmtKind::kTmaLoad:
      return EmitTmaLoad(s.as<ir::TmaLoadNode>());
    case ir::StmtKind::kMbarrier:
      return EmitMbarrier(s.as<ir::MbarrierNode>());
    case ir::StmtKind::kSetMaxNReg:
      return EmitSetMaxNReg(s.as<ir::SetMaxNRegNode>());
  }
  return absl::InternalError("unhandled statement kind");
}

absl::Status Emitter::EmitSeq(const ir::SeqNode* op) {
  for (size_t i = 0; i < op->stmts.size();) {
    if (!shuffle_buffers_.empty()) {
      ASSIGN_OR_RETURN(size_t covered, EmitShuffleWindow(op->stmts, i));
      if (covered > 0) {
        i += covered;
        continue;
      }
    }
    RETURN_IF_ERROR(EmitStmt(op->stmts[i]));
    ++i;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Emitter::EmitShuffleWindow(const std::vector<Stmt>& stmts, size_t i) {
  if (config_.target != EmitTarget::kGpu || lane_.active || shuffle_read_) return 0;
  const ir::ForNode* put = WarpThreadLoop(stmts[i]);
  const auto* put_store = put ? put->body.as<ir::StoreNode>() : nullptr;
  if (put_store == nullptr || !shuffle_buffers_.count(put_store->buffer)) return 0;
  const std::optional<ExchangeWindow> w = MatchExchangeWindow(stmts, i, put_store->buffer);
  // Every lane of every warp must take part: the loop covers blockDim.x, a multiple of 32.
  if (!w || w->threads != config_.block[0]) return 0;
  const auto* value = put_store->value.as<ir::LoadNode>();
  const BufferBinding* source = FindBuffer(value->buffer);
  const BufferBinding* xchg = FindBuffer(put_store->buffer);
  // The offered value must be a thread's own register, unchanged between the put and the get, and
  // exactly what the store would have kept (same dtype: no rounding).
  if (source == nullptr || xchg == nullptr || source->decl.scope != ir::MemoryScope::kLocal ||
      source->decl.dtype != xchg->decl.dtype) {
    return 0;
  }
  shuffle_read_ = ShuffleRead{put_store->buffer, put_store->value, w->offset};
  absl::Status st = EmitStmt(stmts[i + 2]);
  shuffle_read_.reset();
  RETURN_IF_ERROR(st);
  return w->length;
}

mlir::Value Emitter::ShuffleXor(mlir::Value v, int64_t m) {
  b_.getContext()->getOrLoadDialect<mlir::NVVM::NVVMDialect>();
  auto i32 = [&](int64_t c) -> mlir::Value {
    return arith::ConstantOp::create(b_, loc_, b_.getI32IntegerAttr(static_cast<int32_t>(c)));
  };
  // Full mask; c = 0x1f: one segment of 32 lanes (PTX shfl.sync.bfly.b32 d, a, m, 0x1f, ~0).
  auto shfl = [&](mlir::Value x) -> mlir::Value {
    return mlir::NVVM::ShflOp::create(b_, loc_, x.getType(), i32(-1), x, i32(m), i32(kWarpSize - 1),
                                      mlir::NVVM::ShflKind::bfly, mlir::UnitAttr());
  };
  const mlir::Type t = v.getType();
  if (t.isF32() || t.isInteger(32)) return shfl(v);
  if (t.isInteger(1)) {
    mlir::Value wide = arith::ExtUIOp::create(b_, loc_, b_.getI32Type(), v);
    return arith::TruncIOp::create(b_, loc_, t, shfl(wide));
  }
  CHECK(t.isInteger(64)) << "warp shuffle of an unsupported value type";
  mlir::Value lo = arith::TruncIOp::create(b_, loc_, b_.getI32Type(), v);
  mlir::Value hi = arith::TruncIOp::create(b_, loc_, b_.getI32Type(),
                                           arith::ShRUIOp::create(b_, loc_, v, I64(32)));
  mlir::Value lo64 = arith::ExtUIOp::create(b_, loc_, t, shfl(lo));
  mlir::Value hi64 = arith::ExtUIOp::create(b_, loc_, t, shfl(hi));
  return arith::OrIOp::create(b_, loc_, lo64, arith::ShLIOp::create(b_, loc_, hi64, I64(32)));
}

absl::Status Emitter::EmitLoopBody(const ir::ForNode* op, mlir::Value iv) {
  std::optional<ir::Interval> range;
  const auto min = ir::AsConstInt(op->min);
  const auto extent = ir::AsConstInt(op->extent);
  if (min && extent) range = ir::Interval{*min, *min + *extent - 1};
  BindVar(op->var_name(), iv, range);
  absl::Status st = EmitStmt(op->body);
  UnbindVar();
  return st;
}

absl::Status Emitter::EmitFor(const ir::ForNode* op) {
  if (IsFloat(op->var.type()) || IsFloat(op->min.type()) || IsFloat(op->extent.type())) {
    return absl::InvalidArgumentError(
        absl::StrCat("loop '", op->var_name(), "' has a non-integer variable or bounds"));
  }
  const std::optional<int64_t> extent = ir::AsConstInt(op->extent);
  const std::optional<int64_t> min = ir::AsConstInt(op->min);
  if (extent && *extent <= 0 && BoundDim(op->for_kind) < 0) return absl::OkStatus();
  switch (op->for_kind) {
    case ir::ForKind::kSerial:
    case ir::ForKind::kVThread:
      break;
    case ir::ForKind::kParallel:
      if (config_.target == EmitTarget::kHost && !in_parallel_ && parallel_hook_) {
        return parallel_hook_(*this, op);
      }
      break;
    case ir::ForKind::kUnrolled: {
      if (extent && *extent <= config_.max_unroll && WithinUnrollBudget(op)) {
        const bool outer = unrolling_within_budget_;
        unrolling_within_budget_ = true;
        absl::Status st = EmitUnrolled(op, min.value_or(0), *extent);
        unrolling_within_budget_ = outer;
        return st;
      }
      ASSIGN_OR_RETURN(mlir::Value mn, EmitExpr(op->min));
      ASSIGN_OR_RETURN(mlir::Value ext, EmitExpr(op->extent));
      if (extent && *extent <= config_.max_unroll) {
        // Over the unroll budget: a plain loop, which LLVM unrolls or not by its own size
        // heuristics. An unroll hint would make LLVM unroll it fully anyway, and the compile cost
        // is in the unrolled body, not in who unrolls it (bench/NOTES.md).
        return EmitSerialFor(op, mn, ext, {});
      }
      return EmitSerialFor(op, mn, ext,
                           mlir::parseAttribute("#llvm.loop_annotation<unroll = "
                                                "#llvm.loop_unroll<disable = false>>",
                                                b_.getContext()));
    }
    case ir::ForKind::kVectorized:
      if (extent) return EmitVectorized(op, *extent);
      break;
    default:
      if (config_.target == EmitTarget::kGpu) return EmitBoundFor(op);
      break;  // host: blockIdx / threadIdx loops run serially (PlanHostModule checked them)
  }
  if (extent && *extent == 1) {
    ASSIGN_OR_RETURN(mlir::Value mn, EmitExpr(op->min));
    return EmitLoopBody(op, mn);
  }
  ASSIGN_OR_RETURN(mlir::Value mn, EmitExpr(op->min));
  ASSIGN_OR_RETURN(mlir::Value ext, EmitExpr(op->extent));
  return EmitSerialFor(op, mn, ext, {});
}

bool Emitter::WithinUnrollBudget(const ir::ForNode* op) {
  // Inside an unrolled loop that fit, every nested one fits too: no need to count again.
  if (config_.unroll_budget <= 0 || unrolling_within_budget_) return true;
  return UnrolledLoopNodes(op) <= config_.unroll_budget;
}

absl::Status Emitter::EmitSerialFor(const ir::ForNode* op, mlir::Value min, mlir::Value extent,
                                    mlir::Attribute loop_annotation) {
  mlir::Value ub = arith::AddIOp::create(b_, loc_, min, extent);
  auto loop = mlir::scf::ForOp::create(b_, loc_, min, ub, I64(1));
  if (loop_annotation) loop->setAttr("loop_annotation", loop_annotation);
  mlir::OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  return EmitLoopBody(op, loop.getInductionVar());
}

absl::Status Emitter::EmitUnrolled(const ir::ForNode* op, int64_t min, int64_t extent) {
  const bool const_min = ir::AsConstInt(op->min).has_value();
  mlir::Value mn;
  if (!const_min) {
    ASSIGN_OR_RETURN(mn, EmitExpr(op->min));
  }
  for (int64_t k = 0; k < extent; ++k) {
    mlir::Value iv = const_min ? I64(min + k) : arith::AddIOp::create(b_, loc_, mn, I64(k));
    std::optional<ir::Interval> range;
    if (const_min) range = ir::Interval{min + k, min + k};
    BindVar(op->var_name(), iv, range);
    absl::Status st = EmitStmt(op->body);
    UnbindVar();
    RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

absl::Status Emitter::EmitVectorized(const ir::ForNode* op, int64_t extent) {
  const std::optional<int64_t> min = ir::AsConstInt(op->min);
  if (extent == 1) {
    ASSIGN_OR_RETURN(mlir::Value mn, EmitExpr(op->min));
    return EmitLoopBody(op, mn);
  }
  const bool can_vectorize = config_.vectorize && !lane_.active && extent <= 64 &&
                             VectorizeBlocker(op, extent, ranges_, [this](const std::string& name) {
                               const BufferBinding* b = FindBuffer(name);
                               return b ? &b->decl.shape : nullptr;
                             }).empty();
  if (can_vectorize) {
    ASSIGN_OR_RETURN(mlir::Value mn, EmitExpr(op->min));
    lane_ = VectorLane{true, op->var_name(), extent, mn, op->min};
    std::optional<ir::Interval> range;
    if (min) range = ir::Interval{*min, *min + extent - 1};
    // The variable is bound to its lane-0 value for code that asks for it outside vector mode.
    BindVar(op->var_name(), mn, range);
    absl::Status st = EmitStmt(op->body);
    UnbindVar();
    lane_ = VectorLane{};
    return st;
  }
  if (config_.target == EmitTarget::kGpu && extent <= config_.max_unroll) {
    return EmitUnrolled(op, min.value_or(0), extent);
  }
  ASSIGN_OR_RETURN(mlir::Value mn, EmitExpr(op->min));
  mlir::Attribute annotation;
  if (config_.vectorize) {
    annotation = mlir::parseAttribute(
        absl::StrCat("#llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = false, "
                     "width = ",
                     std::min<int64_t>(extent, 16), " : i32>>"),
        b_.getContext());
  }
  return EmitSerialFor(op, mn, I64(extent), annotation);
}

absl::Status Emitter::EmitBoundFor(const ir::ForNode* op) {
  const int dim = BoundDim(op->for_kind);
  CHECK(dim >= 0) << "not a bound loop";
  const std::optional<int64_t> extent = ir::AsConstInt(op->extent);
  if (!extent) {
    return absl::InvalidArgumentError(absl::StrCat(ir::ForKindName(op->for_kind), " loop '",
                                                   op->var_name(), "' has a non-constant extent"));
  }
  const auto gdim = static_cast<mlir::gpu::Dimension>(dim);
  mlir::Value id;
  int64_t launched;
  if (ir::IsBlockBound(op->for_kind)) {
    id = mlir::gpu::BlockIdOp::create(b_, loc_, gdim);
    launched = config_.grid[dim];
  } else {
    id = mlir::gpu::ThreadIdOp::create(b_, loc_, gdim);
    launched = config_.block[dim];
  }
  if (*extent > launched) {
    return absl::InvalidArgumentError(absl::StrCat(ir::ForKindName(op->for_kind), " loop '",
                                                   op->var_name(), "' has extent ", *extent,
                                                   " but the launch has ", launched));
  }
  mlir::Value id64 = arith::IndexCastOp::create(b_, loc_, b_.getI64Type(), id);
  ASSIGN_OR_RETURN(mlir::Value mn, EmitExpr(op->min));
  mlir::Value iv = arith::AddIOp::create(b_, loc_, mn, id64);
  std::optional<ir::Interval> range;
  if (const auto m = ir::AsConstInt(op->min)) range = ir::Interval{*m, *m + *extent - 1};
  auto emit_body = [&]() -> absl::Status {
    BindVar(op->var_name(), iv, range);
    absl::Status st = EmitStmt(op->body);
    UnbindVar();
    return st;
  };
  if (*extent == launched) return emit_body();
  mlir::Value inside =
      arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::slt, id64, I64(*extent));
  auto guard_if = mlir::scf::IfOp::create(b_, loc_, inside, /*withElseRegion=*/false);
  mlir::OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPoint(guard_if.thenBlock()->getTerminator());
  return emit_body();
}

absl::Status Emitter::EmitAllocate(const ir::AllocateNode* op) {
  const ir::BufferDecl& decl = op->buffer;
  for (int64_t e : decl.shape) {
    if (e < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer '", decl.name, "' has a non-positive extent ", e));
    }
  }
  // A ".shfl" exchange buffer read and written only in exchange windows: its windows become warp
  // shuffles (the buffer is still allocated for any window that cannot be one; unused, LLVM drops
  // it).
  bool shuffles = false;
  if (config_.target == EmitTarget::kGpu && decl.scope == ir::MemoryScope::kShared &&
      IsShuffleBufferName(decl.name) && !shuffle_buffers_.count(decl.name)) {
    ExchangeOnly check(decl.name);
    check.Visit(op->body);
    shuffles = check.Holds();
  }
  if (shuffles) shuffle_buffers_.insert(decl.name);
  mlir::Value memref;
  if (decl.scope == ir::MemoryScope::kGlobal) {
    return absl::UnimplementedError(
        absl::StrCat("global allocate '", decl.name, "' inside a kernel"));
  }
  if (decl.scope == ir::MemoryScope::kShared && config_.target == EmitTarget::kGpu) {
    if (!shared_hook_) return absl::InternalError("no shared-memory allocator");
    ASSIGN_OR_RETURN(memref, shared_hook_(decl));
  } else {
    mlir::OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(alloca_block_);
    auto type = mlir::MemRefType::get(decl.shape, StorageType(b_.getContext(), decl.dtype));
    const bool heap = config_.target == EmitTarget::kHost && decl.Bytes() > 128 * 1024;
    if (heap) {
      memref = mlir::memref::AllocOp::create(b_, loc_, type, b_.getI64IntegerAttr(64));
      heap_.push_back(memref);
    } else {
      memref = mlir::memref::AllocaOp::create(b_, loc_, type, b_.getI64IntegerAttr(16));
    }
  }
  BindBuffer(decl, memref);
  absl::Status st = EmitStmt(op->body);
  UnbindBuffer();
  if (shuffles) shuffle_buffers_.erase(decl.name);
  return st;
}

absl::StatusOr<std::vector<mlir::Value>> Emitter::EmitIndices(const std::string& buffer,
                                                              const std::vector<Expr>& indices,
                                                              const BufferBinding** binding,
                                                              const char* what) {
  const BufferBinding* bb = FindBuffer(buffer);
  if (bb == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of unknown buffer '", buffer, "' (not a parameter or an allocation in scope)"));
  }
  if (indices.size() != bb->decl.shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of buffer '", buffer, "' with ",
                                                   indices.size(), " indices; it has ",
                                                   bb->decl.shape.size(), " dimensions"));
  }
  *binding = bb;
  // Vector accesses address lane 0: the indices are computed with the variable at its lane-0
  // value (bound in scope by EmitVectorized) and outside vector mode.
  const VectorLane saved = lane_;
  lane_.active = false;
  std::vector<mlir::Value> out;
  for (const Expr& i : indices) {
    if (!ir::IsInt(i.type())) {
      lane_ = saved;
      return absl::InvalidArgumentError(
          absl::StrCat("index ", ir::ToString(i), " of '", buffer, "' is not an integer"));
    }
    absl::StatusOr<mlir::Value> v = EmitExpr(i);
    if (!v.ok()) {
      lane_ = saved;
      return v.status();
    }
    mlir::Value iv = *v;
    if (i.type() == ScalarType::kInt32) iv = arith::ExtSIOp::create(b_, loc_, b_.getI64Type(), iv);
    out.push_back(arith::IndexCastOp::create(b_, loc_, b_.getIndexType(), iv));
  }
  lane_ = saved;
  return out;
}

int64_t Emitter::VectorAlignment(const ir::BufferDecl& decl, const std::vector<Expr>& indices,
                                 int64_t width) const {
  const int64_t bytes = ir::BytesOf(decl.dtype);
  Expr offset = ir::IntConst(0);
  int64_t stride = 1;
  for (size_t d = indices.size(); d-- > 0;) {
    offset =
        offset + ir::Substitute(indices[d], {{lane_.var, lane_.min_expr}}) * ir::IntConst(stride);
    stride *= decl.shape[d];
  }
  int64_t align = bytes;
  const int64_t multiple = KnownMultiple(offset);
  std::optional<int64_t> rem;
  if (multiple == 0 || multiple % width == 0) {
    rem = 0;
  } else {
    rem = ir::AsConstInt(ir::Simplify(offset % ir::IntConst(width), ranges_));
  }
  if (rem && *rem == 0) {
    // The largest power of two dividing width * bytes, at most 16.
    const int64_t vbytes = width * bytes;
    align = vbytes & -vbytes;
    align = std::min<int64_t>(align, 16);
    align = std::max(align, bytes);
  }
  return align;
}

mlir::Value Emitter::ElementPointer(const BufferBinding& bb, const std::vector<mlir::Value>& idx,
                                    unsigned address_space) {
  mlir::MLIRContext* ctx = b_.getContext();
  ctx->getOrLoadDialect<mlir::LLVM::LLVMDialect>();
  mlir::Value linear = mlir::arith::ConstantIndexOp::create(b_, loc_, 0);
  int64_t stride = 1;
  for (size_t d = idx.size(); d-- > 0;) {
    mlir::Value term = idx[d];
    if (stride != 1) {
      term = arith::MulIOp::create(b_, loc_, term,
                                   mlir::arith::ConstantIndexOp::create(b_, loc_, stride));
    }
    linear = arith::AddIOp::create(b_, loc_, linear, term);
    stride *= bb.decl.shape[d];
  }
  mlir::Value bytes = arith::IndexCastOp::create(
      b_, loc_, b_.getI64Type(),
      arith::MulIOp::create(
          b_, loc_, linear,
          mlir::arith::ConstantIndexOp::create(b_, loc_, ir::BytesOf(bb.decl.dtype))));
  // The base pointer is the same for every element (CSE keeps one per buffer): shared memrefs
  // hold address-space-3 addresses; a kernel argument's is generic, and one cvta.to.global makes
  // it the global address cp.async reads.
  mlir::Value base_int = arith::IndexCastOp::create(
      b_, loc_, b_.getI64Type(),
      mlir::memref::ExtractAlignedPointerAsIndexOp::create(b_, loc_, bb.memref));
  const unsigned int_space = address_space == 1 ? 0 : address_space;
  mlir::Value base = mlir::LLVM::IntToPtrOp::create(
      b_, loc_, mlir::LLVM::LLVMPointerType::get(ctx, int_space), base_int, nullptr);
  const auto type = mlir::LLVM::LLVMPointerType::get(ctx, address_space);
  if (address_space != int_space) base = mlir::LLVM::AddrSpaceCastOp::create(b_, loc_, type, base);
  return mlir::LLVM::GEPOp::create(b_, loc_, type, b_.getI8Type(), base, mlir::ValueRange{bytes});
}

absl::StatusOr<bool> Emitter::EmitAsyncCopy(const ir::StoreNode* op) {
  // Select(cond, Load, 0): a zero-filling copy of one element (src-size 0 where cond is false).
  const auto* sel = op->value.as<ir::SelectNode>();
  const ir::LoadNode* load = ir::AsyncCopySource(op->value);
  // A vector copy zero-fills as a whole: its condition must be the same for every lane.
  if (sel != nullptr && lane_.active && lane_.width > 1 && Varying(sel->cond)) return false;
  const BufferBinding* dst = FindBuffer(op->buffer);
  const BufferBinding* src = load ? FindBuffer(load->buffer) : nullptr;
  if (dst == nullptr || src == nullptr || dst->decl.scope != ir::MemoryScope::kShared ||
      src->decl.scope != ir::MemoryScope::kGlobal || src->decl.dtype != dst->decl.dtype ||
      op->indices.empty() || load->indices.empty()) {
    return false;
  }
  // One copy per thread (scalar) or per vector: both sides contiguous in the lane (VectorizeBlocker
  // proved whichever varies contiguous; both must vary) and aligned to the copy's size.
  int64_t width = 1;
  if (lane_.active) {
    if (!Varying(op->indices[ContiguousIndex(&dst->decl.shape, op->indices)]) ||
        !Varying(load->indices[ContiguousIndex(&src->decl.shape, load->indices)])) {
      return false;
    }
    width = lane_.width;
  }
  const int64_t bytes = width * ir::BytesOf(dst->decl.dtype);
  if (bytes != 4 && bytes != 8 && bytes != 16) return false;
  if (lane_.active && (VectorAlignment(dst->decl, op->indices, width) < bytes ||
                       VectorAlignment(src->decl, load->indices, width) < bytes)) {
    return false;
  }
  const BufferBinding* bb = nullptr;
  ASSIGN_OR_RETURN(std::vector<mlir::Value> didx,
                   EmitIndices(op->buffer, op->indices, &bb, "async copy"));
  ASSIGN_OR_RETURN(std::vector<mlir::Value> sidx,
                   EmitIndices(load->buffer, load->indices, &bb, "async copy"));
  b_.getContext()->getOrLoadDialect<mlir::NVVM::NVVMDialect>();
  mlir::Value dptr = ElementPointer(*dst, didx, /*address_space=*/3);
  mlir::Value sptr = ElementPointer(*src, sidx, /*address_space=*/1);
  mlir::Value src_size;
  if (sel != nullptr) {
    // Where cond is false nothing is read (src-size 0) and the address is the buffer's first
    // element, so no out-of-range address (e.g. a padded convolution row -1) is ever formed.
    ASSIGN_OR_RETURN(mlir::Value cond, EmitExpr(sel->cond));
    const std::vector<mlir::Value> origin(sidx.size(),
                                          mlir::arith::ConstantIndexOp::create(b_, loc_, 0));
    mlir::Value base = ElementPointer(*src, origin, /*address_space=*/1);
    sptr = mlir::LLVM::SelectOp::create(b_, loc_, cond, sptr, base);
    src_size = mlir::arith::SelectOp::create(
        b_, loc_, cond, mlir::arith::ConstantIntOp::create(b_, loc_, bytes, 32),
        mlir::arith::ConstantIntOp::create(b_, loc_, 0, 32));
  }
  // .cg (L2 only) exists for 16-byte copies; 4 and 8 bytes take .ca.
  const auto modifier =
      bytes == 16 ? mlir::NVVM::LoadCacheModifierKind::CG : mlir::NVVM::LoadCacheModifierKind::CA;
  mlir::NVVM::CpAsyncOp::create(b_, loc_, dptr, sptr, static_cast<uint32_t>(bytes), modifier,
                                src_size);
  return true;
}

absl::Status Emitter::EmitStore(const ir::StoreNode* op) {
  if (op->async_copy) {
    if (config_.target != EmitTarget::kGpu) {
      return absl::InvalidArgumentError(absl::StrCat(
          "async copy to '", op->buffer, "' on the host target (cp.async pipelines are GPU-only)"));
    }
    ASSIGN_OR_RETURN(bool copied, EmitAsyncCopy(op));
    // Otherwise the plain store: the copy completed early, which every wait allows.
    if (copied) return absl::OkStatus();
  }
  const BufferBinding* bb = nullptr;
  ASSIGN_OR_RETURN(std::vector<mlir::Value> idx,
                   EmitIndices(op->buffer, op->indices, &bb, "store"));
  ASSIGN_OR_RETURN(mlir::Value v, EmitExpr(op->value));
  // In a vectorized loop, an access is a vector access when its last index moves with the lane
  // (VectorizeBlocker proved it contiguous and the other indices lane-invariant).
  const bool vector_access =
      !op->indices.empty() && Varying(op->indices[ContiguousIndex(&bb->decl.shape, op->indices)]);
  if (vector_access) {
    v = SplatTo(v, lane_.width);
    mlir::Value st = ToStorage(v, op->value.type(), bb->decl.dtype);
    const int64_t align = VectorAlignment(bb->decl, op->indices, lane_.width);
    mlir::vector::StoreOp::create(b_, loc_, st, bb->memref, idx, false, llvm::MaybeAlign(align));
    return absl::OkStatus();
  }
  if (IsVector(v)) {
    return absl::InternalError(
        absl::StrCat("vector value stored to a uniform index of '", op->buffer, "'"));
  }
  mlir::Value st = ToStorage(v, op->value.type(), bb->decl.dtype);
  mlir::memref::StoreOp::create(b_, loc_, st, bb->memref, idx);
  return absl::OkStatus();
}

absl::Status Emitter::EmitIf(const ir::IfThenElseNode* op) {
  if (op->cond.type() != ScalarType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat("if condition ", ir::ToString(op->cond), " is not bool"));
  }
  ASSIGN_OR_RETURN(mlir::Value c, EmitExpr(op->cond));
  if (IsVector(c)) return absl::InternalError("vector condition of an if statement");
  const bool has_else = op->else_case.defined();
  auto if_op = mlir::scf::IfOp::create(b_, loc_, c, has_else);
  mlir::OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPoint(if_op.thenBlock()->getTerminator());
  RETURN_IF_ERROR(EmitStmt(op->then_case));
  if (has_else) {
    b_.setInsertionPoint(if_op.elseBlock()->getTerminator());
    RETURN_IF_ERROR(EmitStmt(op->else_case));
  }
  return absl::OkStatus();
}

// ---- expressions ------------------------------------------------------------------------------

mlir::arith::FastMathFlags Emitter::Fastmath() const {
  return config_.contract ? arith::FastMathFlags::contract : arith::FastMathFlags::none;
}

bool Emitter::FastGpuF32(mlir::Value v) const {
  return config_.target == EmitTarget::kGpu && mlir::getElementTypeOrSelf(v.getType()).isF32();
}

mlir::Value Emitter::Tf32Value(mlir::Value x, bool round) {
  // Integer operations on the bits on every target: cvt.rna.tf32.f32 is no cheaper on sm_90
  // (ptxas expands it into the same kind of integer sequence).
  mlir::Type bits_type = b_.getI32Type();
  if (auto vt = mlir::dyn_cast<mlir::VectorType>(x.getType())) {
    bits_type = mlir::VectorType::get(vt.getShape(), bits_type);
  }
  constexpr int64_t kMask = -8192;  // 0xFFFFE000 as an int32: the low 13 mantissa bits cleared
  constexpr int64_t kExponent = 0x7F800000;
  mlir::Value bits = arith::BitcastOp::create(b_, loc_, bits_type, x);
  mlir::Value out;
  if (round) {
    // Round half away from zero in the magnitude bits; Inf and NaN (all-ones exponent) stay.
    mlir::Value up = arith::AddIOp::create(b_, loc_, bits, Const(bits_type, 0x1000));
    mlir::Value rounded = arith::AndIOp::create(b_, loc_, up, Const(bits_type, kMask));
    mlir::Value exponent = arith::AndIOp::create(b_, loc_, bits, Const(bits_type, kExponent));
    mlir::Value finite = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::ne, exponent,
                                               Const(bits_type, kExponent));
    out = arith::SelectOp::create(b_, loc_, finite, rounded, bits);
  } else {
    out = arith::AndIOp::create(b_, loc_, bits, Const(bits_type, kMask));
  }
  return arith::BitcastOp::create(b_, loc_, x.getType(), out);
}

mlir::Value Emitter::Exp(mlir::Value x) {
  if (!FastGpuF32(x)) return mlir::math::ExpOp::create(b_, loc_, x);
  // CUDA's __expf: exp(x) = ex2.approx.ftz(x * log2(e)). ex2.approx has at most 2 ulp relative
  // error (PTX ISA, ex2); rounding x * log2(e) to f32 adds |x| * log2(e) * 2^-24 * ln(2) =
  // |x| * 2^-24 relative (CUDA C Programming Guide, intrinsic functions: 2 + floor(|1.173 x|)
  // ulp for __expf), e.g. 5e-6 relative at |x| = 80, well inside a 1e-4 check tolerance.
  // Subnormal results (x < -87.3) flush to +0: an absolute error below 1.2e-38. Infinities and
  // NaN pass through (ex2(-inf) = +0, ex2(+inf) = +inf).
  b_.getContext()->getOrLoadDialect<mlir::LLVM::LLVMDialect>();
  const mlir::Type f32 = b_.getF32Type();
  mlir::Value y = arith::MulFOp::create(b_, loc_, x, Const(x.getType(), 1.4426950408889634));
  auto ex2 = [&](mlir::Value s) -> mlir::Value {
    return mlir::LLVM::CallIntrinsicOp::create(
               b_, loc_, f32, b_.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"), mlir::ValueRange{s})
        .getResult(0);
  };
  auto vt = mlir::dyn_cast<mlir::VectorType>(y.getType());
  if (!vt) return ex2(y);
  // The intrinsic is scalar: one ex2 per lane.
  mlir::Value out = y;
  for (int64_t i = 0; i < vt.getNumElements(); ++i) {
    mlir::Value lane = mlir::vector::ExtractOp::create(b_, loc_, y, i);
    out = mlir::vector::InsertOp::create(b_, loc_, ex2(lane), out, i);
  }
  return out;
}

mlir::Value Emitter::Reciprocal(mlir::Value v) {
  // arcp + afn let NVPTX select rcp.approx.f32 (1 ulp, subnormals kept) instead of the
  // correctly rounded rcp.rn.f32 sequence.
  return arith::DivFOp::create(b_, loc_, Const(v.getType(), 1.0), v,
                               arith::FastMathFlags::arcp | arith::FastMathFlags::afn);
}

mlir::Value Emitter::FloatDiv(mlir::Value a, mlir::Value b) {
  a = Splat(a, b);
  b = Splat(b, a);
  if (!FastGpuF32(b)) return arith::DivFOp::create(b_, loc_, a, b);
  // GPU f32: a * rcp.approx(b), at most 2 ulp from a / b (1 ulp rcp + 0.5 ulp multiply) for
  // |b| < 2^126; for |b| >= 2^126 the reciprocal is subnormal and loses bits (as div.approx).
  if (mlir::matchPattern(a, mlir::m_OneFloat())) return Reciprocal(b);
  return arith::MulFOp::create(b_, loc_, a, Reciprocal(b), Fastmath());
}

absl::StatusOr<mlir::Value> Emitter::EmitExpr(const Expr& e) {
  CHECK(e.defined()) << "emitting an undefined expression";
  mlir::MLIRContext* ctx = b_.getContext();
  switch (e.kind()) {
    case ExprKind::kIntImm:
      // Built from the int64 directly (a double would round constants above 2^53).
      return mlir::Value(arith::ConstantOp::create(
          b_, loc_, b_.getIntegerAttr(ValueType(ctx, e.type()), e.as<ir::IntImmNode>()->value)));
    case ExprKind::kFloatImm:
      return Const(b_.getF32Type(), e.as<ir::FloatImmNode>()->value);
    case ExprKind::kVar: {
      const auto* v = e.as<ir::VarNode>();
      if (!ir::IsInt(v->type)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable '", v->name, "' is ", ir::TypeName(v->type), "; loop variables are int64"));
      }
      if (lane_.active && v->name == lane_.var) {
        // Lane values: min + [0, 1, ..., width-1].
        llvm::SmallVector<int64_t> lanes;
        for (int64_t k = 0; k < lane_.width; ++k) lanes.push_back(k);
        auto vt = mlir::VectorType::get({lane_.width}, b_.getI64Type());
        mlir::Value iota = arith::ConstantOp::create(
            b_, loc_, mlir::DenseElementsAttr::get(vt, llvm::ArrayRef<int64_t>(lanes)));
        mlir::Value r = arith::AddIOp::create(b_, loc_, SplatTo(lane_.min, lane_.width), iota);
        if (v->type == ScalarType::kInt32)
          r = arith::TruncIOp::create(b_, loc_, MaybeVector(b_.getI32Type(), true), r);
        return r;
      }
      for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) {
        if (it->name == v->name) {
          if (v->type == ScalarType::kInt32) {
            return mlir::Value(arith::TruncIOp::create(b_, loc_, b_.getI32Type(), it->value));
          }
          return it->value;
        }
      }
      return absl::InvalidArgumentError(absl::StrCat("unknown variable '", v->name, "'"));
    }
    case ExprKind::kNot: {
      ASSIGN_OR_RETURN(mlir::Value a, EmitExpr(e.as<ir::NotNode>()->a));
      return mlir::Value(arith::XOrIOp::create(b_, loc_, a, Const(a.getType(), 1)));
    }
    case ExprKind::kSelect:
      return EmitSelect(e.as<ir::SelectNode>());
    case ExprKind::kCast: {
      const auto* c = e.as<ir::CastNode>();
      return EmitCast(c->type, c->value);
    }
    case ExprKind::kCall:
      return EmitCall(e.as<ir::CallNode>());
    case ExprKind::kLoad:
      return EmitLoad(e.as<ir::LoadNode>());
    default:
      break;
  }
  if (ir::IsBinaryKind(e.kind())) return EmitBinary(e);
  return absl::InternalError(
      absl::StrCat("unhandled expression kind ", ir::ExprKindName(e.kind())));
}

absl::StatusOr<mlir::Value> Emitter::EmitBinary(const Expr& e) {
  auto [ea, eb] = ir::BinaryOperands(e);
  ASSIGN_OR_RETURN(mlir::Value a, EmitExpr(ea));
  ASSIGN_OR_RETURN(mlir::Value b, EmitExpr(eb));
  const bool is_float = ir::IsFloat(ea.type());
  if (is_float && e.kind() == ExprKind::kDiv && FastGpuF32(b)) {
    // a / b = a * rcp(b), the reciprocal taken before b is broadcast so that a scalar divisor
    // costs one rcp for all lanes (and one per row once the unrolled copies are CSE'd).
    mlir::Value r = Reciprocal(b);
    r = Splat(r, a);
    return mlir::Value(arith::MulFOp::create(b_, loc_, Splat(a, r), r, Fastmath()));
  }
  a = Splat(a, b);
  b = Splat(b, a);
  using P = arith::CmpIPredicate;
  using F = arith::CmpFPredicate;
  auto cmp = [&](P ip, F fp) -> mlir::Value {
    if (is_float) return arith::CmpFOp::create(b_, loc_, fp, a, b);
    return arith::CmpIOp::create(b_, loc_, ip, a, b);
  };
  switch (e.kind()) {
    case ExprKind::kAdd:
      if (is_float) return mlir::Value(arith::AddFOp::create(b_, loc_, a, b, Fastmath()));
      return mlir::Value(arith::AddIOp::create(b_, loc_, a, b));
    case ExprKind::kSub:
      if (is_float) return mlir::Value(arith::SubFOp::create(b_, loc_, a, b, Fastmath()));
      return mlir::Value(arith::SubIOp::create(b_, loc_, a, b));
    case ExprKind::kMul:
      if (is_float) return mlir::Value(arith::MulFOp::create(b_, loc_, a, b, Fastmath()));
      return mlir::Value(arith::MulIOp::create(b_, loc_, a, b));
    case ExprKind::kDiv:
      if (is_float) return FloatDiv(a, b);
      return EmitIntDivMod(ExprKind::kDiv, ea, eb, a, b);
    case ExprKind::kMod:
      if (is_float) {
        // a - b * floor(a / b), as the interpreter.
        mlir::Value q = arith::DivFOp::create(b_, loc_, a, b);
        mlir::Value fl = mlir::math::FloorOp::create(b_, loc_, q);
        mlir::Value p = arith::MulFOp::create(b_, loc_, b, fl);
        return mlir::Value(arith::SubFOp::create(b_, loc_, a, p));
      }
      return EmitIntDivMod(ExprKind::kMod, ea, eb, a, b);
    case ExprKind::kMin:
      if (is_float) return mlir::Value(arith::MinimumFOp::create(b_, loc_, a, b));
      return mlir::Value(arith::MinSIOp::create(b_, loc_, a, b));
    case ExprKind::kMax:
      if (is_float) return mlir::Value(arith::MaximumFOp::create(b_, loc_, a, b));
      return mlir::Value(arith::MaxSIOp::create(b_, loc_, a, b));
    case ExprKind::kEQ:
      return cmp(P::eq, F::OEQ);
    case ExprKind::kNE:
      return cmp(P::ne, F::UNE);
    case ExprKind::kLT:
      return cmp(P::slt, F::OLT);
    case ExprKind::kLE:
      return cmp(P::sle, F::OLE);
    case ExprKind::kGT:
      return cmp(P::sgt, F::OGT);
    case ExprKind::kGE:
      return cmp(P::sge, F::OGE);
    case ExprKind::kAnd:
      return mlir::Value(arith::AndIOp::create(b_, loc_, a, b));
    case ExprKind::kOr:
      return mlir::Value(arith::OrIOp::create(b_, loc_, a, b));
    default:
      break;
  }
  return absl::InternalError("unhandled binary kind");
}

absl::StatusOr<mlir::Value> Emitter::EmitIntDivMod(ExprKind kind, const Expr& a_expr,
                                                   const Expr& b_expr, mlir::Value a,
                                                   mlir::Value b) {
  const bool is_div = kind == ExprKind::kDiv;
  const mlir::Type type = a.getType();
  const std::optional<int64_t> cb = ir::AsConstInt(b_expr);
  if (cb) {
    if (*cb == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("integer division by zero in ",
                       ir::ToString(is_div ? a_expr / b_expr : a_expr % b_expr)));
    }
    if (*cb == 1) return is_div ? a : Const(type, 0);
    if (*cb > 0) {
      const ir::BoundResult bound = ir::BoundOf(a_expr, ranges_);
      if (bound.ok && bound.range.min >= 0) {
        // Non-negative dividend, positive divisor: floor and truncating division agree, and the
        // unsigned forms become shifts and masks for powers of two.
        if (is_div) return mlir::Value(arith::DivUIOp::create(b_, loc_, a, b));
        return mlir::Value(arith::RemUIOp::create(b_, loc_, a, b));
      }
    }
  } else {
    // Division by zero is an error of the evaluator; the generated code must not trap on it
    // (a host SIGFPE would end the process), so a zero divisor gives an unspecified result.
    mlir::Value zero = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::eq, b, Const(type, 0));
    b = arith::SelectOp::create(b_, loc_, zero, Const(type, 1), b);
  }
  using P = arith::CmpIPredicate;
  mlir::Value q = arith::DivSIOp::create(b_, loc_, a, b);
  mlir::Value r = arith::RemSIOp::create(b_, loc_, a, b);
  // Floor semantics: when the remainder is non-zero and its sign differs from the divisor's,
  // the truncated quotient is one too large and the remainder lacks one divisor.
  mlir::Value zero = Const(type, 0);
  mlir::Value r_nz = arith::CmpIOp::create(b_, loc_, P::ne, r, zero);
  mlir::Value r_neg = arith::CmpIOp::create(b_, loc_, P::slt, r, zero);
  mlir::Value b_neg = arith::CmpIOp::create(b_, loc_, P::slt, b, zero);
  mlir::Value differ = arith::XOrIOp::create(b_, loc_, r_neg, b_neg);
  mlir::Value fix = arith::AndIOp::create(b_, loc_, r_nz, differ);
  if (is_div) {
    mlir::Value one = arith::ExtUIOp::create(b_, loc_, type, fix);
    return mlir::Value(arith::SubIOp::create(b_, loc_, q, one));
  }
  mlir::Value add = arith::SelectOp::create(b_, loc_, fix, b, zero);
  return mlir::Value(arith::AddIOp::create(b_, loc_, r, add));
}

absl::StatusOr<mlir::Value> Emitter::EmitSelect(const ir::SelectNode* op) {
  if (op->cond.type() != ScalarType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat("select condition ", ir::ToString(op->cond), " is not bool"));
  }
  ASSIGN_OR_RETURN(mlir::Value c, EmitExpr(op->cond));
  if (EagerSelect(op)) {
    // The branches' loads repeat the condition's; LLVM's CSE keeps one load per element (no
    // store lies between them).
    ASSIGN_OR_RETURN(mlir::Value t, EmitExpr(op->true_value));
    ASSIGN_OR_RETURN(mlir::Value f, EmitExpr(op->false_value));
    t = Splat(t, f);
    f = Splat(f, t);
    t = Splat(t, c);
    f = Splat(f, c);
    return mlir::Value(arith::SelectOp::create(b_, loc_, c, t, f));
  }
  if (!IsVector(c) && ClampsBranchLoads(op)) {
    // A padding select (Halide's constant_exterior): both branches evaluated, each load at its
    // indices clamped into the buffer, so the one not taken reads some element of the buffer
    // and is thrown away. Where the select is taken the indices are in range (the IR reads only
    // valid elements), the clamp changes nothing there. Unconditional loads of equal clamped
    // addresses are one load after LLVM's CSE: a depthwise 3x3 thread with 8 outputs along h
    // reads its 30 window elements once, where each padding branch re-loaded its element
    // (58 loads and 48 branches).
    ++clamp_loads_;
    absl::StatusOr<mlir::Value> t = EmitExpr(op->true_value);
    absl::StatusOr<mlir::Value> f = t.ok() ? EmitExpr(op->false_value) : t;
    --clamp_loads_;
    if (!f.ok()) return f.status();
    mlir::Value tv = Splat(*t, *f);
    mlir::Value fv = Splat(*f, tv);
    return mlir::Value(arith::SelectOp::create(b_, loc_, c, tv, fv));
  }
  // Only the taken branch may load (ir/expr.h: a Load in the branch not taken is never performed).
  if (IsVector(c)) return absl::InternalError("lazy select with a vector condition");
  const bool varying = Varying(op->true_value) || Varying(op->false_value);
  const mlir::Type type = MaybeVector(ValueType(b_.getContext(), op->type), varying);
  auto if_op = mlir::scf::IfOp::create(b_, loc_, mlir::TypeRange{type}, c, /*addThenBlock=*/true,
                                       /*addElseBlock=*/true);
  mlir::OpBuilder::InsertionGuard guard(b_);
  for (int branch = 0; branch < 2; ++branch) {
    b_.setInsertionPointToEnd(branch == 0 ? if_op.thenBlock() : if_op.elseBlock());
    ASSIGN_OR_RETURN(mlir::Value v, EmitExpr(branch == 0 ? op->true_value : op->false_value));
    if (varying) v = SplatTo(v, lane_.width);
    mlir::scf::YieldOp::create(b_, loc_, v);
  }
  return mlir::Value(if_op.getResult(0));
}

mlir::Value Emitter::Convert(mlir::Value v, ScalarType from, ScalarType to) {
  if (from == to) return v;
  mlir::MLIRContext* ctx = b_.getContext();
  const mlir::Type vt = v.getType();
  auto shaped = [&](mlir::Type elem) { return ShapedLike(elem, vt); };
  const bool from_f = ir::IsFloat(from);
  const bool to_f = ir::IsFloat(to);
  auto round_narrow = [&](mlir::Value f32) -> mlir::Value {
    if (to == ScalarType::kFloat32) return f32;
    mlir::Value narrow = arith::TruncFOp::create(b_, loc_, shaped(StorageType(ctx, to)), f32);
    return arith::ExtFOp::create(b_, loc_, shaped(b_.getF32Type()), narrow);
  };
  if (from_f && to_f) return round_narrow(v);
  if (!from_f && to_f) {
    mlir::Value f;
    if (from == ScalarType::kBool) {
      f = arith::UIToFPOp::create(b_, loc_, shaped(b_.getF32Type()), v);
    } else {
      f = arith::SIToFPOp::create(b_, loc_, shaped(b_.getF32Type()), v);
    }
    return round_narrow(f);
  }
  if (from_f) {
    if (to == ScalarType::kBool) {
      return arith::CmpFOp::create(b_, loc_, arith::CmpFPredicate::UNE, v, Const(vt, 0.0));
    }
    return arith::FPToSIOp::create(b_, loc_, shaped(ValueType(ctx, to)), v);
  }
  // Integer / bool to integer / bool.
  if (to == ScalarType::kBool) {
    return arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::ne, v, Const(vt, 0));
  }
  const mlir::Type target = shaped(ValueType(ctx, to));
  if (from == ScalarType::kBool) return arith::ExtUIOp::create(b_, loc_, target, v);
  if (from == ScalarType::kInt32) return arith::ExtSIOp::create(b_, loc_, target, v);
  return arith::TruncIOp::create(b_, loc_, target, v);
}

mlir::Value Emitter::ToStorage(mlir::Value v, ScalarType value_type, ScalarType storage) {
  v = Convert(v, value_type, storage);
  const mlir::Type vt = v.getType();
  switch (storage) {
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      return arith::TruncFOp::create(b_, loc_,
                                     ShapedLike(StorageType(b_.getContext(), storage), vt), v);
    case ScalarType::kBool:
      return arith::ExtUIOp::create(b_, loc_, ShapedLike(b_.getI8Type(), vt), v);
    default:
      return v;
  }
}

mlir::Value Emitter::FromStorage(mlir::Value v, ScalarType storage, ScalarType value_type) {
  const mlir::Type vt = v.getType();
  switch (storage) {
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      v = arith::ExtFOp::create(b_, loc_, ShapedLike(b_.getF32Type(), vt), v);
      break;
    case ScalarType::kBool:
      v = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::ne, v, Const(vt, 0));
      break;
    default:
      break;
  }
  return Convert(v, storage, value_type);
}

absl::StatusOr<mlir::Value> Emitter::EmitCast(ScalarType to, const Expr& value) {
  ASSIGN_OR_RETURN(mlir::Value v, EmitExpr(value));
  return Convert(v, value.type(), to);
}

bool Emitter::ClampsBranchLoads(const ir::SelectNode* op) const {
  LoadsIn loads(/*unconditional=*/false);
  CostlyOrTrapping costly;
  for (const Expr* branch : {&op->true_value, &op->false_value}) {
    loads.Visit(*branch);
    costly.Visit(*branch);
  }
  if (loads.loads.empty() || costly.found) return false;
  for (const ir::LoadNode* ld : loads.loads) {
    const BufferBinding* bb = FindBuffer(ld->buffer);
    // Global buffers only: a clamped index into registers would force them into local memory.
    if (bb == nullptr || bb->decl.scope != ir::MemoryScope::kGlobal) return false;
    if (shuffle_read_ && ld->buffer == shuffle_read_->buffer) return false;
    if (ld->indices.size() != bb->decl.shape.size()) return false;
    // An empty buffer has no element to clamp to.
    for (int64_t extent : bb->decl.shape) {
      if (extent < 1) return false;
    }
    for (const Expr& index : ld->indices) {
      LoadsIn nested(/*unconditional=*/false);
      nested.Visit(index);
      // An index that loads (a gather) may itself be out of range where the select is not
      // taken; a varying index is a vector access that a clamp would break.
      if (!nested.loads.empty() || Varying(index)) return false;
    }
  }
  return true;
}

void Emitter::ClampIndices(const BufferBinding& bb, const std::vector<Expr>& indices,
                           std::vector<mlir::Value>& idx) {
  if (bb.decl.scope != ir::MemoryScope::kGlobal) return;
  for (size_t d = 0; d < idx.size() && d < indices.size(); ++d) {
    const int64_t last = bb.decl.shape[d] - 1;
    const ir::BoundResult bound = ir::BoundOf(indices[d], ranges_);
    if (bound.ok && bound.range.min >= 0 && bound.range.max <= last) continue;
    mlir::Value lo = mlir::arith::ConstantIndexOp::create(b_, loc_, 0);
    mlir::Value hi = mlir::arith::ConstantIndexOp::create(b_, loc_, last);
    mlir::Value v = arith::MaxSIOp::create(b_, loc_, idx[d], lo);
    idx[d] = arith::MinSIOp::create(b_, loc_, v, hi);
  }
}

absl::StatusOr<mlir::Value> Emitter::EmitLoad(const ir::LoadNode* op) {
  if (shuffle_read_ && op->buffer == shuffle_read_->buffer) {
    // The value lane u ^ m offers (EmitShuffleWindow checked the indices).
    ASSIGN_OR_RETURN(mlir::Value mine, EmitExpr(shuffle_read_->value));
    return ShuffleXor(mine, shuffle_read_->offset);
  }
  const BufferBinding* bb = nullptr;
  ASSIGN_OR_RETURN(std::vector<mlir::Value> idx, EmitIndices(op->buffer, op->indices, &bb, "load"));
  if (clamp_loads_ > 0) ClampIndices(*bb, op->indices, idx);
  const bool vector_access =
      !op->indices.empty() && Varying(op->indices[ContiguousIndex(&bb->decl.shape, op->indices)]);
  const mlir::Type storage = StorageType(b_.getContext(), bb->decl.dtype);
  mlir::Value raw;
  if (vector_access) {
    const int64_t align = VectorAlignment(bb->decl, op->indices, lane_.width);
    raw = mlir::vector::LoadOp::create(b_, loc_, mlir::VectorType::get({lane_.width}, storage),
                                       bb->memref, idx, false, llvm::MaybeAlign(align));
  } else {
    raw = mlir::memref::LoadOp::create(b_, loc_, bb->memref, idx);
  }
  return FromStorage(raw, bb->decl.dtype, op->type);
}

absl::StatusOr<mlir::Value> Emitter::EmitCall(const ir::CallNode* op) {
  std::vector<mlir::Value> args;
  for (const Expr& a : op->args) {
    ASSIGN_OR_RETURN(mlir::Value v, EmitExpr(a));
    args.push_back(v);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    for (size_t j = 0; j < args.size(); ++j) args[i] = Splat(args[i], args[j]);
  }
  mlir::Value x = args[0];
  const mlir::Type t = x.getType();
  if (!ir::IsFloat(op->type)) {
    if (op->op != ir::CallOp::kAbs) {
      return absl::InvalidArgumentError(
          absl::StrCat(ir::CallOpName(op->op), " of a non-float operand"));
    }
    mlir::Value neg = arith::CmpIOp::create(b_, loc_, arith::CmpIPredicate::slt, x, Const(t, 0));
    mlir::Value minus = arith::SubIOp::create(b_, loc_, Const(t, 0), x);
    return mlir::Value(arith::SelectOp::create(b_, loc_, neg, minus, x));
  }
  namespace math = mlir::math;
  switch (op->op) {
    case ir::CallOp::kExp:
      return Exp(x);
    case ir::CallOp::kLog:
      return mlir::Value(math::LogOp::create(b_, loc_, x));
    case ir::CallOp::kSqrt:
      return mlir::Value(math::SqrtOp::create(b_, loc_, x));
    case ir::CallOp::kRsqrt: {
      mlir::Value s = math::SqrtOp::create(b_, loc_, x);
      return FloatDiv(Const(t, 1.0), s);
    }
    case ir::CallOp::kTanh:
      return mlir::Value(math::TanhOp::create(b_, loc_, x));
    case ir::CallOp::kErf:
      return mlir::Value(math::ErfOp::create(b_, loc_, x));
    case ir::CallOp::kSigmoid: {
      mlir::Value n = arith::NegFOp::create(b_, loc_, x);
      mlir::Value ex = Exp(n);
      mlir::Value den = arith::AddFOp::create(b_, loc_, Const(t, 1.0), ex);
      return FloatDiv(Const(t, 1.0), den);
    }
    case ir::CallOp::kAbs:
      return mlir::Value(math::AbsFOp::create(b_, loc_, x));
    case ir::CallOp::kFloor:
      return mlir::Value(math::FloorOp::create(b_, loc_, x));
    case ir::CallOp::kTf32Round:
    case ir::CallOp::kTf32Truncate:
      return Tf32Value(x, op->op == ir::CallOp::kTf32Round);
    case ir::CallOp::kPow: {
      // pow(x, y) = exp(y * log|x|), negated for x < 0 and odd integer y, NaN for x < 0 and
      // non-integer y, 1 for y == 0 (C's pow).
      mlir::Value y = args[1];
      using F = arith::CmpFPredicate;
      mlir::Value ax = math::AbsFOp::create(b_, loc_, x);
      mlir::Value lg = math::LogOp::create(b_, loc_, ax);
      mlir::Value r = Exp(arith::MulFOp::create(b_, loc_, y, lg));
      mlir::Value y_int =
          arith::CmpFOp::create(b_, loc_, F::OEQ, math::FloorOp::create(b_, loc_, y), y);
      mlir::Value half = arith::MulFOp::create(b_, loc_, y, Const(t, 0.5));
      mlir::Value y_odd = arith::AndIOp::create(
          b_, loc_, y_int,
          arith::CmpFOp::create(b_, loc_, F::UNE, math::FloorOp::create(b_, loc_, half), half));
      mlir::Value neg_r = arith::NegFOp::create(b_, loc_, r);
      mlir::Value nan = Const(t, std::numeric_limits<double>::quiet_NaN());
      mlir::Value for_neg = arith::SelectOp::create(
          b_, loc_, y_int, arith::SelectOp::create(b_, loc_, y_odd, neg_r, r), nan);
      mlir::Value x_neg = arith::CmpFOp::create(b_, loc_, F::OLT, x, Const(t, 0.0));
      mlir::Value res = arith::SelectOp::create(b_, loc_, x_neg, for_neg, r);
      mlir::Value y_zero = arith::CmpFOp::create(b_, loc_, F::OEQ, y, Const(t, 0.0));
      return mlir::Value(arith::SelectOp::create(b_, loc_, y_zero, Const(t, 1.0), res));
    }
  }
  return absl::InternalError("unhandled call");
}

}  // namespace tilesearch::codegen::internal
