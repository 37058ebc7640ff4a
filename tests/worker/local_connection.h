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
#include "worker/shard_connection.h"

namespace geops::worker {

struct FaultPlan {
  std::atomic<int> fail_before{0};  // next N calls fail with Unavailable, not delivered
  std::atomic<int> lose_reply{0};   // next N calls are delivered, reply lost (Unavailable)
  std::atomic<int64_t> calls{0};
};

class LocalConnection : public ShardConnection {
 public:
  LocalConnection(datacenter::Shard* shard, FaultPlan* faults) : shard_(shard), faults_(faults) {}

  Result<RegisterReply> Register(WorkerId w, uint64_t fp, const std::string& token) override {
    return Call([&] { return shard_->RegisterWorker(w, fp, token); });
  }
  Result<ReadReply> Read(WorkerId w, Clock c, int64_t s, std::span<const ChunkKey> keys, float* out,
                         int64_t deadline_ms) override {
    return Call([&] { return shard_->Read(w, c, s, keys, out, Deadline::InMs(deadline_ms)); });
  }
  Result<UpdateReply> Update(WorkerId w, Clock c, std::span<const ChunkKey> keys,
                             std::span<const float> values) override {
    stats_.bytes_sent += values.size() * sizeof(float);
    return Call([&] { return shard_->Update(w, c, keys, values); });
  }
  Result<Clock> AdvanceClock(WorkerId w, Clock c, bool finished) override {
    return Call([&] { return shard_->AdvanceClock(w, c, finished); });
  }
  Status Heartbeat(WorkerId w) override { return shard_->Heartbeat(w); }
  Result<ShardStatus> GetStatus() override { return shard_->GetStatus(); }
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

  datacenter::Shard* shard_;
  FaultPlan* faults_;
  TransferStats stats_;
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
