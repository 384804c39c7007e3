#include "schedule/operand_repack.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/simplify.h"

namespace tilesearch::schedule {
namespace {

using ir::Expr;

Expr C(int64_t v) { return ir::IntConst(v); }

// A factor taken apart: [Cast] [Select(cond, ...)] [Cast] Load.
struct FactorParts {
  const ir::LoadNode* load = nullptr;
  Expr cond;  // undefined without a Select
};

bool IsZero(const Expr& e) {
  if (const auto* f = e.as<ir::FloatImmNode>()) return f->value == 0;
  if (const auto* i = e.as<ir::IntImmNode>()) return i->value == 0;
  return false;
}

std::optional<FactorParts> Parse(const Expr& factor) {
  FactorParts p;
  Expr e = factor;
  if (const auto* c = e.as<ir::CastNode>()) e = c->value;
  if (const auto* s = e.as<ir::SelectNode>()) {
    if (!IsZero(s->false_value)) return std::nullopt;
    p.cond = s->cond;
    e = s->true_value;
    if (const auto* c = e.as<ir::CastNode>()) e = c->value;
  }
  p.load = e.as<ir::LoadNode>();
  if (p.load == nullptr) return std::nullopt;
  return p;
}

// The conjunction's terms.
void Terms(const Expr& cond, std::vector<Expr>* out) {
  if (const auto* a = cond.as<ir::AndNode>()) {
    Terms(a->a, out);
    Terms(a->b, out);
    return;
  }
  out->push_back(cond);
}

int64_t IntValue(const Expr& e, bool* ok) {
  const auto* i = e.as<ir::IntImmNode>();
  *ok = i != nullptr;
  return i ? i->value : 0;
}

// The dimension of `load` whose index is `e` (the same node, as a padded load's bounds tests
// are built, else structurally), or -1.
int DimOf(const ir::LoadNode& load, const Expr& e) {
  for (size_t d = 0; d < load.indices.size(); ++d) {
    if (load.indices[d].same_as(e)) return static_cast<int>(d);
  }
  const std::string text = ir::ToString(ir::Simplify(e));
  for (size_t d = 0; d < load.indices.size(); ++d) {
    if (ir::ToString(ir::Simplify(load.indices[d])) == text) return static_cast<int>(d);
  }
  return -1;
}

// The dimension of `load` indexed by exactly the variable `name`, or -1.
int DimOfVar(const ir::LoadNode& load, const std::string& name) {
  for (size_t d = 0; d < load.indices.size(); ++d) {
    const auto* v = load.indices[d].as<ir::VarNode>();
    if (v != nullptr && v->name == name) return static_cast<int>(d);
  }
  return -1;
}

absl::StatusOr<RepackedOperand> PlanOne(const ir::TensorNode& op, const Expr& factor,
                                        const char* role, const std::string& inner_var,
                                        const ir::RangeMap& ranges, const BufferShapeFn& shape_of) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage '", op.name, "': operand ", role, " cannot be repacked: ", why));
  };
  const std::optional<FactorParts> parts = Parse(factor);
  if (!parts) {
    return fail(
        absl::StrCat(ir::ToString(factor), " is not a load, its cast, or Select(cond, load, 0)"));
  }
  const ir::LoadNode& load = *parts->load;
  std::optional<std::vector<int64_t>> shape;
  if (load.producer != nullptr) shape = load.producer->shape;
  if (!shape && shape_of) shape = shape_of(load.buffer);
  if (!shape) return fail(absl::StrCat("the shape of '", load.buffer, "' is unknown"));
  RepackedOperand r;
  r.source = load.buffer;
  r.dtype = load.type;
  r.source_shape = *shape;
  r.indices = load.indices;
  const size_t dims = load.indices.size();
  if (r.source_shape.size() != dims) {
    return fail(absl::StrCat("'", load.buffer, "' has ", r.source_shape.size(),
                             " dimensions but is read with ", dims, " indices"));
  }
  // Which bounds the condition tests, per dimension.
  std::vector<bool> tested_lo(dims, false), tested_hi(dims, false);
  if (parts->cond.defined()) {
    std::vector<Expr> terms;
    Terms(parts->cond, &terms);
    for (const Expr& t : terms) {
      bool ok = false;
      int d = -1;
      if (const auto* ge = t.as<ir::GENode>()) {
        if (IntValue(ge->b, &ok) == 0 && ok && (d = DimOf(load, ge->a)) >= 0) {
          tested_lo[d] = true;
          continue;
        }
      } else if (const auto* lt = t.as<ir::LTNode>()) {
        const int64_t bound = IntValue(lt->b, &ok);
        if (ok && (d = DimOf(load, lt->a)) >= 0 && bound == r.source_shape[d]) {
          tested_hi[d] = true;
          continue;
        }
      }
      return fail(absl::StrCat("its condition term ", ir::ToString(t),
                               " is not a bounds test (i >= 0, i < extent) of an index of '",
                               load.buffer, "'"));
    }
  }
  const int inner_dim = DimOfVar(load, inner_var);
  if (inner_dim < 0) return fail(absl::StrCat("no index of it is the axis '", inner_var, "'"));
  for (size_t d = 0; d < dims; ++d) {
    if (static_cast<int>(d) != inner_dim) r.order.push_back(static_cast<int>(d));
  }
  r.order.push_back(inner_dim);
  r.offset.assign(dims, 0);
  std::vector<int64_t> extent(dims, 0);
  for (size_t d = 0; d < dims; ++d) {
    const ir::BoundResult b = ir::BoundOf(load.indices[d], ranges);
    if (!b.ok) {
      return fail(
          absl::StrCat("index ", d, " (", ir::ToString(load.indices[d]), ") has no known bounds"));
    }
    if ((b.range.min < 0 && !tested_lo[d]) || (b.range.max >= r.source_shape[d] && !tested_hi[d])) {
      return fail(absl::StrCat("index ", d, " of '", load.buffer, "' reaches [", b.range.min, ", ",
                               b.range.max, "] outside its extent ", r.source_shape[d],
                               " with no condition excluding it"));
    }
    r.offset[d] = -b.range.min;
    extent[d] = b.range.max - b.range.min + 1;
  }
  for (int d : r.order) r.shape.push_back(extent[d]);
  constexpr int64_t kMaxElements = std::numeric_limits<int32_t>::max();
  int64_t elements = 1;
  for (int64_t e : r.shape) {
    if (e <= 0 || elements > kMaxElements / e) {
      return fail("its workspace would hold 2^31 elements or more");
    }
    elements *= e;
  }
  return r;
}

}  // namespace

int64_t RepackedOperand::Elements() const {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

absl::StatusOr<OperandRepack> PlanOperandRepack(const ir::TensorNode& op, const MatmulLike& mm,
                                                const BufferShapeFn& shape_of) {
  const std::optional<FactorParts> pa = Parse(mm.a);
  const std::optional<FactorParts> pb = Parse(mm.b);
  // The inner k axis: a reduce axis both loads index with the bare variable.
  int best = -1;
  auto rank = [&](int i) {
    const int64_t e = op.reduce_axes[i].extent;
    return std::make_pair(e % 8 == 0 ? 2 : e % 4 == 0 ? 1 : 0, e);
  };
  for (int i = 0; pa && pb && i < static_cast<int>(op.reduce_axes.size()); ++i) {
    const std::string& name = op.reduce_axes[i].name;
    if (DimOfVar(*pa->load, name) < 0 || DimOfVar(*pb->load, name) < 0) continue;
    if (best < 0 || rank(i) > rank(best)) best = i;
  }
  if (best < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage '", op.name,
                     "': operands cannot be repacked: no reduce axis is a whole index of both "
                     "operand loads"));
  }
  ir::RangeMap ranges;
  for (const ir::IterVar& ax : op.axes) ranges[ax.name] = {0, ax.extent - 1};
  for (const ir::IterVar& ax : op.reduce_axes) ranges[ax.name] = {0, ax.extent - 1};
  const std::string& inner = op.reduce_axes[best].name;
  OperandRepack out;
  out.inner_k = best;
  ASSIGN_OR_RETURN(out.a, PlanOne(op, mm.a, "A", inner, ranges, shape_of));
  ASSIGN_OR_RETURN(out.b, PlanOne(op, mm.b, "B", inner, ranges, shape_of));
  return out;
}

Expr RepackedFactor(const RepackedOperand& r, const std::string& workspace) {
  std::vector<Expr> idx;
  for (int d : r.order) {
    Expr i = r.indices[d];
    if (r.offset[d] != 0) i = ir::Simplify(i + C(r.offset[d]));
    idx.push_back(i);
  }
  return ir::LoadNode::Make(r.dtype, workspace, idx);
}

namespace {

// Source coordinates of workspace coordinates `at`, and the condition that they lie inside the
// source (undefined when every workspace element has a source element).
std::pair<std::vector<Expr>, Expr> SourceOf(const RepackedOperand& r, const std::vector<Expr>& at) {
  const size_t dims = r.shape.size();
  std::vector<Expr> src(dims);
  Expr cond;
  for (size_t i = 0; i < dims; ++i) {
    const int d = r.order[i];
    src[d] = r.offset[d] == 0 ? at[i] : at[i] - C(r.offset[d]);
    std::vector<Expr> tests;
    if (r.offset[d] > 0) tests.push_back(src[d] >= C(0));
    if (r.shape[i] - r.offset[d] > r.source_shape[d])
      tests.push_back(src[d] < C(r.source_shape[d]));
    for (const Expr& test : tests) cond = cond.defined() ? (cond && test) : test;
  }
  return {src, cond};
}

// The source element at workspace coordinates `at`, zero outside the source. Where the
// condition may be false the load sits under a Select (lazy: no out-of-range read).
Expr SourceValue(const RepackedOperand& r, const std::vector<Expr>& at, RepackValues values) {
  auto [src, cond] = SourceOf(r, at);
  Expr load = ir::LoadNode::Make(r.dtype, r.source, src);
  if (values == RepackValues::kTf32Rounded) load = ir::Tf32Round(load);
  if (!cond.defined()) return load;
  return ir::SelectNode::Make(cond, load, ir::FloatConst(0.0, r.dtype));
}

// The stores of value `x` (already as RepackValues asks, except the split) at `at`: one store, or
// kTf32Split's big part into `workspace` and small part into `small_workspace`. `x` is evaluated
// once (a local holds it) where it is split.
ir::Stmt StoreValue(const std::string& workspace, const std::string& small_workspace,
                    const std::vector<Expr>& at, const Expr& x, RepackValues values,
                    const std::function<std::string(const std::string&)>& fresh) {
  if (values != RepackValues::kTf32Split) return ir::StoreNode::Make(workspace, at, x);
  const std::string held = fresh(workspace + ".x");
  const Expr v = ir::LoadNode::Make(ir::ScalarType::kFloat32, held, {C(0)});
  const Expr big = ir::Tf32Truncate(v);
  ir::Stmt s = ir::SeqNode::Make(
      {ir::StoreNode::Make(held, {C(0)}, x), ir::StoreNode::Make(workspace, at, big),
       ir::StoreNode::Make(small_workspace, at, ir::Tf32Truncate(v - big))});
  return ir::AllocateNode::Make({held, ir::ScalarType::kFloat32, {1}, ir::MemoryScope::kLocal}, s);
}

// One thread per workspace element, consecutive threads along the workspace's innermost
// dimension (coalesced stores; the loads gather across the source).
ir::Stmt ElementwiseRepack(const RepackedOperand& r, const std::string& workspace,
                           const std::string& small_workspace,
                           const std::function<std::string(const std::string&)>& fresh,
                           RepackValues values) {
  constexpr int64_t kThreads = 256;
  const int64_t total = r.Elements();
  const Expr blk = ir::MakeVar(fresh(workspace + ".block"));
  const Expr t = ir::MakeVar(fresh(workspace + ".thread"));
  const Expr idx = blk * C(kThreads) + t;
  const size_t dims = r.shape.size();
  std::vector<Expr> at(dims);
  int64_t stride = 1;
  for (size_t i = dims; i-- > 0;) {
    Expr v = stride == 1 ? idx : idx / C(stride);
    if (i > 0) v = v % C(r.shape[i]);
    at[i] = v;
    stride *= r.shape[i];
  }
  ir::Stmt copy =
      StoreValue(workspace, small_workspace, at, SourceValue(r, at, values), values, fresh);
  if (total % kThreads != 0) copy = ir::IfThenElseNode::Make(idx < C(total), copy);
  ir::Stmt s = ir::ForNode::Make(t, C(0), C(kThreads), ir::ForKind::kThreadIdxX, copy);
  return ir::ForNode::Make(blk, C(0), C((total + kThreads - 1) / kThreads), ir::ForKind::kBlockIdxX,
                           s);
}

// The product of the workspace's extents other than dimensions p and q.
int64_t OtherExtent(const RepackedOperand& r, size_t p, size_t q) {
  int64_t rest = 1;
  for (size_t i = 0; i < r.shape.size(); ++i) {
    if (i != p && i != q) rest *= r.shape[i];
  }
  return rest;
}

// The workspace coordinates of dimensions other than p and q at their linear index `o` (the
// last fastest); p's and q's left undefined.
std::vector<Expr> OtherCoordinates(const RepackedOperand& r, size_t p, size_t q, const Expr& o) {
  const int64_t rest = OtherExtent(r, p, q);
  std::vector<Expr> at(r.shape.size());
  int64_t stride = 1;
  for (size_t i = r.shape.size(); i-- > 0;) {
    if (i == p || i == q) continue;
    Expr v = stride == 1 ? o : o / C(stride);
    stride *= r.shape[i];
    at[i] = stride == rest ? v : v % C(r.shape[i]);
  }
  return at;
}

// The frame of the tiled transposes (TiledRepack, VectorTiledRepack): 32 x 8 threads, one block
// per 64 (p) x 64 (q) tile at one value of every other workspace dimension (block = ((rest index)
// · tiles_p + tile along p) · tiles_q + tile along q), the tile in shared memory.
constexpr int64_t kLanes = 32, kRows = 8, kTileP = 64, kTileQ = 64;
struct TransposeFrame {
  Expr tx, ty;
  std::string tile;
  Expr tp;               // the block's tile along p, 0 .. ceil(extent_p / 64) - 1
  Expr q0;               // the workspace index of its tile's first element along q
  std::vector<Expr> at;  // the workspace coordinates of the other dimensions (OtherCoordinates)
  /// Both phases under the threads, the shared tile and the block loop.
  std::function<ir::Stmt(ir::Stmt)> wrap;
};

// The frame for `extent_p` elements along p. The tile's rows are padded to an odd number of
// 4-byte words: the write phase's lanes read down a column, one row each, and rows 2k and 2k + 1
// of 2-byte elements padded by one shared a bank.
TransposeFrame MakeTransposeFrame(const RepackedOperand& r, size_t p, int64_t extent_p,
                                  const std::string& workspace,
                                  const std::function<std::string(const std::string&)>& fresh) {
  const size_t q = r.shape.size() - 1;
  const int64_t pad = std::max<int64_t>(1, 4 / ir::BytesOf(r.dtype));
  const int64_t tiles_p = (extent_p + kTileP - 1) / kTileP;
  const int64_t tiles_q = (r.shape[q] + kTileQ - 1) / kTileQ;
  const int64_t blocks = OtherExtent(r, p, q) * tiles_p * tiles_q;
  const Expr blk = ir::MakeVar(fresh(workspace + ".block"));
  TransposeFrame f;
  f.tx = ir::MakeVar(fresh(workspace + ".tx"));
  f.ty = ir::MakeVar(fresh(workspace + ".ty"));
  f.tile = fresh(workspace + ".tile");
  f.tp = (blk / C(tiles_q)) % C(tiles_p);
  f.q0 = (blk % C(tiles_q)) * C(kTileQ);
  f.at = OtherCoordinates(r, p, q, blk / C(tiles_q * tiles_p));
  f.wrap = [=, tile = f.tile, tx = f.tx, ty = f.ty, dtype = r.dtype](ir::Stmt body) {
    body = ir::ForNode::Make(ty, C(0), C(kRows), ir::ForKind::kThreadIdxY, body);
    body = ir::ForNode::Make(tx, C(0), C(kLanes), ir::ForKind::kThreadIdxX, body);
    body = ir::AllocateNode::Make({tile, dtype, {kTileQ, kTileP + pad}, ir::MemoryScope::kShared},
                                  body);
    return ir::ForNode::Make(blk, C(0), C(blocks), ir::ForKind::kBlockIdxX, body);
  };
  return f;
}

// A shared-memory tiled transpose: each block moves a tile of 64 (p) x 64 (q), where p is the
// workspace dimension holding the source's innermost dimension and q the workspace's innermost,
// at one value of every other dimension. The loads run along p (coalesced in the source), the
// stores along q (coalesced in the workspace); the tile's rows are padded against bank
// conflicts. 32 x 8 threads, sixteen elements each per phase. Loads in flight are what bounds it
// (a block's loads wait on its barrier while its stores run): on the H200 a 32 x 32 tile's four
// loads per thread left DRAM at 38 %, a 64 x 32 tile's eight at 54 % (ncu, bench/NOTES.md).
ir::Stmt TiledRepack(const RepackedOperand& r, const std::string& workspace,
                     const std::string& small_workspace, size_t p,
                     const std::function<std::string(const std::string&)>& fresh,
                     RepackValues values) {
  const size_t q = r.shape.size() - 1;
  const auto [tx, ty, tile, tp, q0, at, wrap] =
      MakeTransposeFrame(r, p, r.shape[p], workspace, fresh);
  const Expr p0 = tp * C(kTileP);
  // Phase 1: element (p0 + tx + 32h, q0 + ty + 8e) read into tile[ty + 8e][tx + 32h].
  const Expr h = ir::MakeVar(fresh(workspace + ".h"));
  const Expr e = ir::MakeVar(fresh(workspace + ".e"));
  std::vector<Expr> in = at;
  in[p] = p0 + tx + h * C(kLanes);
  in[q] = q0 + ty + e * C(kRows);
  ir::Stmt read = ir::StoreNode::Make(tile, {ty + e * C(kRows), tx + h * C(kLanes)},
                                      SourceValue(r, in, values));
  read = ir::IfThenElseNode::Make(in[p] < C(r.shape[p]) && in[q] < C(r.shape[q]), read);
  read = ir::ForNode::Make(e, C(0), C(kTileQ / kRows), ir::ForKind::kUnrolled, read);
  read = ir::ForNode::Make(h, C(0), C(kTileP / kLanes), ir::ForKind::kUnrolled, read);
  // Phase 2: element (p0 + ty + 8e, q0 + tx + 32h) written from tile[tx + 32h][ty + 8e].
  const Expr h2 = ir::MakeVar(fresh(workspace + ".h"));
  const Expr e2 = ir::MakeVar(fresh(workspace + ".e"));
  std::vector<Expr> out = at;
  out[p] = p0 + ty + e2 * C(kRows);
  out[q] = q0 + tx + h2 * C(kLanes);
  ir::Stmt write = StoreValue(
      workspace, small_workspace, out,
      ir::LoadNode::Make(r.dtype, tile, {tx + h2 * C(kLanes), ty + e2 * C(kRows)}), values, fresh);
  write = ir::IfThenElseNode::Make(out[p] < C(r.shape[p]) && out[q] < C(r.shape[q]), write);
  write = ir::ForNode::Make(e2, C(0), C(kTileP / kRows), ir::ForKind::kUnrolled, write);
  write = ir::ForNode::Make(h2, C(0), C(kTileQ / kLanes), ir::ForKind::kUnrolled, write);
  return wrap(ir::SeqNode::Make({read, ir::BarrierNode::Make(), write}));
}

// The tiled transpose with 16-byte loads along the source's rows (VectorTiledRepack's
// conditions): a block's tile is 64 source elements along p (the workspace dimension of the
// source's innermost) by 64 workspace elements along q (the workspace's innermost), at one value
// of every other workspace dimension. Unlike TiledRepack, whose tile starts in workspace
// coordinates (a padded row then starts one element before the source row, and a warp's 32
// scalar loads straddle two 128-byte lines), the tile starts at a source element that is a
// multiple of 64, so each thread loads whole vectors (into registers, then scalar stores into
// the tile: its rows stay padded to an odd number of words against bank conflicts in the write
// phase). The workspace's padding along p, which no source element maps to, is written with zeros
// by the first and last tile along p; padding in the other dimensions zeroes the whole tile.
// The write phase is TiledRepack's (coalesced stores along q).
// On the H100 TiledRepack's transpose of the 3x3 ResNet input ran at about 69 % of the copy
// bandwidth (bench/NOTES.md).
ir::Stmt VectorTiledRepack(const RepackedOperand& r, const std::string& workspace,
                           const std::string& small_workspace, size_t p,
                           const std::function<std::string(const std::string&)>& fresh,
                           RepackValues values) {
  constexpr int64_t kThreads = kLanes * kRows;
  const int64_t vec = 16 / ir::BytesOf(r.dtype);
  const size_t dims = r.shape.size();
  const size_t q = dims - 1;
  const int src_p = r.order[p];
  const int64_t src_ext = r.source_shape[src_p];
  const int64_t off_p = r.offset[src_p];
  const int64_t right = r.shape[p] - off_p - src_ext;  // padding after the source's last
  const int64_t tiles_p = (src_ext + kTileP - 1) / kTileP;
  const auto [tx, ty, tile, tp, q0, at, wrap] = MakeTransposeFrame(r, p, src_ext, workspace, fresh);
  const Expr s0 = tp * C(kTileP);
  // Whether the other dimensions' coordinates lie inside the source.
  Expr inside;
  for (size_t i = 0; i < dims; ++i) {
    if (i == p || i == q) continue;
    const int d = r.order[i];
    const Expr src = r.offset[d] == 0 ? at[i] : at[i] - C(r.offset[d]);
    std::vector<Expr> tests;
    if (r.offset[d] > 0) tests.push_back(src >= C(0));
    if (r.shape[i] - r.offset[d] > r.source_shape[d]) tests.push_back(src < C(r.source_shape[d]));
    for (const Expr& t : tests) inside = inside.defined() ? (inside && t) : t;
  }
  auto source_at = [&](const Expr& s, const Expr& qv) {
    std::vector<Expr> src(dims);
    for (size_t i = 0; i < dims; ++i) {
      const int d = r.order[i];
      if (i == p) {
        src[d] = s;
      } else if (i == q) {
        src[d] = qv;
      } else {
        src[d] = r.offset[d] == 0 ? at[i] : at[i] - C(r.offset[d]);
      }
    }
    return src;
  };
  // Phase 1: vector e of the thread, vi = (ty·32 + tx) + 256e, is row vi / (64 / vec) of the tile
  // (q0 + that along q) at columns (vi mod (64 / vec))·vec.. (s0 + those along p).
  const int64_t per_row = kTileP / vec;
  const int64_t per_thread = kTileQ * per_row / kThreads;
  const Expr e = ir::MakeVar(fresh(workspace + ".e"));
  const Expr v = ir::MakeVar(fresh(workspace + ".v"));
  const Expr v2 = ir::MakeVar(fresh(workspace + ".v"));
  const std::string held = fresh(workspace + ".vec");
  const Expr vi = ty * C(kLanes) + tx + e * C(kThreads);
  const Expr ql = vi / C(per_row);
  const Expr pl = (vi % C(per_row)) * C(vec);
  ir::Stmt load = ir::StoreNode::Make(
      held, {v}, ir::LoadNode::Make(r.dtype, r.source, source_at(s0 + pl + v, q0 + ql)));
  load = ir::ForNode::Make(v, C(0), C(vec), ir::ForKind::kVectorized, load);
  ir::Stmt place =
      ir::StoreNode::Make(tile, {ql, pl + v2}, ir::LoadNode::Make(r.dtype, held, {v2}));
  place = ir::ForNode::Make(v2, C(0), C(vec), ir::ForKind::kUnrolled, place);
  ir::Stmt read = ir::SeqNode::Make({load, place});
  Expr in_range;
  if (src_ext % kTileP != 0) in_range = s0 + pl < C(src_ext);
  if (r.shape[q] % kTileQ != 0) {
    const Expr t = q0 + ql < C(r.shape[q]);
    in_range = in_range.defined() ? (in_range && t) : t;
  }
  if (in_range.defined()) read = ir::IfThenElseNode::Make(in_range, read);
  read = ir::AllocateNode::Make({held, r.dtype, {vec}, ir::MemoryScope::kLocal}, read);
  read = ir::ForNode::Make(e, C(0), C(per_thread), ir::ForKind::kUnrolled, read);
  if (inside.defined()) read = ir::IfThenElseNode::Make(inside, read);
  // Phase 2: element (s0 + ty + 8e, q0 + tx + 32h) written from tile[tx + 32h][ty + 8e] (zero
  // where the other dimensions lie in the padding).
  const Expr h2 = ir::MakeVar(fresh(workspace + ".h"));
  const Expr e2 = ir::MakeVar(fresh(workspace + ".e"));
  const Expr qo = q0 + tx + h2 * C(kLanes);
  auto value_of = [&](const Expr& x) {
    return values == RepackValues::kTf32Rounded ? ir::Tf32Round(x) : x;
  };
  Expr x = value_of(ir::LoadNode::Make(r.dtype, tile, {tx + h2 * C(kLanes), ty + e2 * C(kRows)}));
  if (inside.defined()) x = ir::SelectNode::Make(inside, x, ir::FloatConst(0.0, r.dtype));
  std::vector<Expr> out = at;
  const Expr so = s0 + ty + e2 * C(kRows);
  out[p] = so + C(off_p);
  out[q] = qo;
  ir::Stmt write = StoreValue(workspace, small_workspace, out, x, values, fresh);
  Expr write_ok = so < C(src_ext);
  if (r.shape[q] % kTileQ != 0) write_ok = write_ok && qo < C(r.shape[q]);
  write = ir::IfThenElseNode::Make(write_ok, write);
  write = ir::ForNode::Make(e2, C(0), C(kTileP / kRows), ir::ForKind::kUnrolled, write);
  write = ir::ForNode::Make(h2, C(0), C(kTileQ / kLanes), ir::ForKind::kUnrolled, write);
  // The padding along p: positions 0 .. off_p - 1 by the first tile along p, src_ext + off_p ..
  // by the last, one row per ty.
  std::vector<ir::Stmt> seq = {read, ir::BarrierNode::Make(), write};
  for (const auto& [width, first, base] :
       {std::tuple{off_p, tp == C(0), C(0)},
        std::tuple{right, tp == C(tiles_p - 1), C(off_p + src_ext)}}) {
    if (width == 0) continue;
    const Expr h3 = ir::MakeVar(fresh(workspace + ".h"));
    const Expr qz = q0 + tx + h3 * C(kLanes);
    std::vector<Expr> zat = at;
    zat[p] = base + ty;
    zat[q] = qz;
    ir::Stmt zero =
        StoreValue(workspace, small_workspace, zat, ir::FloatConst(0.0, r.dtype), values, fresh);
    Expr ok = first && ty < C(width);
    if (r.shape[q] % kTileQ != 0) ok = ok && qz < C(r.shape[q]);
    zero = ir::IfThenElseNode::Make(ok, zero);
    seq.push_back(ir::ForNode::Make(h3, C(0), C(kTileQ / kLanes), ir::ForKind::kUnrolled, zero));
  }
  return wrap(ir::SeqNode::Make(seq));
}

// Whether VectorTiledRepack applies to `r` transposed along workspace dimension `p`: the
// source's rows are whole 16-byte vectors, the workspace's innermost dimension is not padded,
// and the padding along p is at most 8 (one row of threads) on each side.
bool VectorTileFits(const RepackedOperand& r, size_t p) {
  const size_t q = r.shape.size() - 1;
  const int src_p = r.order[p];
  const int src_q = r.order[q];
  const int64_t vec = 16 / ir::BytesOf(r.dtype);
  const int64_t right = r.shape[p] - r.offset[src_p] - r.source_shape[src_p];
  return r.source_shape[src_p] % vec == 0 && r.offset[src_q] == 0 &&
         r.shape[q] == r.source_shape[src_q] && r.offset[src_p] >= 0 && r.offset[src_p] <= 8 &&
         right >= 0 && right <= 8;
}

}  // namespace

ir::Stmt RepackKernel(const RepackedOperand& r, const std::string& workspace,
                      const std::function<std::string(const std::string&)>& fresh,
                      RepackValues values, const std::string& small_workspace) {
  // The workspace dimension holding the source's innermost one: a transpose when it is not the
  // workspace's innermost, tiled where both sides are long enough to fill a tile's rows.
  const int last = static_cast<int>(r.source_shape.size()) - 1;
  const size_t p = std::find(r.order.begin(), r.order.end(), last) - r.order.begin();
  const size_t q = r.shape.size() - 1;
  if (p != q && r.shape[p] >= 16 && r.shape[q] >= 16) {
    if (VectorTileFits(r, p)) {
      return VectorTiledRepack(r, workspace, small_workspace, p, fresh, values);
    }
    return TiledRepack(r, workspace, small_workspace, p, fresh, values);
  }
  return ElementwiseRepack(r, workspace, small_workspace, fresh, values);
}

}  // namespace tilesearch::schedule
