#include "thrift/error_convert.h"

#include <exception>
#include <new>
#include <string>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TProtocolException.h>
#include <thrift/transport/TTransportException.h>

namespace geops::rpc {
namespace {

using apache::thrift::TApplicationException;
using apache::thrift::protocol::TProtocolException;
using apache::thrift::transport::TTransportException;

bool IsKnownCode(int32_t code) {
  switch (static_cast<StatusCode>(code)) {
    case StatusCode::kCancelled:
    case StatusCode::kUnknown:
    case StatusCode::kInvalidArgument:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kResourceExhausted:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
    case StatusCode::kInternal:
    case StatusCode::kUnavailable:
    case StatusCode::kDataLoss:
    case StatusCode::kPermissionDenied:
      return true;
    case StatusCode::kOk:
      return false;
  }
  return false;
}

std::string Join(std::string_view context, std::string_view what) {
  std::string out(context);
  out += ": ";
  out += what;
  return out;
}

}  // namespace

gen::GeopsError ToGeopsError(const Status& status) {
  gen::GeopsError error;
  error.code = static_cast<int32_t>(status.code());
  error.message = status.message();
  return error;
}

Status FromGeopsError(const gen::GeopsError& error) {
  if (!IsKnownCode(error.code)) {
    return Status(StatusCode::kUnknown,
                  "server sent error code " + std::to_string(error.code) + ": " + error.message);
  }
  return Status(static_cast<StatusCode>(error.code), error.message);
}

CaughtError StatusFromCurrentException(std::string_view context) {
  try {
    throw;
  } catch (const gen::GeopsError& e) {
    return {FromGeopsError(e), false};
  } catch (const TTransportException& e) {
    if (e.getType() == TTransportException::CORRUPTED_DATA) {
      return {ResourceExhaustedError(Join(context, std::string("frame refused: ") + e.what())), true};
    }
    return {UnavailableError(Join(context, e.what())), true};
  } catch (const TProtocolException& e) {
    return {UnavailableError(Join(context, std::string("protocol error: ") + e.what())), true};
  } catch (const TApplicationException& e) {
    switch (e.getType()) {
      case TApplicationException::UNKNOWN_METHOD:
        return {UnimplementedError(Join(context, e.what())), false};
      case TApplicationException::BAD_SEQUENCE_ID:
      case TApplicationException::WRONG_METHOD_NAME:
      case TApplicationException::INVALID_MESSAGE_TYPE:
      case TApplicationException::MISSING_RESULT:
      case TApplicationException::PROTOCOL_ERROR:
        // Raised by the client stub: the reply stream is out of step.
        return {UnavailableError(Join(context, std::string("bad reply: ") + e.what())), true};
      default:
        // A complete exception reply from the server's processor.
        return {InternalError(Join(context, std::string("server failed: ") + e.what())), false};
    }
  } catch (const std::bad_alloc&) {
    return {ResourceExhaustedError(Join(context, "out of memory")), true};
  } catch (const std::exception& e) {
    return {InternalError(Join(context, e.what())), true};
  } catch (...) {
    return {InternalError(Join(context, "unknown exception")), true};
  }
}

}  // namespace geops::rpc
