// Prometheus metrics of a real run: `geops launch` trains three sites on
// loopback with every shard and worker serving /metrics, writes
// prometheus_targets.json, and a real Prometheus server (Debian's
// `prometheus`, loopback only) scrapes them through file-based service
// discovery. The test asks Prometheus' HTTP query API that the metrics
// arrive from every site and move while the run trains. Everything it
// starts it stops by PID; every wait is bounded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/common/loopback_http.h"
#include "tests/scenarios/launch_fixture.h"

extern char** environ;

namespace geops {
namespace {

namespace fs = std::filesystem;
using Clock_ = std::chrono::steady_clock;

// Starts argv with stdout and stderr into `log`; returns the PID or -1.
pid_t Spawn(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Stops a child this test started: SIGTERM, then SIGKILL after 10 s.
void Stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// A free loopback port (bound, read, released).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::optional<std::string> HttpGet(int port, const std::string& target) {
  return geops::testing::LoopbackHttpGet(port, target);
}

// Prometheus' instant query: {site -> value} of `metric` (summed per site).
std::map<std::string, double> Query(int port, const std::string& metric) {
  std::map<std::string, double> out;
  auto body = HttpGet(port, "/api/v1/query?query=sum%20by%20(site)%20(" + metric + ")");
  if (!body) return out;
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return out;
  for (const auto& r : j["data"]["result"]) {
    out[r["metric"].value("site", "?")] = std::stod(r["value"][1].get<std::string>());
  }
  return out;
}

std::string Which(const std::string& name) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p)) return p.string();
  }
  return "";
}

class MetricsScenarioTest : public scenarios::LaunchFixture {};

TEST_F(MetricsScenarioTest, APrometheusServerScrapesEveryProcessWhileThreeSitesTrain) {
  const std::string prometheus = Which("prometheus");
  if (prometheus.empty()) GTEST_SKIP() << "no prometheus server installed (Debian package `prometheus`)";
  // bsp over 20 ms links: each clock lasts a round trip, so 400 clocks
  // give Prometheus (scraping every second) about 20 s of a moving run.
  const std::string topo = WriteTopology(R"(
name = "metrics-3site"
[model]
workload = "counter"
layers = [784, 64, 10]
chunk_kib = 4
[training]
clocks = 400
staleness = 1
eval_every = 0
[wan]
mode = "bsp"
[[links]]
src = "us"
dst = "eu"
bandwidth_mbps = 100
delay_ms = 20
[[links]]
src = "us"
dst = "ap"
bandwidth_mbps = 100
delay_ms = 20
[[links]]
src = "eu"
dst = "ap"
bandwidth_mbps = 100
delay_ms = 20
[[sites]]
name = "us"
metrics_base_port = 0
[[sites]]
name = "eu"
metrics_base_port = 0
[[sites]]
name = "ap"
metrics_base_port = 0
)");
  const fs::path out = dir_ / "out";
  const pid_t launch = Spawn({GEOPS_BINARY, "launch", topo, "--out", out.string(), "--plain", "--timeout", "120"},
                             dir_ / "launch.log");
  ASSERT_GT(launch, 0);
  pid_t prom = -1;
  const auto give_up = Clock_::now() + std::chrono::seconds(90);
  auto cleanup = [&] {
    Stop(prom);
    Stop(launch);
  };
  // Six endpoints (3 shards, 3 workers) in the service-discovery file.
  const fs::path targets = out / "prometheus_targets.json";
  size_t found = 0;
  while (Clock_::now() < give_up && found < 6) {
    std::ifstream in(targets);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_discarded() && j.is_array()) found = j.size();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (found < 6) cleanup();
  ASSERT_EQ(found, 6u) << "prometheus_targets.json never listed every process";

  const int port = FreePort();
  const fs::path cfg = dir_ / "prometheus.yml";
  std::ofstream(cfg) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                        "  - job_name: geops\n    file_sd_configs:\n      - files: ['"
                     << targets.string() << "']\n        refresh_interval: 1s\n";
  prom = Spawn({prometheus, "--config.file=" + cfg.string(), "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
                "--web.listen-address=127.0.0.1:" + std::to_string(port)},
               dir_ / "prometheus.log");
  if (prom <= 0) cleanup();
  ASSERT_GT(prom, 0);

  // The shard clock of every site, seen twice: it must have moved.
  std::map<std::string, double> first, later;
  while (Clock_::now() < give_up && first.size() < 3) {
    first = Query(port, "geops_shard_clock");
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  bool moved = false;
  while (Clock_::now() < give_up && !moved && first.size() == 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    later = Query(port, "geops_shard_clock");
    moved = later.size() == 3;
    for (const auto& [site, v] : later) moved = moved && v > first[site];
  }
  const auto wan = Query(port, "geops_wan_wire_bytes_total");
  const auto worker = Query(port, "geops_worker_clock");
  const auto waits = Query(port, "geops_ssp_read_wait_seconds_count");
  const auto holds = Query(port, "geops_wan_hold_wait_seconds_count");
  const auto lan = Query(port, "geops_lan_requests_total");
  cleanup();
  ASSERT_EQ(first.size(), 3u) << "Prometheus never had geops_shard_clock of every site";
  EXPECT_TRUE(moved) << "the shard clocks did not move between two scrapes";
  EXPECT_EQ(wan.size(), 3u);
  for (const auto& [site, v] : wan) EXPECT_GT(v, 0) << site;
  EXPECT_EQ(worker.size(), 3u);
  EXPECT_EQ(waits.size(), 3u);
  EXPECT_EQ(holds.size(), 3u);
  for (const auto& [site, v] : lan) EXPECT_GT(v, 0) << site;
}

TEST_F(MetricsScenarioTest, AShardServesItsMetricsOnTheTopologysPort) {
  // `geops site` started by hand, as an operator would, answers /metrics on
  // the port the topology gives: metrics_base_port + shard.
  const int base = FreePort();
  const std::string topo = WriteTopology("[model]\nworkload = \"counter\"\nlayers = [8, 4]\n"
                                         "[[sites]]\nname = \"solo\"\nmetrics_base_port = " +
                                         std::to_string(base) + "\n");
  const pid_t site = Spawn({GEOPS_BINARY, "site", "--topology", topo, "--site", "solo", "--shard", "0", "--port", "0"},
                           dir_ / "site.log");
  ASSERT_GT(site, 0);
  std::optional<std::string> body;
  const auto give_up = Clock_::now() + std::chrono::seconds(20);
  while (Clock_::now() < give_up && !body) {
    body = HttpGet(base, "/metrics");
    if (!body) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Stop(site);
  ASSERT_TRUE(body.has_value()) << "no /metrics on port " << base;
  EXPECT_NE(body->find("geops_shard_clock{"), std::string::npos) << *body;
  EXPECT_NE(body->find("site=\"solo\""), std::string::npos);
  EXPECT_NE(body->find("geops_ssp_read_wait_seconds_bucket{"), std::string::npos);
  EXPECT_EQ(body->find("geops_wan_"), std::string::npos);  // one site: no WAN side
}

}  // namespace
}  // namespace geops
