// Client: what the Python package drives. It owns one worker::PsClient (the
// same client `geops worker` uses: cache, op-log, retries, heartbeats), its
// Thrift connections, and the cancel flag that lets Ctrl-C interrupt it.
//
// The model's values live in the caller's memory (torch tensors), passed to
// each call as TableViews, one per table in spec order:
//   Pull      makes the cache fresh enough (SSP) and copies it into the views;
//   StagePush writes view - cache into the op-log: the change the local step
//             made since the values were pulled (or since the last Clock,
//             which adds the pushed deltas to the cache); for a buffer table
//             (config.buffer_tables) scaled by config.buffer_scale;
//   Clock     ships the op-log and advances the clock.
// Push again in the same clock replaces the staged delta; a pull between a
// push and the clock is refused, since it would overwrite the values the
// staged delta was taken from.
//
// No local change is lost without an error: the client remembers what the
// views held when it last wrote them (a pull: the cache) or took them (a
// push: a checksum of each table), and refuses, naming the parameter,
//   - a Pull while the views differ from that (a change made since the last
//     pull and not pushed, e.g. opt.step() then pull()), unless told to
//     discard it;
//   - a Clock whose views differ from what the push staged (a change made
//     after push()), or, without a push in this clock, from what was
//     pulled (a change never pushed).
// The first pull after Start may overwrite anything (it brings the site's
// values into a fresh model).
//
// Errors are Status values (python/src/status_error.h turns them into
// Python exceptions). Thread-safety: one thread drives a Client, as for
// PsClient; the cancel flag may be raised from any thread.
#ifndef GEOPS_PYTHON_SRC_CLIENT_H_
#define GEOPS_PYTHON_SRC_CLIENT_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/model_spec.h"
#include "common/options.h"
#include "common/status.h"
#include "thrift/thrift_options.h"
#include "python/src/cancellable_connection.h"
#include "python/src/model_schema.h"
#include "worker/ps_client.h"

namespace geops::rpc {
class ThriftShardConnectionFactory;
}  // namespace geops::rpc

namespace geops::python {

struct ClientConfig {
  std::vector<TableShape> tables;   // the Python model, in parameter order
  std::vector<std::string> shards;  // "host:port" of shard i of the site
  WorkerClientOptions options;      // worker id, staleness, timeouts, token
  int64_t chunk_bytes = kDefaultChunkBytes;
  std::optional<ModelSpec> site_model;  // see model_schema.h
  rpc::TlsOptions tls;                   // mutual TLS of this worker (config/tls_options.h); off when empty
  // Tables that hold running statistics (BatchNorm buffers), by index; empty:
  // none. Their pushed change is scaled by buffer_scale (1 / every worker of
  // every site), so the shards keep the average of the workers' values, not
  // the sum of their changes; a change to them is never refused as lost.
  std::vector<uint8_t> buffer_tables;
  float buffer_scale = 1.0f;
};

// One table's values in the caller's memory: `size` contiguous floats.
struct TableView {
  float* data = nullptr;
  int64_t size = 0;
};

class Client {
 public:
  // Pull's staleness when the options' staleness applies.
  static constexpr int64_t kConfiguredStaleness = std::numeric_limits<int64_t>::min();

  // InvalidArgument for bad options, addresses or shapes; FailedPrecondition
  // when the model differs from the site's (model_schema.h). No I/O: the
  // connections are made by Start.
  static Result<std::unique_ptr<Client>> Create(ClientConfig config);
  ~Client();

  const ModelSpec& spec() const { return spec_; }
  CancelFlag* cancel_flag() { return &cancel_; }
  // 0 and empty counters before Start.
  geops::Clock clock() const { return client_ ? client_->clock() : 0; }
  worker::PsClientStats stats() const { return client_ ? client_->stats() : worker::PsClientStats{}; }

  // Registers with every shard (blocking, with PsClient's retries). For a
  // model the workers bring (no built-in site model), `initial` are the
  // model's own initial values: their checksums complete the schema, the
  // first worker's values become every replica's start, and a worker whose
  // values differ is refused naming the table. For a built-in site model the
  // shards keep theirs, which the first Pull brings into the model.
  // InvalidArgument when a view's size is wrong; FailedPrecondition when
  // started already; the shards' errors else (Start may then be retried).
  Status Start(std::span<const TableView> initial);

  // Makes the cache fresh and copies it into `views`: with
  // kConfiguredStaleness per SSP (a cache hit when allowed), else reads at
  // the current clock with that staleness, waiting up to rpc_timeout_ms per
  // attempt. A read from the shards writes each chunk into the cache and the
  // views in one pass; a cache hit copies the cache. Blocks. On error (or
  // cancellation) some chunks may have been written to both the cache and
  // the views, never to one alone. FailedPrecondition after StagePush in
  // the same clock, and (unless `discard`) when the views hold a change not
  // pushed (see the class comment), naming the parameter; nothing is read
  // or written then. (Pull, CopyOut, StagePush and Clock are
  // FailedPrecondition before Start.)
  Status Pull(int64_t staleness, std::span<const TableView> views, bool discard = false);
  // Reads the site's replica into `out` (not the model's own tensors): at
  // the current clock with `staleness`, every table, from the shards.
  // The local-change check of the model's tensors is kept (its baseline
  // moves from the cache to checksums of what the cache held). Blocks.
  // FailedPrecondition between StagePush and Clock; errors as Pull's.
  Status Snapshot(int64_t staleness, std::span<const TableView> out);
  // Copies the cache into `views`. InvalidArgument naming the table when a
  // size is wrong (nothing copied). Does not block.
  Status CopyOut(std::span<const TableView> views) const;

  // Stages view - cache for every table (see class comment). Refused with
  // InvalidArgument, nothing staged, when a size is wrong or any value is
  // NaN or +-Inf (naming the table and element). Does not block.
  Status StagePush(std::span<const TableView> views);

  // Ships the staged deltas and advances the clock (`finished`: the last
  // one). Blocks. On error nothing changes and Clock may be called again.
  // With `views` (the model's tensors), first refuses with
  // FailedPrecondition, naming the parameter, a change that would be lost
  // (see the class comment); without them nothing is checked.
  Status Clock(bool finished, std::span<const TableView> views = {});

 private:
  Client() = default;
  Status CheckViews(std::span<const TableView> views) const;
  Status CheckStarted() const;
  // FailedPrecondition naming the first table whose view differs from the
  // baseline (see the class comment); `what` says which call refuses.
  Status CheckNoLocalChange(std::span<const TableView> views, const std::string& what) const;
  Status CheckSamePushed(std::span<const TableView> views) const;
  bool IsBuffer(TableId t) const;

  ClientConfig config_;
  ModelSpec spec_;  // for a client-defined model, Start adds the checksums

  std::unique_ptr<rpc::ThriftShardConnectionFactory> thrift_;
  CancelFlag cancel_;
  std::unique_ptr<CancellableConnectionFactory> factory_;
  std::unique_ptr<worker::PsClient> client_;  // made by Start; destroyed first (declared last)
  bool staged_ = false;  // StagePush since the last Clock
  // What the views must hold for no local change to be lost: nothing known
  // (before the first pull), the cache (after a pull), or the tables whose
  // checksums pushed_sums_ keeps (after a push and its clock).
  enum class Baseline { kNone, kCache, kPushed };
  Baseline baseline_ = Baseline::kNone;
  std::vector<uint64_t> staged_sums_;  // ChangeSum (client.cc) of each view at the last StagePush
  std::vector<uint64_t> pushed_sums_;  // the same, of the last push a Clock shipped
};

}  // namespace geops::python

#endif  // GEOPS_PYTHON_SRC_CLIENT_H_
