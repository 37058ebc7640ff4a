#include "config/topology.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "common/options.h"

namespace geops::config {
namespace {

// Reads typed keys of one TOML table and reports bad ones with file:line.
class TableReader {
 public:
  TableReader(const toml::table* table, std::string section, std::string origin)
      : table_(table), section_(std::move(section)), origin_(std::move(origin)) {}

  Status Check() const { return status_; }

  template <typename T>
  void Get(const char* key, T* out) {
    if (!status_.ok() || table_ == nullptr) return;
    const toml::node* node = table_->get(key);
    if (node == nullptr) return;
    if constexpr (std::is_same_v<T, std::string>) {
      if (auto v = node->value<std::string>()) { *out = *v; return; }
      Fail(node, key, "must be a string");
    } else if constexpr (std::is_same_v<T, bool>) {
      if (auto v = node->value_exact<bool>()) { *out = *v; return; }
      Fail(node, key, "must be true or false");
    } else if constexpr (std::is_same_v<T, double>) {
      if (auto v = node->value<double>()) { *out = *v; return; }
      Fail(node, key, "must be a number");
    } else if constexpr (std::is_integral_v<T>) {
      if (!node->is_integer()) { Fail(node, key, "must be an integer"); return; }
      int64_t v = *node->value<int64_t>();
      if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        Fail(node, key, "is out of range");
        return;
      }
      *out = static_cast<T>(v);
    } else if constexpr (std::is_same_v<T, std::vector<int>>) {
      const toml::array* arr = node->as_array();
      if (arr == nullptr) { Fail(node, key, "must be an array of integers"); return; }
      std::vector<int> v;
      for (const toml::node& e : *arr) {
        if (!e.is_integer()) { Fail(&e, key, "must hold only integers"); return; }
        v.push_back(static_cast<int>(*e.value<int64_t>()));
      }
      *out = v;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      const toml::array* arr = node->as_array();
      if (arr == nullptr) { Fail(node, key, "must be an array of strings"); return; }
      std::vector<std::string> v;
      for (const toml::node& e : *arr) {
        if (!e.is_string()) { Fail(&e, key, "must hold only strings"); return; }
        v.push_back(*e.value<std::string>());
      }
      *out = v;
    }
  }

  // Reports keys not in `known` (typos should not pass silently).
  void RejectUnknown(std::initializer_list<const char*> known) {
    if (!status_.ok() || table_ == nullptr) return;
    std::set<std::string> k(known.begin(), known.end());
    for (const auto& [key, node] : *table_) {
      if (!k.count(std::string(key.str()))) {
        Fail(&node, std::string(key.str()).c_str(), "is not a known key");
        return;
      }
    }
  }

  void Require(bool ok, const char* key, const std::string& what) {
    if (!status_.ok() || ok) return;
    const toml::node* node = table_ ? table_->get(key) : nullptr;
    Fail(node, key, what);
  }
  // Like Require, but a key that is absent is reported at the table's line.
  void RequireHere(bool ok, const char* key, const std::string& what) {
    if (!status_.ok() || ok) return;
    const toml::node* node = table_ ? table_->get(key) : nullptr;
    Fail(node != nullptr ? node : table_, key, what);
  }
  bool Has(const char* key) const { return table_ != nullptr && table_->get(key) != nullptr; }

 private:
  void Fail(const toml::node* node, const char* key, const std::string& what) {
    std::ostringstream msg;
    msg << origin_;
    if (node != nullptr && node->source().begin.line > 0) msg << ":" << node->source().begin.line;
    msg << ": " << (section_.empty() ? "" : section_ + ".") << key << " " << what;
    status_ = InvalidArgumentError(msg.str());
  }

  const toml::table* table_;
  std::string section_;
  std::string origin_;
  Status status_;
};

Status ParseWan(const toml::table& root, const std::string& origin, Topology* t) {
  WanSpec& w = t->wan;
  TableReader r(root["wan"].as_table(), "wan", origin);
  r.RejectUnknown({"mode", "staleness_ds", "max_drift_allowance", "max_hold_clocks", "threshold", "threshold_floor", "threshold_follows_lr", "threshold_settle_clocks", "value_floor", "codec", "compress", "averaging_period", "outer_fragments",
                   "outer_lr", "outer_momentum", "outer_nesterov", "outer_average_last", "outer_overlap",
                   "max_inflight_batches", "max_queue_ms", "backlog_revisit", "selective_barrier", "tie_reports", "report_every_clocks", "target_utilization", "tie_backlog", "tie_backlog_clocks", "tie_backlog_last_clocks", "fresh_first", "notice_min_ms", "notice_timeout_ms", "peer_lease_ms", "relay_after_ms", "time_scale",
                   "kernel_rate", "emulate",
                   "links", "trace_dir", "skyplane_bandwidth", "bandwidth_scale", "trace_file", "variation", "variation_bin_s",
                   "variation_stagger_s"});
  r.Get("mode", &w.mode);
  r.Get("staleness_ds", &w.staleness_ds);
  r.Get("max_drift_allowance", &w.max_drift_allowance);
  r.Get("max_hold_clocks", &w.max_hold_clocks);
  r.Get("threshold", &w.threshold);
  r.Get("threshold_floor", &w.threshold_floor);
  r.Get("threshold_follows_lr", &w.threshold_follows_lr);
  r.Get("threshold_settle_clocks", &w.threshold_settle_clocks);
  r.Get("value_floor", &w.value_floor);
  r.Get("codec", &w.codec);
  r.Get("compress", &w.compress);
  r.Get("averaging_period", &w.averaging_period);
  r.Get("outer_fragments", &w.outer_fragments);
  r.Get("outer_lr", &w.outer_lr);
  r.Get("outer_momentum", &w.outer_momentum);
  r.Get("outer_nesterov", &w.outer_nesterov);
  r.Get("outer_overlap", &w.outer_overlap);
  r.Get("outer_average_last", &w.outer_average_last);
  r.Get("max_inflight_batches", &w.max_inflight_batches);
  r.Get("max_queue_ms", &w.max_queue_ms);
  r.Get("backlog_revisit", &w.backlog_revisit);
  r.Get("selective_barrier", &w.selective_barrier);
  r.Get("tie_reports", &w.tie_reports);
  r.Get("report_every_clocks", &w.report_every_clocks);
  r.Get("target_utilization", &w.target_utilization);
  r.Get("tie_backlog", &w.tie_backlog);
  r.Get("tie_backlog_clocks", &w.tie_backlog_clocks);
  r.Get("tie_backlog_last_clocks", &w.tie_backlog_last_clocks);
  r.Get("fresh_first", &w.fresh_first);
  r.Get("notice_min_ms", &w.notice_min_ms);
  r.Get("notice_timeout_ms", &w.notice_timeout_ms);
  r.Get("peer_lease_ms", &w.peer_lease_ms);
  r.Get("relay_after_ms", &w.relay_after_ms);
  r.Get("time_scale", &w.time_scale);
  r.Get("kernel_rate", &w.kernel_rate);
  r.Get("emulate", &w.emulate);
  r.Get("links", &w.links);
  r.Get("trace_dir", &w.trace_dir);
  r.Get("skyplane_bandwidth", &w.skyplane_bandwidth);
  r.Get("trace_file", &w.trace_file);
  r.Get("variation", &w.variation);
  r.Get("variation_bin_s", &w.variation_bin_s);
  r.Get("bandwidth_scale", &w.bandwidth_scale);
  r.Get("variation_stagger_s", &w.variation_stagger_s);
  r.Require(w.mode == "bsp" || w.mode == "all-async" || w.mode == "asp" || w.mode == "avg" || w.mode == "diloco",
            "mode", "must be \"bsp\", \"all-async\", \"asp\", \"avg\" or \"diloco\", got \"" + w.mode + "\"");
  r.Require(w.outer_lr > 0 && w.outer_lr < 1e6, "outer_lr", "must be > 0");
  r.Require(w.outer_momentum >= 0 && w.outer_momentum < 1, "outer_momentum", "must be in [0, 1)");
  r.Require(w.staleness_ds >= -1, "staleness_ds", "must be >= 0, or -1 for none");
  r.Require(w.max_drift_allowance >= 0 && w.max_drift_allowance <= 1000000, "max_drift_allowance",
            "must be in [0, 1000000]");
  r.Require(w.max_hold_clocks >= 0 && w.max_hold_clocks <= 1000000, "max_hold_clocks", "must be in [0, 1000000]");
  r.Require(w.threshold >= 0 && w.threshold < 1e6, "threshold", "must be >= 0");
  r.Require(w.threshold_settle_clocks >= 0 && w.threshold_settle_clocks <= t->clocks, "threshold_settle_clocks",
            "must be in [0, training.clocks = " + std::to_string(t->clocks) + "]");
  r.Require(w.threshold_floor >= 0 && w.threshold_floor < 1e6, "threshold_floor", "must be >= 0");
  r.Require(w.value_floor > 0 && w.value_floor < 1e6, "value_floor", "must be > 0");
  r.Require(w.codec == "fp32" || w.codec == "fp16" || w.codec == "int8" || w.codec == "int4" || w.codec == "sign",
            "codec", "must be \"fp32\", \"fp16\", \"int8\", \"int4\" or \"sign\"");
  r.Require(w.averaging_period >= 1, "averaging_period", "must be >= 1");
  r.Require(w.outer_fragments >= 1 && w.averaging_period % std::max<int64_t>(1, w.outer_fragments) == 0,
            "outer_fragments", "must be >= 1 and divide averaging_period (" + std::to_string(w.averaging_period) + ")");
  r.Require(w.outer_overlap || w.outer_fragments == 1, "outer_overlap",
            "false needs outer_fragments = 1 (streaming overlaps by design)");
  r.Require(w.max_inflight_batches >= 1, "max_inflight_batches", "must be >= 1");
  r.Require(w.max_queue_ms > 0, "max_queue_ms", "must be > 0");
  r.Require(w.backlog_revisit >= 1 && w.backlog_revisit <= 1000000, "backlog_revisit", "must be in [1, 1000000]");
  r.Require(w.notice_min_ms >= 0, "notice_min_ms", "must be >= 0");
  r.Require(w.notice_timeout_ms >= 1, "notice_timeout_ms", "must be >= 1");
  r.Require(w.peer_lease_ms >= 10, "peer_lease_ms", "must be >= 10");
  r.Require(w.relay_after_ms == 0 || (w.relay_after_ms >= 10 && w.relay_after_ms <= 3600000), "relay_after_ms",
            "must be 0 (off) or in [10, 3600000]");
  r.Require(w.time_scale > 0 && w.time_scale <= 1e6, "time_scale", "must be in (0, 1e6]");
  r.Require(w.links == "static" || w.links == "skyplane" || w.links == "csv", "links",
            "must be \"static\", \"skyplane\" or \"csv\"");
  r.Require(w.links != "skyplane" || !w.trace_dir.empty(), "trace_dir", "is needed with links = \"skyplane\"");
  r.Require(w.skyplane_bandwidth == "per-connection" || w.skyplane_bandwidth == "aggregate", "skyplane_bandwidth",
            "must be \"per-connection\" or \"aggregate\"");
  r.Require(w.links != "csv" || !w.trace_file.empty(), "trace_file", "is needed with links = \"csv\"");
  r.Require(w.variation_bin_s > 0, "variation_bin_s", "must be > 0");
  r.Require(w.bandwidth_scale > 0 && w.bandwidth_scale <= 1e6, "bandwidth_scale", "must be in (0, 1e6]");
  r.Require(w.variation_stagger_s >= 0 && w.variation_stagger_s <= 1e6, "variation_stagger_s",
            "must be in [0, 1e6]");
  GEOPS_RETURN_IF_ERROR(r.Check());

  const toml::array* links = root["links"].as_array();
  if (links == nullptr) return Status::Ok();
  std::set<std::pair<std::string, std::string>> seen;
  for (const toml::node& node : *links) {
    const toml::table* lt = node.as_table();
    if (lt == nullptr) {
      return InvalidArgumentError(origin + ":" + std::to_string(node.source().begin.line) +
                                  ": each links entry must be a table ([[links]])");
    }
    LinkSpec l;
    TableReader lr(lt, "links", origin);
    lr.RejectUnknown({"src", "dst", "bandwidth_mbps", "delay_ms"});
    lr.Get("src", &l.src);
    lr.Get("dst", &l.dst);
    lr.Get("bandwidth_mbps", &l.bandwidth_mbps);
    lr.Get("delay_ms", &l.delay_ms);
    bool src_known = false, dst_known = false;
    for (const SiteSpec& s : t->sites) {
      src_known = src_known || s.name == l.src;
      dst_known = dst_known || s.name == l.dst;
    }
    lr.Require(src_known, "src", "'" + l.src + "' is not a site");
    lr.Require(dst_known, "dst", "'" + l.dst + "' is not a site");
    lr.Require(l.src != l.dst, "dst", "must differ from src");
    lr.Require(seen.insert({l.src, l.dst}).second, "dst", "link " + l.src + " -> " + l.dst + " is listed twice");
    lr.Require(l.bandwidth_mbps > 0 && l.bandwidth_mbps < 1e9, "bandwidth_mbps", "must be > 0");
    lr.Require(l.delay_ms >= 0 && l.delay_ms < 1e7, "delay_ms", "must be >= 0");
    GEOPS_RETURN_IF_ERROR(lr.Check());
    t->links.push_back(l);
  }
  return Status::Ok();
}

// [[faults]]: validated against the sites, the clocks and [storage], which
// are parsed first.
Status ParseFaults(const toml::table& root, const std::string& origin, Topology* t) {
  const toml::node* node = root.get("faults");
  if (node == nullptr) return Status::Ok();
  const toml::array* faults = node->as_array();
  if (faults == nullptr) {
    return InvalidArgumentError(origin + ":" + std::to_string(node->source().begin.line) +
                                ": faults must be an array of tables ([[faults]])");
  }
  std::string site_names;
  for (size_t i = 0; i < t->sites.size(); ++i) site_names += (i ? ", " : "") + t->sites[i].name;
  for (size_t i = 0; i < faults->size(); ++i) {
    const toml::node& entry = *faults->get(i);
    const std::string section = "faults[" + std::to_string(i) + "]";
    const toml::table* ft = entry.as_table();
    if (ft == nullptr) {
      return InvalidArgumentError(origin + ":" + std::to_string(entry.source().begin.line) + ": " + section +
                                  " must be a table ([[faults]])");
    }
    FaultSpec f;
    f.line = static_cast<int>(ft->source().begin.line);
    TableReader r(ft, section, origin);
    r.RejectUnknown({"kind", "site", "shard", "at_clock", "restart_after_s"});
    r.Get("kind", &f.kind);
    r.Get("site", &f.site);
    r.Get("shard", &f.shard);
    r.Get("at_clock", &f.at_clock);
    r.Get("restart_after_s", &f.restart_after_s);
    const std::string kinds = "\"kill-site\", \"kill-shard\", \"stop-site\" or \"wipe-disk\"";
    r.RequireHere(r.Has("kind"), "kind", "is required: " + kinds);
    r.Require(f.kind == "kill-site" || f.kind == "kill-shard" || f.kind == "stop-site" || f.kind == "wipe-disk",
              "kind", "must be " + kinds + ", got \"" + f.kind + "\"");
    r.RequireHere(r.Has("site"), "site", "is required (sites: " + site_names + ")");
    f.site_index = -1;
    for (size_t s = 0; s < t->sites.size(); ++s) {
      if (t->sites[s].name == f.site) f.site_index = static_cast<int>(s);
    }
    r.Require(f.site_index >= 0, "site", "'" + f.site + "' is not a site (sites: " + site_names + ")");
    GEOPS_RETURN_IF_ERROR(r.Check());
    const SiteSpec& site = t->sites[static_cast<size_t>(f.site_index)];
    if (f.kind == "kill-shard") {
      r.RequireHere(r.Has("shard"), "shard", "is required for kind \"kill-shard\"");
      r.Require(f.shard >= 0 && f.shard < site.shards, "shard",
                "is out of range: site " + site.name + " has shards 0.." + std::to_string(site.shards - 1) +
                    ", got " + std::to_string(f.shard));
    } else {
      r.Require(!r.Has("shard"), "shard",
                "is only for kind \"kill-shard\" (\"" + f.kind + "\" hits every shard of the site)");
    }
    r.RequireHere(r.Has("at_clock"), "at_clock", "is required: the clock the fault fires at");
    r.Require(f.at_clock >= 0, "at_clock", "must be >= 0, got " + std::to_string(f.at_clock));
    r.Require(f.at_clock < t->clocks, "at_clock",
              "is beyond the training clocks: " + std::to_string(f.at_clock) + " >= training.clocks = " +
                  std::to_string(t->clocks) + " (clocks are 0.." + std::to_string(t->clocks - 1) + ")");
    const bool restart_given = r.Has("restart_after_s");
    r.Require(!restart_given || (f.restart_after_s >= 0 && f.restart_after_s <= 86400), "restart_after_s",
              "must be in 0..86400 seconds (leave it out to keep the site down)");
    if (!restart_given) f.restart_after_s = -1;
    if (f.kind == "wipe-disk") {
      r.Require(t->persistent(), "kind",
                "\"wipe-disk\" needs persistent shards: the topology keeps them in memory (set [storage] "
                "data_dir)");
      r.RequireHere(restart_given, "restart_after_s", "is required for kind \"wipe-disk\" (a wiped site restarts)");
    } else if (restart_given) {
      r.Require(t->persistent(), "restart_after_s",
                "would restart shards that keep their state in memory: storage is off, so a restarted shard "
                "would have lost every update; enable storage ([storage] data_dir = \"data\", durability = "
                "\"sync\") or leave restart_after_s out");
    }
    GEOPS_RETURN_IF_ERROR(r.Check());
    t->faults.push_back(f);
  }
  return Status::Ok();
}

// [security]: mutual TLS is required as soon as a site binds beyond
// loopback; plaintext there needs an explicit insecure = true.
Status ParseSecurity(const toml::table& root, const std::string& origin, bool require_tls, Topology* t) {
  TableReader sec(root["security"].as_table(), "security", origin);
  sec.RejectUnknown({"certs", "insecure"});
  sec.Get("certs", &t->security.certs);
  sec.Get("insecure", &t->security.insecure);
  sec.Require(!(t->security.insecure && !t->security.certs.empty()), "insecure",
              "contradicts certs: TLS is on when certs is set; remove one of them");
  GEOPS_RETURN_IF_ERROR(sec.Check());
  if (!require_tls || !t->security.certs.empty() || t->security.insecure) return Status::Ok();
  for (const SiteSpec& s : t->sites) {
    if (!IsLoopbackHost(s.host)) {
      return InvalidArgumentError(origin + ": site " + s.name + " binds to " + s.host +
                                  ", which is not loopback, so its ports need mutual TLS: make certificates "
                                  "with `geops certs " + origin + " --out certs` and set [security] certs = \"certs\" "
                                  "(or set [security] insecure = true to accept plaintext)");
    }
  }
  return Status::Ok();
}

// [server]: the ports' limits; each must be positive (timeouts: >= 0, 0 off).
Status ParseServer(const toml::table& root, const std::string& origin, Topology* t) {
  TableReader srv(root["server"].as_table(), "server", origin);
  srv.RejectUnknown({"max_connections", "max_active_requests", "idle_timeout_ms", "frame_timeout_ms",
                     "send_timeout_ms"});
  Topology::Server& o = t->server;
  srv.Get("max_connections", &o.max_connections);
  srv.Get("max_active_requests", &o.max_active_requests);
  srv.Get("idle_timeout_ms", &o.idle_timeout_ms);
  srv.Get("frame_timeout_ms", &o.frame_timeout_ms);
  srv.Get("send_timeout_ms", &o.send_timeout_ms);
  srv.Require(o.max_connections >= 1, "max_connections", "must be >= 1");
  srv.Require(o.max_active_requests >= 1, "max_active_requests", "must be >= 1");
  constexpr int64_t kMaxMs = int64_t{1} << 30;
  srv.Require(o.idle_timeout_ms >= 0 && o.idle_timeout_ms <= kMaxMs, "idle_timeout_ms", "must be in [0, 2^30]");
  srv.Require(o.frame_timeout_ms >= 0 && o.frame_timeout_ms <= kMaxMs, "frame_timeout_ms", "must be in [0, 2^30]");
  srv.Require(o.send_timeout_ms >= 0 && o.send_timeout_ms <= kMaxMs, "send_timeout_ms", "must be in [0, 2^30]");
  return srv.Check();
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string Topology::CertsDir() const { return security.certs.empty() ? std::string() : Resolve(security.certs); }

std::vector<int64_t> Topology::FaultClocks(int site) const {
  std::set<int64_t> clocks;
  for (const FaultSpec& f : faults) {
    if (f.site_index == site) clocks.insert(f.at_clock);
  }
  return std::vector<int64_t>(clocks.begin(), clocks.end());
}

std::string Topology::Resolve(const std::string& p) const {
  if (p.empty() || p.front() == '/') return p;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return (dir / p).lexically_normal().string();
}

int Topology::total_workers() const {
  int n = 0;
  for (const SiteSpec& s : sites) n += s.workers;
  return n;
}

std::string Topology::ShardDataDir(int site, int shard, const std::string& relative_to) const {
  if (storage_dir.empty()) return "";
  std::filesystem::path base(storage_dir);
  if (base.is_relative() && !relative_to.empty()) base = std::filesystem::path(relative_to) / base;
  return (base / (sites[site].name + "-shard-" + std::to_string(shard))).string();
}

Result<int> Topology::FindSite(const std::string& name) const {
  std::string names;
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites[i].name == name) return static_cast<int>(i);
    names += (i ? ", " : "") + sites[i].name;
  }
  return NotFoundError("no site '" + name + "' in topology " + path + " (sites: " + names + ")");
}

Result<Topology> ParseTopology(const std::string& text, const std::string& origin, bool require_tls) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << origin << ":" << e.source().begin.line << ": " << e.description();
    return InvalidArgumentError(msg.str());
  }
  Topology t;
  t.path = origin;

  TableReader top(&root, "", origin);
  top.RejectUnknown({"name", "model", "training", "storage", "security", "server", "sites", "wan", "links", "faults"});
  top.Get("name", &t.name);
  GEOPS_RETURN_IF_ERROR(top.Check());

  TableReader model(root["model"].as_table(), "model", origin);
  model.RejectUnknown({"workload", "layers", "chunk_kib", "seed"});
  model.Get("workload", &t.workload);
  model.Get("layers", &t.layers);
  model.Get("chunk_kib", &t.chunk_kib);
  model.Get("seed", &t.seed);
  model.Require(t.workload == "mlp" || t.workload == "counter" || t.workload == "client", "workload",
                "must be \"mlp\", \"counter\" or \"client\", got \"" + t.workload + "\"");
  model.Require(t.workload != "client" || !root["model"]["layers"], "layers",
                "is not used with workload \"client\": the workers' model defines the tables");
  model.Require(t.layers.size() >= 2, "layers", "needs at least an input and an output size");
  bool layers_ok = true;
  for (int l : t.layers) layers_ok = layers_ok && l > 0 && l <= (1 << 20);
  model.Require(layers_ok, "layers", "sizes must be in 1..1048576");
  model.Require(t.workload != "mlp" || (t.layers.front() == 784 && t.layers.back() == 10), "layers",
                "must start with 784 and end with 10 for Fashion-MNIST");
  model.Require(t.chunk_kib >= 1 && t.chunk_kib <= 65536, "chunk_kib", "must be in 1..65536");
  GEOPS_RETURN_IF_ERROR(model.Check());

  TableReader train(root["training"].as_table(), "training", origin);
  train.RejectUnknown({"clocks", "batch_size", "learning_rate", "final_learning_rate", "staleness", "eval_every",
                       "background_eval", "target_accuracy", "backend", "compute_threads", "data_dir",
                       "worker_lease_ms", "change_readers", "rpc_timeout_ms", "retry_window_ms", "auth_token",
                       "command"});
  train.Get("clocks", &t.clocks);
  train.Get("batch_size", &t.batch_size);
  train.Get("learning_rate", &t.learning_rate);
  train.Get("final_learning_rate", &t.final_learning_rate);
  train.Get("staleness", &t.staleness);
  train.Get("eval_every", &t.eval_every);
  train.Get("background_eval", &t.background_eval);
  train.Get("target_accuracy", &t.target_accuracy);
  train.Get("backend", &t.backend);
  train.Get("compute_threads", &t.compute_threads);
  train.Get("data_dir", &t.data_dir);
  train.Get("worker_lease_ms", &t.worker_lease_ms);
  train.Get("change_readers", &t.change_readers);
  train.Get("rpc_timeout_ms", &t.rpc_timeout_ms);
  train.Get("retry_window_ms", &t.retry_window_ms);
  train.Get("auth_token", &t.auth_token);
  train.Get("command", &t.command);
  train.Require(t.clocks >= 1, "clocks", "must be >= 1");
  train.Require(t.batch_size >= 1 && t.batch_size <= 65536, "batch_size", "must be in 1..65536");
  train.Require(t.learning_rate > 0 && t.learning_rate < 100, "learning_rate", "must be in (0, 100)");
  train.Require(t.final_learning_rate < 0 || t.final_learning_rate <= t.learning_rate,
                "final_learning_rate", "must be <= learning_rate (or negative for a constant rate)");
  train.Require(t.staleness >= -1, "staleness", "must be >= 0, or -1 for async");
  train.Require(t.eval_every >= 0, "eval_every", "must be >= 0 (0 = only at the end)");
  train.Require(t.target_accuracy > 0 && t.target_accuracy <= 1, "target_accuracy", "must be in (0, 1]");
  train.Require(t.backend == "cpu" || t.backend == "cuda" || t.backend == "auto", "backend",
                "must be \"cpu\", \"cuda\" or \"auto\"");
  train.Require(t.compute_threads >= 1 && t.compute_threads <= 256, "compute_threads", "must be in 1..256");
  train.Require(t.worker_lease_ms >= 10, "worker_lease_ms", "must be >= 10");
  train.Require(t.change_readers >= -1, "change_readers", "must be >= 0, or -1 for automatic");
  train.Require(t.rpc_timeout_ms >= 1, "rpc_timeout_ms", "must be >= 1");
  train.Require(t.retry_window_ms >= 0, "retry_window_ms", "must be >= 0");
  train.Require(!root["training"]["command"] || (!t.command.empty() && !t.command[0].empty()), "command",
                "must name a program to run, e.g. [\"python3\", \"train.py\"]");
  GEOPS_RETURN_IF_ERROR(train.Check());

  TableReader storage(root["storage"].as_table(), "storage", origin);
  storage.RejectUnknown({"data_dir", "durability"});
  storage.Get("data_dir", &t.storage_dir);
  storage.Get("durability", &t.durability);
  storage.Require(ParseDurability(t.durability).ok(), "durability",
                  "must be \"sync\", \"async\" or \"off\", got \"" + t.durability + "\"");
  GEOPS_RETURN_IF_ERROR(storage.Check());

  const toml::array* sites = root["sites"].as_array();
  if (sites == nullptr || sites->empty()) {
    return InvalidArgumentError(origin + ": needs at least one [[sites]] entry");
  }
  std::set<std::string> names;
  for (const toml::node& node : *sites) {
    const toml::table* st = node.as_table();
    if (st == nullptr) {
      return InvalidArgumentError(origin + ":" + std::to_string(node.source().begin.line) +
                                  ": each sites entry must be a table ([[sites]])");
    }
    SiteSpec s;
    TableReader r(st, "sites", origin);
    r.RejectUnknown(
        {"name", "host", "base_port", "shards", "workers", "region", "metrics_base_port", "shard_memory_mib"});
    r.Get("name", &s.name);
    r.Get("host", &s.host);
    r.Get("base_port", &s.base_port);
    r.Get("metrics_base_port", &s.metrics_base_port);
    r.Get("shards", &s.shards);
    r.Get("workers", &s.workers);
    r.Get("region", &s.region);
    r.Get("shard_memory_mib", &s.shard_memory_mib);
    r.Require(s.shard_memory_mib >= 0 && s.shard_memory_mib <= (int64_t{1} << 24), "shard_memory_mib",
              "must be in 0..16777216 (0: no budget)");
    r.Require(!s.name.empty(), "name", "must be a non-empty string");
    r.Require(names.insert(s.name).second, "name", "'" + s.name + "' is used by two sites");
    r.Require(!s.host.empty(), "host", "must be a non-empty address");
    r.Require(s.base_port >= 0 && s.base_port <= 65535, "base_port", "must be in 0..65535");
    r.Require(s.metrics_base_port >= -1 && s.metrics_base_port <= 65535, "metrics_base_port",
              "must be in 0..65535, or -1 for none");
    r.Require(s.shards >= 1 && s.shards <= 256, "shards", "must be in 1..256");
    r.Require(s.workers >= 1 && s.workers <= 1024, "workers", "must be in 1..1024");
    GEOPS_RETURN_IF_ERROR(r.Check());
    t.sites.push_back(s);
  }
  GEOPS_RETURN_IF_ERROR(ParseSecurity(root, origin, require_tls, &t));
  GEOPS_RETURN_IF_ERROR(ParseServer(root, origin, &t));
  GEOPS_RETURN_IF_ERROR(ParseWan(root, origin, &t));
  GEOPS_RETURN_IF_ERROR(ParseFaults(root, origin, &t));
  if (t.name.empty()) t.name = origin;
  return t;
}

Result<Topology> LoadTopology(const std::string& path, bool require_tls) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot open topology file " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseTopology(buf.str(), path, require_tls);
}

std::string SecuritySummary(const Topology& t) {
  if (t.tls()) return "security: mutual TLS 1.3 on every port, certificates in " + t.CertsDir();
  if (t.security.insecure) {
    return "security: INSECURE: plaintext on every port ([security] insecure = true); anyone who can reach a port "
           "can change the model";
  }
  return "security: plaintext, loopback only (add [security] certs for TLS)";
}

}  // namespace geops::config
