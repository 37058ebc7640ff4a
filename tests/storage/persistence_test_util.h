// Helpers of the shard persistence tests: a shard over a store, its
// chunks, a ramp of update values, and a bounded wait. Test-only.
#ifndef GEOPS_TESTS_STORAGE_PERSISTENCE_TEST_UTIL_H_
#define GEOPS_TESTS_STORAGE_PERSISTENCE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "datacenter/shard.h"

namespace geops::storage::testing {

using datacenter::Shard;

inline std::unique_ptr<Shard> MakeShard(const ModelSpec& spec, const ShardOptions& o, ShardStore* store) {
  Result<std::unique_ptr<Shard>> shard = Shard::Create(spec, o, store);
  EXPECT_TRUE(shard.ok()) << shard.status().ToString();
  return shard.ok() ? std::move(shard).value() : nullptr;
}

inline std::vector<ChunkKey> Keys(const ModelSpec& spec, const ShardOptions& o) {
  return spec.ChunksOfShard(o.shard_id, o.num_shards);
}

inline std::vector<float> Ramp(const ModelSpec& spec, const std::vector<ChunkKey>& keys, float scale) {
  std::vector<float> v;
  for (const ChunkKey k : keys) {
    for (int64_t e = 0; e < spec.ChunkElements(k); ++e) v.push_back(scale * static_cast<float>(e % 7 - 3));
  }
  return v;
}

inline bool WaitFor(const std::function<bool()>& done, int ms = 5000) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace geops::storage::testing

#endif  // GEOPS_TESTS_STORAGE_PERSISTENCE_TEST_UTIL_H_
