// The WAN side of a topology: [wan] and [[links]] parsing, the effective
// link table per source, WanOptions, and the WAN part of summary.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/model_from_topology.h"
#include "config/topology.h"
#include "config/wan_links.h"
#include "supervisor/launch/launch_stats.h"
#include "supervisor/launch/summary_wan.h"

namespace geops::config {
namespace {

const char* kSites = R"(
[[sites]]
name = "a"
region = "aws:us-east-1"
[[sites]]
name = "b"
region = "aws:eu-west-1"
[[sites]]
name = "c"
region = "aws:ap-northeast-1"
)";

Result<Topology> Parse(const std::string& text) { return ParseTopology(text, "t.toml"); }

TEST(WanTopologyTest, ParsesWanAndLinks) {
  auto t = Parse(std::string(R"(
[wan]
mode = "avg"
averaging_period = 5
codec = "int8"
compress = false
time_scale = 10
[[links]]
src = "a"
dst = "b"
bandwidth_mbps = 100
delay_ms = 20
[[links]]
src = "b"
dst = "a"
bandwidth_mbps = 50
delay_ms = 25
[[links]]
src = "a"
dst = "c"
bandwidth_mbps = 10
delay_ms = 100
[[links]]
src = "b"
dst = "c"
bandwidth_mbps = 20
delay_ms = 80
)") + kSites);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->multi_site());
  EXPECT_EQ(t->wan.mode, "avg");
  EXPECT_FALSE(t->wan.compress);
  EXPECT_EQ(t->sites[2].region, "aws:ap-northeast-1");
  auto links = BuildLinks(*t);
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  ASSERT_EQ(links->size(), 6u);
  auto find = [&](int s, int d) {
    for (const EffectiveLink& l : *links)
      if (l.src == s && l.dst == d) return l.schedule;
    return wan::LinkSchedule();
  };
  EXPECT_DOUBLE_EQ(find(0, 1).BandwidthAt(0), 100e6);
  EXPECT_DOUBLE_EQ(find(1, 0).BandwidthAt(0), 50e6);
  EXPECT_DOUBLE_EQ(find(2, 0).BandwidthAt(0), 10e6);  // the reverse entry serves both ways
  EXPECT_DOUBLE_EQ(find(2, 1).DelayAt(0), 0.08);
  auto o = BuildWanOptions(*t);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->mode, wan::WanMode::kAvg);
  EXPECT_EQ(o->EffectiveDs(), -1);  // the outer step bounds avg instead
  EXPECT_EQ(o->EffectiveCodec(), wan::ValueCodec::kFp32);  // avg is lossless
  const std::string table = FormatLinkTable(*t, *links, 4000000);
  EXPECT_NE(table.find("100.0"), std::string::npos) << table;
  EXPECT_NE(table.find("3.200"), std::string::npos) << table;  // 4 MB at 10 Mbit/s
  // The workers' own model: its size is not the topology's to say.
  const std::string unknown = FormatLinkTable(*t, *links, 0);
  EXPECT_EQ(unknown.find("3.200"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("the workers bring their own model"), std::string::npos) << unknown;
}

TEST(WanTopologyTest, DilocoTakesItsOuterOptimiserAndRefusesAStore) {
  auto t = Parse(std::string(R"(
[wan]
mode = "diloco"
averaging_period = 25
codec = "int8"
outer_lr = 0.5
outer_momentum = 0.8
outer_nesterov = false
)") + kSites);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto o = BuildWanOptions(*t);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->mode, wan::WanMode::kDiloco);
  EXPECT_EQ(o->EffectiveCodec(), wan::ValueCodec::kInt8);
  const wan::OuterOptions outer = o->EffectiveOuter();
  EXPECT_EQ(outer.lr, 0.5);
  EXPECT_EQ(outer.momentum, 0.8);
  EXPECT_FALSE(outer.nesterov);
  EXPECT_EQ(Parse("[wan]\nmode = \"diloco\"\nouter_momentum = 1.0\n" + std::string(kSites)).status().code(),
            StatusCode::kInvalidArgument);
  // The outer step keeps its state in the shard stores.
  auto stored = Parse("[wan]\nmode = \"diloco\"\n[storage]\ndata_dir = \"data\"\n" + std::string(kSites));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_TRUE(BuildWanOptions(*stored).ok());
}

TEST(WanTopologyTest, RefusesBadWanSettingsNamingTheLine) {
  struct Case {
    std::string text;
    std::string want;
  };
  std::vector<Case> cases = {
      {"[wan]\nmode = \"gossip\"\n", "t.toml:2: wan.mode"},
      {"[wan]\ncodec = \"fp8\"\n", "wan.codec"},
      {"[wan]\nstaleness_ds = -2\n", "wan.staleness_ds"},
      {"[wan]\nvalue_floor = 0.0\n", "wan.value_floor"},
      {"[wan]\naveraging_period = 10\nouter_fragments = 3\n", "wan.outer_fragments must be >= 1 and divide"},
      {"[wan]\nouter_fragments = 0\n", "wan.outer_fragments"},
      {"[wan]\nbacklog_revisit = 0\n", "wan.backlog_revisit must be in [1, 1000000]"},
      {"[wan]\nrelay_after_ms = 5\n", "wan.relay_after_ms must be 0 (off) or in [10, 3600000]"},
      {"[wan]\nrelay_after_ms = -1\n", "wan.relay_after_ms"},
      {"[wan]\naveraging_period = 10\nouter_fragments = 2\nouter_overlap = false\n", "wan.outer_overlap false needs"},
      {"[wan]\nouter_overlap = 0\n", "wan.outer_overlap"},
      {"[wan]\ntime_scale = 0.0\n", "wan.time_scale"},
      {"[wan]\nlinks = \"skyplane\"\n", "wan.trace_dir"},
      {"[wan]\nwhat = 1\n", "wan.what is not a known key"},
      {"[[links]]\nsrc = \"a\"\ndst = \"zz\"\nbandwidth_mbps = 1\n", "'zz' is not a site"},
      {"[[links]]\nsrc = \"a\"\ndst = \"b\"\nbandwidth_mbps = 0\n", "links.bandwidth_mbps"},
  };
  for (const Case& c : cases) {
    auto t = Parse(c.text + kSites);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(t.status().message().find(c.want), std::string::npos) << t.status().message();
  }
}

// [training] change_readers: which workers' reads carry only what changed
// (docs/wire_format.md, "Incremental reads"), as each shard is built.
TEST(WanTopologyTest, TheChangeReadersReachEveryShard) {
  auto d = Parse(std::string(kSites));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(BuildShardOptions(*d, 0, 0).change_readers, -1);
  EXPECT_EQ(BuildShardOptions(*d, 0, 0).ChangeReaders(), 1);  // a site of one worker: worker 0
  auto t = Parse("[training]\nchange_readers = 0\n" + std::string(kSites));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(BuildShardOptions(*t, 1, 0).ChangeReaders(), 0);
  auto bad = Parse("[training]\nchange_readers = -2\n" + std::string(kSites));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("training.change_readers must be >= 0, or -1"), std::string::npos)
      << bad.status().message();
}

// [training] background_eval: evaluations in a thread of their own (on by
// default), as the trainer is built; anything but a boolean is refused.
TEST(WanTopologyTest, BackgroundEvalReachesTheTrainer) {
  auto d = Parse(std::string(kSites));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(BuildTrainerOptions(*d, 0, 0).background_eval);
  auto off = Parse("[training]\nbackground_eval = false\n" + std::string(kSites));
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(BuildTrainerOptions(*off, 0, 0).background_eval);
  auto bad = Parse("[training]\nbackground_eval = 1\n" + std::string(kSites));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("training.background_eval must be true or false"), std::string::npos)
      << bad.status().message();
}

TEST(WanTopologyTest, TheBacklogRevisitReachesTheShipper) {
  auto t = Parse("[wan]\nbacklog_revisit = 3\n" + std::string(kSites));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto o = BuildWanOptions(*t);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->backlog_revisit, 3);
  auto d = BuildWanOptions(*Parse(std::string(kSites)));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->backlog_revisit, 8);
  wan::WanOptions bad = *d;
  bad.backlog_revisit = 0;
  EXPECT_EQ(bad.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(WanTopologyTest, TheSignificanceValueFloorReachesTheReplicator) {
  auto t = Parse("[wan]\nvalue_floor = 0.01\n" + std::string(kSites));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto o = BuildWanOptions(*t);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->value_floor, 0.01f);
  auto d = BuildWanOptions(*Parse(std::string(kSites)));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->value_floor, 1e-6f);
}

TEST(WanTopologyTest, StreamingFragmentsReachTheOuterStep) {
  auto t = Parse("[wan]\nmode = \"diloco\"\naveraging_period = 50\nouter_fragments = 5\n" + std::string(kSites));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto o = BuildWanOptions(*t);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->outer_fragments, 5);
  EXPECT_EQ(o->EffectiveOuter().fragments, 5);
  wan::WanOptions bad = *o;
  bad.outer_fragments = 7;
  EXPECT_EQ(bad.Validate().code(), StatusCode::kInvalidArgument) << "7 does not divide 50";
}

TEST(WanTopologyTest, TheSynchronousOuterStepReachesTheOptions) {
  auto t = Parse("[wan]\nmode = \"diloco\"\naveraging_period = 50\nouter_overlap = false\n" + std::string(kSites));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto o = BuildWanOptions(*t);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->outer_overlap);
  EXPECT_TRUE(BuildWanOptions(*Parse(std::string(kSites)))->outer_overlap) << "overlap is the default";
  wan::WanOptions bad = *o;
  bad.outer_fragments = 5;
  EXPECT_EQ(bad.Validate().code(), StatusCode::kInvalidArgument) << "streaming overlaps by design";
}

TEST(WanTopologyTest, MissingLinkIsNamed) {
  auto t = Parse(std::string("[[links]]\nsrc = \"a\"\ndst = \"b\"\nbandwidth_mbps = 5\n") + kSites);
  ASSERT_TRUE(t.ok());
  auto links = BuildLinks(*t);
  EXPECT_EQ(links.status().code(), StatusCode::kNotFound);
  EXPECT_NE(links.status().message().find("between sites a and c"), std::string::npos);
}

TEST(WanTopologyTest, SkyplaneLinksUseOneConnectionsShareAndHalfTheRtt) {
  const std::string dir = std::string(GEOPS_SOURCE_DIR) + "/experiments/traces/skyplane-aws3";
  auto t = Parse(std::string("[wan]\nlinks = \"skyplane\"\ntrace_dir = \"") + dir + "\"\n" + kSites);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto links = BuildLinks(*t);
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  ASSERT_EQ(links->size(), 6u);
  const wan::LinkSchedule& ab = (*links)[0].schedule;  // us-east-1 -> eu-west-1
  EXPECT_NEAR(ab.BandwidthAt(0), 4318e6 / 64, 1e6);
  EXPECT_NEAR(ab.DelayAt(0), 0.0849 / 2, 0.001);
  t->wan.skyplane_bandwidth = "aggregate";
  auto agg = BuildLinks(*t);
  ASSERT_TRUE(agg.ok());
  EXPECT_NEAR((*agg)[0].schedule.BandwidthAt(0), 4318e6, 64e6);
  t->sites[1].region.clear();
  EXPECT_EQ(BuildLinks(*t).status().code(), StatusCode::kInvalidArgument);
}

TEST(WanTopologyTest, ABandwidthScaleAndStaggeredVariationShapeEveryLink) {
  const std::string dir = std::string(GEOPS_SOURCE_DIR) + "/experiments/traces/skyplane-aws3";
  const std::string varied = std::string(GEOPS_SOURCE_DIR) + "/../shared/traces/mahimahi-cellular/Verizon-EVDO-driving.down";
  auto t = Parse(std::string("[wan]\nlinks = \"skyplane\"\ntrace_dir = \"") + dir +
                 "\"\nbandwidth_scale = 0.25\nmax_drift_allowance = 6\n" + kSites);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->wan.max_drift_allowance, 6);
  auto o = BuildWanOptions(*t);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->max_drift_allowance, 6);
  auto links = BuildLinks(*t);
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  EXPECT_NEAR((*links)[0].schedule.BandwidthAt(0), 4318e6 / 64 / 4, 1e6);
  EXPECT_NEAR((*links)[0].schedule.DelayAt(0), 0.0849 / 2, 0.001);  // delays stay
  if (!std::filesystem::exists(varied)) GTEST_SKIP() << "no " << varied;
  t->wan.variation = varied;
  t->wan.variation_stagger_s = 10;
  auto v = BuildLinks(*t);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  // The trace has an outage 8 s in: link 0 meets it at 8 s, link 1 (10 s
  // further into the trace) is past it then and meets one later.
  EXPECT_EQ((*v)[0].schedule.BandwidthAt(8.2), 0);
  EXPECT_GT((*v)[1].schedule.BandwidthAt(8.2), 0);
  EXPECT_EQ((*v)[1].schedule.BandwidthAt(3.7), 0);  // the trace at 13.7 s
  EXPECT_NEAR((*v)[1].schedule.MeanBandwidth(0, (*v)[1].schedule.loop_period_s()), (*links)[1].schedule.BandwidthAt(0),
              1e3);  // the mean stays the link's
  EXPECT_EQ(Parse("[wan]\nbandwidth_scale = 0\n" + std::string(kSites)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Parse("[wan]\nvariation_stagger_s = -1\n" + std::string(kSites)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Parse("[wan]\nmax_drift_allowance = -1\n" + std::string(kSites)).status().code(),
            StatusCode::kInvalidArgument);
}

// threshold_follows_lr hands the training's decay to the threshold schedule;
// max_hold_clocks reaches the significance filter.
TEST(WanTopologyTest, TheThresholdCanFollowTheLearningRateAndHoldsCanBeBounded) {
  const std::string training = "[training]\nclocks = 101\nlearning_rate = 0.05\nfinal_learning_rate = 0.005\n";
  auto t = Parse(training + "[wan]\nthreshold_follows_lr = true\nmax_hold_clocks = 40\n" + kSites);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto o = BuildWanOptions(*t);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->threshold.lr_clocks, 101);
  EXPECT_NEAR(o->threshold.final_lr_ratio, 0.1, 1e-12);
  EXPECT_EQ(o->max_hold_clocks, 40);
  // A rate that decays to 0 is followed to 0.
  auto to_zero = BuildWanOptions(*Parse("[training]\nclocks = 101\nlearning_rate = 0.05\nfinal_learning_rate = 0\n"
                                        "[wan]\nthreshold_follows_lr = true\n" + std::string(kSites)));
  ASSERT_TRUE(to_zero.ok()) << to_zero.status().ToString();
  EXPECT_EQ(to_zero->threshold.final_lr_ratio, 0.0);
  // Off by default, and a constant learning rate leaves nothing to follow.
  EXPECT_EQ(BuildWanOptions(*Parse(training + kSites))->threshold.lr_clocks, 0);
  EXPECT_EQ(BuildWanOptions(*Parse("[wan]\nthreshold_follows_lr = true\n" + std::string(kSites)))->threshold.lr_clocks, 0);
  EXPECT_EQ(Parse("[wan]\nmax_hold_clocks = -1\n" + std::string(kSites)).status().code(),
            StatusCode::kInvalidArgument);
}

// threshold_settle_clocks hands the window and the training's length to
// the threshold schedule; a window longer than the training is refused.
TEST(WanTopologyTest, TheThresholdCanSettleOverTheLastClocks) {
  const std::string training = "[training]\nclocks = 101\n";
  auto o = BuildWanOptions(*Parse(training + "[wan]\nthreshold_settle_clocks = 20\n" + kSites));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->threshold.settle_clocks, 20);
  EXPECT_EQ(o->threshold.last_clock, 101);
  EXPECT_EQ(BuildWanOptions(*Parse(training + kSites))->threshold.settle_clocks, 0);
  auto too_long = Parse(training + "[wan]\nthreshold_settle_clocks = 102\n" + kSites);
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("threshold_settle_clocks"), std::string::npos);
}

// tie_reports, tie_backlog (and its bound in clocks) and fresh_first reach
// the replicator; all are off by default.
TEST(WanTopologyTest, TieReportsReachesTheReplicator) {
  EXPECT_FALSE(BuildWanOptions(*Parse(std::string(kSites)))->tie_reports);
  EXPECT_FALSE(BuildWanOptions(*Parse(std::string(kSites)))->tie_backlog);
  auto on = BuildWanOptions(*Parse("[wan]\ntie_reports = true\n" + std::string(kSites)));
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_TRUE(on->tie_reports);
  EXPECT_FALSE(on->tie_backlog);
  auto backlog = BuildWanOptions(*Parse("[wan]\ntie_backlog = true\nfresh_first = true\n" + std::string(kSites)));
  ASSERT_TRUE(backlog.ok()) << backlog.status().ToString();
  EXPECT_TRUE(backlog->tie_backlog);
  EXPECT_TRUE(backlog->fresh_first);
  EXPECT_FALSE(on->fresh_first);
  EXPECT_EQ(backlog->tie_backlog_clocks, 0);
  auto bounded =
      BuildWanOptions(*Parse("[wan]\ntie_backlog = true\ntie_backlog_clocks = 6\nfresh_first = true\n" +
                             std::string(kSites)));
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  EXPECT_EQ(bounded->tie_backlog_clocks, 6);
  auto negative = BuildWanOptions(*Parse("[wan]\ntie_backlog_clocks = -1\n" + std::string(kSites)));
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("tie_backlog_clocks"), std::string::npos)
      << negative.status().ToString();
  auto without = BuildWanOptions(*Parse("[wan]\ntie_backlog_clocks = 6\n" + std::string(kSites)));
  EXPECT_EQ(without.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(without.status().message().find("tie_backlog_clocks bounds tie_backlog"), std::string::npos)
      << without.status().ToString();
  EXPECT_EQ(backlog->tie_backlog_last_clocks, 0);
  EXPECT_TRUE(backlog->TiesBacklogAt(1));
  auto late = BuildWanOptions(*Parse("[wan]\ntie_backlog = true\ntie_backlog_last_clocks = 40\nfresh_first = true\n" +
                                     std::string(kSites)));
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(late->tie_backlog_last_clocks, 40);
  const int64_t clocks = late->threshold.last_clock;  // the [training] clocks
  ASSERT_GE(clocks, 40);
  EXPECT_FALSE(late->TiesBacklogAt(clocks - 40));
  EXPECT_TRUE(late->TiesBacklogAt(clocks - 39));
  auto early = BuildWanOptions(*Parse("[wan]\ntie_backlog_last_clocks = 40\n" + std::string(kSites)));
  EXPECT_EQ(early.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(early.status().message().find("tie_backlog_last_clocks times tie_backlog"), std::string::npos)
      << early.status().ToString();
  auto past = BuildWanOptions(*Parse("[wan]\ntie_backlog = true\nfresh_first = true\ntie_backlog_last_clocks = " +
                                     std::to_string(clocks + 1) + "\n" + std::string(kSites)));
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("exceeds the training's clocks"), std::string::npos)
      << past.status().ToString();
  EXPECT_EQ(Parse("[wan]\ntie_reports = 1\n" + std::string(kSites)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Parse("[wan]\ntie_backlog = \"yes\"\n" + std::string(kSites)).status().code(),
            StatusCode::kInvalidArgument);
  auto alone = BuildWanOptions(*Parse("[wan]\ntie_backlog = true\n" + std::string(kSites)));
  EXPECT_EQ(alone.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(alone.status().message().find("tie_backlog needs fresh_first"), std::string::npos)
      << alone.status().ToString();
}

// report_every_clocks reaches the replicator (1, every clock, by default);
// refused below 1, above the drift bound, and for a mode that takes every
// clock's report.
TEST(WanTopologyTest, ReportEveryClocksReachesTheReplicator) {
  EXPECT_EQ(BuildWanOptions(*Parse(std::string(kSites)))->report_every_clocks, 1);
  auto two = BuildWanOptions(*Parse("[wan]\nstaleness_ds = 8\nreport_every_clocks = 2\n" + std::string(kSites)));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->report_every_clocks, 2);
  auto zero = BuildWanOptions(*Parse("[wan]\nreport_every_clocks = 0\n" + std::string(kSites)));
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("report_every_clocks must be >= 1"), std::string::npos)
      << zero.status().ToString();
  auto past = BuildWanOptions(*Parse("[wan]\nstaleness_ds = 2\nreport_every_clocks = 3\n" + std::string(kSites)));
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("exceeds staleness_ds"), std::string::npos) << past.status().ToString();
  auto bsp = BuildWanOptions(*Parse("[wan]\nmode = \"bsp\"\nreport_every_clocks = 2\n" + std::string(kSites)));
  EXPECT_EQ(bsp.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bsp.status().message().find("asp and all-async only"), std::string::npos) << bsp.status().ToString();
}

// target_utilization reaches the replicator (0, no steering, by default);
// refused outside [0, 1] and for a mode without asp's cut-off.
TEST(WanTopologyTest, TargetUtilizationReachesTheReplicator) {
  EXPECT_EQ(BuildWanOptions(*Parse(std::string(kSites)))->target_utilization, 0);
  auto on = BuildWanOptions(*Parse("[wan]\ntarget_utilization = 0.6\n" + std::string(kSites)));
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_EQ(on->target_utilization, 0.6);
  for (const char* bad : {"-0.1", "1.5", "nan"}) {
    auto refused = BuildWanOptions(*Parse("[wan]\ntarget_utilization = " + std::string(bad) + "\n" + kSites));
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("target_utilization must be in [0, 1]"), std::string::npos)
        << refused.status().ToString();
  }
  auto diloco = BuildWanOptions(*Parse("[wan]\nmode = \"diloco\"\ntarget_utilization = 0.6\n" + std::string(kSites)));
  EXPECT_EQ(diloco.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(diloco.status().message().find("has none"), std::string::npos) << diloco.status().ToString();
}

// selective_barrier = false reaches the replicator; it is on by default.
TEST(WanTopologyTest, TheSelectiveBarrierCanBeTurnedOff) {
  EXPECT_TRUE(BuildWanOptions(*Parse(std::string(kSites)))->selective_barrier);
  auto off = BuildWanOptions(*Parse("[wan]\nselective_barrier = false\n" + std::string(kSites)));
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->selective_barrier);
  EXPECT_EQ(Parse("[wan]\nselective_barrier = 3\n" + std::string(kSites)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(WanTopologyTest, RelativePathsAreTakenFromTheTopologyFile) {
  Topology t;
  t.path = "experiments/topologies/default.toml";
  EXPECT_EQ(t.Resolve("../traces/x"), "experiments/traces/x");
  EXPECT_EQ(t.Resolve("/abs/x"), "/abs/x");
}

TEST(WanSummaryTest, AddsBytesPerLinkWaitsDriftAndPerSiteResults) {
  auto t = Parse(std::string("[wan]\nmode = \"asp\"\n") + kSites);
  ASSERT_TRUE(t.ok());
  supervisor::LaunchStats stats(*t);
  for (int s = 0; s < 3; ++s) {
    nlohmann::json f = {{"event", "final"}, {"test_accuracy", 0.86 + 0.001 * s}, {"counter_max_abs_error", 0.0}};
    stats.OnWorkerEvent(s, 0, f, 10);
  }
  nlohmann::json wan = {
      {"links", {{{"src", "a"}, {"dst", "b"}, {"wire_bytes", 1000}, {"bytes_delivered", 900}, {"batches", 3},
                  {"offered_bps", 1e6}, {"achieved_bps", 2.5e5}}}},
      {"gate", {{"drift_wait_seconds", 1.5}, {"notice_wait_seconds", 0.5}, {"final_wait_seconds", 0.25},
                {"max_drift_clocks", 4}, {"max_bound_clocks", 9}}},
      {"drain_payload_bytes", 90}};
  stats.OnShardEvent(0, 0, {{"event", "shard_stats"}, {"wan", wan}});
  stats.OnShardEvent(0, 1, {{"event", "shard_stats"}, {"wan", wan}});
  nlohmann::json s = nlohmann::json::object();
  supervisor::AddWanSummary(*t, stats, &s);
  EXPECT_EQ(s["wan_mode"], "asp");
  EXPECT_EQ(s["wan_bytes"], 2000);
  EXPECT_EQ(s["wan_bytes_by_link"]["a->b"], 2000);
  EXPECT_DOUBLE_EQ(s["wan_links"]["a->b"]["utilization"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["barrier_wait_seconds"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(s["final_wait_seconds"].get<double>(), 0.5);
  EXPECT_EQ(s["max_site_drift_clocks"], 4);
  EXPECT_EQ(s["max_drift_bound_clocks"], 9);
  EXPECT_DOUBLE_EQ(s["test_accuracy"].get<double>(), 0.86);  // the lowest site
  EXPECT_EQ(s["test_accuracy_by_site"].size(), 3u);
  EXPECT_EQ(s["counter_max_abs_error_by_site"].size(), 3u);
  EXPECT_EQ(s["wan_payload_bytes"], 1800);
  EXPECT_EQ(s["wan_drain_payload_bytes"], 180);
  EXPECT_NE(supervisor::FormatWanSummary(s).find("WAN asp"), std::string::npos);
  EXPECT_NE(supervisor::FormatWanSummary(s).find("WAN final drain: 0.00 MB of 0.00 MB of batches (10.0%)"), std::string::npos)
      << supervisor::FormatWanSummary(s);
}

}  // namespace
}  // namespace geops::config
