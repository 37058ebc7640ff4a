// End-to-end tests of `geops launch` against fake_geops, a stand-in child
// program that speaks the launcher protocol and fails on request.
#include "cli/launch_command.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/scratch_files.h"

namespace geops::cli {
namespace {

using test_files::ReadFile;

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTwoSites[] = R"(
name = "fake-two-sites"
[model]
workload = "WORKLOAD"
[training]
clocks = CLOCKS
batch_size = 8
eval_every = 5
target_accuracy = 0.85
[[sites]]
name = "a"
shards = 2
workers = 2
[[sites]]
name = "b"
base_port = 45000
shards = 1
workers = 1
)";

class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_files::FreshTestDir("launch_test");
    out_ = dir_ + "/out";
    ::unsetenv("FAKE_GEOPS_FAULTS");
    ::setenv("FAKE_GEOPS_CLOCK_MS", "5", 1);
  }
  void TearDown() override {
    ::unsetenv("FAKE_GEOPS_FAULTS");
    ::unsetenv("FAKE_GEOPS_CLOCK_MS");
    std::filesystem::remove_all(dir_);
  }

  std::string WriteTopology(int clocks, const std::string& workload = "mlp") {
    std::string text = kTwoSites;
    text.replace(text.find("CLOCKS"), 6, std::to_string(clocks));
    text.replace(text.find("WORKLOAD"), 8, workload);
    std::string path = dir_ + "/topology.toml";
    std::ofstream(path) << text;
    return path;
  }

  LaunchArgs Args(const std::string& topology) {
    LaunchArgs a;
    a.topology_path = topology;
    a.out_dir = out_;
    a.geops_binary = FAKE_GEOPS;
    a.timeout_seconds = 20;
    a.force_plain = true;
    a.listen_timeout_seconds = 5;
    a.stop_timeout_seconds = 2;
    return a;
  }

  int Launch(const LaunchArgs& a) {
    auto start = std::chrono::steady_clock::now();
    int rc = RunLaunch(a);
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return rc;
  }

  json Summary() { return json::parse(ReadFile(out_ + "/summary.json")); }

  // Launches with a-worker-1 failing as `fault` says (FAKE_GEOPS_FAULTS)
  // and `max_restarts`; returns the exit code, *err what it printed there.
  int LaunchWithAFailingWorker(const std::string& fault, int clocks, int max_restarts, std::string* err) {
    ::setenv("FAKE_GEOPS_CLOCK_MS", "10", 1);
    ::setenv("FAKE_GEOPS_FAULTS", ("a-worker-1:" + fault).c_str(), 1);
    ::testing::internal::CaptureStderr();
    LaunchArgs a = Args(WriteTopology(clocks));
    a.max_restarts = max_restarts;
    const int rc = Launch(a);
    *err = ::testing::internal::GetCapturedStderr();
    return rc;
  }

  std::vector<json> Events() {
    std::vector<json> out;
    std::ifstream in(out_ + "/events.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }

  int CountEvents(const std::string& name) {
    int n = 0;
    for (const json& e : Events()) n += e["event"] == name ? 1 : 0;
    return n;
  }

  void ExpectAllChildrenGone() {
    int pids = 0;
    for (const json& e : Events()) {
      if (e["event"] != "fake_pid") continue;
      ++pids;
      int pid = e["pid"].get<int>();
      EXPECT_EQ(::kill(pid, 0), -1) << "child " << pid << " still exists";
    }
    EXPECT_GT(pids, 0);
  }

  std::string dir_, out_;
  double seconds_ = 0;
};

TEST_F(LaunchTest, NormalRunWritesSummaryLogsAndEvents) {
  int rc = Launch(Args(WriteTopology(20)));
  ASSERT_EQ(rc, 0);
  EXPECT_LT(seconds_, 10);
  json s = Summary();
  EXPECT_EQ(s["exit"], "ok");
  EXPECT_TRUE(s["failure"].is_null());
  EXPECT_EQ(s["topology"], "fake-two-sites");
  EXPECT_EQ(s["workload"], "mlp");
  EXPECT_EQ(s["sites"], 2);
  EXPECT_EQ(s["workers"], 3);
  EXPECT_EQ(s["clocks"], 20);
  // Workers send 1000 * (10 * site + worker + 1) bytes and receive 500.
  EXPECT_EQ(s["lan_bytes"], 1500 + 2500 + 11500);
  EXPECT_EQ(s["wan_bytes"], 0);
  EXPECT_EQ(s["max_staleness_observed"], 2);  // 2 * site + worker
  EXPECT_DOUBLE_EQ(s["test_accuracy"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(s["test_loss"].get<double>(), 0.3);
  EXPECT_NEAR(s["final_loss"].get<double>(), 1.0 / 21, 1e-5);
  EXPECT_TRUE(s["counter_expected"].is_null());
  EXPECT_DOUBLE_EQ(s["target_accuracy"].get<double>(), 0.85);
  // The evaluator reaches 0.875 at clock 15 of 20.
  ASSERT_TRUE(s["time_to_target_seconds"].is_number());
  double wall = s["wall_seconds"].get<double>();
  EXPECT_GT(s["time_to_target_seconds"].get<double>(), 0);
  EXPECT_LE(s["time_to_target_seconds"].get<double>(), wall);
  EXPECT_NEAR(s["examples_per_second"].get<double>(), 480 / wall, 1e-6);
  ASSERT_EQ(s["per_worker"].size(), 3u);
  EXPECT_EQ(s["per_worker"][0]["shards"], "127.0.0.1:41000,127.0.0.1:41001");
  EXPECT_EQ(s["per_worker"][2]["site"], "b");
  EXPECT_EQ(s["per_worker"][2]["shards"], "127.0.0.1:45000");
  EXPECT_EQ(s["shard_stats"].size(), 3u);

  for (const char* name : {"a-shard-0", "a-shard-1", "b-shard-0"}) {
    EXPECT_THAT(ReadFile(out_ + "/logs/" + name + ".log"), HasSubstr("fake shard")) << name;
  }
  for (const char* name : {"a-worker-0", "a-worker-1", "b-worker-0"}) {
    std::string log = ReadFile(out_ + "/logs/" + name + ".log");
    EXPECT_THAT(log, HasSubstr("fake worker")) << name;    // stderr
    EXPECT_THAT(log, HasSubstr("clock 10 done")) << name;  // stdout
    EXPECT_THAT(log, HasSubstr("@geops {\"event\":\"final\"")) << name;
  }
  for (const json& e : Events()) EXPECT_TRUE(e["launcher_t"].is_number()) << e.dump();
  EXPECT_EQ(CountEvents("listening"), 3);
  EXPECT_EQ(CountEvents("progress"), 60);
  EXPECT_EQ(CountEvents("eval"), 4);
  EXPECT_EQ(CountEvents("final"), 3);
  EXPECT_EQ(CountEvents("shard_stats"), 3);
  EXPECT_EQ(CountEvents("fake_pid"), 6);  // unknown events are kept, not fatal
  ExpectAllChildrenGone();
}

TEST_F(LaunchTest, CounterWorkloadReportsCounterFieldsAndNoAccuracy) {
  ASSERT_EQ(Launch(Args(WriteTopology(10, "counter"))), 0);
  json s = Summary();
  EXPECT_TRUE(s["final_loss"].is_null());
  EXPECT_TRUE(s["test_accuracy"].is_null());
  EXPECT_TRUE(s["time_to_target_seconds"].is_null());
  EXPECT_DOUBLE_EQ(s["counter_expected"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(s["counter_max_abs_error"].get<double>(), 0);
}

TEST_F(LaunchTest, FailingWorkerStopsEveryoneAndIsNamedWithoutARestartBudget) {
  std::string err;
  const int rc = LaunchWithAFailingWorker("exit3@5", 300, 0, &err);  // healthy workers would need 3 s
  EXPECT_EQ(rc, 1);
  EXPECT_LT(seconds_, 2.5);
  EXPECT_THAT(err, HasSubstr("a-worker-1 failed (exit code 3)"));
  EXPECT_THAT(err, HasSubstr("boom at clock 5"));  // the tail of its log
  json s = Summary();
  EXPECT_EQ(s["exit"], "failed");
  EXPECT_THAT(s["failure"].get<std::string>(), HasSubstr("a-worker-1"));
  EXPECT_EQ(CountEvents("final"), 0);
  ExpectAllChildrenGone();
}

// A failure stays where it happened: the worker that died is restarted (with
// --takeover: the launcher saw it exit) while the others train on, and the
// run ends ok.
TEST_F(LaunchTest, AWorkerKilledOnItsOwnIsRestartedAndTheRunEndsOk) {
  ::setenv("FAKE_GEOPS_CLOCK_MS", "10", 1);
  ::setenv("FAKE_GEOPS_FAULTS", "a-worker-1:kill9once@5", 1);
  ASSERT_EQ(Launch(Args(WriteTopology(150))), 0);
  json s = Summary();
  EXPECT_EQ(s["exit"], "ok");
  EXPECT_EQ(CountEvents("final"), 3);
  EXPECT_EQ(CountEvents("process_died"), 1);
  EXPECT_EQ(CountEvents("process_restarted"), 1);
  const json& sup = s["supervision"];
  EXPECT_EQ(sup["max_restarts"], 3);
  EXPECT_EQ(sup["restarts_total"], 1);
  ASSERT_EQ(sup["restarts"].size(), 1u);
  const json& r = sup["restarts"][0];
  EXPECT_EQ(r["process"], "a-worker-1");
  EXPECT_THAT(r["reason"].get<std::string>(), HasSubstr("signal 9"));
  EXPECT_EQ(r["clock_reported"], 4);
  EXPECT_EQ(r["resumed_clock"], 0);  // the fake always starts at 0
  EXPECT_GE(r["down_seconds"].get<double>(), 1.0);  // the first restart's delay
  const std::string log = ReadFile(out_ + "/logs/a-worker-1.log");
  EXPECT_THAT(log, HasSubstr("restarted after it died (restart 1)"));
  EXPECT_THAT(log, HasSubstr("with shards 127.0.0.1:41000,127.0.0.1:41001 takeover"));
  EXPECT_THAT(ReadFile(out_ + "/logs/a-worker-0.log"), Not(HasSubstr("takeover")));
  ExpectAllChildrenGone();
}

TEST_F(LaunchTest, AWorkerThatKeepsFailingSpendsItsBudgetThenStopsEveryone) {
  std::string err;
  const int rc = LaunchWithAFailingWorker("exit3@3", 3000, 2, &err);  // healthy workers would need 30 s
  EXPECT_EQ(rc, 1);
  EXPECT_LT(seconds_, 10);  // restarts after 1 s and 2 s, then the stop
  json s = Summary();
  EXPECT_EQ(s["exit"], "failed");
  EXPECT_THAT(s["failure"].get<std::string>(),
              HasSubstr("a-worker-1 failed (exit code 3); restart budget spent (2 restarts of a-worker-1)"));
  EXPECT_EQ(s["supervision"]["restarts_total"], 2);
  EXPECT_THAT(err, HasSubstr("restarting in 1 s (restart 1 of 2)"));
  EXPECT_THAT(err, HasSubstr("restarting in 2 s (restart 2 of 2)"));
  ExpectAllChildrenGone();
}

TEST_F(LaunchTest, AShardWithAStoreIsRestartedOnItsPortWhileTheWorkersWait) {
  ::setenv("FAKE_GEOPS_CLOCK_MS", "10", 1);
  ::setenv("FAKE_GEOPS_FAULTS", "a-shard-1:crashonce", 1);
  const std::string topology = WriteTopology(150);
  std::ofstream(topology, std::ios::app) << "[storage]\ndata_dir = \"data\"\n";
  ASSERT_EQ(Launch(Args(topology)), 0);
  json s = Summary();
  EXPECT_EQ(s["exit"], "ok");
  EXPECT_EQ(s["supervision"]["restarts_total"], 1);
  EXPECT_EQ(s["supervision"]["restarts"][0]["process"], "a-shard-1");
  const std::string log = ReadFile(out_ + "/logs/a-shard-1.log");
  EXPECT_THAT(log, HasSubstr("restarted after it died (restart 1)"));
  EXPECT_EQ(CountEvents("listening"), 4);
  EXPECT_EQ(CountEvents("final"), 3);
  ExpectAllChildrenGone();
}

// The launcher owns its results folder: a second launch into a folder that
// holds a run is refused (it would read that run's peers file and append to
// its metrics) unless told to resume or replace it.
TEST_F(LaunchTest, AFolderHoldingAnotherRunIsRefusedUnlessResumedOrReplaced) {
  const std::string topology = WriteTopology(10);
  ASSERT_EQ(Launch(Args(topology)), 0);
  const json first = json::parse(ReadFile(out_ + "/run.json"));
  EXPECT_EQ(first["state"], "ok");
  const std::string summary = ReadFile(out_ + "/summary.json");

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(Launch(Args(topology)), 2);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("holds run " + first["run_id"].get<std::string>()));
  EXPECT_THAT(err, HasSubstr("--resume"));
  EXPECT_THAT(err, HasSubstr("--replace"));
  EXPECT_EQ(ReadFile(out_ + "/summary.json"), summary) << "nothing was started";

  // --resume: the folder goes on (logs appended), a stale peers file of
  // another run is gone before any shard could read it.
  std::filesystem::create_directories(out_ + "/wan");
  std::ofstream(out_ + "/wan/peers.json") << R"({"run_id": "old", "mirrors": {}})";
  LaunchArgs resume = Args(topology);
  resume.resume = true;
  ASSERT_EQ(Launch(resume), 0);
  const json second = json::parse(ReadFile(out_ + "/run.json"));
  EXPECT_NE(second["run_id"], first["run_id"]);
  EXPECT_EQ(second["resumes"], first["run_id"]);
  EXPECT_EQ(json::parse(ReadFile(out_ + "/wan/peers.json"))["run_id"], second["run_id"]);
  const std::string log = ReadFile(out_ + "/logs/a-worker-0.log");
  EXPECT_NE(log.find("fake worker"), log.rfind("fake worker")) << "both runs' lines are in the log";

  // --replace: what the old runs wrote is gone.
  std::ofstream(out_ + "/logs/leftover.log") << "x";
  LaunchArgs replace = Args(topology);
  replace.replace = true;
  ASSERT_EQ(Launch(replace), 0);
  EXPECT_FALSE(std::filesystem::exists(out_ + "/logs/leftover.log"));
  const std::string fresh = ReadFile(out_ + "/logs/a-worker-0.log");
  EXPECT_EQ(fresh.find("fake worker"), fresh.rfind("fake worker"));

  LaunchArgs both = Args(topology);
  both.resume = both.replace = true;
  EXPECT_EQ(Launch(both), 2);
}

TEST_F(LaunchTest, ShardThatNeverListensFailsAtTheDeadline) {
  ::setenv("FAKE_GEOPS_FAULTS", "b-shard-0:nolisten", 1);
  LaunchArgs a = Args(WriteTopology(20));
  a.listen_timeout_seconds = 0.5;
  EXPECT_EQ(Launch(a), 1);
  EXPECT_GE(seconds_, 0.5);
  EXPECT_LT(seconds_, 3);
  json s = Summary();
  EXPECT_EQ(s["exit"], "failed");
  std::string failure = s["failure"].get<std::string>();
  EXPECT_THAT(failure, HasSubstr("b-shard-0"));
  EXPECT_THAT(failure, Not(HasSubstr("a-shard-0")));
  EXPECT_FALSE(std::filesystem::exists(out_ + "/logs/a-worker-0.log"));  // no worker started
  ExpectAllChildrenGone();
}

TEST_F(LaunchTest, ShardStoppingOnItsOwnFailsTheRun) {
  ::setenv("FAKE_GEOPS_CLOCK_MS", "10", 1);
  ::setenv("FAKE_GEOPS_FAULTS", "a-shard-1:crash", 1);
  EXPECT_EQ(Launch(Args(WriteTopology(300))), 1);
  EXPECT_LT(seconds_, 2.5);
  json s = Summary();
  EXPECT_EQ(s["exit"], "failed");
  EXPECT_THAT(s["failure"].get<std::string>(), HasSubstr("a-shard-1 stopped unexpectedly (exit code 1)"));
  ExpectAllChildrenGone();
}

TEST_F(LaunchTest, LaunchTimeoutKillsHungChildren) {
  // a-worker-0 hangs ignoring SIGTERM; b-shard-0 ignores SIGTERM too.
  ::setenv("FAKE_GEOPS_FAULTS", "a-worker-0:hang,b-shard-0:ignoreterm", 1);
  LaunchArgs a = Args(WriteTopology(20));
  a.timeout_seconds = 1.0;
  a.stop_timeout_seconds = 0.3;
  EXPECT_EQ(Launch(a), 1);
  EXPECT_GE(seconds_, 1.0);
  EXPECT_LT(seconds_, 4);
  json s = Summary();
  EXPECT_EQ(s["exit"], "timeout");
  EXPECT_THAT(s["failure"].get<std::string>(), HasSubstr("timed out"));
  EXPECT_EQ(CountEvents("final"), 2);  // the two healthy workers finished
  EXPECT_EQ(CountEvents("fake_pid"), 6);
  ExpectAllChildrenGone();
}

TEST_F(LaunchTest, InterruptStopsChildrenAndWritesAPartialSummary) {
  ::setenv("FAKE_GEOPS_CLOCK_MS", "10", 1);
  ::setenv("FAKE_GEOPS_FAULTS", "b-worker-0:interrupt@3", 1);  // SIGINT to the launcher
  EXPECT_EQ(Launch(Args(WriteTopology(300))), 128 + SIGINT);
  EXPECT_LT(seconds_, 2.5);
  json s = Summary();
  EXPECT_EQ(s["exit"], "interrupted");
  EXPECT_TRUE(s["interrupted"].get<bool>());
  EXPECT_TRUE(s["wall_seconds"].is_number());
  ExpectAllChildrenGone();
}

TEST_F(LaunchTest, BadTopologyPathReturns2) {
  LaunchArgs a = Args(dir_ + "/missing.toml");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(Launch(a), 2);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("missing.toml"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  EXPECT_FALSE(std::filesystem::exists(out_));
}

TEST_F(LaunchTest, InvalidTopologyReturns2) {
  std::string path = dir_ + "/bad.toml";
  std::ofstream(path) << "[training]\nclocks = 0\n[[sites]]\nname = \"a\"\n";
  EXPECT_EQ(Launch(Args(path)), 2);
}

TEST_F(LaunchTest, UncreatableOutDirReturns2) {
  std::ofstream(dir_ + "/file") << "x";
  LaunchArgs a = Args(WriteTopology(5));
  a.out_dir = dir_ + "/file/out";
  EXPECT_EQ(Launch(a), 2);
}

TEST_F(LaunchTest, MissingBinaryReturns2) {
  LaunchArgs a = Args(WriteTopology(5));
  a.geops_binary = dir_ + "/no-geops";
  EXPECT_EQ(Launch(a), 2);
}

}  // namespace
}  // namespace geops::cli
