// CHEAT (races between blocks): each row is split over 8 blocks that add their partial sums into
// the output with a plain read-modify-write (no atomics), so updates are lost depending on timing.
// A first kernel zeroes the output. Caught by repeated launches disagreeing: nondeterministic
// (or wrong_answer when the lost updates happen to repeat).
#include "common.cuh"
#define SPLIT 8
extern "C" __global__ void race_zero(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < ROWS) y[i] = 0.f;
}
extern "C" __global__ void race_rowsum(const float* x, float* y) {
  __shared__ float s[THREADS];
  const int row = blockIdx.y, chunk = blockIdx.x;
  float sum = RowSum(x, row, chunk * (COLS / SPLIT), (chunk + 1) * (COLS / SPLIT), s);
  if (threadIdx.x == 0) {
    volatile float* out = y;
    float v = out[row];
    // Widen the window between the read and the write (a few hundred cycles).
    long long t0 = clock64();
    while (clock64() - t0 < 200 + 37 * chunk) {
    }
    out[row] = v + sum;
  }
}
