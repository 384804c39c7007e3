// Hand-built loop nests shared by the codegen tests: a GPU-style tiled matmul (blocks, threads,
// shared tiles, barriers, a local accumulator, vectorized copies), naive nests bound to
// blockIdx / threadIdx, and a naive float32 matmul as an independent reference.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/host_buffer.h"
#include "ir/ops/registry.h"
#include "ir/stmt.h"

namespace tilesearch::codegen::testing {

inline ir::Expr V(const std::string& name) { return ir::MakeVar(name); }
inline ir::Expr C(int64_t v) { return ir::IntConst(v); }
inline ir::Expr Ld(const std::string& buffer, std::vector<ir::Expr> indices,
                   ir::ScalarType t = ir::ScalarType::kFloat32) {
  return ir::LoadNode::Make(t, buffer, std::move(indices));
}
inline ir::Stmt St(const std::string& buffer, std::vector<ir::Expr> indices, ir::Expr value) {
  return ir::StoreNode::Make(buffer, std::move(indices), std::move(value));
}
inline ir::Stmt Loop(const std::string& var, int64_t extent, ir::Stmt body,
                     ir::ForKind kind = ir::ForKind::kSerial) {
  return ir::ForNode::Make(V(var), C(0), C(extent), kind, std::move(body));
}
inline ir::Stmt Seq(std::vector<ir::Stmt> stmts) { return ir::SeqNode::Make(std::move(stmts)); }
inline ir::BufferDecl Decl(const std::string& name, std::vector<int64_t> shape,
                           ir::ScalarType t = ir::ScalarType::kFloat32,
                           ir::MemoryScope scope = ir::MemoryScope::kGlobal) {
  return ir::BufferDecl{name, t, std::move(shape), scope};
}

/// C[M, N] = A[M, K] · B[K, N] the way a GPU schedule computes it: 32×32 output tiles per block,
/// 8×8 threads each owning a 4×4 local accumulator, K in steps of 8 through shared tiles filled
/// cooperatively with vectorized 4-wide copies between barriers. M, N multiples of 32, K of 8.
ir::LoopNest GpuTiledMatmul(int64_t m, int64_t n, int64_t k);

/// The same computation with a serial K loop and no shared memory or barriers: blockIdx.{y,x}
/// over 8×8 tiles, threadIdx.{y,x} over 8×8 outputs each. M, N multiples of 8.
ir::LoopNest GpuSimpleMatmul(int64_t m, int64_t n, int64_t k);

/// Binds, in every top-level kernel of a naive nest, the outermost loop to blockIdx.x and the
/// outermost loop of its body (if any, with extent ≤ 1024) to threadIdx.x.
ir::LoopNest BindNaive(const ir::LoopNest& naive);

/// float32 matmul with the nests' summation order (k ascending), from row-major double buffers.
std::vector<float> NaiveMatmul(const ir::HostBuffer& a, const ir::HostBuffer& b, int64_t m,
                               int64_t n, int64_t k);

/// Operator arguments from shapes, attributes and a dtype.
ir::OpArgs Args(std::vector<std::vector<int64_t>> shapes,
                std::map<std::string, std::string> attrs = {},
                ir::ScalarType dtype = ir::ScalarType::kFloat32);

/// Small example arguments for every operator of the library, by name (odd extents exercise
/// sizes that are not multiples of the vector width).
std::map<std::string, ir::OpArgs> OpExamples();

/// One nest running several nests in sequence: every buffer of nests[i] (params, allocations,
/// loads, stores) is renamed prefixes[i] + name; params are concatenated.
ir::LoopNest MergeNests(const std::string& name, const std::vector<ir::LoopNest>& nests,
                        const std::vector<std::string>& prefixes);

}  // namespace tilesearch::codegen::testing
