#include "common/status.h"

namespace geops {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
  }
  return "UNKNOWN";
}

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) rep_ = std::make_unique<Rep>(Rep{code, std::string(message)});
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  return *this;
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(rep_->code));
  out += ": ";
  out += rep_->message;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return Status();
  std::string msg(context);
  msg += ": ";
  msg += rep_->message;
  return Status(rep_->code, msg);
}

#define GEOPS_DEFINE_ERROR_(fn, code) \
  Status fn(std::string_view message) { return Status(StatusCode::code, message); }
GEOPS_DEFINE_ERROR_(InvalidArgumentError, kInvalidArgument)
GEOPS_DEFINE_ERROR_(NotFoundError, kNotFound)
GEOPS_DEFINE_ERROR_(FailedPreconditionError, kFailedPrecondition)
GEOPS_DEFINE_ERROR_(UnavailableError, kUnavailable)
GEOPS_DEFINE_ERROR_(DeadlineExceededError, kDeadlineExceeded)
GEOPS_DEFINE_ERROR_(AbortedError, kAborted)
GEOPS_DEFINE_ERROR_(ResourceExhaustedError, kResourceExhausted)
GEOPS_DEFINE_ERROR_(OutOfRangeError, kOutOfRange)
GEOPS_DEFINE_ERROR_(DataLossError, kDataLoss)
GEOPS_DEFINE_ERROR_(PermissionDeniedError, kPermissionDenied)
GEOPS_DEFINE_ERROR_(InternalError, kInternal)
GEOPS_DEFINE_ERROR_(AlreadyExistsError, kAlreadyExists)
GEOPS_DEFINE_ERROR_(UnimplementedError, kUnimplemented)
GEOPS_DEFINE_ERROR_(CancelledError, kCancelled)
#undef GEOPS_DEFINE_ERROR_

}  // namespace geops
