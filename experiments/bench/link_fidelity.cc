// link_fidelity: how faithfully one directed link of a topology is replayed
// through geops' real WAN path: ShapedTransport (the link model) ->
// MirrorChannel (a Thrift mirror connection) -> MirrorService on the peer.
// It measures what a site's batches actually get:
//   delay  the one-way delay of small (1 KiB) batches on an idle link, one
//          every --probe_gap_ms: from the moment the batch is offered to the
//          transport to the moment the receiver's acknowledgement is back
//          (so it includes one return trip of a small reply, which no
//          shaper delays: well under a millisecond on one host);
//   rate   the goodput of a bulk stream of --batch_kib batches offered at
//          once, enough for --seconds at the link's rate, as the receiver
//          saw it: the least-squares slope of payload bits delivered over
//          the batches' arrival times (received_mbit; received_mbit_ends
//          is the payload after the first batch over the span from the
//          first batch's arrival to the last's; the sender's acknowledgement
//          times are given too, `acked_mbit`, but with batches pipelined
//          the first acknowledgement is read late, which flatters them).
// Both against the link as the topology states it (the shard's share:
// bandwidth / shards, same delay). The link model is static here: a
// topology with `variation` is measured against its mean.
//
// Two processes, so that each end can live in its own network namespace
// (experiments/run_netns.sh):
//   link_fidelity --role=recv --topology=T --from=A --to=B --listen=HOST:PORT
//   link_fidelity --role=send --topology=T --from=A --to=B --connect=HOST:PORT
//                 [--kernel_rate] [--seconds=3] [--probes=20] [--probe_gap_ms=100]
//                 [--batch_kib=256] [--max_in_flight=8]
// --kernel_rate: the kernel limits the rate (tc htb between the namespaces)
// and geops adds only the delay, as `[wan] kernel_rate = true` does in a
// site; without it geops' shaper does both. --max_in_flight: batches sent
// ahead of their acknowledgements (LaneSenderOptions; 1 = one per round
// trip, as geops sent them before pipelining). The receiver serves until it is
// told the stream is over (a final clock report) or killed, and prints one
// JSON object (received_mbit); the sender prints one (the link, delays,
// acked_mbit). run_netns.sh merges them. Plaintext: TLS costs CPU, not
// link time.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "config/tls_options.h"
#include "config/topology.h"
#include "config/wan_links.h"
#include "experiments/bench/measure.h"
#include "thrift/host_port.h"
#include "thrift/mirror_channel.h"
#include "thrift/mirror_service.h"
#include "wan/link/shaped_transport.h"

namespace geops::bench {
namespace {

struct Flags {
  std::string role, topology, from, to, listen, connect;
  bool kernel_rate = false;
  double seconds = 3;
  int probes = 20;
  int64_t probe_gap_ms = 100;
  int64_t batch_kib = 256;
  int64_t max_in_flight = wan::LaneSenderOptions{}.max_in_flight_batches;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Accepts every batch and notes when each arrived; ends on a final
// (drained) clock report, whose `clock` names the first batch of the bulk
// stream and `last_seq` its last.
class Sink : public wan::WanReceiver {
 public:
  Status OnBatch(const wan::WanBatch& b) override {
    const int64_t now = NowNs();
    std::lock_guard<std::mutex> l(mu_);
    arrivals_.try_emplace(b.seq, Arrival{now, static_cast<int64_t>(b.payload.size())});
    cv_.notify_all();
    return Status::Ok();
  }
  Status OnClock(const wan::WanClockReport& report) override {
    if (report.drained) {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
      bulk_first_ = static_cast<uint64_t>(report.clock);
      bulk_last_ = report.last_seq;
      cv_.notify_all();
    }
    return Status::Ok();
  }
  Status OnNotice(const wan::WanNotice&) override { return Status::Ok(); }
  Status OnHeartbeat(SiteId, uint64_t) override { return Status::Ok(); }

  // The bulk stream's goodput as it arrived: the least-squares slope of
  // the payload bits delivered against each batch's arrival time, from the
  // first batch to the last. A fit over every arrival, not the two ends
  // alone: on a loaded machine one late wake-up of the receiver at the
  // first or the last batch would otherwise move the figure by several
  // percent (one of 32 batches 60 ms late: 7%).
  nlohmann::json WaitDone() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_; });
    // The sender reports the end once every batch was acknowledged, but
    // the report takes the priority lane, its own connection: should it
    // still come first, give the stream's first and last batches time to
    // land instead of failing at once.
    cv_.wait_for(l, std::chrono::seconds(30),
                 [&] { return arrivals_.count(bulk_first_) > 0 && arrivals_.count(bulk_last_) > 0; });
    auto first = arrivals_.find(bulk_first_);
    auto last = arrivals_.find(bulk_last_);
    if (first == arrivals_.end() || last == arrivals_.end() || bulk_last_ <= bulk_first_) {
      return {{"error", "the bulk stream's first or last batch never arrived"}};
    }
    // x: bits delivered before batch i's (the batches after the first), y:
    // its arrival, s after the first's; 1 / slope is the rate.
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, bits = 0;
    for (uint64_t seq = bulk_first_; seq <= bulk_last_; ++seq) {
      auto it = arrivals_.find(seq);
      if (it == arrivals_.end()) continue;
      if (seq > bulk_first_) bits += static_cast<double>(it->second.bytes) * 8;
      const double y = static_cast<double>(it->second.ns - first->second.ns) / 1e9;
      n += 1;
      sx += bits;
      sy += y;
      sxx += bits * bits;
      sxy += bits * y;
    }
    const double var = n * sxx - sx * sx;
    const double slope = var > 0 ? (n * sxy - sx * sy) / var : 0;  // s per bit
    const double span_s = static_cast<double>(last->second.ns - first->second.ns) / 1e9;
    return {{"received_mbit", slope > 0 ? 1 / slope / 1e6 : 0},
            {"received_mbit_ends", span_s > 0 ? bits / span_s / 1e6 : 0},
            {"received_seconds", span_s}};
  }

 private:
  struct Arrival {
    int64_t ns = 0;
    int64_t bytes = 0;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  uint64_t bulk_first_ = 0;
  uint64_t bulk_last_ = 0;
  std::map<uint64_t, Arrival> arrivals_;  // GUARDED_BY(mu_): first arrival of each seq
};

int Receive(const Flags& f, const config::Topology& t, int from, int to) {
  const rpc::HostPort listen = Must(rpc::ParseHostPort(f.listen), "--listen");
  rpc::MirrorServiceOptions o;
  o.self = rpc::MirrorIdentity{to, 0, 0};
  o.server.host = listen.host;
  o.server.port = listen.port;
  o.server.peers = config::PeerNamesOf(t, to);
  std::unique_ptr<rpc::MirrorService> service = Must(rpc::MirrorService::Start(o), "mirror service");
  Sink sink;
  service->receiver_slot()->Set(&sink);
  std::fprintf(stderr, "receiving %s -> %s on %s\n", t.sites[from].name.c_str(), t.sites[to].name.c_str(),
               service->address().ToString().c_str());
  const nlohmann::json got = sink.WaitDone();
  std::printf("%s\n", got.dump().c_str());
  std::fflush(stdout);
  service->receiver_slot()->Clear();
  (void)service->Stop(Deadline::InMs(5000));
  return 0;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// What the sender saw of each batch: offered and acknowledged, ns.
struct Shipment {
  int64_t bytes = 0;
  int64_t offered_ns = 0;
  int64_t acked_ns = 0;
};

class Sender {
 public:
  Sender(const Flags& f, const config::Topology& t, int from, int to, wan::LinkSchedule link) : to_(to) {
    book_.Set(to, Must(rpc::ParseHostPort(f.connect), "--connect"));
    wan::ShapedTransportOptions so;
    so.kernel_rate = f.kernel_rate;
    so.heartbeat_ms = 1000;
    so.sender.max_in_flight_batches = f.max_in_flight;
    std::vector<wan::PeerLink> links{
        wan::PeerLink{to, t.sites[from].name + "->" + t.sites[to].name, std::move(link)}};
    transport_ = Must(wan::ShapedTransport::Start(std::move(links), so,
                                                  rpc::MirrorChannelFactory(&book_, rpc::MirrorIdentity{from, 0, 0},
                                                                            rpc::ThriftClientOptions{})),
                      "transport");
    transport_->SetDeliveryCallback([this](SiteId, const wan::BatchAck& ack) {
      std::lock_guard<std::mutex> l(mu_);
      auto it = shipped_.find(ack.seq);
      if (it != shipped_.end() && it->second.acked_ns == 0) it->second.acked_ns = NowNs();
    });
  }

  // Offers one batch of `bytes`; returns its seq.
  uint64_t Offer(int64_t bytes) {
    wan::WanBatch b;
    b.origin = 0;
    b.seq = ++seq_;
    b.payload.assign(static_cast<size_t>(bytes), 0x5a);
    {
      std::lock_guard<std::mutex> l(mu_);
      shipped_[b.seq] = Shipment{bytes, NowNs(), 0};
    }
    transport_->SendBatch(to_, std::move(b));
    return seq_;
  }

  void WaitQuiet(double seconds, const char* what) {
    if (!transport_->WaitQuiet(Deadline::InMs(static_cast<int64_t>(seconds * 1000)))) {
      std::fprintf(stderr, "%s: not delivered within %.0f s\n", what, seconds);
      std::exit(1);
    }
  }

  // The stream is over; the receiver measures batches [bulk_first, seq].
  void Finish(uint64_t bulk_first) {
    wan::WanClockReport r;
    r.clock = static_cast<Clock>(bulk_first);
    r.last_seq = seq_;
    r.drained = true;
    transport_->SendClock(to_, r);
    WaitQuiet(30, "final report");
    transport_->Stop();
  }

  std::map<uint64_t, Shipment> shipped() {
    std::lock_guard<std::mutex> l(mu_);
    return shipped_;
  }

 private:
  const SiteId to_;
  rpc::MirrorAddressBook book_;
  std::unique_ptr<wan::ShapedTransport> transport_;
  uint64_t seq_ = 0;
  std::mutex mu_;
  std::map<uint64_t, Shipment> shipped_;  // GUARDED_BY(mu_)
};

int Send(const Flags& f, const config::Topology& t, int from, int to, const wan::LinkSchedule& link) {
  const double delay_s = link.DelayAt(0);
  const double mean_bps = link.MeanBandwidth(0, link.horizon_s() > 0 ? link.horizon_s() : 1);
  Sender s(f, t, from, to, link);
  // One batch first: connects (with retries while the receiver starts).
  const uint64_t first = s.Offer(1024);
  s.WaitQuiet(60, "first batch");
  std::vector<uint64_t> probes;
  for (int i = 0; i < f.probes; ++i) {
    probes.push_back(s.Offer(1024));
    std::this_thread::sleep_for(std::chrono::milliseconds(f.probe_gap_ms));
  }
  s.WaitQuiet(30 + 4 * delay_s, "probes");
  const int64_t batch = f.batch_kib * 1024;
  const int64_t n = std::max<int64_t>(4, static_cast<int64_t>(mean_bps / 8 * f.seconds / static_cast<double>(batch)));
  std::vector<uint64_t> bulk;
  for (int64_t i = 0; i < n; ++i) bulk.push_back(s.Offer(batch));
  s.WaitQuiet(60 + 4 * f.seconds + 4 * delay_s, "bulk");
  s.Finish(bulk.front());

  const std::map<uint64_t, Shipment> shipped = s.shipped();
  std::vector<double> delays_ms;
  for (uint64_t q : probes) {
    const Shipment& m = shipped.at(q);
    delays_ms.push_back(static_cast<double>(m.acked_ns - m.offered_ns) / 1e6);
  }
  const Shipment& b0 = shipped.at(bulk.front());
  const Shipment& b1 = shipped.at(bulk.back());
  const double span_s = static_cast<double>(b1.acked_ns - b0.acked_ns) / 1e9;
  const double bits = static_cast<double>(batch * (n - 1) * 8);
  const double achieved_bps = span_s > 0 ? bits / span_s : 0;
  nlohmann::json out = {
      {"link", t.sites[from].name + "->" + t.sites[to].name},
      {"shaping", f.kernel_rate ? "kernel rate + geops delay" : "geops rate + delay"},
      {"max_in_flight", f.max_in_flight},
      {"link_mbit", mean_bps / 1e6},
      {"acked_mbit", achieved_bps / 1e6},
      {"bulk_batches", n},
      {"bulk_batch_bytes", batch},
      {"bulk_seconds", span_s},
      {"link_delay_ms", delay_s * 1e3},
      {"delay_ms_median", Median(delays_ms)},
      {"delay_ms_p90", Quantile(delays_ms, 0.9)},
      {"delay_ms_min", delays_ms.empty() ? 0 : *std::min_element(delays_ms.begin(), delays_ms.end())},
      {"delay_error_ms_median", Median(delays_ms) - delay_s * 1e3},
      {"probes", f.probes},
      {"connect_ms", static_cast<double>(shipped.at(first).acked_ns - shipped.at(first).offered_ns) / 1e6},
  };
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int Main(int argc, char** argv) {
  // stdout carries the one JSON result; logs go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("link_fidelity"));
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string k = a.substr(0, eq);
    const std::string v = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (k == "--role") f.role = v;
    else if (k == "--topology") f.topology = v;
    else if (k == "--from") f.from = v;
    else if (k == "--to") f.to = v;
    else if (k == "--listen") f.listen = v;
    else if (k == "--connect") f.connect = v;
    else if (k == "--kernel_rate") f.kernel_rate = true;
    else if (k == "--seconds") f.seconds = std::stod(v);
    else if (k == "--probes") f.probes = std::stoi(v);
    else if (k == "--probe_gap_ms") f.probe_gap_ms = std::stoll(v);
    else if (k == "--batch_kib") f.batch_kib = std::stoll(v);
    else if (k == "--max_in_flight") f.max_in_flight = std::stoll(v);
    else {
      std::fprintf(stderr, "unknown flag %s (see the comment at the top of link_fidelity.cc)\n", a.c_str());
      return 2;
    }
  }
  if ((f.role != "send" && f.role != "recv") || f.topology.empty() || f.from.empty() || f.to.empty() ||
      (f.role == "recv" && f.listen.empty()) || (f.role == "send" && f.connect.empty()) || !(f.seconds > 0) ||
      f.probes < 1 || f.probe_gap_ms < 0 || f.batch_kib < 1 || f.max_in_flight < 1) {
    std::fprintf(stderr,
                 "usage: link_fidelity --role=recv|send --topology=T --from=SITE --to=SITE "
                 "(--listen=HOST:PORT | --connect=HOST:PORT) [--kernel_rate] [--seconds=S > 0] [--probes=N >= 1] "
                 "[--probe_gap_ms=MS] [--batch_kib=K] [--max_in_flight=N >= 1]\n");
    return 2;
  }
  const config::Topology t = Must(config::LoadTopology(f.topology, /*require_tls=*/false), "topology");
  const int from = Must(t.FindSite(f.from), "--from");
  const int to = Must(t.FindSite(f.to), "--to");
  if (from == to) {
    std::fprintf(stderr, "--from and --to name the same site\n");
    return 2;
  }
  if (f.role == "recv") return Receive(f, t, from, to);
  for (const config::EffectiveLink& l : Must(config::BuildLinks(t), "links")) {
    if (l.src == from && l.dst == to) {
      return Send(f, t, from, to, Must(config::ShardShareOf(l.schedule, t.sites[from].shards), "link share"));
    }
  }
  std::fprintf(stderr, "no link %s -> %s in the topology\n", f.from.c_str(), f.to.c_str());
  return 1;
}

}  // namespace
}  // namespace geops::bench

int main(int argc, char** argv) { return geops::bench::Main(argc, argv); }
