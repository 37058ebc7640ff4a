#include "wan/link/shaped_transport.h"

#include <gtest/gtest.h>

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
  char kind;  // 'b' batch, 'c' clock, 'n' notice, 'h' heartbeat
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
  double Now() { return std::chrono::duration<double>(Clock_::now() - start).count(); }
};

class FakeChannel : public PeerChannel {
 public:
  explicit FakeChannel(Recorder* r) : r_(r) {}
  Result<BatchAck> SendBatch(const WanBatch& b) override {
    GEOPS_RETURN_IF_ERROR(Record('b', b.seq, b.payload.size()));
    return BatchAck{b.seq, b.seq == r_->quarantine_seq ? "quarantined by the fake peer" : ""};
  }
  Status SendClock(const WanClockReport& c) override { return Record('c', c.last_seq, 40); }
  Status SendNotice(const WanNotice& n) override { return Record('n', n.seq, 40); }
  Status Heartbeat() override { return Record('h', 0, 0); }
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
  t->SendNotice(1, WanNotice{0, 20, {{0, 1}}, 1000});
  ASSERT_TRUE(t->WaitQuiet(Deadline::InMs(10000)));
  std::lock_guard<std::mutex> lock(r.mu);
  ASSERT_EQ(r.arrivals.size(), 21u);
  size_t notice_at = 0;
  while (r.arrivals[notice_at].kind != 'n') ++notice_at;
  EXPECT_LT(notice_at, 3u) << "the notice waited behind the batches";
}

TEST(ShapedTransportTest, ClockReportsWaitOutAnOutageButNotTheQueue) {
  // 1 s of link, then 3 s of outage, repeating; 200 ms one-way; real time.
  Recorder r;
  ShapedTransportOptions o;
  o.heartbeat_ms = 0;
  Result<LinkSchedule> sched = LinkSchedule::Create({{0, 8e6, 0.2}, {1.0, 0, 0.2}}, 4.0);
  ASSERT_TRUE(sched.ok());
  auto t = ShapedTransport::Start({PeerLink{1, "a->b", *sched}}, o,
                                  [&r](SiteId, Lane) { return std::make_unique<FakeChannel>(&r); });
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // Now (link up): the delay only, however much is queued in bulk.
  for (int i = 1; i <= 4; ++i) (*t)->SendBatch(1, WanBatch{0, static_cast<uint64_t>(i), 0, std::vector<uint8_t>(256 << 10, 1)});
  EXPECT_NEAR((*t)->EstimateReportSeconds(1), 0.2, 0.05);
  EXPECT_GT((*t)->EstimateDeliverySeconds(1, 0), 0.5);
  EXPECT_EQ((*t)->EstimateReportSeconds(99), 0);  // no such link
  // In the outage: its rest, then the delay.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_NEAR((*t)->EstimateReportSeconds(1), 2.5 + 0.2, 0.2);
  r.start = Clock_::now();
  (*t)->SendClock(1, WanClockReport{0, 5, 0, false});
  ASSERT_TRUE((*t)->WaitQuiet(Deadline::InMs(10000)));
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Arrival& a : r.arrivals) {
    if (a.kind == 'c') {
      EXPECT_GT(a.t, 2.4) << "the report crossed the outage";
    }
  }
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
