#include "worker/ps_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>

#include <thread>

#include "common/replication.h"
#include "common/time_source.h"
#include "tests/worker/local_connection.h"

namespace geops::worker {
namespace {

// A small site: `shards` shards of a 3-table model, `workers` workers.
class Site {
 public:
  Site(int shards, int workers, int64_t lease_ms = 10000) {
    spec_ = *ModelSpec::Create({{"a", 40, 16}, {"b", 1, 7}, {"c", 9, 33}}, 256);
    for (int s = 0; s < shards; ++s) {
      ShardOptions o;
      o.shard_id = s;
      o.num_shards = shards;
      o.num_workers = workers;
      o.worker_lease_ms = lease_ms;
      auto shard = datacenter::Shard::Create(spec_, o);
      EXPECT_TRUE(shard.ok()) << shard.status().ToString();
      shards_.push_back(std::move(shard).value());
      raw_.push_back(shards_.back().get());
    }
  }
  const ModelSpec& spec() const { return spec_; }
  std::vector<datacenter::Shard*> shards() const { return raw_; }

  // `tweak` changes the options before the client is made.
  std::unique_ptr<PsClient> Client(WorkerId w, int64_t staleness, ShardConnectionFactory* f,
                                   const std::function<void(WorkerClientOptions&)>& tweak = nullptr) {
    WorkerClientOptions o;
    o.worker_id = w;
    o.staleness = staleness;
    o.rpc_timeout_ms = 5000;
    o.retry_backoff_ms = 1;
    o.max_backoff_ms = 10;
    o.retry_window_ms = 2000;
    o.heartbeat_ms = 50;
    if (tweak) tweak(o);
    auto c = PsClient::Create(spec_, static_cast<int>(raw_.size()), o, f);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_TRUE((*c)->Start().ok());
    return std::move(c).value();
  }

 private:
  ModelSpec spec_;
  std::vector<std::unique_ptr<datacenter::Shard>> shards_;
  std::vector<datacenter::Shard*> raw_;
};

void AddOneEverywhere(PsClient* c) {
  for (TableId t = 0; t < static_cast<TableId>(c->spec().num_tables()); ++t) {
    const auto& ts = c->spec().table(t);
    std::fill(c->delta(t), c->delta(t) + ts.rows * ts.cols, 1.0f);
  }
  c->MarkAllDirty();
}

double MaxAbsError(PsClient* c, double expected) {
  double err = 0;
  for (TableId t = 0; t < static_cast<TableId>(c->spec().num_tables()); ++t) {
    const auto& ts = c->spec().table(t);
    for (int64_t i = 0; i < ts.rows * ts.cols; ++i) err = std::max(err, std::abs(c->table(t)[i] - expected));
  }
  return err;
}

TEST(PsClientTest, ReadsInitialValuesFromEveryShard) {
  Site site(3, 1);
  LocalConnectionFactory f(site.shards());
  auto c = site.Client(0, 0, &f);
  ASSERT_TRUE(c->Refresh().ok());
  EXPECT_EQ(c->cache_stamp(), 0);
  EXPECT_EQ(MaxAbsError(c.get(), 0.0), 0.0);  // zero-initialised tables
}

TEST(PsClientTest, CounterIsExactAcrossShardsAndWorkers) {
  Site site(2, 3);
  LocalConnectionFactory f(site.shards());
  const int clocks = 20;
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < 3; ++w) clients.push_back(site.Client(w, 1, &f));
  for (int w = 0; w < 3; ++w) {
    threads.emplace_back([&, w] {
      for (int c = 0; c < clocks; ++c) {
        ASSERT_TRUE(clients[w]->Refresh().ok());
        AddOneEverywhere(clients[w].get());
        ASSERT_TRUE(clients[w]->Clock(c + 1 == clocks).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(clients[0]->ReadAt(clocks, 0).ok());
  EXPECT_EQ(MaxAbsError(clients[0].get(), 3.0 * clocks), 0.0);
  for (auto& c : clients) EXPECT_LE(c->stats().max_staleness, 1);
}

TEST(PsClientTest, ResumesAtTheLowestClockWhenShardsDisagree) {
  // The worker died between ending clock 5 on shard 1 and on shard 0: shard
  // 1 holds clock 6 (with clock 5's update), shard 0 still clock 5. A new
  // client resumes at 5; shard 1 takes the repeated clock as a duplicate.
  Site site(2, 1);
  LocalConnectionFactory f(site.shards());
  const int clocks = 10;
  {
    auto c = site.Client(0, 0, &f);
    for (int k = 0; k < 5; ++k) {
      ASSERT_TRUE(c->Refresh().ok());
      AddOneEverywhere(c.get());
      ASSERT_TRUE(c->Clock().ok());
    }
  }
  datacenter::Shard* one = site.shards()[1];
  const std::vector<ChunkKey> keys = site.spec().ChunksOfShard(1, 2);
  int64_t n = 0;
  for (const ChunkKey& k : keys) n += site.spec().ChunkElements(k);
  ASSERT_TRUE(one->Update(0, 5, keys, std::vector<float>(static_cast<size_t>(n), 1.0f)).ok());
  ASSERT_TRUE(one->AdvanceClock(0, 6, false).ok());
  auto c = site.Client(0, 0, &f);
  EXPECT_EQ(c->clock(), 5);
  for (int k = 5; k < clocks; ++k) {
    ASSERT_TRUE(c->Refresh().ok());
    AddOneEverywhere(c.get());
    ASSERT_TRUE(c->Clock(k + 1 == clocks).ok());
  }
  ASSERT_TRUE(c->ReadAt(clocks, 0).ok());
  EXPECT_EQ(MaxAbsError(c.get(), 1.0 * clocks), 0.0);
}

TEST(PsClientTest, CacheServesReadsWithinTheBoundWithoutAsking) {
  Site site(1, 1);
  LocalConnectionFactory f(site.shards());
  auto c = site.Client(0, 3, &f);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(c->Refresh().ok());
    ASSERT_TRUE(c->Clock().ok());
  }
  // Refreshes at clocks 0 and 4 only (the stamp must be >= clock - 3).
  EXPECT_EQ(c->stats().refreshes, 2);
  EXPECT_EQ(c->stats().cache_hits, 6);
  EXPECT_EQ(c->stats().max_staleness, 3);
}

TEST(PsClientTest, SeesItsOwnUpdatesBeforeTheyAreRead) {
  Site site(1, 1);
  LocalConnectionFactory f(site.shards());
  auto c = site.Client(0, 5, &f);
  ASSERT_TRUE(c->Refresh().ok());
  std::vector<float> v(16, 2.5f);
  ASSERT_TRUE(c->Update(0, 16, v).ok());
  ASSERT_TRUE(c->Clock().ok());
  ASSERT_TRUE(c->Refresh().ok());  // from cache
  EXPECT_EQ(c->table(0)[16], 2.5f);
  EXPECT_EQ(c->table(0)[15], 0.0f);
  ASSERT_TRUE(c->ReadAt(1, 0).ok());  // from the shard
  EXPECT_EQ(c->table(0)[16], 2.5f);
  EXPECT_EQ(c->table(0)[32], 0.0f);
}

TEST(PsClientTest, UpdateOutsideTheTableIsRefused) {
  Site site(1, 1);
  LocalConnectionFactory f(site.shards());
  auto c = site.Client(0, 0, &f);
  std::vector<float> v(8, 1.0f);
  EXPECT_EQ(c->Update(1, 0, v).code(), StatusCode::kInvalidArgument);  // table b has 7
  EXPECT_EQ(c->Update(9, 0, v).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Update(0, -1, v).code(), StatusCode::kInvalidArgument);
}

TEST(PsClientTest, RetriesUnavailableAndLostRepliesApplyOnce) {
  Site site(2, 1);
  FaultPlan faults;
  LocalConnectionFactory f(site.shards(), &faults);
  auto c = site.Client(0, 0, &f);
  const int clocks = 10;
  for (int i = 0; i < clocks; ++i) {
    faults.fail_before = i % 3;   // some calls never arrive
    faults.lose_reply = i % 2;    // some arrive but their reply is lost
    ASSERT_TRUE(c->Refresh().ok());
    AddOneEverywhere(c.get());
    ASSERT_TRUE(c->Clock().ok());
  }
  faults.fail_before = 0;
  faults.lose_reply = 0;
  ASSERT_TRUE(c->ReadAt(clocks, 0).ok());
  EXPECT_EQ(MaxAbsError(c.get(), clocks), 0.0);
  EXPECT_GT(c->stats().retries, 0);
}

// A clock's last update part carries the clock advance: one call per shard.
// A shard that predates that answers without `clocked`, and the client then
// advances the clock with a call of its own; a clock with nothing to send is
// a bare clock call.
TEST(PsClientTest, AClockIsOneCallPerShardUnlessTheShardCannotClockWithTheUpdate) {
  Site site(2, 1);
  FaultPlan faults;
  LocalConnectionFactory f(site.shards(), &faults);
  auto c = site.Client(0, 0, &f);
  auto clock_calls = [&](bool add) {
    EXPECT_TRUE(c->Refresh().ok());
    if (add) AddOneEverywhere(c.get());
    const int64_t calls = faults.calls.load(), clocks = faults.clock_calls.load();
    EXPECT_TRUE(c->Clock().ok());
    return std::pair<int64_t, int64_t>{faults.calls.load() - calls, faults.clock_calls.load() - clocks};
  };
  EXPECT_EQ(clock_calls(true), (std::pair<int64_t, int64_t>{2, 0}));
  faults.predates_then_clock = true;
  EXPECT_EQ(clock_calls(true), (std::pair<int64_t, int64_t>{4, 2}));
  faults.predates_then_clock = false;
  EXPECT_EQ(clock_calls(false), (std::pair<int64_t, int64_t>{2, 2}));
  for (datacenter::Shard* shard : site.shards()) EXPECT_EQ(shard->GetStatus().shard_clock, 3);
  ASSERT_TRUE(c->ReadAt(3, 0).ok());
  EXPECT_EQ(MaxAbsError(c.get(), 2.0), 0.0);
}

// A shard's share larger than one request: reads and updates go in bounded
// requests (update parts), and lost replies still apply each part once.
TEST(PsClientTest, LargeShardsTravelInBoundedPartsExactlyOnce) {
  const ModelSpec spec = *ModelSpec::Create({{"big", 3000, 1000}, {"small", 3, 5}}, 1 << 20);
  ShardOptions o;
  o.num_workers = 1;
  auto shard = datacenter::Shard::Create(spec, o);
  ASSERT_TRUE(shard.ok()) << shard.status().ToString();
  FaultPlan faults;
  LocalConnectionFactory f({shard->get()}, &faults);
  WorkerClientOptions co;
  co.rpc_timeout_ms = 5000;
  co.retry_backoff_ms = 1;
  co.max_backoff_ms = 10;
  co.retry_window_ms = 2000;
  auto c = PsClient::Create(spec, 1, co, &f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->Start().ok());
  const int clocks = 4;
  for (int i = 0; i < clocks; ++i) {
    ASSERT_TRUE((*c)->Refresh().ok());
    AddOneEverywhere(c->get());
    faults.lose_reply = i % 2;  // part 0 arrives, its reply is lost: the retry is a duplicate
    ASSERT_TRUE((*c)->Clock().ok());
  }
  faults.lose_reply = 0;
  ASSERT_TRUE((*c)->ReadAt(clocks, 0).ok());
  EXPECT_EQ(MaxAbsError(c->get(), clocks), 0.0);
  const ShardStatus st = (*shard)->GetStatus();
  // 12 MB a clock in parts of at most 8 MiB: two parts per clock.
  EXPECT_EQ(st.update_batches_applied, 2 * clocks);
  EXPECT_GE(st.update_batches_duplicate, 1);
}

// Runs `call` on a thread and moves `time` forward by `step` each time the
// client waits, until the call returns. The client tries the shard once
// after each wait, so a step is taken once `attempts` (the connection's call
// count) has moved since the last one. Returns the call's status; the manual
// time that passed, what the call waited, goes to *waited_seconds.
Status DriveManualTime(ManualTime* time, std::chrono::milliseconds step, const std::atomic<int64_t>& attempts,
                       const std::function<Status()>& call, double* waited_seconds) {
  const auto start = time->Now();
  const int64_t first = attempts.load();
  std::future<Status> done = std::async(std::launch::async, call);
  auto finished = [&] { return done.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready; };
  int64_t seen = first;  // steps are taken only after the first attempt
  // Bounded: at most 200 steps per test below, each within milliseconds.
  for (int i = 0; i < 200000 && !finished(); ++i) {
    if (time->waiters() > 0 && attempts.load() > seen) {
      seen = attempts.load();
      time->Advance(step);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  Status st = done.get();
  *waited_seconds = std::chrono::duration<double>(time->Now() - start).count();
  return st;
}

// Options for the manual-time tests: a fixed back-off of `backoff_ms`, so
// that every wait ends on a multiple of it.
std::function<void(WorkerClientOptions&)> OnManualTime(const TimeSource* time, int64_t backoff_ms,
                                                       int64_t window_ms) {
  return [=](WorkerClientOptions& o) {
    o.time = time;
    o.retry_backoff_ms = o.max_backoff_ms = backoff_ms;
    o.retry_window_ms = window_ms;
  };
}

TEST(PsClientTest, WaitsOutAShardUnavailableWithinTheRetryWindow) {
  Site site(1, 1);
  FaultPlan faults;
  LocalConnectionFactory f(site.shards(), &faults);
  ManualTime time;
  auto c = site.Client(0, 0, &f, OnManualTime(&time, 10, 2000));
  int notes = 0;
  c->set_wait_callback([&notes](ShardId, int64_t, const Status&) { ++notes; });
  faults.fail_before = 60;  // 60 refusals, 10 ms apart
  double waited = 0;
  EXPECT_TRUE(DriveManualTime(&time, std::chrono::milliseconds(10), faults.calls, [&] { return c->Refresh(); }, &waited).ok());
  EXPECT_EQ(c->stats().retries, 60);
  EXPECT_NEAR(waited, 0.600, 1e-9);
  EXPECT_EQ(notes, 0);  // under kWaitNoteMs: nothing to report
}

// The window is manual time: the call gives up once 2 s of it have passed
// (not a back-off step later), and says it waits every kWaitNoteMs.
TEST(PsClientTest, GivesUpAfterTheRetryWindowWithTheLastError) {
  Site site(1, 1);
  FaultPlan faults;
  LocalConnectionFactory f(site.shards(), &faults);
  ManualTime time;
  auto c = site.Client(0, 0, &f, OnManualTime(&time, 10, 2000));
  faults.fail_before = 100000;
  double waited = 0;
  Status st = DriveManualTime(&time, std::chrono::milliseconds(10), faults.calls, [&] { return c->Refresh(); }, &waited);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("attempts over"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("retry window 2 s"), std::string::npos) << st.message();
  EXPECT_NEAR(waited, 2.0, 1e-9);

  // A 12 s window: notes at 5 s and 10 s of waiting, then the end.
  faults.fail_before = 0;  // (it registers first)
  // The same worker id again: the first client is alive, so only a takeover gets it.
  auto patient = site.Client(0, 0, &f, [&time](WorkerClientOptions& o) {
    OnManualTime(&time, 100, 12000)(o);
    o.takeover = true;
  });
  std::vector<int64_t> notes;
  patient->set_wait_callback([&notes](ShardId, int64_t waited_ms, const Status&) { notes.push_back(waited_ms); });
  faults.fail_before = 100000;
  st = DriveManualTime(&time, std::chrono::milliseconds(100), faults.calls, [&] { return patient->Refresh(); }, &waited);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NEAR(waited, 12.0, 1e-9);
  EXPECT_EQ(notes, (std::vector<int64_t>{5000, 10000}));
  faults.fail_before = 0;
}

using ::testing::HasSubstr;

// A second live client as the same worker is refused (after asking again
// for held_id_wait_ms) naming the process that holds the id.
TEST(PsClientTest, ASecondLiveClientAsTheSameWorkerIsRefusedNamingTheHolder) {
  Site site(2, 2);
  LocalConnectionFactory f(site.shards());
  auto first = site.Client(0, 0, &f);
  std::unique_ptr<PsClient> twin;
  Status st = [&]() -> Status {
    WorkerClientOptions o;
    o.worker_id = 0;
    o.held_id_wait_ms = 300;
    GEOPS_ASSIGN_OR_RETURN(twin, PsClient::Create(site.spec(), 2, o, &f));
    return twin->Start();
  }();
  ASSERT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("worker 0 is already live at shard"));
  EXPECT_THAT(st.message(), HasSubstr("held by pid " + std::to_string(::getpid())));
  EXPECT_THAT(st.message(), HasSubstr("still refused after 0 s"));

  // A supervisor's takeover: the old client learns at its next heartbeat
  // that it was replaced, and every later call fails instead of acting as a
  // second copy of worker 0.
  WorkerClientOptions o;
  o.worker_id = 0;
  o.takeover = true;
  auto taken = PsClient::Create(site.spec(), 2, o, &f);
  ASSERT_TRUE(taken.ok());
  ASSERT_TRUE((*taken)->Start().ok());
  Status replaced;
  for (int i = 0; i < 200 && replaced.ok(); ++i) {  // heartbeats every 50 ms: bounded at 10 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    replaced = first->Clock();
  }
  ASSERT_EQ(replaced.code(), StatusCode::kFailedPrecondition) << replaced.ToString();
  EXPECT_THAT(replaced.message(), HasSubstr("this process was replaced"));
  EXPECT_TRUE((*taken)->Clock().ok());
}

// A sole worker's refreshes carry only what its peers changed
// (ShardConnection::ReadChanged); its cache stays equal to the shards'
// values bit for bit through its own updates, peers' sparse batches and
// read replies lost on the way, and reads whole from a connection without
// incremental reads.
TEST(PsClientTest, ASoleWorkersIncrementalReadsKeepItsCacheExact) {
  Site site(2, 1);
  FaultPlan faults;
  LocalConnectionFactory f(site.shards(), &faults);
  auto c = site.Client(0, 0, &f);
  const ModelSpec& spec = site.spec();
  auto cache_matches = [&] {
    for (datacenter::Shard* shard : site.shards()) {
      std::vector<std::pair<ChunkKey, std::vector<float>>> snap;
      shard->Snapshot(&snap);
      for (const auto& [key, values] : snap) {
        const float* cached = c->table(key.table) + spec.ChunkOffset(key);
        if (std::memcmp(cached, values.data(), values.size() * sizeof(float)) != 0) return false;
      }
    }
    return true;
  };
  std::vector<uint64_t> seq(2, 0);
  auto peer_batch = [&](int round) {
    for (ShardId s = 0; s < 2; ++s) {
      std::vector<std::vector<uint32_t>> idx;
      std::vector<std::vector<float>> val;
      std::vector<RemoteChunkDelta> deltas;
      const std::vector<ChunkKey> keys = spec.ChunksOfShard(s, 2);
      idx.reserve(keys.size());
      val.reserve(keys.size());
      for (const ChunkKey key : keys) {
        const uint32_t n = static_cast<uint32_t>(spec.ChunkElements(key));
        idx.push_back({static_cast<uint32_t>(round) % n, n - 1});
        if (idx.back()[0] == n - 1) idx.back().pop_back();
        val.emplace_back(idx.back().size(), 0.25f * static_cast<float>(round + 1));
        deltas.push_back(RemoteChunkDelta{key, n, idx.back(), val.back()});
      }
      Result<RemoteApplyResult> r = site.shards()[s]->ApplyRemote(1, ++seq[s], deltas);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  };
  int64_t whole_bytes = 0;
  for (const ChunkKey key : spec.ChunksOfShard(0, 2)) whole_bytes += spec.ChunkElements(key) * 4;
  for (const ChunkKey key : spec.ChunksOfShard(1, 2)) whole_bytes += spec.ChunkElements(key) * 4;
  for (int round = 0; round < 12; ++round) {
    faults.lose_reply = round % 4 == 1 ? 1 : 0;  // a refresh's reply lost: retried, whole
    ASSERT_TRUE(c->Refresh().ok());
    ASSERT_TRUE(cache_matches()) << "round " << round;
    AddOneEverywhere(c.get());
    ASSERT_TRUE(c->Clock().ok());
    peer_batch(round);
  }
  ASSERT_TRUE(c->Refresh().ok());
  EXPECT_TRUE(cache_matches());
  int64_t served = 0;
  for (datacenter::Shard* shard : site.shards()) served += shard->GetStatus().read_bytes_served;
  // 13 refreshes, 4 of them whole (the first, the lost reply and its retry
  // thrice); the rest carry a few elements per chunk.
  EXPECT_LT(served, 6 * whole_bytes);

  faults.run_past_the_end = true;  // a broken reply: refused whole, nothing copied
  peer_batch(12);
  const Status broken = c->ReadAt(c->clock(), 0);
  EXPECT_EQ(broken.code(), StatusCode::kInternal) << broken.ToString();
  EXPECT_NE(broken.message().find("do not fit"), std::string::npos) << broken.message();
  faults.run_past_the_end = false;
  ASSERT_TRUE(c->ReadAt(c->clock(), 0).ok());  // everything again, after the refused reply
  EXPECT_TRUE(cache_matches());

  faults.whole_reads_only = true;  // a shard that predates readChanged
  peer_batch(13);
  ASSERT_TRUE(c->ReadAt(c->clock(), 0).ok());  // (a Refresh at this clock is served from the cache)
  EXPECT_TRUE(cache_matches());
}

}  // namespace
}  // namespace geops::worker
