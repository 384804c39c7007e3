// GoogleMock matchers for absl::Status and absl::StatusOr (Abseil 20220623 has none).
//
//   EXPECT_THAT(MakeX(bad), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extent")));
//   EXPECT_THAT(MakeX(good), IsOk());
//   const X x = Ok(MakeX(good));   // the value, after a (non-fatal) expectation that it is OK
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tilesearch::testing {

namespace internal {
inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace internal

/// Matches a Status or StatusOr whose code equals `code` and whose message matches
/// `message_matcher`.
MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has status code ") + absl::StatusCodeToString(code)) {
  const absl::Status& status = internal::GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(status.message()),
                                       result_listener);
}

/// Matches an OK Status or a StatusOr holding a value.
MATCHER(IsOk, "is OK") {
  const absl::Status& status = internal::GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.ok();
}

/// The value held by `r`, after an EXPECT that it is OK. Tests call it where the value is needed
/// to go on; a non-OK `r` fails the test and then aborts it (absl's StatusOr dereference).
template <typename T>
T Ok(absl::StatusOr<T> r) {
  EXPECT_THAT(r, IsOk());
  return *std::move(r);
}

}  // namespace tilesearch::testing
