// The [storage] table of a topology: where shards persist and how durably.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/topology.h"

namespace geops::cli {
namespace {

using ::testing::HasSubstr;

constexpr char kSites[] = R"(
[[sites]]
name = "us-east-1"
shards = 2
)";

TEST(StorageTopologyTest, ShardsStayInMemoryUnlessADataDirIsGiven) {
  Result<config::Topology> t = config::ParseTopology(kSites, "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->storage_dir, "");
  EXPECT_EQ(t->durability, "sync");
  EXPECT_EQ(t->ShardDataDir(0, 1, "/results"), "");
}

TEST(StorageTopologyTest, EachShardGetsItsOwnDirectory) {
  Result<config::Topology> t = config::ParseTopology(std::string("[storage]\ndata_dir = \"data\"\ndurability = \"async\"\n") + kSites,
                                     "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->durability, "async");
  EXPECT_EQ(t->ShardDataDir(0, 1, "/results"), "/results/data/us-east-1-shard-1");
  EXPECT_EQ(t->ShardDataDir(0, 0, ""), "data/us-east-1-shard-0");
  t->storage_dir = "/var/lib/geops";
  EXPECT_EQ(t->ShardDataDir(0, 0, "/results"), "/var/lib/geops/us-east-1-shard-0");
}

TEST(StorageTopologyTest, RefusesAnUnknownDurabilityOrKey) {
  Result<config::Topology> t = config::ParseTopology(std::string("[storage]\ndurability = \"fast\"\n") + kSites, "t.toml");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("t.toml:2: storage.durability must be \"sync\", \"async\" or \"off\""));
  t = config::ParseTopology(std::string("[storage]\ndir = \"x\"\n") + kSites, "t.toml");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("storage.dir is not a known key"));
}

}  // namespace
}  // namespace geops::cli
