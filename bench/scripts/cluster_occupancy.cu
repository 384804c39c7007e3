// How many thread block clusters of 2 (and, for comparison, single blocks) can be resident at
// once on the device for a block of THREADS threads and SMEM bytes of dynamic shared memory:
// cudaOccupancyMaxActiveClusters. The multicast GEMM kernels (TensorCoreStep::multicast) launch
// clusters of two blocks of 256 threads with 147-197 KB of shared memory each.
//   nvcc -arch=sm_90a -o /tmp/cluster_occupancy bench/scripts/cluster_occupancy.cu &&
//   /tmp/cluster_occupancy
#include <cstdio>

__global__ void __cluster_dims__(2, 1, 1) Paired(int* p) {
  if (p != nullptr) p[0] = 0;
}
__global__ void Single(int* p) {
  if (p != nullptr) p[0] = 0;
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int smem : {147488, 196640, 99 * 1024}) {
    cudaFuncSetAttribute(Paired, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaFuncSetAttribute(Single, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1024, 1, 1);
    cfg.blockDim = dim3(256, 1, 1);
    cfg.dynamicSmemBytes = smem;
    int clusters = -1;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, Paired, &cfg);
    int blocks = -1;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Single, 256, smem);
    std::printf(
        "smem %d B: %d clusters of 2 at once (%d blocks, %s) on %d SMs; single blocks: %d per SM, "
        "%d in all\n",
        smem, clusters, 2 * clusters, cudaGetErrorString(e), sms, blocks, blocks * sms);
  }
  return 0;
}
