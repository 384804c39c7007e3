// How close a grid-synchronized LayerNorm gets to the copy limit on KernelBench L1-40 (16 rows of
// 64 x 256 x 256 float32, gamma and beta of one row's size): the kernel form the IR does not have
// yet (bench/NOTES.md, "Why the L1-40 LayerNorm is far from 90 %"). One cooperative launch of one
// block per multiprocessor; per row, each block loads its slice of the row into shared memory
// (summing as it loads), publishes its partial (count, mean, M2), waits at a grid barrier,
// combines all partials (Chan et al.'s pairwise update, in double), and writes its slice of the
// output from shared memory with gamma and beta. Before the barrier each block asks the L2 to
// prefetch its slice of the next row, so the DRAM keeps streaming while the blocks wait.
// Checked against a float64 host reference on every element of two rows; timed with CUDA events
// (L2 flushed before each run). Prints ms, GB/s counted as score.py counts (X, gamma, beta, Y
// once) and the fraction of a measured device-to-device copy's bandwidth.
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

struct Partial {
  double n, mean, m2;
};

// Chan et al.: the (n, mean, M2) of two disjoint sets from each one's.
__host__ __device__ inline Partial Combine(Partial a, Partial b) {
  if (a.n == 0) return b;
  if (b.n == 0) return a;
  const double n = a.n + b.n, d = b.mean - a.mean;
  return {n, a.mean + d * b.n / n, a.m2 + b.m2 + d * d * a.n * b.n / n};
}

// The combination of every thread's (n, mean, M2) over the block (a tree in shared memory).
__device__ Partial CombineOverBlock(Partial p) {
  __shared__ Partial parts[kThreads];
  parts[threadIdx.x] = p;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) parts[threadIdx.x] = Combine(parts[threadIdx.x], parts[threadIdx.x + w]);
    __syncthreads();
  }
  Partial r = parts[0];
  __syncthreads();
  return r;
}

// The block's (n, mean, M2) from its threads' (n, sum, sum of squares) about `pivot`.
__device__ Partial BlockPartial(double n, double s, double q, double pivot) {
  // Per thread: mean and M2 about its own mean from the shifted sums.
  Partial p{n, 0, 0};
  if (n > 0) {
    const double m = s / n;
    p = {n, pivot + m, q - s * m};
  }
  return CombineOverBlock(p);
}

__global__ void __launch_bounds__(kThreads, 1)
    LayerNormGridSync(const float* __restrict__ x, const float* __restrict__ gamma,
                      const float* __restrict__ beta, float* __restrict__ y,
                      Partial* __restrict__ partials, int rows, long long d, long long slice,
                      float eps) {
  extern __shared__ float4 tile[];
  cg::grid_group grid = cg::this_grid();
  const long long begin = blockIdx.x * slice;
  const long long end = begin + slice < d ? begin + slice : d;
  const int vecs = static_cast<int>((end > begin ? end - begin : 0) / 4);  // slice % 4 == 0
  __shared__ Partial row_stats;
  for (int r = 0; r < rows; ++r) {
    const float4* xr = reinterpret_cast<const float4*>(x + r * d + begin);
    // Load the slice into shared memory, summing about the row's first element (a pivot every
    // block reads the same) to keep the squares well conditioned.
    // Each thread's ~64 values summed in float (about the pivot, so the squares do not cancel);
    // the thread's sums go to double for the combinations (FP64 per element would cost ~1/3 of
    // the transfer time).
    const float pivot = x[r * d];
    float n = 0, s = 0, q = 0;
#pragma unroll 8
    for (int i = threadIdx.x; i < vecs; i += kThreads) {
      const float4 v = __ldcs(xr + i);
      tile[i] = v;
      const float a = v.x - pivot, b = v.y - pivot, c = v.z - pivot, e = v.w - pivot;
      n += 4;
      s += (a + b) + (c + e);
      q += (a * a + b * b) + (c * c + e * e);
    }
    const Partial mine = BlockPartial(n, s, q, pivot);
    if (threadIdx.x == 0) partials[r * gridDim.x + blockIdx.x] = mine;
    // The next row's slice into L2 while the grid waits.
    if (r + 1 < rows) {
      const char* next = reinterpret_cast<const char*>(x + (r + 1) * d + begin);
      for (long long off = threadIdx.x * 128LL; off < vecs * 16LL; off += kThreads * 128LL) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(next + off));
      }
    }
    grid.sync();
    // All blocks' partials combined by the block's threads in a tree (the same order in every
    // block, so every block gets the same statistics); a serial loop of dependent L2 reads and
    // double divisions in one thread took ~50 us per row.
    Partial part{0, 0, 0};
    for (unsigned b = threadIdx.x; b < gridDim.x; b += kThreads) {
      // L2 reads (ld.global.cg): another block wrote them; L1 may hold a stale line.
      const Partial* q = partials + r * gridDim.x + b;
      part = Combine(part, Partial{__ldcg(&q->n), __ldcg(&q->mean), __ldcg(&q->m2)});
    }
    const Partial all = CombineOverBlock(part);
    if (threadIdx.x == 0) row_stats = all;
    __syncthreads();
    const float mean = static_cast<float>(row_stats.mean);
    const float rstd = static_cast<float>(1.0 / sqrt(row_stats.m2 / row_stats.n + eps));
    const float4* g4 = reinterpret_cast<const float4*>(gamma + begin);
    const float4* b4 = reinterpret_cast<const float4*>(beta + begin);
    float4* yr = reinterpret_cast<float4*>(y + r * d + begin);
#pragma unroll 8
    for (int i = threadIdx.x; i < vecs; i += kThreads) {
      const float4 v = tile[i], g = __ldg(g4 + i), b = __ldg(b4 + i);
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

int main() {
  const int rows = 16;
  const long long d = 64LL * 256 * 256;
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long long slice = ((d + sms - 1) / sms + 3) / 4 * 4;
  const size_t smem = slice * sizeof(float);
  CHECK_CUDA(cudaFuncSetAttribute(LayerNormGridSync, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem)));
  int per_sm = 0;
  CHECK_CUDA(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, LayerNormGridSync, kThreads, smem));
  std::printf("%d SMs, slice %lld floats (%zu B of shared memory), %d block(s) per SM fit\n", sms,
              slice, smem, per_sm);
  if (per_sm < 1) return 1;
  float *x, *g, *b, *y, *flush, *copy;
  Partial* partials;
  const size_t bytes = rows * d * sizeof(float), row_bytes = d * sizeof(float);
  CHECK_CUDA(cudaMalloc(&x, bytes));
  CHECK_CUDA(cudaMalloc(&y, bytes));
  CHECK_CUDA(cudaMalloc(&copy, bytes));
  CHECK_CUDA(cudaMalloc(&g, row_bytes));
  CHECK_CUDA(cudaMalloc(&b, row_bytes));
  CHECK_CUDA(cudaMalloc(&partials, rows * sms * sizeof(Partial)));
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
  auto launch = [&] {
    CHECK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(LayerNormGridSync), dim3(sms),
                                           dim3(kThreads), args, smem, 0));
  };
  launch();
  CHECK_CUDA(cudaDeviceSynchronize());
  // Check rows 0 and 15 against float64.
  std::vector<float> hx(d), hy(d), hg(d), hb(d);
  CHECK_CUDA(cudaMemcpy(hg.data(), g, row_bytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hb.data(), b, row_bytes, cudaMemcpyDeviceToHost));
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
      worst = std::fmax(worst, std::fabs(hy[i] - ref) / (1e-4 + 1e-4 * std::fabs(ref)));
    }
  }
  std::printf("check: worst |ours - float64| / (1e-4 + 1e-4 |ref|) = %.3f (%s)\n", worst,
              worst <= 1 ? "ok" : "MISMATCH");
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
  const float ln = time_ms(launch);
  const float cp =
      time_ms([&] { CHECK_CUDA(cudaMemcpyAsync(copy, x, bytes, cudaMemcpyDeviceToDevice)); });
  const double moved = 2.0 * bytes + 2.0 * row_bytes, copy_bw = 2.0 * bytes / (cp * 1e-3);
  std::printf(
      "grid-sync LayerNorm %d x %lld: %.4f ms, %.1f GB/s (X, gamma, beta, Y once); copy of "
      "X %.4f ms, %.1f GB/s; %.0f %% of the copy bandwidth\n",
      rows, d, ln, moved / (ln * 1e6), cp, copy_bw / 1e9, 100 * moved / (ln * 1e-3) / copy_bw);
  return worst <= 1 ? 0 : 2;
}
