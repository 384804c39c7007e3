// Counter-based check inputs and the chunked parallel loop (see the header).
#include "measure/check_inputs_fill.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include "base/status.h"
#include "ir/compute_dag.h"
#include "ir/type.h"

namespace tilesearch::measure {
namespace {

uint64_t Hash(uint64_t stream, int64_t index, int slot) {
  return SplitMix64(stream ^
                    SplitMix64(2 * static_cast<uint64_t>(index) + static_cast<uint64_t>(slot)));
}

double ToUnit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

// Uniform in [lo, hi) rounded to `dtype`, drawn again (from a derived stream) where the rounding
// lands on hi.
double UniformValue(uint64_t stream, int64_t i, double lo, double hi, ir::ScalarType dtype) {
  double v = ir::RoundToType(lo + (hi - lo) * ToUnit(Hash(stream, i, 0)), dtype);
  for (uint64_t attempt = 1; v >= hi; ++attempt) {
    v = ir::RoundToType(lo + (hi - lo) * ToUnit(Hash(SplitMix64(stream + attempt), i, 0)), dtype);
  }
  return v;
}

double NormalValue(uint64_t stream, int64_t i, CheckNormal p) {
  const double u1 = 1.0 - ToUnit(Hash(stream, i, 0));  // (0, 1]
  const double u2 = ToUnit(Hash(stream, i, 1));
  return p.mean + p.sd * (std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

}  // namespace

CheckNormal CheckNormalOf(ir::ScalarType dtype) {
  if (dtype == ir::ScalarType::kFloat16) return {0.5, 4.0};
  if (ir::IsInt(dtype) || ir::IsBool(dtype)) return {2.0, 8.0};
  return {2.0, 32.0};
}

int ThreadsFor(int64_t n) {
  if (n < kParallelMinElements) return 1;
  const unsigned hw = std::thread::hardware_concurrency();
  const int64_t by_size = n >> 18;
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>({hw == 0 ? 1 : static_cast<int64_t>(hw),
                                              int64_t{kMaxParallelThreads}, by_size})));
}

int64_t NumChunks(int64_t n, int threads) {
  return n <= 0 ? 0 : std::clamp<int64_t>(threads, 1, n);
}

void ParallelChunks(int64_t n, int threads,
                    const std::function<void(int64_t chunk, int64_t begin, int64_t end)>& body) {
  const int64_t chunks = NumChunks(n, threads);
  if (chunks == 0) return;
  if (chunks == 1) {
    body(0, 0, n);
    return;
  }
  auto begin_of = [&](int64_t c) { return n / chunks * c + std::min(c, n % chunks); };
  std::vector<std::thread> workers;
  std::vector<int64_t> inline_chunks;
  workers.reserve(static_cast<size_t>(chunks - 1));
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t b = begin_of(c), e = begin_of(c + 1);
    try {
      workers.emplace_back([&body, c, b, e]() { body(c, b, e); });
    } catch (const std::system_error&) {
      inline_chunks.push_back(c);
    }
  }
  body(0, 0, begin_of(1));
  for (int64_t c : inline_chunks) body(c, begin_of(c), begin_of(c + 1));
  for (std::thread& w : workers) w.join();
}

uint64_t CheckInputStreamSeed(uint64_t seed, const std::string& name) {
  return SplitMix64(seed ^ SplitMix64(ir::Fnv1a64(name)));
}

double CheckUniform01(uint64_t stream, int64_t index, int slot) {
  return ToUnit(Hash(stream, index, slot));
}

namespace {

// The values of FillCheckInput, element by element: one loop per (dtype class, distribution) so the
// hot loops have no per-element dispatch.
class CheckInputValues : public ir::ElementSource {
 public:
  CheckInputValues(CheckDistribution distribution, uint64_t stream, ir::ScalarType dtype)
      : distribution_(distribution), stream_(stream), dtype_(dtype) {}

  void Fill(int64_t b, int64_t e, double* out) const override {
    const uint64_t stream = stream_;
    const ir::ScalarType dtype = dtype_;
    const CheckNormal normal = CheckNormalOf(dtype);
    // out[i - b] is element i.
    if (ir::IsBool(dtype)) {
      for (int64_t i = b; i < e; ++i) out[i - b] = static_cast<double>(Hash(stream, i, 0) >> 63);
    } else if (ir::IsInt(dtype)) {
      if (distribution_ == CheckDistribution::kNormalOffset) {
        for (int64_t i = b; i < e; ++i) {
          out[i - b] = ir::RoundToType(std::nearbyint(NormalValue(stream, i, normal)), dtype);
        }
        return;
      }
      const bool symmetric = distribution_ == CheckDistribution::kUniformSymmetric;
      const int64_t first = symmetric ? -16 : 0;
      const uint64_t range = symmetric ? 32 : 16;
      for (int64_t i = b; i < e; ++i) {
        out[i - b] = ir::RoundToType(
            static_cast<double>(first + static_cast<int64_t>(Hash(stream, i, 0) % range)), dtype);
      }
    } else if (distribution_ == CheckDistribution::kNormalOffset) {
      for (int64_t i = b; i < e; ++i) {
        out[i - b] = ir::RoundToType(NormalValue(stream, i, normal), dtype);
      }
    } else {
      const double lo = distribution_ == CheckDistribution::kUniformSymmetric ? -1.0 : 0.0;
      for (int64_t i = b; i < e; ++i) out[i - b] = UniformValue(stream, i, lo, 1.0, dtype);
    }
  }

 private:
  CheckDistribution distribution_;
  uint64_t stream_;
  ir::ScalarType dtype_;
};

}  // namespace

std::shared_ptr<const ir::ElementSource> CheckInputSource(CheckDistribution distribution,
                                                          uint64_t stream, ir::ScalarType dtype) {
  return std::make_shared<const CheckInputValues>(distribution, stream, dtype);
}

void FillCheckInput(CheckDistribution distribution, uint64_t stream, int threads,
                    ir::HostBuffer* buffer) {
  const int64_t n = buffer->NumElements();
  CHECK(n >= 0) << "buffer shape with a negative extent or more than 2^63 elements";
  buffer->data.resize(static_cast<size_t>(n));
  const CheckInputValues values(distribution, stream, buffer->dtype);
  double* out = buffer->data.data();
  ParallelChunks(n, threads, [&](int64_t, int64_t b, int64_t e) { values.Fill(b, e, out + b); });
}

}  // namespace tilesearch::measure
