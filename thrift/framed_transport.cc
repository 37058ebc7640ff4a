#include "thrift/framed_transport.h"

#include <arpa/inet.h>
#include <sys/uio.h>

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
      plain_(dynamic_cast<CountingSocket*>(inner.get())),
      frame_timeout_ms_(options.frame_timeout_ms) {}

std::string FramedTransport::PeerName() const {
  return socket_ != nullptr ? socket_->PeerName() : std::string("a non-TCP peer");
}

bool FramedTransport::readFrame() {
  // A fresh budget for the message in this frame (THRIFT-5492).
  resetConsumedMessageSize();
  if (socket_ != nullptr) socket_->ResetMessageBudget();
  landed_ = false;
  if (reclaim_pending_) {  // the last frame's buffer was past buffer_reclaim_bytes
    reclaim_pending_ = false;
    rBuf_.reset();
    rBufSize_ = 0;
    shift_ = 0;
    setReadBuffer(nullptr, 0);
  }

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
  const uint32_t buffered = ReadBody(static_cast<uint32_t>(size));
  setReadBuffer(rBuf_.get() + shift_, buffered);
  return true;
}

uint32_t FramedTransport::readEnd() {
  const auto bytes = static_cast<uint32_t>(rBound_ - FrameStart() + sizeof(uint32_t));
  if (rBufSize_ > bufReclaimThresh_) reclaim_pending_ = true;
  return bytes;
}

uint32_t FramedTransport::ShiftFor(const uint8_t* base) const {
  const uintptr_t at = reinterpret_cast<uintptr_t>(base) + align_offset_;
  return static_cast<uint32_t>((kAlignBytes - at % kAlignBytes) % kAlignBytes);
}

void FramedTransport::GrowReadBuffer(uint32_t keep, uint32_t size) {
  const uint32_t total = size + kAlignBytes;  // size <= max_frame_bytes < 2 GiB
  std::unique_ptr<uint8_t[]> grown(new uint8_t[total]);
  const uint32_t shift = ShiftFor(grown.get());
  if (keep > 0) std::memcpy(grown.get() + shift, rBuf_.get() + shift_, keep);
  rBuf_.reset(grown.release());
  rBufSize_ = total;
  shift_ = shift;
}

void FramedTransport::LandNextFrame(uint32_t frame, uint32_t at, std::span<uint8_t> out) {
  landing_armed_ = !out.empty() && uint64_t{at} + out.size() <= frame;
  landing_frame_ = frame;
  landing_at_ = at;
  landing_out_ = out;
}

uint32_t FramedTransport::ReadBody(uint32_t frame) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  uint32_t have = 0;
  shift_ = rBuf_ ? ShiftFor(rBuf_.get()) : 0;
  // Frame bytes [gap, gap + run) go to landing_out_, the others to rBuf_.
  const bool landing = landing_armed_ && frame == landing_frame_;
  landing_armed_ = false;
  const auto run = landing ? static_cast<uint32_t>(landing_out_.size()) : 0;
  const uint32_t gap = landing ? landing_at_ : frame;
  // The rest of a frame the client sized itself is allocated at once.
  if (landing && ReadCapacity() < frame - run) GrowReadBuffer(0, frame - run);
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
      if (!landing && (have == ReadCapacity() || ReadCapacity() < std::min(frame, kFirstBodyBytes))) {
        const uint64_t want = std::max<uint64_t>(uint64_t{ReadCapacity()} * 2, kFirstBodyBytes);
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
      uint8_t* to = rBuf_.get() + shift_ + have;
      uint32_t len = (landing ? gap : std::min(ReadCapacity(), frame)) - have;
      if (have >= gap + run) {
        to = rBuf_.get() + shift_ + (have - run);
        len = frame - have;
      } else if (have >= gap) {
        to = landing_out_.data() + (have - gap);
        len = gap + run - have;
      }
      const uint32_t got = transport_->read(to, len);
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
  landed_ = landing;
  return frame - run;
}

void FramedTransport::WriteExternal(std::span<const uint8_t> bytes) {
  const auto buffered = static_cast<uint64_t>(wBase_ - wBuf_.get());
  if (buffered + external_bytes_ + bytes.size() > 0x7fffffff) {
    throw TTransportException(TTransportException::BAD_ARGS, "a frame of over 2 GB");
  }
  externals_.push_back(External{static_cast<uint32_t>(buffered), bytes});
  external_bytes_ += bytes.size();
}

std::span<uint8_t> FramedTransport::ExternalScratch(size_t bytes) {
  if (scratch_bytes_ < bytes) {
    scratch_.reset();  // the old one first: at most one is held
    scratch_bytes_ = 0;
    scratch_.reset(new uint8_t[bytes]);
    scratch_bytes_ = bytes;
  }
  return std::span<uint8_t>(scratch_.get(), bytes);
}

void FramedTransport::flush() {
  if (externals_.empty()) {
    TFramedTransport::flush();
    return;
  }
  FlushGathered();
}

void FramedTransport::FlushGathered() {
  const auto buffered = static_cast<uint32_t>(wBase_ - wBuf_.get());  // the header's 4 bytes included
  const uint32_t be = htonl(static_cast<uint32_t>(buffered - sizeof(uint32_t) + external_bytes_));
  std::memcpy(wBuf_.get(), &be, sizeof(be));
  std::vector<External> parts;
  parts.swap(externals_);
  external_bytes_ = 0;
  // A clean buffer for the next frame, should the write throw.
  wBase_ = wBuf_.get() + sizeof(uint32_t);

  std::vector<iovec> iov;
  iov.reserve(2 * parts.size() + 1);
  uint32_t from = 0;
  for (const External& e : parts) {
    if (e.at > from) iov.push_back(iovec{wBuf_.get() + from, e.at - from});
    if (!e.bytes.empty()) iov.push_back(iovec{const_cast<uint8_t*>(e.bytes.data()), e.bytes.size()});
    from = e.at;
  }
  if (buffered > from) iov.push_back(iovec{wBuf_.get() + from, buffered - from});
  if (plain_ != nullptr) {
    plain_->WriteGathered(iov);
  } else {
    for (const iovec& part : iov) transport_->write(static_cast<const uint8_t*>(part.iov_base), part.iov_len);
  }
  transport_->flush();

  if (scratch_bytes_ > bufReclaimThresh_) {
    scratch_.reset();
    scratch_bytes_ = 0;
  }
  if (wBufSize_ > bufReclaimThresh_) {  // as TFramedTransport::flush
    wBufSize_ = DEFAULT_BUFFER_SIZE;
    wBuf_.reset(new uint8_t[wBufSize_]);
    setWriteBuffer(wBuf_.get(), wBufSize_);
    wBase_ = wBuf_.get() + sizeof(uint32_t);
  }
}

FramedTransportFactory::FramedTransportFactory(const TransportOptions& options)
    : options_(options), config_(MakeThriftConfiguration(options)) {}

std::shared_ptr<TTransport> FramedTransportFactory::getTransport(std::shared_ptr<TTransport> inner) {
  return std::make_shared<FramedTransport>(std::move(inner), options_, config_);
}

}  // namespace geops::rpc
