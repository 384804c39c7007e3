#include "ir/tensor.h"

#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tilesearch::ir {

const char* ReduceKindName(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kNone:
      return "none";
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kMax:
      return "max";
    case ReduceKind::kMin:
      return "min";
    case ReduceKind::kProd:
      return "prod";
  }
  return "?";
}

Expr ReduceIdentity(ReduceKind kind, ScalarType t) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (kind) {
    case ReduceKind::kSum:
      return MakeConst(t, 0);
    case ReduceKind::kProd:
      return MakeConst(t, 1);
    case ReduceKind::kMax:
      if (IsFloat(t)) return FloatConst(-kInf, t);
      if (t == ScalarType::kInt32) return IntConst(std::numeric_limits<int32_t>::min(), t);
      if (t == ScalarType::kBool) return BoolConst(false);
      return IntConst(std::numeric_limits<int64_t>::min(), t);
    case ReduceKind::kMin:
      if (IsFloat(t)) return FloatConst(kInf, t);
      if (t == ScalarType::kInt32) return IntConst(std::numeric_limits<int32_t>::max(), t);
      if (t == ScalarType::kBool) return BoolConst(true);
      return IntConst(std::numeric_limits<int64_t>::max(), t);
    case ReduceKind::kNone:
      break;
  }
  CHECK(false) << "no identity for reduce kind " << ReduceKindName(kind);
  return Expr();
}

Expr ReduceCombine(ReduceKind kind, Expr acc, Expr x) {
  switch (kind) {
    case ReduceKind::kSum:
      return AddNode::Make(std::move(acc), std::move(x));
    case ReduceKind::kProd:
      return MulNode::Make(std::move(acc), std::move(x));
    case ReduceKind::kMax:
      return MaxNode::Make(std::move(acc), std::move(x));
    case ReduceKind::kMin:
      return MinNode::Make(std::move(acc), std::move(x));
    case ReduceKind::kNone:
      break;
  }
  CHECK(false) << "no combiner for reduce kind none";
  return Expr();
}

int64_t Tensor::NumElements() const {
  // Stage shapes are capped at kMaxElements (checked by Placeholder / Compute / Reduce), so the
  // product cannot overflow.
  int64_t n = 1;
  for (int64_t e : node_->shape) n *= e;
  return n;
}

Expr Tensor::operator()(const std::vector<Expr>& indices) const {
  CHECK(defined()) << "load from an undefined tensor";
  // The index count is not checked here: Compute / Reduce report a body that indexes a tensor
  // with the wrong number of indices as a Status (BodyChecker).
  return LoadNode::Make(dtype(), name(), indices, node_);
}

namespace {

absl::Status CheckShape(const std::string& stage, const std::vector<int64_t>& shape,
                        const char* what) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " rank ", shape.size(), " of tensor '",
                                                   stage, "' exceeds the maximum ", kMaxRank));
  }
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, " extent ", shape[d], " of dimension ",
                                                     d, " of tensor '", stage,
                                                     "' is not positive"));
    }
    // count ≤ kMaxElements before the check, so count · extent overflows only when extent is
    // above kMaxElements, which the division test catches first.
    if (shape[d] > kMaxElements / count) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " of tensor '", stage, "' has more than ", kMaxElements,
                       " (2^40) elements (extent ", shape[d], " in dimension ", d, ")"));
    }
    count *= shape[d];
  }
  return absl::OkStatus();
}

bool IsIdentifier(const std::string& name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(name[0])) return false;
  for (char c : name) {
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '.') return false;
  }
  return true;
}

absl::StatusOr<std::vector<IterVar>> MakeAxes(const std::string& stage,
                                              const std::vector<int64_t>& shape,
                                              const std::vector<std::string>& names,
                                              const char* prefix) {
  if (!names.empty() && names.size() != shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", stage, "' has ", shape.size(), " ",
                                                   prefix, " axes but ", names.size(),
                                                   " axis names"));
  }
  std::vector<IterVar> axes;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string name = names.empty() ? absl::StrCat(prefix, d) : names[d];
    axes.push_back(IterVar{std::move(name), shape[d]});
  }
  return axes;
}

// Checks that a body only uses the stage's axis variables and reads tensors with the right rank.
class BodyChecker : public ExprVisitor {
 public:
  BodyChecker(std::string stage, std::set<std::string> vars)
      : stage_(std::move(stage)), vars_(std::move(vars)) {}
  absl::Status status;

 protected:
  void VisitVar(const VarNode* op, const Expr&) override {
    if (status.ok() && !vars_.count(op->name)) {
      status =
          absl::InvalidArgumentError(absl::StrCat("body of tensor '", stage_, "' uses variable '",
                                                  op->name, "' that is not one of its axes"));
    }
  }
  void VisitLoad(const LoadNode* op, const Expr& e) override {
    if (status.ok() && !op->producer) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "body of tensor '", stage_, "' reads buffer '", op->buffer, "' that is not a tensor"));
    } else if (status.ok() && op->producer->shape.size() != op->indices.size()) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "body of tensor '", stage_, "' indexes tensor '", op->buffer, "' with ",
          op->indices.size(), " indices; it has ", op->producer->shape.size(), " dimensions"));
    }
    ExprVisitor::VisitLoad(op, e);
  }

 private:
  std::string stage_;
  std::set<std::string> vars_;
};

absl::Status CheckBody(const std::string& stage, const Expr& body, const std::vector<IterVar>& axes,
                       const std::vector<IterVar>& raxes) {
  if (!body.defined()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", stage, "' has no body"));
  }
  std::set<std::string> vars;
  for (const auto* list : {&axes, &raxes}) {
    for (const IterVar& iv : *list) {
      if (!vars.insert(iv.name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", stage, "' has two axes named '", iv.name, "'"));
      }
    }
  }
  BodyChecker checker(stage, std::move(vars));
  checker.Visit(body);
  return checker.status;
}

std::vector<Expr> Vars(const std::vector<IterVar>& axes) {
  std::vector<Expr> v;
  for (const IterVar& iv : axes) v.push_back(iv.var());
  return v;
}

}  // namespace

absl::StatusOr<Tensor> Placeholder(std::string name, std::vector<int64_t> shape, ScalarType dtype) {
  if (name.empty()) return absl::InvalidArgumentError("placeholder without a name");
  if (!IsIdentifier(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placeholder name '", name, "' is not an identifier ([A-Za-z_][A-Za-z0-9_.]*)"));
  }
  if (std::string(TypeName(dtype)) == "?") {
    return absl::InvalidArgumentError(
        absl::StrCat("placeholder '", name, "' has unknown dtype ", static_cast<int>(dtype)));
  }
  RETURN_IF_ERROR(CheckShape(name, shape, "shape"));
  auto node = std::make_shared<TensorNode>();
  node->name = std::move(name);
  node->dtype = dtype;
  node->shape = std::move(shape);
  node->is_placeholder = true;
  node->tag = "placeholder";
  return Tensor(std::move(node));
}

absl::StatusOr<Tensor> Compute(std::string name, std::vector<int64_t> shape, const ComputeFn& fn,
                               const ComputeOptions& options) {
  if (name.empty()) return absl::InvalidArgumentError("compute stage without a name");
  RETURN_IF_ERROR(CheckShape(name, shape, "shape"));
  ASSIGN_OR_RETURN(std::vector<IterVar> axes, MakeAxes(name, shape, options.axis_names, "i"));
  Expr body = fn(Vars(axes));
  RETURN_IF_ERROR(CheckBody(name, body, axes, {}));
  auto node = std::make_shared<TensorNode>();
  node->name = std::move(name);
  node->dtype = body.type();
  node->shape = std::move(shape);
  node->axes = std::move(axes);
  node->body = std::move(body);
  node->tag = options.tag;
  return Tensor(std::move(node));
}

absl::StatusOr<Tensor> Reduce(std::string name, std::vector<int64_t> shape, ReduceKind kind,
                              std::vector<int64_t> reduce_shape, const ReduceFn& fn, Expr init,
                              const ComputeOptions& options) {
  if (name.empty()) return absl::InvalidArgumentError("reduce stage without a name");
  if (std::string(ReduceKindName(kind)) == "?") {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce stage '", name, "' has unknown kind ", static_cast<int>(kind)));
  }
  if (kind == ReduceKind::kNone) {
    return absl::InvalidArgumentError(absl::StrCat("reduce stage '", name, "' has kind none"));
  }
  if (reduce_shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("reduce stage '", name, "' has no reduce axes"));
  }
  RETURN_IF_ERROR(CheckShape(name, shape, "shape"));
  RETURN_IF_ERROR(CheckShape(name, reduce_shape, "reduce"));
  {
    std::vector<int64_t> domain = shape;
    domain.insert(domain.end(), reduce_shape.begin(), reduce_shape.end());
    RETURN_IF_ERROR(CheckShape(name, domain, "iteration domain"));
  }
  ASSIGN_OR_RETURN(std::vector<IterVar> axes, MakeAxes(name, shape, options.axis_names, "i"));
  ASSIGN_OR_RETURN(std::vector<IterVar> raxes,
                   MakeAxes(name, reduce_shape, options.reduce_axis_names, "r"));
  Expr body = fn(Vars(axes), Vars(raxes));
  RETURN_IF_ERROR(CheckBody(name, body, axes, raxes));
  if (body.type() == ScalarType::kBool) {
    // No combiner is defined on bool (arithmetic and min/max reject it).
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce stage '", name, "' combines bool values; ", "cast the body to a numeric type"));
  }
  if (!init.defined()) init = ReduceIdentity(kind, body.type());
  if (init.type() != body.type()) {
    return absl::InvalidArgumentError(absl::StrCat("init of reduce stage '", name, "' is ",
                                                   TypeName(init.type()), " but its body is ",
                                                   TypeName(body.type())));
  }
  RETURN_IF_ERROR(CheckBody(name, init, axes, {}));
  auto node = std::make_shared<TensorNode>();
  node->name = std::move(name);
  node->dtype = body.type();
  node->shape = std::move(shape);
  node->axes = std::move(axes);
  node->reduce_axes = std::move(raxes);
  node->reduce = kind;
  node->body = std::move(body);
  node->init = std::move(init);
  node->tag = options.tag;
  return Tensor(std::move(node));
}

}  // namespace tilesearch::ir
