// The tensor_core step: JSON round trip, errors for stages and shapes it cannot take, and random
// tensor-core schedules (non-divisible shapes, every layout, convolutions as implicit GEMM, fused
// epilogues) run in the interpreter against the unscheduled program.
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/ops/registry.h"
#include "ir/reference.h"
#include "lower_test_util.h"
#include "nlohmann/json.hpp"
#include "schedule/step_json.h"

namespace tilesearch::schedule {
namespace {

using testing::ApplyWithEpilogue;
using testing::BuildOpOrDie;
using testing::CudaTarget;
using testing::RunLowered;
using testing::SumReductionStage;

// `t` applied with the longest epilogue chain that applies (3 down to 0).
TEST(TensorCoreStep, JsonRoundTrip) {
  TensorCoreStep t;
  t.stage_id = 3;
  t.kind = "tf32x3";
  t.block_m = 128;
  t.block_n = 64;
  t.block_k = 32;
  t.warp_m = 64;
  t.warp_n = 32;
  t.pipeline = 3;
  t.pad = 4;
  t.raster = 8;
  t.epilogue = 2;
  const nlohmann::json j = t.ToJson();
  EXPECT_EQ(j.dump(), R"(["TC",3,"tf32x3",[128,64,32],[64,32],3,4,8,2])");
  absl::StatusOr<Step> back = StepFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  // split_k is written only when it splits, as a tenth element.
  t.split_k = 4;
  EXPECT_EQ(t.ToJson().dump(), R"(["TC",3,"tf32x3",[128,64,32],[64,32],3,4,8,2,4])");
  back = StepFromJson(t.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::get<TensorCoreStep>(*back) == t);
  // Through the text form of a whole step list too.
  absl::StatusOr<std::vector<Step>> list = StepsFromText(StepsToText({Step(t)}));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_TRUE(std::get<TensorCoreStep>((*list)[0]) == t);
}

TEST(TensorCoreStep, MalformedJsonIsAnError) {
  for (const char* text :
       {R"(["TC",2,"f16",[64,64],[32,32],2,8,1,0])", R"(["TC",2,"f16",[64,64,32],[32,32],2,8,1])",
        R"(["TC",2,7,[64,64,32],[32,32],2,8,1,0])", R"(["TC",2,"f16",[64,64,32],[32,32],-1,8,1,0])",
        R"(["TC",2,"f16",[64,64,32],[32,32],2,8,1,0,1])",
        R"(["TC",2,"f16",[64,64,32],[32,32],2,8,1,0,65])",
        R"(["TC",2,"f16",[64,64,32],[32,32],2,8,1,0,2,7])"}) {
    absl::StatusOr<Step> s = StepFromJson(nlohmann::json::parse(text));
    EXPECT_FALSE(s.ok()) << text;
  }
}

TEST(TensorCoreStep, RejectsStagesAndShapesItCannotTake) {
  const ir::ComputeDAG mm = BuildOpOrDie("matmul", {{64, 32}, {32, 48}}, ir::ScalarType::kFloat16);
  const State s = State::Initial(mm);
  const int c = SumReductionStage(s);
  TensorCoreStep t;
  t.stage_id = c;
  t.kind = "f16";
  // Not matmul-like: the cast stage (no reduction) and a placeholder.
  t.stage_id = c + 1;
  absl::StatusOr<State> r = ApplyStep(s, t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("invalid_schedule"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("'C'"), std::string::npos) << r.status();
  t.stage_id = 0;
  EXPECT_FALSE(ApplyStep(s, t).ok());
  t.stage_id = c;
  // Fragment shapes the kind does not support.
  t.warp_m = 24;
  r = ApplyStep(s, t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("24x32"), std::string::npos) << r.status();
  t.warp_m = 32;
  t.block_k = 8;  // f16 needs k in multiples of 16
  r = ApplyStep(s, t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("block_k 8"), std::string::npos) << r.status();
  t.block_k = 32;
  // A kind that does not match the operands, and an unknown one.
  t.kind = "tf32";
  r = ApplyStep(s, t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("float16"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("64x48x32"), std::string::npos) << r.status();
  t.kind = "int8";
  EXPECT_FALSE(ApplyStep(s, t).ok());
  t.kind = "f16";
  // An elementwise stage, and a reduction that is not a product (a row sum).
  const ir::ComputeDAG relu = BuildOpOrDie("relu", {{64, 64}}, ir::ScalarType::kFloat16);
  TensorCoreStep u = t;
  u.stage_id = 1;
  EXPECT_FALSE(ApplyStep(State::Initial(relu), u).ok());
  const ir::ComputeDAG sum =
      BuildOpOrDie("reduce_sum", {{64, 64}}, ir::ScalarType::kFloat32, {{"axes", "1"}});
  u.kind = "tf32x3";
  u.stage_id = SumReductionStage(State::Initial(sum));
  r = ApplyStep(State::Initial(sum), u);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not matmul-like"), std::string::npos) << r.status();
  // A depthwise convolution reads its channel in both factors: the refusal names that axis.
  const ir::ComputeDAG dw = BuildOpOrDie("depthwise_conv2d_nchw", {{1, 16, 8, 8}, {16, 1, 3, 3}},
                                         ir::ScalarType::kFloat16, {{"padding", "1"}});
  u.kind = "f16";
  u.stage_id = SumReductionStage(State::Initial(dw));
  r = ApplyStep(State::Initial(dw), u);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("read by both factors: 'k'"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("depthwise"), std::string::npos) << r.status();
  // An epilogue count past the program's last stage says how many fit (dense + bias + relu in
  // bfloat16: the count that applies, found by trying, then one more).
  const ir::ComputeDAG dbr =
      BuildOpOrDie("dense_bias_relu", {{64, 128}, {128, 128}, {128}}, ir::ScalarType::kBFloat16);
  TensorCoreStep d = t;
  d.kind = "bf16";
  d.block_m = d.block_n = d.warp_m = d.warp_n = 64;
  d.stage_id = SumReductionStage(State::Initial(dbr));
  int fit = 0;
  for (d.epilogue = 0; d.epilogue <= 4; ++d.epilogue) {
    if (ApplyStep(State::Initial(dbr), d).ok()) fit = d.epilogue;
  }
  ASSERT_GE(fit, 1);
  d.epilogue = fit + 1;
  r = ApplyStep(State::Initial(dbr), d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(absl::StrCat("at most ", fit, " fit here")),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("is a program output"), std::string::npos) << r.status();
  // A valid step, then a loop step on the stage it fixed.
  absl::StatusOr<State> ok = ApplyStep(s, t);
  ASSERT_TRUE(ok.ok()) << ok.status();
  SplitStep sp;
  sp.stage_id = c;
  sp.iter_id = 0;
  sp.lengths = {std::optional<int64_t>(4)};
  r = ApplyStep(*ok, sp);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor_core"), std::string::npos) << r.status();
  // Lowering for the CPU, or for a GPU without mma.sync m16n8k16 (before sm_80), is an invalid
  // schedule, not a crash.
  absl::StatusOr<LoweredKernel> cpu = Lower(mm, *ok, Target());
  ASSERT_FALSE(cpu.ok());
  EXPECT_NE(cpu.status().message().find("invalid_schedule"), std::string::npos) << cpu.status();
  Target volta = CudaTarget();
  volta.arch = "sm_70";
  absl::StatusOr<LoweredKernel> old = Lower(mm, *ok, volta);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("sm_80"), std::string::npos) << old.status();
  // Values whose products would overflow are refused by their bounds first.
  TensorCoreStep huge = t;
  huge.pad = int64_t{1} << 62;
  r = ApplyStep(s, huge);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pad 4611686018427387904 is outside 0..64"),
            std::string::npos)
      << r.status();
  huge = t;
  huge.block_m = -32;
  r = ApplyStep(s, huge);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("block_m -32 is outside"), std::string::npos) << r.status();
}

// One random problem and configuration.
using Case = testing::TensorCoreCase;

Case RandomCase(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  Case c;
  const ir::ScalarType types[] = {ir::ScalarType::kFloat16, ir::ScalarType::kBFloat16,
                                  ir::ScalarType::kFloat32};
  c.dtype = types[rng() % 3];
  const int64_t m = pick(1, 70), n = pick(1, 70), k = pick(1, 70);
  switch (rng() % 7) {
    case 0: {
      testing::OpCase mm = testing::RandomLayoutMatmul(rng, m, n, k);
      c.op = mm.op;
      c.shapes = mm.shapes;
      c.attrs = mm.attrs;
      break;
    }
    case 1:
      c.op = "dense_bias_relu";
      c.shapes = {{m, k}, {n, k}, {n}};
      break;
    case 2:
      c.op = "batch_matmul";
      c.shapes = {{pick(1, 3), m, k}, {1, k, n}};
      c.shapes[1][0] = c.shapes[0][0];
      break;
    case 3:
      c.op = "matmul_scale_residual";
      c.shapes = {{m, k}, {k, n}, {m, n}};
      break;
    case 4:
    case 5: {
      const bool nhwc = rng() % 2;
      c.op = nhwc ? "conv2d_nhwc" : "conv2d_nchw";
      const int64_t batch = pick(1, 2), ch = pick(1, 12), kout = pick(1, 20);
      const int64_t r = pick(1, 3), stride = pick(1, 2), pad = pick(0, 1), dil = pick(1, 2);
      const int64_t hw = pick(std::max<int64_t>(3, (r - 1) * dil + 1), 9);
      c.attrs = {{"stride", std::to_string(stride)},
                 {"padding", std::to_string(pad)},
                 {"dilation", std::to_string(dil)}};
      c.shapes = nhwc ? std::vector<std::vector<int64_t>>{{batch, hw, hw, ch}, {r, r, ch, kout}}
                      : std::vector<std::vector<int64_t>>{{batch, ch, hw, hw}, {kout, ch, r, r}};
      break;
    }
    default:
      c.op = "dense";
      c.attrs = {{"bias", "true"}};
      c.shapes = {{m, k}, {n, k}, {n}};
      break;
  }
  TensorCoreStep& t = c.step;
  t.kind = c.dtype == ir::ScalarType::kFloat16    ? "f16"
           : c.dtype == ir::ScalarType::kBFloat16 ? "bf16"
                                                  : "tf32x3";
  const int64_t kk = ir::MmaK(*ir::ParseMmaKind(t.kind));
  t.warp_m = 16 * pick(1, 2);
  t.warp_n = 8 * pick(1, 4);
  t.block_m = t.warp_m * pick(1, 2);
  t.block_n = t.warp_n * pick(1, 2);
  t.block_k = kk * pick(1, 3);
  t.pipeline = static_cast<int>(pick(1, 4));
  t.pad = (rng() & 1) ? 16 / ir::BytesOf(ir::MmaOperandType(*ir::ParseMmaKind(t.kind))) : 0;
  t.raster = pick(1, 3);
  t.split_k = (rng() % 3 == 0) ? static_cast<int>(pick(2, 3)) : 1;
  return c;
}

// |got - ref| ≤ tol · max(1, |ref|) on every output; the output's own rounding sets tol: one
// float16 / bfloat16 ulp near 1 (the accumulation order may flip a rounding), and float32
// accuracy for 3xTF32 (one TF32 mma would be off by about 1e-3).
double Tolerance(ir::ScalarType t) {
  switch (t) {
    case ir::ScalarType::kFloat16:
      return 2e-3;
    case ir::ScalarType::kBFloat16:
      return 1.6e-2;
    default:
      return 1e-4;
  }
}

TEST(TensorCoreStep, RandomSchedulesMatchTheUnscheduledProgram) {
  std::mt19937_64 rng(20261201);
  int run = 0;
  for (int trial = 0; run < 220 && trial < 1000; ++trial) {
    Case c = RandomCase(rng);
    const ir::ComputeDAG dag = BuildOpOrDie(c.op, c.shapes, c.dtype, c.attrs);
    const State s = State::Initial(dag);
    c.step.stage_id = SumReductionStage(s);
    ASSERT_GE(c.step.stage_id, 0) << c.op;
    absl::StatusOr<State> st = ApplyWithEpilogue(s, c.step);
    ASSERT_TRUE(st.ok()) << c.op << ": " << st.status();
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, CudaTarget());
    ASSERT_TRUE(k.ok()) << k.status() << "\n" << st->ToString();
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 1000 + trial);
    absl::StatusOr<ir::BufferMap> got = RunLowered(k->nest, inputs);
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << k->nest;
    absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const double err = testing::MaxRelError(dag, *got, *ref);
    EXPECT_LE(err, Tolerance(c.dtype))
        << c.op << " " << ir::TypeName(c.dtype) << " " << st->steps().back().index() << " "
        << StepToString(st->steps().back()) << "\n"
        << k->nest;
    ++run;
  }
  EXPECT_GE(run, 220);
}

// A small TF32-kind step on `dag`'s reduction: 32×16×16 blocks of 16×8 warps (mma.sync, pad 4)
// or 64×16×16 of one 64×16 warpgroup (wgmma).
TensorCoreStep SmallTf32Step(const ir::ComputeDAG& dag, const std::string& kind, bool wgmma,
                             int pipeline) {
  TensorCoreStep t;
  t.stage_id = SumReductionStage(State::Initial(dag));
  t.kind = kind;
  t.block_m = wgmma ? 64 : 32;
  t.block_n = 16;
  t.block_k = 16;
  t.warp_m = wgmma ? 64 : 16;
  t.warp_n = wgmma ? 16 : 8;
  t.pipeline = pipeline;
  t.pad = wgmma ? 0 : 4;
  t.warpgroup = wgmma;
  return t;
}

// Float32 operands that cannot take 16-byte copies (a padded convolution's im2col input, tiles past
// the extents) are gathered by zero-filling async copies (async stores of Select(cond, Load, 0)),
// on both instructions and every ring depth, and still compute the unscheduled program; a half
// matmul of whole tiles keeps its plain 16-byte copies.
TEST(TensorCoreStep, Float32GathersUseZeroFillingAsyncCopies) {
  struct Problem {
    std::string op;
    std::vector<std::vector<int64_t>> shapes;
    std::map<std::string, std::string> attrs;
  };
  const Problem problems[] = {
      {"conv2d_nchw", {{2, 8, 9, 9}, {24, 8, 3, 3}}, {{"padding", "1"}}},
      {"conv2d_nhwc", {{1, 7, 7, 12}, {3, 3, 12, 20}}, {{"padding", "1"}, {"stride", "2"}}},
      {"matmul", {{37, 29}, {29, 23}}, {}}};
  for (const Problem& p : problems) {
    const ir::ComputeDAG dag = BuildOpOrDie(p.op, p.shapes, ir::ScalarType::kFloat32, p.attrs);
    for (const bool wgmma : {false, true}) {
      for (const int pipeline : {1, 3}) {
        const TensorCoreStep t = SmallTf32Step(dag, "tf32x3", wgmma, pipeline);
        const std::string what =
            absl::StrCat(p.op, wgmma ? " wgmma" : " mma.sync", " pipeline ", pipeline);
        absl::StatusOr<State> st = ApplyWithEpilogue(State::Initial(dag), t);
        ASSERT_TRUE(st.ok()) << what << ": " << st.status();
        absl::StatusOr<LoweredKernel> kern = Lower(dag, *st, CudaTarget());
        ASSERT_TRUE(kern.ok()) << what << ": " << kern.status();
        std::ostringstream text;
        text << kern->nest;
        EXPECT_NE(text.str().find("= async_copy select("), std::string::npos) << what;
        const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 17);
        absl::StatusOr<ir::BufferMap> got = RunLowered(kern->nest, inputs);
        ASSERT_TRUE(got.ok()) << what << ": " << got.status();
        absl::StatusOr<ir::BufferMap> ref = ir::RunReference(dag, inputs);
        ASSERT_TRUE(ref.ok()) << ref.status();
        EXPECT_LE(testing::MaxRelError(dag, *got, *ref), 1e-4) << what;
      }
    }
  }
  const ir::ComputeDAG half =
      BuildOpOrDie("matmul", {{64, 32}, {32, 32}}, ir::ScalarType::kFloat16, {});
  TensorCoreStep t;
  t.stage_id = SumReductionStage(State::Initial(half));
  t.kind = "f16";
  t.block_m = 32;
  t.block_n = 16;
  t.block_k = 16;
  t.warp_m = 16;
  t.warp_n = 8;
  t.pipeline = 3;
  absl::StatusOr<State> st = ApplyWithEpilogue(State::Initial(half), t);
  ASSERT_TRUE(st.ok()) << st.status();
  absl::StatusOr<LoweredKernel> kern = Lower(half, *st, CudaTarget());
  ASSERT_TRUE(kern.ok()) << kern.status();
  std::ostringstream text;
  text << kern->nest;
  EXPECT_NE(text.str().find("= async_copy "), std::string::npos);
  EXPECT_EQ(text.str().find("= async_copy select("), std::string::npos);
}

// One TF32 mma rounds each operand to 10 mantissa bits (nearest, ties away): the result matches
// a float64 matmul of the rounded operands, not the float32 one. The same for wgmma, whose
// operand tiles the lowering fills with the rounded values.
TEST(TensorCoreStep, Tf32RoundsOperandsToNearest) {
  const int64_t m = 40, n = 24, k = 56;
  const ir::ComputeDAG dag = BuildOpOrDie("matmul", {{m, k}, {k, n}}, ir::ScalarType::kFloat32);
  for (const bool wgmma : {false, true}) {
    const TensorCoreStep t = SmallTf32Step(dag, "tf32", wgmma, 2);
    absl::StatusOr<State> st = ApplyStep(State::Initial(dag), t);
    ASSERT_TRUE(st.ok()) << st.status();
    absl::StatusOr<LoweredKernel> kern = Lower(dag, *st, CudaTarget());
    ASSERT_TRUE(kern.ok()) << kern.status();
    const ir::BufferMap inputs = ir::MakeRandomInputs(dag, 5);
    absl::StatusOr<ir::BufferMap> got = RunLowered(kern->nest, inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    // Round to nearest TF32 by hand: keep 10 of float32's 23 mantissa bits.
    auto tf32 = [](double x) {
      int e = 0;
      const double f = std::frexp(x, &e);  // x = f · 2^e, 0.5 ≤ |f| < 1
      const double scaled = f * 2048.0;    // 11 significant bits
      return std::ldexp(std::trunc(scaled + (scaled >= 0 ? 0.5 : -0.5)), e - 11);
    };
    const ir::HostBuffer& a = inputs.at("A");
    const ir::HostBuffer& b = inputs.at("B");
    const ir::HostBuffer& c = got->at("C");
    double worst_tf32 = 0, worst_fp32 = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double rounded = 0, exact = 0;
        for (int64_t q = 0; q < k; ++q) {
          rounded += tf32(a.data[i * k + q]) * tf32(b.data[q * n + j]);
          exact += a.data[i * k + q] * b.data[q * n + j];
        }
        worst_tf32 = std::max(worst_tf32, std::fabs(c.data[i * n + j] - rounded));
        worst_fp32 = std::max(worst_fp32, std::fabs(c.data[i * n + j] - exact));
      }
    }
    EXPECT_LE(worst_tf32, 1e-5) << (wgmma ? "wgmma" : "mma.sync");
    EXPECT_GE(worst_fp32, 1e-4) << (wgmma ? "wgmma" : "mma.sync");
  }
}

}  // namespace
}  // namespace tilesearch::schedule
