#include "tests/codegen/nest_builders.h"

namespace tilesearch::codegen::testing {

using ir::Expr;
using ir::ForKind;
using ir::MemoryScope;
using ir::Stmt;

ir::LoopNest GpuTiledMatmul(int64_t m, int64_t n, int64_t k) {
  const Expr t = V("ty") * C(8) + V("tx");  // linear thread index, 0..63
  // A tile 32×8 and B tile 8×32: 256 elements each, 4 per thread.
  const Expr a_lin = t * C(4) + V("va");
  const Expr b_lin = t * C(4) + V("vb");
  Stmt fill_a = Loop("va", 4,
                     St("A_s", {a_lin / C(8), a_lin % C(8)},
                        Ld("A", {V("by") * C(32) + a_lin / C(8), V("ko") * C(8) + a_lin % C(8)})),
                     ForKind::kVectorized);
  Stmt fill_b = Loop("vb", 4,
                     St("B_s", {b_lin / C(32), b_lin % C(32)},
                        Ld("B", {V("ko") * C(8) + b_lin / C(32), V("bx") * C(32) + b_lin % C(32)})),
                     ForKind::kVectorized);
  Stmt update = St("acc", {V("i"), V("j")},
                   Ld("acc", {V("i"), V("j")}) + Ld("A_s", {V("ty") * C(4) + V("i"), V("kk")}) *
                                                     Ld("B_s", {V("kk"), V("tx") * C(4) + V("j")}));
  Stmt compute =
      Loop("kk", 8, Loop("i", 4, Loop("j", 4, update, ForKind::kUnrolled), ForKind::kUnrolled));
  Stmt k_loop =
      Loop("ko", k / 8,
           Seq({fill_a, fill_b, ir::BarrierNode::Make(), compute, ir::BarrierNode::Make()}));
  Stmt init =
      Loop("i", 4, Loop("j", 4, St("acc", {V("i"), V("j")}, ir::FloatConst(0)), ForKind::kUnrolled),
           ForKind::kUnrolled);
  Stmt write = Loop("i", 4,
                    Loop("j", 4,
                         St("C",
                            {V("by") * C(32) + V("ty") * C(4) + V("i"),
                             V("bx") * C(32) + V("tx") * C(4) + V("j")},
                            Ld("acc", {V("i"), V("j")})),
                         ForKind::kVectorized),
                    ForKind::kUnrolled);
  Stmt thread_body =
      ir::AllocateNode::Make(Decl("acc", {4, 4}, ir::ScalarType::kFloat32, MemoryScope::kLocal),
                             Seq({init, k_loop, write}));
  Stmt threads =
      Loop("ty", 8, Loop("tx", 8, thread_body, ForKind::kThreadIdxX), ForKind::kThreadIdxY);
  Stmt shared = ir::AllocateNode::Make(
      Decl("A_s", {32, 8}, ir::ScalarType::kFloat32, MemoryScope::kShared),
      ir::AllocateNode::Make(Decl("B_s", {8, 32}, ir::ScalarType::kFloat32, MemoryScope::kShared),
                             threads));
  Stmt body =
      Loop("by", m / 32, Loop("bx", n / 32, shared, ForKind::kBlockIdxX), ForKind::kBlockIdxY);
  return ir::LoopNest{
      "matmul_tiled", {Decl("A", {m, k}), Decl("B", {k, n}), Decl("C", {m, n})}, 2, body};
}

ir::LoopNest GpuSimpleMatmul(int64_t m, int64_t n, int64_t k) {
  const Expr row = V("by") * C(8) + V("ty");
  const Expr col = V("bx") * C(8) + V("tx");
  Stmt update =
      St("C", {row, col}, Ld("C", {row, col}) + Ld("A", {row, V("k")}) * Ld("B", {V("k"), col}));
  Stmt per_thread = Seq({St("C", {row, col}, ir::FloatConst(0)), Loop("k", k, update)});
  Stmt body = Loop(
      "by", m / 8,
      Loop("bx", n / 8,
           Loop("ty", 8, Loop("tx", 8, per_thread, ForKind::kThreadIdxX), ForKind::kThreadIdxY),
           ForKind::kBlockIdxX),
      ForKind::kBlockIdxY);
  return ir::LoopNest{
      "matmul_simple", {Decl("A", {m, k}), Decl("B", {k, n}), Decl("C", {m, n})}, 2, body};
}

namespace {

// Rebinds the outermost loop of a kernel (depth 0) and of its body (depth 1).
Stmt BindKernel(const Stmt& s, int depth) {
  if (const auto* f = s.as<ir::ForNode>()) {
    const ForKind kind = depth == 0 ? ForKind::kBlockIdxX : ForKind::kThreadIdxX;
    const auto extent = ir::AsConstInt(f->extent);
    if (depth == 1 && (!extent || *extent > 1024)) return s;
    Stmt body = depth == 0 ? BindKernel(f->body, 1) : f->body;
    return ir::ForNode::Make(f->var, f->min, f->extent, kind, body);
  }
  if (const auto* seq = s.as<ir::SeqNode>(); seq && depth == 1) {
    // A reduction body (init; loop): bind nothing below the block loop.
    return s;
  }
  return s;
}

Stmt BindAll(const Stmt& s) {
  if (const auto* a = s.as<ir::AllocateNode>(); a && a->buffer.scope == MemoryScope::kGlobal) {
    return ir::AllocateNode::Make(a->buffer, BindAll(a->body));
  }
  if (const auto* seq = s.as<ir::SeqNode>()) {
    std::vector<Stmt> out;
    for (const Stmt& c : seq->stmts) out.push_back(BindAll(c));
    return ir::SeqNode::Make(out);
  }
  return BindKernel(s, 0);
}

}  // namespace

ir::LoopNest BindNaive(const ir::LoopNest& naive) {
  ir::LoopNest out = naive;
  out.body = BindAll(naive.body);
  return out;
}

std::vector<float> NaiveMatmul(const ir::HostBuffer& a, const ir::HostBuffer& b, int64_t m,
                               int64_t n, int64_t k) {
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t r = 0; r < k; ++r) {
        acc = acc + static_cast<float>(a.data[i * k + r]) * static_cast<float>(b.data[r * n + j]);
      }
      c[i * n + j] = acc;
    }
  }
  return c;
}

}  // namespace tilesearch::codegen::testing
