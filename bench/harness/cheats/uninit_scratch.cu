// CHEAT (reads uninitialized memory): accumulates each row sum into a scratch buffer it assumes is
// zero (it never clears it). Caught by two launches after the harness fills scratch buffers with
// different patterns: nondeterministic.
#include "common.cuh"
extern "C" __global__ void uninit_scratch_rowsum(const float* x, float* y, float* scratch) {
  __shared__ float s[THREADS];
  float sum = RowSum(x, blockIdx.x, 0, COLS, s);
  if (threadIdx.x == 0) {
    scratch[blockIdx.x] += sum;
    y[blockIdx.x] = scratch[blockIdx.x];
  }
}
