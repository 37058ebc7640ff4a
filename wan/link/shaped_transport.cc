#include "wan/link/shaped_transport.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"

namespace geops::wan {
namespace {

// Bytes a clock report or notice occupies on the wire, roughly (Thrift
// envelope included), for the link model.
constexpr int64_t kSmallMessageBytes = 64;
// The link model never refuses: the Replicator's windows and barriers bound
// what is queued.
constexpr uint64_t kUnboundedQueueBytes = uint64_t{1} << 40;
// Bandwidth of the priority lane: only its delay and outages matter.
constexpr double kPriorityLaneBps = 1e15;

int Index(Lane lane) { return lane == Lane::kBulk ? 0 : 1; }

// The batch whose payload a message puts through the link model, if any.
WanBatch* ShapedBatch(WanMessage& m) {
  if (auto* b = std::get_if<WanBatch>(&m)) return b;
  if (auto* f = std::get_if<WanForward>(&m)) return &f->batch;
  if (auto* r = std::get_if<WanRelay>(&m)) return &r->batch;
  return nullptr;
}

// A relay that refused to carry batches is not asked again for this long.
constexpr double kRelayRefusedSeconds = 30;

}  // namespace

struct ShapedTransport::Peer {
  SiteId id = 0;
  std::string name;
  LinkSchedule schedule;
  LinkSchedule priority;                  // schedule.WithBandwidth(kPriorityLaneBps)
  std::unique_ptr<LinkShaper> shaper[2];  // loop thread
  std::deque<WanMessage> pending[2];      // loop thread: in the shaper, in order
  // Bulk, priority, relay. Relay calls go through the bulk shaper (they
  // use this link) and then their own connection, since each waits for a
  // third site's answer.
  std::unique_ptr<LaneSender> sender[3];
  std::atomic<int64_t> in_model[2] = {0, 0};  // messages offered, not yet delivered by the model
  std::atomic<int64_t> bytes_offered{0};
  std::atomic<int64_t> bytes_delivered{0};
  std::atomic<int64_t> bytes_acked{0};  // bulk-lane bytes the peer accepted
  std::atomic<int64_t> messages{0};
  std::atomic<int64_t> batches{0};
  mutable std::mutex span_mu;
  double first_offer_s = -1;    // GUARDED_BY(span_mu)
  double last_delivery_s = -1;  // GUARDED_BY(span_mu)

  // Relaying (relay_after_ms > 0), GUARDED_BY(relay_mu_) unless atomic.
  struct Unacked {
    uint64_t seq = 0;
    double sent_s = 0;    // real seconds: when it last went (straight or relayed)
    bool straight = false;  // a copy is on this link's own lane
    std::shared_ptr<const WanBatch> batch;
  };
  std::deque<Unacked> unacked;  // batches for this peer, in seq order
  std::atomic<uint64_t> acked_through{0};
  std::atomic<Peer*> via{nullptr};  // the relay this peer's batches take now; null: straight
  bool answered = false;            // this link has acknowledged a batch
  double relay_refused_s = -1e18;   // this peer last refused to relay
  std::atomic<int64_t> relayed{0};
  std::atomic<int64_t> relay_turns{0};
  std::atomic<int64_t> forwarded{0};
};

Status ShapedTransportOptions::Validate() const {
  if (!(time_scale > 0) || !std::isfinite(time_scale)) {
    return InvalidArgumentError("shaped transport: time_scale must be > 0, got " + std::to_string(time_scale));
  }
  if (!(burst_bytes >= 0)) return InvalidArgumentError("shaped transport: burst_bytes must be >= 0");
  if (heartbeat_ms < 0) return InvalidArgumentError("shaped transport: heartbeat_ms must be >= 0");
  if (relay_after_ms < 0) return InvalidArgumentError("shaped transport: relay_after_ms must be >= 0");
  if (sender.retry_backoff_ms < 1 || sender.max_backoff_ms < sender.retry_backoff_ms) {
    return InvalidArgumentError("shaped transport: retry back-off must be >= 1 ms and <= its cap");
  }
  return Status::Ok();
}

Result<std::unique_ptr<ShapedTransport>> ShapedTransport::Start(std::vector<PeerLink> links,
                                                                ShapedTransportOptions options,
                                                                PeerChannelFactory channels) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (links.empty()) return InvalidArgumentError("shaped transport: no peer links");
  if (!channels) return InvalidArgumentError("shaped transport: no channel factory");
  std::set<SiteId> seen;
  for (const PeerLink& l : links) {
    if (!seen.insert(l.peer).second) {
      return InvalidArgumentError("shaped transport: peer " + std::to_string(l.peer) + " has two links");
    }
  }
  std::unique_ptr<ShapedTransport> t(new ShapedTransport(options));
  t->channels_ = channels;
  if (uv_loop_init(&t->loop_) != 0) return InternalError("shaped transport: uv_loop_init failed");
  uv_async_init(&t->loop_, &t->wake_, &ShapedTransport::OnWake);
  t->wake_.data = t.get();
  uv_timer_init(&t->loop_, &t->relay_timer_);
  t->relay_timer_.data = t.get();
  t->origin_ = SteadyClock::now();
  LinkShaperOptions so;
  so.time_scale = options.time_scale;
  so.burst_bytes = options.burst_bytes;
  so.max_queued_bytes = kUnboundedQueueBytes;
  for (PeerLink& l : links) {
    auto p = std::make_unique<Peer>();
    p->id = l.peer;
    p->name = l.name;
    p->schedule = l.schedule;
    Peer* raw = p.get();
    p->priority = l.schedule.WithBandwidth(kPriorityLaneBps);
    // Real links: the shapers pass every message on at once.
    const LinkSchedule none = LinkSchedule::Constant(kPriorityLaneBps, 0);
    const LinkSchedule lanes[2] = {
        !options.emulate_links ? none : options.kernel_rate ? p->priority : l.schedule,
        !options.emulate_links ? none : p->priority};
    for (int lane = 0; lane < 2; ++lane) {
      auto shaper = LinkShaper::Create(&t->loop_, lanes[lane], so, [raw, lane](ShapedMessage m) {
        WanMessage msg = std::move(raw->pending[lane].front());
        raw->pending[lane].pop_front();
        if (WanBatch* b = ShapedBatch(msg)) {
          b->payload = std::move(m.payload);
          raw->bytes_delivered.fetch_add(static_cast<int64_t>(b->payload.size()), std::memory_order_relaxed);
        } else if (lane == 0) {
          raw->bytes_delivered.fetch_add(static_cast<int64_t>(m.payload.size()), std::memory_order_relaxed);
        }
        if (lane == 0) {
          std::lock_guard<std::mutex> lock(raw->span_mu);
          raw->last_delivery_s = m.delivered_s;
        }
        // Relay calls exist only with relaying on, and so does their lane.
        const bool relay = std::holds_alternative<WanRelay>(msg);
        LaneSender* sender = raw->sender[relay ? 2 : lane].get();
        if (sender != nullptr) {
          sender->Push(std::move(msg));
        } else {
          spdlog::error("wan link to {}: a relay call with relaying off was dropped", raw->name);
        }
        raw->in_model[lane].fetch_sub(1, std::memory_order_relaxed);
      });
      if (!shaper.ok()) return shaper.status();
      p->shaper[lane] = std::move(shaper).value();
      LaneSenderOptions lo = options.sender;
      lo.heartbeat_ms = lane == 1 ? options.heartbeat_ms : 0;
      ShapedTransport* self = t.get();
      if (lane == 1 && options.emulate_links) lo.link_up = [self, raw] { return self->HeartbeatArrives(*raw); };
      if (lane == 0) {
        // Another site's batch is tried once: an answer of "later" (the
        // peer waits for an earlier batch of that site) goes back to the
        // origin, which asks again, instead of holding this site's own
        // batches behind it.
        lo.try_passed_on_once = true;
        lo.on_refused = [](const WanMessage& m, const Status& st) {
          if (const auto* f = std::get_if<WanForward>(&m)) f->waiter->Complete(st);
        };
      }
      p->sender[lane] = std::make_unique<LaneSender>(l.peer, lane == 0 ? Lane::kBulk : Lane::kPriority, channels, lo,
                                                     [self, raw](const WanMessage& m, const BatchAck& ack) {
                                                       self->OnSent(raw, m, ack);
                                                     });
    }
    // The relay lane (and its thread) only where this site relays its own
    // batches; forwarding another site's goes on the bulk lane.
    if (options.relay_after_ms <= 0) {
      t->peers_.push_back(std::move(p));
      continue;
    }
    ShapedTransport* self = t.get();
    LaneSenderOptions ro = options.sender;
    ro.heartbeat_ms = 0;
    ro.max_in_flight_batches = 1;
    ro.wanted = [self](const WanMessage& m) { return self->RelayWanted(m); };
    ro.try_passed_on_once = true;
    ro.on_refused = [self, raw](const WanMessage&, const Status&) {
      std::lock_guard<std::mutex> lock(self->relay_mu_);
      raw->relay_refused_s = self->RealNow();
    };
    p->sender[2] = std::make_unique<LaneSender>(l.peer, Lane::kRelay, channels, ro,
                                                [self, raw](const WanMessage& m, const BatchAck& ack) {
                                                  self->OnSent(raw, m, ack);
                                                });
    t->peers_.push_back(std::move(p));
  }
  ShapedTransport* self = t.get();
  if (options.relay_after_ms > 0) {
    const uint64_t period = static_cast<uint64_t>(std::clamp<int64_t>(options.relay_after_ms / 4, 10, 250));
    uv_timer_start(&t->relay_timer_, &ShapedTransport::OnRelayTimer, period, period);
  }
  t->loop_thread_ = std::thread([self] {
    NameThisThread("wan-shaper");
    uv_run(&self->loop_, UV_RUN_DEFAULT);
    uv_loop_close(&self->loop_);
  });
  return t;
}

ShapedTransport::ShapedTransport(ShapedTransportOptions options) : options_(options) {}

ShapedTransport::~ShapedTransport() { Stop(); }

void ShapedTransport::Stop() {
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    if (stopped_) return;
    stopping_ = true;
  }
  StopForwarding();
  uv_async_send(&wake_);
  if (loop_thread_.joinable()) loop_thread_.join();
  for (auto& p : peers_) {
    for (auto& s : p->sender) {
      if (s != nullptr) s->Stop();
    }
  }
  std::lock_guard<std::mutex> lock(submit_mu_);
  stopped_ = true;
}

ShapedTransport::Peer* ShapedTransport::Find(SiteId peer) const {
  for (const auto& p : peers_) {
    if (p->id == peer) return p.get();
  }
  return nullptr;
}

double ShapedTransport::RealNow() const {
  return std::chrono::duration<double>(SteadyClock::now() - origin_).count();
}

double ShapedTransport::TraceNow() const {
  return std::chrono::duration<double>(SteadyClock::now() - origin_).count() * options_.time_scale;
}

bool ShapedTransport::HeartbeatArrives(const Peer& p) const {
  // A heartbeat put on the connection now stands for one that entered the
  // link a delay ago: it arrives when the link carried anything then (an
  // outage carries nothing).
  const double now = TraceNow();
  return p.priority.BandwidthAt(std::max(0.0, now - p.priority.DelayAt(now))) > 0;
}

void ShapedTransport::SetDeliveryCallback(DeliveryCallback callback) {
  std::lock_guard<std::mutex> lock(submit_mu_);
  callback_ = std::move(callback);
}

void ShapedTransport::Submit(SiteId peer, Lane lane, WanMessage message, int64_t bytes) {
  Peer* p = Find(peer);
  if (p == nullptr) {
    spdlog::error("wan: no link to site {}; message dropped", peer);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    if (stopping_) return;
    p->messages.fetch_add(1, std::memory_order_relaxed);
    p->in_model[Index(lane)].fetch_add(1, std::memory_order_relaxed);
    if (lane == Lane::kBulk) {
      p->bytes_offered.fetch_add(bytes, std::memory_order_relaxed);
      std::lock_guard<std::mutex> span(p->span_mu);
      if (p->first_offer_s < 0) p->first_offer_s = TraceNow();
    }
    size_t index = 0;
    while (peers_[index].get() != p) ++index;
    submissions_.push_back(Submission{index, lane, std::move(message)});
  }
  uv_async_send(&wake_);
}

void ShapedTransport::SendBatch(SiteId peer, WanBatch batch) {
  const int64_t bytes = static_cast<int64_t>(batch.payload.size());
  Peer* p = options_.relay_after_ms > 0 ? Find(peer) : nullptr;
  if (p == nullptr) {
    Submit(peer, Lane::kBulk, std::move(batch), bytes);
    return;
  }
  std::lock_guard<std::mutex> lock(relay_mu_);
  if (batch.seq <= p->acked_through.load()) {
    // The stream started again (the peer lost its store): forget the old one.
    p->acked_through.store(batch.seq - 1);
    std::erase_if(p->unacked, [&](const Peer::Unacked& u) { return u.seq >= batch.seq; });
  }
  auto copy = std::make_shared<const WanBatch>(batch);
  Peer* via = p->via.load();
  p->unacked.push_back(Peer::Unacked{batch.seq, RealNow(), via == nullptr, copy});
  if (via == nullptr) {
    Submit(peer, Lane::kBulk, std::move(batch), bytes);
  } else {
    Submit(via->id, Lane::kBulk, WanRelay{peer, std::move(batch)}, bytes);
  }
}

bool ShapedTransport::RelayWanted(const WanMessage& m) {
  const auto* r = std::get_if<WanRelay>(&m);
  if (r == nullptr) return true;
  Peer* dest = Find(r->dest);
  return dest != nullptr && r->batch.seq > dest->acked_through.load();
}

void ShapedTransport::AckedThrough(Peer& dest, uint64_t seq) {
  if (seq > dest.acked_through.load()) dest.acked_through.store(seq);
  const uint64_t through = dest.acked_through.load();
  while (!dest.unacked.empty() && dest.unacked.front().seq <= through) dest.unacked.pop_front();
}

ShapedTransport::Peer* ShapedTransport::ChooseRelay(const Peer& dest, SiteId avoid, double now) {
  const double fresh = static_cast<double>(options_.relay_after_ms) / 1000.0;
  Peer* best = nullptr;
  double best_eta = 0;
  Peer* again = nullptr;  // `avoid`, when it is the only relay there is
  for (const auto& c : peers_) {
    if (c.get() == &dest || c->via.load() != nullptr) continue;
    if (now - c->relay_refused_s < kRelayRefusedSeconds) continue;
    // Its own link answers: it has acknowledged batches, and nothing for
    // it has waited past the relay threshold.
    if (!c->answered) continue;
    if (!c->unacked.empty() && now - c->unacked.front().sent_s > fresh) continue;
    if (c->id == avoid) {
      again = c.get();
      continue;
    }
    const double eta = EstimateDeliverySeconds(c->id, 0);
    if (best == nullptr || eta < best_eta) {
      best = c.get();
      best_eta = eta;
    }
  }
  return best != nullptr ? best : again;
}

void ShapedTransport::Reroute(Peer& dest, Peer* via, double now) {
  for (Peer::Unacked& u : dest.unacked) {
    if (via == nullptr && u.straight) continue;
    u.sent_s = now;
    const int64_t bytes = static_cast<int64_t>(u.batch->payload.size());
    if (via == nullptr) {
      u.straight = true;
      Submit(dest.id, Lane::kBulk, *u.batch, bytes);
    } else {
      Submit(via->id, Lane::kBulk, WanRelay{dest.id, *u.batch}, bytes);
    }
  }
}

void ShapedTransport::OnRelayTimer(uv_timer_t* handle) {
  static_cast<ShapedTransport*>(handle->data)->CheckRelays();
}

void ShapedTransport::CheckRelays() {
  const double after = static_cast<double>(options_.relay_after_ms) / 1000.0;
  std::lock_guard<std::mutex> lock(relay_mu_);
  const double now = RealNow();
  for (const auto& p : peers_) {
    // The oldest batch for this peer waited too long, on its own link or
    // through the relay it took (which crosses two links and the relay's
    // queue: it gets three times as long): try another way.
    Peer* old = p->via.load();
    const double waited_long = old == nullptr ? after : 3 * after;
    if (p->unacked.empty() || now - p->unacked.front().sent_s <= waited_long) continue;
    Peer* next = ChooseRelay(*p, old != nullptr ? old->id : -1, now);
    if (next == nullptr) continue;
    if (next != old) {
      spdlog::info("wan: site {} acknowledged nothing for {:.1f} s; its batches go through site {} until {}", p->id,
                   now - p->unacked.front().sent_s, next->id,
                   old == nullptr ? "its link answers again" : "either link answers");
    }
    p->via.store(next);
    p->relay_turns.fetch_add(1, std::memory_order_relaxed);
    Reroute(*p, next, now);
  }
}

Result<BatchAck> ShapedTransport::Forward(SiteId dest, WanBatch batch, int64_t timeout_ms) {
  if (options_.relay_after_ms <= 0) {
    return FailedPreconditionError("this site does not relay batches ([wan] relay_after_ms is 0)");
  }
  Peer* p = Find(dest);
  if (p == nullptr) return InvalidArgumentError("no link to site " + std::to_string(dest) + " to relay a batch on");
  auto waiter = std::make_shared<ForwardWaiter>();
  {
    std::lock_guard<std::mutex> lock(forward_mu_);
    if (forwarding_stopped_) return UnavailableError("the relaying site is stopping");
    waiters_.insert(waiter);
  }
  const int64_t bytes = static_cast<int64_t>(batch.payload.size());
  batch.relayed = true;
  Submit(dest, Lane::kBulk, WanForward{std::move(batch), waiter}, bytes);
  Result<BatchAck> r = waiter->Wait(SteadyClock::now() + std::chrono::milliseconds(std::max<int64_t>(1, timeout_ms)));
  std::lock_guard<std::mutex> lock(forward_mu_);
  waiters_.erase(waiter);
  return r;
}

void ShapedTransport::StopForwarding() {
  std::lock_guard<std::mutex> lock(forward_mu_);
  forwarding_stopped_ = true;
  for (const auto& w : waiters_) w->Cancel();
}

void ShapedTransport::SendClock(SiteId peer, WanClockReport report) {
  // The receiver holds a report until the batches through its last_seq have
  // landed, so reports need not queue behind batches.
  Submit(peer, Lane::kPriority, report, kSmallMessageBytes);
}

void ShapedTransport::SendNotice(SiteId peer, WanNotice notice) {
  const int64_t bytes = kSmallMessageBytes + 8 * static_cast<int64_t>(notice.keys.size());
  Submit(peer, Lane::kPriority, std::move(notice), bytes);
}

void ShapedTransport::OnWake(uv_async_t* handle) {
  static_cast<ShapedTransport*>(handle->data)->DrainSubmissions();
}

void ShapedTransport::DrainSubmissions() {
  std::vector<Submission> work;
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    work.swap(submissions_);
    stopping = stopping_;
  }
  if (stopping) {
    for (auto& p : peers_) {
      for (auto& s : p->shaper) s.reset();  // closes its timer
    }
    uv_timer_stop(&relay_timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(&relay_timer_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    return;
  }
  for (Submission& s : work) {
    Peer& p = *peers_[s.peer];
    const int lane = Index(s.lane);
    std::vector<uint8_t> bytes;
    if (WanBatch* b = ShapedBatch(s.message)) {
      bytes = std::move(b->payload);
    } else if (auto* n = std::get_if<WanNotice>(&s.message)) {
      bytes.resize(static_cast<size_t>(kSmallMessageBytes) + 8 * n->keys.size());
    } else {
      bytes.resize(static_cast<size_t>(kSmallMessageBytes));
    }
    p.pending[lane].push_back(std::move(s.message));
    Status st = p.shaper[lane]->Send(std::move(bytes));
    if (!st.ok()) {
      p.pending[lane].pop_back();
      p.in_model[lane].fetch_sub(1, std::memory_order_relaxed);
      spdlog::error("wan: link to site {} dropped a message: {}", p.id, st.ToString());
    }
  }
}

void ShapedTransport::OnSent(Peer* p, const WanMessage& m, const BatchAck& ack) {
  if (const auto* f = std::get_if<WanForward>(&m)) {
    // Another site's batch, carried for its relay call: the answer is its.
    p->forwarded.fetch_add(1, std::memory_order_relaxed);
    p->bytes_acked.fetch_add(static_cast<int64_t>(f->batch.payload.size()), std::memory_order_relaxed);
    BatchAck a = ack;
    a.seq = f->batch.seq;
    f->waiter->Complete(a);
    return;
  }
  // This site's batch, straight to p or relayed through p to r->dest:
  // either way it crossed the link to p.
  const auto* r = std::get_if<WanRelay>(&m);
  const WanBatch* b = r != nullptr ? &r->batch : std::get_if<WanBatch>(&m);
  if (b == nullptr) return;
  const SiteId dest = r != nullptr ? r->dest : p->id;
  p->bytes_acked.fetch_add(static_cast<int64_t>(b->payload.size()), std::memory_order_relaxed);
  if (r == nullptr) p->batches.fetch_add(1, std::memory_order_relaxed);
  if (options_.relay_after_ms > 0) {
    std::lock_guard<std::mutex> lock(relay_mu_);
    Peer* d = Find(dest);
    if (d != nullptr) {
      AckedThrough(*d, b->seq);
      if (d == p) {
        d->answered = true;
        if (d->via.load() != nullptr) {
          // The link answers again: the next batches go straight, and so
          // do those still only on their way through the relay (a relay
          // that is gone would hold them, and the peer takes each once).
          spdlog::info("wan: site {} answers again on its own link", d->id);
          d->via.store(nullptr);
          Reroute(*d, nullptr, RealNow());
        }
      } else {
        d->relayed.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  DeliveryCallback cb;
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    cb = callback_;
  }
  if (!cb) return;
  BatchAck a = ack;
  a.seq = b->seq;  // the batch sent, whatever the channel filled in
  cb(dest, a);
}

Result<OuterStatePage> ShapedTransport::FetchOuterState(SiteId peer, uint64_t incarnation, uint64_t snapshot,
                                                        int32_t page, int64_t timeout_ms) {
  Peer* p = Find(peer);
  if (p == nullptr) return InvalidArgumentError("no link to site " + std::to_string(peer));
  if (options_.emulate_links && !HeartbeatArrives(*p)) {
    return UnavailableError("the link to site " + std::to_string(peer) + " is out");
  }
  const auto start = SteadyClock::now();
  std::unique_ptr<PeerChannel> channel = channels_(peer, Lane::kRelay);
  if (channel == nullptr) return UnavailableError("no channel to site " + std::to_string(peer));
  GEOPS_ASSIGN_OR_RETURN(OuterStatePage got, channel->FetchOuterState(incarnation, snapshot, page));
  if (options_.emulate_links) {
    int64_t bytes = kSmallMessageBytes;
    for (const auto& [k, v] : got.records) bytes += static_cast<int64_t>(k.size() + v.size());
    const auto due = start + std::chrono::duration_cast<SteadyClock::duration>(
                                 std::chrono::duration<double>(EstimateDeliverySeconds(peer, bytes)));
    const auto cap = start + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
    std::this_thread::sleep_until(std::min(due, cap));
  }
  return got;
}

double ShapedTransport::EstimateDeliverySeconds(SiteId peer, int64_t bytes) {
  Peer* p = Find(peer);
  if (p == nullptr) return 0;
  if (Peer* via = p->via.load()) {
    // Relayed: the link to the relay, then the relay's own link, taken to
    // be as long as this one's usual delay.
    return EstimateDeliverySeconds(via->id, bytes) + p->schedule.DelayAt(TraceNow()) / options_.time_scale;
  }
  const double now = TraceNow();
  const double bw = p->schedule.BandwidthAt(now);
  if (!(bw > 0)) return 3600;
  // What is still ahead of `bytes`: in the link model when it holds the
  // rate; otherwise (the kernel or a real network holds the queue) what the
  // peer has not acknowledged yet.
  const bool model_holds_queue = options_.emulate_links && !options_.kernel_rate;
  const double queued = static_cast<double>(
      p->bytes_offered.load() - (model_holds_queue ? p->bytes_delivered.load() : p->bytes_acked.load()));
  const double trace_s = (std::max(0.0, queued) + static_cast<double>(bytes)) * 8.0 / bw + p->schedule.DelayAt(now);
  return trace_s / options_.time_scale;
}

double ShapedTransport::BandwidthBytesPerSecond(SiteId peer) {
  Peer* p = Find(peer);
  if (p == nullptr) return 0;
  if (Peer* via = p->via.load()) p = via;  // relayed: the relay's link carries them first
  return p->schedule.BandwidthAt(TraceNow()) / 8.0 * options_.time_scale;
}

double ShapedTransport::EstimateReportSeconds(SiteId peer) {
  Peer* p = Find(peer);
  if (p == nullptr) return 0;
  const double now = TraceNow();
  const double left = p->priority.TransmitEnd(now, kSmallMessageBytes * 8.0);  // the link's delay and outages
  if (!std::isfinite(left)) return 3600;
  return std::min(3600.0, (left - now + p->priority.DelayAt(left)) / options_.time_scale);
}

bool ShapedTransport::WaitQuiet(Deadline deadline) const {
  while (true) {
    bool quiet = true;
    {
      std::lock_guard<std::mutex> lock(submit_mu_);
      quiet = submissions_.empty();
    }
    for (const auto& p : peers_) {
      for (int lane = 0; lane < 2; ++lane) {
        quiet = quiet && p->in_model[lane].load() == 0 && p->sender[lane]->Idle();
      }
      quiet = quiet && (p->sender[2] == nullptr || p->sender[2]->Idle());
    }
    if (quiet) return true;
    if (deadline.Expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<LinkStats> ShapedTransport::stats() const {
  std::vector<LinkStats> out;
  for (const auto& p : peers_) {
    LinkStats s;
    s.peer = p->id;
    s.name = p->name;
    s.batches = p->batches.load();
    s.messages = p->messages.load();
    s.bytes_offered = p->bytes_offered.load();
    s.bytes_delivered = p->bytes_delivered.load();
    for (const auto& sender : p->sender) {
      if (sender == nullptr) continue;
      s.wire_bytes += sender->wire_bytes();
      s.retries += sender->retries();
      s.refused += sender->refused();
    }
    s.relayed = p->relayed.load();
    s.relay_turns = p->relay_turns.load();
    s.forwarded = p->forwarded.load();
    {
      std::lock_guard<std::mutex> lock(p->span_mu);
      s.first_offer_s = p->first_offer_s;
      s.last_delivery_s = p->last_delivery_s;
    }
    if (s.first_offer_s >= 0 && s.last_delivery_s > s.first_offer_s) {
      s.offered_bps = p->schedule.MeanBandwidth(s.first_offer_s, s.last_delivery_s);
      s.achieved_bps = static_cast<double>(s.bytes_delivered) * 8.0 / (s.last_delivery_s - s.first_offer_s);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace geops::wan
