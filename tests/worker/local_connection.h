// In-process ShardConnection over datacenter::Shard objects, for tests, with
// fault injection: fail calls before they reach the shard, or let a call
// reach the shard and then lose its reply (the case that makes exactly-once
// matter).
#ifndef GEOPS_TESTS_WORKER_LOCAL_CONNECTION_H_
#define GEOPS_TESTS_WORKER_LOCAL_CONNECTION_H_

#include <atomic>
#include <memory>
#include <vector>

#include "datacenter/shard.h"
#include "datacenter/shard_host.h"
#include "worker/shard_connection.h"

namespace geops::worker {

struct FaultPlan {
  std::atomic<int> fail_before{0};  // next N calls fail with Unavailable, not delivered
  std::atomic<int> lose_reply{0};   // next N calls are delivered, reply lost (Unavailable)
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> clock_calls{0};  // AdvanceClock calls among `calls`
  // UpdateThenClock answers as a shard that predates it: the part applied,
  // the clock not moved (`clocked` false).
  std::atomic<bool> predates_then_clock{false};
  // ReadChanged answers as a connection without it (Unimplemented).
  std::atomic<bool> whole_reads_only{false};
  // A ReadChanged reply gets a run past the chunks read (a broken shard).
  std::atomic<bool> run_past_the_end{false};
};

class LocalConnection : public ShardConnection {
 public:
  using ShardConnection::Update;
  LocalConnection(datacenter::Shard* shard, FaultPlan* faults) : shard_(shard), faults_(faults) {}
  // Over a host whose shard may come later (a client-defined model).
  LocalConnection(datacenter::ShardHost* host, FaultPlan* faults) : host_(host), faults_(faults) {}

  Result<SchemaReply> RegisterSchema(WorkerId w, const ModelSpec& spec, const std::string& token) override {
    if (host_ == nullptr) return UnimplementedError("a LocalConnection over a bare shard serves built-in models only");
    return Call([&] { return host_->RegisterSchema(w, spec, token); });
  }
  Result<int64_t> InitValues(WorkerId w, uint64_t fp, std::span<const ChunkKey> keys,
                             std::span<const float> values, const std::string& token) override {
    if (host_ == nullptr) return UnimplementedError("a LocalConnection over a bare shard serves built-in models only");
    return Call([&] { return host_->InitValues(w, fp, keys, values, token); });
  }

  Result<RegisterReply> Register(WorkerId w, uint64_t fp, const std::string& token,
                                 const WorkerSession& session = {}) override {
    if (!Served()) return host_->NotReady();
    return Call([&] { return Served()->RegisterWorker(w, fp, token, session); });
  }
  Result<ReadReply> Read(WorkerId w, Clock c, int64_t s, std::span<const ChunkKey> keys, float* out,
                         int64_t deadline_ms) override {
    if (!Served()) return host_->NotReady();
    return Call([&] { return Served()->Read(w, c, s, keys, out, Deadline::InMs(deadline_ms)); });
  }
  Result<ReadReply> ReadChanged(WorkerId w, Clock c, int64_t s, std::span<const ChunkKey> keys, uint64_t since,
                                ChangedValues* out, int64_t deadline_ms) override {
    if (!Served()) return host_->NotReady();
    if (faults_ != nullptr && faults_->whole_reads_only.load()) {
      return ShardConnection::ReadChanged(w, c, s, keys, since, out, deadline_ms);
    }
    Result<ReadReply> r = Call([&] { return Served()->ReadChanged(w, c, s, keys, since, out, Deadline::InMs(deadline_ms)); });
    if (r.ok() && faults_ != nullptr && faults_->run_past_the_end.load()) {
      out->runs.push_back(1u << 30);  // a run no chunk of `keys` holds
      out->runs.push_back(1);
      out->values.push_back(7.0f);
    }
    return r;
  }
  Result<UpdateReply> Update(WorkerId w, Clock c, std::span<const ChunkKey> keys,
                             std::span<const float> values, int32_t part) override {
    if (!Served()) return host_->NotReady();
    stats_.bytes_sent += values.size() * sizeof(float);
    return Call([&] { return Served()->Update(w, c, keys, values, part); });
  }
  // One call, as the Thrift server's handler serves it.
  Result<UpdateReply> UpdateThenClock(WorkerId w, Clock c, std::span<const ChunkKey> keys,
                                      std::span<const float> values, int32_t part, bool finished) override {
    if (!Served()) return host_->NotReady();
    stats_.bytes_sent += values.size() * sizeof(float);
    const bool then_clock = faults_ == nullptr || !faults_->predates_then_clock.load();
    return Call([&]() -> Result<UpdateReply> {
      Result<UpdateReply> r = Served()->Update(w, c, keys, values, part);
      if (!r.ok() || !then_clock) return r;
      Result<Clock> advanced = Served()->AdvanceClock(w, c + 1, finished);
      if (!advanced.ok()) return advanced.status();
      r->shard_clock = *advanced;
      r->clocked = true;
      return r;
    });
  }
  Result<Clock> AdvanceClock(WorkerId w, Clock c, bool finished) override {
    if (!Served()) return host_->NotReady();
    if (faults_ != nullptr) faults_->clock_calls++;
    return Call([&] { return Served()->AdvanceClock(w, c, finished); });
  }
  Status Heartbeat(WorkerId w, uint64_t session = 0) override {
    if (!Served()) return host_->NotReady();
    return Served()->Heartbeat(w, session);
  }
  Result<ShardStatus> GetStatus() override {
    if (!Served()) return host_->NotReady();
    return Served()->GetStatus();
  }
  TransferStats stats() const override { return stats_; }

 private:
  template <typename Fn>
  auto Call(Fn&& fn) -> decltype(fn()) {
    stats_.calls++;
    if (faults_ != nullptr) {
      faults_->calls++;
      if (faults_->fail_before.load() > 0 && faults_->fail_before.fetch_sub(1) > 0) {
        return UnavailableError("injected: connection refused");
      }
      if (faults_->lose_reply.load() > 0 && faults_->lose_reply.fetch_sub(1) > 0) {
        auto r = fn();
        (void)r;
        return UnavailableError("injected: reply lost");
      }
    }
    return fn();
  }

  datacenter::Shard* Served() const { return host_ != nullptr ? host_->shard() : shard_; }

  datacenter::Shard* shard_ = nullptr;
  datacenter::ShardHost* host_ = nullptr;
  FaultPlan* faults_;
  TransferStats stats_;
};

// Connections over hosts (datacenter/shard_host.h).
class HostConnectionFactory : public ShardConnectionFactory {
 public:
  explicit HostConnectionFactory(std::vector<datacenter::ShardHost*> hosts) : hosts_(std::move(hosts)) {}
  Result<std::unique_ptr<ShardConnection>> Connect(ShardId s) override {
    if (s < 0 || s >= static_cast<ShardId>(hosts_.size())) return InvalidArgumentError("no such shard");
    return std::unique_ptr<ShardConnection>(new LocalConnection(hosts_[s], nullptr));
  }

 private:
  std::vector<datacenter::ShardHost*> hosts_;
};

class LocalConnectionFactory : public ShardConnectionFactory {
 public:
  LocalConnectionFactory(std::vector<datacenter::Shard*> shards, FaultPlan* faults = nullptr)
      : shards_(std::move(shards)), faults_(faults) {}
  Result<std::unique_ptr<ShardConnection>> Connect(ShardId s) override {
    if (s < 0 || s >= static_cast<ShardId>(shards_.size())) return InvalidArgumentError("no such shard");
    return std::unique_ptr<ShardConnection>(new LocalConnection(shards_[s], faults_));
  }

 private:
  std::vector<datacenter::Shard*> shards_;
  FaultPlan* faults_;
};

}  // namespace geops::worker

#endif  // GEOPS_TESTS_WORKER_LOCAL_CONNECTION_H_
