// The CPU time this process has used, as the kernel counts it.
#ifndef GEOPS_COMMON_PROCESS_CPU_H_
#define GEOPS_COMMON_PROCESS_CPU_H_

namespace geops {

// User plus system CPU seconds of every thread of this process so far
// (getrusage RUSAGE_SELF), or -1 when it cannot be read.
double ProcessCpuSeconds();

}  // namespace geops

#endif  // GEOPS_COMMON_PROCESS_CPU_H_
