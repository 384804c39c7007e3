// CHEAT (lower precision than claimed): swish computed on inputs rounded to float16 and stored
// through float16, while the problem is float32. About 1e-3 relative error: inside the fp16
// tolerance (1e-2), outside fp32's (1e-4): imprecise.
#include <cuda_fp16.h>

#include "common.cuh"
extern "C" __global__ void half_swish(const float* x, float* y) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long long)ROWS * COLS) {
    float v = __half2float(__float2half(x[i]));
    y[i] = __half2float(__float2half(v / (1.f + expf(-v))));
  }
}
