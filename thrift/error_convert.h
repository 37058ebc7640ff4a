// The one place where geops Status meets Thrift errors.
//
// Server side: a non-OK Status becomes the IDL's GeopsError (code = the
// numeric StatusCode, message verbatim), which the handler throws so that
// the generated processor sends it as the call's declared exception.
// Client side: whatever a Thrift call threw becomes a Status:
//   GeopsError                       -> its code and message (unknown codes -> Unknown)
//   TTransportException               -> Unavailable (connection lost, refused, timed out:
//                                        the call may not have reached the shard), except
//                                        an oversized frame -> ResourceExhausted
//   TProtocolException                -> Unavailable (the byte stream is out of step)
//   TApplicationException            -> Unimplemented for an unknown method; Unavailable
//                                        when the reply is out of step (bad seqid, wrong
//                                        method); otherwise Internal (the server failed)
//   std::bad_alloc                    -> ResourceExhausted
//   any other std::exception or value -> Internal
// and tells whether the connection must be dropped (not after a complete,
// well-formed reply: a GeopsError or a server-side TApplicationException).
//
// Thread-safety: free functions without shared state.
#ifndef GEOPS_THRIFT_ERROR_CONVERT_H_
#define GEOPS_THRIFT_ERROR_CONVERT_H_

#include <string_view>

#include "common/status.h"
#include "gen-cpp/parameter_server_types.h"

namespace geops::rpc {

// REQUIRES: !status.ok().
gen::GeopsError ToGeopsError(const Status& status);

// The Status a GeopsError stands for. A code outside StatusCode, or OK (a
// server never sends an OK error), becomes Unknown with the code named.
Status FromGeopsError(const gen::GeopsError& error);

struct CaughtError {
  Status status;
  bool connection_broken = true;  // the transport must be closed and reopened
};

// Converts the exception being handled. REQUIRES: called inside a catch
// block. `context` names the call ("read from 127.0.0.1:9090") and prefixes
// the message of every error except a GeopsError's.
CaughtError StatusFromCurrentException(std::string_view context);

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_ERROR_CONVERT_H_
