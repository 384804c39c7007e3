#include "schedule/tensor_core_lower.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/simplify.h"
#include "schedule/matmul_like.h"
#include "schedule/operand_repack.h"
#include "schedule/wgmma_layout.h"

namespace tilesearch::schedule::lower_internal {
namespace {

using ir::Expr;
using ir::ForKind;
using ir::Stmt;

absl::Status Invalid(const std::string& stage, const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrCat("invalid_schedule: tensor_core on stage '", stage, "': ", why));
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Expr C(int64_t v) { return ir::IntConst(v); }

// Values of the iterators `axes` (row-major, the last fastest) at linear position `linear`:
// (linear / stride) % extent, the first without the modulo.
void Delinearize(const std::vector<const ir::IterVar*>& axes, const Expr& linear,
                 std::vector<std::pair<std::string, Expr>>* out) {
  int64_t stride = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    Expr v = stride == 1 ? linear : linear / C(stride);
    if (i > 0) v = v % C(axes[i]->extent);
    out->emplace_back(axes[i]->name, v);
    stride *= axes[i]->extent;
  }
}

// The output axes of `op` at positions `ids`.
std::vector<const ir::IterVar*> AxesAt(const ir::TensorNode& op, const std::vector<int>& ids) {
  std::vector<const ir::IterVar*> out;
  for (int id : ids) out.push_back(&op.axes[id]);
  return out;
}

// The reduce axes of `op`.
std::vector<const ir::IterVar*> ReduceAxes(const ir::TensorNode& op) {
  std::vector<const ir::IterVar*> out;
  for (const ir::IterVar& ax : op.reduce_axes) out.push_back(&ax);
  return out;
}

// An operand's TMA fill (TensorCoreStep::tma): the tensor map over the parameter it reads and,
// per k tile, the boxes that make up its swizzled tile.
struct TmaFill {
  std::string map;  // the global buffer holding the tensor map
  ir::TensorMapSpec spec;
  size_t row_dim = 0;  // the load's dimensions indexed by the row axis and the k axis
  size_t k_dim = 0;
  std::vector<std::pair<size_t, std::string>> batch_dims;  // dimension, batch axis
  struct Box {
    int64_t dst_byte = 0;  // in the slot's tile
    int64_t row = 0;       // first row of the tile it covers
  };
  std::vector<Box> boxes;
  int64_t box_bytes = 0;
};

// One operand (A: rows are m, B: rows are n) as staged in shared memory.
struct Operand {
  std::string buffer;         // the shared buffer
  Expr factor;                // the body's factor (op's axis variables)
  std::vector<int> row_axes;  // m_axes or n_axes
  int64_t rows = 0;           // block_m or block_n
  int64_t total_rows = 0;     // M or N
  bool k_inner = true;        // shared layout [S][rows][BK + pad], else [S][BK][rows + pad]
  int64_t pad = 0;            // elements (the step's pad; see Builder::a_regs)
  ir::ScalarType dtype = ir::ScalarType::kFloat16;
  const ir::LoadNode* copy = nullptr;  // set: filled by cp.async of this load
  // Filled element by element with 4-byte cp.async whose source size is 0 where the element is
  // outside the problem or in a convolution's padding (zero-filled): a gather (implicit GEMM,
  // tiles past the extents) that still runs asynchronously in the pipeline.
  bool gather = false;
  // Filled by cp.async of `vec` consecutive elements along the contiguous direction whose
  // address is built from the chunk's first element plus the lane (Builder::ElementValue): a
  // repacked operand (TensorCoreStep::repack; zero-filled where a row or k guard excludes it), or
  // a plain load whose contiguous direction spans several axes (a 1×1 convolution's pixels n, h,
  // w: the chunks stay inside rows of w).
  bool chunked = false;
  int64_t vec = 1;         // elements per thread and fill step
  ir::WgmmaLayout layout;  // wgmma: the swizzled layout of one stage's tile
  // wgmma on TF32 kinds: the K-major operand tiles the ring's float32 tile is copied into, big
  // (tf32: x rounded to TF32; tf32x3: x truncated) and small (tf32x3: the rest, truncated).
  std::string big, small;
  std::optional<TmaFill> tma;
};

// x ^ y for 0 <= y < 2^bits and x >= 0, in arithmetic the IR has (only x's low bits change).
Expr XorLowBits(const Expr& x, const Expr& y, int bits) {
  const int64_t span = int64_t{1} << bits;
  Expr out = x - x % C(span);
  for (int b = 0; b < bits; ++b) {
    const int64_t p = int64_t{1} << b;
    out = out + ((x / C(p) + y / C(p)) % C(2)) * C(p);
  }
  return out;
}

// The byte offset of element (row, k) of a wgmma tile after the swizzle (ir::WgmmaLayoutOffset
// and ir::WgmmaSwizzle as IR arithmetic, the tile 1024-byte aligned); `k` (K-major) or `row`
// (MN-major) is the first element of a 16-byte chunk.
Expr SwizzledByte(const ir::WgmmaLayout& l, const Expr& row, const Expr& k) {
  Expr addr;
  const int64_t e = l.element_bytes;
  if (l.k_major) {
    addr = (row / C(8)) * C(l.sbo) + (row % C(8)) * C(l.swizzle) + k * C(e);
  } else {
    const int64_t atom = l.swizzle / e;
    addr = (row / C(atom)) * C(l.lbo) + (row % C(atom)) * C(e) + (k / C(8)) * C(l.sbo) +
           (k % C(8)) * C(l.swizzle);
  }
  const int64_t chunks = l.swizzle / 16;  // 8, 4 or 2
  const int bits = chunks == 8 ? 3 : chunks == 4 ? 2 : 1;
  const Expr chunk = addr / C(16);
  return XorLowBits(chunk, (addr / C(128)) % C(chunks), bits) * C(16);
}

Operand MakeOperand(std::string buffer, Expr factor, std::vector<int> row_axes, int64_t rows,
                    int64_t total_rows, bool k_inner, ir::ScalarType dtype) {
  Operand o;
  o.buffer = std::move(buffer);
  o.factor = std::move(factor);
  o.row_axes = std::move(row_axes);
  o.rows = rows;
  o.total_rows = total_rows;
  o.k_inner = k_inner;
  o.dtype = dtype;
  return o;
}

// The block tile (row, column) of tile index `bx` in raster groups (defined below).
std::pair<Expr, Expr> BlockOrder(const Expr& bx, int64_t raster, int64_t tiles_m, int64_t tiles_n);

struct Builder {
  Builder(const TensorCoreKernel& kernel, const ir::TensorNode& stage, MatmulLike roles)
      : k(kernel), op(stage), mm(std::move(roles)) {}
  const TensorCoreKernel& k;
  const ir::TensorNode& op;
  MatmulLike mm;
  ir::MmaKind kind = ir::MmaKind::kF16;
  int64_t bm = 0, bn = 0, bk = 0, wm = 0, wn = 0;
  int stages = 1;
  int64_t warps_n = 1, warps = 1, threads = 32;
  int64_t k_tiles = 1;      // k tiles of the whole reduction
  int64_t split = 1;        // k ranges (split_k)
  int64_t split_tiles = 1;  // k tiles per range
  bool k_guard = false;     // tiles may reach past k: their elements read as zero
  Expr tile_m, tile_n, batch, lane, warp, tid;
  // The reduce axes in the order the GEMM's k runs through them (the last fastest): op's order,
  // or with `repack` the inner k axis moved last.
  std::vector<const ir::IterVar*> k_axes;
  Expr split_idx = C(0);
  std::string workspace;  // split_k: the partial sums [split, batch, m, n]
  // TF32 kinds: each k tile's mma's accumulate into this fresh fragment, which is then added to
  // the accumulator with a float32 add. The tensor cores' own accumulation truncates; over a long
  // k its bias grows past float32 accuracy (measured on the H200: 8e-4 at k = 4096, beyond the
  // 1e-4 check), while a fresh fragment per tile keeps every truncated sum short.
  std::string tile_acc;
  Operand a, b;
  bool async = false;
  bool wgmma = false;       // warpgroup tiles (TensorCoreStep::warpgroup)
  bool split_tf32 = false;  // wgmma of a TF32 kind: plain ring, then TF32 tiles (Operand::big)
  // tf32x3 on wgmma with repacked operands: the repack kernels store both TF32 parts
  // (RepackValues::kTf32Split); a and b's rings hold the big parts, a_small and b_small's rings
  // (filled the same way from the second workspaces) the small parts. No copy in the kernel.
  bool presplit = false;
  Operand a_small, b_small;
  // One-pass tf32 on the split path: A is not copied into TF32 tiles; each wgmma reads its A
  // fragments from the ring's plain float32 tile into registers, rounded there (wgmma's register
  // form reads A in any layout: a pixel-contiguous convolution input needs no transposed copy).
  // A's rows are padded so that those reads are free of bank conflicts.
  bool a_regs = false;
  int64_t groups_n = 1;  // wgmma: warpgroups along n
  std::string barriers;  // TensorCoreStep::tma: the ring's mbarriers, int64 [stages]
  // TensorCoreStep::warp_specialized: the ring's second mbarriers (slot released), int64
  // [stages], and the block's first thread (a producer warpgroup comes first; `warp` and `tid`
  // count the consumer warps from 0).
  // The plain TMA ring (no producer, no cluster) keeps its release barriers in `barriers` too,
  // after the full ones (empty_base = stages), so that its shared footprint stays that of one
  // ring of mbarriers (each shared buffer takes a 1024-byte period).
  bool ws = false;
  std::string empties;
  int64_t empty_base = 0;
  Expr first_thread;
  // The block tiles, tiles_m x tiles_n in the raster order `raster` (TileAt).
  // TensorCoreStep::persistent: `grid` blocks (block index `block`) walk the `tiles` block tiles.
  bool persistent = false;
  Expr block;
  int64_t grid = 1, tiles = 1, tiles_m = 1, tiles_n = 1, raster = 1;
  int64_t batches = 1;  // persistent with a batch: its tiles join the walk (no blockIdx.y)
  // TensorCoreStep::stream_k (PlanStreamK): the first `sk_whole` tiles are walked whole, each
  // block taking tiles block, block + grid, ...; the k tiles of the other tiles, `sk_iters` in the
  // linear (tile, k tile) order, are split into `grid` contiguous ranges, block b's from
  // b · sk_iters / grid. A tile two blocks share leaves each part's accumulators in
  // `sk_workspace` ([grid][2][bm][bn] float32: slot 0 a block's first unit, slot 1 its last) for
  // the fixup kernel (StreamKFixupKernel).
  bool stream_k = false;
  int64_t sk_whole = 0, sk_iters = 0;
  std::string sk_workspace;
  // TensorCoreStep::multicast: blocks per cluster (two along m, sharing B's k tiles); 1 without.
  int64_t cluster = 1;
  // TensorCoreStep::pingpong: two consumer warpgroups, each computing whole block tiles (the
  // block's even-numbered tiles and its odd-numbered ones).
  bool pingpong = false;
  // Ping-pong's turn mbarriers, int64 [2]: consumer c arrives on turn[c] once it has passed the
  // ring waits of its tile's k loop, and the other consumer waits for that before its next tile.
  // Without them, the consumer of an odd tile would wait for a slot use two or more phases ahead
  // of the slot's barrier, which a phase parity cannot tell apart (the interpreter found extra
  // arrivals). Two barriers, not one: a warp that has arrived on a single shared barrier may
  // reach its next wait before the other warps' arrivals complete the phase, and pass it.
  std::string turn;
  // Warp-specialized wgmma (PlanWarpStaging): each consumer warp stages its part of the block
  // tile's output, stage_cols columns at a time, through two shared buffers of its own (one
  // `warp_staging` of [consumer warps][2][16 FragM() rows][stage_cols]) and hands the writes to
  // its own lanes through its own mbarrier of 32 arrivals (`warp_staging_bars`, [consumer
  // warps]): no barrier with the producer or the other consumers. Empty: the fragment-layout
  // stores.
  std::string warp_staging, warp_staging_bars;
  int64_t stage_cols = 0;
  // The current consumer's tiles before the current one (the consume loop's i; i / 2 for
  // ping-pong): its staging buffers' uses so far, per column chunk.
  Expr tiles_done = C(0);

  // The warpgroup's place in the block tile (wgmma): its index among the consumers, or 0 where
  // each consumer warpgroup computes a whole tile (ping-pong).
  Expr TileGroup() const { return pingpong ? C(0) : warp / C(4); }

  // Accumulator fragments per thread: [frag_m][frag_n][4].
  int64_t FragM() const { return wgmma ? wm / 64 : wm / 16; }
  int64_t FragN() const { return wn / 8; }
  int64_t TileElems(const Operand& o) const { return o.rows * bk; }
  // Sets of TF32 tiles (split_tf32): two where a ring lets the copy overlap the products.
  int64_t Tf32Sets() const { return stages >= 2 ? 2 : 1; }

  int64_t InnerExtent(const Operand& o) const { return o.k_inner ? bk : o.rows; }
  int64_t OuterExtent(const Operand& o) const { return o.k_inner ? o.rows : bk; }
  // Elements of one ring slot of the plain layout (padded rows).
  int64_t RingTileElems(const Operand& o) const {
    return OuterExtent(o) * (InnerExtent(o) + o.pad);
  }
  // Whether o's ring holds wgmma's swizzled tiles (read through descriptors), else plain padded
  // rows (read by threads: the split path's copy, A's register fragments, mma.sync).
  bool Swizzled(const Operand& o) const { return wgmma && !split_tf32 && !o.layout.registers; }

  // The shared buffer's declaration.
  ir::BufferDecl Decl(const Operand& o) const {
    if (Swizzled(o)) {
      return {o.buffer, o.dtype, {stages * TileElems(o)}, ir::MemoryScope::kShared};
    }
    return {o.buffer,
            o.dtype,
            {stages, OuterExtent(o), InnerExtent(o) + o.pad},
            ir::MemoryScope::kShared};
  }

  // The value of operand element (row, kk) of k tile `ko`: the factor at those coordinates, zero
  // outside the problem. With `lane` (a chunked operand), (row, kk) is the first of o.vec
  // consecutive elements along the contiguous direction (k where k_inner, else the rows) and the
  // value is that of the element `lane` further: the lane is added to that direction's innermost
  // axis (the chunk never crosses it: its extent, the tile's extent and the chunk's first
  // position are multiples of o.vec), so the load's contiguous index is lane-invariant plus
  // `lane`, a vector copy for the emitter.
  Expr ElementValue(const Operand& o, const Expr& row, const Expr& kk, const Expr& ko,
                    const Expr& row_tile, const Expr& lane_var = Expr()) {
    const Expr rg = row_tile * C(o.rows) + row;
    const Expr kg = ko * C(bk) + kk;
    std::vector<std::pair<std::string, Expr>> sub;
    Delinearize(AxesAt(op, o.row_axes), rg, &sub);
    Delinearize(k_axes, kg, &sub);
    if (lane_var.defined()) {
      const ir::IterVar& inner = o.k_inner ? *k_axes.back() : op.axes[o.row_axes.back()];
      const Expr& first = o.k_inner ? kg : rg;
      for (auto& [name, value] : sub) {
        if (name == inner.name) {
          value = ((first / C(o.vec)) % C(inner.extent / o.vec)) * C(o.vec) + lane_var;
        }
      }
    }
    if (batch.defined()) Delinearize(AxesAt(op, mm.batch_axes), batch, &sub);
    if (o.copy != nullptr) {
      std::vector<Expr> idx;
      for (const Expr& i : o.copy->indices) idx.push_back(ir::Substitute(i, sub));
      return ir::LoadNode::Make(o.copy->type, o.copy->buffer, idx);
    }
    Expr v = ir::Substitute(o.factor, sub);
    std::vector<Expr> conds;
    if (o.total_rows % o.rows != 0) conds.push_back(rg < C(o.total_rows));
    if (k_guard) conds.push_back(kg < C(mm.k));
    // A gather's padding condition joins the guards: one Select(all conditions, Load, 0), the
    // form a zero-filling cp.async copies (built as is: ir::Select might fold it otherwise).
    const auto* padded = o.gather ? v.as<ir::SelectNode>() : nullptr;
    if (padded != nullptr) {
      conds.push_back(padded->cond);
      v = padded->true_value;
    }
    if (conds.empty()) return v;
    Expr cond = conds[0];
    for (size_t i = 1; i < conds.size(); ++i) cond = cond && conds[i];
    if (o.gather || o.chunked) return ir::SelectNode::Make(cond, v, ir::FloatConst(0.0, v.type()));
    return ir::Select(cond, v, ir::FloatConst(0.0));
  }

  // The cooperative fill of one k tile into slot `slot`.
  Stmt Fill(const Operand& o, const Expr& slot, const Expr& ko, const Expr& row_tile) {
    const int64_t inner = InnerExtent(o);
    const int64_t chunks = OuterExtent(o) * inner / o.vec;
    const int64_t steps = CeilDiv(chunks, threads);
    const Expr f = ir::MakeVar(k.fresh(o.buffer + ".f"));
    const Expr v = ir::MakeVar(k.fresh(o.buffer + ".v"));
    const Expr chunk = f * C(threads) + tid;
    const Expr lin = chunk * C(o.vec) + v;
    const Expr outer = lin / C(inner);
    const Expr in = lin % C(inner);
    const Expr row = o.k_inner ? outer : in;
    const Expr kk = o.k_inner ? in : outer;
    std::vector<Expr> index = {slot, outer, in};
    if (Swizzled(o)) {
      // The chunk's first element goes where the swizzled layout puts it; its `vec` elements stay
      // contiguous (the swizzle moves whole 16-byte chunks). A gather (vec 1) places each element
      // at its 16-byte chunk's place plus its offset in the chunk.
      const int64_t eb = o.layout.element_bytes;
      const int64_t per16 = 16 / eb;
      const Expr in0 = (chunk % C(inner / o.vec)) * C(o.vec);
      const Expr outer0 = chunk / C(inner / o.vec);
      const bool whole = o.vec % per16 == 0;
      const Expr in16 = whole ? in0 : in0 - in0 % C(per16);
      Expr byte =
          o.k_inner ? SwizzledByte(o.layout, outer0, in16) : SwizzledByte(o.layout, in16, outer0);
      if (!whole) byte = byte + (in0 % C(per16)) * C(eb);
      index = {slot * C(TileElems(o)) + byte / C(eb) + v};
    }
    // A chunked operand's value comes from the chunk's first element plus the lane.
    Expr value;
    if (o.chunked && o.vec > 1) {
      const Expr first_in = (chunk % C(inner / o.vec)) * C(o.vec);
      const Expr first_outer = chunk / C(inner / o.vec);
      value = o.k_inner ? ElementValue(o, first_outer, first_in, ko, row_tile, v)
                        : ElementValue(o, first_in, first_outer, ko, row_tile, v);
    } else {
      value = ElementValue(o, row, kk, ko, row_tile);
    }
    Stmt store =
        ir::StoreNode::Make(o.buffer, index, value, o.copy != nullptr || o.gather || o.chunked);
    store = ir::ForNode::Make(v, C(0), C(o.vec), ForKind::kVectorized, store);
    if (chunks % threads != 0) store = ir::IfThenElseNode::Make(chunk < C(chunks), store);
    return ir::ForNode::Make(f, C(0), C(steps), steps <= 16 ? ForKind::kUnrolled : ForKind::kSerial,
                             store);
  }

  // The fills of the range's k tile `ko` (a tile of the whole reduction: offset by the range).
  Stmt FillBoth(const Expr& slot, const Expr& ko) {
    const Expr kt = split > 1 ? split_idx * C(split_tiles) + ko : ko;
    if (presplit) {
      return ir::SeqNode::Make({Fill(a, slot, kt, tile_m), Fill(b, slot, kt, tile_n),
                                Fill(a_small, slot, kt, tile_m), Fill(b_small, slot, kt, tile_n)});
    }
    return ir::SeqNode::Make({Fill(a, slot, kt, tile_m), Fill(b, slot, kt, tile_n)});
  }

  Stmt Mma(const std::string& acc, const Expr& slot, int64_t pending = 0) {
    if (split_tf32) return Tf32Wgmma(acc, slot);
    if (presplit) return PresplitWgmma(acc, slot);
    if (wgmma) return Wgmma(acc, slot, pending);
    if (!tile_acc.empty()) {
      return ir::SeqNode::Make({InitAcc(tile_acc), WarpMma(tile_acc, slot), AddTileAcc(acc)});
    }
    return WarpMma(acc, slot);
  }

  // One warpgroup's wgmma of the k tile in `slot`.
  Stmt Wgmma(const std::string& acc, const Expr& slot, int64_t pending) {
    const int64_t a_slot = a.layout.registers ? RingTileElems(a) : TileElems(a);
    return WgmmaOf(kind, acc, a.buffer, slot * C(a_slot), b.buffer, slot * C(TileElems(b)),
                   pending);
  }

  // tf32x3's products of the repacked parts in ring slot `slot`, issued into the tile accumulator
  // and left in flight: small·big, big·small, big·big (the in-kernel split's order).
  Stmt PresplitProducts(const Expr& slot) {
    const ir::MmaKind t = ir::MmaKind::kTF32;
    const Expr ao = slot * C(TileElems(a));
    const Expr bo = slot * C(TileElems(b));
    return ir::SeqNode::Make({WgmmaOf(t, tile_acc, a_small.buffer, ao, b.buffer, bo, 3),
                              WgmmaOf(t, tile_acc, a.buffer, ao, b_small.buffer, bo, 3),
                              WgmmaOf(t, tile_acc, a.buffer, ao, b.buffer, bo, 3)});
  }

  // One k tile of presplit tf32x3, all at once: the products into the fresh tile accumulator,
  // complete, added to `acc` (the loops' slot reuse holds for any pending).
  Stmt PresplitWgmma(const std::string& acc, const Expr& slot) {
    return ir::SeqNode::Make({InitAcc(tile_acc), PresplitProducts(slot), AddTf32(acc)});
  }

  // One k tile of presplit tf32x3 in AsyncWgmmaLoop, whose tile accumulator holds the previous
  // tile's products (zero before the first): wait for them and add them, then issue this tile's
  // into the cleared accumulator and leave them in flight over the next tile's wait, barrier and
  // fills (pending 1: the previous tile's products are complete when the slot two tiles back is
  // refilled, as the loop needs); the last tile (pending 0) waits for its own and adds them.
  Stmt PresplitDeferred(const std::string& acc, const Expr& slot, int64_t pending) {
    std::vector<Stmt> seq = {ir::AsyncGroupNode::WgmmaWait(0), AddTileAcc(acc), InitAcc(tile_acc),
                             PresplitProducts(slot)};
    if (pending == 0) seq.push_back(AddTf32(acc));
    return ir::SeqNode::Make(seq);
  }

  // One warpgroup's wgmma of `k` on operand tiles whose block tile starts at element `a_base` of
  // `a_buf` and `b_base` of `b_buf` (in the layouts of a and b).
  Stmt WgmmaOf(ir::MmaKind k, const std::string& acc, const std::string& a_buf, const Expr& a_base,
               const std::string& b_buf, const Expr& b_base, int64_t pending) {
    const Expr group = TileGroup();
    auto origin = [&](const Operand& o, const Expr& base, const Expr& first_row) {
      const ir::WgmmaLayout& l = o.layout;
      if (l.registers) return base + first_row * C(l.row_stride);
      const Expr byte = l.k_major ? first_row * C(l.swizzle) : (first_row / C(64)) * C(l.lbo);
      return base + byte / C(l.element_bytes);
    };
    // TMA rings are written by the async proxy alone (no fence.proxy.async before each k tile's
    // wgmma's); the plain kernel's staged epilogue writes A's or B's ring only after the last.
    const bool async_filled = a.tma && b.tma && a_buf == a.buffer && b_buf == b.buffer;
    return ir::WgmmaNode::Make(k, wm / 64, wn, bk / ir::MmaK(k), acc, a_buf,
                               origin(a, a_base, (group / C(groups_n)) * C(wm)), a.layout, b_buf,
                               origin(b, b_base, (group % C(groups_n)) * C(wn)), b.layout,
                               (warp % C(4)) * C(32) + lane, pending, !async_filled);
  }

  // The float32 tile in ring slot `slot` copied into o's TF32 operand tiles (Operand::big /
  // small) at TF32 slot `t_slot`, four k values of one row per thread and step: whole 16-byte
  // chunks of the K-major swizzled tiles. Threads go along k where the ring's rows hold k
  // (contiguous reads), along the rows otherwise (the ring's k rows read across, the tiles
  // written transposed).
  Stmt SplitTile(const Operand& o, const Expr& slot, const Expr& t_slot) {
    const int64_t k_chunks = bk / 4;
    const int64_t chunks = o.rows * k_chunks;
    const int64_t steps = CeilDiv(chunks, threads);
    const Expr f = ir::MakeVar(k.fresh(o.big + ".f"));
    const Expr v = ir::MakeVar(k.fresh(o.big + ".v"));
    const Expr q = f * C(threads) + tid;
    const Expr row = o.k_inner ? q / C(k_chunks) : q % C(o.rows);
    const Expr k0 = (o.k_inner ? q % C(k_chunks) : q / C(o.rows)) * C(4);
    const Expr kk = k0 + v;
    // The four values go through registers first (a local buffer): read once from shared
    // memory, not once per part stored.
    const std::string xs = k.fresh(o.big + ".x");
    const Stmt read =
        ir::StoreNode::Make(xs, {v},
                            ir::LoadNode::Make(ir::ScalarType::kFloat32, o.buffer,
                                               o.k_inner ? std::vector<Expr>{slot, row, kk}
                                                         : std::vector<Expr>{slot, kk, row}));
    const Expr x = ir::LoadNode::Make(ir::ScalarType::kFloat32, xs, {v});
    const Expr at =
        t_slot * C(TileElems(o)) + SwizzledByte(o.layout, row, k0) / C(o.layout.element_bytes) + v;
    std::vector<Stmt> put;
    // tf32: x rounded to TF32. tf32x3: truncated parts, as the mma.sync kind splits (one integer
    // and each; x − big is exact in float32). Rounded parts would keep one more bit of x but
    // cost five instructions each, and on the H200 the copy is what fills the issue slots.
    if (kind == ir::MmaKind::kTF32) {
      put.push_back(ir::StoreNode::Make(o.big, {at}, ir::Tf32Round(x)));
    } else {
      const Expr big = ir::Tf32Truncate(x);
      put.push_back(ir::StoreNode::Make(o.big, {at}, big));
      put.push_back(ir::StoreNode::Make(o.small, {at}, ir::Tf32Truncate(x - big)));
    }
    Stmt st = ir::SeqNode::Make(
        {ir::ForNode::Make(v, C(0), C(4), ForKind::kVectorized, read),
         ir::ForNode::Make(v, C(0), C(4), ForKind::kVectorized, ir::SeqNode::Make(put))});
    st = ir::AllocateNode::Make({xs, ir::ScalarType::kFloat32, {4}, ir::MemoryScope::kLocal}, st);
    if (chunks % threads != 0) st = ir::IfThenElseNode::Make(q < C(chunks), st);
    return ir::ForNode::Make(f, C(0), C(steps), steps <= 16 ? ForKind::kUnrolled : ForKind::kSerial,
                             st);
  }

  Stmt SplitBoth(const Expr& slot, const Expr& t_slot) {
    if (a_regs) return SplitTile(b, slot, t_slot);
    return ir::SeqNode::Make({SplitTile(a, slot, t_slot), SplitTile(b, slot, t_slot)});
  }

  // A's layout when its fragments go through registers: the ring tile as it is.
  ir::WgmmaLayout RegisterLayout() const {
    ir::WgmmaLayout l;
    l.registers = true;
    l.element_bytes = 4;
    l.row_stride = a.k_inner ? bk + a.pad : 1;
    l.k_stride = a.k_inner ? 1 : bm + a.pad;
    return l;
  }

  // The TF32 products of the tiles at TF32 slot `t_slot` issued and left in flight: into the
  // fresh tile accumulator (tf32x3: small·big, big·small, big·big, as the mma.sync kind), or
  // (one-pass tf32, no tile accumulator) straight into `acc`.
  Stmt IssueTf32(const std::string& acc, const Expr& t_slot, const Expr& ring_slot) {
    const ir::MmaKind t = ir::MmaKind::kTF32;
    const Expr ao = t_slot * C(TileElems(a));
    const Expr bo = t_slot * C(TileElems(b));
    const std::string& into = tile_acc.empty() ? acc : tile_acc;
    if (a_regs) {
      const Expr ring = ring_slot * C(RingTileElems(a));
      return WgmmaOf(t, into, a.buffer, ring, b.big, bo, 3);
    }
    std::vector<Stmt> seq;
    if (!tile_acc.empty()) seq.push_back(InitAcc(tile_acc));
    if (kind == ir::MmaKind::kTF32x3) {
      seq.push_back(WgmmaOf(t, into, a.small, ao, b.big, bo, 3));
      seq.push_back(WgmmaOf(t, into, a.big, ao, b.small, bo, 3));
    }
    seq.push_back(WgmmaOf(t, into, a.big, ao, b.big, bo, 3));
    return ir::SeqNode::Make(seq);
  }

  // acc += tile_acc in float32 (the TF32 kinds' per-tile sum).
  Stmt AddTileAcc(const std::string& acc) {
    return OverFragments(acc + ".add", [&](const std::vector<Expr>& idx) {
      return ir::StoreNode::Make(acc, idx,
                                 ir::LoadNode::Make(ir::ScalarType::kFloat32, acc, idx) +
                                     ir::LoadNode::Make(ir::ScalarType::kFloat32, tile_acc, idx));
    });
  }

  // Waits for the issued products, then adds the tile accumulator (if any) to `acc`.
  Stmt AddTf32(const std::string& acc) {
    if (tile_acc.empty()) return ir::AsyncGroupNode::WgmmaWait(0);
    return ir::SeqNode::Make({ir::AsyncGroupNode::WgmmaWait(0), AddTileAcc(acc)});
  }

  // A TF32 kind's k tile on wgmma, all at once (a ring of one tile): the copy into TF32 tiles, a
  // barrier, the products, their sum into `acc`. The next tile's barrier (MainLoop) keeps the
  // TF32 tiles until every warpgroup's wgmma's are done with them.
  Stmt Tf32Wgmma(const std::string& acc, const Expr& slot) {
    return ir::SeqNode::Make(
        {SplitBoth(slot, C(0)), ir::BarrierNode::Make(), IssueTf32(acc, C(0), slot), AddTf32(acc)});
  }

  // TF32 kinds on wgmma with a ring of 2 or more tiles: two sets of TF32 tiles, so that each k
  // tile's copy into TF32 tiles runs while the previous tile's products are in flight. Iteration
  // ko: wait for tile ko + 1 and a barrier (every warpgroup is done with tile ko − 1's TF32 tiles,
  // and every thread with ring slot ko's copy), refill slot ko with tile ko + stages, copy tile
  // ko + 1 into TF32 set (ko + 1) % 2, wait for tile ko's products and add them, a barrier (the
  // copy is complete), then issue tile ko + 1's products.
  Stmt Tf32WgmmaLoop(const std::string& acc) {
    std::vector<Stmt> seq;
    for (int64_t s = 0; s + 1 < stages; ++s) {
      if (s < split_tiles) seq.push_back(FillBoth(C(s), C(s)));
      seq.push_back(ir::AsyncGroupNode::Commit());
    }
    seq.push_back(ir::AsyncGroupNode::Wait(stages - 2));
    seq.push_back(ir::BarrierNode::Make());
    if (stages - 1 < split_tiles) seq.push_back(FillBoth(C(stages - 1), C(stages - 1)));
    seq.push_back(ir::AsyncGroupNode::Commit());
    seq.push_back(SplitBoth(C(0), C(0)));
    seq.push_back(ir::BarrierNode::Make());
    seq.push_back(IssueTf32(acc, C(0), C(0)));
    if (split_tiles > 1) {
      const Expr ko = ir::MakeVar(k.fresh(op.name + ".ko"));
      const Expr next = ko + C(1);
      const Expr refill = ko + C(stages);
      std::vector<Stmt> body = {
          ir::AsyncGroupNode::Wait(stages - 2),
          ir::BarrierNode::Make(),
          ir::IfThenElseNode::Make(refill < C(split_tiles), FillBoth(ko % C(stages), refill)),
          ir::AsyncGroupNode::Commit(),
          SplitBoth(next % C(stages), next % C(2)),
          AddTf32(acc),
          ir::BarrierNode::Make(),
          IssueTf32(acc, next % C(2), next % C(stages))};
      seq.push_back(ir::ForNode::Make(ko, C(0), C(split_tiles - 1), ForKind::kSerial,
                                      ir::SeqNode::Make(body)));
    }
    seq.push_back(AddTf32(acc));
    return ir::SeqNode::Make(seq);
  }

  Stmt WarpMma(const std::string& acc, const Expr& slot) {
    const Expr wr = (warp / C(warps_n)) * C(wm);
    const Expr wc = (warp % C(warps_n)) * C(wn);
    std::vector<Expr> ao =
        a.k_inner ? std::vector<Expr>{slot, wr, C(0)} : std::vector<Expr>{slot, C(0), wr};
    std::vector<Expr> bo =
        b.k_inner ? std::vector<Expr>{slot, wc, C(0)} : std::vector<Expr>{slot, C(0), wc};
    return ir::WarpMmaNode::Make(kind, wm / 16, wn / 8, bk / ir::MmaK(kind), acc, a.buffer,
                                 std::move(ao), a.k_inner, b.buffer, std::move(bo), b.k_inner,
                                 lane);
  }

  // wgmma with a ring of 3 or more tiles: each tile's wgmma's run on (pending 1) while the next
  // tile's fills are issued, and the fills run stages - 2 tiles ahead, into the slot of the tile
  // two back: its wgmma's are complete in every warpgroup by then (each waited for them before the
  // barrier). The last tile waits for everything (pending 0) before the epilogue.
  Stmt AsyncWgmmaLoop(const std::string& acc) {
    std::vector<Stmt> seq;
    if (presplit) seq.push_back(InitAcc(tile_acc));  // PresplitDeferred adds it before each tile
    const int64_t ahead = stages - 2;
    for (int64_t s = 0; s < ahead; ++s) {
      if (s < split_tiles) seq.push_back(FillBoth(C(s), C(s)));
      seq.push_back(ir::AsyncGroupNode::Commit());
    }
    auto tile = [&](const Expr& ko, int64_t pending) {
      std::vector<Stmt> body;
      body.push_back(ir::AsyncGroupNode::Wait(ahead - 1));
      body.push_back(ir::BarrierNode::Make());
      const Expr next = ko + C(ahead);
      body.push_back(
          ir::IfThenElseNode::Make(next < C(split_tiles), FillBoth(next % C(stages), next)));
      body.push_back(ir::AsyncGroupNode::Commit());
      body.push_back(presplit ? PresplitDeferred(acc, ko % C(stages), pending)
                              : Mma(acc, ko % C(stages), pending));
      return ir::SeqNode::Make(body);
    };
    const Expr ko = ir::MakeVar(k.fresh(op.name + ".ko"));
    if (split_tiles > 1) {
      seq.push_back(ir::ForNode::Make(ko, C(0), C(split_tiles - 1), ForKind::kSerial, tile(ko, 1)));
    }
    seq.push_back(tile(C(split_tiles - 1), 0));
    return ir::SeqNode::Make(seq);
  }

  // Thread 0's TMA fill of the range's k tile `ko` into ring slot `slot` (TmaBoxes under the
  // thread's guard).
  Stmt TmaIssue(const Expr& slot, const Expr& ko) {
    return ir::IfThenElseNode::Make(tid == C(0), TmaBoxes(slot, ko));
  }

  // The TMA fill of the range's k tile `ko` into ring slot `slot`: the slot's mbarrier expects
  // both operands' bytes, then every box of both tiles is started.
  Stmt TmaBoxes(const Expr& slot, const Expr& ko) {
    const Expr kt = split > 1 ? split_idx * C(split_tiles) + ko : ko;
    std::vector<std::pair<std::string, Expr>> batch_values;
    if (batch.defined()) Delinearize(AxesAt(op, mm.batch_axes), batch, &batch_values);
    std::vector<Stmt> seq = {ir::MbarrierNode::ArriveExpectTx(
        barriers, slot,
        a.tma->box_bytes * a.tma->boxes.size() + b.tma->box_bytes * b.tma->boxes.size())};
    for (const auto& [o, row_tile] : {std::pair{&a, tile_m}, {&b, tile_n}}) {
      const TmaFill& f = *o->tma;
      for (size_t bi = 0; bi < f.boxes.size(); ++bi) {
        const TmaFill::Box& box = f.boxes[bi];
        std::vector<Expr> coords(f.spec.dims.size(), C(0));
        coords[f.row_dim] = row_tile * C(o->rows) + C(box.row);
        coords[f.k_dim] = kt * C(bk);
        for (const auto& [dim, axis] : f.batch_dims) {
          for (const auto& [name, value] : batch_values) {
            if (name == axis) coords[dim] = value;
          }
        }
        const int64_t eb = ir::BytesOf(o->dtype);
        // A cluster's blocks share B's tile: its boxes are started in turn by each block, for
        // all of them.
        const bool shared = cluster > 1 && o == &b;
        seq.push_back(ir::TmaLoadNode::Make(
            f.map, coords, o->buffer, slot * C(TileElems(*o)) + C(box.dst_byte / eb), barriers,
            slot, shared ? cluster : 1, shared ? C(static_cast<int64_t>(bi) % cluster) : Expr()));
      }
    }
    return ir::SeqNode::Make(seq);
  }

  // The (row, column) of block tile `t` in the raster order; in clusters of two (multicast), tiles
  // 2q and 2q + 1 (the cluster's ranks 0 and 1) are rows 2r and 2r + 1 of one column, (r, column)
  // pair q's place in the raster order over the pairs (PlanMulticast).
  std::pair<Expr, Expr> TileAt(const Expr& t) const {
    if (cluster == 1) return BlockOrder(t, raster, tiles_m, tiles_n);
    const auto [pair_row, column] = BlockOrder(t / C(2), raster, tiles_m / 2, tiles_n);
    return {pair_row * C(2) + t % C(2), column};
  }

  // `build()` with tile_m, tile_n (and the batch) those of the walk's tile t, the block's own
  // set back after.
  template <typename Build>
  auto AtTile(const Expr& t, Build&& build) {
    const std::tuple<Expr, Expr, Expr> own = {tile_m, tile_n, batch};
    SetTile(t);
    auto built = build();
    std::tie(tile_m, tile_n, batch) = own;
    return built;
  }

  // `body(i)` for the block's tiles: once (tile_m and tile_n as set), or with `persistent` in a
  // loop over the block's i-th tile, block + i·grid, among the first `count` tiles (default: all),
  // whose tile_m and tile_n `body` sees (the last iteration guarded where the grid does not
  // divide them).
  absl::StatusOr<Stmt> OverTiles(const std::string& role,
                                 const std::function<absl::StatusOr<Stmt>(const Expr& i)>& body,
                                 std::optional<int64_t> count = std::nullopt) {
    if (!persistent) return body(C(0));
    const int64_t n = count.value_or(tiles);
    const Expr i = ir::MakeVar(k.fresh(op.name + "." + role + ".tile"));
    const Expr t = block + i * C(grid);
    // The block's tiles for `body` only (with a batch, batch-major: SetTile).
    ASSIGN_OR_RETURN(Stmt b, AtTile(t, [&] { return body(i); }));
    if (n % grid != 0) b = ir::IfThenElseNode::Make(t < C(n), b);
    return ir::ForNode::Make(i, C(0), C(CeilDiv(n, grid)), ForKind::kSerial, b);
  }

  // A block's unit of work for the warp-specialized loop: a block tile's k tiles k0 .. k0 + len
  // (all of them but under stream-k), with tile_m, tile_n and the batch set to the tile's.
  struct WorkUnit {
    Expr i = Expr();      // the block's tile count before it (OverTiles' i; ping-pong's turn)
    Expr g0 = Expr();     // ring uses before the unit's first k tile
    Expr k0 = C(0);       // its first k tile within the tile (of the range, with split_k)
    Expr len = Expr();    // its k tiles, at least 1
    int64_t fixed = 0;    // len where it is a constant (whole tiles), else 0
    Expr done = Expr();   // epilogues the block ran before it (the warp staging's uses)
    Expr whole = Expr();  // stream-k: whether it is its tile's whole k; undefined: always
    Expr slot = Expr();   // stream-k: its workspace slot where it is a part (0 first, 1 last unit)
  };

  // Sets tile_m, tile_n (and the batch) to those of the walk's tile t: with a batch, tile
  // t mod (tiles_m · tiles_n) of batch t / (tiles_m · tiles_n), in the raster order within it.
  void SetTile(const Expr& t) {
    const int64_t per_batch = tiles_m * tiles_n;
    if (batches > 1) {
      batch = t / C(per_batch);
      std::tie(tile_m, tile_n) = TileAt(t % C(per_batch));
    } else {
      std::tie(tile_m, tile_n) = TileAt(t);
    }
  }

  // `body(unit)` for the block's units of work: its tiles (OverTiles) or, under stream-k, its
  // whole tiles of the first waves, then the (up to three) parts of tiles in its k range, each
  // under a guard that it exists. The ring's use count runs on over all of them.
  absl::StatusOr<Stmt> OverWork(const std::string& role,
                                const std::function<absl::StatusOr<Stmt>(const WorkUnit&)>& body) {
    // Whole tiles: every k tile of the block's i-th (split_tiles = k_tiles under stream-k).
    auto whole_tile = [&](const Expr& i) {
      return body(WorkUnit{.i = i,
                           .g0 = i * C(split_tiles),
                           .len = C(split_tiles),
                           .fixed = split_tiles,
                           .done = i});
    };
    if (!stream_k) return OverTiles(role, whole_tile);
    std::vector<Stmt> seq;
    const int64_t waves = sk_whole / grid;
    if (waves > 0) {
      ASSIGN_OR_RETURN(Stmt b, OverTiles(role, whole_tile, sk_whole));
      seq.push_back(b);
    }
    // The block's range [start, end) of the split tiles' k tiles, and its first tile.
    const Expr start = block * C(sk_iters) / C(grid);
    const Expr end = (block + C(1)) * C(sk_iters) / C(grid);
    const Expr first = start / C(k_tiles);
    Expr done = C(waves);
    for (int64_t u = 0; u < 3; ++u) {
      const Expr tile = first + C(u);
      const Expr lo = ir::Max(start, tile * C(k_tiles));
      const Expr hi = ir::Min(end, (tile + C(1)) * C(k_tiles));
      WorkUnit unit{.i = C(waves + u),
                    .g0 = C(waves * k_tiles) + (lo - start),
                    .k0 = lo - tile * C(k_tiles),
                    .len = hi - lo,
                    .done = done};
      unit.whole = unit.k0 == C(0) && unit.len == C(k_tiles);
      unit.slot = ir::Select(unit.k0 == C(0), C(1), C(0));
      ASSIGN_OR_RETURN(Stmt b, AtTile(C(sk_whole) + tile, [&] { return body(unit); }));
      // Ranges are at least k_tiles long (PlanStreamK), so the first unit always exists and at
      // most three tiles meet a range.
      seq.push_back(u == 0 ? b : ir::IfThenElseNode::Make(tile * C(k_tiles) < end, b));
      done = done + ir::Select(unit.whole, C(1), C(0));
    }
    return ir::SeqNode::Make(seq);
  }

  // Warp-specialized TMA ring (TensorCoreStep::warp_specialized): the block's first thread
  // initializes both barrier rings (full: one arrival plus the bytes; empty: one arrival per
  // consumer warp), a barrier, then the producer warpgroup's first thread fills tile after tile,
  // each once its slot's previous tile is released (empty phase parity: the slot's use count + 1,
  // mod 2, so the first pass waits for nothing), while the consumers wait for each full slot, issue
  // its wgmma's (pending 1 with two or more slots) and release the slot whose wgmma's are then
  // complete. The consumer part ends with the epilogue. Persistent blocks (OverTiles) run both
  // parts over their tiles; the ring's use count g runs on across them (the block's i-th tile's
  // k tile ko is use g = i·split_tiles + ko; under stream-k a unit's g0 + ko, OverWork), so the
  // producer fills the next tile's first slots while the consumers store the last one's
  // accumulators.
  //
  // Multicast clusters (TensorCoreStep::multicast): each producer starts its A boxes and half of
  // B's for both blocks, so a slot is refilled once the consumers of both blocks released it:
  // each consumer warp's first lane arrives on the slot's empty barrier in both blocks (a
  // one-way message; the barrier expects one arrival per consumer warp of the cluster). The
  // producer alone waits for the other block, `stages` slots ahead of the consumers, which wait
  // only for their data. Cluster barriers after the initialization (the other block's barriers
  // exist before the first copy or arrival reaches them) and at the end (no block exits while
  // the other may still arrive on its barriers: the last releases are waited for by no refill).
  absl::StatusOr<Stmt> WsLoop(const std::string& acc) {
    const int64_t pending = stages >= 2 ? 1 : 0;
    std::vector<Stmt> init;
    for (int64_t s = 0; s < stages; ++s) {
      init.push_back(ir::MbarrierNode::Init(barriers, C(s), 1));
      // One arrival per consumer warp that reads the slot (its first lane's, once the warp's
      // wgmma's on it are complete): ping-pong, the warps of one of the two consumer
      // warpgroups; multicast, every consumer warp of the cluster.
      init.push_back(ir::MbarrierNode::Init(empties, C(s),
                                            cluster > 1 ? cluster * warps
                                            : pingpong  ? warps / 2
                                                        : warps));
    }
    if (pingpong) {
      init.push_back(ir::MbarrierNode::Init(turn, C(0), threads / 2));
      init.push_back(ir::MbarrierNode::Init(turn, C(1), threads / 2));
    }
    if (!warp_staging_bars.empty()) {
      for (int64_t w = 0; w < warps; ++w) {
        init.push_back(ir::MbarrierNode::Init(warp_staging_bars, C(w), 32));
      }
    }
    ASSIGN_OR_RETURN(
        Stmt produce, OverWork("produce", [&](const WorkUnit& unit) -> absl::StatusOr<Stmt> {
          const Expr kp = ir::MakeVar(k.fresh(op.name + ".kp"));
          const Expr g = unit.g0 + kp;  // (0 + kp without persistence: folded)
          Stmt fill = ir::SeqNode::Make(
              {ir::MbarrierNode::Wait(empties, g % C(stages), (g / C(stages) + C(1)) % C(2)),
               TmaBoxes(g % C(stages), unit.k0 + kp)});
          // (A part of a tile: loops keep constant extents, the unit's length is a guard.)
          if (unit.fixed == 0) fill = ir::IfThenElseNode::Make(kp < unit.len, fill);
          return ir::ForNode::Make(kp, C(0), C(unit.fixed > 0 ? unit.fixed : k_tiles),
                                   ForKind::kSerial, fill);
        }));
    ASSIGN_OR_RETURN(
        Stmt consume, OverWork("consume", [&](const WorkUnit& unit) -> absl::StatusOr<Stmt> {
          const Expr& i = unit.i;
          const Expr group = warp / C(4);  // ping-pong: this consumer
          // A consumer warp's release of a slot, by its first lane (in every block of the
          // cluster): one arrival per warp rather than per thread, as CUTLASS signals once per
          // consumer warpgroup.
          auto release = [&](const Expr& slot) {
            return ir::IfThenElseNode::Make(lane == C(0),
                                            ir::MbarrierNode::Arrive(empties, slot, cluster));
          };
          auto tile = [&](const Expr& ko, int64_t tile_pending, bool last) {
            const Expr g = unit.g0 + ko;
            std::vector<Stmt> body = {
                ir::MbarrierNode::Wait(barriers, g % C(stages), (g / C(stages)) % C(2))};
            // Ping-pong: past its tile's last ring wait, the consumer hands the turn on before
            // its last wgmma's, so that the other one's overlap them.
            if (pingpong && last) body.push_back(ir::MbarrierNode::Arrive(turn, group));
            body.push_back(Mma(acc, g % C(stages), tile_pending));
            if (tile_pending == 0) {
              // The wait for all wgmma's completed the previous k tile's too: release its slot
              // (the ring runs on into the block's next tile) and this one's.
              if (pending > 0 && unit.fixed != 1) {
                Stmt previous = release((g - C(1)) % C(stages));
                if (unit.fixed == 0) previous = ir::IfThenElseNode::Make(ko >= C(1), previous);
                body.push_back(previous);
              }
              body.push_back(release(g % C(stages)));
            } else {
              body.push_back(ir::IfThenElseNode::Make(ko >= C(tile_pending),
                                                      release((g - C(tile_pending)) % C(stages))));
            }
            return ir::SeqNode::Make(body);
          };
          const Expr kc = ir::MakeVar(k.fresh(op.name + ".ko"));
          std::vector<Stmt> seq;
          // Ping-pong: the previous tile's consumer (the other one) is done with its ring waits:
          // its ((i - 1) / 2)-th arrival on its turn barrier.
          if (pingpong) {
            seq.push_back(ir::IfThenElseNode::Make(
                i >= C(1), ir::MbarrierNode::Wait(turn, C(1) - group, ((i - C(1)) / C(2)) % C(2))));
          }
          seq.push_back(InitAcc(acc));
          if (unit.fixed > 1) {
            seq.push_back(ir::ForNode::Make(kc, C(0), C(unit.fixed - 1), ForKind::kSerial,
                                            tile(kc, pending, false)));
          } else if (unit.fixed == 0 && k_tiles > 1) {
            seq.push_back(ir::ForNode::Make(
                kc, C(0), C(k_tiles - 1), ForKind::kSerial,
                ir::IfThenElseNode::Make(kc < unit.len - C(1), tile(kc, pending, false))));
          }
          seq.push_back(tile(unit.len - C(1), 0, true));
          tiles_done = pingpong ? i / C(2) : unit.done;
          absl::StatusOr<Stmt> staged = Epilogue(acc);
          tiles_done = C(0);
          ASSIGN_OR_RETURN(Stmt epilogue, std::move(staged));
          // Stream-k: a part of a tile leaves its accumulators to the fixup kernel.
          if (unit.whole.defined()) {
            epilogue = ir::IfThenElseNode::Make(unit.whole, epilogue, PartStore(acc, unit.slot));
          }
          seq.push_back(epilogue);
          // Ping-pong: the block's i-th tile is consumer warpgroup (i mod 2)'s.
          if (pingpong) {
            return ir::IfThenElseNode::Make(i % C(2) == group, ir::SeqNode::Make(seq));
          }
          return ir::SeqNode::Make(seq);
        }));
    produce = ir::IfThenElseNode::Make(first_thread == C(0), produce);
    // Register reallocation (WsRegisterSplit): the producer returns what the consumers take.
    if (const std::optional<std::pair<int64_t, int64_t>> regs = WsRegisterSplit(k.config)) {
      produce = ir::SeqNode::Make({ir::SetMaxNRegNode::Make(regs->first, false), produce});
      consume = ir::SeqNode::Make({ir::SetMaxNRegNode::Make(regs->second, true), consume});
    }
    std::vector<Stmt> seq = {
        ir::IfThenElseNode::Make(first_thread == C(0), ir::SeqNode::Make(init)),
        ir::BarrierNode::Make(cluster), ir::IfThenElseNode::Make(tid < C(0), produce, consume)};
    if (cluster > 1) seq.push_back(ir::BarrierNode::Make(cluster));
    return ir::SeqNode::Make(seq);
  }

  // wgmma fed by TMA (TensorCoreStep::tma): thread 0 initializes two mbarriers per ring slot
  // (full: one arrival plus the bytes; empty: one arrival per warp) and keeps `ahead` k tiles in
  // flight; each tile: every thread waits for its tile's slot (full phase parity: the slot's use
  // count, mod 2) and issues the tile's wgmma's, thread 0 waits for the release of the slot the
  // fill `ahead` tiles on reuses (empty phase parity: the slot's use count + 1, mod 2, so a first
  // use waits for nothing) and starts that fill, every thread waits for its wgmma's but `pending`
  // groups (1 with 3 or more slots, so that they overlap the next tile's wait), and each warp's
  // first lane releases the slot whose wgmma's that wait completed. No block barrier in the k
  // loop: only thread 0 waits for the other warps, for a release they made a tile earlier
  // (CUTLASS's TMA mainloop without a producer releases through mbarriers the same way). With a
  // barrier per k tile the kernel issued a quarter more instructions for the same cycles (the
  // warps at the barrier were waiting for the tiles: H100 ncu, bench/NOTES.md), and those
  // instructions cost clock at the power limit.
  //
  // Multicast clusters (TensorCoreStep::multicast): each block also starts half of the other's B
  // boxes, so a slot may be refilled only once both blocks are done with it. Past the block
  // barrier, thread 0 releases the slot just freed in both blocks (a second mbarrier per slot
  // expecting one arrival per block, arrived on remotely), then waits for the refilled slot's
  // release before starting its boxes (parity: its use count + 1, mod 2, so that a first use
  // waits for nothing). A slot is released only where it is refilled: every arrival on the
  // other block's barrier is then one that block waits for before it can finish, so no block
  // exits while the other may still signal or copy into its shared memory. One barrier across the
  // cluster after the initialization, none in the loop: a release is a one-way message, where a
  // cluster barrier per k tile would be a round trip between the two multiprocessors for every
  // thread.
  Stmt TmaWgmmaLoop(const std::string& acc) {
    const int64_t pending = stages >= 3 ? 1 : 0;
    const int64_t ahead = stages - 1 - pending;
    std::vector<Stmt> init;
    for (int64_t s = 0; s < stages; ++s) {
      init.push_back(ir::MbarrierNode::Init(barriers, C(s), 1));
      init.push_back(
          ir::MbarrierNode::Init(empties, C(empty_base + s), cluster > 1 ? cluster : warps));
    }
    // With multicast the other block's mbarriers must be initialized before this one's first
    // copy or arrival reaches them.
    std::vector<Stmt> seq = {ir::IfThenElseNode::Make(tid == C(0), ir::SeqNode::Make(init)),
                             ir::BarrierNode::Make(cluster)};
    for (int64_t s = 0; s < ahead && s < split_tiles; ++s) seq.push_back(TmaIssue(C(s), C(s)));
    auto tile = [&](const Expr& ko, int64_t tile_pending, bool last) {
      const Expr next = ko + C(ahead);
      Stmt fill = TmaIssue(next % C(stages), next);
      if (cluster > 1) {
        // The tile whose wgmma's the barrier just saw complete in this block (ko - 1 - pending)
        // frees its slot: the slot `next` refills.
        const Expr freed = ko - C(1 + pending);
        fill = ir::IfThenElseNode::Make(
            tid == C(0) && next < C(split_tiles),
            ir::SeqNode::Make(
                {ir::IfThenElseNode::Make(
                     freed >= C(0), ir::MbarrierNode::Arrive(empties, freed % C(stages), cluster)),
                 ir::MbarrierNode::Wait(empties, next % C(stages),
                                        (next / C(stages) + C(1)) % C(2)),
                 TmaBoxes(next % C(stages), next)}));
        return ir::SeqNode::Make(
            {ir::BarrierNode::Make(), fill,
             ir::MbarrierNode::Wait(barriers, ko % C(stages), (ko / C(stages)) % C(2)),
             Mma(acc, ko % C(stages), tile_pending)});
      }
      // The slot's previous tile, next - stages = ko - 1 - pending, was released by every warp
      // after tile ko - 1's wgmma's (below).
      fill = ir::IfThenElseNode::Make(
          tid == C(0) && next < C(split_tiles),
          ir::SeqNode::Make({ir::MbarrierNode::Wait(empties, C(empty_base) + next % C(stages),
                                                    (next / C(stages) + C(1)) % C(2)),
                             TmaBoxes(next % C(stages), next)}));
      const Stmt wait = ir::MbarrierNode::Wait(barriers, ko % C(stages), (ko / C(stages)) % C(2));
      // With one slot (ahead 0) the fill is this tile's own, before its wait; the last tile
      // (ahead >= 1) fills nothing.
      if (ahead == 0 || last) {
        std::vector<Stmt> body = {fill, wait, Mma(acc, ko % C(stages), tile_pending)};
        if (!last) body.push_back(Release(ko % C(stages)));
        return ir::SeqNode::Make(body);
      }
      // The tile's wgmma's are issued first (one group more left in flight), so that warpgroup 0's
      // start before thread 0 may wait for a release; then the fill, then the wait that leaves
      // `pending` groups in flight, and the release of the slot of tile ko - pending, whose
      // wgmma's that wait completed in this warp.
      Stmt release = Release((ko - C(pending)) % C(stages));
      if (pending > 0) release = ir::IfThenElseNode::Make(ko >= C(pending), release);
      return ir::SeqNode::Make({wait, Mma(acc, ko % C(stages), pending + 1), fill,
                                ir::AsyncGroupNode::WgmmaWait(pending), release});
    };
    const Expr ko = ir::MakeVar(k.fresh(op.name + ".ko"));
    if (split_tiles > 1) {
      seq.push_back(ir::ForNode::Make(ko, C(0), C(split_tiles - 1), ForKind::kSerial,
                                      tile(ko, pending, false)));
    }
    seq.push_back(tile(C(split_tiles - 1), 0, true));
    return ir::SeqNode::Make(seq);
  }

  // The plain TMA ring's release of `slot` by each warp's first lane, once the warp's wgmma's on
  // it are complete (the warp's lanes passed the same wait).
  Stmt Release(const Expr& slot) {
    return ir::IfThenElseNode::Make(lane == C(0),
                                    ir::MbarrierNode::Arrive(empties, C(empty_base) + slot));
  }

  // The k loop: prologue fills, then per tile wait / barrier / prefetch / mma.
  Stmt MainLoop(const std::string& acc) {
    if (a.tma && b.tma) return TmaWgmmaLoop(acc);
    if (split_tf32 && stages >= 2) return Tf32WgmmaLoop(acc);
    if (wgmma && async && stages >= 3) return AsyncWgmmaLoop(acc);
    std::vector<Stmt> seq;
    const Expr ko = ir::MakeVar(k.fresh(op.name + ".ko"));
    if (stages == 1) {
      std::vector<Stmt> body = {ir::BarrierNode::Make(), FillBoth(C(0), ko)};
      if (async) {
        body.push_back(ir::AsyncGroupNode::Commit());
        body.push_back(ir::AsyncGroupNode::Wait(0));
      }
      body.push_back(ir::BarrierNode::Make());
      body.push_back(Mma(acc, C(0)));
      return ir::ForNode::Make(ko, C(0), C(split_tiles), ForKind::kSerial, ir::SeqNode::Make(body));
    }
    for (int s = 0; s + 1 < stages; ++s) {
      if (s < split_tiles) seq.push_back(FillBoth(C(s), C(s)));
      if (async) seq.push_back(ir::AsyncGroupNode::Commit());
    }
    std::vector<Stmt> body;
    if (async) body.push_back(ir::AsyncGroupNode::Wait(stages - 2));
    body.push_back(ir::BarrierNode::Make());
    const Expr next = ko + C(stages - 1);
    body.push_back(
        ir::IfThenElseNode::Make(next < C(split_tiles), FillBoth(next % C(stages), next)));
    if (async) body.push_back(ir::AsyncGroupNode::Commit());
    body.push_back(Mma(acc, ko % C(stages)));
    seq.push_back(
        ir::ForNode::Make(ko, C(0), C(split_tiles), ForKind::kSerial, ir::SeqNode::Make(body)));
    return ir::SeqNode::Make(seq);
  }

  // `body` at every accumulator element [i, j, e] of the thread, in unrolled loops.
  Stmt OverFragments(const std::string& base,
                     const std::function<Stmt(const std::vector<Expr>& idx)>& body) {
    const Expr i = ir::MakeVar(k.fresh(base + ".i"));
    const Expr j = ir::MakeVar(k.fresh(base + ".j"));
    const Expr e = ir::MakeVar(k.fresh(base + ".e"));
    Stmt out = ir::ForNode::Make(e, C(0), C(4), ForKind::kUnrolled, body({i, j, e}));
    out = ir::ForNode::Make(j, C(0), C(FragN()), ForKind::kUnrolled, out);
    return ir::ForNode::Make(i, C(0), C(FragM()), ForKind::kUnrolled, out);
  }

  // The stage's axis values at output row `r` (m), column `c` (n) and the block's batch.
  std::vector<Expr> AxisValues(const Expr& r, const Expr& c, const Expr& b) const {
    std::vector<std::pair<std::string, Expr>> sub;
    Delinearize(AxesAt(op, mm.m_axes), r, &sub);
    Delinearize(AxesAt(op, mm.n_axes), c, &sub);
    if (b.defined()) Delinearize(AxesAt(op, mm.batch_axes), b, &sub);
    std::vector<Expr> axes;
    for (const ir::IterVar& ax : op.axes) {
      Expr v = C(0);
      for (const auto& [name, e] : sub) {
        if (name == ax.name) v = e;
      }
      axes.push_back(v);
    }
    return axes;
  }

  // Row (within the block tile) of accumulator element [i, *, 2 eh + *] of this thread, and the
  // column of element [*, j, * + el]: the mma.sync C fragment per warp, or the wgmma D fragment
  // per warpgroup (each warp 16 of its 64 rows).
  Expr FragmentRow(const Expr& i, const Expr& eh) const {
    if (!wgmma) return (warp / C(warps_n)) * C(wm) + i * C(16) + lane / C(4) + eh * C(8);
    return (TileGroup() / C(groups_n)) * C(wm) + i * C(64) + (warp % C(4)) * C(16) + lane / C(4) +
           eh * C(8);
  }
  Expr FragmentCol(const Expr& j, const Expr& el) const {
    const Expr tile = wgmma ? TileGroup() % C(groups_n) : warp % C(warps_n);
    return tile * C(wn) + j * C(8) + (lane % C(4)) * C(2) + el;
  }

  // The shared operand buffer a wgmma block tile's output can be staged in (its ring is done
  // with by then): A's or B's flat ring when it holds bm × bn elements of the output's type and
  // the output rows are whole 16-byte chunks along the innermost (n) axis; "" otherwise.
  std::string StagingBuffer(ir::ScalarType out_type) const {
    if (!wgmma || split_tf32 || split > 1 || mm.m % bm != 0 || mm.n % bn != 0 || bn % 8 != 0) {
      return "";
    }
    if (mm.n_axes.size() != 1 || mm.n_axes[0] + 1 != static_cast<int>(op.axes.size())) return "";
    for (const Operand* o : {&a, &b}) {
      if (o->layout.registers) continue;  // plain padded rows, not a flat ring
      if (o->dtype == out_type && stages * TileElems(*o) >= bm * bn) return o->buffer;
    }
    return "";
  }

  // Element offset of output element (row, col) of the block tile in the staging buffer: rows of
  // bn elements whose 16-byte chunks are xor-swizzled by the row, so that the fragment-layout
  // writes (eight rows at once) and the row reads both spread over the banks.
  Expr StagedOffset(const Expr& row, const Expr& col) const {
    const int64_t chunks = bn / 8;
    const int bits = chunks >= 8 ? 3 : chunks >= 4 ? 2 : chunks >= 2 ? 1 : 0;
    const Expr chunk =
        bits == 0 ? col / C(8) : XorLowBits(col / C(8), row % C(int64_t{1} << bits), bits);
    return row * C(bn) + chunk * C(8) + col % C(8);
  }

  // wgmma's epilogue through shared memory: the accumulators go through the epilogue into the
  // staging buffer in the fragment layout, then every thread stores whole 16-byte row chunks
  // (the fragment layout's own stores fill half of each 32-byte sector; ncu on the H200).
  absl::StatusOr<Stmt> StagedEpilogue(const std::string& acc, const std::string& staging) {
    const std::string base = acc + ".stage";
    const Expr i = ir::MakeVar(k.fresh(base + ".i"));
    const Expr j = ir::MakeVar(k.fresh(base + ".j"));
    const Expr eh = ir::MakeVar(k.fresh(base + ".eh"));
    const Expr el = ir::MakeVar(k.fresh(base + ".el"));
    const Expr lr = FragmentRow(i, eh);
    const Expr lc = FragmentCol(j, el);
    const Expr value = ir::LoadNode::Make(ir::ScalarType::kFloat32, acc, {i, j, eh * C(2) + el});
    ASSIGN_OR_RETURN(
        Expr out, k.epilogue(value, AxisValues(tile_m * C(bm) + lr, tile_n * C(bn) + lc, batch)));
    if (out.type() != k.out_dtype) out = ir::Cast(k.out_dtype, out);
    Stmt put = ir::StoreNode::Make(staging, {StagedOffset(lr, lc)}, out);
    put = ir::ForNode::Make(el, C(0), C(2), ForKind::kVectorized, put);
    put = ir::ForNode::Make(eh, C(0), C(2), ForKind::kUnrolled, put);
    put = ir::ForNode::Make(j, C(0), C(FragN()), ForKind::kUnrolled, put);
    put = ir::ForNode::Make(i, C(0), C(FragM()), ForKind::kUnrolled, put);
    // Copy-out: chunk q of the tile is row q / (bn / 8), columns 8 (q % (bn / 8)) + v.
    const int64_t chunks = bm * bn / 8;
    const int64_t steps = CeilDiv(chunks, threads);
    const Expr f = ir::MakeVar(k.fresh(base + ".f"));
    const Expr v = ir::MakeVar(k.fresh(base + ".v"));
    const Expr q = f * C(threads) + tid;
    const Expr row = q / C(bn / 8);
    const Expr col = (q % C(bn / 8)) * C(8) + v;
    Stmt copy = ir::StoreNode::Make(
        k.out_buffer, AxisValues(tile_m * C(bm) + row, tile_n * C(bn) + col, batch),
        ir::LoadNode::Make(k.out_dtype, staging, {StagedOffset(row, col)}));
    copy = ir::ForNode::Make(v, C(0), C(8), ForKind::kVectorized, copy);
    if (chunks % threads != 0) copy = ir::IfThenElseNode::Make(q < C(chunks), copy);
    copy = ir::ForNode::Make(f, C(0), C(steps), steps <= 16 ? ForKind::kUnrolled : ForKind::kSerial,
                             copy);
    // The first barrier: every warpgroup's last wgmma has read the ring.
    return ir::SeqNode::Make({ir::BarrierNode::Make(), put, ir::BarrierNode::Make(), copy});
  }

  // Element offset of element (row, col) of a warp's staged chunk of `stage_cols` columns: rows
  // whose 16-byte pieces are xor-swizzled by the row's 128-byte line (rows_per_line rows share
  // one), so that a fragment write (8 rows, 16 bytes each) lands in 8 distinct 16-byte bank
  // groups, and a row read (a piece per lane) stays conflict-free too.
  Expr WarpStagedOffset(const Expr& row, const Expr& col) const {
    const int64_t eb = ir::BytesOf(k.out_dtype);
    const int64_t vc = 16 / eb;
    const int64_t pieces = stage_cols / vc;
    const int64_t rows_per_line = std::max<int64_t>(1, 128 / (stage_cols * eb));
    const int bits = pieces >= 8 ? 3 : pieces >= 4 ? 2 : pieces >= 2 ? 1 : 0;
    const Expr line = rows_per_line == 1 ? row : row / C(rows_per_line);
    const Expr piece =
        bits == 0 ? col / C(vc) : XorLowBits(col / C(vc), line % C(int64_t{1} << bits), bits);
    return row * C(stage_cols) + piece * C(vc) + col % C(vc);
  }

  // A warp-specialized consumer's epilogue through its warp's staging buffers: per chunk of
  // stage_cols columns of its warpgroup tile, the warp's lanes put their accumulators (through
  // the epilogue) in the fragment layout, wait on the warp's mbarrier, and store whole 16-byte
  // row pieces, 32 lanes covering rows of whole 32-byte sectors (the fragment layout's own
  // stores fill half of each sector: the plain TMA kernel went 13 % faster with its block-wide
  // staging, bench/NOTES.md). Two buffers alternate, so one wait per chunk suffices: a lane
  // puts chunk u into the buffer of chunk u - 2 only after the wait of chunk u - 1, which every
  // lane arrived at after its reads of chunk u - 2.
  absl::StatusOr<Stmt> WarpStagedEpilogue(const std::string& acc) {
    const int64_t vc = 16 / ir::BytesOf(k.out_dtype);
    const int64_t cw = stage_cols;
    const int64_t rows = 16 * FragM();
    const int64_t chunks = wn / cw;
    const int64_t per_row = cw / vc;
    const int64_t buf_elems = rows * cw;
    const std::string base = acc + ".wst";
    const Expr row0 = tile_m * C(bm) + (TileGroup() / C(groups_n)) * C(wm) + (warp % C(4)) * C(16);
    const Expr col0 = tile_n * C(bn) + (TileGroup() % C(groups_n)) * C(wn);
    // The output row of the warp's staged row `lr` (fragment i's 16 rows are 64 rows apart).
    auto out_row = [&](const Expr& lr) { return row0 + (lr / C(16)) * C(64) + lr % C(16); };
    std::vector<Stmt> seq;
    for (int64_t q = 0; q < chunks; ++q) {  // in C++: the accumulator indices stay constant
      const Expr use = tiles_done * C(chunks) + C(q);
      const Expr buf = (warp * C(2) + use % C(2)) * C(buf_elems);
      const Expr i = ir::MakeVar(k.fresh(base + ".i"));
      const Expr jj = ir::MakeVar(k.fresh(base + ".j"));
      const Expr eh = ir::MakeVar(k.fresh(base + ".eh"));
      const Expr el = ir::MakeVar(k.fresh(base + ".el"));
      const Expr lr = i * C(16) + lane / C(4) + eh * C(8);
      const Expr lc = jj * C(8) + (lane % C(4)) * C(2) + el;
      const Expr value = ir::LoadNode::Make(ir::ScalarType::kFloat32, acc,
                                            {i, C(q * (cw / 8)) + jj, eh * C(2) + el});
      ASSIGN_OR_RETURN(Expr out,
                       k.epilogue(value, AxisValues(out_row(lr), col0 + C(q * cw) + lc, batch)));
      if (out.type() != k.out_dtype) out = ir::Cast(k.out_dtype, out);
      Stmt put = ir::StoreNode::Make(warp_staging, {buf + WarpStagedOffset(lr, lc)}, out);
      put = ir::ForNode::Make(el, C(0), C(2), ForKind::kVectorized, put);
      put = ir::ForNode::Make(eh, C(0), C(2), ForKind::kUnrolled, put);
      put = ir::ForNode::Make(jj, C(0), C(cw / 8), ForKind::kUnrolled, put);
      put = ir::ForNode::Make(i, C(0), C(FragM()), ForKind::kUnrolled, put);
      seq.push_back(put);
      seq.push_back(ir::MbarrierNode::Arrive(warp_staging_bars, warp));
      seq.push_back(ir::MbarrierNode::Wait(warp_staging_bars, warp, use % C(2)));
      // Copy-out: piece p of the chunk is staged row p / per_row, columns vc (p % per_row) + v.
      const int64_t pieces = rows * per_row;
      const Expr f = ir::MakeVar(k.fresh(base + ".f"));
      const Expr v = ir::MakeVar(k.fresh(base + ".v"));
      const Expr p = f * C(32) + lane;
      const Expr r = p / C(per_row);
      const Expr c = (p % C(per_row)) * C(vc);
      Stmt copy = ir::StoreNode::Make(
          k.out_buffer, AxisValues(out_row(r), col0 + C(q * cw) + c + v, batch),
          ir::LoadNode::Make(k.out_dtype, warp_staging, {buf + WarpStagedOffset(r, c) + v}));
      copy = ir::ForNode::Make(v, C(0), C(vc), ForKind::kVectorized, copy);
      if (pieces % 32 != 0) copy = ir::IfThenElseNode::Make(p < C(pieces), copy);
      seq.push_back(ir::ForNode::Make(f, C(0), C(CeilDiv(pieces, 32)), ForKind::kUnrolled, copy));
    }
    return ir::SeqNode::Make(seq);
  }

  // The accumulators stored: through the epilogue to the output, or (split_k) as they are to
  // the range's slice of the workspace. A thread's two neighbouring columns (el) form one vector
  // store where no column guard is needed.
  absl::StatusOr<Stmt> Epilogue(const std::string& acc) {
    if (!warp_staging.empty()) return WarpStagedEpilogue(acc);
    // (Warp-specialized: the producer warpgroup takes no part in the block-wide barriers.)
    const std::string staging = ws ? "" : StagingBuffer(k.out_dtype);
    if (!staging.empty()) return StagedEpilogue(acc, staging);
    const std::string base = acc + ".st";
    const Expr i = ir::MakeVar(k.fresh(base + ".i"));
    const Expr j = ir::MakeVar(k.fresh(base + ".j"));
    const Expr eh = ir::MakeVar(k.fresh(base + ".eh"));
    const Expr el = ir::MakeVar(k.fresh(base + ".el"));
    const Expr r = tile_m * C(bm) + FragmentRow(i, eh);
    const Expr c = tile_n * C(bn) + FragmentCol(j, el);
    const Expr value = ir::LoadNode::Make(ir::ScalarType::kFloat32, acc, {i, j, eh * C(2) + el});
    Stmt st;
    if (split > 1) {
      st = ir::StoreNode::Make(workspace, {split_idx, batch.defined() ? batch : C(0), r, c}, value);
    } else {
      const std::vector<Expr> axes = AxisValues(r, c, batch);
      ASSIGN_OR_RETURN(Expr out, k.epilogue(value, axes));
      st = ir::StoreNode::Make(k.out_buffer, axes, out);
    }
    const bool col_guard = mm.n % bn != 0;
    if (col_guard) st = ir::IfThenElseNode::Make(c < C(mm.n), st);
    st = ir::ForNode::Make(el, C(0), C(2), col_guard ? ForKind::kUnrolled : ForKind::kVectorized,
                           st);
    if (mm.m % bm != 0) st = ir::IfThenElseNode::Make(r < C(mm.m), st);
    st = ir::ForNode::Make(eh, C(0), C(2), ForKind::kUnrolled, st);
    st = ir::ForNode::Make(j, C(0), C(FragN()), ForKind::kUnrolled, st);
    return ir::ForNode::Make(i, C(0), C(FragM()), ForKind::kUnrolled, st);
  }

  // split_k's second kernel: each thread adds one output element's ranges in order, applies the
  // epilogue and stores.
  absl::StatusOr<Stmt> ReduceKernel() {
    constexpr int64_t kThreads = 256;
    const int64_t batches = std::max<int64_t>(mm.batch, 1);
    const int64_t total = batches * mm.m * mm.n;
    const Expr blk = ir::MakeVar(k.fresh(op.name + ".red.block"));
    const Expr t = ir::MakeVar(k.fresh(op.name + ".red.thread"));
    const Expr idx = blk * C(kThreads) + t;
    const Expr b = idx / C(mm.m * mm.n);
    const Expr r = (idx / C(mm.n)) % C(mm.m);
    const Expr c = idx % C(mm.n);
    Expr sum = ir::LoadNode::Make(ir::ScalarType::kFloat32, workspace, {C(0), b, r, c});
    for (int64_t s = 1; s < split; ++s) {
      sum = sum + ir::LoadNode::Make(ir::ScalarType::kFloat32, workspace, {C(s), b, r, c});
    }
    const std::vector<Expr> axes = AxisValues(r, c, mm.batch_axes.empty() ? Expr() : b);
    ASSIGN_OR_RETURN(Expr out, k.epilogue(sum, axes));
    Stmt st = ir::StoreNode::Make(k.out_buffer, axes, out);
    if (total % kThreads != 0) st = ir::IfThenElseNode::Make(idx < C(total), st);
    st = ir::ForNode::Make(t, C(0), C(kThreads), ForKind::kThreadIdxX, st);
    return ir::ForNode::Make(blk, C(0), C(CeilDiv(total, kThreads)), ForKind::kBlockIdxX, st);
  }

  // Stream-k: a part of a tile, its accumulators as they are into the block's workspace slot
  // `slot` ([block][slot][row][column] of the block tile; the whole tile, edges included).
  Stmt PartStore(const std::string& acc, const Expr& slot) {
    return OverFragments(acc + ".part", [&](const std::vector<Expr>& idx) {
      const Expr& e = idx[2];
      return ir::StoreNode::Make(
          sk_workspace, {block, slot, FragmentRow(idx[0], e / C(2)), FragmentCol(idx[1], e % C(2))},
          ir::LoadNode::Make(ir::ScalarType::kFloat32, acc, idx));
    });
  }

  // Stream-k's second kernel: for each block b > 0 whose range starts inside a tile, that tile's
  // two parts (block b - 1's last unit, its k tiles from 0, then block b's first) added in k
  // order, the epilogue applied and the tile's output stored; one thread per element.
  absl::StatusOr<Stmt> StreamKFixupKernel() {
    constexpr int64_t kThreads = 256;
    const int64_t per_tile = CeilDiv(bm * bn, kThreads);
    const Expr blk = ir::MakeVar(k.fresh(op.name + ".fix.block"));
    const Expr t = ir::MakeVar(k.fresh(op.name + ".fix.thread"));
    const Expr b = blk / C(per_tile) + C(1);
    const Expr e = (blk % C(per_tile)) * C(kThreads) + t;
    const Expr lr = e / C(bn);
    const Expr lc = e % C(bn);
    const Expr start = b * C(sk_iters) / C(grid);
    const auto [r, c, axes] = AtTile(C(sk_whole) + start / C(k_tiles), [&] {
      const Expr row = tile_m * C(bm) + lr;
      const Expr col = tile_n * C(bn) + lc;
      return std::tuple{row, col, AxisValues(row, col, batch)};
    });
    const Expr sum =
        ir::LoadNode::Make(ir::ScalarType::kFloat32, sk_workspace, {b - C(1), C(1), lr, lc}) +
        ir::LoadNode::Make(ir::ScalarType::kFloat32, sk_workspace, {b, C(0), lr, lc});
    ASSIGN_OR_RETURN(Expr out, k.epilogue(sum, axes));
    Stmt st = ir::StoreNode::Make(k.out_buffer, axes, out);
    Expr inside = start % C(k_tiles) != C(0);
    if (mm.m % bm != 0) inside = inside && r < C(mm.m);
    if (mm.n % bn != 0) inside = inside && c < C(mm.n);
    if ((bm * bn) % kThreads != 0) inside = inside && e < C(bm * bn);
    st = ir::IfThenElseNode::Make(inside, st);
    st = ir::ForNode::Make(t, C(0), C(kThreads), ForKind::kThreadIdxX, st);
    return ir::ForNode::Make(blk, C(0), C((grid - 1) * per_tile), ForKind::kBlockIdxX, st);
  }

  Stmt InitAcc(const std::string& acc) {
    return OverFragments(acc + ".init", [&](const std::vector<Expr>& idx) {
      return ir::StoreNode::Make(acc, idx, ir::FloatConst(0.0));
    });
  }
};

// The factor's load, under a Cast and a Select(cond, ·, 0); nullptr for another form.
const ir::LoadNode* FactorLoad(Expr e) {
  if (const auto* c = e.as<ir::CastNode>()) e = c->value;
  if (const ir::LoadNode* load = ir::AsyncCopySource(e)) return load;
  const auto* sel = e.as<ir::SelectNode>();
  const auto* zero = sel ? sel->false_value.as<ir::FloatImmNode>() : nullptr;
  if (zero == nullptr || zero->value != 0) return nullptr;
  const auto* c = sel->true_value.as<ir::CastNode>();
  return c ? c->value.as<ir::LoadNode>() : nullptr;
}

// The dimension of `load` that is contiguous in memory: the last one of extent > 1 (a 1×1
// convolution's weights [K, C, 1, 1], read at [k, c, 0, 0], are contiguous along c).
size_t ContiguousDim(const TensorCoreKernel& k, const ir::LoadNode& load) {
  size_t d = load.indices.size() - 1;
  if (!k.buffer_shape) return d;
  const std::optional<std::vector<int64_t>> shape = k.buffer_shape(load.buffer);
  if (!shape || shape->size() != load.indices.size()) return d;
  while (d > 0 && (*shape)[d] == 1) --d;
  return d;
}

// The load of a plain operand factor (optionally cast) whose indices are bare axis variables,
// or the constant 0 in dimensions of extent 1; nullptr otherwise.
const ir::LoadNode* PlainTileLoad(const TensorCoreKernel& k, const ir::Expr& factor) {
  ir::Expr e = factor;
  if (const auto* c = e.as<ir::CastNode>()) e = c->value;
  const auto* load = e.as<ir::LoadNode>();
  if (load == nullptr || load->indices.empty()) return nullptr;
  std::optional<std::vector<int64_t>> shape;
  if (k.buffer_shape) shape = k.buffer_shape(load->buffer);
  for (size_t d = 0; d < load->indices.size(); ++d) {
    const ir::Expr& i = load->indices[d];
    if (i.as<ir::VarNode>() != nullptr) continue;
    const std::optional<int64_t> v = ir::AsConstInt(i);
    const bool unit = shape && shape->size() == load->indices.size() && (*shape)[d] == 1;
    if (!v || *v != 0 || !unit) return nullptr;
  }
  return load;
}

// Whether operand `o` can be filled by vector cp.async (16, else 8 or 4 bytes of at least two
// elements): a plain load of whole tiles (no guard applies to it) whose contiguous index is the
// tile's inner direction, with rows of whole vectors. Where that direction spans several axes,
// the copies are chunked (Operand::chunked) inside its innermost axis.
bool PlainAsync(const Builder& bd, Operand* o) {
  if (o->total_rows % o->rows != 0 || bd.k_guard) return false;
  const ir::LoadNode* load = PlainTileLoad(bd.k, o->factor);
  if (load == nullptr || load->type != o->dtype) return false;
  const auto* last = load->indices[ContiguousDim(bd.k, *load)].as<ir::VarNode>();
  const ir::IterVar& inner_axis = o->k_inner ? *bd.k_axes.back() : bd.op.axes[o->row_axes.back()];
  if (last == nullptr || last->name != inner_axis.name) return false;
  const bool several = o->k_inner ? bd.k_axes.size() > 1 : o->row_axes.size() > 1;
  const int64_t eb = ir::BytesOf(o->dtype);
  for (int64_t bytes : {16, 8, 4}) {
    const int64_t vec = bytes / eb;
    if (vec < 2 || inner_axis.extent % vec != 0 || bd.InnerExtent(*o) % vec != 0) continue;
    o->copy = load;
    o->vec = vec;
    o->chunked = several;
    return true;
  }
  return false;
}

// Simplifies the indices of every load (after reduce axes were replaced by 0).
class SimplifyLoadIndices : public ir::ExprMutator {
 protected:
  Expr MutateLoad(const ir::LoadNode* op, const Expr& /*e*/) override {
    std::vector<Expr> idx;
    for (const Expr& i : op->indices) idx.push_back(ir::Simplify(i));
    return ir::LoadNode::Make(op->type, op->buffer, idx);
  }
};

// Whether `e` reads variable `name`: replacing it changes the expression.
bool Reads(const Expr& e, const std::string& name) {
  return !ir::StructurallyEqual(ir::Substitute(e, {{name, ir::IntConst(0)}}), e);
}

// Without repack, reduce axes of extent 1 (a 1×1 convolution's window) are read as 0 and leave
// the GEMM's k axes, so that X[n, c, h + ry, w + rx] reads as the plain X[n, c, h, w] and each
// factor's layout follows its contiguous dimension (ContiguousDim): the 1×1 convolution's input
// is then a tile contiguous along the pixels (MN-major), filled by vector copies.
void DropUnitReduceAxes(const TensorCoreKernel& k, MatmulLike* mm,
                        std::vector<const ir::IterVar*>* k_axes) {
  std::vector<std::pair<std::string, Expr>> zero;
  std::vector<const ir::IterVar*> kept;
  for (const ir::IterVar* ax : *k_axes) {
    if (ax->extent == 1) {
      zero.emplace_back(ax->name, ir::IntConst(0));
    } else {
      kept.push_back(ax);
    }
  }
  if (zero.empty() || kept.empty()) return;
  *k_axes = kept;
  SimplifyLoadIndices simplify;
  for (auto [factor, k_inner] : {std::pair{&mm->a, &mm->a_k_inner}, {&mm->b, &mm->b_k_inner}}) {
    *factor = simplify.Mutate(ir::Substitute(*factor, zero));
    const ir::LoadNode* load = FactorLoad(*factor);
    if (load != nullptr && !load->indices.empty()) {
      *k_inner = Reads(load->indices[ContiguousDim(k, *load)], kept.back()->name);
    }
  }
}

// Whether operand `o` can be gathered by zero-filling 4-byte cp.async (Operand::gather): 4-byte
// elements loaded as they are, directly or under a padding Select(cond, Load, 0).
bool GatherAsync(Operand* o) {
  if (ir::BytesOf(o->dtype) != 4) return false;
  const ir::LoadNode* load = ir::AsyncCopySource(o->factor);
  if (load == nullptr || load->type != o->dtype) return false;
  o->gather = true;
  return true;
}

// Whether repacked operand `o` (a plain load of a workspace whose innermost index is the inner k
// axis) can be filled by 16-byte copies of consecutive k values (Operand::chunked).
bool ChunkAsync(const Builder& bd, Operand* o, bool repacked) {
  const int64_t vec = 16 / ir::BytesOf(o->dtype);
  if (!repacked || !o->k_inner || bd.k_axes.back()->extent % vec != 0 || bd.bk % vec != 0) {
    return false;
  }
  const ir::LoadNode* load = o->factor.as<ir::LoadNode>();
  if (load == nullptr || load->type != o->dtype) return false;
  o->chunked = true;
  o->vec = vec;
  return true;
}

// Chooses cp.async fills when both operands can have one: 16-byte copies of whole tiles where an
// operand allows them, 16-byte copies along k of a repacked operand, else (4-byte elements)
// zero-filling gathers.
bool PlanAsync(Builder& bd, bool repacked) {
  for (Operand* o : {&bd.a, &bd.b}) {
    if (!PlainAsync(bd, o) && !ChunkAsync(bd, o, repacked) && !GatherAsync(o)) {
      bd.a.copy = bd.b.copy = nullptr;
      bd.a.gather = bd.b.gather = false;
      bd.a.chunked = bd.b.chunked = false;
      bd.a.vec = bd.b.vec = 1;
      return false;
    }
  }
  return true;
}

// The block tile (row, column) of block `bx`: groups of `raster` tile rows, column-major inside
// a group (L2 reuse of B).
std::pair<Expr, Expr> BlockOrder(const Expr& bx, int64_t raster, int64_t tiles_m, int64_t tiles_n) {
  const int64_t group = std::min(raster, tiles_m);
  if (group <= 1) return {bx / C(tiles_n), bx % C(tiles_n)};
  const Expr first = (bx / C(group * tiles_n)) * C(group);
  const Expr rows = ir::Min(C(tiles_m) - first, C(group));
  const Expr in_group = bx % C(group * tiles_n);
  return {first + in_group % rows, in_group / rows};
}

// The repack of `mm`'s operands (TensorCoreStep::repack): the workspaces and their kernels (in
// `out`, launched first), and mm's factors replaced by reads of the workspaces, both k-contiguous.
// With `small` (Builder::presplit), each kernel also stores the small TF32 parts into a second
// workspace, and `small` gets the factors that read them (a's, then b's).
absl::StatusOr<OperandRepack> RepackOperands(const TensorCoreKernel& k, MatmulLike* mm,
                                             TensorCoreKernels* out,
                                             std::array<Expr, 2>* small = nullptr) {
  const ir::TensorNode& op = *k.op;
  absl::StatusOr<OperandRepack> plan = PlanOperandRepack(op, *mm, k.buffer_shape);
  if (!plan.ok()) return Invalid(op.name, std::string(plan.status().message()));
  int role = 0;
  for (auto [r, factor, k_inner] : {std::tuple{&plan->a, &mm->a, &mm->a_k_inner},
                                    std::tuple{&plan->b, &mm->b, &mm->b_k_inner}}) {
    const std::string ws = k.fresh(op.name + "." + r->source + ".repacked");
    out->workspaces.push_back({ws, r->dtype, r->shape, ir::MemoryScope::kGlobal});
    if (small != nullptr) {
      const std::string ws_small = k.fresh(op.name + "." + r->source + ".repacked.small");
      out->workspaces.push_back({ws_small, r->dtype, r->shape, ir::MemoryScope::kGlobal});
      out->kernels.push_back(RepackKernel(*r, ws, k.fresh, RepackValues::kTf32Split, ws_small));
      (*small)[role] = RepackedFactor(*r, ws_small);
    } else {
      // One-pass TF32 reads the workspaces as they are (wgmma): they hold TF32-rounded values, so
      // the tensor cores never see the 13 low bits (whose handling is theirs: truncation
      // measured 2.6x the rounded kernels' largest error on the H200, bench/NOTES.md).
      const bool rounded = k.config.kind == ir::MmaKindName(ir::MmaKind::kTF32);
      out->kernels.push_back(RepackKernel(
          *r, ws, k.fresh, rounded ? RepackValues::kTf32Rounded : RepackValues::kAsIs));
    }
    *factor = RepackedFactor(*r, ws);
    *k_inner = true;
    ++role;
  }
  return plan;
}

// The TMA fill of operand `o` (TensorCoreStep::tma), or why it has none: a plain load of a
// parameter of the operand's type whose indices are the tile's one row axis, its one k axis,
// batch axes and zeros in unit dimensions, contiguous along the swizzled tile's inner direction
// (k for a K-major tile, the rows for an MN-major one), in a layout whose 8-row (K-major) or 8-k
// (MN-major) groups are 8 × swizzle bytes apart, so that row-major boxes land in it as they are.
absl::StatusOr<TmaFill> PlanTmaFill(const Builder& bd, const Operand& o, const char* role) {
  const std::string what = absl::StrCat("tma: operand ", role, " ");
  const ir::WgmmaLayout& l = o.layout;
  if (!bd.Swizzled(o) || o.row_axes.size() != 1 || bd.k_axes.size() != 1) {
    return Invalid(bd.op.name, what + "is not a swizzled tile of one row axis and one k axis");
  }
  const ir::LoadNode* load = PlainTileLoad(bd.k, o.factor);
  if (load == nullptr || load->type != o.dtype || !bd.k.is_param || !bd.k.is_param(load->buffer) ||
      !bd.k.buffer_shape) {
    return Invalid(bd.op.name, what + "is not a plain load of a parameter");
  }
  const std::optional<std::vector<int64_t>> shape = bd.k.buffer_shape(load->buffer);
  if (!shape || shape->size() != load->indices.size() || shape->size() > 5) {
    return Invalid(bd.op.name, what + "has no known shape of rank 1..5");
  }
  TmaFill f;
  f.spec.source = load->buffer;
  f.spec.dims = *shape;
  f.spec.box.assign(shape->size(), 1);
  f.spec.swizzle = l.swizzle;
  const std::string& row_axis = bd.op.axes[o.row_axes[0]].name;
  const std::string& k_axis = bd.k_axes[0]->name;
  bool row = false, k = false;
  for (size_t d = 0; d < load->indices.size(); ++d) {
    const auto* v = load->indices[d].as<ir::VarNode>();
    if (v == nullptr) continue;  // 0 in a unit dimension (PlainTileLoad)
    bool batch = false;
    for (int b : bd.mm.batch_axes) batch = batch || bd.op.axes[b].name == v->name;
    if (v->name == row_axis && !row) {
      f.row_dim = d;
      row = true;
    } else if (v->name == k_axis && !k) {
      f.k_dim = d;
      k = true;
    } else if (batch) {
      f.batch_dims.emplace_back(d, v->name);
    } else {
      return Invalid(bd.op.name, what + "reads '" + v->name + "', not a row, k or batch axis");
    }
  }
  const size_t inner = l.k_major ? f.k_dim : f.row_dim;
  const size_t outer = l.k_major ? f.row_dim : f.k_dim;
  const int64_t eb = l.element_bytes;
  if (!row || !k || inner != shape->size() - 1 || outer > inner) {
    return Invalid(bd.op.name, what + "is not contiguous along its tile's inner direction");
  }
  if (l.sbo != 8 * l.swizzle || (!l.k_major && l.lbo % (8 * l.swizzle) != 0)) {
    return Invalid(bd.op.name, what + "has a layout boxes do not land in");
  }
  if (l.k_major) {
    // Boxes of up to 256 rows of block_k elements (block_k · E = the swizzle).
    f.spec.box[f.k_dim] = bd.bk;
    const int64_t rows = std::min<int64_t>(o.rows, 256);
    f.spec.box[f.row_dim] = rows;
    for (int64_t r = 0; r < o.rows; r += rows) f.boxes.push_back({(r / 8) * l.sbo, r});
  } else {
    // One box per atom of swizzle / E rows: block_k rows of k, each a 128-byte row of the atom.
    const int64_t atom = l.swizzle / eb;
    f.spec.box[f.row_dim] = atom;
    f.spec.box[f.k_dim] = bd.bk;
    for (int64_t r = 0; r < o.rows; r += atom) f.boxes.push_back({(r / atom) * l.lbo, r});
  }
  if (o.rows % f.spec.box[f.row_dim] != 0 || bd.bk > 256) {
    return Invalid(bd.op.name, what + "has a tile that is not whole boxes");
  }
  f.box_bytes = f.spec.BoxElements() * eb;
  ir::BufferDecl source{load->buffer, o.dtype, *shape};
  if (absl::Status ok = ir::CheckTensorMap(f.spec, source); !ok.ok()) {
    return Invalid(bd.op.name, what + std::string(ok.message()));
  }
  f.map = bd.k.fresh(o.buffer + ".tmap");
  return f;
}

// One thread's part of the block: the accumulators (and the TF32 kinds' tile accumulator)
// allocated around the k loop and the epilogue (a warp-specialized block's roles around both).
absl::StatusOr<Stmt> ThreadBody(Builder& bd, const std::string& acc) {
  Stmt body;
  if (bd.ws) {
    ASSIGN_OR_RETURN(body, bd.WsLoop(acc));
  } else {
    Stmt main_loop = bd.MainLoop(acc);
    ASSIGN_OR_RETURN(Stmt epilogue, bd.Epilogue(acc));
    body = ir::SeqNode::Make({bd.InitAcc(acc), main_loop, epilogue});
  }
  for (const std::string& name : {acc, bd.tile_acc}) {
    if (name.empty()) continue;
    body = ir::AllocateNode::Make(
        {name, ir::ScalarType::kFloat32, {bd.FragM(), bd.FragN(), 4}, ir::MemoryScope::kLocal},
        body);
  }
  return body;
}

// The kernel's shared buffers but the warps' staging, innermost first: the operand rings, the
// mbarrier rings, the TF32 tiles.
std::vector<ir::BufferDecl> SharedDecls(const Builder& bd) {
  std::vector<ir::BufferDecl> out = {bd.Decl(bd.b), bd.Decl(bd.a)};
  if (bd.presplit) {
    out.push_back(bd.Decl(bd.b_small));
    out.push_back(bd.Decl(bd.a_small));
  }
  if (!bd.barriers.empty()) {
    const int64_t slots = bd.empties == bd.barriers ? 2 * bd.stages : bd.stages;
    out.push_back({bd.barriers, ir::ScalarType::kInt64, {slots}, ir::MemoryScope::kShared});
  }
  if (!bd.empties.empty() && bd.empties != bd.barriers) {
    out.push_back({bd.empties, ir::ScalarType::kInt64, {bd.stages}, ir::MemoryScope::kShared});
  }
  if (!bd.turn.empty()) {
    out.push_back({bd.turn, ir::ScalarType::kInt64, {2}, ir::MemoryScope::kShared});
  }
  for (const Operand* o : {&bd.a, &bd.b}) {
    for (const std::string& name : {o->big, o->small}) {
      if (name.empty()) continue;
      out.push_back({name,
                     ir::ScalarType::kFloat32,
                     {bd.Tf32Sets() * bd.TileElems(*o)},
                     ir::MemoryScope::kShared});
    }
  }
  return out;
}

// The consumer warps' staging buffers (Builder::warp_staging).
ir::BufferDecl WarpStagingDecl(const Builder& bd) {
  return {bd.warp_staging,
          bd.k.out_dtype,
          {bd.warps * 2 * 16 * bd.FragM() * bd.stage_cols},
          ir::MemoryScope::kShared};
}

// Shared bytes of `decls` in a wgmma kernel: each on the 1024-byte period the code generator
// places them on (codegen/gpu_compile.cc).
int64_t WgmmaSharedBytes(const std::vector<ir::BufferDecl>& decls) {
  constexpr int64_t kPeriod = 1024;
  int64_t total = 0;
  for (const ir::BufferDecl& d : decls) total += CeilDiv(d.Bytes(), kPeriod) * kPeriod;
  return total;
}

// Warp-specialized wgmma whose block tiles cover the output, stored along an innermost n axis in
// 2-byte elements: the consumer warps stage their output through shared memory
// (Builder::WarpStagedEpilogue) in chunks of the widest of 64, 32 or 16 columns that divides the
// warpgroup tile and fits beside `shared` within the target's shared limit without taking a
// block off a multiprocessor (persistent blocks and blocks under register reallocation run one
// per multiprocessor anyway). Nothing fits: the fragment-layout stores, as before. 4-byte
// outputs keep them: a quad's fragment store is 4 × 8 bytes, a whole 32-byte sector already (and
// 8 columns of 2 bytes are one 16-byte piece either way).
void PlanWarpStaging(const Target& target, const std::vector<ir::BufferDecl>& shared, Builder* bd) {
  if (!bd->ws || !bd->wgmma || bd->split > 1 || bd->mm.m % bd->bm != 0 || bd->mm.n % bd->bn != 0 ||
      ir::BytesOf(bd->k.out_dtype) != 2) {
    return;
  }
  if (bd->mm.n_axes.size() != 1 || bd->mm.n_axes[0] + 1 != static_cast<int>(bd->op.axes.size())) {
    return;
  }
  // (The limit the lowering checks: gpu_validity.cc.)
  const int64_t limit =
      std::max(target.max_shared_memory_per_block, target.max_shared_memory_optin);
  // A multiprocessor's shared memory: the block limit plus the 1 KB the system reserves per block
  // (Hopper: 227 + 1 of 228 KB).
  constexpr int64_t kReserved = 1024;
  const int64_t per_sm = limit + kReserved;
  const int64_t blocks = per_sm / (WgmmaSharedBytes(shared) + kReserved);
  // Persistent blocks and blocks under register reallocation hold a multiprocessor alone.
  const bool alone = bd->persistent || WsRegisterSplit(bd->k.config).has_value();
  bd->warp_staging = bd->k.fresh(bd->op.name + ".out.staged");
  bd->warp_staging_bars = bd->k.fresh(bd->op.name + ".out.staged.bar");
  for (const int64_t cols : {64, 32, 16}) {
    if (bd->wn % cols != 0) continue;
    bd->stage_cols = cols;
    std::vector<ir::BufferDecl> all = shared;
    all.push_back(WarpStagingDecl(*bd));
    all.push_back(
        {bd->warp_staging_bars, ir::ScalarType::kInt64, {bd->warps}, ir::MemoryScope::kShared});
    const int64_t bytes = WgmmaSharedBytes(all);
    if (bytes <= limit && (alone || per_sm / (bytes + kReserved) >= blocks)) return;
  }
  bd->warp_staging.clear();
  bd->warp_staging_bars.clear();
  bd->stage_cols = 0;
}

// Both operands' TMA fills (TensorCoreStep::tma): their tensor maps join the workspaces (kernel
// arguments), and the barrier rings get their names.
absl::Status PlanTmaFills(const TensorCoreKernel& k, Builder* bd, TensorCoreKernels* out) {
  for (auto [o, role] : {std::pair{&bd->a, "A"}, {&bd->b, "B"}}) {
    ASSIGN_OR_RETURN(TmaFill f, PlanTmaFill(*bd, *o, role));
    ir::BufferDecl map{f.map, ir::ScalarType::kInt64, {ir::kTensorMapWords}};
    map.tensor_map = f.spec;
    out->workspaces.push_back(std::move(map));
    o->tma = std::move(f);
  }
  bd->barriers = k.fresh(k.op->name + ".full");
  // (multicast: a slot is refilled once both blocks of the cluster have released it)
  if (k.config.warp_specialized || k.config.multicast) {
    bd->empties = k.fresh(k.op->name + ".empty");
  } else {
    bd->empties = bd->barriers;
    bd->empty_base = bd->stages;
  }
  if (k.config.warp_specialized && k.config.pingpong) bd->turn = k.fresh(k.op->name + ".turn");
  return absl::OkStatus();
}

// The wgmma operand layouts (swizzled tiles; A through registers for one-pass TF32 on the split
// path, Builder::a_regs) and the TF32 tiles of the split path.
absl::Status PlanWgmmaOperands(const TensorCoreKernel& k, const MatmulLike& mm, Builder* bd) {
  absl::StatusOr<WgmmaLayouts> layouts = PlanWgmmaLayouts(k.config, mm);
  if (!layouts.ok()) return Invalid(k.op->name, std::string(layouts.status().message()));
  bd->a.layout = layouts->a;
  bd->b.layout = layouts->b;
  // One-pass TF32 without repack: A through registers. A K-major B is then read through its
  // descriptor as the ring holds it (the tensor cores drop its low 13 bits, as in cuBLAS's and
  // CUTLASS's TF32 kernels on float32 data), with no copy: no split path at all. An MN-major B
  // still needs its copy into K-major TF32 tiles.
  bd->a_regs = bd->kind == ir::MmaKind::kTF32 && !k.config.repack;
  if (bd->a_regs && mm.b_k_inner) {
    bd->split_tf32 = false;
    bd->b.layout.truncated = true;
  }
  if (bd->a_regs) {
    bd->a.pad = bd->a.k_inner ? 4 : 8;
    bd->a.layout = bd->RegisterLayout();
  }
  if (!bd->split_tf32) return absl::OkStatus();
  for (Operand* o : {&bd->a, &bd->b}) {
    if (o == &bd->a && bd->a_regs) continue;
    o->big = k.fresh(o->buffer + ".tf32");
    if (bd->kind == ir::MmaKind::kTF32x3) o->small = k.fresh(o->buffer + ".tf32.small");
  }
  return absl::OkStatus();
}

// The vector width of operands without an asynchronous fill: 16 bytes where the tile's inner
// extent takes them and the operand is no gather, else one element.
void PlanSyncVectors(Builder* bd) {
  for (Operand* o : {&bd->a, &bd->b}) {
    const int64_t vec = 16 / ir::BytesOf(o->dtype);
    if (o->chunked || o->copy != nullptr) continue;
    o->vec = !o->gather && bd->InnerExtent(*o) % vec == 0 ? vec : 1;
  }
}

// TensorCoreStep::stream_k on a persistent grid (Builder::OverWork): where the tiles are more than
// the grid and not a multiple of it, all but the last grid + tiles mod grid tiles are walked
// whole and the rest's k tiles split into one range per block. Those tiles number more than the
// grid (and fewer than twice it), so every range is at least one tile's k tiles long: a tile
// meets at most two ranges, a range at most three tiles. Elsewhere every block already ends
// with the same tile count, and the option changes nothing. Errors: with ping-pong consumers or
// multicast clusters (the step refuses both; a decoded nest may not have been through it).
absl::Status PlanStreamK(const TensorCoreKernel& k, Builder* bd) {
  const TensorCoreStep& c = k.config;
  if (!c.stream_k) return absl::OkStatus();
  if (c.pingpong || bd->cluster > 1) {
    return Invalid(k.op->name,
                   "stream-k splits the tiles of one consumer per block, in single "
                   "blocks: not with pingpong or multicast");
  }
  // Where nothing would be split (every range starting at a tile's first k tile, say): the
  // plain walk, without a workspace or a fixup kernel that would do nothing.
  const std::optional<StreamKSplit> split = PlanStreamKSplit(bd->tiles, bd->grid, bd->k_tiles);
  if (!split.has_value()) return absl::OkStatus();
  bd->stream_k = true;
  bd->sk_whole = split->whole;
  bd->sk_iters = split->iters;
  return absl::OkStatus();
}

// The block grid along the tiles (blockIdx.x = `bx`): one block per tile, or with
// TensorCoreStep::persistent at most one per multiprocessor of `target`, each walking tiles bx,
// bx + grid, ... (Builder::OverTiles; a batch's tiles join the walk). Errors: persistent without
// ws or with split_k; pingpong without persistent blocks or with several warpgroups per tile.
absl::Status PlanGrid(const TensorCoreKernel& k, const MatmulLike& mm, const Target& target,
                      const Expr& bx, int64_t tiles_m, int64_t tiles_n, Builder* bd) {
  const TensorCoreStep& c = k.config;
  bd->tiles = tiles_m * tiles_n;
  bd->grid = bd->tiles;
  if (c.pingpong && (!c.persistent || c.warp_m != c.block_m || c.warp_n != c.block_n)) {
    return Invalid(k.op->name,
                   "ping-pong consumers need persistent blocks and warp tile = block tile");
  }
  if (!c.persistent) return absl::OkStatus();
  if (!c.warp_specialized || c.split_k > 1) {
    return Invalid(k.op->name, "persistent blocks need a producer warpgroup (ws) and no split_k");
  }
  bd->persistent = true;
  bd->block = bx;
  // A batch's tiles join the walk: tiles_m · tiles_n · batch of them over one grid.
  bd->batches = std::max<int64_t>(mm.batch, 1);
  bd->tiles *= bd->batches;
  bd->grid = std::min<int64_t>(bd->tiles, std::max(1, target.sm_count));
  // Clusters of two (multicast) walk paired tiles: blocks 2p and 2p + 1 take tiles 2q and
  // 2q + 1 on every step of an even grid (the tiles are even in number: PlanMulticast).
  if (bd->cluster > 1) bd->grid = std::max<int64_t>(2, bd->grid - bd->grid % 2);
  return PlanStreamK(k, bd);
}

// Clusters of two blocks along m (TensorCoreStep::multicast): blocks 2p and 2p + 1 take tile
// rows 2r and 2r + 1 of one tile column (Builder::TileAt), so that both read B's tiles of that
// column (TmaBoxes splits them between the two). Errors: an odd number of tile rows. (Both
// operands have TMA fills: PlanTmaFills refuses the step otherwise, and multicast needs tma.)
absl::Status PlanMulticast(const TensorCoreKernel& k, int64_t tiles_m, Builder* bd) {
  if (tiles_m % 2 != 0) {
    return Invalid(
        k.op->name,
        absl::StrCat("multicast pairs the block tiles along m: ", tiles_m,
                     tiles_m == 1 ? " tile row of " : " tile rows of ", k.config.block_m,
                     tiles_m == 1 ? " is not an even number" : " are not an even number"));
  }
  bd->cluster = 2;
  return absl::OkStatus();
}

// The small-part operands of a presplit tf32x3 kernel (Builder::presplit): a and b's twins that
// read the second workspaces (`small`: a's factor, then b's) into rings of their own, in the same
// layouts and filled the same way as a and b (the factors differ only in the buffer they load).
absl::Status PlanSmallParts(Builder& bd, const std::array<Expr, 2>& small) {
  bd.presplit = true;
  for (auto [o, twin, factor, role] : {std::tuple{&bd.a, &bd.a_small, &small[0], "A"},
                                       std::tuple{&bd.b, &bd.b_small, &small[1], "B"}}) {
    *twin = *o;
    twin->buffer = bd.k.fresh(bd.op.name + "." + role + ".small.shared");
    twin->factor = *factor;
    if (o->copy != nullptr) {
      twin->copy = PlainTileLoad(bd.k, *factor);
      if (twin->copy == nullptr) {
        return Invalid(bd.op.name, absl::StrCat("operand ", role,
                                                "'s small part is not a plain "
                                                "load of its workspace"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool TargetHasMmaSync(const Target& target) {
  if (!target.is_gpu()) return false;
  const std::string& a = target.arch;
  if (a.rfind("sm_", 0) != 0) return false;
  int sm = 0;
  for (size_t i = 3; i < a.size() && std::isdigit(static_cast<unsigned char>(a[i])); ++i) {
    sm = sm * 10 + (a[i] - '0');
    if (sm > 100000) break;
  }
  return sm >= 80;
}

absl::StatusOr<TensorCoreKernels> BuildTensorCoreKernel(const TensorCoreKernel& k,
                                                        const Target& target) {
  const ir::TensorNode& op = *k.op;
  const TensorCoreStep& c = k.config;
  if (!target.is_gpu()) return Invalid(op.name, "tensor cores need a cuda target");
  if (!TargetHasMmaSync(target)) {
    return Invalid(op.name, absl::StrCat("mma.sync m16n8k16 and tf32 need sm_80 or later; the "
                                         "target is ",
                                         target.arch));
  }
  absl::StatusOr<MatmulLike> mm = AnalyzeMatmulLike(op, k.body);
  if (!mm.ok()) return Invalid(op.name, std::string(mm.status().message()));
  const std::optional<ir::MmaKind> kind = ir::ParseMmaKind(c.kind);
  if (!kind) return Invalid(op.name, absl::StrCat("unknown mma kind '", c.kind, "'"));
  const ir::ScalarType dtype = ir::MmaOperandType(*kind);
  if (mm->a_type != dtype || mm->b_type != dtype) {
    return Invalid(op.name, absl::StrCat("operands are ", ir::TypeName(mm->a_type), " and ",
                                         ir::TypeName(mm->b_type), "; kind ", c.kind, " reads ",
                                         ir::TypeName(dtype)));
  }
  TensorCoreKernels out;
  std::optional<OperandRepack> repack;
  // tf32x3 on wgmma with repack: both TF32 parts stored by the repack kernels (Builder::presplit).
  const bool presplit = c.repack && c.warpgroup && *kind == ir::MmaKind::kTF32x3;
  std::array<Expr, 2> small_factors;
  if (c.repack) {
    ASSIGN_OR_RETURN(repack, RepackOperands(k, &*mm, &out, presplit ? &small_factors : nullptr));
  }
  Builder bd(k, op, *mm);
  bd.kind = *kind;
  bd.k_axes = ReduceAxes(op);
  if (!repack) DropUnitReduceAxes(k, &*mm, &bd.k_axes);
  if (repack) {
    bd.k_axes.erase(bd.k_axes.begin() + repack->inner_k);
    bd.k_axes.push_back(&op.reduce_axes[repack->inner_k]);
  }
  bd.bm = c.block_m;
  bd.bn = c.block_n;
  bd.bk = c.block_k;
  bd.wm = c.warp_m;
  bd.wn = c.warp_n;
  bd.stages = c.pipeline;
  bd.warps_n = c.block_n / c.warp_n;
  bd.warps = (c.block_m / c.warp_m) * bd.warps_n;
  bd.threads = 32 * bd.warps;
  bd.wgmma = c.warpgroup;
  if (bd.wgmma) {
    if (!TargetHasWgmma(target)) {
      return Invalid(op.name, absl::StrCat("wgmma needs sm_90 (compiled for sm_90a); the target "
                                           "is ",
                                           target.arch));
    }
    bd.groups_n = bd.warps_n;
    bd.split_tf32 = WgmmaSplitsTf32(c);
    bd.pingpong = c.pingpong;
    bd.warps = 4 * (c.block_m / c.warp_m) * bd.groups_n * (bd.pingpong ? 2 : 1);
    bd.threads = 32 * bd.warps;
  }
  bd.k_tiles = CeilDiv(mm->k, c.block_k);
  bd.split = std::min<int64_t>(c.split_k, bd.k_tiles);
  bd.split_tiles = CeilDiv(bd.k_tiles, bd.split);
  bd.k_guard = mm->k % c.block_k != 0 || bd.split_tiles * bd.split != bd.k_tiles;
  const int64_t tiles_m = CeilDiv(mm->m, c.block_m);
  const int64_t tiles_n = CeilDiv(mm->n, c.block_n);
  if (mm->batch > 65535) {
    return Invalid(op.name, absl::StrCat("batch ", mm->batch, " exceeds blockIdx.y's 65535"));
  }
  bd.a = MakeOperand(k.fresh(op.name + ".A.shared"), mm->a, mm->m_axes, c.block_m, mm->m,
                     mm->a_k_inner, dtype);
  bd.b = MakeOperand(k.fresh(op.name + ".B.shared"), mm->b, mm->n_axes, c.block_n, mm->n,
                     mm->b_k_inner, dtype);
  bd.a.pad = bd.b.pad = c.pad;
  if (bd.wgmma) RETURN_IF_ERROR(PlanWgmmaOperands(k, *mm, &bd));
  if (c.tma) RETURN_IF_ERROR(PlanTmaFills(k, &bd, &out));
  bd.async = !c.tma && PlanAsync(bd, repack.has_value());
  PlanSyncVectors(&bd);
  if (presplit) RETURN_IF_ERROR(PlanSmallParts(bd, small_factors));

  const Expr bx = ir::MakeVar(k.fresh(op.name + ".tile"));
  bd.tiles_m = tiles_m;
  bd.tiles_n = tiles_n;
  bd.raster = c.raster;
  if (c.multicast) RETURN_IF_ERROR(PlanMulticast(k, tiles_m, &bd));
  std::tie(bd.tile_m, bd.tile_n) = bd.TileAt(bx);  // (persistent blocks: each tile's, OverTiles)
  RETURN_IF_ERROR(PlanGrid(k, *mm, target, bx, tiles_m, tiles_n, &bd));
  Expr by;
  if (mm->batch > 1 && !bd.persistent) {
    by = ir::MakeVar(k.fresh(op.name + ".batch"));
    bd.batch = by;
  } else if (!mm->batch_axes.empty()) {
    bd.batch = C(0);  // (persistent blocks set each tile's batch: OverTiles)
  }
  bd.lane = ir::MakeVar(k.fresh(op.name + ".lane"));
  const Expr warp_var = ir::MakeVar(k.fresh(op.name + ".warp"));
  bd.ws = c.warp_specialized;
  // Warp-specialized: warps 0..3 are the producer warpgroup; the consumers count from warp 4.
  bd.warp = bd.ws ? warp_var - C(4) : warp_var;
  bd.tid = bd.warp * C(32) + bd.lane;
  bd.first_thread = warp_var * C(32) + bd.lane;

  Expr bz;
  if (bd.split > 1) {
    bz = ir::MakeVar(k.fresh(op.name + ".split"));
    bd.split_idx = bz;
    bd.workspace = k.fresh(op.name + ".partial");
    out.workspaces.push_back({bd.workspace,
                              ir::ScalarType::kFloat32,
                              {bd.split, std::max<int64_t>(mm->batch, 1), mm->m, mm->n},
                              ir::MemoryScope::kGlobal});
  }
  if (bd.stream_k) {
    bd.sk_workspace = k.fresh(op.name + ".parts");
    out.workspaces.push_back({bd.sk_workspace,
                              ir::ScalarType::kFloat32,
                              {bd.grid, 2, bd.bm, bd.bn},
                              ir::MemoryScope::kGlobal});
  }
  const std::string acc = k.fresh(op.name + ".acc");
  // (Not one-pass TF32 on wgmma: accuracy TF32 mode does not ask for, a wait per tile.)
  if (*kind == ir::MmaKind::kTF32x3 || (*kind == ir::MmaKind::kTF32 && !bd.wgmma)) {
    bd.tile_acc = k.fresh(op.name + ".acc.tile");
  }
  const std::vector<ir::BufferDecl> shared = SharedDecls(bd);
  PlanWarpStaging(target, shared, &bd);
  ASSIGN_OR_RETURN(Stmt thread_body, ThreadBody(bd, acc));
  Stmt s = ir::ForNode::Make(warp_var, C(0), C(bd.warps + (bd.ws ? 4 : 0)), ForKind::kThreadIdxY,
                             thread_body);
  s = ir::ForNode::Make(bd.lane, C(0), C(32), ForKind::kThreadIdxX, s);
  if (!bd.warp_staging.empty()) {
    s = ir::AllocateNode::Make(WarpStagingDecl(bd), s);
    s = ir::AllocateNode::Make(
        {bd.warp_staging_bars, ir::ScalarType::kInt64, {bd.warps}, ir::MemoryScope::kShared}, s);
  }
  for (const ir::BufferDecl& decl : shared) s = ir::AllocateNode::Make(decl, s);
  if (bz.defined()) s = ir::ForNode::Make(bz, C(0), C(bd.split), ForKind::kBlockIdxZ, s);
  if (by.defined()) s = ir::ForNode::Make(by, C(0), C(mm->batch), ForKind::kBlockIdxY, s);
  out.kernels.push_back(ir::ForNode::Make(bx, C(0), C(bd.grid), ForKind::kBlockIdxX, s));
  if (bd.split > 1) {
    ASSIGN_OR_RETURN(Stmt reduce, bd.ReduceKernel());
    out.kernels.push_back(reduce);
  }
  if (bd.stream_k) {
    ASSIGN_OR_RETURN(Stmt fixup, bd.StreamKFixupKernel());
    out.kernels.push_back(fixup);
  }
  return out;
}

}  // namespace tilesearch::schedule::lower_internal
