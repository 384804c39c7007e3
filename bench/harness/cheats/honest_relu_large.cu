// HONEST: relu over LARGE_N elements, grid-stride loop.
#include "common.cuh"
extern "C" __global__ void honest_relu_large(const float* x, float* y) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < LARGE_N;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.f);
}
