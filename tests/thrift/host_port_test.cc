#include "thrift/host_port.h"

#include <gtest/gtest.h>

#include <string>

namespace geops::rpc {
namespace {

TEST(HostPortTest, ParsesNamesAndIpv4) {
  Result<HostPort> a = ParseHostPort("127.0.0.1:9090");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9090);
  Result<HostPort> b = ParseHostPort("localhost:0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "localhost");
  EXPECT_EQ(b->port, 0);
  EXPECT_EQ(ParseHostPort("ps-3.site.example:65535")->port, 65535);
}

TEST(HostPortTest, ParsesBracketedIpv6) {
  Result<HostPort> a = ParseHostPort("[::1]:7000");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 7000);
}

TEST(HostPortTest, ToStringRoundTrips) {
  for (const char* text : {"127.0.0.1:1", "[::1]:7000", "localhost:65535"}) {
    Result<HostPort> hp = ParseHostPort(text);
    ASSERT_TRUE(hp.ok()) << text;
    EXPECT_EQ(hp->ToString(), text);
    EXPECT_EQ(*ParseHostPort(hp->ToString()), *hp);
  }
}

TEST(HostPortTest, RefusesMalformedAddressesNamingThem) {
  const char* bad[] = {"",           "localhost",     "localhost:",  ":9090",
                       "host:90x",   "host:-1",       "host:65536",  "host:99999999999",
                       "::1:9090",   "[::1]9090",     "[::1:9090",   "[]:9090",
                       "a b:9090",   "host:+80",      "host: 80"};
  for (const char* text : bad) {
    Result<HostPort> hp = ParseHostPort(text);
    ASSERT_FALSE(hp.ok()) << "accepted '" << text << "'";
    EXPECT_EQ(hp.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(hp.status().message().find("'" + std::string(text) + "'"), std::string::npos)
        << hp.status().message();
  }
}

}  // namespace
}  // namespace geops::rpc
