// geops::client::Options: where a worker's site is and how it talks to it.
//
// A geops site is a set of shard processes (`geops site ... --shard i`), each
// holding a part of the model. An application connects as one of the site's
// workers (worker index 0 .. workers-1, as the site's topology declares) and
// needs the address of every shard, in shard order. Three ways to fill
// Options:
//
//   Options o;                                   // by hand
//   o.shards = {"10.0.0.5:9000", "10.0.0.6:9000"};
//   o.worker = 1;
//
//   Options o = OptionsFromTopology("topology.toml", "us-east-1", 1);
//
//   Options o = OptionsFromEnvironment();        // under `geops launch`
//
// The topology file is the same TOML file `geops site` and `geops launch`
// read; the settings that concern a worker (staleness, timeouts, token,
// chunk size, clock budget) come from it, so that the application and the
// shards agree on them.
#ifndef GEOPS_CLIENT_OPTIONS_H_
#define GEOPS_CLIENT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace geops::client {

// Staleness that never waits: every pull reads the shards' current values.
inline constexpr int64_t kAsync = -1;

struct Options {
  // "host:port" of shard i of the site, for every shard, in order. Required.
  std::vector<std::string> shards;
  // This worker's index within the site, in [0, workers of the site).
  int worker = 0;
  // Stale synchronous parallel bound s: at clock c a pull sees every update
  // of every worker of the site through clock c - s - 1 (waiting for slow
  // workers if needed). 0 is bulk synchronous; kAsync never waits.
  int64_t staleness = 0;
  // Deadline of one call to a shard, server-side waits included.
  int64_t rpc_timeout_ms = 30000;
  // A shard that cannot be reached (down, restarting) is retried with
  // back-off (doubling to 0.5 s) for this long before a call fails: long
  // enough for a supervisor to restart it.
  int64_t retry_window_ms = 300000;
  // How often the client tells the shards it is alive while the application
  // computes; must be well below the site's worker lease.
  int64_t heartbeat_ms = 1000;
  // Shared secret the site expects from its workers ("" when it has none).
  std::string auth_token;
  // Tables are cut into chunks of whole rows of about this many bytes, the
  // unit a shard owns and ships. Every worker of a site must use the same.
  int64_t chunk_bytes = 16 * 1024;
  // The topology's clock budget ([training] clocks), for the application's
  // loop; 0 when not read from a topology. The client does not enforce it.
  int64_t clocks = 0;
  // Mutual TLS (docs/security.md): the deployment's CA, this worker's
  // certificate and key, as `geops certs` writes them; all empty for a
  // plaintext site. OptionsFromTopology fills them from [security] certs.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // The identity the shards' certificate must carry ("geops://site/NAME").
  std::string tls_expect_peer;
};

// Options for worker `worker` of site `site` (empty: the topology's only
// site) of a topology file. The shard addresses are the site's
// host:base_port+i; when the site has base_port 0 (shards on ports the
// kernel picks) they are left empty for the caller to fill. Throws Error:
// kInvalidArgument naming the file and line for a bad file, kNotFound for an
// unknown site, kInvalidArgument for a worker index outside the site.
Options OptionsFromTopology(const std::string& topology_path, const std::string& site = "", int worker = 0);

// Options from the environment `geops launch` gives a worker that runs the
// topology's `[training] command`: GEOPS_TOPOLOGY and GEOPS_SITE (read as by
// OptionsFromTopology when set), GEOPS_WORKER, GEOPS_SHARDS
// ("host:port,host:port", which wins over the topology's addresses) and
// GEOPS_CLOCKS. Unset variables keep the defaults. Throws Error
// (kInvalidArgument) for a value that does not parse.
Options OptionsFromEnvironment();

}  // namespace geops::client

#endif  // GEOPS_CLIENT_OPTIONS_H_
