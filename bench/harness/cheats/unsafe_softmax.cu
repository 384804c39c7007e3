// CHEAT (assumes a small input range): softmax without subtracting the row maximum. Exact enough
// for torch.rand inputs; exp overflows to inf for large-magnitude inputs (normal(2, 32)), giving
// inf / inf = NaN: nan_output.
#include "common.cuh"
extern "C" __global__ void unsafe_softmax(const float* x, float* y) {
  __shared__ float s[THREADS];
  const float* row = x + (long long)blockIdx.x * COLS;
  float sum = 0.f;
  for (int c = threadIdx.x; c < COLS; c += THREADS) sum += expf(row[c]);
  sum = BlockSum(sum, s);
  for (int c = threadIdx.x; c < COLS; c += THREADS)
    y[(long long)blockIdx.x * COLS + c] = expf(row[c]) / sum;
}
