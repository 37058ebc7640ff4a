// `geops chaos` with the real binary: three sites started by hand (fixed
// ports, sync stores), workers, single shards and whole sites SIGKILLed at
// random moments, one of them during the drain, and restarted by the
// harness only. The run must end with every worker finished, every site's
// counter exact (checked by `geops worker --check`), every shard stopped
// cleanly; a short seeded version of experiments/run_chaos.sh. Loopback
// only; bounded by the harness's own --timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/scenarios/launch_fixture.h"

namespace geops {
namespace {

using nlohmann::json;
using scenarios::LaunchFixture;
using scenarios::RunCommand;
using scenarios::RunResult;

// Ports from `base` (shards) and base + 1000 (mirrors), 100 per site: the
// tests here use 27100-27399 and 27500-27799 (their CTest entries may run at
// the same time); no other test uses them.
std::string ChaosTopology(int clocks, bool with_ports = true, const std::string& storage = "sync",
                          int base = 27100) {
  std::string t = R"(name = "chaos-ci"
[model]
workload = "counter"
layers = [400, 100]
chunk_kib = 16
[training]
clocks = )" + std::to_string(clocks) + R"(
staleness = 1
eval_every = 0
worker_lease_ms = 2000
rpc_timeout_ms = 10000
[storage]
data_dir = "data"
durability = ")" + storage + R"("
[wan]
mode = "asp"
staleness_ds = 4
codec = "int8"
threshold = 0.5
threshold_floor = 0.1
peer_lease_ms = 2000
[[links]]
src = "a"
dst = "b"
bandwidth_mbps = 200
delay_ms = 10
[[links]]
src = "a"
dst = "c"
bandwidth_mbps = 200
delay_ms = 20
[[links]]
src = "b"
dst = "c"
bandwidth_mbps = 200
delay_ms = 30
)";
  const char* names[] = {"a", "b", "c"};
  for (int s = 0; s < 3; ++s) {
    t += std::string("[[sites]]\nname = \"") + names[s] + "\"\n";
    if (with_ports) t += "base_port = " + std::to_string(base + 100 * s) + "\n";
    t += "shards = 2\nworkers = " + std::to_string(s == 1 ? 1 : 2) + "\n";
  }
  return t;
}

class ChaosScenarioTest : public LaunchFixture {
 protected:
  RunResult Chaos(const std::string& topology, const std::string& flags) {
    return RunCommand(std::string(GEOPS_BINARY) + " chaos " + topology + " --out " + (dir_ / "out").string() + " " +
                      flags);
  }
};

TEST_F(ChaosScenarioTest, EverySiteEndsExactThroughRandomKillsAndRestarts) {
  const std::string topo = WriteTopology(ChaosTopology(600));
  RunResult r = Chaos(topo, "--seed 3 --kills 4 --drain-kills 1 --restart-min-ms 200 --restart-max-ms 1500 "
                            "--stall-bound 60 --timeout 400");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASSED"), std::string::npos) << r.output;
  std::ifstream in(dir_ / "out" / "chaos.json");
  const json report = json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object());
  EXPECT_TRUE(report["passed"].get<bool>());
  ASSERT_EQ(report["kills"].size(), 4u);
  int drain = 0;
  for (const json& k : report["kills"]) {
    drain += k["during_drain"].get<bool>() ? 1 : 0;
    EXPECT_FALSE(k["restart_t"].is_null()) << k.dump();
    EXPECT_GE(k["restart_t"].get<double>(), k["kill_t"].get<double>() + 0.2) << k.dump();
  }
  EXPECT_GE(drain, 1);
  EXPECT_FALSE(report["restarts"].empty());
  // Every site's replica was checked exact by `geops worker --check`.
  int checks = 0;
  std::ifstream events(dir_ / "out" / "events.jsonl");
  for (std::string line; std::getline(events, line);) {
    const json e = json::parse(line, nullptr, false);
    if (e.is_object() && e.value("event", "") == "replica_check") {
      EXPECT_TRUE(e["ok"].get<bool>()) << line;
      EXPECT_EQ(e["counter_min"], 5.0 * 600) << line;
      EXPECT_EQ(e["counter_max"], 5.0 * 600) << line;
      ++checks;
    }
  }
  EXPECT_EQ(checks, 3);
}

TEST_F(ChaosScenarioTest, RefusesATopologyItCannotRestartSafely) {
  RunResult no_ports = Chaos(WriteTopology(ChaosTopology(10, /*with_ports=*/false)), "");
  EXPECT_EQ(no_ports.exit_code, 2) << no_ports.output;
  EXPECT_NE(no_ports.output.find("site a has no base_port"), std::string::npos) << no_ports.output;
  RunResult async = Chaos(WriteTopology(ChaosTopology(10, true, "async")), "");
  EXPECT_EQ(async.exit_code, 2) << async.output;
  EXPECT_NE(async.output.find("durability = \"sync\""), std::string::npos) << async.output;
}

TEST_F(ChaosScenarioTest, ReplicaCheckSaysWhenTheCounterIsNotExactYet) {
  const std::string topo = WriteTopology(ChaosTopology(10, true, "sync", 27500));
  // Site a alone, nobody trained: every value is 0, not 5 x 10.
  std::string pids;
  for (int i = 0; i < 2; ++i) {
    RunResult started = RunCommand(std::string(GEOPS_BINARY) + " site --topology " + topo + " --site a --shard " +
                                   std::to_string(i) + " --data-dir " + (dir_ / ("s" + std::to_string(i))).string() +
                                   " > " + (dir_ / ("s" + std::to_string(i) + ".log")).string() + " 2>&1 & echo $!");
    pids += " " + started.output.substr(0, started.output.find('\n'));
  }
  // Both shards serve before the check (on a loaded machine they took
  // longer than its 3 s). Bounded: 30 s.
  for (int i = 0; i < 2; ++i) {
    const std::filesystem::path log = dir_ / ("s" + std::to_string(i) + ".log");
    const auto serving = [&] {
      std::ifstream in(log);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return text.find("chunks on") != std::string::npos;
    };
    for (int t = 0; t < 300 && !serving(); ++t) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  RunResult check = RunCommand(std::string(GEOPS_BINARY) + " worker --check --topology " + topo +
                               " --site a --wait 3");
  RunCommand("kill -TERM" + pids);
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_NE(check.output.find("counter not exact: values in [0, 0], expected 50 everywhere"), std::string::npos)
      << check.output;
  EXPECT_NE(check.output.find("fc1.weight"), std::string::npos) << check.output;
}

}  // namespace
}  // namespace geops
