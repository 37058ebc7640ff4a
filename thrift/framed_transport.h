// FramedTransport: Thrift's TFramedTransport with a per-frame message budget,
// sized for tensors, and its factory.
//
// Why (THRIFT-5492): since Thrift 0.14 every transport carries a "consumed
// message size" budget, TConfiguration::maxMessageSize (100 MiB by default).
// TFramedTransport spends it as the protocol consumes strings and binaries,
// but in 0.17 only the memory/HTTP transports ever renew it (in readEnd()), so
// a long-lived framed connection under TThreadedServer dies once it has
// carried maxMessageSize bytes in total: the server throws END_OF_FILE
// "MaxMessageSize reached", closes the socket silently, and the client sees
// "No more data to read". FramedTransport renews the budget (its own and the
// CountingSocket's below it) every time it reads a frame, so the budget
// bounds one message, not a connection's lifetime. maxMessageSize and
// maxFrameSize are both set to TransportOptions::max_frame_bytes: every frame
// is still bounded, and an oversized one is refused before it is read.
//
// Buffers: Thrift's default 512-byte write buffer makes every large message
// regrow by doubling; FramedTransport starts at write_buffer_bytes (1 MiB)
// and keeps what it grew to, up to buffer_reclaim_bytes. Figures in
// experiments/results/lan_throughput.md.
//
// Zero copy for tensors (the protocol above decides when, bounded_protocol.h):
// - WriteExternal() puts a caller's bytes into the frame being written
//   without copying them; flush() hands the frame to the kernel as a gather
//   list (one sendmsg on a plain socket), so a push leaves the worker's
//   floats, and a read reply the shard's copy, straight for the socket.
// - A frame is read whole into one buffer and stays there until the next
//   frame is read (readEnd() no longer frees it), so a handler may apply a
//   payload where it landed. AlignFrameOffset() places the next frames so
//   that a given offset of the frame (where the last large payload began;
//   a client's requests repeat their layout) starts a 64-byte line.
//
// The protocol that goes with it is BoundedBinaryProtocol (bounded_protocol.h).
//
// Thread-safety: a transport is used by one thread at a time (Thrift's rule).
// The factory is immutable and may be shared.
#ifndef GEOPS_THRIFT_FRAMED_TRANSPORT_H_
#define GEOPS_THRIFT_FRAMED_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <thrift/TConfiguration.h>
#include <thrift/transport/TBufferTransports.h>

#include "thrift/counting_socket.h"
#include "thrift/thrift_options.h"

namespace geops::rpc {

// A TConfiguration whose max message and max frame sizes are
// options.max_frame_bytes. REQUIRES: options.Validate().ok().
std::shared_ptr<apache::thrift::TConfiguration> MakeThriftConfiguration(
    const TransportOptions& options);

class FramedTransport : public apache::thrift::transport::TFramedTransport {
 public:
  // `inner` is usually a CountingSocket; any transport works, but only a
  // CountingSocket's budget can be renewed. `config` as made above.
  FramedTransport(std::shared_ptr<apache::thrift::transport::TTransport> inner,
                  const TransportOptions& options,
                  std::shared_ptr<apache::thrift::TConfiguration> config);

  // Bytes of the current frame not yet read (0 between frames).
  uint32_t FrameBytesLeft() const { return static_cast<uint32_t>(rBound_ - rBase_); }
  // Bytes of the current frame already read.
  uint32_t FrameOffset() const { return static_cast<uint32_t>(rBase_ - FrameStart()); }
  // Frames read from now on start where byte `offset` of the frame falls on
  // a 64-byte boundary.
  void AlignFrameOffset(uint32_t offset) { align_offset_ = offset % kAlignBytes; }
  // The peer for logs, numeric (no DNS lookup).
  std::string PeerName() const;

  // Appends `bytes` to the frame being written, sent from the caller's
  // memory by the next flush(). REQUIRES: `bytes` stays valid and unchanged
  // until flush() returns. Throws TTransportException BAD_ARGS past 2 GB.
  void WriteExternal(std::span<const uint8_t> bytes);
  // A buffer of at least `bytes` for a payload about to be written with
  // WriteExternal: kept across frames like the write buffer (given back
  // after a flush once past buffer_reclaim_bytes). Its contents are the
  // caller's until the next call. Throws std::bad_alloc.
  std::span<uint8_t> ExternalScratch(size_t bytes);

  // Client side, for the reply to the request about to be sent: when the
  // next frame is exactly `frame` bytes long, its bytes [at, at + out.size())
  // are read straight into `out`, and the frame buffer holds the others with
  // that run cut out (the byte after it follows the byte before it).
  // Landed() says whether the frame read last did so; its reader must then
  // skip the run at LandedAt(). Nothing happens unless at + out.size() <=
  // frame. Either way it applies to one frame only.
  void LandNextFrame(uint32_t frame, uint32_t at, std::span<uint8_t> out);
  void CancelLanding() { landing_armed_ = false; }
  bool Landed() const { return landed_; }
  uint32_t LandedAt() const { return landing_at_; }

  // Sends the frame: the buffered bytes with the external ones in their
  // places.
  void flush() override;
  // As Thrift's, except that a buffer past buffer_reclaim_bytes is freed at
  // the next readFrame(), not here: a payload borrowed from the frame stays
  // valid while the handler runs.
  uint32_t readEnd() override;

 protected:
  // Renews the budgets, then reads the next frame whole: false when the peer
  // closed between frames; throws TTransportException on a truncated frame,
  // TIMED_OUT past the frame deadline, and CORRUPTED_DATA (logged) on a
  // negative or oversized length, before allocating anything for it.
  bool readFrame() override;

 private:
  // The first allocation for a frame larger than the buffer; it then doubles
  // as bytes arrive.
  static constexpr uint32_t kFirstBodyBytes = uint32_t{1} << 20;
  static constexpr uint32_t kAlignBytes = 64;

  struct External {
    uint32_t at;  // where in wBuf_ the bytes go
    std::span<const uint8_t> bytes;
  };

  // Reads the `frame` bytes after a header into rBuf_ (less a landed run,
  // see LandNextFrame), growing it with what arrived, within
  // frame_timeout_ms (checked after each read; one read that gets nothing
  // waits at most frame_timeout_ms, so a frame is dropped by twice that at
  // the latest).
  // Throws TTransportException: END_OF_FILE when the peer closes inside the
  // frame, TIMED_OUT (logged, naming the peer and what arrived) past the deadline.
  // Returns the bytes now in rBuf_.
  uint32_t ReadBody(uint32_t frame);
  // rBuf_ with room for `size` bytes of frame after the shift, keeping the
  // first `keep` bytes of the frame.
  void GrowReadBuffer(uint32_t keep, uint32_t size);
  // Where, in a buffer at `base`, a frame starts so that align_offset_ is aligned.
  uint32_t ShiftFor(const uint8_t* base) const;
  uint32_t ReadCapacity() const { return rBufSize_ > shift_ ? rBufSize_ - shift_ : 0; }
  const uint8_t* FrameStart() const { return rBuf_.get() + shift_; }
  // Sends the frame header and the buffered bytes with externals_ in place.
  void FlushGathered();

  WireSocket* socket_;  // `inner` when it is a CountingSocket or TlsSocket, else null; owned by the base
  CountingSocket* plain_;  // `inner` when it is a plain CountingSocket (gathered writes), else null
  const int64_t frame_timeout_ms_;
  uint32_t shift_ = 0;           // the current frame starts at rBuf_ + shift_
  uint32_t align_offset_ = 0;    // see AlignFrameOffset
  bool reclaim_pending_ = false;  // free rBuf_ before the next frame
  std::vector<External> externals_;
  uint64_t external_bytes_ = 0;
  std::unique_ptr<uint8_t[]> scratch_;  // see ExternalScratch
  size_t scratch_bytes_ = 0;
  bool landing_armed_ = false;  // LandNextFrame, for the next frame
  bool landed_ = false;         // the frame read last landed its run
  uint32_t landing_frame_ = 0;
  uint32_t landing_at_ = 0;
  std::span<uint8_t> landing_out_;
};

class FramedTransportFactory : public apache::thrift::transport::TTransportFactory {
 public:
  // REQUIRES: options.Validate().ok().
  explicit FramedTransportFactory(const TransportOptions& options);

  std::shared_ptr<apache::thrift::transport::TTransport> getTransport(
      std::shared_ptr<apache::thrift::transport::TTransport> inner) override;

  const std::shared_ptr<apache::thrift::TConfiguration>& configuration() const { return config_; }

 private:
  const TransportOptions options_;
  const std::shared_ptr<apache::thrift::TConfiguration> config_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_FRAMED_TRANSPORT_H_
