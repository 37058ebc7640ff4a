// flood_latency: a legitimate worker's push+pull latency on a shard's LAN
// port, idle and then under a flood of idle connections and slow senders
// (docs/security.md). One shard, one registered worker, plaintext on
// loopback. The flood: --idle connections that never send a byte, and
// --slow connections that announce a 64 KiB frame and then send one byte
// every 100 ms (each holds a thread while its frame dribbles in, until the
// frame deadline). Latency is of one push+pull of --payload_kib (Update +
// AdvanceClock + Read), --steps times per phase.
//
// Usage: flood_latency [--idle=5000] [--slow=50] [--payload_kib=1024] [--steps=300]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/model_spec.h"
#include "datacenter/shard.h"
#include "experiments/bench/measure.h"
#include "thrift/ps_client.h"
#include "thrift/ps_server.h"

namespace geops::bench {
namespace {

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct Latency {
  double median_ms = 0;
  double p95_ms = 0;
  double max_ms = 0;
};

Latency Percentiles(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Latency l;
  if (ms.empty()) return l;
  l.median_ms = ms[ms.size() / 2];
  l.p95_ms = ms[std::min(ms.size() - 1, ms.size() * 95 / 100)];
  l.max_ms = ms.back();
  return l;
}

int Main(int argc, char** argv) {
  int idle = 5000;
  int slow = 50;
  int64_t payload_kib = 1024;
  int steps = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--idle=", 0) == 0) {
      idle = std::atoi(a.c_str() + 7);
    } else if (a.rfind("--slow=", 0) == 0) {
      slow = std::atoi(a.c_str() + 7);
    } else if (a.rfind("--payload_kib=", 0) == 0) {
      payload_kib = std::atoll(a.c_str() + 14);
    } else if (a.rfind("--steps=", 0) == 0) {
      steps = std::atoi(a.c_str() + 8);
    } else {
      std::fprintf(stderr, "usage: flood_latency [--idle=5000] [--slow=50] [--payload_kib=1024] [--steps=300]\n");
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::err);
  const int64_t cols = 256;
  auto spec = std::make_shared<const ModelSpec>(Must(
      ModelSpec::Create({{"flat", payload_kib * 1024 / int64_t{sizeof(float)} / cols, cols, InitKind::kZeros, 0.0f}}),
      "model"));
  ShardOptions so;
  so.num_workers = 1;
  so.worker_lease_ms = 600000;
  auto shard = Must(datacenter::Shard::Create(*spec, so), "shard");
  auto server = Must(rpc::PsServer::Start(shard.get(), rpc::PsServerOptions()), "server");
  auto conn = Must(rpc::ThriftShardConnection::Create(server->address(), rpc::ThriftClientOptions(), spec), "connect");
  Must(conn->Register(0, spec->Fingerprint(), ""), "register");
  const std::vector<ChunkKey> keys = spec->ChunksOfTable(0);
  std::vector<float> delta(static_cast<size_t>(spec->total_elements()), 1e-6f);
  std::vector<float> out(delta.size());
  Clock clock = 0;
  auto phase = [&]() {
    std::vector<double> ms;
    for (int s = 0; s < steps; ++s) {
      const SteadyTime t = std::chrono::steady_clock::now();
      Must(conn->Update(0, clock, keys, delta), "update");
      Must(conn->AdvanceClock(0, clock + 1, false), "clock");
      ++clock;
      Must(conn->Read(0, clock, kAsync, keys, out.data(), 0), "read");
      ms.push_back(Since(t) * 1e3);
    }
    return Percentiles(std::move(ms));
  };

  phase();  // warm-up
  const Latency quiet = phase();

  std::vector<int> flood;
  for (int i = 0; i < idle; ++i) {
    const int fd = Connect(server->port());
    if (fd < 0) {
      std::fprintf(stderr, "flood: connection %d failed; raise ulimit -n\n", i);
      return 1;
    }
    flood.push_back(fd);
  }
  std::vector<int> slow_fds;
  for (int i = 0; i < slow; ++i) {
    const int fd = Connect(server->port());
    if (fd < 0) return 1;
    const uint32_t be = htonl(64 << 10);
    (void)send(fd, &be, sizeof(be), MSG_NOSIGNAL);
    slow_fds.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread dribble([&] {
    while (!done.load()) {
      for (int fd : slow_fds) {
        const char byte = 'x';
        (void)send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // Let the kernel hand every connection to the server (accepts of silent
  // connections are deferred about a second).
  const SteadyTime t0 = std::chrono::steady_clock::now();
  while (server->connections() < idle + slow + 1 && Since(t0) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int64_t open = server->connections();
  const Latency flooded = phase();
  done = true;
  dribble.join();
  for (int fd : flood) close(fd);
  for (int fd : slow_fds) close(fd);

  std::printf("connections open on the shard during the flood: %lld (%d idle, %d slow senders, 1 worker)\n",
              static_cast<long long>(open), idle, slow);
  std::printf("| push+pull of %lld KiB | median ms | p95 ms | max ms |\n", static_cast<long long>(payload_kib));
  std::printf("|---|---|---|---|\n");
  std::printf("| idle server | %.3f | %.3f | %.3f |\n", quiet.median_ms, quiet.p95_ms, quiet.max_ms);
  std::printf("| under the flood | %.3f | %.3f | %.3f |\n", flooded.median_ms, flooded.p95_ms, flooded.max_ms);
  std::printf("| flood / idle | %.2f | %.2f | |\n", flooded.median_ms / quiet.median_ms,
              flooded.p95_ms / quiet.p95_ms);
  (void)server->Stop(Deadline::InMs(10000));
  return 0;
}

}  // namespace
}  // namespace geops::bench

int main(int argc, char** argv) { return geops::bench::Main(argc, argv); }
