// pslite_bench: ps-lite's push, pull and push+pull throughput on loopback,
// measured the way experiments/bench/lan_throughput measures geops, so that
// the two can be read side by side (experiments/run_pslite_compare.sh).
//
// One binary for every ps-lite role (DMLC_ROLE = scheduler, server, worker),
// as ps-lite's tests/test_kv_app*.cc: one server, DMLC_NUM_WORKER workers.
// The server keeps one float32 vector per key, adds every push into it
// element-wise and answers a pull with a copy of it (ps-lite's
// KVServerDefaultHandle<float> does the same for one float per key; this
// handle does it for a key holding a vector). Every worker works on the same
// key 0, which holds S bytes of float32 (--size_mib), as every lan_throughput
// client updates and reads the whole table of its shard.
//
// Each worker runs --rounds rounds; a round runs the three modes one after
// the other, each for --seconds after a two-call warm-up:
//   push       kv.Wait(kv.Push(keys, vals))
//   pull       kv.Wait(kv.Pull(keys, &out))
//   push+pull  a push, then a pull
// All workers start a mode together (ps::Postoffice barrier of the worker
// group before and after each measured run). Figures: payload GB/s, 1 GB =
// 1e9 bytes, payload bytes crossing the socket in both directions, summed
// over the workers (push = S per call, pull = S, push+pull = 2S per pair),
// divided by the common wall time (the longest worker's, from the shared
// start); ms = wall time per call (push+pull: per pair), as lan_throughput's
// Measure computes it. Reported: the median round of each mode.
//
// Worker rank 0 prints one Markdown row
//   | payload | workers | push GB/s | push ms | pull GB/s | push+pull GB/s | push+pull ms |
// (--header prints the table's header first); the other roles print nothing
// on stdout. Per-round figures go to stderr with --verbose.
//
// Usage: DMLC_ROLE=... DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=W DMLC_PS_ROOT_URI=127.0.0.1
//        DMLC_PS_ROOT_PORT=PORT DMLC_NODE_HOST=127.0.0.1 \
//          pslite_bench [--size_mib=1] [--seconds=1] [--rounds=7] [--header] [--verbose]
// (the flags can also come from PSLITE_BENCH_SIZE_MIB, PSLITE_BENCH_SECONDS,
// PSLITE_BENCH_ROUNDS; flags win).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/ps.h"

namespace {

struct Config {
  double size_mib = 1;
  double seconds = 1.0;
  int rounds = 7;
  bool header = false;
  bool verbose = false;
};

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: pslite_bench [--size_mib=1] [--seconds=1] [--rounds=7] [--header] [--verbose]\n"
               "       (role and cluster from ps-lite's DMLC_* environment variables)\n");
  std::exit(2);
}

Config ParseArgs(int argc, char** argv) {
  Config cfg;
  if (const char* e = std::getenv("PSLITE_BENCH_SIZE_MIB")) cfg.size_mib = std::atof(e);
  if (const char* e = std::getenv("PSLITE_BENCH_SECONDS")) cfg.seconds = std::atof(e);
  if (const char* e = std::getenv("PSLITE_BENCH_ROUNDS")) cfg.rounds = std::atoi(e);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    char* end = nullptr;
    if (key == "--size_mib") {
      cfg.size_mib = std::strtod(value.c_str(), &end);
    } else if (key == "--seconds") {
      cfg.seconds = std::strtod(value.c_str(), &end);
    } else if (key == "--rounds") {
      cfg.rounds = static_cast<int>(std::strtol(value.c_str(), &end, 10));
    } else if (key == "--header" && value.empty()) {
      cfg.header = true;
    } else if (key == "--verbose" && value.empty()) {
      cfg.verbose = true;
    } else {
      Usage();
    }
    if (end != nullptr && (end == value.c_str() || *end != '\0')) Usage();
  }
  const double floats = cfg.size_mib * (1 << 20) / sizeof(float);
  if (!(cfg.size_mib > 0) || floats != static_cast<double>(static_cast<long long>(floats)) ||
      !(cfg.seconds > 0) || cfg.rounds < 1) {
    Usage();
  }
  return cfg;
}

// The server's store: one float vector per key. A push adds its values into
// the key's vector (created as zeros on the first push), a pull answers with
// a copy of it. The copy keeps the reply apart from the store: ps-lite's zmq
// van sends the reply's buffer without copying it, after the handle returns.
struct VectorSumHandle {
  void operator()(const ps::KVMeta& req_meta, const ps::KVPairs<float>& req,
                  ps::KVServer<float>* server) {
    const size_t n = req.keys.size();
    std::vector<size_t> lens(n);
    if (n > 0 && req_meta.push) {
      if (req.lens.empty()) {
        CHECK_EQ(req.vals.size() % n, 0u);
        std::fill(lens.begin(), lens.end(), req.vals.size() / n);
      } else {
        for (size_t i = 0; i < n; ++i) lens[i] = static_cast<size_t>(req.lens[i]);
      }
    }
    ps::KVPairs<float> res;
    if (req_meta.pull) {
      size_t total = 0;
      for (size_t i = 0; i < n; ++i) total += store[req.keys[i]].size();
      res.keys = req.keys;
      res.vals.resize(total);
      if (n > 1) res.lens.resize(n);
    }
    size_t in = 0;
    size_t out = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<float>& v = store[req.keys[i]];
      if (req_meta.push) {
        if (v.empty()) v.assign(lens[i], 0.0f);
        CHECK_EQ(v.size(), lens[i]) << "key " << req.keys[i] << " pushed with another length";
        const float* src = req.vals.data() + in;
        float* dst = v.data();
        for (size_t j = 0; j < lens[i]; ++j) dst[j] += src[j];
        in += lens[i];
      }
      if (req_meta.pull) {
        if (!v.empty()) std::memcpy(res.vals.data() + out, v.data(), v.size() * sizeof(float));
        if (n > 1) res.lens[i] = static_cast<int>(v.size());
        out += v.size();
      }
    }
    server->Response(req_meta, res);
  }
  std::unordered_map<ps::Key, std::vector<float>> store;
};

using Clock = std::chrono::steady_clock;

enum Mode { kPush = 0, kPull = 1, kPushPull = 2, kModes = 3 };
const char* const kModeNames[kModes] = {"push", "pull", "push+pull"};

// One worker's part of a measured run.
struct Part {
  double calls = 0;    // steps done (push+pull: pairs)
  double elapsed = 0;  // seconds from the shared start to the end of its last step
};

struct Cell {
  double gbps = 0;
  double ms = 0;
};

void WorkerBarrier() { ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup); }

void RunWorker(const Config& cfg) {
  ps::KVWorker<float> kv(0, 0);
  const int workers = ps::NumWorkers();
  const int rank = ps::MyRank();
  const size_t floats = static_cast<size_t>(cfg.size_mib * (1 << 20) / sizeof(float));
  const double bytes = static_cast<double>(floats * sizeof(float));
  const std::vector<ps::Key> data_key = {0};
  const std::vector<ps::Key> stats_key = {1};
  std::vector<float> vals(floats, 1e-6f);
  std::vector<float> out(floats, 0.0f);

  auto push = [&] { kv.Wait(kv.Push(data_key, vals)); };
  auto pull = [&] {
    kv.Wait(kv.Pull(data_key, &out));
    CHECK_EQ(out.size(), floats);
  };
  auto step = [&](int mode) {
    if (mode == kPush) {
      push();
    } else if (mode == kPull) {
      pull();
    } else {
      push();
      pull();
    }
  };

  // parts[(round * kModes + mode) * workers + rank]: this worker fills its own.
  std::vector<float> stats(static_cast<size_t>(cfg.rounds) * kModes * workers * 2, 0.0f);
  push();  // creates the key on the server
  for (int round = 0; round < cfg.rounds; ++round) {
    for (int mode = 0; mode < kModes; ++mode) {
      WorkerBarrier();
      for (int i = 0; i < 2; ++i) step(mode);
      WorkerBarrier();
      const Clock::time_point start = Clock::now();
      const Clock::time_point stop = start + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(cfg.seconds));
      Part part;
      Clock::time_point now = start;
      while (now < stop) {
        step(mode);
        ++part.calls;
        now = Clock::now();
      }
      part.elapsed = std::chrono::duration<double>(now - start).count();
      const size_t slot = ((static_cast<size_t>(round) * kModes + mode) * workers + rank) * 2;
      stats[slot] = static_cast<float>(part.calls);
      stats[slot + 1] = static_cast<float>(part.elapsed);
    }
    // The store holds the sum of every push: all its values are alike.
    pull();
    CHECK(out.front() > 0 && out.front() == out.back()) << "unexpected store values";
  }
  WorkerBarrier();
  // Gather: each worker adds its own slots into key 1 (zeros elsewhere).
  kv.Wait(kv.Push(stats_key, stats));
  WorkerBarrier();
  if (rank != 0) return;
  std::vector<float> all;
  kv.Wait(kv.Pull(stats_key, &all));
  CHECK_EQ(all.size(), stats.size());

  Cell median[kModes];
  for (int mode = 0; mode < kModes; ++mode) {
    std::vector<Cell> cells;
    for (int round = 0; round < cfg.rounds; ++round) {
      double calls = 0;
      double wall = 0;
      for (int w = 0; w < workers; ++w) {
        const size_t slot = ((static_cast<size_t>(round) * kModes + mode) * workers + w) * 2;
        calls += all[slot];
        wall = std::max(wall, static_cast<double>(all[slot + 1]));
      }
      const double per_call = (mode == kPushPull ? 2 : 1) * bytes;
      Cell c;
      c.gbps = wall > 0 ? calls * per_call / wall / 1e9 : 0;
      c.ms = calls > 0 ? wall * 1000.0 * workers / calls : 0;
      if (cfg.verbose) {
        std::fprintf(stderr, "pslite_bench: %g MiB, %d workers, round %d, %s: %.3f GB/s, %.3f ms\n",
                     cfg.size_mib, workers, round, kModeNames[mode], c.gbps, c.ms);
      }
      cells.push_back(c);
    }
    std::sort(cells.begin(), cells.end(), [](const Cell& a, const Cell& b) { return a.gbps < b.gbps; });
    median[mode] = cells[cells.size() / 2];
  }
  std::printf("| %g MiB | %d | %.2f | %.3f | %.2f | %.2f | %.2f |\n", cfg.size_mib, workers,
              median[kPush].gbps, median[kPush].ms, median[kPull].gbps, median[kPushPull].gbps,
              median[kPushPull].ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char* argv[]) {
  const Config cfg = ParseArgs(argc, argv);
  ps::Start(0);
  ps::KVServer<float>* server = nullptr;
  if (ps::IsServer()) {
    server = new ps::KVServer<float>(0);
    server->set_request_handle(VectorSumHandle());
  }
  if (ps::IsWorker()) {
    if (cfg.header && ps::MyRank() == 0) {
      std::printf("| payload | workers | push GB/s | push ms | pull GB/s | push+pull GB/s | push+pull ms |\n");
      std::printf("|---|---|---|---|---|---|---|\n");
      std::fflush(stdout);
    }
    RunWorker(cfg);
  }
  ps::Finalize(0, true);
  delete server;
  return 0;
}
