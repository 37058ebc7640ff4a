// Helpers shared by the Thrift edge tests: a small model, a real Shard served
// by a real PsServer on 127.0.0.1 (port chosen by the kernel), connections to
// it, and a raw generated client that can send what ThriftShardConnection
// would refuse. Loopback only. Test-only; one thread per helper object.
#ifndef GEOPS_TESTS_THRIFT_THRIFT_TEST_UTIL_H_
#define GEOPS_TESTS_THRIFT_THRIFT_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "common/model_spec.h"
#include "common/options.h"
#include "datacenter/shard.h"
#include "gen-cpp/ParameterServer.h"
#include "thrift/counting_socket.h"
#include "thrift/bounded_protocol.h"
#include "thrift/framed_transport.h"
#include "thrift/ps_client.h"
#include "thrift/ps_server.h"

namespace geops::rpc::testing {

using ShardSnapshot = std::vector<std::pair<ChunkKey, std::vector<float>>>;

// Tables (chunk_bytes 256 -> 64 floats per chunk of a 16-column table):
//   0 "w"   10x16: chunks of 64, 64 and 32 floats
//   1 "b"    1x5 : one chunk of 5 floats
inline std::shared_ptr<const ModelSpec> SmallModel() {
  Result<ModelSpec> spec = ModelSpec::Create(
      {{"w", 10, 16, InitKind::kUniform, 0.1f}, {"b", 1, 5, InitKind::kUniform, 0.1f}}, 256, 7);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return std::make_shared<const ModelSpec>(std::move(spec).value());
}

// One table of `bytes` of float32, in chunks of `chunk_bytes`.
inline std::shared_ptr<const ModelSpec> FlatModel(int64_t bytes, int64_t chunk_bytes = 1 << 20) {
  const int64_t cols = 1024;
  Result<ModelSpec> spec = ModelSpec::Create(
      {{"flat", bytes / int64_t{sizeof(float)} / cols, cols, InitKind::kZeros, 0.0f}}, chunk_bytes, 1);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return std::make_shared<const ModelSpec>(std::move(spec).value());
}

inline ShardOptions OneShard(int num_workers) {
  ShardOptions o;
  o.num_workers = num_workers;
  o.worker_lease_ms = 20000;
  o.max_read_wait_ms = 10000;
  return o;
}

inline std::unique_ptr<datacenter::Shard> MakeShard(const ModelSpec& spec, const ShardOptions& o) {
  Result<std::unique_ptr<datacenter::Shard>> shard = datacenter::Shard::Create(spec, o);
  EXPECT_TRUE(shard.ok()) << shard.status().ToString();
  return shard.ok() ? std::move(shard).value() : nullptr;
}

inline PsServerOptions LoopbackServer(int port = 0) {
  PsServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  return o;
}

inline std::unique_ptr<PsServer> Serve(datacenter::Shard* shard,
                                       const PsServerOptions& o = LoopbackServer()) {
  Result<std::unique_ptr<PsServer>> server = PsServer::Start(shard, o);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

inline ThriftClientOptions FastClient() {
  ThriftClientOptions o;
  o.connect_timeout_ms = 1000;
  o.rpc_timeout_ms = 5000;
  return o;
}

inline std::unique_ptr<ThriftShardConnection> Connect(const PsServer& server,
                                                      std::shared_ptr<const ModelSpec> spec,
                                                      const ThriftClientOptions& o = FastClient()) {
  Result<std::unique_ptr<ThriftShardConnection>> c =
      ThriftShardConnection::Create(server.address(), o, std::move(spec));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

inline ShardSnapshot SnapshotOf(const datacenter::Shard& shard) {
  ShardSnapshot out;
  shard.Snapshot(&out);
  return out;
}

inline bool SameBytes(const ShardSnapshot& a, const ShardSnapshot& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.size() != b[i].second.size()) return false;
    if (std::memcmp(a[i].second.data(), b[i].second.data(), a[i].second.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

inline int64_t ElementsOf(const ModelSpec& spec, const std::vector<ChunkKey>& keys) {
  int64_t n = 0;
  for (const ChunkKey& k : keys) n += spec.ChunkElements(k);
  return n;
}

inline std::vector<int64_t> Packed(const std::vector<ChunkKey>& keys) {
  std::vector<int64_t> out;
  for (const ChunkKey& k : keys) out.push_back(static_cast<int64_t>(k.Packed()));
  return out;
}

inline std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

inline int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

// The generated stub over the same transport stack as ThriftShardConnection,
// without its checks: for sending malformed requests. Throws like Thrift.
class RawClient {
 public:
  RawClient(int port, const TransportOptions& transport = TransportOptions(), int timeout_ms = 5000) {
    FramedTransportFactory factory(transport);
    socket_ = std::make_shared<CountingSocket>("127.0.0.1", port, factory.configuration(),
                                               std::make_shared<ByteCounters>());
    socket_->setConnTimeout(timeout_ms);
    socket_->setRecvTimeout(timeout_ms);
    socket_->setSendTimeout(timeout_ms);
    auto framed = factory.getTransport(socket_);
    stub_ = std::make_unique<gen::ParameterServerClient>(MakeProtocolFactory(transport)->getProtocol(framed));
    socket_->open();
  }
  gen::ParameterServerClient& operator*() { return *stub_; }
  gen::ParameterServerClient* operator->() { return stub_.get(); }

 private:
  std::shared_ptr<CountingSocket> socket_;
  std::unique_ptr<gen::ParameterServerClient> stub_;
};

}  // namespace geops::rpc::testing

#endif  // GEOPS_TESTS_THRIFT_THRIFT_TEST_UTIL_H_
