// A real PsServer around a real Shard, driven through ThriftShardConnection.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "common/replication.h"
#include "common/thread_name.h"
#include "tests/thrift/thrift_test_util.h"

namespace geops::rpc {
namespace {

using testing::Connect;
using testing::ElementsOf;
using testing::MakeShard;
using testing::OneShard;
using testing::SameBytes;
using testing::Serve;
using testing::SmallModel;
using testing::SnapshotOf;

TEST(PsServerTest, PicksAFreePortAndRefusesATakenOne) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->address().host, "127.0.0.1");

  Result<std::unique_ptr<PsServer>> second = PsServer::Start(shard.get(), testing::LoopbackServer(server->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(std::to_string(server->port())), std::string::npos)
      << second.status().message();
  EXPECT_TRUE(server->Stop(Deadline::InMs(5000)).ok());
}

// An operator looking at a shard with top -H or gdb tells the accept loop,
// the poller and the request threads apart by name.
TEST(PsServerTest, ItsThreadsCarryTheirNames) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  ASSERT_NE(server, nullptr);
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, spec->Fingerprint(), "").ok());
  std::vector<std::string> names = ThreadNamesOfThisProcess();
  for (const char* want : {"ps-accept", "ps-poll", "ps-work"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EXPECT_TRUE(server->Stop(Deadline::InMs(5000)).ok());
}

TEST(PsServerTest, RefusesBadOptions) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  PsServerOptions o = testing::LoopbackServer();
  o.transport.max_frame_bytes = 10;
  EXPECT_EQ(PsServer::Start(shard.get(), o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PsServer::Start(static_cast<datacenter::Shard*>(nullptr), testing::LoopbackServer()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ThriftShardConnection::Create(HostPort{"127.0.0.1", 0}, ThriftClientOptions(), spec)
                .status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ThriftShardConnectionFactory::Create(std::vector<std::string>{"127.0.0.1:1", "nope"},
                                                 ThriftClientOptions(), spec)
                .status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PsServerTest, RoundTripsEveryCall) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  auto conn = Connect(*server, spec);

  Result<RegisterReply> reg = conn->Register(0, spec->Fingerprint(), "");
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->shard_id, 0);
  EXPECT_EQ(reg->num_shards, 1);
  EXPECT_EQ(reg->worker_clock, 0);
  EXPECT_EQ(reg->model_fingerprint, spec->Fingerprint());
  EXPECT_EQ(reg->lease_ms, 20000);

  // Read everything: the same bytes as the shard holds.
  std::vector<ChunkKey> keys = spec->ChunksOfShard(0, 1);
  std::vector<float> values(ElementsOf(*spec, keys), -1.0f);
  Result<ReadReply> read = conn->Read(0, 0, 0, keys, values.data(), 1000);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->shard_clock, 0);
  std::vector<float> expected;
  for (const auto& [key, chunk] : SnapshotOf(*shard)) expected.insert(expected.end(), chunk.begin(), chunk.end());
  EXPECT_EQ(values, expected);

  // Update, then read the sum back.
  std::vector<float> delta(values.size());
  for (size_t i = 0; i < delta.size(); ++i) delta[i] = 0.25f * static_cast<float>(i % 7);
  Result<UpdateReply> up = conn->Update(0, 0, keys, delta);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_TRUE(up->applied);
  Result<UpdateReply> retry = conn->Update(0, 0, keys, delta);
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(retry->applied) << "a retried batch is acknowledged, not re-applied";

  Result<Clock> clock = conn->AdvanceClock(0, 1, false);
  ASSERT_TRUE(clock.ok()) << clock.status().ToString();
  EXPECT_EQ(*clock, 1);
  std::vector<float> after(values.size());
  ASSERT_TRUE(conn->Read(0, 1, 0, keys, after.data(), 1000).ok());
  for (size_t i = 0; i < after.size(); ++i) ASSERT_FLOAT_EQ(after[i], expected[i] + delta[i]) << i;

  // A partial read in any order; a chunk named twice is refused.
  std::vector<ChunkKey> some = {ChunkKey{1, 0}, ChunkKey{0, 2}};
  std::vector<float> part(ElementsOf(*spec, some));
  ASSERT_TRUE(conn->Read(0, 1, kAsync, some, part.data(), 0).ok());
  // In `after` (key order) w's 160 floats come first, then b's 5.
  std::vector<float> want(after.begin() + 160, after.begin() + 165);
  want.insert(want.end(), after.begin() + 128, after.begin() + 160);
  EXPECT_EQ(part, want);
  std::vector<ChunkKey> twice = {ChunkKey{1, 0}, ChunkKey{0, 2}, ChunkKey{1, 0}};
  std::vector<float> ignored(ElementsOf(*spec, twice));
  EXPECT_EQ(conn->Read(0, 1, kAsync, twice, ignored.data(), 0).status().code(), StatusCode::kInvalidArgument);

  EXPECT_TRUE(conn->Heartbeat(0).ok());
  Result<ShardStatus> st = conn->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ShardStatus direct = shard->GetStatus();
  EXPECT_EQ(st->shard_clock, 1);
  EXPECT_EQ(st->num_chunks, direct.num_chunks);
  EXPECT_EQ(st->num_elements, direct.num_elements);
  EXPECT_EQ(st->update_batches_applied, 1);
  EXPECT_EQ(st->update_batches_duplicate, 1);
  EXPECT_EQ(st->reads_served, direct.reads_served);
  ASSERT_EQ(st->workers.size(), 1u);
  EXPECT_EQ(st->workers[0].clock, 1);
  EXPECT_TRUE(st->workers[0].live);

  worker::TransferStats ts = conn->stats();
  EXPECT_EQ(ts.calls, 10);  // the refused read counts too
  EXPECT_EQ(ts.retries, 0);
  EXPECT_GT(ts.bytes_sent, static_cast<int64_t>(2 * delta.size() * sizeof(float)));
  EXPECT_GT(ts.bytes_received, static_cast<int64_t>(2 * values.size() * sizeof(float)));
}

// A clock's last update part with the clock advance: one RPC over the wire,
// the clock moved, a retry of the whole call harmless, `finished` honoured.
TEST(PsServerTest, TheLastUpdatePartAdvancesTheClockInTheSameRpc) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, spec->Fingerprint(), "").ok());
  std::vector<ChunkKey> keys = spec->ChunksOfShard(0, 1);
  std::vector<float> delta(ElementsOf(*spec, keys), 0.5f);
  std::vector<float> before;
  for (const auto& [key, chunk] : SnapshotOf(*shard)) before.insert(before.end(), chunk.begin(), chunk.end());
  const int64_t calls = conn->stats().calls;

  Result<UpdateReply> up = conn->UpdateThenClock(0, 0, keys, delta, 0, /*finished=*/false);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_TRUE(up->applied);
  EXPECT_TRUE(up->clocked);
  EXPECT_EQ(up->shard_clock, 1);
  EXPECT_EQ(conn->stats().calls - calls, 1);
  EXPECT_EQ(shard->GetStatus().workers.at(0).clock, 1);

  Result<UpdateReply> retry = conn->UpdateThenClock(0, 0, keys, delta, 0, false);
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_FALSE(retry->applied) << "the part was applied before";
  EXPECT_TRUE(retry->clocked);
  EXPECT_EQ(retry->shard_clock, 1) << "the repeated advance moves nothing";

  ASSERT_TRUE(conn->UpdateThenClock(0, 1, keys, delta, 0, /*finished=*/true).ok());
  ShardStatus st = shard->GetStatus();
  EXPECT_EQ(st.update_batches_applied, 2);
  EXPECT_EQ(st.workers.at(0).clock, 2);
  EXPECT_TRUE(st.workers.at(0).finished);
  std::vector<float> after(delta.size());
  ASSERT_TRUE(conn->Read(0, 2, 0, keys, after.data(), 1000).ok());
  for (size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], before[i] + 0.5f + 0.5f) << i;
}

// Without a spec the reply cannot land in `out` directly: it goes through
// the reply string, with the same result.
TEST(PsServerTest, ReadsWithoutASpecToo) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  auto with_spec = Connect(*server, spec);
  auto without = Connect(*server, nullptr);
  ASSERT_TRUE(with_spec->Register(0, 0, "").ok());
  std::vector<ChunkKey> keys = spec->ChunksOfShard(0, 1);
  std::vector<float> a(ElementsOf(*spec, keys), -1.0f);
  std::vector<float> b(a.size(), -2.0f);
  ASSERT_TRUE(with_spec->Read(0, 0, kAsync, keys, a.data(), 0).ok());
  ASSERT_TRUE(without->Read(0, 0, kAsync, keys, b.data(), 0).ok());
  EXPECT_EQ(a, b);
  std::vector<float> delta(a.size(), 0.5f);
  ASSERT_TRUE(without->Update(0, 0, keys, delta).ok());
  ASSERT_TRUE(without->Read(0, 0, kAsync, keys, b.data(), 0).ok());
  EXPECT_FLOAT_EQ(b[3], a[3] + 0.5f);
}

// readChanged over the wire: the first reply carries every chunk, one after
// the worker's own update nothing, one after a peer's sparse batch only its
// elements; a worker of a site with several gets read_id 0 and everything.
TEST(PsServerTest, ReadChangedCarriesOnlyWhatOthersChanged) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, spec->Fingerprint(), "").ok());
  const std::vector<ChunkKey> keys = spec->ChunksOfShard(0, 1);
  const int64_t n = ElementsOf(*spec, keys);
  ChangedValues changed;
  ASSERT_TRUE(conn->ReadChanged(0, 0, kAsync, keys, 0, &changed, 1000).ok());
  EXPECT_NE(changed.read_id, 0u);
  EXPECT_EQ(static_cast<int64_t>(changed.values.size()), n);
  ASSERT_TRUE(conn->Update(0, 0, keys, std::vector<float>(n, 0.5f)).ok());
  uint64_t since = changed.read_id;
  ASSERT_TRUE(conn->ReadChanged(0, 0, kAsync, keys, since, &changed, 1000).ok());
  EXPECT_TRUE(changed.runs.empty());
  const std::vector<uint32_t> idx = {2, 3};
  const std::vector<float> val = {1.0f, 2.0f};
  const RemoteChunkDelta d{keys[1], static_cast<uint32_t>(spec->ChunkElements(keys[1])), idx, val};
  ASSERT_TRUE(shard->ApplyRemote(1, 1, std::span<const RemoteChunkDelta>(&d, 1)).ok());
  since = changed.read_id;
  ASSERT_TRUE(conn->ReadChanged(0, 0, kAsync, keys, since, &changed, 1000).ok());
  const uint32_t at = static_cast<uint32_t>(spec->ChunkElements(keys[0])) + 2;  // keys[1] follows keys[0]
  EXPECT_EQ(changed.runs, (std::vector<uint32_t>{at, 2}));
  std::vector<float> full(n);
  ASSERT_TRUE(conn->Read(0, 0, kAsync, keys, full.data(), 0).ok());
  ASSERT_EQ(changed.values.size(), 2u);
  EXPECT_EQ(changed.values[0], full[at]);
  EXPECT_EQ(changed.values[1], full[at + 1]);

  auto shared = MakeShard(*spec, OneShard(2));
  auto server2 = Serve(shared.get());
  auto conn2 = Connect(*server2, spec);
  ASSERT_TRUE(conn2->Register(1, spec->Fingerprint(), "").ok());
  ASSERT_TRUE(conn2->ReadChanged(1, 0, kAsync, keys, 0, &changed, 1000).ok());
  EXPECT_EQ(changed.read_id, 0u);
  EXPECT_EQ(static_cast<int64_t>(changed.values.size()), n);
  EXPECT_TRUE(server->Stop(Deadline::InMs(5000)).ok());
  EXPECT_TRUE(server2->Stop(Deadline::InMs(5000)).ok());
}

// A worker whose spec cuts the table differently from the shard's: the reply
// has the wrong length and is refused before it touches `out`.
TEST(PsServerTest, ReplyOfTheWrongLengthNeverTouchesOut) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  // Same tables, chunks of 512 bytes: chunk w/0 is 128 floats here, 64 there.
  Result<ModelSpec> other = ModelSpec::Create(spec->tables(), 512, 7);
  ASSERT_TRUE(other.ok());
  auto conn = Connect(*server, std::make_shared<const ModelSpec>(std::move(other).value()));
  ASSERT_TRUE(conn->Register(0, 0, "").ok());
  std::vector<ChunkKey> keys = {ChunkKey{0, 0}};
  std::vector<float> out(128, -7.0f);
  Status s = conn->Read(0, 0, kAsync, keys, out.data(), 0).status();
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("same model"), std::string::npos) << s.message();
  EXPECT_EQ(out, std::vector<float>(128, -7.0f));
  EXPECT_TRUE(conn->Heartbeat(0).ok()) << "the connection is still in step";
}

TEST(PsServerTest, CountsTheExactBytesOnTheWire) {
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(1));
  auto server = Serve(shard.get());
  auto conn = Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, 0, "").ok());
  std::vector<ChunkKey> keys = spec->ChunksOfShard(0, 1);
  std::vector<float> delta(ElementsOf(*spec, keys), 1.0f);
  const int64_t sent_before = conn->stats().bytes_sent;
  ASSERT_TRUE(conn->Update(0, 0, keys, delta).ok());
  const int64_t update_bytes = conn->stats().bytes_sent - sent_before;
  // Payload + keys + a small envelope: frame header, message header, fields.
  const int64_t payload = static_cast<int64_t>(delta.size() * sizeof(float) + keys.size() * 8);
  EXPECT_GT(update_bytes, payload);
  EXPECT_LT(update_bytes, payload + 100);
  // Both ends count the same bytes (the server's count of its reply may land
  // just after the client has read it).
  auto start = std::chrono::steady_clock::now();
  while (server->bytes_sent() != conn->stats().bytes_received && testing::MsSince(start) < 2000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(conn->stats().bytes_sent, server->bytes_received());
  EXPECT_EQ(conn->stats().bytes_received, server->bytes_sent());
}

// Every error the core can produce reaches the worker with its code and its
// exact message: a twin shard in the same state, called directly, says the same.
TEST(PsServerTest, CoreErrorsCrossTheWireWithCodeAndMessage) {
  auto spec = SmallModel();
  ShardOptions o = OneShard(2);
  o.auth_token = "secret";
  o.max_batch_bytes = 1024;
  auto served = MakeShard(*spec, o);
  auto twin = MakeShard(*spec, o);
  auto server = Serve(served.get());
  auto conn = Connect(*server, spec);
  std::vector<ChunkKey> keys = {ChunkKey{0, 0}};
  std::vector<float> delta(64, 1.0f);
  std::vector<float> out(1024);

  auto same = [](const Status& wire, const Status& direct, StatusCode code) {
    EXPECT_EQ(wire.code(), code) << wire.ToString();
    EXPECT_EQ(wire, direct) << "wire: " << wire.ToString() << "\ndirect: " << direct.ToString();
  };
  // Aborted: not registered yet.
  same(conn->Heartbeat(0), twin->Heartbeat(0), StatusCode::kAborted);
  same(conn->Update(0, 0, keys, delta).status(), twin->Update(0, 0, keys, delta).status(),
       StatusCode::kAborted);
  // FailedPrecondition: wrong token, wrong model.
  same(conn->Register(0, 0, "guess").status(), twin->RegisterWorker(0, 0, "guess").status(),
       StatusCode::kFailedPrecondition);
  same(conn->Register(0, 12345, "secret").status(), twin->RegisterWorker(0, 12345, "secret").status(),
       StatusCode::kFailedPrecondition);
  // InvalidArgument: worker id out of range.
  same(conn->Register(9, 0, "secret").status(), twin->RegisterWorker(9, 0, "secret").status(),
       StatusCode::kInvalidArgument);
  ASSERT_TRUE(conn->Register(0, 0, "secret").ok());
  ASSERT_TRUE(twin->RegisterWorker(0, 0, "secret").ok());
  ASSERT_TRUE(conn->Register(1, 0, "secret").ok());
  ASSERT_TRUE(twin->RegisterWorker(1, 0, "secret").ok());
  // InvalidArgument: a clock that jumps, a negative clock, a bad staleness.
  same(conn->AdvanceClock(0, 5, false).status(), twin->AdvanceClock(0, 5, false).status(),
       StatusCode::kInvalidArgument);
  same(conn->Update(0, 3, keys, delta).status(), twin->Update(0, 3, keys, delta).status(),
       StatusCode::kInvalidArgument);
  same(conn->Read(0, -1, 0, keys, out.data(), 0).status(),
       twin->Read(0, -1, 0, keys, out.data(), Deadline::InMs(0)).status(), StatusCode::kInvalidArgument);
  same(conn->Read(0, 0, -7, keys, out.data(), 0).status(),
       twin->Read(0, 0, -7, keys, out.data(), Deadline::InMs(0)).status(), StatusCode::kInvalidArgument);
  // InvalidArgument: the same chunk twice in one batch.
  std::vector<ChunkKey> twice = {ChunkKey{0, 0}, ChunkKey{0, 0}};
  std::vector<float> two(128, 1.0f);
  same(conn->Update(0, 0, twice, two).status(), twin->Update(0, 0, twice, two).status(),
       StatusCode::kInvalidArgument);
  // ResourceExhausted: a batch over max_batch_bytes (1 KiB here). The whole
  // model is 660 bytes, so: a read naming chunk w/0 five times (1280 bytes),
  // and an update carrying 1280 bytes.
  std::vector<ChunkKey> five(5, ChunkKey{0, 0});
  std::vector<float> big_out(320);
  same(conn->Read(0, 0, kAsync, five, big_out.data(), 0).status(),
       twin->Read(0, 0, kAsync, five, big_out.data(), Deadline::InMs(0)).status(),
       StatusCode::kResourceExhausted);
  std::vector<float> many(320, 1.0f);
  same(conn->Update(0, 0, keys, many).status(), twin->Update(0, 0, keys, many).status(),
       StatusCode::kResourceExhausted);
  // FailedPrecondition: a finished worker may not push.
  ASSERT_TRUE(conn->AdvanceClock(1, 1, true).ok());
  ASSERT_TRUE(twin->AdvanceClock(1, 1, true).ok());
  same(conn->Update(1, 1, keys, delta).status(), twin->Update(1, 1, keys, delta).status(),
       StatusCode::kFailedPrecondition);
  // DeadlineExceeded: worker 0 at clock 2 with staleness 0 needs shard clock 2.
  ASSERT_TRUE(conn->AdvanceClock(0, 1, false).ok());
  ASSERT_TRUE(twin->AdvanceClock(0, 1, false).ok());
  ASSERT_TRUE(conn->AdvanceClock(0, 2, false).ok());
  ASSERT_TRUE(twin->AdvanceClock(0, 2, false).ok());
  Status wire = conn->Read(0, 3, 0, keys, out.data(), 50).status();
  Status direct = twin->Read(0, 3, 0, keys, out.data(), Deadline::InMs(50)).status();
  EXPECT_EQ(wire.code(), StatusCode::kDeadlineExceeded) << wire.ToString();
  EXPECT_EQ(direct.code(), StatusCode::kDeadlineExceeded) << direct.ToString();
  // The message names the time waited, which may differ by a millisecond.
  auto timeless = [](const Status& s) { return s.message().substr(0, s.message().find(" after waiting")); };
  EXPECT_EQ(timeless(wire), timeless(direct));
  EXPECT_NE(wire.message().find("held back by"), std::string::npos) << wire.message();
  EXPECT_EQ(conn->stats().retries, 0) << "refusals never cost the connection";
  EXPECT_TRUE(SameBytes(SnapshotOf(*served), SnapshotOf(*twin)));
}

TEST(PsServerTest, ServesConcurrentWorkersOnTheirOwnConnections) {
  constexpr int kWorkers = 4;
  constexpr int kClocks = 20;
  auto spec = SmallModel();
  auto shard = MakeShard(*spec, OneShard(kWorkers));
  auto server = Serve(shard.get());
  std::vector<ChunkKey> keys = spec->ChunksOfShard(0, 1);
  const int64_t n = ElementsOf(*spec, keys);
  testing::ShardSnapshot initial = SnapshotOf(*shard);
  std::vector<std::thread> threads;
  std::vector<Status> results(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto conn = Connect(*server, spec);
      results[w] = conn->Register(w, 0, "").status();
      std::vector<float> delta(n, 1.0f);
      std::vector<float> read(n);
      for (Clock c = 0; c < kClocks && results[w].ok(); ++c) {
        results[w] = conn->Update(w, c, keys, delta).status();
        if (results[w].ok()) results[w] = conn->AdvanceClock(w, c + 1, false).status();
        if (results[w].ok()) results[w] = conn->Read(w, c + 1, 1, keys, read.data(), 5000).status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.ToString();
  testing::ShardSnapshot final_values = SnapshotOf(*shard);
  ASSERT_EQ(final_values.size(), initial.size());
  for (size_t i = 0; i < initial.size(); ++i) {
    for (size_t j = 0; j < initial[i].second.size(); ++j) {
      ASSERT_FLOAT_EQ(final_values[i].second[j], initial[i].second[j] + kWorkers * kClocks);
    }
  }
}

}  // namespace
}  // namespace geops::rpc
