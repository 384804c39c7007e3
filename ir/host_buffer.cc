#include "ir/host_buffer.h"

#include <cmath>
#include <limits>
#include <random>

#include "base/status.h"

namespace tilesearch::ir {

HostBuffer HostBuffer::Zeros(ScalarType dtype, std::vector<int64_t> shape) {
  HostBuffer b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  const int64_t n = b.NumElements();
  CHECK(n >= 0) << "buffer shape with a negative extent or more than 2^63 elements";
  b.data.assign(static_cast<size_t>(n), 0.0);
  return b;
}

int64_t HostBuffer::NumElements() const {
  int64_t n = 1;
  for (int64_t e : shape) {
    if (e < 0) return -1;
    if (e != 0 && n > std::numeric_limits<int64_t>::max() / e) return -1;  // would overflow
    n *= e;
  }
  return n;
}

int64_t HostBuffer::Offset(const std::vector<int64_t>& index) const {
  CHECK(index.size() == shape.size())
      << "index of rank " << index.size() << " into a buffer of rank " << shape.size();
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    CHECK(index[d] >= 0 && index[d] < shape[d])
        << "index " << index[d] << " out of range [0, " << shape[d] << ") in dimension " << d;
    offset = offset * shape[d] + index[d];
  }
  return offset;
}

void FillRandom(HostBuffer& buffer, uint64_t seed, double lo, double hi) {
  // The draws are built from raw 64-bit outputs (not std:: distributions, whose algorithms are
  // implementation-defined) so a seed gives the same values with every standard library.
  std::mt19937_64 rng(seed);
  const int64_t n = buffer.NumElements();
  CHECK(n >= 0) << "buffer shape with a negative extent or more than 2^63 elements";
  buffer.data.resize(static_cast<size_t>(n));
  if (IsBool(buffer.dtype)) {
    for (double& v : buffer.data) v = static_cast<double>(rng() >> 63);
    return;
  }
  if (IsInt(buffer.dtype)) {
    const int64_t first = static_cast<int64_t>(std::ceil(lo));
    const int64_t last = static_cast<int64_t>(std::ceil(hi)) - 1;
    CHECK(last >= first) << "no integers in [" << lo << ", " << hi << ")";
    const uint64_t range = static_cast<uint64_t>(last - first) + 1;
    for (double& v : buffer.data) {
      v = RoundToType(static_cast<double>(first + static_cast<int64_t>(rng() % range)),
                      buffer.dtype);
    }
    return;
  }
  CHECK(hi > lo) << "empty range [" << lo << ", " << hi << ")";
  for (double& v : buffer.data) {
    // Rounding to a narrow dtype can land on `hi`; draw again so values stay in [lo, hi).
    do {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
      v = RoundToType(lo + (hi - lo) * u, buffer.dtype);
    } while (v >= hi);
  }
}

}  // namespace tilesearch::ir
