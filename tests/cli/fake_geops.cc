// fake_geops: a test stand-in for the `geops` executable that speaks the
// launcher's child protocol (`site` and `worker` subcommands, "@geops {...}"
// event lines) without training anything, so the launcher can be tested
// quickly and with chosen faults.
//
// Environment:
//   FAKE_GEOPS_CLOCK_MS  sleep per worker clock in ms (default 5)
//   FAKE_GEOPS_FAULTS    comma-separated "<process>:<fault>", where process is
//                        "<site>-shard-<i>" or "<site>-worker-<w>" and fault is
//     nolisten      shard: never prints "listening" (waits for SIGTERM)
//     crash         shard: exits 1 shortly after listening
//     ignoreterm    shard or worker: ignores SIGTERM (needs SIGKILL)
//     hang          worker: after clock 1 hangs forever, ignoring SIGTERM
//     exit3@N       worker: prints an error and exits 3 at clock N
//     interrupt@N   worker: sends SIGINT to its parent (the launcher) at clock N
//     crashonce     shard: exits 1 once the workers run (the peers file
//                   exists), in its first run only
//     kill9once@N   worker: SIGKILLs itself at clock N, in its first run only
// ("first run": no file OUT/.fake-<process>-died yet; the fault writes it.)
// A worker prints "takeover" on stderr when started with --takeover.
// Every process first prints {"event":"fake_pid","pid":...}, an event the
// launcher does not know, so tests can find the PIDs in events.jsonl.
// Workers then print "worker_started" at clock 0 (a fake never resumes) and
// a "progress" event at every clock 1..clocks.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "config/topology.h"

namespace {

volatile sig_atomic_t g_term = 0;  // test helper program; a signal flag must be global
void OnTerm(int) { g_term = 1; }

std::string Fault(const std::string& process) {
  const char* env = std::getenv("FAKE_GEOPS_FAULTS");
  std::string faults = env ? env : "";
  size_t pos = 0;
  while (pos <= faults.size()) {
    size_t comma = faults.find(',', pos);
    std::string item = faults.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = item.find(':');
    if (colon != std::string::npos && item.substr(0, colon) == process) return item.substr(colon + 1);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return "";
}

// True the first time it is asked for `process` in the results folder `out`.
bool FirstRun(const std::string& out, const std::string& process) {
  const std::string marker = out + "/.fake-" + process + "-died";
  if (::access(marker.c_str(), F_OK) == 0) return false;
  if (FILE* f = std::fopen(marker.c_str(), "w")) std::fclose(f);
  return true;
}

int FaultClock(const std::string& fault, const std::string& kind) {
  if (fault.rfind(kind + "@", 0) != 0) return -1;
  return std::atoi(fault.c_str() + kind.size() + 1);
}

void Event(const std::string& json) {
  std::printf("@geops %s\n", json.c_str());
  std::fflush(stdout);
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int RunSite(std::map<std::string, std::string>& a, const geops::config::Topology& t) {
  std::string site = a["--site"];
  int shard = std::atoi(a["--shard"].c_str());
  int port = std::atoi(a["--port"].c_str());
  int site_index = *t.FindSite(site);
  std::string fault = Fault(site + "-shard-" + std::to_string(shard));
  ::signal(SIGTERM, fault == "ignoreterm" ? SIG_IGN : OnTerm);
  std::printf("fake shard %s/%d starting\n", site.c_str(), shard);
  std::fflush(stdout);
  if (port == 0) port = 41000 + 100 * site_index + shard;
  if (fault != "nolisten") {
    Event("{\"event\":\"listening\",\"site\":\"" + site + "\",\"shard\":" + std::to_string(shard) +
          ",\"address\":\"127.0.0.1:" + std::to_string(port) + "\",\"mirror\":\"127.0.0.1:" +
          std::to_string(port + 1000) + "\"}");
  }
  if (fault == "crashonce" && FirstRun(a["--out"], site + "-shard-" + std::to_string(shard))) {
    // Once the workers run: the launcher writes the peers file as it starts them.
    for (int i = 0; i < 1000 && ::access(a["--peers-file"].c_str(), F_OK) != 0; ++i) SleepMs(10);
    SleepMs(100);
    std::fprintf(stderr, "fake shard: simulated crash\n");
    return 1;
  }
  if (fault == "crash") {
    SleepMs(200);
    std::fprintf(stderr, "fake shard: simulated crash\n");
    return 1;
  }
  while (!g_term) SleepMs(5);
  Event("{\"event\":\"shard_stats\",\"site\":\"" + site + "\",\"shard\":" + std::to_string(shard) +
        ",\"updates_applied\":" + std::to_string(10 * (shard + 1)) + "}");
  return 0;
}

int RunWorker(std::map<std::string, std::string>& a, const geops::config::Topology& t) {
  auto start = std::chrono::steady_clock::now();
  std::string site = a["--site"];
  int worker = std::atoi(a["--worker"].c_str());
  int site_index = *t.FindSite(site);
  std::string fault = Fault(site + "-worker-" + std::to_string(worker));
  ::signal(SIGTERM, fault == "ignoreterm" || fault == "hang" ? SIG_IGN : SIG_DFL);
  const char* ms_env = std::getenv("FAKE_GEOPS_CLOCK_MS");
  int clock_ms = ms_env ? std::atoi(ms_env) : 5;
  bool evaluator = site_index == 0 && worker == 0;
  bool counter = t.workload == "counter";
  long long n = t.clocks;
  std::string who = "\"site\":\"" + site + "\",\"worker\":" + std::to_string(worker);
  std::fprintf(stderr, "fake worker %s/%d with shards %s%s\n", site.c_str(), worker, a["--shards"].c_str(),
               a.count("--takeover") ? " takeover" : "");
  std::printf("@geops {this is not json\n");  // malformed: the launcher must only warn
  std::fflush(stdout);
  Event("{\"event\":\"worker_started\"," + who + ",\"clock\":0}");
  for (long long c = 1; c <= n; ++c) {
    SleepMs(clock_ms);
    if (FaultClock(fault, "exit3") == c) {
      std::fprintf(stderr, "boom at clock %lld\n", c);
      return 3;
    }
    if (FaultClock(fault, "interrupt") == c) kill(getppid(), SIGINT);
    if (FaultClock(fault, "kill9once") == c && FirstRun(a["--out"], site + "-worker-" + std::to_string(worker))) {
      std::fprintf(stderr, "fake worker: killing myself at clock %lld\n", c);
      std::fflush(stderr);
      kill(getpid(), SIGKILL);
    }
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "{\"event\":\"progress\",%s,\"clock\":%lld,\"clocks\":%lld,\"loss\":%.6f,"
                  "\"examples_per_sec\":1000,\"t\":%.3f}",
                  who.c_str(), c, n, 1.0 / static_cast<double>(c + 1), Seconds(start));
    Event(buf);
    if (fault == "hang") {
      for (;;) SleepMs(1000);
    }
    if (evaluator && !counter && t.eval_every > 0 && c % t.eval_every == 0) {
      std::snprintf(buf, sizeof(buf),
                    "{\"event\":\"eval\",%s,\"clock\":%lld,\"test_accuracy\":%.4f,\"test_loss\":%.4f,\"t\":%.3f}",
                    who.c_str(), c, 0.5 + 0.5 * static_cast<double>(c) / static_cast<double>(n), 0.5, Seconds(start));
      Event(buf);
    }
    if (c % 10 == 0) std::printf("clock %lld done\n", c);
  }
  long long sent = 1000LL * (site_index * 10 + worker + 1);
  std::string acc = evaluator && !counter ? "0.9" : "null";
  std::string loss = counter ? "null" : std::to_string(1.0 / static_cast<double>(n + 1));
  std::string expected = evaluator && counter ? std::to_string(n * t.total_workers()) : "null";
  std::string error = evaluator && counter ? "0.0" : "null";
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "{\"event\":\"final\",%s,\"clocks\":%lld,\"wall_seconds\":%.3f,\"final_loss\":%s,"
                "\"test_accuracy\":%s,\"test_loss\":%s,\"lan_bytes_sent\":%lld,\"lan_bytes_received\":500,"
                "\"max_staleness_observed\":%d,\"counter_expected\":%s,\"counter_max_abs_error\":%s,"
                "\"examples\":%lld,\"shards\":\"%s\"}",
                who.c_str(), n, Seconds(start), loss.c_str(), acc.c_str(), evaluator && !counter ? "0.3" : "null",
                sent, 2 * site_index + worker, expected.c_str(), error.c_str(), n * t.batch_size,
                a["--shards"].c_str());
  Event(buf);
  while (fault == "ignoreterm") SleepMs(1000);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fake_geops site|worker --flag value ...\n");
    return 2;
  }
  std::string command = argv[1];
  std::map<std::string, std::string> a;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--takeover" || flag == "--exit-with-parent" || i + 1 == argc) {
      a[flag] = "";
    } else {
      a[flag] = argv[++i];
    }
  }
  auto topology = geops::config::LoadTopology(a["--topology"]);
  if (!topology.ok()) {
    std::fprintf(stderr, "fake_geops: %s\n", topology.status().ToString().c_str());
    return 2;
  }
  Event("{\"event\":\"fake_pid\",\"pid\":" + std::to_string(getpid()) + "}");
  if (command == "site") return RunSite(a, *topology);
  if (command == "worker") return RunWorker(a, *topology);
  std::fprintf(stderr, "fake_geops: unknown command %s\n", command.c_str());
  return 2;
}
