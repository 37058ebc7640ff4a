#include "thrift/framed_transport.h"

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
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
      socket_(dynamic_cast<WireSocket*>(inner.get())),
      frame_timeout_ms_(options.frame_timeout_ms) {}

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
  ReadBody(static_cast<uint32_t>(size));
  setReadBuffer(rBuf_.get(), static_cast<uint32_t>(size));
  return true;
}

void FramedTransport::GrowReadBuffer(uint32_t keep, uint32_t size) {
  std::unique_ptr<uint8_t[]> grown(new uint8_t[size]);
  if (keep > 0) std::memcpy(grown.get(), rBuf_.get(), keep);
  rBuf_.reset(grown.release());
  rBufSize_ = size;
}

void FramedTransport::ReadBody(uint32_t frame) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  uint32_t have = 0;
  int saved_timeout = -1;  // the socket's own receive timeout, while the frame deadline runs
  bool deadline_running = false;
  auto restore = [&] {
    if (saved_timeout >= 0) socket_->ExchangeReceiveTimeout(saved_timeout);
    saved_timeout = -1;
  };
  try {
    while (have < frame) {
      // The buffer follows the bytes that arrived: a header alone reserves
      // at most kFirstBodyBytes, however large the frame it announces.
      if (have == rBufSize_ || rBufSize_ < std::min(frame, kFirstBodyBytes)) {
        const uint64_t want = std::max<uint64_t>(uint64_t{rBufSize_} * 2, kFirstBodyBytes);
        GrowReadBuffer(have, static_cast<uint32_t>(std::min<uint64_t>(frame, want)));
      }
      // The whole body has frame_timeout_ms from the header on: checked
      // after every read (a clock read). A read that gets nothing waits the
      // socket's receive timeout: its own for the first read (a server's
      // is frame_timeout_ms already), frame_timeout_ms for the rest, set
      // once, so a frame that comes in one read costs no system call.
      if (frame_timeout_ms_ > 0 && socket_ != nullptr) {
        deadline_running = true;
        if (std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() >= frame_timeout_ms_) {
          throw TTransportException(TTransportException::TIMED_OUT, "frame deadline passed");
        }
        if (have > 0 && saved_timeout < 0) {
          saved_timeout = socket_->ExchangeReceiveTimeout(static_cast<int>(frame_timeout_ms_));
        }
      }
      const uint32_t got = transport_->read(rBuf_.get() + have, std::min(rBufSize_, frame) - have);
      if (got == 0) {
        throw TTransportException(TTransportException::END_OF_FILE,
                                  "connection from " + PeerName() + " closed after " + std::to_string(have) +
                                      " of the " + std::to_string(frame) + " bytes of a frame");
      }
      have += got;
    }
  } catch (const TTransportException& e) {
    restore();
    if (e.getType() == TTransportException::TIMED_OUT && deadline_running) {
      const std::string why = "frame of " + std::to_string(frame) + " bytes from " + PeerName() + ": only " +
                              std::to_string(have) + " bytes arrived within frame_timeout_ms " +
                              std::to_string(frame_timeout_ms_);
      spdlog::warn("{}; closing the connection", why);
      throw TTransportException(TTransportException::TIMED_OUT, why);
    }
    throw;
  }
  restore();
}

FramedTransportFactory::FramedTransportFactory(const TransportOptions& options)
    : options_(options), config_(MakeThriftConfiguration(options)) {}

std::shared_ptr<TTransport> FramedTransportFactory::getTransport(std::shared_ptr<TTransport> inner) {
  return std::make_shared<FramedTransport>(std::move(inner), options_, config_);
}

}  // namespace geops::rpc
