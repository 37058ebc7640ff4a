// CancellableConnectionFactory: wraps a ShardConnectionFactory so that a
// Python caller can interrupt a PsClient call that is blocked on the shards
// (Ctrl-C while a pull waits for a slow peer).
//
// Every connection it hands out checks a shared CancelFlag before each call
// and answers Cancelled once it is raised; PsClient does not retry
// Cancelled, so the call in progress returns within one slice. A Read whose
// server-side wait may be long is split into waits of at most kSliceMs: the
// shard answers DeadlineExceeded at the end of a slice, the wrapper asks
// again until the caller's whole deadline has passed, and checks the flag
// in between. Each slice that runs out is a refused read on the shard (an
// info line in its log, one more requests_rejected), so a slice is long
// compared with ordinary SSP waits. A call blocked on the wire itself (a
// shard that stopped answering) is not interrupted: it ends at the
// transport's rpc timeout.
//
// Thread-safety: CancelFlag may be raised and cleared from any thread. The
// factory is thread-safe when the wrapped one is; each connection is used by
// one thread at a time, like any ShardConnection.
#ifndef GEOPS_PYTHON_SRC_CANCELLABLE_CONNECTION_H_
#define GEOPS_PYTHON_SRC_CANCELLABLE_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "worker/shard_connection.h"

namespace geops::python {

class CancelFlag {
 public:
  void Raise() { raised_.store(true, std::memory_order_release); }
  void Clear() { raised_.store(false, std::memory_order_release); }
  bool raised() const { return raised_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> raised_{false};
};

class CancellableConnectionFactory : public worker::ShardConnectionFactory {
 public:
  // Longest single server-side wait of a Read, ms: the interrupt latency.
  static constexpr int64_t kSliceMs = 1000;

  // `inner` and `flag` must outlive the factory and its connections.
  CancellableConnectionFactory(worker::ShardConnectionFactory* inner, const CancelFlag* flag)
      : inner_(inner), flag_(flag) {}

  // Cancelled when the flag is raised; otherwise what `inner` answers.
  Result<std::unique_ptr<worker::ShardConnection>> Connect(ShardId shard) override;

 private:
  worker::ShardConnectionFactory* const inner_;
  const CancelFlag* const flag_;
};

}  // namespace geops::python

#endif  // GEOPS_PYTHON_SRC_CANCELLABLE_CONNECTION_H_
