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
#include "wan/codec/codec.h"
#include "wan/replication/replicator.h"
#include "wan/wan_transport.h"

namespace geops::rpc {
namespace {

class RecordingReceiver : public wan::WanReceiver {
 public:
  Status OnBatch(const wan::WanBatch& b) override {
    std::lock_guard<std::mutex> lock(mu);
    batches.push_back(b);
    bytes += static_cast<int64_t>(b.payload.size());
    if (b.seq == refuse_seq) return DataLossError("batch " + std::to_string(b.seq) + " refused by the test");
    return batch_reply;
  }
  Status OnClock(const wan::WanClockReport& r) override {
    std::lock_guard<std::mutex> lock(mu);
    clocks.push_back(r);
    return clock_reply;
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
  Status clock_reply;
  uint64_t refuse_seq = 0;  // refused with DataLoss (0: none)
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

TEST_F(MirrorServiceTest, AReportRidingWithABatchArrivesAfterItAsTheBatchsOwn) {
  auto c = Client({0, 0, 42});
  wan::WanBatch b{0, 5, 17, {1, 2, 3}};
  b.incarnation = 9;
  b.dest_incarnation = 4;
  b.report = wan::RidingReport{21, true};
  ASSERT_TRUE(c->PushBatch(b).ok());
  {
    std::lock_guard<std::mutex> lock(receiver_.mu);
    ASSERT_EQ(receiver_.batches.size(), 1u);
    ASSERT_EQ(receiver_.clocks.size(), 1u);
    const wan::WanClockReport& r = receiver_.clocks[0];
    EXPECT_EQ(r.origin, 0);
    EXPECT_EQ(r.clock, 21);
    EXPECT_EQ(r.last_seq, 5u);
    EXPECT_TRUE(r.drained);
    EXPECT_EQ(r.incarnation, 9u);
    EXPECT_EQ(r.dest_incarnation, 4u);
  }
  // A report the receiver cannot take now asks for the whole push again
  // (the receiver deduplicates the batch) ...
  receiver_.clock_reply = UnavailableError("resetting the stream");
  b.seq = 6;
  EXPECT_EQ(c->PushBatch(b).status().code(), StatusCode::kUnavailable);
  // ... one refused for good leaves the batch taken.
  receiver_.clock_reply = InvalidArgumentError("a bad report");
  b.seq = 7;
  EXPECT_TRUE(c->PushBatch(b).ok());
  // A batch without a report carries none; a report with a negative clock
  // is refused with the batch, before the receiver sees either.
  receiver_.clock_reply = Status::Ok();
  b.seq = 8;
  b.report.reset();
  EXPECT_TRUE(c->PushBatch(b).ok());
  b.seq = 9;
  b.report = wan::RidingReport{-1, false};
  Status bad = c->PushBatch(b).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("negative clock"), std::string::npos) << bad.ToString();
  std::lock_guard<std::mutex> lock(receiver_.mu);
  EXPECT_EQ(receiver_.batches.size(), 4u);  // 5, 6, 7, 8
  EXPECT_EQ(receiver_.clocks.size(), 3u);   // with 5, 6 and 7
}

TEST_F(MirrorServiceTest, RefusesWrongShardSelfAndAnotherModel) {
  EXPECT_EQ(Client({0, 1, 42})->PushBatch({0, 1, 0, {1}}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Client({1, 0, 42})->ReportClock({1, 1, 0, false}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Client({0, 0, 7})->Heartbeat().status().code(), StatusCode::kFailedPrecondition);
  auto c = Client({2, 0, 42});
  EXPECT_EQ(c->PushBatch({2, 0, 0, {1}}).status().code(), StatusCode::kInvalidArgument);  // seq 0
  receiver_.batch_reply = DataLossError("checksum mismatch");
  Status s = c->PushBatch({2, 1, 0, {1}}).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("checksum"), std::string::npos);
  receiver_.batch_reply = Status::Ok();
  EXPECT_TRUE(c->PushBatch({2, 1, 0, {1}}).ok());  // same connection, still fine
}

TEST_F(MirrorServiceTest, PipelinedBatchesAreAcknowledgedInOrderAndARefusalAnswersOnlyItsOwn) {
  auto c = Client({0, 0, 42});
  std::vector<wan::WanBatch> batches;
  for (uint64_t seq = 1; seq <= 8; ++seq) {
    batches.push_back(wan::WanBatch{0, seq, 0, std::vector<uint8_t>(size_t{64} << 10, static_cast<uint8_t>(seq))});
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c->BeginPushBatch(batches[static_cast<size_t>(i)]).ok());
  EXPECT_EQ(c->pushes_in_flight(), 5u);
  // A call with its own reply would read a batch's.
  EXPECT_EQ(c->ReportClock({0, 1, 5, false}).code(), StatusCode::kFailedPrecondition);
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    Result<wan::BatchAck> ack = c->EndPushBatch();
    ASSERT_TRUE(ack.ok()) << ack.status().ToString();
    EXPECT_EQ(ack->seq, seq);
  }
  EXPECT_EQ(c->EndPushBatch().status().code(), StatusCode::kFailedPrecondition);
  receiver_.refuse_seq = 7;
  for (int i = 5; i < 8; ++i) ASSERT_TRUE(c->BeginPushBatch(batches[static_cast<size_t>(i)]).ok());
  EXPECT_EQ(c->EndPushBatch()->seq, 6u);
  Status refused = c->EndPushBatch().status();
  EXPECT_EQ(refused.code(), StatusCode::kDataLoss);
  EXPECT_NE(refused.message().find("batch 7"), std::string::npos) << refused.ToString();
  EXPECT_EQ(c->pushes_in_flight(), 1u);  // the connection stays in order
  EXPECT_EQ(c->EndPushBatch()->seq, 8u);
  // Abandoning batches in flight starts a fresh connection.
  ASSERT_TRUE(c->BeginPushBatch(batches[0]).ok());
  c->AbandonPushes();
  EXPECT_EQ(c->pushes_in_flight(), 0u);
  EXPECT_TRUE(c->ReportClock({0, 1, 8, false}).ok());
  std::lock_guard<std::mutex> lock(receiver_.mu);
  ASSERT_GE(receiver_.batches.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(receiver_.batches[i].seq, i + 1);
    EXPECT_EQ(receiver_.batches[i].payload, batches[i].payload);
  }
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

// A real shard behind a real replicator, served on a mirror port, and a
// client speaking for site 0.
class MirrorReplicatorTest : public ::testing::Test {
 protected:
  struct NullTransport : wan::WanTransport {
    void SetDeliveryCallback(DeliveryCallback) override {}
    void SendBatch(SiteId, wan::WanBatch) override {}
    void SendClock(SiteId, wan::WanClockReport) override {}
    void SendNotice(SiteId, wan::WanNotice) override {}
    double EstimateDeliverySeconds(SiteId, int64_t) override { return 0; }
    double BandwidthBytesPerSecond(SiteId) override { return 0; }
  };

  void SetUp() override {
    Result<ModelSpec> spec = ModelSpec::Create({{"w", 8, 16, InitKind::kZeros, 0}}, 256, 1);
    ASSERT_TRUE(spec.ok());
    spec_ = std::make_unique<ModelSpec>(std::move(spec).value());
    auto shard = datacenter::Shard::Create(*spec_, ShardOptions{});
    ASSERT_TRUE(shard.ok());
    shard_ = std::move(shard).value();
    wan::ReplicatorConfig rc;
    rc.site = 1;
    rc.peers = {0};
    auto repl = wan::Replicator::Create(spec_.get(), rc, shard_.get(), &transport_);
    ASSERT_TRUE(repl.ok());
    repl_ = std::move(repl).value();
    auto server = MirrorServer::Start(repl_->receiver(), MirrorIdentity{1, 0, spec_->Fingerprint()}, PsServerOptions{});
    ASSERT_TRUE(server.ok());
    server_ = std::move(server).value();
    auto c = MirrorClient::Create(server_->address(), {0, 0, spec_->Fingerprint()}, ClientOptions());
    ASSERT_TRUE(c.ok());
    client_ = std::move(c).value();
  }

  // Batch `seq` from site 0: `value` added at element 2 of chunk (0, 1).
  static wan::WanBatch Batch(uint64_t seq, float value) {
    wan::SparseChunkUpdate u{{0, 1}, 64, {2}, {value}};
    wan::BatchHeader h;
    h.origin = 0;
    h.seq = seq;
    wan::WanBatch b{0, seq, 0, {}};
    wan::BatchEncoder enc;
    EXPECT_TRUE(enc.Encode(h, std::vector<wan::SparseChunkUpdate>{u}, &b.payload, nullptr).ok());
    return b;
  }

  float Element2() {
    std::vector<float> v(64);
    EXPECT_TRUE(shard_->ReadChunkValue({0, 1}, v.data()).ok());
    return v[2];
  }

  std::unique_ptr<ModelSpec> spec_;
  std::unique_ptr<datacenter::Shard> shard_;
  NullTransport transport_;
  std::unique_ptr<wan::Replicator> repl_;  // after the shard and transport: goes first
  std::unique_ptr<MirrorServer> server_;
  std::unique_ptr<MirrorClient> client_;
};

// Garbage and corrupted batches are refused with a GeopsError, nothing
// changes, and the server keeps serving.
TEST_F(MirrorReplicatorTest, BadBatchesAreRefusedAndTheShardIsUntouched) {
  EXPECT_EQ(client_->PushBatch({0, 1, 0, std::vector<uint8_t>(64, 0x11)}).status().code(),
            StatusCode::kInvalidArgument);
  const wan::WanBatch good = Batch(1, 5.0f);
  wan::WanBatch corrupt = good;
  corrupt.payload.back() ^= 0x01;  // a body byte: the checksum no longer matches
  EXPECT_EQ(client_->PushBatch(corrupt).status().code(), StatusCode::kDataLoss);
  wan::WanBatch foreign = good;
  foreign.seq = 2;  // the header says 1
  EXPECT_EQ(client_->PushBatch(foreign).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Element2(), 0.0f);
  Result<wan::BatchAck> ack = client_->PushBatch(good);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(ack->seq, 1u);
  EXPECT_EQ(ack->quarantined, "");
  EXPECT_EQ(Element2(), 5.0f);
  EXPECT_EQ(repl_->stats().inbox.batches_refused, 3);
}

// A valid batch whose sum would not be finite is quarantined: not applied,
// its seq consumed, and the sender told why in the acknowledgement (again
// when it resends); the next batch applies.
TEST_F(MirrorReplicatorTest, TheSenderIsToldWhenItsBatchIsQuarantined) {
  ASSERT_TRUE(client_->PushBatch(Batch(1, 3e38f)).ok());
  Result<wan::BatchAck> ack = client_->PushBatch(Batch(2, 3e38f));
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(ack->seq, 2u);
  EXPECT_NE(ack->quarantined.find("batch 2 from site 0"), std::string::npos) << ack->quarantined;
  EXPECT_NE(ack->quarantined.find("not finite"), std::string::npos) << ack->quarantined;
  EXPECT_EQ(Element2(), 3e38f);
  Result<wan::BatchAck> again = client_->PushBatch(Batch(2, 3e38f));  // the ack was lost: resent
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->quarantined, ack->quarantined);
  Result<wan::BatchAck> next = client_->PushBatch(Batch(3, -1e38f));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->quarantined, "");
  EXPECT_FLOAT_EQ(Element2(), 3e38f - 1e38f);
  EXPECT_EQ(repl_->stats().inbox.batches_quarantined, 1);
}

}  // namespace
}  // namespace geops::rpc
