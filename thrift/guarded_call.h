// GuardedCall: runs the body of an RPC handler and turns what it throws
// into a Status, so that no exception escapes into Thrift's processor
// (which would close the connection without a word to the caller).
// std::bad_alloc becomes ResourceExhausted, every other exception Internal,
// each naming the call. The PS and the mirror handlers log and convert the
// returned Status to the caller's GeopsError themselves.
#ifndef GEOPS_THRIFT_GUARDED_CALL_H_
#define GEOPS_THRIFT_GUARDED_CALL_H_

#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "common/status.h"

namespace geops::rpc {

template <typename Body>
Status GuardedCall(std::string_view call, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory serving " + std::string(call));
  } catch (const std::exception& e) {
    return InternalError("unexpected exception serving " + std::string(call) + ": " + e.what());
  } catch (...) {
    return InternalError("unexpected exception serving " + std::string(call));
  }
}

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_GUARDED_CALL_H_
