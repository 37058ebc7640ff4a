// Mutual TLS on the LAN and mirror ports (docs/security.md): certificates
// made by the same code as `geops certs`, real servers on 127.0.0.1, and
// every way of claiming to be someone else refused with PERMISSION_DENIED
// while the server keeps serving.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "certs/cert_authority.h"
#include "config/tls_options.h"
#include "config/topology.h"
#include "tests/thrift/thrift_test_util.h"
#include "thrift/mirror_client.h"
#include "thrift/mirror_server.h"
#include "thrift/peer_identity.h"
#include "thrift/tls.h"
#include "wan/wan_transport.h"

namespace geops::rpc {
namespace {

using testing::FastClient;
using testing::LoopbackServer;
using testing::MakeShard;
using testing::OneShard;
using testing::SmallModel;

constexpr char kTopology[] = R"(
name = "tls-test"
[model]
workload = "counter"
layers = [4, 4]
[[sites]]
name = "us"
workers = 2
[[sites]]
name = "eu"
workers = 2
[[sites]]
name = "ap"
workers = 1
)";

// Two deployments' certificates, made once for the whole suite.
class Certs {
 public:
  static const Certs& Get() {
    static const Certs* certs = new Certs();
    return *certs;
  }
  config::Topology ours;   // [security] certs -> dir/ours
  config::Topology other;  // same names, another CA
 private:
  Certs() {
    const std::string dir = ::testing::TempDir() + "/geops-tls-test-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    for (auto [name, t] : {std::pair{"ours", &ours}, std::pair{"other", &other}}) {
      Result<config::Topology> parsed = config::ParseTopology(kTopology, dir + "/topology.toml");
      EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
      *t = std::move(parsed).value();
      t->security.certs = name;
      Status s = certs::WriteDeploymentCerts(*t, dir + "/" + name, 1, /*force=*/false);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
  }
};

int Site(const config::Topology& t, const std::string& name) { return t.FindSite(name).value(); }

PsServerOptions SiteServer(const config::Topology& t, const std::string& site) {
  PsServerOptions o = LoopbackServer();
  o.tls = config::SiteTls(t, Site(t, site));
  o.peers = config::PeerNamesOf(t, Site(t, site));
  return o;
}

ThriftClientOptions WorkerClient(const config::Topology& t, const std::string& site, int worker) {
  ThriftClientOptions o = FastClient();
  o.tls = config::WorkerTls(t, Site(t, site), worker);
  return o;
}

class TlsLanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = SmallModel();
    shard_ = MakeShard(*spec_, OneShard(2));
    ASSERT_NE(shard_, nullptr);
  }
  void ServeAs(const config::Topology& t, const std::string& site) {
    auto server = PsServer::Start(shard_.get(), SiteServer(t, site));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  std::unique_ptr<ThriftShardConnection> Connect(const ThriftClientOptions& o) {
    auto c = ThriftShardConnection::Create(server_->address(), o, spec_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }
  Result<RegisterReply> Register(ThriftShardConnection& c, WorkerId worker) {
    return c.Register(worker, spec_->Fingerprint(), "");
  }

  std::shared_ptr<const ModelSpec> spec_;
  std::unique_ptr<datacenter::Shard> shard_;
  std::unique_ptr<PsServer> server_;
};

TEST_F(TlsLanTest, AWorkerWithItsOwnCertificateTrainsOverTls) {
  const config::Topology& t = Certs::Get().ours;
  ServeAs(t, "us");
  auto c = Connect(WorkerClient(t, "us", 1));
  ASSERT_TRUE(Register(*c, 1).ok());
  const std::vector<ChunkKey> keys = {spec_->ChunksOfTable(0)[0]};
  std::vector<float> ones(static_cast<size_t>(spec_->ChunkElements(keys[0])), 1.0f);
  auto updated = c->Update(1, 0, keys, ones);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  // Both directions are counted on both ends, as in plaintext (TSSLSocket
  // writes whole buffers without write_partial).
  const auto payload = static_cast<int64_t>(ones.size() * sizeof(float));
  EXPECT_GT(server_->bytes_received(), payload);
  EXPECT_GT(c->stats().bytes_sent, payload);
  EXPECT_GT(server_->bytes_sent(), 0);
  EXPECT_GT(c->stats().bytes_received, 0);
  EXPECT_EQ(c->stats().bytes_sent, server_->bytes_received());
}

// Payloads past the zero-copy size take the gathered-write, borrowed-frame
// and landed-reply paths (thrift/framed_transport.h) through TLS records.
TEST_F(TlsLanTest, LargePayloadsGoThroughTlsExactly) {
  spec_ = testing::FlatModel(int64_t{2} << 20, 256 << 10);  // 8 chunks of 256 KiB
  shard_ = MakeShard(*spec_, OneShard(2));
  const config::Topology& t = Certs::Get().ours;
  ServeAs(t, "us");
  auto c = Connect(WorkerClient(t, "us", 1));
  ASSERT_TRUE(Register(*c, 1).ok());
  const std::vector<ChunkKey> keys = spec_->ChunksOfTable(0);
  std::vector<float> delta(static_cast<size_t>(testing::ElementsOf(*spec_, keys)));
  for (size_t i = 0; i < delta.size(); ++i) delta[i] = static_cast<float>(i % 4093) * 0.5f;
  std::vector<float> got(delta.size());
  for (int round = 1; round <= 3; ++round) {
    auto up = c->UpdateThenClock(1, round - 1, keys, delta, 0, false);
    ASSERT_TRUE(up.ok()) << up.status().ToString();
    auto rd = c->Read(1, round, kAsync, keys, got.data(), 5000);  // worker 0 never comes
    ASSERT_TRUE(rd.ok()) << rd.status().ToString();
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], delta[i] * static_cast<float>(round)) << "round " << round << " element " << i;
    }
  }
  EXPECT_EQ(c->stats().retries, 0);
}

TEST_F(TlsLanTest, APeerWithoutACertificateOfTheCaIsRefusedAndTheServerKeepsServing) {
  const Certs& certs = Certs::Get();
  ServeAs(certs.ours, "us");
  // A certificate with the right name from another CA.
  Result<RegisterReply> other = Register(*Connect(WorkerClient(certs.other, "us", 0)), 0);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kUnavailable) << other.status().ToString();
  EXPECT_NE(other.status().message().find("TLS handshake"), std::string::npos) << other.status().ToString();
  // No certificate at all: plaintext.
  ThriftClientOptions plain = FastClient();
  Result<RegisterReply> clear = Register(*Connect(plain), 0);
  EXPECT_FALSE(clear.ok());
  // The rightful worker is served on.
  auto good = Connect(WorkerClient(certs.ours, "us", 0));
  EXPECT_TRUE(Register(*good, 0).ok());
}

TEST_F(TlsLanTest, AWorkerCannotActForAnotherWorkerOrAnotherSite) {
  const config::Topology& t = Certs::Get().ours;
  ServeAs(t, "us");
  auto one = Connect(WorkerClient(t, "us", 1));
  Result<RegisterReply> as_zero = Register(*one, 0);
  ASSERT_FALSE(as_zero.ok());
  EXPECT_EQ(as_zero.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(as_zero.status().message().find("geops://worker/us/1"), std::string::npos) << as_zero.status().ToString();
  EXPECT_NE(as_zero.status().message().find("worker 0 of site us"), std::string::npos) << as_zero.status().ToString();

  // Worker 0 registers; worker 1's connection cannot update, clock or
  // heartbeat as worker 0, and worker 0's batch is still taken afterwards.
  auto zero = Connect(WorkerClient(t, "us", 0));
  ASSERT_TRUE(Register(*zero, 0).ok());
  const std::vector<ChunkKey> keys = {spec_->ChunksOfTable(0)[0]};
  std::vector<float> big(static_cast<size_t>(spec_->ChunkElements(keys[0])), 1e30f);
  EXPECT_EQ(one->Update(0, 0, keys, big).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(one->AdvanceClock(0, 1, /*finished=*/true).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(one->Heartbeat(0).code(), StatusCode::kPermissionDenied);
  std::vector<float> ones(big.size(), 1.0f);
  auto real = zero->Update(0, 0, keys, ones);
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  EXPECT_TRUE(real->applied);

  // Another site's worker cannot even register (a hostile client does not
  // check which site it reached).
  ThriftClientOptions eu_options = WorkerClient(t, "eu", 0);
  eu_options.tls.expect_peer.clear();
  auto eu = Connect(eu_options);
  EXPECT_EQ(Register(*eu, 0).status().code(), StatusCode::kPermissionDenied);
  EXPECT_GE(shard_->GetStatus().requests_rejected, 5);
}

TEST_F(TlsLanTest, AWorkerRefusesAShardThatIsNotOfItsSite) {
  const config::Topology& t = Certs::Get().ours;
  ServeAs(t, "eu");  // a server holding eu's certificate, reached by a us worker
  Result<RegisterReply> r = Register(*Connect(WorkerClient(t, "us", 0)), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected 'geops://site/us'"), std::string::npos) << r.status().ToString();
}

class RecordingReceiver : public wan::WanReceiver {
 public:
  Status OnBatch(const wan::WanBatch& b) override {
    std::lock_guard<std::mutex> lock(mu);
    origins.push_back(b.origin);
    return Status::Ok();
  }
  Status OnClock(const wan::WanClockReport& r) override {
    std::lock_guard<std::mutex> lock(mu);
    origins.push_back(r.origin);
    return Status::Ok();
  }
  Status OnNotice(const wan::WanNotice& n) override {
    std::lock_guard<std::mutex> lock(mu);
    origins.push_back(n.origin);
    return Status::Ok();
  }
  Status OnHeartbeat(SiteId origin, uint64_t /*incarnation*/) override {
    std::lock_guard<std::mutex> lock(mu);
    origins.push_back(origin);
    return Status::Ok();
  }
  Result<wan::BatchAck> OnRelay(SiteId dest, const wan::WanBatch& b, int64_t /*timeout_ms*/) override {
    if (!relays) return wan::WanReceiver::OnRelay(dest, b, 0);
    std::lock_guard<std::mutex> lock(mu);
    relayed_to.push_back(dest);
    origins.push_back(b.origin);
    return wan::BatchAck{b.seq, ""};
  }
  bool AcceptsRelayed() const override { return relays; }
  std::mutex mu;
  std::vector<SiteId> origins;
  std::vector<SiteId> relayed_to;
  bool relays = false;  // set before serving
};

wan::WanBatch Relayed(wan::WanBatch b) {
  b.relayed = true;
  return b;
}

class TlsMirrorTest : public ::testing::Test {
 protected:
  // A mirror of site us (0), shard 0.
  void Serve(const PsServerOptions& o) {
    auto server = MirrorServer::Start(&receiver_, MirrorIdentity{0, 0, 42}, o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  std::unique_ptr<MirrorClient> Client(SiteId self, const TlsOptions& tls) {
    ThriftClientOptions o = FastClient();
    o.tls = tls;
    o.tls.expect_peer.clear();  // a forger does not care whom it reaches
    auto c = MirrorClient::Create(server_->address(), MirrorIdentity{self, 0, 42}, ForMirrorPeer(o, 0));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  RecordingReceiver receiver_;
  std::unique_ptr<MirrorServer> server_;
};

TEST_F(TlsMirrorTest, ASiteMaySpeakOnlyForItself) {
  const config::Topology& t = Certs::Get().ours;
  Serve(SiteServer(t, "us"));
  auto eu = Client(1, config::SiteTls(t, 1));
  ASSERT_TRUE(eu->PushBatch({1, 1, 0, {1, 2, 3}}).ok());
  // eu's certificate claiming to be ap (site 2): batch, clock, notice, and a
  // heartbeat with a huge incarnation.
  auto forger = Client(2, config::SiteTls(t, 1));
  Status batch = forger->PushBatch({2, 1, 0, {9}}).status();
  EXPECT_EQ(batch.code(), StatusCode::kPermissionDenied) << batch.ToString();
  EXPECT_NE(batch.message().find("geops://site/eu"), std::string::npos) << batch.ToString();
  EXPECT_NE(batch.message().find("site 2 (ap)"), std::string::npos) << batch.ToString();
  EXPECT_EQ(forger->ReportClock({2, 5, 1, true}).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(forger->Notice({2, 1, {{0, 0}}, 1000000}).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(forger->Heartbeat(1ull << 60).status().code(), StatusCode::kPermissionDenied);
  // A worker's certificate is no site at all.
  auto worker = Client(1, config::WorkerTls(t, 1, 0));
  EXPECT_EQ(worker->PushBatch({1, 2, 0, {1}}).status().code(), StatusCode::kPermissionDenied);
  std::lock_guard<std::mutex> lock(receiver_.mu);
  EXPECT_EQ(receiver_.origins, std::vector<SiteId>{1});
}

TEST_F(TlsMirrorTest, ARelayedBatchIsTakenOnlyFromItsRelayAndOnlyWhereSitesRelay) {
  const config::Topology& t = Certs::Get().ours;
  Serve(SiteServer(t, "us"));
  // eu (1) carries a batch of ap (2): this site does not relay.
  auto eu = Client(1, config::SiteTls(t, 1));
  Status off = eu->PushBatch(Relayed({2, 1, 0, {9}})).status();
  EXPECT_EQ(off.code(), StatusCode::kFailedPrecondition) << off.ToString();
  EXPECT_NE(off.message().find("relay_after_ms"), std::string::npos) << off.ToString();
  std::lock_guard<std::mutex> lock(receiver_.mu);
  EXPECT_TRUE(receiver_.origins.empty());
}

TEST_F(TlsMirrorTest, RelayingSitesCarryEachOthersBatchesUnderTheirOwnNames) {
  const config::Topology& t = Certs::Get().ours;
  receiver_.relays = true;
  Serve(SiteServer(t, "us"));
  auto eu = Client(1, config::SiteTls(t, 1));
  // eu relays a batch of ap's to us: taken, as ap's. A batch of eu's own
  // that claims to be ap's is eu's (the relay flag names the origin).
  ASSERT_TRUE(eu->PushBatch(Relayed({2, 1, 0, {9}})).ok());
  ASSERT_TRUE(eu->PushBatch({2, 1, 0, {9}}).ok());
  // eu asks us to carry eu's batch on to ap.
  Result<wan::BatchAck> r = eu->RelayBatch(2, {1, 4, 0, {1, 2}}, 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 4u);
  // eu's certificate relaying as if it were ap: refused, as is a relay of
  // a batch that is not the caller's own, or one back to its origin or here.
  auto forger = Client(2, config::SiteTls(t, 1));
  EXPECT_EQ(forger->PushBatch(Relayed({1, 2, 0, {9}})).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(forger->RelayBatch(1, {2, 5, 0, {1}}, 1000).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(eu->PushBatch(Relayed({1, 2, 0, {9}})).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(eu->RelayBatch(1, {1, 5, 0, {1}}, 1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(eu->RelayBatch(0, {1, 5, 0, {1}}, 1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(eu->RelayBatch(2, Relayed({2, 5, 0, {1}}), 1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(eu->RelayBatch(7, {1, 5, 0, {1}}, 1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(eu->RelayBatch(2, {1, 5, 0, {1}}, 0).status().code(), StatusCode::kInvalidArgument);
  std::lock_guard<std::mutex> lock(receiver_.mu);
  EXPECT_EQ(receiver_.origins, (std::vector<SiteId>{2, 1, 1}));
  EXPECT_EQ(receiver_.relayed_to, std::vector<SiteId>{2});
}

TEST_F(TlsMirrorTest, APeerOfAnotherCaIsRefusedAtTheHandshake) {
  const Certs& certs = Certs::Get();
  Serve(SiteServer(certs.ours, "us"));
  Status s = Client(1, config::SiteTls(certs.other, 1))->PushBatch({1, 1, 0, {1}}).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("TLS handshake"), std::string::npos) << s.ToString();
  EXPECT_TRUE(Client(1, config::SiteTls(certs.ours, 1))->PushBatch({1, 1, 0, {1}}).ok());
}

TEST_F(TlsMirrorTest, AnOriginOutsideTheTopologyIsRefusedAlsoInPlaintext) {
  PsServerOptions o = LoopbackServer();
  o.peers = config::PeerNamesOf(Certs::Get().ours, 0);
  Serve(o);
  Status s = Client(7, TlsOptions())->PushBatch({7, 1, 0, {1}}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not in the topology"), std::string::npos) << s.ToString();
  std::lock_guard<std::mutex> lock(receiver_.mu);
  EXPECT_TRUE(receiver_.origins.empty());
}

TEST(PeerIdentityTest, ParsesTheTwoFormsAndNothingElse) {
  auto site = ParsePeerIdentity("geops://site/us-east-1");
  ASSERT_TRUE(site.ok());
  EXPECT_EQ(site->kind, PeerIdentity::Kind::kSite);
  EXPECT_EQ(site->site, "us-east-1");
  auto worker = ParsePeerIdentity("geops://worker/us-east-1/12");
  ASSERT_TRUE(worker.ok());
  EXPECT_EQ(worker->kind, PeerIdentity::Kind::kWorker);
  EXPECT_EQ(worker->site, "us-east-1");
  EXPECT_EQ(worker->worker, 12);
  for (const char* bad : {"", "geops://site/", "geops://site/a/b", "geops://worker/us", "geops://worker/us/",
                          "geops://worker/us/-1", "geops://worker/us/1x", "https://site/us"}) {
    EXPECT_FALSE(ParsePeerIdentity(bad).ok()) << bad;
  }
  EXPECT_EQ(SiteIdentityUri("eu"), "geops://site/eu");
  EXPECT_EQ(WorkerIdentityUri("eu", 3), "geops://worker/eu/3");
}

}  // namespace
}  // namespace geops::rpc
