// The fault plan's decisions without processes: when a fault is due, what a
// wipe may delete, and the faults / recoveries of summary.json from the
// shards' metrics files.
#include "supervisor/launch/fault_plan.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "storage/store_format.h"
#include "supervisor/launch/summary_faults.h"

#include "tests/common/scratch_files.h"

namespace geops::supervisor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

config::Topology MustParse(const std::string& text) {
  Result<config::Topology> t = config::ParseTopology(text, "t.toml");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : config::Topology();
}

constexpr char kThreeSites[] = R"(
[model]
workload = "counter"
layers = [8, 4]
[training]
clocks = 100
[storage]
data_dir = "data"
[[sites]]
name = "a"
shards = 2
workers = 2
[[sites]]
name = "b"
shards = 1
workers = 1
[[sites]]
name = "c"
shards = 1
workers = 1
[[faults]]
kind = "kill-site"
site = "b"
at_clock = 10
restart_after_s = 1
[[faults]]
kind = "kill-shard"
site = "a"
shard = 1
at_clock = 20
restart_after_s = 0.5
[[faults]]
kind = "kill-shard"
site = "a"
shard = 0
at_clock = 5
)";

class FaultPlanFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_files::FreshTestDir("fault_plan_test");
    fs::create_directories(dir_ + "/metrics");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteMetrics(const std::string& process, const json& doc) {
    std::ofstream(dir_ + "/metrics/" + process + ".json") << doc.dump(2);
  }
  void MakeStore(const std::string& path) {
    fs::create_directories(path);
    std::ofstream(path + "/" + storage::format::kMarkerFile) << storage::format::kMarkerText;
    std::ofstream(path + "/000004.log") << "x";
  }

  std::string dir_;
};

TEST(FaultPlanTest, FiresOnceTheSlowestLiveWorkerReportedTheClock) {
  FaultPlan plan(MustParse(kThreeSites));
  EXPECT_FALSE(plan.Due(1, {}).has_value());                     // no live worker
  EXPECT_FALSE(plan.Due(1, {std::nullopt}).has_value());         // nothing reported yet
  EXPECT_FALSE(plan.Due(1, {int64_t{9}}).has_value());
  EXPECT_EQ(plan.Due(1, {int64_t{10}}), 0);
  EXPECT_EQ(plan.Due(1, {int64_t{14}}), 0);
  // Site a: fault 2 (at 5) comes before fault 1 (at 20); the slowest worker decides.
  EXPECT_FALSE(plan.Due(0, {int64_t{30}, int64_t{4}}).has_value());
  EXPECT_EQ(plan.Due(0, {int64_t{30}, int64_t{5}}), 2);
  EXPECT_FALSE(plan.Due(2, {int64_t{99}}).has_value());          // no fault on site c
}

TEST(FaultPlanTest, OneFaultOfASiteAtATimeAndEachFiresOnce) {
  FaultPlan plan(MustParse(kThreeSites));
  plan.at(2).state = FaultState::kStaysDown;                     // fired, not restarting
  EXPECT_EQ(plan.Due(0, {int64_t{25}, int64_t{25}}), 1);
  plan.at(1).state = FaultState::kDown;
  EXPECT_TRUE(plan.RestartPending());
  EXPECT_FALSE(plan.Due(0, {int64_t{25}, int64_t{25}}).has_value());
  plan.at(1).state = FaultState::kRestarting;
  EXPECT_TRUE(plan.RestartPending());
  plan.at(1).state = FaultState::kRecovered;
  EXPECT_FALSE(plan.RestartPending());
  EXPECT_FALSE(plan.Due(0, {int64_t{99}, int64_t{99}}).has_value());
}

TEST(FaultPlanTest, EndRunCancelsPendingRestartsAndNotesUnfiredFaults) {
  FaultPlan plan(MustParse(kThreeSites));
  plan.at(1).state = FaultState::kDown;
  plan.EndRun();
  EXPECT_EQ(plan.at(1).state, FaultState::kCancelled);
  EXPECT_THAT(plan.at(1).note, HasSubstr("ended before the restart"));
  EXPECT_EQ(plan.at(0).state, FaultState::kWaiting);
  EXPECT_THAT(plan.at(0).note, HasSubstr("never fired"));
  json j = plan.ToJson();
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["fired"], false);
  EXPECT_EQ(j[0]["state"], "waiting");
  EXPECT_EQ(j[1]["fired"], true);
  EXPECT_EQ(j[1]["state"], "cancelled");
  EXPECT_EQ(j[1]["shard"], 1);
  EXPECT_TRUE(j[0]["shard"].is_null());
}

TEST_F(FaultPlanFiles, WipeDeletesOnlyTheSitesShardStores) {
  config::Topology t = MustParse(kThreeSites);
  MakeStore(dir_ + "/data/a-shard-0");
  MakeStore(dir_ + "/data/a-shard-1");
  MakeStore(dir_ + "/data/b-shard-0");
  std::ofstream(dir_ + "/data/notes.txt") << "keep";
  Result<std::vector<std::string>> wiped = WipeShardStores(t, 0, dir_);
  ASSERT_TRUE(wiped.ok()) << wiped.status().ToString();
  EXPECT_EQ(wiped->size(), 2u);
  EXPECT_FALSE(fs::exists(dir_ + "/data/a-shard-0"));
  EXPECT_FALSE(fs::exists(dir_ + "/data/a-shard-1"));
  EXPECT_TRUE(fs::exists(dir_ + "/data/b-shard-0/" + storage::format::kMarkerFile));
  EXPECT_TRUE(fs::exists(dir_ + "/data/notes.txt"));
  // Already gone: nothing to do, not an error.
  wiped = WipeShardStores(t, 0, dir_);
  ASSERT_TRUE(wiped.ok());
  EXPECT_TRUE(wiped->empty());
}

TEST_F(FaultPlanFiles, WipeRefusesWhatIsNotAShardStoreAndDeletesNothing) {
  config::Topology t = MustParse(kThreeSites);
  MakeStore(dir_ + "/data/a-shard-0");
  fs::create_directories(dir_ + "/data/a-shard-1");
  std::ofstream(dir_ + "/data/a-shard-1/precious.txt") << "not a store";
  Result<std::vector<std::string>> wiped = WipeShardStores(t, 0, dir_);
  ASSERT_FALSE(wiped.ok());
  EXPECT_EQ(wiped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(wiped.status().message(), HasSubstr("is not a geops shard store"));
  EXPECT_TRUE(fs::exists(dir_ + "/data/a-shard-0/" + storage::format::kMarkerFile));  // checked first
  EXPECT_TRUE(fs::exists(dir_ + "/data/a-shard-1/precious.txt"));

  // A symbolic link is never followed.
  fs::remove_all(dir_ + "/data/a-shard-1");
  MakeStore(dir_ + "/elsewhere");
  fs::create_directory_symlink(dir_ + "/elsewhere", dir_ + "/data/a-shard-1");
  wiped = WipeShardStores(t, 0, dir_);
  ASSERT_FALSE(wiped.ok());
  EXPECT_THAT(wiped.status().message(), HasSubstr("symbolic link"));
  EXPECT_TRUE(fs::exists(dir_ + "/elsewhere/" + storage::format::kMarkerFile));

  config::Topology memory = MustParse("[[sites]]\nname = \"m\"\n");
  EXPECT_FALSE(WipeShardStores(memory, 0, dir_).ok());
}

TEST_F(FaultPlanFiles, RecoveriesComeFromTheShardsMetrics) {
  config::Topology t = MustParse(kThreeSites);
  FaultPlan plan(t);
  const double killed = UnixNow();
  FaultRecord& r = plan.at(0);  // kill-site b, restarted
  r.state = FaultState::kRecovered;
  r.killed_unix = killed;
  r.restarted_unix = killed + 1.0;
  FaultVictim shard;
  shard.process = "b-shard-0";
  shard.shard = true;
  shard.pid = 100;
  shard.restarted_pid = 200;
  r.victims.push_back(shard);
  FaultVictim worker;
  worker.process = "b-worker-0";
  worker.pid = 101;
  worker.restarted_pid = 201;
  worker.resumed_clock = 12;
  r.victims.push_back(worker);

  // Survivors: shard 0 of a and of c saw b go silent (peer by name and by index).
  WriteMetrics("a-shard-0", {{"wan", {{"peers", json::array({{{"peer", "b"},
                                                              {"down_events", json::array({
                                                                  {{"last_heard_unix", killed - 5},
                                                                   {"detected_unix", killed - 4},  // an earlier outage
                                                                   {"back_unix", killed - 3}},
                                                                  {{"last_heard_unix", killed - 0.1},
                                                                   {"detected_unix", killed + 0.7},
                                                                   {"back_unix", killed + 2}}})}}})}}}});
  WriteMetrics("c-shard-0", {{"wan", {{"peers", json::array({{{"peer", 1},
                                                              {"down_events", json::array({
                                                                  {{"last_heard_unix", killed},
                                                                   {"detected_unix", killed + 0.4},
                                                                   {"back_unix", nullptr}}})}}})}}}});
  WriteMetrics("b-shard-0", {{"recovery", {{"process_start_unix", killed + 1.01},
                                           {"state_loaded_unix", killed + 1.2},
                                           {"caught_up_unix", killed + 1.75},
                                           {"catch_up_bytes", 4096}}}});
  json summary = {{"counter_max_abs_error_by_site", {{"a", 0.0}, {"b", 0.0}, {"c", 0.0}}}};
  AddFaultSummary(t, plan, dir_, killed - 60, &summary);

  ASSERT_EQ(summary["faults"].size(), 3u);
  EXPECT_EQ(summary["faults"][0]["pids"], json::array({100, 101}));
  EXPECT_EQ(summary["faults"][0]["restarted_pids"], json::array({200, 201}));
  EXPECT_EQ(summary["faults"][0]["resumed_clocks"]["b-worker-0"], 12);
  ASSERT_EQ(summary["recoveries"].size(), 1u) << summary.dump(2);
  const json& rec = summary["recoveries"][0];
  EXPECT_EQ(rec["site"], "b");
  EXPECT_EQ(rec["kind"], "kill-site");
  EXPECT_DOUBLE_EQ(rec["killed_unix"].get<double>(), killed);
  EXPECT_DOUBLE_EQ(rec["restarted_unix"].get<double>(), killed + 1.0);
  EXPECT_NEAR(rec["detect_seconds"].get<double>(), 0.4, 1e-6);
  EXPECT_NEAR(rec["catch_up_seconds"].get<double>(), 0.75, 1e-6);
  EXPECT_EQ(rec["bytes_transferred"], 4096);
  EXPECT_EQ(rec["counter_max_abs_error_by_site"]["b"], 0.0);
  EXPECT_TRUE(rec["note"].is_null()) << rec.dump();
  EXPECT_THAT(FormatFaultSummary(summary), HasSubstr("fault 0 kill-site b at clock 10: fired"));
  EXPECT_THAT(FormatFaultSummary(summary), HasSubstr("fault 1 kill-shard a shard 1 at clock 20: did not fire"));
}

TEST_F(FaultPlanFiles, MissingMetricsGiveNullsWithANote) {
  config::Topology t = MustParse(kThreeSites);
  FaultPlan plan(t);
  const double killed = UnixNow();
  FaultRecord& r = plan.at(1);  // kill-shard a/1, restarted
  r.state = FaultState::kRecovered;
  r.killed_unix = killed;
  r.restarted_unix = killed + 0.5;
  FaultVictim shard;
  shard.process = "a-shard-1";
  shard.shard = true;
  shard.pid = 100;
  shard.restarted_pid = 200;
  r.victims.push_back(shard);
  WriteMetrics("a-shard-1", {{"shard_clock", 10}});  // no "recovery"
  WriteMetrics("b-shard-0", {{"wan", {{"peers", json::array({{{"peer", "a"}}})}}}});  // no down_events
  json summary = json::object();
  AddFaultSummary(t, plan, dir_, killed - 60, &summary);
  ASSERT_EQ(summary["recoveries"].size(), 1u);
  const json& rec = summary["recoveries"][0];
  EXPECT_TRUE(rec["detect_seconds"].is_null());
  EXPECT_TRUE(rec["catch_up_seconds"].is_null());
  EXPECT_TRUE(rec["bytes_transferred"].is_null());
  ASSERT_TRUE(rec["note"].is_string());
  EXPECT_THAT(rec["note"].get<std::string>(), HasSubstr("no wan.peers[].down_events for a"));
  EXPECT_THAT(rec["note"].get<std::string>(), HasSubstr("a-shard-1 metrics have no \"recovery\" object"));

  // Files from an earlier launch into the same folder do not count.
  json later = json::object();
  AddFaultSummary(t, plan, dir_, UnixNow() + 3600, &later);
  EXPECT_THAT(later["recoveries"][0]["note"].get<std::string>(), HasSubstr("older than this launch"));
}

TEST_F(FaultPlanFiles, OneSiteHasNoDetectionButStillACatchUp) {
  config::Topology t = MustParse(R"(
[training]
clocks = 50
[storage]
data_dir = "data"
[[sites]]
name = "local"
[[faults]]
kind = "kill-site"
site = "local"
at_clock = 3
restart_after_s = 0.1
)");
  FaultPlan plan(t);
  const double killed = UnixNow();
  FaultRecord& r = plan.at(0);
  r.state = FaultState::kRecovered;
  r.killed_unix = killed;
  r.restarted_unix = killed + 0.1;
  FaultVictim shard;
  shard.process = "local-shard-0";
  shard.shard = true;
  shard.restarted_pid = 7;
  r.victims.push_back(shard);
  WriteMetrics("local-shard-0", {{"recovery", {{"process_start_unix", killed + 0.11},
                                               {"state_loaded_unix", killed + 0.2},
                                               {"caught_up_unix", killed + 0.2},
                                               {"catch_up_bytes", 0}}}});
  json summary = json::object();
  AddFaultSummary(t, plan, dir_, killed - 60, &summary);
  const json& rec = summary["recoveries"][0];
  EXPECT_TRUE(rec["detect_seconds"].is_null());
  EXPECT_THAT(rec["note"].get<std::string>(), HasSubstr("one-site topology"));
  EXPECT_NEAR(rec["catch_up_seconds"].get<double>(), 0.1, 1e-6);
  EXPECT_EQ(rec["bytes_transferred"], 0);
}

}  // namespace
}  // namespace geops::supervisor
