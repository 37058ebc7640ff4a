// Which OpenBLAS kernels this process runs, and making sure they fit the CPU.
//
// Debian 12's OpenBLAS (0.3.21, built with DYNAMIC_ARCH) picks its kernels
// by the CPU's family and model number when the library loads. A CPU newer
// than the library (Emerald Rapids, model 207, for one) is not in its table,
// and it falls back to "Prescott": SSE3 kernels, about a quarter of the
// speed of its AVX-512 ones on the same core (a 32 x 784 x 512 sgemm: 14 vs
// 62 GFLOP/s). The MLP workers spend most of their time there.
//
// OpenBLAS reads OPENBLAS_CORETYPE when it loads, before main(), so the fix
// has to come before the program starts: ReexecForBlasCore re-executes the
// program with the variable set to the kernel set the CPU's features allow
// (SkylakeX with AVX-512, Haswell with AVX2 and FMA). A variable set by the
// user is left alone, and the child processes of a re-executed program
// inherit it, so each program re-executes at most once.
#ifndef GEOPS_WORKER_BLAS_CORE_H_
#define GEOPS_WORKER_BLAS_CORE_H_

#include <string>

namespace geops::worker {

// The kernel set OpenBLAS loaded, e.g. "SkylakeX" or "Prescott".
std::string LoadedBlasCore();

struct CpuFeatures {
  bool avx2_fma = false;
  bool avx512 = false;  // F, CD, BW, DQ and VL
};
// What this CPU can run (x86-64; all false elsewhere).
CpuFeatures ThisCpuFeatures();

// The OPENBLAS_CORETYPE value this process should run with, or "" when the
// loaded kernels are right: OpenBLAS chose a generic Intel fallback
// (Prescott, Core2, Penryn, Dunnington, Nehalem, Sandybridge) on a CPU that
// has AVX2+FMA (-> "Haswell") or AVX-512 F/CD/BW/DQ/VL (-> "SkylakeX"; its
// sgemm is as fast as the newer sets', whose names 0.3.21 does not all take
// in OPENBLAS_CORETYPE). Pure: the inputs are the loaded core's name and the
// CPU's features.
std::string BetterBlasCore(const std::string& loaded, const CpuFeatures& cpu);

// When BetterBlasCore names a kernel set and OPENBLAS_CORETYPE is unset,
// sets it and re-executes this program (/proc/self/exe) with the same
// arguments: the process keeps its PID and open descriptors. Returns only
// when it did not re-execute (nothing to do, or exec failed: then a warning
// goes to stderr and the program goes on with the loaded kernels).
void ReexecForBlasCore(char** argv);

}  // namespace geops::worker

#endif  // GEOPS_WORKER_BLAS_CORE_H_
