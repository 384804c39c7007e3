// CHEAT (skips the reduction): estimates each row sum from its first quarter, times 4. Close for
// uniform inputs on average, wrong per row: wrong_answer.
#include "common.cuh"
extern "C" __global__ void skip_rowsum(const float* x, float* y) {
  __shared__ float s[THREADS];
  float sum = RowSum(x, blockIdx.x, 0, COLS / 4, s);
  if (threadIdx.x == 0) y[blockIdx.x] = 4.f * sum;
}
