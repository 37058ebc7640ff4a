#include "thrift/bounded_protocol.h"

#include <algorithm>
#include <limits>

#include <thrift/protocol/TProtocolException.h>

#include <spdlog/spdlog.h>

namespace geops::rpc {

using apache::thrift::protocol::TBinaryProtocolFactoryT;
using apache::thrift::protocol::TBinaryProtocolT;
using apache::thrift::protocol::TMessageType;
using apache::thrift::protocol::TProtocol;
using apache::thrift::protocol::TProtocolException;
using apache::thrift::protocol::TProtocolFactory;
using apache::thrift::protocol::TType;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TTransport;

namespace {

using Base = TBinaryProtocolT<TFramedTransport>;

int32_t Limit(const TransportOptions& options) { return static_cast<int32_t>(options.max_frame_bytes); }

}  // namespace

BoundedBinaryProtocol::BoundedBinaryProtocol(std::shared_ptr<FramedTransport> transport,
                                             const TransportOptions& options, bool borrow_binaries)
    : Base(transport, Limit(options), Limit(options), /*strict_read=*/true, /*strict_write=*/true),
      framed_(transport.get()),
      borrow_binaries_(borrow_binaries) {}

void BoundedBinaryProtocol::CheckFits(int64_t count, int64_t min_bytes, const char* what) const {
  if (count < 0) throw TProtocolException(TProtocolException::NEGATIVE_SIZE);
  const int64_t left = framed_->FrameBytesLeft();
  if (count > left / std::max<int64_t>(min_bytes, 1)) {
    const std::string why = std::string(what) + " claims " + std::to_string(count) +
                            (min_bytes <= 1 ? " bytes" : " elements") + " but its frame from " +
                            framed_->PeerName() + " has " + std::to_string(left) + " bytes left";
    spdlog::warn("{}; closing the connection", why);
    throw TProtocolException(TProtocolException::SIZE_LIMIT, why);
  }
}

uint32_t BoundedBinaryProtocol::readMessageBegin_virt(std::string& name, TMessageType& type,
                                                      int32_t& seqid) {
  borrowed_.clear();  // the last request's views end with it
  int32_t header = 0;
  uint32_t result = readI32(header);
  if (header >= 0 || (header & VERSION_MASK) != VERSION_1) {
    const std::string why = "message from " + framed_->PeerName() +
                            " lacks the binary protocol's version identifier";
    spdlog::warn("{}; closing the connection", why);
    throw TProtocolException(TProtocolException::BAD_VERSION, why);
  }
  type = static_cast<TMessageType>(header & 0x000000ff);
  int32_t name_size = 0;
  result += readI32(name_size);
  CheckFits(name_size, 1, "a method name");
  result += readStringBody(name, name_size);
  result += readI32(seqid);
  return result;
}

uint32_t BoundedBinaryProtocol::readString_virt(std::string& str) {
  int32_t size = 0;
  uint32_t result = readI32(size);
  CheckFits(size, 1, "a string");
  return result + readStringBody(str, size);
}

uint32_t BoundedBinaryProtocol::readBinary_virt(std::string& str) {
  if (&str != incoming_field_ && !borrow_binaries_) return readString_virt(str);
  int32_t size = 0;
  uint32_t result = readI32(size);
  if (&str == incoming_field_ && framed_->Landed()) {
    // The bytes are in the caller's buffer already, if they are this field's.
    if (framed_->FrameOffset() != framed_->LandedAt() || static_cast<size_t>(size) != incoming_out_.size()) {
      const std::string why = "a reply from " + framed_->PeerName() + " landed its payload at byte " +
                              std::to_string(framed_->LandedAt()) + " but carries it at byte " +
                              std::to_string(framed_->FrameOffset()) + " (" + std::to_string(size) + " bytes)";
      spdlog::warn("{}; closing the connection", why);
      throw TProtocolException(TProtocolException::INVALID_DATA, why);
    }
    str.clear();
    incoming_done_ = true;
    return result + static_cast<uint32_t>(size);
  }
  CheckFits(size, 1, "a binary");
  if (&str != incoming_field_) {
    if (static_cast<size_t>(size) < kZeroCopyBytes) return result + readStringBody(str, size);
    // The frame is whole in the transport's buffer (CheckFits): a view of it.
    framed_->AlignFrameOffset(framed_->FrameOffset());  // the client's next request lands aligned
    auto len = static_cast<uint32_t>(size);
    const uint8_t* bytes = trans_->borrow(nullptr, &len);
    if (bytes == nullptr) return result + readStringBody(str, size);
    trans_->consume(static_cast<uint32_t>(size));
    str.clear();
    borrowed_.push_back(Borrow{&str, std::span<const uint8_t>(bytes, static_cast<size_t>(size))});
    return result + static_cast<uint32_t>(size);
  }
  if (static_cast<size_t>(size) == incoming_out_.size()) {
    learned_at_ = framed_->FrameOffset();
    learned_frame_ = learned_at_ + framed_->FrameBytesLeft();
    learned_size_ = incoming_out_.size();
    str.clear();
    if (size > 0) trans_->readAll(incoming_out_.data(), static_cast<uint32_t>(size));
    incoming_done_ = true;
    return result + static_cast<uint32_t>(size);
  }
  return result + readStringBody(str, size);
}

uint32_t BoundedBinaryProtocol::writeBinary_virt(const std::string& str) {
  if (&str != outgoing_field_) return Base::writeBinary(str);
  if (outgoing_bytes_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw TProtocolException(TProtocolException::SIZE_LIMIT);
  }
  const auto size = static_cast<uint32_t>(outgoing_bytes_.size());
  uint32_t result = writeI32(static_cast<int32_t>(size));
  if (size >= kZeroCopyBytes) {
    framed_->WriteExternal(outgoing_bytes_);
  } else if (size > 0) {
    trans_->write(outgoing_bytes_.data(), size);
  }
  return result + size;
}

uint32_t BoundedBinaryProtocol::readMessageEnd_virt() {
  if (landing_unclaimed()) {
    const std::string why = "a reply from " + framed_->PeerName() + " landed its payload at byte " +
                            std::to_string(framed_->LandedAt()) + " but no field of it is there";
    spdlog::warn("{}; closing the connection", why);
    throw TProtocolException(TProtocolException::INVALID_DATA, why);
  }
  return Base::readMessageEnd();
}

uint32_t BoundedBinaryProtocol::writeMessageEnd_virt() {
  outgoing_field_ = nullptr;
  outgoing_bytes_ = {};
  return Base::writeMessageEnd();
}

std::optional<std::span<const uint8_t>> BoundedBinaryProtocol::Borrowed(const std::string* field) const {
  for (const Borrow& b : borrowed_) {
    if (b.field == field) return b.bytes;
  }
  return std::nullopt;
}

void BoundedBinaryProtocol::SubstituteOutgoing(const std::string* field,
                                               std::span<const uint8_t> bytes) {
  outgoing_field_ = field;
  outgoing_bytes_ = bytes;
}

void BoundedBinaryProtocol::RedirectIncoming(std::string* field, std::span<uint8_t> out) {
  incoming_field_ = field;
  incoming_out_ = out;
  incoming_done_ = false;
  // A reply laid out as the last one is read from the socket into `out`.
  if (out.size() >= kZeroCopyBytes && out.size() == learned_size_) {
    framed_->LandNextFrame(learned_frame_, learned_at_, out);
  }
}

void BoundedBinaryProtocol::ClearHooks() {
  outgoing_field_ = nullptr;
  outgoing_bytes_ = {};
  incoming_field_ = nullptr;
  incoming_out_ = {};
  framed_->CancelLanding();
}

uint32_t BoundedBinaryProtocol::readListBegin_virt(TType& elem_type, uint32_t& size) {
  uint32_t result = Base::readListBegin(elem_type, size);
  CheckFits(size, getMinSerializedSize(elem_type), "a list");
  return result;
}

uint32_t BoundedBinaryProtocol::readSetBegin_virt(TType& elem_type, uint32_t& size) {
  uint32_t result = Base::readSetBegin(elem_type, size);
  CheckFits(size, getMinSerializedSize(elem_type), "a set");
  return result;
}

uint32_t BoundedBinaryProtocol::readMapBegin_virt(TType& key_type, TType& value_type, uint32_t& size) {
  uint32_t result = Base::readMapBegin(key_type, value_type, size);
  CheckFits(size, int64_t{getMinSerializedSize(key_type)} + getMinSerializedSize(value_type), "a map");
  return result;
}

namespace {

class BoundedProtocolFactory : public TProtocolFactory {
 public:
  BoundedProtocolFactory(const TransportOptions& options, bool borrow_binaries)
      : options_(options), borrow_binaries_(borrow_binaries), plain_(Limit(options), Limit(options), true, true) {}

  std::shared_ptr<TProtocol> getProtocol(std::shared_ptr<TTransport> transport) override {
    if (auto framed = std::dynamic_pointer_cast<FramedTransport>(transport)) {
      return std::make_shared<BoundedBinaryProtocol>(std::move(framed), options_, borrow_binaries_);
    }
    return plain_.getProtocol(std::move(transport));
  }

 private:
  const TransportOptions options_;
  const bool borrow_binaries_;
  TBinaryProtocolFactoryT<TTransport> plain_;
};

}  // namespace

std::shared_ptr<TProtocolFactory> MakeProtocolFactory(const TransportOptions& options, bool borrow_binaries) {
  return std::make_shared<BoundedProtocolFactory>(options, borrow_binaries);
}

}  // namespace geops::rpc
