#include "wan/link/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace geops::wan {
namespace {

namespace fs = std::filesystem;

// The measured traces live in the shared folder next to the repository.
std::string SharedTraces() {
#ifdef GEOPS_SHARED_DIR
  return std::string(GEOPS_SHARED_DIR) + "/traces";
#else
  return "";
#endif
}

#define REQUIRE_TRACES()                                                         \
  do {                                                                           \
    if (SharedTraces().empty() || !fs::exists(SharedTraces())) {                 \
      GTEST_SKIP() << "measured traces not found at '" << SharedTraces() << "'"; \
    }                                                                            \
  } while (0)

class TempFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("geops_wan_trace_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  fs::path dir_;
};

void ExpectLineError(const Status& s, const std::string& path, int line) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  std::string want = path + ":" + std::to_string(line) + ":";
  EXPECT_EQ(s.message().rfind(want, 0), 0u) << "want prefix '" << want << "' in: " << s.message();
}

using GeopsCsvTest = TempFiles;

TEST_F(GeopsCsvTest, LoadsPiecewiseConstantLinks) {
  std::string p = Write("t.csv",
                        "# a comment\n"
                        "time_s,src,dst,bandwidth_mbps,delay_ms\n"
                        "0,us,eu,100,40\n"
                        "0,eu,us,50,40\r\n"
                        "\n"
                        "10,us,eu,20,45\n"
                        "5,eu,us,60.5,41\n");
  Result<TraceSet> t = LoadGeopsCsv(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->size(), 2u);
  EXPECT_EQ(t->Sites(), (std::vector<std::string>{"eu", "us"}));
  const LinkSchedule* ue = *t->Find("us", "eu");
  EXPECT_DOUBLE_EQ(ue->BandwidthAt(9.99), 100e6);
  EXPECT_DOUBLE_EQ(ue->BandwidthAt(10), 20e6);
  EXPECT_DOUBLE_EQ(ue->DelayAt(1e6), 0.045);
  const LinkSchedule* eu = *t->Find("eu", "us");
  EXPECT_DOUBLE_EQ(eu->BandwidthAt(7), 60.5e6);
  Result<const LinkSchedule*> none = t->Find("us", "asia");
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("us->eu"), std::string::npos);
}

TEST_F(GeopsCsvTest, FirstRowHoldsFromTimeZero) {
  std::string p = Write("t.csv", "time_s,src,dst,bandwidth_mbps,delay_ms\n3,a,b,10,1\n");
  Result<TraceSet> t = LoadGeopsCsv(p);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ((*t->Find("a", "b"))->BandwidthAt(0), 10e6);
}

TEST_F(GeopsCsvTest, MalformedFilesNameFileAndLine) {
  const std::string h = "time_s,src,dst,bandwidth_mbps,delay_ms\n";
  struct Case {
    std::string text;
    int line;
  } cases[] = {
      {h + "0,a,b,10,1\n0,a,b,x,1\n", 3},               // not a number
      {h + "0,a,b,10\n", 2},                            // too few fields
      {h + "0,a,b,10,1,7\n", 2},                        // too many fields
      {h + "0,a,b,10,1\n# c\n0,a,b,20,1\n", 4},         // time not increasing
      {h + "0,a,b,-1,1\n", 2},                          // negative bandwidth
      {h + "0,a,b,1,-1\n", 2},                          // negative delay
      {h + "0,a,a,1,1\n", 2},                           // src == dst
      {h + "0,a,,1,1\n", 2},                            // empty dst
      {h + "-1,a,b,1,1\n", 2},                          // negative time
      {h + "0,a,b,inf,1\n", 2},                         // not finite
      {"time_s,src,dst,bandwidth_mbps\n0,a,b,1\n", 1},  // missing column
      {"", 1},                                          // empty
      {h, 1},                                           // no rows
  };
  int i = 0;
  for (const Case& c : cases) {
    std::string p = Write("bad" + std::to_string(i++) + ".csv", c.text);
    ExpectLineError(LoadGeopsCsv(p).status(), p, c.line);
  }
  EXPECT_EQ(LoadGeopsCsv((dir_ / "missing.csv").string()).status().code(), StatusCode::kNotFound);
}

TEST(SkyplaneTest, LoadsMeasuredAwsLinks) {
  REQUIRE_TRACES();
  std::string dir = SharedTraces() + "/skyplane-intercloud";
  std::vector<std::string> regions = {"aws:us-east-1", "aws:us-west-2", "aws:eu-west-1"};
  Result<TraceSet> t = LoadSkyplane(dir, regions);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->size(), 6u);
  for (const auto& [k, s] : t->links()) {
    // Between AWS regions the README gives 1.08 - 4.76 Gbit/s (aggregate).
    EXPECT_GE(s.BandwidthAt(0), 1.0e9) << k.first << "->" << k.second;
    EXPECT_LE(s.BandwidthAt(0), 4.8e9) << k.first << "->" << k.second;
  }
  // README: us-east-1 to us-west-2 avg RTT 68.3 ms.
  EXPECT_NEAR((*t->Find("aws:us-east-1", "aws:us-west-2"))->DelayAt(0), 0.068272 / 2, 1e-9);
  SkyplaneOptions per;
  per.bandwidth = SkyplaneOptions::Bandwidth::kPerConnection;
  Result<TraceSet> p = LoadSkyplane(dir, regions, per);
  ASSERT_TRUE(p.ok());
  for (const auto& [k, s] : p->links()) {
    EXPECT_NEAR(s.BandwidthAt(0) * 64, (*t->Find(k.first, k.second))->BandwidthAt(0), 1.0);
  }
}

TEST(SkyplaneTest, UnknownRegionIsNotFoundAndListsKnownOnes) {
  REQUIRE_TRACES();
  Status s =
      LoadSkyplane(SharedTraces() + "/skyplane-intercloud", {"aws:us-east-1", "aws:mars-north-1"})
          .status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("aws:mars-north-1"), std::string::npos);
  EXPECT_NE(s.message().find("aws:af-south-1"), std::string::npos) << s.message();
}

using SkyplaneFilesTest = TempFiles;

TEST_F(SkyplaneFilesTest, MalformedRowsNameFileAndLine) {
  const std::string th =
      "src_region,src_tier,dst_region,dst_tier,iperf3_connections,throughput_received\n";
  const std::string lh = "src_region,src_tier,dst_region,dst_tier,min_rtt,avg_rtt\n";
  Write("latency.csv", lh + "a,PREMIUM,b,PREMIUM,10,12\n");
  std::string tp = Write("throughput.csv", th + "a,PREMIUM,b,PREMIUM,64,1e9\n"
                                                "b,PREMIUM,a,PREMIUM,64,fast\n");
  ExpectLineError(LoadSkyplane(dir_.string(), {"a", "b"}).status(), tp, 3);
  tp = Write("throughput.csv", th + "a,PREMIUM,b,PREMIUM,0,1e9\n");
  ExpectLineError(LoadSkyplane(dir_.string(), {"a", "b"}).status(), tp, 2);
  tp = Write("throughput.csv", th + "a,PREMIUM,b,PREMIUM,64,1e9\nb,PREMIUM,a,PREMIUM,64,2e9\n");
  std::string lat = Write("latency.csv", lh + "a,PREMIUM,b,PREMIUM,10\n");
  ExpectLineError(LoadSkyplane(dir_.string(), {"a", "b"}).status(), lat, 2);
  // Latency only measured one way: the reverse direction is used.
  Write("latency.csv", lh + "a,PREMIUM,b,PREMIUM,10,12\n");
  Result<TraceSet> t = LoadSkyplane(dir_.string(), {"a", "b"});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_DOUBLE_EQ((*t->Find("b", "a"))->DelayAt(0), 0.006);
  EXPECT_DOUBLE_EQ((*t->Find("b", "a"))->BandwidthAt(0), 2e9);
  EXPECT_EQ(LoadSkyplane((dir_ / "nowhere").string(), {"a", "b"}).status().code(),
            StatusCode::kNotFound);
}

TEST(DtfmTest, LoadsTheAwsTable) {
  REQUIRE_TRACES();
  std::string p = SharedTraces() + "/dtfm-aws-10-regions/aws_region_pairs_delay_bandwidth.csv";
  Result<TraceSet> t = LoadDtfm(p, {"Oregon", "Virginia", "Frankfurt"});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->size(), 6u);
  const LinkSchedule* ov = *t->Find("Virginia", "Oregon");  // listed as Oregon,Virginia
  EXPECT_DOUBLE_EQ(ov->BandwidthAt(0), 0.79e9);
  EXPECT_DOUBLE_EQ(ov->DelayAt(0), 0.0335);
  DtfmOptions one_way;
  one_way.delay_is_rtt = false;
  EXPECT_DOUBLE_EQ(
      (*LoadDtfm(p, {"Oregon", "Virginia"}, one_way)->Find("Oregon", "Virginia"))->DelayAt(0),
      0.067);
  Status s = LoadDtfm(p, {"Oregon", "Paris"}).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("Frankfurt"), std::string::npos) << s.message();
  EXPECT_EQ(LoadDtfm(p, {"Oregon", "Oregon"}).status().code(), StatusCode::kInvalidArgument);
}

using DtfmFilesTest = TempFiles;

TEST_F(DtfmFilesTest, MalformedRowsNameFileAndLine) {
  const std::string h = "region_a,region_b,delay_ms,bandwidth_gbps\n";
  std::string p = Write("d.csv", h + "A,B,10,1\nA,C,ten,1\n");
  ExpectLineError(LoadDtfm(p, {"A", "B"}).status(), p, 3);
  p = Write("d.csv", h + "A,B,10,1\nB,A,10,1\n");
  ExpectLineError(LoadDtfm(p, {"A", "B"}).status(), p, 3);
  p = Write("d.csv", h + "A,B,10,1\nC,D,10,1\n");
  EXPECT_EQ(LoadDtfm(p, {"A", "C"}).status().code(), StatusCode::kNotFound);  // pair missing
}

TEST(PantheonTest, LoadsCalibratedScenarios) {
  REQUIRE_TRACES();
  std::string p = SharedTraces() + "/pantheon-calibrated/calibrated_emulators.csv";
  Result<PantheonLink> l = LoadPantheonScenario(p, 1);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->real_path, "Nepal to AWS India");
  EXPECT_DOUBLE_EQ(l->schedule.BandwidthAt(0), 0.57e6);
  EXPECT_DOUBLE_EQ(l->schedule.DelayAt(0), 0.028);
  EXPECT_DOUBLE_EQ(l->uplink_loss_rate, 0.0477);
  EXPECT_EQ(l->queue_packets, 14);
  Result<PantheonLink> traced = LoadPantheonScenario(p, 2, /*use_trace_file=*/true);
  ASSERT_TRUE(traced.ok()) << traced.status().ToString();
  // README: 2.44 Mbit/s over the whole 60 s trace.
  EXPECT_NEAR(traced->schedule.MeanBandwidth(0, traced->schedule.loop_period_s()), 2.44e6, 0.03e6);
  EXPECT_DOUBLE_EQ(traced->schedule.DelayAt(30), 0.088);
  // Scenario 4's trace was not copied.
  EXPECT_EQ(LoadPantheonScenario(p, 4, true).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(LoadPantheonScenario(p, 4, false).ok());
  Status s = LoadPantheonScenario(p, 99).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("scenarios"), std::string::npos);
}

TEST(MahimahiTest, ScalesCellularTracesToALinkMean) {
  REQUIRE_TRACES();
  std::string p = SharedTraces() + "/mahimahi-cellular/ATT-LTE-driving-2016.up";
  Result<LinkSchedule> native = LoadMahimahi(p);
  ASSERT_TRUE(native.ok()) << native.status().ToString();
  const double period = native->loop_period_s();
  EXPECT_NEAR(period, 120.002, 1e-9);
  // README: 19,101 packets over 120 s, mean 1.89 Mbit/s.
  EXPECT_NEAR(native->MeanBandwidth(0, period), 19101 * 12000 / 120.002, 1.0);
  MahimahiOptions o;
  o.mean_bandwidth_bps = 500e6;
  o.delay_s = 0.04;
  Result<LinkSchedule> scaled = LoadMahimahi(p, o);
  ASSERT_TRUE(scaled.ok());
  EXPECT_NEAR(scaled->MeanBandwidth(0, period), 500e6, 1e-3);
  EXPECT_NEAR(scaled->MeanBandwidth(0, 10 * period), 500e6, 1e-3);  // loops
  EXPECT_DOUBLE_EQ(scaled->DelayAt(77), 0.04);
  // Time-varying: bins differ widely.
  double lo = 1e300, hi = 0;
  for (const LinkSegment& s : scaled->segments()) {
    lo = std::min(lo, s.bandwidth_bps);
    hi = std::max(hi, s.bandwidth_bps);
  }
  EXPECT_GT(hi, 4 * 500e6);
  EXPECT_LT(lo, 0.25 * 500e6);
}

TEST(MahimahiTest, LoadsEveryShippedTrace) {
  REQUIRE_TRACES();
  for (const char* f :
       {"ATT-LTE-driving-2016.down", "TMobile-LTE-driving.down", "TMobile-LTE-short.down",
        "TMobile-UMTS-driving.down", "Verizon-EVDO-driving.down"}) {
    Result<LinkSchedule> s = LoadMahimahi(SharedTraces() + "/mahimahi-cellular/" + f,
                                          MahimahiOptions{.mean_bandwidth_bps = 1e9});
    ASSERT_TRUE(s.ok()) << f << ": " << s.status().ToString();
    EXPECT_NEAR(s->MeanBandwidth(0, s->loop_period_s()), 1e9, 1e-2) << f;
  }
}

using MahimahiFilesTest = TempFiles;

TEST_F(MahimahiFilesTest, MalformedTracesNameFileAndLine) {
  std::string p = Write("a.trace", "0\n5\n12a\n");
  ExpectLineError(LoadMahimahi(p).status(), p, 3);
  p = Write("b.trace", "0\n5\n4\n");
  ExpectLineError(LoadMahimahi(p).status(), p, 3);
  p = Write("c.trace", "0\n-5\n");
  ExpectLineError(LoadMahimahi(p).status(), p, 2);
  p = Write("d.trace", "");
  ExpectLineError(LoadMahimahi(p).status(), p, 1);
  p = Write("e.trace", "0\n0\n");
  ExpectLineError(LoadMahimahi(p).status(), p, 2);
  EXPECT_EQ(LoadMahimahi((dir_ / "none.trace").string()).status().code(), StatusCode::kNotFound);
  p = Write("ok.trace", "1\n1\n2\n1000\n");
  Result<LinkSchedule> s = LoadMahimahi(p, MahimahiOptions{.bin_s = 0.5});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // 3 packets in [0, 0.5), 1 in [0.5, 1.0): 72 and 24 kbit/s.
  EXPECT_DOUBLE_EQ(s->BandwidthAt(0.1), 72000);
  EXPECT_DOUBLE_EQ(s->BandwidthAt(0.7), 24000);
  EXPECT_EQ(LoadMahimahi(p, MahimahiOptions{.bin_s = 0}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(MahimahiFilesTest, AnOffsetStartsTheReplayLaterInTheTrace) {
  const std::string p = Write("ok.trace", "1\n1\n2\n700\n1000\n");
  Result<LinkSchedule> plain = LoadMahimahi(p, MahimahiOptions{.bin_s = 0.5});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_DOUBLE_EQ(plain->BandwidthAt(0.1), 72000);  // 1, 1, 2
  EXPECT_DOUBLE_EQ(plain->BandwidthAt(0.7), 48000);  // 700, 1000
  // Half a second in: 700 ms comes first (at 200 ms), then the early
  // packets (at 501 - 502 ms) with the last one, which closes the period
  // and so stands for time 0 (at 500 ms). The period stays 1 s.
  Result<LinkSchedule> s = LoadMahimahi(p, MahimahiOptions{.bin_s = 0.5, .offset_s = 0.5});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_DOUBLE_EQ(s->loop_period_s(), 1.0);
  EXPECT_DOUBLE_EQ(s->BandwidthAt(0.1), 24000);
  EXPECT_DOUBLE_EQ(s->BandwidthAt(0.7), 96000);
  // A whole number of periods is no offset at all.
  Result<LinkSchedule> round = LoadMahimahi(p, MahimahiOptions{.bin_s = 0.5, .offset_s = 3.0});
  ASSERT_TRUE(round.ok());
  EXPECT_DOUBLE_EQ(round->BandwidthAt(0.1), 72000);
  EXPECT_EQ(LoadMahimahi(p, MahimahiOptions{.offset_s = -1}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace geops::wan
