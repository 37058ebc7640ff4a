// geops::client::Client (include/geops/client.h): a thin facade over the
// worker client that `geops worker` and the Python package use,
// worker::PsClient (cache, op-log, SSP reads, retries, heartbeats), with its
// Thrift connections (thrift/shard_connection_factory.h). This file only converts: public
// tables into a client-defined ModelSpec (every table InitKind::kProvided,
// fixed by the checksum of its initial values), Options into
// WorkerClientOptions, Status into exceptions.
#include "geops/client.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/throw_status.h"
#include "common/model_spec.h"
#include "common/options.h"
#include "common/float_kernels.h"
#include "thrift/shard_connection_factory.h"
#include "worker/ps_client.h"

namespace geops::client {
namespace {

// The model the application brings: every table kProvided, with the
// checksum of its initial values. Seed 0, as every client-defined model
// (the Python package's too), so that all workers get one fingerprint.
ModelSpec BuildSpec(const std::vector<Table>& tables, int64_t chunk_bytes) {
  if (tables.empty()) ThrowIfError(InvalidArgumentError("the model has no tables"));
  std::vector<TableSpec> specs;
  for (const Table& t : tables) specs.push_back({t.name, t.rows, t.cols, InitKind::kProvided, 0.0f, 0});
  // Checks names and shapes before the sizes below are computed from them.
  ValueOrThrow(ModelSpec::Create(specs, chunk_bytes, 0));
  for (size_t i = 0; i < tables.size(); ++i) {
    const Table& t = tables[i];
    if (static_cast<int64_t>(t.initial_values.size()) != t.rows * t.cols) {
      ThrowIfError(InvalidArgumentError("table '" + t.name + "' has " + std::to_string(t.initial_values.size()) +
                                        " initial values, its shape " + std::to_string(t.rows) + "x" +
                                        std::to_string(t.cols) + " needs " + std::to_string(t.rows * t.cols)));
    }
    specs[i].init_checksum = ValuesChecksum(t.initial_values);
  }
  return ValueOrThrow(ModelSpec::Create(std::move(specs), chunk_bytes, 0));
}

WorkerClientOptions BuildWorkerOptions(const Options& o) {
  WorkerClientOptions w;
  w.worker_id = o.worker;
  w.staleness = o.staleness;
  w.rpc_timeout_ms = o.rpc_timeout_ms;
  w.retry_window_ms = o.retry_window_ms;
  w.heartbeat_ms = o.heartbeat_ms;
  w.auth_token = o.auth_token;
  ThrowIfError(w.Validate());
  return w;
}

}  // namespace

class Client::Impl {
 public:
  ModelSpec spec;
  bool finished = false;
  // The connections outlive the client that uses them (declared first,
  // destroyed last).
  std::unique_ptr<rpc::ThriftShardConnectionFactory> factory;
  std::unique_ptr<worker::PsClient> ps;

  TableId Checked(int table) const {
    if (table < 0 || table >= spec.num_tables()) {
      ThrowIfError(OutOfRangeError("table " + std::to_string(table) + " of a model of " +
                                   std::to_string(spec.num_tables()) + " tables"));
    }
    return static_cast<TableId>(table);
  }
  void CheckNotFinished(const char* call) const {
    if (finished) ThrowIfError(FailedPreconditionError(std::string(call) + " after Finish()"));
  }
};

Client Client::Connect(const Options& options, std::vector<Table> tables) {
  if (options.shards.empty()) {
    ThrowIfError(InvalidArgumentError("Options.shards is empty: give the host:port of every shard of the site"));
  }
  auto impl = std::make_unique<Impl>();
  impl->spec = BuildSpec(tables, options.chunk_bytes);
  const WorkerClientOptions worker_options = BuildWorkerOptions(options);

  rpc::ThriftClientOptions thrift_options;
  thrift_options.rpc_timeout_ms = options.rpc_timeout_ms;
  thrift_options.tls.ca_file = options.tls_ca_file;
  thrift_options.tls.cert_file = options.tls_cert_file;
  thrift_options.tls.key_file = options.tls_key_file;
  thrift_options.tls.expect_peer = options.tls_expect_peer;
  // With the spec, pulled chunks land straight in the cache, their sizes checked.
  impl->factory = ValueOrThrow(rpc::ThriftShardConnectionFactory::Create(
      options.shards, thrift_options, std::make_shared<const ModelSpec>(impl->spec)));
  impl->ps = ValueOrThrow(worker::PsClient::Create(impl->spec, static_cast<int>(options.shards.size()),
                                                   worker_options, impl->factory.get()));
  // Registers the schema, sends the initial values the shards still lack,
  // registers the worker and resumes at the clock the shards hold for it.
  std::vector<const float*> initial;
  for (const Table& t : tables) initial.push_back(t.initial_values.data());
  ThrowIfError(impl->ps->Start(initial));
  return Client(std::move(impl));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

int Client::num_tables() const { return impl_->spec.num_tables(); }
const std::string& Client::table_name(int table) const { return impl_->spec.table(impl_->Checked(table)).name; }
int64_t Client::rows(int table) const { return impl_->spec.table(impl_->Checked(table)).rows; }
int64_t Client::cols(int table) const { return impl_->spec.table(impl_->Checked(table)).cols; }
int Client::table_index(std::string_view name) const {
  return static_cast<int>(ValueOrThrow(impl_->spec.FindTable(name)));
}

int64_t Client::clock() const { return impl_->ps->clock(); }
bool Client::finished() const { return impl_->finished; }

void Client::Pull() { ThrowIfError(impl_->ps->Refresh()); }

void Client::PullExact(int64_t timeout_ms) {
  // As `geops worker`'s final read: a read that runs into the shards' wait
  // deadline is tried again until timeout_ms has passed.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const Status s = impl_->ps->ReadAt(impl_->ps->clock(), 0);
    if (s.ok()) return;
    if (s.code() != StatusCode::kDeadlineExceeded || std::chrono::steady_clock::now() >= until) {
      ThrowIfError(s.WithContext("exact pull at clock " + std::to_string(impl_->ps->clock())));
    }
  }
}

std::span<const float> Client::values(int table) const {
  const TableId t = impl_->Checked(table);
  const TableSpec& spec = impl_->spec.table(t);
  return {impl_->ps->table(t), static_cast<size_t>(spec.rows * spec.cols)};
}
std::span<const float> Client::values(std::string_view name) const { return values(table_index(name)); }

void Client::Push(int table, std::span<const float> delta) {
  const TableId t = impl_->Checked(table);
  const TableSpec& spec = impl_->spec.table(t);
  if (static_cast<int64_t>(delta.size()) != spec.rows * spec.cols) {
    ThrowIfError(InvalidArgumentError("push to table '" + spec.name + "' of " + std::to_string(delta.size()) +
                                      " values; the table has " + std::to_string(spec.rows * spec.cols)));
  }
  Push(table, 0, delta);
}

void Client::Push(int table, int64_t offset, std::span<const float> delta) {
  impl_->CheckNotFinished("Push()");
  const TableId t = impl_->Checked(table);
  // A NaN would spread to every replica of the model: refuse it here.
  const int64_t bad = FirstNonFinite(delta.data(), static_cast<int64_t>(delta.size()));
  if (bad >= 0) {
    ThrowIfError(InvalidArgumentError("push to table '" + impl_->spec.table(t).name + "' refused, nothing added: " +
                                      "element " + std::to_string(bad) + " of the delta is not finite"));
  }
  ThrowIfError(impl_->ps->Update(t, offset, delta));
}

void Client::Push(std::string_view name, std::span<const float> delta) { Push(table_index(name), delta); }

void Client::Clock() {
  impl_->CheckNotFinished("Clock()");
  ThrowIfError(impl_->ps->Clock(false));
}

void Client::Finish() {
  impl_->CheckNotFinished("Finish()");
  ThrowIfError(impl_->ps->Clock(true));
  impl_->finished = true;
}

Stats Client::stats() const {
  const worker::PsClientStats s = impl_->ps->stats();
  Stats out;
  out.bytes_sent = s.bytes_sent;
  out.bytes_received = s.bytes_received;
  out.pulls_from_shards = s.refreshes;
  out.pulls_from_cache = s.cache_hits;
  out.retries = s.retries;
  out.max_staleness = s.max_staleness;
  out.pull_wait_seconds = s.read_wait_seconds;
  out.clock_seconds = s.flush_seconds;
  return out;
}

}  // namespace geops::client
