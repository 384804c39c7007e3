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

// Renames every buffer of a nest (params, allocations, loads, stores) with a prefix.
class RenameExprBuffers : public ir::ExprMutator {
 public:
  explicit RenameExprBuffers(std::string prefix) : prefix_(std::move(prefix)) {}

 protected:
  ir::Expr MutateLoad(const ir::LoadNode* op, const ir::Expr&) override {
    std::vector<ir::Expr> indices;
    for (const ir::Expr& i : op->indices) indices.push_back(Mutate(i));
    return ir::LoadNode::Make(op->type, prefix_ + op->buffer, std::move(indices));
  }

 private:
  std::string prefix_;
};

class RenameBuffers : public ir::StmtMutator {
 public:
  explicit RenameBuffers(std::string prefix) : prefix_(prefix), exprs_(std::move(prefix)) {}
  ir::Expr MutateExpr(const ir::Expr& e) override { return exprs_.Mutate(e); }

 protected:
  ir::Stmt MutateStore(const ir::StoreNode* op, const ir::Stmt&) override {
    std::vector<ir::Expr> indices;
    for (const ir::Expr& i : op->indices) indices.push_back(MutateExpr(i));
    return ir::StoreNode::Make(prefix_ + op->buffer, std::move(indices), MutateExpr(op->value));
  }
  ir::Stmt MutateAllocate(const ir::AllocateNode* op, const ir::Stmt&) override {
    ir::BufferDecl decl = op->buffer;
    decl.name = prefix_ + decl.name;
    return ir::AllocateNode::Make(decl, Mutate(op->body));
  }

 private:
  std::string prefix_;
  RenameExprBuffers exprs_;
};

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

ir::OpArgs Args(std::vector<std::vector<int64_t>> shapes, std::map<std::string, std::string> attrs,
                ir::ScalarType dtype) {
  ir::OpArgs a;
  a.shapes = std::move(shapes);
  a.attrs = std::move(attrs);
  a.dtype = dtype;
  return a;
}

std::map<std::string, ir::OpArgs> OpExamples() {
  return {
      {"matmul", Args({{5, 9}, {9, 12}})},
      {"batch_matmul", Args({{2, 3, 5}, {2, 5, 8}})},
      {"dense", Args({{3, 6}, {4, 6}})},
      {"gemv", Args({{7, 9}, {9}})},
      {"conv1d", Args({{1, 2, 9}, {3, 2, 3}}, {{"padding", "1"}})},
      {"conv2d_nchw", Args({{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}})},
      {"conv2d_nhwc", Args({{1, 6, 5, 2}, {3, 3, 2, 3}}, {{"stride", "2"}})},
      {"conv2d_nchw_padded", Args({{1, 2, 6, 5}, {3, 2, 3, 3}}, {{"padding", "1"}})},
      {"depthwise_conv2d_nchw", Args({{1, 2, 6, 5}, {2, 1, 3, 3}}, {{"padding", "1"}})},
      {"max_pool2d", Args({{1, 2, 6, 5}}, {{"kernel", "2"}})},
      {"avg_pool2d", Args({{1, 2, 6, 5}}, {{"kernel", "3"}, {"stride", "1"}})},
      {"conv2d_bias_relu", Args({{1, 2, 6, 5}, {3, 2, 3, 3}, {3}})},
      {"dense_bias_relu", Args({{3, 5}, {4, 5}, {4}})},
      {"matmul_scale_residual", Args({{3, 5}, {5, 4}, {3, 4}}, {{"scale", "0.5"}})},
      {"reduce_sum", Args({{3, 7}}, {{"axes", "1"}})},
      {"reduce_mean", Args({{3, 7}})},
      {"reduce_max", Args({{3, 7}}, {{"axes", "0"}, {"keepdim", "true"}})},
      {"reduce_min", Args({{4, 3, 5}}, {{"axes", "0,2"}})},
      {"softmax", Args({{3, 17}})},
      {"log_softmax", Args({{5, 7}}, {{"axis", "0"}})},
      {"layernorm", Args({{3, 16}, {16}, {16}})},
      {"rmsnorm", Args({{3, 16}, {16}})},
      {"relu", Args({{3, 37}})},
      {"leaky_relu", Args({{3, 37}})},
      {"gelu", Args({{3, 37}})},
      {"sigmoid", Args({{3, 37}})},
      {"tanh", Args({{3, 37}})},
      {"swish", Args({{3, 37}})},
      {"softplus", Args({{3, 37}})},
      {"elu", Args({{3, 37}})},
      {"hardtanh", Args({{3, 37}})},
      {"add", Args({{3, 7}, {7}})},
      {"sub", Args({{3, 1}, {7}})},
      {"mul", Args({{3, 7}, {3, 7}})},
      {"div", Args({{3, 7}, {1}})},
      {"maximum", Args({{3, 7}, {3, 1}})},
      {"minimum", Args({{7}, {3, 7}})},
      {"scale", Args({{3, 7}}, {{"scale", "0.5"}})},
      {"transpose", Args({{3, 7, 2}}, {{"perm", "2,0,1"}})},
  };
}

ir::LoopNest MergeNests(const std::string& name, const std::vector<ir::LoopNest>& nests,
                        const std::vector<std::string>& prefixes) {
  ir::LoopNest merged;
  merged.name = name;
  std::vector<ir::Stmt> bodies;
  for (size_t i = 0; i < nests.size(); ++i) {
    RenameBuffers rename(prefixes[i]);
    for (ir::BufferDecl p : nests[i].params) {
      p.name = prefixes[i] + p.name;
      merged.params.push_back(p);
    }
    bodies.push_back(rename.Mutate(nests[i].body));
  }
  merged.body = ir::SeqNode::Make(bodies);
  return merged;
}

}  // namespace tilesearch::codegen::testing
