// storage_tick: what persistence costs a shard per clock tick, for each
// durability, next to the same shard kept in memory.
//
// Two models, shard 0 of 2 shards each: the default MLP (784-512-256-10,
// 535k parameters, 16 KiB chunks) and a 16M-parameter model (one 4096x4096
// table). Two measurements per model:
//
//  1. ticks: --workers threads each run --ticks clocks of Update (every
//     chunk of the shard, dense) + AdvanceClock against a Shard, with no
//     store ("memory") and over a RocksDB store with durability sync, async
//     and off. Reported: time per clock tick (wall time until every worker
//     has done all its clocks, / clocks) and its ratio to memory; commits
//     per tick (group commit shares one among concurrent callers; off counts
//     the commit still pending at the end); mean time per commit; and the
//     store's write throughput (chunk payload committed / time in Commit).
//  2. commits: --commits commits of the whole shard straight to the store
//     (no Shard): latency p50 / p99 and payload MB/s.
// MB = 1e6 bytes of float32 payload. Stores live in fresh directories under
// --dir (default: the system temp directory), removed at the end.
//
// Each tick figure is the median over --rounds rounds; a round runs every
// configuration of a model once, interleaved, so that a machine shared with
// other work slows them alike. The first kWarmupTicks clocks of each run are
// not timed.
//
// Usage: storage_tick [--rounds=3] [--workers=4] [--ticks=40] [--big_ticks=6]
//                     [--commits=30] [--big_commits=6] [--dir=PATH]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/model_spec.h"
#include "common/options.h"
#include "common/shard_store.h"
#include "datacenter/shard.h"
#include "storage/rocksdb_shard_store.h"

namespace geops::bench {
namespace {

using Seconds = std::chrono::duration<double>;

constexpr int kWarmupTicks = 2;

struct Args {
  int rounds = 3;
  int workers = 4;
  int ticks = 40;
  int big_ticks = 6;
  int commits = 30;
  int big_commits = 6;
  std::string dir = std::filesystem::temp_directory_path().string();
};

struct Model {
  std::string name;
  ModelSpec spec;
  int ticks;
  int commits;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

ShardOptions Options(int workers) {
  ShardOptions o;
  o.shard_id = 0;
  o.num_shards = 2;
  o.num_workers = workers;
  o.worker_lease_ms = 600000;
  o.max_commit_wait_ms = 600000;
  return o;
}

std::string FreshDir(const Args& args, const std::string& what) {
  const std::string dir = args.dir + "/geops-storage-tick-" + std::to_string(::getpid()) + "-" + what;
  std::filesystem::remove_all(dir);
  return dir;
}

struct TickResult {
  double tick_ms = 0;       // wall time of all ticks / ticks
  double commits_per_tick = 0;
  double commit_ms = 0;     // mean
  double store_mb_s = 0;    // payload / time in Commit
  bool ok = false;
};

// Runs the tick loop; `durability` unset: no store.
TickResult RunTicks(const Args& args, const Model& m, const Durability* durability) {
  TickResult r;
  const ShardOptions o = Options(args.workers);
  std::unique_ptr<ShardStore> store;
  std::string dir;
  if (durability != nullptr) {
    dir = FreshDir(args, std::string(DurabilityName(*durability)));
    StorageOptions so;
    so.data_dir = dir;
    so.durability = *durability;
    auto opened = storage::OpenRocksDbShardStore(so, ShardStoreSpec::Of(m.spec, o));
    if (!opened.ok()) {
      std::fprintf(stderr, "storage_tick: %s\n", opened.status().ToString().c_str());
      return r;
    }
    store = std::move(opened).value();
  }
  auto shard = datacenter::Shard::Create(m.spec, o, store.get());
  if (!shard.ok()) {
    std::fprintf(stderr, "storage_tick: %s\n", shard.status().ToString().c_str());
    return r;
  }
  datacenter::Shard* s = shard->get();
  const std::vector<ChunkKey> keys = m.spec.ChunksOfShard(0, 2);
  int64_t elements = 0;
  for (const ChunkKey k : keys) elements += m.spec.ChunkElements(k);
  std::atomic<bool> failed{false};
  auto run = [&](int from, int to) {
    std::vector<std::thread> threads;
    for (WorkerId w = 0; w < args.workers; ++w) {
      threads.emplace_back([&, w] {
        std::vector<float> batch(static_cast<size_t>(elements), 1e-4f * static_cast<float>(w + 1));
        if (from == 0 && !s->RegisterWorker(w, 0, "").ok()) failed = true;
        for (int c = from; c < to && !failed; ++c) {
          if (!s->Update(w, c, keys, batch).ok() || !s->AdvanceClock(w, c + 1, false).ok()) failed = true;
        }
      });
    }
    for (std::thread& t : threads) t.join();
  };
  run(0, kWarmupTicks);
  const ShardStatus before = s->GetStatus();
  const auto start = std::chrono::steady_clock::now();
  run(kWarmupTicks, kWarmupTicks + m.ticks);
  const double wall = Seconds(std::chrono::steady_clock::now() - start).count();
  if (!s->Flush(Deadline::InMs(600000)).ok()) failed = true;  // off: the commit still pending
  const ShardStatus after = s->GetStatus();
  shard->reset();
  store.reset();
  if (!dir.empty()) std::filesystem::remove_all(dir);
  if (failed) {
    std::fprintf(stderr, "storage_tick: a call failed\n");
    return r;
  }
  r.tick_ms = wall / m.ticks * 1e3;
  const double commits = static_cast<double>(after.store_commits - before.store_commits);
  const double seconds = after.store_commit_seconds - before.store_commit_seconds;
  const double bytes = static_cast<double>(after.store_bytes_committed - before.store_bytes_committed);
  r.commits_per_tick = commits / m.ticks;
  r.commit_ms = commits > 0 ? seconds / commits * 1e3 : 0;
  r.store_mb_s = seconds > 0 ? bytes / seconds / 1e6 : 0;
  r.ok = true;
  return r;
}

struct CommitResult {
  double p50_ms = 0, p99_ms = 0, mb_s = 0;
  bool ok = false;
};

CommitResult RunCommits(const Args& args, const Model& m, Durability durability) {
  CommitResult r;
  const ShardOptions o = Options(1);
  const ShardStoreSpec spec = ShardStoreSpec::Of(m.spec, o);
  const std::string dir = FreshDir(args, "commits");
  StorageOptions so;
  so.data_dir = dir;
  so.durability = durability;
  auto store = storage::OpenRocksDbShardStore(so, spec);
  if (!store.ok()) {
    std::fprintf(stderr, "storage_tick: %s\n", store.status().ToString().c_str());
    return r;
  }
  ShardCommit commit;
  int64_t bytes = 0;
  for (const ChunkExtent& c : spec.chunks) {
    float* out = commit.chunks.Append(c.key, c.elements);
    std::fill(out, out + c.elements, 0.5f);
    bytes += c.elements * int64_t{sizeof(float)};
  }
  std::vector<double> ms;
  double total = 0;
  for (int i = 0; i < m.commits; ++i) {
    commit.shard_clock = i;
    const auto t0 = std::chrono::steady_clock::now();
    if (!(*store)->Commit(commit).ok()) return r;
    const double s = Seconds(std::chrono::steady_clock::now() - t0).count();
    ms.push_back(s * 1e3);
    total += s;
  }
  store->reset();
  std::filesystem::remove_all(dir);
  r.p50_ms = Percentile(ms, 0.5);
  r.p99_ms = Percentile(ms, 0.99);
  r.mb_s = static_cast<double>(bytes) * m.commits / total / 1e6;
  r.ok = true;
  return r;
}

double ShardMb(const ModelSpec& spec) {
  int64_t elements = 0;
  for (const ChunkKey k : spec.ChunksOfShard(0, 2)) elements += spec.ChunkElements(k);
  return static_cast<double>(elements) * sizeof(float) / 1e6;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--rounds") a.rounds = std::max(1, std::atoi(value.c_str()));
    else if (key == "--workers") a.workers = std::atoi(value.c_str());
    else if (key == "--ticks") a.ticks = std::atoi(value.c_str());
    else if (key == "--big_ticks") a.big_ticks = std::atoi(value.c_str());
    else if (key == "--commits") a.commits = std::atoi(value.c_str());
    else if (key == "--big_commits") a.big_commits = std::atoi(value.c_str());
    else if (key == "--dir") a.dir = value;
    else {
      std::fprintf(stderr, "storage_tick: unknown argument %s\n", arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

int Main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  std::vector<TableSpec> mlp = {{"fc1.weight", 784, 512, InitKind::kUniform, 0.08f},
                                {"fc1.bias", 1, 512},
                                {"fc2.weight", 512, 256, InitKind::kUniform, 0.1f},
                                {"fc2.bias", 1, 256},
                                {"fc3.weight", 256, 10, InitKind::kUniform, 0.15f},
                                {"fc3.bias", 1, 10}};
  std::vector<Model> models;
  models.push_back({"mlp-535k", std::move(ModelSpec::Create(mlp, 16 * 1024, 1)).value(), args.ticks, args.commits});
  models.push_back({"16M", std::move(ModelSpec::Create({{"w", 4096, 4096}}, 16 * 1024, 1)).value(), args.big_ticks,
                    args.big_commits});
  std::printf("storage_tick: %ld cpus (%s), %d workers, stores under %s\n", sysconf(_SC_NPROCESSORS_ONLN),
              CpuModel().c_str(), args.workers, args.dir.c_str());
  const Durability modes[] = {Durability::kSync, Durability::kAsync, Durability::kOff};

  std::printf("\nper clock tick (%d workers each Update every chunk of shard 0/2 + AdvanceClock; median of %d rounds)\n",
              args.workers, args.rounds);
  std::printf("| model | params | shard MB | durability | ms/tick | vs memory | commits/tick | ms/commit | store MB/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Model& m : models) {
    const double shard_mb = ShardMb(m.spec);
    // rounds x {memory, sync, async, off}
    std::vector<std::vector<TickResult>> results(4);
    for (int round = 0; round < args.rounds; ++round) {
      results[0].push_back(RunTicks(args, m, nullptr));
      for (int i = 0; i < 3; ++i) results[i + 1].push_back(RunTicks(args, m, &modes[i]));
      for (const auto& r : results) {
        if (!r.back().ok) return 1;
      }
    }
    auto median = [](const std::vector<TickResult>& rs, double TickResult::*field) {
      std::vector<double> v;
      for (const TickResult& r : rs) v.push_back(r.*field);
      return Percentile(v, 0.5);
    };
    const double memory_ms = median(results[0], &TickResult::tick_ms);
    std::printf("| %s | %.2fM | %.1f | memory | %.2f | 1.00 | - | - | - |\n", m.name.c_str(),
                static_cast<double>(m.spec.total_elements()) / 1e6, shard_mb, memory_ms);
    for (int i = 0; i < 3; ++i) {
      const double tick_ms = median(results[i + 1], &TickResult::tick_ms);
      std::printf("| %s | %.2fM | %.1f | %s | %.2f | %.2f | %.2f | %.2f | %.0f |\n", m.name.c_str(),
                  static_cast<double>(m.spec.total_elements()) / 1e6, shard_mb,
                  std::string(DurabilityName(modes[i])).c_str(), tick_ms, tick_ms / memory_ms,
                  median(results[i + 1], &TickResult::commits_per_tick),
                  median(results[i + 1], &TickResult::commit_ms), median(results[i + 1], &TickResult::store_mb_s));
    }
    std::fflush(stdout);
  }

  std::printf("\nfull-shard commit straight to the store (no Shard)\n");
  std::printf("| model | shard MB | durability | p50 ms | p99 ms | MB/s |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Model& m : models) {
    const double shard_mb = ShardMb(m.spec);
    for (Durability d : modes) {
      const CommitResult c = RunCommits(args, m, d);
      if (!c.ok) return 1;
      std::printf("| %s | %.1f | %s | %.2f | %.2f | %.0f |\n", m.name.c_str(), shard_mb,
                  std::string(DurabilityName(d)).c_str(), c.p50_ms, c.p99_ms, c.mb_s);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace geops::bench

int main(int argc, char** argv) { return geops::bench::Main(argc, argv); }
