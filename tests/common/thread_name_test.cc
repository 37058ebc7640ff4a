#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>

namespace geops {
namespace {

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = ThisThreadName();
  std::string inside;
  std::vector<std::string> all;
  std::thread t([&] {
    NameThisThread("geops-test");
    inside = ThisThreadName();
    all = ThreadNamesOfThisProcess();
  });
  t.join();
  EXPECT_EQ(inside, "geops-test");
  EXPECT_TRUE(Has(all, "geops-test"));
  EXPECT_EQ(ThisThreadName(), before);
}

TEST(ThreadNameTest, CutsALongNameAtFifteenBytes) {
  std::string inside;
  std::thread t([&] {
    NameThisThread("lane-priority-12345");
    inside = ThisThreadName();
  });
  t.join();
  EXPECT_EQ(inside, "lane-priority-1");
  EXPECT_EQ(inside.size(), kMaxThreadNameBytes);
}

}  // namespace
}  // namespace geops
