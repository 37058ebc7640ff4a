#include "wan/link/shaped_transport.h"

#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

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

}  // namespace

struct ShapedTransport::Peer {
  SiteId id = 0;
  std::string name;
  LinkSchedule schedule;
  LinkSchedule priority;                  // schedule.WithBandwidth(kPriorityLaneBps)
  std::unique_ptr<LinkShaper> shaper[2];  // loop thread
  std::deque<WanMessage> pending[2];      // loop thread: in the shaper, in order
  std::unique_ptr<LaneSender> sender[2];
  std::atomic<int64_t> in_model[2] = {0, 0};  // messages offered, not yet delivered by the model
  std::atomic<int64_t> bytes_offered{0};
  std::atomic<int64_t> bytes_delivered{0};
  std::atomic<int64_t> bytes_acked{0};  // bulk-lane bytes the peer accepted
  std::atomic<int64_t> messages{0};
  std::atomic<int64_t> batches{0};
  mutable std::mutex span_mu;
  double first_offer_s = -1;    // GUARDED_BY(span_mu)
  double last_delivery_s = -1;  // GUARDED_BY(span_mu)
};

Status ShapedTransportOptions::Validate() const {
  if (!(time_scale > 0) || !std::isfinite(time_scale)) {
    return InvalidArgumentError("shaped transport: time_scale must be > 0, got " + std::to_string(time_scale));
  }
  if (!(burst_bytes >= 0)) return InvalidArgumentError("shaped transport: burst_bytes must be >= 0");
  if (heartbeat_ms < 0) return InvalidArgumentError("shaped transport: heartbeat_ms must be >= 0");
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
  if (uv_loop_init(&t->loop_) != 0) return InternalError("shaped transport: uv_loop_init failed");
  uv_async_init(&t->loop_, &t->wake_, &ShapedTransport::OnWake);
  t->wake_.data = t.get();
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
        if (auto* b = std::get_if<WanBatch>(&msg)) {
          b->payload = std::move(m.payload);
          raw->bytes_delivered.fetch_add(static_cast<int64_t>(b->payload.size()), std::memory_order_relaxed);
        } else if (lane == 0) {
          raw->bytes_delivered.fetch_add(static_cast<int64_t>(m.payload.size()), std::memory_order_relaxed);
        }
        if (lane == 0) {
          std::lock_guard<std::mutex> lock(raw->span_mu);
          raw->last_delivery_s = m.delivered_s;
        }
        raw->sender[lane]->Push(std::move(msg));
        raw->in_model[lane].fetch_sub(1, std::memory_order_relaxed);
      });
      if (!shaper.ok()) return shaper.status();
      p->shaper[lane] = std::move(shaper).value();
      LaneSenderOptions lo = options.sender;
      lo.heartbeat_ms = lane == 1 ? options.heartbeat_ms : 0;
      ShapedTransport* self = t.get();
      if (lane == 1 && options.emulate_links) lo.link_up = [self, raw] { return self->HeartbeatArrives(*raw); };
      p->sender[lane] = std::make_unique<LaneSender>(l.peer, lane == 0 ? Lane::kBulk : Lane::kPriority, channels, lo,
                                                     [self, raw](const WanMessage& m, const BatchAck& ack) {
                                                       self->OnSent(raw, m, ack);
                                                     });
    }
    t->peers_.push_back(std::move(p));
  }
  ShapedTransport* self = t.get();
  t->loop_thread_ = std::thread([self] {
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
  uv_async_send(&wake_);
  if (loop_thread_.joinable()) loop_thread_.join();
  for (auto& p : peers_) {
    for (auto& s : p->sender) s->Stop();
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
  Submit(peer, Lane::kBulk, std::move(batch), bytes);
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
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    return;
  }
  for (Submission& s : work) {
    Peer& p = *peers_[s.peer];
    const int lane = Index(s.lane);
    std::vector<uint8_t> bytes;
    if (auto* b = std::get_if<WanBatch>(&s.message)) {
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
  const auto* b = std::get_if<WanBatch>(&m);
  if (b == nullptr) return;
  p->batches.fetch_add(1, std::memory_order_relaxed);
  p->bytes_acked.fetch_add(static_cast<int64_t>(b->payload.size()), std::memory_order_relaxed);
  DeliveryCallback cb;
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    cb = callback_;
  }
  if (!cb) return;
  BatchAck a = ack;
  a.seq = b->seq;  // the batch sent, whatever the channel filled in
  cb(p->id, a);
}

double ShapedTransport::EstimateDeliverySeconds(SiteId peer, int64_t bytes) {
  Peer* p = Find(peer);
  if (p == nullptr) return 0;
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
    s.wire_bytes = p->sender[0]->wire_bytes() + p->sender[1]->wire_bytes();
    s.retries = p->sender[0]->retries() + p->sender[1]->retries();
    s.refused = p->sender[0]->refused() + p->sender[1]->refused();
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
