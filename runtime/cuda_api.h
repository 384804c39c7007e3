// The few CUDA Driver API types, enum values and entry-point signatures the runtime uses, declared
// here so that nothing includes cuda.h (the build machine and CI may lack it; the driver is loaded
// with dlopen at run time). Values are those of the CUDA 13.0 driver API (cuda.h, CUDA_VERSION
// 13000) for 64-bit Linux; the entry points are looked up by their versioned symbol names
// (cuMemAlloc_v2, ...), whose signatures are the ones below. Private to runtime/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tilesearch::runtime::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2 on 64-bit hosts
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUevent_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUevent = CUevent_st*;
using CUstream = CUstream_st*;  // nullptr: the legacy default stream
using CUdevice_attribute = int;
using CUfunction_attribute = int;
using CUjit_option = int;
using cuuint32_t = std::uint32_t;
using cuuint64_t = std::uint64_t;
using CUtensorMapDataType = int;
using CUtensorMapInterleave = int;
using CUtensorMapSwizzle = int;
using CUtensorMapL2promotion = int;
using CUtensorMapFloatOOBfill = int;

/// A TMA tensor map as the driver encodes it: 128 opaque bytes, 64-byte aligned (CUtensorMap,
/// CU_TENSOR_MAP_NUM_QWORDS 16).
struct alignas(64) CUtensorMap {
  cuuint64_t opaque[16];
};

// CUresult values the runtime names itself (cuGetErrorName gives the rest).
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
inline constexpr CUresult CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
inline constexpr CUresult CUDA_ERROR_LAUNCH_TIMEOUT = 702;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;

// CUdevice_attribute.
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13;  // kHz
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36;        // kHz
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37;  // bits
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;            // bytes
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute.
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// CUjit_option (values of cuModuleLoadDataEx's option array). The *_SIZE_BYTES options carry an
// unsigned int in the void* slot; on return the driver writes the bytes it used back there.
inline constexpr CUjit_option CU_JIT_INFO_LOG_BUFFER = 3;
inline constexpr CUjit_option CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
inline constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
inline constexpr CUjit_option CU_JIT_LOG_VERBOSE = 12;

// CUtensorMapDataType (the element types our IR has; UINT8 0, UINT16 1, UINT32 2, UINT64 4 and
// FLOAT64 8 have no ir::ScalarType).
inline constexpr CUtensorMapDataType CU_TENSOR_MAP_DATA_TYPE_INT32 = 3;
inline constexpr CUtensorMapDataType CU_TENSOR_MAP_DATA_TYPE_INT64 = 5;
inline constexpr CUtensorMapDataType CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6;
inline constexpr CUtensorMapDataType CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7;
inline constexpr CUtensorMapDataType CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
// CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill.
inline constexpr CUtensorMapInterleave CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
inline constexpr CUtensorMapSwizzle CU_TENSOR_MAP_SWIZZLE_NONE = 0;
inline constexpr CUtensorMapSwizzle CU_TENSOR_MAP_SWIZZLE_32B = 1;
inline constexpr CUtensorMapSwizzle CU_TENSOR_MAP_SWIZZLE_64B = 2;
inline constexpr CUtensorMapSwizzle CU_TENSOR_MAP_SWIZZLE_128B = 3;
inline constexpr CUtensorMapL2promotion CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2;
inline constexpr CUtensorMapFloatOOBfill CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;  // zeros

// CUevent_flags.
inline constexpr unsigned int CU_EVENT_DEFAULT = 0x0;

// Entry points (pointer types; the name after PFN_ is the unversioned API name, the symbol
// resolved is given in CudaDriver).
using PFN_cuInit = CUresult (*)(unsigned int flags);
using PFN_cuDriverGetVersion = CUresult (*)(int* version);
using PFN_cuGetErrorName = CUresult (*)(CUresult error, const char** str);
using PFN_cuGetErrorString = CUresult (*)(CUresult error, const char** str);
using PFN_cuDeviceGet = CUresult (*)(CUdevice* device, int ordinal);
using PFN_cuDeviceGetCount = CUresult (*)(int* count);
using PFN_cuDeviceGetName = CUresult (*)(char* name, int len, CUdevice dev);
using PFN_cuDeviceGetAttribute = CUresult (*)(int* value, CUdevice_attribute attrib, CUdevice dev);
using PFN_cuDeviceTotalMem = CUresult (*)(size_t* bytes, CUdevice dev);
using PFN_cuDevicePrimaryCtxRetain = CUresult (*)(CUcontext* ctx, CUdevice dev);
using PFN_cuDevicePrimaryCtxRelease = CUresult (*)(CUdevice dev);
using PFN_cuCtxSetCurrent = CUresult (*)(CUcontext ctx);
using PFN_cuCtxSynchronize = CUresult (*)();
using PFN_cuMemAlloc = CUresult (*)(CUdeviceptr* dptr, size_t bytes);
using PFN_cuMemFree = CUresult (*)(CUdeviceptr dptr);
using PFN_cuMemcpyHtoD = CUresult (*)(CUdeviceptr dst, const void* src, size_t bytes);
using PFN_cuMemcpyDtoH = CUresult (*)(void* dst, CUdeviceptr src, size_t bytes);
using PFN_cuMemsetD8 = CUresult (*)(CUdeviceptr dst, unsigned char value, size_t count);
using PFN_cuMemsetD32 = CUresult (*)(CUdeviceptr dst, unsigned int value, size_t count);
using PFN_cuModuleLoadDataEx = CUresult (*)(CUmodule* module, const void* image,
                                            unsigned int num_options, CUjit_option* options,
                                            void** option_values);
using PFN_cuModuleUnload = CUresult (*)(CUmodule module);
using PFN_cuModuleGetFunction = CUresult (*)(CUfunction* function, CUmodule module,
                                             const char* name);
using PFN_cuFuncGetAttribute = CUresult (*)(int* value, CUfunction_attribute attrib,
                                            CUfunction function);
using PFN_cuFuncSetAttribute = CUresult (*)(CUfunction function, CUfunction_attribute attrib,
                                            int value);
using PFN_cuLaunchKernel = CUresult (*)(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                        unsigned int grid_z, unsigned int block_x,
                                        unsigned int block_y, unsigned int block_z,
                                        unsigned int shared_bytes, CUstream stream,
                                        void** kernel_params, void** extra);
using PFN_cuEventCreate = CUresult (*)(CUevent* event, unsigned int flags);
using PFN_cuEventRecord = CUresult (*)(CUevent event, CUstream stream);
using PFN_cuEventSynchronize = CUresult (*)(CUevent event);
using PFN_cuEventElapsedTime = CUresult (*)(float* ms, CUevent start, CUevent end);
using PFN_cuEventDestroy = CUresult (*)(CUevent event);
using PFN_cuStreamSynchronize = CUresult (*)(CUstream stream);
using PFN_cuTensorMapEncodeTiled = CUresult (*)(
    CUtensorMap* tensor_map, CUtensorMapDataType data_type, cuuint32_t rank, void* global_address,
    const cuuint64_t* global_dim, const cuuint64_t* global_strides, const cuuint32_t* box_dim,
    const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2_promotion, CUtensorMapFloatOOBfill oob_fill);

}  // namespace tilesearch::runtime::cuda
