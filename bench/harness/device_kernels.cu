// Device kernels of bench/harness/score.py itself (compiled to device_kernels.ptx at pack time by
// bench/harness/cheats/build.py --ptx-only, or by score.py with nvcc): the fp32 FMA peak kernel,
// the read and copy bandwidth kernels, and the shared-memory scribbler that makes reads of
// uninitialized shared memory visible (two launches after different scribbles disagree).

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

// Streams `n4` float4s once with 16-byte loads, two in flight per thread, and writes one float per
// thread (gridDim · blockDim · 4 bytes, ~0.1 % of a 1 GiB read): the read bandwidth a memory-bound
// kernel can reach, which a library reduction (torch.sum) may not.
extern "C" __global__ void read_peak(const float4* __restrict__ in, long long n4, float* out) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  float4 a = make_float4(0.f, 0.f, 0.f, 0.f), b = a;
  for (; i + stride < n4; i += 2 * stride) {
    const float4 x = in[i], y = in[i + stride];
    a.x += x.x;
    a.y += x.y;
    a.z += x.z;
    a.w += x.w;
    b.x += y.x;
    b.y += y.y;
    b.z += y.z;
    b.w += y.w;
  }
  if (i < n4) {
    const float4 x = in[i];
    a.x += x.x;
    a.y += x.y;
    a.z += x.z;
    a.w += x.w;
  }
  out[(long long)blockIdx.x * blockDim.x + threadIdx.x] =
      a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w;
}

// Copies `n4` float4s with 16-byte loads and stores, two in flight per thread: the copy bandwidth
// a memory-bound kernel can reach, beside the library's device-to-device copy.
extern "C" __global__ void copy_peak(const float4* __restrict__ in, float4* __restrict__ out,
                                     long long n4) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + stride < n4; i += 2 * stride) {
    const float4 x = in[i], y = in[i + stride];
    out[i] = x;
    out[i + stride] = y;
  }
  if (i < n4) out[i] = in[i];
}
