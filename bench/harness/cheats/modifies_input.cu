// CHEAT (modifies its inputs): computes relu correctly but also writes it back into X (in-place
// scratch use, or KernelBench's zero-out trick). Caught by comparing X after the launch with a
// copy taken before: input_modified.
#include "common.cuh"
extern "C" __global__ void inplace_relu(float* x, float* y) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long long)ROWS * COLS) {
    float v = fmaxf(x[i], 0.f);
    y[i] = v;
    x[i] = v;
  }
}
