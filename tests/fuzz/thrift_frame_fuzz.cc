// Fuzz target: one frame as a geops server reads it. The input is the body
// of a frame arriving on a LAN port (first byte even) or a WAN mirror port
// (odd); it goes through geops' FramedTransport and BoundedBinaryProtocol
// into the generated processor of that service, which decodes the call's
// arguments whole (with handlers that do nothing). Any input must give a
// reply or an exception, never a crash, an out-of-bounds access or an
// allocation beyond the frame (BoundedBinaryProtocol checks every length
// against the bytes left before allocating).
//
// Built with libFuzzer when the compiler is Clang (experiments/run_fuzz.sh),
// and with tests/fuzz/replay_main.cc otherwise (CTest: a fixed count of
// seeded mutations).
#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <thrift/transport/TBufferTransports.h>

#include "gen-cpp/Mirror.h"
#include "gen-cpp/ParameterServer.h"
#include "thrift/bounded_protocol.h"
#include "thrift/framed_transport.h"

namespace {

using apache::thrift::transport::TMemoryBuffer;
using geops::rpc::BoundedBinaryProtocol;
using geops::rpc::FramedTransport;
using geops::rpc::TransportOptions;

std::shared_ptr<BoundedBinaryProtocol> Over(std::shared_ptr<TMemoryBuffer> buffer, const TransportOptions& options) {
  auto framed =
      std::make_shared<FramedTransport>(std::move(buffer), options, geops::rpc::MakeThriftConfiguration(options));
  return std::make_shared<BoundedBinaryProtocol>(framed, options);
}

// The body of the one frame `send` writes (a client's request), behind `tag`.
template <typename Client, typename Send>
std::vector<uint8_t> FrameOf(uint8_t tag, Send send) {
  TransportOptions options;
  auto buffer = std::make_shared<TMemoryBuffer>();
  Client client(Over(buffer, options));
  send(client);
  uint8_t* data = nullptr;
  uint32_t size = 0;
  buffer->getBuffer(&data, &size);
  std::vector<uint8_t> seed{tag};
  if (size > 4) seed.insert(seed.end(), data + 4, data + size);
  return seed;
}

}  // namespace

// Seeds: one real request of each kind that carries data, LAN and mirror.
std::vector<std::vector<uint8_t>> GeopsFuzzSeeds() {
  using geops::rpc::gen::MirrorClient;
  using geops::rpc::gen::ParameterServerClient;
  namespace gen = geops::rpc::gen;
  std::vector<std::vector<uint8_t>> seeds;
  const std::string floats(64, '\x3f');
  seeds.push_back(FrameOf<ParameterServerClient>(0, [&](ParameterServerClient& c) {
    gen::UpdateRequest r;
    r.worker_id = 1;
    r.clock = 3;
    r.chunk_keys = {0, 1, (int64_t{1} << 32) | 2};
    r.values = floats;
    c.send_update(r);
  }));
  seeds.push_back(FrameOf<ParameterServerClient>(0, [&](ParameterServerClient& c) {
    gen::ReadRequest r;
    r.worker_id = 0;
    r.clock = 5;
    r.staleness = 2;
    r.chunk_keys = {0, 1, 2, 3};
    r.deadline_ms = 1000;
    c.send_read(r);
  }));
  seeds.push_back(FrameOf<ParameterServerClient>(0, [&](ParameterServerClient& c) {
    gen::RegisterRequest r;
    r.worker_id = 2;
    r.model_fingerprint = 12345;
    r.auth_token = "token";
    c.send_registerWorker(r);
  }));
  seeds.push_back(FrameOf<ParameterServerClient>(0, [&](ParameterServerClient& c) {
    gen::ClockRequest r;
    r.worker_id = 1;
    r.clock = 9;
    c.send_clock(r);
  }));
  seeds.push_back(FrameOf<MirrorClient>(1, [&](MirrorClient& c) {
    gen::PushBatchRequest r;
    r.origin = 1;
    r.shard_id = 0;
    r.seq = 4;
    r.clock = 8;
    r.payload = floats;
    r.incarnation = 2;
    c.send_pushBatch(r);
  }));
  seeds.push_back(FrameOf<MirrorClient>(1, [&](MirrorClient& c) {
    gen::NoticeRequest r;
    r.origin = 2;
    r.seq = 5;
    r.chunk_keys = {0, 7};
    r.timeout_ms = 100;
    c.send_notice(r);
  }));
  return seeds;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Every refused frame is logged as a warning; millions of them only slow
  // the search down.
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  TransportOptions options;
  options.max_frame_bytes = 1 << 20;
  options.write_buffer_bytes = 4 << 10;
  options.buffer_reclaim_bytes = 1 << 20;
  if (size - 1 > static_cast<size_t>(options.max_frame_bytes)) return 0;
  // The frame as it arrives: a 4-byte big-endian length, then the body.
  auto in_buffer = std::make_shared<TMemoryBuffer>(static_cast<uint32_t>(size + 3));
  const uint32_t be = htonl(static_cast<uint32_t>(size - 1));
  in_buffer->write(reinterpret_cast<const uint8_t*>(&be), sizeof(be));
  in_buffer->write(data + 1, static_cast<uint32_t>(size - 1));
  auto in = Over(in_buffer, options);
  auto out = Over(std::make_shared<TMemoryBuffer>(), options);
  try {
    if ((data[0] & 1) == 0) {
      geops::rpc::gen::ParameterServerProcessor lan(std::make_shared<geops::rpc::gen::ParameterServerNull>());
      lan.process(in, out, nullptr);
    } else {
      geops::rpc::gen::MirrorProcessor mirror(std::make_shared<geops::rpc::gen::MirrorNull>());
      mirror.process(in, out, nullptr);
    }
  } catch (const std::exception&) {
    // A refused frame: the server drops the connection.
  }
  return 0;
}
