// Helpers of the storage tests: temporary directories under the system's
// temp directory (removed at the end), a digest of a directory's files to
// prove that a refused open changed nothing, and small shard configurations.
// Test-only; thread-compatible.
#ifndef GEOPS_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
#define GEOPS_TESTS_STORAGE_STORAGE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "common/options.h"
#include "common/shard_store.h"
#include "tests/datacenter/shard_test_util.h"

namespace geops::storage::testing {

// A fresh directory under the system temp directory, removed with its
// contents when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "geops-storage-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
    EXPECT_FALSE(path_.empty()) << "mkdtemp failed";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Relative path -> size and FNV-1a hash of the contents, for every file and
// directory under `dir` (directories with size -1).
inline std::map<std::string, std::pair<int64_t, uint64_t>> DirDigest(const std::string& dir) {
  std::map<std::string, std::pair<int64_t, uint64_t>> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = std::filesystem::relative(it->path(), dir).string();
    if (it->is_directory()) {
      out[rel] = {-1, 0};
      continue;
    }
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string bytes = buf.str();
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ull;
    }
    out[rel] = {static_cast<int64_t>(bytes.size()), h};
  }
  return out;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline StorageOptions StoreOptions(const std::string& dir, Durability durability = Durability::kSync) {
  StorageOptions o;
  o.data_dir = dir;
  o.durability = durability;
  o.write_buffer_mib = 8;
  return o;
}

}  // namespace geops::storage::testing

#endif  // GEOPS_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
