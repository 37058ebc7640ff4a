// A shard's memory budget: the plan refused at start when it does not fit,
// and the guard that refuses updates while the process is over it.
#include "datacenter/memory_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "datacenter/shard.h"
#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using ::testing::HasSubstr;

TEST(MemoryBudgetTest, APlanThatDoesNotFitNamesEveryPartAndTheBudget) {
  MemoryPlan plan;
  plan.Add("chunk values", int64_t{200} << 20);
  plan.Add("WAN accumulator", int64_t{200} << 20);
  plan.Add("WAN backlogs (2 peers)", int64_t{400} << 20);
  plan.Add("process", kProcessAllowanceBytes);
  EXPECT_EQ(plan.total(), (int64_t{800} << 20) + kProcessAllowanceBytes);
  EXPECT_TRUE(CheckMemoryPlan(plan, 0, "site a shard 0").ok()) << "no budget: nothing to check";
  EXPECT_TRUE(CheckMemoryPlan(plan, plan.total(), "site a shard 0").ok());
  Status s = CheckMemoryPlan(plan, int64_t{512} << 20, "site a shard 0");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("site a shard 0 needs at least 896 MiB"));
  EXPECT_THAT(s.message(), HasSubstr("chunk values 200 MiB + WAN accumulator 200 MiB + WAN backlogs (2 peers) 400 MiB"));
  EXPECT_THAT(s.message(), HasSubstr("its memory budget is 512 MiB"));
}

TEST(MemoryBudgetTest, TheGuardRefusesOverTheBudgetUntilBackUnderNinetyPercent) {
  std::atomic<int64_t> resident{50};
  MemoryGuard guard(100, [&] { return resident.load(); }, "site a shard 0");
  EXPECT_FALSE(guard.Sample());
  EXPECT_TRUE(guard.AdmitUpdate().ok());
  resident = 101;
  EXPECT_TRUE(guard.Sample()) << "just crossed: the caller hands memory back";
  EXPECT_FALSE(guard.Sample()) << "still over: not news";
  Status s = guard.AdmitUpdate();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("site a shard 0 is over its memory budget"));
  EXPECT_THAT(s.message(), HasSubstr("retry"));
  resident = 95;  // under the budget, not yet under 90%
  guard.Sample();
  EXPECT_EQ(guard.AdmitUpdate().code(), StatusCode::kUnavailable);
  resident = 90;
  guard.Sample();
  EXPECT_TRUE(guard.AdmitUpdate().ok());
  const MemoryGuard::Stats st = guard.stats();
  EXPECT_EQ(st.budget_bytes, 100);
  EXPECT_EQ(st.resident_bytes, 90);
  EXPECT_EQ(st.peak_resident_bytes, 101);
  EXPECT_EQ(st.updates_refused, 2);
  EXPECT_FALSE(st.over);
  resident = -1;  // unknown: never refuse on a guess
  guard.Sample();
  EXPECT_TRUE(guard.AdmitUpdate().ok());
}

TEST(MemoryBudgetTest, AShardOverItsBudgetRefusesUpdatesAndChangesNothing) {
  const ModelSpec spec = testing::TestModel(InitKind::kZeros);
  const ShardOptions o = testing::TestOptions(1);
  auto shard = std::move(Shard::Create(spec, o, nullptr)).value();
  std::atomic<int64_t> resident{int64_t{1} << 30};
  MemoryGuard guard(int64_t{512} << 20, [&] { return resident.load(); }, "site a shard 0");
  shard->SetMemoryGuard(&guard);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  const std::vector<ChunkKey> keys = spec.ChunksOfShard(0, 1);
  std::vector<float> ones(static_cast<size_t>(testing::ElementsOf(spec, keys)), 1.0f);
  guard.Sample();
  Result<UpdateReply> refused = shard->Update(0, 0, keys, ones);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("memory budget"));
  for (const auto& [key, values] : testing::SnapshotOf(*shard)) {
    for (float v : values) ASSERT_EQ(v, 0.0f) << "a refused update changed the model";
  }
  ShardStatus st = shard->GetStatus();
  EXPECT_EQ(st.update_batches_applied, 0);
  EXPECT_EQ(st.memory_updates_refused, 1);
  EXPECT_TRUE(st.memory_over_budget);
  EXPECT_EQ(st.rejected_by_code[static_cast<int>(StatusCode::kUnavailable)], 1);
  // Reads and clocks go on.
  EXPECT_TRUE(shard->AdvanceClock(0, 1, false).ok());
  // Memory is back: the retry is applied.
  resident = int64_t{256} << 20;
  guard.Sample();
  Result<UpdateReply> retried = shard->Update(0, 1, keys, ones);
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_TRUE(retried->applied);
  st = shard->GetStatus();
  EXPECT_EQ(st.memory_budget_bytes, int64_t{512} << 20);
  EXPECT_FALSE(st.memory_over_budget);
}

}  // namespace
}  // namespace geops::datacenter
