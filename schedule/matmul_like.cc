#include "schedule/matmul_like.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "schedule/operand_repack.h"

namespace tilesearch::schedule {
namespace {

// Variables and loaded element types of an operand factor; `pure` is false when the factor is not
// a Load, a Cast of a pure factor or a Select of a pure factor with the constant 0.
struct FactorInfo {
  std::set<std::string> vars;
  std::set<ir::ScalarType> load_types;
  const ir::LoadNode* first_load = nullptr;
  bool pure = true;
};

class VarCollector : public ir::ExprVisitor {
 public:
  explicit VarCollector(FactorInfo* info) : info_(info) {}

 protected:
  void VisitVar(const ir::VarNode* op, const ir::Expr& e) override {
    info_->vars.insert(op->name);
    ir::ExprVisitor::VisitVar(op, e);
  }
  void VisitLoad(const ir::LoadNode* op, const ir::Expr& e) override {
    info_->load_types.insert(op->type);
    if (info_->first_load == nullptr) info_->first_load = op;
    ir::ExprVisitor::VisitLoad(op, e);
  }

 private:
  FactorInfo* info_;
};

bool IsZero(const ir::Expr& e) {
  const auto v = ir::AsConstNumber(e);
  return v && *v == 0.0;
}

bool PureOperand(const ir::Expr& e) {
  if (e.as<ir::LoadNode>()) return true;
  if (const auto* c = e.as<ir::CastNode>()) return PureOperand(c->value);
  if (const auto* s = e.as<ir::SelectNode>()) {
    return (PureOperand(s->true_value) && IsZero(s->false_value)) ||
           (IsZero(s->true_value) && PureOperand(s->false_value));
  }
  return false;
}

FactorInfo Inspect(const ir::Expr& e) {
  FactorInfo info;
  VarCollector c(&info);
  c.Visit(e);
  info.pure = PureOperand(e);
  return info;
}

// Whether the load's last index reads variable `var`.
bool LastIndexUses(const ir::LoadNode* load, const std::string& var) {
  if (load == nullptr || load->indices.empty()) return false;
  FactorInfo info;
  VarCollector c(&info);
  c.Visit(load->indices.back());
  return info.vars.count(var) > 0;
}

}  // namespace

absl::StatusOr<MatmulLike> AnalyzeMatmulLike(const ir::TensorNode& op, const ir::Expr& body) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage '", op.name, "' is not matmul-like: ", why));
  };
  if (op.reduce != ir::ReduceKind::kSum) return fail("not a sum reduction");
  if (op.init.defined() && !IsZero(op.init)) return fail("its sum starts from a non-zero value");
  const auto* mul = body.as<ir::MulNode>();
  if (mul == nullptr)
    return fail(absl::StrCat("its body ", ir::ToString(body), " is not a product"));
  MatmulLike r;
  r.a = mul->a;
  r.b = mul->b;
  FactorInfo fa = Inspect(r.a);
  FactorInfo fb = Inspect(r.b);
  if (!fa.pure || !fb.pure) {
    return fail("a factor is not an operand read (a load, its cast, or a select of it with 0)");
  }
  if (fa.load_types.size() != 1 || fb.load_types.size() != 1) {
    return fail("each factor must load tensors of one element type");
  }
  for (const ir::IterVar& k : op.reduce_axes) {
    if (!fa.vars.count(k.name) || !fb.vars.count(k.name)) {
      return fail(absl::StrCat("reduce axis '", k.name, "' is not read by both factors"));
    }
    r.k *= k.extent;
  }
  for (int d = 0; d < static_cast<int>(op.axes.size()); ++d) {
    const ir::IterVar& ax = op.axes[d];
    const bool in_a = fa.vars.count(ax.name) > 0;
    const bool in_b = fb.vars.count(ax.name) > 0;
    if (in_a && !in_b) {
      r.m_axes.push_back(d);
      r.m *= ax.extent;
    } else if (in_b && !in_a) {
      r.n_axes.push_back(d);
      r.n *= ax.extent;
    } else {
      r.batch_axes.push_back(d);
      r.batch *= ax.extent;
    }
  }
  if (r.m_axes.empty() || r.n_axes.empty()) {
    // Name the axes both factors read: a grouped or depthwise convolution's channel is one, and
    // "m: 3 axes, n: 0" alone does not say why.
    std::vector<std::string> both;
    for (int d : r.batch_axes) both.push_back(absl::StrCat("'", op.axes[d].name, "'"));
    return fail(absl::StrCat(
        "it needs output axes read by only one factor each (m: ", r.m_axes.size(),
        " axes, n: ", r.n_axes.size(), ")",
        both.empty() ? std::string()
                     : absl::StrCat("; read by both factors: ", absl::StrJoin(both, ", "),
                                    " (a batch, or the channel of a grouped or depthwise "
                                    "convolution)")));
  }
  r.a_type = *fa.load_types.begin();
  r.b_type = *fb.load_types.begin();
  const std::string& k_inner = op.reduce_axes.back().name;
  r.a_k_inner = LastIndexUses(fa.first_load, k_inner);
  r.b_k_inner = LastIndexUses(fb.first_load, k_inner);
  // (Planned only where it can matter: the search analyzes every sampled state.)
  const bool plain = PlainOperandLoad(r.a) != nullptr && PlainOperandLoad(r.b) != nullptr;
  const bool float32 = r.a_type == ir::ScalarType::kFloat32 && r.b_type == ir::ScalarType::kFloat32;
  r.repack_plannable = (!plain || float32) && PlanOperandRepack(op, r).ok();
  r.repackable = !plain && r.repack_plannable;
  return r;
}

const ir::LoadNode* PlainOperandLoad(const ir::Expr& factor) {
  ir::Expr e = factor;
  if (const auto* c = e.as<ir::CastNode>()) e = c->value;
  const auto* load = e.as<ir::LoadNode>();
  if (load == nullptr) return nullptr;
  for (const ir::Expr& i : load->indices) {
    if (i.as<ir::VarNode>() == nullptr) return nullptr;
  }
  return load;
}

}  // namespace tilesearch::schedule
