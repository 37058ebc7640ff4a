#include "wan/remote_inbox.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>

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

}  // namespace
}  // namespace geops::wan
