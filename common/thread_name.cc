#include "common/thread_name.h"

#include <pthread.h>

#include <filesystem>
#include <fstream>

namespace geops {

void NameThisThread(std::string_view name) {
  std::string cut(name.substr(0, kMaxThreadNameBytes));
  pthread_setname_np(pthread_self(), cut.c_str());
}

std::string ThisThreadName() {
  char buf[kMaxThreadNameBytes + 1] = {};
  if (pthread_getname_np(pthread_self(), buf, sizeof(buf)) != 0) return "";
  return buf;
}

std::vector<std::string> ThreadNamesOfThisProcess() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (comm && std::getline(comm, name)) names.push_back(name);
  }
  return names;
}

}  // namespace geops
