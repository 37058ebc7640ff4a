// Shared fixture of the multi-process scenarios: a temporary folder per test,
// a topology written into it, `geops launch` run as a child (bounded by its
// own --timeout), and the summary.json it writes.
#ifndef GEOPS_TESTS_SCENARIOS_LAUNCH_FIXTURE_H_
#define GEOPS_TESTS_SCENARIOS_LAUNCH_FIXTURE_H_

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace geops::scenarios {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command and captures its output.
inline RunResult RunCommand(const std::string& command) {
  RunResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class LaunchFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("geops-scenario-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::string WriteTopology(const std::string& text) {
    const std::filesystem::path p = dir_ / "topology.toml";
    std::ofstream(p) << text;
    return p.string();
  }

  RunResult Launch(const std::string& topology, int timeout_s) {
    return RunCommand(std::string(GEOPS_BINARY) + " launch " + topology + " --out " +
                      (dir_ / "out").string() + " --plain --timeout " + std::to_string(timeout_s));
  }

  nlohmann::json Summary() {
    std::ifstream in(dir_ / "out" / "summary.json");
    EXPECT_TRUE(in.good()) << "no summary.json";
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }

  std::filesystem::path dir_;
};

}  // namespace geops::scenarios

#endif  // GEOPS_TESTS_SCENARIOS_LAUNCH_FIXTURE_H_
