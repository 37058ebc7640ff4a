#include "worker/blas_core.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

extern "C" char* openblas_get_corename(void);

namespace geops::worker {

std::string LoadedBlasCore() {
  const char* name = openblas_get_corename();
  return name == nullptr ? std::string() : std::string(name);
}

CpuFeatures ThisCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
  return f;
}

std::string BetterBlasCore(const std::string& loaded, const CpuFeatures& cpu) {
  // The generic Intel kernel sets OpenBLAS falls back to for a model it does
  // not know; anything else it chose on purpose.
  static constexpr std::string_view kFallbacks[] = {"Prescott", "Core2",   "Penryn",
                                                    "Dunnington", "Nehalem", "Sandybridge"};
  bool fallback = false;
  for (std::string_view f : kFallbacks) fallback = fallback || loaded == f;
  if (!fallback) return "";
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return "";
}

void ReexecForBlasCore(char** argv) {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  if (set != nullptr && set[0] != '\0') return;  // the user's choice
  const std::string better = BetterBlasCore(LoadedBlasCore(), ThisCpuFeatures());
  if (better.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", better.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: run with the kernels already loaded. Children would inherit
  // the variable and load the better ones, which is what we want anyway.
  std::fprintf(stderr, "geops: could not re-execute with OPENBLAS_CORETYPE=%s (%s); the BLAS keeps its %s kernels\n",
               better.c_str(), std::strerror(errno), LoadedBlasCore().c_str());
}

}  // namespace geops::worker
