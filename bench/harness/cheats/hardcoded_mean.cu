// CHEAT (hard-codes values for one input): writes the mean 0.5 that a torch.rand input has in
// expectation, without reading X. Caught by other values and distributions: wrong_answer.
#include "common.cuh"
extern "C" __global__ void hardcoded_mean(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < ROWS) y[i] = 0.5f;
}
