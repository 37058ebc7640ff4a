#include "wan/link/shaped_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <vector>
#include <thread>

namespace geops::wan {
namespace {

using Clock_ = std::chrono::steady_clock;

struct Arrival {
  char kind;  // 'b' batch, 'c' clock, 'n' notice, 'h' heartbeat, 'r' relay call
  uint64_t seq;
  double t;  // real seconds since the transport started
};

// Records what arrives and when; optionally fails the first sends.
struct Recorder {
  std::mutex mu;
  std::vector<Arrival> arrivals;
  Clock_::time_point start = Clock_::now();
  int fail_first = 0;
  uint64_t quarantine_seq = 0;  // the fake peer quarantines this batch (0: none)
  Status batch_answer;          // not OK: the fake peer answers every batch so
  std::vector<SiteId> relay_dests;  // of the relay calls, in order
  Status relay_answer;              // not OK: the fake relay answers every relay call so
  double Now() { return std::chrono::duration<double>(Clock_::now() - start).count(); }
};

class FakeChannel : public PeerChannel {
 public:
  explicit FakeChannel(Recorder* r) : r_(r) {}
  Result<BatchAck> SendBatch(const WanBatch& b) override {
    {
      std::lock_guard<std::mutex> lock(r_->mu);
      if (!r_->batch_answer.ok()) return r_->batch_answer;
    }
    GEOPS_RETURN_IF_ERROR(Record('b', b.seq, b.payload.size()));
    return BatchAck{b.seq, b.seq == r_->quarantine_seq ? "quarantined by the fake peer" : ""};
  }
  Status SendClock(const WanClockReport& c) override { return Record('c', c.last_seq, 40); }
  Status SendNotice(const WanNotice& n) override { return Record('n', n.seq, 40); }
  Status Heartbeat() override { return Record('h', 0, 0); }
  Result<BatchAck> RelayBatch(SiteId dest, const WanBatch& b) override {
    GEOPS_RETURN_IF_ERROR(Record('r', b.seq, b.payload.size()));
    std::lock_guard<std::mutex> lock(r_->mu);
    if (!r_->relay_answer.ok()) return r_->relay_answer;
    r_->relay_dests.push_back(dest);
    return BatchAck{b.seq, ""};
  }
  int64_t wire_bytes() const override { return bytes_; }

 private:
  Status Record(char kind, uint64_t seq, size_t bytes) {
    std::lock_guard<std::mutex> lock(r_->mu);
    if (r_->fail_first > 0) {
      --r_->fail_first;
      return UnavailableError("injected");
    }
    r_->arrivals.push_back({kind, seq, r_->Now()});
    bytes_ += static_cast<int64_t>(bytes);
    return Status::Ok();
  }
  Recorder* r_;
  int64_t bytes_ = 0;
};

std::unique_ptr<ShapedTransport> Make(Recorder* r, double bps, double delay_s, double scale) {
  ShapedTransportOptions o;
  o.time_scale = scale;
  o.heartbeat_ms = 0;
  auto t = ShapedTransport::Start({PeerLink{1, "a->b", LinkSchedule::Constant(bps, delay_s)}}, o,
                                  [r](SiteId, Lane) { return std::make_unique<FakeChannel>(r); });
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  r->start = Clock_::now();
  return std::move(t).value();
}

TEST(ShapedTransportTest, DeliversAtTheLinkBandwidthPlusDelayInOrder) {
  // 8 Mbit/s and 100 ms one-way at time scale 10: 10 MB/s and 10 ms real.
  Recorder r;
  auto t = Make(&r, 8e6, 0.1, 10);
  std::mutex acks_mu;
  std::vector<uint64_t> acks;
  std::vector<std::string> quarantined;
  r.quarantine_seq = 5;
  t->SetDeliveryCallback([&](SiteId peer, const BatchAck& ack) {
    std::lock_guard<std::mutex> lock(acks_mu);
    EXPECT_EQ(peer, 1);
    acks.push_back(ack.seq);
    quarantined.push_back(ack.quarantined);
  });
  const int kCount = 32;
  const size_t kBytes = 64 << 10;
  EXPECT_NEAR(t->BandwidthBytesPerSecond(1), 10e6, 1);
  for (int i = 1; i <= kCount; ++i) t->SendBatch(1, WanBatch{0, static_cast<uint64_t>(i), 0, std::vector<uint8_t>(kBytes, 1)});
  EXPECT_GT(t->EstimateDeliverySeconds(1, 0), 0.1);  // the queue is ~0.2 s deep
  t->SendClock(1, WanClockReport{0, 5, kCount, false});
  ASSERT_TRUE(t->WaitQuiet(Deadline::InMs(10000)));
  std::lock_guard<std::mutex> lock(r.mu);
  ASSERT_EQ(r.arrivals.size(), static_cast<size_t>(kCount + 1));
  std::vector<Arrival> batches;
  for (const Arrival& a : r.arrivals)
    if (a.kind == 'b') batches.push_back(a);
  ASSERT_EQ(batches.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(batches[i].seq, static_cast<uint64_t>(i + 1));
  EXPECT_NE(r.arrivals.back().kind, 'c');  // clock reports take the priority lane
  const double expected_last = kCount * kBytes / 10e6 + 0.01;
  std::printf("[ perf ] shaped link: last batch at %.1f ms (model %.1f ms)\n", batches.back().t * 1e3,
              expected_last * 1e3);
  EXPECT_GE(batches.back().t, expected_last - 0.002);
  EXPECT_LT(batches.back().t, expected_last * 1.5 + 0.05);
  std::lock_guard<std::mutex> lock2(acks_mu);
  ASSERT_EQ(acks.size(), static_cast<size_t>(kCount));
  EXPECT_EQ(acks.front(), 1u);
  EXPECT_EQ(acks.back(), static_cast<uint64_t>(kCount));
  // The peer's word on each batch reaches the callback with its seq.
  for (size_t i = 0; i < acks.size(); ++i) {
    EXPECT_EQ(quarantined[i].empty(), acks[i] != 5u) << "batch " << acks[i] << ": '" << quarantined[i] << "'";
  }
  std::vector<LinkStats> st = t->stats();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].batches, kCount);
  EXPECT_EQ(st[0].bytes_delivered, st[0].bytes_offered);
  EXPECT_GT(st[0].wire_bytes, static_cast<int64_t>(kCount * kBytes) - 1);
  EXPECT_NEAR(st[0].offered_bps, 8e6, 1);
  EXPECT_GT(st[0].achieved_bps, 0.7 * 8e6);
  EXPECT_LE(st[0].achieved_bps, 8e6 * 1.01);
}

TEST(ShapedTransportTest, NoticesOvertakeQueuedBatches) {
  Recorder r;
  auto t = Make(&r, 8e6, 0.05, 10);
  for (int i = 1; i <= 20; ++i) t->SendBatch(1, WanBatch{0, static_cast<uint64_t>(i), 0, std::vector<uint8_t>(64 << 10, 1)});
  // 20 x 64 KiB at 1 MB/s: the last batch lands 1.4 s from now. The notice
  // takes the link's delay alone (50 ms), and a loaded machine's
  // scheduling (up to 250 ms here): some batches may land before it.
  const double sent = r.Now();
  t->SendNotice(1, WanNotice{0, 20, {{0, 1}}, 1000});
  ASSERT_TRUE(t->WaitQuiet(Deadline::InMs(10000)));
  std::lock_guard<std::mutex> lock(r.mu);
  ASSERT_EQ(r.arrivals.size(), 21u);
  size_t notice_at = 0;
  while (r.arrivals[notice_at].kind != 'n') ++notice_at;
  EXPECT_LT(r.arrivals[notice_at].t, sent + 0.05 + 0.25) << "the notice waited behind " << notice_at << " batches";
  EXPECT_LT(notice_at, 10u) << "the notice waited behind the batches";
}

TEST(ShapedTransportTest, ClockReportsWaitOutAnOutageButNotTheQueue) {
  // 1 s of link, then 3 s of outage, repeating; 200 ms one-way; real time.
  Recorder r;
  ShapedTransportOptions o;
  o.heartbeat_ms = 0;
  Result<LinkSchedule> sched = LinkSchedule::Create({{0, 8e6, 0.2}, {1.0, 0, 0.2}}, 4.0);
  ASSERT_TRUE(sched.ok());
  // The trace clock starts inside Start: between these two.
  const auto before_start = Clock_::now();
  auto t = ShapedTransport::Start({PeerLink{1, "a->b", *sched}}, o,
                                  [&r](SiteId, Lane) { return std::make_unique<FakeChannel>(&r); });
  const auto after_start = Clock_::now();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const auto since = [](Clock_::time_point from) {
    return std::chrono::duration<double>(Clock_::now() - from).count();
  };
  // Now (link up): the delay only, however much is queued in bulk.
  for (int i = 1; i <= 4; ++i) (*t)->SendBatch(1, WanBatch{0, static_cast<uint64_t>(i), 0, std::vector<uint8_t>(256 << 10, 1)});
  EXPECT_NEAR((*t)->EstimateReportSeconds(1), 0.2, 0.05);
  EXPECT_GT((*t)->EstimateDeliverySeconds(1, 0), 0.5);
  EXPECT_EQ((*t)->EstimateReportSeconds(99), 0);  // no such link
  // In the outage: its rest, then the delay.
  // (On a loaded machine the trace may be well past 1.5 s by then: the
  // rest is bounded by the trace time before and after the call.)
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const double earliest = since(after_start);
  const double estimate = (*t)->EstimateReportSeconds(1);
  const double latest = since(before_start);
  ASSERT_GT(earliest, 1.0);
  ASSERT_LT(latest, 3.5) << "the machine took too long to get here for the outage to be checked";
  EXPECT_GE(estimate, 4.0 - latest + 0.2 - 0.01);
  EXPECT_LE(estimate, 4.0 - earliest + 0.2 + 0.01);
  r.start = before_start;  // arrivals in (at least) trace time
  (*t)->SendClock(1, WanClockReport{0, 5, 0, false});
  ASSERT_TRUE((*t)->WaitQuiet(Deadline::InMs(10000)));
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Arrival& a : r.arrivals) {
    if (a.kind == 'c') {
      EXPECT_GT(a.t, 4.0 + 0.2 - 0.002) << "the report crossed the outage";
    }
  }
}

// Site 0 with links to site 1 (out from 0.3 s to 2.5 s) and site 2 (always
// up); 20 ms one-way each; relaying after 200 ms without an answer.
struct RelayFixture {
  Recorder to1, to2;
  std::unique_ptr<ShapedTransport> t;
  std::mutex mu;
  std::vector<std::pair<SiteId, uint64_t>> acks;  // (peer, seq) as the callback heard them
  double skew = 0;  // seconds from the arrivals' origin to the end of setting up

  RelayFixture() {
    ShapedTransportOptions o;
    o.heartbeat_ms = 0;
    o.relay_after_ms = 200;
    Result<LinkSchedule> out = LinkSchedule::Create({{0, 8e6, 0.02}, {0.3, 0, 0.02}, {2.5, 8e6, 0.02}});
    EXPECT_TRUE(out.ok());
    // Arrivals count from before Start, where the trace clock starts: at
    // least their trace time, and at most `skew` more.
    to1.start = to2.start = Clock_::now();
    auto s = ShapedTransport::Start(
        {PeerLink{1, "a->b", *out}, PeerLink{2, "a->c", LinkSchedule::Constant(8e6, 0.02)}}, o,
        [this](SiteId peer, Lane) { return std::make_unique<FakeChannel>(peer == 1 ? &to1 : &to2); });
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    t = std::move(s).value();
    t->SetDeliveryCallback([this](SiteId peer, const BatchAck& ack) {
      std::lock_guard<std::mutex> lock(mu);
      acks.emplace_back(peer, ack.seq);
    });
    skew = to1.Now();
  }
  static WanBatch Batch(uint64_t seq) { return WanBatch{0, seq, 0, std::vector<uint8_t>(1000, 7)}; }
  bool Acked(SiteId peer, uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(acks.begin(), acks.end(), std::make_pair(peer, seq)) != acks.end();
  }
  bool WaitAcked(SiteId peer, uint64_t seq, int64_t ms) {
    const auto until = Clock_::now() + std::chrono::milliseconds(ms);
    while (!Acked(peer, seq)) {
      if (Clock_::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  std::vector<Arrival> Of(Recorder& r, char kind) {
    std::lock_guard<std::mutex> lock(r.mu);
    std::vector<Arrival> out;
    for (const Arrival& a : r.arrivals)
      if (a.kind == kind) out.push_back(a);
    return out;
  }
};

TEST(ShapedTransportTest, BatchesGoThroughAnotherSiteWhileTheirLinkIsOut) {
  RelayFixture f;
  f.t->SendBatch(1, RelayFixture::Batch(1));
  f.t->SendBatch(2, RelayFixture::Batch(1));
  ASSERT_TRUE(f.WaitAcked(1, 1, 2000));
  ASSERT_TRUE(f.WaitAcked(2, 1, 2000));
  std::this_thread::sleep_for(std::chrono::milliseconds(450));  // into the outage
  f.t->SendBatch(1, RelayFixture::Batch(2));
  f.t->SendBatch(1, RelayFixture::Batch(3));
  // Unanswered for 200 ms: both go through site 2, long before the outage ends.
  ASSERT_TRUE(f.WaitAcked(1, 3, 1200)) << "batch 3 was not relayed";
  EXPECT_TRUE(f.Acked(1, 2));
  EXPECT_LT(f.to2.Now(), 2.0);
  EXPECT_GT(f.t->EstimateDeliverySeconds(1, 0), 0.02) << "relayed: the relay's link, then the usual delay";
  EXPECT_LT(f.t->EstimateDeliverySeconds(1, 0), 1.0) << "the estimate follows the relay, not the outage";
  // While the link stays out, the next batch takes the relay at once.
  f.t->SendBatch(1, RelayFixture::Batch(4));
  ASSERT_TRUE(f.WaitAcked(1, 4, 1000));
  EXPECT_LT(f.to2.Now(), 2.2);
  {
    std::lock_guard<std::mutex> lock(f.to2.mu);
    EXPECT_EQ(f.to2.relay_dests, (std::vector<SiteId>{1, 1, 1}));
  }
  std::vector<Arrival> relayed = f.Of(f.to2, 'r');
  ASSERT_EQ(relayed.size(), 3u);
  for (size_t i = 0; i < relayed.size(); ++i) EXPECT_EQ(relayed[i].seq, i + 2);
  // Once the link is back, the copies that waited on it arrive (the peer
  // takes each batch once) and the next batches go straight again.
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>((2.7 - f.to1.Now()) * 1000)));
  ASSERT_TRUE(f.t->WaitQuiet(Deadline::InMs(3000)));
  f.t->SendBatch(1, RelayFixture::Batch(5));
  ASSERT_TRUE(f.WaitAcked(1, 5, 1000));
  ASSERT_TRUE(f.t->WaitQuiet(Deadline::InMs(3000)));
  std::vector<Arrival> straight = f.Of(f.to1, 'b');
  ASSERT_FALSE(straight.empty());
  EXPECT_EQ(straight.front().seq, 1u);
  EXPECT_EQ(straight.back().seq, 5u) << "after the outage batches go straight";
  for (const Arrival& a : straight) {
    EXPECT_TRUE(a.t - f.skew < 0.3 || a.t > 2.5) << "batch " << a.seq << " crossed the outage";
  }
  EXPECT_EQ(f.Of(f.to2, 'r').size(), 3u) << "batch 5 was relayed";
  std::vector<LinkStats> st = f.t->stats();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].relayed, 3);
  EXPECT_EQ(st[0].relay_turns, 1);
  EXPECT_EQ(st[1].relayed, 0);
}

TEST(ShapedTransportTest, ARelayThatCannotReachTheDestinationIsAskedAgainOnlyAtTheNextTurn) {
  RelayFixture f;
  {
    std::lock_guard<std::mutex> lock(f.to2.mu);
    f.to2.relay_answer = UnavailableError("the destination does not answer the relay either");
  }
  f.t->SendBatch(2, RelayFixture::Batch(1));
  ASSERT_TRUE(f.WaitAcked(2, 1, 2000));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // into the outage
  f.t->SendBatch(1, RelayFixture::Batch(1));
  // Relayed after 200 ms, then again every 600 ms (three times the relay
  // threshold), not at every back-off of the relay lane.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const size_t calls = f.Of(f.to2, 'r').size();
  EXPECT_GE(calls, 1u);
  EXPECT_LE(calls, 4u);
  EXPECT_FALSE(f.Acked(1, 1));
}

TEST(ShapedTransportTest, WithoutRelayingABatchWaitsOutTheOutage) {
  Recorder to1, to2;
  ShapedTransportOptions o;
  o.heartbeat_ms = 0;
  Result<LinkSchedule> out = LinkSchedule::Create({{0, 8e6, 0.02}, {0.1, 0, 0.02}, {1.2, 8e6, 0.02}});
  ASSERT_TRUE(out.ok());
  auto t = ShapedTransport::Start(
      {PeerLink{1, "a->b", *out}, PeerLink{2, "a->c", LinkSchedule::Constant(8e6, 0.02)}}, o,
      [&](SiteId peer, Lane) { return std::make_unique<FakeChannel>(peer == 1 ? &to1 : &to2); });
  ASSERT_TRUE(t.ok());
  to1.start = Clock_::now();
  (*t)->SendBatch(2, RelayFixture::Batch(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  (*t)->SendBatch(1, RelayFixture::Batch(1));
  ASSERT_TRUE((*t)->WaitQuiet(Deadline::InMs(5000)));
  std::lock_guard<std::mutex> lock(to1.mu);
  ASSERT_EQ(to1.arrivals.size(), 1u);
  EXPECT_GT(to1.arrivals[0].t, 1.2);
  std::lock_guard<std::mutex> lock2(to2.mu);
  EXPECT_TRUE(to2.relay_dests.empty());
  Status off = (*t)->Forward(1, RelayFixture::Batch(9), 100).status();
  EXPECT_EQ(off.code(), StatusCode::kFailedPrecondition) << off.ToString();
}

TEST(ShapedTransportTest, ForwardCarriesAnotherSitesBatchAndReturnsItsAnswer) {
  Recorder to1;
  ShapedTransportOptions o;
  o.heartbeat_ms = 0;
  o.relay_after_ms = 200;
  auto t = ShapedTransport::Start({PeerLink{1, "c->b", LinkSchedule::Constant(8e6, 0.05)}}, o,
                                  [&](SiteId, Lane) { return std::make_unique<FakeChannel>(&to1); });
  ASSERT_TRUE(t.ok());
  const auto start = Clock_::now();
  Result<BatchAck> ack = (*t)->Forward(1, WanBatch{0, 7, 3, std::vector<uint8_t>(1000, 1)}, 2000);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(ack->seq, 7u);
  EXPECT_GE(std::chrono::duration<double>(Clock_::now() - start).count(), 0.049) << "the link's delay applies";
  std::vector<LinkStats> st = (*t)->stats();
  EXPECT_EQ(st[0].forwarded, 1);
  EXPECT_EQ(st[0].batches, 0) << "another site's batch is not this site's";
  EXPECT_EQ((*t)->Forward(5, WanBatch{0, 8, 3, {1}}, 100).status().code(), StatusCode::kInvalidArgument);
  // A refusal comes back at once; no answer in time is Unavailable.
  {
    std::lock_guard<std::mutex> lock(to1.mu);
    to1.batch_answer = FailedPreconditionError("the fake peer refuses");
  }
  Status refused = (*t)->Forward(1, WanBatch{0, 8, 3, {1}}, 5000).status();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  // "Later" (the peer waits for an earlier batch of the origin) goes back
  // to the origin at once, and does not hold the lane: the next batch
  // behind it goes.
  {
    std::lock_guard<std::mutex> lock(to1.mu);
    to1.batch_answer = UnavailableError("the fake peer waits for an earlier batch");
  }
  const auto before = Clock_::now();
  Status later = (*t)->Forward(1, WanBatch{0, 9, 3, {1}}, 5000).status();
  EXPECT_EQ(later.code(), StatusCode::kUnavailable) << later.ToString();
  EXPECT_LT(std::chrono::duration<double>(Clock_::now() - before).count(), 2.0);
  {
    std::lock_guard<std::mutex> lock(to1.mu);
    to1.batch_answer = Status::Ok();
  }
  (*t)->SendBatch(1, WanBatch{2, 1, 3, {1}});
  ASSERT_TRUE((*t)->WaitQuiet(Deadline::InMs(3000))) << "the forwarded batch holds the lane";
  (*t)->Stop();
}

TEST(ShapedTransportTest, ForwardWaitsOutItsDeadlineOrTheStop) {
  Recorder to1;
  ShapedTransportOptions o;
  o.heartbeat_ms = 0;
  o.relay_after_ms = 200;
  auto t = ShapedTransport::Start({PeerLink{1, "c->b", LinkSchedule::Constant(0, 0.05)}}, o,  // always out
                                  [&](SiteId, Lane) { return std::make_unique<FakeChannel>(&to1); });
  ASSERT_TRUE(t.ok());
  const auto before = Clock_::now();
  Status late = (*t)->Forward(1, WanBatch{0, 9, 3, {1}}, 200).status();
  EXPECT_EQ(late.code(), StatusCode::kUnavailable) << late.ToString();
  EXPECT_GE(std::chrono::duration<double>(Clock_::now() - before).count(), 0.19);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (*t)->StopForwarding();
  });
  Status stopped = (*t)->Forward(1, WanBatch{0, 10, 3, {1}}, 30000).status();
  stopper.join();
  EXPECT_EQ(stopped.code(), StatusCode::kUnavailable) << stopped.ToString();
  EXPECT_LT(std::chrono::duration<double>(Clock_::now() - before).count(), 5.0);
  EXPECT_EQ((*t)->Forward(1, WanBatch{0, 11, 3, {1}}, 30000).status().code(), StatusCode::kUnavailable);
}

TEST(ShapedTransportTest, HeartbeatsDoNotCrossAnOutage) {
  // 0.6 s of link, 1 s of outage, then the link again; 50 ms one-way; a
  // heartbeat every 50 ms while the priority lane is idle.
  Recorder r;
  ShapedTransportOptions o;
  o.heartbeat_ms = 50;
  Result<LinkSchedule> sched = LinkSchedule::Create({{0, 8e6, 0.05}, {0.6, 0, 0.05}, {1.6, 8e6, 0.05}}, 100.0);
  ASSERT_TRUE(sched.ok());
  auto t = ShapedTransport::Start({PeerLink{1, "a->b", *sched}}, o,
                                  [&r](SiteId, Lane) { return std::make_unique<FakeChannel>(&r); });
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  r.start = Clock_::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2300));
  (*t)->Stop();
  std::vector<double> before, during, after;
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Arrival& a : r.arrivals) {
    ASSERT_EQ(a.kind, 'h');
    // A heartbeat arrives when the link carried anything a delay earlier:
    // none in [0.65, 1.65) s (margins for scheduling).
    (a.t < 0.6 ? before : a.t < 1.75 ? during : after).push_back(a.t);
  }
  EXPECT_GE(before.size(), 5u);
  for (double x : during) EXPECT_TRUE(x < 0.7 || x > 1.62) << "a heartbeat at " << x << " s crossed the outage";
  EXPECT_GE(after.size(), 5u) << "heartbeats resume once the outage ends";
}

TEST(ShapedTransportTest, RetriesUnavailableSendsWithoutReordering) {
  Recorder r;
  r.fail_first = 3;
  auto t = Make(&r, 1e9, 0, 1);
  for (int i = 1; i <= 5; ++i) t->SendBatch(1, WanBatch{0, static_cast<uint64_t>(i), 0, {1, 2, 3}});
  ASSERT_TRUE(t->WaitQuiet(Deadline::InMs(10000)));
  std::lock_guard<std::mutex> lock(r.mu);
  ASSERT_EQ(r.arrivals.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.arrivals[i].seq, static_cast<uint64_t>(i + 1));
  EXPECT_EQ(t->stats()[0].retries, 3);
}

// A channel that pipelines: batches begun wait in `wire` until ended.
struct PipeRecorder {
  std::mutex mu;
  std::vector<uint64_t> acked;  // seqs whose EndBatch succeeded, in order
  size_t max_in_flight = 0;
  uint64_t fail_seq = 0;  // its first EndBatch says Unavailable
  uint64_t refuse_seq = 0;  // every EndBatch of it is refused
  int abandons = 0;
};

class PipeChannel : public PeerChannel {
 public:
  explicit PipeChannel(PipeRecorder* r) : r_(r) {}
  Result<BatchAck> SendBatch(const WanBatch& b) override { return BatchAck{b.seq, ""}; }
  Status SendClock(const WanClockReport&) override { return Status::Ok(); }
  Status SendNotice(const WanNotice&) override { return Status::Ok(); }
  Status Heartbeat() override { return Status::Ok(); }
  int64_t wire_bytes() const override { return 0; }
  Status BeginBatch(const WanBatch& b) override {
    wire_.push_back(b.seq);
    std::lock_guard<std::mutex> lock(r_->mu);
    r_->max_in_flight = std::max(r_->max_in_flight, wire_.size());
    return Status::Ok();
  }
  Result<BatchAck> EndBatch() override {
    const uint64_t seq = wire_.front();
    wire_.pop_front();
    std::lock_guard<std::mutex> lock(r_->mu);
    if (seq == r_->fail_seq) {
      r_->fail_seq = 0;
      return UnavailableError("the peer waits for an earlier batch");
    }
    if (seq == r_->refuse_seq) return DataLossError("batch refused");
    r_->acked.push_back(seq);
    return BatchAck{seq, ""};
  }
  void Abandon() override {
    wire_.clear();
    std::lock_guard<std::mutex> lock(r_->mu);
    ++r_->abandons;
  }
  size_t max_in_flight() const override { return 64; }

 private:
  PipeRecorder* r_;
  std::deque<uint64_t> wire_;
};

TEST(LaneSenderTest, PipelinesBatchesAndResendsFromTheFirstUnacknowledged) {
  PipeRecorder r;
  r.fail_seq = 7;
  r.refuse_seq = 12;
  std::mutex sent_mu;
  std::vector<uint64_t> sent;  // on_sent, in order
  LaneSenderOptions o;
  o.max_in_flight_batches = 4;
  o.retry_backoff_ms = 1;
  std::atomic<bool> queued{false};  // the channel comes once every batch is queued
  LaneSender lane(
      1, Lane::kBulk,
      [&](SiteId, Lane) {
        while (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return std::make_unique<PipeChannel>(&r);
      },
      o,
      [&](const WanMessage& m, const BatchAck& ack) {
        const WanBatch* b = std::get_if<WanBatch>(&m);
        if (b == nullptr) return;  // the clock report
        std::lock_guard<std::mutex> lock(sent_mu);
        EXPECT_EQ(b->seq, ack.seq);
        sent.push_back(ack.seq);
      });
  for (uint64_t seq = 1; seq <= 20; ++seq) lane.Push(WanBatch{0, seq, 0, {1, 2, 3}});
  lane.Push(WanClockReport{0, 1, 20, false});
  queued = true;
  for (int i = 0; i < 500 && !lane.Idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(lane.Idle());
  std::vector<uint64_t> want;
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    if (seq != 12) want.push_back(seq);
  }
  std::lock_guard<std::mutex> lock(sent_mu);
  EXPECT_EQ(sent, want) << "each batch once, in order; the refused one dropped";
  std::lock_guard<std::mutex> rlock(r.mu);
  EXPECT_EQ(r.max_in_flight, 4u);
  EXPECT_EQ(r.acked, want);
  EXPECT_EQ(r.abandons, 2);  // the Unavailable and the refusal
  EXPECT_EQ(lane.retries(), 1);
  EXPECT_EQ(lane.refused(), 1);
}

TEST(LaneSenderTest, OneInFlightWhenTheChannelCannotPipeline) {
  Recorder r;
  LaneSenderOptions o;
  o.max_in_flight_batches = 8;
  std::vector<uint64_t> sent;
  LaneSender lane(
      1, Lane::kBulk, [&](SiteId, Lane) { return std::make_unique<FakeChannel>(&r); }, o,
      [&](const WanMessage& m, const BatchAck&) {
        if (const WanBatch* b = std::get_if<WanBatch>(&m)) sent.push_back(b->seq);
      });
  for (uint64_t seq = 1; seq <= 5; ++seq) lane.Push(WanBatch{0, seq, 0, {1}});
  for (int i = 0; i < 500 && !lane.Idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(lane.Idle());
  EXPECT_EQ(sent, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
}

TEST(LaneSenderTest, AnIdleLaneSendsNoHeartbeatWhileItsLinkIsDown) {
  Recorder r;
  std::atomic<bool> up{false};
  LaneSenderOptions o;
  o.heartbeat_ms = 20;
  o.link_up = [&] { return up.load(); };
  LaneSender lane(1, Lane::kPriority, [&](SiteId, Lane) { return std::make_unique<FakeChannel>(&r); }, o, nullptr);
  auto heartbeats = [&] {
    std::lock_guard<std::mutex> lock(r.mu);
    return r.arrivals.size();
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(heartbeats(), 0u) << "no heartbeat while the link is down";
  up = true;
  for (int i = 0; i < 200 && heartbeats() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(heartbeats(), 3u) << "heartbeats once the link is up";
  up = false;
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // one in progress may still land
  const size_t at_outage = heartbeats();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(heartbeats(), at_outage);
  lane.Stop();
}

TEST(ShapedTransportTest, RealLinksHoldNothingButStillInformTheEstimates) {
  Recorder r;
  ShapedTransportOptions o;
  o.heartbeat_ms = 0;
  o.emulate_links = false;
  // A slow, far link as the topology expects it: 1 Mbit/s, 2 s one way.
  auto t = ShapedTransport::Start({PeerLink{1, "a->b", LinkSchedule::Constant(1e6, 2.0)}}, o,
                                  [&r](SiteId, Lane) { return std::make_unique<FakeChannel>(&r); });
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  r.start = Clock_::now();
  for (uint64_t seq = 1; seq <= 3; ++seq) (*t)->SendBatch(1, WanBatch{0, seq, 0, std::vector<uint8_t>(125000, 1)});
  (*t)->SendClock(1, WanClockReport{0, 1, 3, false});
  ASSERT_TRUE((*t)->WaitQuiet(Deadline::InMs(10000)));
  {
    std::lock_guard<std::mutex> lock(r.mu);
    ASSERT_EQ(r.arrivals.size(), 4u);
    // Emulated, the three batches alone would take 3 s plus the 2 s delay.
    for (const Arrival& a : r.arrivals) EXPECT_LT(a.t, 1.0) << a.kind << a.seq;
  }
  // Nothing left unacknowledged: the expected delay and the bytes asked about.
  EXPECT_NEAR((*t)->EstimateDeliverySeconds(1, 125000), 2.0 + 1.0, 0.01);
  EXPECT_NEAR((*t)->EstimateReportSeconds(1), 2.0, 0.01);
  EXPECT_NEAR((*t)->BandwidthBytesPerSecond(1), 125000.0, 1.0);
}

TEST(ShapedTransportTest, RefusesBadConfiguration) {
  auto none = ShapedTransport::Start({}, {}, [](SiteId, Lane) { return nullptr; });
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  ShapedTransportOptions o;
  o.time_scale = 0;
  auto bad = ShapedTransport::Start({PeerLink{1, "x", LinkSchedule::Constant(1e6, 0)}}, o,
                                    [](SiteId, Lane) { return nullptr; });
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace geops::wan
