// Helpers shared by the tests that run processes or write files: a fresh scratch folder per test, and
// reading a whole file. Test-only.
#ifndef GEOPS_TESTS_COMMON_SCRATCH_FILES_H_
#define GEOPS_TESTS_COMMON_SCRATCH_FILES_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace geops::test_files {

// An empty folder named after `prefix`, this process and the running test.
// The folders of this test left by processes that are gone (earlier runs:
// a test keeps its folder for a look after it fails) are removed first, so
// runs do not pile them up.
inline std::string FreshTestDir(const std::string& prefix) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string dir = ::testing::TempDir() + prefix + "_" + std::to_string(::getpid()) + "_" + test;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir(), ec)) {
    const std::string name = entry.path().filename().string();
    const std::string head = prefix + "_";
    const std::string tail = "_" + test;
    if (name.size() <= head.size() + tail.size() || name.rfind(head, 0) != 0 ||
        name.compare(name.size() - tail.size(), tail.size(), tail) != 0) {
      continue;
    }
    const std::string pid = name.substr(head.size(), name.size() - head.size() - tail.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const long other = std::strtol(pid.c_str(), nullptr, 10);
    if (other != ::getpid() && ::kill(static_cast<pid_t>(other), 0) != 0 && errno == ESRCH) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace geops::test_files

#endif  // GEOPS_TESTS_COMMON_SCRATCH_FILES_H_
