// Real crashes: a child process serves updates into a RocksDB-backed shard
// (or commits to a store) and is killed with SIGKILL at a random moment;
// the test then reopens the directory and checks that every acknowledged
// batch is there exactly once and that no commit was torn. Several rounds
// run over the same directory, so recovery itself is crashed into too.
//
// The random kill times come from a seed printed on failure; set
// GEOPS_CRASH_SEED to replay one. Half the rounds count the time from the
// child's first line, so that a slowly started child still works for a
// while before it dies; the others from its start.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "datacenter/shard.h"
#include "storage/rocksdb_shard_store.h"
#include "tests/storage/counter_workload.h"
#include "tests/storage/crash_model.h"
#include "tests/storage/storage_test_util.h"

extern char** environ;

namespace geops::storage {
namespace {

using testing::TempDir;

uint64_t Seed() {
  const char* env = std::getenv("GEOPS_CRASH_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device()();
}

// Starts CRASH_CHILD with `args`, lets it run `run_ms`, kills it with
// SIGKILL and returns everything it wrote to stdout. `after_first_line`:
// run_ms counts from the child's first line (its first acknowledgement or
// commit, 10 s at most) rather than from its start, so that the kill falls
// while it works even on a machine that starts it slowly; otherwise the
// kill may fall into its start, recovery included.
std::string RunAndKill(const std::vector<std::string>& args, int run_ms, bool after_first_line) {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<std::string> all = {CRASH_CHILD};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, CRASH_CHILD, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  EXPECT_EQ(rc, 0) << "cannot start " << CRASH_CHILD;
  std::string out;
  std::mutex mu;
  std::condition_variable line_cv;
  bool line = false;
  std::thread reader([&] {  // drain the pipe so the child never blocks on it
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      std::lock_guard<std::mutex> lock(mu);
      out.append(buf, static_cast<size_t>(n));
      if (!line && out.find('\n') != std::string::npos) {
        line = true;
        line_cv.notify_all();
      }
    }
  });
  if (rc == 0) {
    if (after_first_line) {
      std::unique_lock<std::mutex> lock(mu);
      line_cv.wait_for(lock, std::chrono::seconds(10), [&] { return line; });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(run_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the child stopped before it was killed (status " << status << ")";
  }
  reader.join();
  ::close(fds[0]);
  return out;
}

// Rounds of: run the counter workload in a child, kill it, reopen the shard
// here and check every acknowledgement of every round so far.
void KillShardRepeatedly(Durability durability, int rounds, int workers) {
  const uint64_t seed = Seed();
  SCOPED_TRACE("GEOPS_CRASH_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const std::string dir = tmp.Sub("site-shard-1");
  const ModelSpec spec = testing::CounterModel();
  const ShardOptions options = testing::CrashShardOptions(workers);
  std::vector<testing::Ack> acks;
  // Up to ten more rounds where a loaded machine acknowledged too little.
  for (int round = 0; round < rounds || (acks.size() <= 20 && round < rounds + 10); ++round) {
    const int run_ms = 150 + static_cast<int>(rng() % 500);
    const bool after_first_line = rng() % 2 == 0;
    const std::string out = RunAndKill(
        {"shard", dir, std::to_string(workers), std::string(DurabilityName(durability))}, run_ms, after_first_line);
    const std::vector<testing::Ack> got = testing::AckLog::Parse(out);
    acks.insert(acks.end(), got.begin(), got.end());

    auto store = OpenRocksDbShardStore(testing::CrashStorageOptions(dir, durability),
                                       ShardStoreSpec::Of(spec, options));
    ASSERT_TRUE(store.ok()) << "round " << round << ": " << store.status().ToString();
    auto shard = datacenter::Shard::Create(spec, options, store->get());
    ASSERT_TRUE(shard.ok()) << "round " << round << ": " << shard.status().ToString();
    EXPECT_EQ(testing::VerifyRecovered(shard->get(), acks, workers), "")
        << "round " << round << " (killed after " << run_ms << " ms, " << got.size() << " acks)";
  }
  EXPECT_GT(acks.size(), 20u) << "the child acknowledged too little for the test to mean much";
}

TEST(CrashRestartTest, SyncShardKilledAtRandomLosesNoAcknowledgedBatchAndAppliesNoneTwice) {
  KillShardRepeatedly(Durability::kSync, 4, 3);
}

TEST(CrashRestartTest, AsyncShardKilledAtRandomLosesNoAcknowledgedBatchAndAppliesNoneTwice) {
  KillShardRepeatedly(Durability::kAsync, 3, 3);
}

// Commit k sets every chunk to k: after a kill the store must hold one whole
// commit, at least the last one acknowledged.
void KillStoreMidCommit(Durability durability, int rounds) {
  const uint64_t seed = Seed();
  SCOPED_TRACE("GEOPS_CRASH_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const std::string dir = tmp.Sub("store");
  const ShardStoreSpec spec = ShardStoreSpec::Of(testing::BigModel(), testing::CrashShardOptions(1));
  uint64_t acked = 0;
  uint64_t commits = 0;
  // A loaded machine may start the child too slowly for `rounds` kills to
  // find more than a few commits: up to ten more rounds then.
  for (int round = 0; round < rounds || (commits <= 3 && round < rounds + 10); ++round) {
    const int run_ms = 150 + static_cast<int>(rng() % 600);
    const bool after_first_line = rng() % 2 == 0;
    const std::string out =
        RunAndKill({"store", dir, std::string(DurabilityName(durability))}, run_ms, after_first_line);
    for (size_t at = out.find("C "); at != std::string::npos; at = out.find("C ", at + 1)) {
      if (out.find('\n', at) != std::string::npos) acked = std::max<uint64_t>(acked, std::stoull(out.substr(at + 2)));
    }
    auto store = OpenRocksDbShardStore(testing::CrashStorageOptions(dir, durability), spec);
    ASSERT_TRUE(store.ok()) << "round " << round << ": " << store.status().ToString();
    Result<ShardState> state = (*store)->Load();
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    commits = state->commits;
    EXPECT_GE(commits, acked) << "round " << round << ": an acknowledged commit was lost";
    EXPECT_EQ(state->shard_clock, static_cast<Clock>(commits));
    if (commits == 0) continue;
    ASSERT_EQ(state->chunks.size(), spec.chunks.size());
    for (size_t i = 0; i < state->chunks.size(); ++i) {
      for (float v : state->chunks.values(i)) {
        ASSERT_EQ(v, static_cast<float>(commits)) << "round " << round << ": commit " << commits << " is torn";
      }
    }
  }
  EXPECT_GT(commits, 3u) << "the child committed too little for the test to mean much";
}

TEST(CrashRestartTest, SyncStoreKilledMidCommitKeepsCommitsWhole) { KillStoreMidCommit(Durability::kSync, 3); }

TEST(CrashRestartTest, OffStoreKilledMidCommitKeepsCommitsWhole) { KillStoreMidCommit(Durability::kOff, 3); }

}  // namespace
}  // namespace geops::storage
