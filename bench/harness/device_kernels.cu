// Device kernels of bench/harness/score.py itself (compiled to device_kernels.ptx at pack time by
// bench/harness/cheats/build.py --ptx-only, or by score.py with nvcc): the fp32 FMA peak kernel and
// the shared-memory scribbler that makes reads of uninitialized shared memory visible (two launches
// after different scribbles disagree).

// Each thread runs 8 independent FMA chains for `iters` iterations: 16 · iters FLOPs per thread.
extern "C" __global__ void fma_peak(float* out, int iters) {
  float a0 = threadIdx.x * 1e-7f, a1 = a0 + 1e-3f, a2 = a0 + 2e-3f, a3 = a0 + 3e-3f;
  float a4 = a0 + 4e-3f, a5 = a0 + 5e-3f, a6 = a0 + 6e-3f, a7 = a0 + 7e-3f;
  const float b = 0.999999f, c = 1e-7f;
  for (int i = 0; i < iters; ++i) {
    a0 = fmaf(a0, b, c);
    a1 = fmaf(a1, b, c);
    a2 = fmaf(a2, b, c);
    a3 = fmaf(a3, b, c);
    a4 = fmaf(a4, b, c);
    a5 = fmaf(a5, b, c);
    a6 = fmaf(a6, b, c);
    a7 = fmaf(a7, b, c);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

// Fills `words` 32-bit words of dynamic shared memory with a pattern derived from `seed` (float
// values of magnitude ~seed, different per word), through a volatile pointer so the stores stay.
extern "C" __global__ void smem_scribble(unsigned seed, unsigned words) {
  extern __shared__ float scribble[];
  volatile float* s = scribble;
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) {
    s[i] = (float)(seed % 97u + 1u) * 0.37f + (float)((i * 2654435761u + seed) % 1021u) * 1e-3f;
  }
  __syncthreads();
}
