#include "cli/site_wan.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "cli/event_line.h"
#include "cli/tls_options.h"
#include "cli/wan_links.h"

namespace geops::cli {
namespace {

using nlohmann::json;

// Each shard's link gets 1/shards of the site-to-site bandwidth.
Result<wan::LinkSchedule> ShareOf(const wan::LinkSchedule& s, int shards) {
  std::vector<wan::LinkSegment> seg = s.segments();
  for (wan::LinkSegment& x : seg) x.bandwidth_bps /= shards;
  return wan::LinkSchedule::Create(std::move(seg), s.loop_period_s());
}

}  // namespace

Result<std::unique_ptr<SiteWan>> SiteWan::Start(const Topology& t, int site, int shard_index, const ModelSpec* spec,
                                                datacenter::Shard* shard, SiteMirror* mirror, int64_t progress_ms) {
  std::unique_ptr<SiteWan> w(new SiteWan());
  w->topology_ = &t;
  w->site_ = site;
  w->shard_ = shard_index;
  GEOPS_ASSIGN_OR_RETURN(std::vector<EffectiveLink> links, BuildLinks(t));
  rpc::WanEndpointOptions o;
  o.self = rpc::MirrorIdentity{site, shard_index, spec->Fingerprint()};
  for (const EffectiveLink& l : links) {
    if (l.src != site) continue;
    if (t.sites[l.dst].shards != t.sites[site].shards) {
      return InvalidArgumentError(t.path + ": sites " + t.sites[site].name + " and " + t.sites[l.dst].name +
                                  " have different shard counts; shard i of a site mirrors shard i of the others");
    }
    GEOPS_ASSIGN_OR_RETURN(wan::LinkSchedule share, ShareOf(l.schedule, t.sites[site].shards));
    o.links.push_back(wan::PeerLink{l.dst, t.sites[site].name + "->" + t.sites[l.dst].name, std::move(share)});
  }
  GEOPS_ASSIGN_OR_RETURN(o.wan, BuildWanOptions(t));
  o.shaping.time_scale = t.wan.time_scale;
  // Idle links say they are alive several times per lease, so a peer is
  // dropped only when it is really gone.
  o.shaping.heartbeat_ms = std::clamp<int64_t>(t.wan.peer_lease_ms / 4, 10, 1000);
  o.client.rpc_timeout_ms = std::max<int64_t>(t.rpc_timeout_ms, 30000);
  o.client.tls = SiteTls(t, site);
  GEOPS_ASSIGN_OR_RETURN(w->endpoint_, rpc::WanEndpoint::Start(spec, shard, o, mirror->service()));
  if (progress_ms > 0) {
    SiteWan* self = w.get();
    w->reporter_ = std::thread([self, period = progress_ms] { self->ReportProgress(period); });
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
                     {"refused", l.refused}});
  }
  json peers = json::array();
  for (const wan::PeerReplicationStats& p : r.peers) {
    peers.push_back({{"peer", topology_->sites[p.peer].name},
                     {"last_seq", p.last_seq},
                     {"batches_sent", p.out.batches_sent},
                     {"bytes_sent", p.out.bytes_sent},
                     {"elements_sent", p.out.elements_sent},
                     {"backlog_batches", p.out.backlog_batches},
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
          {"batches_encoded", r.batches_encoded},
          {"select_seconds", r.select_seconds},
          {"encode_seconds", r.encode_seconds},
          {"drained", r.drained},
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

}  // namespace geops::cli
