// SSP semantics of the Shard under concurrency: bounded staleness of every
// read, atomic chunk updates, exactly-once batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "datacenter/shard.h"
#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using testing::ElementsOf;
using testing::MakeShard;
using testing::SameBytes;
using testing::SnapshotOf;
using testing::TestModel;
using testing::TestOptions;

constexpr int kWorkers = 4;
constexpr Clock kClocks = 24;

// Counter workload: each of kWorkers threads, at every clock c, reads every
// chunk at (c, s), adds +1 to every element and advances to c + 1, with
// random jitter. All values start at 0, so a value counts the (worker, clock)
// batches it includes. SSP says, for a read by worker w at clock c:
//  - the shard clock is >= c - s, so every worker's batches for clocks
//    0..c-s-1 are in: v >= kWorkers * (c - s);
//  - w holds the shard clock at <= c, so no other worker can pass its read
//    at a clock above c + s: v <= c + (kWorkers - 1) * (c + s + 1).
// A chunk is updated under one lock, so all its elements are always equal.
// Without read gating, a worker racing ahead sees values below the lower
// bound (and shard clocks below c - s) within a few clocks, so this fails.
// Returns the first violation seen, or "" if none.
std::string RunCounterWorkload(int64_t staleness, uint32_t seed) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  std::unique_ptr<Shard> shard = MakeShard(spec, TestOptions(kWorkers));
  if (shard == nullptr) return "no shard";
  const std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  const int64_t n = ElementsOf(spec, keys);
  const std::vector<float> ones(n, 1.0f);

  std::vector<std::string> errors(kWorkers);
  std::vector<std::thread> threads;
  for (WorkerId w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      std::string& error = errors[w];
      std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(w));
      std::uniform_int_distribution<int> jitter_us(0, 300);
      std::bernoulli_distribution long_pause(0.05);
      std::vector<float> buf(n);
      if (Result<RegisterReply> r = shard->RegisterWorker(w, spec.Fingerprint(), ""); !r.ok()) {
        error = r.status().ToString();
        return;
      }
      for (Clock c = 0; c < kClocks && error.empty(); ++c) {
        std::this_thread::sleep_for(std::chrono::microseconds(
            long_pause(rng) ? 2000 : jitter_us(rng)));
        Result<ReadReply> read = shard->Read(w, c, staleness, keys, buf.data(), Deadline::InMs(10000));
        if (!read.ok()) {
          error = "read: " + read.status().ToString();
          break;
        }
        const Clock needed = c - staleness;
        if (read->shard_clock < needed) {
          error = "worker " + std::to_string(w) + " at clock " + std::to_string(c) +
                  " served at shard clock " + std::to_string(read->shard_clock);
          break;
        }
        const float lower = static_cast<float>(kWorkers * std::max<Clock>(0, needed));
        const float upper = static_cast<float>(c + (kWorkers - 1) * (c + staleness + 1));
        int64_t offset = 0;
        for (const ChunkKey& key : keys) {
          const int64_t len = spec.ChunkElements(key);
          const float first = buf[offset];
          for (int64_t i = 0; i < len && error.empty(); ++i) {
            const float v = buf[offset + i];
            if (v != first) {
              error = "torn chunk: element " + std::to_string(i) + " is " + std::to_string(v) +
                      ", element 0 is " + std::to_string(first);
            } else if (v < lower || v > upper) {
              error = "worker " + std::to_string(w) + " at clock " + std::to_string(c) +
                      " read " + std::to_string(v) + ", outside [" + std::to_string(lower) +
                      ", " + std::to_string(upper) + "]";
            }
          }
          offset += len;
        }
        Result<UpdateReply> up = shard->Update(w, c, keys, ones);
        if (!up.ok() || !up->applied) {
          error = "update: " + (up.ok() ? std::string("not applied") : up.status().ToString());
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(jitter_us(rng) / 4));
        if (Result<Clock> adv = shard->AdvanceClock(w, c + 1, c + 1 == kClocks); !adv.ok()) {
          error = "advance: " + adv.status().ToString();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) return e;
  }
  for (const auto& [key, values] : SnapshotOf(*shard)) {
    for (float v : values) {
      if (v != static_cast<float>(kWorkers * kClocks)) {
        return "final value " + std::to_string(v) + " != " + std::to_string(kWorkers * kClocks);
      }
    }
  }
  const ShardStatus st = shard->GetStatus();
  if (st.shard_clock != kClocks) return "final shard clock " + std::to_string(st.shard_clock);
  if (st.update_batches_applied != kWorkers * kClocks) return "batches applied mismatch";
  if (st.reads_served != kWorkers * kClocks) return "reads served mismatch";
  return "";
}

TEST(ShardSspTest, NeverServesValuesStalerThanBound) {
  for (int64_t staleness : {0, 1, 3}) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      EXPECT_EQ(RunCounterWorkload(staleness, seed), "")
          << "staleness " << staleness << ", seed " << seed;
    }
  }
}

TEST(ShardSspTest, AsyncReadNeverWaits) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const std::vector<ChunkKey> keys = {{0, 0}};
  std::vector<float> buf(64);
  // Worker 1 never registered and holds the clock at 0 for 10 s.
  Result<ReadReply> r = shard->Read(0, 100, kAsync, keys, buf.data(), Deadline::InMs(0));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shard_clock, 0);
  // A satisfied bound is served even with a deadline already passed.
  r = shard->Read(0, 3, 3, keys, buf.data(), Deadline::InMs(0));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

// A chunk named twice would let a small request ask for a huge reply (one
// chunk named 262,144 times); an empty update batch would take the clock's
// slot of the worker's real batch, which would then be dropped as a duplicate.
TEST(ShardSspTest, RefusesAReadNamingAChunkTwiceAndAnEmptyUpdate) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(1, 2, 1));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const testing::ShardSnapshot snap = SnapshotOf(*shard);
  std::vector<ChunkKey> keys = {snap.front().first, snap.back().first, snap.front().first};
  std::vector<float> buf(ElementsOf(spec, keys), -1.0f);
  auto r = shard->Read(0, 0, 0, keys, buf.data(), Deadline::InMs(1000));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("appears more than once"), std::string::npos) << r.status().ToString();

  auto empty = shard->Update(0, 0, {}, {});
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("names no chunks"), std::string::npos) << empty.status().ToString();
  // The worker's real batch for clock 0 is still applied.
  std::vector<ChunkKey> one = {snap.front().first};
  std::vector<float> delta(ElementsOf(spec, one), 1.0f);
  auto real = shard->Update(0, 0, one, delta);
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  EXPECT_TRUE(real->applied);
}

TEST(ShardSspTest, ReadCopiesChunksInRequestOrder) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(1, 2, 1));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const testing::ShardSnapshot snap = SnapshotOf(*shard);
  std::vector<ChunkKey> keys;
  for (auto it = snap.rbegin(); it != snap.rend(); ++it) keys.push_back(it->first);
  std::vector<float> buf(ElementsOf(spec, keys), -1.0f);
  ASSERT_TRUE(shard->Read(0, 0, 0, keys, buf.data(), Deadline::InMs(1000)).ok());
  size_t offset = 0;
  for (const ChunkKey& key : keys) {
    const auto& expected = std::find_if(snap.begin(), snap.end(), [&](const auto& e) { return e.first == key; })->second;
    ASSERT_TRUE(std::equal(expected.begin(), expected.end(), buf.begin() + offset))
        << "table " << key.table << " chunk " << key.chunk;
    offset += expected.size();
  }
  EXPECT_EQ(offset, buf.size());
  const ShardStatus st = shard->GetStatus();
  EXPECT_EQ(st.reads_served, 1);
  EXPECT_EQ(st.read_bytes_served, static_cast<int64_t>(buf.size() * sizeof(float)));
}

TEST(ShardExactlyOnceTest, SecondBatchAtSameClockIsDuplicate) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(1, 2, 0));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const std::vector<ChunkKey> keys = {{0, 0}, {0, 2}};
  const std::vector<float> delta(96, 0.5f);
  const testing::ShardSnapshot before = SnapshotOf(*shard);
  Result<UpdateReply> first = shard->Update(0, 0, keys, delta);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->applied);
  const testing::ShardSnapshot after_first = SnapshotOf(*shard);
  EXPECT_FALSE(SameBytes(before, after_first));
  EXPECT_FLOAT_EQ(after_first[0].second[3], before[0].second[3] + 0.5f);

  Result<UpdateReply> again = shard->Update(0, 0, keys, delta);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->applied);
  EXPECT_TRUE(SameBytes(after_first, SnapshotOf(*shard)));
  const ShardStatus st = shard->GetStatus();
  EXPECT_EQ(st.update_batches_applied, 1);
  EXPECT_EQ(st.update_batches_duplicate, 1);
  EXPECT_EQ(st.update_bytes_applied, 96 * 4);
  EXPECT_EQ(st.requests_rejected, 0);
}

TEST(ShardExactlyOnceTest, AdvanceClockRetryIsNoOp) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(1));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const std::vector<ChunkKey> keys = {{1, 0}};
  const std::vector<float> delta(5, 1.0f);
  ASSERT_TRUE(shard->Update(0, 0, keys, delta).ok());
  Result<Clock> c = shard->AdvanceClock(0, 1, false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 1);
  const testing::ShardSnapshot snap = SnapshotOf(*shard);
  for (Clock retry : {1, 0}) {
    c = shard->AdvanceClock(0, retry, false);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(*c, 1);
  }
  EXPECT_EQ(shard->GetStatus().workers[0].clock, 1);
  // The clock-0 batch arriving late (a retry) changes nothing.
  Result<UpdateReply> late = shard->Update(0, 0, keys, delta);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->applied);
  EXPECT_TRUE(SameBytes(snap, SnapshotOf(*shard)));
}

TEST(ShardExactlyOnceTest, ConcurrentRetriesApplyOnce) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  auto shard = MakeShard(spec, TestOptions(2));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  const std::vector<float> ones(ElementsOf(spec, keys), 1.0f);
  std::atomic<int> applied{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      Result<UpdateReply> r = shard->Update(0, 0, keys, ones);
      if (!r.ok()) ++failed;
      else if (r->applied) ++applied;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(applied.load(), 1);
  for (const auto& [key, values] : SnapshotOf(*shard)) {
    for (float v : values) ASSERT_EQ(v, 1.0f);
  }
}

TEST(ShardExactlyOnceTest, RetryAfterReRegistrationIsStillDuplicate) {
  const ModelSpec spec = TestModel();
  auto shard = MakeShard(spec, TestOptions(1));
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const std::vector<ChunkKey> keys = {{1, 0}};
  const std::vector<float> delta(5, 1.0f);
  ASSERT_TRUE(shard->Update(0, 0, keys, delta)->applied);
  Result<RegisterReply> again = shard->RegisterWorker(0, 0, "");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->worker_clock, 0);
  Result<UpdateReply> retry = shard->Update(0, 0, keys, delta);
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(retry->applied);
}

TEST(ShardConcurrencyTest, ConcurrentBatchesOnSharedChunksSumExactly) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  constexpr int kThreads = 4;
  constexpr Clock kRounds = 50;
  auto shard = MakeShard(spec, TestOptions(kThreads));
  const std::vector<ChunkKey> all = spec.ChunksOfShard(0, 1);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (WorkerId w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      if (!shard->RegisterWorker(w, 0, "").ok()) ++errors;
      // Each worker pushes to every chunk, starting at a different one.
      std::vector<ChunkKey> keys;
      for (size_t i = 0; i < all.size(); ++i) keys.push_back(all[(i + w * 5) % all.size()]);
      const std::vector<float> delta(ElementsOf(spec, keys), 0.25f);
      for (Clock c = 0; c < kRounds; ++c) {
        Result<UpdateReply> r = shard->Update(w, c, keys, delta);
        if (!r.ok() || !r->applied) ++errors;
        if (!shard->AdvanceClock(w, c + 1, false).ok()) ++errors;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  for (const auto& [key, values] : SnapshotOf(*shard)) {
    for (float v : values) ASSERT_EQ(v, 0.25f * kThreads * kRounds);
  }
}

}  // namespace
}  // namespace geops::datacenter
