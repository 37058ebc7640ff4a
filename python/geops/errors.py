"""Exceptions raised by geops: one class per geops status code.

Every error is a ``GeopsError`` carrying the message of the server or of the
client that refused the call (``err.message``) and the code's name
(``err.code``, e.g. ``"INVALID_ARGUMENT"``). What the codes mean for a caller
(see common/status.h):

  UnavailableError        a shard could not be reached, after the client's retries
  DeadlineExceededError   a wait (e.g. for a slow peer's clock) ran past its deadline
  AbortedError            retry at a higher level (e.g. register again)
  InvalidArgumentError    the request is malformed (shape, NaN, dtype); do not retry
  FailedPreconditionError the system is not in a state to serve it (model mismatch)
  ResourceExhaustedError  a bound (frame size, memory) was exceeded
  DataLossError           stored data is corrupt or missing; stop and shout
  PermissionDeniedError   this connection may not act for whom the call names (TLS identity)

Some also derive from the matching built-in exception (InvalidArgumentError
is a ValueError, DeadlineExceededError a TimeoutError, UnavailableError a
ConnectionError), so generic handlers catch them too.
"""


class GeopsError(Exception):
    """Base class of every geops error."""

    code = "UNKNOWN"

    def __init__(self, message):
        super().__init__(message)
        self.message = message

    def __str__(self):
        return f"{self.code}: {self.message}"


class CancelledError(GeopsError):
    code = "CANCELLED"


class UnknownError(GeopsError):
    code = "UNKNOWN"


class InvalidArgumentError(GeopsError, ValueError):
    code = "INVALID_ARGUMENT"


class DeadlineExceededError(GeopsError, TimeoutError):
    code = "DEADLINE_EXCEEDED"


class NotFoundError(GeopsError, LookupError):
    code = "NOT_FOUND"


class AlreadyExistsError(GeopsError):
    code = "ALREADY_EXISTS"


class ResourceExhaustedError(GeopsError):
    code = "RESOURCE_EXHAUSTED"


class FailedPreconditionError(GeopsError):
    code = "FAILED_PRECONDITION"


class AbortedError(GeopsError):
    code = "ABORTED"


class OutOfRangeError(GeopsError):
    code = "OUT_OF_RANGE"


class UnimplementedError(GeopsError, NotImplementedError):
    code = "UNIMPLEMENTED"


class InternalError(GeopsError):
    code = "INTERNAL"


class UnavailableError(GeopsError, ConnectionError):
    code = "UNAVAILABLE"


class DataLossError(GeopsError):
    code = "DATA_LOSS"


class PermissionDeniedError(GeopsError, PermissionError):
    code = "PERMISSION_DENIED"


_BY_CODE = {cls.code: cls for cls in GeopsError.__subclasses__()}


def _from_status(code, message):
    """The exception for a C++ Status (called by the extension)."""
    return _BY_CODE.get(code, UnknownError)(message)
