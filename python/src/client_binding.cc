// class Client: the Python face of python/src/client.h.
//
// Tensors arrive as objects with the buffer protocol (numpy views that share
// the torch tensors' memory), one per table in model order. Their pointers
// are taken with the GIL held; the copies and RPCs then run without it, and
// the blocking calls through RunInterruptible so Ctrl-C stays prompt.
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "config/model_from_topology.h"
#include "config/tls_options.h"
#include "config/topology.h"
#include "python/src/bindings.h"
#include "python/src/client.h"
#include "python/src/interruptible.h"
#include "python/src/status_error.h"

namespace py = pybind11;

namespace geops::python {
namespace {

using TableTuple = std::tuple<std::string, int64_t, int64_t>;

// Buffers requested from Python objects, released when this goes away.
struct Views {
  std::vector<py::buffer_info> buffers;
  std::vector<TableView> tables;
};

// REQUIRES: the GIL. InvalidArgument naming the table for a buffer that is
// not a writable, C-contiguous float32 array.
Views TakeViews(const py::list& objects, const ModelSpec& spec) {
  Views v;
  v.buffers.reserve(objects.size());
  for (size_t i = 0; i < objects.size(); ++i) {
    const std::string name =
        i < static_cast<size_t>(spec.num_tables()) ? spec.table(static_cast<TableId>(i)).name : std::to_string(i);
    py::buffer_info info;
    try {
      info = py::reinterpret_borrow<py::buffer>(objects[i]).request(/*writable=*/true);
    } catch (const py::error_already_set& e) {
      ThrowIfError(InvalidArgumentError("parameter '" + name + "' is not a writable buffer: " + e.what()));
    }
    if (info.format != py::format_descriptor<float>::format() || info.itemsize != sizeof(float)) {
      ThrowIfError(InvalidArgumentError("parameter '" + name + "' has element format '" + info.format +
                                        "'; geops tables are float32"));
    }
    int64_t expected_stride = sizeof(float);
    for (int d = static_cast<int>(info.ndim) - 1; d >= 0; --d) {
      if (info.shape[d] > 1 && info.strides[d] != expected_stride) {
        ThrowIfError(InvalidArgumentError("parameter '" + name + "' is not contiguous; use .contiguous()"));
      }
      expected_stride *= info.shape[d];
    }
    v.tables.push_back(TableView{static_cast<float*>(info.ptr), static_cast<int64_t>(info.size)});
    v.buffers.push_back(std::move(info));
  }
  return v;
}

// Every call holds its own reference to the client while it runs without
// the GIL, so that close() from another thread (a session left while a
// background thread is still in clock()) cannot free the client under it:
// the client goes when the last call in progress returns.
class PyClient {
 public:
  explicit PyClient(std::unique_ptr<Client> client) : client_(std::move(client)) {}

  // REQUIRES: the GIL (which orders it with Close()).
  std::shared_ptr<Client> client() {
    if (!client_) ThrowIfError(FailedPreconditionError("the geops client is closed"));
    return client_;
  }

  void Start(const py::list& initial) {
    const std::shared_ptr<Client> held = client();
    Client& c = *held;
    Views v = TakeViews(initial, c.spec());
    ThrowIfError(RunInterruptible(c.cancel_flag(), [&] { return c.Start(v.tables); }));
  }

  void Pull(const py::list& out, std::optional<int64_t> staleness, bool discard) {
    const std::shared_ptr<Client> held = client();
    Client& c = *held;
    Views v = TakeViews(out, c.spec());
    const int64_t s = staleness.value_or(Client::kConfiguredStaleness);
    ThrowIfError(RunInterruptible(c.cancel_flag(), [&] { return c.Pull(s, v.tables, discard); }));
  }

  void Snapshot(const py::list& out, int64_t staleness) {
    const std::shared_ptr<Client> held = client();
    Client& c = *held;
    Views v = TakeViews(out, c.spec());
    ThrowIfError(RunInterruptible(c.cancel_flag(), [&] { return c.Snapshot(staleness, v.tables); }));
  }

  void Push(const py::list& in) {
    const std::shared_ptr<Client> held = client();
    Client& c = *held;
    Views v = TakeViews(in, c.spec());
    py::gil_scoped_release release;
    ThrowIfError(c.StagePush(v.tables));
  }

  void Clock(bool finished, const std::optional<py::list>& values) {
    const std::shared_ptr<Client> held = client();
    Client& c = *held;
    Views v;
    if (values) v = TakeViews(*values, c.spec());
    ThrowIfError(RunInterruptible(c.cancel_flag(), [&] { return c.Clock(finished, v.tables); }));
  }

  py::dict Stats() {
    const worker::PsClientStats s = client()->stats();
    py::dict d;
    d["bytes_sent"] = s.bytes_sent;
    d["bytes_received"] = s.bytes_received;
    d["refreshes"] = s.refreshes;
    d["cache_hits"] = s.cache_hits;
    d["retries"] = s.retries;
    d["max_staleness"] = s.max_staleness;
    d["read_wait_seconds"] = s.read_wait_seconds;
    d["flush_seconds"] = s.flush_seconds;
    return d;
  }

  py::list Tables() {
    const std::shared_ptr<Client> held = client();
    const ModelSpec& spec = held->spec();
    py::list out;
    for (const TableSpec& t : spec.tables()) out.append(py::make_tuple(t.name, t.rows, t.cols));
    return out;
  }

  // Later calls raise; a call in progress in another thread finishes first,
  // and the client (heartbeats, connections) goes when it returns.
  void Close() {
    std::shared_ptr<Client> doomed;
    doomed.swap(client_);
    py::gil_scoped_release release;  // joins the heartbeat thread when this is the last reference
    doomed.reset();
  }

 private:
  std::shared_ptr<Client> client_;  // GUARDED_BY(the GIL)
};

std::unique_ptr<PyClient> MakeClient(const std::vector<TableTuple>& tables, const std::vector<std::string>& shards,
                                     int worker, int64_t staleness, int64_t rpc_timeout_ms, int64_t heartbeat_ms,
                                     int max_attempts, int64_t retry_backoff_ms, const std::string& auth_token,
                                     int64_t chunk_bytes, const std::string& topology, int64_t retry_window_ms,
                                     const std::string& site, bool takeover, int64_t held_id_wait_ms,
                                     const std::vector<bool>& buffers, double buffer_scale) {
  ClientConfig config;
  for (const auto& [name, rows, cols] : tables) config.tables.push_back(TableShape{name, rows, cols});
  config.shards = shards;
  config.options.worker_id = worker;
  config.options.staleness = staleness;
  config.options.rpc_timeout_ms = rpc_timeout_ms;
  config.options.heartbeat_ms = heartbeat_ms;
  config.options.max_attempts = max_attempts;
  config.options.retry_backoff_ms = retry_backoff_ms;
  config.options.retry_window_ms = retry_window_ms;
  config.options.auth_token = auth_token;
  config.options.takeover = takeover;
  config.options.held_id_wait_ms = held_id_wait_ms;
  config.buffer_tables.assign(buffers.begin(), buffers.end());
  if (!(buffer_scale > 0 && buffer_scale <= 1)) {
    ThrowIfError(InvalidArgumentError("buffer_scale must be in (0, 1], got " + std::to_string(buffer_scale)));
  }
  config.buffer_scale = static_cast<float>(buffer_scale);
  config.chunk_bytes = chunk_bytes;
  if (!topology.empty()) {
    const config::Topology t = ValueOrThrow(config::LoadTopology(topology));
    if (!t.client_model()) config.site_model = ValueOrThrow(config::BuildModelSpec(t));
    if (t.tls()) {
      // The worker's own certificate: its shards accept it for this worker only.
      const int index = ValueOrThrow(t.FindSite(site.empty() ? t.sites[0].name : site));
      config.tls = config::WorkerTls(t, index, worker);
    }
  }
  return std::make_unique<PyClient>(ValueOrThrow(Client::Create(std::move(config))));
}

}  // namespace

void RegisterClient(py::module_& m) {
  py::class_<PyClient>(m, "Client", "One worker's connection to its site's shards (worker/ps_client.h).")
      .def(py::init(&MakeClient), py::kw_only(), py::arg("tables"), py::arg("shards"), py::arg("worker"),
           py::arg("staleness"), py::arg("rpc_timeout_ms"), py::arg("heartbeat_ms"), py::arg("max_attempts"),
           py::arg("retry_backoff_ms"), py::arg("auth_token"), py::arg("chunk_bytes"),
           py::arg("topology") = "", py::arg("retry_window_ms") = WorkerClientOptions().retry_window_ms,
           py::arg("site") = "", py::arg("takeover") = false,
           py::arg("held_id_wait_ms") = WorkerClientOptions().held_id_wait_ms,
           py::arg("buffers") = std::vector<bool>(), py::arg("buffer_scale") = 1.0)
      .def("start", &PyClient::Start, py::arg("initial"), "Registers with every shard (blocks).")
      .def("pull", &PyClient::Pull, py::arg("out"), py::arg("staleness") = py::none(), py::arg("discard") = false,
           "Makes the cache fresh (SSP, or the given staleness) and copies it into `out` (blocks); refused "
           "when `out` holds a change not pushed, unless `discard`.")
      .def("push", &PyClient::Push, py::arg("values"), "Stages values - pulled values as this clock's delta.")
      .def("snapshot", &PyClient::Snapshot, py::arg("out"), py::arg("staleness") = 0,
           "Reads the site's replica into `out` (other buffers than the model's), at this clock (blocks).")
      .def("clock", &PyClient::Clock, py::arg("finished") = false, py::arg("values") = py::none(),
           "Ships the delta and advances the clock (blocks); with `values`, refused when they hold a change "
           "that would be lost.")
      .def_property_readonly("current_clock", [](PyClient& c) { return c.client()->clock(); })
      .def_property_readonly("tables", &PyClient::Tables)
      .def("stats", &PyClient::Stats)
      .def("close", &PyClient::Close, "Stops heartbeats and closes connections; later calls raise.");
}

}  // namespace geops::python
