// [security]: TLS is required beyond loopback, plaintext there only when
// asked for by name, and the certificate paths each process uses.
#include <gtest/gtest.h>

#include <string>

#include "config/tls_options.h"
#include "config/topology.h"

namespace geops::config {
namespace {

std::string TwoSites(const std::string& host, const std::string& security) {
  return "[model]\nworkload = \"counter\"\nlayers = [4, 4]\n" + security +
         "\n[[sites]]\nname = \"us\"\nhost = \"" + host + "\"\nworkers = 2\n[[sites]]\nname = \"eu\"\nhost = \"" +
         host + "\"\n";
}

TEST(SecurityTopologyTest, ASiteBeyondLoopbackNeedsCertificatesOrAnExplicitInsecure) {
  Result<Topology> open = ParseTopology(TwoSites("10.1.2.3", ""), "t.toml");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(open.status().message().find("site us binds to 10.1.2.3"), std::string::npos) << open.status().ToString();
  EXPECT_NE(open.status().message().find("geops certs t.toml"), std::string::npos) << open.status().ToString();

  Result<Topology> insecure = ParseTopology(TwoSites("10.1.2.3", "[security]\ninsecure = true"), "t.toml");
  ASSERT_TRUE(insecure.ok()) << insecure.status().ToString();
  EXPECT_FALSE(insecure->tls());

  Result<Topology> both =
      ParseTopology(TwoSites("10.1.2.3", "[security]\ninsecure = true\ncerts = \"c\""), "t.toml");
  EXPECT_FALSE(both.ok());

  for (const char* host : {"127.0.0.1", "127.3.4.5", "localhost", "::1"}) {
    EXPECT_TRUE(ParseTopology(TwoSites(host, ""), "t.toml").ok()) << host;
  }
  Result<Topology> unknown = ParseTopology(TwoSites("127.0.0.1", "[security]\ncert = \"c\""), "t.toml");
  EXPECT_FALSE(unknown.ok());
}

TEST(SecurityTopologyTest, EachProcessUsesItsOwnCertificate) {
  Result<Topology> t = ParseTopology(TwoSites("10.1.2.3", "[security]\ncerts = \"pki\""), "/srv/run/t.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(t->tls());
  const rpc::TlsOptions site = SiteTls(*t, 1);
  EXPECT_EQ(site.ca_file, "/srv/run/pki/ca.pem");
  EXPECT_EQ(site.cert_file, "/srv/run/pki/sites/eu.pem");
  EXPECT_EQ(site.key_file, "/srv/run/pki/sites/eu.key");
  EXPECT_EQ(site.site_names, (std::vector<std::string>{"us", "eu"}));
  const rpc::TlsOptions worker = WorkerTls(*t, 0, 1);
  EXPECT_EQ(worker.cert_file, "/srv/run/pki/workers/us-worker-1.pem");
  EXPECT_EQ(worker.key_file, "/srv/run/pki/workers/us-worker-1.key");
  EXPECT_EQ(worker.expect_peer, "geops://site/us");
  const rpc::PeerNames names = PeerNamesOf(*t, 1);
  EXPECT_EQ(names.self_name(), "eu");

  Result<Topology> plain = ParseTopology(TwoSites("127.0.0.1", ""), "t.toml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(SiteTls(*plain, 0).enabled());
  EXPECT_FALSE(WorkerTls(*plain, 0, 0).enabled());
}

// [server] sets every port's limits; a bad one is refused naming it.
TEST(SecurityTopologyTest, ServerLimitsComeFromTheTopologyAndAreChecked) {
  Result<Topology> t = ParseTopology(
      TwoSites("127.0.0.1", "[server]\nmax_connections = 500\nmax_active_requests = 64\nidle_timeout_ms = 90000\n"
                            "frame_timeout_ms = 5000\nsend_timeout_ms = 7000"),
      "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const rpc::PsServerOptions o = ServerOptionsOf(*t, 1);
  EXPECT_EQ(o.max_connections, 500);
  EXPECT_EQ(o.max_active_requests, 64);
  EXPECT_EQ(o.idle_timeout_ms, 90000);
  EXPECT_EQ(o.transport.frame_timeout_ms, 5000);
  EXPECT_EQ(o.send_timeout_ms, 7000);
  EXPECT_EQ(o.peers.self_name(), "eu");
  EXPECT_TRUE(o.Validate().ok()) << o.Validate().ToString();

  const rpc::PsServerOptions defaults = ServerOptionsOf(*ParseTopology(TwoSites("127.0.0.1", ""), "t.toml"), 0);
  EXPECT_EQ(defaults.max_connections, 10000);
  EXPECT_EQ(defaults.transport.frame_timeout_ms, 120000);

  for (const char* bad : {"[server]\nmax_connections = 0", "[server]\nframe_timeout_ms = -1",
                          "[server]\nmax_active_requests = 0", "[server]\nmax_conections = 5"}) {
    Result<Topology> r = ParseTopology(TwoSites("127.0.0.1", bad), "t.toml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("server"), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace geops::config
