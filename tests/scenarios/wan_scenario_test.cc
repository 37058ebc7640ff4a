// Multi-process WAN scenarios: `geops launch` starts three sites on
// loopback (every shard a process with its own shaped mirror links, every
// worker a process), and the test asserts on summary.json.
#include <gtest/gtest.h>

#include "tests/scenarios/launch_fixture.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace geops {
namespace {

namespace fs = std::filesystem;

using scenarios::LaunchFixture;
using scenarios::RunCommand;
using scenarios::RunResult;

class WanScenarioTest : public LaunchFixture {};

const char* kThreeStaticSites = R"(
[[links]]
src = "us"
dst = "eu"
bandwidth_mbps = 60
delay_ms = 40
[[links]]
src = "us"
dst = "ap"
bandwidth_mbps = 50
delay_ms = 80
[[links]]
src = "eu"
dst = "ap"
bandwidth_mbps = 40
delay_ms = 100
[[sites]]
name = "us"
shards = 2
workers = 2
[[sites]]
name = "eu"
shards = 2
workers = 1
[[sites]]
name = "ap"
shards = 2
workers = 2
)";

// The counter workload in asp, `clocks` clocks (60 unless told); the [wan]
// table is left open for `more_wan`.
std::string CounterAsp(const std::string& name, const std::string& more_wan, int clocks = 60) {
  return "name = \"" + name + "\"\n" + R"(
[model]
workload = "counter"
layers = [784, 64, 10]
chunk_kib = 4
[training]
clocks = )" + std::to_string(clocks) + R"(
staleness = 1
eval_every = 0
[wan]
mode = "asp"
staleness_ds = 2
codec = "int8"
threshold = 0.5
threshold_floor = 0.1
)" + more_wan;
}

TEST_F(WanScenarioTest, CounterEndsExactAtEverySite) {
  const std::string topo = WriteTopology(CounterAsp("counter-3site", kThreeStaticSites));
  RunResult r = Launch(topo, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = Summary();
  EXPECT_EQ(s["sites"], 3);
  EXPECT_EQ(s["workers"], 5);
  EXPECT_EQ(s["counter_expected"], 300.0);  // 5 workers x 60 clocks, at every site
  ASSERT_EQ(s["counter_max_abs_error_by_site"].size(), 3u) << s.dump();
  for (const auto& [site, err] : s["counter_max_abs_error_by_site"].items()) EXPECT_EQ(err, 0.0) << site;
  EXPECT_EQ(s["counter_max_abs_error"], 0.0);
  EXPECT_EQ(s["wan_mode"], "asp");
  EXPECT_GT(s["wan_bytes"].get<int64_t>(), 0);
  ASSERT_EQ(s["wan_bytes_by_link"].size(), 6u) << s.dump();
  for (const auto& [link, bytes] : s["wan_bytes_by_link"].items()) EXPECT_GT(bytes.get<int64_t>(), 0) << link;
  EXPECT_TRUE(s["barrier_wait_seconds"].is_number());
  // No site worked further ahead of its slowest mirror than the bound in
  // force: DS plus the clocks a report spent in delivery, at most 24 more.
  EXPECT_LE(s["max_site_drift_clocks"].get<int>(), s["max_drift_bound_clocks"].get<int>());
  EXPECT_LE(s["max_drift_bound_clocks"].get<int>(), 2 + 24);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "wan" / "peers.json"));
}

TEST_F(WanScenarioTest, BatchesGoRoundALinkThatIsOutAndTheCounterEndsExact) {
  // us -> eu is out from 0.5 s to 8 s of each shard's trace time; every
  // other link carries throughout. 400 clocks last well past 0.5 s however
  // fast the machine (60 took about that long on a fast one, and the run
  // could end before the outage began).
  {
    std::ofstream csv(dir_ / "links.csv");
    csv << "time_s,src,dst,bandwidth_mbps,delay_ms\n";
    const char* pairs[][2] = {{"us", "eu"}, {"eu", "us"}, {"us", "ap"}, {"ap", "us"}, {"eu", "ap"}, {"ap", "eu"}};
    for (const auto& pr : pairs) {
      csv << "0," << pr[0] << "," << pr[1] << ",50,30\n";
      if (std::string(pr[0]) == "us" && std::string(pr[1]) == "eu") csv << "0.5,us,eu,0,30\n8,us,eu,50,30\n";
    }
  }
  const std::string topo = WriteTopology(CounterAsp("counter-relay", R"(peer_lease_ms = 400
relay_after_ms = 200
links = "csv"
trace_file = "links.csv"
[[sites]]
name = "us"
workers = 2
[[sites]]
name = "eu"
workers = 1
[[sites]]
name = "ap"
workers = 2
)",
                                                   400));
  RunResult r = Launch(topo, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = Summary();
  EXPECT_EQ(s["counter_expected"], 2000.0);  // 5 workers x 400 clocks
  ASSERT_EQ(s["counter_max_abs_error_by_site"].size(), 3u) << s.dump();
  for (const auto& [site, err] : s["counter_max_abs_error_by_site"].items()) EXPECT_EQ(err, 0.0) << site;
  // us's batches for eu went through ap, which carried them on.
  EXPECT_GT(s["wan_links"]["us->eu"]["relayed_batches"].get<int64_t>(), 0) << s["wan_links"].dump();
  EXPECT_GT(s["wan_links"]["ap->eu"]["forwarded_batches"].get<int64_t>(), 0) << s["wan_links"].dump();
  EXPECT_EQ(s["wan_links"]["eu->us"]["relayed_batches"].get<int64_t>(), 0) << s["wan_links"].dump();
}

TEST_F(WanScenarioTest, TraceShowPrintsTheEffectiveLinks) {
  const std::string topo = WriteTopology(std::string("[wan]\nmode = \"asp\"\n") + kThreeStaticSites);
  RunResult r = RunCommand(std::string(GEOPS_BINARY) + " trace show " + topo);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("eu    ap"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("40.0"), std::string::npos) << r.output;
  const std::string bad = WriteTopology("[[sites]]\nname = \"a\"\n[[sites]]\nname = \"b\"\n");
  RunResult missing = RunCommand(std::string(GEOPS_BINARY) + " trace show " + bad);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("no [[links]] entry between sites a and b"), std::string::npos) << missing.output;
}

bool DatasetInstalled() {
  return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

TEST_F(WanScenarioTest, ThreeAwsSitesTrainFashionMnistPast85PercentWithAsp) {
  if (!DatasetInstalled()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string topo = WriteTopology(std::string(R"(
name = "mlp-3site-asp"
[model]
workload = "mlp"
layers = [784, 512, 256, 10]
[training]
clocks = 1000
batch_size = 32
learning_rate = 0.05
final_learning_rate = 0.005
staleness = 2
eval_every = 250
target_accuracy = 0.85
[wan]
mode = "asp"
staleness_ds = 8
threshold = 0.02
threshold_floor = 0.02
codec = "int8"
links = "skyplane"
trace_dir = ")") + GEOPS_SOURCE_DIR + R"(/experiments/traces/skyplane-aws3"
skyplane_bandwidth = "per-connection"
[[sites]]
name = "us-east-1"
region = "aws:us-east-1"
workers = 2
[[sites]]
name = "eu-west-1"
region = "aws:eu-west-1"
workers = 2
[[sites]]
name = "ap-northeast-1"
region = "aws:ap-northeast-1"
workers = 2
)");
  RunResult r = Launch(topo, 600);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = Summary();
  EXPECT_EQ(s["sites"], 3);
  ASSERT_EQ(s["test_accuracy_by_site"].size(), 3u) << s.dump();
  for (const auto& [site, acc] : s["test_accuracy_by_site"].items()) EXPECT_GE(acc.get<double>(), 0.85) << site;
  EXPECT_GE(s["test_accuracy"].get<double>(), 0.85);
  EXPECT_GT(s["wan_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(s["wan_bytes_by_link"].size(), 6u);
  // Every site ends with the same model (the drain is lossless; only the
  // order of float sums differs between sites).
  const double first = s["test_accuracy_by_site"].begin()->get<double>();
  for (const auto& [site, acc] : s["test_accuracy_by_site"].items()) EXPECT_NEAR(acc.get<double>(), first, 0.002) << site;
}

}  // namespace
}  // namespace geops
