#include "ir/compute_dag.h"

#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

using Axes = std::vector<Expr>;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr ScalarType kF32 = ScalarType::kFloat32;

Tensor P(const std::string& name, std::vector<int64_t> shape, ScalarType t = kF32) {
  auto r = Placeholder(name, std::move(shape), t);
  EXPECT_THAT(r, IsOk());
  return *r;
}

ComputeOptions Names(std::vector<std::string> axes, std::vector<std::string> reduce = {},
                     std::string tag = "") {
  ComputeOptions o;
  o.axis_names = std::move(axes);
  o.reduce_axis_names = std::move(reduce);
  o.tag = std::move(tag);
  return o;
}

// C[i, j] = sum_k A[i, k] * B[k, j]
Tensor Matmul(const std::string& name, const Tensor& a, const Tensor& b,
              const ComputeOptions& options = Names({"i", "j"}, {"k"})) {
  int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  auto r = Reduce(
      name, {m, n}, ReduceKind::kSum, {k},
      [&](const Axes& ax, const Axes& r) { return a(ax[0], r[0]) * b(r[0], ax[1]); }, Expr(),
      options);
  EXPECT_THAT(r, IsOk());
  return *r;
}

// D[i, j] = C[i, j] + bias[j]
Tensor BiasAdd(const std::string& name, const Tensor& c, const Tensor& bias,
               const ComputeOptions& options = {}) {
  auto r = Compute(
      name, c.shape(), [&](const Axes& ax) { return c(ax[0], ax[1]) + bias(ax[1]); }, options);
  EXPECT_THAT(r, IsOk());
  return *r;
}

// Y = max(X, 0), same shape.
Tensor Relu(const std::string& name, const Tensor& x) {
  auto r = Compute(name, x.shape(), [&](const Axes& ax) { return Max(x(ax), FloatConst(0)); });
  EXPECT_THAT(r, IsOk());
  return *r;
}

// out[n, f, y, x] = sum_{c, ry, rx} in[n, c, y + ry, x + rx] * w[f, c, ry, rx] (no padding).
Tensor Conv2d(const std::string& name, const Tensor& in, const Tensor& w) {
  int64_t n = in.shape()[0], c = in.shape()[1], h = in.shape()[2], wd = in.shape()[3];
  int64_t f = w.shape()[0], kh = w.shape()[2], kw = w.shape()[3];
  auto r = Reduce(name, {n, f, h - kh + 1, wd - kw + 1}, ReduceKind::kSum, {c, kh, kw},
                  [&](const Axes& ax, const Axes& r) {
                    return in(ax[0], r[0], ax[2] + r[1], ax[3] + r[2]) * w(ax[1], r[0], r[1], r[2]);
                  });
  EXPECT_THAT(r, IsOk());
  return *r;
}

ComputeDAG MakeDag(const std::vector<Tensor>& outputs) {
  auto dag = ComputeDAG::Create(outputs);
  EXPECT_THAT(dag, IsOk());
  return *dag;
}

std::vector<std::string> StageNames(const ComputeDAG& dag) {
  std::vector<std::string> names;
  for (const Tensor& t : dag.stages()) names.push_back(t.name());
  return names;
}

// ----- stage order -----

TEST(ComputeDAGTest, MatmulBiasStageOrderIsPostOrderFromOutputs) {
  Tensor a = P("A", {64, 32});
  Tensor b = P("B", {32, 48});
  Tensor bias = P("bias", {48});
  Tensor d = BiasAdd("D", Matmul("C", a, b), bias);
  ComputeDAG dag = MakeDag({d});
  EXPECT_THAT(StageNames(dag), ElementsAre("A", "B", "C", "bias", "D"));
  EXPECT_THAT(dag.input_ids(), ElementsAre(0, 1, 3));
  EXPECT_THAT(dag.output_ids(), ElementsAre(4));
  EXPECT_EQ(dag.StageId("bias"), 3);
  EXPECT_EQ(dag.StageId("nope"), -1);
  EXPECT_EQ(dag.stage(2).name(), "C");
}

TEST(ComputeDAGTest, StageOrderDoesNotDependOnBuildOrder) {
  // Second build: the bias and B are created first, under other names.
  Tensor bias = P("b1", {48});
  Tensor w = P("W", {32, 48});
  Tensor x = P("X", {64, 32});
  Tensor mm = Matmul("mm", x, w, Names({"m", "n"}, {"r"}));
  Tensor out = BiasAdd("out", mm, bias);
  ComputeDAG dag = MakeDag({out});
  // The roles come in the same positions as in the first build: A, B, C, bias, D.
  EXPECT_THAT(StageNames(dag), ElementsAre("X", "W", "mm", "b1", "out"));
  EXPECT_THAT(dag.input_ids(), ElementsAre(0, 1, 3));
}

TEST(ComputeDAGTest, SharedProducerAppearsOnceAndInOrderOfFirstUse) {
  // Z = relu(X) + X: X is read by Y and by Z.
  Tensor x = P("X", {8, 8});
  Tensor y = Relu("Y", x);
  Tensor z = *Compute("Z", {8, 8}, [&](const Axes& ax) { return y(ax) + x(ax); });
  ComputeDAG dag = MakeDag({z});
  EXPECT_THAT(StageNames(dag), ElementsAre("X", "Y", "Z"));
  EXPECT_THAT(dag.Consumers(0), ElementsAre(1, 2));
  EXPECT_THAT(dag.Producers(2), ElementsAre(0, 1));
  EXPECT_THAT(dag.Producers(0), IsEmpty());
  EXPECT_THAT(dag.Consumers(2), IsEmpty());

  // Reading X first in Z's body puts X before Y in either case (X is Y's producer too).
  Tensor z2 = *Compute("Z", {8, 8}, [&](const Axes& ax) { return x(ax) * y(ax); });
  EXPECT_THAT(StageNames(MakeDag({z2})), ElementsAre("X", "Y", "Z"));
}

TEST(ComputeDAGTest, ProducersOfInitComeAfterThoseOfTheBody) {
  Tensor a = P("A", {4, 16});
  Tensor bias = P("bias", {4});
  Tensor s = *Reduce(
      "S", {4}, ReduceKind::kSum, {16},
      [&](const Axes& ax, const Axes& r) { return a(ax[0], r[0]); }, bias(MakeVar("i0")));
  ComputeDAG dag = MakeDag({s});
  EXPECT_THAT(StageNames(dag), ElementsAre("A", "bias", "S"));
  EXPECT_THAT(dag.Producers(2), ElementsAre(0, 1));
}

TEST(ComputeDAGTest, MultipleOutputsKeepTheirGivenOrder) {
  Tensor x = P("X", {8});
  Tensor y = Relu("Y", x);
  Tensor e = *Compute("E", {8}, [&](const Axes& ax) { return Exp(x(ax)); });
  ComputeDAG dag = MakeDag({e, y});
  EXPECT_THAT(StageNames(dag), ElementsAre("X", "E", "Y"));
  EXPECT_THAT(dag.output_ids(), ElementsAre(1, 2));
  ComputeDAG swapped = MakeDag({y, e});
  EXPECT_THAT(StageNames(swapped), ElementsAre("X", "Y", "E"));
  EXPECT_THAT(swapped.output_ids(), ElementsAre(1, 2));
  EXPECT_THAT(swapped.input_ids(), ElementsAre(0));
}

TEST(ComputeDAGTest, OutputReadByAnotherOutput) {
  Tensor x = P("X", {8});
  Tensor y = Relu("Y", x);
  Tensor z = Relu("Z", y);
  ComputeDAG dag = MakeDag({z, y});
  EXPECT_THAT(StageNames(dag), ElementsAre("X", "Y", "Z"));
  EXPECT_THAT(dag.output_ids(), ElementsAre(2, 1));
  EXPECT_FALSE(dag.IsInlinable(1));  // an output is never inlined
}

// ----- errors -----

TEST(ComputeDAGTest, CreateErrors) {
  Tensor x = P("X", {8});
  EXPECT_THAT(ComputeDAG::Create({}), StatusIs(kInvalid, HasSubstr("without outputs")));
  EXPECT_THAT(ComputeDAG::Create({Tensor()}), StatusIs(kInvalid, HasSubstr("undefined")));
  EXPECT_THAT(ComputeDAG::Create({x}), StatusIs(kInvalid, HasSubstr("placeholder 'X'")));
  Tensor y = Relu("Y", x);
  EXPECT_THAT(ComputeDAG::Create({y, y}),
              StatusIs(kInvalid, HasSubstr("'Y' is given twice as an output")));
}

TEST(ComputeDAGTest, TwoStagesWithOneNameAreRejected) {
  Tensor x1 = P("X", {8});
  Tensor x2 = P("X", {8});
  Tensor s = *Compute("S", {8}, [&](const Axes& ax) { return x1(ax) + x2(ax); });
  EXPECT_THAT(ComputeDAG::Create({s}),
              StatusIs(kInvalid, HasSubstr("two different stages are named 'X'")));
}

TEST(ComputeDAGTest, HandBuiltStageReadingABareBufferIsRejected) {
  auto node = std::make_shared<TensorNode>();
  node->name = "S";
  node->shape = {4};
  node->axes = {IterVar{"i", 4}};
  node->body = LoadNode::Make(kF32, "buf", {MakeVar("i")});  // no producer tensor
  EXPECT_THAT(ComputeDAG::Create({Tensor(node)}),
              StatusIs(kInvalid, HasSubstr("stage 'S' reads buffer 'buf' that is not a tensor")));
}

// ----- kinds and predicates -----

TEST(ComputeDAGTest, StageKinds) {
  Tensor a = P("A", {16, 16});
  Tensor v = P("v", {16});
  Tensor relu = Relu("relu", a);  // elementwise
  Tensor tr = *Compute("tr", {16, 16}, [&](const Axes& ax) { return relu(ax[1], ax[0]); });
  Tensor bc = *Compute("bc", {16, 16}, [&](const Axes& ax) { return tr(ax) * v(ax[1]); });
  Tensor sh = *Compute("sh", {16, 15}, [&](const Axes& ax) { return bc(ax[0], ax[1] + 1); });
  Tensor sum = *Reduce("sum", {16}, ReduceKind::kSum, {15},
                       [&](const Axes& ax, const Axes& r) { return sh(ax[0], r[0]); });
  Tensor iota = *Compute("iota", {16}, [&](const Axes& ax) { return Cast(kF32, ax[0]) + sum(ax); });
  ComputeDAG dag = MakeDag({iota});
  EXPECT_EQ(dag.Kind(dag.StageId("A")), StageKind::kPlaceholder);
  EXPECT_EQ(dag.Kind(dag.StageId("relu")), StageKind::kElementwise);
  EXPECT_EQ(dag.Kind(dag.StageId("tr")), StageKind::kInjective);  // transpose
  EXPECT_EQ(dag.Kind(dag.StageId("bc")), StageKind::kInjective);  // broadcast read of v
  EXPECT_EQ(dag.Kind(dag.StageId("sh")), StageKind::kInjective);  // shifted index
  EXPECT_EQ(dag.Kind(dag.StageId("sum")), StageKind::kReduction);
  EXPECT_EQ(dag.Kind(dag.StageId("iota")), StageKind::kElementwise);
  // Same index variables into a larger tensor: a crop, not elementwise.
  Tensor crop = *Compute("crop", {8, 8}, [&](const Axes& ax) { return a(ax[0], ax[1]); });
  EXPECT_EQ(MakeDag({crop}).Kind(1), StageKind::kInjective);
  EXPECT_STREQ(StageKindName(StageKind::kInjective), "injective");
}

TEST(ComputeDAGTest, NeedsMultiLevelTilingFollowsAnsorRule) {
  Tensor a = P("A", {64, 32});
  Tensor b = P("B", {32, 48});
  Tensor bias = P("bias", {48});
  Tensor mm = Matmul("mm", a, b);
  Tensor add = BiasAdd("add", mm, bias);
  Tensor tr = *Compute("tr", {48, 64}, [&](const Axes& ax) { return add(ax[1], ax[0]); });
  // Outer product: both operands miss an axis, no reduction.
  Tensor u = P("u", {48});
  Tensor outer =
      *Compute("outer", {48, 48}, [&](const Axes& ax) { return u(ax[0]) * bias(ax[1]); });
  // One tensor read twice: the union of its indices covers both axes (Ansor counts per tensor).
  Tensor self = *Compute("self", {48, 48}, [&](const Axes& ax) { return u(ax[0]) * u(ax[1]); });
  // Row max of a softmax: X[i, k] reads every output axis.
  Tensor rmax = *Reduce("rmax", {48}, ReduceKind::kMax, {64},
                        [&](const Axes& ax, const Axes& r) { return tr(ax[0], r[0]); });
  Tensor gemv = *Reduce("gemv", {48}, ReduceKind::kSum, {48}, [&](const Axes& ax, const Axes& r) {
    return (outer(ax[0], r[0]) + self(ax[0], r[0])) * rmax(r[0]);
  });
  ComputeDAG dag = MakeDag({gemv});
  EXPECT_TRUE(dag.NeedsMultiLevelTiling(dag.StageId("mm")));
  EXPECT_FALSE(dag.NeedsMultiLevelTiling(dag.StageId("add")));
  EXPECT_FALSE(dag.NeedsMultiLevelTiling(dag.StageId("tr")));
  EXPECT_TRUE(dag.NeedsMultiLevelTiling(dag.StageId("outer")));
  EXPECT_FALSE(dag.NeedsMultiLevelTiling(dag.StageId("self")));
  EXPECT_FALSE(dag.NeedsMultiLevelTiling(dag.StageId("rmax")));
  EXPECT_TRUE(dag.NeedsMultiLevelTiling(dag.StageId("gemv")));  // rmax[k] misses i, reduces
  EXPECT_FALSE(dag.NeedsMultiLevelTiling(dag.StageId("A")));
}

TEST(ComputeDAGTest, NeedsMultiLevelTilingIgnoresUnitAxes) {
  // A matrix times one column: A[i, k] misses j, but j has extent 1; B[k, 0] misses i.
  Tensor a = P("A", {64, 32});
  Tensor b = P("B", {32, 1});
  ComputeDAG dag = MakeDag({Matmul("C", a, b)});
  EXPECT_TRUE(dag.NeedsMultiLevelTiling(2));
  // 1 x 1 output: nothing can be missing.
  Tensor r = P("R", {1, 32});
  Tensor c = P("Cc", {32, 1});
  ComputeDAG dot = MakeDag({Matmul("dot", r, c)});
  EXPECT_FALSE(dot.NeedsMultiLevelTiling(2));
}

TEST(ComputeDAGTest, Conv2dNeedsMultiLevelTiling) {
  Tensor in = P("in", {1, 8, 10, 10});
  Tensor w = P("w", {16, 8, 3, 3});
  ComputeDAG dag = MakeDag({Conv2d("conv", in, w)});
  EXPECT_EQ(dag.Kind(2), StageKind::kReduction);
  EXPECT_TRUE(dag.NeedsMultiLevelTiling(2));
}

TEST(ComputeDAGTest, Inlinable) {
  Tensor a = P("A", {64, 32});
  Tensor b = P("B", {32, 48});
  Tensor bias = P("bias", {48});
  Tensor add = BiasAdd("add", Matmul("mm", a, b), bias);
  Tensor relu = Relu("relu", add);
  ComputeDAG dag = MakeDag({relu});
  EXPECT_TRUE(dag.IsInlinable(dag.StageId("add")));
  EXPECT_FALSE(dag.IsInlinable(dag.StageId("relu")));  // output
  EXPECT_FALSE(dag.IsInlinable(dag.StageId("mm")));    // reduction
  EXPECT_FALSE(dag.IsInlinable(dag.StageId("A")));     // placeholder
}

// ----- FLOPs and bytes -----

TEST(ComputeDAGTest, MatmulFlopsAreTwoMNK) {
  const int64_t m = 64, n = 48, k = 32;
  ComputeDAG dag = MakeDag({Matmul("C", P("A", {m, k}), P("B", {k, n}))});
  EXPECT_EQ(dag.StageFlops(2), 2.0 * m * n * k);
  EXPECT_EQ(dag.StageFlops(0), 0.0);
  EXPECT_EQ(dag.Flops(), 2.0 * m * n * k);
}

TEST(ComputeDAGTest, Conv2dFlopsMatchClosedForm) {
  const int64_t batch = 2, c = 8, h = 10, wd = 12, f = 16, kh = 3, kw = 5;
  ComputeDAG dag = MakeDag({Conv2d("conv", P("in", {batch, c, h, wd}), P("w", {f, c, kh, kw}))});
  const double oh = h - kh + 1, ow = wd - kw + 1;
  // One multiply and one add per (output point, c, ry, rx); index arithmetic y + ry is free.
  EXPECT_EQ(dag.Flops(), 2.0 * batch * f * oh * ow * c * kh * kw);
}

TEST(ComputeDAGTest, ElementwiseFlopsCountValueOperations) {
  Tensor x = P("X", {10, 20});
  // sigmoid(x) * x: one call, one multiply.
  Tensor silu = *Compute("silu", {10, 20}, [&](const Axes& ax) { return Sigmoid(x(ax)) * x(ax); });
  // Padding-like select with index comparisons and shifted loads: no value operations taken.
  Tensor pad = *Compute("pad", {12, 22}, [&](const Axes& ax) {
    Expr inside = ax[0] >= 1 && ax[0] < 11 && ax[1] >= 1 && ax[1] < 21;
    return Select(inside, silu(ax[0] - 1, ax[1] - 1), FloatConst(0));
  });
  // select(v > 0, v * 2 + 1, v): the comparison is free, the costlier branch has 2 operations.
  Tensor sel = *Compute("sel", {12, 22}, [&](const Axes& ax) {
    Expr v = pad(ax);
    return Select(v > 0, v * 2 + 1, v);
  });
  // An int32 value computation counts, its cast does not.
  Tensor q = *Compute("q", {12, 22}, [&](const Axes& ax) {
    return Cast(ScalarType::kInt32, sel(ax)) * IntConst(3, ScalarType::kInt32);
  });
  ComputeDAG dag = MakeDag({q});
  EXPECT_EQ(dag.StageFlops(dag.StageId("silu")), 2.0 * 10 * 20);
  EXPECT_EQ(dag.StageFlops(dag.StageId("pad")), 0.0);
  EXPECT_EQ(dag.StageFlops(dag.StageId("sel")), 2.0 * 12 * 22);
  EXPECT_EQ(dag.StageFlops(dag.StageId("q")), 1.0 * 12 * 22);
  EXPECT_EQ(dag.Flops(), 2.0 * 200 + 2.0 * 264 + 264);
}

TEST(ComputeDAGTest, ReductionFlopsIncludeCombineAndInit) {
  // S[i] = bias[i] + sum_k exp(A[i, k] - 1): per point 2 body operations + 1 combine; the init is
  // a load (free).
  Tensor a = P("A", {6, 40});
  Tensor bias = P("bias", {6});
  Tensor s = *Reduce(
      "S", {6}, ReduceKind::kSum, {40},
      [&](const Axes& ax, const Axes& r) { return Exp(a(ax[0], r[0]) - 1); }, bias(MakeVar("i0")));
  ComputeDAG dag = MakeDag({s});
  EXPECT_EQ(dag.Flops(), 6.0 * 40 * 3);
  // An init with arithmetic costs once per output point.
  Tensor s2 = *Reduce(
      "S2", {6}, ReduceKind::kMax, {40},
      [&](const Axes& ax, const Axes& r) { return a(ax[0], r[0]); }, bias(MakeVar("i0")) * 2);
  EXPECT_EQ(MakeDag({s2}).Flops(), 6.0 * 40 * 1 + 6.0 * 1);
}

TEST(ComputeDAGTest, Bytes) {
  Tensor a = P("A", {64, 32}, ScalarType::kFloat16);
  Tensor b = P("B", {32, 48}, ScalarType::kFloat16);
  Tensor c = Matmul("C", a, b);
  Tensor d = *Compute("D", {64, 48}, [&](const Axes& ax) { return Cast(kF32, c(ax)); });
  ComputeDAG dag = MakeDag({d, c});
  EXPECT_EQ(dag.InputBytes(), (64 * 32 + 32 * 48) * 2);
  EXPECT_EQ(dag.OutputBytes(), 64 * 48 * 4 + 64 * 48 * 2);
}

// ----- workload key -----

TEST(Fnv1a64Test, PublishedTestVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

// A matmul + bias + relu workload built from parts that tests vary one at a time.
struct Workload {
  int64_t m = 64, n = 48, k = 32;
  ScalarType dtype = kF32;
  double alpha = 0.5;
  bool transpose_a = false;  // reads A[k, i] from a [k, m] tensor instead of A[i, k]
  bool bias_first = false;   // builds bias first and names everything differently
};

ComputeDAG Build(const Workload& w) {
  std::string s = w.bias_first ? "_other" : "";
  Tensor bias;
  if (w.bias_first) bias = P("bias" + s, {w.n}, w.dtype);
  Tensor b = P("B" + s, {w.k, w.n}, w.dtype);
  Tensor a = w.transpose_a ? P("A" + s, {w.k, w.m}, w.dtype) : P("A" + s, {w.m, w.k}, w.dtype);
  if (!w.bias_first) bias = P("bias" + s, {w.n}, w.dtype);
  ComputeOptions mm_names =
      w.bias_first ? Names({"y", "x"}, {"rk"}, "dense") : Names({"i", "j"}, {"k"});
  Tensor c = *Reduce(
      "C" + s, {w.m, w.n}, ReduceKind::kSum, {w.k},
      [&](const Axes& ax, const Axes& r) {
        Expr av = w.transpose_a ? a(r[0], ax[0]) : a(ax[0], r[0]);
        return av * b(r[0], ax[1]);
      },
      Expr(), mm_names);
  Tensor d = *Compute(
      "D" + s, {w.m, w.n},
      [&](const Axes& ax) { return Max((c(ax) + bias(ax[1])) * w.alpha, FloatConst(0, w.dtype)); },
      w.bias_first ? Names({"p", "q"}) : ComputeOptions{});
  return MakeDag({d});
}

TEST(WorkloadKeyTest, EqualForSameWorkloadWithOtherNamesAndBuildOrder) {
  Workload w;
  Workload other = w;
  other.bias_first = true;
  ComputeDAG x = Build(w), y = Build(other);
  EXPECT_NE(x.stage(0).name(), y.stage(0).name());
  EXPECT_EQ(x.CanonicalText(), y.CanonicalText());
  EXPECT_EQ(x.WorkloadKey(), y.WorkloadKey());
  EXPECT_THAT(x.WorkloadKey(), ::testing::MatchesRegex("[0-9a-f]{16}"));
}

TEST(WorkloadKeyTest, ChangesWithShapeDtypeConstantAndIndexExpression) {
  Workload base;
  const std::string key = Build(base).WorkloadKey();
  Workload w = base;
  w.k = 16;
  EXPECT_NE(Build(w).WorkloadKey(), key) << "reduce extent";
  w = base;
  w.n = 64;
  EXPECT_NE(Build(w).WorkloadKey(), key) << "output extent";
  w = base;
  w.dtype = ScalarType::kFloat16;
  EXPECT_NE(Build(w).WorkloadKey(), key) << "dtype";
  w = base;
  w.alpha = 0.25;
  EXPECT_NE(Build(w).WorkloadKey(), key) << "constant";
  w = base;
  w.alpha = static_cast<double>(std::nextafter(0.5f, 1.0f));  // one float32 ulp away
  EXPECT_NE(Build(w).WorkloadKey(), key) << "constant by one ulp";
  w = base;
  w.m = w.k = 32;
  const std::string square = Build(w).WorkloadKey();
  w.transpose_a = true;
  EXPECT_NE(Build(w).WorkloadKey(), square) << "index expression";
}

TEST(WorkloadKeyTest, IgnoresTagsAndAxisNamesButNotReduceKindOrIndexOffset) {
  Tensor a = P("A", {8, 8});
  auto build = [&](ReduceKind kind, int64_t offset, const std::string& tag,
                   const std::string& axis) {
    Tensor s = *Reduce(
        "S", {8}, kind, {7}, [&](const Axes& ax, const Axes& r) { return a(ax[0], r[0] + offset); },
        Expr(), Names({axis}, {axis + "_r"}, tag));
    return MakeDag({s}).WorkloadKey();
  };
  const std::string key = build(ReduceKind::kSum, 0, "", "i");
  EXPECT_EQ(build(ReduceKind::kSum, 0, "row_sum", "row"), key);
  EXPECT_NE(build(ReduceKind::kMax, 0, "", "i"), key);
  EXPECT_NE(build(ReduceKind::kSum, 1, "", "i"), key);
}

TEST(WorkloadKeyTest, OutputOrderIsPartOfTheWorkload) {
  Tensor x = P("X", {8});
  Tensor y = Relu("Y", x);
  Tensor e = *Compute("E", {8}, [&](const Axes& ax) { return Exp(x(ax)); });
  EXPECT_NE(MakeDag({y, e}).WorkloadKey(), MakeDag({e, y}).WorkloadKey());
}

TEST(WorkloadKeyTest, SharedInputDiffersFromTwoEqualInputs) {
  Tensor x1 = P("X1", {8});
  Tensor x2 = P("X2", {8});
  Tensor two = *Compute("S", {8}, [&](const Axes& ax) { return x1(ax) + x2(ax); });
  Tensor one = *Compute("S", {8}, [&](const Axes& ax) { return x1(ax) + x1(ax); });
  EXPECT_NE(MakeDag({two}).WorkloadKey(), MakeDag({one}).WorkloadKey());
}

TEST(WorkloadKeyTest, KeyIsHashOfCanonicalText) {
  ComputeDAG dag = Build(Workload{});
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(Fnv1a64(dag.CanonicalText())));
  EXPECT_EQ(dag.WorkloadKey(), hex);
}

// ----- readable form -----

TEST(ComputeDAGTest, ToStringShowsStagesTotalsAndKey) {
  ComputeDAG mm = MakeDag({Matmul("C", P("A", {64, 32}), P("B", {32, 64}))});
  std::string text = mm.ToString();
  EXPECT_THAT(text, HasSubstr("C[i, j] = reduce_sum over k[32] of (A[i, k]*B[k, j])"));
  EXPECT_THAT(text, HasSubstr("float32[64, 64]"));
  EXPECT_THAT(text, HasSubstr("multi-level tiling"));
  EXPECT_THAT(text, HasSubstr("FLOPs: 262144 (0.000262 GFLOP)"));
  EXPECT_THAT(text, HasSubstr("workload key: " + mm.WorkloadKey()));
  EXPECT_THAT(text, HasSubstr("consumers: C"));
}

}  // namespace
}  // namespace tilesearch::ir
