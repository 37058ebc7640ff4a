// FakeWanNetwork: an in-memory network of WAN transports between sites, for
// tests, with fault injection per directed link: random delay (which also
// reorders messages), duplicate delivery, a bandwidth (messages queue behind
// each other), and holding batches back until released. Notices take a
// priority lane that bypasses bandwidth and holds.
//
// One delivery thread calls the receivers with no lock held; a receiver's
// "later" answer (ResourceExhausted, Unavailable) makes it retry after 2 ms.
// Any other error is counted (tests expect none unless they inject bad input).
// A site marked down (SetDown) answers nothing: messages to it are retried
// every 2 ms until it is up again, like a TCP peer that refuses connections.
//
// Thread-safety: all methods may be called from any thread.
#ifndef GEOPS_TESTS_WAN_FAKE_WAN_NETWORK_H_
#define GEOPS_TESTS_WAN_FAKE_WAN_NETWORK_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "common/deadline.h"
#include "wan/wan_transport.h"

namespace geops::wan::testing {

struct LinkFaults {
  int64_t min_delay_us = 0;
  int64_t max_delay_us = 0;
  double duplicate = 0;          // probability of a second delivery
  double bytes_per_second = 0;   // 0: unlimited
  bool hold_batches = false;     // batches wait until ReleaseHeld()
};

class FakeWanNetwork {
 public:
  explicit FakeWanNetwork(uint64_t seed = 1) : rng_(seed) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~FakeWanNetwork() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  WanTransport* Transport(SiteId site) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& e = endpoints_[site];
    if (!e) e = std::make_unique<Endpoint>(this, site);
    return e.get();
  }
  // Returns once no delivery is in progress, so a receiver detached here
  // (nullptr) is never called again and may be destroyed.
  void Attach(SiteId site, WanReceiver* receiver) {
    std::unique_lock<std::mutex> lock(mu_);
    delivered_cv_.wait(lock, [this] { return !delivering_ && calls_ == 0; });
    receivers_[site] = receiver;
  }
  // While down, `site` receives nothing (messages to it wait and retry).
  void SetDown(SiteId site, bool down) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (down) {
        down_.insert(site);
      } else {
        down_.erase(site);
      }
    }
    cv_.notify_all();
  }
  void SetFaults(SiteId from, SiteId to, LinkFaults f) {
    std::lock_guard<std::mutex> lock(mu_);
    links_[{from, to}].faults = f;
  }
  void SetAllFaults(const std::vector<SiteId>& sites, LinkFaults f) {
    for (SiteId a : sites)
      for (SiteId b : sites)
        if (a != b) SetFaults(a, b, f);
  }
  // Drops the batches held on a link (they die with their sender).
  void DropHeld(SiteId from, SiteId to) {
    std::lock_guard<std::mutex> lock(mu_);
    links_[{from, to}].held.clear();
  }
  // Lets held batches go (and stops holding new ones on that link).
  void ReleaseHeld(SiteId from, SiteId to) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Link& l = links_[{from, to}];
      l.faults.hold_batches = false;
      const auto now = SteadyClock::now();
      for (Message& m : l.held) {
        m.due = now;
        Push(std::move(m));
      }
      l.held.clear();
    }
    cv_.notify_all();
  }
  // Blocks until nothing is queued, held or being delivered, or `ms` pass.
  bool WaitIdle(int64_t ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return IdleLocked(); });
  }
  int64_t errors() const { return errors_.load(); }
  int64_t duplicates() const { return duplicates_.load(); }
  int64_t bytes(SiteId from, SiteId to) {
    std::lock_guard<std::mutex> lock(mu_);
    return links_[{from, to}].bytes;
  }

 private:
  struct Message {
    SteadyClock::time_point due;
    uint64_t order = 0;
    SiteId from = 0, to = 0;
    std::variant<WanBatch, WanClockReport, WanNotice> body;
  };
  struct Later {
    bool operator()(const Message& a, const Message& b) const {
      return a.due != b.due ? a.due > b.due : a.order > b.order;
    }
  };
  struct Link {
    LinkFaults faults;
    SteadyClock::time_point busy_until;
    std::vector<Message> held;
    int64_t bytes = 0;
  };

  class Endpoint : public WanTransport {
   public:
    Endpoint(FakeWanNetwork* net, SiteId site) : net_(net), site_(site) {}
    // Like Attach: once it returns, the old callback is not running.
    void SetDeliveryCallback(DeliveryCallback cb) override {
      std::unique_lock<std::mutex> lock(net_->mu_);
      net_->delivered_cv_.wait(lock, [this] { return !net_->delivering_; });
      callback_ = std::move(cb);
    }
    void SendBatch(SiteId peer, WanBatch batch) override { net_->Send(site_, peer, std::move(batch)); }
    void SendClock(SiteId peer, WanClockReport r) override { net_->Send(site_, peer, r); }
    void SendNotice(SiteId peer, WanNotice n) override { net_->Send(site_, peer, std::move(n)); }
    double EstimateDeliverySeconds(SiteId peer, int64_t bytes) override {
      std::lock_guard<std::mutex> lock(net_->mu_);
      Link& l = net_->links_[{site_, peer}];
      if (l.faults.hold_batches) return 3600;
      double s = l.faults.max_delay_us * 1e-6;
      if (l.faults.bytes_per_second > 0) {
        s += std::max(0.0, std::chrono::duration<double>(l.busy_until - SteadyClock::now()).count());
        s += static_cast<double>(bytes) / l.faults.bytes_per_second;
      }
      return s;
    }
    double BandwidthBytesPerSecond(SiteId peer) override {
      std::lock_guard<std::mutex> lock(net_->mu_);
      return net_->links_[{site_, peer}].faults.bytes_per_second;
    }
    // A call straight to the peer's receiver (Unavailable while it is down
    // or detached).
    Result<OuterStatePage> FetchOuterState(SiteId peer, uint64_t incarnation, uint64_t snapshot, int32_t page,
                                           int64_t /*timeout_ms*/) override {
      WanReceiver* r = nullptr;
      {
        std::lock_guard<std::mutex> lock(net_->mu_);
        if (net_->down_.count(peer) == 0 && net_->receivers_.count(peer) > 0) r = net_->receivers_[peer];
        if (r == nullptr) return UnavailableError("site " + std::to_string(peer) + " is down");
        ++net_->calls_;
      }
      Result<OuterStatePage> got = r->OnOuterState(site_, incarnation, snapshot, page);
      {
        std::lock_guard<std::mutex> lock(net_->mu_);
        --net_->calls_;
      }
      net_->delivered_cv_.notify_all();
      return got;
    }
    DeliveryCallback callback_;  // GUARDED_BY(net_->mu_)

   private:
    FakeWanNetwork* net_;
    SiteId site_;
  };

  template <typename Body>
  void Send(SiteId from, SiteId to, Body body) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Link& l = links_[{from, to}];
      Message m;
      m.from = from;
      m.to = to;
      const auto now = SteadyClock::now();
      auto due = now;
      constexpr bool kBatch = std::is_same_v<Body, WanBatch>;
      constexpr bool kNotice = std::is_same_v<Body, WanNotice>;
      if constexpr (kBatch) {
        l.bytes += static_cast<int64_t>(body.payload.size());
        if (l.faults.bytes_per_second > 0) {
          const auto start = std::max(now, l.busy_until);
          l.busy_until = start + std::chrono::microseconds(static_cast<int64_t>(
                                     1e6 * static_cast<double>(body.payload.size()) / l.faults.bytes_per_second));
          due = l.busy_until;
        }
      } else if constexpr (!kNotice) {
        due = std::max(now, l.busy_until);  // clock reports queue behind batches
      }
      const int64_t lo = l.faults.min_delay_us, hi = std::max(lo, l.faults.max_delay_us);
      due += std::chrono::microseconds(std::uniform_int_distribution<int64_t>(lo, hi)(rng_));
      m.due = due;
      m.body = std::move(body);
      const bool dup = l.faults.duplicate > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < l.faults.duplicate;
      if (kBatch && l.faults.hold_batches) {
        l.held.push_back(m);
      } else {
        if (dup) {
          Message copy = m;
          copy.due += std::chrono::microseconds(hi + 100);
          Push(std::move(copy));
          ++duplicates_;
        }
        Push(std::move(m));
      }
    }
    cv_.notify_all();
  }

  void Push(Message m) {  // REQUIRES: mu_ held
    m.order = next_order_++;
    queue_.push(std::move(m));
  }

  bool IdleLocked() const {
    if (!queue_.empty() || delivering_) return false;
    for (const auto& [k, l] : links_) {
      if (!l.held.empty()) return false;
    }
    return true;
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (queue_.empty()) {
        idle_cv_.notify_all();
        cv_.wait(lock);
        continue;
      }
      const auto due = queue_.top().due;
      if (SteadyClock::now() < due) {
        cv_.wait_until(lock, due);
        continue;
      }
      Message m = queue_.top();
      queue_.pop();
      if (down_.count(m.to) > 0) {
        m.due = SteadyClock::now() + std::chrono::milliseconds(2);
        Push(std::move(m));
        continue;
      }
      WanReceiver* r = receivers_.count(m.to) ? receivers_[m.to] : nullptr;
      Endpoint* sender = endpoints_.count(m.from) ? endpoints_[m.from].get() : nullptr;
      WanTransport::DeliveryCallback cb = sender ? sender->callback_ : nullptr;
      delivering_ = true;
      lock.unlock();
      Status s;
      uint64_t acked = 0;
      if (r != nullptr) {
        if (auto* b = std::get_if<WanBatch>(&m.body)) {
          s = DeliverBatch(*r, *b);
          acked = b->seq;
        } else if (auto* c = std::get_if<WanClockReport>(&m.body)) {
          s = r->OnClock(*c);
        } else {
          s = r->OnNotice(std::get<WanNotice>(m.body));
        }
      }
      if (s.ok() && acked != 0 && cb) cb(m.to, BatchAck{acked, r->QuarantineOf(m.from, acked)});
      lock.lock();
      delivering_ = false;
      delivered_cv_.notify_all();
      if (s.code() == StatusCode::kResourceExhausted || s.code() == StatusCode::kUnavailable) {
        m.due = SteadyClock::now() + std::chrono::milliseconds(2);
        Push(std::move(m));
      } else if (!s.ok()) {
        ++errors_;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::map<SiteId, std::unique_ptr<Endpoint>> endpoints_;
  std::map<SiteId, WanReceiver*> receivers_;
  std::set<SiteId> down_;
  std::map<std::pair<SiteId, SiteId>, Link> links_;
  std::priority_queue<Message, std::vector<Message>, Later> queue_;
  uint64_t next_order_ = 0;
  bool delivering_ = false;
  int calls_ = 0;                         // FetchOuterState calls in progress
  std::condition_variable delivered_cv_;  // delivering_ or calls_ went down
  bool stop_ = false;
  std::mt19937_64 rng_;
  std::atomic<int64_t> errors_{0};
  std::atomic<int64_t> duplicates_{0};
  std::thread thread_;
};

}  // namespace geops::wan::testing

#endif  // GEOPS_TESTS_WAN_FAKE_WAN_NETWORK_H_
