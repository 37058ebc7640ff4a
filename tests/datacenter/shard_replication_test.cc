// The shard's side of the WAN seam: ApplyRemote (exactly once, in order,
// validated), the tap (local batches and clock advances, no echo of remote
// deltas), and the read gate hook.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <list>
#include <mutex>
#include <vector>

#include "common/replication.h"
#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using testing::MakeShard;
using testing::SameBytes;
using testing::ShardSnapshot;
using testing::SnapshotOf;
using testing::TestModel;
using testing::TestOptions;

struct RecordingTap : ReplicationTap {
  void OnLocalUpdate(WorkerId, Clock, int32_t, std::span<const ChunkKey> keys, std::span<const float> values) override {
    std::lock_guard<std::mutex> lock(mu);
    batches++;
    floats += static_cast<int64_t>(values.size());
    last_keys.assign(keys.begin(), keys.end());
  }
  void OnShardClock(Clock c, bool finished) override {
    std::lock_guard<std::mutex> lock(mu);
    clocks.push_back(c);
    all_finished = finished;
  }
  std::mutex mu;
  int batches = 0;
  int64_t floats = 0;
  std::vector<ChunkKey> last_keys;
  std::vector<Clock> clocks;
  bool all_finished = false;
};

struct CountingGate : ReadGate {
  Status WaitReadable(std::span<const ChunkKey> keys, Clock shard_clock, bool finished, Deadline,
                      double* waited) override {
    calls++;
    last_clock = shard_clock;
    last_finished = finished;
    keys_seen = static_cast<int>(keys.size());
    if (!interrupted.empty()) return UnavailableError(interrupted);
    if (refuse) return DeadlineExceededError("held by the test gate");
    *waited += 0.001;
    return Status::Ok();
  }
  void Interrupt(const std::string& why) override { interrupted = why; }
  std::string interrupted;
  std::atomic<int> calls{0};
  Clock last_clock = -1;
  bool last_finished = false;
  int keys_seen = 0;
  bool refuse = false;
};

class ShardReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = TestModel(InitKind::kZeros);
    shard_ = MakeShard(spec_, TestOptions(2));
    ASSERT_NE(shard_, nullptr);
  }
  RemoteChunkDelta Delta(ChunkKey key, const std::vector<uint32_t>& idx, const std::vector<float>& val) {
    idx_store_.push_back(idx);
    val_store_.push_back(val);
    return RemoteChunkDelta{key, static_cast<uint32_t>(spec_.ChunkElements(key)), idx_store_.back(),
                            val_store_.back()};
  }
  float At(ChunkKey key, int i) {
    std::vector<float> v(spec_.ChunkElements(key));
    EXPECT_TRUE(shard_->ReadChunkValue(key, v.data()).ok());
    return v[i];
  }

  ModelSpec spec_;
  std::unique_ptr<Shard> shard_;
  std::list<std::vector<uint32_t>> idx_store_;
  std::list<std::vector<float>> val_store_;
};

TEST_F(ShardReplicationTest, AppliesEachOriginsBatchesOnceAndInOrder) {
  std::vector<RemoteChunkDelta> d = {Delta({0, 1}, {0, 5}, {1.5f, -2.0f}), Delta({2, 3}, {63}, {4.0f})};
  auto r = shard_->ApplyRemote(1, 1, d);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->applied);
  EXPECT_EQ(r->elements, 3);
  EXPECT_EQ(At({0, 1}, 0), 1.5f);
  EXPECT_EQ(At({0, 1}, 5), -2.0f);
  EXPECT_EQ(At({2, 3}, 63), 4.0f);
  auto dup = shard_->ApplyRemote(1, 1, d);
  ASSERT_TRUE(dup.ok());
  EXPECT_FALSE(dup->applied);
  EXPECT_EQ(At({0, 1}, 0), 1.5f);
  EXPECT_EQ(shard_->ApplyRemote(1, 3, d).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 1u);
  EXPECT_EQ(shard_->LastAppliedSeq(2), 0u);
  ASSERT_TRUE(shard_->ApplyRemote(2, 1, d).ok());  // another origin has its own numbering
  EXPECT_EQ(At({0, 1}, 0), 3.0f);
}

TEST_F(ShardReplicationTest, RefusesBadBatchesWholeAndChangesNothing) {
  const ShardSnapshot before = SnapshotOf(*shard_);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* what;
    std::vector<RemoteChunkDelta> deltas;
  };
  RemoteChunkDelta good = Delta({0, 0}, {1}, {1.0f});
  RemoteChunkDelta wrong_size = Delta({0, 0}, {1}, {1.0f});
  wrong_size.num_elements = 7;
  RemoteChunkDelta short_values = Delta({0, 1}, {1, 2}, {1.0f});
  std::vector<Case> cases = {
      {"nan", {good, Delta({0, 1}, {0}, {nan})}},
      {"inf", {good, Delta({0, 1}, {0}, {std::numeric_limits<float>::infinity()})}},
      {"unknown table", {good, Delta({0, 0}, {0}, {1.0f})}},
      {"index out of range", {good, Delta({0, 1}, {64}, {1.0f})}},
      {"not increasing", {good, Delta({0, 1}, {3, 3}, {1.0f, 1.0f})}},
      {"repeated chunk", {good, Delta({0, 0}, {2}, {1.0f})}},
      {"wrong size", {wrong_size}},
      {"lengths differ", {short_values}},
  };
  cases[2].deltas[1].key = ChunkKey{9, 0};
  for (const Case& c : cases) {
    auto r = shard_->ApplyRemote(1, 1, c.deltas);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.what << ": " << r.status().ToString();
  }
  EXPECT_EQ(shard_->ApplyRemote(1, 0, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(SameBytes(before, SnapshotOf(*shard_)));
  EXPECT_EQ(shard_->LastAppliedSeq(1), 0u);
}

// Two finite deltas of 3e38 would store +inf: the second batch is
// quarantined whole (its other, harmless chunk included), its seq is
// consumed, and the stream goes on with the next batch.
TEST_F(ShardReplicationTest, ABatchThatWouldOverflowIsQuarantinedWholeAndTheStreamGoesOn) {
  std::vector<RemoteChunkDelta> first = {Delta({0, 1}, {0}, {3e38f})};
  ASSERT_TRUE(shard_->ApplyRemote(1, 1, first).ok());
  const ShardSnapshot before = SnapshotOf(*shard_);
  std::vector<RemoteChunkDelta> second = {Delta({2, 3}, {63}, {4.0f}), Delta({0, 1}, {0, 1}, {3e38f, 1.0f})};
  auto r = shard_->ApplyRemote(1, 2, second);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->quarantined);
  EXPECT_FALSE(r->applied);
  EXPECT_EQ(r->elements, 0);
  EXPECT_NE(r->quarantine.find("batch 2 from site 1"), std::string::npos) << r->quarantine;
  EXPECT_NE(r->quarantine.find("element 0"), std::string::npos) << r->quarantine;
  EXPECT_NE(r->quarantine.find("not finite"), std::string::npos) << r->quarantine;
  EXPECT_TRUE(SameBytes(before, SnapshotOf(*shard_))) << "nothing of a quarantined batch is applied";
  EXPECT_EQ(At({0, 1}, 0), 3e38f);
  EXPECT_EQ(shard_->LastAppliedSeq(1), 2u);
  auto again = shard_->ApplyRemote(1, 2, second);  // the sender's retry is a duplicate
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->applied);
  EXPECT_FALSE(again->quarantined);
  std::vector<RemoteChunkDelta> third = {Delta({0, 1}, {0}, {-1e38f})};
  auto next = shard_->ApplyRemote(1, 3, third);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_TRUE(next->applied);
  EXPECT_EQ(At({0, 1}, 0), 3e38f + -1e38f);
}

TEST_F(ShardReplicationTest, RefusesChunksOfAnotherShard) {
  auto other = MakeShard(spec_, TestOptions(1, 2, 1));
  std::vector<RemoteChunkDelta> d = {Delta({0, 0}, {0}, {1.0f})};  // shard 0 owns (w, 0)
  EXPECT_EQ(other->ApplyRemote(1, 1, d).status().code(), StatusCode::kInvalidArgument);
  std::vector<float> v(64);
  EXPECT_EQ(other->ReadChunkValue({0, 0}, v.data()).code(), StatusCode::kInvalidArgument);
}

TEST_F(ShardReplicationTest, ReadsSingleElementsAsTheWholeChunkHasThem) {
  std::vector<RemoteChunkDelta> d = {Delta({0, 1}, {0, 5, 9}, {1.5f, -2.0f, 0.25f})};
  ASSERT_TRUE(shard_->ApplyRemote(1, 1, d).ok());
  std::vector<float> whole(spec_.ChunkElements({0, 1}));
  ASSERT_TRUE(shard_->ReadChunkValue({0, 1}, whole.data()).ok());
  const std::vector<uint32_t> at = {9, 0, 7, 5};  // any order, untouched ones too
  std::vector<float> got(at.size(), -1.0f);
  ASSERT_TRUE(shard_->ReadChunkElements({0, 1}, at, got.data()).ok());
  for (size_t k = 0; k < at.size(); ++k) EXPECT_EQ(got[k], whole[at[k]]) << "element " << at[k];
  EXPECT_EQ(got[0], 0.25f);
  const std::vector<uint32_t> past = {static_cast<uint32_t>(whole.size())};
  Status s = shard_->ReadChunkElements({0, 1}, past, got.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("past the end"), std::string::npos) << s.message();
  auto other = MakeShard(spec_, TestOptions(1, 2, 1));
  EXPECT_EQ(other->ReadChunkElements({0, 0}, at, got.data()).code(), StatusCode::kInvalidArgument);
}

TEST_F(ShardReplicationTest, TapHearsLocalBatchesAndClocksButNotRemoteDeltas) {
  RecordingTap tap;
  shard_->AttachReplication(&tap, nullptr);
  ASSERT_TRUE(shard_->RegisterWorker(0, 0, "").ok());
  ASSERT_TRUE(shard_->RegisterWorker(1, 0, "").ok());
  const std::vector<ChunkKey> keys = {{0, 0}, {1, 0}};
  std::vector<float> ones(64 + 5, 1.0f);
  ASSERT_TRUE(shard_->Update(0, 0, keys, ones).ok());
  ASSERT_TRUE(shard_->Update(0, 0, keys, ones).ok());  // a retry: not tapped again
  std::vector<RemoteChunkDelta> d = {Delta({0, 1}, {0}, {1.0f})};
  ASSERT_TRUE(shard_->ApplyRemote(1, 1, d).ok());
  ASSERT_TRUE(shard_->AdvanceClock(0, 1, false).ok());
  ASSERT_TRUE(shard_->AdvanceClock(1, 1, true).ok());
  ASSERT_TRUE(shard_->AdvanceClock(0, 1, true).ok());
  std::lock_guard<std::mutex> lock(tap.mu);
  EXPECT_EQ(tap.batches, 1);
  EXPECT_EQ(tap.floats, 69);
  EXPECT_EQ(tap.last_keys, keys);
  ASSERT_EQ(tap.clocks.size(), 4u);
  EXPECT_EQ(tap.clocks[0], 0);  // at attach: where the shard stands
  EXPECT_EQ(tap.clocks[1], 0);  // worker 1 still at 0
  EXPECT_EQ(tap.clocks[2], 1);
  EXPECT_TRUE(tap.all_finished);
}

TEST_F(ShardReplicationTest, ReadsPassTheGateAfterTheClockWait) {
  CountingGate gate;
  shard_->AttachReplication(nullptr, &gate);
  ASSERT_TRUE(shard_->RegisterWorker(0, 0, "").ok());
  std::vector<float> out(64);
  const std::vector<ChunkKey> keys = {{0, 0}};
  ASSERT_TRUE(shard_->Read(0, 0, 0, keys, out.data(), Deadline::InMs(1000)).ok());
  EXPECT_EQ(gate.calls.load(), 1);
  EXPECT_EQ(gate.keys_seen, 1);
  EXPECT_EQ(gate.last_clock, 0);
  EXPECT_FALSE(gate.last_finished);
  EXPECT_GT(shard_->GetStatus().read_wait_seconds, 0.0);
  gate.refuse = true;
  auto held = shard_->Read(0, 0, 0, keys, out.data(), Deadline::InMs(1000));
  EXPECT_EQ(held.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(shard_->GetStatus().requests_rejected, 1);
}

}  // namespace
}  // namespace geops::datacenter
