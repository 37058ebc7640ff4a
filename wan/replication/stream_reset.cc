#include "wan/replication/stream_reset.h"

#include <string>

#include <spdlog/spdlog.h>

#include "common/deadline.h"

namespace geops::wan {

void StreamResets::Heard(SiteId peer, uint64_t incarnation, double heard_unix) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& pending = pending_[peer];
  if (pending.first < incarnation) pending = {incarnation, heard_unix};
}

bool StreamResets::Pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !pending_.empty();
}

std::vector<StreamResetEvent> StreamResets::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

void StreamResets::Run(RemoteInbox* inbox, ReplicaTarget* target, ShardId shard, const Hooks& hooks) {
  std::map<SiteId, std::pair<uint64_t, double>> resets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    resets = pending_;
  }
  for (const auto& entry : resets) {
    // Named copies, not structured bindings: the lambdas below capture them
    // (Clang before 16 cannot capture a binding).
    const auto peer = entry.first;
    const auto& pending = entry.second;
    StreamResetEvent event;
    event.peer = peer;
    event.incarnation = pending.first;
    event.heard_unix = pending.second;
    bool changed = false;
    Status s = inbox->ResetOrigin(peer, pending.first, [&]() -> Status {
      Status r = target->ResetOrigin(
          peer,
          [&](std::span<const ChunkMass> own) {
            changed = true;
            hooks.restart_stream(peer, own, &event);
          },
          Deadline::InMs(kDurableWaitMs));
      // Once the change ran, memory is reset: the inbox must follow even
      // if the commit is late (a failed store stops the shard anyway).
      if (changed && !r.ok()) {
        spdlog::error("wan shard {}: the reset of site {} is not durable: {}", shard, peer, r.ToString());
        return Status::Ok();
      }
      return r;
    });
    if (!s.ok()) {
      // Tried again every round; said once per incarnation (a shard
      // without a store, for one, can never do it).
      bool first = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        first = failures_.insert({peer, pending.first}).second;
      }
      spdlog::log(first ? spdlog::level::err : spdlog::level::debug,
                  "wan shard {}: site {} came back with an empty store but its streams cannot be reset: {}; its "
                  "messages are refused until they can",
                  shard, peer, s.ToString());
      continue;
    }
    event.reset_unix = UnixSeconds();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(peer);
      if (it != pending_.end() && it->second.first <= pending.first) pending_.erase(it);
      events_.push_back(event);
    }
    hooks.done(event);
    spdlog::info("wan shard {}: site {} came back with an empty store (incarnation {}); took its old contributions "
                 "back and restarted the stream to it with {} values of this site's mass",
                 shard, peer, event.incarnation, event.snapshot_elements);
  }
}

int64_t RestartStream(PeerOutbox* out, std::span<const ChunkMass> own, const AccumulatedOf& accumulated,
                      uint64_t incarnation, OutboundJournal* journal, ShardId shard) {
  const SiteId peer = out->peer();
  for (uint64_t seq : out->InflightSeqs()) journal->BatchAcked(peer, seq);
  std::vector<SparseChunkUpdate> old;
  out->ResetStream(&old);
  for (const SparseChunkUpdate& u : old) journal->BacklogChanged(peer, u.key);
  journal->LastSeqChanged(peer, 0);
  // What this site selected so far: its own mass minus what the
  // accumulator still holds (that reaches every peer when selected).
  std::vector<SparseChunkUpdate> selected;
  for (const ChunkMass& m : own) {
    std::span<const float> acc = accumulated(m.key);
    SparseChunkUpdate u;
    u.key = m.key;
    u.num_elements = static_cast<uint32_t>(m.values.size());
    for (size_t i = 0; i < m.values.size(); ++i) {
      const float v = m.values[i] - (i < acc.size() ? acc[i] : 0.0f);
      if (v == 0.0f) continue;
      u.indices.push_back(static_cast<uint32_t>(i));
      u.values.push_back(v);
    }
    if (!u.indices.empty()) selected.push_back(std::move(u));
  }
  Status s = out->AddToBacklog(selected);
  if (!s.ok()) spdlog::error("wan shard {}: snapshot for site {}: {}", shard, peer, s.ToString());
  int64_t elements = 0;
  for (const SparseChunkUpdate& u : selected) {
    journal->BacklogChanged(peer, u.key);
    elements += static_cast<int64_t>(u.values.size());
  }
  journal->PeerIncarnationChanged(peer, incarnation);
  return elements;
}

}  // namespace geops::wan
