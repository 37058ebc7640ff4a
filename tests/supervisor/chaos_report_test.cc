// MeasureKill: the stalls and restart-to-training times `geops chaos`
// reports, from recorded progress times.
#include "supervisor/chaos/chaos_report.h"

#include <gtest/gtest.h>

namespace geops::supervisor {
namespace {

// Two sites of one worker each; site 0 advances every 0.1 s from 0 to
// `until`, with a hole (hole_from, hole_to).
ChaosProgress TwoSites(double hole_from, double hole_to) {
  ChaosProgress p;
  p.progress.resize(2, std::vector<std::vector<double>>(1));
  p.finished.resize(2, std::vector<std::optional<double>>(1));
  for (int i = 0; i <= 100; ++i) {
    const double t = 0.1 * i;
    if (t <= hole_from || t >= hole_to) p.progress[0][0].push_back(t);
  }
  return p;
}

TEST(ChaosReportTest, StallIsTheSurvivorsLongestGapUntilTheVictimTrainsAgain) {
  ChaosProgress p = TwoSites(3.0, 5.05);
  // Site 1 (the victim) trains until 2.95, is killed at 3.0, restarted at 4.0, trains again at 4.5.
  for (double t : {2.9, 2.95, 4.5, 4.6}) p.progress[1][0].push_back(t);
  ChaosKill kill;
  kill.kind = "shard";
  kill.site = 1;
  kill.kill_t = 3.0;
  kill.delay_s = 1.0;
  kill.restart_t = 4.0;
  const KillEffect e = MeasureKill(kill, p, 10.0);
  ASSERT_TRUE(e.restart_to_training_s.has_value());
  EXPECT_NEAR(*e.restart_to_training_s, 0.5, 1e-9);
  ASSERT_TRUE(e.stall_s[0].has_value());
  EXPECT_NEAR(*e.stall_s[0], 5.1 - 3.0, 1e-9);  // last advance at 3.0, next at 5.1 (after the window)
  EXPECT_FALSE(e.stall_s[1].has_value());      // the victim's own site
  EXPECT_NEAR(*e.max_stall_s, 2.1, 1e-9);
}

TEST(ChaosReportTest, AWorkerKillCountsTheOtherWorkersOfItsSiteAsSurvivors) {
  ChaosProgress p = TwoSites(100, 100);  // site 0 never stops
  p.progress[1].resize(2);
  p.finished[1].resize(2);
  p.progress[1][0] = {1.0, 2.0, 6.0};  // the victim: killed at 2.5, back at 6.0
  p.progress[1][1] = {1.0, 2.0, 2.1, 5.0};  // its site-mate waits 2.1 -> 5.0
  ChaosKill kill;
  kill.kind = "worker";
  kill.site = 1;
  kill.victim_workers = {0};
  kill.kill_t = 2.5;
  kill.delay_s = 1.0;
  kill.restart_t = 3.5;
  const KillEffect e = MeasureKill(kill, p, 10.0);
  EXPECT_NEAR(*e.restart_to_training_s, 2.5, 1e-9);
  EXPECT_NEAR(*e.stall_s[1], 2.9, 1e-9);
  EXPECT_NEAR(*e.stall_s[0], 0.1, 1e-6);
  EXPECT_NEAR(*e.max_stall_s, 2.9, 1e-9);
}

TEST(ChaosReportTest, FinishedSitesAndNeverRestartedVictimsAreLeftOut) {
  ChaosProgress p = TwoSites(100, 100);
  p.finished[0][0] = 2.0;  // site 0 finished before the kill
  ChaosKill kill;
  kill.kind = "site";
  kill.site = 1;
  kill.kill_t = 3.0;
  kill.delay_s = 1.0;  // never restarted (the run ended)
  const KillEffect e = MeasureKill(kill, p, 4.0);
  EXPECT_FALSE(e.stall_s[0].has_value());
  EXPECT_FALSE(e.max_stall_s.has_value());
  EXPECT_FALSE(e.restart_to_training_s.has_value());
}

TEST(ChaosReportTest, DistributionIsNearestRank) {
  const nlohmann::json d = Distribution({5, 1, 3, 2, 4});
  EXPECT_EQ(d["count"], 5);
  EXPECT_EQ(d["median"], 3.0);
  EXPECT_EQ(d["p95"], 5.0);
  EXPECT_EQ(d["max"], 5.0);
  EXPECT_TRUE(Distribution({}).empty());
}

}  // namespace
}  // namespace geops::supervisor
