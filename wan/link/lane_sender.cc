#include "wan/link/lane_sender.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"

namespace geops::wan {

namespace {

// How often an idle lane looks whether an outage ended, ms.
constexpr int64_t kOutagePollMs = 20;

const char* LaneName(Lane lane) {
  switch (lane) {
    case Lane::kBulk: return "bulk";
    case Lane::kPriority: return "priority";
    case Lane::kRelay: return "relay";
  }
  return "?";
}

bool Retryable(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kResourceExhausted;
}

}  // namespace

void ForwardWaiter::Complete(Result<BatchAck> result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    if (result.ok()) ack_ = std::move(result).value();
    else status_ = result.status();
  }
  cv_.notify_all();
}

void ForwardWaiter::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

Result<BatchAck> ForwardWaiter::Wait(SteadyClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [this] { return done_ || cancelled_; });
  if (!done_) {
    return UnavailableError(cancelled_ ? "the relaying site is stopping"
                                       : "the destination did not acknowledge the relayed batch in time");
  }
  if (!status_.ok()) return status_;
  return ack_;
}

const WanBatch* PushedBatch(const WanMessage& m) {
  if (const auto* b = std::get_if<WanBatch>(&m)) return b;
  if (const auto* f = std::get_if<WanForward>(&m)) return &f->batch;
  return nullptr;
}

LaneSender::LaneSender(SiteId peer, Lane lane, PeerChannelFactory factory, LaneSenderOptions options,
                       SentCallback on_sent)
    : peer_(peer), lane_(lane), factory_(std::move(factory)), options_(options), on_sent_(std::move(on_sent)) {
  thread_ = std::thread([this] {
    NameThisThread(std::string("lane-") + LaneName(lane_) + "-" + std::to_string(peer_));
    Loop();
  });
}

LaneSender::~LaneSender() { Stop(); }

void LaneSender::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LaneSender::Push(WanMessage message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::holds_alternative<WanClockReport>(message)) {
      // A newer report supersedes a queued one (clocks, seqs and the
      // drained mark only rise): while the peer cannot be reached, the
      // queue holds one report, not one per round.
      std::erase_if(queue_, [](const WanMessage& m) { return std::holds_alternative<WanClockReport>(m); });
    }
    queue_.push_back(std::move(message));
  }
  cv_.notify_all();
}

bool LaneSender::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !busy_;
}

Status LaneSender::SendOne(const WanMessage& m, BatchAck* ack) {
  if (const WanBatch* b = PushedBatch(m)) {
    Result<BatchAck> r = channel_->SendBatch(*b);
    if (!r.ok()) return r.status();
    *ack = std::move(r).value();
    return Status::Ok();
  }
  if (const auto* relay = std::get_if<WanRelay>(&m)) {
    Result<BatchAck> r = channel_->RelayBatch(relay->dest, relay->batch);
    if (!r.ok()) return r.status();
    *ack = std::move(r).value();
    return Status::Ok();
  }
  if (auto* c = std::get_if<WanClockReport>(&m)) return channel_->SendClock(*c);
  return channel_->SendNotice(std::get<WanNotice>(m));
}

size_t LaneSender::Window() const {
  if (!channel_ || options_.max_in_flight_batches <= 1) return 1;
  return std::min(static_cast<size_t>(options_.max_in_flight_batches), channel_->max_in_flight());
}

bool LaneSender::BackOff(int64_t* backoff_ms) {
  retries_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock<std::mutex> wait_lock(mu_);
  if (cv_.wait_for(wait_lock, std::chrono::milliseconds(*backoff_ms), [this] { return stop_; })) return false;
  *backoff_ms = std::min(*backoff_ms * 2, options_.max_backoff_ms);
  return true;
}

bool LaneSender::PassedOn(const WanMessage& m) {
  return std::holds_alternative<WanForward>(m) || std::holds_alternative<WanRelay>(m);
}

void LaneSender::DropPassedOn(const WanMessage& m, const Status& s) {
  // Not a refusal: the origin (or this site's relay check) tries again.
  if (std::holds_alternative<WanForward>(m) && options_.on_refused) options_.on_refused(m, s);
}

void LaneSender::Refused(const WanMessage& m, const Status& s, const char* lane) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  spdlog::error("wan: site {} refused a message on the {} lane: {}", peer_, lane, s.ToString());
  if (options_.on_refused) options_.on_refused(m, s);
}

void LaneSender::SendBatchRun() {
  const size_t window = Window();
  std::deque<WanMessage> run;  // taken from the queue and not acknowledged yet, oldest first
  size_t begun = 0;            // the first `begun` of run are in flight on the channel
  int64_t backoff = options_.retry_backoff_ms;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      while (run.size() < window && !queue_.empty() && PushedBatch(queue_.front()) != nullptr) {
        run.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (run.empty()) return;
    if (!channel_) channel_ = factory_(peer_, lane_);
    Status s = channel_ ? Status::Ok() : UnavailableError("no channel to site " + std::to_string(peer_) + " yet");
    size_t failed = 0;  // which of run the error is about
    while (s.ok() && begun < run.size()) {
      s = channel_->BeginBatch(*PushedBatch(run[begun]));
      if (s.ok()) ++begun;
      else failed = begun;
    }
    if (s.ok()) {
      Result<BatchAck> r = channel_->EndBatch();
      if (r.ok()) {
        --begun;
        wire_bytes_.store(channel_->wire_bytes(), std::memory_order_relaxed);
        if (on_sent_) on_sent_(run.front(), r.value());
        run.pop_front();
        backoff = options_.retry_backoff_ms;
        continue;
      }
      s = r.status();
    }
    // Whatever was in flight is sent again (batches are idempotent).
    if (channel_) {
      channel_->Abandon();
      wire_bytes_.store(channel_->wire_bytes(), std::memory_order_relaxed);
    }
    begun = 0;
    const bool once = options_.try_passed_on_once && PassedOn(run[failed]);
    if (!Retryable(s) || once) {
      if (Retryable(s)) {
        DropPassedOn(run[failed], s);
      } else {
        Refused(run[failed], s, "bulk");
      }
      run.erase(run.begin() + static_cast<std::ptrdiff_t>(failed));
      continue;
    }
    if (!BackOff(&backoff)) return;
  }
}

void LaneSender::Loop() {
  const char* lane = LaneName(lane_);
  std::unique_lock<std::mutex> lock(mu_);
  // An idle lane greets the peer at once (see below).
  auto last_sent = std::chrono::steady_clock::now() - std::chrono::milliseconds(options_.heartbeat_ms);
  bool greeted = false;  // a heartbeat has reached the peer
  while (!stop_) {
    if (queue_.empty()) {
      if (options_.heartbeat_ms > 0) {
        const auto due = last_sent + std::chrono::milliseconds(options_.heartbeat_ms);
        cv_.wait_until(lock, due, [this] { return stop_ || !queue_.empty(); });
        if (stop_) break;
        if (queue_.empty() && std::chrono::steady_clock::now() >= due) {
          if (options_.link_up && !options_.link_up()) {
            // The link is out: no heartbeat gets through. Look again soon.
            last_sent = std::chrono::steady_clock::now() - std::chrono::milliseconds(options_.heartbeat_ms) +
                        std::chrono::milliseconds(std::min<int64_t>(options_.heartbeat_ms, kOutagePollMs));
            continue;
          }
          lock.unlock();
          if (!channel_) channel_ = factory_(peer_, lane_);
          if (channel_) {
            Status s = channel_->Heartbeat();
            greeted = greeted || s.ok();
            wire_bytes_.store(channel_->wire_bytes(), std::memory_order_relaxed);
            if (!s.ok() && s.code() != StatusCode::kUnavailable) {
              spdlog::warn("wan: heartbeat to site {}: {}", peer_, s.ToString());
            }
          }
          last_sent = std::chrono::steady_clock::now();
          lock.lock();
        }
      } else {
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      }
      continue;
    }
    busy_ = true;
    lock.unlock();
    if (!greeted && options_.heartbeat_ms > 0) {
      // The first message of this process to the peer is a heartbeat: it
      // carries this process's boot id, so a peer learns of a restart at
      // once, even on a lane that never goes idle (MirrorClient::Heartbeat).
      if (!channel_) channel_ = factory_(peer_, lane_);
      greeted = channel_ && channel_->Heartbeat().ok();
    }
    if (!channel_) channel_ = factory_(peer_, lane_);  // its Window() decides how batches go
    lock.lock();
    if (stop_ || queue_.empty()) {
      busy_ = false;
      continue;
    }
    if (PushedBatch(queue_.front()) != nullptr && Window() > 1) {
      lock.unlock();
      SendBatchRun();
      last_sent = std::chrono::steady_clock::now();
      lock.lock();
      busy_ = false;
      continue;
    }
    WanMessage m = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    int64_t backoff = options_.retry_backoff_ms;
    bool sent = false;
    BatchAck ack;
    while (true) {
      if (options_.wanted && !options_.wanted(m)) break;  // no longer needed: dropped
      if (!channel_) channel_ = factory_(peer_, lane_);
      Status s = channel_ ? SendOne(m, &ack) : UnavailableError("no channel to site " + std::to_string(peer_) + " yet");
      if (channel_) wire_bytes_.store(channel_->wire_bytes(), std::memory_order_relaxed);
      if (s.ok()) {
        sent = true;
        break;
      }
      if (!Retryable(s)) {
        Refused(m, s, lane);
        break;
      }
      if (options_.try_passed_on_once && PassedOn(m)) {
        DropPassedOn(m, s);
        break;
      }
      if (!BackOff(&backoff)) break;
    }
    if (sent && on_sent_) on_sent_(m, ack);
    last_sent = std::chrono::steady_clock::now();
    lock.lock();
    busy_ = false;
  }
}

}  // namespace geops::wan
