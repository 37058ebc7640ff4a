// Malformed requests sent through the wire, bypassing the client's own checks:
// each gets a clean error (or a closed connection), is logged, leaves the
// shard exactly as it was, and the server keeps serving everyone else.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <malloc.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "tests/thrift/thrift_test_util.h"
#include "thrift/error_convert.h"

namespace geops::rpc {
namespace {

using testing::ElementsOf;
using testing::MakeShard;
using testing::OneShard;
using testing::Packed;
using testing::RawClient;
using testing::SameBytes;
using testing::ShardSnapshot;
using testing::SnapshotOf;

template <typename Call>
Status CallRaw(Call&& call) {
  try {
    call();
    return Status::Ok();
  } catch (...) {
    return StatusFromCurrentException("raw").status;
  }
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = testing::SmallModel();
    shard_ = MakeShard(*spec_, OneShard(1));
    server_ = testing::Serve(shard_.get());
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(shard_->RegisterWorker(0, 0, "").ok());
    before_ = SnapshotOf(*shard_);
  }

  // The shard is untouched and a fresh client is still served.
  void ExpectUnchangedAndServing() {
    EXPECT_TRUE(SameBytes(before_, SnapshotOf(*shard_)));
    auto conn = testing::Connect(*server_, spec_);
    Result<ShardStatus> st = conn->GetStatus();
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->shard_clock, 0);
    EXPECT_EQ(st->update_batches_applied, 0);
  }

  gen::UpdateRequest Update(std::vector<ChunkKey> keys, std::string values, Clock clock = 0) {
    gen::UpdateRequest req;
    req.worker_id = 0;
    req.clock = clock;
    req.chunk_keys = Packed(keys);
    req.values = std::move(values);
    return req;
  }

  std::shared_ptr<const ModelSpec> spec_;
  std::unique_ptr<datacenter::Shard> shard_;
  std::unique_ptr<PsServer> server_;
  ShardSnapshot before_;
};

// A refusal made by the RPC layer (here a payload that is not whole floats,
// caught before the shard sees the call) counts in requests_rejected like
// the shard's own refusals, once each.
TEST_F(BadInputTest, RefusalsBeforeTheShardCountInRequestsRejected) {
  RawClient raw(server_->port());
  gen::UpdateReply up;
  Status torn = CallRaw([&] { raw->update(up, Update({ChunkKey{0, 0}}, std::string(7, '\0'))); });
  EXPECT_EQ(torn.code(), StatusCode::kInvalidArgument) << torn.ToString();
  EXPECT_EQ(shard_->GetStatus().requests_rejected, 1);
  Status unknown = CallRaw([&] { raw->update(up, Update({ChunkKey{9, 0}}, std::string(256, '\0'))); });
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument) << unknown.ToString();
  EXPECT_EQ(shard_->GetStatus().requests_rejected, 2);
  ExpectUnchangedAndServing();
}

TEST_F(BadInputTest, UnknownTableOrChunkIsRefused) {
  RawClient raw(server_->port());
  gen::UpdateReply up;
  Status s = CallRaw([&] { raw->update(up, Update({ChunkKey{9, 0}}, std::string(256, '\0'))); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("unknown table id 9"), std::string::npos) << s.message();

  gen::ReadRequest rr;
  rr.worker_id = 0;
  rr.chunk_keys = Packed({ChunkKey{0, 99}});
  gen::ReadReply reply;
  s = CallRaw([&] { raw->read(reply, rr); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.message();
  // The same connection still works after a refusal.
  EXPECT_TRUE(CallRaw([&] { raw->heartbeat(0, 0); }).ok());
  ExpectUnchangedAndServing();
}

TEST_F(BadInputTest, PayloadOfTheWrongShapeIsRefused) {
  RawClient raw(server_->port());
  gen::UpdateReply up;
  // One float short of chunk w/0 (64 floats).
  Status s = CallRaw([&] { raw->update(up, Update({ChunkKey{0, 0}}, std::string(63 * 4, '\0'))); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("expected 64"), std::string::npos) << s.message();
  // Not a whole number of floats.
  s = CallRaw([&] { raw->update(up, Update({ChunkKey{0, 0}}, std::string(64 * 4 - 1, '\0'))); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("whole number of float32"), std::string::npos) << s.message();
  // Payload without keys.
  s = CallRaw([&] { raw->update(up, Update({}, std::string(16, '\0'))); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  ExpectUnchangedAndServing();
}

// The handler converts and the shard checks: a bad update refused over the
// wire carries exactly the words the shard itself gives for it (one copy of
// each check), and a bad read's keys are checked by the shard's validator
// before the reply buffer is sized.
TEST_F(BadInputTest, RefusalsOverTheWireAreTheShardsOwnWords) {
  RawClient raw(server_->port());
  const std::vector<float> chunk(64, 1.0f);
  const std::string bytes(reinterpret_cast<const char*>(chunk.data()), chunk.size() * sizeof(float));
  const std::vector<std::pair<std::vector<ChunkKey>, std::string>> bad = {
      {{ChunkKey{9, 0}}, bytes},                  // unknown table
      {{ChunkKey{0, 99}}, bytes},                 // chunk out of range
      {{ChunkKey{0, 0}}, bytes.substr(4)},        // a float short
      {{ChunkKey{0, 0}, ChunkKey{0, 0}}, bytes + bytes},  // named twice
      {{}, std::string()},                        // no chunks
  };
  for (const auto& [keys, payload] : bad) {
    gen::UpdateReply up;
    const Status wire = CallRaw([&] { raw->update(up, Update(keys, payload)); });
    std::vector<float> values(payload.size() / sizeof(float));
    if (!values.empty()) std::memcpy(values.data(), payload.data(), values.size() * sizeof(float));
    const Result<UpdateReply> direct = shard_->Update(0, 0, keys, values);
    ASSERT_FALSE(direct.ok());
    EXPECT_EQ(wire.code(), direct.status().code()) << wire.ToString();
    EXPECT_EQ(wire.message(), direct.status().message());
  }
  gen::ReadRequest rr;
  rr.worker_id = 0;
  rr.chunk_keys = Packed({ChunkKey{0, 0}, ChunkKey{0, 0}});
  gen::ReadReply reply;
  const Status wire = CallRaw([&] { raw->read(reply, rr); });
  std::vector<float> out(128);
  const std::vector<ChunkKey> twice = {ChunkKey{0, 0}, ChunkKey{0, 0}};
  const Result<ReadReply> direct = shard_->Read(0, 0, 0, twice, out.data(), Deadline::InMs(100));
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(wire.message(), direct.status().message());
  ExpectUnchangedAndServing();
}

TEST_F(BadInputTest, NonFiniteValuesAreRefused) {
  RawClient raw(server_->port());
  gen::UpdateReply up;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> values(64, 0.5f);
    values[37] = bad;
    Status s = CallRaw([&] { raw->update(up, Update({ChunkKey{0, 1}}, testing::Bytes(values))); });
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(std::isnan(bad) ? "NaN" : "Inf"), std::string::npos) << s.message();
  }
  ExpectUnchangedAndServing();
}

TEST_F(BadInputTest, BadClocksAndWaitsAreRefused) {
  RawClient raw(server_->port());
  gen::UpdateReply up;
  std::vector<float> values(64, 1.0f);
  Status s = CallRaw([&] { raw->update(up, Update({ChunkKey{0, 0}}, testing::Bytes(values), 7)); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  gen::ClockRequest cr;
  cr.worker_id = 0;
  cr.clock = 3;
  gen::ClockReply cl;
  s = CallRaw([&] { raw->clock(cl, cr); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  gen::ReadRequest rr;
  rr.worker_id = 0;
  rr.chunk_keys = Packed({ChunkKey{0, 0}});
  rr.deadline_ms = -5;
  gen::ReadReply reply;
  s = CallRaw([&] { raw->read(reply, rr); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  rr.deadline_ms = std::numeric_limits<int64_t>::max();  // capped by the shard, not overflowed
  rr.staleness = kAsync;
  s = CallRaw([&] { raw->read(reply, rr); });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(reply.values.size(), 64u * 4u);
  ExpectUnchangedAndServing();
}

TEST_F(BadInputTest, OversizedFrameDropsOnlyThatConnection) {
  // A server that accepts frames of at most 64 KiB.
  auto spec = testing::FlatModel(256 << 10, 16 << 10);
  auto shard = MakeShard(*spec, OneShard(1));
  PsServerOptions small = testing::LoopbackServer();
  small.transport.max_frame_bytes = 64 << 10;
  small.transport.write_buffer_bytes = 4 << 10;
  auto server = testing::Serve(shard.get(), small);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ShardSnapshot before = SnapshotOf(*shard);
  auto bystander = testing::Connect(*server, spec);
  ASSERT_TRUE(bystander->Heartbeat(0).ok());

  std::vector<ChunkKey> keys = spec->ChunksOfTable(0);  // 256 KiB in 16 chunks
  std::vector<float> values(ElementsOf(*spec, keys), 1.0f);
  RawClient raw(server->port());  // its own limit is 1 GiB
  gen::UpdateReply up;
  gen::UpdateRequest req;
  req.worker_id = 0;
  req.chunk_keys = Packed(keys);
  req.values = testing::Bytes(values);
  Status s = CallRaw([&] { raw->update(up, req); });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_TRUE(SameBytes(before, SnapshotOf(*shard)));
  EXPECT_TRUE(bystander->Heartbeat(0).ok()) << "other connections are unaffected";

  // A client with the same limit refuses before sending anything.
  ThriftClientOptions co = testing::FastClient();
  co.transport.max_frame_bytes = 64 << 10;
  co.transport.write_buffer_bytes = 4 << 10;
  auto careful = testing::Connect(*server, spec, co);
  Status local = careful->Update(0, 0, keys, values).status();
  EXPECT_EQ(local.code(), StatusCode::kResourceExhausted) << local.ToString();
  std::vector<float> out(values.size());
  local = careful->Read(0, 0, kAsync, keys, out.data(), 0).status();
  EXPECT_EQ(local.code(), StatusCode::kResourceExhausted) << local.ToString();
  EXPECT_EQ(careful->stats().bytes_sent, 0);
  // Without a spec it cannot know in advance: the oversized reply is dropped
  // on arrival, and the next call reconnects.
  auto blind = testing::Connect(*server, nullptr, co);
  local = blind->Read(0, 0, kAsync, keys, out.data(), 0).status();
  EXPECT_EQ(local.code(), StatusCode::kResourceExhausted) << local.ToString();
  EXPECT_TRUE(blind->Heartbeat(0).ok());
  EXPECT_EQ(blind->stats().retries, 1);
  EXPECT_TRUE(SameBytes(before, SnapshotOf(*shard)));
}

// Raw bytes on a plain TCP socket.
class RawTcp {
 public:
  explicit RawTcp(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawTcp() { close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void Send(const std::string& bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // True when the peer closes (EOF or reset) within `ms`; drains what it sent.
  bool ClosedByPeerWithin(int ms) {
    auto start = std::chrono::steady_clock::now();
    while (testing::MsSince(start) < ms) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string BigEndian32(uint32_t v) {
  uint32_t be = htonl(v);
  return std::string(reinterpret_cast<const char*>(&be), 4);
}

TEST_F(BadInputTest, GarbageFramesDropOnlyThatConnection) {
  auto bystander = testing::Connect(*server_, spec_);
  ASSERT_TRUE(bystander->Heartbeat(0).ok());
  {
    RawTcp tcp(server_->port());
    ASSERT_TRUE(tcp.connected());
    tcp.Send(BigEndian32(12) + "not thrift!!");
    EXPECT_TRUE(tcp.ClosedByPeerWithin(3000));
  }
  {
    RawTcp tcp(server_->port());
    tcp.Send(BigEndian32(0x80000000u));  // negative frame length
    EXPECT_TRUE(tcp.ClosedByPeerWithin(3000));
  }
  {
    RawTcp tcp(server_->port());
    tcp.Send(BigEndian32(0x7fffffffu) + "x");  // 2 GiB frame, over the 1 GiB bound
    EXPECT_TRUE(tcp.ClosedByPeerWithin(3000));
  }
  EXPECT_TRUE(bystander->Heartbeat(0).ok());
  ExpectUnchangedAndServing();
}

// Small frames whose list claims 2^30 keys, or whose binary claims 512 MiB:
// refused from the frame's size, never allocated.
TEST_F(BadInputTest, HostileLengthsAreRefusedWithoutAllocating) {
  std::string call;
  call += BigEndian32(0x80010001u);         // strict binary protocol, T_CALL
  call += BigEndian32(6) + "update";        // method
  call += BigEndian32(1);                   // seqid
  call += std::string("\x0c\x00\x01", 3);  // field 1: struct UpdateRequest
  const std::string list = std::string("\x0f\x00\x03\x0a", 4) + BigEndian32(1u << 30);
  const std::string binary = std::string("\x0b\x00\x04", 3) + BigEndian32(512u << 20) + "abcd";
  const std::string name = BigEndian32(0x80010001u) + BigEndian32(1u << 30) + "upd";
  for (const std::string& msg : {call + list, call + binary, name}) {
    RawTcp tcp(server_->port());
    tcp.Send(BigEndian32(static_cast<uint32_t>(msg.size())) + msg);
    auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(tcp.ClosedByPeerWithin(3000));
    EXPECT_LT(testing::MsSince(start), 1000) << "refused at once, not after clearing gigabytes";
  }
  ExpectUnchangedAndServing();
}

// Bytes the allocator has handed out (heap and mmapped blocks).
size_t AllocatedBytes() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// A header that announces a large frame and then nothing, and a sender that
// dribbles a byte at a time: each holds its connection only for the frame
// deadline, the announced size is never reserved, and other workers go on.
TEST_F(BadInputTest, StalledAndSlowFramesAreDroppedAtTheFrameDeadline) {
  auto spec = testing::FlatModel(64 << 10, 16 << 10);
  auto shard = MakeShard(*spec, OneShard(1));
  PsServerOptions so = testing::LoopbackServer();
  so.transport.frame_timeout_ms = 400;
  auto server = testing::Serve(shard.get(), so);
  ASSERT_TRUE(shard->RegisterWorker(0, 0, "").ok());
  ShardSnapshot before = SnapshotOf(*shard);
  auto bystander = testing::Connect(*server, spec);
  ASSERT_TRUE(bystander->Heartbeat(0).ok());
  {
    const size_t allocated = AllocatedBytes();
    RawTcp tcp(server->port());
    ASSERT_TRUE(tcp.connected());
    auto start = std::chrono::steady_clock::now();
    tcp.Send(BigEndian32(900u << 20) + "abc");  // 900 MiB announced (the bound is 1 GiB), 3 bytes sent
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_LT(AllocatedBytes(), allocated + (64u << 20)) << "the announced 900 MiB were reserved";
    EXPECT_TRUE(bystander->Heartbeat(0).ok()) << "a stalled frame holds only its own connection";
    EXPECT_TRUE(tcp.ClosedByPeerWithin(5000));
    EXPECT_GE(testing::MsSince(start), 350);
    EXPECT_LT(testing::MsSince(start), 3000);
  }
  {
    RawTcp tcp(server->port());
    auto start = std::chrono::steady_clock::now();
    tcp.Send(BigEndian32(64 << 10));
    bool closed = false;
    for (int i = 0; i < 100 && !closed; ++i) {  // at most 5 s of one byte per 50 ms
      const char byte = 'x';
      (void)send(tcp.fd(), &byte, 1, MSG_NOSIGNAL);
      closed = tcp.ClosedByPeerWithin(50);
    }
    EXPECT_TRUE(closed) << "a slow sender kept its connection past the frame deadline";
    EXPECT_GE(testing::MsSince(start), 350);
    EXPECT_LT(testing::MsSince(start), 3000);
  }
  EXPECT_TRUE(bystander->Heartbeat(0).ok());
  EXPECT_TRUE(SameBytes(before, SnapshotOf(*shard)));
}

}  // namespace
}  // namespace geops::rpc
