// float_scan: GB/s of the significance selection scan (wan/codec/float_scan.h)
// over one model's worth of floats (the MLP of the WAN scenarios: 535,818).
// Every WAN shard runs it over its whole accumulator at each tick, reading
// the accumulator and the replica's values (two inputs), so it runs once
// per model per site per clock.
//
// The accumulator holds small values around a fixed share of larger ones
// that beat the limit (--take-percent, the share a harsh-scenario tick
// selects is a few percent). After each scan the selected values are put
// back (a scatter of `taken` floats, a small part of the time), so every
// repetition scans the same input.
//
// Usage: float_scan [--elements=N] [--reps=R] [--take-percent=P]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <vector>

#include "common/splitmix.h"
#include "experiments/bench/measure.h"
#include "wan/codec/float_scan.h"

int main(int argc, char** argv) {
  const int64_t n = geops::bench::IntFlag(argc, argv, "elements", 535818);
  const int64_t reps = geops::bench::IntFlag(argc, argv, "reps", 2000);
  const int64_t take_percent = geops::bench::IntFlag(argc, argv, "take-percent", 4);
  if (n < 1 || n > UINT32_MAX || reps < 1 || take_percent < 0 || take_percent > 100) {
    std::fprintf(stderr, "--elements in [1, 2^32), --reps >= 1, --take-percent in [0, 100]\n");
    return 2;
  }
  const uint32_t count = static_cast<uint32_t>(n);
  std::vector<float> acc(count), w(count), val(count);
  std::vector<uint32_t> idx(count);
  const float t = 0.05f;
  const float eps = 1e-3f;
  uint64_t state = 1;
  auto next = [&state] { return geops::SplitMix64(&state); };
  for (uint32_t i = 0; i < count; ++i) {
    w[i] = 0.02f * static_cast<float>(static_cast<int64_t>(next() % 2001) - 1000) / 1000.0f;
    const float limit = t * std::max(std::abs(w[i]), eps);
    const bool take = static_cast<int64_t>(next() % 100) < take_percent;
    const float sign = (next() & 1) ? 1.0f : -1.0f;
    // Beats the limit by 50%, or stays at a third of it (zero for 1 in 8).
    acc[i] = (next() % 8 == 0 && !take) ? 0.0f : sign * limit * (take ? 1.5f : 0.33f);
  }
  std::printf("%u floats, %lld repetitions, about %lld%% taken; GB/s of input read "
              "(accumulator and values; 1 GB = 1e9 bytes)\n",
              count, static_cast<long long>(reps), static_cast<long long>(take_percent));
  // The absolute limit of a chunk without values: about the relative one at
  // a typical |value| (0.01).
  const float limit = t * 0.01f;
  using geops::wan::ScanResult;
  auto time = [&](const char* name, int inputs, auto scan) {
    uint64_t taken = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t r = 0; r < reps; ++r) {
      const ScanResult s = scan();
      for (uint32_t k = 0; k < s.taken; ++k) acc[idx[k]] = val[k];
      taken += s.taken;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-16s %7.2f GB/s  (%.2f%% taken, %.1f us per scan)\n", name,
                static_cast<double>(reps * n * 4 * inputs) / s / 1e9,
                100.0 * static_cast<double>(taken) / static_cast<double>(reps * n),
                s / static_cast<double>(reps) * 1e6);
  };
  // The dispatching entry points (AVX-512 where the CPU has it) and the
  // portable ones, alternating, twice.
  for (int round = 0; round < 2; ++round) {
    time("SelectRelative", 2, [&] {
      return geops::wan::SelectRelative(acc.data(), w.data(), count, t, eps, idx.data(), val.data());
    });
    time("  portable", 2, [&] {
      return geops::wan::SelectRelativePortable(acc.data(), w.data(), count, t, eps, idx.data(),
                                                val.data());
    });
    time("SelectAbsolute", 1, [&] {
      return geops::wan::SelectAbsolute(acc.data(), count, limit, idx.data(), val.data());
    });
    time("  portable", 1, [&] {
      return geops::wan::SelectAbsolutePortable(acc.data(), count, limit, idx.data(), val.data());
    });
  }
  return 0;
}
