// A shard over in-memory stores: what it loads, when it acknowledges, how
// commits are grouped, and what each durability loses when unsynced writes
// are lost (the fault-injecting store).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "datacenter/shard.h"
#include "tests/storage/counter_workload.h"
#include "tests/storage/fault_injecting_shard_store.h"
#include "tests/storage/memory_shard_store.h"
#include "tests/storage/storage_test_util.h"

namespace geops::storage {
namespace {

using datacenter::Shard;
using datacenter::testing::SameBytes;
using datacenter::testing::ShardSnapshot;
using datacenter::testing::SnapshotOf;
using datacenter::testing::TestModel;
using datacenter::testing::TestOptions;
using ::testing::HasSubstr;
using testing::AckLog;
using testing::FaultInjectingShardStore;
using testing::MemoryShardStore;

std::unique_ptr<Shard> MakeShard(const ModelSpec& spec, const ShardOptions& o, ShardStore* store) {
  Result<std::unique_ptr<Shard>> shard = Shard::Create(spec, o, store);
  EXPECT_TRUE(shard.ok()) << shard.status().ToString();
  return shard.ok() ? std::move(shard).value() : nullptr;
}

std::vector<ChunkKey> Keys(const ModelSpec& spec, const ShardOptions& o) {
  return spec.ChunksOfShard(o.shard_id, o.num_shards);
}

std::vector<float> Ramp(const ModelSpec& spec, const std::vector<ChunkKey>& keys, float scale) {
  std::vector<float> v;
  for (const ChunkKey k : keys) {
    for (int64_t e = 0; e < spec.ChunkElements(k); ++e) v.push_back(scale * static_cast<float>(e % 7 - 3));
  }
  return v;
}

bool WaitFor(const std::function<bool()>& done, int ms = 5000) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(ShardPersistenceTest, AFreshStoreGetsEveryChunkAndWorkerInOneFirstCommit) {
  const ModelSpec spec = TestModel(InitKind::kNormal);
  const ShardOptions o = TestOptions(3, 2, 1);
  MemoryShardStore store(StoreFingerprint::Of(spec, o));
  auto shard = MakeShard(spec, o, &store);
  const testing::MemoryImage image = store.image();
  EXPECT_EQ(image.commits, 1u);
  ASSERT_EQ(image.chunks.size(), Keys(spec, o).size());
  for (const auto& [key, values] : SnapshotOf(*shard)) {
    EXPECT_EQ(image.chunks.at(key), values);
  }
  ASSERT_EQ(image.workers.size(), 3u);
  for (const auto& [id, r] : image.workers) {
    EXPECT_EQ(r.clock, 0);
    EXPECT_EQ(r.last_update_clock, -1);
  }
  EXPECT_TRUE(shard->GetStatus().persistent);
}

TEST(ShardPersistenceTest, AReopenedShardHasTheSameValuesAndClocksAndKnowsItsDuplicates) {
  const ModelSpec spec = TestModel();
  const ShardOptions o = TestOptions(2, 2, 0);
  const std::vector<ChunkKey> keys = Keys(spec, o);
  MemoryShardStore store(StoreFingerprint::Of(spec, o));
  ShardSnapshot before;
  {
    auto shard = MakeShard(spec, o, &store);
    for (WorkerId w = 0; w < 2; ++w) ASSERT_TRUE(shard->RegisterWorker(w, 0, "").ok());
    for (Clock c = 0; c < 3; ++c) {
      for (WorkerId w = 0; w < 2; ++w) {
        ASSERT_TRUE(shard->Update(w, c, keys, Ramp(spec, keys, 0.25f * static_cast<float>(w + 1))).ok());
        ASSERT_TRUE(shard->AdvanceClock(w, c + 1, w == 1 && c == 2).ok());
      }
    }
    ASSERT_TRUE(shard->Update(0, 3, keys, Ramp(spec, keys, 1.0f)).ok());  // in flight: not advanced
    before = SnapshotOf(*shard);
  }
  auto shard = MakeShard(spec, o, &store);
  EXPECT_TRUE(SameBytes(SnapshotOf(*shard), before));
  const ShardStatus st = shard->GetStatus();
  EXPECT_EQ(st.workers[0].clock, 3);
  EXPECT_EQ(st.workers[1].clock, 3);
  EXPECT_TRUE(st.workers[1].finished);
  EXPECT_EQ(st.shard_clock, 3);

  Result<UpdateReply> unregistered = shard->Update(0, 3, keys, Ramp(spec, keys, 1.0f));
  EXPECT_EQ(unregistered.status().code(), StatusCode::kAborted);
  Result<RegisterReply> reg = shard->RegisterWorker(0, spec.Fingerprint(), "");
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ(reg->worker_clock, 3);
  for (Clock c : {2, 3}) {  // an old batch, and the in-flight one that made it before the restart
    Result<UpdateReply> retry = shard->Update(0, c, keys, Ramp(spec, keys, 1.0f));
    ASSERT_TRUE(retry.ok());
    EXPECT_FALSE(retry->applied) << "clock " << c;
  }
  EXPECT_TRUE(SameBytes(SnapshotOf(*shard), before));
  ASSERT_TRUE(shard->AdvanceClock(0, 4, false).ok());
  Result<UpdateReply> next = shard->Update(0, 4, keys, Ramp(spec, keys, 1.0f));
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->applied);
}

TEST(ShardPersistenceTest, UpdatesWaitForTheirCommitAndConcurrentOnesShareOne) {
  const ModelSpec spec = TestModel();
  const ShardOptions o = TestOptions(8);
  const std::vector<ChunkKey> keys = Keys(spec, o);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kSync);
  auto shard = MakeShard(spec, o, &store);
  ASSERT_EQ(store.commits(), 1);
  for (WorkerId w = 0; w < 8; ++w) ASSERT_TRUE(shard->RegisterWorker(w, 0, "").ok());
  store.CloseGate();  // a slow disk

  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    EXPECT_TRUE(shard->Update(0, 0, keys, Ramp(spec, keys, 1.0f)).ok());
    answered.fetch_add(1);
  });
  EXPECT_TRUE(WaitFor([&] { return store.waiting_at_gate() == 1; }));
  for (WorkerId w = 1; w < 8; ++w) {
    threads.emplace_back([&, w] {
      EXPECT_TRUE(shard->Update(w, 0, keys, Ramp(spec, keys, 1.0f)).ok());
      answered.fetch_add(1);
    });
  }
  EXPECT_TRUE(WaitFor([&] { return shard->GetStatus().update_batches_applied == 8; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(answered.load(), 0) << "an update was acknowledged before its commit was written";
  store.OpenGate();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(answered.load(), 8);
  // The first commit, one for worker 0, one shared by the seven that came
  // while it was being written.
  EXPECT_EQ(store.commits(), 3);
  EXPECT_EQ(shard->GetStatus().store_commits, 3);
}

TEST(ShardPersistenceTest, ARetryIsNotAcknowledgedBeforeTheOriginalIsWritten) {
  const ModelSpec spec = TestModel();
  ShardOptions o = TestOptions(1);
  o.max_commit_wait_ms = 50;
  const std::vector<ChunkKey> keys = Keys(spec, o);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kSync);
  auto shard = MakeShard(spec, o, &store);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  store.CloseGate();
  Result<UpdateReply> first = shard->Update(0, 0, keys, Ramp(spec, keys, 1.0f));
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(first.status().message(), HasSubstr("not written"));
  Result<UpdateReply> retry = shard->Update(0, 0, keys, Ramp(spec, keys, 1.0f));
  EXPECT_EQ(retry.status().code(), StatusCode::kUnavailable) << "a duplicate was acknowledged before it was durable";
  store.OpenGate();
  retry = shard->Update(0, 0, keys, Ramp(spec, keys, 1.0f));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_FALSE(retry->applied);
  const ShardSnapshot now = SnapshotOf(*shard);
  shard.reset();
  EXPECT_TRUE(SameBytes(SnapshotOf(*MakeShard(spec, o, &store)), now));
}

TEST(ShardPersistenceTest, AFailedCommitStopsChangesButNotReads) {
  const ModelSpec spec = TestModel();
  const ShardOptions o = TestOptions(2);
  const std::vector<ChunkKey> keys = Keys(spec, o);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kSync);
  auto shard = MakeShard(spec, o, &store);
  for (WorkerId w = 0; w < 2; ++w) ASSERT_TRUE(shard->RegisterWorker(w, 0, "").ok());
  store.FailNextCommits(1);
  Result<UpdateReply> u = shard->Update(0, 0, keys, Ramp(spec, keys, 1.0f));
  EXPECT_EQ(u.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(u.status().message(), HasSubstr("injected: I/O error"));
  EXPECT_THAT(u.status().message(), HasSubstr("cannot persist"));
  EXPECT_EQ(shard->Update(1, 0, keys, Ramp(spec, keys, 1.0f)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(shard->AdvanceClock(1, 1, false).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(shard->Flush(Deadline::InMs(100)).code(), StatusCode::kUnavailable);
  std::vector<float> out(datacenter::testing::ElementsOf(spec, keys));
  EXPECT_TRUE(shard->Read(1, 0, kAsync, keys, out.data(), Deadline::InMs(1000)).ok());
}

// Drives one counter worker per worker id against a shard over `store`,
// applies `crash` once some work was acknowledged (it must Freeze the store:
// the process is dead), and checks a shard reopened over the store: "" when nothing acknowledged was lost and nothing
// applied twice, else the first problem.
std::string CrashAndVerify(FaultInjectingShardStore* store, const ModelSpec& spec, const ShardOptions& o,
                           const std::function<void()>& crash) {
  AckLog log;
  {
    auto shard = MakeShard(spec, o, store);
    std::atomic<bool> stop{false};
    std::vector<std::thread> drivers;
    for (WorkerId w = 0; w < o.num_workers; ++w) {
      drivers.emplace_back([&, w] { testing::DriveCounterWorker(shard.get(), w, o.num_workers, &stop, &log).IgnoreError(); });
    }
    EXPECT_TRUE(WaitFor([&] { return log.acks().size() > 40; }));
    crash();
    stop = true;
    for (std::thread& t : drivers) t.join();
  }
  store->Thaw();
  auto reopened = MakeShard(spec, o, store);
  const std::vector<testing::Ack> acks = log.acks();
  EXPECT_GT(acks.size(), 40u);
  return reopened == nullptr ? "cannot reopen" : testing::VerifyRecovered(reopened.get(), acks, o.num_workers);
}

TEST(ShardPersistenceTest, SyncLosesNothingAcknowledgedWhenUnsyncedWritesAreLost) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(4, 2, 1);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kSync);
  EXPECT_EQ(CrashAndVerify(&store, spec, o, [&] { store.Freeze(); store.DropUnsyncedWrites(); }), "");
  EXPECT_EQ(store.dropped_commits(), 0);
}

TEST(ShardPersistenceTest, AsyncLosesNothingAcknowledgedWhenOnlyTheProcessDies) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(4);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kAsync);
  EXPECT_EQ(CrashAndVerify(&store, spec, o, [&] { store.Freeze(); }), "");
}

TEST(ShardPersistenceTest, AsyncAndOffLoseAcknowledgedWorkWhenUnsyncedWritesAreLost) {
  for (Durability d : {Durability::kAsync, Durability::kOff}) {
    const ModelSpec spec = TestModel(InitKind::kZeros);
    const ShardOptions o = TestOptions(2);
    FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), d);
    // Nothing was ever synced: the store goes back to empty, and what was
    // acknowledged before the crash is gone (consistently: no half commit).
    const std::string problem =
        CrashAndVerify(&store, spec, o, [&] { store.Freeze(); store.DropUnsyncedWrites(); });
    EXPECT_THAT(problem, HasSubstr("was lost")) << DurabilityName(d);
    EXPECT_GT(store.dropped_commits(), 0) << DurabilityName(d);
  }
}

TEST(ShardPersistenceTest, OffAnswersAtOnceAndCommitsAtClockTicksAndFlush) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  const std::vector<ChunkKey> keys = Keys(spec, o);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kOff);
  auto shard = MakeShard(spec, o, &store);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  store.CloseGate();
  ASSERT_TRUE(shard->Update(0, 0, keys, Ramp(spec, keys, 1.0f)).ok());   // no commit asked
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());                    // the tick's commit, not waited for
  ASSERT_TRUE(WaitFor([&] { return store.waiting_at_gate() == 1; }));
  ASSERT_TRUE(shard->Update(0, 1, keys, Ramp(spec, keys, 2.0f)).ok());
  store.OpenGate();
  ASSERT_TRUE(shard->Flush(Deadline::InMs(5000)).ok());
  const ShardSnapshot now = SnapshotOf(*shard);
  store.Freeze();  // a crash right after the flush loses nothing
  shard.reset();
  auto reopened = MakeShard(spec, o, &store);
  EXPECT_TRUE(SameBytes(SnapshotOf(*reopened), now));
  EXPECT_EQ(reopened->GetStatus().workers[0].clock, 1);
}

TEST(ShardPersistenceTest, AnAcknowledgedWanBatchAndItsOriginSeqSurviveACrash) {
  // The sender forgets a batch once ApplyRemote returned OK, so under sync
  // the batch and its seq must be on stable storage by then, in one commit.
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kSync);
  const ChunkKey key{2, 3};
  const std::vector<uint32_t> indices = {0, 5, 63};
  const std::vector<float> values = {1.5f, -2.0f, 4.0f};
  const RemoteChunkDelta delta{key, static_cast<uint32_t>(spec.ChunkElements(key)), indices, values};
  ShardSnapshot applied;
  {
    auto shard = MakeShard(spec, o, &store);
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      Result<RemoteApplyResult> r = shard->ApplyRemote(7, seq, {&delta, 1});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_TRUE(r->applied);
    }
    applied = SnapshotOf(*shard);
    store.Freeze();  // crash: no flush, nothing more reaches the store
  }
  store.Thaw();
  const testing::MemoryImage image = store.visible_image();
  ASSERT_EQ(image.origins.size(), 1u);
  EXPECT_EQ(image.origins.at(7), 3u);
  auto shard = MakeShard(spec, o, &store);
  EXPECT_TRUE(SameBytes(SnapshotOf(*shard), applied));
  EXPECT_EQ(shard->LastAppliedSeq(7), 3u);
  Result<RemoteApplyResult> replay = shard->ApplyRemote(7, 3, {&delta, 1});  // the peer resends it
  ASSERT_TRUE(replay.ok());
  EXPECT_FALSE(replay->applied);
  EXPECT_TRUE(SameBytes(SnapshotOf(*shard), applied));
}

TEST(ShardPersistenceTest, AWanBatchIsNotAcknowledgedBeforeItIsDurable) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kSync);
  const ChunkKey key{2, 3};
  const std::vector<uint32_t> indices = {1};
  const std::vector<float> values = {2.0f};
  const RemoteChunkDelta delta{key, static_cast<uint32_t>(spec.ChunkElements(key)), indices, values};
  auto shard = MakeShard(spec, o, &store);
  store.CloseGate();  // commits block
  std::atomic<bool> returned{false};
  std::thread apply([&] {
    Result<RemoteApplyResult> r = shard->ApplyRemote(7, 1, {&delta, 1});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(returned.load()) << "ApplyRemote acknowledged a batch that is not on stable storage";
  store.OpenGate();
  apply.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(store.visible_image().origins.at(7), 1u);
}

TEST(ShardPersistenceTest, RefusesAStoreThatDoesNotFit) {
  const ModelSpec spec = TestModel();
  const ShardOptions o = TestOptions(2, 2, 0);
  MemoryShardStore other(StoreFingerprint::Of(spec, TestOptions(3, 2, 0)));
  Result<std::unique_ptr<Shard>> shard = Shard::Create(spec, o, &other);
  EXPECT_EQ(shard.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(shard.status().message(), HasSubstr("worker count differs (stored 3, this process 2)"));

  MemoryShardStore store(StoreFingerprint::Of(spec, o));
  { auto first = MakeShard(spec, o, &store); }
  const testing::MemoryImage good = store.image();
  struct Case {
    std::function<void(testing::MemoryImage*)> damage;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {[](testing::MemoryImage* i) { i->chunks.begin()->second.pop_back(); }, "the model says"},
      {[](testing::MemoryImage* i) { i->chunks.erase(i->chunks.begin()); }, "is missing"},
      {[](testing::MemoryImage* i) { i->chunks[ChunkKey{0, 1}] = std::vector<float>(64); }, "does not own"},
      {[](testing::MemoryImage* i) { i->workers[1].last_update_clock = 5; }, "inconsistent"},
      {[](testing::MemoryImage* i) { i->workers[7] = WorkerRecord{7, 0, -1, false}; }, "outside [0, 2)"},
  };
  for (const Case& c : cases) {
    testing::MemoryImage image = good;
    c.damage(&image);
    store.set_image(image);
    shard = Shard::Create(spec, o, &store);
    EXPECT_EQ(shard.status().code(), StatusCode::kDataLoss) << c.needle;
    EXPECT_THAT(shard.status().message(), HasSubstr(c.needle));
  }
}

}  // namespace
}  // namespace geops::storage
