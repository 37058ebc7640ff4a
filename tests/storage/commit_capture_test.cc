// A commit holds the state of its capture: the capture marks chunks and the
// store reads them live as it writes them (datacenter/captured_chunks.h),
// so an update applied while a commit waits to be written must not reach it.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "datacenter/shard.h"
#include "tests/datacenter/shard_test_util.h"
#include "tests/storage/memory_shard_store.h"
#include "tests/storage/persistence_test_util.h"

namespace geops::storage {
namespace {

using datacenter::testing::TestModel;
using datacenter::testing::TestOptions;
using testing::Keys;
using testing::MakeShard;
using testing::MemoryShardStore;
using testing::Ramp;
using testing::WaitFor;

// A MemoryShardStore whose commits wait at a gate and that keeps the chunk
// values each commit wrote.
class GatedValueLog : public MemoryShardStore {
 public:
  using MemoryShardStore::MemoryShardStore;
  Status Commit(const ShardCommit& commit) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      cv_.wait(lock, [this] { return open_; });
      --waiting_;
    }
    std::map<ChunkKey, std::vector<float>> written;
    EXPECT_TRUE(commit
                    .ForEachChunk([&](ChunkKey key, std::span<const float> v) {
                      written[key].assign(v.begin(), v.end());
                      return Status::Ok();
                    })
                    .ok());
    Status s = MemoryShardStore::Commit(commit);
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(std::move(written));
    return s;
  }
  void SetOpen(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  std::vector<std::map<ChunkKey, std::vector<float>>> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int waiting_ = 0;
  std::vector<std::map<ChunkKey, std::vector<float>>> log_;
};

TEST(CommitCaptureTest, ACommitHoldsItsCaptureNotUpdatesAppliedWhileItIsWritten) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(2);
  const std::vector<ChunkKey> keys = Keys(spec, o);
  GatedValueLog store(StoreFingerprint::Of(spec, o), Durability::kSync);
  auto shard = MakeShard(spec, o, &store);
  for (WorkerId w = 0; w < 2; ++w) ASSERT_TRUE(shard->RegisterWorker(w, 0, "").ok());
  const size_t first = store.log().size();
  store.SetOpen(false);
  std::thread a([&] { EXPECT_TRUE(shard->Update(0, 0, keys, Ramp(spec, keys, 1.0f)).ok()); });
  ASSERT_TRUE(WaitFor([&] { return store.waiting() == 1; }));  // captured, not yet written
  std::thread b([&] { EXPECT_TRUE(shard->Update(1, 0, keys, Ramp(spec, keys, 10.0f)).ok()); });
  ASSERT_TRUE(WaitFor([&] { return shard->GetStatus().update_batches_applied == 2; }));
  store.SetOpen(true);
  a.join();
  b.join();
  const auto log = store.log();
  ASSERT_GE(log.size(), first + 2);
  const std::vector<float> one = Ramp(spec, keys, 1.0f);
  const std::vector<float> eleven = Ramp(spec, keys, 11.0f);
  size_t offset = 0;
  for (const ChunkKey key : keys) {
    const size_t n = static_cast<size_t>(spec.ChunkElements(key));
    ASSERT_TRUE(log[first].contains(key));
    EXPECT_EQ(log[first].at(key), std::vector<float>(one.begin() + offset, one.begin() + offset + n))
        << "chunk " << key.table << "/" << key.chunk << ": worker 1's update leaked into worker 0's commit";
    ASSERT_TRUE(log.back().contains(key));
    EXPECT_EQ(log.back().at(key), std::vector<float>(eleven.begin() + offset, eleven.begin() + offset + n));
    offset += n;
  }
}

// The outer step of avg and diloco sets chunk values from inside
// RunDurable. Another caller's commit may start its capture meanwhile (it
// waits for every open scope to end); SetChunkValue must then join the open
// scope: a second scope would wait for that capture, which waits for the
// first scope, for ever (CTest's timeout would end this test). The values
// set commit with the scope.
TEST(CommitCaptureTest, AChunkValueSetInsideRunDurableJoinsItsScopeAndCommitsWithIt) {
  const ModelSpec spec = TestModel(InitKind::kZeros);
  const ShardOptions o = TestOptions(1);
  const std::vector<ChunkKey> keys = Keys(spec, o);
  ASSERT_GE(keys.size(), 2u);
  GatedValueLog store(StoreFingerprint::Of(spec, o), Durability::kSync);
  auto shard = MakeShard(spec, o, &store);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const ChunkKey key = keys[0];
  const std::vector<ChunkKey> others(keys.begin() + 1, keys.end());
  const std::vector<float> set(static_cast<size_t>(spec.ChunkElements(key)), 7.0f);
  const size_t first = store.log().size();
  std::thread updater;
  Status inside = Status::Ok();
  const Status durable = shard->RunDurable(
      [&] {
        // Its commit's capture waits for this scope.
        updater = std::thread([&] { EXPECT_TRUE(shard->Update(0, 0, others, Ramp(spec, others, 1.0f)).ok()); });
        ASSERT_TRUE(WaitFor([&] { return shard->GetStatus().update_batches_applied == 1; }));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the capture has begun
        inside = shard->SetChunkValue(key, set);
      },
      Deadline::InMs(10000));
  updater.join();
  ASSERT_TRUE(inside.ok()) << inside.ToString();
  ASSERT_TRUE(durable.ok()) << durable.ToString();
  bool written = false;
  const auto log = store.log();
  for (size_t i = first; i < log.size(); ++i) written = written || (log[i].contains(key) && log[i].at(key) == set);
  EXPECT_TRUE(written) << "no commit after the scope holds the value it set";
}

}  // namespace
}  // namespace geops::storage
