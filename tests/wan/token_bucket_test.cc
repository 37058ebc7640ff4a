#include "wan/link/token_bucket.h"

#include <gtest/gtest.h>

#include <cmath>

namespace geops::wan {
namespace {

constexpr double kMB = 1e6;  // bytes

LinkSchedule Steps(std::vector<LinkSegment> s, double period = 0) {
  Result<LinkSchedule> r = LinkSchedule::Create(std::move(s), period);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

void ExpectWithin1Percent(double got, double want) {
  EXPECT_NEAR(got, want, std::fabs(want) * 0.01) << "got " << got << " want " << want;
}

TEST(TokenBucketTest, BackToBackMessagesLeaveAtTheLinkRate) {
  TokenBucket tb(LinkSchedule::Constant(100e6, 0.030));  // 100 Mbit/s, 30 ms
  for (int i = 0; i < 10; ++i) {
    LinkRelease r = tb.Offer(0, 1 * kMB);
    ExpectWithin1Percent(r.start_s, i * 0.08);
    ExpectWithin1Percent(r.sent_s, (i + 1) * 0.08);
    ExpectWithin1Percent(r.delivered_s, (i + 1) * 0.08 + 0.030);
  }
  EXPECT_EQ(tb.bytes_offered(), 10 * 1000000u);
  ExpectWithin1Percent(tb.busy_until(), 0.8);
}

TEST(TokenBucketTest, PacedMessagesBelowCapacityDoNotQueue) {
  TokenBucket tb(LinkSchedule::Constant(100e6, 0.050));
  for (int i = 0; i < 20; ++i) {
    double t = 0.1 * i;
    LinkRelease r = tb.Offer(t, 500000);  // 40 ms on the wire, every 100 ms
    ExpectWithin1Percent(r.sent_s - t, 0.040);
    ExpectWithin1Percent(r.delivered_s - t, 0.090);
  }
}

TEST(TokenBucketTest, FollowsPiecewiseBandwidthAndOutages) {
  // 10 Mbit/s for 1 s, outage for 1 s, then 20 Mbit/s.
  TokenBucket tb(Steps({{0, 10e6, 0.01}, {1, 0, 0.01}, {2, 20e6, 0.02}}));
  // 2 MB: 1.25 MB in the first second, nothing in the second, 0.75 MB at 20 Mbit/s.
  LinkRelease r = tb.Offer(0, 2 * kMB);
  ExpectWithin1Percent(r.sent_s, 2.3);
  ExpectWithin1Percent(r.delivered_s, 2.32);
  // Offered during the outage: waits for it to end.
  TokenBucket tb2(Steps({{0, 10e6, 0.01}, {1, 0, 0.01}, {2, 20e6, 0.02}}));
  r = tb2.Offer(1.5, 250000);
  ExpectWithin1Percent(r.sent_s, 2.1);
}

TEST(TokenBucketTest, BurstGoesAtOnceAfterIdleThenRateApplies) {
  TokenBucket tb(LinkSchedule::Constant(8e6, 0), /*burst_bytes=*/100000);  // 1 MB/s
  LinkRelease r = tb.Offer(0, 100000);
  EXPECT_DOUBLE_EQ(r.sent_s, 0);
  r = tb.Offer(0, 100000);  // bucket empty: 0.1 s
  ExpectWithin1Percent(r.sent_s, 0.1);
  r = tb.Offer(10, 150000);  // refilled to 100 KB; 50 KB more at 1 MB/s
  ExpectWithin1Percent(r.sent_s - 10, 0.05);
}

TEST(TokenBucketTest, NeverReordersWhenTheDelayDrops) {
  TokenBucket tb(Steps({{0, 80e6, 0.200}, {0.05, 80e6, 0.010}}));
  LinkRelease a = tb.Offer(0, 100000);   // leaves at 0.01 s, 200 ms delay
  LinkRelease b = tb.Offer(0.06, 1000);  // leaves at 0.0601 s, 10 ms delay
  EXPECT_GE(b.delivered_s, a.delivered_s);
  ExpectWithin1Percent(a.delivered_s, 0.21);
}

TEST(TokenBucketTest, PermanentOutageNeverSends) {
  TokenBucket tb(Steps({{0, 1e6, 0}, {1, 0, 0}}));
  LinkRelease r = tb.Offer(0, 1000000);  // needs 8 s at 1 Mbit/s
  EXPECT_TRUE(std::isinf(r.sent_s));
}

TEST(LinkScheduleTest, LoopingScheduleIntegratesOverManyPeriods) {
  // 0.3 s at 10 Mbit/s, 0.7 s at 0, repeating: mean 3 Mbit/s.
  LinkSchedule s = Steps({{0, 10e6, 0.005}, {0.3, 0, 0.005}}, 1.0);
  ExpectWithin1Percent(s.BitsBetween(0, 100), 300e6);
  ExpectWithin1Percent(s.MeanBandwidth(0.1, 50.1), 3e6);
  EXPECT_EQ(s.BandwidthAt(7.2), 10e6);
  EXPECT_EQ(s.BandwidthAt(7.5), 0);
  // 3.5 Mbit from t=0: one period (3 Mbit) then 0.05 s at 10 Mbit/s.
  ExpectWithin1Percent(s.TransmitEnd(0, 3.5e6), 1.05);
  // Exactly two periods' worth ends where the on-phase ends, not at the period.
  ExpectWithin1Percent(s.TransmitEnd(0, 6e6), 1.3);
  ExpectWithin1Percent(s.TransmitEnd(0.5, 1e6), 1.1);
  EXPECT_DOUBLE_EQ(s.TransmitEnd(4, 0), 4);
}

TEST(LinkScheduleTest, APriorityLaneKeepsTheOutagesAndDelaysButNotTheRate) {
  LinkSchedule s = Steps({{0, 10e6, 0.005}, {0.3, 0, 0.005}, {0.5, 2e6, 0.2}}, 1.0);
  LinkSchedule p = s.WithBandwidth(1e15);
  EXPECT_EQ(p.BandwidthAt(0.1), 1e15);
  EXPECT_EQ(p.BandwidthAt(0.4), 0);  // the outage stays
  EXPECT_EQ(p.BandwidthAt(0.6), 1e15);
  EXPECT_DOUBLE_EQ(p.DelayAt(0.6), 0.2);
  EXPECT_DOUBLE_EQ(p.loop_period_s(), 1.0);
  // A small message sent in the outage leaves when it ends.
  EXPECT_NEAR(p.TransmitEnd(0.35, 512), 0.5, 1e-9);
}

TEST(LinkScheduleTest, RejectsBadSegments) {
  EXPECT_FALSE(LinkSchedule::Create({}).ok());
  EXPECT_FALSE(LinkSchedule::Create({{1, 1e6, 0}}).ok());
  EXPECT_FALSE(LinkSchedule::Create({{0, 1e6, 0}, {0, 2e6, 0}}).ok());
  EXPECT_FALSE(LinkSchedule::Create({{0, -1, 0}}).ok());
  EXPECT_FALSE(LinkSchedule::Create({{0, 1e6, NAN}}).ok());
  EXPECT_FALSE(LinkSchedule::Create({{0, 1e6, 0}, {2, 1e6, 0}}, 1.5).ok());
  Status s = LinkSchedule::Create({{0, 1e6, 0}, {2, 1e6, -1}}).status();
  EXPECT_NE(s.message().find("segment 1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace geops::wan
