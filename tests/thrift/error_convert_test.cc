#include "thrift/error_convert.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TProtocolException.h>
#include <thrift/transport/TTransportException.h>

namespace geops::rpc {
namespace {

using apache::thrift::TApplicationException;
using apache::thrift::protocol::TProtocolException;
using apache::thrift::transport::TTransportException;

template <typename E>
CaughtError Convert(const E& e) {
  try {
    throw e;
  } catch (...) {
    return StatusFromCurrentException("read on 127.0.0.1:1");
  }
}

TEST(ErrorConvertTest, EveryErrorCodeRoundTripsThroughGeopsError) {
  for (StatusCode code :
       {StatusCode::kCancelled, StatusCode::kUnknown, StatusCode::kInvalidArgument,
        StatusCode::kDeadlineExceeded, StatusCode::kNotFound, StatusCode::kAlreadyExists,
        StatusCode::kResourceExhausted, StatusCode::kFailedPrecondition, StatusCode::kAborted,
        StatusCode::kOutOfRange, StatusCode::kUnimplemented, StatusCode::kInternal,
        StatusCode::kUnavailable, StatusCode::kDataLoss}) {
    Status s(code, "message for " + std::string(StatusCodeName(code)));
    gen::GeopsError e = ToGeopsError(s);
    EXPECT_EQ(FromGeopsError(e), s);
    CaughtError caught = Convert(e);
    EXPECT_EQ(caught.status, s) << "the server's message is passed through untouched";
    EXPECT_FALSE(caught.connection_broken);
  }
}

TEST(ErrorConvertTest, UnknownOrOkCodeFromTheWireBecomesUnknown) {
  gen::GeopsError e;
  e.code = 77;
  e.message = "from the future";
  Status s = FromGeopsError(e);
  EXPECT_EQ(s.code(), StatusCode::kUnknown);
  EXPECT_NE(s.message().find("77"), std::string::npos);
  EXPECT_NE(s.message().find("from the future"), std::string::npos);
  e.code = 0;
  EXPECT_EQ(FromGeopsError(e).code(), StatusCode::kUnknown);
}

TEST(ErrorConvertTest, TransportFailuresAreUnavailableAndBreakTheConnection) {
  for (auto type : {TTransportException::NOT_OPEN, TTransportException::TIMED_OUT,
                    TTransportException::END_OF_FILE, TTransportException::INTERRUPTED,
                    TTransportException::UNKNOWN}) {
    CaughtError c = Convert(TTransportException(type, "boom"));
    EXPECT_EQ(c.status.code(), StatusCode::kUnavailable) << c.status.ToString();
    EXPECT_TRUE(c.connection_broken);
    EXPECT_EQ(c.status.message().rfind("read on 127.0.0.1:1: ", 0), 0u) << c.status.message();
  }
  CaughtError p = Convert(TProtocolException(TProtocolException::INVALID_DATA, "junk"));
  EXPECT_EQ(p.status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(p.connection_broken);
}

TEST(ErrorConvertTest, OversizedFrameIsResourceExhausted) {
  CaughtError c = Convert(TTransportException(TTransportException::CORRUPTED_DATA,
                                              "Received an oversized frame"));
  EXPECT_EQ(c.status.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(c.connection_broken);
}

TEST(ErrorConvertTest, ApplicationErrorsSayWhetherTheStreamIsIntact) {
  CaughtError unknown_method = Convert(TApplicationException(TApplicationException::UNKNOWN_METHOD, "x"));
  EXPECT_EQ(unknown_method.status.code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(unknown_method.connection_broken);
  CaughtError server_failed = Convert(TApplicationException(TApplicationException::INTERNAL_ERROR, "x"));
  EXPECT_EQ(server_failed.status.code(), StatusCode::kInternal);
  EXPECT_FALSE(server_failed.connection_broken);
  CaughtError out_of_step = Convert(TApplicationException(TApplicationException::BAD_SEQUENCE_ID, "x"));
  EXPECT_EQ(out_of_step.status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(out_of_step.connection_broken);
}

TEST(ErrorConvertTest, OtherExceptionsAreInternalOrResourceExhausted) {
  EXPECT_EQ(Convert(std::bad_alloc()).status.code(), StatusCode::kResourceExhausted);
  CaughtError c = Convert(std::runtime_error("surprise"));
  EXPECT_EQ(c.status.code(), StatusCode::kInternal);
  EXPECT_NE(c.status.message().find("surprise"), std::string::npos);
  EXPECT_EQ(Convert(42).status.code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace geops::rpc
