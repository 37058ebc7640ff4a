// Helpers shared by the cli tests: a fresh scratch folder per test, and
// reading a whole file. Test-only.
#ifndef GEOPS_TESTS_CLI_CLI_TEST_UTIL_H_
#define GEOPS_TESTS_CLI_CLI_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace geops::cli::testing {

// An empty folder named after `prefix`, this process and the running test
// (a leftover of an earlier run is removed first).
inline std::string FreshTestDir(const std::string& prefix) {
  const std::string dir = ::testing::TempDir() + prefix + "_" + std::to_string(::getpid()) + "_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
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

}  // namespace geops::cli::testing

#endif  // GEOPS_TESTS_CLI_CLI_TEST_UTIL_H_
