#include "thrift/framed_transport.h"

#include <arpa/inet.h>

#include <cstring>
#include <string>

#include <thrift/transport/TTransportException.h>

#include <spdlog/spdlog.h>

namespace geops::rpc {

using apache::thrift::TConfiguration;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TTransport;
using apache::thrift::transport::TTransportException;

std::shared_ptr<TConfiguration> MakeThriftConfiguration(const TransportOptions& options) {
  int bytes = static_cast<int>(options.max_frame_bytes);
  return std::make_shared<TConfiguration>(bytes, bytes);
}

FramedTransport::FramedTransport(std::shared_ptr<TTransport> inner, const TransportOptions& options,
                                 std::shared_ptr<TConfiguration> config)
    : TFramedTransport(inner, static_cast<uint32_t>(options.write_buffer_bytes),
                       static_cast<uint32_t>(options.buffer_reclaim_bytes), std::move(config)),
      socket_(dynamic_cast<WireSocket*>(inner.get())) {}

std::string FramedTransport::PeerName() const {
  return socket_ != nullptr ? socket_->PeerName() : std::string("a non-TCP peer");
}

bool FramedTransport::readFrame() {
  // A fresh budget for the message in this frame (THRIFT-5492).
  resetConsumedMessageSize();
  if (socket_ != nullptr) socket_->ResetMessageBudget();

  // TFramedTransport::readFrame, with the refusal logged and worded for geops.
  uint8_t header[4];
  uint32_t have = 0;
  while (have < sizeof(header)) {
    uint32_t got = transport_->read(header + have, static_cast<uint32_t>(sizeof(header)) - have);
    if (got == 0) {
      if (have == 0) return false;  // the peer closed between frames
      throw TTransportException(TTransportException::END_OF_FILE,
                                "connection closed inside a frame header");
    }
    have += got;
  }
  uint32_t be;
  std::memcpy(&be, header, sizeof(be));
  const auto size = static_cast<int32_t>(ntohl(be));
  if (size < 0 || static_cast<uint32_t>(size) > maxFrameSize_) {
    const std::string why = "frame of " + std::to_string(size) + " bytes from " + PeerName() +
                            " is outside [0, max_frame_bytes " + std::to_string(maxFrameSize_) + "]";
    spdlog::warn("{}; closing the connection", why);
    throw TTransportException(TTransportException::CORRUPTED_DATA, why);
  }
  if (static_cast<uint32_t>(size) > rBufSize_) {
    rBuf_.reset(new uint8_t[size]);
    rBufSize_ = static_cast<uint32_t>(size);
  }
  transport_->readAll(rBuf_.get(), static_cast<uint32_t>(size));
  setReadBuffer(rBuf_.get(), static_cast<uint32_t>(size));
  return true;
}

FramedTransportFactory::FramedTransportFactory(const TransportOptions& options)
    : options_(options), config_(MakeThriftConfiguration(options)) {}

std::shared_ptr<TTransport> FramedTransportFactory::getTransport(std::shared_ptr<TTransport> inner) {
  return std::make_shared<FramedTransport>(std::move(inner), options_, config_);
}

}  // namespace geops::rpc
