#include "tests/storage/memory_shard_store.h"

#include <algorithm>

#include "storage/store_format.h"

namespace geops::storage::testing {

Status MemoryImage::Check(const ShardCommit& commit) const {
  for (SiteId origin : commit.ledger_clears) {
    if (origin < 0) {
      return InvalidArgumentError("it clears the ledger of the negative origin " + std::to_string(origin));
    }
  }
  // The size of every row this commit adds to, as the commit goes.
  std::map<std::pair<SiteId, ChunkKey>, size_t> sizes;
  for (const LedgerAdd& add : commit.ledger_adds) {
    GEOPS_RETURN_IF_ERROR(format::CheckLedgerAdd(add));
    const std::pair<SiteId, ChunkKey> row(add.origin, add.key);
    auto [size, first_add] = sizes.emplace(row, add.num_elements);
    const auto stored = ledger.find(row);
    const bool cleared = std::find(commit.ledger_clears.begin(), commit.ledger_clears.end(), add.origin) !=
                         commit.ledger_clears.end();
    if (first_add && stored != ledger.end() && !cleared) size->second = stored->second.size();
    if (size->second != add.num_elements) {
      return InvalidArgumentError(format::DescribeLedgerAdd(add) + " has num_elements " +
                                  std::to_string(add.num_elements) + ", but its row has " +
                                  std::to_string(size->second) + " sums");
    }
  }
  return Status::Ok();
}

void MemoryImage::Apply(const ShardCommit& commit) {
  Status read = commit.ForEachChunk([&](ChunkKey key, std::span<const float> v) {
    chunks[key].assign(v.begin(), v.end());
    return Status::Ok();
  });
  (void)read;  // the callback never fails
  for (const WorkerRecord& r : commit.workers) workers[r.worker] = r;
  for (const OriginRecord& r : commit.origins) origins[r.origin] = r.seq;
  for (const std::string& k : commit.outbound_deletes) outbound.erase(k);
  Status outbox = commit.ForEachOutbound([&](const std::string& key, const std::string* value) {
    if (value != nullptr) {
      outbound[key] = *value;
    } else {
      outbound.erase(key);
    }
    return Status::Ok();
  });
  (void)outbox;  // the callback never fails
  for (SiteId origin : commit.ledger_clears) {
    auto first = ledger.lower_bound({origin, ChunkKey{}});
    auto last = first;
    while (last != ledger.end() && last->first.first == origin) ++last;
    ledger.erase(first, last);
  }
  for (const LedgerAdd& add : commit.ledger_adds) {
    std::vector<double>& row = ledger[{add.origin, add.key}];
    if (row.empty()) row.assign(add.num_elements, 0.0);
    for (size_t i = 0; i < add.indices.size(); ++i) row[add.indices[i]] += static_cast<double>(add.values[i]);
  }
  shard_clock = commit.shard_clock;
  ++commits;
}

ShardState MemoryImage::ToState() const {
  ShardState state;
  state.fingerprint = fingerprint;
  state.format_version = format::kFormatVersion;
  state.commits = commits;
  state.shard_clock = shard_clock;
  for (const auto& [key, values] : chunks) state.chunks.Add(key, values);
  for (const auto& [id, record] : workers) state.workers.push_back(record);
  for (const auto& [origin, seq] : origins) state.origins.push_back({origin, seq});
  for (const auto& [key, value] : outbound) state.outbound.push_back({key, value});
  return state;
}

std::vector<LedgerRow> MemoryImage::Ledger(SiteId origin) const {
  std::vector<LedgerRow> rows;
  for (auto it = ledger.lower_bound({origin, ChunkKey{}}); it != ledger.end() && it->first.first == origin; ++it) {
    rows.push_back(LedgerRow{it->first.second, it->second});
  }
  return rows;
}

MemoryShardStore::MemoryShardStore(StoreFingerprint fingerprint, Durability durability)
    : durability_(durability) {
  image_.fingerprint = std::move(fingerprint);
}

Result<ShardState> MemoryShardStore::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  return image_.ToState();
}

Status MemoryShardStore::Commit(const ShardCommit& commit) {
  std::lock_guard<std::mutex> lock(mu_);
  GEOPS_RETURN_IF_ERROR(image_.Check(commit).WithContext(name() + ": commit " + std::to_string(image_.commits + 1)));
  image_.Apply(commit);
  return Status::Ok();
}

Result<std::vector<LedgerRow>> MemoryShardStore::ReadLedger(SiteId origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return image_.Ledger(origin);
}

MemoryImage MemoryShardStore::image() const {
  std::lock_guard<std::mutex> lock(mu_);
  return image_;
}

void MemoryShardStore::set_image(MemoryImage image) {
  std::lock_guard<std::mutex> lock(mu_);
  image_ = std::move(image);
}

}  // namespace geops::storage::testing
