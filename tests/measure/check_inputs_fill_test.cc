// Counter-based check inputs (measure/check_inputs_fill.h): the same bits for every thread count,
// the documented generator recomputed independently, distribution bounds and sample moments
// against float64 expectations, seeding by seed and tensor name; and the chunked PackBuffer /
// UnpackBuffer / PoisonBytes / CompareOutput against per-element loops.
#include "measure/check_inputs_fill.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "base/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/compute_dag.h"
#include "ir/tensor.h"
#include "measure/checker.h"

namespace tilesearch::measure {
namespace {

using ::testing::HasSubstr;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;
using Axes = std::vector<ir::Expr>;

constexpr CheckDistribution kDistributions[] = {CheckDistribution::kUniformSymmetric,
                                                CheckDistribution::kUniformPositive,
                                                CheckDistribution::kNormalOffset};
constexpr ir::ScalarType kDtypes[] = {ir::ScalarType::kFloat32,  ir::ScalarType::kFloat16,
                                      ir::ScalarType::kBFloat16, ir::ScalarType::kInt32,
                                      ir::ScalarType::kInt64,    ir::ScalarType::kBool};

// Enough samples for the moment tests (standard errors ~1e-3 of the scale).
constexpr int64_t kLarge = (int64_t{1} << 20) + 12345;
// Split into chunks by the explicit thread counts of the bit-identity tests.
constexpr int64_t kMedium = 300007;

using ::tilesearch::testing::Ok;

ir::HostBuffer Filled(ir::ScalarType dtype, int64_t n, CheckDistribution d, uint64_t stream,
                      int threads) {
  ir::HostBuffer b = ir::HostBuffer::Zeros(dtype, {n});
  FillCheckInput(d, stream, threads, &b);
  return b;
}

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// The SplitMix64 finalizer, written out again from Steele et al. (the test's own copy).
uint64_t RefSplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t RefHash(uint64_t stream, uint64_t index, uint64_t slot) {
  return RefSplitMix(stream ^ RefSplitMix(2 * index + slot));
}
double RefUnit(uint64_t h) { return std::ldexp(static_cast<double>(h >> 11), -53); }

struct Moments {
  double mean = 0, sd = 0, min = 0, max = 0;
};
Moments MomentsOf(const std::vector<double>& v) {
  Moments m;
  m.min = m.max = v[0];
  double sum = 0;
  for (double x : v) {
    sum += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean = sum / v.size();
  double sq = 0;
  for (double x : v) sq += (x - m.mean) * (x - m.mean);
  m.sd = std::sqrt(sq / (v.size() - 1));
  return m;
}

// Pearson correlation of neighbouring elements (a counter-based generator with a weak hash shows
// it first).
double LagOneCorrelation(const std::vector<double>& v, const Moments& m) {
  double c = 0;
  for (size_t i = 0; i + 1 < v.size(); ++i) c += (v[i] - m.mean) * (v[i + 1] - m.mean);
  return c / ((v.size() - 1) * m.sd * m.sd);
}

TEST(FillCheckInputTest, SameBitsForEveryThreadCount) {
  for (ir::ScalarType dtype : kDtypes) {
    for (CheckDistribution d : kDistributions) {
      SCOPED_TRACE(absl::StrCat(ir::TypeName(dtype), " ", CheckDistributionName(d)));
      const ir::HostBuffer one = Filled(dtype, kMedium, d, 0x1234, 1);
      for (int threads : {2, 3, 8}) {
        EXPECT_TRUE(SameBits(one.data, Filled(dtype, kMedium, d, 0x1234, threads).data))
            << threads << " threads";
      }
    }
  }
}

TEST(FillCheckInputTest, MakeCheckInputsUsesTheNamedStreamOnLargeBuffers) {
  // X has 2^20 + 3 elements, so MakeCheckInputs fills it with ThreadsFor(n) threads.
  const int64_t n = (int64_t{1} << 20) + 3;
  ir::Tensor x = Ok(ir::Placeholder("X", {n}));
  ir::Tensor y = Ok(ir::Compute("Y", {n}, [&](const Axes& ax) { return x(ax[0]) + x(ax[0]); }));
  ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({y}));
  for (CheckDistribution d : kDistributions) {
    const ir::BufferMap in = MakeCheckInputs(dag, d, 99);
    EXPECT_TRUE(
        SameBits(in.at("X").data,
                 Filled(ir::ScalarType::kFloat32, n, d, CheckInputStreamSeed(99, "X"), 1).data))
        << CheckDistributionName(d);
  }
}

// The on-demand source gives FillCheckInput's bits element by element and in any sub-range, and
// MakeGeneratedCheckInputs' buffers (no data) those of MakeCheckInputs.
TEST(FillCheckInputTest, GeneratedSourceGivesTheFilledBits) {
  for (ir::ScalarType dtype : kDtypes) {
    for (CheckDistribution d : kDistributions) {
      SCOPED_TRACE(absl::StrCat(ir::TypeName(dtype), " ", CheckDistributionName(d)));
      const ir::HostBuffer filled = Filled(dtype, kMedium, d, 0x5678, 3);
      const std::shared_ptr<const ir::ElementSource> source = CheckInputSource(d, 0x5678, dtype);
      std::vector<double> ranged(filled.data.size());
      const int64_t cut = kMedium / 3 + 7;  // two ranges, not aligned to anything
      source->Fill(0, cut, ranged.data());
      source->Fill(cut, kMedium, ranged.data() + cut);
      EXPECT_TRUE(SameBits(filled.data, ranged));
      for (int64_t i : {int64_t{0}, int64_t{1}, cut, kMedium - 1}) {
        const double one = source->At(i);
        EXPECT_EQ(std::memcmp(&one, &filled.data[static_cast<size_t>(i)], sizeof(double)), 0) << i;
      }
    }
  }
  ir::Tensor x = Ok(ir::Placeholder("X", {37, 5}));
  ir::Tensor w = Ok(ir::Placeholder("W", {5}, ir::ScalarType::kBFloat16));
  ir::Tensor y = Ok(ir::Compute("Y", {37, 5}, [&](const Axes& ax) {
    return x(ax[0], ax[1]) * ir::Cast(ir::ScalarType::kFloat32, w(ax[1]));
  }));
  ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({y}));
  for (CheckDistribution d : kDistributions) {
    const ir::BufferMap held = MakeCheckInputs(dag, d, 7);
    const ir::BufferMap generated = MakeGeneratedCheckInputs(dag, d, 7);
    ASSERT_EQ(generated.size(), held.size());
    for (const auto& [name, h] : held) {
      const ir::HostBuffer& g = generated.at(name);
      EXPECT_TRUE(g.generated());
      EXPECT_TRUE(g.data.empty());
      EXPECT_EQ(g.dtype, h.dtype);
      EXPECT_EQ(g.shape, h.shape);
      std::vector<double> values(h.data.size());
      g.source->Fill(0, g.NumElements(), values.data());
      EXPECT_TRUE(SameBits(values, h.data)) << name << " " << CheckDistributionName(d);
    }
  }
}

// The chunked packing of a generated buffer gives PackBuffer's bytes of the filled buffer, at
// every chunk size (several chunks and a partial last one), for every storage width; a sink's
// error stops it; a held buffer or a chunk size below 1 is refused.
TEST(FillCheckInputTest, PackGeneratedChunksConcatenatesToPackBuffer) {
  const int64_t n = 1000003;
  for (ir::ScalarType dtype : kDtypes) {
    SCOPED_TRACE(ir::TypeName(dtype));
    const ir::HostBuffer filled = Filled(dtype, n, CheckDistribution::kNormalOffset, 0x99, 1);
    const std::vector<std::byte> whole = PackBuffer(filled);
    ir::HostBuffer generated;
    generated.dtype = dtype;
    generated.shape = {n};
    generated.source = CheckInputSource(CheckDistribution::kNormalOffset, 0x99, dtype);
    for (int64_t chunk : {int64_t{1} << 20, int64_t{65536}, n, n + 5}) {
      std::vector<std::byte> joined;
      int calls = 0;
      ASSERT_THAT(PackGeneratedChunks(generated, chunk,
                                      [&](int64_t offset, const std::vector<std::byte>& bytes) {
                                        EXPECT_EQ(offset, static_cast<int64_t>(joined.size()));
                                        joined.insert(joined.end(), bytes.begin(), bytes.end());
                                        ++calls;
                                        return absl::OkStatus();
                                      }),
                  IsOk());
      EXPECT_EQ(calls, (n + chunk - 1) / chunk) << chunk;
      EXPECT_TRUE(joined == whole) << chunk;
    }
  }
  ir::HostBuffer generated;
  generated.shape = {10};
  generated.source = CheckInputSource(CheckDistribution::kUniformSymmetric, 1, generated.dtype);
  int calls = 0;
  EXPECT_THAT(PackGeneratedChunks(generated, 3,
                                  [&](int64_t, const std::vector<std::byte>&) {
                                    ++calls;
                                    return absl::InternalError("copy failed");
                                  }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("copy failed")));
  EXPECT_EQ(calls, 1);
  auto never = [](int64_t, const std::vector<std::byte>&) { return absl::OkStatus(); };
  EXPECT_THAT(PackGeneratedChunks(generated, 0, never),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("chunks of 0")));
  EXPECT_THAT(PackGeneratedChunks(ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {4}), 2, never),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("source missing")));
}

TEST(FillCheckInputTest, ValuesFollowTheDocumentedFormulas) {
  const uint64_t stream = CheckInputStreamSeed(5, "W");
  const int64_t n = 5000;
  const ir::HostBuffer sym = Filled(ir::ScalarType::kFloat32, n, kDistributions[0], stream, 3);
  const ir::HostBuffer pos = Filled(ir::ScalarType::kFloat32, n, kDistributions[1], stream, 3);
  const ir::HostBuffer nor = Filled(ir::ScalarType::kFloat32, n, kDistributions[2], stream, 3);
  const ir::HostBuffer isym = Filled(ir::ScalarType::kInt32, n, kDistributions[0], stream, 3);
  const ir::HostBuffer ipos = Filled(ir::ScalarType::kInt64, n, kDistributions[1], stream, 3);
  const ir::HostBuffer inor = Filled(ir::ScalarType::kInt32, n, kDistributions[2], stream, 3);
  const ir::HostBuffer bits = Filled(ir::ScalarType::kBool, n, kDistributions[2], stream, 3);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h0 = RefHash(stream, i, 0), h1 = RefHash(stream, i, 1);
    const double u0 = RefUnit(h0), u1 = RefUnit(h1);
    // float32 never rounds -1 + 2u (< 1 - 2^-52) up to 1, so no redraw happens here.
    ASSERT_EQ(sym.data[i], static_cast<double>(static_cast<float>(-1.0 + 2.0 * u0))) << i;
    ASSERT_EQ(pos.data[i], static_cast<double>(static_cast<float>(u0))) << i;
    const double gauss = std::sqrt(-2.0 * std::log(1.0 - u0)) * std::cos(2.0 * M_PI * u1);
    // score.py's NORMAL_BY_DTYPE for float32; integers keep normal(2, 8).
    ASSERT_EQ(nor.data[i], static_cast<double>(static_cast<float>(2.0 + 32.0 * gauss))) << i;
    const double normal = 2.0 + 8.0 * gauss;
    ASSERT_EQ(isym.data[i], static_cast<double>(-16 + static_cast<int64_t>(h0 % 32))) << i;
    ASSERT_EQ(ipos.data[i], static_cast<double>(h0 % 16)) << i;
    ASSERT_EQ(inor.data[i], std::nearbyint(normal)) << i;
    ASSERT_EQ(bits.data[i], static_cast<double>(h0 >> 63)) << i;
  }
}

TEST(FillCheckInputTest, StreamSeedCombinesSeedAndFnvOfTheName) {
  // FNV-1a-64 of "X": offset basis xor 'X', times the FNV prime.
  const uint64_t fnv_x = (0xcbf29ce484222325ull ^ 'X') * 0x100000001b3ull;
  EXPECT_EQ(CheckInputStreamSeed(7, "X"), RefSplitMix(7 ^ RefSplitMix(fnv_x)));
}

TEST(FillCheckInputTest, UniformSymmetricBoundsAndMoments) {
  const ir::HostBuffer b =
      Filled(ir::ScalarType::kFloat32, kLarge, CheckDistribution::kUniformSymmetric, 17, 4);
  const Moments m = MomentsOf(b.data);
  EXPECT_GE(m.min, -1.0);
  EXPECT_LT(m.max, 1.0);
  EXPECT_LT(m.min, -0.999);
  EXPECT_GT(m.max, 0.999);
  // Standard error of the mean: sqrt(1/3 / 1.06e6) = 5.6e-4; of the deviation ~2.8e-4.
  EXPECT_NEAR(m.mean, 0.0, 5e-3);
  EXPECT_NEAR(m.sd, std::sqrt(1.0 / 3.0), 3e-3);
  EXPECT_NEAR(LagOneCorrelation(b.data, m), 0.0, 5e-3);
  // 64 equal bins each within 6 standard deviations of n / 64.
  std::vector<int64_t> bins(64, 0);
  for (double v : b.data) ++bins[static_cast<size_t>((v + 1.0) * 32.0)];
  const double expected = static_cast<double>(kLarge) / 64;
  for (int64_t c : bins) EXPECT_NEAR(c, expected, 6 * std::sqrt(expected));
}

TEST(FillCheckInputTest, UniformPositiveBoundsAndMoments) {
  const ir::HostBuffer b =
      Filled(ir::ScalarType::kFloat32, kLarge, CheckDistribution::kUniformPositive, 18, 4);
  const Moments m = MomentsOf(b.data);
  EXPECT_GE(m.min, 0.0);
  EXPECT_LT(m.max, 1.0);
  EXPECT_LT(m.min, 1e-3);
  EXPECT_GT(m.max, 0.999);
  EXPECT_NEAR(m.mean, 0.5, 2.5e-3);
  EXPECT_NEAR(m.sd, std::sqrt(1.0 / 12.0), 1.5e-3);
  EXPECT_NEAR(LagOneCorrelation(b.data, m), 0.0, 5e-3);
}

TEST(FillCheckInputTest, NormalMomentsAndShape) {
  const ir::HostBuffer b =
      Filled(ir::ScalarType::kFloat32, kLarge, CheckDistribution::kNormalOffset, 19, 4);
  const Moments m = MomentsOf(b.data);
  // score.py's normal(2, 32). Standard errors: 32 / 1030 = 0.031 for the mean, 0.022 for the
  // deviation.
  EXPECT_NEAR(m.mean, 2.0, 0.16);
  EXPECT_NEAR(m.sd, 32.0, 0.64);
  EXPECT_NEAR(LagOneCorrelation(b.data, m), 0.0, 5e-3);
  // A normal puts 68.27% within one deviation and 95.45% within two (float64 erf), unlike a
  // uniform or a triangle of the same moments.
  int64_t one = 0, two = 0, below = 0;
  for (double v : b.data) {
    one += std::fabs(v - 2.0) < 32.0;
    two += std::fabs(v - 2.0) < 64.0;
    below += v < 2.0;
  }
  const double n = static_cast<double>(b.data.size());
  EXPECT_NEAR(one / n, std::erf(1.0 / std::sqrt(2.0)), 3e-3);
  EXPECT_NEAR(two / n, std::erf(2.0 / std::sqrt(2.0)), 2e-3);
  EXPECT_NEAR(below / n, 0.5, 3e-3);
  // Box-Muller with u1 in (0, 1] never gives an infinity; 1e6 samples reach beyond 4 deviations.
  EXPECT_TRUE(std::isfinite(m.min) && std::isfinite(m.max));
  EXPECT_LT(m.min, 2.0 - 4 * 32.0);
  EXPECT_GT(m.max, 2.0 + 4 * 32.0);
}

// score.py's NORMAL_BY_DTYPE: float16 normal(0.5, 4) (its range ends at 65504), bfloat16 float32's.
TEST(FillCheckInputTest, HalfPrecisionNormalsFollowTheScorer) {
  const Moments f16 = MomentsOf(
      Filled(ir::ScalarType::kFloat16, kLarge, CheckDistribution::kNormalOffset, 7, 4).data);
  EXPECT_NEAR(f16.mean, 0.5, 0.02);
  EXPECT_NEAR(f16.sd, 4.0, 0.08);
  const Moments bf16 = MomentsOf(
      Filled(ir::ScalarType::kBFloat16, kLarge, CheckDistribution::kNormalOffset, 7, 4).data);
  EXPECT_NEAR(bf16.mean, 2.0, 0.16);
  EXPECT_NEAR(bf16.sd, 32.0, 0.64);
}

TEST(FillCheckInputTest, HalfPrecisionValuesAreRepresentableAndBelowTheUpperBound) {
  for (ir::ScalarType dtype : {ir::ScalarType::kFloat16, ir::ScalarType::kBFloat16}) {
    for (CheckDistribution d : kDistributions) {
      SCOPED_TRACE(absl::StrCat(ir::TypeName(dtype), " ", CheckDistributionName(d)));
      const ir::HostBuffer b = Filled(dtype, 200000, d, 23, 3);
      int64_t near_top = 0;
      for (double v : b.data) {
        ASSERT_EQ(v, ir::RoundToType(v, dtype));
        if (d != CheckDistribution::kNormalOffset) {
          ASSERT_LT(v, 1.0);
          ASSERT_GE(v, d == CheckDistribution::kUniformSymmetric ? -1.0 : 0.0);
          near_top += v > 0.99;
        }
      }
      // Values that round to 1 are redrawn, not clamped: the top 1% holds about 1% (or 0.5%).
      if (d != CheckDistribution::kNormalOffset) {
        EXPECT_GT(near_top, 200000 / 400);
      }
    }
  }
}

TEST(FillCheckInputTest, IntegerAndBoolRanges) {
  for (ir::ScalarType dtype : {ir::ScalarType::kInt32, ir::ScalarType::kInt64}) {
    for (CheckDistribution d : kDistributions) {
      SCOPED_TRACE(absl::StrCat(ir::TypeName(dtype), " ", CheckDistributionName(d)));
      const ir::HostBuffer b = Filled(dtype, 320000, d, 29, 3);
      std::map<double, int64_t> counts;
      for (double v : b.data) {
        ASSERT_EQ(v, std::trunc(v));
        ++counts[v];
      }
      if (d == CheckDistribution::kNormalOffset) {
        const Moments m = MomentsOf(b.data);
        EXPECT_NEAR(m.mean, 2.0, 0.1);
        // Rounding to integers adds variance 1/12.
        EXPECT_NEAR(m.sd, std::sqrt(64.0 + 1.0 / 12.0), 0.1);
        continue;
      }
      const double lo = d == CheckDistribution::kUniformSymmetric ? -16 : 0;
      const size_t values = d == CheckDistribution::kUniformSymmetric ? 32 : 16;
      ASSERT_EQ(counts.size(), values);
      EXPECT_EQ(counts.begin()->first, lo);
      EXPECT_EQ(counts.rbegin()->first, 15);
      const double expected = 320000.0 / values;
      for (const auto& [v, c] : counts) EXPECT_NEAR(c, expected, 6 * std::sqrt(expected)) << v;
    }
  }
  for (CheckDistribution d : kDistributions) {
    const ir::HostBuffer b = Filled(ir::ScalarType::kBool, kLarge, d, 31, 4);
    int64_t ones = 0;
    for (double v : b.data) {
      ASSERT_TRUE(v == 0 || v == 1);
      ones += v == 1;
    }
    EXPECT_NEAR(static_cast<double>(ones) / kLarge, 0.5, 3e-3) << CheckDistributionName(d);
  }
}

TEST(FillCheckInputTest, DifferentSeedsAndNamesGiveUnrelatedValues) {
  ir::Tensor a = Ok(ir::Placeholder("A", {300, 400}));
  ir::Tensor b = Ok(ir::Placeholder("B", {300, 400}));
  ir::Tensor c = Ok(ir::Compute("C", {300, 400},
                                [&](const Axes& ax) { return a(ax[0], ax[1]) + b(ax[0], ax[1]); }));
  ir::ComputeDAG dag = Ok(ir::ComputeDAG::Create({c}));
  for (CheckDistribution d : kDistributions) {
    const ir::BufferMap s1 = MakeCheckInputs(dag, d, 1);
    const ir::BufferMap s2 = MakeCheckInputs(dag, d, 2);
    auto equal_fraction = [](const std::vector<double>& x, const std::vector<double>& y) {
      int64_t same = 0;
      for (size_t i = 0; i < x.size(); ++i) same += x[i] == y[i];
      return static_cast<double>(same) / x.size();
    };
    // float32 draws coincide with probability ~2^-24 per element.
    EXPECT_LT(equal_fraction(s1.at("A").data, s1.at("B").data), 1e-3) << CheckDistributionName(d);
    EXPECT_LT(equal_fraction(s1.at("A").data, s2.at("A").data), 1e-3) << CheckDistributionName(d);
  }
}

TEST(ParallelChunksTest, CoversEveryIndexOnceInOrderedChunks) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{1000003}}) {
    for (int threads : {0, 1, 3, 7, 64}) {
      std::vector<int> hits(static_cast<size_t>(n), 0);
      std::vector<std::pair<int64_t, int64_t>> ranges(static_cast<size_t>(NumChunks(n, threads)));
      ParallelChunks(n, threads, [&](int64_t chunk, int64_t begin, int64_t end) {
        ranges[static_cast<size_t>(chunk)] = {begin, end};
        for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int h : hits) ASSERT_EQ(h, 1) << n << " " << threads;
      int64_t next = 0;
      for (const auto& [b, e] : ranges) {
        EXPECT_EQ(b, next);
        EXPECT_GT(e, b);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
  }
  EXPECT_EQ(ThreadsFor(1000), 1);
  EXPECT_GE(ThreadsFor(int64_t{1} << 30), 1);
  EXPECT_LE(ThreadsFor(int64_t{1} << 30), kMaxParallelThreads);
}

// Values that exercise every conversion: specials, float16 / bfloat16 ties and subnormals,
// out-of-range integers, plus pseudo-random magnitudes.
std::vector<double> PackValues(int64_t n) {
  const std::vector<double> special = {
      0.0,  -0.0,         NAN,           INFINITY, -INFINITY, 65504.0,      65520.0,
      1e-8, -3e-5,        1.0 + 0x1p-11, 0x1p-24,  0x1p-25,   1.0 + 0x1p-8, 3e38,
      -7.5, 2147483648.0, -2147483649.0, 1e19,     -1e19,     0.5};
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (i % 97 < static_cast<int64_t>(special.size())) {
      v[i] = special[i % 97];
    } else {
      const uint64_t h = RefSplitMix(static_cast<uint64_t>(i));
      v[i] = (RefUnit(h) - 0.5) * std::ldexp(1.0, static_cast<int>(h % 40) - 20);
    }
  }
  return v;
}

TEST(PackParallelTest, ParallelPackAndUnpackEqualPerElementLoops) {
  const int64_t n = kMedium;
  for (ir::ScalarType dtype :
       {ir::ScalarType::kFloat32, ir::ScalarType::kFloat16, ir::ScalarType::kBFloat16,
        ir::ScalarType::kInt32, ir::ScalarType::kInt64, ir::ScalarType::kBool}) {
    SCOPED_TRACE(ir::TypeName(dtype));
    ir::HostBuffer b = ir::HostBuffer::Zeros(dtype, {n});
    b.data = PackValues(n);
    const int64_t width = StorageBytes(dtype);
    const std::vector<std::byte> parallel = PackBufferWithThreads(b, 7);
    ASSERT_EQ(static_cast<int64_t>(parallel.size()), n * width);
    // The naive loop: one single-element buffer at a time (the serial path).
    std::vector<std::byte> naive(parallel.size());
    for (int64_t i = 0; i < n; ++i) {
      ir::HostBuffer one = ir::HostBuffer::Zeros(dtype, {1});
      one.data[0] = b.data[i];
      const std::vector<std::byte> bytes = PackBuffer(one);
      std::memcpy(naive.data() + i * width, bytes.data(), static_cast<size_t>(width));
    }
    ASSERT_EQ(std::memcmp(parallel.data(), naive.data(), naive.size()), 0);
    // Independent spot checks of the storage layout where C++ has the type.
    for (int64_t i = 0; i < n; i += 4099) {
      if (dtype == ir::ScalarType::kFloat32) {
        float f;
        std::memcpy(&f, parallel.data() + 4 * i, 4);
        const float want = static_cast<float>(b.data[i]);
        ASSERT_TRUE(std::memcmp(&f, &want, 4) == 0 || (std::isnan(f) && std::isnan(want))) << i;
      } else if (dtype == ir::ScalarType::kFloat16) {
        _Float16 h;
        std::memcpy(&h, parallel.data() + 2 * i, 2);
        const _Float16 want = static_cast<_Float16>(b.data[i]);  // one rounding from double
        ASSERT_TRUE(static_cast<double>(h) == static_cast<double>(want) ||
                    (std::isnan(static_cast<double>(h)) && std::isnan(b.data[i])))
            << i << " " << b.data[i];
      } else if (dtype == ir::ScalarType::kBool) {
        ASSERT_EQ(static_cast<int>(parallel[i]), b.data[i] != 0 ? 1 : 0) << i;
      }
    }

    // Unpack: parallel == one element at a time.
    ir::HostBuffer back = ir::HostBuffer::Zeros(dtype, {n});
    ASSERT_THAT(UnpackBufferWithThreads(parallel.data(), parallel.size(), &back, 5), IsOk());
    for (int64_t i = 0; i < n; ++i) {
      ir::HostBuffer one = ir::HostBuffer::Zeros(dtype, {1});
      ASSERT_THAT(UnpackBuffer(parallel.data() + i * width, static_cast<size_t>(width), &one),
                  IsOk());
      ASSERT_TRUE(std::memcmp(&one.data[0], &back.data[i], sizeof(double)) == 0 ||
                  (std::isnan(one.data[0]) && std::isnan(back.data[i])))
          << i;
    }
  }
}

TEST(PackParallelTest, AutomaticThreadCountGivesTheSameBytesAndValues) {
  // 2^20 + 7 elements: PackBuffer / UnpackBuffer choose ThreadsFor(n) chunks themselves.
  const int64_t n = (int64_t{1} << 20) + 7;
  for (ir::ScalarType dtype : {ir::ScalarType::kFloat32, ir::ScalarType::kFloat16}) {
    ir::HostBuffer b = ir::HostBuffer::Zeros(dtype, {n});
    b.data = PackValues(n);
    const std::vector<std::byte> serial = PackBufferWithThreads(b, 1);
    EXPECT_EQ(PackBuffer(b), serial) << ir::TypeName(dtype);
    ir::HostBuffer one = ir::HostBuffer::Zeros(dtype, {n});
    ir::HostBuffer automatic = ir::HostBuffer::Zeros(dtype, {n});
    ASSERT_THAT(UnpackBufferWithThreads(serial.data(), serial.size(), &one, 1), IsOk());
    ASSERT_THAT(UnpackBuffer(serial.data(), serial.size(), &automatic), IsOk());
    EXPECT_TRUE(SameBits(one.data, automatic.data)) << ir::TypeName(dtype);
  }
}

TEST(PackParallelTest, PoisonCoversLargeBuffers) {
  const int64_t n = (int64_t{1} << 20) + 5;
  std::vector<uint32_t> words(static_cast<size_t>(n), 0);
  PoisonBytes(words.data(), ir::ScalarType::kFloat32, n);
  for (uint32_t w : words) ASSERT_EQ(w, 0x7fc00000u);
  std::vector<uint16_t> halves(static_cast<size_t>(n) + 1, 0);
  PoisonBytes(halves.data(), ir::ScalarType::kBFloat16, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(halves[i], 0x7fc0u);
  EXPECT_EQ(halves[n], 0u);  // nothing past the end
  std::vector<unsigned char> bytes(static_cast<size_t>(8 * n) + 1, 0);
  PoisonBytes(bytes.data(), ir::ScalarType::kInt64, n);
  for (int64_t i = 0; i < 8 * n; ++i) ASSERT_EQ(bytes[i], 0x5a);
  EXPECT_EQ(bytes[8 * n], 0);
}

TEST(PackParallelTest, ChunkedCompareEqualsAnElementLoop) {
  const int64_t n = (int64_t{1} << 20) + 11;
  ir::HostBuffer expected = ir::HostBuffer::Zeros(ir::ScalarType::kFloat32, {n});
  expected.data = PackValues(n);
  ir::HostBuffer got = expected;
  // Mismatches in several chunks (the lowest in the third of 7), a NaN, and near misses.
  for (int64_t i : {n - 1, int64_t{900000}, int64_t{400000}, int64_t{700001}}) {
    got.data[i] = std::isfinite(expected.data[i]) ? 1.5 * expected.data[i] + 1.0 : 1.0;
  }
  got.data[800000] = NAN;
  for (int64_t i = 1; i < n; i += 1001) {
    if (std::isfinite(got.data[i])) got.data[i] += 1e-5;
  }
  const Tolerance tol = ToleranceFor(ir::ScalarType::kFloat32);
  // The element loop.
  CompareSummary want;
  want.elements = n;
  for (int64_t i = 0; i < n; ++i) {
    const ElementComparison c = CompareElement(got.data[i], expected.data[i], tol);
    if (c.has_abs_error) want.max_abs_error = std::max(want.max_abs_error, c.abs_error);
    if (c.has_rel_error) want.max_rel_error = std::max(want.max_rel_error, c.rel_error);
    if (!c.ok && want.mismatches++ == 0) want.first_mismatch = i;
  }
  ASSERT_EQ(want.mismatches, 5);
  for (int threads : {1, 7}) {
    const CompareSummary s =
        SummarizeDoubles(got.data.data(), expected.data.data(), n, tol, threads);
    EXPECT_EQ(s.elements, want.elements);
    EXPECT_EQ(s.mismatches, want.mismatches);
    EXPECT_EQ(s.first_mismatch, want.first_mismatch);
    EXPECT_EQ(s.max_abs_error, want.max_abs_error);
    EXPECT_EQ(s.max_rel_error, want.max_rel_error);
  }
  CheckReport report;
  CompareOutput("C", got, expected, tol, 1, CheckDistribution::kUniformSymmetric, &report);
  EXPECT_EQ(report.mismatches, want.mismatches);
  EXPECT_EQ(report.checked_elements, n);
  EXPECT_EQ(report.max_abs_error, want.max_abs_error);
  EXPECT_EQ(
      report.first_mismatch,
      MismatchText("C", {n}, want.first_mismatch, got.data[want.first_mismatch],
                   expected.data[want.first_mismatch], 1, CheckDistribution::kUniformSymmetric));
}

}  // namespace
}  // namespace tilesearch::measure
