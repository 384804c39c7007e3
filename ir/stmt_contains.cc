#include "ir/stmt_contains.h"

namespace tilesearch::ir {
namespace {

class FindsKind : public StmtVisitor {
 public:
  explicit FindsKind(StmtKind kind) : kind_(kind) {}
  bool found = false;
  void Visit(const Stmt& s) override {
    if (found || !s.defined()) return;
    if (s.kind() == kind_) {
      found = true;
      return;
    }
    StmtVisitor::Visit(s);
  }

 private:
  StmtKind kind_;
};

}  // namespace

bool ContainsStmtKind(const Stmt& s, StmtKind kind) {
  FindsKind f(kind);
  f.Visit(s);
  return f.found;
}

}  // namespace tilesearch::ir
