#include "wan/replication/significance_filter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

namespace geops::wan {
namespace {

SignificanceFilter MakeFilter(SignificanceFilterOptions o = {}) {
  Result<SignificanceFilter> f = SignificanceFilter::Create(o);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(f).value();
}

ChunkValueLookup ConstantValues(const std::vector<float>* w) {
  return [w](ChunkKey) { return w->data(); };
}

TEST(SignificanceFilterTest, CounterWorkloadConservesMassExactly) {
  // Integer deltas in float: every sum is exact, so shipped + accumulated must
  // equal pushed bit for bit, whatever the thresholds.
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    SignificanceFilterOptions o;
    o.max_hold_clocks = seed == 3 ? 5 : 0;
    SignificanceFilter f = MakeFilter(o);
    const std::vector<uint32_t> sizes = {1000, 37, 4096, 16, 1, 333};
    std::map<ChunkKey, std::vector<int64_t>> pushed, shipped;
    std::map<ChunkKey, std::vector<float>> values;
    for (uint32_t c = 0; c < 12; ++c) {
      ChunkKey k{c % 3, c};
      uint32_t n = sizes[c % sizes.size()];
      pushed[k].assign(n, 0);
      shipped[k].assign(n, 0);
      values[k].resize(n);
      for (float& v : values[k]) v = static_cast<float>(static_cast<int>(rng() % 200) - 100);
    }
    ChunkValueLookup lookup = [&](ChunkKey k) { return values[k].data(); };
    std::vector<SparseChunkUpdate> out;
    std::uniform_int_distribution<int> delta(-20, 20);
    for (Clock clock = 0; clock < 150; ++clock) {
      for (auto& [k, p] : pushed) {
        if (rng() % 3 == 0) continue;
        std::vector<float> d(p.size());
        for (size_t i = 0; i < d.size(); ++i) {
          int x = rng() % 4 == 0 ? delta(rng) : 0;
          d[i] = static_cast<float>(x);
          p[i] += x;
        }
        ASSERT_TRUE(f.Add(k, d).ok());
      }
      float t = std::uniform_real_distribution<float>(0.0f, 2.0f)(rng);
      SelectStats s = f.Select(clock, lookup, t, &out);
      int64_t taken = 0;
      for (size_t u = 0; u < out.size(); ++u) {
        if (u > 0) {
          EXPECT_LT(out[u - 1].key, out[u].key);
        }
        std::vector<int64_t>& sh = shipped[out[u].key];
        ASSERT_EQ(out[u].num_elements, sh.size());
        for (size_t j = 0; j < out[u].indices.size(); ++j) {
          sh[out[u].indices[j]] += static_cast<int64_t>(out[u].values[j]);
        }
        taken += static_cast<int64_t>(out[u].indices.size());
      }
      EXPECT_EQ(taken, s.elements_selected);
      for (auto& [k, p] : pushed) {
        std::span<const float> acc = f.Accumulated(k);
        for (size_t i = 0; i < p.size(); ++i) {
          int64_t held = acc.empty() ? 0 : static_cast<int64_t>(acc[i]);
          ASSERT_EQ(shipped[k][i] + held, p[i])
              << "seed " << seed << " clock " << clock << " element " << i;
        }
      }
    }
    f.DrainAll(&out);
    for (const SparseChunkUpdate& u : out) {
      for (size_t j = 0; j < u.indices.size(); ++j) {
        shipped[u.key][u.indices[j]] += static_cast<int64_t>(u.values[j]);
      }
    }
    for (auto& [k, p] : pushed) EXPECT_EQ(shipped[k], p);
    EXPECT_EQ(f.dirty_chunks(), 0);
  }
}

TEST(SignificanceFilterTest, KeepsSmallUpdatesAccumulated) {
  SignificanceFilter f = MakeFilter();
  std::vector<float> w(100, 1.0f);
  std::vector<SparseChunkUpdate> out;
  ChunkKey k{0, 7};
  ASSERT_TRUE(f.Add(k, std::vector<float>(100, 0.004f)).ok());
  SelectStats s = f.Select(0, ConstantValues(&w), 0.01f, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.elements_selected, 0);
  EXPECT_EQ(s.chunks_still_dirty, 1);
  ASSERT_TRUE(f.Add(k, std::vector<float>(100, 0.004f)).ok());
  f.Select(1, ConstantValues(&w), 0.01f, &out);
  EXPECT_TRUE(out.empty());
  for (float a : f.Accumulated(k)) EXPECT_FLOAT_EQ(a, 0.008f);
}

TEST(SignificanceFilterTest, ShipsSignificantUpdatesAndOnlyThose) {
  SignificanceFilter f = MakeFilter();
  std::vector<float> w(100, 2.0f);
  w[50] = -0.1f;                     // small value: a small update is significant to it
  std::vector<float> d(100, 0.01f);  // 0.5% of 2.0
  d[3] = 0.5f;                       // 25%
  d[99] = -0.03f;                    // 1.5%
  ASSERT_TRUE(f.Add({1, 1}, d).ok());
  std::vector<SparseChunkUpdate> out;
  f.Select(0, ConstantValues(&w), 0.01f, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, (ChunkKey{1, 1}));
  EXPECT_EQ(out[0].num_elements, 100u);
  EXPECT_EQ(out[0].indices, (std::vector<uint32_t>{3, 50, 99}));
  EXPECT_EQ(out[0].values, (std::vector<float>{0.5f, 0.01f, -0.03f}));
  std::span<const float> acc = f.Accumulated({1, 1});
  EXPECT_EQ(acc[3], 0.0f);
  EXPECT_EQ(acc[50], 0.0f);
  EXPECT_EQ(acc[4], 0.01f);
  // Accumulating further makes the held ones significant (0.5% + 0.6% > 1%);
  // those shipped before hold only the new 0.6% (except at the small value).
  ASSERT_TRUE(f.Add({1, 1}, std::vector<float>(100, 0.012f)).ok());
  f.Select(1, ConstantValues(&w), 0.01f, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].indices.size(), 98u);
  EXPECT_EQ(f.Accumulated({1, 1})[3], 0.012f);
  EXPECT_EQ(f.Accumulated({1, 1})[99], 0.012f);
  EXPECT_EQ(f.dirty_chunks(), 1);
}

TEST(SignificanceFilterTest, ZeroValuesUseEpsilonAndNullLookupMeansZero) {
  SignificanceFilterOptions o;
  o.value_epsilon = 1e-3f;
  SignificanceFilter f = MakeFilter(o);
  std::vector<float> w(4, 0.0f);
  ASSERT_TRUE(f.Add({0, 0}, std::vector<float>{1e-6f, 2e-5f, 0.0f, -2e-5f}).ok());
  std::vector<SparseChunkUpdate> out;
  f.Select(0, ConstantValues(&w), 0.01f, &out);  // limit 0.01 * 1e-3 = 1e-5
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].indices, (std::vector<uint32_t>{1, 3}));
  ASSERT_TRUE(f.Add({0, 1}, std::vector<float>{1e-6f, 2e-5f}).ok());
  f.Select(
      1, [](ChunkKey) { return static_cast<const float*>(nullptr); }, 0.01f, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, (ChunkKey{0, 1}));
  EXPECT_EQ(out[0].indices, (std::vector<uint32_t>{1}));
}

TEST(SignificanceFilterTest, ThresholdZeroShipsEveryNonZeroElement) {
  SignificanceFilter f = MakeFilter();
  std::vector<float> w(5, 1e6f);
  ASSERT_TRUE(f.Add({0, 0}, std::vector<float>{0, 1e-30f, 0, -1e-30f, 0}).ok());
  std::vector<SparseChunkUpdate> out;
  f.Select(0, ConstantValues(&w), 0.0f, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].indices, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(f.dirty_chunks(), 0);
}

TEST(SignificanceFilterTest, DrainAllEmptiesEveryAccumulator) {
  SignificanceFilter f = MakeFilter();
  std::mt19937 rng(7);
  for (uint32_t c = 0; c < 20; ++c) {
    std::vector<float> d(100 + c);
    for (float& x : d) x = rng() % 5 == 0 ? static_cast<float>(rng() % 7) * 1e-4f : 0.0f;
    ASSERT_TRUE(f.Add({0, c}, d).ok());
  }
  std::vector<float> w(200, 1.0f);
  std::vector<SparseChunkUpdate> out;
  f.Select(0, ConstantValues(&w), 0.01f, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(f.dirty_chunks(), 20);
  SelectStats s = f.DrainAll(&out);
  EXPECT_EQ(out.size(), 20u);
  EXPECT_GT(s.elements_selected, 0);
  EXPECT_EQ(f.dirty_chunks(), 0);
  for (uint32_t c = 0; c < 20; ++c) {
    for (float a : f.Accumulated({0, c})) ASSERT_EQ(a, 0.0f);
  }
  f.DrainAll(&out);
  EXPECT_TRUE(out.empty());
  f.ReleaseCleanChunks();
  EXPECT_EQ(f.tracked_chunks(), 0);
  EXPECT_EQ(f.accumulator_bytes(), 0);
}

TEST(SignificanceFilterTest, MaxHoldShipsLongHeldChunksWhole) {
  SignificanceFilterOptions o;
  o.max_hold_clocks = 2;
  SignificanceFilter f = MakeFilter(o);
  std::vector<float> w(8, 1.0f);
  std::vector<SparseChunkUpdate> out;
  ASSERT_TRUE(f.Add({0, 0}, std::vector<float>(8, 1e-4f)).ok());
  f.Select(10, ConstantValues(&w), 0.01f, &out);
  EXPECT_TRUE(out.empty());
  f.Select(11, ConstantValues(&w), 0.01f, &out);
  EXPECT_TRUE(out.empty());
  f.Select(12, ConstantValues(&w), 0.01f, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].indices.size(), 8u);
  EXPECT_EQ(f.dirty_chunks(), 0);
}

TEST(SignificanceFilterTest, RejectsBadDeltasWithoutChangingState) {
  SignificanceFilter f = MakeFilter();
  ASSERT_TRUE(f.Add({0, 0}, std::vector<float>(4, 1.0f)).ok());
  EXPECT_EQ(f.Add({0, 0}, std::vector<float>(5, 1.0f)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Add({0, 1}, std::vector<float>{}).code(), StatusCode::kInvalidArgument);
  Status nan = f.Add({0, 0}, std::vector<float>{1, std::nanf(""), 1, 1});
  EXPECT_EQ(nan.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nan.message().find("element 1"), std::string::npos) << nan.message();
  EXPECT_EQ(f.Add({0, 0}, std::vector<float>{1, 1, 1, INFINITY}).code(),
            StatusCode::kInvalidArgument);
  std::vector<uint32_t> idx = {1, 4};
  std::vector<float> val = {1, 1};
  EXPECT_EQ(f.AddSparse({0, 0}, 4, idx, val).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.AddSparse({0, 0}, 4, idx, std::vector<float>{1}).code(),
            StatusCode::kInvalidArgument);
  for (float a : f.Accumulated({0, 0})) EXPECT_EQ(a, 1.0f);
  EXPECT_EQ(f.tracked_chunks(), 1);
  SignificanceFilterOptions bad;
  bad.value_epsilon = 0;
  EXPECT_FALSE(SignificanceFilter::Create(bad).ok());
}

TEST(SignificanceFilterTest, AddFiniteAddsAsAddAndKeepsTheShapeChecks) {
  SignificanceFilter checked = MakeFilter(), trusted = MakeFilter();
  const std::vector<float> a = {1.5f, -2.0f, 0.0f, 0.25f}, b = {0.5f, 1.0f, -3.0f, 0.25f};
  for (const std::vector<float>* d : {&a, &b}) {
    ASSERT_TRUE(checked.Add({0, 0}, *d).ok());
    ASSERT_TRUE(trusted.AddFinite({0, 0}, *d).ok());
  }
  std::vector<float> sums(trusted.Accumulated({0, 0}).begin(), trusted.Accumulated({0, 0}).end());
  EXPECT_EQ(sums, std::vector<float>(checked.Accumulated({0, 0}).begin(), checked.Accumulated({0, 0}).end()));
  EXPECT_EQ(sums, (std::vector<float>{2.0f, -1.0f, -3.0f, 0.5f}));
  EXPECT_EQ(trusted.dirty_chunks(), 1);
  // Only the NaN/Inf check is the caller's: a wrong size or an empty delta
  // is still refused, and changes nothing.
  EXPECT_EQ(trusted.AddFinite({0, 0}, std::vector<float>(5, 1.0f)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(trusted.AddFinite({0, 1}, std::vector<float>{}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(std::vector<float>(trusted.Accumulated({0, 0}).begin(), trusted.Accumulated({0, 0}).end()), sums);
  EXPECT_EQ(trusted.tracked_chunks(), 1);
}

// Adds values at `idx` of chunk (0, 0), 128 elements, marked or not.
void AddTo00(SignificanceFilter* f, std::vector<uint32_t> idx, std::vector<float> val, bool fresh) {
  ASSERT_TRUE(f->AddSparse({0, 0}, 128, idx, val, fresh).ok());
}

TEST(SignificanceFilterTest, SelectFreshLooksAtMarkedElementsAndAtEachChunkWholeInTurn) {
  const std::vector<float> w(128, 1.0f);
  const ChunkValueLookup lookup = ConstantValues(&w);
  SignificanceFilter f = MakeFilter();
  // Chunk 0: element 5 significant but unmarked (a residual), element 9
  // significant and marked, element 11 marked but small.
  AddTo00(&f, {5}, {0.5f}, /*fresh=*/false);
  AddTo00(&f, {9, 11}, {0.5f, 0.01f}, /*fresh=*/true);

  const int64_t revisit = 4;
  std::vector<SparseChunkUpdate> out;
  int whole_at = -1;
  for (int call = 0; call < revisit; ++call) {
    SelectStats st = f.SelectFresh(call, lookup, {}, 0.1f, revisit, &out);
    if (st.elements_scanned == 128) {  // this call looked at the chunk whole
      ASSERT_EQ(whole_at, -1) << "looked at whole twice in " << revisit << " calls";
      whole_at = call;
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(std::find(out[0].indices.begin(), out[0].indices.end(), 5u) != out[0].indices.end());
    } else {
      // A part look looks at the marked elements only, each time until
      // the whole look clears the marks, and takes the significant one.
      EXPECT_EQ(st.elements_scanned, whole_at < 0 ? 2 : 0);
      if (!out.empty()) {
        EXPECT_EQ(out[0].indices, (std::vector<uint32_t>{9}));
      }
    }
    // The small marked element and nothing else stays until the whole look.
    EXPECT_EQ(f.dirty_chunks(), 1);
  }
  EXPECT_GE(whole_at, 0) << "never looked at whole in " << revisit << " calls";
  EXPECT_EQ(f.Accumulated({0, 0})[5], 0.0f);
  EXPECT_EQ(f.Accumulated({0, 0})[9], 0.0f);
  EXPECT_EQ(f.Accumulated({0, 0})[11], 0.01f);  // never significant: kept, not lost
}

TEST(SignificanceFilterTest, SelectFreshReadsAChunkWholeAtMostOncePerRevisitClocks) {
  // A fast link asks for a cut at every acknowledgement, many within one
  // clock: a chunk's whole looks are also spaced by `revisit` clocks.
  const std::vector<float> w(128, 1.0f);
  const ChunkValueLookup lookup = ConstantValues(&w);
  SignificanceFilter f = MakeFilter();
  AddTo00(&f, {5}, {0.01f}, /*fresh=*/false);  // a residual: only a whole look sees it
  const int64_t revisit = 4;
  const int calls_per_clock = 10;
  std::vector<SparseChunkUpdate> out;
  std::vector<int> wholes;  // the clocks of the whole looks
  for (int clock = 0; clock < 4 * revisit; ++clock) {
    for (int call = 0; call < calls_per_clock; ++call) {
      const uint32_t i = static_cast<uint32_t>(20 + call);
      AddTo00(&f, {i}, {0.5f}, /*fresh=*/true);  // one new update a call
      SelectStats st = f.SelectFresh(clock, lookup, {}, 0.1f, revisit, &out, {}, /*revisit_clocks=*/revisit);
      if (st.elements_scanned == 128) wholes.push_back(clock);
      // The new update leaves at once, whole look or not.
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(std::find(out[0].indices.begin(), out[0].indices.end(), i) != out[0].indices.end());
    }
  }
  // 160 calls make 40 whole looks counted in calls alone; in
  // 16 clocks at most one every 4 clocks fits, at least 3.
  ASSERT_GE(wholes.size(), 3u);
  EXPECT_LE(wholes.size(), 4u);
  for (size_t i = 1; i < wholes.size(); ++i) EXPECT_GE(wholes[i] - wholes[i - 1], revisit);
  EXPECT_LE(wholes[0], revisit - 1) << "the residual waited more than " << revisit << " clocks";
}

TEST(SignificanceFilterTest, SelectFreshLooksAgainAtAMarkedElementThatWasNotSignificant) {
  const std::vector<float> w(128, 1.0f);
  const ChunkValueLookup lookup = ConstantValues(&w);
  SignificanceFilter f = MakeFilter();
  AddTo00(&f, {11}, {0.01f}, /*fresh=*/true);
  const int64_t revisit = 1000000;  // no whole look in this test (checked below)
  std::vector<SparseChunkUpdate> out;
  SelectStats first = f.SelectFresh(0, lookup, {}, 0.1f, revisit, &out);
  ASSERT_EQ(first.elements_scanned, 1);  // a part look
  EXPECT_TRUE(out.empty());              // 0.01 < 0.1 * 1
  // The cut-off falls: the next part look finds it, with no new update.
  SelectStats second = f.SelectFresh(1, lookup, {}, 0.005f, revisit, &out);
  ASSERT_EQ(second.elements_scanned, 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].indices, (std::vector<uint32_t>{11}));
  EXPECT_EQ(out[0].values, (std::vector<float>{0.01f}));
}

// Element indices 0 .. n-1.
std::vector<uint32_t> FirstIndices(uint32_t n) {
  std::vector<uint32_t> idx(n);
  for (uint32_t i = 0; i < n; ++i) idx[i] = i;
  return idx;
}

TEST(SignificanceFilterTest, SelectFreshLooksAtAChunkWithManyMarksWhole) {
  const std::vector<float> w(128, 1.0f);
  const ChunkValueLookup lookup = ConstantValues(&w);
  SignificanceFilter f = MakeFilter();
  AddTo00(&f, {100}, {0.5f}, /*fresh=*/false);
  // 16 of 128 marked (an eighth): looked at in part.
  const std::vector<uint32_t> idx = FirstIndices(16);
  AddTo00(&f, idx, std::vector<float>(idx.size(), 0.01f), /*fresh=*/true);
  const int64_t revisit = 1000000;  // no turn for a whole look in this test
  std::vector<SparseChunkUpdate> out;
  EXPECT_EQ(f.SelectFresh(0, lookup, {}, 0.1f, revisit, &out).elements_scanned, 16);
  EXPECT_TRUE(out.empty());
  // One more marked: past an eighth, so the whole chunk, residual and all.
  AddTo00(&f, {20}, {0.01f}, /*fresh=*/true);
  EXPECT_EQ(f.SelectFresh(1, lookup, {}, 0.1f, revisit, &out).elements_scanned, 128);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].indices, (std::vector<uint32_t>{100}));
  // A whole look clears the marks.
  EXPECT_EQ(f.SelectFresh(2, lookup, {}, 0.1f, revisit, &out).elements_scanned, 0);
}

TEST(SignificanceFilterTest, SelectFreshCountsAnElementMarkedAgainOnce) {
  const std::vector<float> w(128, 1.0f);
  const ChunkValueLookup lookup = ConstantValues(&w);
  SignificanceFilter f = MakeFilter();
  AddTo00(&f, {100}, {0.5f}, /*fresh=*/false);
  // The same 16 elements marked three times: still an eighth of 128, so
  // still a part look that leaves element 100 where it is.
  const std::vector<uint32_t> idx = FirstIndices(16);
  for (int round = 0; round < 3; ++round) {
    AddTo00(&f, idx, std::vector<float>(idx.size(), 0.001f), /*fresh=*/true);
  }
  const int64_t revisit = 1000000;  // no turn for a whole look in this test
  std::vector<SparseChunkUpdate> out;
  EXPECT_EQ(f.SelectFresh(0, lookup, {}, 0.1f, revisit, &out).elements_scanned, 16);
  EXPECT_TRUE(out.empty());
}

TEST(SignificanceFilterTest, SelectFreshWithRevisitOneIsSelect) {
  std::vector<float> w(512);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 97) - 0.3f;
  const ChunkValueLookup lookup = ConstantValues(&w);
  SignificanceFilter a = MakeFilter(), b = MakeFilter();
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  for (int round = 0; round < 5; ++round) {
    for (ChunkId c = 0; c < 3; ++c) {
      std::vector<uint32_t> idx;
      std::vector<float> val;
      for (uint32_t i = static_cast<uint32_t>(round); i < 512; i += 3) {
        idx.push_back(i);
        val.push_back(noise(rng));
      }
      ASSERT_TRUE(a.AddSparse({0, c}, 512, idx, val).ok());
      ASSERT_TRUE(b.AddSparse({0, c}, 512, idx, val, round % 2 == 0).ok());
    }
    std::vector<SparseChunkUpdate> x, y;
    a.Select(round, lookup, 0.05f, &x);
    b.SelectFresh(round, lookup, {}, 0.05f, /*revisit=*/1, &y);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i].key, y[i].key);
      EXPECT_EQ(x[i].indices, y[i].indices);
      EXPECT_EQ(x[i].values, y[i].values);
    }
  }
}

TEST(SignificanceFilterTest, SelectFreshConservesMass) {
  // Integer counters: whatever the looks took plus what is left is exactly
  // what was added, marked or not.
  // The values of the looked-at elements come element by element here
  // (as a shard gives them), not as whole chunks.
  const std::vector<float> w(300, 1.0f);
  const ChunkValueLookup lookup = ConstantValues(&w);
  int64_t element_reads = 0;
  const ChunkElementLookup elements = [&](ChunkKey, std::span<const uint32_t> at, float* out) {
    for (size_t k = 0; k < at.size(); ++k) out[k] = w[at[k]];
    element_reads += static_cast<int64_t>(at.size());
    return true;
  };
  SignificanceFilter f = MakeFilter();
  std::map<std::pair<ChunkId, uint32_t>, double> added, taken;
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    for (ChunkId c = 0; c < 4; ++c) {
      std::vector<uint32_t> idx;
      std::vector<float> val;
      for (uint32_t i = 0; i < 300; ++i) {
        if (rng() % 25 != 0) continue;  // few enough for part looks
        idx.push_back(i);
        val.push_back(static_cast<float>(static_cast<int>(rng() % 5) - 2));
        added[{c, i}] += val.back();
      }
      ASSERT_TRUE(f.AddSparse({0, c}, 300, idx, val, rng() % 2 == 0).ok());
    }
    std::vector<SparseChunkUpdate> out;
    f.SelectFresh(round, lookup, elements, 2.5f, /*revisit=*/3, &out);
    for (const SparseChunkUpdate& u : out) {
      for (size_t k = 0; k < u.indices.size(); ++k) taken[{u.key.chunk, u.indices[k]}] += u.values[k];
    }
  }
  for (const auto& [where, sum] : added) {
    const double left = f.Accumulated({0, where.first})[where.second];
    EXPECT_EQ(taken[where] + left, sum) << "chunk " << where.first << " element " << where.second;
  }
  EXPECT_GT(element_reads, 0);
}

TEST(SignificanceFilterTest, AddSparseFeedsResidualsBack) {
  SignificanceFilter f = MakeFilter();
  std::vector<uint32_t> idx = {0, 5, 9};
  std::vector<float> val = {0.25f, -1.0f, 3.0f};
  ASSERT_TRUE(f.AddSparse({2, 3}, 10, idx, val).ok());
  ASSERT_TRUE(f.AddSparse({2, 3}, 10, idx, val).ok());
  std::span<const float> acc = f.Accumulated({2, 3});
  ASSERT_EQ(acc.size(), 10u);
  EXPECT_EQ(acc[0], 0.5f);
  EXPECT_EQ(acc[5], -2.0f);
  EXPECT_EQ(acc[9], 6.0f);
  EXPECT_EQ(acc[1], 0.0f);
  EXPECT_EQ(f.dirty_chunks(), 1);
}

TEST(SignificanceFilterTest, SelectTakesExactlyWhatBeatsEachLimit) {
  // Dense and sparse adds (with repeated indices), values near the limits,
  // thresholds that move: every Select takes exactly the elements a plain
  // look at every element of every chunk takes, and leaves the rest.
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    std::mt19937 rng(seed);
    SignificanceFilterOptions o;
    o.value_epsilon = 0.03f;
    SignificanceFilter f = MakeFilter(o);
    const uint32_t n = 300;
    std::map<ChunkKey, std::vector<float>> acc, w;
    for (uint32_t c = 0; c < 6; ++c) {
      ChunkKey k{0, c};
      acc[k].assign(n, 0.0f);
      w[k].resize(n);
      for (float& v : w[k]) v = rng() % 4 == 0 ? 0.0f : std::uniform_real_distribution<float>(-0.2f, 0.2f)(rng);
    }
    ChunkValueLookup lookup = [&](ChunkKey k) { return w[k].data(); };
    std::uniform_real_distribution<float> small(-0.002f, 0.002f);
    std::vector<SparseChunkUpdate> out;
    for (Clock clock = 0; clock < 300; ++clock) {
      for (auto& [k, a] : acc) {
        const int kind = static_cast<int>(rng() % 4);
        const float scale = rng() % 5 == 0 ? 10.0f : 1.0f;
        if (kind == 0) {
          std::vector<float> d(n);
          for (uint32_t i = 0; i < n; ++i) d[i] = small(rng) * scale;
          ASSERT_TRUE(f.Add(k, d).ok());
          for (uint32_t i = 0; i < n; ++i) a[i] += d[i];
        } else if (kind == 1) {
          std::vector<uint32_t> idx;
          std::vector<float> val;
          for (int j = 0; j < 12; ++j) {
            idx.push_back(static_cast<uint32_t>(rng() % 20));  // repeats likely
            val.push_back(small(rng) * scale);
          }
          ASSERT_TRUE(f.AddSparse(k, n, idx, val).ok());
          for (size_t j = 0; j < idx.size(); ++j) a[idx[j]] += val[j];
        }
      }
      const float t = std::uniform_real_distribution<float>(0.01f, 0.3f)(rng);
      f.Select(clock, lookup, t, &out);
      std::map<ChunkKey, std::vector<std::pair<uint32_t, float>>> got, want;
      for (const SparseChunkUpdate& u : out) {
        for (size_t j = 0; j < u.indices.size(); ++j) got[u.key].emplace_back(u.indices[j], u.values[j]);
      }
      for (auto& [k, a] : acc) {
        for (uint32_t i = 0; i < n; ++i) {
          if (std::fabs(a[i]) > t * std::max(std::fabs(w[k][i]), o.value_epsilon)) {
            want[k].emplace_back(i, a[i]);
            a[i] = 0.0f;
          }
        }
      }
      ASSERT_EQ(got, want) << "seed " << seed << " clock " << clock;
      for (auto& [k, a] : acc) {
        std::span<const float> held = f.Accumulated(k);
        if (held.empty()) continue;
        for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(held[i], a[i]) << "seed " << seed << " clock " << clock;
      }
    }
  }
}

TEST(SignificanceFilterTest, ScanThroughputReported) {
  // 8 Mi parameters in 4 KiB-float chunks, ~3% significant per tick.
  const uint32_t kChunk = 4096;
  const uint32_t kChunks = 2048;
  SignificanceFilter f = MakeFilter();
  std::vector<float> w(kChunk);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : w) x = normal(rng) * 0.05f;
  std::vector<float> d(kChunk);
  for (float& x : d) x = normal(rng) * 0.05f * 0.0005f;
  for (uint32_t c = 0; c < kChunks; ++c) ASSERT_TRUE(f.Add({0, c}, d).ok());
  std::vector<SparseChunkUpdate> out;
  double best = 0;
  int64_t selected = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    SelectStats s = f.Select(rep, ConstantValues(&w), 0.01f, &out);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, s.elements_scanned * 4.0 / sec / 1e9);
    if (rep == 0) selected = s.elements_selected;
  }
  double frac = static_cast<double>(selected) / (double{kChunk} * kChunks);
  std::printf("[ perf ] significance scan: %.2f GB/s of parameters, %.1f%% selected\n", best,
              100 * frac);
  EXPECT_GT(frac, 0.005);
  EXPECT_LT(frac, 0.10);
#ifdef NDEBUG
  EXPECT_GT(best, 0.3);  // far below the target; guards against pathologies only
#endif
}

}  // namespace
}  // namespace geops::wan
