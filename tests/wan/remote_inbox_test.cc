#include "wan/replication/remote_inbox.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "datacenter/shard.h"
#include "tests/wan/wan_sites.h"

namespace geops::wan {
namespace {

class RemoteInboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = testing::CounterModel();
    ShardOptions so;
    so.num_workers = 1;
    auto s = datacenter::Shard::Create(spec_, so);
    ASSERT_TRUE(s.ok());
    shard_ = std::move(s).value();
    key_ = spec_.ChunksOfShard(0, 1)[1];
  }

  WanBatch Make(SiteId origin, uint64_t seq, float value, Clock clock = 1) {
    SparseChunkUpdate u;
    u.key = key_;
    u.num_elements = static_cast<uint32_t>(spec_.ChunkElements(key_));
    u.indices = {0, 3};
    u.values = {value, -value};
    BatchHeader h;
    h.origin = origin;
    h.seq = seq;
    h.clock = clock;
    WanBatch b;
    b.origin = origin;
    b.seq = seq;
    b.clock = clock;
    BatchEncoder enc;
    EXPECT_TRUE(enc.Encode(h, std::vector<SparseChunkUpdate>{u}, &b.payload, nullptr).ok());
    return b;
  }

  WanBatch Make(SiteId origin, uint64_t seq, float value, uint64_t incarnation, uint64_t dest_incarnation) {
    WanBatch b = Make(origin, seq, value);
    b.incarnation = incarnation;
    b.dest_incarnation = dest_incarnation;
    return b;
  }

  float Value(int element) {
    std::vector<float> v(spec_.ChunkElements(key_));
    EXPECT_TRUE(shard_->ReadChunkValue(key_, v.data()).ok());
    return v[element];
  }

  ModelSpec spec_;
  std::unique_ptr<datacenter::Shard> shard_;
  ChunkKey key_;
  MirrorGate gate_{{1, 2}, 0, std::chrono::milliseconds(60000)};
};

TEST_F(RemoteInboxTest, AppliesOnceAndInOrderThroughReorderAndDuplicates) {
  RemoteInbox inbox(shard_.get(), &gate_, 0, 8);
  // Early: buffered, but not acknowledged until applied (the sender keeps
  // it and retries).
  EXPECT_EQ(inbox.OnBatch(Make(1, 2, 10)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(inbox.OnBatch(Make(1, 2, 10)).code(), StatusCode::kUnavailable);  // its retry, still waiting
  EXPECT_EQ(Value(0), 0.0f);
  ASSERT_TRUE(inbox.OnClock(WanClockReport{1, 7, 2, false}).ok());  // held until seq 2 lands
  EXPECT_EQ(gate_.MinMirrorClock(), 0);
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 1)).ok());
  EXPECT_EQ(Value(0), 11.0f);
  EXPECT_EQ(Value(3), -11.0f);
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 1)).ok());  // duplicate
  ASSERT_TRUE(inbox.OnBatch(Make(1, 2, 10)).ok());
  EXPECT_EQ(Value(0), 11.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 2u);
  gate_.OnPeerClock(2, 9, false);
  EXPECT_EQ(gate_.MinMirrorClock(), 7);
  InboxStats st = inbox.stats();
  EXPECT_EQ(st.batches_applied, 2);
  EXPECT_EQ(st.batches_duplicate, 2);
  EXPECT_EQ(st.batches_buffered, 1);
}

TEST_F(RemoteInboxTest, RefusesBadBatchesWithoutChangingTheShard) {
  RemoteInbox inbox(shard_.get(), &gate_, 0, 2);
  WanBatch garbage{1, 1, 0, std::vector<uint8_t>(100, 0x5a)};
  EXPECT_EQ(inbox.OnBatch(garbage).code(), StatusCode::kInvalidArgument);
  WanBatch corrupt = Make(1, 1, 1);
  corrupt.payload.back() ^= 0xff;
  EXPECT_EQ(inbox.OnBatch(corrupt).code(), StatusCode::kDataLoss);
  WanBatch wrong_origin = Make(2, 1, 1);
  wrong_origin.origin = 1;
  EXPECT_EQ(inbox.OnBatch(wrong_origin).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(inbox.OnBatch(Make(0, 1, 1)).code(), StatusCode::kInvalidArgument);  // from itself
  WanBatch empty = Make(1, 1, 1);
  empty.payload.clear();
  EXPECT_FALSE(inbox.OnBatch(empty).ok());
  EXPECT_EQ(Value(0), 0.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 0u);
  EXPECT_EQ(inbox.stats().batches_refused, 4);
  // A full reorder buffer asks the sender to come back later.
  EXPECT_EQ(inbox.OnBatch(Make(1, 3, 1)).code(), StatusCode::kUnavailable);  // buffered
  EXPECT_EQ(inbox.OnBatch(Make(1, 4, 1)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(inbox.OnBatch(Make(1, 5, 1)).code(), StatusCode::kResourceExhausted);
  // ... and still applies everything in order once the gap fills.
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 1)).ok());
  ASSERT_TRUE(inbox.OnBatch(Make(1, 2, 1)).ok());
  EXPECT_EQ(shard_->LastAppliedSeq(1), 4u);
  EXPECT_EQ(Value(0), 4.0f);
}

TEST_F(RemoteInboxTest, DrainedReportMakesThePeerFinalOnlyAfterItsLastBatch) {
  RemoteInbox inbox(shard_.get(), &gate_, 0, 8);
  ASSERT_TRUE(inbox.OnClock(WanClockReport{1, 5, 1, true}).ok());
  ASSERT_TRUE(inbox.OnClock(WanClockReport{2, 5, 0, true}).ok());
  EXPECT_FALSE(gate_.AllPeersDrained());
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 3)).ok());
  EXPECT_TRUE(gate_.AllPeersDrained());
}


// Incarnations (wan_transport.h): what the inbox admits, refuses and resets.

using ListenerCall = std::tuple<SiteId, uint64_t, bool>;  // origin, incarnation, reset

// Records every listener call.
class ListenerLog {
 public:
  RemoteInbox::IncarnationListener Listener() {
    return [this](SiteId origin, uint64_t incarnation, bool reset) {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.emplace_back(origin, incarnation, reset);
    };
  }
  std::vector<ListenerCall> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<ListenerCall> calls_;
};

// A ReplicaTarget whose ResetOrigin the test controls: exactly-once
// application by (origin, seq) like a shard, a log of what was applied (the
// first value of each batch names it), and a reset that fails on demand.
class FakeTarget : public ReplicaTarget {
 public:
  struct Applied {
    SiteId origin;
    uint64_t seq;
    float first_value;
    bool operator==(const Applied&) const = default;
    friend std::ostream& operator<<(std::ostream& os, const Applied& a) {
      return os << "(site " << a.origin << ", seq " << a.seq << ", " << a.first_value << ")";
    }
  };

  bool SetOutboundParticipant(OutboundParticipant*) override { return false; }
  Status RunDurable(const std::function<void()>& change, Deadline) override {
    change();
    return Status::Ok();
  }
  std::vector<OutboundRecord> TakeRecoveredOutbound() override { return {}; }
  Result<RemoteApplyResult> ApplyRemote(SiteId origin, uint64_t seq,
                                        std::span<const RemoteChunkDelta> deltas) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (apply_failures_ > 0) {
      --apply_failures_;
      return UnavailableError("injected: the store is slow");
    }
    uint64_t& last = last_[origin];
    RemoteApplyResult r;
    if (seq <= last) return r;  // applied before: nothing changed
    if (seq != last + 1) return FailedPreconditionError("gap: seq " + std::to_string(seq));
    last = seq;
    int64_t elements = 0;
    for (const RemoteChunkDelta& d : deltas) elements += static_cast<int64_t>(d.values.size());
    applied_.push_back({origin, seq, deltas.empty() || deltas[0].values.empty() ? 0.0f : deltas[0].values[0]});
    r.applied = true;
    r.elements = elements;
    return r;
  }
  Status ResetOrigin(SiteId origin, const std::function<void(std::span<const ChunkMass>)>& change,
                     Deadline) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++reset_calls_;
    if (!reset_result_.ok()) return reset_result_;
    last_[origin] = 0;
    change({});
    return Status::Ok();
  }
  Clock ShardClock() const override { return 0; }
  uint64_t LastAppliedSeq(SiteId origin) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = last_.find(origin);
    return it == last_.end() ? 0 : it->second;
  }
  Status ReadChunkValue(ChunkKey, float*) const override { return InvalidArgumentError("the fake holds no chunks"); }
  Status ReadChunkElements(ChunkKey, std::span<const uint32_t>, float*) const override {
    return InvalidArgumentError("the fake holds no chunks");
  }
  Status SetChunkValue(ChunkKey, std::span<const float>) override { return InvalidArgumentError("the fake holds no chunks"); }

  // The next `n` ApplyRemote calls fail with Unavailable, changing nothing.
  void fail_applies(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    apply_failures_ = n;
  }
  void set_reset_result(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    reset_result_ = std::move(s);
  }
  int reset_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reset_calls_;
  }
  std::vector<Applied> applied() const {
    std::lock_guard<std::mutex> lock(mu_);
    return applied_;
  }

 private:
  mutable std::mutex mu_;
  std::map<SiteId, uint64_t> last_;
  std::vector<Applied> applied_;
  Status reset_result_;
  int reset_calls_ = 0;
  int apply_failures_ = 0;
};

// avg, diloco: a batch goes to the sink, not into the replica; its seq is
// consumed after the sink took it, and when that fails the sink gets the
// same batch again on the resend (and never a duplicate after).
TEST_F(RemoteInboxTest, ASinkTakesTheBatchAndGetsItAgainWhenItsSeqCouldNotBeMarked) {
  FakeTarget target;
  RemoteInbox inbox(&target, &gate_, 0, 8);
  std::vector<std::pair<SiteId, uint64_t>> sunk;
  inbox.SetBatchSink([&](SiteId origin, uint64_t seq, const DecodedBatch& batch) {
    EXPECT_EQ(batch.chunks.size(), 1u);
    sunk.emplace_back(origin, seq);
    return Status::Ok();
  });
  target.fail_applies(1);
  Status first = inbox.OnBatch(Make(1, 1, 2.0f));
  EXPECT_EQ(first.code(), StatusCode::kUnavailable) << first.ToString();
  EXPECT_EQ(target.LastAppliedSeq(1), 0u);
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 2.0f)).ok());
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 2.0f)).ok());  // applied: a duplicate, not sunk again
  EXPECT_EQ(sunk, (std::vector<std::pair<SiteId, uint64_t>>{{1, 1}, {1, 1}}));
  EXPECT_EQ(target.LastAppliedSeq(1), 1u);
  // Nothing of the batch was added: the seq was consumed with no deltas.
  EXPECT_EQ(target.applied(), (std::vector<FakeTarget::Applied>{{1, 1, 0.0f}}));
  EXPECT_EQ(inbox.stats().batches_refused, 1);
}

TEST_F(RemoteInboxTest, IncarnationZeroIsAlwaysAdmitted) {
  RemoteInbox inbox(shard_.get(), &gate_, 0, 8);
  ListenerLog log;
  inbox.SetIncarnationListener(log.Listener());
  inbox.SetOwnIncarnation(5);
  inbox.RestoreIncarnation(1, 3);
  // A sender that does not say its incarnation, nor the one it made the
  // message for, is taken whatever the inbox knows.
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 2, 0, 0)).ok());
  EXPECT_TRUE(inbox.OnClock(WanClockReport{1, 4, 1, false, 0, 0}).ok());
  EXPECT_TRUE(inbox.OnNotice(WanNotice{1, 2, {key_}, 10000, 0, 0}).ok());
  EXPECT_TRUE(inbox.OnHeartbeat(1, 0).ok());
  // Nor does an origin never heard of need recording first.
  ASSERT_TRUE(inbox.OnBatch(Make(2, 1, 5, 0, 0)).ok());
  EXPECT_TRUE(inbox.OnHeartbeat(2, 0).ok());
  EXPECT_EQ(Value(0), 7.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 1u);
  EXPECT_EQ(shard_->LastAppliedSeq(2), 1u);
  EXPECT_EQ(gate_.NoticedChunks(), (std::vector<ChunkKey>{key_}));
  EXPECT_EQ(inbox.Incarnation(1), 3u);
  EXPECT_EQ(inbox.Incarnation(2), 0u);
  EXPECT_TRUE(log.calls().empty());
  const InboxStats st = inbox.stats();
  EXPECT_EQ(st.stale_refused, 0);
  EXPECT_EQ(st.batches_applied, 2);
  EXPECT_EQ(st.origin_resets, 0);
}

TEST_F(RemoteInboxTest, AFirstHeardIncarnationIsRecordedBeforeItsBatchesAreTaken) {
  RemoteInbox inbox(shard_.get(), &gate_, 0, 8);
  ListenerLog log;
  inbox.SetIncarnationListener(log.Listener());
  // A clock report or heartbeat of a first-heard incarnation is taken at
  // once; the listener is asked to record it.
  ASSERT_TRUE(inbox.OnClock(WanClockReport{1, 4, 0, false, 7, 0}).ok());
  EXPECT_EQ(log.calls(), (std::vector<ListenerCall>{{1, 7, false}}));
  EXPECT_EQ(inbox.Incarnation(1), 7u);
  gate_.OnPeerClock(2, 9, false);
  EXPECT_EQ(gate_.MinMirrorClock(), 4) << "the report was not passed to the gate";
  ASSERT_TRUE(inbox.OnHeartbeat(2, 9).ok());
  EXPECT_EQ(log.calls(), (std::vector<ListenerCall>{{1, 7, false}, {2, 9, false}}));
  EXPECT_EQ(inbox.Incarnation(2), 9u);

  // Its batches wait until it is confirmed (durably recorded); the listener
  // is not asked again.
  EXPECT_EQ(inbox.OnBatch(Make(1, 1, 3, 7, 0)).code(), StatusCode::kUnavailable);
  inbox.ConfirmIncarnation(1, 6);  // another incarnation: confirms nothing
  EXPECT_EQ(inbox.OnBatch(Make(1, 1, 3, 7, 0)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(Value(0), 0.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 0u);
  inbox.ConfirmIncarnation(1, 7);
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 3, 7, 0)).ok());
  EXPECT_EQ(Value(0), 3.0f);
  EXPECT_EQ(Value(3), -3.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 1u);

  // A batch may be what is heard first: Unavailable too, and recorded.
  EXPECT_EQ(inbox.OnBatch(Make(3, 1, 10, 4, 0)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(inbox.Incarnation(3), 4u);
  EXPECT_EQ(shard_->LastAppliedSeq(3), 0u);
  inbox.ConfirmIncarnation(3, 4);
  ASSERT_TRUE(inbox.OnBatch(Make(3, 1, 10, 4, 0)).ok());
  EXPECT_EQ(Value(0), 13.0f);
  EXPECT_EQ(log.calls(), (std::vector<ListenerCall>{{1, 7, false}, {2, 9, false}, {3, 4, false}}));
  EXPECT_EQ(inbox.stats().batches_applied, 2);
  EXPECT_EQ(inbox.stats().stale_refused, 0);
}

TEST_F(RemoteInboxTest, MessagesOfAnEarlierIncarnationAreRefusedAndCounted) {
  RemoteInbox inbox(shard_.get(), &gate_, 0, 8);
  ListenerLog log;
  inbox.SetIncarnationListener(log.Listener());
  inbox.RestoreIncarnation(1, 5);  // restored: confirmed already
  gate_.OnPeerClock(2, 9, false);
  EXPECT_EQ(inbox.OnBatch(Make(1, 1, 3, 4, 0)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inbox.OnBatch(Make(1, 2, 3, 4, 0)).code(), StatusCode::kFailedPrecondition);  // not buffered either
  EXPECT_EQ(inbox.OnClock(WanClockReport{1, 8, 0, false, 4, 0}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inbox.OnNotice(WanNotice{1, 1, {key_}, 10000, 4, 0}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inbox.OnHeartbeat(1, 4).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Value(0), 0.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 0u);
  EXPECT_EQ(gate_.MinMirrorClock(), 0) << "a stale report reached the gate";
  EXPECT_TRUE(gate_.NoticedChunks().empty());
  EXPECT_EQ(inbox.Incarnation(1), 5u);
  EXPECT_TRUE(log.calls().empty());
  InboxStats st = inbox.stats();
  EXPECT_EQ(st.stale_refused, 5);
  EXPECT_EQ(st.batches_applied, 0);
  EXPECT_EQ(st.batches_buffered, 0);
  // The current incarnation is taken (a restored one needs no confirmation),
  // and seq 1 was not consumed by the stale one.
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 2, 5, 0)).ok());
  ASSERT_TRUE(inbox.OnBatch(Make(1, 2, 1, 5, 0)).ok());
  EXPECT_EQ(Value(0), 3.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 2u);
  EXPECT_EQ(inbox.stats().stale_refused, 5);
}

TEST_F(RemoteInboxTest, ANewerIncarnationIsTakenOnlyAfterItsOriginIsReset) {
  FakeTarget target;
  // No drift bound: the gate then counts a reset peer in the mirror clock
  // at once (with one, it leaves it out while it catches up), so the
  // mirror clock shows which clock of site 1 the gate holds.
  MirrorGate gate({1, 2}, -1, std::chrono::milliseconds(60000));
  RemoteInbox inbox(&target, &gate, 0, 8);
  ListenerLog log;
  inbox.SetIncarnationListener(log.Listener());
  inbox.RestoreIncarnation(1, 2);
  gate.OnPeerClock(2, 100, false);  // site 2 never holds the mirror clock here

  // Incarnation 2: seqs 1 and 2 applied, 4 buffered, a report held for 4.
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 1, 2, 0)).ok());
  ASSERT_TRUE(inbox.OnBatch(Make(1, 2, 2, 2, 0)).ok());
  EXPECT_EQ(inbox.OnBatch(Make(1, 4, 4, 2, 0)).code(), StatusCode::kUnavailable);
  ASSERT_TRUE(inbox.OnClock(WanClockReport{1, 50, 4, false, 2, 0}).ok());
  ASSERT_TRUE(inbox.OnClock(WanClockReport{1, 6, 2, false, 2, 0}).ok());
  EXPECT_EQ(gate.MinMirrorClock(), 6);

  // Incarnation 3 is heard: the listener is asked once for a reset.
  ASSERT_TRUE(inbox.OnHeartbeat(1, 3).ok());
  EXPECT_EQ(log.calls(), (std::vector<ListenerCall>{{1, 3, true}}));
  EXPECT_EQ(inbox.OnBatch(Make(1, 1, 31, 3, 0)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(inbox.OnClock(WanClockReport{1, 1, 0, false, 3, 0}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(inbox.OnNotice(WanNotice{1, 1, {key_}, 10000, 3, 0}).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(inbox.OnHeartbeat(1, 3).ok());
  EXPECT_EQ(log.calls().size(), 1u) << "a repeat of the same incarnation asked for another reset";
  EXPECT_EQ(inbox.Incarnation(1), 2u);
  EXPECT_EQ(target.LastAppliedSeq(1), 2u);
  EXPECT_EQ(gate.MinMirrorClock(), 6);
  EXPECT_TRUE(gate.NoticedChunks().empty());

  // A reset that fails changes nothing.
  target.set_reset_result(UnavailableError("injected: store too slow"));
  auto reset = [&] { return target.ResetOrigin(1, [](std::span<const ChunkMass>) {}, Deadline::InMs(1000)); };
  Status failed = inbox.ResetOrigin(1, 3, reset);
  EXPECT_EQ(failed.code(), StatusCode::kUnavailable);
  EXPECT_NE(failed.message().find("injected: store too slow"), std::string::npos) << failed.ToString();
  EXPECT_EQ(target.reset_calls(), 1);
  EXPECT_EQ(inbox.Incarnation(1), 2u);
  EXPECT_EQ(inbox.stats().origin_resets, 0);
  EXPECT_EQ(inbox.OnBatch(Make(1, 1, 31, 3, 0)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(target.LastAppliedSeq(1), 2u);
  EXPECT_EQ(gate.MinMirrorClock(), 6);

  // It succeeds: the stream starts at seq 1, and what incarnation 2 left
  // buffered or held is gone.
  target.set_reset_result(Status::Ok());
  ASSERT_TRUE(inbox.ResetOrigin(1, 3, reset).ok());
  EXPECT_EQ(target.reset_calls(), 2);
  EXPECT_EQ(inbox.Incarnation(1), 3u);
  EXPECT_EQ(inbox.stats().origin_resets, 1);
  EXPECT_EQ(target.LastAppliedSeq(1), 0u);
  EXPECT_EQ(gate.MinMirrorClock(), 0) << "the gate kept the clock of the old incarnation";
  EXPECT_EQ(log.calls().size(), 1u);

  EXPECT_EQ(inbox.OnBatch(Make(1, 2, 32, 3, 0)).code(), StatusCode::kUnavailable);  // waits for seq 1
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 31, 3, 0)).ok());
  EXPECT_EQ(target.LastAppliedSeq(1), 2u);
  ASSERT_TRUE(inbox.OnBatch(Make(1, 3, 33, 3, 0)).ok());
  EXPECT_EQ(target.LastAppliedSeq(1), 3u) << "the old incarnation's buffered seq 4 was applied";
  ASSERT_TRUE(inbox.OnBatch(Make(1, 4, 34, 3, 0)).ok());
  EXPECT_EQ(gate.MinMirrorClock(), 0) << "the old incarnation's held report was taken";
  ASSERT_TRUE(inbox.OnClock(WanClockReport{1, 2, 4, false, 3, 0}).ok());
  EXPECT_EQ(gate.MinMirrorClock(), 2);
  const std::vector<FakeTarget::Applied> want = {{1, 1, 1}, {1, 2, 2}, {1, 1, 31}, {1, 2, 32}, {1, 3, 33}, {1, 4, 34}};
  EXPECT_EQ(target.applied(), want);

  // Incarnation 2 is stale now; its retries are refused.
  const int64_t stale = inbox.stats().stale_refused;
  EXPECT_EQ(inbox.OnBatch(Make(1, 5, 5, 2, 0)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inbox.OnClock(WanClockReport{1, 50, 4, false, 2, 0}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inbox.stats().stale_refused, stale + 2);
  EXPECT_EQ(target.LastAppliedSeq(1), 4u);
  EXPECT_EQ(gate.MinMirrorClock(), 2);
  // Another loss later asks for another reset.
  ASSERT_TRUE(inbox.OnHeartbeat(1, 4).ok());
  EXPECT_EQ(log.calls(), (std::vector<ListenerCall>{{1, 3, true}, {1, 4, true}}));
}

TEST_F(RemoteInboxTest, MessagesMadeForAnotherIncarnationOfThisSiteAreDropped) {
  RemoteInbox inbox(shard_.get(), &gate_, 0, 8);
  gate_.OnPeerClock(2, 9, false);
  // Until this site knows its own incarnation, any is accepted.
  ASSERT_TRUE(inbox.OnBatch(Make(1, 1, 1, 0, 4)).ok());
  inbox.SetOwnIncarnation(5);
  EXPECT_EQ(inbox.OnBatch(Make(1, 2, 10, 0, 4)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inbox.OnBatch(Make(1, 3, 10, 0, 4)).code(), StatusCode::kFailedPrecondition);  // not buffered
  EXPECT_EQ(inbox.OnClock(WanClockReport{1, 3, 0, false, 0, 4}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inbox.OnNotice(WanNotice{1, 2, {key_}, 10000, 0, 4}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inbox.OnBatch(Make(1, 2, 10, 0, 6)).code(), StatusCode::kFailedPrecondition);  // a later one too
  EXPECT_EQ(Value(0), 1.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 1u);
  EXPECT_EQ(gate_.MinMirrorClock(), 0);
  EXPECT_TRUE(gate_.NoticedChunks().empty());
  InboxStats st = inbox.stats();
  EXPECT_EQ(st.stale_refused, 5);
  EXPECT_EQ(st.batches_buffered, 0);

  // Made for this incarnation, or for an unknown one (0): taken.
  ASSERT_TRUE(inbox.OnBatch(Make(1, 2, 2, 0, 5)).ok());
  ASSERT_TRUE(inbox.OnBatch(Make(1, 3, 4, 0, 0)).ok());
  EXPECT_TRUE(inbox.OnNotice(WanNotice{1, 4, {key_}, 10000, 0, 5}).ok());
  EXPECT_EQ(gate_.NoticedChunks(), (std::vector<ChunkKey>{key_}));
  ASSERT_TRUE(inbox.OnClock(WanClockReport{1, 3, 0, false, 0, 0}).ok());
  EXPECT_EQ(gate_.MinMirrorClock(), 3);
  EXPECT_EQ(Value(0), 7.0f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 3u);
  EXPECT_EQ(inbox.stats().stale_refused, 5);
}

}  // namespace
}  // namespace geops::wan
