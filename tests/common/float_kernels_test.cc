// The float kernels of common/float_kernels.h: every tail length and every
// position of a NaN or infinity.
#include "common/float_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace geops {
namespace {

TEST(FloatKernelsTest, AddIntoAddsEveryElementIncludingTail) {
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<float> dst(n + 1, 1.0f), src(n);
    for (int64_t i = 0; i < n; ++i) src[i] = static_cast<float>(i);
    AddInto(dst.data(), src.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], 1.0f + static_cast<float>(i)) << n << " " << i;
    ASSERT_EQ(dst[n], 1.0f) << "wrote past the end, n=" << n;
  }
}

TEST(FloatKernelsTest, FindsNonFiniteAtAnyPosition) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::signaling_NaN()};
  for (int64_t n : {1, 15, 16, 17, 33, 100}) {
    std::vector<float> v(n, 0.5f);
    v[0] = std::numeric_limits<float>::max();
    v[n - 1] = std::numeric_limits<float>::denorm_min();
    ASSERT_TRUE(AllFinite(v.data(), n));
    ASSERT_EQ(FirstNonFinite(v.data(), n), -1);
    for (int64_t pos = 0; pos < n; ++pos) {
      for (float b : bad) {
        std::vector<float> w = v;
        w[pos] = b;
        ASSERT_FALSE(AllFinite(w.data(), n)) << "n=" << n << " pos=" << pos;
        ASSERT_EQ(FirstNonFinite(w.data(), n), pos);
      }
    }
  }
}

// The First* kernels check blocks of 4096 floats and search only a block
// that failed: the first bad index wins across blocks, at each block's
// edges, and the sum kernel finds an overflow of two finite values.
TEST(FloatKernelsTest, FirstNonFiniteAcrossScanBlocks) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t n = 3 * 4096 + 7;
  std::vector<float> v(n, 0.25f), zeros(n, 0.0f);
  for (int64_t pos : {int64_t{0}, int64_t{4095}, int64_t{4096}, int64_t{8191}, int64_t{8192}, n - 8, n - 1}) {
    std::vector<float> w = v;
    w[pos] = nan;
    if (pos + 5000 < n) w[pos + 5000] = -inf;  // a later one, in another block
    ASSERT_EQ(FirstNonFinite(w.data(), n), pos);
    ASSERT_FALSE(AllFinite(w.data(), n));
    ASSERT_EQ(FirstNonFiniteSum(w.data(), zeros.data(), n), pos);
    ASSERT_FALSE(SumAllFinite(zeros.data(), w.data(), n));
    std::vector<float> big(n, 0.0f), also(n, 0.0f);
    big[pos] = 3e38f;
    also[pos] = 3e38f;  // finite each, +inf summed
    ASSERT_EQ(FirstNonFinite(big.data(), n), -1);
    ASSERT_EQ(FirstNonFiniteSum(big.data(), also.data(), n), pos);
    ASSERT_FALSE(SumAllFinite(big.data(), also.data(), n));
  }
  ASSERT_EQ(FirstNonFiniteSum(v.data(), v.data(), n), -1);
  ASSERT_TRUE(SumAllFinite(v.data(), v.data(), n));
}

TEST(FloatKernelsTest, MaxAbsIsExactAndNonFiniteMakesItInfinite) {
  const float inf = std::numeric_limits<float>::infinity();
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf,
                       -std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(MaxAbs(nullptr, 0), 0.0f);
  for (int64_t n : {1, 15, 16, 17, 33, 100}) {
    for (int64_t pos = 0; pos < n; ++pos) {
      std::vector<float> v(n, -0.25f);
      v[n / 2] = -0.0f;
      v[pos] = -3.0e38f;  // the largest magnitude, negative, anywhere
      ASSERT_EQ(MaxAbs(v.data(), n), 3.0e38f) << "n=" << n << " pos=" << pos;
      v[pos] = std::numeric_limits<float>::denorm_min();
      ASSERT_EQ(MaxAbs(v.data(), n), n > 1 ? 0.25f : std::numeric_limits<float>::denorm_min());
      for (float b : bad) {
        v[pos] = b;
        ASSERT_EQ(MaxAbs(v.data(), n), inf) << "n=" << n << " pos=" << pos;
      }
    }
  }
}

TEST(FloatKernelsTest, AddIntoMaxAbsAddsAsAddIntoAndBoundsTheResults) {
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<float> dst(n + 1, 1.0f), src(n), plain(n + 1, 1.0f);
    for (int64_t i = 0; i < n; ++i) src[i] = static_cast<float>(i) * -0.5f;
    const float most = AddIntoMaxAbs(dst.data(), src.data(), n);
    AddInto(plain.data(), src.data(), n);
    ASSERT_EQ(dst, plain) << "n=" << n;
    ASSERT_EQ(most, MaxAbs(dst.data(), n)) << "n=" << n;
  }
  std::vector<float> dst(20, 3.0e38f), src(20, 1.0e38f);
  EXPECT_EQ(AddIntoMaxAbs(dst.data(), src.data(), 20), std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace geops
