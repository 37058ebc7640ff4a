#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "supervisor/launch/child_event.h"
#include "supervisor/launch/launch_stats.h"
#include "supervisor/launch/progress_display.h"
#include "supervisor/launch/summary.h"

namespace geops::supervisor {
namespace {

using nlohmann::json;

config::Topology TwoSites() {
  config::Topology t;
  t.name = "two";
  t.clocks = 100;
  t.target_accuracy = 0.8;
  t.sites = {config::SiteSpec{"east", "127.0.0.1", 0, 1, 2, ""}, config::SiteSpec{"west", "127.0.0.1", 0, 1, 1, ""}};
  return t;
}

json Final(const std::string& site, int worker, double loss, int64_t sent, int64_t staleness,
           std::optional<double> acc) {
  return json{{"event", "final"},          {"site", site},          {"worker", worker},
              {"clocks", 100},             {"final_loss", loss},    {"test_accuracy", acc ? json(*acc) : json()},
              {"test_loss", json()},       {"lan_bytes_sent", sent}, {"lan_bytes_received", 10},
              {"max_staleness_observed", staleness}, {"counter_expected", json()},
              {"counter_max_abs_error", json()},     {"examples", 3200}};
}

TEST(ChildEventTest, PortOfAnAnnouncedAddress) {
  EXPECT_EQ(PortOf("127.0.0.1:7700"), 7700);
  EXPECT_EQ(PortOf("[::1]:9000"), 9000);
  EXPECT_EQ(PortOf("no-port"), -1);
  EXPECT_EQ(PortOf("host:x"), -1);
}

TEST(ChildEventTest, ClassifiesPlainEventAndMalformedLines) {
  EXPECT_EQ(ParseChildLine("hello").kind, ChildLineKind::kPlain);
  EXPECT_EQ(ParseChildLine("@geops").kind, ChildLineKind::kPlain);
  ChildLine e = ParseChildLine(R"(@geops {"event":"progress","clock":3})");
  ASSERT_EQ(e.kind, ChildLineKind::kEvent);
  EXPECT_EQ(e.name, "progress");
  EXPECT_EQ(IntField(e.event, "clock"), 3);
  EXPECT_EQ(ParseChildLine("@geops {oops").kind, ChildLineKind::kMalformed);
  EXPECT_EQ(ParseChildLine("@geops [1,2]").kind, ChildLineKind::kMalformed);
  EXPECT_EQ(ParseChildLine(R"(@geops {"clock":1})").kind, ChildLineKind::kMalformed);
  EXPECT_EQ(ParseChildLine("@geops {\"event\":\"x\",\"s\":\"\xff\"}").kind, ChildLineKind::kMalformed);
}

TEST(ChildEventTest, TypedFieldsRejectWrongTypesAndNull) {
  json j = {{"a", 1.5}, {"b", nullptr}, {"c", "s"}, {"d", 7}};
  EXPECT_EQ(NumberField(j, "a"), 1.5);
  EXPECT_FALSE(NumberField(j, "b"));
  EXPECT_FALSE(NumberField(j, "c"));
  EXPECT_FALSE(NumberField(j, "zz"));
  EXPECT_EQ(IntField(j, "d"), 7);
  EXPECT_EQ(StringField(j, "c"), "s");
  EXPECT_FALSE(StringField(j, "a"));
}

TEST(LaunchStatsTest, SiteProgressAggregatesItsWorkers) {
  LaunchStats stats(TwoSites());
  stats.OnWorkerEvent(0, 0, {{"event", "progress"}, {"clock", 10}, {"loss", 1.0}, {"examples_per_sec", 100}}, 1);
  stats.OnWorkerEvent(0, 1, {{"event", "progress"}, {"clock", 14}, {"loss", 3.0}, {"examples_per_sec", 50}}, 1);
  stats.OnWorkerEvent(0, 1, {{"event", "mystery"}, {"clock", 99}}, 1);  // unknown: ignored
  std::vector<SiteProgress> sites = stats.Sites();
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].min_clock, 10);
  EXPECT_EQ(sites[0].max_clock, 14);
  EXPECT_EQ(sites[0].clocks, 100);
  EXPECT_DOUBLE_EQ(*sites[0].mean_loss, 2.0);
  EXPECT_DOUBLE_EQ(sites[0].examples_per_sec, 150);
  EXPECT_FALSE(sites[1].mean_loss);
  stats.OnWorkerExit(0, 1);
  EXPECT_EQ(stats.Sites()[0].workers_done, 1);
  EXPECT_DOUBLE_EQ(stats.Sites()[0].examples_per_sec, 100);
}

TEST(LaunchStatsTest, RemembersWhenTheTargetWasFirstReached) {
  LaunchStats stats(TwoSites());
  stats.OnWorkerEvent(0, 0, {{"event", "eval"}, {"clock", 10}, {"test_accuracy", 0.7}}, 2.0);
  EXPECT_FALSE(stats.target_reached_t());
  stats.OnWorkerEvent(0, 0, {{"event", "eval"}, {"clock", 20}, {"test_accuracy", 0.81}}, 3.5);
  stats.OnWorkerEvent(0, 0, {{"event", "eval"}, {"clock", 30}, {"test_accuracy", 0.9}}, 5.0);
  EXPECT_EQ(stats.target_reached_t(), 3.5);
  EXPECT_EQ(stats.latest_test_accuracy(), 0.9);
  EXPECT_EQ(stats.Sites()[0].test_accuracy, 0.9);
}

// An evaluation reports when its model was taken (model_age_seconds before
// the event): the target counts from then, not from its result.
TEST(LaunchStatsTest, TheTargetCountsFromWhenTheModelWasTaken) {
  LaunchStats stats(TwoSites());
  stats.OnWorkerEvent(0, 0, {{"event", "eval"}, {"clock", 20}, {"test_accuracy", 0.9}, {"model_age_seconds", 0.4}},
                      3.5);
  ASSERT_TRUE(stats.target_reached_t());
  EXPECT_DOUBLE_EQ(*stats.target_reached_t(), 3.1);
}

TEST(SummaryTest, AggregatesFinalReports) {
  config::Topology topo = TwoSites();
  LaunchStats stats(topo);
  stats.OnWorkerEvent(0, 0, {{"event", "eval"}, {"test_accuracy", 0.85}}, 4.0);
  stats.OnWorkerEvent(0, 0, Final("east", 0, 0.5, 1000, 1, 0.88), 9.0);
  stats.OnWorkerEvent(0, 1, Final("east", 1, 0.7, 2000, 3, std::nullopt), 9.0);
  // A worker that claims to be someone else is attributed to its process.
  stats.OnWorkerEvent(1, 0, Final("east", 1, 0.9, 4000, 2, std::nullopt), 9.5);
  LaunchOutcome outcome;
  outcome.workers_started_t = 1.0;
  outcome.workers_ended_t = 11.0;
  outcome.launcher_seconds = 12.0;
  json s = BuildSummary(topo, stats, outcome);
  EXPECT_EQ(s["topology"], "two");
  EXPECT_EQ(s["sites"], 2);
  EXPECT_EQ(s["workers"], 3);
  EXPECT_DOUBLE_EQ(s["wall_seconds"].get<double>(), 10.0);
  EXPECT_NEAR(s["final_loss"].get<double>(), 0.7, 1e-12);
  EXPECT_DOUBLE_EQ(s["test_accuracy"].get<double>(), 0.88);
  EXPECT_EQ(s["lan_bytes"], 7030);
  EXPECT_EQ(s["max_staleness_observed"], 3);
  EXPECT_DOUBLE_EQ(s["time_to_target_seconds"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(s["examples_per_second"].get<double>(), 960.0);
  EXPECT_TRUE(s["counter_expected"].is_null());
  ASSERT_EQ(s["per_worker"].size(), 3u);
  EXPECT_EQ(s["per_worker"][2]["site"], "west");
  EXPECT_EQ(s["per_worker"][2]["worker"], 0);
  EXPECT_EQ(s["exit"], "ok");
  EXPECT_TRUE(s["failure"].is_null());
  EXPECT_FALSE(s["interrupted"].get<bool>());
  std::string table = FormatSummaryTable(topo, s);
  EXPECT_NE(table.find("east"), std::string::npos);
  EXPECT_NE(table.find("test accuracy 0.8800"), std::string::npos);
  EXPECT_NE(table.find("reached after 3.0 s"), std::string::npos);
}

TEST(SummaryTest, SumsTheCpuSecondsEachProcessReported) {
  config::Topology topo = TwoSites();
  LaunchStats stats(topo);
  json a = Final("east", 0, 0.5, 1000, 1, 0.88), b = Final("east", 1, 0.5, 1000, 1, std::nullopt);
  a["cpu_seconds"] = 4.5;
  b["cpu_seconds"] = 1.5;
  stats.OnWorkerEvent(0, 0, a, 9.0);
  stats.OnWorkerEvent(0, 1, b, 9.0);
  // A worker that did not report (an older binary) and a shard that could
  // not read its clock (-1) add nothing.
  stats.OnWorkerEvent(1, 0, Final("west", 0, 0.5, 1000, 1, std::nullopt), 9.0);
  stats.OnShardEvent(0, 0, {{"event", "shard_stats"}, {"site", "east"}, {"cpu_seconds", 2.5}});
  stats.OnShardEvent(1, 0, {{"event", "shard_stats"}, {"site", "west"}, {"cpu_seconds", -1}});
  LaunchOutcome outcome;
  json s = BuildSummary(topo, stats, outcome);
  EXPECT_DOUBLE_EQ(s["cpu_seconds"]["workers"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(s["cpu_seconds"]["shards"].get<double>(), 2.5);
  EXPECT_NE(FormatSummaryTable(topo, s).find("CPU: workers 6.0 s, shards 2.5 s"), std::string::npos);

  // No process reported: null, and no CPU line.
  LaunchStats none(topo);
  json t = BuildSummary(topo, none, outcome);
  EXPECT_TRUE(t["cpu_seconds"]["workers"].is_null());
  EXPECT_TRUE(t["cpu_seconds"]["shards"].is_null());
  EXPECT_EQ(FormatSummaryTable(topo, t).find("CPU:"), std::string::npos);
}

TEST(SummaryTest, PartialRunFallsBackToTheLatestEvaluation) {
  config::Topology topo = TwoSites();
  LaunchStats stats(topo);
  stats.OnWorkerEvent(0, 0, {{"event", "eval"}, {"test_accuracy", 0.6}, {"test_loss", 1.2}}, 4.0);
  LaunchOutcome outcome;
  outcome.exit = "interrupted";
  outcome.failure = "interrupted by SIGINT";
  json s = BuildSummary(topo, stats, outcome);
  EXPECT_DOUBLE_EQ(s["test_accuracy"].get<double>(), 0.6);
  EXPECT_TRUE(s["wall_seconds"].is_null());
  EXPECT_TRUE(s["time_to_target_seconds"].is_null());
  EXPECT_TRUE(s["final_loss"].is_null());
  EXPECT_TRUE(s["interrupted"].get<bool>());
  EXPECT_EQ(s["failure"], "interrupted by SIGINT");
}

TEST(SummaryTest, WritesAtomicallyAndLeavesNoTemporaryFile) {
  std::string dir = ::testing::TempDir() + "summary_test_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteJsonAtomically(dir + "/s.json", json{{"a", 1}}).ok());
  ASSERT_TRUE(WriteJsonAtomically(dir + "/s.json", json{{"a", 2}}).ok());
  std::ifstream in(dir + "/s.json");
  EXPECT_EQ(json::parse(in)["a"], 2);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
  EXPECT_FALSE(WriteJsonAtomically(dir + "/missing/s.json", json{}).ok());
  std::filesystem::remove_all(dir);
}

std::string ReadAll(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  return out;
}

TEST(LaunchStatsTest, AWorkerInItsFinalReadIsCountedUntilItsFinalEvent) {
  config::Topology t;
  t.clocks = 10;
  t.sites.push_back(config::SiteSpec{});
  t.sites[0].name = "east";
  t.sites[0].workers = 2;
  LaunchStats stats(t);
  stats.OnWorkerEvent(0, 1, nlohmann::json{{"event", "final_read"}, {"clock", 10}}, 1.0);
  EXPECT_EQ(stats.Sites()[0].workers_final_read, 1);
  stats.OnWorkerEvent(0, 1, nlohmann::json{{"event", "final"}, {"clocks", 10}}, 2.0);
  EXPECT_EQ(stats.Sites()[0].workers_final_read, 0);
}

TEST(ProgressDisplayTest, SiteLineShowsClockRangeLossAccuracyAndRate) {
  SiteProgress p{"east", 2, 0, 120, 135, 1000, 0.41234, 0.8412, 1234.4};
  EXPECT_EQ(ProgressDisplay::SiteLine(p, 6), "east    clock 120-135/1000  loss 0.4123  acc 0.8412  1234 ex/s  2 running");
  p.min_clock = 135;
  p.workers_done = 2;
  p.mean_loss.reset();
  p.test_accuracy.reset();
  EXPECT_EQ(ProgressDisplay::SiteLine(p, 4), "east  clock 135/1000  loss -  1234 ex/s  done");
  // Done training, waiting for every site's drain: said, not "running".
  p.workers_done = 0;
  p.workers_final_read = 1;
  EXPECT_EQ(ProgressDisplay::SiteLine(p, 4),
            "east  clock 135/1000  loss -  1234 ex/s  1 waiting for the final model (every site's drain)  1 running");
  EXPECT_EQ(ProgressDisplay::Elapsed(12.34), "12.3s");
  EXPECT_EQ(ProgressDisplay::Elapsed(245), "4m05s");
  EXPECT_EQ(ProgressDisplay::Elapsed(3723), "1h02m03s");
}

TEST(ProgressDisplayTest, PlainModePrintsOnlyEveryInterval) {
  FILE* out = std::tmpfile();
  ProgressDisplay d("t", ProgressDisplayOptions{false, 5.0, out, out});
  std::vector<SiteProgress> sites = {SiteProgress{"east", 1, 0, 3, 3, 10, 1.0, std::nullopt, 5}};
  d.Update(0.5, "training", sites);
  d.Update(1.0, "training", sites);
  d.Update(6.0, "training", sites);
  std::string text = ReadAll(out);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_EQ(text.find("\x1b["), std::string::npos);
  std::fclose(out);
}

TEST(ProgressDisplayTest, LiveModeRedrawsTheBlockInPlace) {
  FILE* out = std::tmpfile();
  ProgressDisplay d("t", ProgressDisplayOptions{true, 5.0, out, out});
  std::vector<SiteProgress> sites = {SiteProgress{"east", 1, 0, 3, 3, 10, 1.0, std::nullopt, 5},
                                     SiteProgress{"west", 1, 0, 4, 4, 10, 1.0, std::nullopt, 5}};
  d.Update(0.5, "training", sites);
  d.Update(1.0, "training", sites);
  d.Message("hello");
  std::string text = ReadAll(out);
  EXPECT_NE(text.find("\x1b[3A"), std::string::npos);  // up over header + 2 sites
  EXPECT_NE(text.find("hello\n"), std::string::npos);
  std::fclose(out);
}

}  // namespace
}  // namespace geops::supervisor
