#include "common/process_memory.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace geops {

int64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (read != 2) return -1;
  return static_cast<int64_t>(resident) * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

int64_t PeakResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t kib = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    long long v = 0;
    if (std::strncmp(line, "VmHWM:", 6) == 0 && std::sscanf(line + 6, "%lld", &v) == 1) {
      kib = v;
      break;
    }
  }
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

}  // namespace geops
