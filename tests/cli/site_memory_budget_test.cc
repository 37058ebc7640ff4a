// `geops site` with a memory budget, as an operator runs it: a budget the
// shard's plan does not fit is refused before anything is allocated,
// naming the parts; one it fits starts and says what it planned.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/common/scratch_files.h"

namespace geops::cli {
namespace {

// Runs `geops site` for site "a" shard 0 of `topology` with
// `--memory-budget-mib budget` (site b's mirror is named but never
// answers); returns its exit code once it exits, or
// stops it (SIGTERM) once `log` holds `until` and returns -2. Bounded: 30 s.
int RunSite(const std::string& topology, const std::string& budget, const std::string& log,
            const std::string& until) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    ::execl(GEOPS_BIN, GEOPS_BIN, "site", "--topology", topology.c_str(), "--site", "a", "--shard", "0", "--port",
            "0", "--data-dir", "", "--memory-budget-mib", budget.c_str(), "--mirror-peers", "b=127.0.0.1:9",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  for (int i = 0; i < 300; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (!until.empty() && test_files::ReadFile(log).find(until) != std::string::npos) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, &status, 0);
      return -2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

std::string WriteTopology(const std::string& dir) {
  const std::string path = dir + "/two.toml";
  // Two sites of a 4M-parameter counter model (16 MiB of values per shard).
  std::ofstream(path) << "[model]\nworkload = \"counter\"\nlayers = [1024, 4096]\nchunk_kib = 256\n"
                         "[training]\nclocks = 2\n"
                         "[wan]\nmode = \"asp\"\nlinks = \"static\"\n"
                         "[[links]]\nsrc = \"a\"\ndst = \"b\"\nbandwidth_mbps = 100\ndelay_ms = 5\n"
                         "[[sites]]\nname = \"a\"\nshards = 1\nworkers = 1\n"
                         "[[sites]]\nname = \"b\"\nshards = 1\nworkers = 1\n";
  return path;
}

TEST(SiteMemoryBudgetTest, ABudgetThePlanDoesNotFitIsRefusedNamingTheParts) {
  const std::string dir = test_files::FreshTestDir("site_memory");
  const std::string log = dir + "/site.log";
  EXPECT_EQ(RunSite(WriteTopology(dir), "64", log, ""), 2);
  const std::string out = test_files::ReadFile(log);
  EXPECT_NE(out.find("site a shard 0 needs at least"), std::string::npos) << out;
  EXPECT_NE(out.find("chunk values 16 MiB + WAN accumulator 16 MiB + WAN backlogs (1 peer) 17 MiB + "
                     "read change marks 1 MiB"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("its memory budget is 64 MiB"), std::string::npos) << out;
}

TEST(SiteMemoryBudgetTest, ABudgetThePlanFitsStartsAndSaysWhatItPlanned) {
  const std::string dir = test_files::FreshTestDir("site_memory");
  const std::string log = dir + "/site.log";
  // Stopped once it said so (the mirror may say "serving" before it does).
  EXPECT_EQ(RunSite(WriteTopology(dir), "1024", log, "the plan holds"), -2) << test_files::ReadFile(log);
  const std::string out = test_files::ReadFile(log);
  EXPECT_NE(out.find("memory budget 1024 MiB; the plan holds"), std::string::npos) << out;
}

TEST(SiteMemoryBudgetTest, ANegativeBudgetInTheTopologyIsAConfigurationError) {
  const std::string dir = test_files::FreshTestDir("site_memory");
  const std::string path = dir + "/bad.toml";
  std::ofstream(path) << "[model]\nworkload = \"counter\"\nlayers = [10, 10]\n"
                         "[[sites]]\nname = \"a\"\nshard_memory_mib = -5\n";
  const std::string log = dir + "/site.log";
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen(log.c_str(), "w", stderr);
    ::execl(GEOPS_BIN, GEOPS_BIN, "site", "--topology", path.c_str(), "--site", "a", "--shard", "0",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2);
  EXPECT_NE(test_files::ReadFile(log).find("shard_memory_mib"), std::string::npos) << test_files::ReadFile(log);
}

}  // namespace
}  // namespace geops::cli
