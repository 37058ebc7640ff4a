// `geops worker --check`: prints what a site's shards hold, table by table,
// and for the counter workload says whether every value is the exact end
// count. It registers no worker and waits for no clock or WAN gate, so an
// operator can run it against a live site at any moment; with --wait it
// polls until the counter is exact (the site has drained) or time is up.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "config/client_options.h"
#include "config/model_from_topology.h"
#include "config/tls_options.h"
#include "metrics/event_line.h"
#include "thrift/shard_connection_factory.h"

namespace geops::cli {
namespace {

// More table ids than any model has: a reply naming one is refused.
constexpr TableId kMaxTables = 1 << 20;

// One table over every shard of the site.
struct TableTotal {
  int64_t elements = 0;
  double min = 0, max = 0, sum = 0;
  int64_t nonfinite = 0;
  bool any = false;
};

struct SiteReplica {
  std::vector<TableTotal> tables;  // by table id
  std::vector<Clock> shard_clocks;
};

Result<SiteReplica> Collect(worker::ShardConnectionFactory* factory, int num_shards) {
  SiteReplica out;
  for (ShardId s = 0; s < num_shards; ++s) {
    GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<worker::ShardConnection> conn, factory->Connect(s));
    Result<ReplicaSummary> r = conn->GetReplicaSummary();
    if (!r.ok()) return r.status().WithContext("shard " + std::to_string(s));
    out.shard_clocks.push_back(r->shard_clock);
    for (const TableSummary& t : r->tables) {
      if (t.table >= kMaxTables) {
        return InternalError("shard " + std::to_string(s) + " reported table id " + std::to_string(t.table));
      }
      if (out.tables.size() <= static_cast<size_t>(t.table)) out.tables.resize(static_cast<size_t>(t.table) + 1);
      TableTotal& total = out.tables[static_cast<size_t>(t.table)];
      total.elements += t.elements;
      total.nonfinite += t.nonfinite;
      total.sum += t.sum;
      if (t.elements > t.nonfinite) {
        total.min = total.any ? std::min(total.min, t.min) : t.min;
        total.max = total.any ? std::max(total.max, t.max) : t.max;
        total.any = true;
      }
    }
  }
  return out;
}

// Exact when every table's every value is `expected`.
bool CounterExact(const SiteReplica& r, double expected) {
  if (r.tables.empty()) return false;
  for (const TableTotal& t : r.tables) {
    if (t.elements == 0 || t.nonfinite != 0 || t.min != expected || t.max != expected) return false;
  }
  return true;
}

void Print(const config::Topology& topology, const config::SiteSpec& site, const ModelSpec* spec, const SiteReplica& r) {
  std::printf("site %s: %d shard(s) at clock(s)", site.name.c_str(), site.shards);
  for (Clock c : r.shard_clocks) std::printf(" %" PRId64, c);
  std::printf(" of %" PRId64 "\n", topology.clocks);
  std::printf("  %-20s %12s %14s %14s %14s %10s\n", "table", "elements", "min", "max", "mean", "non-finite");
  for (size_t t = 0; t < r.tables.size(); ++t) {
    const TableTotal& v = r.tables[t];
    const std::string name = spec != nullptr && t < static_cast<size_t>(spec->num_tables())
                                 ? spec->table(static_cast<TableId>(t)).name
                                 : "table " + std::to_string(t);
    const int64_t finite = v.elements - v.nonfinite;
    std::printf("  %-20s %12" PRId64 " %14.7g %14.7g %14.7g %10" PRId64 "\n", name.c_str(), v.elements, v.min, v.max,
                finite > 0 ? v.sum / static_cast<double>(finite) : 0.0, v.nonfinite);
  }
}

}  // namespace

int RunCheck(const WorkerArgs& args, double wait_seconds) {
  auto topology = config::LoadTopology(args.topology_path);
  if (!topology.ok()) {
    std::fprintf(stderr, "geops worker --check: %s\n", topology.status().ToString().c_str());
    return 2;
  }
  auto site = topology->FindSite(args.site);
  if (!site.ok()) {
    std::fprintf(stderr, "geops worker --check: %s\n", site.status().message().c_str());
    return 2;
  }
  const config::SiteSpec& s = topology->sites[static_cast<size_t>(*site)];
  auto addresses = config::SiteShardAddresses(*topology, *site, args.shards);
  if (!addresses.ok()) {
    std::fprintf(stderr, "geops worker --check: %s\n", addresses.status().message().c_str());
    return 2;
  }
  // Table names for a built-in model; a client-defined model's come from its workers.
  std::shared_ptr<const ModelSpec> spec;
  if (!topology->client_model()) {
    auto model = config::BuildModelSpec(*topology);
    if (!model.ok()) {
      std::fprintf(stderr, "geops worker --check: %s\n", model.status().ToString().c_str());
      return 2;
    }
    spec = std::make_shared<const ModelSpec>(std::move(model).value());
  }
  rpc::ThriftClientOptions client_options;
  client_options.rpc_timeout_ms = topology->rpc_timeout_ms;
  // An operator's check speaks with its site's own certificate.
  client_options.tls = config::SiteTls(*topology, *site);
  if (client_options.tls.enabled()) client_options.tls.expect_peer = rpc::SiteIdentityUri(topology->sites[*site].name);
  auto factory = rpc::ThriftShardConnectionFactory::Create(*addresses, client_options, spec);
  if (!factory.ok()) {
    std::fprintf(stderr, "geops worker --check: %s\n", factory.status().ToString().c_str());
    return 2;
  }

  const bool counter = topology->workload == "counter";
  const double expected = static_cast<double>(topology->total_workers()) * static_cast<double>(topology->clocks);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, wait_seconds));
  Result<SiteReplica> replica = InternalError("not read");
  bool ok = false;
  while (true) {
    replica = Collect(factory->get(), s.shards);
    if (replica.ok()) {
      ok = counter ? CounterExact(*replica, expected)
                   : std::all_of(replica->tables.begin(), replica->tables.end(),
                                 [](const TableTotal& t) { return t.nonfinite == 0; });
    }
    if (ok || std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!replica.ok()) {
    std::fprintf(stderr, "geops worker --check: site %s: %s\n", s.name.c_str(), replica.status().ToString().c_str());
    metrics::EmitEvent({{"event", "replica_check"}, {"site", s.name}, {"ok", false}, {"error", replica.status().ToString()}});
    return 1;
  }
  Print(*topology, s, spec.get(), *replica);
  nlohmann::json event = {{"event", "replica_check"}, {"site", s.name}, {"ok", ok}, {"shard_clocks", replica->shard_clocks}};
  if (counter) {
    double lo = 0, hi = 0;
    bool any = false;
    for (const TableTotal& t : replica->tables) {
      if (!t.any) continue;
      lo = any ? std::min(lo, t.min) : t.min;
      hi = any ? std::max(hi, t.max) : t.max;
      any = true;
    }
    event["counter_expected"] = expected;
    event["counter_min"] = lo;
    event["counter_max"] = hi;
    if (ok) {
      std::printf("counter exact: every value is %.17g (%d workers x %" PRId64 " clocks)\n", expected,
                  topology->total_workers(), topology->clocks);
    } else {
      std::printf("counter not exact: values in [%.17g, %.17g], expected %.17g everywhere%s\n", lo, hi, expected,
                  wait_seconds > 0 ? " (after waiting)" : " (the site may still be training or draining: try --wait)");
    }
  } else {
    std::printf(ok ? "every value is finite\n" : "NON-FINITE values found\n");
  }
  metrics::EmitEvent(event);
  return ok ? 0 : 1;
}

}  // namespace geops::cli
