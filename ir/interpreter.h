// Reference interpreter: executes any loop nest on host buffers, including GPU-style nests with
// block and thread bindings, shared / local buffers and barriers, following the execution model
// stated in ir/stmt.h. Threads of a block run region by region: within a region between two
// barriers each thread runs to completion before the next one starts, so a missing barrier shows up
// as a wrong answer rather than passing by luck; local buffers are private per thread. Async
// copies (Stores with async_copy) land at the AsyncGroup wait that completes their group, the
// latest moment the IR allows.
#pragma once

#include "absl/status/status.h"
#include "ir/host_buffer.h"
#include "ir/stmt.h"

namespace tilesearch::ir {

enum class Precision : uint8_t {
  kNative,   // float32 arithmetic rounds each operation to float32 (like the GPU, without FMA)
  kFloat64,  // all float arithmetic in double, stores still rounded to the buffer dtype
};

struct InterpretOptions {
  Precision precision = Precision::kNative;
};

/// Runs `nest`, reading and writing `buffers` (one entry per parameter, by name, with the
/// parameter's dtype and shape).
/// Errors (kInvalidArgument / kOutOfRange / kFailedPrecondition, message naming buffer, index,
/// loop or statement): missing or mis-shaped parameter buffer, unknown buffer, index out of
/// bounds, integer division by zero, a barrier reached in thread-divergent control flow (a loop or
/// condition whose value differs between threads of a block, or under a threadIdx guard).
absl::Status Interpret(const LoopNest& nest, BufferMap& buffers,
                       const InterpretOptions& options = {});

}  // namespace tilesearch::ir
