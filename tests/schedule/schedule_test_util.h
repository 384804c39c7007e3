// Test helpers for schedule/: small DAGs built directly from ir::Compute / ir::Reduce, an integer
// expression evaluator written from the semantics of ir/expr.h (floor division), and enumeration
// of a stage's loop iterations.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/expr.h"
#include "ir/tensor.h"
#include "schedule/state.h"

namespace tilesearch::schedule::testing {

using Axes = std::vector<ir::Expr>;

inline ir::Tensor Input(const std::string& name, std::vector<int64_t> shape) {
  auto t = ir::Placeholder(name, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

inline ir::ComputeOptions Names(std::vector<std::string> axes,
                                std::vector<std::string> reduce = {}) {
  ir::ComputeOptions o;
  o.axis_names = std::move(axes);
  o.reduce_axis_names = std::move(reduce);
  return o;
}

inline ir::ComputeDAG MakeDag(const std::vector<ir::Tensor>& outputs) {
  auto dag = ir::ComputeDAG::Create(outputs);
  EXPECT_TRUE(dag.ok()) << dag.status();
  return *dag;
}

/// C[i, j] = sum_k A[i, k] * B[k, j]. Stages: A 0, B 1, C 2.
inline ir::Tensor MatmulTensor(const ir::Tensor& a, const ir::Tensor& b, const std::string& name) {
  auto c = ir::Reduce(
      name, {a.shape()[0], b.shape()[1]}, ir::ReduceKind::kSum, {a.shape()[1]},
      [&](const Axes& ax, const Axes& r) { return a(ax[0], r[0]) * b(r[0], ax[1]); }, ir::Expr(),
      Names({"i", "j"}, {"k"}));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

inline ir::ComputeDAG Matmul(int64_t m, int64_t n, int64_t k) {
  ir::Tensor a = Input("A", {m, k});
  ir::Tensor b = Input("B", {k, n});
  return MakeDag({MatmulTensor(a, b, "C")});
}

/// Matmul then D[i, j] = max(C[i, j], 0). Stages: A 0, B 1, C 2, D 3.
inline ir::ComputeDAG MatmulRelu(int64_t m, int64_t n, int64_t k) {
  ir::Tensor a = Input("A", {m, k});
  ir::Tensor b = Input("B", {k, n});
  ir::Tensor c = MatmulTensor(a, b, "C");
  auto d = ir::Compute(
      "D", c.shape(), [&](const Axes& ax) { return ir::Max(c(ax[0], ax[1]), ir::FloatConst(0)); },
      Names({"i", "j"}));
  EXPECT_TRUE(d.ok()) << d.status();
  return MakeDag({*d});
}

/// B[i] = A[i] * 2, C[i] = B[i] + 1. Stages: A 0, B 1, C 2.
inline ir::ComputeDAG Chain(int64_t n) {
  ir::Tensor a = Input("A", {n});
  auto b = ir::Compute(
      "B", {n}, [&](const Axes& ax) { return a(ax[0]) * ir::FloatConst(2); }, Names({"i"}));
  auto c = ir::Compute(
      "C", {n}, [&](const Axes& ax) { return (*b)(ax[0]) + ir::FloatConst(1); }, Names({"i"}));
  return MakeDag({*c});
}

/// Y[h, w] = sum_{r, s} X[h*stride + r*dil, w*stride + s*dil] * W[r, s], with X sized to fit.
/// Stages: X 0, W 1, Y 2.
inline ir::ComputeDAG Conv2d(int64_t oh, int64_t ow, int64_t kr, int64_t ks, int64_t stride,
                             int64_t dil) {
  ir::Tensor x =
      Input("X", {(oh - 1) * stride + (kr - 1) * dil + 1, (ow - 1) * stride + (ks - 1) * dil + 1});
  ir::Tensor w = Input("W", {kr, ks});
  auto y = ir::Reduce(
      "Y", {oh, ow}, ir::ReduceKind::kSum, {kr, ks},
      [&](const Axes& ax, const Axes& r) {
        return x(ax[0] * stride + r[0] * dil, ax[1] * stride + r[1] * dil) * w(r[0], r[1]);
      },
      ir::Expr(), Names({"h", "w"}, {"r", "s"}));
  EXPECT_TRUE(y.ok()) << y.status();
  return MakeDag({*y});
}

using Env = std::map<std::string, int64_t>;

inline int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/// Evaluates an integer / bool expression (the index subset of ir/expr.h); fails the test on a
/// free variable or an unsupported node.
inline int64_t Eval(const ir::Expr& e, const Env& env) {
  using K = ir::ExprKind;
  if (auto c = ir::AsConstInt(e)) return *c;
  if (const auto* v = e.as<ir::VarNode>()) {
    auto it = env.find(v->name);
    EXPECT_NE(it, env.end()) << "free variable " << v->name;
    return it == env.end() ? 0 : it->second;
  }
  if (const auto* n = e.as<ir::NotNode>()) return !Eval(n->a, env);
  if (const auto* s = e.as<ir::SelectNode>()) {
    return Eval(s->cond, env) ? Eval(s->true_value, env) : Eval(s->false_value, env);
  }
  if (!ir::IsBinaryKind(e.kind())) {
    ADD_FAILURE() << "cannot evaluate " << ir::ToString(e);
    return 0;
  }
  auto [a_expr, b_expr] = ir::BinaryOperands(e);
  const int64_t a = Eval(a_expr, env), b = Eval(b_expr, env);
  switch (e.kind()) {
    case K::kAdd:
      return a + b;
    case K::kSub:
      return a - b;
    case K::kMul:
      return a * b;
    case K::kDiv:
      return FloorDiv(a, b);
    case K::kMod:
      return a - b * FloorDiv(a, b);
    case K::kMin:
      return std::min(a, b);
    case K::kMax:
      return std::max(a, b);
    case K::kEQ:
      return a == b;
    case K::kNE:
      return a != b;
    case K::kLT:
      return a < b;
    case K::kLE:
      return a <= b;
    case K::kGT:
      return a > b;
    case K::kGE:
      return a >= b;
    case K::kAnd:
      return a && b;
    case K::kOr:
      return a || b;
    default:
      break;
  }
  ADD_FAILURE() << "cannot evaluate " << ir::ToString(e);
  return 0;
}

/// Calls fn(env) for every assignment of the iterators [first, last) of `iters` (env holds the
/// fixed ones already).
inline void ForEachIteration(const std::vector<Iterator>& iters, size_t first, size_t last, Env env,
                             const std::function<void(const Env&)>& fn) {
  if (first == last) {
    fn(env);
    return;
  }
  for (int64_t v = 0; v < iters[first].extent; ++v) {
    env[iters[first].name] = v;
    ForEachIteration(iters, first + 1, last, env, fn);
  }
}

/// How many times each axis point (op axes then reduce axes) is visited by the stage's loops,
/// skipping iterations whose guards fail.
inline std::map<std::vector<int64_t>, int> AxisPointCounts(const Stage& stage) {
  std::map<std::vector<int64_t>, int> counts;
  ForEachIteration(stage.iters, 0, stage.iters.size(), {}, [&](const Env& env) {
    for (const ir::Expr& g : stage.guards) {
      if (!Eval(g, env)) return;
    }
    std::vector<int64_t> point;
    for (const ir::Expr& v : stage.axis_values) point.push_back(Eval(v, env));
    ++counts[point];
  });
  return counts;
}

/// Every point of the box `extents` exactly once.
inline std::map<std::vector<int64_t>, int> FullBox(const std::vector<int64_t>& extents) {
  std::map<std::vector<int64_t>, int> counts;
  std::vector<int64_t> p(extents.size(), 0);
  while (true) {
    ++counts[p];
    size_t d = extents.size();
    while (d > 0) {
      --d;
      if (++p[d] < extents[d]) break;
      p[d] = 0;
      if (d == 0) return counts;
    }
    if (extents.empty()) return counts;
  }
}

/// The extents a stage's loops must cover: axis_extents then the reduce axes' extents.
inline std::vector<int64_t> DomainOf(const Stage& stage) {
  std::vector<int64_t> extents = stage.axis_extents;
  for (const ir::IterVar& r : stage.op->reduce_axes) extents.push_back(r.extent);
  return extents;
}

}  // namespace tilesearch::schedule::testing
