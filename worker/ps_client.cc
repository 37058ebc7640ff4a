#include "worker/ps_client.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <string>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/deadline.h"
#include "common/float_kernels.h"
#include "common/thread_name.h"
#include "common/time_source.h"
#include "worker/stream_copy.h"

namespace geops::worker {
namespace {

// This process's run of the worker, as the shards will name it.
WorkerSession NewSession(bool takeover) {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string holder = "pid " + std::to_string(getpid()) + (host[0] ? std::string(" on host ") + host : "");
  if (holder.size() > kMaxHolderBytes) holder.resize(kMaxHolderBytes);
  return WorkerSession{id, std::move(holder), takeover};
}

}  // namespace

Result<std::unique_ptr<PsClient>> PsClient::Create(const ModelSpec& spec, int num_shards,
                                                   const WorkerClientOptions& options,
                                                   ShardConnectionFactory* factory) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (num_shards < 1) return InvalidArgumentError("num_shards must be >= 1");
  if (factory == nullptr) return InvalidArgumentError("a connection factory is required");
  return std::unique_ptr<PsClient>(new PsClient(spec, num_shards, options, factory));
}

PsClient::PsClient(const ModelSpec& spec, int num_shards, const WorkerClientOptions& options,
                   ShardConnectionFactory* factory)
    : spec_(spec), num_shards_(num_shards), options_(options), factory_(factory),
      session_(NewSession(options.takeover)) {
  const int n = spec_.num_tables();
  cache_.resize(n);
  oplog_.resize(n);
  int64_t chunks = 0;
  for (TableId t = 0; t < static_cast<TableId>(n); ++t) {
    const int64_t elems = spec_.table(t).rows * spec_.table(t).cols;
    cache_[t].assign(elems, 0.0f);
    oplog_[t].assign(elems, 0.0f);
    cache_ptrs_.push_back(cache_[t].data());
    oplog_ptrs_.push_back(oplog_[t].data());
    first_chunk_.push_back(chunks);
    chunks += spec_.num_chunks(t);
  }
  dirty_.assign(chunks, 0);
  stream_both_ = spec_.total_elements() * static_cast<int64_t>(sizeof(float)) >= kStreamModelBytes;
  shard_keys_.resize(num_shards_);
  read_buf_.resize(num_shards_);
  incremental_.assign(num_shards_, 1);
  since_.assign(num_shards_, 0);
  changed_.resize(num_shards_);
  send_buf_.resize(num_shards_);
  read_groups_.resize(num_shards_);
  for (ShardId s = 0; s < num_shards_; ++s) {
    shard_keys_[s] = spec_.ChunksOfShard(s, num_shards_);
    // Requests stay under kMaxRequestBytes (a larger chunk goes alone), so
    // that no buffer here or at the shard grows with the model.
    int64_t group = 0, largest = 0;
    for (size_t i = 0; i < shard_keys_[s].size(); ++i) {
      const int64_t n = spec_.ChunkElements(shard_keys_[s][i]);
      if (read_groups_[s].empty() || (group > 0 && (group + n) * 4 > kMaxRequestBytes)) {
        read_groups_[s].push_back({i, i});
        group = 0;
      }
      read_groups_[s].back().second = i + 1;
      group += n;
      largest = std::max(largest, group);
    }
    read_buf_[s].resize(largest);
    send_buf_[s].reserve(largest);
  }
  conns_.resize(num_shards_);
  hb_conns_.resize(num_shards_);
}

PsClient::~PsClient() {
  {
    std::lock_guard<std::mutex> lock(hb_mu_);
    hb_stop_ = true;
  }
  hb_cv_.notify_all();
  if (hb_thread_.joinable()) hb_thread_.join();
}

template <typename Fn>
Status PsClient::CallShard(ShardId s, Fn&& call) {
  {
    std::lock_guard<std::mutex> replaced(replaced_mu_);
    if (!replaced_.ok()) return replaced_;
  }
  const TimeSource* time = options_.time != nullptr ? options_.time : SystemTime();
  const auto start = time->Now();
  const auto window_end = start + std::chrono::milliseconds(options_.retry_window_ms);
  auto next_note = start + std::chrono::milliseconds(kWaitNoteMs);
  int64_t backoff = options_.retry_backoff_ms;
  Status last;
  int attempt = 0;
  for (;; ++attempt) {
    if (attempt > 0) {
      const auto now = time->Now();
      const bool out_of_tries = options_.max_attempts > 0 && attempt >= options_.max_attempts;
      if (out_of_tries || now >= window_end) break;
      if (now >= next_note) {
        // Still waiting: say so, so that an operator (or the launcher) sees
        // a worker that waits for a shard's restart rather than a hung one.
        const int64_t waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
        spdlog::warn("worker {}: shard {} unavailable for {:.0f} s, retrying for up to {:.0f} s: {}",
                     options_.worker_id, s, waited_ms / 1000.0, options_.retry_window_ms / 1000.0, last.message());
        if (wait_callback_) wait_callback_(s, waited_ms, last);
        next_note = now + std::chrono::milliseconds(kWaitNoteMs);
      }
      retries_.fetch_add(1, std::memory_order_relaxed);
      if (last.code() != StatusCode::kDeadlineExceeded) {  // a held read already waited at the shard
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(window_end - now).count();
        const auto until = now + std::chrono::milliseconds(std::min<int64_t>(backoff, std::max<int64_t>(left, 1)));
        // Nothing notifies this wait: it ends when the time comes.
        std::mutex mu;
        std::condition_variable cv;
        std::unique_lock<std::mutex> lock(mu);
        while (time->Now() < until) time->WaitUntil(cv, lock, until);
        backoff = std::min<int64_t>(backoff * 2, options_.max_backoff_ms);
      }
    }
    if (conns_[s] == nullptr) {
      auto conn = factory_->Connect(s);
      if (!conn.ok()) {
        last = conn.status();
        if (last.code() == StatusCode::kUnavailable) continue;
        return last;
      }
      conns_[s] = std::move(conn).value();
    }
    last = call(*conns_[s]);
    if (last.ok()) return last;
    // Unavailable: the shard is down or restarting. DeadlineExceeded: the
    // shard held a read (for its site's clock or the WAN gate) for a whole
    // attempt; it holds reads only for parties still alive (a dead worker or
    // peer site leaves the clock at its lease), so asking again is waiting
    // for them to come back. Both retry until the window ends.
    if (last.code() == StatusCode::kUnavailable || last.code() == StatusCode::kDeadlineExceeded) continue;
    if (last.code() == StatusCode::kAborted) {
      // The shard no longer knows this worker (it restarted): register again.
      spdlog::warn("worker {}: shard {} asks to re-register: {}", options_.worker_id, s,
                   last.message());
      Status reg =
          conns_[s]->Register(options_.worker_id, spec_.Fingerprint(), options_.auth_token, session_).status();
      if (!reg.ok() && reg.code() != StatusCode::kUnavailable) return reg;
      continue;
    }
    return last;
  }
  const double waited_s = std::chrono::duration<double>(time->Now() - start).count();
  char waited[32];
  std::snprintf(waited, sizeof(waited), "%.1f", waited_s);
  return last.WithContext("shard " + std::to_string(s) + " after " + std::to_string(attempt) + " attempts over " +
                          waited + " s (retry window " + std::to_string(options_.retry_window_ms / 1000) + " s)");
}

template <typename Fn>
Status PsClient::ForEachShard(Fn&& fn) {
  if (num_shards_ == 1) return fn(0);
  std::vector<std::future<Status>> pending;
  pending.reserve(num_shards_ - 1);
  for (ShardId s = 1; s < num_shards_; ++s) {
    pending.push_back(std::async(std::launch::async, [&fn, s] { return fn(s); }));
  }
  Status first = fn(0);
  for (auto& f : pending) {
    Status st = f.get();
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

Status PsClient::Register(ShardId s, RegisterReply* reply) {
  const TimeSource* time = options_.time != nullptr ? options_.time : SystemTime();
  const auto give_up = time->Now() + std::chrono::milliseconds(options_.held_id_wait_ms);
  for (bool noted = false;; noted = true) {
    Status st = CallShard(s, [&](ShardConnection& c) -> Status {
      auto r = c.Register(options_.worker_id, spec_.Fingerprint(), options_.auth_token, session_);
      if (!r.ok()) return r.status();
      *reply = *r;
      return Status::Ok();
    });
    // Another live process holds the id: a dead predecessor's lease may
    // still run, so ask again for a while; a live twin keeps it.
    if (st.code() != StatusCode::kAlreadyExists) return st;
    const auto now = time->Now();
    if (now >= give_up) {
      return st.WithContext("shard " + std::to_string(s) + " still refused after " +
                            std::to_string(options_.held_id_wait_ms / 1000) + " s");
    }
    if (!noted) spdlog::warn("worker {}: {}; asking again for up to {} s", options_.worker_id, st.message(),
                             options_.held_id_wait_ms / 1000);
    const auto until = std::min(give_up, now + std::chrono::milliseconds(250));
    std::mutex mu;
    std::condition_variable cv;
    std::unique_lock<std::mutex> lock(mu);
    while (time->Now() < until) time->WaitUntil(cv, lock, until);
  }
}

Status PsClient::SendSchema(ShardId s, std::span<const float* const> initial_values) {
  SchemaReply reply;
  GEOPS_RETURN_IF_ERROR(CallShard(s, [&](ShardConnection& c) -> Status {
    auto r = c.RegisterSchema(options_.worker_id, spec_, options_.auth_token);
    if (!r.ok()) return r.status();
    reply = std::move(r).value();
    return Status::Ok();
  }));
  if (reply.model_fingerprint != spec_.Fingerprint()) {
    return FailedPreconditionError("shard " + std::to_string(s) + " fixed a model with another fingerprint");
  }
  // Send what the shard lacks, a bounded batch at a time; a shard keeps
  // values it already has, so another worker sending the same is harmless.
  size_t next = 0;
  std::vector<ChunkKey> keys;
  std::vector<float> values;
  while (next < reply.missing.size()) {
    keys.clear();
    values.clear();
    while (next < reply.missing.size()) {
      const ChunkKey k = reply.missing[next];
      if (!spec_.HasChunk(k) || spec_.ShardOf(k, num_shards_) != s) {
        return InternalError("shard " + std::to_string(s) + " asks for the values of a chunk it does not hold");
      }
      const int64_t n = spec_.ChunkElements(k);
      if (!keys.empty() && static_cast<int64_t>(values.size() + n) * 4 > kInitBatchBytes) break;
      const float* src = initial_values[k.table] + spec_.ChunkOffset(k);
      values.insert(values.end(), src, src + n);
      keys.push_back(k);
      ++next;
    }
    GEOPS_RETURN_IF_ERROR(CallShard(s, [&](ShardConnection& c) -> Status {
      return c.InitValues(options_.worker_id, reply.model_fingerprint, keys, values, options_.auth_token)
          .status();
    }));
  }
  return Status::Ok();
}

Status PsClient::Start(std::span<const float* const> initial_values) {
  if (spec_.client_defined()) {
    if (static_cast<int>(initial_values.size()) != spec_.num_tables()) {
      return InvalidArgumentError("a client-defined model needs the initial values of its " +
                                  std::to_string(spec_.num_tables()) + " tables, got " +
                                  std::to_string(initial_values.size()));
    }
    for (TableId t = 0; t < static_cast<TableId>(spec_.num_tables()); ++t) {
      const TableSpec& table = spec_.table(t);
      if (initial_values[t] == nullptr) {
        return InvalidArgumentError("no initial values for table '" + table.name + "'");
      }
      const std::span<const float> v(initial_values[t], static_cast<size_t>(table.rows * table.cols));
      if (ValuesChecksum(v) != table.init_checksum) {
        return InvalidArgumentError("the initial values of table '" + table.name +
                                    "' do not match the checksum in the model's schema");
      }
    }
    GEOPS_RETURN_IF_ERROR(ForEachShard([&](ShardId s) { return SendSchema(s, initial_values); }));
    // Start from the values the model was built with; a read replaces them.
    for (TableId t = 0; t < static_cast<TableId>(spec_.num_tables()); ++t) {
      std::memcpy(cache_[t].data(), initial_values[t], cache_[t].size() * sizeof(float));
    }
  } else if (!initial_values.empty()) {
    return InvalidArgumentError("initial values are given only for a client-defined model");
  }
  std::vector<RegisterReply> replies(num_shards_);
  GEOPS_RETURN_IF_ERROR(ForEachShard([&](ShardId s) { return Register(s, &replies[s]); }));
  geops::Clock held = replies[0].worker_clock;
  geops::Clock highest = held;
  for (ShardId s = 0; s < num_shards_; ++s) {
    if (replies[s].num_shards != num_shards_) {
      return FailedPreconditionError("shard " + std::to_string(s) + " says the site has " +
                                     std::to_string(replies[s].num_shards) + " shards, the worker expects " +
                                     std::to_string(num_shards_));
    }
    if (replies[s].shard_id != s) {
      return FailedPreconditionError("the address given for shard " + std::to_string(s) +
                                     " is served by shard " + std::to_string(replies[s].shard_id));
    }
    held = std::min(held, replies[s].worker_clock);
    highest = std::max(highest, replies[s].worker_clock);
  }
  if (highest != held) {
    // The worker (or its shards) died between advancing one shard and the
    // next. Resume at the lowest clock: a shard that already holds a later
    // one takes the repeated update as a duplicate and the repeated
    // advance as a retry, so nothing is applied twice.
    spdlog::info("worker {}: shards hold clocks {}..{} for it; resuming at {}", options_.worker_id, held, highest,
                 held);
  }
  clock_ = held;
  cache_stamp_ = -1;
  for (ShardId s = 0; s < num_shards_; ++s) {
    auto conn = factory_->Connect(s);
    if (conn.ok()) hb_conns_[s] = std::move(conn).value();
  }
  hb_thread_ = std::thread([this] {
    NameThisThread("ps-heartbeat");
    HeartbeatLoop();
  });
  return Status::Ok();
}

void PsClient::HeartbeatLoop() {
  std::unique_lock<std::mutex> lock(hb_mu_);
  while (!hb_stop_) {
    hb_cv_.wait_for(lock, std::chrono::milliseconds(options_.heartbeat_ms));
    if (hb_stop_) break;
    lock.unlock();
    for (ShardId s = 0; s < num_shards_; ++s) {
      if (hb_conns_[s] == nullptr) {
        auto conn = factory_->Connect(s);
        if (!conn.ok()) continue;
        hb_conns_[s] = std::move(conn).value();
      }
      Status st = hb_conns_[s]->Heartbeat(options_.worker_id, session_.id);
      if (st.code() == StatusCode::kFailedPrecondition) {
        // Another process holds this worker now: every later call fails.
        std::lock_guard<std::mutex> replaced(replaced_mu_);
        if (replaced_.ok()) {
          spdlog::error("worker {}: {}", options_.worker_id, st.message());
          replaced_ = st;
        }
      } else if (!st.ok() && st.code() != StatusCode::kUnavailable) {
        spdlog::debug("worker {}: heartbeat to shard {}: {}", options_.worker_id, s, st.ToString());
      }
    }
    int64_t sent = 0, received = 0;
    for (const auto& c : hb_conns_) {
      if (c) {
        sent += c->stats().bytes_sent;
        received += c->stats().bytes_received;
      }
    }
    hb_bytes_sent_.store(sent);
    hb_bytes_received_.store(received);
    lock.lock();
  }
}

Status PsClient::ReadShard(ShardId s, geops::Clock clock, int64_t staleness, geops::Clock* stamp,
                           std::span<float* const> also_into) {
  const std::vector<ChunkKey>& keys = shard_keys_[s];
  if (keys.empty()) {
    *stamp = std::numeric_limits<geops::Clock>::max();
    return Status::Ok();
  }
  *stamp = std::numeric_limits<geops::Clock>::max();
  // This thread's streaming stores are fenced before the caller sees the buffers, on every return.
  struct FenceOnReturn {
    bool streamed;
    ~FenceOnReturn() {
      if (streamed) StreamFence();
    }
  } fence{!also_into.empty() && stream_both_};
  for (const auto& [begin, end] : read_groups_[s]) {
    const std::span<const ChunkKey> group(keys.data() + begin, end - begin);
    // With no copy of the caller's to fill, only what changed since the
    // last read (ShardConnection::ReadChanged).
    if (also_into.empty() && incremental_[s]) {
      const uint64_t since = since_[s];
      since_[s] = 0;  // until this reply is in the cache
      Status st = CallShard(s, [&](ShardConnection& c) -> Status {
        auto r = c.ReadChanged(options_.worker_id, clock, staleness, group, since, &changed_[s], options_.rpc_timeout_ms);
        if (!r.ok()) return r.status();
        *stamp = std::min(*stamp, r->shard_clock);
        return Status::Ok();
      });
      if (st.ok()) {
        GEOPS_RETURN_IF_ERROR(ScatterChanged(s, group, changed_[s]));  // (since_ stays 0)
        since_[s] = changed_[s].read_id;
        // Not tracked (read_id 0): every chunk came whole, which `read`
        // does with fewer copies (docs/wire_format.md).
        if (since_[s] == 0) incremental_[s] = 0;
        continue;
      }
      if (st.code() != StatusCode::kUnimplemented) return st;
      incremental_[s] = 0;  // a shard without them: whole reads from now on
    }
    float* buf = read_buf_[s].data();
    GEOPS_RETURN_IF_ERROR(CallShard(s, [&](ShardConnection& c) -> Status {
      auto r = c.Read(options_.worker_id, clock, staleness, group, buf, options_.rpc_timeout_ms);
      if (!r.ok()) return r.status();
      *stamp = std::min(*stamp, r->shard_clock);
      return Status::Ok();
    }));
    // Scatter the chunks into the dense tables (and, while each chunk is
    // still in the CPU's cache, into the caller's copy). A caller with its
    // own copy computes from that copy, and the cache is only read again at
    // its push: for a model larger than the CPU's caches both copies are
    // written with streaming stores (worker/stream_copy.h).
    for (ChunkKey k : group) {
      const int64_t n = spec_.ChunkElements(k);
      const int64_t offset = spec_.ChunkOffset(k);
      float* cached = cache_[k.table].data() + offset;
      if (also_into.empty()) {
        std::memcpy(cached, buf, n * sizeof(float));
      } else if (stream_both_) {
        StreamCopy(cached, buf, n);
        StreamCopy(also_into[k.table] + offset, buf, n);
      } else {
        std::memcpy(cached, buf, n * sizeof(float));
        std::memcpy(also_into[k.table] + offset, buf, n * sizeof(float));
      }
      buf += n;
    }
  }
  return Status::Ok();
}

Status PsClient::ScatterChanged(ShardId s, std::span<const ChunkKey> group, const ChangedValues& changed) {
  // Runs ascend inside the group's chunks laid back to back; a run may
  // span chunks. A reply that says otherwise changes nothing.
  int64_t total = 0, end = 0, carried = 0;
  for (const ChunkKey k : group) total += spec_.ChunkElements(k);
  bool fits = changed.runs.size() % 2 == 0;
  for (size_t i = 0; fits && i < changed.runs.size(); i += 2) {
    fits = changed.runs[i] >= end && int64_t{changed.runs[i]} + changed.runs[i + 1] <= total;
    end = int64_t{changed.runs[i]} + changed.runs[i + 1];
    carried += changed.runs[i + 1];
  }
  if (!fits || carried != static_cast<int64_t>(changed.values.size())) {
    return InternalError("shard " + std::to_string(s) + ": a readChanged reply's runs do not fit the " +
                         std::to_string(total) + " values read, or its " + std::to_string(changed.values.size()) +
                         " values; do worker and shard run the same model?");
  }
  size_t k = 0;
  int64_t chunk_start = 0;
  const float* src = changed.values.data();
  for (size_t i = 0; i < changed.runs.size(); i += 2) {
    int64_t at = changed.runs[i];
    int64_t left = changed.runs[i + 1];
    while (left > 0) {
      while (at >= chunk_start + spec_.ChunkElements(group[k])) chunk_start += spec_.ChunkElements(group[k++]);
      const int64_t n = std::min<int64_t>(left, chunk_start + spec_.ChunkElements(group[k]) - at);
      float* dst = cache_[group[k].table].data() + spec_.ChunkOffset(group[k]) + (at - chunk_start);
      std::memcpy(dst, src, n * sizeof(float));
      src += n;
      at += n;
      left -= n;
    }
  }
  return Status::Ok();
}

Status PsClient::ReadAt(geops::Clock clock, int64_t staleness, std::span<float* const> also_into) {
  if (!also_into.empty() && static_cast<int64_t>(also_into.size()) != spec_.num_tables()) {
    return InvalidArgumentError("ReadAt: " + std::to_string(also_into.size()) + " buffers for " +
                                std::to_string(spec_.num_tables()) + " tables");
  }
  const double start = NowSeconds();
  ++cache_version_;  // the shards' values overwrite the cache, even on error
  std::vector<geops::Clock> stamps(num_shards_, 0);
  Status st = ForEachShard([&](ShardId s) { return ReadShard(s, clock, staleness, &stamps[s], also_into); });
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.read_wait_seconds += NowSeconds() - start;
  if (!st.ok()) {
    cache_stamp_ = -1;  // partly overwritten: never serve it again
    return st;
  }
  stats_.refreshes++;
  cache_stamp_ = *std::min_element(stamps.begin(), stamps.end());
  return Status::Ok();
}

Status PsClient::Refresh(std::span<float* const> also_into) {
  const int64_t s = options_.staleness;
  if (s != kAsync && cache_stamp_ >= 0 && cache_stamp_ >= clock_ - s) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.cache_hits++;
    stats_.max_staleness = std::max<int64_t>(stats_.max_staleness, clock_ - cache_stamp_);
    return Status::Ok();
  }
  GEOPS_RETURN_IF_ERROR(ReadAt(clock_, s, also_into));
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.max_staleness = std::max<int64_t>(stats_.max_staleness, std::max<geops::Clock>(0, clock_ - cache_stamp_));
  return Status::Ok();
}

void PsClient::MarkDirty(TableId id) {
  std::fill(dirty_.begin() + first_chunk_[id], dirty_.begin() + first_chunk_[id] + spec_.num_chunks(id), 1);
}

void PsClient::MarkAllDirty() { std::fill(dirty_.begin(), dirty_.end(), 1); }

Status PsClient::Update(TableId id, int64_t offset, std::span<const float> values) {
  if (!spec_.HasTable(id)) return InvalidArgumentError("unknown table id " + std::to_string(id));
  const int64_t size = static_cast<int64_t>(oplog_[id].size());
  if (offset < 0 || offset > size || static_cast<int64_t>(values.size()) > size - offset) {
    return InvalidArgumentError("update of " + std::to_string(values.size()) + " values at " +
                                std::to_string(offset) + " leaves table '" + spec_.table(id).name +
                                "' of " + std::to_string(size) + " values");
  }
  if (values.empty()) return Status::Ok();
  float* dst = oplog_[id].data() + offset;
  for (size_t i = 0; i < values.size(); ++i) dst[i] += values[i];
  const int64_t per_chunk = spec_.rows_per_chunk(id) * spec_.table(id).cols;
  const int64_t first = offset / per_chunk;
  const int64_t last = (offset + static_cast<int64_t>(values.size()) - 1) / per_chunk;
  std::fill(dirty_.begin() + first_chunk_[id] + first, dirty_.begin() + first_chunk_[id] + last + 1, 1);
  return Status::Ok();
}

Status PsClient::FlushShard(ShardId s, bool finished) {
  // The clock's deltas go in parts of at most kMaxRequestBytes: part g holds
  // the dirty chunks of the shard's fixed chunk group g (the read groups),
  // so that a worker that restarts mid-clock sends each chunk under the same
  // part again, and the shard, which takes a repeated part as a retry,
  // counts every chunk at most once per clock.
  std::vector<ChunkKey> keys;
  std::vector<float>& buf = send_buf_[s];
  const std::vector<ChunkKey>& all = shard_keys_[s];
  auto is_dirty = [&](ChunkKey k) { return dirty_[first_chunk_[k.table] + k.chunk] != 0; };
  // The last group with dirty chunks carries the clock advance too (one
  // round trip); a shard that cannot clock in the same call says so.
  size_t last = read_groups_[s].size();  // none dirty: a bare AdvanceClock
  for (size_t g = 0; g < read_groups_[s].size(); ++g) {
    const auto [begin, end] = read_groups_[s][g];
    if (std::any_of(all.begin() + begin, all.begin() + end, is_dirty)) last = g;
  }
  for (size_t g = 0; g < read_groups_[s].size(); ++g) {
    keys.clear();
    buf.clear();
    for (size_t i = read_groups_[s][g].first; i < read_groups_[s][g].second; ++i) {
      const ChunkKey k = all[i];
      if (!is_dirty(k)) continue;
      keys.push_back(k);
      const float* src = oplog_[k.table].data() + spec_.ChunkOffset(k);
      buf.insert(buf.end(), src, src + spec_.ChunkElements(k));
    }
    if (keys.empty()) continue;
    const int32_t part = static_cast<int32_t>(g);
    bool clocked = false;
    GEOPS_RETURN_IF_ERROR(CallShard(s, [&](ShardConnection& c) -> Status {
      Result<UpdateReply> r = g != last ? c.Update(options_.worker_id, clock_, keys, buf, part)
                                        : c.UpdateThenClock(options_.worker_id, clock_, keys, buf, part, finished);
      if (!r.ok()) return r.status();
      clocked = r->clocked;
      // A part the shard had already (a retry, or a clock this worker ended
      // there before it restarted) may be in the cache already too: the
      // cache adds it below, so the next read takes everything.
      if (!r->applied) since_[s] = 0;
      return Status::Ok();
    }));
    if (clocked) return Status::Ok();
  }
  return CallShard(s, [&](ShardConnection& c) -> Status {
    return c.AdvanceClock(options_.worker_id, clock_ + 1, finished).status();
  });
}

Status PsClient::Clock(bool finished) {
  const double start = NowSeconds();
  Status flushed = ForEachShard([&](ShardId s) { return FlushShard(s, finished); });
  if (!flushed.ok()) {
    // Some shards may hold this clock's update that the cache will not get
    // (below): the next reads take everything.
    std::fill(since_.begin(), since_.end(), 0);
    return flushed;
  }
  // Read-my-writes: the cache gets this clock's own deltas.
  for (TableId t = 0; t < static_cast<TableId>(spec_.num_tables()); ++t) {
    for (ChunkId c = 0; c < spec_.num_chunks(t); ++c) {
      if (!dirty_[first_chunk_[t] + c]) continue;
      const ChunkKey k{t, c};
      const int64_t off = spec_.ChunkOffset(k), n = spec_.ChunkElements(k);
      float* dst = cache_[t].data() + off;
      float* delta = oplog_[t].data() + off;
      AddInto(dst, delta, n);
      std::fill(delta, delta + n, 0.0f);
    }
  }
  std::fill(dirty_.begin(), dirty_.end(), 0);
  ++clock_;
  ++cache_version_;
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.flush_seconds += NowSeconds() - start;
  return Status::Ok();
}

PsClientStats PsClient::stats() const {
  PsClientStats out;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    out = stats_;
  }
  for (const auto& c : conns_) {
    if (c) {
      out.bytes_sent += c->stats().bytes_sent;
      out.bytes_received += c->stats().bytes_received;
    }
  }
  out.bytes_sent += hb_bytes_sent_.load();
  out.bytes_received += hb_bytes_received_.load();
  out.retries = retries_.load();
  return out;
}

}  // namespace geops::worker
