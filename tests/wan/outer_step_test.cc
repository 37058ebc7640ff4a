// The outer step of avg and diloco on its own: the formula, the wait for
// every site, a site that ended, and the contributions it refuses.
#include "wan/replication/outer_step.h"

#include <gtest/gtest.h>

#include <vector>

namespace geops::wan {
namespace {

const ChunkKey kKey{0, 0};

SparseChunkUpdate Dense(std::vector<float> values) {
  SparseChunkUpdate u;
  u.key = kKey;
  u.num_elements = static_cast<uint32_t>(values.size());
  for (uint32_t i = 0; i < values.size(); ++i) u.indices.push_back(i);
  u.values = std::move(values);
  return u;
}

std::vector<SparseChunkUpdate> V() { return {}; }
std::vector<SparseChunkUpdate> V(SparseChunkUpdate u) { return {std::move(u)}; }

std::vector<float> Theta(const OuterStep& o) {
  std::span<const float> t = o.Theta(kKey);
  return {t.begin(), t.end()};
}

Status Apply(OuterStep* o) {
  return o->ApplyNext([](ChunkKey, std::span<const float>) {});
}

TEST(OuterStepTest, LrOneWithoutMomentumAveragesTheSitesModels) {
  OuterStep o({2, 0, 1}, OuterOptions{1.0, 0.0, false});
  o.InitChunk(kKey, std::vector<float>{1.0f, 2.0f});
  ASSERT_TRUE(o.Add(1, 0, V(Dense({3.0f, 0.0f})), false).ok());
  ASSERT_TRUE(o.Add(1, 1, V(Dense({0.0f, 3.0f})), false).ok());
  EXPECT_FALSE(o.Ready()) << "site 2 has not given step 1";
  ASSERT_TRUE(o.Add(1, 2, V(), false).ok());  // an empty contribution counts
  ASSERT_TRUE(o.Ready());
  ASSERT_TRUE(Apply(&o).ok());
  EXPECT_EQ(Theta(o), (std::vector<float>{2.0f, 3.0f}));  // + (3 + 0 + 0) / 3, + (0 + 3 + 0) / 3
  EXPECT_EQ(o.next_step(), 2);
  EXPECT_EQ(o.digests().size(), 1u);
}

TEST(OuterStepTest, LrEqualToTheSitesCountsEveryUpdateOnce) {
  OuterStep o({0, 1, 2}, OuterOptions{3.0, 0.0, false});
  o.InitChunk(kKey, std::vector<float>{0.0f});
  for (int step = 1; step <= 50; ++step) {
    for (SiteId s = 0; s < 3; ++s) ASSERT_TRUE(o.Add(step, s, V(Dense({static_cast<float>(s + 7)})), false).ok());
    ASSERT_TRUE(Apply(&o).ok());
  }
  EXPECT_EQ(Theta(o), std::vector<float>{50.0f * (7 + 8 + 9)});
}

TEST(OuterStepTest, NesterovMomentumFollowsTheFormula) {
  const double lr = 0.7, mu = 0.9;
  OuterStep o({0, 1}, OuterOptions{lr, mu, true});
  o.InitChunk(kKey, std::vector<float>{1.0f});
  double theta = 1.0, m = 0.0;
  const float a[3][2] = {{0.5f, -0.25f}, {0.125f, 1.0f}, {-2.0f, 0.75f}};
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(o.Add(step + 1, 0, V(Dense({a[step][0]})), false).ok());
    ASSERT_TRUE(o.Add(step + 1, 1, V(Dense({a[step][1]})), false).ok());
    ASSERT_TRUE(Apply(&o).ok());
    const double delta = -((static_cast<double>(a[step][0]) + a[step][1]) / 2);
    m = mu * static_cast<double>(static_cast<float>(m)) + delta;
    theta = static_cast<float>(static_cast<double>(static_cast<float>(theta)) - lr * (delta + mu * m));
    EXPECT_EQ(Theta(o)[0], static_cast<float>(theta)) << "step " << step + 1;
    EXPECT_EQ(o.Momentum(kKey)[0], static_cast<float>(m)) << "step " << step + 1;
  }
}

TEST(OuterStepTest, TheSameContributionsInAnyOrderGiveTheSameBits) {
  OuterStep a({0, 1, 2}, OuterOptions{});
  OuterStep b({0, 1, 2}, OuterOptions{});
  a.InitChunk(kKey, std::vector<float>{0.1f, 0.2f});
  b.InitChunk(kKey, std::vector<float>{0.1f, 0.2f});
  const std::vector<float> c[3] = {{1e-3f, 7.0f}, {3.3f, -1e-7f}, {-0.9f, 1e5f}};
  for (SiteId s : {0, 1, 2}) ASSERT_TRUE(a.Add(1, s, V(Dense(c[s])), false).ok());
  for (SiteId s : {2, 0, 1}) ASSERT_TRUE(b.Add(1, s, V(Dense(c[s])), false).ok());
  ASSERT_TRUE(Apply(&a).ok());
  ASSERT_TRUE(Apply(&b).ok());
  EXPECT_EQ(Theta(a), Theta(b));
  EXPECT_EQ(a.digests(), b.digests());
}

TEST(OuterStepTest, ASiteThatEndedIsLeftOutOfLaterSteps) {
  OuterStep o({0, 1}, OuterOptions{2.0, 0.0, false, false});
  o.InitChunk(kKey, std::vector<float>{0.0f});
  ASSERT_TRUE(o.Add(1, 0, V(Dense({1.0f})), /*final=*/true).ok());
  ASSERT_TRUE(o.Add(1, 1, V(Dense({1.0f})), false).ok());
  ASSERT_TRUE(Apply(&o).ok());
  EXPECT_FALSE(o.Ready());
  EXPECT_FALSE(o.Finished());
  EXPECT_EQ(o.Add(2, 0, V(Dense({1.0f})), false).code(), StatusCode::kInvalidArgument) << "site 0 ended";
  ASSERT_TRUE(o.Add(2, 1, V(Dense({4.0f})), true).ok());
  ASSERT_TRUE(o.Ready()) << "only site 1 takes part in step 2";
  ASSERT_TRUE(Apply(&o).ok());
  EXPECT_EQ(Theta(o), std::vector<float>{6.0f});  // 2 * (2 / 2) + 2 * (4 / 2): N stays 2
  EXPECT_TRUE(o.Finished());
  EXPECT_FALSE(o.Outstanding());
}

TEST(OuterStepTest, TheLastStepAveragesTheSitesModelsWithoutMomentum) {
  OuterStep o({0, 1}, OuterOptions{0.7, 0.9, true, /*average_last=*/true});
  o.InitChunk(kKey, std::vector<float>{0.0f});
  ASSERT_TRUE(o.Add(1, 0, V(Dense({1.0f})), false).ok());
  ASSERT_TRUE(o.Add(1, 1, V(Dense({1.0f})), false).ok());
  ASSERT_TRUE(Apply(&o).ok());
  const float theta1 = Theta(o)[0];
  EXPECT_FLOAT_EQ(theta1, 0.7f * (1.0f + 0.9f * 1.0f));  // Nesterov: lr * (delta + mu * m), m = delta
  ASSERT_TRUE(o.Add(2, 0, V(Dense({2.0f})), true).ok());
  ASSERT_TRUE(o.Add(2, 1, V(Dense({4.0f})), true).ok());
  ASSERT_TRUE(Apply(&o).ok());
  EXPECT_EQ(Theta(o)[0], static_cast<float>(static_cast<double>(theta1) + 3.0)) << "theta + mean(2, 4)";
}

// Streaming: fragments of the chunks take their steps in turn. Chunks 0, 1
// and 2 with two fragments: steps 1, 3, ... update chunks 0 and 2, steps
// 2, 4, ... chunk 1; a chunk outside the step's fragment keeps theta and m
// (momentum does not move it), unless a contribution to the step carries it
// (a site's final one carries all of its progress).
TEST(OuterStepTest, StreamingStepsUpdateOnlyTheirFragment) {
  const ChunkKey k0{0, 0}, k1{0, 1}, k2{1, 0};
  auto at = [](ChunkKey key, float v) {
    SparseChunkUpdate u = Dense({v});
    u.key = key;
    return u;
  };
  auto theta = [](const OuterStep& o, ChunkKey key) { return o.Theta(key)[0]; };
  using Ups = std::vector<SparseChunkUpdate>;
  OuterOptions options{0.7, 0.9, true, true};
  options.fragments = 2;
  OuterStep o({0, 1}, options);
  for (ChunkKey key : {k2, k0, k1}) o.InitChunk(key, std::vector<float>{1.0f});  // any order
  EXPECT_TRUE(o.Covers(1, k0));
  EXPECT_FALSE(o.Covers(1, k1));
  EXPECT_TRUE(o.Covers(1, k2));
  EXPECT_TRUE(o.Covers(2, k1));
  EXPECT_FALSE(o.Covers(2, k2));
  EXPECT_TRUE(o.Covers(3, k0));

  ASSERT_TRUE(o.Add(1, 0, Ups{at(k0, 0.5f), at(k2, 0.25f)}, false).ok());
  ASSERT_TRUE(o.Add(1, 1, Ups{at(k0, 0.5f), at(k2, 0.25f)}, false).ok());
  std::vector<ChunkKey> visited;
  auto visit = [&](ChunkKey key, std::span<const float>) { visited.push_back(key); };
  ASSERT_TRUE(o.ApplyNext(visit).ok());
  EXPECT_EQ(visited, (std::vector<ChunkKey>{k0, k2}));
  EXPECT_EQ(theta(o, k1), 1.0f);
  EXPECT_EQ(o.Momentum(k1)[0], 0.0f);
  const float k0_after1 = theta(o, k0), k0_m = o.Momentum(k0)[0];
  EXPECT_NE(k0_after1, 1.0f);
  ASSERT_NE(k0_m, 0.0f);

  ASSERT_TRUE(o.Add(2, 0, Ups{at(k1, 1.0f)}, false).ok());
  ASSERT_TRUE(o.Add(2, 1, Ups{at(k1, 1.0f)}, false).ok());
  visited.clear();
  ASSERT_TRUE(o.ApplyNext(visit).ok());
  EXPECT_EQ(visited, std::vector<ChunkKey>{k1});
  EXPECT_EQ(theta(o, k0), k0_after1) << "momentum must not move a chunk outside the step's fragment";
  EXPECT_EQ(o.Momentum(k0)[0], k0_m);
  EXPECT_NE(theta(o, k1), 1.0f);

  // Step 3 is fragment 0's, but site 0's final contribution carries chunk 1.
  const float k1_after2 = theta(o, k1);
  ASSERT_TRUE(o.Add(3, 0, Ups{at(k0, 0.5f), at(k1, 2.0f)}, true).ok());
  ASSERT_TRUE(o.Add(3, 1, Ups{at(k0, 0.5f)}, false).ok());
  visited.clear();
  ASSERT_TRUE(o.ApplyNext(visit).ok());
  EXPECT_EQ(visited, (std::vector<ChunkKey>{k0, k1, k2}));
  EXPECT_NE(theta(o, k1), k1_after2);
  EXPECT_EQ(o.digests().size(), 3u);
}

TEST(OuterStepTest, RefusesWhatDoesNotBelongAndChangesNothing) {
  OuterStep o({0, 1}, OuterOptions{});
  o.InitChunk(kKey, std::vector<float>{0.0f, 0.0f});
  EXPECT_EQ(o.Add(1, 5, V(), false).code(), StatusCode::kInvalidArgument);                 // not a site
  EXPECT_EQ(o.Add(2, 0, V(), false).code(), StatusCode::kInvalidArgument);                 // a gap
  EXPECT_EQ(o.Add(1, 0, V(Dense({1.0f})), false).code(), StatusCode::kInvalidArgument);    // wrong size
  SparseChunkUpdate foreign = Dense({1.0f, 2.0f});
  foreign.key = ChunkKey{3, 3};
  EXPECT_EQ(o.Add(1, 0, V(foreign), false).code(), StatusCode::kInvalidArgument);          // no such chunk
  SparseChunkUpdate out_of_range = Dense({1.0f, 2.0f});
  out_of_range.indices[1] = 9;
  EXPECT_EQ(o.Add(1, 0, V(out_of_range), false).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(o.Add(1, 0, V(Dense({1.0f, 2.0f})), false).ok());
  EXPECT_EQ(o.Add(1, 0, V(Dense({1.0f, 2.0f})), false).code(), StatusCode::kInvalidArgument);  // twice
  EXPECT_FALSE(o.Ready());
  EXPECT_EQ(Apply(&o).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Theta(o), (std::vector<float>{0.0f, 0.0f}));
}

}  // namespace
}  // namespace geops::wan
