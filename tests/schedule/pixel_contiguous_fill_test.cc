// Tensor-core schedules of convolutions whose window has extent 1 along some axes, without
// repack: those reduce axes read as 0, so a 1×1 NCHW convolution's input X[n, c, h, w] is a plain
// tile contiguous along the output pixels (an MN-major A) and its weights [K, C, 1, 1] a plain
// K-major B. Both fill by vector cp.async (the input's copies chunked inside rows of w). Random
// such schedules (stride 1 and 2, padding, widths that do and do not take whole vectors; mma.sync
// and wgmma; f16, bf16, tf32x3 and one-pass tf32) run in the interpreter against float64.
#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lower_test_util.h"
#include "nlohmann/json.hpp"
#include "schedule/step_json.h"

namespace tilesearch::schedule {
namespace {

using testing::BuildOpOrDie;
using testing::CudaTarget;
using testing::SumReductionStage;

struct Case {
  std::vector<std::vector<int64_t>> shapes;
  std::map<std::string, std::string> attrs;
  ir::ScalarType dtype = ir::ScalarType::kFloat32;
  TensorCoreStep step;
  bool plain_input = false;  // stride 1, no padding: X is read at [n, c, h, w]
};

Case RandomCase(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  Case c;
  c.dtype = testing::DrawMmaKind(rng, &c.step);
  const int64_t stride = rng() % 4 == 0 ? 2 : 1;
  const int64_t pad = rng() % 5 == 0 ? 1 : 0;
  c.plain_input = stride == 1 && pad == 0;
  c.attrs = {{"stride", std::to_string(stride)}, {"padding", std::to_string(pad)}};
  // Widths of whole 16-byte vectors, of whole 8-byte ones only, and of neither.
  const int64_t widths[] = {4, 8, 12, 16, 6, 7};
  const int64_t w = widths[rng() % 6], batch = pick(1, 2), ch = 8 * pick(1, 3);
  // Two in three: pixels in whole 128-pixel tiles (h·w·batch a multiple of 128); else ragged.
  const int64_t h = rng() % 3 != 0 ? 128 / std::gcd<int64_t>(128, batch * w) : pick(1, 4);
  const int64_t kout = rng() % 2 ? 32 : 8 * pick(1, 5);
  c.shapes = {{batch, ch, h, w}, {kout, ch, 1, 1}};
  TensorCoreStep& t = c.step;
  const bool tf32 = c.dtype == ir::ScalarType::kFloat32;
  t.warpgroup = rng() % 3 != 0;
  t.raster = pick(1, 2);
  t.split_k = rng() % 5 == 0 ? 2 : 1;
  if (t.warpgroup) {
    t.warp_m = 64;
    const int64_t ns[] = {8, 16, 32};
    t.warp_n = ns[rng() % 3];
    t.block_m = 64 * pick(1, 2);
    t.block_n = t.warp_n * pick(1, 2);
    t.block_k = (rng() % 2 ? 16 : 32) / (tf32 ? 2 : 1);
    t.pipeline = static_cast<int>(pick(1, 4));
    t.pad = 0;
  } else {
    t.warp_m = 16 * pick(1, 2);
    t.warp_n = 8 * pick(1, 2);
    t.block_m = t.warp_m * pick(1, 2);
    t.block_n = t.warp_n * pick(1, 2);
    t.block_k = tf32 ? 8 * pick(1, 2) : 16;
    t.pipeline = static_cast<int>(pick(1, 3));
    t.pad = rng() % 2 ? 16 / (tf32 ? 4 : 2) : 0;
  }
  return c;
}

// The widest vector (elements) of 16, 8 or 4 bytes, at least two elements, dividing `extent`;
// 0 if none.
int64_t WidestVector(int64_t extent, int64_t element_bytes) {
  for (int64_t bytes : {16, 8, 4}) {
    const int64_t vec = bytes / element_bytes;
    if (vec >= 2 && extent % vec == 0) return vec;
  }
  return 0;
}

TEST(PixelContiguousFill, RandomOneByOneConvolutionsMatchTheReference) {
  std::mt19937_64 rng(20261205);
  int run = 0, pixel_vectors = 0;
  for (int trial = 0; run < 160 && trial < 800; ++trial) {
    Case c = RandomCase(rng);
    const ir::ComputeDAG dag = BuildOpOrDie("conv2d_nchw", c.shapes, c.dtype, c.attrs);
    const State s = State::Initial(dag);
    c.step.stage_id = SumReductionStage(s);
    ASSERT_GE(c.step.stage_id, 0);
    absl::StatusOr<State> st = ApplyStep(s, c.step);
    ASSERT_TRUE(st.ok()) << st.status();
    absl::StatusOr<LoweredKernel> k = Lower(dag, *st, CudaTarget());
    if (!testing::LoweredOrWithinLimits(k)) continue;
    const std::string text = ir::ToString(k->nest);
    const std::string what =
        absl::StrCat(nlohmann::json(c.shapes).dump(), " ", nlohmann::json(c.attrs).dump(), " ",
                     StepToString(st->steps().back()));
    // The input's tile: vector copies along the pixels exactly where the input is plain, the
    // image width takes whole vectors and the tiles have no ragged edge.
    const int64_t eb = c.dtype == ir::ScalarType::kFloat32 ? 4 : 2;
    const int64_t pixels = c.shapes[0][0] * c.shapes[0][2] * c.shapes[0][3];
    const int64_t vec = WidestVector(c.shapes[0][3], eb);
    // (No tile may reach past k. Both operands take cp.async or neither: half weights need whole
    // tiles of output channels, float32 ones gather element by element otherwise.)
    const int64_t k_tiles = c.shapes[0][1] / c.step.block_k;
    const int64_t split = std::min<int64_t>(c.step.split_k, k_tiles);
    const bool no_k_guard = c.shapes[0][1] % c.step.block_k == 0 && k_tiles % split == 0;
    const bool want = c.plain_input && vec > 0 && pixels % c.step.block_m == 0 &&
                      c.step.block_m % vec == 0 && no_k_guard &&
                      (eb == 4 || c.shapes[1][0] % c.step.block_n == 0);
    const bool vector_fill =
        text.find(absl::StrCat(".A.shared.v in [0, ", vec, ") vectorize")) != std::string::npos &&
        text.find("async_copy") != std::string::npos;
    EXPECT_EQ(vector_fill, want) << what;
    if (want) ++pixel_vectors;
    absl::StatusOr<double> err = testing::RelErrorToFloat64(dag, k->nest, 4000 + trial);
    ASSERT_TRUE(err.ok()) << err.status() << "\n" << what;
    EXPECT_LE(*err, testing::TensorCoreTolerance(c.step, c.dtype)) << what;
    ++run;
  }
  EXPECT_GE(run, 160);
  EXPECT_GE(pixel_vectors, 15);  // vector fills along the pixels were exercised, the others too
}

}  // namespace
}  // namespace tilesearch::schedule
