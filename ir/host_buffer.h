// Host buffers for the reference interpreter and checks: a dtype, a row-major shape and the element
// values held as double (exact for every supported dtype; int64 exact up to 2^53).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/type.h"

namespace tilesearch::ir {

/// Element values computed on demand from the flat index (check inputs too large to hold on the
/// host: their values are a function of the index, measure/check_inputs_fill.h). Implementations
/// are immutable and safe to call from several threads.
class ElementSource {
 public:
  virtual ~ElementSource() = default;
  /// Writes the values of elements [begin, end) (already rounded to the buffer's dtype) to `out`.
  virtual void Fill(int64_t begin, int64_t end, double* out) const = 0;
  /// The value of element `flat`.
  double At(int64_t flat) const {
    double v = 0;
    Fill(flat, flat + 1, &v);
    return v;
  }
};

struct HostBuffer {
  ScalarType dtype = ScalarType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major, size = product of shape; empty when `source` is set
  /// Set for a generated buffer: its values come from here and `data` stays empty. Only point
  /// evaluation (ir::EvaluatePoint*) and the measurers' uploads read generated buffers; whole-
  /// program interpretation needs `data`.
  std::shared_ptr<const ElementSource> source;

  /// A buffer of zeros.
  static HostBuffer Zeros(ScalarType dtype, std::vector<int64_t> shape);
  /// Product of the extents; -1 when an extent is negative or the product overflows int64.
  int64_t NumElements() const;
  /// Row-major offset of a multi-index (CHECKs rank and bounds).
  int64_t Offset(const std::vector<int64_t>& index) const;
  double at(const std::vector<int64_t>& index) const { return value(Offset(index)); }
  /// Element `flat` (row-major), from `data` or, for a generated buffer, from `source`.
  double value(int64_t flat) const {
    return source != nullptr ? source->At(flat) : data[static_cast<size_t>(flat)];
  }
  /// Whether the values come from `source` instead of `data`.
  bool generated() const { return source != nullptr; }
};

/// Buffers by name (parameter or tensor name).
using BufferMap = std::map<std::string, HostBuffer>;

/// Fills `buffer` with values uniform in [lo, hi) (ints: integers in [lo, hi); bool: 0/1) from a
/// generator seeded with `seed`, each rounded to the buffer's dtype.
void FillRandom(HostBuffer& buffer, uint64_t seed, double lo = -1.0, double hi = 1.0);

}  // namespace tilesearch::ir
