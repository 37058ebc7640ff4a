// MirrorService over real loopback TCP: it listens before its shard exists
// (answering Unavailable until a receiver is plugged in), tells its model to
// a peer that asks, and reports a peer's heartbeat of another model.
#include "thrift/mirror_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>

#include "thrift/mirror_client.h"
#include "wan/replication/receiver_slot.h"

namespace geops::rpc {
namespace {

class CountingReceiver : public wan::WanReceiver {
 public:
  Status OnBatch(const wan::WanBatch&) override { return Count(); }
  Status OnClock(const wan::WanClockReport&) override { return Count(); }
  Status OnNotice(const wan::WanNotice&) override { return Count(); }
  Status OnHeartbeat(SiteId, uint64_t) override { return Count(); }
  std::atomic<int> calls{0};

 private:
  Status Count() {
    ++calls;
    return Status::Ok();
  }
};

ModelSpec Model(uint64_t checksum) {
  std::vector<TableSpec> tables = {{"w", 4, 8, InitKind::kProvided, 0.0f, checksum}};
  return *ModelSpec::Create(std::move(tables), 64, 0);
}

// The mirror service of shard 0 of site `site`, with a model fixed by Fix().
struct Rig {
  explicit Rig(SiteId site = 1) {
    MirrorServiceOptions o;
    o.self = MirrorIdentity{site, 0, 0};
    o.client.rpc_timeout_ms = 5000;
    o.schema = [this]() -> std::optional<ModelSpec> {
      std::lock_guard<std::mutex> lock(mu);
      return fixed;
    };
    o.on_conflict = [this](SiteId peer, uint64_t theirs) {
      conflict_peer = peer;
      conflict_fingerprint = theirs;
    };
    service = std::move(MirrorService::Start(std::move(o))).value();
  }
  void Fix(ModelSpec spec) {
    std::lock_guard<std::mutex> lock(mu);
    fixed = std::move(spec);
  }
  std::mutex mu;
  std::optional<ModelSpec> fixed;
  std::atomic<SiteId> conflict_peer{-1};
  std::atomic<uint64_t> conflict_fingerprint{0};
  std::unique_ptr<MirrorService> service;
};

std::unique_ptr<MirrorClient> PeerClient(const Rig& rig, uint64_t fingerprint) {
  ThriftClientOptions o;
  o.rpc_timeout_ms = 5000;
  return std::move(MirrorClient::Create(rig.service->address(), MirrorIdentity{0, 0, fingerprint}, o)).value();
}

TEST(MirrorServiceModelTest, AnswersUnavailableUntilAReceiverIsPluggedIn) {
  Rig rig;
  auto peer = PeerClient(rig, 0);
  Result<MirrorIdentity> early = peer->Heartbeat(1);
  EXPECT_EQ(early.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(early.status().message().find("waiting for its model"), std::string::npos) << early.status().message();
  EXPECT_EQ(peer->ReportClock(wan::WanClockReport{0, 3, 0, false, 1, 0}).code(), StatusCode::kUnavailable);

  CountingReceiver receiver;
  rig.service->receiver_slot()->Set(&receiver);
  EXPECT_TRUE(peer->Heartbeat(1).ok());
  EXPECT_TRUE(peer->ReportClock(wan::WanClockReport{0, 3, 0, false, 1, 0}).ok());
  EXPECT_EQ(receiver.calls.load(), 2);
  rig.service->receiver_slot()->Clear();
  EXPECT_EQ(peer->Heartbeat(1).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(receiver.calls.load(), 2);
}

TEST(MirrorServiceModelTest, TellsItsFixedModelToAPeerThatAsks) {
  Rig rig;
  Rig asker(0);
  asker.service->peers()->Set(1, rig.service->address());
  Result<std::optional<ModelSpec>> none = asker.service->FetchPeerSchema(1);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());

  rig.Fix(Model(0xabc));
  Result<std::optional<ModelSpec>> some = asker.service->FetchPeerSchema(1);
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  ASSERT_TRUE(some->has_value());
  EXPECT_EQ((*some)->Fingerprint(), Model(0xabc).Fingerprint());
  EXPECT_EQ((*some)->table(0).name, "w");
  EXPECT_EQ((*some)->table(0).init_checksum, 0xabcu);

  EXPECT_EQ(asker.service->FetchPeerSchema(2).status().code(), StatusCode::kUnavailable);  // address unknown
}

TEST(MirrorServiceModelTest, AHeartbeatOfAnotherModelIsRefusedAndReported) {
  Rig rig;
  CountingReceiver receiver;
  rig.service->receiver_slot()->Set(&receiver);
  rig.service->SetModelFingerprint(Model(1).Fingerprint());

  EXPECT_TRUE(PeerClient(rig, Model(1).Fingerprint())->Heartbeat(1).ok());
  EXPECT_EQ(rig.conflict_peer.load(), -1);

  Result<MirrorIdentity> other = PeerClient(rig, Model(2).Fingerprint())->Heartbeat(1);
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(rig.conflict_peer.load(), 0);
  EXPECT_EQ(rig.conflict_fingerprint.load(), Model(2).Fingerprint());
  EXPECT_EQ(receiver.calls.load(), 1);  // the refused heartbeat never reached the receiver
}

}  // namespace
}  // namespace geops::rpc
