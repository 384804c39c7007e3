// How close a grid-synchronized LayerNorm gets to the copy limit on KernelBench L1-40 (16 rows of
// 64 x 256 x 256 float32, gamma and beta of one row's size): the kernel form the IR does not have
// (bench/NOTES.md, "bf16 GEMMs at the power limit" and "Why the L1-40 LayerNorm is far from
// 90 %"). One cooperative launch of one block per multiprocessor; per row, each block loads its
// slice of the row into shared memory (summing about the row's first element as it loads),
// publishes its (sum, sum of squares), waits at a grid barrier, sums all blocks' in one fixed
// order (so every block gets the same statistics), and writes its slice of the output from
// shared memory with gamma and beta. Variants, each timed: with or without an L2 prefetch of the
// next row's slice before the barrier, and with gamma and beta loaded under an L2 evict_last
// policy or plainly (they are re-read for every row: 33.5 MB against the 50 MB L2, beside the
// streamed rows). Checked against a float64 host reference on every element of two rows; timed
// with CUDA events (L2 flushed before each run). Prints ms, GB/s counted as score.py counts (X,
// gamma, beta, Y once) and the fraction of a measured device-to-device copy's bandwidth.
//   nvcc -O3 -arch=sm_90 -o /tmp/ln bench/scripts/layernorm_grid_sync.cu && /tmp/ln
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK_CUDA(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

struct Sums {
  double s, q;  // sum and sum of squares about the row's pivot
};

__device__ inline Sums WarpSum(Sums v) {
  for (int o = 16; o > 0; o /= 2) {
    v.s += __shfl_xor_sync(0xffffffffu, v.s, o);
    v.q += __shfl_xor_sync(0xffffffffu, v.q, o);
  }
  return v;
}

// The block's sums (warp shuffles, then the warps' partials in one warp): every thread gets them.
__device__ Sums BlockSum(Sums v) {
  __shared__ Sums warp_sums[kWarps];
  __shared__ Sums total;
  v = WarpSum(v);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    Sums w = threadIdx.x < kWarps ? warp_sums[threadIdx.x] : Sums{0, 0};
    w = WarpSum(w);
    if (threadIdx.x == 0) total = w;
  }
  __syncthreads();
  const Sums r = total;
  __syncthreads();
  return r;
}

__device__ inline float4 LoadKeep(const float4* p, unsigned long long policy) {
  float4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

template <bool kPrefetch, bool kKeepGammaBeta>
__global__ void __launch_bounds__(kThreads, 1)
    LayerNormGridSync(const float* __restrict__ x, const float* __restrict__ gamma,
                      const float* __restrict__ beta, float* __restrict__ y,
                      Sums* __restrict__ partials, int rows, long long d, long long slice,
                      float eps) {
  extern __shared__ float4 tile[];
  cg::grid_group grid = cg::this_grid();
  const long long begin = blockIdx.x * slice;
  const long long end = begin + slice < d ? begin + slice : d;
  const int vecs = static_cast<int>((end > begin ? end - begin : 0) / 4);  // slice % 4 == 0
  unsigned long long keep = 0;
  if (kKeepGammaBeta)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
  __shared__ float row_mean, row_rstd;
  for (int r = 0; r < rows; ++r) {
    const float4* xr = reinterpret_cast<const float4*>(x + r * d + begin);
    // Each thread's ~64 values summed in float about the pivot (the row's first element, the
    // same in every block, so the blocks' sums add up); the thread's sums go on in double.
    const float pivot = x[r * d];
    float s = 0, q = 0;
#pragma unroll 8
    for (int i = threadIdx.x; i < vecs; i += kThreads) {
      const float4 v = __ldcs(xr + i);
      tile[i] = v;
      const float a = v.x - pivot, b = v.y - pivot, c = v.z - pivot, e = v.w - pivot;
      s += (a + b) + (c + e);
      q += (a * a + b * b) + (c * c + e * e);
    }
    const Sums mine = BlockSum(Sums{s, q});
    if (threadIdx.x == 0) partials[r * gridDim.x + blockIdx.x] = mine;
    if (kPrefetch && r + 1 < rows) {  // the next row's slice into L2 while the grid waits
      const char* next = reinterpret_cast<const char*>(x + (r + 1) * d + begin);
      for (long long off = threadIdx.x * 128LL; off < vecs * 16LL; off += kThreads * 128LL) {
        asm volatile("prefetch.global.L2::evict_normal [%0];" ::"l"(next + off));
      }
    }
    grid.sync();
    if (threadIdx.x < 32) {
      // Every block sums the partials in the same order (lane l takes blocks l, l + 32, ...,
      // then the butterfly): the same statistics everywhere. L2 reads (ld.global.cg): other
      // blocks wrote them; L1 may hold a stale line.
      Sums t{0, 0};
      for (unsigned b = threadIdx.x; b < gridDim.x; b += 32) {
        const Sums* p = partials + r * gridDim.x + b;
        t.s += __ldcg(&p->s);
        t.q += __ldcg(&p->q);
      }
      t = WarpSum(t);
      if (threadIdx.x == 0) {
        const double n = static_cast<double>(d), m = t.s / n;
        row_mean = static_cast<float>(pivot + m);
        row_rstd = static_cast<float>(1.0 / sqrt((t.q - t.s * m) / n + eps));
      }
    }
    __syncthreads();
    const float mean = row_mean, rstd = row_rstd;
    const float4* g4 = reinterpret_cast<const float4*>(gamma + begin);
    const float4* b4 = reinterpret_cast<const float4*>(beta + begin);
    float4* yr = reinterpret_cast<float4*>(y + r * d + begin);
#pragma unroll 8
    for (int i = threadIdx.x; i < vecs; i += kThreads) {
      const float4 v = tile[i];
      const float4 g = kKeepGammaBeta ? LoadKeep(g4 + i, keep) : __ldg(g4 + i);
      const float4 b = kKeepGammaBeta ? LoadKeep(b4 + i, keep) : __ldg(b4 + i);
      float4 o;
      o.x = (v.x - mean) * rstd * g.x + b.x;
      o.y = (v.y - mean) * rstd * g.y + b.y;
      o.z = (v.z - mean) * rstd * g.z + b.z;
      o.w = (v.w - mean) * rstd * g.w + b.w;
      __stcs(yr + i, o);
    }
    __syncthreads();  // the tile is refilled by the next row
  }
}

__global__ void Fill(float* p, long long n, unsigned seed, float scale, float offset) {
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += 256LL * gridDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = offset + scale * (static_cast<float>(h & 0xffffff) / 16777216.0f - 0.5f);
  }
}

struct Variant {
  const char* name;
  const void* kernel;
};

int main() {
  const int rows = 16;
  const long long d = 64LL * 256 * 256;
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long long slice = ((d + sms - 1) / sms + 3) / 4 * 4;
  const size_t smem = slice * sizeof(float);
  const Variant variants[] = {
      {"prefetch, plain gamma/beta", reinterpret_cast<const void*>(LayerNormGridSync<true, false>)},
      {"no prefetch, plain gamma/beta",
       reinterpret_cast<const void*>(LayerNormGridSync<false, false>)},
      {"prefetch, gamma/beta evict_last",
       reinterpret_cast<const void*>(LayerNormGridSync<true, true>)},
      {"no prefetch, gamma/beta evict_last",
       reinterpret_cast<const void*>(LayerNormGridSync<false, true>)},
  };
  for (const Variant& v : variants) {
    CHECK_CUDA(cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    int per_sm = 0;
    CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.kernel, kThreads, smem));
    if (per_sm < 1) {
      std::printf("%s: does not fit one block per SM\n", v.name);
      return 1;
    }
  }
  std::printf("%d SMs, slice %lld floats (%zu B of shared memory)\n", sms, slice, smem);
  float *x, *g, *b, *y, *flush, *copy;
  Sums* partials;
  const size_t bytes = rows * d * sizeof(float), row_bytes = d * sizeof(float);
  CHECK_CUDA(cudaMalloc(&x, bytes));
  CHECK_CUDA(cudaMalloc(&y, bytes));
  CHECK_CUDA(cudaMalloc(&copy, bytes));
  CHECK_CUDA(cudaMalloc(&g, row_bytes));
  CHECK_CUDA(cudaMalloc(&b, row_bytes));
  CHECK_CUDA(cudaMalloc(&partials, rows * sms * sizeof(Sums)));
  const size_t flush_bytes = 256u << 20;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  // X with a large mean (cancellation in one-pass sums), gamma and beta near 1 and 0.
  Fill<<<1024, 256>>>(x, rows * d, 7, 4.0f, 100.0f);
  Fill<<<1024, 256>>>(g, d, 11, 0.5f, 1.0f);
  Fill<<<1024, 256>>>(b, d, 13, 0.5f, 0.0f);
  CHECK_CUDA(cudaDeviceSynchronize());
  float eps = 1e-5f;
  int rows_arg = rows;
  long long d_arg = d, slice_arg = slice;
  void* args[] = {&x, &g, &b, &y, &partials, &rows_arg, &d_arg, &slice_arg, &eps};
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));
  auto time_ms = [&](auto&& fn) {
    std::vector<float> ms;
    for (int i = 0; i < 23; ++i) {
      CHECK_CUDA(cudaMemsetAsync(flush, i, flush_bytes));
      CHECK_CUDA(cudaEventRecord(t0));
      fn();
      CHECK_CUDA(cudaEventRecord(t1));
      CHECK_CUDA(cudaEventSynchronize(t1));
      float v = 0;
      CHECK_CUDA(cudaEventElapsedTime(&v, t0, t1));
      if (i >= 3) ms.push_back(v);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const float cp =
      time_ms([&] { CHECK_CUDA(cudaMemcpyAsync(copy, x, bytes, cudaMemcpyDeviceToDevice)); });
  const double moved = 2.0 * bytes + 2.0 * row_bytes, copy_bw = 2.0 * bytes / (cp * 1e-3);
  std::printf("copy of X %.4f ms, %.1f GB/s\n", cp, copy_bw / 1e9);
  std::vector<float> hx(d), hy(d), hg(d), hb(d);
  CHECK_CUDA(cudaMemcpy(hg.data(), g, row_bytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hb.data(), b, row_bytes, cudaMemcpyDeviceToHost));
  int rc = 0;
  for (const Variant& v : variants) {
    auto launch = [&] {
      CHECK_CUDA(cudaLaunchCooperativeKernel(v.kernel, dim3(sms), dim3(kThreads), args, smem, 0));
    };
    CHECK_CUDA(cudaMemset(y, 0xff, bytes));
    launch();
    CHECK_CUDA(cudaDeviceSynchronize());
    // Rows 0 and 15 against float64.
    double worst = 0;
    for (int r : {0, rows - 1}) {
      CHECK_CUDA(cudaMemcpy(hx.data(), x + r * d, row_bytes, cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(hy.data(), y + r * d, row_bytes, cudaMemcpyDeviceToHost));
      double mean = 0, var = 0;
      for (long long i = 0; i < d; ++i) mean += hx[i];
      mean /= d;
      for (long long i = 0; i < d; ++i) var += (hx[i] - mean) * (hx[i] - mean);
      var /= d;
      const double rstd = 1 / std::sqrt(var + eps);
      for (long long i = 0; i < d; ++i) {
        const double ref = (hx[i] - mean) * rstd * hg[i] + hb[i];
        const double err = std::fabs(hy[i] - ref) / (1e-4 + 1e-4 * std::fabs(ref));
        worst = std::isnan(err) ? 1e30 : std::fmax(worst, err);
      }
    }
    const float ln = time_ms(launch);
    std::printf(
        "%-36s %.4f ms, %7.1f GB/s (X, gamma, beta, Y once), %3.0f %% of the copy "
        "bandwidth; check: worst |ours - float64| / (1e-4 + 1e-4 |ref|) = %.3f (%s)\n",
        v.name, ln, moved / (ln * 1e6), 100 * moved / (ln * 1e-3) / copy_bw, worst,
        worst <= 1 ? "ok" : "MISMATCH");
    if (worst > 1) rc = 2;
  }
  return rc;
}
