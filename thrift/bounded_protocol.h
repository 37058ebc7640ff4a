// BoundedBinaryProtocol: Thrift's binary protocol over a FramedTransport that
// refuses any length field claiming more than the rest of the current frame.
//
// Why: a frame is read whole before it is parsed, so every string, binary
// and container of a message must fit in what is left of its frame. Thrift
// 0.17 does not hold them to that: a string length is only checked against a
// fixed limit before std::string::resize (which zero-fills it), and a list
// length is checked with a 32-bit product that overflows (2^30 i64 elements
// pass as 0 bytes), after which the generated code resizes the vector. A
// 40-byte frame could make a server allocate and clear gigabytes. Here each
// length is checked, in 64 bits, against the frame's remaining bytes (an
// element takes at least one byte), so what a peer can make this end
// allocate is bounded by what it actually sent. Method names are read the
// same way, and unversioned (pre-0.x "non-strict") messages are refused.
//
// It also offers zero-copy hooks for a message's large binary fields (at
// least kZeroCopyBytes), while the generated code still decides how every
// message is laid out:
// - outgoing (client push, server read reply): a field's bytes are written
//   from the caller's memory, straight to the socket at flush
//   (FramedTransport::WriteExternal);
// - incoming on a client (pull): a field lands straight in the caller's
//   buffer; once one reply has shown where its payload lies, the next reply
//   of the same size is read from the socket into the caller's buffer
//   (FramedTransport::LandNextFrame) and its field checked to be there;
// - incoming on a server made with borrowing on: a field is left in the
//   frame it arrived in, 64-byte aligned once a client repeats its layout,
//   and the handler takes it from Borrowed() (valid until the next request
//   is read), so an update is applied from the received frame.
//
// Thread-safety: one protocol per transport, used by one thread at a time.
// The factory is immutable and may be shared.
#ifndef GEOPS_THRIFT_BOUNDED_PROTOCOL_H_
#define GEOPS_THRIFT_BOUNDED_PROTOCOL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <thrift/protocol/TBinaryProtocol.h>

#include "thrift/framed_transport.h"
#include "thrift/thrift_options.h"

namespace geops::rpc {

class BoundedBinaryProtocol
    : public apache::thrift::protocol::TBinaryProtocolT<apache::thrift::transport::TFramedTransport> {
 public:
  // Strings and containers are also capped at max_frame_bytes elements.
  // With `borrow_binaries`, binary fields of at least kZeroCopyBytes are
  // read as views into the frame (Borrowed()) and their strings left empty:
  // only for a server whose handler takes every binary field from
  // Borrowed().
  BoundedBinaryProtocol(std::shared_ptr<FramedTransport> transport, const TransportOptions& options,
                        bool borrow_binaries = false);

  // Binary fields from this size on go by the zero-copy paths; smaller ones
  // are copied (cheaper than an extra gather entry or a misaligned view).
  static constexpr size_t kZeroCopyBytes = size_t{64} << 10;

  // Each throws TProtocolException (SIZE_LIMIT, NEGATIVE_SIZE, BAD_VERSION)
  // before allocating when a length does not fit the frame.
  uint32_t readMessageBegin_virt(std::string& name, apache::thrift::protocol::TMessageType& type,
                                 int32_t& seqid) override;
  uint32_t readString_virt(std::string& str) override;
  uint32_t readBinary_virt(std::string& str) override;
  uint32_t readListBegin_virt(apache::thrift::protocol::TType& elem_type, uint32_t& size) override;
  uint32_t readSetBegin_virt(apache::thrift::protocol::TType& elem_type, uint32_t& size) override;
  uint32_t readMapBegin_virt(apache::thrift::protocol::TType& key_type,
                             apache::thrift::protocol::TType& value_type, uint32_t& size) override;
  uint32_t writeBinary_virt(const std::string& str) override;
  // Throws TProtocolException INVALID_DATA when the message's run landed in
  // the caller's buffer but no field claimed it (see landing_unclaimed).
  uint32_t readMessageEnd_virt() override;
  // Ends the outgoing substitution (see SubstituteOutgoing).
  uint32_t writeMessageEnd_virt() override;

  // For the next message written (until its writeMessageEnd or
  // ClearHooks()): writing the binary field `*field` (identified by address)
  // writes `bytes` instead of the string's contents. REQUIRES: `bytes` stays
  // valid and unchanged until the transport's flush() returns.
  void SubstituteOutgoing(const std::string* field, std::span<const uint8_t> bytes);
  // A buffer for the bytes of the next SubstituteOutgoing, kept by the
  // transport across messages (FramedTransport::ExternalScratch).
  std::span<uint8_t> OutgoingScratch(size_t bytes) { return framed_->ExternalScratch(bytes); }
  // The bytes of binary field `*field` of the request read last, when
  // borrowing left them in the frame; nullopt when the field was read into
  // its string. Valid until the next request is read.
  std::optional<std::span<const uint8_t>> Borrowed(const std::string* field) const;
  // Until ClearHooks(): reading the binary field `*field` whose length is
  // exactly out.size() copies it into `out` and leaves the string empty
  // (then incoming_redirected() is true); any other length is read into the
  // string as usual. REQUIRES: `out` stays valid until then.
  void RedirectIncoming(std::string* field, std::span<uint8_t> out);
  bool incoming_redirected() const { return incoming_done_; }
  // The reply's run landed in the caller's buffer but no field claimed it:
  // the reply was not laid out as the last one, and the connection's
  // reading is out of step. readMessageEnd refuses such a message, and a
  // field read at another place throws before that; either way the
  // caller drops the connection (a TProtocolException).
  bool landing_unclaimed() const { return framed_->Landed() && !incoming_done_; }
  void ClearHooks();

 private:
  // Throws (and logs) unless `count` items of at least `min_bytes` each
  // (counted as 1 when smaller) fit in the rest of the frame.
  void CheckFits(int64_t count, int64_t min_bytes, const char* what) const;

  struct Borrow {
    const std::string* field;
    std::span<const uint8_t> bytes;
  };

  FramedTransport* framed_;  // owned by the base protocol
  const bool borrow_binaries_;
  std::vector<Borrow> borrowed_;  // of the message read last
  const std::string* outgoing_field_ = nullptr;
  std::span<const uint8_t> outgoing_bytes_;
  const std::string* incoming_field_ = nullptr;
  std::span<uint8_t> incoming_out_;
  bool incoming_done_ = false;
  // Where the last redirected field lay: frame size, offset, length.
  uint32_t learned_frame_ = 0;
  uint32_t learned_at_ = 0;
  size_t learned_size_ = 0;
};

// Makes BoundedBinaryProtocols over FramedTransports (any other transport
// gets Thrift's plain binary protocol with the same limits), borrowing
// large binaries when asked (see the constructor).
std::shared_ptr<apache::thrift::protocol::TProtocolFactory> MakeProtocolFactory(
    const TransportOptions& options, bool borrow_binaries = false);

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_BOUNDED_PROTOCOL_H_
