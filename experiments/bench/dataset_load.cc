// dataset_load: what a worker pays to get its share of the Fashion-MNIST
// training set, read whole and partitioned (LoadFashionMnist +
// PartitionDataset, as the trainer did) against read as a share
// (LoadFashionMnistShare, which converts only the share's images to floats).
//
// Each measurement runs in a fresh child process, so that its peak resident
// memory (getrusage of the child) is its own; the two ways alternate, ROUNDS
// times each, and the medians are printed as a markdown table with the
// share's ratios to the whole read.
//
// Usage: dataset_load [--rounds=N] [--worker=W] [--workers=K] [--dir=PATH]
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "experiments/bench/measure.h"
#include "worker/dataset.h"
#include "worker/fashion_mnist.h"

namespace geops::bench {
namespace {

struct Sample {
  double wall_ms = 0;
  double cpu_ms = 0;
  double peak_mib = 0;
};

double Ms(const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; }

// Runs one load in a child; its wall time comes back through a pipe, its
// CPU time and peak memory from wait4. Exits the benchmark on failure.
Sample Measure(bool share, const std::string& dir, int worker, int workers) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid == 0) {
    close(fds[0]);
    const auto start = std::chrono::steady_clock::now();
    int64_t n = 0;
    if (share) {
      n = Must(worker::LoadFashionMnistShare(dir, worker::FashionMnistSplit::kTrain, worker, workers),
               "share")
              .n;
    } else {
      worker::Dataset all = Must(worker::LoadFashionMnist(dir, worker::FashionMnistSplit::kTrain), "load");
      n = Must(worker::PartitionDataset(all, worker, workers), "partition").n;
    }
    const double ms = Since(start) * 1e3;
    if (n <= 0 || write(fds[1], &ms, sizeof(ms)) != static_cast<ssize_t>(sizeof(ms))) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  double ms = 0;
  const bool got = read(fds[0], &ms, sizeof(ms)) == static_cast<ssize_t>(sizeof(ms));
  close(fds[0]);
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !got) {
    std::fprintf(stderr, "the %s load failed (see above)\n", share ? "share" : "whole");
    std::exit(1);
  }
  return Sample{ms, Ms(usage.ru_utime) + Ms(usage.ru_stime), usage.ru_maxrss / 1024.0};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace
}  // namespace geops::bench

int main(int argc, char** argv) {
  using namespace geops::bench;
  const int rounds = static_cast<int>(IntFlag(argc, argv, "rounds", 7));
  const int worker = static_cast<int>(IntFlag(argc, argv, "worker", 0));
  const int workers = static_cast<int>(IntFlag(argc, argv, "workers", 5));
  const std::string dir = StringFlag(argc, argv, "dir", std::string(geops::worker::kFashionMnistDir));
  if (rounds < 1 || workers < 1 || worker < 0 || worker >= workers) {
    std::fprintf(stderr, "need --rounds >= 1 and 0 <= --worker < --workers\n");
    return 2;
  }
  std::vector<Sample> whole, share;
  for (int r = 0; r < rounds; ++r) {  // alternating, so that drift hits both alike
    whole.push_back(Measure(false, dir, worker, workers));
    share.push_back(Measure(true, dir, worker, workers));
  }
  const auto med = [](const std::vector<Sample>& v, double Sample::*f) {
    std::vector<double> x;
    for (const Sample& s : v) x.push_back(s.*f);
    return Median(x);
  };
  std::printf("Worker %d of %d's share of the Fashion-MNIST training set (60,000 images), medians of %d "
              "alternating rounds, each load in a fresh process.\n\n",
              worker, workers, rounds);
  std::printf("| load | wall ms | CPU ms | peak resident MiB |\n|---|---:|---:|---:|\n");
  std::printf("| whole set, then PartitionDataset | %.0f | %.0f | %.0f |\n", med(whole, &Sample::wall_ms),
              med(whole, &Sample::cpu_ms), med(whole, &Sample::peak_mib));
  std::printf("| LoadFashionMnistShare | %.0f | %.0f | %.0f |\n", med(share, &Sample::wall_ms),
              med(share, &Sample::cpu_ms), med(share, &Sample::peak_mib));
  std::printf("\nshare / whole: wall %.2fx, CPU %.2fx, peak memory %.2fx\n",
              med(share, &Sample::wall_ms) / med(whole, &Sample::wall_ms),
              med(share, &Sample::cpu_ms) / med(whole, &Sample::cpu_ms),
              med(share, &Sample::peak_mib) / med(whole, &Sample::peak_mib));
  return 0;
}
