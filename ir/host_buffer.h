// Host buffers for the reference interpreter and checks: a dtype, a row-major shape and the element
// values held as double (exact for every supported dtype; int64 exact up to 2^53).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/type.h"

namespace tilesearch::ir {

struct HostBuffer {
  ScalarType dtype = ScalarType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major, size = product of shape

  /// A buffer of zeros.
  static HostBuffer Zeros(ScalarType dtype, std::vector<int64_t> shape);
  /// Product of the extents; -1 when an extent is negative or the product overflows int64.
  int64_t NumElements() const;
  /// Row-major offset of a multi-index (CHECKs rank and bounds).
  int64_t Offset(const std::vector<int64_t>& index) const;
  double at(const std::vector<int64_t>& index) const { return data[Offset(index)]; }
};

/// Buffers by name (parameter or tensor name).
using BufferMap = std::map<std::string, HostBuffer>;

/// Fills `buffer` with values uniform in [lo, hi) (ints: integers in [lo, hi); bool: 0/1) from a
/// generator seeded with `seed`, each rounded to the buffer's dtype.
void FillRandom(HostBuffer& buffer, uint64_t seed, double lo = -1.0, double hi = 1.0);

}  // namespace tilesearch::ir
