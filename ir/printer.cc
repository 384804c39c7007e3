// Printer for expressions, statements and loop nests. The text is stable: golden tests rely on it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/expr.h"
#include "ir/stmt.h"

namespace tilesearch::ir {
namespace {

const char* BinarySymbol(ExprKind k) {
  switch (k) {
    case ExprKind::kAdd:
      return " + ";
    case ExprKind::kSub:
      return " - ";
    case ExprKind::kMul:
      return "*";
    case ExprKind::kDiv:
      return "/";
    case ExprKind::kMod:
      return " % ";
    case ExprKind::kEQ:
      return " == ";
    case ExprKind::kNE:
      return " != ";
    case ExprKind::kLT:
      return " < ";
    case ExprKind::kLE:
      return " <= ";
    case ExprKind::kGT:
      return " > ";
    case ExprKind::kGE:
      return " >= ";
    case ExprKind::kAnd:
      return " && ";
    case ExprKind::kOr:
      return " || ";
    default:
      return nullptr;
  }
}

// Shortest decimal text that reads back as the same constant of type `t`: parsed as a double and
// rounded to `t` (what FloatImmNode::Make does) it gives `v` again, so 0.1f prints as "0.1" rather
// than the double nearest the float32 value.
std::string FormatFloat(double v, ScalarType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (RoundToType(std::strtod(buf, nullptr), t) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

void Print(std::ostream& os, const Expr& e) {
  if (!e.defined()) {
    os << "<undefined>";
    return;
  }
  if (IsBinaryKind(e.kind())) {
    auto [a, b] = BinaryOperands(e);
    if (e.kind() == ExprKind::kMin || e.kind() == ExprKind::kMax) {
      os << (e.kind() == ExprKind::kMin ? "min(" : "max(");
      Print(os, a);
      os << ", ";
      Print(os, b);
      os << ")";
      return;
    }
    os << "(";
    Print(os, a);
    os << BinarySymbol(e.kind());
    Print(os, b);
    os << ")";
    return;
  }
  switch (e.kind()) {
    case ExprKind::kIntImm: {
      const auto* imm = e.as<IntImmNode>();
      if (e.type() == ScalarType::kBool) {
        os << (imm->value ? "true" : "false");
      } else {
        os << imm->value;
        if (e.type() == ScalarType::kInt32) os << "i32";
      }
      return;
    }
    case ExprKind::kFloatImm: {
      os << FormatFloat(e.as<FloatImmNode>()->value, e.type());
      if (e.type() == ScalarType::kFloat32) os << "f";
      if (e.type() == ScalarType::kFloat16) os << "h";
      if (e.type() == ScalarType::kBFloat16) os << "bf";
      return;
    }
    case ExprKind::kVar:
      os << e.as<VarNode>()->name;
      return;
    case ExprKind::kNot:
      os << "!";
      Print(os, e.as<NotNode>()->a);
      return;
    case ExprKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      os << "select(";
      Print(os, s->cond);
      os << ", ";
      Print(os, s->true_value);
      os << ", ";
      Print(os, s->false_value);
      os << ")";
      return;
    }
    case ExprKind::kCast:
      os << TypeName(e.type()) << "(";
      Print(os, e.as<CastNode>()->value);
      os << ")";
      return;
    case ExprKind::kCall: {
      const auto* c = e.as<CallNode>();
      os << CallOpName(c->op) << "(";
      for (size_t i = 0; i < c->args.size(); ++i) {
        if (i) os << ", ";
        Print(os, c->args[i]);
      }
      os << ")";
      return;
    }
    case ExprKind::kLoad: {
      const auto* l = e.as<LoadNode>();
      os << l->buffer << "[";
      for (size_t i = 0; i < l->indices.size(); ++i) {
        if (i) os << ", ";
        Print(os, l->indices[i]);
      }
      os << "]";
      return;
    }
    default:
      os << "<?>";
      return;
  }
}

std::string BufferText(const BufferDecl& b) {
  std::string text = absl::StrCat(b.name, ": ", TypeName(b.dtype), "[",
                                  absl::StrJoin(b.shape, ", "), "] ", MemoryScopeName(b.scope));
  if (b.tensor_map) {
    const TensorMapSpec& m = *b.tensor_map;
    absl::StrAppend(&text, " tensor_map of ", m.source, " dims [", absl::StrJoin(m.dims, ", "),
                    "] box [", absl::StrJoin(m.box, ", "), "] sw", m.swizzle);
  }
  return text;
}

// An mbarrier operation or a register reallocation, on one line.
void PrintSyncStmt(std::ostream& os, const Stmt& s, const std::string& pad) {
  if (const auto* r = s.as<SetMaxNRegNode>()) {
    os << pad << "setmaxnreg." << (r->increase ? "inc " : "dec ") << r->count << "\n";
    return;
  }
  const auto* m = s.as<MbarrierNode>();
  os << pad << "mbarrier_" << MbarrierOpName(m->op) << " " << m->buffer << "[";
  Print(os, m->index);
  os << "]";
  if (m->op == MbarrierNode::Op::kWait) {
    os << " parity ";
    Print(os, m->parity);
  } else if (m->op != MbarrierNode::Op::kArrive) {
    os << " " << m->count;
  } else if (m->count > 1) {
    os << " in each of " << m->count << " cluster blocks";
  }
  os << "\n";
}

void PrintStmt(std::ostream& os, const Stmt& s, int indent) {
  std::string pad(indent * 2, ' ');
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto* f = s.as<ForNode>();
      os << pad << "for " << f->var_name() << " in [";
      Print(os, f->min);
      os << ", ";
      // Show the end bound [min, min+extent) the way loops are usually read.
      if (auto m = AsConstInt(f->min); m && *m == 0) {
        Print(os, f->extent);
      } else {
        Print(os, f->min);
        os << " + ";
        Print(os, f->extent);
      }
      os << ")";
      if (f->for_kind != ForKind::kSerial) os << " " << ForKindName(f->for_kind);
      os << " {\n";
      PrintStmt(os, f->body, indent + 1);
      os << pad << "}\n";
      return;
    }
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqNode>()->stmts) PrintStmt(os, c, indent);
      return;
    case StmtKind::kStore: {
      const auto* st = s.as<StoreNode>();
      os << pad << st->buffer << "[";
      for (size_t i = 0; i < st->indices.size(); ++i) {
        if (i) os << ", ";
        Print(os, st->indices[i]);
      }
      os << (st->async_copy ? "] = async_copy " : "] = ");
      Print(os, st->value);
      os << "\n";
      return;
    }
    case StmtKind::kAllocate: {
      const auto* a = s.as<AllocateNode>();
      os << pad << "allocate " << BufferText(a->buffer) << "\n";
      PrintStmt(os, a->body, indent);
      return;
    }
    case StmtKind::kIfThenElse: {
      const auto* i = s.as<IfThenElseNode>();
      os << pad << "if ";
      Print(os, i->cond);
      os << " {\n";
      PrintStmt(os, i->then_case, indent + 1);
      if (i->else_case.defined()) {
        os << pad << "} else {\n";
        PrintStmt(os, i->else_case, indent + 1);
      }
      os << pad << "}\n";
      return;
    }
    case StmtKind::kBarrier:
      if (const int64_t c = s.as<BarrierNode>()->cluster; c > 1) {
        os << pad << "cluster_barrier " << c << "\n";
      } else {
        os << pad << "barrier\n";
      }
      return;
    case StmtKind::kAsyncGroup: {
      const auto* g = s.as<AsyncGroupNode>();
      if (g->wgmma) {
        os << pad << "wgmma_wait " << g->wait << "\n";
      } else if (g->is_commit()) {
        os << pad << "async_commit\n";
      } else {
        os << pad << "async_wait " << g->wait << "\n";
      }
      return;
    }
    case StmtKind::kWarpMma: {
      const auto* w = s.as<WarpMmaNode>();
      auto origin = [&](const std::vector<Expr>& idx) {
        for (size_t i = 0; i < idx.size(); ++i) {
          os << (i ? ", " : "");
          Print(os, idx[i]);
        }
      };
      os << pad << "warp_mma." << MmaKindName(w->kind) << " " << w->acc << "[" << w->m_frags << "x"
         << w->n_frags << "] += " << w->a << (w->a_k_inner ? "[m,k]@(" : "[k,m]@(");
      origin(w->a_origin);
      os << ") * " << w->b << (w->b_k_inner ? "[n,k]@(" : "[k,n]@(");
      origin(w->b_origin);
      os << ") k_steps " << w->k_steps << " lane ";
      Print(os, w->lane);
      os << "\n";
      return;
    }
    case StmtKind::kWgmma: {
      const auto* w = s.as<WgmmaNode>();
      auto layout = [&](const WgmmaLayout& l) {
        if (l.registers) {
          os << "[registers row " << l.row_stride << " k " << l.k_stride << "]@(";
          return;
        }
        os << (l.k_major ? "[k-major" : "[mn-major") << " sw" << l.swizzle << " lbo " << l.lbo
           << " sbo " << l.sbo << (l.truncated ? " truncated" : "") << "]@(";
      };
      os << pad << "wgmma." << MmaKindName(w->kind) << " " << w->acc << "[" << w->m_tiles << "x64x"
         << w->n << "] += " << w->a;
      layout(w->a_layout);
      Print(os, w->a_offset);
      os << ") * " << w->b;
      layout(w->b_layout);
      Print(os, w->b_offset);
      os << ") k_steps " << w->k_steps << " thread ";
      Print(os, w->thread);
      if (w->pending > 0) os << " pending " << w->pending;
      if (!w->proxy_fence) os << " async-filled";
      os << "\n";
      return;
    }
    case StmtKind::kTmaLoad: {
      const auto* t = s.as<TmaLoadNode>();
      os << pad << "tma_load " << t->dst << "@(";
      Print(os, t->dst_offset);
      os << ") = " << t->tensor_map << "[";
      for (size_t i = 0; i < t->coords.size(); ++i) {
        os << (i ? ", " : "");
        Print(os, t->coords[i]);
      }
      os << "] barrier " << t->barrier << "[";
      Print(os, t->barrier_index);
      os << "]";
      if (t->multicast > 1) {
        os << " multicast " << t->multicast << " from rank ";
        Print(os, t->issuer);
      }
      os << "\n";
      return;
    }
    case StmtKind::kMbarrier:
    case StmtKind::kSetMaxNReg:
      PrintSyncStmt(os, s, pad);
      return;
    case StmtKind::kEvaluate:
      os << pad;
      Print(os, s.as<EvaluateNode>()->value);
      os << "\n";
      return;
  }
}

}  // namespace

std::string ToString(const Expr& e) {
  std::ostringstream os;
  Print(os, e);
  return os.str();
}
std::ostream& operator<<(std::ostream& os, const Expr& e) {
  Print(os, e);
  return os;
}

std::string ToString(const Stmt& s) {
  std::ostringstream os;
  PrintStmt(os, s, 0);
  return os.str();
}
std::ostream& operator<<(std::ostream& os, const Stmt& s) { return os << ToString(s); }

std::string ToString(const LoopNest& nest) {
  std::ostringstream os;
  os << "kernel " << nest.name << "(";
  for (size_t i = 0; i < nest.params.size(); ++i) {
    if (i) os << ", ";
    os << (static_cast<int>(i) < nest.num_inputs ? "in " : "out ") << BufferText(nest.params[i]);
  }
  os << ") {\n";
  PrintStmt(os, nest.body, 1);
  os << "}\n";
  return os.str();
}
std::ostream& operator<<(std::ostream& os, const LoopNest& nest) { return os << ToString(nest); }

}  // namespace tilesearch::ir
