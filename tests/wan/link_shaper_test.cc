#include "wan/link/link_shaper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace geops::wan {
namespace {

class LinkShaperTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override {
    uv_run(&loop_, UV_RUN_DEFAULT);  // lets closed handles finish
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }
  uv_loop_t loop_;
};

struct Arrival {
  uint64_t id;
  size_t bytes;
  double real_s;   // real seconds since the shaper started
  double model_s;  // the model's delivery time, trace seconds
};

TEST_F(LinkShaperTest, DeliversAtConfiguredBandwidthAndDelay) {
  // Trace link: 8 Mbit/s, 100 ms one-way. Time scale 10: in real time
  // 80 Mbit/s (10 MB/s) and 10 ms. 3 MB offered at once take ~0.3 s.
  const double kScale = 10;
  const double kRealBytesPerS = 8e6 / 8 * kScale;
  const double kRealDelay = 0.1 / kScale;
  const size_t kMsg = 64 * 1024;
  const int kCount = 48;
  std::vector<Arrival> arrivals;
  uint64_t start_ns = uv_hrtime();
  LinkShaperOptions o;
  o.time_scale = kScale;
  Result<std::unique_ptr<LinkShaper>> shaper =
      LinkShaper::Create(&loop_, LinkSchedule::Constant(8e6, 0.1), o, [&](ShapedMessage m) {
        arrivals.push_back(
            {m.id, m.payload.size(), (uv_hrtime() - start_ns) * 1e-9, m.delivered_s});
      });
  ASSERT_TRUE(shaper.ok()) << shaper.status().ToString();
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE((*shaper)->Send(std::vector<uint8_t>(kMsg, static_cast<uint8_t>(i))).ok());
  }
  EXPECT_EQ((*shaper)->queued_messages(), static_cast<size_t>(kCount));
  uv_run(&loop_, UV_RUN_DEFAULT);
  ASSERT_EQ(arrivals.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(arrivals[i].id, static_cast<uint64_t>(i));
    // Never more than a millisecond early; a little late is the OS's doing.
    EXPECT_GE(arrivals[i].real_s, arrivals[i].model_s / kScale - 0.0011);
  }
  const double first_expected = kMsg / kRealBytesPerS + kRealDelay;
  const double last_expected = kCount * kMsg / kRealBytesPerS + kRealDelay;
  const double achieved = (kCount - 1) * kMsg / (arrivals.back().real_s - arrivals.front().real_s);
  std::printf(
      "[ perf ] shaper: first %.1f ms (want %.1f), last %.1f ms (want %.1f), "
      "%.2f MB/s (want %.2f)\n",
      arrivals.front().real_s * 1e3, first_expected * 1e3, arrivals.back().real_s * 1e3,
      last_expected * 1e3, achieved / 1e6, kRealBytesPerS / 1e6);
  // The link model spaces the messages at no more than the link's rate;
  // the real clock follows it, never early (each message above) and
  // late only by the OS's scheduling, within a bound that a rate of two
  // thirds the link's would break. (The rate printed above, between the
  // first and the last arrival, moves with how late the first one was.)
  EXPECT_GE(arrivals.back().model_s - arrivals.front().model_s,
            (kCount - 1) * kMsg / kRealBytesPerS * kScale - 1e-6);
  EXPECT_GE(arrivals.back().real_s, last_expected - 0.0011);
  EXPECT_LT(arrivals.back().real_s, last_expected * 1.5);
  const LinkShaperStats& st = (*shaper)->stats();
  EXPECT_EQ(st.messages_delivered, static_cast<uint64_t>(kCount));
  EXPECT_EQ(st.bytes_delivered, st.bytes_offered);
  EXPECT_EQ((*shaper)->queued_bytes(), 0u);
}

TEST_F(LinkShaperTest, AddsTheOneWayDelay) {
  // 1 KB over 80 Mbit/s with 500 ms one-way delay at scale 10: ~50 ms real.
  LinkShaperOptions o;
  o.time_scale = 10;
  double arrived = -1;
  uint64_t start_ns = uv_hrtime();
  Result<std::unique_ptr<LinkShaper>> shaper =
      LinkShaper::Create(&loop_, LinkSchedule::Constant(80e6, 0.5), o,
                         [&](ShapedMessage) { arrived = (uv_hrtime() - start_ns) * 1e-9; });
  ASSERT_TRUE(shaper.ok());
  ASSERT_TRUE((*shaper)->Send(std::vector<uint8_t>(1000)).ok());
  uv_run(&loop_, UV_RUN_DEFAULT);
  const double want = (1000 * 8 / 80e6 + 0.5) / 10;
  // Never more than a millisecond early. Late is the OS's doing (a loaded
  // machine ran it 5 ms late), up to a point: a delay added twice would
  // arrive at twice `want`.
  EXPECT_GE(arrived, want - 0.0011);
  EXPECT_LT(arrived, want * 1.5);
}

TEST_F(LinkShaperTest, FollowsABandwidthChange) {
  // 40 Mbit/s for the first trace second, then 10 Mbit/s; scale 5.
  Result<LinkSchedule> s = LinkSchedule::Create({{0, 40e6, 0}, {1, 10e6, 0}});
  ASSERT_TRUE(s.ok());
  LinkShaperOptions o;
  o.time_scale = 5;
  std::vector<ShapedMessage> model;
  // The shaper's trace time starts when it is made.
  const uint64_t t0 = uv_hrtime();
  Result<std::unique_ptr<LinkShaper>> shaper =
      LinkShaper::Create(&loop_, *s, o, [&](ShapedMessage m) { model.push_back(std::move(m)); });
  ASSERT_TRUE(shaper.ok());
  // 6 MB: 5 MB in the first trace second, 1 MB more at 1.25 MB/s = 0.8 s,
  // when sent at once.
  for (int i = 0; i < 60; ++i) ASSERT_TRUE((*shaper)->Send(std::vector<uint8_t>(100000)).ok());
  uv_run(&loop_, UV_RUN_DEFAULT);
  const double real = (uv_hrtime() - t0) * 1e-9;
  ASSERT_EQ(model.size(), 60u);
  // The model, message by message: each starts when the one before is
  // through or when it was offered, whichever is later, at 5 MB/s before
  // trace second 1 and 1.25 MB/s after. (The sends start a little after
  // the shaper is made: on a loaded machine, milliseconds.)
  const auto through = [](double start, double bytes) {
    if (start < 1) {
      const double before = (1 - start) * 5e6;
      if (bytes <= before) return start + bytes / 5e6;
      bytes -= before;
      start = 1;
    }
    return start + bytes / 1.25e6;
  };
  double free_at = 0;
  for (const ShapedMessage& m : model) {
    free_at = through(std::max(free_at, m.offered_s), 100000);
    EXPECT_NEAR(m.delivered_s, free_at, 1e-6) << "message " << m.id;
  }
  EXPECT_NEAR(model.back().delivered_s, 1.8, 0.2) << "the sends took a trace tenth of a second";
  // Never more than a millisecond early; late only by the OS's scheduling.
  const double want = model.back().delivered_s / 5;
  EXPECT_GE(real, want - 0.0011);
  EXPECT_LT(real, want * 1.5);
}

TEST_F(LinkShaperTest, RefusesBeyondTheQueueBoundAndDropsOnDestruction) {
  LinkShaperOptions o;
  o.max_queued_bytes = 1000;
  int delivered = 0;
  Result<std::unique_ptr<LinkShaper>> shaper =
      LinkShaper::Create(&loop_, LinkSchedule::Constant(8e3, 10), o,  // 1 KB/s, 10 s delay
                         [&](ShapedMessage) { ++delivered; });
  ASSERT_TRUE(shaper.ok());
  EXPECT_TRUE((*shaper)->Send(std::vector<uint8_t>(600)).ok());
  Status s = (*shaper)->Send(std::vector<uint8_t>(600));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ((*shaper)->stats().messages_refused, 1u);
  EXPECT_TRUE((*shaper)->Send(std::vector<uint8_t>(400)).ok());
  shaper->reset();  // pending messages dropped, timer closed
  EXPECT_EQ(delivered, 0);
}

TEST_F(LinkShaperTest, RejectsBadOptions) {
  LinkShaperOptions o;
  o.time_scale = 0;
  auto sink = [](ShapedMessage) {};
  EXPECT_EQ(LinkShaper::Create(&loop_, LinkSchedule::Constant(1e6, 0), o, sink).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(LinkShaper::Create(nullptr, LinkSchedule::Constant(1e6, 0), {}, sink).ok());
  EXPECT_FALSE(LinkShaper::Create(&loop_, LinkSchedule::Constant(1e6, 0), {}, nullptr).ok());
}

}  // namespace
}  // namespace geops::wan
