// GoogleMock matchers for absl::Status and absl::StatusOr (Abseil 20220623 has none).
//
//   EXPECT_THAT(MakeX(bad), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extent")));
//   EXPECT_THAT(MakeX(good), IsOk());
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace tilesearch::testing {

namespace internal {
inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace internal

/// Matches a Status or StatusOr whose code equals `code` and whose message matches `message_matcher`.
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

}  // namespace tilesearch::testing
