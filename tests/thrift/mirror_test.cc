// The WAN mirror service over real loopback TCP: messages arrive intact,
// identities are checked, the receiver's refusals come back with their code,
// bad batches never take the server down, and a long-lived connection
// carries more than Thrift's default 100 MiB message budget.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "datacenter/shard.h"
#include "thrift/mirror_client.h"
#include "thrift/mirror_server.h"
#include "wan/codec.h"
#include "wan/replicator.h"
#include "wan/wan_transport.h"

namespace geops::rpc {
namespace {

class RecordingReceiver : public wan::WanReceiver {
 public:
  Status OnBatch(const wan::WanBatch& b) override {
    std::lock_guard<std::mutex> lock(mu);
    batches.push_back(b);
    bytes += static_cast<int64_t>(b.payload.size());
    return batch_reply;
  }
  Status OnClock(const wan::WanClockReport& r) override {
    std::lock_guard<std::mutex> lock(mu);
    clocks.push_back(r);
    return Status::Ok();
  }
  Status OnNotice(const wan::WanNotice& n) override {
    std::lock_guard<std::mutex> lock(mu);
    notices.push_back(n);
    return Status::Ok();
  }
  Status OnHeartbeat(SiteId origin, uint64_t /*incarnation*/) override {
    std::lock_guard<std::mutex> lock(mu);
    heartbeats.push_back(origin);
    return Status::Ok();
  }
  std::mutex mu;
  std::vector<wan::WanBatch> batches;
  std::vector<wan::WanClockReport> clocks;
  std::vector<wan::WanNotice> notices;
  std::vector<SiteId> heartbeats;
  int64_t bytes = 0;
  Status batch_reply;
};

ThriftClientOptions ClientOptions() {
  ThriftClientOptions o;
  o.rpc_timeout_ms = 20000;
  return o;
}

class MirrorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = MirrorServer::Start(&receiver_, MirrorIdentity{1, 0, 42}, PsServerOptions{});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  std::unique_ptr<MirrorClient> Client(MirrorIdentity self) {
    auto c = MirrorClient::Create(server_->address(), self, ClientOptions());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  RecordingReceiver receiver_;
  std::unique_ptr<MirrorServer> server_;
};

TEST_F(MirrorServiceTest, CarriesEveryMessageIntact) {
  auto c = Client({0, 0, 42});
  wan::WanBatch b{0, 3, 17, {1, 2, 3, 4, 5}};
  ASSERT_TRUE(c->PushBatch(b).ok());
  ASSERT_TRUE(c->ReportClock({0, 17, 3, true}).ok());
  ASSERT_TRUE(c->Notice({0, 4, {{1, 2}, {3, 4}}, 500}).ok());
  auto peer = c->Heartbeat();
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  EXPECT_EQ(peer->site, 1);
  EXPECT_EQ(peer->model_fingerprint, 42u);
  std::lock_guard<std::mutex> lock(receiver_.mu);
  ASSERT_EQ(receiver_.batches.size(), 1u);
  EXPECT_EQ(receiver_.batches[0].origin, 0);
  EXPECT_EQ(receiver_.batches[0].seq, 3u);
  EXPECT_EQ(receiver_.batches[0].clock, 17);
  EXPECT_EQ(receiver_.batches[0].payload, b.payload);
  ASSERT_EQ(receiver_.clocks.size(), 1u);
  EXPECT_EQ(receiver_.clocks[0].last_seq, 3u);
  EXPECT_TRUE(receiver_.clocks[0].drained);
  ASSERT_EQ(receiver_.notices.size(), 1u);
  EXPECT_EQ(receiver_.notices[0].keys, (std::vector<ChunkKey>{{1, 2}, {3, 4}}));
  EXPECT_EQ(receiver_.notices[0].timeout_ms, 500);
  EXPECT_EQ(receiver_.heartbeats, std::vector<SiteId>{0});
  EXPECT_GT(c->bytes_sent(), 0);
}

TEST_F(MirrorServiceTest, RefusesWrongShardSelfAndAnotherModel) {
  EXPECT_EQ(Client({0, 1, 42})->PushBatch({0, 1, 0, {1}}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Client({1, 0, 42})->ReportClock({1, 1, 0, false}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Client({0, 0, 7})->Heartbeat().status().code(), StatusCode::kFailedPrecondition);
  auto c = Client({2, 0, 42});
  EXPECT_EQ(c->PushBatch({2, 0, 0, {1}}).code(), StatusCode::kInvalidArgument);  // seq 0
  receiver_.batch_reply = DataLossError("checksum mismatch");
  Status s = c->PushBatch({2, 1, 0, {1}});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("checksum"), std::string::npos);
  receiver_.batch_reply = Status::Ok();
  EXPECT_TRUE(c->PushBatch({2, 1, 0, {1}}).ok());  // same connection, still fine
}

TEST_F(MirrorServiceTest, AConnectionCarriesMoreThanTheDefaultMessageBudget) {
  auto c = Client({0, 0, 42});
  wan::WanBatch b{0, 1, 0, std::vector<uint8_t>(size_t{16} << 20, 0xab)};
  for (int i = 0; i < 9; ++i) {  // 144 MiB > Thrift's default 100 MiB
    b.seq = static_cast<uint64_t>(i + 1);
    ASSERT_TRUE(c->PushBatch(b).ok()) << "batch " << i;
  }
  std::lock_guard<std::mutex> lock(receiver_.mu);
  EXPECT_EQ(receiver_.bytes, int64_t{9} * (16 << 20));
}

TEST(MirrorServiceDownTest, UnreachablePeerIsUnavailableAndReconnectsLater) {
  RecordingReceiver receiver;
  auto server = MirrorServer::Start(&receiver, MirrorIdentity{1, 0, 0}, PsServerOptions{});
  ASSERT_TRUE(server.ok());
  const HostPort address = (*server)->address();
  auto c = MirrorClient::Create(address, {0, 0, 0}, ClientOptions());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Heartbeat().ok());
  ASSERT_TRUE((*server)->Stop(Deadline::InMs(5000)).ok());
  server->reset();
  EXPECT_EQ((*c)->ReportClock({0, 1, 0, false}).code(), StatusCode::kUnavailable);
  PsServerOptions same;
  same.port = address.port;
  auto again = MirrorServer::Start(&receiver, MirrorIdentity{1, 0, 0}, same);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE((*c)->ReportClock({0, 2, 0, false}).ok());
}

// A real shard behind a real replicator: garbage and corrupted batches are
// refused with a GeopsError, nothing changes, and the server keeps serving.
TEST(MirrorReplicatorTest, BadBatchesAreRefusedAndTheShardIsUntouched) {
  Result<ModelSpec> spec = ModelSpec::Create({{"w", 8, 16, InitKind::kZeros, 0}}, 256, 1);
  ASSERT_TRUE(spec.ok());
  ShardOptions so;
  auto shard = datacenter::Shard::Create(*spec, so);
  ASSERT_TRUE(shard.ok());
  struct NullTransport : wan::WanTransport {
    void SetDeliveryCallback(DeliveryCallback) override {}
    void SendBatch(SiteId, wan::WanBatch) override {}
    void SendClock(SiteId, wan::WanClockReport) override {}
    void SendNotice(SiteId, wan::WanNotice) override {}
    double EstimateDeliverySeconds(SiteId, int64_t) override { return 0; }
    double BandwidthBytesPerSecond(SiteId) override { return 0; }
  } transport;
  wan::ReplicatorConfig rc;
  rc.site = 1;
  rc.peers = {0};
  auto repl = wan::Replicator::Create(&*spec, rc, shard->get(), &transport);
  ASSERT_TRUE(repl.ok());
  auto server = MirrorServer::Start(repl->get(), MirrorIdentity{1, 0, spec->Fingerprint()}, PsServerOptions{});
  ASSERT_TRUE(server.ok());
  auto c = MirrorClient::Create((*server)->address(), {0, 0, spec->Fingerprint()}, ClientOptions());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->PushBatch({0, 1, 0, std::vector<uint8_t>(64, 0x11)}).code(), StatusCode::kInvalidArgument);
  wan::SparseChunkUpdate u{{0, 1}, 64, {2}, {5.0f}};
  wan::BatchHeader h;
  h.origin = 0;
  h.seq = 1;
  wan::WanBatch good{0, 1, 0, {}};
  wan::BatchEncoder enc;
  ASSERT_TRUE(enc.Encode(h, std::vector<wan::SparseChunkUpdate>{u}, &good.payload, nullptr).ok());
  wan::WanBatch corrupt = good;
  corrupt.payload.back() ^= 0x01;  // a body byte: the checksum no longer matches
  EXPECT_EQ((*c)->PushBatch(corrupt).code(), StatusCode::kDataLoss);
  wan::WanBatch foreign = good;
  foreign.seq = 2;  // the header says 1
  EXPECT_EQ((*c)->PushBatch(foreign).code(), StatusCode::kInvalidArgument);
  std::vector<float> v(64);
  ASSERT_TRUE((*shard)->ReadChunkValue({0, 1}, v.data()).ok());
  EXPECT_EQ(v[2], 0.0f);
  ASSERT_TRUE((*c)->PushBatch(good).ok());
  ASSERT_TRUE((*shard)->ReadChunkValue({0, 1}, v.data()).ok());
  EXPECT_EQ(v[2], 5.0f);
  EXPECT_EQ((*repl)->stats().inbox.batches_refused, 3);
}

}  // namespace
}  // namespace geops::rpc
