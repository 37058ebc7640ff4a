// BetterBlasCore: which OpenBLAS kernel set a process should run with.
#include "worker/blas_core.h"

#include <gtest/gtest.h>

namespace geops::worker {
namespace {

TEST(BlasCoreTest, AGenericFallbackOnAVectorCpuGetsTheVectorKernels) {
  CpuFeatures avx512{.avx2_fma = true, .avx512 = true};
  CpuFeatures avx2{.avx2_fma = true, .avx512 = false};
  EXPECT_EQ(BetterBlasCore("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(BetterBlasCore("Prescott", avx2), "Haswell");
  EXPECT_EQ(BetterBlasCore("Nehalem", avx2), "Haswell");
  EXPECT_EQ(BetterBlasCore("Sandybridge", avx512), "SkylakeX");
}

TEST(BlasCoreTest, AChoiceOpenBlasMadeOnPurposeOrAnOldCpuIsKept) {
  CpuFeatures avx512{.avx2_fma = true, .avx512 = true};
  CpuFeatures old{};
  EXPECT_EQ(BetterBlasCore("Haswell", avx512), "");   // e.g. chosen for an AMD Zen
  EXPECT_EQ(BetterBlasCore("SkylakeX", avx512), "");
  EXPECT_EQ(BetterBlasCore("Zen", avx512), "");
  EXPECT_EQ(BetterBlasCore("Prescott", old), "");     // nothing better runs here
  EXPECT_EQ(BetterBlasCore("", avx512), "");
}

TEST(BlasCoreTest, TheLoadedKernelsHaveAName) { EXPECT_FALSE(LoadedBlasCore().empty()); }

}  // namespace
}  // namespace geops::worker
