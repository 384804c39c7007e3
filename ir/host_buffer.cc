#include "ir/host_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <system_error>
#include <thread>

#include "base/cpu_count.h"
#include "base/status.h"

namespace tilesearch::ir {
namespace {

// Zeros of at least this many elements (8 MiB of doubles) have their pages prefaulted in parallel.
constexpr int64_t kPrefaultMinElements = int64_t{1} << 20;
// At most this many prefault threads, and at least this many elements (2 MiB) per thread.
constexpr int kMaxPrefaultThreads = 32;
constexpr int64_t kPrefaultElementsPerThread = int64_t{1} << 18;

// Asks the kernel to map every whole page inside [begin, begin + bytes) writable
// (madvise(MADV_POPULATE_WRITE), Linux 5.14+), the range split into `threads` page-aligned chunks
// populated concurrently. Zeroing a fresh allocation is dominated by its page faults, taken one at
// a time on the zeroing thread; populating first lets the kernel take them on every core, so the
// zeroing afterwards runs at memory bandwidth. The call never changes the contents of the memory
// (it only maps pages), so any failure (an older kernel: EINVAL, memory pressure: ENOMEM, a thread
// that cannot start) is ignored and leaves those pages to be faulted in by the caller's writes.
void PrefaultPages(void* begin, size_t bytes, int threads) {
#ifdef MADV_POPULATE_WRITE
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (page_size <= 0 || threads < 2) return;
  const uintptr_t page = static_cast<uintptr_t>(page_size);
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
  if (last <= first) return;
  const uintptr_t pages = (last - first) / page;
  const uintptr_t chunks = std::min<uintptr_t>(static_cast<uintptr_t>(threads), pages);
  auto populate = [first, page, pages, chunks](uintptr_t c) {
    const uintptr_t b = first + pages * c / chunks * page;
    const uintptr_t e = first + pages * (c + 1) / chunks * page;
    if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE);
  };
  std::vector<std::thread> workers;
  workers.reserve(chunks - 1);
  for (uintptr_t c = 1; c < chunks; ++c) {
    try {
      workers.emplace_back(populate, c);
    } catch (const std::system_error&) {
      break;  // the remaining pages are faulted in by the zeroing
    }
  }
  populate(0);
  for (std::thread& w : workers) w.join();
#else
  (void)begin, (void)bytes, (void)threads;
#endif
}

}  // namespace

HostBuffer HostBuffer::Zeros(ScalarType dtype, std::vector<int64_t> shape) {
  HostBuffer b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  const int64_t n = b.NumElements();
  CHECK(n >= 0) << "buffer shape with a negative extent or more than 2^63 elements";
  if (n >= kPrefaultMinElements) {
    // Allocate first, map the pages in parallel, then zero them (std::vector value-initializes on
    // this thread; with the pages mapped that costs a memset instead of one fault per page).
    b.data.reserve(static_cast<size_t>(n));
    const int threads = static_cast<int>(std::min<int64_t>(
        {int64_t{UsableCores()}, int64_t{kMaxPrefaultThreads}, n / kPrefaultElementsPerThread}));
    PrefaultPages(b.data.data(), static_cast<size_t>(n) * sizeof(double), threads);
  }
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
