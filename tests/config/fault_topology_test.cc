// The [[faults]] section of a topology: parsing, and one clear error per
// bad entry naming the entry's index, the field and the line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/model_from_topology.h"
#include "config/topology.h"

namespace geops::config {
namespace {

using ::testing::HasSubstr;

constexpr char kBase[] = R"(
[model]
workload = "counter"
layers = [8, 4]
[training]
clocks = 100
[storage]
data_dir = "data"
[[sites]]
name = "us-east-1"
shards = 2
workers = 2
[[sites]]
name = "eu-west-1"
shards = 1
workers = 2
)";

constexpr char kInMemory[] = R"(
[training]
clocks = 100
[[sites]]
name = "local"
shards = 2
workers = 2
)";

Result<Topology> Parse(const std::string& faults, const char* base = kBase) {
  return ParseTopology(std::string(base) + faults, "t.toml");
}

std::string ErrorOf(const std::string& faults, const char* base = kBase) {
  Result<Topology> t = Parse(faults, base);
  EXPECT_FALSE(t.ok()) << "accepted:\n" << faults;
  return t.ok() ? "" : t.status().message();
}

TEST(FaultTopologyTest, NoFaultsByDefault) {
  Result<Topology> t = Parse("");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->faults.empty());
  EXPECT_TRUE(t->FaultClocks(0).empty());
}

TEST(FaultTopologyTest, ParsesEveryKind) {
  Result<Topology> t = Parse(R"(
[[faults]]
kind = "kill-site"
site = "eu-west-1"
at_clock = 30
restart_after_s = 2.0

[[faults]]
kind = "kill-shard"
site = "us-east-1"
shard = 1
at_clock = 10
restart_after_s = 1

[[faults]]
kind = "kill-site"
site = "eu-west-1"
at_clock = 60
restart_after_s = 0.5

[[faults]]
kind = "kill-site"
site = "us-east-1"
at_clock = 99

[[faults]]
kind = "stop-site"
site = "us-east-1"
at_clock = 50
restart_after_s = 1.5
)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->faults.size(), 5u);
  const FaultSpec& a = t->faults[0];
  EXPECT_EQ(a.kind, "kill-site");
  EXPECT_EQ(a.site, "eu-west-1");
  EXPECT_EQ(a.site_index, 1);
  EXPECT_EQ(a.shard, -1);
  EXPECT_EQ(a.at_clock, 30);
  EXPECT_DOUBLE_EQ(a.restart_after_s, 2.0);
  EXPECT_TRUE(a.restarts());
  EXPECT_EQ(a.line, 18);
  const FaultSpec& b = t->faults[1];
  EXPECT_EQ(b.kind, "kill-shard");
  EXPECT_EQ(b.site_index, 0);
  EXPECT_EQ(b.shard, 1);
  EXPECT_DOUBLE_EQ(b.restart_after_s, 1.0);  // an integer is a number of seconds too
  EXPECT_EQ(t->faults[2].kind, "kill-site");
  EXPECT_FALSE(t->faults[3].restarts());  // no restart_after_s: stays down
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(t->faults[static_cast<size_t>(i)].graceful()) << i;  // SIGKILL
  const FaultSpec& e = t->faults[4];
  EXPECT_EQ(e.kind, "stop-site");
  EXPECT_TRUE(e.graceful());  // SIGTERM, SIGKILL only after the stop grace
  EXPECT_EQ(e.shard, -1);
  EXPECT_DOUBLE_EQ(e.restart_after_s, 1.5);
  EXPECT_EQ(t->FaultClocks(0), (std::vector<int64_t>{10, 50, 99}));
  EXPECT_EQ(t->FaultClocks(1), (std::vector<int64_t>{30, 60}));
}

TEST(FaultTopologyTest, UnknownKindIsNamed) {
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-dc\"\nsite = \"eu-west-1\"\nat_clock = 1\n"),
              HasSubstr("t.toml:18: faults[0].kind must be \"kill-site\", \"kill-shard\", \"stop-site\" or "
                        "\"wipe-disk\", got \"kill-dc\""));
  EXPECT_THAT(ErrorOf("[[faults]]\nsite = \"eu-west-1\"\nat_clock = 1\n"),
              HasSubstr("t.toml:17: faults[0].kind is required"));
}

TEST(FaultTopologyTest, UnknownSiteIsNamedWithTheSites) {
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"mars-1\"\nat_clock = 1\n"),
              HasSubstr("t.toml:19: faults[0].site 'mars-1' is not a site (sites: us-east-1, eu-west-1)"));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nat_clock = 1\n"),
              HasSubstr("faults[0].site is required"));
}

TEST(FaultTopologyTest, ShardOutOfRangeMissingOrMisplaced) {
  const std::string second_entry =
      "[[faults]]\nkind = \"kill-site\"\nsite = \"eu-west-1\"\nat_clock = 1\n";
  EXPECT_THAT(ErrorOf(second_entry + "[[faults]]\nkind = \"kill-shard\"\nsite = \"eu-west-1\"\nshard = 1\n"
                                     "at_clock = 1\n"),
              HasSubstr("t.toml:24: faults[1].shard is out of range: site eu-west-1 has shards 0..0, got 1"));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-shard\"\nsite = \"us-east-1\"\nshard = -1\nat_clock = 1\n"),
              HasSubstr("faults[0].shard is out of range"));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-shard\"\nsite = \"us-east-1\"\nat_clock = 1\n"),
              HasSubstr("faults[0].shard is required for kind \"kill-shard\""));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nshard = 0\nat_clock = 1\n"),
              HasSubstr("faults[0].shard is only for kind \"kill-shard\""));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"stop-site\"\nsite = \"us-east-1\"\nshard = 0\nat_clock = 1\n"),
              HasSubstr("faults[0].shard is only for kind \"kill-shard\" (\"stop-site\" hits every shard"));
}

TEST(FaultTopologyTest, AtClockMissingNegativeOrBeyondTheClocks) {
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\n"),
              HasSubstr("t.toml:17: faults[0].at_clock is required"));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nat_clock = -5\n"),
              HasSubstr("t.toml:20: faults[0].at_clock must be >= 0, got -5"));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nat_clock = 100\n"),
              HasSubstr("faults[0].at_clock is beyond the training clocks: 100 >= training.clocks = 100"));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nat_clock = 2.5\n"),
              HasSubstr("faults[0].at_clock must be an integer"));
  EXPECT_TRUE(Parse("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nat_clock = 99\n").ok());
  EXPECT_TRUE(Parse("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nat_clock = 0\n").ok());
}

TEST(FaultTopologyTest, NegativeRestartDelayIsRefused) {
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nat_clock = 1\n"
                      "restart_after_s = -0.5\n"),
              HasSubstr("t.toml:21: faults[0].restart_after_s must be in 0..86400 seconds"));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nat_clock = 1\n"
                      "restart_after_s = \"soon\"\n"),
              HasSubstr("faults[0].restart_after_s must be a number"));
}

TEST(FaultTopologyTest, WipeDiskIsForOneSiteTopologies) {
  constexpr char kOneSite[] = R"(
[training]
clocks = 100
[storage]
data_dir = "data"
[[sites]]
name = "local"
shards = 2
workers = 2
)";
  Result<Topology> t = Parse("[[faults]]\nkind = \"wipe-disk\"\nsite = \"local\"\nat_clock = 60\nrestart_after_s = 0.5\n",
                             kOneSite);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->faults[0].kind, "wipe-disk");
  // In a multi-site run the wiped site bootstraps from its peers (they
  // take its old contributions back and stream theirs to it afresh).
  Result<Topology> multi = Parse("[[faults]]\nkind = \"wipe-disk\"\nsite = \"eu-west-1\"\nat_clock = 1\nrestart_after_s = 1\n");
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  EXPECT_EQ(multi->faults[0].kind, "wipe-disk");
}

TEST(FaultTopologyTest, WipeDiskNeedsPersistenceAndARestart) {
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"wipe-disk\"\nsite = \"local\"\nat_clock = 1\nrestart_after_s = 1\n",
                      kInMemory),
              HasSubstr("faults[0].kind \"wipe-disk\" needs persistent shards"));
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"wipe-disk\"\nsite = \"us-east-1\"\nat_clock = 1\n"),
              HasSubstr("faults[0].restart_after_s is required for kind \"wipe-disk\""));
}

TEST(FaultTopologyTest, RestartsWithoutStorageAreRefused) {
  for (const char* kind : {"kill-site", "kill-shard", "stop-site"}) {
    std::string entry = std::string("[[faults]]\nkind = \"") + kind + "\"\nsite = \"local\"\n" +
                        (std::string(kind) == "kill-shard" ? "shard = 0\n" : "") + "at_clock = 1\n";
    const std::string error = ErrorOf(entry + "restart_after_s = 1\n", kInMemory);
    EXPECT_THAT(error, HasSubstr("faults[0].restart_after_s would restart shards that keep their state in memory"));
    EXPECT_THAT(error, HasSubstr("enable storage ([storage] data_dir"));
    // Staying down loses nothing that matters: allowed without storage.
    EXPECT_TRUE(Parse(entry, kInMemory).ok()) << kind;
  }
}

TEST(FaultTopologyTest, UnknownKeysAndNonTablesAreRefused) {
  EXPECT_THAT(ErrorOf("[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\nat_clock = 1\nrestart = 1\n"),
              HasSubstr("t.toml:21: faults[0].restart is not a known key"));
  // (Top-level keys go before the first table.)
  Result<Topology> t = ParseTopology("faults = 3\n" + std::string(kBase), "t.toml");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("t.toml:1: faults must be an array of tables"));
  t = ParseTopology("faults = [1]\n" + std::string(kBase), "t.toml");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("faults[0] must be a table"));
}

TEST(FaultTopologyTest, NegativeValuesOfSignedFieldsStillParse) {
  // A signed key holding a negative number is in range (staleness -1 = async).
  Result<Topology> t = ParseTopology("[training]\nstaleness = -1\n[[sites]]\nname = \"a\"\n", "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->staleness, -1);
}

TEST(FaultTopologyTest, WorkersRetryForTheWindowAndRestartingFaultsStretchItPastTheDelay) {
  Result<Topology> none = Parse("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(BuildClientOptions(*none, 0).retry_window_ms, 300000);  // minutes: a supervisor's restart
  EXPECT_EQ(BuildClientOptions(*none, 0).max_attempts, 0);
  const std::string shorter_text = "[training]\nclocks = 100\nretry_window_ms = 1000\n[storage]\ndata_dir = \"d\"\n"
                                   "[[sites]]\nname = \"us-east-1\"\n";
  Result<Topology> shorter = ParseTopology(shorter_text, "t.toml");
  ASSERT_TRUE(shorter.ok()) << shorter.status().ToString();
  EXPECT_EQ(BuildClientOptions(*shorter, 0).retry_window_ms, 1000);
  Result<Topology> t = ParseTopology(shorter_text + "[[faults]]\nkind = \"kill-site\"\nsite = \"us-east-1\"\n"
                                     "at_clock = 1\nrestart_after_s = 5\n", "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GE(BuildClientOptions(*t, 0).retry_window_ms, 5000 + kRestartRetryMarginMs);
}

}  // namespace
}  // namespace geops::config
