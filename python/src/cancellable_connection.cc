#include "python/src/cancellable_connection.h"

#include <algorithm>
#include <string>

#include "common/deadline.h"

namespace geops::python {
namespace {

Status Interrupted() { return CancelledError("interrupted (KeyboardInterrupt)"); }

class CancellableConnection : public worker::ShardConnection {
 public:
  using worker::ShardConnection::Update;
  CancellableConnection(std::unique_ptr<worker::ShardConnection> inner, const CancelFlag* flag)
      : inner_(std::move(inner)), flag_(flag) {}

  Result<RegisterReply> Register(WorkerId worker, uint64_t model_fingerprint, const std::string& auth_token,
                                 const WorkerSession& session = {}) override {
    if (flag_->raised()) return Interrupted();
    return inner_->Register(worker, model_fingerprint, auth_token, session);
  }

  Result<SchemaReply> RegisterSchema(WorkerId worker, const ModelSpec& spec,
                                     const std::string& auth_token) override {
    if (flag_->raised()) return Interrupted();
    return inner_->RegisterSchema(worker, spec, auth_token);
  }

  Result<int64_t> InitValues(WorkerId worker, uint64_t model_fingerprint, std::span<const ChunkKey> keys,
                             std::span<const float> values, const std::string& auth_token) override {
    if (flag_->raised()) return Interrupted();
    return inner_->InitValues(worker, model_fingerprint, keys, values, auth_token);
  }

  Result<ReadReply> Read(WorkerId worker, geops::Clock clock, int64_t staleness,
                         std::span<const ChunkKey> keys, float* out, int64_t deadline_ms) override {
    return InSlices(deadline_ms, [&](int64_t ms) { return inner_->Read(worker, clock, staleness, keys, out, ms); });
  }

  // A slice that ran out at the shard changed nothing there (the wait comes
  // before the reply is made), so the next slice repeats `since` safely.
  Result<ReadReply> ReadChanged(WorkerId worker, geops::Clock clock, int64_t staleness,
                                std::span<const ChunkKey> keys, uint64_t since, ChangedValues* out,
                                int64_t deadline_ms) override {
    return InSlices(deadline_ms, [&](int64_t ms) {
      return inner_->ReadChanged(worker, clock, staleness, keys, since, out, ms);
    });
  }

  Result<UpdateReply> Update(WorkerId worker, geops::Clock clock, std::span<const ChunkKey> keys,
                             std::span<const float> values, int32_t part) override {
    if (flag_->raised()) return Interrupted();
    return inner_->Update(worker, clock, keys, values, part);
  }

  Result<UpdateReply> UpdateThenClock(WorkerId worker, geops::Clock clock, std::span<const ChunkKey> keys,
                                      std::span<const float> values, int32_t part, bool finished) override {
    if (flag_->raised()) return Interrupted();
    return inner_->UpdateThenClock(worker, clock, keys, values, part, finished);
  }

  Result<geops::Clock> AdvanceClock(WorkerId worker, geops::Clock new_clock, bool finished) override {
    if (flag_->raised()) return Interrupted();
    return inner_->AdvanceClock(worker, new_clock, finished);
  }

  Status Heartbeat(WorkerId worker, uint64_t session = 0) override { return inner_->Heartbeat(worker, session); }

  Result<ShardStatus> GetStatus() override {
    if (flag_->raised()) return Interrupted();
    return inner_->GetStatus();
  }

  worker::TransferStats stats() const override { return inner_->stats(); }

 private:
  // Calls read(ms) in slices of at most kSliceMs until it answers other
  // than DeadlineExceeded, the deadline passes or the flag is raised.
  template <typename ReadFn>
  Result<ReadReply> InSlices(int64_t deadline_ms, ReadFn&& read) {
    if (deadline_ms < 0) return read(deadline_ms);
    const Deadline deadline = Deadline::InMs(deadline_ms);
    const double start = NowSeconds();
    for (;;) {
      if (flag_->raised()) return Interrupted();
      const int64_t left = deadline.RemainingMs();
      const int64_t slice = std::min(left, CancellableConnectionFactory::kSliceMs);
      Result<ReadReply> r = read(slice);
      if (r.ok() || r.status().code() != StatusCode::kDeadlineExceeded) return r;
      if (slice >= left || deadline.Expired()) {
        const int64_t waited_ms = static_cast<int64_t>((NowSeconds() - start) * 1000);
        return r.status().WithContext("read waited " + std::to_string(waited_ms) + " ms in all");
      }
    }
  }
  const std::unique_ptr<worker::ShardConnection> inner_;
  const CancelFlag* const flag_;
};

}  // namespace

Result<std::unique_ptr<worker::ShardConnection>> CancellableConnectionFactory::Connect(ShardId shard) {
  if (flag_->raised()) return Interrupted();
  Result<std::unique_ptr<worker::ShardConnection>> inner = inner_->Connect(shard);
  if (!inner.ok()) return inner.status();
  return std::unique_ptr<worker::ShardConnection>(
      new CancellableConnection(std::move(inner).value(), flag_));
}

}  // namespace geops::python
