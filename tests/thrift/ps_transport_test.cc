// Connection-level behaviour: budgets over many GiB, reconnection, deadlines,
// shutdown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "tests/thrift/thrift_test_util.h"

namespace geops::rpc {
namespace {

using testing::Connect;
using testing::ElementsOf;
using testing::FlatModel;
using testing::MakeShard;
using testing::MsSince;
using testing::OneShard;
using testing::Serve;

// Pushes and pulls `rounds` x `bytes` each way on ONE connection and checks
// every call succeeds without a reconnection and the values add up.
void PushPullOnOneConnection(const TransportOptions& transport, int64_t bytes, int rounds) {
  auto spec = FlatModel(bytes);
  auto shard = MakeShard(*spec, OneShard(1));
  PsServerOptions so = testing::LoopbackServer();
  so.transport = transport;
  auto server = Serve(shard.get(), so);
  ThriftClientOptions co = testing::FastClient();
  co.rpc_timeout_ms = 20000;
  co.transport = transport;
  auto conn = Connect(*server, spec, co);
  ASSERT_TRUE(conn->Register(0, spec->Fingerprint(), "").ok());
  std::vector<ChunkKey> keys = spec->ChunksOfTable(0);
  std::vector<float> delta(ElementsOf(*spec, keys), 0.5f);
  std::vector<float> values(delta.size());
  for (int c = 0; c < rounds; ++c) {
    Result<UpdateReply> up = conn->Update(0, c, keys, delta);
    ASSERT_TRUE(up.ok()) << "push " << c << " after " << conn->stats().bytes_sent << " bytes: "
                         << up.status().ToString();
    ASSERT_TRUE(conn->AdvanceClock(0, c + 1, false).ok());
    Result<ReadReply> rd = conn->Read(0, c + 1, kAsync, keys, values.data(), 0);
    ASSERT_TRUE(rd.ok()) << "pull " << c << " after " << conn->stats().bytes_received
                         << " bytes: " << rd.status().ToString();
    ASSERT_EQ(values.front(), 0.5f * (c + 1));
    ASSERT_EQ(values.back(), 0.5f * (c + 1));
  }
  worker::TransferStats st = conn->stats();
  EXPECT_EQ(st.retries, 0) << "the connection was never lost";
  EXPECT_GE(st.bytes_sent, rounds * bytes);
  EXPECT_GE(st.bytes_received, rounds * bytes);
  EXPECT_EQ(server->connections(), 1);
}

// THRIFT-5492: without a per-frame budget reset both ends would drop this
// connection once it had carried max_frame_bytes (the message budget), here
// after 2 of 48 pushes.
TEST(TransportTest, SmallBudgetIsRenewedAtEveryFrame) {
  TransportOptions t;
  t.max_frame_bytes = 2 << 20;
  t.write_buffer_bytes = 64 << 10;
  PushPullOnOneConnection(t, 1 << 20, 48);
}

// With the default 1 GiB frame and budget: 3 GiB through one connection
// (1.5 GiB of 16 MiB pushes, 1.5 GiB of 16 MiB pulls).
TEST(TransportTest, OneConnectionCarriesSeveralGiB) {
  auto start = std::chrono::steady_clock::now();
  PushPullOnOneConnection(TransportOptions(), 16 << 20, 96);
  std::printf("3 GiB through one connection in %.1f s\n", MsSince(start) / 1000.0);
}

TEST(TransportTest, ReconnectsAfterTheServerRestartsOnTheSamePort) {
  auto spec = testing::SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  const int port = server->port();
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, 0, "").ok());
  ASSERT_TRUE(server->Stop(Deadline::InMs(5000)).ok());
  server.reset();
  Status down = conn->Heartbeat(0);
  EXPECT_EQ(down.code(), StatusCode::kUnavailable) << down.ToString();

  server = Serve(shard.get(), testing::LoopbackServer(port));
  ASSERT_NE(server, nullptr);
  Status up = Status(StatusCode::kUnknown, "not tried");
  for (int attempt = 0; attempt < 3 && !up.ok(); ++attempt) up = conn->Heartbeat(0);
  EXPECT_TRUE(up.ok()) << up.ToString();
  EXPECT_GE(conn->stats().retries, 1);
}

// A port with nothing behind it: a free port found by binding and closing.
int DeadPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(TransportTest, DeadServerIsUnavailableWithinTheDeadline) {
  auto spec = testing::SmallModel();
  ThriftClientOptions co = testing::FastClient();
  co.connect_timeout_ms = 500;
  auto conn = ThriftShardConnection::Create(HostPort{"127.0.0.1", DeadPort()}, co, spec);
  ASSERT_TRUE(conn.ok());
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    Status s = (*conn)->Heartbeat(0);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("127.0.0.1:"), std::string::npos) << s.message();
  }
  EXPECT_LT(MsSince(start), 3 * 600);
  EXPECT_FALSE((*conn)->connected());
}

// A peer that accepts TCP connections but never answers.
TEST(TransportTest, SilentServerTimesOutWithinTheRpcTimeout) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 8), 0);  // the kernel completes handshakes; nobody reads
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);

  auto spec = testing::SmallModel();
  ThriftClientOptions co = testing::FastClient();
  co.rpc_timeout_ms = 300;
  auto conn = ThriftShardConnection::Create(HostPort{"127.0.0.1", ntohs(addr.sin_port)}, co, spec);
  ASSERT_TRUE(conn.ok());
  auto start = std::chrono::steady_clock::now();
  Status s = (*conn)->Heartbeat(0);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_GE(MsSince(start), 250);
  EXPECT_LT(MsSince(start), 2000);
  // A read allows the server its wait on top of the rpc timeout, no more.
  std::vector<ChunkKey> keys = {ChunkKey{0, 0}};
  std::vector<float> out(64);
  start = std::chrono::steady_clock::now();
  s = (*conn)->Read(0, 0, 0, keys, out.data(), 400).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_GE(MsSince(start), 650);
  EXPECT_LT(MsSince(start), 2500);
  close(fd);
}

// The clock does not move (worker 1 never advances), so the shard waits the
// read's full deadline and answers DeadlineExceeded, well before the socket
// would give up.
TEST(TransportTest, ServerSideWaitEndsWithDeadlineExceededInBoundedTime) {
  auto spec = testing::SmallModel();
  auto shard = MakeShard(*spec, OneShard(2));
  auto server = Serve(shard.get());
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, 0, "").ok());
  ASSERT_TRUE(conn->Register(1, 0, "").ok());
  ASSERT_TRUE(conn->AdvanceClock(0, 1, false).ok());
  std::vector<ChunkKey> keys = {ChunkKey{0, 0}};
  std::vector<float> out(64);
  auto start = std::chrono::steady_clock::now();
  Status s = conn->Read(0, 1, 0, keys, out.data(), 300).status();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_GE(MsSince(start), 250);
  EXPECT_LT(MsSince(start), 2000);
  EXPECT_TRUE(conn->connected()) << "a shard's answer keeps the connection";
}

TEST(TransportTest, StopInterruptsIdleConnectionsAndWaitsForCallsInTheShard) {
  auto spec = testing::SmallModel();
  auto shard = MakeShard(*spec, OneShard(2));
  auto server = Serve(shard.get());
  auto idle = Connect(*server, spec);
  ASSERT_TRUE(idle->Register(0, 0, "").ok());
  ASSERT_TRUE(idle->Register(1, 0, "").ok());
  ASSERT_TRUE(idle->AdvanceClock(0, 1, false).ok());

  // A read that waits 1.5 s in the shard for a clock that never comes.
  const int64_t received_before = server->bytes_received();
  Status waited;
  std::thread reader([&] {
    auto conn = Connect(*server, spec);
    std::vector<ChunkKey> keys = {ChunkKey{0, 0}};
    std::vector<float> out(64);
    waited = conn->Read(0, 1, 0, keys, out.data(), 1500).status();
  });
  // Once the server has the request, the handler is in the shard within
  // moments.
  auto begin = std::chrono::steady_clock::now();
  while (server->bytes_received() == received_before && MsSince(begin) < 5000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Status early = server->Stop(Deadline::InMs(100));
  EXPECT_EQ(early.code(), StatusCode::kDeadlineExceeded) << early.ToString();
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(server->Stop(Deadline::InMs(5000)).ok());
  EXPECT_LT(MsSince(start), 2500);
  reader.join();
  EXPECT_EQ(waited.code(), StatusCode::kDeadlineExceeded) << waited.ToString();
  EXPECT_EQ(idle->Heartbeat(0).code(), StatusCode::kUnavailable);
}

// A plain TCP connection to 127.0.0.1:port that sends nothing.
int IdleConnection(int port) {
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

int ThreadsOfThisProcess() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// 1,500 idle connections (more than a thread-per-connection server would
// serve at once) hold no thread, and a worker connecting after them is
// served at once.
TEST(TransportTest, IdleConnectionsHoldNoThreadAndAWorkerIsServedBesideThem) {
  auto spec = testing::SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  const int threads_before = ThreadsOfThisProcess();
  std::vector<int> idle;
  for (int i = 0; i < 1500; ++i) {
    const int fd = IdleConnection(server->port());
    if (fd < 0) break;
    idle.push_back(fd);
  }
  ASSERT_EQ(idle.size(), 1500u) << "could not open the idle connections";
  auto begin = std::chrono::steady_clock::now();
  while (server->connections() < 1500 && MsSince(begin) < 10000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server->connections(), 1500);
  EXPECT_LT(ThreadsOfThisProcess() - threads_before, 50) << "idle connections hold threads";
  auto start = std::chrono::steady_clock::now();
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, spec->Fingerprint(), "").ok());
  std::vector<ChunkKey> keys = spec->ChunksOfTable(0);
  std::vector<float> before(ElementsOf(*spec, keys));
  ASSERT_TRUE(conn->Read(0, 0, kAsync, keys, before.data(), 0).ok());
  std::vector<float> delta(before.size(), 1.0f);
  ASSERT_TRUE(conn->Update(0, 0, keys, delta).ok());
  std::vector<float> after(before.size());
  ASSERT_TRUE(conn->Read(0, 0, kAsync, keys, after.data(), 0).ok());
  EXPECT_EQ(after.front(), before.front() + 1.0f);
  EXPECT_LT(MsSince(start), 2000);
  for (int fd : idle) close(fd);
}

// Senders that stall inside a frame each hold a thread until the frame
// deadline; a worker's requests still get one of their own at once.
TEST(TransportTest, SlowSendersDoNotDelayAWorker) {
  auto spec = testing::SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, spec->Fingerprint(), "").ok());
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    const int fd = IdleConnection(server->port());
    ASSERT_GE(fd, 0);
    const uint32_t be = htonl(64 << 10);
    ASSERT_EQ(send(fd, &be, sizeof(be), MSG_NOSIGNAL), 4);
    ASSERT_EQ(send(fd, "x", 1, MSG_NOSIGNAL), 1);
    slow.push_back(fd);
  }
  auto begin = std::chrono::steady_clock::now();
  while (server->connections() < 21 && MsSince(begin) < 5000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // their frames are being read
  std::vector<ChunkKey> keys = spec->ChunksOfTable(0);
  std::vector<float> values(ElementsOf(*spec, keys));
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(conn->Read(0, 0, kAsync, keys, values.data(), 0).ok());
  }
  EXPECT_LT(MsSince(start), 2000);
  for (int fd : slow) close(fd);
}

// Past max_connections a new connection is closed at once, and the ones
// already open go on.
TEST(TransportTest, ConnectionsPastTheLimitAreClosedAtOnce) {
  auto spec = testing::SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  PsServerOptions so = testing::LoopbackServer();
  so.max_connections = 4;
  auto server = Serve(shard.get(), so);
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, spec->Fingerprint(), "").ok());
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(IdleConnection(server->port()));
  auto begin = std::chrono::steady_clock::now();
  while (server->connections() < 4 && MsSince(begin) < 5000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(server->connections(), 4);
  const int extra = IdleConnection(server->port());
  ASSERT_GE(extra, 0);
  pollfd p{extra, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 3000), 1) << "the fifth connection was not closed";
  char byte;
  EXPECT_EQ(recv(extra, &byte, 1, 0), 0) << "closed, not answered";
  close(extra);
  EXPECT_TRUE(conn->Heartbeat(0).ok());
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace geops::rpc
