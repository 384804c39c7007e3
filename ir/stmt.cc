#include "ir/stmt.h"

#include <bit>
#include <cmath>

#include "base/status.h"

namespace tilesearch::ir {

const char* ForKindName(ForKind kind) {
  switch (kind) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorize";
    case ForKind::kUnrolled:
      return "unroll";
    case ForKind::kVThread:
      return "vthread";
    case ForKind::kBlockIdxX:
      return "blockIdx.x";
    case ForKind::kBlockIdxY:
      return "blockIdx.y";
    case ForKind::kBlockIdxZ:
      return "blockIdx.z";
    case ForKind::kThreadIdxX:
      return "threadIdx.x";
    case ForKind::kThreadIdxY:
      return "threadIdx.y";
    case ForKind::kThreadIdxZ:
      return "threadIdx.z";
  }
  return "?";
}

const char* MemoryScopeName(MemoryScope scope) {
  switch (scope) {
    case MemoryScope::kGlobal:
      return "global";
    case MemoryScope::kShared:
      return "shared";
    case MemoryScope::kLocal:
      return "local";
  }
  return "?";
}

int64_t TensorMapSpec::BoxElements() const {
  int64_t n = 1;
  for (int64_t e : box) n *= e;
  return n;
}

absl::Status CheckTensorMap(const TensorMapSpec& map, const BufferDecl& source) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError("tensor map of '" + map.source + "': " + why);
  };
  const size_t rank = map.dims.size();
  if (rank < 1 || rank > 5) return bad("rank " + std::to_string(rank) + " is not 1..5");
  if (map.box.size() != rank) {
    return bad("box rank " + std::to_string(map.box.size()) + " differs from the dims' " +
               std::to_string(rank));
  }
  if (map.swizzle != 0 && map.swizzle != 32 && map.swizzle != 64 && map.swizzle != 128) {
    return bad("swizzle " + std::to_string(map.swizzle) + " is not 0, 32, 64 or 128 bytes");
  }
  int64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    // (Box coordinates are signed 32-bit: extents stay below 2^31.)
    if (map.dims[d] < 1 || map.dims[d] >= (int64_t{1} << 31)) {
      return bad("dim " + std::to_string(d) + " extent " + std::to_string(map.dims[d]) +
                 " is not in 1..2^31-1");
    }
    if (map.box[d] < 1 || map.box[d] > 256) {
      return bad("box dim " + std::to_string(d) + " extent " + std::to_string(map.box[d]) +
                 " is not in 1..256");
    }
    if (__builtin_mul_overflow(elements, map.dims[d], &elements)) {
      return bad("dims cover more than 2^63 elements");
    }
  }
  if (elements != source.NumElements()) {
    return bad("dims cover " + std::to_string(elements) + " elements, the buffer has " +
               std::to_string(source.NumElements()));
  }
  const int64_t e = BytesOf(source.dtype);
  const int64_t inner = map.box.back() * e;
  if (inner % 16 != 0)
    return bad("the box's inner " + std::to_string(inner) + " bytes are not a multiple of 16");
  if (map.swizzle != 0 && inner > map.swizzle) {
    return bad("the box's inner " + std::to_string(inner) + " bytes exceed the " +
               std::to_string(map.swizzle) + "-byte swizzle");
  }
  int64_t stride = e;
  for (size_t d = rank; d-- > 1;) {
    if (__builtin_mul_overflow(stride, map.dims[d], &stride)) stride = int64_t{1} << 62;
    if (stride % 16 != 0 || stride >= (int64_t{1} << 40)) {
      return bad("dim " + std::to_string(d - 1) + " stride " + std::to_string(stride) +
                 " bytes is not a multiple of 16 under 2^40");
    }
  }
  return absl::OkStatus();
}

int64_t BufferDecl::NumElements() const {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

const std::string& ForNode::var_name() const { return var.as<VarNode>()->name; }

Stmt ForNode::Make(Expr var, Expr min, Expr extent, ForKind kind, Stmt body) {
  CHECK(var.as<VarNode>() && var.type() == ScalarType::kInt64)
      << "For variable is not an int64 Var";
  CHECK(min.defined() && min.type() == ScalarType::kInt64) << "For min is not int64";
  CHECK(extent.defined() && extent.type() == ScalarType::kInt64) << "For extent is not int64";
  CHECK(body.defined()) << "For without a body";
  return Stmt(std::make_shared<ForNode>(std::move(var), std::move(min), std::move(extent), kind,
                                        std::move(body)));
}

Stmt SeqNode::Make(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (const auto* seq = s.as<SeqNode>()) {
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<SeqNode>(std::move(flat)));
}

const LoadNode* AsyncCopySource(const Expr& value) {
  if (const auto* load = value.as<LoadNode>()) return load;
  const auto* sel = value.as<SelectNode>();
  const auto* zero = sel ? sel->false_value.as<FloatImmNode>() : nullptr;
  return zero != nullptr && zero->value == 0 ? sel->true_value.as<LoadNode>() : nullptr;
}

Stmt StoreNode::Make(std::string buffer, std::vector<Expr> indices, Expr value, bool async_copy) {
  CHECK(!buffer.empty()) << "Store to a buffer without a name";
  CHECK(value.defined()) << "Store of an undefined value to '" << buffer << "'";
  for (const Expr& i : indices) {
    CHECK(i.defined() && i.type() == ScalarType::kInt64)
        << "index of Store to '" << buffer << "' is not int64";
  }
  if (async_copy) {
    CHECK(AsyncCopySource(value) != nullptr)
        << "async copy to '" << buffer << "' is not of a Load or Select(cond, Load, 0)";
  }
  return Stmt(std::make_shared<StoreNode>(std::move(buffer), std::move(indices), std::move(value),
                                          async_copy));
}

Stmt TmaLoadNode::Make(std::string tensor_map, std::vector<Expr> coords, std::string dst,
                       Expr dst_offset, std::string barrier, Expr barrier_index, int64_t multicast,
                       Expr issuer) {
  CHECK(!tensor_map.empty() && !dst.empty() && !barrier.empty()) << "TmaLoad without a name";
  CHECK(!coords.empty() && coords.size() <= 5) << "TmaLoad of rank " << coords.size();
  for (const Expr& c : coords) CHECK(c.defined() && c.type() == ScalarType::kInt64);
  CHECK(dst_offset.defined() && dst_offset.type() == ScalarType::kInt64);
  CHECK(barrier_index.defined() && barrier_index.type() == ScalarType::kInt64);
  CHECK(multicast >= 1 && multicast <= 8) << "TmaLoad multicast over " << multicast << " blocks";
  CHECK(issuer.defined() == (multicast > 1) &&
        (!issuer.defined() || issuer.type() == ScalarType::kInt64))
      << "TmaLoad issuer given exactly with multicast";
  auto n = std::make_shared<TmaLoadNode>();
  n->tensor_map = std::move(tensor_map);
  n->coords = std::move(coords);
  n->dst = std::move(dst);
  n->dst_offset = std::move(dst_offset);
  n->barrier = std::move(barrier);
  n->barrier_index = std::move(barrier_index);
  n->multicast = multicast;
  n->issuer = std::move(issuer);
  return Stmt(std::move(n));
}

namespace {
Stmt MakeMbarrier(MbarrierNode::Op op, std::string buffer, Expr index, int64_t count, Expr parity) {
  CHECK(!buffer.empty()) << "mbarrier without a buffer";
  CHECK(index.defined() && index.type() == ScalarType::kInt64);
  auto n = std::make_shared<MbarrierNode>();
  n->op = op;
  n->buffer = std::move(buffer);
  n->index = std::move(index);
  n->count = count;
  n->parity = std::move(parity);
  return Stmt(std::move(n));
}
}  // namespace

Stmt SetMaxNRegNode::Make(int64_t count, bool increase) {
  CHECK(count >= 24 && count <= 256 && count % 8 == 0) << "setmaxnreg count " << count;
  return Stmt(std::make_shared<SetMaxNRegNode>(count, increase));
}

Stmt MbarrierNode::Init(std::string buffer, Expr index, int64_t arrivals) {
  CHECK(arrivals >= 1 && arrivals < (1 << 20)) << "mbarrier arrivals " << arrivals;
  return MakeMbarrier(Op::kInit, std::move(buffer), std::move(index), arrivals, Expr());
}
Stmt MbarrierNode::ArriveExpectTx(std::string buffer, Expr index, int64_t bytes) {
  CHECK(bytes >= 0 && bytes < (1 << 20)) << "mbarrier transaction bytes " << bytes;
  return MakeMbarrier(Op::kArriveExpectTx, std::move(buffer), std::move(index), bytes, Expr());
}
Stmt MbarrierNode::Arrive(std::string buffer, Expr index, int64_t cluster) {
  CHECK(cluster >= 1 && cluster <= 8) << "mbarrier arrive over a cluster of " << cluster;
  return MakeMbarrier(Op::kArrive, std::move(buffer), std::move(index), cluster > 1 ? cluster : 0,
                      Expr());
}
Stmt MbarrierNode::Wait(std::string buffer, Expr index, Expr parity) {
  CHECK(parity.defined() && parity.type() == ScalarType::kInt64) << "mbarrier parity not int64";
  return MakeMbarrier(Op::kWait, std::move(buffer), std::move(index), 0, std::move(parity));
}

const char* MbarrierOpName(MbarrierNode::Op op) {
  switch (op) {
    case MbarrierNode::Op::kInit:
      return "init";
    case MbarrierNode::Op::kArriveExpectTx:
      return "arrive_expect_tx";
    case MbarrierNode::Op::kWait:
      return "wait";
    case MbarrierNode::Op::kArrive:
      return "arrive";
  }
  return "?";
}

Stmt AllocateNode::Make(BufferDecl buffer, Stmt body) {
  CHECK(!buffer.name.empty()) << "Allocate of a buffer without a name";
  for (int64_t e : buffer.shape) CHECK(e >= 1) << "Allocate '" << buffer.name << "' extent " << e;
  CHECK(body.defined()) << "Allocate without a body";
  return Stmt(std::make_shared<AllocateNode>(std::move(buffer), std::move(body)));
}

Stmt IfThenElseNode::Make(Expr cond, Stmt then_case, Stmt else_case) {
  CHECK(cond.defined() && cond.type() == ScalarType::kBool) << "IfThenElse condition is not bool";
  CHECK(then_case.defined()) << "IfThenElse without a then branch";
  return Stmt(std::make_shared<IfThenElseNode>(std::move(cond), std::move(then_case),
                                               std::move(else_case)));
}

Stmt BarrierNode::Make(int64_t cluster) {
  CHECK(cluster >= 1 && cluster <= 8) << "barrier over a cluster of " << cluster << " blocks";
  auto n = std::make_shared<BarrierNode>();
  n->cluster = cluster;
  return Stmt(std::move(n));
}

Stmt EvaluateNode::Make(Expr value) {
  CHECK(value.defined()) << "Evaluate of an undefined value";
  return Stmt(std::make_shared<EvaluateNode>(std::move(value)));
}

Stmt AsyncGroupNode::Commit() { return Stmt(std::make_shared<AsyncGroupNode>(-1, false)); }

Stmt AsyncGroupNode::Wait(int64_t pending) {
  CHECK(pending >= 0) << "async wait for " << pending << " pending groups";
  return Stmt(std::make_shared<AsyncGroupNode>(pending, false));
}

Stmt AsyncGroupNode::WgmmaWait(int64_t pending) {
  CHECK(pending >= 0 && pending <= 7) << "wgmma wait for " << pending << " pending groups";
  return Stmt(std::make_shared<AsyncGroupNode>(pending, true));
}

const char* MmaKindName(MmaKind kind) {
  switch (kind) {
    case MmaKind::kF16:
      return "f16";
    case MmaKind::kBF16:
      return "bf16";
    case MmaKind::kTF32:
      return "tf32";
    case MmaKind::kTF32x3:
      return "tf32x3";
  }
  return "?";
}

std::optional<MmaKind> ParseMmaKind(const std::string& name) {
  for (MmaKind k : {MmaKind::kF16, MmaKind::kBF16, MmaKind::kTF32, MmaKind::kTF32x3}) {
    if (name == MmaKindName(k)) return k;
  }
  return std::nullopt;
}

int64_t MmaK(MmaKind kind) { return kind == MmaKind::kF16 || kind == MmaKind::kBF16 ? 16 : 8; }

ScalarType MmaOperandType(MmaKind kind) {
  switch (kind) {
    case MmaKind::kF16:
      return ScalarType::kFloat16;
    case MmaKind::kBF16:
      return ScalarType::kBFloat16;
    default:
      return ScalarType::kFloat32;
  }
}

float MmaOperandValue(MmaKind kind, float x, int part) {
  switch (kind) {
    case MmaKind::kTF32:
      return Tf32RoundValue(x);
    case MmaKind::kTF32x3: {
      const float big = Tf32TruncateValue(x);
      return part == 0 ? big : Tf32TruncateValue(x - big);
    }
    default:
      return x;
  }
}

Stmt WarpMmaNode::Make(MmaKind kind, int64_t m_frags, int64_t n_frags, int64_t k_steps,
                       std::string acc, std::string a, std::vector<Expr> a_origin, bool a_k_inner,
                       std::string b, std::vector<Expr> b_origin, bool b_k_inner, Expr lane) {
  CHECK(m_frags >= 1 && n_frags >= 1 && k_steps >= 1)
      << "warp mma counts " << m_frags << "x" << n_frags << "x" << k_steps;
  CHECK(a_origin.size() >= 2 && b_origin.size() >= 2) << "warp mma operand of under 2 dimensions";
  for (const auto* origin : {&a_origin, &b_origin}) {
    for (const Expr& i : *origin) {
      CHECK(i.defined() && i.type() == ScalarType::kInt64) << "warp mma index is not int64";
    }
  }
  CHECK(lane.defined() && lane.type() == ScalarType::kInt64) << "warp mma lane is not int64";
  auto n = std::make_shared<WarpMmaNode>();
  n->kind = kind;
  n->m_frags = m_frags;
  n->n_frags = n_frags;
  n->k_steps = k_steps;
  n->acc = std::move(acc);
  n->a = std::move(a);
  n->a_origin = std::move(a_origin);
  n->a_k_inner = a_k_inner;
  n->b = std::move(b);
  n->b_origin = std::move(b_origin);
  n->b_k_inner = b_k_inner;
  n->lane = std::move(lane);
  return Stmt(std::move(n));
}

int64_t WgmmaLayoutOffset(const WgmmaLayout& l, int64_t row, int64_t k) {
  const int64_t e = l.element_bytes;
  if (l.registers) return e * (row * l.row_stride + k * l.k_stride);
  if (l.k_major) return (row / 8) * l.sbo + (row % 8) * l.swizzle + e * k;
  const int64_t atom = l.swizzle / e;
  return (row / atom) * l.lbo + e * (row % atom) + (k / 8) * l.sbo + (k % 8) * l.swizzle;
}

int64_t WgmmaSwizzle(int64_t address, int64_t swizzle) {
  const int64_t mask = swizzle / 16 - 1;  // 7, 3 or 1
  return address ^ (((address >> 7) & mask) << 4);
}

Stmt WgmmaNode::Make(MmaKind kind, int64_t m_tiles, int64_t n, int64_t k_steps, std::string acc,
                     std::string a, Expr a_offset, WgmmaLayout a_layout, std::string b,
                     Expr b_offset, WgmmaLayout b_layout, Expr thread, int64_t pending,
                     bool proxy_fence) {
  CHECK(pending >= 0 && pending <= 3) << "wgmma pending " << pending;
  CHECK(!b_layout.registers) << "wgmma reads B from shared memory only";
  CHECK(kind == MmaKind::kTF32 || (!a_layout.truncated && !b_layout.truncated))
      << "wgmma truncated operands are tf32 only";
  CHECK(!a_layout.registers ||
        (kind == MmaKind::kTF32 && a_layout.row_stride >= 0 && a_layout.k_stride >= 0))
      << "wgmma A from registers: tf32 with non-negative strides only";
  for (const WgmmaLayout* l : {&a_layout, &b_layout}) {
    if (l->registers) continue;
    CHECK(l->swizzle == 32 || l->swizzle == 64 || l->swizzle == 128)
        << "wgmma swizzle " << l->swizzle;
    CHECK(l->lbo >= 0 && l->sbo >= 0 && l->lbo % 16 == 0 && l->sbo % 16 == 0 &&
          l->lbo < (int64_t{1} << 18) && l->sbo < (int64_t{1} << 18))
        << "wgmma lbo " << l->lbo << " / sbo " << l->sbo << " not 16-byte multiples under 2^18";
  }
  CHECK(kind == MmaKind::kF16 || kind == MmaKind::kBF16 || kind == MmaKind::kTF32)
      << "wgmma kind " << MmaKindName(kind);
  const int64_t bytes = kind == MmaKind::kTF32 ? 4 : 2;
  CHECK(a_layout.element_bytes == bytes && b_layout.element_bytes == bytes)
      << "wgmma " << MmaKindName(kind) << " layouts of " << a_layout.element_bytes << "- and "
      << b_layout.element_bytes << "-byte elements";
  CHECK(kind != MmaKind::kTF32 || ((a_layout.k_major || a_layout.registers) && b_layout.k_major))
      << "wgmma tf32 reads K-major operands only";
  CHECK(m_tiles >= 1 && k_steps >= 1 && n >= 8 && n <= 256 && n % 8 == 0)
      << "wgmma counts " << m_tiles << "x" << n << "x" << k_steps;
  for (const Expr* e : {&a_offset, &b_offset, &thread}) {
    CHECK(e->defined() && e->type() == ScalarType::kInt64) << "wgmma index is not int64";
  }
  auto node = std::make_shared<WgmmaNode>();
  node->kind = kind;
  node->m_tiles = m_tiles;
  node->n = n;
  node->k_steps = k_steps;
  node->acc = std::move(acc);
  node->a = std::move(a);
  node->a_offset = std::move(a_offset);
  node->a_layout = a_layout;
  node->b = std::move(b);
  node->b_offset = std::move(b_offset);
  node->b_layout = b_layout;
  node->thread = std::move(thread);
  node->pending = pending;
  node->proxy_fence = proxy_fence;
  return Stmt(std::move(node));
}

// ---------------------------------------------------------------------------------------------

void StmtVisitor::Visit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
#define TS_DISPATCH(name)                                    \
  case StmtKind::k##name:                                    \
    Visit##name(static_cast<const name##Node*>(s.get()), s); \
    break;
    TS_STMT_NODE_KINDS(TS_DISPATCH)
#undef TS_DISPATCH
  }
}

void StmtVisitor::VisitFor(const ForNode* op, const Stmt&) {
  VisitExpr(op->min);
  VisitExpr(op->extent);
  Visit(op->body);
}
void StmtVisitor::VisitSeq(const SeqNode* op, const Stmt&) {
  for (const Stmt& s : op->stmts) Visit(s);
}
void StmtVisitor::VisitStore(const StoreNode* op, const Stmt&) {
  for (const Expr& i : op->indices) VisitExpr(i);
  VisitExpr(op->value);
}
void StmtVisitor::VisitAllocate(const AllocateNode* op, const Stmt&) { Visit(op->body); }
void StmtVisitor::VisitIfThenElse(const IfThenElseNode* op, const Stmt&) {
  VisitExpr(op->cond);
  Visit(op->then_case);
  Visit(op->else_case);
}
void StmtVisitor::VisitBarrier(const BarrierNode*, const Stmt&) {}
void StmtVisitor::VisitEvaluate(const EvaluateNode* op, const Stmt&) { VisitExpr(op->value); }
void StmtVisitor::VisitAsyncGroup(const AsyncGroupNode*, const Stmt&) {}
void StmtVisitor::VisitWarpMma(const WarpMmaNode* op, const Stmt&) {
  for (const Expr& i : op->a_origin) VisitExpr(i);
  for (const Expr& i : op->b_origin) VisitExpr(i);
  VisitExpr(op->lane);
}

void StmtVisitor::VisitWgmma(const WgmmaNode* op, const Stmt&) {
  VisitExpr(op->a_offset);
  VisitExpr(op->b_offset);
  VisitExpr(op->thread);
}

void StmtVisitor::VisitTmaLoad(const TmaLoadNode* op, const Stmt&) {
  for (const Expr& c : op->coords) VisitExpr(c);
  VisitExpr(op->dst_offset);
  VisitExpr(op->barrier_index);
  if (op->issuer.defined()) VisitExpr(op->issuer);
}

void StmtVisitor::VisitSetMaxNReg(const SetMaxNRegNode*, const Stmt&) {}

void StmtVisitor::VisitMbarrier(const MbarrierNode* op, const Stmt&) {
  VisitExpr(op->index);
  if (op->parity.defined()) VisitExpr(op->parity);
}

Stmt StmtMutator::Mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
#define TS_DISPATCH(name) \
  case StmtKind::k##name: \
    return Mutate##name(static_cast<const name##Node*>(s.get()), s);
    TS_STMT_NODE_KINDS(TS_DISPATCH)
#undef TS_DISPATCH
  }
  return s;
}

Stmt StmtMutator::MutateFor(const ForNode* op, const Stmt& s) {
  Expr min = MutateExpr(op->min);
  Expr extent = MutateExpr(op->extent);
  Stmt body = Mutate(op->body);
  if (min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body)) return s;
  return ForNode::Make(op->var, std::move(min), std::move(extent), op->for_kind, std::move(body));
}
Stmt StmtMutator::MutateSeq(const SeqNode* op, const Stmt& s) {
  std::vector<Stmt> stmts;
  bool changed = false;
  for (const Stmt& c : op->stmts) {
    stmts.push_back(Mutate(c));
    changed |= !stmts.back().same_as(c);
  }
  return changed ? SeqNode::Make(std::move(stmts)) : s;
}
Stmt StmtMutator::MutateStore(const StoreNode* op, const Stmt& s) {
  std::vector<Expr> indices;
  bool changed = false;
  for (const Expr& i : op->indices) {
    indices.push_back(MutateExpr(i));
    changed |= !indices.back().same_as(i);
  }
  Expr value = MutateExpr(op->value);
  changed |= !value.same_as(op->value);
  if (!changed) return s;
  // An async copy whose value no longer is a load (a folded Select) becomes a plain store, which
  // completes before any wait for it.
  const bool async = op->async_copy && AsyncCopySource(value) != nullptr;
  return StoreNode::Make(op->buffer, std::move(indices), std::move(value), async);
}
Stmt StmtMutator::MutateAllocate(const AllocateNode* op, const Stmt& s) {
  Stmt body = Mutate(op->body);
  return body.same_as(op->body) ? s : AllocateNode::Make(op->buffer, std::move(body));
}
Stmt StmtMutator::MutateIfThenElse(const IfThenElseNode* op, const Stmt& s) {
  Expr cond = MutateExpr(op->cond);
  Stmt t = Mutate(op->then_case);
  Stmt e = Mutate(op->else_case);
  if (cond.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return s;
  return IfThenElseNode::Make(std::move(cond), std::move(t), std::move(e));
}
Stmt StmtMutator::MutateBarrier(const BarrierNode*, const Stmt& s) { return s; }
Stmt StmtMutator::MutateAsyncGroup(const AsyncGroupNode*, const Stmt& s) { return s; }
Stmt StmtMutator::MutateWarpMma(const WarpMmaNode* op, const Stmt& s) {
  bool changed = false;
  auto mutate_all = [&](const std::vector<Expr>& in) {
    std::vector<Expr> out;
    for (const Expr& e : in) {
      out.push_back(MutateExpr(e));
      changed |= !out.back().same_as(e);
    }
    return out;
  };
  std::vector<Expr> a = mutate_all(op->a_origin);
  std::vector<Expr> b = mutate_all(op->b_origin);
  Expr lane = MutateExpr(op->lane);
  changed |= !lane.same_as(op->lane);
  if (!changed) return s;
  return WarpMmaNode::Make(op->kind, op->m_frags, op->n_frags, op->k_steps, op->acc, op->a,
                           std::move(a), op->a_k_inner, op->b, std::move(b), op->b_k_inner,
                           std::move(lane));
}
Stmt StmtMutator::MutateWgmma(const WgmmaNode* op, const Stmt& s) {
  Expr a = MutateExpr(op->a_offset);
  Expr b = MutateExpr(op->b_offset);
  Expr t = MutateExpr(op->thread);
  if (a.same_as(op->a_offset) && b.same_as(op->b_offset) && t.same_as(op->thread)) return s;
  return WgmmaNode::Make(op->kind, op->m_tiles, op->n, op->k_steps, op->acc, op->a, std::move(a),
                         op->a_layout, op->b, std::move(b), op->b_layout, std::move(t), op->pending,
                         op->proxy_fence);
}
Stmt StmtMutator::MutateTmaLoad(const TmaLoadNode* op, const Stmt& s) {
  bool changed = false;
  std::vector<Expr> coords;
  for (const Expr& c : op->coords) {
    coords.push_back(MutateExpr(c));
    changed |= !coords.back().same_as(c);
  }
  Expr dst = MutateExpr(op->dst_offset);
  Expr bar = MutateExpr(op->barrier_index);
  Expr issuer = op->issuer.defined() ? MutateExpr(op->issuer) : op->issuer;
  changed |= !dst.same_as(op->dst_offset) || !bar.same_as(op->barrier_index) ||
             !issuer.same_as(op->issuer);
  if (!changed) return s;
  return TmaLoadNode::Make(op->tensor_map, std::move(coords), op->dst, std::move(dst), op->barrier,
                           std::move(bar), op->multicast, std::move(issuer));
}
Stmt StmtMutator::MutateSetMaxNReg(const SetMaxNRegNode*, const Stmt& s) { return s; }
Stmt StmtMutator::MutateMbarrier(const MbarrierNode* op, const Stmt& s) {
  Expr index = MutateExpr(op->index);
  Expr parity = op->parity.defined() ? MutateExpr(op->parity) : op->parity;
  if (index.same_as(op->index) && parity.same_as(op->parity)) return s;
  return MakeMbarrier(op->op, op->buffer, std::move(index), op->count, std::move(parity));
}
Stmt StmtMutator::MutateEvaluate(const EvaluateNode* op, const Stmt& s) {
  Expr v = MutateExpr(op->value);
  return v.same_as(op->value) ? s : EvaluateNode::Make(std::move(v));
}

int64_t LocalElements(const Stmt& s) {
  if (!s.defined()) return 0;
  switch (s.kind()) {
    case StmtKind::kAllocate: {
      const auto* op = s.as<AllocateNode>();
      const int64_t own = op->buffer.scope == MemoryScope::kLocal ? op->buffer.NumElements() : 0;
      return own + LocalElements(op->body);
    }
    case StmtKind::kFor:
      return LocalElements(s.as<ForNode>()->body);
    case StmtKind::kSeq: {
      int64_t n = 0;
      for (const Stmt& c : s.as<SeqNode>()->stmts) n += LocalElements(c);
      return n;
    }
    case StmtKind::kIfThenElse: {
      const auto* op = s.as<IfThenElseNode>();
      return LocalElements(op->then_case) + LocalElements(op->else_case);
    }
    default:
      return 0;
  }
}

}  // namespace tilesearch::ir
