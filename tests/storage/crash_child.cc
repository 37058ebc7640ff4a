// storage_crash_child: the process the crash tests kill with SIGKILL.
//
//   storage_crash_child shard DIR WORKERS DURABILITY
//     serves the counter workload (tests/storage/counter_workload.h) from
//     WORKERS threads into a RocksDB-backed shard in DIR, writing each
//     acknowledgement to stdout as it happens;
//   storage_crash_child store DIR DURABILITY
//     commits to a RocksDB store in DIR over and over, commit k setting every
//     chunk to k, and writes "C k" to stdout after each.
// It runs until killed. Exit code 2 for bad arguments, 1 when a call fails.
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "datacenter/shard.h"
#include "storage/rocksdb_shard_store.h"
#include "tests/storage/counter_workload.h"
#include "tests/storage/crash_model.h"

namespace geops::storage::testing {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "storage_crash_child: %s\n", s.ToString().c_str());
  return 1;
}

int ServeShard(const std::string& dir, int workers, Durability durability) {
  const ModelSpec spec = CounterModel();
  const ShardOptions options = CrashShardOptions(workers);
  auto store = OpenRocksDbShardStore(CrashStorageOptions(dir, durability), ShardStoreSpec::Of(spec, options));
  if (!store.ok()) return Fail(store.status());
  auto shard = datacenter::Shard::Create(spec, options, store->get());
  if (!shard.ok()) return Fail(shard.status());
  AckLog log(STDOUT_FILENO);
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (WorkerId w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      Status s = DriveCounterWorker(shard->get(), w, workers, &stop, &log);
      if (!s.ok()) {
        Fail(s);
        failed = true;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return failed ? 1 : 0;
}

int CommitForever(const std::string& dir, Durability durability) {
  const ModelSpec spec = BigModel();
  const ShardOptions options = CrashShardOptions(1);
  const ShardStoreSpec store_spec = ShardStoreSpec::Of(spec, options);
  auto store = OpenRocksDbShardStore(CrashStorageOptions(dir, durability), store_spec);
  if (!store.ok()) return Fail(store.status());
  auto state = (*store)->Load();
  if (!state.ok()) return Fail(state.status());
  ShardCommit commit;
  for (uint64_t k = state->commits + 1;; ++k) {
    commit.Clear();
    for (const ChunkExtent& c : store_spec.chunks) {
      float* out = commit.chunks.Append(c.key, c.elements);
      std::fill(out, out + c.elements, static_cast<float>(k));
    }
    commit.shard_clock = static_cast<Clock>(k);
    Status s = (*store)->Commit(commit);
    if (!s.ok()) return Fail(s);
    const std::string line = "C " + std::to_string(k) + "\n";
    if (::write(STDOUT_FILENO, line.data(), line.size()) < 0) return 1;
  }
}

}  // namespace
}  // namespace geops::storage::testing

int main(int argc, char** argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
  using geops::storage::testing::CommitForever;
  using geops::storage::testing::ServeShard;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "shard" && argc == 5) {
    auto d = geops::ParseDurability(argv[4]);
    if (!d.ok()) return 2;
    return ServeShard(argv[2], std::atoi(argv[3]), *d);
  }
  if (mode == "store" && argc == 4) {
    auto d = geops::ParseDurability(argv[3]);
    if (!d.ok()) return 2;
    return CommitForever(argv[2], *d);
  }
  std::fprintf(stderr, "usage: storage_crash_child shard DIR WORKERS DURABILITY | store DIR DURABILITY\n");
  return 2;
}
