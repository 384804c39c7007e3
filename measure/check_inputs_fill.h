// Fast, thread-count-independent generation of check inputs (MakeCheckInputs, measure/checker.h)
// and the chunked parallel loop shared with the packing of host buffers.
//
// Every value is a function of (the tensor's stream seed, the element's flat index) only: a
// counter-based generator (a keyed SplitMix64 hash of the index, Steele et al., OOPSLA'14, the
// construction of counter-based RNGs of Salmon et al., SC'11) instead of a sequential engine, so
// buffers can be filled in parallel chunks and give the same bits for every thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ir/host_buffer.h"
#include "measure/measure.h"

namespace tilesearch::measure {

/// The SplitMix64 finalizer (Steele, Lea and Flood, OOPSLA'14): a bijective 64-bit mix that
/// decorrelates seeds derived from one another and hashes counters into uniform bits.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Buffers below this many elements are filled, packed and compared on the calling thread.
inline constexpr int64_t kParallelMinElements = int64_t{1} << 20;
/// At most this many threads per pass.
inline constexpr int kMaxParallelThreads = 32;

/// Threads for one pass over `n` elements: 1 below kParallelMinElements, otherwise
/// std::thread::hardware_concurrency() (1 when unknown) capped at kMaxParallelThreads and at one
/// thread per 2^18 elements.
int ThreadsFor(int64_t n);

/// The number of chunks ParallelChunks splits [0, n) into: min(max(threads, 1), n), 0 when n <= 0.
int64_t NumChunks(int64_t n, int threads);

/// Runs `body(chunk, begin, end)` for chunk = 0 .. NumChunks(n, threads) − 1 over [0, n) split into
/// contiguous chunks of nearly equal size in index order, chunk 0 on the calling thread and the
/// others on std::threads (a chunk whose thread cannot be started, e.g. under a worker's
/// address-space limit, runs on the calling thread). Returns after every chunk is done.
void ParallelChunks(int64_t n, int threads,
                    const std::function<void(int64_t chunk, int64_t begin, int64_t end)>& body);

/// The stream seed of placeholder `name` for MakeCheckInputs' `seed`:
/// SplitMix64(seed XOR SplitMix64(FNV-1a-64(name))).
uint64_t CheckInputStreamSeed(uint64_t seed, const std::string& name);

/// Uniform double in [0, 1) of draw `slot` (0 or 1) of element `index` of stream `stream`:
/// the top 53 bits of SplitMix64(stream XOR SplitMix64(2 · index + slot)) times 2^-53.
double CheckUniform01(uint64_t stream, int64_t index, int slot);

/// Mean and standard deviation of the normal check distribution of a buffer type.
struct CheckNormal {
  double mean = 0;
  double sd = 1;
};
/// bench/score.py's "normal" (NORMAL_BY_DTYPE), so a kernel the tuner accepts has met the
/// scorer's inputs: float32 / bfloat16 normal(2, 32) (exp overflows in a softmax that skips the
/// maximum; cancellation in long sums), float16 normal(0.5, 4) (its range ends at 65504: deep dot
/// products of normal(2, 32) values overflow in correct kernels). Integers (then rounded) and
/// bool: normal(2, 8), keeping index inputs mostly in range.
CheckNormal CheckNormalOf(ir::ScalarType dtype);

/// Resizes `buffer->data` to buffer->NumElements() (CHECKed >= 0) and fills it from
/// `distribution`, each value a function of (stream, flat index) only and rounded to the buffer's
/// dtype with ir::RoundToType:
///  - floats: uniform [-1, 1) / [0, 1) as lo + (hi − lo) · u with u = CheckUniform01(slot 0); a
///    value that rounds to hi is drawn again from the stream SplitMix64(stream + attempt);
///    normal: mean + sd · sqrt(−2 ln(1 − u0)) · cos(2π u1) (Box–Muller on slots 0 and 1) with
///    CheckNormalOf(dtype);
///  - int32 / int64: integers uniform in [-16, 16) / [0, 16) (−16 or 0 plus the slot-0 hash
///    modulo 32 or 16), or the normal rounded to the nearest integer (ties to even);
///  - bool: the top bit of the slot-0 hash (0 / 1) for every distribution.
/// `threads` only splits the work (ParallelChunks): the result is bit-identical for every value.
void FillCheckInput(CheckDistribution distribution, uint64_t stream, int threads,
                    ir::HostBuffer* buffer);

/// The values FillCheckInput writes into a buffer of `dtype`, computed on demand (a generated
/// buffer's HostBuffer::source): element i of the source equals element i of the filled buffer,
/// bit for bit.
std::shared_ptr<const ir::ElementSource> CheckInputSource(CheckDistribution distribution,
                                                          uint64_t stream, ir::ScalarType dtype);

}  // namespace tilesearch::measure
