// float_kernels: the hot-path float kernels of common/float_kernels.h over
// one model's worth of floats (the MLP of the WAN scenarios: 535,818), in
// GB/s of input read. Every worker checks its parameters and its update
// for NaN/Inf each clock, and each shard and WAN accumulator checks and
// adds every update it takes, so these passes run several times per model
// per clock.
//
// Usage: float_kernels [--elements=N] [--reps=R]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/float_kernels.h"
#include "experiments/bench/measure.h"

int main(int argc, char** argv) {
  const int64_t n = geops::bench::IntFlag(argc, argv, "elements", 535818);
  const int64_t reps = geops::bench::IntFlag(argc, argv, "reps", 2000);
  if (n < 1 || reps < 1) {
    std::fprintf(stderr, "--elements and --reps must be >= 1\n");
    return 2;
  }
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.001f * static_cast<float>(i % 1000 - 500);
    b[i] = 1e-6f * static_cast<float>(i % 77);
  }
  std::printf("%lld floats, %lld repetitions; GB/s of input read (1 GB = 1e9 bytes)\n",
              static_cast<long long>(n), static_cast<long long>(reps));
  auto time = [&](const char* name, int inputs, auto kernel) {
    volatile int64_t sink = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t r = 0; r < reps; ++r) sink = sink + kernel();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-20s %7.2f GB/s\n", name, static_cast<double>(reps * n * 4 * inputs) / s / 1e9);
  };
  time("FirstNonFinite", 1, [&] { return geops::FirstNonFinite(a.data(), n); });
  time("AllFinite", 1, [&] { return static_cast<int64_t>(geops::AllFinite(a.data(), n)); });
  time("FirstNonFiniteSum", 2, [&] { return geops::FirstNonFiniteSum(a.data(), b.data(), n); });
  time("SumAllFinite", 2, [&] { return static_cast<int64_t>(geops::SumAllFinite(a.data(), b.data(), n)); });
  time("MaxAbs", 1, [&] { return static_cast<int64_t>(geops::MaxAbs(a.data(), n)); });
  // dst += src with src tiny: the values stay finite over the repetitions.
  time("AddInto", 2, [&] {
    geops::AddInto(a.data(), b.data(), n);
    return int64_t{0};
  });
  return 0;
}
