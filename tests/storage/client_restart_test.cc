// The worker's side of a shard restart: PsClient workers train a counter
// while one RocksDB-backed shard is torn down and reopened from its
// directory under them. They see Unavailable while it is down and Aborted
// once it is back (it forgot their registrations), re-register, resume at
// the persisted clock, and the counter comes out exact.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "datacenter/shard.h"
#include "storage/rocksdb_shard_store.h"
#include "tests/storage/storage_test_util.h"
#include "worker/ps_client.h"
#include "worker/shard_connection.h"

namespace geops::storage {
namespace {

using testing::StoreOptions;
using testing::TempDir;

// One shard process: its store and shard, replaced whole by Restart().
class ShardSlot {
 public:
  ShardSlot(const ModelSpec& spec, const ShardOptions& options, std::string dir)
      : spec_(spec), options_(options), dir_(std::move(dir)) {}

  Status Start() {
    auto store = OpenRocksDbShardStore(StoreOptions(dir_), ShardStoreSpec::Of(spec_, options_));
    if (!store.ok()) return store.status();
    auto process = std::make_shared<Process>();
    process->store = std::move(store).value();
    auto shard = datacenter::Shard::Create(spec_, options_, process->store.get());
    if (!shard.ok()) return shard.status();
    process->shard = std::move(shard).value();
    std::lock_guard<std::mutex> lock(mu_);
    live_ = std::move(process);
    return Status::Ok();
  }

  // Crashes the shard: new calls fail with Unavailable, and calls still in
  // it lose their replies (Unavailable, whatever they did). Once they are
  // out it closes the shard and starts it again from its directory.
  Status Restart() {
    std::shared_ptr<Process> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = std::move(live_);
    }
    old->dead = true;
    while (old.use_count() > 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    old.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // down for a moment
    return Start();
  }

  // Runs fn(shard) on the live shard, or Unavailable while it is down.
  template <typename Fn>
  auto Call(Fn&& fn) -> decltype(fn(std::declval<datacenter::Shard*>())) {
    std::shared_ptr<Process> p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      p = live_;
    }
    if (p == nullptr) return UnavailableError("connection refused: the shard is restarting");
    auto reply = fn(p->shard.get());
    if (p->dead) return UnavailableError("connection reset: the shard crashed before it answered");
    return reply;
  }

 private:
  struct Process {
    std::unique_ptr<ShardStore> store;  // declared first: outlives the shard
    std::unique_ptr<datacenter::Shard> shard;
    std::atomic<bool> dead{false};
  };
  const ModelSpec spec_;
  const ShardOptions options_;
  const std::string dir_;
  std::mutex mu_;
  std::shared_ptr<Process> live_;  // GUARDED_BY(mu_); null while down
};

class SlotConnection : public worker::ShardConnection {
 public:
  using worker::ShardConnection::Update;
  explicit SlotConnection(ShardSlot* slot) : slot_(slot) {}
  Result<RegisterReply> Register(WorkerId w, uint64_t fp, const std::string& token,
                                 const WorkerSession& session = {}) override {
    return slot_->Call([&](datacenter::Shard* s) { return s->RegisterWorker(w, fp, token, session); });
  }
  Result<ReadReply> Read(WorkerId w, Clock c, int64_t st, std::span<const ChunkKey> keys, float* out,
                         int64_t deadline_ms) override {
    return slot_->Call([&](datacenter::Shard* s) { return s->Read(w, c, st, keys, out, Deadline::InMs(deadline_ms)); });
  }
  Result<UpdateReply> Update(WorkerId w, Clock c, std::span<const ChunkKey> keys,
                             std::span<const float> values, int32_t part) override {
    return slot_->Call([&](datacenter::Shard* s) { return s->Update(w, c, keys, values, part); });
  }
  Result<Clock> AdvanceClock(WorkerId w, Clock c, bool finished) override {
    return slot_->Call([&](datacenter::Shard* s) { return s->AdvanceClock(w, c, finished); });
  }
  Status Heartbeat(WorkerId w, uint64_t session = 0) override {
    return slot_->Call([&](datacenter::Shard* s) { return s->Heartbeat(w, session); });
  }
  Result<ShardStatus> GetStatus() override {
    return slot_->Call([&](datacenter::Shard* s) -> Result<ShardStatus> { return s->GetStatus(); });
  }
  Result<SchemaReply> RegisterSchema(WorkerId, const ModelSpec&, const std::string&) override {
    return UnimplementedError("the in-process test connection serves built-in models only");
  }
  Result<int64_t> InitValues(WorkerId, uint64_t, std::span<const ChunkKey>, std::span<const float>,
                             const std::string&) override {
    return UnimplementedError("the in-process test connection serves built-in models only");
  }
  worker::TransferStats stats() const override { return {}; }

 private:
  ShardSlot* slot_;
};

class SlotFactory : public worker::ShardConnectionFactory {
 public:
  explicit SlotFactory(std::vector<ShardSlot*> slots) : slots_(std::move(slots)) {}
  Result<std::unique_ptr<worker::ShardConnection>> Connect(ShardId s) override {
    return std::unique_ptr<worker::ShardConnection>(new SlotConnection(slots_[s]));
  }

 private:
  std::vector<ShardSlot*> slots_;
};

TEST(ClientRestartTest, WorkersResumeAtThePersistedClockAndTheCounterIsExact) {
  TempDir tmp;
  const ModelSpec spec = *ModelSpec::Create({{"a", 40, 16}, {"b", 1, 7}, {"c", 9, 33}}, 256);
  constexpr int kShards = 2;
  constexpr int kWorkers = 2;
  constexpr int kClocks = 60;
  std::vector<std::unique_ptr<ShardSlot>> slots;
  for (ShardId s = 0; s < kShards; ++s) {
    ShardOptions o;
    o.shard_id = s;
    o.num_shards = kShards;
    o.num_workers = kWorkers;
    slots.push_back(std::make_unique<ShardSlot>(spec, o, tmp.Sub("shard-" + std::to_string(s))));
    ASSERT_TRUE(slots.back()->Start().ok());
  }
  SlotFactory factory({slots[0].get(), slots[1].get()});
  std::vector<std::unique_ptr<worker::PsClient>> clients;
  for (WorkerId w = 0; w < kWorkers; ++w) {
    WorkerClientOptions o;
    o.worker_id = w;
    o.staleness = kAsync;  // reads never wait, so a crash never strands one
    o.rpc_timeout_ms = 5000;
    o.max_attempts = 10;
    o.retry_backoff_ms = 5;
    o.heartbeat_ms = 50;
    auto c = worker::PsClient::Create(spec, kShards, o, &factory);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE((*c)->Start().ok());
    clients.push_back(std::move(c).value());
  }
  std::atomic<int> progress{0};
  std::atomic<int> stopped{0};
  std::vector<std::thread> threads;
  for (WorkerId w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      struct Stopped {
        std::atomic<int>* n;
        ~Stopped() { n->fetch_add(1); }
      } stopped_guard{&stopped};
      worker::PsClient* c = clients[w].get();
      for (int k = 0; k < kClocks; ++k) {
        ASSERT_TRUE(c->Refresh().ok()) << "worker " << w << " clock " << k;
        for (TableId t = 0; t < static_cast<TableId>(spec.num_tables()); ++t) {
          std::fill(c->delta(t), c->delta(t) + spec.table(t).rows * spec.table(t).cols, 1.0f);
        }
        c->MarkAllDirty();
        Status s = c->Clock(k + 1 == kClocks);
        ASSERT_TRUE(s.ok()) << "worker " << w << " clock " << k << ": " << s.ToString();
        progress.fetch_add(1);
      }
    });
  }
  for (int restart = 1; restart <= 3; ++restart) {  // while the workers run
    while (progress.load() < restart * kClocks * kWorkers / 4 && stopped.load() < kWorkers) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Status restarted = slots[restart % kShards]->Restart();
    EXPECT_TRUE(restarted.ok()) << restarted.ToString();
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(clients[0]->ReadAt(kClocks, 0).ok());
  double max_error = 0;
  for (TableId t = 0; t < static_cast<TableId>(spec.num_tables()); ++t) {
    for (int64_t i = 0; i < spec.table(t).rows * spec.table(t).cols; ++i) {
      max_error = std::max<double>(max_error, std::abs(clients[0]->table(t)[i] - kWorkers * kClocks));
    }
  }
  EXPECT_EQ(max_error, 0.0);
  EXPECT_GT(clients[0]->stats().retries + clients[1]->stats().retries, 0) << "the restarts went unnoticed";
}

}  // namespace
}  // namespace geops::storage
