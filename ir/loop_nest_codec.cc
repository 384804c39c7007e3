// Encoding: little-endian fixed-width integers and doubles, strings as length + bytes, one tag byte
// per node. Expressions are numbered in the order they are first written; a node met again (the
// IR shares subtrees) is written as a reference to its number, so sharing survives the round
// trip and a heavily shared tree does not grow exponentially. Nodes are rebuilt with their
// constructors, not their Make factories: Make checks (CHECK) and normalizes, and the decoded
// tree must equal the encoded one while bad bytes must give a status, not an abort.
#include "ir/loop_nest_codec.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tilesearch::ir {
namespace {

// Tags of an expression slot.
constexpr uint8_t kUndefinedExpr = 0;
constexpr uint8_t kExprReference = 1;
constexpr uint8_t kNewExpr = 2;
// A statement slot holds its kind, or this for an undefined statement (an absent else branch).
constexpr uint8_t kUndefinedStmt = 0xFF;
// Deeper trees than this are refused on decoding (a guard against a stack overflow on bad bytes;
// lowered kernels nest a few dozen levels).
constexpr int kMaxDepth = 10000;

constexpr uint8_t kNumExprKinds = static_cast<uint8_t>(ExprKind::kLoad) + 1;
constexpr uint8_t kNumStmtKinds = static_cast<uint8_t>(StmtKind::kSetMaxNReg) + 1;
constexpr uint8_t kNumTypes = static_cast<uint8_t>(ScalarType::kBool) + 1;
constexpr uint8_t kNumForKinds = static_cast<uint8_t>(ForKind::kThreadIdxZ) + 1;
constexpr uint8_t kNumScopes = static_cast<uint8_t>(MemoryScope::kLocal) + 1;
constexpr uint8_t kNumCallOps = static_cast<uint8_t>(CallOp::kTf32Truncate) + 1;
constexpr uint8_t kNumMmaKinds = static_cast<uint8_t>(MmaKind::kTF32x3) + 1;
constexpr uint8_t kNumMbarrierOps = static_cast<uint8_t>(MbarrierNode::Op::kArrive) + 1;

class Encoder {
 public:
  std::string Take() { return std::move(out_); }

  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void I64(int64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void F64(double v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void Bool(bool v) { U8(v ? 1 : 0); }
  void Str(const std::string& s) {
    I64(static_cast<int64_t>(s.size()));
    out_ += s;
  }

  void Buffer(const BufferDecl& b) {
    Str(b.name);
    U8(static_cast<uint8_t>(b.dtype));
    I64(static_cast<int64_t>(b.shape.size()));
    for (int64_t d : b.shape) I64(d);
    U8(static_cast<uint8_t>(b.scope));
    Bool(b.tensor_map.has_value());
    if (b.tensor_map) {
      Str(b.tensor_map->source);
      Ints(b.tensor_map->dims);
      Ints(b.tensor_map->box);
      I64(b.tensor_map->swizzle);
    }
  }
  void Ints(const std::vector<int64_t>& v) {
    I64(static_cast<int64_t>(v.size()));
    for (int64_t x : v) I64(x);
  }

  void Exprs(const std::vector<Expr>& es) {
    I64(static_cast<int64_t>(es.size()));
    for (const Expr& e : es) Write(e);
  }

  void Write(const Expr& e) {
    if (!e.defined()) {
      U8(kUndefinedExpr);
      return;
    }
    if (auto it = ids_.find(e.get()); it != ids_.end()) {
      U8(kExprReference);
      I64(it->second);
      return;
    }
    U8(kNewExpr);
    U8(static_cast<uint8_t>(e.kind()));
    U8(static_cast<uint8_t>(e.type()));
    if (const auto* n = e.as<IntImmNode>()) {
      I64(n->value);
    } else if (const auto* f = e.as<FloatImmNode>()) {
      F64(f->value);
    } else if (const auto* v = e.as<VarNode>()) {
      Str(v->name);
    } else if (IsBinaryKind(e.kind())) {
      const auto [a, b] = BinaryOperands(e);
      Write(a);
      Write(b);
    } else if (const auto* x = e.as<NotNode>()) {
      Write(x->a);
    } else if (const auto* s = e.as<SelectNode>()) {
      Write(s->cond);
      Write(s->true_value);
      Write(s->false_value);
    } else if (const auto* c = e.as<CastNode>()) {
      Write(c->value);
    } else if (const auto* call = e.as<CallNode>()) {
      U8(static_cast<uint8_t>(call->op));
      Exprs(call->args);
    } else if (const auto* load = e.as<LoadNode>()) {
      Str(load->buffer);
      Exprs(load->indices);
    }
    // Numbered after its operands, in the order the decoder finishes nodes.
    ids_.emplace(e.get(), next_id_++);
  }

  void Write(const Stmt& s) {
    if (!s.defined()) {
      U8(kUndefinedStmt);
      return;
    }
    U8(static_cast<uint8_t>(s.kind()));
    if (const auto* f = s.as<ForNode>()) {
      Write(f->var);
      Write(f->min);
      Write(f->extent);
      U8(static_cast<uint8_t>(f->for_kind));
      Write(f->body);
    } else if (const auto* seq = s.as<SeqNode>()) {
      I64(static_cast<int64_t>(seq->stmts.size()));
      for (const Stmt& c : seq->stmts) Write(c);
    } else if (const auto* st = s.as<StoreNode>()) {
      Str(st->buffer);
      Exprs(st->indices);
      Write(st->value);
      Bool(st->async_copy);
    } else if (const auto* a = s.as<AllocateNode>()) {
      Buffer(a->buffer);
      Write(a->body);
    } else if (const auto* i = s.as<IfThenElseNode>()) {
      Write(i->cond);
      Write(i->then_case);
      Write(i->else_case);
    } else if (const auto* ev = s.as<EvaluateNode>()) {
      Write(ev->value);
    } else if (const auto* g = s.as<AsyncGroupNode>()) {
      I64(g->wait);
      Bool(g->wgmma);
    } else if (const auto* m = s.as<WarpMmaNode>()) {
      U8(static_cast<uint8_t>(m->kind));
      I64(m->m_frags);
      I64(m->n_frags);
      I64(m->k_steps);
      Str(m->acc);
      Str(m->a);
      Exprs(m->a_origin);
      Bool(m->a_k_inner);
      Str(m->b);
      Exprs(m->b_origin);
      Bool(m->b_k_inner);
      Write(m->lane);
    } else if (const auto* w = s.as<WgmmaNode>()) {
      U8(static_cast<uint8_t>(w->kind));
      I64(w->m_tiles);
      I64(w->n);
      I64(w->k_steps);
      Str(w->acc);
      Str(w->a);
      Write(w->a_offset);
      Layout(w->a_layout);
      Str(w->b);
      Write(w->b_offset);
      Layout(w->b_layout);
      Write(w->thread);
      I64(w->pending);
      Bool(w->proxy_fence);
    } else if (const auto* bar = s.as<BarrierNode>()) {
      I64(bar->cluster);
    } else if (const auto* t = s.as<TmaLoadNode>()) {
      Str(t->tensor_map);
      Exprs(t->coords);
      Str(t->dst);
      Write(t->dst_offset);
      Str(t->barrier);
      Write(t->barrier_index);
      I64(t->multicast);
      Write(t->issuer);
    } else if (const auto* mb = s.as<MbarrierNode>()) {
      U8(static_cast<uint8_t>(mb->op));
      Str(mb->buffer);
      Write(mb->index);
      I64(mb->count);
      Write(mb->parity);
    } else if (const auto* r = s.as<SetMaxNRegNode>()) {
      I64(r->count);
      Bool(r->increase);
    }
  }

 private:
  void Layout(const WgmmaLayout& l) {
    Bool(l.k_major);
    I64(l.swizzle);
    I64(l.lbo);
    I64(l.sbo);
    I64(l.element_bytes);
    Bool(l.registers);
    I64(l.row_stride);
    I64(l.k_stride);
    Bool(l.truncated);
  }

  std::string out_;
  std::unordered_map<const ExprNode*, int64_t> ids_;
  int64_t next_id_ = 0;
};

class Decoder {
 public:
  explicit Decoder(const std::string& bytes) : bytes_(bytes) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool AtEnd() const { return pos_ == bytes_.size(); }

  uint8_t U8() {
    uint8_t v = 0;
    Raw(&v, 1);
    return v;
  }
  int64_t I64() {
    int64_t v = 0;
    Raw(&v, sizeof v);
    return v;
  }
  double F64() {
    double v = 0;
    Raw(&v, sizeof v);
    return v;
  }
  bool Bool() { return U8() != 0; }
  std::string Str() {
    const int64_t n = I64();
    if (!ok()) return "";
    if (n < 0 || static_cast<uint64_t>(n) > bytes_.size() - pos_) {
      Fail(absl::StrCat("string of ", n, " bytes at byte ", pos_, " of ", bytes_.size()));
      return "";
    }
    std::string s = bytes_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  // A count of following elements, each at least one byte long.
  int64_t Count() {
    const int64_t n = I64();
    if (ok() && (n < 0 || static_cast<uint64_t>(n) > bytes_.size() - pos_)) {
      Fail(absl::StrCat("count ", n, " at byte ", pos_, " of ", bytes_.size()));
      return 0;
    }
    return ok() ? n : 0;
  }
  // An enum value below `limit`.
  uint8_t Enum(uint8_t limit, const char* what) {
    const uint8_t v = U8();
    if (ok() && v >= limit) Fail(absl::StrCat("unknown ", what, " ", static_cast<int>(v)));
    return ok() ? v : 0;
  }
  ScalarType Type() { return static_cast<ScalarType>(Enum(kNumTypes, "type")); }

  BufferDecl Buffer() {
    BufferDecl b;
    b.name = Str();
    b.dtype = Type();
    const int64_t rank = Count();
    for (int64_t i = 0; i < rank && ok(); ++i) b.shape.push_back(I64());
    b.scope = static_cast<MemoryScope>(Enum(kNumScopes, "memory scope"));
    if (Bool()) {
      TensorMapSpec m;
      m.source = Str();
      m.dims = Ints();
      m.box = Ints();
      m.swizzle = I64();
      b.tensor_map = std::move(m);
    }
    return b;
  }
  std::vector<int64_t> Ints() {
    std::vector<int64_t> v;
    const int64_t n = Count();
    for (int64_t i = 0; i < n && ok(); ++i) v.push_back(I64());
    return v;
  }

  std::vector<Expr> Exprs(int depth) {
    std::vector<Expr> es;
    const int64_t n = Count();
    for (int64_t i = 0; i < n && ok(); ++i) es.push_back(Required(depth, "operand"));
    return es;
  }

  // An expression that must be defined.
  Expr Required(int depth, const char* what) {
    Expr e = ReadExpr(depth);
    if (ok() && !e.defined()) Fail(absl::StrCat("undefined ", what));
    return e;
  }

  Expr ReadExpr(int depth) {
    if (!Deeper(depth)) return Expr();
    const uint8_t tag = U8();
    if (!ok()) return Expr();
    if (tag == kUndefinedExpr) return Expr();
    if (tag == kExprReference) {
      const int64_t id = I64();
      if (ok() && (id < 0 || id >= static_cast<int64_t>(exprs_.size()))) {
        Fail(absl::StrCat("reference to expression ", id, " of ", exprs_.size()));
      }
      return ok() ? exprs_[static_cast<size_t>(id)] : Expr();
    }
    if (tag != kNewExpr) {
      Fail(absl::StrCat("unknown expression tag ", static_cast<int>(tag)));
      return Expr();
    }
    const auto kind = static_cast<ExprKind>(Enum(kNumExprKinds, "expression kind"));
    const ScalarType type = Type();
    if (!ok()) return Expr();
    Expr e = NewExpr(kind, type, depth + 1);
    if (!ok()) return Expr();
    exprs_.push_back(e);
    return e;
  }

  Stmt ReadStmt(int depth) {
    if (!Deeper(depth)) return Stmt();
    const uint8_t tag = U8();
    if (!ok() || tag == kUndefinedStmt) return Stmt();
    if (tag >= kNumStmtKinds) {
      Fail(absl::StrCat("unknown statement kind ", static_cast<int>(tag)));
      return Stmt();
    }
    Stmt s = NewStmt(static_cast<StmtKind>(tag), depth + 1);
    return ok() ? s : Stmt();
  }

 private:
  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }
  void Raw(void* p, size_t n) {
    if (!ok()) return;
    if (bytes_.size() - pos_ < n) {
      Fail(absl::StrCat("truncated at byte ", pos_, " of ", bytes_.size()));
      return;
    }
    std::memcpy(p, bytes_.data() + pos_, n);
    pos_ += n;
  }
  bool Deeper(int depth) {
    if (depth > kMaxDepth) Fail(absl::StrCat("tree deeper than ", kMaxDepth));
    return ok();
  }

  Expr NewExpr(ExprKind kind, ScalarType type, int depth) {
    switch (kind) {
      case ExprKind::kIntImm:
        return Expr(std::make_shared<IntImmNode>(type, I64()));
      case ExprKind::kFloatImm:
        return Expr(std::make_shared<FloatImmNode>(type, F64()));
      case ExprKind::kVar:
        return Expr(std::make_shared<VarNode>(type, Str()));
      case ExprKind::kNot: {
        Expr a = Required(depth, "operand");
        return ok() ? Expr(std::make_shared<NotNode>(std::move(a))) : Expr();
      }
      case ExprKind::kSelect: {
        Expr c = Required(depth, "operand");
        Expr t = Required(depth, "operand");
        Expr f = Required(depth, "operand");
        if (ok() && t.type() != type) Fail("select of another type than its values");
        return ok() ? Expr(std::make_shared<SelectNode>(std::move(c), std::move(t), std::move(f)))
                    : Expr();
      }
      case ExprKind::kCast: {
        Expr v = Required(depth, "operand");
        return ok() ? Expr(std::make_shared<CastNode>(type, std::move(v))) : Expr();
      }
      case ExprKind::kCall: {
        const auto op = static_cast<CallOp>(Enum(kNumCallOps, "call"));
        std::vector<Expr> args = Exprs(depth);
        return ok() ? Expr(std::make_shared<CallNode>(type, op, std::move(args))) : Expr();
      }
      case ExprKind::kLoad: {
        std::string buffer = Str();
        std::vector<Expr> indices = Exprs(depth);
        return ok() ? Expr(std::make_shared<LoadNode>(type, std::move(buffer), std::move(indices),
                                                      nullptr))
                    : Expr();
      }
      default:
        break;
    }
    // Binary kinds.
    Expr a = Required(depth, "operand");
    Expr b = Required(depth, "operand");
    if (!ok()) return Expr();
    switch (kind) {
#define TS_DECODE_BINARY(name) \
  case ExprKind::k##name:      \
    return Expr(std::make_shared<name##Node>(type, std::move(a), std::move(b)));
      TS_DECODE_BINARY(Add)
      TS_DECODE_BINARY(Sub)
      TS_DECODE_BINARY(Mul)
      TS_DECODE_BINARY(Div)
      TS_DECODE_BINARY(Mod)
      TS_DECODE_BINARY(Min)
      TS_DECODE_BINARY(Max)
      TS_DECODE_BINARY(EQ)
      TS_DECODE_BINARY(NE)
      TS_DECODE_BINARY(LT)
      TS_DECODE_BINARY(LE)
      TS_DECODE_BINARY(GT)
      TS_DECODE_BINARY(GE)
      TS_DECODE_BINARY(And)
      TS_DECODE_BINARY(Or)
#undef TS_DECODE_BINARY
      default:
        break;
    }
    Fail(absl::StrCat("expression kind ", ExprKindName(kind), " is not handled"));
    return Expr();
  }

  WgmmaLayout Layout() {
    WgmmaLayout l;
    l.k_major = Bool();
    l.swizzle = I64();
    l.lbo = I64();
    l.sbo = I64();
    l.element_bytes = I64();
    l.registers = Bool();
    l.row_stride = I64();
    l.k_stride = I64();
    l.truncated = Bool();
    return l;
  }

  Stmt NewStmt(StmtKind kind, int depth) {
    switch (kind) {
      case StmtKind::kFor: {
        Expr var = Required(depth, "loop variable");
        Expr min = Required(depth, "loop min");
        Expr extent = Required(depth, "loop extent");
        const auto for_kind = static_cast<ForKind>(Enum(kNumForKinds, "loop kind"));
        Stmt body = ReadStmt(depth);
        if (ok() && var.as<VarNode>() == nullptr) Fail("loop variable is not a variable");
        return Stmt(std::make_shared<ForNode>(std::move(var), std::move(min), std::move(extent),
                                              for_kind, std::move(body)));
      }
      case StmtKind::kSeq: {
        std::vector<Stmt> stmts;
        const int64_t n = Count();
        for (int64_t i = 0; i < n && ok(); ++i) stmts.push_back(ReadStmt(depth));
        return Stmt(std::make_shared<SeqNode>(std::move(stmts)));
      }
      case StmtKind::kStore: {
        std::string buffer = Str();
        std::vector<Expr> indices = Exprs(depth);
        Expr value = Required(depth, "stored value");
        const bool async = Bool();
        return Stmt(std::make_shared<StoreNode>(std::move(buffer), std::move(indices),
                                                std::move(value), async));
      }
      case StmtKind::kAllocate: {
        BufferDecl buffer = Buffer();
        Stmt body = ReadStmt(depth);
        return Stmt(std::make_shared<AllocateNode>(std::move(buffer), std::move(body)));
      }
      case StmtKind::kIfThenElse: {
        Expr cond = Required(depth, "condition");
        Stmt then_case = ReadStmt(depth);
        Stmt else_case = ReadStmt(depth);
        return Stmt(std::make_shared<IfThenElseNode>(std::move(cond), std::move(then_case),
                                                     std::move(else_case)));
      }
      case StmtKind::kBarrier: {
        auto b = std::make_shared<BarrierNode>();
        b->cluster = I64();
        if (b->cluster < 1 || b->cluster > 8) {
          Fail(absl::StrCat("barrier over a cluster of ", b->cluster, " blocks"));
          return Stmt();
        }
        return Stmt(std::move(b));
      }
      case StmtKind::kEvaluate:
        return Stmt(std::make_shared<EvaluateNode>(Required(depth, "evaluated value")));
      case StmtKind::kAsyncGroup: {
        const int64_t wait = I64();
        const bool wgmma = Bool();
        return Stmt(std::make_shared<AsyncGroupNode>(wait, wgmma));
      }
      case StmtKind::kWarpMma: {
        auto m = std::make_shared<WarpMmaNode>();
        m->kind = static_cast<MmaKind>(Enum(kNumMmaKinds, "mma kind"));
        m->m_frags = I64();
        m->n_frags = I64();
        m->k_steps = I64();
        m->acc = Str();
        m->a = Str();
        m->a_origin = Exprs(depth);
        m->a_k_inner = Bool();
        m->b = Str();
        m->b_origin = Exprs(depth);
        m->b_k_inner = Bool();
        m->lane = Required(depth, "lane");
        return Stmt(std::move(m));
      }
      case StmtKind::kWgmma: {
        auto w = std::make_shared<WgmmaNode>();
        w->kind = static_cast<MmaKind>(Enum(kNumMmaKinds, "mma kind"));
        w->m_tiles = I64();
        w->n = I64();
        w->k_steps = I64();
        w->acc = Str();
        w->a = Str();
        w->a_offset = Required(depth, "operand offset");
        w->a_layout = Layout();
        w->b = Str();
        w->b_offset = Required(depth, "operand offset");
        w->b_layout = Layout();
        w->thread = Required(depth, "thread index");
        w->pending = I64();
        w->proxy_fence = Bool();
        return Stmt(std::move(w));
      }
      case StmtKind::kTmaLoad: {
        auto t = std::make_shared<TmaLoadNode>();
        t->tensor_map = Str();
        t->coords = Exprs(depth);
        t->dst = Str();
        t->dst_offset = Required(depth, "destination offset");
        t->barrier = Str();
        t->barrier_index = Required(depth, "barrier index");
        t->multicast = I64();
        t->issuer = ReadExpr(depth);
        if (t->multicast < 1 || t->multicast > 8 || t->issuer.defined() != (t->multicast > 1)) {
          Fail(absl::StrCat("tma load multicast ", t->multicast,
                            t->issuer.defined() ? " with" : " without", " an issuer"));
          return Stmt();
        }
        return Stmt(std::move(t));
      }
      case StmtKind::kMbarrier: {
        auto m = std::make_shared<MbarrierNode>();
        m->op = static_cast<MbarrierNode::Op>(Enum(kNumMbarrierOps, "mbarrier op"));
        m->buffer = Str();
        m->index = Required(depth, "barrier index");
        m->count = I64();
        m->parity = ReadExpr(depth);
        if (ok() && m->op == MbarrierNode::Op::kWait && !m->parity.defined()) {
          Fail("mbarrier wait without a parity");
        }
        if (ok() && m->op == MbarrierNode::Op::kArrive && m->count != 0 &&
            (m->count < 2 || m->count > 8)) {
          Fail(absl::StrCat("mbarrier arrive over a cluster of ", m->count, " blocks"));
        }
        return Stmt(std::move(m));
      }
      case StmtKind::kSetMaxNReg: {
        const int64_t count = I64();
        const bool increase = Bool();
        if (ok() && (count < 24 || count > 256 || count % 8 != 0)) {
          Fail("setmaxnreg count outside 24..256 or not a multiple of 8");
          return Stmt();
        }
        return ok() ? SetMaxNRegNode::Make(count, increase) : Stmt();
      }
    }
    Fail("statement kind is not handled");
    return Stmt();
  }

  const std::string& bytes_;
  size_t pos_ = 0;
  std::string error_;
  std::vector<Expr> exprs_;  // by number, as numbered by the encoder
};

}  // namespace

std::string EncodeLoopNest(const LoopNest& nest) {
  Encoder e;
  e.Str(nest.name);
  e.I64(static_cast<int64_t>(nest.params.size()));
  for (const BufferDecl& p : nest.params) e.Buffer(p);
  e.I64(nest.num_inputs);
  e.Write(nest.body);
  return e.Take();
}

absl::StatusOr<LoopNest> DecodeLoopNest(const std::string& bytes) {
  Decoder d(bytes);
  LoopNest nest;
  nest.name = d.Str();
  const int64_t params = d.Count();
  for (int64_t i = 0; i < params && d.ok(); ++i) nest.params.push_back(d.Buffer());
  const int64_t num_inputs = d.I64();
  if (d.ok() && (num_inputs < 0 || num_inputs > params)) {
    return absl::InvalidArgumentError(
        absl::StrCat("corrupt loop nest encoding: ", num_inputs, " inputs of ", params, " params"));
  }
  nest.num_inputs = static_cast<int>(num_inputs);
  nest.body = d.ReadStmt(0);
  if (d.ok() && !d.AtEnd()) {
    return absl::InvalidArgumentError("corrupt loop nest encoding: trailing bytes");
  }
  if (!d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("corrupt loop nest encoding: ", d.error()));
  }
  return nest;
}

}  // namespace tilesearch::ir
