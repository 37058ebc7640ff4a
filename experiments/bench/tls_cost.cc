// tls_cost: what mutual TLS costs on the LAN data plane. One shard, one
// worker, push+pull of the whole table (Update + AdvanceClock, then Read),
// plaintext and mutual TLS 1.3 (certificates made by `geops certs`' own
// code in a temporary folder), side by side: --rounds interleaved rounds of
// --seconds each per size, medians reported, and TLS / plaintext per round.
//
// Figures are payload GB/s (1 GB = 1e9 bytes) summed over both directions
// (push+pull moves 2 x size per pair).
//
// Usage: tls_cost [--seconds=1] [--rounds=5] [--sizes_mib=1,16]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "certs/cert_authority.h"
#include "common/model_spec.h"
#include "config/tls_options.h"
#include "config/topology.h"
#include "datacenter/shard.h"
#include "experiments/bench/measure.h"
#include "thrift/ps_client.h"
#include "thrift/ps_server.h"

namespace geops::bench {
namespace {

// One shard and one registered worker on loopback, plaintext or TLS.
class Rig {
 public:
  Rig(int64_t bytes, const config::Topology* tls) {
    const int64_t cols = 1024;
    spec_ = std::make_shared<const ModelSpec>(Must(
        ModelSpec::Create({{"flat", bytes / int64_t{sizeof(float)} / cols, cols, InitKind::kZeros, 0.0f}}), "model"));
    ShardOptions so;
    so.num_workers = 1;
    so.worker_lease_ms = 600000;
    shard_ = Must(datacenter::Shard::Create(*spec_, so), "shard");
    rpc::PsServerOptions po;
    rpc::ThriftClientOptions co;
    if (tls != nullptr) {
      po.tls = config::SiteTls(*tls, 0);
      po.peers = config::PeerNamesOf(*tls, 0);
      co.tls = config::WorkerTls(*tls, 0, 0);
    }
    server_ = Must(rpc::PsServer::Start(shard_.get(), po), "server");
    conn_ = Must(rpc::ThriftShardConnection::Create(server_->address(), co, spec_), "connect");
    keys_ = spec_->ChunksOfTable(0);
    delta_.assign(static_cast<size_t>(spec_->total_elements()), 1e-6f);
    out_.assign(delta_.size(), 0.0f);
    Must(conn_->Register(0, spec_->Fingerprint(), ""), "register");
  }
  ~Rig() { (void)server_->Stop(Deadline::InMs(10000)); }

  Cell PushPull(double seconds) {
    std::vector<Step> steps;
    steps.push_back([this]() -> Result<int64_t> {
      Result<UpdateReply> up = conn_->Update(0, clock_, keys_, delta_);
      if (!up.ok()) return up.status();
      Result<Clock> c = conn_->AdvanceClock(0, clock_ + 1, false);
      if (!c.ok()) return c.status();
      ++clock_;
      Result<ReadReply> r = conn_->Read(0, clock_, kAsync, keys_, out_.data(), 0);
      if (!r.ok()) return r.status();
      return static_cast<int64_t>(2 * delta_.size() * sizeof(float));
    });
    return Measure(std::move(steps), seconds);
  }

 private:
  std::shared_ptr<const ModelSpec> spec_;
  std::unique_ptr<datacenter::Shard> shard_;
  std::unique_ptr<rpc::PsServer> server_;
  std::unique_ptr<rpc::ThriftShardConnection> conn_;
  std::vector<ChunkKey> keys_;
  std::vector<float> delta_;
  std::vector<float> out_;
  Clock clock_ = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  double seconds = 1.0;
  int rounds = 5;
  std::vector<int64_t> sizes = {1, 16};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--seconds=", 0) == 0) {
      seconds = std::atof(a.c_str() + 10);
    } else if (a.rfind("--rounds=", 0) == 0) {
      rounds = std::atoi(a.c_str() + 9);
    } else if (a.rfind("--sizes_mib=", 0) == 0) {
      sizes.clear();
      std::string list = a.substr(12);
      for (size_t p = 0; p < list.size();) {
        size_t c = list.find(',', p);
        if (c == std::string::npos) c = list.size();
        sizes.push_back(std::atoll(list.substr(p, c - p).c_str()));
        p = c + 1;
      }
    } else {
      std::fprintf(stderr, "usage: tls_cost [--seconds=1] [--rounds=5] [--sizes_mib=1,16]\n");
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  const std::string dir = std::filesystem::temp_directory_path().string() + "/geops-tls-cost-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  config::Topology t = Must(config::ParseTopology("[model]\nworkload = \"counter\"\nlayers = [4, 4]\n[[sites]]\nname = \"lan\"\n",
                                           dir + "/topology.toml"),
                         "topology");
  t.security.certs = "certs";
  Must(certs::WriteDeploymentCerts(t, dir + "/certs", 1, false), "certs");

  std::printf("| payload | plaintext push+pull GB/s | TLS push+pull GB/s | TLS / plaintext (median) | per-round range |\n");
  std::printf("|---|---|---|---|---|\n");
  for (int64_t mib : sizes) {
    const int64_t bytes = mib << 20;
    Rig plain(bytes, nullptr);
    Rig tls(bytes, &t);
    std::vector<double> p, s, ratio;
    for (int r = 0; r < rounds; ++r) {
      Cell a = plain.PushPull(seconds);
      Cell b = tls.PushPull(seconds);
      if (!a.error.empty() || !b.error.empty()) {
        std::fprintf(stderr, "round %d: %s %s\n", r, a.error.c_str(), b.error.c_str());
        return 1;
      }
      p.push_back(a.gbps);
      s.push_back(b.gbps);
      ratio.push_back(b.gbps / a.gbps);
    }
    std::printf("| %lld MiB | %.3f | %.3f | %.2f | %.2f-%.2f |\n", static_cast<long long>(mib), Median(p), Median(s),
                Median(s) / Median(p), *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()));
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace geops::bench

int main(int argc, char** argv) { return geops::bench::Main(argc, argv); }
