// A shard over in-memory stores: what it loads, when it acknowledges, how
// commits are grouped, and what each durability loses when unsynced writes
// are lost (the fault-injecting store).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "datacenter/shard.h"
#include "tests/storage/counter_workload.h"
#include "tests/storage/fault_injecting_shard_store.h"
#include "tests/storage/memory_shard_store.h"
#include "tests/storage/persistence_test_util.h"
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
using testing::MakeShard;
using testing::Keys;
using testing::Ramp;
using testing::WaitFor;

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

TEST(ShardPersistenceTest, AQuarantinedWanBatchConsumesItsSeqDurably) {
  // A batch skipped because it would overflow is acknowledged like an
  // applied one, so its seq must survive a crash: else the restarted shard
  // would wait for a batch its sender has forgotten.
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kSync);
  const ChunkKey key{2, 3};
  const std::vector<uint32_t> indices = {0};
  const std::vector<float> big = {3e38f};
  const RemoteChunkDelta delta{key, static_cast<uint32_t>(spec.ChunkElements(key)), indices, big};
  ShardSnapshot applied;
  {
    auto shard = MakeShard(spec, o, &store);
    ASSERT_TRUE(shard->ApplyRemote(7, 1, {&delta, 1}).ok());
    Result<RemoteApplyResult> r = shard->ApplyRemote(7, 2, {&delta, 1});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->quarantined);
    applied = SnapshotOf(*shard);
    store.Freeze();
  }
  store.Thaw();
  EXPECT_EQ(store.visible_image().origins.at(7), 2u);
  auto shard = MakeShard(spec, o, &store);
  EXPECT_EQ(shard->LastAppliedSeq(7), 2u);
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


// ResetOrigin: a site that lost its store has everything it contributed
// taken back out of the replica, exactly, in one commit.

// A MemoryShardStore that also keeps, per successful commit, what it held.
class RecordingStore : public ShardStore {
 public:
  struct Logged {
    std::vector<ChunkKey> chunks;
    std::vector<OriginRecord> origins;
    std::vector<std::string> outbound_puts;
    std::vector<SiteId> ledger_clears;
    size_t ledger_adds = 0;
  };

  RecordingStore(StoreFingerprint fingerprint, Durability durability)
      : inner_(std::move(fingerprint), durability) {}

  Durability durability() const override { return inner_.durability(); }
  std::string name() const override { return inner_.name(); }
  Result<ShardState> Load() override { return inner_.Load(); }
  Status Commit(const ShardCommit& commit) override {
    Logged l;
    for (size_t i = 0; i < commit.num_chunks(); ++i) l.chunks.push_back(commit.chunk_key(i));
    l.origins = commit.origins;
    for (const OutboundRecord& r : commit.outbound_puts) l.outbound_puts.push_back(r.key);
    if (commit.deferred_outbound != nullptr) {
      for (size_t i = 0; i < commit.deferred_outbound->size(); ++i) {
        l.outbound_puts.push_back(commit.deferred_outbound->key(i));
      }
    }
    l.ledger_clears = commit.ledger_clears;
    l.ledger_adds = commit.ledger_adds.size();
    Status s = inner_.Commit(commit);
    if (s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(std::move(l));
    }
    return s;
  }
  Result<std::vector<LedgerRow>> ReadLedger(SiteId origin) override { return inner_.ReadLedger(origin); }

  testing::MemoryImage image() const { return inner_.image(); }
  std::vector<Logged> log() const {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  MemoryShardStore inner_;
  mutable std::mutex mu_;
  std::vector<Logged> log_;  // GUARDED_BY(mu_)
};

// Writes one record per key marked since the last commit.
class MarkingParticipant : public OutboundParticipant {
 public:
  void Mark(std::string key) {
    std::lock_guard<std::mutex> lock(mu_);
    marked_.push_back(std::move(key));
  }
  DeferredRecords* CollectOutbound(std::vector<OutboundRecord>* puts, std::vector<std::string>*) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::string& k : marked_) puts->push_back(OutboundRecord{std::move(k), "x"});
    marked_.clear();
    return nullptr;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> marked_;
};

struct SparseDelta {
  ChunkKey key;
  std::vector<uint32_t> indices;
  std::vector<float> values;
};
using Chunks = std::map<ChunkKey, std::vector<float>>;

Result<RemoteApplyResult> ApplyBatch(Shard* shard, SiteId origin, uint64_t seq, const std::vector<SparseDelta>& batch) {
  std::vector<RemoteChunkDelta> views;
  for (const SparseDelta& d : batch) {
    views.push_back(RemoteChunkDelta{d.key, static_cast<uint32_t>(shard->spec().ChunkElements(d.key)), d.indices,
                                     d.values});
  }
  return shard->ApplyRemote(origin, seq, views);
}

void AddTo(Chunks* chunks, const std::vector<SparseDelta>& batch) {
  for (const SparseDelta& d : batch) {
    for (size_t i = 0; i < d.indices.size(); ++i) chunks->at(d.key)[d.indices[i]] += d.values[i];
  }
}

Chunks ChunksOf(const ShardSnapshot& snapshot) { return Chunks(snapshot.begin(), snapshot.end()); }

// `keys` with the flat `values` (ChunkElements floats each).
Chunks ChunksOf(const ModelSpec& spec, const std::vector<ChunkKey>& keys, const std::vector<float>& values) {
  Chunks out;
  size_t at = 0;
  for (const ChunkKey k : keys) {
    const size_t n = static_cast<size_t>(spec.ChunkElements(k));
    out[k].assign(values.begin() + static_cast<std::ptrdiff_t>(at), values.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return out;
}

std::map<ChunkKey, std::vector<double>> LedgerOf(ShardStore* store, SiteId origin) {
  Result<std::vector<LedgerRow>> rows = store->ReadLedger(origin);
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  std::map<ChunkKey, std::vector<double>> out;
  if (!rows.ok()) return out;
  for (LedgerRow& r : *rows) out[r.key] = std::move(r.values);
  return out;
}

std::vector<double> DenseSums(int64_t elements, const std::vector<std::pair<uint32_t, double>>& at) {
  std::vector<double> out(static_cast<size_t>(elements), 0.0);
  for (const auto& [i, v] : at) out[i] += v;
  return out;
}

// The body of ResetOriginTakesBackExactlyWhatThatSiteContributed, for one
// durability. The store is read after a Flush: under async and off the
// commits are not waited for.
void CheckResetOrigin(Durability durability) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  const std::vector<ChunkKey> keys = Keys(spec, o);
  RecordingStore store(StoreFingerprint::Of(spec, o), durability);
  MarkingParticipant participant;
  auto shard = MakeShard(spec, o, &store);
  ASSERT_NE(shard, nullptr);
  ASSERT_TRUE(shard->SetOutboundParticipant(&participant));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());

  // Integers throughout, so that every sum is exact. Origin 1 touches
  // big/3, w/0 and w/2; origin 2 big/3, b/0 and w/0.
  const std::vector<SparseDelta> o1s1 = {{{2, 3}, {0, 5, 63}, {1, -2, 4}}, {{0, 0}, {1, 2}, {10, 20}}};
  const std::vector<SparseDelta> o1s2 = {{{2, 3}, {5}, {3}}, {{0, 2}, {31}, {8}}};
  const std::vector<SparseDelta> o2s1 = {{{2, 3}, {0, 5}, {100, -50}}, {{1, 0}, {4}, {-7}}};
  const std::vector<SparseDelta> o2s2 = {{{0, 0}, {1}, {1000}}};
  ASSERT_TRUE(shard->Update(0, 0, keys, Ramp(spec, keys, 1.0f)).ok());
  ASSERT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  for (const auto& [origin, seq, batch] : std::vector<std::tuple<SiteId, uint64_t, std::vector<SparseDelta>>>{
           {1, 1, o1s1}, {2, 1, o2s1}, {1, 2, o1s2}, {2, 2, o2s2}}) {
    Result<RemoteApplyResult> r = ApplyBatch(shard.get(), origin, seq, batch);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->applied);
  }
  ASSERT_TRUE(shard->Update(0, 1, keys, Ramp(spec, keys, 2.0f)).ok());
  const Chunks local = ChunksOf(spec, keys, Ramp(spec, keys, 3.0f));  // zeros + 1x + 2x
  Chunks all = local;
  for (const auto* b : {&o1s1, &o1s2, &o2s1, &o2s2}) AddTo(&all, *b);
  ASSERT_EQ(ChunksOf(SnapshotOf(*shard)), all);

  std::vector<ChunkMass> own;
  int change_calls = 0;
  Status reset = shard->ResetOrigin(
      1,
      [&](std::span<const ChunkMass> mass) {
        ++change_calls;
        own.assign(mass.begin(), mass.end());
        participant.Mark("reset-of-1");
      },
      Deadline::InMs(5000));
  ASSERT_TRUE(reset.ok()) << reset.ToString();
  EXPECT_EQ(change_calls, 1);

  // The replica holds the local mass and origin 2's, nothing of origin 1.
  Chunks expected = local;
  AddTo(&expected, o2s1);
  AddTo(&expected, o2s2);
  EXPECT_EQ(ChunksOf(SnapshotOf(*shard)), expected);
  // The own mass covers every chunk, once each, and is exactly the local one.
  Chunks own_chunks;
  for (const ChunkMass& m : own) EXPECT_TRUE(own_chunks.emplace(m.key, m.values).second) << "chunk repeated";
  EXPECT_EQ(own.size(), keys.size());
  EXPECT_EQ(own_chunks, local);

  EXPECT_EQ(shard->LastAppliedSeq(1), 0u);
  EXPECT_EQ(shard->LastAppliedSeq(2), 2u);
  ASSERT_TRUE(shard->Flush(Deadline::InMs(5000)).ok());
  EXPECT_TRUE(LedgerOf(&store, 1).empty());
  const std::map<ChunkKey, std::vector<double>> ledger2 = {
      {{0, 0}, DenseSums(64, {{1, 1000}})},
      {{1, 0}, DenseSums(5, {{4, -7}})},
      {{2, 3}, DenseSums(64, {{0, 100}, {5, -50}})},
  };
  EXPECT_EQ(LedgerOf(&store, 2), ledger2);

  // One commit holds the retraction, the forgotten seq, the cleared ledger
  // and what `change` recorded.
  int with_marker = 0;
  for (const RecordingStore::Logged& l : store.log()) {
    if (std::find(l.outbound_puts.begin(), l.outbound_puts.end(), "reset-of-1") == l.outbound_puts.end()) continue;
    ++with_marker;
    EXPECT_EQ(l.ledger_clears, (std::vector<SiteId>{1}));
    EXPECT_EQ(l.ledger_adds, 0u);
    ASSERT_EQ(l.origins.size(), 1u);
    EXPECT_EQ(l.origins[0].origin, 1);
    EXPECT_EQ(l.origins[0].seq, 0u);
    for (const ChunkKey k : {ChunkKey{0, 0}, ChunkKey{0, 2}, ChunkKey{2, 3}}) {
      EXPECT_NE(std::find(l.chunks.begin(), l.chunks.end(), k), l.chunks.end())
          << "chunk (" << k.table << ", " << k.chunk << ") is not in the reset's commit";
    }
  }
  EXPECT_EQ(with_marker, 1);
  const testing::MemoryImage image = store.image();
  EXPECT_EQ(image.origins.at(1), 0u);
  EXPECT_EQ(image.origins.at(2), 2u);
  EXPECT_EQ(image.outbound.count("reset-of-1"), 1u);

  // A restart finds the state as the reset left it.
  const ShardSnapshot after = SnapshotOf(*shard);
  shard.reset();
  shard = MakeShard(spec, o, &store);
  ASSERT_NE(shard, nullptr);
  EXPECT_TRUE(SameBytes(SnapshotOf(*shard), after));
  EXPECT_EQ(shard->LastAppliedSeq(1), 0u);
  EXPECT_EQ(shard->LastAppliedSeq(2), 2u);

  // The new incarnation of site 1 starts at seq 1 (a gap is still refused).
  const std::vector<SparseDelta> n1 = {{{2, 3}, {5}, {7}}};
  EXPECT_EQ(ApplyBatch(shard.get(), 1, 2, n1).status().code(), StatusCode::kFailedPrecondition);
  Result<RemoteApplyResult> again = ApplyBatch(shard.get(), 1, 1, n1);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->applied);
  again = ApplyBatch(shard.get(), 1, 1, n1);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->applied);
  AddTo(&expected, n1);
  EXPECT_EQ(ChunksOf(SnapshotOf(*shard)), expected);
  EXPECT_EQ(shard->LastAppliedSeq(1), 1u);
  ASSERT_TRUE(shard->Flush(Deadline::InMs(5000)).ok());
  EXPECT_EQ(LedgerOf(&store, 1), (std::map<ChunkKey, std::vector<double>>{{{2, 3}, DenseSums(64, {{5, 7}})}}));

  // A reset after the restart works from the stored ledgers as well.
  own.clear();
  ASSERT_TRUE(shard->ResetOrigin(2, [&](std::span<const ChunkMass> mass) { own.assign(mass.begin(), mass.end()); },
                                 Deadline::InMs(5000))
                  .ok());
  own_chunks.clear();
  for (const ChunkMass& m : own) own_chunks.emplace(m.key, m.values);
  EXPECT_EQ(own_chunks, local);
  expected = local;
  AddTo(&expected, n1);
  EXPECT_EQ(ChunksOf(SnapshotOf(*shard)), expected);
  EXPECT_EQ(shard->LastAppliedSeq(2), 0u);
  EXPECT_EQ(shard->LastAppliedSeq(1), 1u);
  ASSERT_TRUE(shard->Flush(Deadline::InMs(5000)).ok());
  EXPECT_TRUE(LedgerOf(&store, 2).empty());
  EXPECT_EQ(LedgerOf(&store, 1).size(), 1u);
}

TEST(ShardPersistenceTest, ResetOriginTakesBackExactlyWhatThatSiteContributed) {
  for (Durability d : {Durability::kSync, Durability::kAsync, Durability::kOff}) {
    SCOPED_TRACE(std::string(DurabilityName(d)));
    CheckResetOrigin(d);
  }
}

TEST(ShardPersistenceTest, ResetOriginNeedsAStore) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  auto shard = datacenter::testing::MakeShard(spec, o);
  ASSERT_NE(shard, nullptr);
  const std::vector<SparseDelta> batch = {{{2, 3}, {0}, {1}}};
  ASSERT_TRUE(ApplyBatch(shard.get(), 1, 1, batch).ok());
  const ShardSnapshot before = SnapshotOf(*shard);
  bool called = false;
  Status s = shard->ResetOrigin(1, [&](std::span<const ChunkMass>) { called = true; }, Deadline::InMs(1000));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_FALSE(called);
  EXPECT_EQ(shard->LastAppliedSeq(1), 1u);
  EXPECT_TRUE(SameBytes(SnapshotOf(*shard), before));
}

TEST(ShardPersistenceTest, AResetWhoseCommitFailsLeavesTheStoreAsItWas) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  FaultInjectingShardStore store(StoreFingerprint::Of(spec, o), Durability::kSync);
  const std::vector<SparseDelta> o1 = {{{2, 3}, {0, 9}, {5, -6}}};
  const std::vector<SparseDelta> o2 = {{{2, 3}, {0}, {40}}};
  ShardSnapshot before;
  {
    auto shard = MakeShard(spec, o, &store);
    ASSERT_NE(shard, nullptr);
    ASSERT_TRUE(ApplyBatch(shard.get(), 1, 1, o1).ok());
    ASSERT_TRUE(ApplyBatch(shard.get(), 2, 1, o2).ok());
    before = SnapshotOf(*shard);
    store.FailNextCommits(1);
    Status s = shard->ResetOrigin(1, [](std::span<const ChunkMass>) {}, Deadline::InMs(5000));
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    // The shard takes no more changes.
    EXPECT_EQ(ApplyBatch(shard.get(), 2, 2, o2).status().code(), StatusCode::kUnavailable);
  }
  auto shard = MakeShard(spec, o, &store);
  ASSERT_NE(shard, nullptr);
  EXPECT_TRUE(SameBytes(SnapshotOf(*shard), before));
  EXPECT_EQ(shard->LastAppliedSeq(1), 1u);
  EXPECT_EQ(LedgerOf(&store, 1), (std::map<ChunkKey, std::vector<double>>{{{2, 3}, DenseSums(64, {{0, 5}, {9, -6}})}}));
  EXPECT_EQ(LedgerOf(&store, 2), (std::map<ChunkKey, std::vector<double>>{{{2, 3}, DenseSums(64, {{0, 40}})}}));
  // ... and the reset goes through on a retry after the restart.
  ASSERT_TRUE(shard->ResetOrigin(1, [](std::span<const ChunkMass>) {}, Deadline::InMs(5000)).ok());
  Chunks expected = ChunksOf(spec, Keys(spec, o), std::vector<float>(datacenter::testing::ElementsOf(spec, Keys(spec, o))));
  AddTo(&expected, o2);
  EXPECT_EQ(ChunksOf(SnapshotOf(*shard)), expected);
  EXPECT_EQ(shard->LastAppliedSeq(1), 0u);
}


TEST(ShardPersistenceTest, ResetOriginSeesEachLocalUpdateWholeOrNotAtAll) {
  // Local updates race the reset: the own mass it reports must be a whole
  // number of them (integers again: k updates of the same ramp).
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(2);
  const std::vector<ChunkKey> keys = Keys(spec, o);
  const std::vector<float> ramp = Ramp(spec, keys, 1.0f);
  MemoryShardStore store(StoreFingerprint::Of(spec, o));
  auto shard = MakeShard(spec, o, &store);
  ASSERT_NE(shard, nullptr);
  const std::vector<SparseDelta> o1 = {{{2, 3}, {6, 13}, {9, -9}}, {{1, 0}, {0}, {2}}};
  const std::vector<SparseDelta> o2 = {{{2, 3}, {6}, {30}}};
  ASSERT_TRUE(ApplyBatch(shard.get(), 1, 1, o1).ok());
  ASSERT_TRUE(ApplyBatch(shard.get(), 2, 1, o2).ok());
  for (WorkerId w = 0; w < 2; ++w) ASSERT_TRUE(shard->RegisterWorker(w, 0, "").ok());
  std::atomic<bool> stop{false};
  std::atomic<int> applied{0};
  std::vector<std::thread> workers;
  for (WorkerId w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      for (Clock c = 0; c < 400 && !stop.load(); ++c) {
        Result<UpdateReply> u = shard->Update(w, c, keys, ramp);
        if (!u.ok() || !u->applied) break;
        applied.fetch_add(1);
        // Workers advance independently: no staleness wait in Update.
        if (!shard->AdvanceClock(w, c + 1, false).ok()) break;
      }
    });
  }
  EXPECT_TRUE(WaitFor([&] { return applied.load() >= 20; }));
  std::vector<ChunkMass> own;
  const int at_reset_min = applied.load();
  const Status reset = shard->ResetOrigin(
      1, [&](std::span<const ChunkMass> mass) { own.assign(mass.begin(), mass.end()); }, Deadline::InMs(5000));
  stop = true;
  for (std::thread& t : workers) t.join();
  ASSERT_TRUE(reset.ok()) << reset.ToString();
  // Element 6 of a ramp is 3: big/3 there says how many updates were in.
  Chunks own_chunks;
  for (const ChunkMass& m : own) own_chunks.emplace(m.key, m.values);
  ASSERT_EQ(own_chunks.size(), keys.size());
  const float at6 = own_chunks.at(ChunkKey{2, 3})[6];
  const int k = static_cast<int>(at6 / 3.0f);
  EXPECT_EQ(static_cast<float>(k) * 3.0f, at6);
  EXPECT_GE(k, at_reset_min);
  EXPECT_LE(k, applied.load());
  EXPECT_EQ(own_chunks, ChunksOf(spec, keys, Ramp(spec, keys, static_cast<float>(k))));
  Chunks expected = ChunksOf(spec, keys, Ramp(spec, keys, static_cast<float>(applied.load())));
  AddTo(&expected, o2);
  EXPECT_EQ(ChunksOf(SnapshotOf(*shard)), expected);
}

}  // namespace
}  // namespace geops::storage
