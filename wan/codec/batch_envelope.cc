#include "wan/codec/batch_envelope.h"

#include <lz4.h>

#include <cstring>
#include <string>

#include "wan/codec/crc32c.h"

namespace geops::wan {
namespace bf = batch_format;
namespace {

template <typename T>
void PutAt(uint8_t* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}
template <typename T>
T GetAt(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

uint32_t Checksum(const uint8_t* batch, size_t stored) {
  uint32_t crc = Crc32c(batch, bf::kChecksumOffset);
  return Crc32cExtend(crc, batch + bf::kHeaderSize, stored);
}

}  // namespace

Status SealBatch(const BatchHeader& header, std::span<const uint8_t> body, bool compress,
                 int lz4_acceleration, std::vector<uint8_t>* out) {
  if (static_cast<uint8_t>(header.codec) >= kNumValueCodecs) {
    return InvalidArgumentError("batch header: unknown value codec " +
                                std::to_string(static_cast<int>(header.codec)));
  }
  if (body.size() > bf::kMaxBodyBytes) {
    return ResourceExhaustedError("batch body of " + std::to_string(body.size()) +
                                  " bytes exceeds the limit of " +
                                  std::to_string(bf::kMaxBodyBytes));
  }
  const int raw = static_cast<int>(body.size());
  uint8_t flags = header.final ? bf::kFlagFinal : 0;
  size_t stored = body.size();
  if (compress && raw > 0) {
    out->resize(bf::kHeaderSize + static_cast<size_t>(LZ4_compressBound(raw)));
    int n = LZ4_compress_fast(reinterpret_cast<const char*>(body.data()),
                              reinterpret_cast<char*>(out->data() + bf::kHeaderSize), raw,
                              LZ4_compressBound(raw), lz4_acceleration < 1 ? 1 : lz4_acceleration);
    if (n > 0 && n < raw) {
      flags |= bf::kFlagLz4;
      stored = static_cast<size_t>(n);
    }
  }
  out->resize(bf::kHeaderSize + stored);
  uint8_t* p = out->data();
  if ((flags & bf::kFlagLz4) == 0 && stored > 0) {
    std::memcpy(p + bf::kHeaderSize, body.data(), stored);
  }
  PutAt<uint32_t>(p, bf::kMagicOffset, bf::kMagic);
  PutAt<uint16_t>(p, bf::kVersionOffset, bf::kVersion);
  PutAt<uint8_t>(p, bf::kCodecOffset, static_cast<uint8_t>(header.codec));
  PutAt<uint8_t>(p, bf::kFlagsOffset, flags);
  PutAt<int32_t>(p, bf::kOriginOffset, header.origin);
  PutAt<uint32_t>(p, bf::kChunkCountOffset, header.chunk_count);
  PutAt<uint64_t>(p, bf::kSeqOffset, header.seq);
  PutAt<int64_t>(p, bf::kClockOffset, header.clock);
  PutAt<uint32_t>(p, bf::kBodySizeOffset, static_cast<uint32_t>(raw));
  PutAt<uint32_t>(p, bf::kStoredSizeOffset, static_cast<uint32_t>(stored));
  PutAt<uint32_t>(p, bf::kReservedOffset, 0);
  PutAt<uint32_t>(p, bf::kChecksumOffset, Checksum(p, stored));
  return Status::Ok();
}

Result<BatchHeader> PeekBatchHeader(std::span<const uint8_t> batch, const DecodeLimits& limits) {
  if (batch.size() < bf::kHeaderSize) {
    return DataLossError("batch truncated: " + std::to_string(batch.size()) +
                         " bytes, header alone is " + std::to_string(bf::kHeaderSize));
  }
  if (static_cast<int64_t>(batch.size()) > limits.max_batch_bytes) {
    return ResourceExhaustedError("batch of " + std::to_string(batch.size()) +
                                  " bytes exceeds max_batch_bytes " +
                                  std::to_string(limits.max_batch_bytes));
  }
  const uint8_t* p = batch.data();
  uint32_t magic = GetAt<uint32_t>(p, bf::kMagicOffset);
  if (magic != bf::kMagic) {
    return InvalidArgumentError("batch header: bad magic " + std::to_string(magic) +
                                ", not a geops WAN batch");
  }
  uint16_t version = GetAt<uint16_t>(p, bf::kVersionOffset);
  if (version != bf::kVersion) {
    return InvalidArgumentError("batch header: unsupported version " + std::to_string(version) +
                                " (this build reads version " + std::to_string(bf::kVersion) +
                                " only)");
  }
  uint8_t codec = GetAt<uint8_t>(p, bf::kCodecOffset);
  if (codec >= kNumValueCodecs) {
    return InvalidArgumentError("batch header: unknown value codec " + std::to_string(codec));
  }
  uint8_t flags = GetAt<uint8_t>(p, bf::kFlagsOffset);
  if ((flags & ~bf::kKnownFlags) != 0) {
    return InvalidArgumentError("batch header: unknown flags " + std::to_string(flags));
  }
  if (GetAt<uint32_t>(p, bf::kReservedOffset) != 0) {
    return InvalidArgumentError("batch header: reserved field is not 0");
  }
  uint32_t raw = GetAt<uint32_t>(p, bf::kBodySizeOffset);
  uint32_t stored = GetAt<uint32_t>(p, bf::kStoredSizeOffset);
  if (raw > limits.max_body_bytes || raw > bf::kMaxBodyBytes) {
    return ResourceExhaustedError("batch header: body size " + std::to_string(raw) +
                                  " exceeds max_body_bytes " +
                                  std::to_string(limits.max_body_bytes));
  }
  if ((flags & bf::kFlagLz4) == 0 && stored != raw) {
    return InvalidArgumentError("batch header: uncompressed body but stored size " +
                                std::to_string(stored) + " != body size " + std::to_string(raw));
  }
  if ((flags & bf::kFlagLz4) != 0 && (stored == 0 || raw == 0)) {
    return InvalidArgumentError("batch header: compressed body with stored size " +
                                std::to_string(stored) + ", body size " + std::to_string(raw));
  }
  if (batch.size() - bf::kHeaderSize != stored) {
    return DataLossError("batch length " + std::to_string(batch.size()) + " != header " +
                         std::to_string(bf::kHeaderSize) + " + stored body size " +
                         std::to_string(stored) + " (truncated or trailing bytes)");
  }
  uint32_t chunks = GetAt<uint32_t>(p, bf::kChunkCountOffset);
  // Every record takes at least MinChunkRecordSize bytes: a count that
  // cannot fit is refused before anything is sized by it.
  if (static_cast<uint64_t>(chunks) * bf::MinChunkRecordSize(static_cast<ValueCodec>(codec)) >
      raw) {
    return InvalidArgumentError("batch header: chunk count " + std::to_string(chunks) +
                                " cannot fit in a body of " + std::to_string(raw) + " bytes");
  }
  BatchHeader h;
  h.origin = GetAt<int32_t>(p, bf::kOriginOffset);
  h.seq = GetAt<uint64_t>(p, bf::kSeqOffset);
  h.clock = GetAt<int64_t>(p, bf::kClockOffset);
  h.codec = static_cast<ValueCodec>(codec);
  h.chunk_count = chunks;
  h.final = (flags & bf::kFlagFinal) != 0;
  return h;
}

Status OpenBatch(std::span<const uint8_t> batch, const DecodeLimits& limits, BatchHeader* header,
                 std::vector<uint8_t>* scratch, std::span<const uint8_t>* body) {
  GEOPS_ASSIGN_OR_RETURN(BatchHeader h, PeekBatchHeader(batch, limits));
  const uint8_t* p = batch.data();
  const uint32_t raw = GetAt<uint32_t>(p, bf::kBodySizeOffset);
  const uint32_t stored = GetAt<uint32_t>(p, bf::kStoredSizeOffset);
  const uint32_t want = GetAt<uint32_t>(p, bf::kChecksumOffset);
  const uint32_t got = Checksum(p, stored);
  if (want != got) {
    return DataLossError("batch checksum mismatch: header says " + std::to_string(want) +
                         ", contents give " + std::to_string(got));
  }
  if (GetAt<uint8_t>(p, bf::kFlagsOffset) & bf::kFlagLz4) {
    if (scratch->size() < raw) scratch->resize(raw);
    int n = LZ4_decompress_safe(reinterpret_cast<const char*>(p + bf::kHeaderSize),
                                reinterpret_cast<char*>(scratch->data()), static_cast<int>(stored),
                                static_cast<int>(raw));
    if (n < 0) return DataLossError("batch body: LZ4 block is corrupt");
    if (static_cast<uint32_t>(n) != raw) {
      return DataLossError("batch body: decompressed size " + std::to_string(n) + " != body size " +
                           std::to_string(raw) + " in header");
    }
    *body = std::span<const uint8_t>(scratch->data(), raw);
  } else {
    *body = batch.subspan(bf::kHeaderSize, raw);
  }
  *header = h;
  return Status::Ok();
}

}  // namespace geops::wan
