// The device compare kernels on a real GPU (skipped with "no CUDA driver: ..." where the probe
// finds none), against the host rule (SummarizeFloat32, itself tested against a naive loop in
// device_compare_test): planted wrong values, NaNs and Infs over more elements than the grid has
// threads, a correct kernel output, the output of a real kernel with planted errors, a kernel
// that computes twice the value, byte differences with a ragged tail; and through the runner, a
// candidate that writes into its input is a wrong answer and the candidate after it is fine.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "codegen/codegen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/checker.h"
#include "measure/device_compare.h"
#include "measure/loaded_module.h"
#include "measure/measure.h"
#include "measure/runner.h"
#include "runtime/cuda_device.h"
#include "tests/codegen/nest_builders.h"
#include "tests/measure/cuda_device_test_util.h"
#include "tests/measure/cuda_test_util.h"

namespace tilesearch::measure {
namespace cuda = runtime::cuda;
using runtime::CudaContext;
using runtime::DeviceBuffer;
using runtime::TargetFromDevice;
namespace {

using ::testing::HasSubstr;
using testing_util::ProbedDevice;
using testing_util::RunForked;
using ::tilesearch::testing::IsOk;
using ::tilesearch::testing::StatusIs;

struct Device {
  std::unique_ptr<CudaContext> context;
  std::unique_ptr<DeviceComparer> comparer;
};

Device MakeDevice() {
  Device d;
  d.context = testing_util::MakeContext();
  if (d.context == nullptr) return d;
  absl::StatusOr<std::unique_ptr<DeviceComparer>> c = DeviceComparer::Create(*d.context);
  EXPECT_TRUE(c.ok()) << c.status();
  if (c.ok()) d.comparer = *std::move(c);
  return d;
}

DeviceBuffer Upload(const CudaContext& ctx, const void* data, int64_t bytes) {
  absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(ctx.driver(), bytes);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return DeviceBuffer();
  EXPECT_THAT(b->Upload(data, bytes), IsOk());
  return *std::move(b);
}

// Compares on the device and returns the decoded slot.
CompareSummary DeviceSummary(const Device& d, cuda::CUdeviceptr got, cuda::CUdeviceptr expected,
                             int64_t n, const Tolerance& t, cuda::CUdeviceptr magnitude = 0) {
  const CompareSlot init = InitialCompareSlot();
  DeviceBuffer slot = Upload(*d.context, init.data(), sizeof(CompareSlot));
  EXPECT_THAT(d.comparer->Compare(ir::ScalarType::kFloat32, got, expected, n, t, slot.ptr(), 0, 0,
                                  magnitude),
              IsOk());
  CompareSlot out{};
  EXPECT_THAT(slot.Download(out.data(), sizeof(CompareSlot)), IsOk());
  return DecodeCompareSlot(out, n);
}

void ExpectSameSummary(const CompareSummary& device, const CompareSummary& host) {
  EXPECT_EQ(device.elements, host.elements);
  EXPECT_EQ(device.mismatches, host.mismatches);
  EXPECT_EQ(device.first_mismatch, host.first_mismatch);
  EXPECT_EQ(device.max_abs_error, host.max_abs_error);
  EXPECT_EQ(device.max_rel_error, host.max_rel_error);
}

// Random values with planted errors: NaN / Inf / far-off got, NaN and Inf references.
void Planted(size_t n, uint32_t seed, std::vector<float>* got, std::vector<float>* expected) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4, 4);
  std::uniform_int_distribution<int> kind(0, 999);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  got->resize(n);
  expected->resize(n);
  for (size_t i = 0; i < n; ++i) {
    float e = u(rng);
    float g = e * (1 + 3e-5f);
    switch (kind(rng)) {
      case 0:
        g = nan;
        break;
      case 1:
        g = e + 0.5f;
        break;
      case 2:
        g = inf;
        break;
      case 3:
        e = nan;
        g = nan;
        break;
      case 4:
        e = nan;
        break;
      case 5:
        e = inf;
        g = inf;
        break;
      case 6:
        e = -inf;
        g = inf;
        break;
      case 7:
        e = 0;
        g = 2e-4f;
        break;
      default:
        break;
    }
    (*expected)[i] = e;
    (*got)[i] = g;
  }
}

TEST(DeviceCompareGpuTest, PlantedErrorsMatchTheHostRule) {
  TS_SKIP_WITHOUT_DEVICE();
  RunForked([] {
    Device d = MakeDevice();
    ASSERT_NE(d.comparer, nullptr);
    // More elements than the grid's 1024 × 256 threads; odd sizes; tiny ones.
    for (size_t n : {size_t{1}, size_t{5}, size_t{33}, size_t{1000}, size_t{1000003}}) {
      std::vector<float> got, expected;
      Planted(n, static_cast<uint32_t>(n), &got, &expected);
      DeviceBuffer g = Upload(*d.context, got.data(), static_cast<int64_t>(n * 4));
      DeviceBuffer e = Upload(*d.context, expected.data(), static_cast<int64_t>(n * 4));
      for (const Tolerance& t : {Tolerance{1e-4, 1e-4}, Tolerance{1e-2, 0}}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " atol " << t.atol);
        const CompareSummary host = SummarizeFloat32(got.data(), expected.data(), n, t);
        ExpectSameSummary(DeviceSummary(d, g.ptr(), e.ptr(), n, t), host);
        if (n == 1000003) {
          EXPECT_GT(host.mismatches,
                    1000);  // planted errors exist (4923 at atol 1e-2 on the H200 run)
        }
      }
      // A correct output: no mismatch, exact errors.
      DeviceBuffer same = Upload(*d.context, expected.data(), static_cast<int64_t>(n * 4));
      const CompareSummary exact = DeviceSummary(d, same.ptr(), e.ptr(), n, Tolerance{1e-4, 1e-4});
      EXPECT_EQ(exact.mismatches, 0);
      EXPECT_EQ(exact.first_mismatch, -1);
      EXPECT_EQ(exact.max_abs_error, 0.0);
    }
    // Nothing to compare.
    EXPECT_THAT(d.comparer->CompareFloat32(0, 0, 0, Tolerance{}, 0), IsOk());
  });
}

// With magnitudes (some infinite or NaN) and an allowance the device widens each bound exactly as
// the host mirror does.
TEST(DeviceCompareGpuTest, MagnitudeAllowanceMatchesTheHostRule) {
  TS_SKIP_WITHOUT_DEVICE();
  RunForked([] {
    Device d = MakeDevice();
    ASSERT_NE(d.comparer, nullptr);
    const size_t n = 1000003;
    std::vector<float> got, expected, magnitude(n);
    Planted(n, 11, &got, &expected);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> m(0.0f, 400.0f);
    for (size_t i = 0; i < n; ++i) {
      magnitude[i] = i % 97 == 0   ? std::numeric_limits<float>::infinity()
                     : i % 89 == 0 ? std::numeric_limits<float>::quiet_NaN()
                                   : m(rng);
    }
    DeviceBuffer g = Upload(*d.context, got.data(), static_cast<int64_t>(n * 4));
    DeviceBuffer e = Upload(*d.context, expected.data(), static_cast<int64_t>(n * 4));
    DeviceBuffer mg = Upload(*d.context, magnitude.data(), static_cast<int64_t>(n * 4));
    const Tolerance t{1e-4, 1e-4, 16 * std::ldexp(1.0, -11)};
    const CompareSummary host =
        SummarizeFloat32(got.data(), expected.data(), n, t, magnitude.data());
    ExpectSameSummary(DeviceSummary(d, g.ptr(), e.ptr(), n, t, mg.ptr()), host);
    EXPECT_LT(host.mismatches, SummarizeFloat32(got.data(), expected.data(), n, t).mismatches);
    EXPECT_GT(host.mismatches, 0);  // NaN / Inf planted errors stay mismatches
  });
}

// float16 / bfloat16 elements (the planted float32 values rounded to the type) give the host
// rule's summary over the widened values, and the mismatch list holds every mismatch with its value
// when it has room, a subset of true mismatches when it has not.
TEST(DeviceCompareGpuTest, HalfTypesAndTheMismatchListMatchTheHostRule) {
  TS_SKIP_WITHOUT_DEVICE();
  RunForked([] {
    Device d = MakeDevice();
    ASSERT_NE(d.comparer, nullptr);
    const size_t n = 1000003;
    std::vector<float> got32, expected32;
    Planted(n, 7, &got32, &expected32);
    for (ir::ScalarType dtype : {ir::ScalarType::kFloat16, ir::ScalarType::kBFloat16}) {
      SCOPED_TRACE(ir::TypeName(dtype));
      ir::HostBuffer got = ir::HostBuffer::Zeros(dtype, {static_cast<int64_t>(n)});
      ir::HostBuffer expected = ir::HostBuffer::Zeros(dtype, {static_cast<int64_t>(n)});
      for (size_t i = 0; i < n; ++i) {
        got.data[i] = got32[i];
        expected.data[i] = expected32[i];
      }
      const std::vector<std::byte> got_bytes = PackBuffer(got);
      const std::vector<std::byte> expected_bytes = PackBuffer(expected);
      // The values the device reads: rounded to the type, widened exactly.
      ASSERT_THAT(UnpackBuffer(got_bytes.data(), got_bytes.size(), &got), IsOk());
      ASSERT_THAT(UnpackBuffer(expected_bytes.data(), expected_bytes.size(), &expected), IsOk());
      std::vector<float> got_w(got.data.begin(), got.data.end());
      std::vector<float> expected_w(expected.data.begin(), expected.data.end());
      const Tolerance t{1e-2, 1e-2};
      const CompareSummary host = SummarizeFloat32(got_w.data(), expected_w.data(), n, t);
      ASSERT_GT(host.mismatches, 1000);
      std::vector<int64_t> truth;
      for (size_t i = 0; i < n; ++i) {
        if (!CompareElement(got.data[i], expected.data[i], t).ok) truth.push_back(i);
      }
      ASSERT_EQ(static_cast<int64_t>(truth.size()), host.mismatches);
      DeviceBuffer g = Upload(*d.context, got_bytes.data(), static_cast<int64_t>(got_bytes.size()));
      DeviceBuffer e =
          Upload(*d.context, expected_bytes.data(), static_cast<int64_t>(expected_bytes.size()));
      for (int64_t capacity : {int64_t{1} << 20, int64_t{100}}) {
        SCOPED_TRACE(::testing::Message() << "capacity " << capacity);
        const CompareSlot init = InitialCompareSlot();
        DeviceBuffer slot = Upload(*d.context, init.data(), sizeof(CompareSlot));
        absl::StatusOr<DeviceBuffer> list =
            DeviceBuffer::Allocate(d.context->driver(), capacity * 16);
        ASSERT_THAT(list, IsOk());
        ASSERT_THAT(d.comparer->Compare(dtype, g.ptr(), e.ptr(), static_cast<int64_t>(n), t,
                                        slot.ptr(), list->ptr(), capacity),
                    IsOk());
        CompareSlot out{};
        ASSERT_THAT(slot.Download(out.data(), sizeof(CompareSlot)), IsOk());
        ExpectSameSummary(DecodeCompareSlot(out, static_cast<int64_t>(n)), host);
        const int64_t listed = std::min<int64_t>(static_cast<int64_t>(out[4]), capacity);
        EXPECT_EQ(listed, std::min<int64_t>(host.mismatches, capacity));
        std::vector<std::array<uint64_t, 2>> entries(static_cast<size_t>(listed));
        ASSERT_THAT(list->Download(entries.data(), listed * 16), IsOk());
        std::sort(entries.begin(), entries.end());
        std::vector<int64_t> flats;
        for (const auto& [flat, bits] : entries) {
          ASSERT_LT(flat, n);
          flats.push_back(static_cast<int64_t>(flat));
          const double value = std::bit_cast<double>(bits);
          if (std::isnan(got.data[flat])) {
            EXPECT_TRUE(std::isnan(value)) << flat;
          } else {
            EXPECT_EQ(value, got.data[flat]) << flat;
          }
        }
        if (capacity >= host.mismatches) {
          EXPECT_EQ(flats, truth);
        } else {
          EXPECT_TRUE(std::adjacent_find(flats.begin(), flats.end()) == flats.end());
          for (int64_t f : flats) {
            EXPECT_TRUE(std::binary_search(truth.begin(), truth.end(), f)) << f;
          }
        }
      }
    }
    // Refused: an integer type, a capacity without a list.
    EXPECT_THAT(d.comparer->Compare(ir::ScalarType::kInt32, 0, 0, 1, Tolerance{}, 0, 0, 0),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("int32")));
    EXPECT_THAT(d.comparer->Compare(ir::ScalarType::kFloat32, 0, 0, 1, Tolerance{}, 0, 0, 5),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no list")));
  });
}

TEST(DeviceCompareGpuTest, RealKernelOutputCorrectPlantedAndDoubled) {
  TS_SKIP_WITHOUT_DEVICE();
  const int64_t m = 300, n = 1000;
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(m, n);
  ASSERT_TRUE(dag.ok()) << dag.status();
  std::vector<std::shared_ptr<const codegen::GpuModule>> modules;
  for (double scale : {1.0, 2.0}) {
    absl::StatusOr<BuildResult> c = testing_util::AddCandidate(*dag, scale);
    ASSERT_TRUE(c.ok()) << c.status();
    modules.push_back(c->gpu_module);
  }
  RunForked([&] {
    Device d = MakeDevice();
    ASSERT_NE(d.comparer, nullptr);
    const size_t count = m * n;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> a(count), b(count), want(count);
    for (size_t i = 0; i < count; ++i) {
      a[i] = u(rng);
      b[i] = u(rng);
      want[i] = a[i] + b[i];
    }
    DeviceBuffer da = Upload(*d.context, a.data(), count * 4);
    DeviceBuffer db = Upload(*d.context, b.data(), count * 4);
    DeviceBuffer ref = Upload(*d.context, want.data(), count * 4);
    const Tolerance t = ToleranceFor(ir::ScalarType::kFloat32);
    for (size_t s = 0; s < modules.size(); ++s) {
      absl::StatusOr<std::unique_ptr<LoadedGpuModule>> loaded =
          LoadedGpuModule::Load(*d.context, *modules[s]);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      absl::StatusOr<DeviceBuffer> dc = DeviceBuffer::Allocate(d.context->driver(), count * 4);
      ASSERT_TRUE(dc.ok()) << dc.status();
      ASSERT_THAT(dc->Memset32(0x7fc00000u), IsOk());
      ASSERT_THAT((*loaded)->LaunchAll({da.ptr(), db.ptr(), dc->ptr()}, true), IsOk());
      std::vector<float> got(count);
      ASSERT_THAT(dc->Download(got.data(), count * 4), IsOk());
      const CompareSummary host = SummarizeFloat32(got.data(), want.data(), count, t);
      ExpectSameSummary(DeviceSummary(d, dc->ptr(), ref.ptr(), count, t), host);
      if (s == 0) {
        EXPECT_EQ(host.mismatches, 0);
        // Plant a NaN, an Inf and a wrong value, upload, compare again.
        got[12345] = std::numeric_limits<float>::quiet_NaN();
        got[200000] = std::numeric_limits<float>::infinity();
        got[299999] += 0.25f;
        ASSERT_THAT(dc->Upload(got.data(), count * 4), IsOk());
        const CompareSummary planted = SummarizeFloat32(got.data(), want.data(), count, t);
        EXPECT_EQ(planted.mismatches, 3);
        EXPECT_EQ(planted.first_mismatch, 12345);
        ExpectSameSummary(DeviceSummary(d, dc->ptr(), ref.ptr(), count, t), planted);
      } else {
        EXPECT_GT(host.mismatches, static_cast<int64_t>(count * 9 / 10));
      }
    }
  });
}

TEST(DeviceCompareGpuTest, CountsDifferingWordsAndTailBytes) {
  TS_SKIP_WITHOUT_DEVICE();
  RunForked([] {
    Device d = MakeDevice();
    ASSERT_NE(d.comparer, nullptr);
    const int64_t bytes = 4 * 300001 + 3;
    std::vector<unsigned char> x(bytes);
    for (int64_t i = 0; i < bytes; ++i) x[i] = static_cast<unsigned char>(i * 131 + 7);
    std::vector<unsigned char> y = x;
    DeviceBuffer a = Upload(*d.context, x.data(), bytes);
    auto count = [&](const std::vector<unsigned char>& other) {
      DeviceBuffer b = Upload(*d.context, other.data(), bytes);
      const CompareSlot init = InitialCompareSlot();
      DeviceBuffer slot = Upload(*d.context, init.data(), sizeof(CompareSlot));
      EXPECT_THAT(d.comparer->CountDifferences(a.ptr(), b.ptr(), bytes, slot.ptr()), IsOk());
      CompareSlot out{};
      EXPECT_THAT(slot.Download(out.data(), sizeof(CompareSlot)), IsOk());
      return out[0];
    };
    EXPECT_EQ(count(y), 0u);
    y[0] ^= 1;                                                              // word 0
    y[2] ^= 0x80;                                                           // word 0 again
    y[4 * 200000 + 1] = static_cast<unsigned char>(y[4 * 200000 + 1] + 1);  // word 200000
    y[bytes - 1] ^= 0xff;                                                   // tail byte
    EXPECT_EQ(count(y), 3u);
  });
}

TEST(DeviceCompareGpuTest, CandidateWritingItsInputIsAWrongAnswer) {
  using codegen::testing::Ld;
  using codegen::testing::Loop;
  using codegen::testing::Seq;
  using codegen::testing::St;
  using codegen::testing::V;
  absl::StatusOr<ir::ComputeDAG> dag = testing_util::AddDag(64, 96);
  ASSERT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<ir::LoopNest> nest = testing_util::AddNest(*dag, 1.0);
  ASSERT_TRUE(nest.ok()) << nest.status();
  // C = A + B, then A = 0 (each thread its own element, after reading it).
  nest->body = Loop(
      "i", 64,
      Loop("j", 96,
           Seq({St("C", {V("i"), V("j")}, Ld("A", {V("i"), V("j")}) + Ld("B", {V("i"), V("j")})),
                St("A", {V("i"), V("j")}, ir::FloatConst(0.0))}),
           ir::ForKind::kThreadIdxX),
      ir::ForKind::kBlockIdxX);
  absl::StatusOr<BuildResult> writer = testing_util::CandidateFromNest(*nest);
  absl::StatusOr<BuildResult> good = testing_util::AddCandidate(*dag, 1.0);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(good.ok()) << good.status();
  // The store into A is in the PTX (compiled anywhere; run only on a device).
  const std::string& ptx = writer->gpu_module->ptx;
  int stores = 0;
  for (size_t at = ptx.find("st.global"); at != std::string::npos;
       at = ptx.find("st.global", at + 1)) {
    ++stores;
  }
  EXPECT_EQ(stores, 2) << ptx;
  TS_SKIP_WITHOUT_DEVICE();
  MeasureOptions options;
  options.timing.warmup_runs = 1;
  options.timing.min_runs = 3;
  options.timing.min_total_ms = 1;
  options.timing.max_runs = 5;
  absl::StatusOr<std::unique_ptr<Runner>> m =
      CreateCudaRunner(TargetFromDevice(*ProbedDevice()), options);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<MeasureResult> r = (*m)->Run(*dag, {*good, *writer, *good});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].error, MeasureError::kNone) << r[0].message;
  EXPECT_EQ(r[1].error, MeasureError::kWrongAnswer) << r[1].message;
  EXPECT_THAT(r[1].message, HasSubstr("candidate wrote into its input 'A'"));
  EXPECT_TRUE(r[1].costs_s.empty());
  EXPECT_EQ(r[2].error, MeasureError::kNone) << r[2].message;
  EXPECT_EQ(r[2].check.mismatches, 0);
  EXPECT_EQ(r[2].check.trials, options.check_trials);
}

}  // namespace
}  // namespace tilesearch::measure
