#include "site/site_wan.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"
#include "config/tls_options.h"
#include "config/wan_links.h"
#include "metrics/event_line.h"

namespace geops::site {

using config::BuildLinks;
using config::EffectiveLink;
using config::BuildWanOptions;
using config::SiteTls;
using metrics::EmitEvent;
using metrics::Labels;
using config::ShardShareOf;

using nlohmann::json;

Result<std::unique_ptr<SiteWan>> SiteWan::Start(const Topology& t, int site, int shard_index, const ModelSpec* spec,
                                                datacenter::Shard* shard, SiteMirror* mirror, int64_t progress_ms) {
  std::unique_ptr<SiteWan> w(new SiteWan());
  w->topology_ = &t;
  w->site_ = site;
  w->shard_ = shard_index;
  GEOPS_ASSIGN_OR_RETURN(std::vector<EffectiveLink> links, BuildLinks(t));
  WanEndpointOptions o;
  o.self = rpc::MirrorIdentity{site, shard_index, spec->Fingerprint()};
  for (const EffectiveLink& l : links) {
    if (l.src != site) continue;
    if (t.sites[l.dst].shards != t.sites[site].shards) {
      return InvalidArgumentError(t.path + ": sites " + t.sites[site].name + " and " + t.sites[l.dst].name +
                                  " have different shard counts; shard i of a site mirrors shard i of the others");
    }
    GEOPS_ASSIGN_OR_RETURN(wan::LinkSchedule share, ShardShareOf(l.schedule, t.sites[site].shards));
    o.links.push_back(wan::PeerLink{l.dst, t.sites[site].name + "->" + t.sites[l.dst].name, std::move(share)});
  }
  GEOPS_ASSIGN_OR_RETURN(o.wan, BuildWanOptions(t));
  o.shaping.time_scale = t.wan.time_scale;
  o.shaping.kernel_rate = t.wan.kernel_rate;
  o.shaping.emulate_links = t.wan.emulate;
  o.shaping.relay_after_ms = t.wan.relay_after_ms;
  // Idle links say they are alive several times per lease, so a peer is
  // dropped only when it is really gone.
  o.shaping.heartbeat_ms = std::clamp<int64_t>(t.wan.peer_lease_ms / 4, 10, 1000);
  o.client.rpc_timeout_ms = std::max<int64_t>(t.rpc_timeout_ms, 30000);
  o.client.tls = SiteTls(t, site);
  GEOPS_ASSIGN_OR_RETURN(w->endpoint_, WanEndpoint::Start(spec, shard, o, mirror->service()));
  if (progress_ms > 0) {
    SiteWan* self = w.get();
    w->reporter_ = std::thread([self, period = progress_ms] {
      NameThisThread("wan-progress");
      self->ReportProgress(period);
    });
  }
  return w;
}

SiteWan::~SiteWan() {
  stop_ = true;
  if (reporter_.joinable()) reporter_.join();
  endpoint_.reset();
}

void SiteWan::ReportProgress(int64_t period_ms) {
  const auto start = std::chrono::steady_clock::now();
  auto next = start;
  while (!stop_) {
    next += std::chrono::milliseconds(period_ms);
    while (!stop_ && std::chrono::steady_clock::now() < next) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (stop_) return;
    json links = json::object();
    int64_t total = 0;
    for (const wan::LinkStats& l : endpoint_->transport()->stats()) {
      links[topology_->sites[l.peer].name] = l.wire_bytes;
      total += l.wire_bytes;
    }
    const wan::GateStats g = endpoint_->replicator()->gate()->stats();
    EmitEvent({{"event", "wan_progress"},
               {"site", topology_->sites[site_].name},
               {"shard", shard_},
               {"t", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
               {"wire_bytes", total},
               {"wire_bytes_to", links},
               {"barrier_wait_seconds", g.drift_wait_seconds + g.notice_wait_seconds},
               {"max_drift_clocks", g.max_drift_clocks},
               {"drift_bound_clocks", endpoint_->replicator()->gate()->DriftBound()}});
  }
}

void SiteWan::Settle(int64_t ms) {
  if (!endpoint_->replicator()->Finished()) {
    // Stopped in the middle of the run (SIGTERM, say): there is no drain
    // to wait for (the wait would always run out). The messages already
    // handed to the links still go, so that peers have them should this
    // site not come back; what they have not acknowledged stays in the
    // store and goes again after a restart.
    const bool quiet = endpoint_->transport()->WaitQuiet(Deadline::InMs(ms));
    spdlog::info("site {} shard {}: stopping before the training finished{}", topology_->sites[site_].name, shard_,
                 quiet ? "" : "; some WAN messages were still queued (what a peer did not acknowledge goes again "
                              "after a restart)");
    return;
  }
  Status s = endpoint_->WaitSettled(Deadline::InMs(ms));
  if (!s.ok()) spdlog::warn("site {} shard {}: stopping before the WAN settled: {}", topology_->sites[site_].name,
                            shard_, s.message());
}

namespace {

// The times the gate saw `peer` fall silent past its lease, and come back.
json DownEventsJson(const wan::GateStats& gate, SiteId peer) {
  json out = json::array();
  for (const wan::PeerDownEvent& e : gate.down_events) {
    if (e.peer != peer) continue;
    out.push_back({{"last_heard_unix", e.last_heard_unix},
                   {"detected_unix", e.detected_unix},
                   {"back_unix", e.back_unix > 0 ? json(e.back_unix) : json(nullptr)},
                   {"in_step_unix", e.in_step_unix > 0 ? json(e.in_step_unix) : json(nullptr)}});
  }
  return out;
}

}  // namespace

json SiteWan::StreamResetsJson(const wan::ReplicatorStats& r) const {
  json out = json::array();
  for (const wan::StreamResetEvent& e : r.stream_resets) {
    out.push_back({{"peer", topology_->sites[e.peer].name},
                   {"incarnation", e.incarnation},
                   {"heard_unix", e.heard_unix},
                   {"reset_unix", e.reset_unix},
                   {"snapshot_elements", e.snapshot_elements}});
  }
  return out;
}

json SiteWan::RecoveryJson() const {
  const wan::RecoveryStats r = endpoint_->replicator()->stats().recovery;
  if (!r.recovered && !r.fresh_store) return nullptr;
  return {{"process_start_unix", r.process_start_unix},
          {"fresh_store", r.fresh_store},
          {"rejoined", r.rejoined},
          {"rejoined_unix", r.rejoined ? json(r.rejoined_unix) : json(nullptr)},
          {"rejoin_bytes", r.rejoin_bytes},
          {"state_loaded_unix", r.state_loaded_unix},
          {"caught_up_unix", r.caught_up_unix > 0 ? json(r.caught_up_unix) : json(nullptr)},
          {"catch_up_bytes", r.catch_up_bytes},
          {"batches_resent", r.batches_resent}};
}

json SiteWan::StatsJson() const {
  const wan::ReplicatorStats r = endpoint_->replicator()->stats();
  json links = json::array();
  for (const wan::LinkStats& l : endpoint_->transport()->stats()) {
    links.push_back({{"src", topology_->sites[site_].name},
                     {"dst", topology_->sites[l.peer].name},
                     {"batches", l.batches},
                     {"messages", l.messages},
                     {"bytes_offered", l.bytes_offered},
                     {"bytes_delivered", l.bytes_delivered},
                     {"wire_bytes", l.wire_bytes},
                     {"offered_bps", l.offered_bps},
                     {"achieved_bps", l.achieved_bps},
                     {"busy_trace_seconds", l.last_delivery_s > l.first_offer_s ? l.last_delivery_s - l.first_offer_s : 0.0},
                     {"retries", l.retries},
                     {"refused", l.refused},
                     {"relayed", l.relayed},
                     {"relay_turns", l.relay_turns},
                     {"forwarded", l.forwarded}});
  }
  json peers = json::array();
  for (const wan::PeerReplicationStats& p : r.peers) {
    peers.push_back({{"peer", topology_->sites[p.peer].name},
                     {"last_seq", p.last_seq},
                     {"batches_sent", p.out.batches_sent},
                     {"bytes_sent", p.out.bytes_sent},
                     {"elements_sent", p.out.elements_sent},
                     {"backlog_batches", p.out.backlog_batches},
                     {"backlog_scans", p.out.backlog_scans},
                     {"backlog_trimmed", p.out.backlog_trimmed},
                     {"backlog_elements_scanned", p.out.backlog_elements_scanned},
                     {"backlog_scans_clock_spaced", p.out.backlog_scans_clock_spaced},
                     {"ack_seconds", p.out.ack_seconds},
                     {"max_backlog_chunks", p.out.max_backlog_chunks},
                     {"notices_sent", p.out.notices_sent},
                     {"quarantined_by_peer", p.quarantined_by_peer},
                     {"down_events", DownEventsJson(r.gate, p.peer)}});
  }
  return {{"mode", topology_->wan.mode},
          {"links", links},
          {"peers", peers},
          {"ticks", r.ticks},
          {"elements_pushed", r.elements_pushed},
          {"elements_selected", r.elements_selected},
          {"select_holds", r.select_holds},
          {"reports_sent", r.reports_sent},
          {"reports_held", r.reports_held},
          {"reports_riding", r.reports_riding},
          {"threshold_multiplier", r.threshold_multiplier},
          {"journal_rows_saved", r.journal_rows_saved},
          {"journal_peak_saved_bytes", r.journal_peak_saved_bytes},
          {"batches_encoded", r.batches_encoded},
          {"select_seconds", r.select_seconds},
          {"encode_seconds", r.encode_seconds},
          {"drained", r.drained},
          {"drain_payload_bytes", r.drain_bytes},
          {"incarnation", r.incarnation},
          {"stream_resets", StreamResetsJson(r)},
          {"inbox", {{"batches_applied", r.inbox.batches_applied},
                     {"batches_duplicate", r.inbox.batches_duplicate},
                     {"batches_refused", r.inbox.batches_refused},
                     {"batches_quarantined", r.inbox.batches_quarantined},
                     {"elements_applied", r.inbox.elements_applied},
                     {"bytes_received", r.inbox.bytes_received},
                     {"stale_refused", r.inbox.stale_refused},
                     {"origin_resets", r.inbox.origin_resets}}},
          {"gate", {{"drift_wait_seconds", r.gate.drift_wait_seconds},
                    {"notice_wait_seconds", r.gate.notice_wait_seconds},
                    {"final_wait_seconds", r.gate.final_wait_seconds},
                    {"outer_wait_seconds", r.gate.outer_wait_seconds},
                    {"reads_held", r.gate.reads_held},
                    {"reads_timed_out", r.gate.reads_timed_out},
                    {"notices", r.gate.notices},
                    {"notices_expired", r.gate.notices_expired},
                    {"max_drift_clocks", r.gate.max_drift_clocks},
                    {"max_bound_clocks", r.gate.max_bound_clocks}}}};
}

void SiteWan::AppendMetrics(MetricsBuilder* b) const {
  const wan::ReplicatorStats r = endpoint_->replicator()->stats();
  wan::ShapedTransport* transport = endpoint_->transport();
  for (const wan::LinkStats& l : endpoint_->transport()->stats()) {
    const Labels link = {{"peer", topology_->sites[l.peer].name}};
    b->Counter("geops_wan_wire_bytes_total", "Bytes the mirror connections to the peer put on the wire "
               "(batches, clock reports, notices, heartbeats, framing)", static_cast<double>(l.wire_bytes), link);
    b->Counter("geops_wan_payload_bytes_total", "Batch bytes (after quantisation and LZ4) delivered to the peer",
               static_cast<double>(l.bytes_delivered), link);
    b->Counter("geops_wan_batches_total", "Batches delivered to the peer", static_cast<double>(l.batches), link);
    b->Gauge("geops_wan_queue_bytes", "Batch bytes offered to the link and not yet delivered",
             static_cast<double>(std::max<int64_t>(0, l.bytes_offered - l.bytes_delivered)), link);
    b->Gauge("geops_wan_estimated_delivery_seconds", "Seconds a batch byte queued now would need to reach the peer",
             transport->EstimateDeliverySeconds(l.peer, 0), link);
    b->Gauge("geops_wan_link_bandwidth_bytes_per_second", "The link's bandwidth towards the peer now",
             transport->BandwidthBytesPerSecond(l.peer), link);
    b->Counter("geops_wan_send_retries_total", "Sends to the peer retried after a failure",
               static_cast<double>(l.retries), link);
  }
  for (const wan::PeerReplicationStats& p : r.peers) {
    const Labels peer = {{"peer", topology_->sites[p.peer].name}};
    b->Gauge("geops_wan_backlog_batches", "Updates held back for the peer, coalesced per chunk",
             static_cast<double>(p.out.backlog_batches), peer);
    b->Counter("geops_wan_quarantined_by_peer_total", "Batches of this site the peer quarantined",
               static_cast<double>(p.quarantined_by_peer), peer);
  }
  b->Counter("geops_wan_elements_pushed_total", "Local update values the significance filter took in",
             static_cast<double>(r.elements_pushed));
  b->Counter("geops_wan_elements_selected_total", "Values the significance filter selected for shipping",
             static_cast<double>(r.elements_selected));
  b->Counter("geops_wan_elements_suppressed_total",
             "Values taken in and not (yet) selected: they stay accumulated until significant",
             static_cast<double>(std::max<int64_t>(0, r.elements_pushed - r.elements_selected)));
  b->Gauge("geops_wan_residual_norm", "L2 norm of what the filter holds unshipped (error-feedback residual included)",
           r.residual_norm);
  b->Gauge("geops_wan_dirty_chunks", "Chunks holding unshipped updates", static_cast<double>(r.dirty_chunks));
  b->Counter("geops_wan_ticks_total", "Replicator ticks (one per shard clock)", static_cast<double>(r.ticks));
  b->Counter("geops_wan_journal_rows_saved_total",
             "WAN accumulator and backlog rows changed while their commit was written (copied first)",
             static_cast<double>(r.journal_rows_saved));
  b->Gauge("geops_wan_journal_saved_bytes_peak",
           "Most bytes of such copies held at once, summed over the accumulator and backlogs",
           static_cast<double>(r.journal_peak_saved_bytes));
  b->Histogram("geops_wan_hold_wait_seconds",
               "Reads and clock advances held by the WAN gate (drift bound, notices, outer step, final): how long",
               r.gate.hold_wait);
  b->Counter("geops_wan_drift_wait_seconds_total", "Time reads and advances waited at the drift bound",
             r.gate.drift_wait_seconds);
  b->Counter("geops_wan_notice_wait_seconds_total", "Time reads waited for noticed batches",
             r.gate.notice_wait_seconds);
  b->Gauge("geops_wan_max_drift_clocks", "Largest own clock - slowest mirror clock a read or advance passed at",
           static_cast<double>(r.gate.max_drift_clocks));
  b->Gauge("geops_wan_drift_bound_clocks", "The drift bound in force now (DS + clocks in delivery)",
           static_cast<double>(endpoint_->replicator()->gate()->DriftBound()));
  b->Gauge("geops_wan_mirror_clock", "The slowest live peer's clock as this shard knows it",
           static_cast<double>(endpoint_->replicator()->gate()->MinMirrorClock()));
  b->Counter("geops_wan_batches_applied_total", "Peer batches applied here", static_cast<double>(r.inbox.batches_applied));
  b->Counter("geops_wan_batches_quarantined_total", "Peer batches quarantined here (their sum would not be finite)",
             static_cast<double>(r.inbox.batches_quarantined));
  b->Counter("geops_wan_batches_refused_total", "Peer batches refused here", static_cast<double>(r.inbox.batches_refused));
  b->Counter("geops_wan_received_bytes_total", "Batch bytes received from peers", static_cast<double>(r.inbox.bytes_received));
  b->Gauge("geops_wan_incarnation", "This shard's WAN incarnation (changes when it loses its store)",
           static_cast<double>(r.incarnation));
  b->Counter("geops_wan_stream_resets_total", "Peers whose stream started over (they lost their store)",
             static_cast<double>(r.stream_resets.size()));
  b->Counter("geops_wan_peer_down_total", "Peers that went silent past the lease",
             static_cast<double>(r.gate.down_events.size()));
  b->Gauge("geops_wan_recovered", "1 when this shard restarted from its store",
           r.recovery.recovered ? 1.0 : 0.0);
}

}  // namespace geops::site
