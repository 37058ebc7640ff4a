// client_data_plane: how many bytes per second one worker moves between its
// model and a running site through the C++ client (worker::PsClient), the
// reference that experiments/bench/python_data_plane.py (the same loop
// through the Python package) is compared with.
//
// It connects to the site's shards exactly as `geops worker` and the Python
// package do (Thrift connections made with the model's spec, so pulled chunks
// land straight in the cache), registers a client-defined model (topology
// `[model] workload = "client"`) of the given tables, all zeros, and runs
// --warmup untimed clocks, then --clocks timed clocks of:
//   pull    PsClient::ReadAt(clock, 0): a real read of every chunk from the
//           shards at staleness 0 (never a cache hit)
//   modify  write a delta (1e-3) into every element of the application's own
//           delta buffers: what a training step computes
//   push    PsClient::Update(table, 0, delta) for every table: adds the
//           deltas into the op-log and marks every chunk dirty (the push of
//           the C++ client library, client/client.cc)
//   clock   PsClient::Clock(): ship every chunk to its shard, advance the clock
//
// Figures (one JSON line, prefix "@bench ", and a readable summary):
//   bytes              bytes the client's connections sent + received during
//                      the timed clocks (PsClientStats: socket bytes, framing
//                      and keys included; heartbeats too, a few bytes/s)
//   bytes_per_second   bytes / wall seconds of the timed clocks (all phases)
//   seconds_per_clock  wall seconds of one clock
//   pull_s, modify_s, push_s, clock_s   seconds per clock in each phase
//   faults_per_clock   page faults of the process per clock
//
// Usage: client_data_plane --shards=host:port,... --topology=FILE
//          [--tables=t0:4000x1000,t1:3000x1000,t2:2000x1000,t3:1000x1000]
//          [--clocks=20] [--warmup=3] [--chunk_bytes=N (default: the topology's)]
// The site must be fresh (no model fixed yet, or this same one at clock 0).
#include <algorithm>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/model_spec.h"
#include "common/options.h"
#include "config/model_from_topology.h"
#include "config/topology.h"
#include "experiments/bench/measure.h"
#include "thrift/shard_connection_factory.h"
#include "worker/ps_client.h"

namespace geops::bench {
namespace {

struct Args {
  std::string shards;
  std::string topology;
  std::string tables = "t0:4000x1000,t1:3000x1000,t2:2000x1000,t3:1000x1000";
  int64_t clocks = 20;
  int64_t warmup = 3;
  int64_t chunk_bytes = 0;  // 0: the topology's chunk_kib
};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "client_data_plane: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) Fail(std::string(what) + ": " + s.ToString());
}

template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) Fail(std::string(what) + ": " + r.status().ToString());
  return std::move(r).value();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      Fail("missing value for " + arg);
    }
    if (arg == "--shards") {
      a.shards = value;
    } else if (arg == "--topology") {
      a.topology = value;
    } else if (arg == "--tables") {
      a.tables = value;
    } else if (arg == "--clocks") {
      a.clocks = std::stoll(value);
    } else if (arg == "--warmup") {
      a.warmup = std::stoll(value);
    } else if (arg == "--chunk_bytes") {
      a.chunk_bytes = std::stoll(value);
    } else {
      Fail("unknown flag " + arg);
    }
  }
  if (a.shards.empty() || a.topology.empty()) Fail("--shards and --topology are required");
  if (a.clocks < 1 || a.warmup < 0) Fail("--clocks must be >= 1 and --warmup >= 0");
  return a;
}

// "name:ROWSxCOLS,..." -> client-defined tables (values provided by the client).
std::vector<TableSpec> ParseTables(const std::string& text) {
  std::vector<TableSpec> tables;
  for (const std::string& item : Split(text, ',')) {
    const size_t colon = item.find(':');
    const size_t x = item.find('x', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || x == std::string::npos) Fail("bad table '" + item + "' (name:ROWSxCOLS)");
    TableSpec t;
    t.name = item.substr(0, colon);
    t.rows = std::stoll(item.substr(colon + 1, x - colon - 1));
    t.cols = std::stoll(item.substr(x + 1));
    t.init = InitKind::kProvided;
    tables.push_back(std::move(t));
  }
  if (tables.empty()) Fail("no tables");
  return tables;
}

// Page faults of this process so far (a buffer freed and allocated again
// every clock shows here: each new page is a fault).
int64_t MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct Phases {
  double pull = 0, modify = 0, push = 0, clock = 0;
};

int Run(const Args& args) {
  const config::Topology topology = Must(config::LoadTopology(args.topology), "topology");
  if (!topology.client_model()) Fail(args.topology + ": needs [model] workload = \"client\"");
  if (topology.sites.size() != 1) Fail(args.topology + ": needs exactly one site");
  const std::vector<std::string> shards = Split(args.shards, ',');
  if (static_cast<int>(shards.size()) != topology.sites[0].shards) {
    Fail("--shards names " + std::to_string(shards.size()) + " addresses; the site has " +
         std::to_string(topology.sites[0].shards) + " shards");
  }
  const int64_t chunk_bytes = args.chunk_bytes > 0 ? args.chunk_bytes : topology.chunk_kib * 1024;

  // The model and its schema exactly as the Python package builds them
  // (python/src/model_schema.cc: kProvided tables, seed 0, checksums of the
  // initial values), so both sides register identical models.
  std::vector<TableSpec> tables = ParseTables(args.tables);
  std::vector<std::vector<float>> initial;
  std::vector<const float*> initial_ptrs;
  int64_t elements = 0;
  for (TableSpec& t : tables) {
    initial.emplace_back(static_cast<size_t>(t.rows * t.cols), 0.0f);
    t.init_checksum = ValuesChecksum(initial.back());
    initial_ptrs.push_back(initial.back().data());
    elements += t.rows * t.cols;
  }
  const ModelSpec spec = Must(ModelSpec::Create(tables, chunk_bytes, 0), "model");

  WorkerClientOptions options = config::BuildClientOptions(topology, 0);
  rpc::ThriftClientOptions thrift_options;
  thrift_options.rpc_timeout_ms = options.rpc_timeout_ms;
  auto factory = Must(rpc::ThriftShardConnectionFactory::Create(shards, thrift_options,
                                                                std::make_shared<const ModelSpec>(spec)),
                      "connections");
  auto client = Must(worker::PsClient::Create(spec, static_cast<int>(shards.size()), options, factory.get()),
                     "client");
  Check(client->Start(initial_ptrs), "start");
  initial.clear();  // the client holds its own copy (its cache)

  // The application's deltas, one buffer per table.
  std::vector<std::vector<float>> deltas;
  for (const TableSpec& t : spec.tables()) deltas.emplace_back(static_cast<size_t>(t.rows * t.cols), 0.0f);

  auto one_clock = [&](Phases* p) {
    SteadyTime t0 = std::chrono::steady_clock::now();
    Check(client->ReadAt(client->clock(), 0), "pull");
    SteadyTime t1 = std::chrono::steady_clock::now();
    for (std::vector<float>& d : deltas) std::fill(d.begin(), d.end(), 1e-3f);
    SteadyTime t2 = std::chrono::steady_clock::now();
    for (TableId t = 0; t < static_cast<TableId>(deltas.size()); ++t) Check(client->Update(t, 0, deltas[t]), "push");
    SteadyTime t3 = std::chrono::steady_clock::now();
    Check(client->Clock(false), "clock");
    if (p != nullptr) {
      p->pull += std::chrono::duration<double>(t1 - t0).count();
      p->modify += std::chrono::duration<double>(t2 - t1).count();
      p->push += std::chrono::duration<double>(t3 - t2).count();
      p->clock += Since(t3);
    }
  };

  for (int64_t i = 0; i < args.warmup; ++i) one_clock(nullptr);
  const worker::PsClientStats before = client->stats();
  const int64_t faults_before = MinorFaults();
  Phases phases;
  SteadyTime start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < args.clocks; ++i) one_clock(&phases);
  const double seconds = Since(start);
  const worker::PsClientStats after = client->stats();
  const int64_t faults = MinorFaults() - faults_before;
  if (after.refreshes - before.refreshes != args.clocks) {
    Fail("expected one read from the shards per clock, got " + std::to_string(after.refreshes - before.refreshes));
  }

  const int64_t bytes = (after.bytes_sent - before.bytes_sent) + (after.bytes_received - before.bytes_received);
  const double n = static_cast<double>(args.clocks);
  std::printf(
      "@bench {\"side\":\"cpp\",\"elements\":%lld,\"tables\":%d,\"chunk_bytes\":%lld,\"shards\":%zu,"
      "\"clocks\":%lld,\"bytes\":%lld,\"bytes_sent\":%lld,\"bytes_received\":%lld,\"seconds\":%.6f,"
      "\"bytes_per_second\":%.1f,\"seconds_per_clock\":%.6f,\"pull_s\":%.6f,\"modify_s\":%.6f,"
      "\"push_s\":%.6f,\"clock_s\":%.6f,\"faults_per_clock\":%.1f}\n",
      static_cast<long long>(elements), spec.num_tables(), static_cast<long long>(chunk_bytes), shards.size(),
      static_cast<long long>(args.clocks), static_cast<long long>(bytes),
      static_cast<long long>(after.bytes_sent - before.bytes_sent),
      static_cast<long long>(after.bytes_received - before.bytes_received), seconds, bytes / seconds, seconds / n,
      phases.pull / n, phases.modify / n, phases.push / n, phases.clock / n, static_cast<double>(faults) / n);
  std::printf("C++ client: %lld parameters in %d tables, %lld clocks: %.3f GB/s, %.1f ms/clock "
              "(pull %.1f, modify %.1f, push %.1f, clock %.1f)\n",
              static_cast<long long>(elements), spec.num_tables(), static_cast<long long>(args.clocks),
              bytes / seconds / 1e9, 1000 * seconds / n, 1000 * phases.pull / n, 1000 * phases.modify / n,
              1000 * phases.push / n, 1000 * phases.clock / n);
  std::fflush(stdout);
  client.reset();  // stops heartbeats before the connections go
  return 0;
}

}  // namespace
}  // namespace geops::bench

int main(int argc, char** argv) { return geops::bench::Run(geops::bench::Parse(argc, argv)); }
