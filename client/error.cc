// geops::client::Error and the conversion from the core's Status.
#include <string>

#include "client/throw_status.h"
#include "geops/error.h"

namespace geops::client {

// The public codes are the core's numbers, so a cast converts them.
#define GEOPS_SAME_CODE(name) \
  static_assert(static_cast<int>(ErrorCode::k##name) == static_cast<int>(StatusCode::k##name))
GEOPS_SAME_CODE(Cancelled);
GEOPS_SAME_CODE(Unknown);
GEOPS_SAME_CODE(InvalidArgument);
GEOPS_SAME_CODE(DeadlineExceeded);
GEOPS_SAME_CODE(NotFound);
GEOPS_SAME_CODE(AlreadyExists);
GEOPS_SAME_CODE(ResourceExhausted);
GEOPS_SAME_CODE(FailedPrecondition);
GEOPS_SAME_CODE(Aborted);
GEOPS_SAME_CODE(OutOfRange);
GEOPS_SAME_CODE(Unimplemented);
GEOPS_SAME_CODE(Internal);
GEOPS_SAME_CODE(Unavailable);
GEOPS_SAME_CODE(DataLoss);
GEOPS_SAME_CODE(PermissionDenied);
#undef GEOPS_SAME_CODE

const char* ErrorCodeName(ErrorCode code) noexcept {
  return StatusCodeName(static_cast<StatusCode>(code)).data();
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string(ErrorCodeName(code)) + ": " + message), code_(code), message_(message) {}

void ThrowIfError(const Status& status) {
  if (status.ok()) return;
  throw Error(static_cast<ErrorCode>(status.code()), status.message());
}

}  // namespace geops::client
