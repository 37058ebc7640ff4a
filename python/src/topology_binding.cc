// load_topology(path) -> dict: what a Python worker needs from a topology
// file, read by the same parser and checks as `geops site` and `geops worker`
// (config/topology.h), so both sides agree on every default.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "config/model_from_topology.h"
#include "config/topology.h"
#include "python/src/bindings.h"
#include "python/src/status_error.h"

namespace py = pybind11;

namespace geops::python {
namespace {

py::dict SiteDict(const config::SiteSpec& s) {
  py::dict d;
  d["name"] = s.name;
  d["host"] = s.host;
  d["base_port"] = s.base_port;
  d["shards"] = s.shards;
  d["workers"] = s.workers;
  return d;
}

py::dict TopologyDict(const config::Topology& t) {
  py::dict d;
  d["name"] = t.name;
  d["path"] = t.path;
  d["workload"] = t.workload;
  d["clocks"] = t.clocks;
  d["staleness"] = t.staleness;
  d["chunk_bytes"] = t.chunk_kib * 1024;
  d["rpc_timeout_ms"] = t.rpc_timeout_ms;
  d["worker_lease_ms"] = t.worker_lease_ms;
  d["auth_token"] = t.auth_token;
  d["learning_rate"] = t.learning_rate;
  d["final_learning_rate"] = t.final_learning_rate;
  d["batch_size"] = t.batch_size;
  py::list sites;
  for (const config::SiteSpec& s : t.sites) sites.append(SiteDict(s));
  d["sites"] = sites;
  // Retry and heartbeat settings as `geops worker` derives them (they do not
  // depend on the worker index).
  const WorkerClientOptions o = config::BuildClientOptions(t, 0);
  d["heartbeat_ms"] = o.heartbeat_ms;
  d["max_attempts"] = o.max_attempts;
  d["retry_window_ms"] = o.retry_window_ms;
  d["retry_backoff_ms"] = o.retry_backoff_ms;
  return d;
}

}  // namespace

void RegisterTopology(py::module_& m) {
  m.def(
      "load_topology",
      [](const std::string& path) { return TopologyDict(ValueOrThrow(config::LoadTopology(path))); },
      py::arg("path"),
      "Reads a topology TOML file. Raises InvalidArgumentError (naming file and line) for a bad one.");
}

}  // namespace geops::python
