#pragma once
// Whether a statement tree holds a statement of a given kind: the code generator's and the
// lowering's questions about a kernel (does it reallocate registers, use wgmma, ...).
#include "ir/stmt.h"

namespace tilesearch::ir {

/// Whether `s` or any statement under it (loop bodies, sequences, allocations, both branches of
/// conditionals) is of kind `kind`.
bool ContainsStmtKind(const Stmt& s, StmtKind kind);

}  // namespace tilesearch::ir
