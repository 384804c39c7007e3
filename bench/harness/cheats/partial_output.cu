// CHEAT (writes only part of the output): relu over the first half of the elements only; the rest
// of the output keeps whatever the buffer held. Caught by NaN-poisoned outputs: incomplete_output.
#include "common.cuh"
extern "C" __global__ void partial_relu(const float* x, float* y) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long long)ROWS * COLS / 2) y[i] = fmaxf(x[i], 0.f);
}
