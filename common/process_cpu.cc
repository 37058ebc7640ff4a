#include "common/process_cpu.h"

#include <sys/resource.h>

namespace geops {

double ProcessCpuSeconds() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return -1;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace geops
