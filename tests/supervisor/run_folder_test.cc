// RunFolder: a results folder holds one run; another launch is refused,
// resumed or replaced, never mixed with it.
#include "supervisor/launch/run_folder.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "supervisor/launch/launch_wan.h"
#include "tests/common/scratch_files.h"

namespace geops::supervisor {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using test_files::ReadFile;

class RunFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_files::FreshTestDir("run_folder_test");
    out_ = dir_ + "/out";
    Result<config::Topology> t = config::ParseTopology(R"(
name = "t"
[model]
workload = "counter"
[training]
clocks = 5
[storage]
data_dir = "data"
[[sites]]
name = "a"
[[sites]]
name = "b"
)", "test");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    topology_ = *t;
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<std::unique_ptr<RunFolder>> Claim(RunFolderMode mode) {
    return RunFolder::Claim(out_, topology_, dir_ + "/t.toml", mode);
  }

  std::string dir_, out_;
  config::Topology topology_;
};

TEST_F(RunFolderTest, AnEmptyFolderIsTakenAndSaysWhichRunHoldsIt) {
  auto f = Claim(RunFolderMode::kNew);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const nlohmann::json record = nlohmann::json::parse(ReadFile(out_ + "/run.json"));
  EXPECT_EQ(record["run_id"], (*f)->run_id());
  EXPECT_EQ(record["state"], "running");
  EXPECT_EQ(record["topology"], dir_ + "/t.toml");
  ASSERT_TRUE((*f)->Finish("ok").ok());
  EXPECT_EQ(nlohmann::json::parse(ReadFile(out_ + "/run.json"))["state"], "ok");
}

TEST_F(RunFolderTest, ASecondLaunchWhileTheFirstRunsIsRefused) {
  auto first = Claim(RunFolderMode::kNew);
  ASSERT_TRUE(first.ok());
  for (RunFolderMode mode : {RunFolderMode::kNew, RunFolderMode::kResume, RunFolderMode::kReplace}) {
    auto second = Claim(mode);
    ASSERT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(second.status().message(), HasSubstr("in use by another geops launch"));
  }
  first->reset();  // the lock goes with it
  EXPECT_TRUE(Claim(RunFolderMode::kResume).ok());
}

TEST_F(RunFolderTest, FilesOfAnOlderRunWithoutARecordCountAsARun) {
  fs::create_directories(out_ + "/metrics");
  std::ofstream(out_ + "/metrics/a-worker-0.jsonl") << "{}\n";
  auto f = Claim(RunFolderMode::kNew);
  ASSERT_EQ(f.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(f.status().message(), HasSubstr("holds another run (metrics)"));
  auto resumed = Claim(RunFolderMode::kResume);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ((*resumed)->resumed_run(), "");
  EXPECT_THAT((*resumed)->note(), HasSubstr("resuming another run"));
}

TEST_F(RunFolderTest, ShardStoresOfTheTopologyCountAsARunAndReplaceDeletesThem) {
  fs::create_directories(out_ + "/data/a-shard-0");
  std::ofstream(out_ + "/data/a-shard-0/CURRENT") << "x";
  std::ofstream(out_ + "/notes.txt") << "the user's own file";
  auto f = Claim(RunFolderMode::kNew);
  ASSERT_EQ(f.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(f.status().message(), HasSubstr("data/a-shard-0"));
  auto replaced = Claim(RunFolderMode::kReplace);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_FALSE(fs::exists(out_ + "/data/a-shard-0"));
  EXPECT_TRUE(fs::exists(out_ + "/notes.txt")) << "only what a run writes is deleted";
  EXPECT_THAT((*replaced)->note(), HasSubstr("deleted"));
}

TEST_F(RunFolderTest, ResumeKeepsTheRunButNeverItsPeersFile) {
  std::string old_id;
  {
    auto f = Claim(RunFolderMode::kNew);
    ASSERT_TRUE(f.ok());
    old_id = (*f)->run_id();
    ASSERT_TRUE(WritePeersFile(topology_, out_, old_id, {{{0, 0}, "127.0.0.1:1"}, {{1, 0}, "127.0.0.1:2"}}).ok());
    fs::create_directories(out_ + "/data/a-shard-0");
    std::ofstream(out_ + "/data/a-shard-0/CURRENT") << "x";
    ASSERT_TRUE((*f)->Finish("failed").ok());
  }
  auto f = Claim(RunFolderMode::kResume);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->resumed_run(), old_id);
  EXPECT_NE((*f)->run_id(), old_id);
  EXPECT_THAT((*f)->note(), HasSubstr("resuming run " + old_id));
  EXPECT_FALSE(fs::exists(PeersFilePath(out_)));
  EXPECT_TRUE(fs::exists(out_ + "/data/a-shard-0/CURRENT"));
  EXPECT_EQ(nlohmann::json::parse(ReadFile(out_ + "/run.json"))["resumes"], old_id);
}

}  // namespace
}  // namespace geops::supervisor
