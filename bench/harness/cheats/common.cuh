// Shared sizes and helpers of the planted-cheat kernels (bench/harness/cheats/*.cu). Every kernel
// takes its arguments in the artifact order of tilesearch's kernels: inputs, the output, then
// scratch buffers, as plain float pointers (launch JSONs written by build.py).
#pragma once

// Rows x columns of the row-reduction / softmax / elementwise problems
// (bench/harness/cheats/suite.json).
#define ROWS 4096
#define COLS 4096
// Elements of the large elementwise problem (16384 x 16384), long enough to time (~0.5 ms).
#define LARGE_N (16384LL * 16384LL)
#define THREADS 256

// Deterministic block sum of one value per thread (fixed tree order); every thread gets the sum.
__device__ __forceinline__ float BlockSum(float v, float* s) {
  s[threadIdx.x] = v;
  __syncthreads();
  for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  float r = s[0];
  __syncthreads();
  return r;
}

__device__ __forceinline__ float BlockMax(float v, float* s) {
  s[threadIdx.x] = v;
  __syncthreads();
  for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + stride]);
    __syncthreads();
  }
  float r = s[0];
  __syncthreads();
  return r;
}

// Row sum of X[row, begin:end:THREADS-strided] by one block.
__device__ __forceinline__ float RowSum(const float* x, int row, int begin, int end, float* s) {
  float acc = 0.f;
  for (int c = begin + threadIdx.x; c < end; c += THREADS) acc += x[(long long)row * COLS + c];
  return BlockSum(acc, s);
}
