// The zero-copy paths of the LAN transport (thrift/framed_transport.h,
// thrift/bounded_protocol.h): bytes written from the caller's memory arrive
// whole and in place, a large binary is borrowed from its frame (aligned
// once the layout repeats) and stays valid until the next frame, and a
// shard behind a real server applies and serves large payloads exactly.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <thrift/transport/TBufferTransports.h>

#include "thrift/bounded_protocol.h"
#include "thrift/counting_socket.h"
#include "thrift/framed_transport.h"
#include "tests/thrift/thrift_test_util.h"

namespace geops::rpc {
namespace {

using apache::thrift::protocol::T_CALL;
using apache::thrift::protocol::TMessageType;
using apache::thrift::transport::TMemoryBuffer;

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
  return v;
}

std::string AsString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// Writes one frame: buffered bytes with two external runs between them.
// Returns the frame body as it must arrive.
std::vector<uint8_t> WriteMixedFrame(FramedTransport& out, const std::vector<uint8_t>& big,
                                     const std::vector<uint8_t>& mid) {
  const std::vector<uint8_t> a = Pattern(10, 1), b = Pattern(7, 2), c = Pattern(3, 3);
  out.write(a.data(), static_cast<uint32_t>(a.size()));
  out.WriteExternal(big);
  out.write(b.data(), static_cast<uint32_t>(b.size()));
  out.WriteExternal(mid);
  out.write(c.data(), static_cast<uint32_t>(c.size()));
  out.flush();
  std::vector<uint8_t> want;
  for (const auto* part : {&a, &big, &b, &mid, &c}) want.insert(want.end(), part->begin(), part->end());
  return want;
}

TEST(ZeroCopyTest, AFrameWithExternalBytesArrivesWholeOverASocket) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const TransportOptions options;
  auto config = MakeThriftConfiguration(options);
  auto counters = std::make_shared<ByteCounters>();
  auto send_socket = std::make_shared<CountingSocket>(fds[0], nullptr, config, counters);
  auto recv_socket = std::make_shared<CountingSocket>(fds[1], nullptr, config, std::make_shared<ByteCounters>());
  FramedTransport out(send_socket, options, config);
  FramedTransport in(recv_socket, options, config);
  const std::vector<uint8_t> big = Pattern(3 << 20, 9), mid = Pattern(100 << 10, 4);

  std::vector<uint8_t> want;
  // The socket holds far less than a frame: the writer needs a reader.
  std::thread writer([&] { want = WriteMixedFrame(out, big, mid); });
  std::vector<uint8_t> got(big.size() + mid.size() + 20);
  in.readAll(got.data(), static_cast<uint32_t>(got.size()));
  writer.join();
  EXPECT_EQ(got, want);
  EXPECT_EQ(in.FrameBytesLeft(), 0u);
  EXPECT_EQ(counters->sent.load(), static_cast<int64_t>(got.size() + 4)) << "every byte counted once";
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(ZeroCopyTest, AFrameWithExternalBytesArrivesWholeOverAnyOtherTransport) {
  // Not a CountingSocket (as TLS is not): the pieces are written in turn.
  auto memory = std::make_shared<TMemoryBuffer>(1 << 20);
  const TransportOptions options;
  FramedTransport out(memory, options, MakeThriftConfiguration(options));
  const std::vector<uint8_t> big = Pattern(200 << 10, 5), mid = Pattern(70 << 10, 6);
  const std::vector<uint8_t> want = WriteMixedFrame(out, big, mid);

  FramedTransport in(memory, options, MakeThriftConfiguration(options));
  std::vector<uint8_t> got(want.size());
  in.readAll(got.data(), static_cast<uint32_t>(got.size()));
  EXPECT_EQ(got, want);
}

// Two protocols over one memory buffer: `writing_` frames messages,
// `reading_` (over `reader_`) reads them.
class ProtocolPipe : public ::testing::Test {
 protected:
  void Open(bool reader_borrows) {
    memory_ = std::make_shared<TMemoryBuffer>(1 << 20);
    auto writer = std::make_shared<FramedTransport>(memory_, options_, MakeThriftConfiguration(options_));
    writing_ = std::make_unique<BoundedBinaryProtocol>(writer, options_);
    auto reader = std::make_shared<FramedTransport>(memory_, options_, MakeThriftConfiguration(options_));
    reader_ = reader.get();
    reading_ = std::make_unique<BoundedBinaryProtocol>(reader, options_, reader_borrows);
  }

  TransportOptions options_;
  std::shared_ptr<TMemoryBuffer> memory_;
  std::unique_ptr<BoundedBinaryProtocol> writing_;
  std::unique_ptr<BoundedBinaryProtocol> reading_;
  FramedTransport* reader_ = nullptr;
};

// Client-side protocol writes two messages with a large and a small binary;
// a server-side protocol with borrowing reads them.
class BorrowTest : public ProtocolPipe {
 protected:
  void SetUp() override {
    options_.buffer_reclaim_bytes = 256 << 10;  // below the frame: the buffer is given back at readEnd
    Open(/*reader_borrows=*/true);
  }

  // Through TProtocol, as the generated code calls (the overrides are the _virt ones).
  apache::thrift::protocol::TProtocol& client() { return *writing_; }
  apache::thrift::protocol::TProtocol& server() { return *reading_; }

  void Send(const std::string& big, const std::string& small, int32_t seqid) {
    client().writeMessageBegin("push", T_CALL, seqid);
    client().writeI32(seqid);  // shifts nothing: every message has the same layout
    client().writeBinary(small);
    client().writeBinary(big);
    client().writeMessageEnd();
    client().getTransport()->flush();
  }

};

TEST_F(BorrowTest, ALargeBinaryStaysInItsFrameAndTheNextLandsAligned) {
  const std::string big1 = AsString(Pattern(300 << 10, 11)), big2 = AsString(Pattern(300 << 10, 12));
  const std::string small = "a small binary is copied";
  Send(big1, small, 1);
  Send(big2, small, 2);

  for (const std::string* want : {&big1, &big2}) {
    std::string name;
    TMessageType type;
    int32_t seqid = 0, echoed = 0;
    server().readMessageBegin(name, type, seqid);
    server().readI32(echoed);
    EXPECT_EQ(echoed, seqid);
    std::string small_in, big_in;
    server().readBinary(small_in);
    server().readBinary(big_in);
    server().readMessageEnd();
    server().getTransport()->readEnd();  // past buffer_reclaim_bytes: must not free the frame yet

    EXPECT_EQ(small_in, small);
    EXPECT_FALSE(reading_->Borrowed(&small_in).has_value());
    EXPECT_TRUE(big_in.empty()) << "a borrowed binary leaves its string empty";
    std::optional<std::span<const uint8_t>> view = reading_->Borrowed(&big_in);
    ASSERT_TRUE(view.has_value());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(view->data()), view->size()), *want);
    if (want == &big2) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(view->data()) % 64, 0u)
          << "the second message repeats the first's layout and lands on a 64-byte line";
    }
  }
}

TEST_F(BorrowTest, ALengthPastTheFrameIsRefusedBeforeAnythingIsBorrowed) {
  client().writeMessageBegin("push", T_CALL, 1);
  client().writeI32(1);
  client().writeI32(1 << 20);  // a binary's length, with 4 bytes behind it
  client().writeI32(0);
  client().writeMessageEnd();
  client().getTransport()->flush();
  std::string name, big;
  TMessageType type;
  int32_t seqid = 0, i = 0;
  server().readMessageBegin(name, type, seqid);
  server().readI32(i);
  EXPECT_THROW(server().readBinary(big), apache::thrift::protocol::TProtocolException);
  EXPECT_FALSE(reading_->Borrowed(&big).has_value());
}

// A client protocol reading replies that carry a payload for the caller's
// buffer: the first shows where it lies, the next of the same size lands.
class LandingTest : public ProtocolPipe {
 protected:
  void SetUp() override { Open(/*reader_borrows=*/false); }
  // A reply: an i64, the payload, then `extra` (an i64, which makes the
  // payload's length field move by 8 bytes when the payload shrinks by 8).
  void Reply(const std::string& payload, bool extra) {
    apache::thrift::protocol::TProtocol& out = *writing_;
    out.writeMessageBegin("read", apache::thrift::protocol::T_REPLY, 1);
    out.writeI64(42);
    out.writeBinary(payload);
    if (extra) out.writeI64(7);
    out.writeString("end");
    out.writeMessageEnd();
    out.getTransport()->flush();
  }
  // Reads one reply, the payload redirected to `into`; returns the i64.
  int64_t Read(std::vector<uint8_t>& into, bool extra) {
    apache::thrift::protocol::TProtocol& in = *reading_;
    std::string field, end, name;
    TMessageType type;
    int32_t seqid = 0;
    int64_t clock = 0, more = 0;
    reading_->RedirectIncoming(&field, into);
    in.readMessageBegin(name, type, seqid);
    in.readI64(clock);
    in.readBinary(field);
    if (extra) in.readI64(more);
    in.readString(end);
    in.readMessageEnd();
    in.getTransport()->readEnd();
    EXPECT_EQ(end, "end");
    return clock;
  }
};

TEST_F(LandingTest, AReplyLaidOutAsTheLastLandsInTheCallersBuffer) {
  const std::vector<uint8_t> first = Pattern(200 << 10, 1), second = Pattern(200 << 10, 2);
  std::vector<uint8_t> into(first.size());
  Reply(AsString(first), false);
  Reply(AsString(second), false);

  EXPECT_EQ(Read(into, false), 42);
  EXPECT_FALSE(reader_->Landed()) << "the first reply shows where the payload lies";
  EXPECT_TRUE(reading_->incoming_redirected());
  EXPECT_EQ(into, first);
  reading_->ClearHooks();

  EXPECT_EQ(Read(into, false), 42);
  EXPECT_TRUE(reader_->Landed()) << "the second, of the same size, is read from the transport into the buffer";
  EXPECT_TRUE(reading_->incoming_redirected());
  EXPECT_FALSE(reading_->landing_unclaimed());
  EXPECT_EQ(into, second);
  reading_->ClearHooks();
}

TEST_F(LandingTest, AReplyOfTheSameSizeLaidOutOtherwiseIsRefused) {
  const std::vector<uint8_t> first = Pattern(200 << 10, 1);
  std::vector<uint8_t> into(first.size());
  Reply(AsString(first), false);
  // 8 bytes less payload and 8 bytes more after it: the same frame size.
  Reply(AsString(std::vector<uint8_t>(first.begin(), first.end() - 8)), true);
  Read(into, false);
  reading_->ClearHooks();
  EXPECT_THROW(Read(into, true), apache::thrift::protocol::TProtocolException);
  EXPECT_TRUE(reader_->Landed());
  EXPECT_TRUE(reading_->landing_unclaimed()) << "the caller must drop such a connection";
}

TEST_F(LandingTest, AReplyWhoseLandedRunNoFieldClaimsIsRefusedAtItsEnd) {
  const std::vector<uint8_t> first = Pattern(200 << 10, 1);
  std::vector<uint8_t> into(first.size());
  Reply(AsString(first), false);
  Reply(AsString(first), false);
  Read(into, false);
  reading_->ClearHooks();
  // The second lands, but this reader never reads the payload's field.
  std::string field, name;
  TMessageType type;
  int32_t seqid = 0;
  int64_t clock = 0;
  reading_->RedirectIncoming(&field, into);
  apache::thrift::protocol::TProtocol& in = *reading_;
  in.readMessageBegin(name, type, seqid);
  in.readI64(clock);
  EXPECT_TRUE(reader_->Landed());
  EXPECT_THROW(in.readMessageEnd(), apache::thrift::protocol::TProtocolException);
}

// Through a real server: payloads past the zero-copy size, every element
// distinct, pushed and pulled several times on one connection.
TEST(ZeroCopyTest, AShardAppliesAndServesLargePayloadsExactly) {
  auto spec = testing::FlatModel(int64_t{3} << 20, 256 << 10);  // 12 chunks of 256 KiB
  auto shard = testing::MakeShard(*spec, testing::OneShard(1));
  auto server = testing::Serve(shard.get());
  auto conn = testing::Connect(*server, spec);
  ASSERT_TRUE(conn->Register(0, spec->Fingerprint(), "").ok());
  const std::vector<ChunkKey> all = spec->ChunksOfTable(0);
  // The first push carries every chunk; later ones a subset out of order.
  const std::vector<std::vector<ChunkKey>> pushes = {all, {all[7], all[2], all[3]}, {all[11], all[0]}};
  std::vector<float> expect(static_cast<size_t>(testing::ElementsOf(*spec, all)), 0.0f);
  const int64_t per_chunk = spec->ChunkElements(all[0]);
  for (size_t p = 0; p < pushes.size(); ++p) {
    const std::vector<ChunkKey>& keys = pushes[p];
    std::vector<float> delta(static_cast<size_t>(testing::ElementsOf(*spec, keys)));
    for (size_t i = 0; i < delta.size(); ++i) delta[i] = static_cast<float>(i % 1000) * 0.25f + static_cast<float>(p);
    for (size_t c = 0; c < keys.size(); ++c) {
      for (int64_t e = 0; e < per_chunk; ++e) {
        expect[static_cast<size_t>(keys[c].chunk * per_chunk + e)] += delta[static_cast<size_t>(c * per_chunk + e)];
      }
    }
    Result<UpdateReply> up = conn->UpdateThenClock(0, static_cast<Clock>(p), keys, delta, 0, false);
    ASSERT_TRUE(up.ok()) << up.status().ToString();
    std::vector<float> got(expect.size(), -1.0f);
    Result<ReadReply> rd = conn->Read(0, static_cast<Clock>(p + 1), 0, all, got.data(), 5000);
    ASSERT_TRUE(rd.ok()) << rd.status().ToString();
    ASSERT_EQ(got, expect) << "after push " << p;
  }
  // A refusal (a small reply, not landed) between reads of the same keys.
  std::vector<float> got(expect.size(), -1.0f);
  EXPECT_EQ(conn->Read(0, 100, 0, all, got.data(), 0).status().code(), StatusCode::kDeadlineExceeded);
  Result<ReadReply> rd = conn->Read(0, 3, 0, all, got.data(), 5000);
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  EXPECT_EQ(got, expect);
  EXPECT_EQ(conn->stats().retries, 0);
}

}  // namespace
}  // namespace geops::rpc
