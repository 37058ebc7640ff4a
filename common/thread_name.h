// NameThisThread: gives the calling thread a name that top -H, ps -L, perf
// and gdb show, so that an operator looking at a shard's thirty threads can
// tell the replicator from a lane sender or an RPC worker.
//
// Linux keeps 15 bytes of a thread's name; a longer one is cut there.
// Naming is best effort: a failure changes nothing else.
#ifndef GEOPS_COMMON_THREAD_NAME_H_
#define GEOPS_COMMON_THREAD_NAME_H_

#include <string>
#include <string_view>
#include <vector>

namespace geops {

inline constexpr size_t kMaxThreadNameBytes = 15;

void NameThisThread(std::string_view name);
// The calling thread's name ("" when it cannot be read).
std::string ThisThreadName();
// The names of every thread of this process, in no particular order (from
// /proc/self/task; empty where that cannot be read).
std::vector<std::string> ThreadNamesOfThisProcess();

}  // namespace geops

#endif  // GEOPS_COMMON_THREAD_NAME_H_
