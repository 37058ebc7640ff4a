// lan_throughput: how fast parameters move between workers and one shard on
// loopback, next to a raw Thrift echo on the same transport.
//
// For each payload size (float32 bytes per call) and client count it runs
// --rounds rounds of the four modes below, each for --seconds after a short
// warm-up, interleaved so that a machine shared with other work slows them
// alike, and reports the median of the rounds:
//   push       Update of the whole table with the clock advance in the same
//              RPC (UpdateThenClock, as a worker's clock sends it), per
//              client (own worker id)
//   push 2 RPCs  the same as an Update RPC, then an AdvanceClock RPC (how a
//              clock went before UpdateThenClock): push / push 2 RPCs is
//              what the merged call gains, measured side by side
//   pull       Read of the whole table, staleness -1 (async: never waits)
//   push+pull  the two alternating
//   echo       Echo.echo(binary) of the same size: the bytes go out and come back
// Figures are payload GB/s (1 GB = 1e9 bytes; payload bytes crossing the
// socket per second, both directions summed: push = S per call, pull = S,
// push+pull = 2S per pair, echo = 2S per call), and push+pull / echo (the
// ratio of the medians, and the range of the ratio within single rounds).
// It also measures Shard::Update (+AdvanceClock) and Shard::Read called
// directly, without RPC, for the same sizes.
//
// Usage: lan_throughput [--seconds=1] [--rounds=5] [--sizes_mib=1,16] [--clients=1,4]
//                       [--write_buffer=1048576] [--socket_buffer=0] [--reclaim=268435456]
// (the last three set rpc::TransportOptions on both ends: initial framed write
// buffer, SO_SNDBUF/SO_RCVBUF (0 = kernel auto-tuning), and the size past
// which grown buffers are freed after each message)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thrift/TProcessor.h>
#include <thrift/server/TThreadedServer.h>

#include <spdlog/spdlog.h>

#include "common/model_spec.h"
#include "datacenter/shard.h"
#include "experiments/bench/measure.h"
#include "gen-cpp/Echo.h"
#include "thrift/bounded_protocol.h"
#include "thrift/counting_socket.h"
#include "thrift/framed_transport.h"
#include "thrift/ps_client.h"
#include "thrift/ps_server.h"

namespace geops::bench {
namespace {

using rpc::TransportOptions;

struct Config {
  double seconds = 1.0;  // per measurement
  int rounds = 5;        // measurements per cell, interleaved across modes; medians reported
  std::vector<int64_t> sizes_mib = {1, 16};
  std::vector<int> clients = {1, 4};
  TransportOptions transport;
};

std::shared_ptr<const ModelSpec> FlatModel(int64_t bytes) {
  const int64_t cols = 1024;
  Result<ModelSpec> spec = ModelSpec::Create(
      {{"flat", bytes / int64_t{sizeof(float)} / cols, cols, InitKind::kZeros, 0.0f}});
  if (!spec.ok()) {
    std::fprintf(stderr, "model: %s\n", spec.status().ToString().c_str());
    std::exit(1);
  }
  return std::make_shared<const ModelSpec>(std::move(spec).value());
}

// A worker's connection and clock, kept across the push/pull/push+pull runs.
struct WorkerRig {
  WorkerId id = 0;
  std::unique_ptr<rpc::ThriftShardConnection> conn;
  std::vector<ChunkKey> keys;
  std::vector<float> delta;
  std::vector<float> out;
  Clock clock = 0;

  Result<int64_t> Push() {
    Result<UpdateReply> up = conn->UpdateThenClock(id, clock, keys, delta, 0, false);
    if (!up.ok()) return up.status();
    if (!up->clocked) return InternalError("the shard did not advance the clock with the update");
    ++clock;
    return static_cast<int64_t>(delta.size() * sizeof(float));
  }
  Result<int64_t> PushTwoRpcs() {
    Result<UpdateReply> up = conn->Update(id, clock, keys, delta);
    if (!up.ok()) return up.status();
    Result<Clock> c = conn->AdvanceClock(id, clock + 1, false);
    if (!c.ok()) return c.status();
    ++clock;
    return static_cast<int64_t>(delta.size() * sizeof(float));
  }
  Result<int64_t> Pull() {
    Result<ReadReply> r = conn->Read(id, clock, kAsync, keys, out.data(), 0);
    if (!r.ok()) return r.status();
    return static_cast<int64_t>(out.size() * sizeof(float));
  }
};

// A shard served on loopback with `clients` registered workers.
class PsBench {
 public:
  PsBench(const Config& cfg, int64_t bytes, int clients) : cfg_(cfg), spec_(FlatModel(bytes)) {
    ShardOptions so;
    so.num_workers = clients;
    so.worker_lease_ms = 600000;
    shard_ = Must(datacenter::Shard::Create(*spec_, so), "shard");
    rpc::PsServerOptions po;
    po.transport = cfg.transport;
    server_ = Must(rpc::PsServer::Start(shard_.get(), po), "server");
    rpc::ThriftClientOptions co;
    co.transport = cfg.transport;
    for (int w = 0; w < clients; ++w) {
      auto rig = std::make_unique<WorkerRig>();
      rig->id = w;
      rig->conn = Must(rpc::ThriftShardConnection::Create(server_->address(), co, spec_), "connect");
      rig->keys = spec_->ChunksOfTable(0);
      rig->delta.assign(spec_->total_elements(), 1e-6f);
      rig->out.assign(spec_->total_elements(), 0.0f);
      Must(rig->conn->Register(w, spec_->Fingerprint(), ""), "register");
      rigs_.push_back(std::move(rig));
    }
  }
  ~PsBench() { (void)server_->Stop(Deadline::InMs(10000)); }

  Cell Push() { return Run([](WorkerRig* r) { return r->Push(); }); }
  Cell PushTwoRpcs() { return Run([](WorkerRig* r) { return r->PushTwoRpcs(); }); }
  Cell Pull() { return Run([](WorkerRig* r) { return r->Pull(); }); }
  Cell PushPull() {
    return Run([](WorkerRig* r) -> Result<int64_t> {
      Result<int64_t> a = r->Push();
      if (!a.ok()) return a;
      Result<int64_t> b = r->Pull();
      if (!b.ok()) return b;
      return *a + *b;
    });
  }

 private:
  template <typename Fn>
  Cell Run(Fn fn) {
    std::vector<Step> steps;
    for (auto& rig : rigs_) steps.push_back([r = rig.get(), fn] { return fn(r); });
    return Measure(std::move(steps), cfg_.seconds);
  }

  const Config& cfg_;
  std::shared_ptr<const ModelSpec> spec_;
  std::unique_ptr<datacenter::Shard> shard_;
  std::unique_ptr<rpc::PsServer> server_;
  std::vector<std::unique_ptr<WorkerRig>> rigs_;
};

class EchoHandler : public gen::EchoIf {
 public:
  void echo(std::string& reply, const std::string& data) override { reply = data; }
};

// The Echo service on loopback with `clients` connections, same transport.
class EchoBench {
 public:
  EchoBench(const Config& cfg, int64_t bytes, int clients) : cfg_(cfg) {
    auto factory = std::make_shared<rpc::FramedTransportFactory>(cfg.transport);
    auto listener = std::make_shared<rpc::ListenSocket>("127.0.0.1", 0, factory->configuration(),
                                                        std::make_shared<rpc::ByteCounters>(),
                                                        cfg.transport.socket_buffer_bytes);
    listener->listen();
    const int port = listener->getPort();
    server_ = std::make_shared<apache::thrift::server::TThreadedServer>(
        std::make_shared<gen::EchoProcessor>(std::make_shared<EchoHandler>()), listener, factory,
        rpc::MakeProtocolFactory(cfg.transport));
    serve_ = std::thread([this] { server_->serve(); });
    for (int c = 0; c < clients; ++c) {
      auto rig = std::make_unique<EchoRig>();
      rig->socket = std::make_shared<rpc::CountingSocket>("127.0.0.1", port, factory->configuration(),
                                                          std::make_shared<rpc::ByteCounters>());
      rig->socket->open();
      rig->socket->SetKernelBuffers(cfg.transport.socket_buffer_bytes);
      auto protocol =
          rpc::MakeProtocolFactory(cfg.transport)->getProtocol(factory->getTransport(rig->socket));
      rig->client = std::make_unique<gen::EchoClient>(protocol);
      rig->data.assign(static_cast<size_t>(bytes), '\x5a');
      rigs_.push_back(std::move(rig));
    }
  }
  ~EchoBench() {
    for (auto& rig : rigs_) rig->socket->close();
    server_->stop();
    serve_.join();
  }

  Cell Echo() {
    std::vector<Step> steps;
    for (auto& rig : rigs_) {
      steps.push_back([r = rig.get()]() -> Result<int64_t> {
        try {
          r->client->echo(r->reply, r->data);
        } catch (const std::exception& e) {
          return UnavailableError(e.what());
        }
        return static_cast<int64_t>(r->data.size() + r->reply.size());
      });
    }
    return Measure(std::move(steps), cfg_.seconds);
  }

 private:
  struct EchoRig {
    std::shared_ptr<rpc::CountingSocket> socket;
    std::unique_ptr<gen::EchoClient> client;
    std::string data;
    std::string reply;
  };
  const Config& cfg_;
  std::shared_ptr<apache::thrift::server::TThreadedServer> server_;
  std::thread serve_;
  std::vector<std::unique_ptr<EchoRig>> rigs_;
};

struct InShard {
  Cell apply, read, memcpy;
};

// Shard::Update + AdvanceClock and Shard::Read called directly, and a plain
// memcpy of the same size for scale.
InShard RunInShard(const Config& cfg, int64_t bytes) {
  auto spec = FlatModel(bytes);
  ShardOptions so;
  so.worker_lease_ms = 600000;
  auto shard = Must(datacenter::Shard::Create(*spec, so), "shard");
  Must(shard->RegisterWorker(0, 0, ""), "register");
  std::vector<ChunkKey> keys = spec->ChunksOfTable(0);
  std::vector<float> delta(spec->total_elements(), 1e-6f);
  std::vector<float> out(spec->total_elements());
  Clock clock = 0;
  InShard r;
  r.apply = Measure({[&]() -> Result<int64_t> {
                      Result<UpdateReply> up = shard->Update(0, clock, keys, delta);
                      if (!up.ok()) return up.status();
                      Result<Clock> c = shard->AdvanceClock(0, clock + 1, false);
                      if (!c.ok()) return c.status();
                      ++clock;
                      return bytes;
                    }},
                    cfg.seconds);
  r.read = Measure({[&]() -> Result<int64_t> {
                     Result<ReadReply> rd = shard->Read(0, clock, kAsync, keys, out.data(), Deadline::InMs(0));
                     if (!rd.ok()) return rd.status();
                     return bytes;
                   }},
                   cfg.seconds);
  r.memcpy = Measure({[&]() -> Result<int64_t> {
                       std::memcpy(out.data(), delta.data(), static_cast<size_t>(bytes));
                       return bytes;
                     }},
                     cfg.seconds);
  return r;
}

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(std::stoll(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: lan_throughput [--seconds=1] [--rounds=5] [--sizes_mib=1,16] [--clients=1,4]\n"
               "                      [--write_buffer=BYTES] [--socket_buffer=BYTES] [--reclaim=BYTES]\n");
  std::exit(2);
}

Config ParseArgs(int argc, char** argv) {
  Config cfg;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const size_t eq = arg.find('=');
      const std::string key = arg.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
      if (key == "--seconds") {
        cfg.seconds = std::stod(value);
      } else if (key == "--rounds") {
        cfg.rounds = std::max(1, std::stoi(value));
      } else if (key == "--sizes_mib") {
        cfg.sizes_mib = ParseList(value);
      } else if (key == "--clients") {
        cfg.clients.clear();
        for (int64_t c : ParseList(value)) cfg.clients.push_back(static_cast<int>(c));
      } else if (key == "--write_buffer") {
        cfg.transport.write_buffer_bytes = std::stoll(value);
      } else if (key == "--socket_buffer") {
        cfg.transport.socket_buffer_bytes = std::stoll(value);
      } else if (key == "--reclaim") {
        cfg.transport.buffer_reclaim_bytes = std::stoll(value);
      } else {
        Usage();
      }
    }
  } catch (const std::exception&) {  // std::stoll and friends on a malformed number
    Usage();
  }
  Status s = cfg.transport.Validate();
  if (!s.ok()) {
    std::fprintf(stderr, "lan_throughput: %s\n", s.ToString().c_str());
    std::exit(2);
  }
  return cfg;
}

std::string Fmt(const Cell& c) {
  if (!c.error.empty()) return "ERROR";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", c.gbps);
  return buf;
}

int Main(int argc, char** argv) {
  Config cfg = ParseArgs(argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const std::string socket_buffer = cfg.transport.socket_buffer_bytes > 0
                                        ? std::to_string(cfg.transport.socket_buffer_bytes) + " B"
                                        : std::string("kernel auto-tuning");
  std::printf("lan_throughput: median of %d rounds of %.1f s per cell; write buffer %lld B, "
              "socket buffer %s, reclaim past %lld B\n",
              cfg.rounds, cfg.seconds, static_cast<long long>(cfg.transport.write_buffer_bytes),
              socket_buffer.c_str(), static_cast<long long>(cfg.transport.buffer_reclaim_bytes));
  std::printf("payload GB/s (1e9 B/s, both directions summed); ms = wall time per call "
              "(push+pull: per pair)\n\n");
  std::printf("| payload | clients | push GB/s | push ms | push 2 RPCs GB/s | push 2 RPCs ms | push / push 2 RPCs "
              "| pull GB/s | push+pull GB/s | push+pull ms | echo GB/s | echo ms | push+pull / echo "
              "| per-round ratio min-max |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<std::string> errors;
  for (int64_t mib : cfg.sizes_mib) {
    for (int clients : cfg.clients) {
      PsBench ps(cfg, mib << 20, clients);
      EchoBench echo(cfg, mib << 20, clients);
      std::vector<Cell> push, push_two, pull, push_pull, echoes;
      std::vector<double> ratios;
      for (int round = 0; round < cfg.rounds; ++round) {
        push.push_back(ps.Push());
        push_two.push_back(ps.PushTwoRpcs());
        pull.push_back(ps.Pull());
        push_pull.push_back(ps.PushPull());
        echoes.push_back(echo.Echo());
        if (echoes.back().gbps > 0) ratios.push_back(push_pull.back().gbps / echoes.back().gbps);
      }
      Cell m_push = Median(push);
      Cell m_push_two = Median(push_two);
      Cell m_pull = Median(pull);
      Cell m_pp = Median(push_pull);
      Cell m_echo = Median(echoes);
      for (const Cell* c : {&m_push, &m_push_two, &m_pull, &m_pp, &m_echo}) {
        if (!c->error.empty()) errors.push_back(c->error);
      }
      std::sort(ratios.begin(), ratios.end());
      std::printf("| %lld MiB | %d | %s | %.3f | %s | %.3f | %.2f | %s | %s | %.2f | %s | %.2f | %.2f | %.2f-%.2f |\n",
                  static_cast<long long>(mib), clients, Fmt(m_push).c_str(), m_push.ms_per_step,
                  Fmt(m_push_two).c_str(), m_push_two.ms_per_step,
                  m_push_two.gbps > 0 ? m_push.gbps / m_push_two.gbps : 0.0, Fmt(m_pull).c_str(),
                  Fmt(m_pp).c_str(), m_pp.ms_per_step, Fmt(m_echo).c_str(), m_echo.ms_per_step,
                  m_echo.gbps > 0 ? m_pp.gbps / m_echo.gbps : 0.0,
                  ratios.empty() ? 0.0 : ratios.front(), ratios.empty() ? 0.0 : ratios.back());
      std::fflush(stdout);
    }
  }
  std::printf("\n| payload | Shard::Update+AdvanceClock GB/s (no RPC) | Shard::Read GB/s (no RPC) "
              "| memcpy GB/s |\n");
  std::printf("|---|---|---|---|\n");
  for (int64_t mib : cfg.sizes_mib) {
    std::vector<Cell> applies, reads, copies;
    for (int round = 0; round < cfg.rounds; ++round) {
      InShard r = RunInShard(cfg, mib << 20);
      applies.push_back(r.apply);
      reads.push_back(r.read);
      copies.push_back(r.memcpy);
    }
    std::printf("| %lld MiB | %s | %s | %s |\n", static_cast<long long>(mib),
                Fmt(Median(applies)).c_str(), Fmt(Median(reads)).c_str(), Fmt(Median(copies)).c_str());
  }
  for (const std::string& e : errors) std::fprintf(stderr, "error: %s\n", e.c_str());
  return errors.empty() ? 0 : 1;
}

}  // namespace
}  // namespace geops::bench

int main(int argc, char** argv) { return geops::bench::Main(argc, argv); }
