// A LoopNest as bytes and back, for handing a lowered kernel to another process of the same
// binary (the measurement worker kept across tuning rounds receives each candidate this way: a
// worker forked earlier cannot see nests built after its fork). The encoding is compact binary,
// not a stable file format: the same build encodes and decodes it. Decoding rebuilds the same
// tree node for node (same kinds, types, names, constants and operand order; shared expression
// nodes stay shared), so the decoded nest prints, lowers and compiles exactly as the original.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "ir/stmt.h"

namespace tilesearch::ir {

/// The bytes of `nest` (name, params, num_inputs, body). Never fails: every node kind encodes.
std::string EncodeLoopNest(const LoopNest& nest);

/// The nest EncodeLoopNest encoded. Errors: kInvalidArgument "corrupt loop nest encoding: ..."
/// naming what was wrong (truncated bytes, an unknown node kind, operands whose types a node does
/// not accept, trailing bytes); never a crash, whatever the bytes.
[[nodiscard]] absl::StatusOr<LoopNest> DecodeLoopNest(const std::string& bytes);

}  // namespace tilesearch::ir
