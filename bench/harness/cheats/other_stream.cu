// CHEAT (does its work on another stream): the honest relu kernel, but its launch JSON asks for
// stream 1, a second non-blocking stream, so CUDA events on the timed stream see no work. Caught by
// device-wide synchronization before reading the host clock: other_stream.
#include "common.cuh"
extern "C" __global__ void side_stream_relu(const float* x, float* y) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < LARGE_N;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.f);
}
