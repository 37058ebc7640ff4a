// The memory this process holds, as the kernel counts it (Linux /proc).
#ifndef GEOPS_COMMON_PROCESS_MEMORY_H_
#define GEOPS_COMMON_PROCESS_MEMORY_H_

#include <cstdint>

namespace geops {

// Resident bytes now (/proc/self/statm), or -1 when it cannot be read.
int64_t ResidentBytes();
// The most resident bytes so far (VmHWM in /proc/self/status), or -1.
int64_t PeakResidentBytes();

}  // namespace geops

#endif  // GEOPS_COMMON_PROCESS_MEMORY_H_
