// geops::client::Error: what every call of the geops C++ client library
// throws when it fails.
//
// The code says what kind of failure it was, the message says what exactly
// ("table 'w' has 8 initial values, its shape 4x3 needs 12"). Codes follow the usual RPC convention (the same
// numbers as gRPC and absl::StatusCode), so they can be mapped one to one.
#ifndef GEOPS_CLIENT_ERROR_H_
#define GEOPS_CLIENT_ERROR_H_

#include <stdexcept>
#include <string>

namespace geops::client {

enum class ErrorCode : int {
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,     // a bad option, shape, value or call order
  kDeadlineExceeded = 4,    // a wait ran out of time
  kNotFound = 5,            // e.g. no table or site of that name
  kAlreadyExists = 6,
  kPermissionDenied = 7,    // the connection may not act for whom the call names (docs/security.md)
  kResourceExhausted = 8,   // e.g. a message larger than the RPC frame limit
  kFailedPrecondition = 9,  // e.g. the site trains another model
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,        // a shard could not be reached (after retries)
  kDataLoss = 15,
};

// Upper-case name of a code, e.g. "INVALID_ARGUMENT".
const char* ErrorCodeName(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  // what() is "<CODE NAME>: <message>".
  Error(ErrorCode code, const std::string& message);

  ErrorCode code() const noexcept { return code_; }
  // The message without the code name.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace geops::client

#endif  // GEOPS_CLIENT_ERROR_H_
