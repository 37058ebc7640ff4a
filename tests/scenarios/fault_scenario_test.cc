// Failure runs with the real binary: `geops launch` kills shard and worker
// processes of a one-site counter run at a clock (the topology's
// [[faults]]), restarts them from their RocksDB stores, and the run still
// ends with every counter value exact. Loopback only; each run takes a few
// seconds and is bounded by the launch's own --timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/scenarios/launch_fixture.h"

namespace geops {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using scenarios::LaunchFixture;
using scenarios::RunResult;

constexpr int kClocks = 80;
constexpr int kAtClock = 30;

// The model, training and storage of every run here: 2 workers per site
// adding 1.0 to every parameter per clock, shards persisting with fsync at
// every tick.
std::string CounterHead(const std::string& name) {
  return "name = \"" + name + R"("
[model]
workload = "counter"
layers = [784, 64, 10]
chunk_kib = 4
[training]
clocks = )" + std::to_string(kClocks) +
         R"(
staleness = 2
eval_every = 0
[storage]
data_dir = "data"
durability = "sync"
)";
}

std::string Site(const std::string& name, int shards) {
  return "[[sites]]\nname = \"" + name + "\"\nshards = " + std::to_string(shards) + "\nworkers = 2\n";
}

// One [[faults]] entry: `kind` on `site` (on its shard `shard` when >= 0)
// at kAtClock, restarted after `restart_after_s`.
std::string Fault(const std::string& kind, const std::string& site, double restart_after_s, int shard = -1) {
  std::ostringstream f;
  f << "[[faults]]\nkind = \"" << kind << "\"\nsite = \"" << site << "\"\n";
  if (shard >= 0) f << "shard = " << shard << "\n";
  f << "at_clock = " << kAtClock << "\nrestart_after_s = " << std::fixed << std::setprecision(2) << restart_after_s
    << "\n";
  return f.str();
}

// One site with `shards` shards; FAULTS are its [[faults]] entries (Fault).
std::string CounterTopology(int shards, const std::string& faults) {
  return CounterHead("counter-faults") + Site("local", shards) + faults;
}

class FaultScenarioTest : public LaunchFixture {
 protected:
  std::vector<json> Events(const std::string& name) {
    std::vector<json> out;
    std::ifstream in(dir_ / "out" / "events.jsonl");
    for (std::string line; std::getline(in, line);) {
      json e = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (e.is_object() && e.value("event", "") == name) out.push_back(e);
    }
    return out;
  }

  // The run ended ok with every counter value exact.
  void ExpectExactCounter(const RunResult& r, const json& s) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(s["exit"], "ok") << s.dump(2);
    EXPECT_EQ(s["counter_expected"], 2.0 * kClocks);
    EXPECT_EQ(s["counter_max_abs_error"], 0.0) << s.dump(2);
    ASSERT_EQ(s["per_worker"].size(), 2u);
    for (const json& w : s["per_worker"]) EXPECT_EQ(w["clocks"], kClocks);
  }

  // The fault fired at (or just past) kAtClock, SIGKILLed `processes`, and
  // each was started again, under a new PID, after `delay_s`.
  void ExpectKilledAndRestarted(const json& s, const std::vector<std::string>& processes, double delay_s) {
    ASSERT_EQ(s["faults"].size(), 1u) << s.dump(2);
    const json& f = s["faults"][0];
    EXPECT_EQ(f["fired"], true) << f.dump(2);
    EXPECT_EQ(f["state"], "recovered") << f.dump(2);
    // Workers of a site with faults report the fault's clock the moment they
    // finish it, so the slowest one is seen exactly there.
    EXPECT_EQ(f["clock_observed"].get<int>(), kAtClock);
    EXPECT_EQ(f["processes"], json(processes));
    ASSERT_EQ(f["pids"].size(), processes.size());
    ASSERT_EQ(f["restarted_pids"].size(), processes.size());
    for (size_t i = 0; i < processes.size(); ++i) {
      const int pid = f["pids"][i].get<int>();
      EXPECT_NE(pid, f["restarted_pids"][i].get<int>());
      EXPECT_EQ(::kill(pid, 0), -1) << processes[i] << " (pid " << pid << ") is still there";
    }
    EXPECT_GE(f["restarted_unix"].get<double>() - f["killed_unix"].get<double>(), delay_s - 0.01);  // timer ms

    std::vector<json> injected = Events("fault_injected");
    ASSERT_EQ(injected.size(), 1u);
    EXPECT_EQ(injected[0]["pids"], f["pids"]);
    std::vector<json> restarted = Events("process_restarted");
    ASSERT_EQ(restarted.size(), processes.size());
    for (size_t i = 0; i < processes.size(); ++i) {
      EXPECT_EQ(restarted[i]["process"], processes[i]);
      EXPECT_EQ(restarted[i]["old_pid"], f["pids"][i]);
    }
    ASSERT_EQ(s["recoveries"].size(), 1u);
    EXPECT_EQ(s["recoveries"][0]["site"], "local");
    EXPECT_EQ(s["recoveries"][0]["counter_max_abs_error_by_site"]["local"], 0.0);
  }

  // The metrics file a shard process wrote at its end (null when missing).
  json ShardMetrics(const std::string& process) {
    std::ifstream in(dir_ / "out" / "metrics" / (process + ".json"));
    return json::parse(in, nullptr, /*allow_exceptions=*/false);
  }

  // How many times shard `i` of site local reported listening.
  int ListeningCount(int shard) {
    int n = 0;
    for (const json& e : Events("listening")) n += e["shard"] == shard ? 1 : 0;
    return n;
  }
};

TEST_F(FaultScenarioTest, KilledShardComesBackFromItsStoreAndTheCounterIsExact) {
  const std::string topo = WriteTopology(CounterTopology(2, Fault("kill-shard", "local", 0.5, 0)));
  RunResult r = Launch(topo, 60);
  json s = Summary();
  ExpectExactCounter(r, s);
  ExpectKilledAndRestarted(s, {"local-shard-0"}, 0.5);
  EXPECT_EQ(ListeningCount(0), 2);
  EXPECT_EQ(ListeningCount(1), 1);
  // The workers rode the outage out in one run each, retrying the dead shard.
  int64_t retries = 0;
  for (const json& w : s["per_worker"]) {
    EXPECT_EQ(w["start_clocks"], json::array({0}));
    retries += w["retries"].get<int64_t>();
  }
  EXPECT_GT(retries, 0);
}

TEST_F(FaultScenarioTest, KilledSiteResumesWhereItsShardsStoppedAndTheCounterIsExact) {
  const std::string topo = WriteTopology(CounterTopology(1, Fault("kill-site", "local", 1.0)));
  RunResult r = Launch(topo, 60);
  json s = Summary();
  ExpectExactCounter(r, s);
  ExpectKilledAndRestarted(s, {"local-shard-0", "local-worker-0", "local-worker-1"}, 1.0);
  EXPECT_EQ(ListeningCount(0), 2);
  // Each worker ran twice; the second run resumed at the clock the shard
  // held for it (past the fault's clock, not back at 0), and the exact
  // counter shows no clock was skipped or applied twice.
  for (const json& w : s["per_worker"]) {
    ASSERT_EQ(w["start_clocks"].size(), 2u) << w.dump();
    EXPECT_EQ(w["start_clocks"][0], 0);
    const int resumed = w["start_clocks"][1].get<int>();
    EXPECT_GT(resumed, kAtClock) << w.dump();
    EXPECT_LE(resumed, kClocks) << w.dump();
    const std::string name = "local-worker-" + std::to_string(w["worker"].get<int>());
    EXPECT_EQ(s["faults"][0]["resumed_clocks"][name], resumed);
  }
}

TEST_F(FaultScenarioTest, WipedSiteStartsOverFromAnEmptyStore) {
  const std::string topo = WriteTopology(CounterTopology(1, Fault("wipe-disk", "local", 0.2)));
  RunResult r = Launch(topo, 60);
  json s = Summary();
  // One site has nobody to bootstrap from: the wiped shard starts empty, the
  // workers start over at clock 0, and the counter ends exact again.
  ExpectExactCounter(r, s);
  ExpectKilledAndRestarted(s, {"local-shard-0", "local-worker-0", "local-worker-1"}, 0.2);
  ASSERT_EQ(s["faults"][0]["wiped_dirs"].size(), 1u);
  EXPECT_EQ(s["faults"][0]["wiped_dirs"][0], (dir_ / "out" / "data" / "local-shard-0").string());
  EXPECT_EQ(Events("disk_wiped").size(), 1u);
  for (const json& w : s["per_worker"]) EXPECT_EQ(w["start_clocks"], json::array({0, 0})) << w.dump();
  EXPECT_TRUE(fs::exists(dir_ / "out" / "data" / "local-shard-0"));  // the new store
}


// The [wan] settings of the three-site runs: asp, int4, drift bound 4.
constexpr char kAspWan[] = R"(
[wan]
mode = "asp"
staleness_ds = 4
threshold = 0.05
threshold_floor = 0.05
codec = "int4"
)";

// The [wan] settings of the three-site diloco runs: an outer lr of 3 (the
// number of sites) without momentum adds the sites' contributions up, so
// the counter checks that every update counts exactly once.
constexpr char kDilocoWan[] = R"(
[wan]
mode = "diloco"
averaging_period = 5
outer_lr = 3.0
outer_momentum = 0.0
outer_average_last = false
codec = "fp16"
)";

// Three sites replicating the counter over shaped loopback links (`wan`),
// `shards` shards and 2 workers each, every shard persisting with fsync;
// FAULTS are its [[faults]] entries (Fault).
std::string ThreeSiteTopology(int shards, const std::string& faults, const std::string& wan = kAspWan) {
  std::string sites;
  for (const char* name : {"us-east-1", "eu-west-1", "ap-northeast-1"}) sites += Site(name, shards);
  return CounterHead("three-site-faults") + wan + R"(peer_lease_ms = 500
links = "static"
[[links]]
src = "us-east-1"
dst = "eu-west-1"
bandwidth_mbps = 60
delay_ms = 20
[[links]]
src = "us-east-1"
dst = "ap-northeast-1"
bandwidth_mbps = 50
delay_ms = 40
[[links]]
src = "eu-west-1"
dst = "ap-northeast-1"
bandwidth_mbps = 40
delay_ms = 50
)" + sites + faults;
}

// Every site's replica ended exact after the drain, and the recovery of
// eu-west-1 was measured: the others noticed it and it caught up.
void ExpectThreeSitesExact(const RunResult& r, const json& s, bool site_killed) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(s["exit"], "ok") << s.dump(2);
  EXPECT_EQ(s["counter_expected"], 6.0 * kClocks);
  ASSERT_EQ(s["counter_max_abs_error_by_site"].size(), 3u) << s.dump(2);
  for (const auto& [site, err] : s["counter_max_abs_error_by_site"].items()) EXPECT_EQ(err, 0.0) << site;
  ASSERT_EQ(s["per_worker"].size(), 6u);
  for (const json& w : s["per_worker"]) EXPECT_EQ(w["clocks"], kClocks);
  ASSERT_EQ(s["recoveries"].size(), 1u) << s.dump(2);
  const json& rec = s["recoveries"][0];
  EXPECT_EQ(rec["site"], "eu-west-1");
  if (site_killed) {
    ASSERT_TRUE(rec["detect_seconds"].is_number()) << rec.dump(2);
    EXPECT_GT(rec["detect_seconds"].get<double>(), 0.0);
    EXPECT_LT(rec["detect_seconds"].get<double>(), 5.0);
  }
  ASSERT_TRUE(rec["catch_up_seconds"].is_number()) << rec.dump(2);
  EXPECT_LT(rec["catch_up_seconds"].get<double>(), 30.0);
}

TEST_F(FaultScenarioTest, ThreeSitesSurviveASiteKilledAndRestartedAndEndExact) {
  const std::string topo = WriteTopology(ThreeSiteTopology(1, Fault("kill-site", "eu-west-1", 1.5)));
  RunResult r = Launch(topo, 120);
  json s = Summary();
  ExpectThreeSitesExact(r, s, /*site_killed=*/true);
  // The site was down long enough to be declared down (1.5 s > the 0.5 s
  // lease), and the others trained on meanwhile.
  EXPECT_EQ(s["faults"][0]["state"], "recovered") << s["faults"][0].dump(2);
}

// A planned stop (an operator's, a node drain): every process of eu-west-1
// gets SIGTERM mid-run. Its shard stops serving, lets what it handed to the
// links leave without waiting for a drain that cannot come before the
// training ends, commits its store and exits 0, well within the launcher's
// stop grace; the site comes back from that store and every replica ends
// exact.
TEST_F(FaultScenarioTest, ThreeSitesSurviveASiteStoppedMidRunAndEndExact) {
  const std::string topo = WriteTopology(ThreeSiteTopology(1, Fault("stop-site", "eu-west-1", 1.5)));
  RunResult r = Launch(topo, 120);
  json s = Summary();
  ExpectThreeSitesExact(r, s, /*site_killed=*/true);
  const json& f = s["faults"][0];
  EXPECT_EQ(f["state"], "recovered") << f.dump(2);
  const json& shard = f["exits"]["eu-west-1-shard-0"];
  EXPECT_EQ(shard["exit"], "exit code 0") << f.dump(2);
  EXPECT_EQ(shard["killed_after_grace"], false) << f.dump(2);
  ASSERT_TRUE(shard["seconds"].is_number()) << f.dump(2);
  // SiteWan::Settle gives what was handed to the links up to 5 s to leave;
  // on these links that takes milliseconds, and the shard does not wait
  // for a drain (which comes only once the training ends).
  EXPECT_LT(shard["seconds"].get<double>(), 5.0) << f.dump(2);
  for (const char* worker : {"eu-west-1-worker-0", "eu-west-1-worker-1"}) {
    EXPECT_EQ(f["exits"][worker]["killed_after_grace"], false) << worker;
  }
  std::ifstream log(dir_ / "out" / "logs" / "eu-west-1-shard-0.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("stopping before the training finished"), std::string::npos) << text;
  // The workers resumed where the committed store left them, past the
  // fault's clock (the exact counters show no clock lost or counted twice).
  for (const json& w : s["per_worker"]) {
    if (w["site"] != "eu-west-1") continue;
    ASSERT_EQ(w["start_clocks"].size(), 2u) << w.dump();
    EXPECT_GT(w["start_clocks"][1].get<int>(), kAtClock) << w.dump();
  }
  const json m = ShardMetrics("eu-west-1-shard-0");
  ASSERT_TRUE(m.is_object() && m["recovery"].is_object()) << m.dump(2);
  EXPECT_EQ(m["recovery"]["fresh_store"], false) << m["recovery"].dump(2);
}

// diloco keeps its outer step in the stores: a site killed mid-run comes
// back with it and the outer steps go on (kDilocoWan: the counter checks
// that every update counts exactly once).
TEST_F(FaultScenarioTest, ThreeSitesInDilocoSurviveASiteKilledAndRestartedAndEndExact) {
  const std::string topo = WriteTopology(ThreeSiteTopology(1, Fault("kill-site", "eu-west-1", 1.5), kDilocoWan));
  RunResult r = Launch(topo, 120);
  json s = Summary();
  ExpectThreeSitesExact(r, s, /*site_killed=*/true);
  EXPECT_EQ(s["faults"][0]["state"], "recovered") << s["faults"][0].dump(2);
  const json m = ShardMetrics("eu-west-1-shard-0");
  ASSERT_TRUE(m.is_object());
  // The restarted shard loaded its state (outer step included) from its store.
  ASSERT_TRUE(m["recovery"].is_object()) << m.dump(2);
  EXPECT_EQ(m["recovery"]["fresh_store"], false) << m["recovery"].dump(2);
  // `geops inspect` shows the outer step's records in that store.
  RunResult inspect = scenarios::RunCommand(std::string(GEOPS_BINARY) + " inspect " +
                                            (dir_ / "out" / "data" / "eu-west-1-shard-0").string());
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("outer step"), std::string::npos) << inspect.output;
}

// diloco, a site that loses its disk: its new shards ask the others what
// they hold of it, take the synchronised model and its own contributions
// from them, and its workers resume after the last contribution a peer
// holds (not at clock 0, as in asp): every update counts exactly once.
TEST_F(FaultScenarioTest, ThreeSitesInDilocoTakeBackASiteThatLostItsDiskAndEndExact) {
  const std::string topo = WriteTopology(ThreeSiteTopology(2, Fault("wipe-disk", "eu-west-1", 1.0), kDilocoWan));
  RunResult r = Launch(topo, 180);
  json s = Summary();
  ExpectThreeSitesExact(r, s, /*site_killed=*/true);
  ASSERT_EQ(s["faults"][0]["wiped_dirs"].size(), 2u) << s["faults"][0].dump(2);
  for (const json& w : s["per_worker"]) {
    if (w["site"] != "eu-west-1") {
      EXPECT_EQ(w["start_clocks"], json::array({0})) << w.dump();
      continue;
    }
    ASSERT_EQ(w["start_clocks"].size(), 2u) << w.dump();
    EXPECT_EQ(w["start_clocks"][0], 0) << w.dump();
    EXPECT_GT(w["start_clocks"][1].get<int64_t>(), 0) << "the work its peers held was done again: " << w.dump();
    EXPECT_LE(w["start_clocks"][1].get<int64_t>(), 30 + 5) << w.dump();
  }
  for (int shard = 0; shard < 2; ++shard) {
    const json m = ShardMetrics("eu-west-1-shard-" + std::to_string(shard));
    ASSERT_TRUE(m.is_object());
    EXPECT_EQ(m["recovery"]["fresh_store"], true) << m.dump(2);
    EXPECT_EQ(m["recovery"]["rejoined"], true) << m.dump(2);
    EXPECT_GT(m["recovery"]["rejoin_bytes"].get<int64_t>(), 0) << m.dump(2);
  }
  // The summary times the rejoin and the survivors taking the merged state in.
  const json& rec = s["recoveries"][0];
  ASSERT_TRUE(rec["rejoin_seconds"].is_number()) << rec.dump(2);
  EXPECT_GT(rec["rejoin_seconds"].get<double>(), 0.0);
  EXPECT_LT(rec["rejoin_seconds"].get<double>(), 30.0);
  ASSERT_TRUE(rec["reset_seconds"].is_number()) << rec.dump(2);
  EXPECT_GE(rec["reset_seconds"].get<double>(), rec["rejoin_seconds"].get<double>() - 0.5);
}

// diloco, two of three sites lose their disks at the same clock: each
// rejoins from the one left, and every update still counts exactly once.
TEST_F(FaultScenarioTest, ThreeSitesInDilocoTakeBackTwoSitesThatLostTheirDisksAtOnce) {
  const std::string faults = Fault("wipe-disk", "eu-west-1", 1.0) + Fault("wipe-disk", "ap-northeast-1", 1.0);
  const std::string topo = WriteTopology(ThreeSiteTopology(1, faults, kDilocoWan));
  RunResult r = Launch(topo, 180);
  json s = Summary();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(s["exit"], "ok") << s.dump(2);
  EXPECT_EQ(s["counter_expected"], 6.0 * kClocks);
  ASSERT_EQ(s["counter_max_abs_error_by_site"].size(), 3u) << s.dump(2);
  for (const auto& [site, err] : s["counter_max_abs_error_by_site"].items()) EXPECT_EQ(err, 0.0) << site;
  for (const json& w : s["per_worker"]) {
    EXPECT_EQ(w["clocks"], kClocks) << w.dump();
    if (w["site"] == "us-east-1") continue;
    ASSERT_EQ(w["start_clocks"].size(), 2u) << w.dump();
    EXPECT_GT(w["start_clocks"][1].get<int64_t>(), 0) << w.dump();
  }
  for (const char* site : {"eu-west-1", "ap-northeast-1"}) {
    const json m = ShardMetrics(std::string(site) + "-shard-0");
    ASSERT_TRUE(m.is_object()) << site;
    EXPECT_EQ(m["recovery"]["rejoined"], true) << site << ": " << m.dump(2);
  }
}

TEST_F(FaultScenarioTest, ThreeSitesSurviveAShardOfOneSiteKilledAndEndExact) {
  const std::string topo = WriteTopology(ThreeSiteTopology(2, Fault("kill-shard", "eu-west-1", 0.3, 1)));
  RunResult r = Launch(topo, 120);
  json s = Summary();
  ExpectThreeSitesExact(r, s, /*site_killed=*/false);
}

TEST_F(FaultScenarioTest, ThreeSitesBootstrapASiteThatLostItsDiskAndEndExact) {
  const std::string topo = WriteTopology(ThreeSiteTopology(2, Fault("wipe-disk", "eu-west-1", 1.0)));
  RunResult r = Launch(topo, 180);
  json s = Summary();
  // The others took everything eu-west-1 had sent them back out, its
  // workers trained again from clock 0 on a replica rebuilt from the
  // others' streams, and every update counts exactly once at every site.
  ExpectThreeSitesExact(r, s, /*site_killed=*/true);
  ASSERT_EQ(s["faults"][0]["wiped_dirs"].size(), 2u) << s["faults"][0].dump(2);
  const json& rec = s["recoveries"][0];
  ASSERT_TRUE(rec["reset_seconds"].is_number()) << rec.dump(2);
  EXPECT_GT(rec["reset_seconds"].get<double>(), 0.0);
  EXPECT_LT(rec["reset_seconds"].get<double>(), 30.0);
  for (const json& w : s["per_worker"]) {
    const bool wiped = w["site"] == "eu-west-1";
    EXPECT_EQ(w["start_clocks"], wiped ? json::array({0, 0}) : json::array({0})) << w.dump();
  }
  // Each shard of each other site reset its streams to the new eu-west-1
  // exactly once; the new eu-west-1 shards started from fresh stores.
  for (const char* site : {"us-east-1", "ap-northeast-1"}) {
    for (int shard = 0; shard < 2; ++shard) {
      const std::string process = std::string(site) + "-shard-" + std::to_string(shard);
      const json m = ShardMetrics(process);
      ASSERT_TRUE(m.is_object()) << process;
      const json& resets = m["wan"]["stream_resets"];
      ASSERT_EQ(resets.size(), 1u) << process << ": " << m["wan"].dump(2);
      EXPECT_EQ(resets[0]["peer"], "eu-west-1");
      EXPECT_GT(resets[0]["reset_unix"].get<double>(), 0.0);
    }
  }
  for (int shard = 0; shard < 2; ++shard) {
    const json m = ShardMetrics("eu-west-1-shard-" + std::to_string(shard));
    ASSERT_TRUE(m.is_object());
    EXPECT_EQ(m["recovery"]["fresh_store"], true) << m.dump(2);
  }
  // A survivor's store keeps a ledger per origin (the new eu-west-1's
  // contributions since the reset among them) and its incarnation.
  RunResult inspect = scenarios::RunCommand(std::string(GEOPS_BINARY) + " inspect " +
                                            (dir_ / "out" / "data" / "us-east-1-shard-0").string());
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("ledgers         site 1: "), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("incarnation"), std::string::npos) << inspect.output;
}

}  // namespace
}  // namespace geops
