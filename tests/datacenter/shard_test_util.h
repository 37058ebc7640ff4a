// Helpers shared by the datacenter tests: a small model, shard construction
// and snapshots. Test-only; not thread-safe beyond what Shard itself is.
#ifndef GEOPS_TESTS_DATACENTER_SHARD_TEST_UTIL_H_
#define GEOPS_TESTS_DATACENTER_SHARD_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "common/model_spec.h"
#include "common/options.h"
#include "datacenter/shard.h"

namespace geops::datacenter::testing {

using ShardSnapshot = std::vector<std::pair<ChunkKey, std::vector<float>>>;

// Tables (chunk_bytes 256, so 64 floats per chunk of a 16-column table):
//   0 "w"   10x16: chunks 0,1 of 64 floats, chunk 2 of 32 (a short last chunk)
//   1 "b"    1x5 : one chunk of 5 floats
//   2 "big" 64x16: 16 chunks of 64 floats
// With two shards, shard 0 owns w/0, w/2, big/0, big/2, ...; shard 1 the rest.
inline ModelSpec TestModel(InitKind init = InitKind::kUniform) {
  std::vector<TableSpec> tables = {
      {"w", 10, 16, init, 0.1f},
      {"b", 1, 5, init, 0.1f},
      {"big", 64, 16, init, 0.1f},
  };
  Result<ModelSpec> spec = ModelSpec::Create(std::move(tables), 256, 7);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return std::move(spec).value();
}

inline ShardOptions TestOptions(int num_workers, int num_shards = 1, ShardId shard = 0) {
  ShardOptions o;
  o.shard_id = shard;
  o.num_shards = num_shards;
  o.num_workers = num_workers;
  o.worker_lease_ms = 10000;
  o.max_read_wait_ms = 10000;
  return o;
}

inline std::unique_ptr<Shard> MakeShard(const ModelSpec& spec, const ShardOptions& options) {
  Result<std::unique_ptr<Shard>> shard = Shard::Create(spec, options);
  EXPECT_TRUE(shard.ok()) << shard.status().ToString();
  return shard.ok() ? std::move(shard).value() : nullptr;
}

inline ShardSnapshot SnapshotOf(const Shard& shard) {
  ShardSnapshot out;
  shard.Snapshot(&out);
  return out;
}

// Byte-for-byte equality of two snapshots.
inline bool SameBytes(const ShardSnapshot& a, const ShardSnapshot& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.size() != b[i].second.size()) return false;
    if (std::memcmp(a[i].second.data(), b[i].second.data(), a[i].second.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

inline int64_t ElementsOf(const ModelSpec& spec, const std::vector<ChunkKey>& keys) {
  int64_t n = 0;
  for (const ChunkKey& k : keys) n += spec.ChunkElements(k);
  return n;
}

inline int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace geops::datacenter::testing

#endif  // GEOPS_TESTS_DATACENTER_SHARD_TEST_UTIL_H_
