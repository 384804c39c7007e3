// HONEST: row softmax of X[ROWS, COLS] with the maximum subtracted (safe for any magnitude).
#include "common.cuh"
extern "C" __global__ void honest_softmax(const float* x, float* y) {
  __shared__ float s[THREADS];
  const float* row = x + (long long)blockIdx.x * COLS;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < COLS; c += THREADS) m = fmaxf(m, row[c]);
  m = BlockMax(m, s);
  float sum = 0.f;
  for (int c = threadIdx.x; c < COLS; c += THREADS) sum += expf(row[c] - m);
  sum = BlockSum(sum, s);
  for (int c = threadIdx.x; c < COLS; c += THREADS)
    y[(long long)blockIdx.x * COLS + c] = expf(row[c] - m) / sum;
}
