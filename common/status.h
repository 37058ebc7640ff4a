// Status and Result<T>: how every geops call reports success or failure.
//
// The core never throws. A call that can fail returns a Status (cheap when
// OK: one null pointer) or a Result<T> holding either a value or a non-OK
// Status. Codes follow abseil's meaning so callers know what to do:
//   kUnavailable         retry this same call (transient: connection, overload)
//   kDeadlineExceeded    the call's deadline passed; retrying may succeed
//   kAborted             retry at a higher level (e.g. re-register)
//   kInvalidArgument     the request is malformed; do not retry
//   kFailedPrecondition  the system is not in a state to serve it; do not retry
//   kNotFound            a named thing (table, chunk, worker) does not exist
//   kResourceExhausted   a bound (frame size, memory) was exceeded
//   kDataLoss            stored data is corrupt or missing; stop and shout
//   kInternal            a bug
//
// Thread-safety: Status and Result are values; distinct objects may be used
// from distinct threads freely.
#ifndef GEOPS_COMMON_STATUS_H_
#define GEOPS_COMMON_STATUS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace geops {

enum class StatusCode : int32_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};
inline constexpr size_t kNumStatusCodes = 16;

// Returns the upper-case name of `code` ("INVALID_ARGUMENT").
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string_view message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "INVALID_ARGUMENT: unknown table 'fc9.weight'", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

  // Marks an error as deliberately ignored.
  void IgnoreError() const {}

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

inline bool operator==(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}

Status InvalidArgumentError(std::string_view message);
Status NotFoundError(std::string_view message);
Status FailedPreconditionError(std::string_view message);
Status UnavailableError(std::string_view message);
Status DeadlineExceededError(std::string_view message);
Status AbortedError(std::string_view message);
Status ResourceExhaustedError(std::string_view message);
Status OutOfRangeError(std::string_view message);
Status DataLossError(std::string_view message);
Status InternalError(std::string_view message);
Status AlreadyExistsError(std::string_view message);
Status UnimplementedError(std::string_view message);
Status PermissionDeniedError(std::string_view message);
Status CancelledError(std::string_view message);

// Result<T> holds a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) {
      v_ = Status(StatusCode::kInternal, "Result constructed from OK status without a value");
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace geops

#define GEOPS_CONCAT_INNER_(a, b) a##b
#define GEOPS_CONCAT_(a, b) GEOPS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define GEOPS_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::geops::Status geops_status_ = (expr);      \
    if (!geops_status_.ok()) return geops_status_; \
  } while (0)

// `lhs = value of expr` (a Result<T>), or returns its Status.
#define GEOPS_ASSIGN_OR_RETURN(lhs, expr) \
  GEOPS_ASSIGN_OR_RETURN_IMPL_(GEOPS_CONCAT_(geops_result_, __LINE__), lhs, expr)
#define GEOPS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#endif  // GEOPS_COMMON_STATUS_H_
