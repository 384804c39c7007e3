// CHEAT (reads uninitialized memory): a tree reduction over a shared array of 2*THREADS floats of
// which only THREADS were written; the first step adds the unwritten half (whatever the previous
// kernel on the SM left there). Caught by two launches on the same inputs after the harness
// scribbles shared memory with different patterns: nondeterministic.
#include "common.cuh"
extern "C" __global__ void uninit_smem_rowsum(const float* x, float* y) {
  __shared__ float s[2 * THREADS];
  float acc = 0.f;
  for (int c = threadIdx.x; c < COLS; c += THREADS) acc += x[(long long)blockIdx.x * COLS + c];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = THREADS; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = s[0];
}
