// Error handling helpers shared by every tilesearch library.
//
// Two kinds of errors (LLVM's distinction, in Abseil terms): anything a user's input, schedule, log
// or device can trigger is returned as absl::Status / absl::StatusOr<T>; a broken internal
// invariant is a CHECK that aborts with a message. Abseil 20220623 ships neither status macros nor
// absl/log, so the small set needed lives here.
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tilesearch::base_internal {

/// Collects a CHECK failure message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": CHECK failed: " << condition << ": ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

/// Lets `CHECK(c) << ...` be an expression of type void in both branches of the ternary.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace tilesearch::base_internal

/// Aborts with file, line, condition and the streamed message when `condition` is false.
/// For broken internal invariants only; user-triggerable errors return absl::Status.
#define CHECK(condition)                         \
  (condition)                                    \
      ? (void)0                                  \
      : ::tilesearch::base_internal::Voidify() & \
            ::tilesearch::base_internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define TS_STATUS_CONCAT_INNER(a, b) a##b
#define TS_STATUS_CONCAT(a, b) TS_STATUS_CONCAT_INNER(a, b)

/// Returns the status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                                                \
  do {                                                                       \
    ::absl::Status ts_status_ = ::tilesearch::base_internal::AsStatus(expr); \
    if (!ts_status_.ok()) return ts_status_;                                 \
  } while (0)

/// `ASSIGN_OR_RETURN(auto x, MakeX())`: assigns the value of a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  TS_ASSIGN_OR_RETURN_IMPL(TS_STATUS_CONCAT(ts_statusor_, __LINE__), lhs, rexpr)

#define TS_ASSIGN_OR_RETURN_IMPL(statusor, lhs, rexpr)     \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

namespace tilesearch::base_internal {
inline const absl::Status& AsStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& AsStatus(const absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace tilesearch::base_internal
