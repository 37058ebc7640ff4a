// The launcher's fault plan against fake_geops (tests/cli/fake_geops.cc):
// the right processes are SIGKILLed at the right clock, restarted with the
// same command lines (shards first, on the same ports), killed-on-purpose
// processes are not failures, and the results show it.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/launch_command.h"
#include "storage/store_format.h"

#include "tests/common/scratch_files.h"

namespace geops::cli {
namespace {

using test_files::ReadFile;

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

// Site a: 2 shards on any free port (the fake takes 41000 + shard), 2
// workers; site b: 1 shard on 45000, 1 worker. FAULTS is replaced.
constexpr char kTopology[] = R"(
name = "fake-faults"
[model]
workload = "counter"
[training]
clocks = 120
[storage]
data_dir = "data"
[[sites]]
name = "a"
shards = 2
workers = 2
[[sites]]
name = "b"
base_port = 45000
shards = 1
workers = 1
FAULTS
)";

// Site a alone (wipe-disk is for one-site topologies): kTopology without
// site b.
std::string OneSiteTopology() {
  std::string t = kTopology;
  const size_t b = t.find("[[sites]]\nname = \"b\"");
  return t.erase(b, t.find("FAULTS") - b);
}

class FaultLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_files::FreshTestDir("fault_launch_test");
    out_ = dir_ + "/out";
    ::unsetenv("FAKE_GEOPS_FAULTS");
    ::setenv("FAKE_GEOPS_CLOCK_MS", "5", 1);
  }
  void TearDown() override {
    ::unsetenv("FAKE_GEOPS_CLOCK_MS");
    if (!HasFailure()) fs::remove_all(dir_);
  }

  int Launch(const std::string& faults, const std::string& topology = kTopology) {
    std::string text = topology;
    text.replace(text.find("FAULTS"), 6, faults);
    const std::string path = dir_ + "/topology.toml";
    std::ofstream(path) << text;
    LaunchArgs a;
    a.topology_path = path;
    a.out_dir = out_;
    a.geops_binary = FAKE_GEOPS;
    a.timeout_seconds = 20;
    a.force_plain = true;
    a.listen_timeout_seconds = 5;
    a.stop_timeout_seconds = 2;
    a.resume = resume_;              // stores made by the test are a run to go on with
    a.max_restarts = max_restarts_;
    return RunLaunch(a);
  }

  bool resume_ = false;
  int max_restarts_ = 3;

  json Summary() { return json::parse(ReadFile(out_ + "/summary.json")); }

  std::vector<json> Events(const std::string& name = "") {
    std::vector<json> out;
    std::ifstream in(out_ + "/events.jsonl");
    for (std::string line; std::getline(in, line);) {
      json e = json::parse(line);
      if (name.empty() || e["event"] == name) out.push_back(e);
    }
    return out;
  }

  // Every process that printed its pid, in order: {pid, site-shard/worker name} from the logs' order.
  std::vector<int> FakePids() {
    std::vector<int> pids;
    for (const json& e : Events("fake_pid")) pids.push_back(e["pid"].get<int>());
    return pids;
  }

  void ExpectAllChildrenGone() {
    for (int pid : FakePids()) EXPECT_EQ(::kill(pid, 0), -1) << "child " << pid << " still exists";
  }

  // Fault `kind` on the whole of site a at clock 30, restarted 0.2 s later:
  // the run ends ok with the site's four processes hit and restarted.
  // Returns the summary.
  json LaunchSiteFaultOnA(const std::string& kind) {
    EXPECT_EQ(Launch("[[faults]]\nkind = \"" + kind + "\"\nsite = \"a\"\nat_clock = 30\nrestart_after_s = 0.2\n"), 0);
    json s = Summary();
    EXPECT_EQ(s["exit"], "ok");
    const json& f = s["faults"][0];
    EXPECT_EQ(f["state"], "recovered");
    EXPECT_EQ(f["processes"], json::array({"a-shard-0", "a-shard-1", "a-worker-0", "a-worker-1"}));
    EXPECT_EQ(f["restarted_pids"].size(), 4u);
    return s;
  }

  std::string dir_, out_;
};

TEST_F(FaultLaunchTest, KillShardAtAClockRestartsItOnTheSamePort) {
  ASSERT_EQ(Launch(R"(
[[faults]]
kind = "kill-shard"
site = "a"
shard = 0
at_clock = 20
restart_after_s = 0.3
)"),
            0);
  json s = Summary();
  EXPECT_EQ(s["exit"], "ok");
  ASSERT_EQ(s["faults"].size(), 1u);
  const json& f = s["faults"][0];
  EXPECT_EQ(f["fired"], true);
  EXPECT_EQ(f["state"], "recovered");
  EXPECT_EQ(f["processes"], json::array({"a-shard-0"}));
  EXPECT_GE(f["clock_observed"].get<int>(), 20);
  ASSERT_EQ(f["pids"].size(), 1u);
  ASSERT_EQ(f["restarted_pids"].size(), 1u);
  const int killed = f["pids"][0].get<int>();
  const int restarted = f["restarted_pids"][0].get<int>();
  EXPECT_NE(killed, restarted);
  EXPECT_GE(f["restarted_unix"].get<double>() - f["killed_unix"].get<double>(), 0.3 - 0.01);  // timer ms

  // The kill and the restart are in the events, and the pids are real: the
  // killed one printed its pid as a-shard-0, and so did its replacement.
  std::vector<json> injected = Events("fault_injected");
  ASSERT_EQ(injected.size(), 1u);
  EXPECT_EQ(injected[0]["pids"], json::array({killed}));
  EXPECT_EQ(injected[0]["kind"], "kill-shard");
  EXPECT_EQ(injected[0]["signal"], "SIGKILL");
  EXPECT_EQ(injected[0]["site"], "a");
  EXPECT_EQ(injected[0]["shard"], 0);
  std::vector<json> restarts = Events("process_restarted");
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0]["process"], "a-shard-0");
  EXPECT_EQ(restarts[0]["pid"], restarted);
  EXPECT_EQ(restarts[0]["old_pid"], killed);
  std::vector<int> pids = FakePids();
  EXPECT_NE(std::find(pids.begin(), pids.end(), killed), pids.end());
  EXPECT_NE(std::find(pids.begin(), pids.end(), restarted), pids.end());
  // Same address after the restart, though the topology says "any free port".
  std::vector<std::string> addresses;
  for (const json& e : Events("listening")) {
    if (e["site"] == "a" && e["shard"] == 0) addresses.push_back(e["address"]);
  }
  EXPECT_EQ(addresses, (std::vector<std::string>{"127.0.0.1:41000", "127.0.0.1:41000"}));
  // The log holds both runs.
  const std::string log = ReadFile(out_ + "/logs/a-shard-0.log");
  EXPECT_THAT(log, HasSubstr("restarted after fault 0"));
  EXPECT_NE(log.find("fake shard a/0 starting"), log.rfind("fake shard a/0 starting"));
  // Nobody else was touched, and every worker reported once.
  EXPECT_EQ(s["per_worker"].size(), 3u);
  ASSERT_EQ(s["recoveries"].size(), 1u);
  EXPECT_EQ(s["recoveries"][0]["site"], "a");
  EXPECT_TRUE(s["recoveries"][0]["detect_seconds"].is_null());  // the fake writes no metrics
  EXPECT_TRUE(s["recoveries"][0]["note"].is_string());
  ExpectAllChildrenGone();
}

TEST_F(FaultLaunchTest, KillSiteRestartsItsShardsThenItsWorkers) {
  json s = LaunchSiteFaultOnA("kill-site");
  const json& f = s["faults"][0];
  EXPECT_GE(f["worker_clocks"]["a-worker-0"].get<int>(), 30);
  EXPECT_GE(f["worker_clocks"]["a-worker-1"].get<int>(), 30);
  EXPECT_FALSE(f["worker_clocks"].contains("b-worker-0"));

  // Order: kill, both shards restarted, both listening, then the workers.
  std::vector<std::string> order;
  for (const json& e : Events()) {
    if (e["event"] == "fault_injected") order.push_back("kill");
    if (e["event"] == "process_restarted") order.push_back(e["process"]);
    if (e["event"] == "listening" && e["site"] == "a" && !order.empty()) order.push_back("listening");
  }
  EXPECT_EQ(order, (std::vector<std::string>{"kill", "a-shard-0", "a-shard-1", "listening", "listening",
                                             "a-worker-0", "a-worker-1"}));
  // The final reports come from the second runs: each restarted worker started twice.
  ASSERT_EQ(s["per_worker"].size(), 3u);
  EXPECT_EQ(s["per_worker"][0]["start_clocks"], json::array({0, 0}));
  EXPECT_EQ(s["per_worker"][1]["start_clocks"], json::array({0, 0}));
  EXPECT_EQ(s["per_worker"][2]["start_clocks"], json::array({0}));
  EXPECT_EQ(s["faults"][0]["resumed_clocks"]["a-worker-1"], 0);
  EXPECT_EQ(Events("final").size(), 3u);
  ExpectAllChildrenGone();
}

// stop-site: SIGTERM instead of SIGKILL. The fake shards exit 0 on it, the
// fake workers die of it; each exit and its time land in the summary.
TEST_F(FaultLaunchTest, StopSiteSigtermsTheSiteAndRestartsWhatStopped) {
  json s = LaunchSiteFaultOnA("stop-site");
  const json& f = s["faults"][0];
  ASSERT_EQ(f["exits"].size(), 4u) << f.dump(2);
  for (const char* shard : {"a-shard-0", "a-shard-1"}) {
    const json& e = f["exits"][shard];
    EXPECT_EQ(e["exit"], "exit code 0") << shard;  // a clean stop
    EXPECT_EQ(e["killed_after_grace"], false) << shard;
    ASSERT_TRUE(e["seconds"].is_number()) << e.dump();
    EXPECT_GE(e["seconds"].get<double>(), 0.0);
    EXPECT_LT(e["seconds"].get<double>(), 2.0);  // within the stop grace (Launch: 2 s)
  }
  for (const char* worker : {"a-worker-0", "a-worker-1"}) {
    EXPECT_THAT(f["exits"][worker]["exit"].get<std::string>(), HasSubstr("signal 15")) << worker;
  }
  // The shards' final reports of the first run came out: they stopped, not died.
  int stats = 0;
  for (const json& e : Events("shard_stats")) stats += e["site"] == "a" ? 1 : 0;
  EXPECT_EQ(stats, 4);  // both shards, both runs
  std::vector<json> injected = Events("fault_injected");
  ASSERT_EQ(injected.size(), 1u);
  EXPECT_EQ(injected[0]["signal"], "SIGTERM");
  EXPECT_EQ(Events("process_restarted").size(), 4u);
  ExpectAllChildrenGone();
}

// A process that does not stop on a stop-site's SIGTERM is SIGKILLed after
// the stop grace and reported; the restart waits for it.
TEST_F(FaultLaunchTest, StopSiteKillsWhatIgnoresSigtermAfterTheGrace) {
  ::setenv("FAKE_GEOPS_FAULTS", "b-shard-0:ignoreterm", 1);
  const int code = Launch(R"(
[[faults]]
kind = "stop-site"
site = "b"
at_clock = 20
restart_after_s = 0.1
)");
  ::unsetenv("FAKE_GEOPS_FAULTS");
  ASSERT_EQ(code, 0);
  json s = Summary();
  const json& f = s["faults"][0];
  EXPECT_EQ(f["state"], "recovered") << f.dump(2);
  const json& shard = f["exits"]["b-shard-0"];
  EXPECT_EQ(shard["killed_after_grace"], true) << f.dump(2);
  EXPECT_THAT(shard["exit"].get<std::string>(), HasSubstr("signal 9"));
  EXPECT_GE(shard["seconds"].get<double>(), 2.0 - 0.01);  // the grace, then SIGKILL
  EXPECT_EQ(f["exits"]["b-worker-0"]["killed_after_grace"], false);
  EXPECT_GE(f["restarted_unix"].get<double>() - f["killed_unix"].get<double>(), 2.0 - 0.01);
  ExpectAllChildrenGone();
}

TEST_F(FaultLaunchTest, ASiteThatStaysDownDoesNotFailTheRest) {
  ASSERT_EQ(Launch(R"(
[[faults]]
kind = "kill-site"
site = "b"
at_clock = 10
)"),
            0);
  json s = Summary();
  EXPECT_EQ(s["exit"], "ok");
  EXPECT_EQ(s["faults"][0]["state"], "stays-down");
  EXPECT_EQ(s["faults"][0]["processes"], json::array({"b-shard-0", "b-worker-0"}));
  EXPECT_TRUE(s["faults"][0]["restarted_unix"].is_null());
  EXPECT_TRUE(s["recoveries"].empty());
  ASSERT_EQ(s["per_worker"].size(), 2u);  // b's worker never finished
  EXPECT_EQ(s["per_worker"][0]["site"], "a");
  EXPECT_TRUE(Events("process_restarted").empty());
  ExpectAllChildrenGone();
}

TEST_F(FaultLaunchTest, EverySiteDownForGoodFailsTheRun) {
  EXPECT_EQ(Launch(R"(
[[faults]]
kind = "kill-site"
site = "a"
at_clock = 10
[[faults]]
kind = "kill-site"
site = "b"
at_clock = 10
)"),
            1);
  json s = Summary();
  EXPECT_EQ(s["exit"], "failed");
  EXPECT_THAT(s["failure"].get<std::string>(), HasSubstr("every worker was killed by the fault plan"));
  ExpectAllChildrenGone();
}

TEST_F(FaultLaunchTest, WipeDiskDeletesTheSitesStoresBeforeTheRestart) {
  // The fake shards keep no store: make the ones a real shard would have
  // (and one of another site that shares the data directory).
  for (const char* name : {"a-shard-0", "a-shard-1", "b-shard-0"}) {
    fs::create_directories(out_ + "/data/" + name);
    std::ofstream(out_ + "/data/" + name + "/" + storage::format::kMarkerFile) << storage::format::kMarkerText;
  }
  resume_ = true;
  ASSERT_EQ(Launch(R"(
[[faults]]
kind = "wipe-disk"
site = "a"
at_clock = 15
restart_after_s = 0.1
)",
                   OneSiteTopology()),
            0);
  EXPECT_FALSE(fs::exists(out_ + "/data/a-shard-0"));
  EXPECT_FALSE(fs::exists(out_ + "/data/a-shard-1"));
  EXPECT_TRUE(fs::exists(out_ + "/data/b-shard-0/" + storage::format::kMarkerFile));
  json s = Summary();
  EXPECT_EQ(s["faults"][0]["state"], "recovered");
  EXPECT_EQ(s["faults"][0]["wiped_dirs"].size(), 2u);
  std::vector<json> wiped = Events("disk_wiped");
  ASSERT_EQ(wiped.size(), 1u);
  EXPECT_EQ(wiped[0]["dirs"].size(), 2u);
  EXPECT_EQ(Events("process_restarted").size(), 4u);
  ExpectAllChildrenGone();
}

TEST_F(FaultLaunchTest, WipeRefusingAForeignDirectoryStopsTheRunAndKeepsIt) {
  fs::create_directories(out_ + "/data/a-shard-1");
  std::ofstream(out_ + "/data/a-shard-1/precious.txt") << "keep me";
  resume_ = true;
  EXPECT_EQ(Launch(R"(
[[faults]]
kind = "wipe-disk"
site = "a"
at_clock = 15
restart_after_s = 0.1
)",
                   OneSiteTopology()),
            1);
  EXPECT_TRUE(fs::exists(out_ + "/data/a-shard-1/precious.txt"));
  json s = Summary();
  EXPECT_EQ(s["exit"], "failed");
  EXPECT_THAT(s["failure"].get<std::string>(), HasSubstr("is not a geops shard store"));
  ExpectAllChildrenGone();
}

TEST_F(FaultLaunchTest, AnUnplannedDeathStillFailsTheRunWithoutARestartBudget) {
  ::setenv("FAKE_GEOPS_FAULTS", "b-worker-0:exit3@60", 1);
  max_restarts_ = 0;
  EXPECT_EQ(Launch(R"(
[[faults]]
kind = "kill-shard"
site = "a"
shard = 1
at_clock = 10
restart_after_s = 0.1
)"),
            1);
  ::unsetenv("FAKE_GEOPS_FAULTS");
  json s = Summary();
  EXPECT_EQ(s["exit"], "failed");
  EXPECT_THAT(s["failure"].get<std::string>(), HasSubstr("b-worker-0 failed (exit code 3)"));
  EXPECT_EQ(s["faults"][0]["fired"], true);
  ExpectAllChildrenGone();
}

TEST_F(FaultLaunchTest, WithoutFaultsTheSummaryListsNone) {
  ASSERT_EQ(Launch(""), 0);
  json s = Summary();
  EXPECT_EQ(s["faults"], json::array());
  EXPECT_EQ(s["recoveries"], json::array());
  EXPECT_TRUE(Events("fault_injected").empty());
  for (const json& w : s["per_worker"]) EXPECT_EQ(w["start_clocks"], json::array({0}));
}

TEST_F(FaultLaunchTest, AFaultWhoseClockIsNeverReachedDoesNotFire) {
  ::setenv("FAKE_GEOPS_FAULTS", "a-worker-1:exit3@3", 1);  // a's slowest worker dies before clock 50
  max_restarts_ = 0;
  EXPECT_EQ(Launch(R"(
[[faults]]
kind = "kill-site"
site = "a"
at_clock = 50
restart_after_s = 0.1
)"),
            1);
  ::unsetenv("FAKE_GEOPS_FAULTS");
  json s = Summary();
  EXPECT_EQ(s["faults"][0]["fired"], false);
  EXPECT_THAT(s["faults"][0]["note"].get<std::string>(), HasSubstr("never fired"));
  EXPECT_TRUE(Events("fault_injected").empty());
}

}  // namespace
}  // namespace geops::cli
