// The significance selection scan: what it takes, against a plain loop, and
// the AVX-512 path (where the CPU has it) against the portable one, bit for
// bit, over every tail length and the awkward values (NaN, +-Inf, -0,
// subnormals).
#include "wan/codec/float_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace geops::wan {
namespace {

struct Selection {
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<float> acc_after;
  bool any_left = false;
};

using Scan = ScanResult (*)(float*, const float*, uint32_t, float, float, uint32_t*, float*);

ScanResult Absolute(float* acc, const float*, uint32_t n, float t, float, uint32_t* idx, float* val) {
  return SelectAbsolute(acc, n, t, idx, val);
}
ScanResult AbsolutePortable(float* acc, const float*, uint32_t n, float t, float, uint32_t* idx,
                            float* val) {
  return SelectAbsolutePortable(acc, n, t, idx, val);
}

Selection ScanWith(Scan scan, std::vector<float> acc, const std::vector<float>& w, float t, float eps) {
  const uint32_t n = static_cast<uint32_t>(acc.size());
  std::vector<uint32_t> idx(n);
  std::vector<float> val(n);
  const ScanResult r = scan(acc.data(), w.data(), n, t, eps, idx.data(), val.data());
  Selection s;
  s.idx.assign(idx.begin(), idx.begin() + r.taken);
  s.val.assign(val.begin(), val.begin() + r.taken);
  s.acc_after = std::move(acc);
  s.any_left = r.any_left;
  return s;
}

// The rule, element by element, as the header states it.
Selection Reference(std::vector<float> acc, const std::vector<float>* w, float t, float eps) {
  Selection s;
  for (uint32_t i = 0; i < acc.size(); ++i) {
    // max(|w|, eps) with a NaN w counting as eps, as the SSE and AVX-512
    // max instructions (second operand on NaN) and the scalar tail do.
    const float mag = w != nullptr ? std::fabs((*w)[i]) : 0.0f;
    const float lim = w != nullptr ? t * (mag > eps ? mag : eps) : t;
    if (std::fabs(acc[i]) > lim) {
      s.idx.push_back(i);
      s.val.push_back(acc[i]);
      acc[i] = 0.0f;
    }
    s.any_left = s.any_left || acc[i] != 0.0f;
  }
  s.acc_after = std::move(acc);
  return s;
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

void ExpectSame(const Selection& a, const Selection& b, const std::string& what) {
  EXPECT_EQ(a.idx, b.idx) << what;
  EXPECT_EQ(Bits(a.val), Bits(b.val)) << what;
  EXPECT_EQ(Bits(a.acc_after), Bits(b.acc_after)) << what;
  EXPECT_EQ(a.any_left, b.any_left) << what;
}

// Values around the limit, with the awkward ones mixed in.
void Fill(uint64_t seed, size_t n, double take_share, std::vector<float>* acc, std::vector<float>* w) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  auto next = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           -0.0f,
                           0.0f,
                           std::numeric_limits<float>::denorm_min(),
                           -1e-40f};
  acc->resize(n);
  w->resize(n);
  for (size_t i = 0; i < n; ++i) {
    (*w)[i] = static_cast<float>(static_cast<int64_t>(next() % 2001) - 1000) * 1e-4f;
    const bool take = static_cast<double>(next() % 10000) < take_share * 10000;
    const float mag = 0.05f * std::max(std::fabs((*w)[i]), 0.001f) * (take ? 1.5f : 0.5f);
    (*acc)[i] = (next() & 1) ? mag : -mag;
    if (next() % 16 == 0) (*acc)[i] = special[next() % 7];
    if (next() % 32 == 0) (*w)[i] = special[next() % 7];
  }
}

TEST(FloatScanTest, TakesWhatBeatsTheLimitAndZeroesIt) {
  // Relative: limit 0.1 * max(|w|, 0.5).
  std::vector<float> acc = {0.2f, -0.04f, 0.06f, 0.0f, -0.3f};
  std::vector<float> w = {1.0f, 0.1f, 0.1f, 5.0f, 4.0f};
  Selection r = ScanWith(&SelectRelative, acc, w, 0.1f, 0.5f);
  EXPECT_EQ(r.idx, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(r.val, (std::vector<float>{0.2f, 0.06f}));
  EXPECT_EQ(r.acc_after, (std::vector<float>{0.0f, -0.04f, 0.0f, 0.0f, -0.3f}));
  EXPECT_TRUE(r.any_left);
  // Absolute limit 0 takes every non-zero element and leaves nothing.
  Selection a = ScanWith(&Absolute, acc, w, 0.0f, 0.0f);
  EXPECT_EQ(a.idx, (std::vector<uint32_t>{0, 1, 2, 4}));
  EXPECT_FALSE(a.any_left);
}

TEST(FloatScanTest, MatchesTheRuleAndThePortablePathAtEveryLength) {
  for (size_t n = 0; n <= 200; ++n) {
    for (double share : {0.0, 0.05, 0.5, 1.0}) {
      std::vector<float> acc, w;
      Fill(n * 7 + static_cast<uint64_t>(share * 100), n, share, &acc, &w);
      const std::string what = "n " + std::to_string(n) + " share " + std::to_string(share);
      const Selection rel = ScanWith(&SelectRelative, acc, w, 0.05f, 0.001f);
      ExpectSame(rel, Reference(acc, &w, 0.05f, 0.001f), "relative, " + what);
      ExpectSame(rel, ScanWith(&SelectRelativePortable, acc, w, 0.05f, 0.001f), "relative, " + what);
      const Selection abs = ScanWith(&Absolute, acc, w, 2e-5f, 0.0f);
      ExpectSame(abs, Reference(acc, nullptr, 2e-5f, 0.0f), "absolute, " + what);
      ExpectSame(abs, ScanWith(&AbsolutePortable, acc, w, 2e-5f, 0.0f), "absolute, " + what);
      if (testing::Test::HasFailure()) return;
    }
  }
}

TEST(FloatScanTest, SelectListedAppliesTheRuleToTheListedElementsOnly) {
  for (size_t n : {1u, 63u, 64u, 200u}) {
    std::vector<float> acc, w;
    Fill(n, n, 0.5, &acc, &w);
    // Every third element, ascending: the same selection as the whole scan
    // of a copy in which the others are zero, and the others untouched.
    std::vector<uint32_t> at;
    std::vector<float> only(n, 0.0f);
    for (uint32_t i = 0; i < n; i += 3) {
      at.push_back(i);
      only[i] = acc[i];
    }
    for (bool relative : {true, false}) {
      const std::string what = "n " + std::to_string(n) + (relative ? " relative" : " absolute");
      const Selection want = Reference(only, relative ? &w : nullptr, relative ? 0.05f : 0.05f * 0.001f, 0.001f);
      std::vector<float> a = acc;
      std::vector<uint32_t> idx(at.size());
      std::vector<float> val(at.size());
      std::vector<float> w_at;
      for (uint32_t i : at) w_at.push_back(w[i]);
      const uint32_t taken = SelectListed(a.data(), relative ? w_at.data() : nullptr, at.data(),
                                          static_cast<uint32_t>(at.size()), 0.05f, 0.001f, idx.data(), val.data());
      idx.resize(taken);
      val.resize(taken);
      EXPECT_EQ(idx, want.idx) << what;
      EXPECT_EQ(Bits(val), Bits(want.val)) << what;
      for (uint32_t i = 0; i < n; ++i) {
        const float expect = i % 3 == 0 ? want.acc_after[i] : acc[i];
        EXPECT_EQ(Bits({a[i]}), Bits({expect})) << what << " element " << i;
      }
      if (testing::Test::HasFailure()) return;
    }
  }
}

TEST(FloatScanTest, MatchesThePortablePathOnAModelSizedChunk) {
  std::vector<float> acc, w;
  Fill(99, 535818, 0.02, &acc, &w);
  ExpectSame(ScanWith(&SelectRelative, acc, w, 0.05f, 0.03f),
             ScanWith(&SelectRelativePortable, acc, w, 0.05f, 0.03f), "relative");
  // t 0: every non-zero element but NaN (NaN beats no limit).
  ExpectSame(ScanWith(&SelectRelative, acc, w, 0.0f, 0.03f), Reference(acc, &w, 0.0f, 0.03f), "t 0");
  ExpectSame(ScanWith(&Absolute, acc, w, 1e-4f, 0.0f), ScanWith(&AbsolutePortable, acc, w, 1e-4f, 0.0f),
             "absolute");
}

}  // namespace
}  // namespace geops::wan
