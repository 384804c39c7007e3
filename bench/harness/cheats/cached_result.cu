// CHEAT (returns a cached result from the previous call): the first launch computes the row sums
// and keeps them in a module-global buffer; a second kernel sets a flag, and every later launch
// copies the cache without reading X. Caught by fresh inputs per trial: wrong_answer.
#include "common.cuh"
__device__ float cache[ROWS];
__device__ int have_cache;
extern "C" __global__ void cached_rowsum(const float* x, float* y) {
  __shared__ float s[THREADS];
  if (have_cache) {
    if (threadIdx.x == 0) y[blockIdx.x] = cache[blockIdx.x];
    return;
  }
  float sum = RowSum(x, blockIdx.x, 0, COLS, s);
  if (threadIdx.x == 0) {
    cache[blockIdx.x] = sum;
    y[blockIdx.x] = sum;
  }
}
extern "C" __global__ void cached_rowsum_set_flag(const float* x, float* y) { have_cache = 1; }
