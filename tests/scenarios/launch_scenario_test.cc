// Multi-process scenarios: the real `geops launch` starts real shard and
// worker processes on loopback, and the test asserts on summary.json.
#include <gtest/gtest.h>

#include "tests/scenarios/launch_fixture.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "worker/blas_core.h"

namespace geops {
namespace {

namespace fs = std::filesystem;

using scenarios::LaunchFixture;
using scenarios::RunCommand;
using scenarios::RunResult;

class LaunchScenarioTest : public LaunchFixture {};

bool DatasetInstalled() {
  return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

TEST_F(LaunchScenarioTest, CounterWorkloadEndsExactUnderStaleness) {
  const std::string topo = WriteTopology(R"(
name = "counter-1site"
[model]
workload = "counter"
layers = [784, 64, 10]
chunk_kib = 4
[training]
clocks = 60
staleness = 2
eval_every = 0
[[sites]]
name = "local"
shards = 2
workers = 3
)");
  RunResult r = Launch(topo, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = Summary();
  EXPECT_EQ(s["workload"], "counter");
  EXPECT_EQ(s["workers"], 3);
  EXPECT_EQ(s["clocks"], 60);
  EXPECT_EQ(s["counter_expected"], 180.0);
  EXPECT_EQ(s["counter_max_abs_error"], 0.0);
  EXPECT_LE(s["max_staleness_observed"].get<int>(), 2);
  EXPECT_GT(s["lan_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(s["wan_bytes"], 0);
  EXPECT_TRUE(s["test_accuracy"].is_null());

  // Every worker says which BLAS kernels it ran: the ones this CPU allows,
  // even where the library alone falls back to generic ones (worker/blas_core.h).
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  std::string expected = worker::LoadedBlasCore();
  if (forced == nullptr || forced[0] == '\0') {
    const std::string better = worker::BetterBlasCore(expected, worker::ThisCpuFeatures());
    if (!better.empty()) expected = better;
  }
  std::ifstream events(dir_ / "out" / "events.jsonl");
  int started = 0, final_reads = 0;
  for (std::string line; std::getline(events, line);) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!e.is_object()) continue;
    // The evaluator says when it waits for the final model, so the progress
    // line does not sit at the last clock without a word.
    if (e.value("event", "") == "final_read") ++final_reads;
    if (e.value("event", "") != "worker_started") continue;
    ++started;
    EXPECT_EQ(e.value("blas", ""), expected) << line;
  }
  EXPECT_EQ(started, 3);
  EXPECT_EQ(final_reads, 1);
}

TEST_F(LaunchScenarioTest, OneSiteTrainsFashionMnistPast85Percent) {
  if (!DatasetInstalled()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string topo = WriteTopology(R"(
name = "mlp-1site"
[model]
workload = "mlp"
layers = [784, 256, 10]
[training]
clocks = 1500
batch_size = 32
learning_rate = 0.05
final_learning_rate = 0.005
staleness = 2
eval_every = 500
target_accuracy = 0.85
[[sites]]
name = "local"
shards = 2
workers = 4
)");
  RunResult r = Launch(topo, 800);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = Summary();
  EXPECT_EQ(s["workload"], "mlp");
  EXPECT_EQ(s["sites"], 1);
  EXPECT_EQ(s["workers"], 4);
  ASSERT_TRUE(s["test_accuracy"].is_number()) << s.dump();
  EXPECT_GE(s["test_accuracy"].get<double>(), 0.85) << s.dump();
  EXPECT_TRUE(s["final_loss"].is_number());
  EXPECT_LE(s["max_staleness_observed"].get<int>(), 2);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "metrics" / "local-worker-0.jsonl"));
}

TEST_F(LaunchScenarioTest, InvalidTopologyExitsTwoWithOneLineNamingTheLine) {
  const std::string topo = WriteTopology("[training]\nclocks = 0\n[[sites]]\nname = \"a\"\n");
  RunResult r = Launch(topo, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("topology.toml:2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("clocks"), std::string::npos) << r.output;
}

TEST_F(LaunchScenarioTest, MissingTopologyAndBadFlagsExitTwo) {
  RunResult missing = Launch((dir_ / "nope.toml").string(), 60);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  RunResult bad = RunCommand(std::string(GEOPS_BINARY) + " launch --no-such-flag");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  RunResult none = RunCommand(std::string(GEOPS_BINARY));
  EXPECT_EQ(none.exit_code, 2) << none.output;
}

}  // namespace
}  // namespace geops
