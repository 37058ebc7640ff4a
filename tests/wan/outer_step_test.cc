// The outer step of avg and diloco on its own: the formula, the wait for
// every site, a site that ended, and the contributions it refuses.
#include "wan/replication/outer_step.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>
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

// Three replicas of a run of sites {0, 1, 2}, DiLoCo's optimiser, and a
// helper that gives one site's contribution to some of them.
struct ThreeReplicas {
  ThreeReplicas() {
    for (OuterStep* o : {&a, &b, &fresh}) o->InitChunk(kKey, std::vector<float>{1.0f, -1.0f});
  }
  static SparseChunkUpdate Of(int64_t step, SiteId site) {
    return Dense({0.25f * static_cast<float>(step) + static_cast<float>(site), -0.5f * static_cast<float>(site)});
  }
  static void Give(std::initializer_list<OuterStep*> to, int64_t step, SiteId site) {
    for (OuterStep* o : to) ASSERT_TRUE(o->Add(step, site, V(Of(step, site)), false).ok());
  }
  OuterStep a{{0, 1, 2}, OuterOptions{}};
  OuterStep b{{0, 1, 2}, OuterOptions{}};
  OuterStep fresh{{0, 1, 2}, OuterOptions{}};
};

TEST(OuterStepTest, MergeTakesTheFurthestStepsAndEveryContributionHeld) {
  // Site 2 gave step 1 to both replicas, step 2 and step 3 only to `a`, and
  // then lost its store: `a` applied step 2, `b` waits for site 2's step 2.
  ThreeReplicas r;
  for (SiteId s : {0, 1, 2}) r.Give({&r.a, &r.b}, 1, s);
  ASSERT_TRUE(Apply(&r.a).ok());
  ASSERT_TRUE(Apply(&r.b).ok());
  for (SiteId s : {0, 1}) r.Give({&r.a, &r.b}, 2, s);
  r.Give({&r.a}, 2, 2);
  ASSERT_TRUE(Apply(&r.a).ok());
  r.Give({&r.a}, 3, 2);
  r.Give({&r.b}, 3, 0);  // site 0's step 3 reached only `b` so far
  ASSERT_FALSE(r.b.Ready());

  // The new site 2 takes both; `b` takes `a`'s.
  Result<OuterStep::MergeResult> fb = r.fresh.Merge(r.b.Export());
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  Result<OuterStep::MergeResult> fa = r.fresh.Merge(r.a.Export());
  ASSERT_TRUE(fa.ok()) << fa.status().ToString();
  EXPECT_EQ(fa->skipped_from, 2);
  EXPECT_EQ(fa->skipped_to, 2);
  Result<OuterStep::MergeResult> ba = r.b.Merge(r.a.Export());
  ASSERT_TRUE(ba.ok()) << ba.status().ToString();
  EXPECT_EQ(ba->skipped_from, 2);
  EXPECT_EQ(ba->skipped_to, 2);
  EXPECT_EQ(ba->dropped.size(), 2u) << "sites 0 and 1's step 2 came applied";
  ASSERT_EQ(ba->added.size(), 1u);
  EXPECT_EQ(ba->added[0], (std::pair<int64_t, SiteId>{3, 2}));

  for (OuterStep* o : {&r.a, &r.b, &r.fresh}) {
    EXPECT_EQ(o->next_step(), 3);
    EXPECT_EQ(o->LastGiven(2), 3) << "site 2's stream goes on at step 4";
    EXPECT_EQ(o->digests(), r.a.digests());
    EXPECT_EQ(Theta(*o), Theta(r.a));
  }
  // `a` still lacks site 0's step 3: the merge does not go backwards, and
  // the usual stream brings it. Then every replica applies the same step.
  EXPECT_NE(r.fresh.Contribution(3, 0), nullptr) << "taken from b";
  r.Give({&r.a}, 3, 0);
  r.Give({&r.a, &r.b, &r.fresh}, 3, 1);
  for (OuterStep* o : {&r.a, &r.b, &r.fresh}) {
    ASSERT_TRUE(o->Ready());
    ASSERT_TRUE(Apply(o).ok());
  }
  EXPECT_EQ(r.b.digests(), r.a.digests());
  EXPECT_EQ(r.fresh.digests(), r.a.digests());
  EXPECT_EQ(r.fresh.digests().size(), 3u);
}

TEST(OuterStepTest, MergingTheSameStateAgainChangesNothing) {
  ThreeReplicas r;
  for (SiteId s : {0, 1, 2}) r.Give({&r.a}, 1, s);
  ASSERT_TRUE(Apply(&r.a).ok());
  r.Give({&r.a}, 2, 1);
  ASSERT_TRUE(r.fresh.Merge(r.a.Export()).ok());
  Result<OuterStep::MergeResult> again = r.fresh.Merge(r.a.Export());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->skipped_to, -1);
  EXPECT_TRUE(again->added.empty());
  EXPECT_TRUE(again->dropped.empty());
  EXPECT_EQ(r.fresh.Contribution(2, 1) != nullptr, true);
}

TEST(OuterStepTest, MergeRefusesStatesThatCannotBeOfTheSameRunAndChangesNothing) {
  ThreeReplicas r;
  for (SiteId s : {0, 1, 2}) r.Give({&r.a, &r.b}, 1, s);
  ASSERT_TRUE(Apply(&r.a).ok());
  ASSERT_TRUE(Apply(&r.b).ok());
  r.Give({&r.b}, 2, 0);
  const OuterStep::State before = r.b.Export();

  // Another step 1 gives another model.
  OuterStep other({0, 1, 2}, OuterOptions{});
  other.InitChunk(kKey, std::vector<float>{1.0f, -1.0f});
  for (SiteId s : {0, 1, 2}) ASSERT_TRUE(other.Add(1, s, V(Dense({9.0f, 9.0f})), false).ok());
  ASSERT_TRUE(Apply(&other).ok());
  Result<OuterStep::MergeResult> diverged = r.b.Merge(other.Export());
  EXPECT_EQ(diverged.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(diverged.status().message().find("differ after step 1"), std::string::npos)
      << diverged.status().ToString();

  // The same site's step 2 with other bits.
  OuterStep::State twin = r.a.Export();
  twin.pending[2][0] = V(Dense({5.0f, 5.0f}));
  twin.given[0] = 2;
  Result<OuterStep::MergeResult> differs = r.b.Merge(twin);
  EXPECT_EQ(differs.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(differs.status().message().find("site 0's contribution to step 2"), std::string::npos)
      << differs.status().ToString();

  // A site's stream with a step missing: site 1 gave 2 and 3, 2 is not held.
  OuterStep::State gap = r.a.Export();
  gap.pending[3][1] = V(ThreeReplicas::Of(3, 1));
  gap.given[1] = 3;
  Result<OuterStep::MergeResult> gapped = r.b.Merge(gap);
  EXPECT_EQ(gapped.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(gapped.status().message().find("step 2 is held by neither"), std::string::npos)
      << gapped.status().ToString();

  // A state that claims a step it does not hold.
  OuterStep::State claims = r.a.Export();
  claims.given[2] = 2;
  EXPECT_EQ(r.b.Merge(claims).status().code(), StatusCode::kDataLoss);

  const OuterStep::State after = r.b.Export();
  EXPECT_EQ(after.next_step, before.next_step);
  EXPECT_EQ(after.given, before.given);
  EXPECT_EQ(after.digests, before.digests);
  EXPECT_EQ(after.theta, before.theta);
  EXPECT_EQ(after.pending.size(), before.pending.size());
}

}  // namespace
}  // namespace geops::wan
