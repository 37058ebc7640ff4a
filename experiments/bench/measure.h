// Measurement helpers of the benchmark programs: run client loops on threads
// for a fixed time and summarise repeated rounds. Header-only; bench code.
#ifndef GEOPS_EXPERIMENTS_BENCH_MEASURE_H_
#define GEOPS_EXPERIMENTS_BENCH_MEASURE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace geops::bench {

using SteadyTime = std::chrono::steady_clock::time_point;

// Setup steps of a benchmark: the value, or exit(1) naming `what` and why.
template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

inline void Must(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// The text after `--name=` among the program's arguments, or null.
inline const char* FlagText(int argc, char** argv, const char* name) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return nullptr;
}

// The value of `--name=N` among the program's arguments, or `fallback`.
inline int64_t IntFlag(int argc, char** argv, const char* name, int64_t fallback) {
  const char* text = FlagText(argc, argv, name);
  return text != nullptr ? std::atoll(text) : fallback;
}

// The value of `--name=TEXT` among the program's arguments, or `fallback`.
inline std::string StringFlag(int argc, char** argv, const char* name, std::string fallback) {
  const char* text = FlagText(argc, argv, name);
  return text != nullptr ? std::string(text) : fallback;
}

inline double Since(SteadyTime t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// One client's loop body: moves some payload, returns its bytes or an error.
using Step = std::function<Result<int64_t>()>;

struct Cell {
  double gbps = 0;
  double ms_per_step = 0;
  std::string error;
};

// Runs steps[i] on its own thread for `seconds` after a two-step warm-up.
inline Cell Measure(std::vector<Step> steps, double seconds) {
  for (Step& step : steps) {
    for (int i = 0; i < 2; ++i) {
      Result<int64_t> r = step();
      if (!r.ok()) return Cell{0, 0, "warm-up: " + r.status().ToString()};
    }
  }
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<int64_t> bytes(steps.size(), 0);
  std::vector<int64_t> calls(steps.size(), 0);
  std::vector<std::string> errors(steps.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < steps.size(); ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        Result<int64_t> r = steps[i]();
        if (!r.ok()) {
          errors[i] = r.status().ToString();
          return;
        }
        bytes[i] += *r;
        ++calls[i];
      }
    });
  }
  SteadyTime start = std::chrono::steady_clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = Since(start);
  Cell cell;
  int64_t total = 0;
  int64_t steps_done = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    total += bytes[i];
    steps_done += calls[i];
    if (!errors[i].empty()) cell.error = errors[i];
  }
  cell.gbps = static_cast<double>(total) / elapsed / 1e9;
  cell.ms_per_step = steps_done ? elapsed * 1000.0 * static_cast<double>(steps.size()) / steps_done : 0;
  return cell;
}

// Median of the rounds (the error of any failed round wins).
inline Cell Median(std::vector<Cell> cells) {
  for (const Cell& c : cells) {
    if (!c.error.empty()) return c;
  }
  std::sort(cells.begin(), cells.end(), [](const Cell& a, const Cell& b) { return a.gbps < b.gbps; });
  return cells[cells.size() / 2];
}

}  // namespace geops::bench

#endif  // GEOPS_EXPERIMENTS_BENCH_MEASURE_H_
