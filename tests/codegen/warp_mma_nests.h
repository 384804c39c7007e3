// A hand-built tensor-core matmul around one WarpMma statement (ir/stmt.h), shared by the PTX test
// (tests/codegen/warp_mma_ptx_test.cc) and the GPU run test (tests/measure/warp_mma_gpu_test.cc):
// the nest, its inputs and the float64 reference.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ir/host_buffer.h"
#include "ir/stmt.h"

namespace tilesearch::codegen::testing {

/// One variant of the kernel: the mma kind, the operand layouts and the shared rows' padding.
struct WarpMmaCase {
  ir::MmaKind kind = ir::MmaKind::kF16;
  bool a_k_inner = true;  // A stored [m][k] (else [k][m]), globally and in shared memory
  bool b_k_inner = true;  // B stored [n][k] (else [k][n])
  /// Extra elements at the end of every shared row: 0 or 8 keep 16-bit rows 16-byte aligned
  /// (ldmatrix); 2 does not (scalar fragment loads).
  int64_t pad = 0;
};

/// "f16_amk_bnk" style name for test output: kind, A layout (amk / akm), B layout (bnk / bkn) and
/// "_padP" when padded.
std::string WarpMmaCaseName(const WarpMmaCase& c);

/// Prints WarpMmaCaseName (gtest's name for a parameter).
void PrintTo(const WarpMmaCase& c, std::ostream* os);

/// Every kind with every A and B layout, unpadded, then the 16-bit kinds with pad 2 and 8.
std::vector<WarpMmaCase> AllWarpMmaCases();

/// The problem's extents: C[M, N] = A · B over K.
struct WarpMmaDims {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};
WarpMmaDims WarpMmaProblem(ir::MmaKind kind);

/// C = A · B as a GPU kernel: blockIdx.y / blockIdx.x over 64×16 block tiles, threadIdx.y over two
/// warps of 32 rows each and threadIdx.x over the lanes; per K chunk of 2·MmaK the block copies its
/// A and B tiles from global memory into shared buffers A_s / B_s (element by element), waits at a
/// barrier and every warp runs WarpMma(m_frags 2, n_frags 2, k_steps 2) on its local accumulator
/// acc[2, 2, 4] (lane = threadIdx.x); acc starts at 0 and is stored to C with the C-fragment
/// index formula. Params: A (MmaOperandType; [M, K] or [K, M]), B ([N, K] or [K, N]), C (float32).
ir::LoopNest WarpMmaMatmul(const WarpMmaCase& c);

/// Inputs A and B of WarpMmaMatmul filled with values uniform in [-1, 1) rounded to their dtype,
/// and C zero-filled.
ir::BufferMap WarpMmaInputs(const WarpMmaCase& c, uint64_t seed);

/// The float64 product of the operand values the kind multiplies (tf32: rounded to TF32, else
/// the inputs themselves), [M, N] row-major; `magnitude` (optional) receives Σ_k |a·b| per element.
std::vector<double> WarpMmaReference(const WarpMmaCase& c, const ir::BufferMap& inputs,
                                     std::vector<double>* magnitude = nullptr);

}  // namespace tilesearch::codegen::testing
