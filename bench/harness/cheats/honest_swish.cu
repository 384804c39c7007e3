// HONEST: swish (SiLU) x * sigmoid(x) over ROWS x COLS elements in float32.
#include "common.cuh"
extern "C" __global__ void honest_swish(const float* x, float* y) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long long)ROWS * COLS) {
    float v = x[i];
    y[i] = v / (1.f + expf(-v));
  }
}
