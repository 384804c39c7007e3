#include "tests/codegen/warp_mma_nests.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "tests/codegen/nest_builders.h"

namespace tilesearch::codegen::testing {

using ir::Expr;
using ir::ForKind;
using ir::MemoryScope;
using ir::MmaKind;
using ir::Stmt;

namespace {

constexpr int64_t kBlockM = 64;  // two warps of 32 rows
constexpr int64_t kBlockN = 16;
constexpr int64_t kWarpM = 32;
constexpr int64_t kThreads = 64;
constexpr int64_t kFrags = 2;   // m_frags = n_frags
constexpr int64_t kKSteps = 2;  // k steps per WarpMma

// Copies a d0×d1 tile of global `src` at (o0, o1) into shared `dst`, kThreads elements a step.
Stmt FillTile(const std::string& var, const std::string& dst, const std::string& src,
              ir::ScalarType t, int64_t d0, int64_t d1, const Expr& o0, const Expr& o1) {
  const Expr idx = V(var) * C(kThreads) + V("ty") * C(32) + V("tx");
  return Loop(
      var, d0 * d1 / kThreads,
      St(dst, {idx / C(d1), idx % C(d1)}, Ld(src, {o0 + idx / C(d1), o1 + idx % C(d1)}, t)));
}

// The interpreter's value of an operand element in one product (ir::MmaOperandValue, part 0).
double OperandValue(MmaKind kind, double x) {
  if (kind == MmaKind::kTF32) return ir::MmaOperandValue(kind, static_cast<float>(x));
  return x;
}

}  // namespace

std::string WarpMmaCaseName(const WarpMmaCase& c) {
  std::string name = absl::StrCat(ir::MmaKindName(c.kind), c.a_k_inner ? "_amk" : "_akm",
                                  c.b_k_inner ? "_bnk" : "_bkn");
  if (c.pad != 0) absl::StrAppend(&name, "_pad", c.pad);
  return name;
}

void PrintTo(const WarpMmaCase& c, std::ostream* os) { *os << WarpMmaCaseName(c); }

std::vector<WarpMmaCase> AllWarpMmaCases() {
  std::vector<WarpMmaCase> out;
  for (MmaKind kind : {MmaKind::kF16, MmaKind::kBF16, MmaKind::kTF32, MmaKind::kTF32x3}) {
    for (bool a_k_inner : {true, false}) {
      for (bool b_k_inner : {true, false}) out.push_back({kind, a_k_inner, b_k_inner, 0});
    }
  }
  for (int64_t pad : {2, 8}) {
    for (MmaKind kind : {MmaKind::kF16, MmaKind::kBF16}) {
      out.push_back({kind, true, false, pad});
      out.push_back({kind, false, true, pad});
    }
  }
  return out;
}

WarpMmaDims WarpMmaProblem(MmaKind kind) {
  return WarpMmaDims{2 * kBlockM, 2 * kBlockN, 2 * kKSteps * ir::MmaK(kind)};
}

ir::LoopNest WarpMmaMatmul(const WarpMmaCase& c) {
  const ir::ScalarType t = ir::MmaOperandType(c.kind);
  const WarpMmaDims dims = WarpMmaProblem(c.kind);
  const int64_t bk = kKSteps * ir::MmaK(c.kind);
  const Expr row0 = V("by") * C(kBlockM);
  const Expr col0 = V("bx") * C(kBlockN);
  const Expr k0 = V("ko") * C(bk);
  // Shared tiles in the global layout: A [64][bk] or [bk][64], B [16][bk] or [bk][16].
  const int64_t a0 = c.a_k_inner ? kBlockM : bk, a1 = c.a_k_inner ? bk : kBlockM;
  const int64_t b0 = c.b_k_inner ? kBlockN : bk, b1 = c.b_k_inner ? bk : kBlockN;
  Stmt fill_a =
      FillTile("va", "A_s", "A", t, a0, a1, c.a_k_inner ? row0 : k0, c.a_k_inner ? k0 : row0);
  Stmt fill_b =
      FillTile("vb", "B_s", "B", t, b0, b1, c.b_k_inner ? col0 : k0, c.b_k_inner ? k0 : col0);
  const Expr warp_row = V("ty") * C(kWarpM);
  Stmt mma = ir::WarpMmaNode::Make(
      c.kind, kFrags, kFrags, kKSteps, "acc", "A_s",
      c.a_k_inner ? std::vector<Expr>{warp_row, C(0)} : std::vector<Expr>{C(0), warp_row},
      c.a_k_inner, "B_s", {C(0), C(0)}, c.b_k_inner, V("tx"));
  Stmt k_loop = Loop("ko", dims.k / bk,
                     Seq({fill_a, fill_b, ir::BarrierNode::Make(), mma, ir::BarrierNode::Make()}));
  auto each_element = [](const std::function<Stmt()>& body) {
    return Loop("i", kFrags,
                Loop("j", kFrags, Loop("e", 4, body(), ForKind::kUnrolled), ForKind::kUnrolled),
                ForKind::kUnrolled);
  };
  const std::vector<Expr> acc_idx = {V("i"), V("j"), V("e")};
  Stmt init = each_element([&] { return St("acc", acc_idx, ir::FloatConst(0)); });
  // acc[i, j, e] is element (16 i + g + 8 (e / 2), 8 j + 2 t + e % 2) of the warp tile.
  const Expr row = row0 + warp_row + V("i") * C(16) + V("tx") / C(4) + V("e") / C(2) * C(8);
  const Expr col = col0 + V("j") * C(8) + V("tx") % C(4) * C(2) + V("e") % C(2);
  Stmt store = each_element([&] { return St("C", {row, col}, Ld("acc", acc_idx)); });
  Stmt thread = ir::AllocateNode::Make(
      Decl("acc", {kFrags, kFrags, 4}, ir::ScalarType::kFloat32, MemoryScope::kLocal),
      Seq({init, k_loop, store}));
  Stmt threads = Loop("ty", kBlockM / kWarpM, Loop("tx", 32, thread, ForKind::kThreadIdxX),
                      ForKind::kThreadIdxY);
  Stmt shared = ir::AllocateNode::Make(
      Decl("A_s", {a0, a1 + c.pad}, t, MemoryScope::kShared),
      ir::AllocateNode::Make(Decl("B_s", {b0, b1 + c.pad}, t, MemoryScope::kShared), threads));
  Stmt body = Loop("by", dims.m / kBlockM,
                   Loop("bx", dims.n / kBlockN, shared, ForKind::kBlockIdxX), ForKind::kBlockIdxY);
  std::vector<int64_t> a_shape =
      c.a_k_inner ? std::vector<int64_t>{dims.m, dims.k} : std::vector<int64_t>{dims.k, dims.m};
  std::vector<int64_t> b_shape =
      c.b_k_inner ? std::vector<int64_t>{dims.n, dims.k} : std::vector<int64_t>{dims.k, dims.n};
  return ir::LoopNest{"warp_mma_" + WarpMmaCaseName(c),
                      {Decl("A", a_shape, t), Decl("B", b_shape, t), Decl("C", {dims.m, dims.n})},
                      2,
                      body};
}

ir::BufferMap WarpMmaInputs(const WarpMmaCase& c, uint64_t seed) {
  const ir::LoopNest nest = WarpMmaMatmul(c);
  ir::BufferMap buffers;
  for (const ir::BufferDecl& p : nest.params) {
    buffers[p.name] = ir::HostBuffer::Zeros(p.dtype, p.shape);
  }
  ir::FillRandom(buffers["A"], seed);
  ir::FillRandom(buffers["B"], seed + 1);
  return buffers;
}

std::vector<double> WarpMmaReference(const WarpMmaCase& c, const ir::BufferMap& inputs,
                                     std::vector<double>* magnitude) {
  const WarpMmaDims d = WarpMmaProblem(c.kind);
  const ir::HostBuffer& a = inputs.at("A");
  const ir::HostBuffer& b = inputs.at("B");
  std::vector<double> out(d.m * d.n, 0.0);
  if (magnitude != nullptr) magnitude->assign(d.m * d.n, 0.0);
  for (int64_t r = 0; r < d.m; ++r) {
    for (int64_t col = 0; col < d.n; ++col) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < d.k; ++k) {
        const double x = OperandValue(c.kind, c.a_k_inner ? a.at({r, k}) : a.at({k, r}));
        const double y = OperandValue(c.kind, c.b_k_inner ? b.at({col, k}) : b.at({k, col}));
        sum += x * y;
        mag += std::fabs(x * y);
      }
      out[r * d.n + col] = sum;
      if (magnitude != nullptr) (*magnitude)[r * d.n + col] = mag;
    }
  }
  return out;
}

}  // namespace tilesearch::codegen::testing
