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

Status CheckSealable(ValueCodec codec, size_t body_size) {
  if (static_cast<uint8_t>(codec) >= kNumValueCodecs) {
    return InvalidArgumentError("batch header: unknown value codec " + std::to_string(static_cast<int>(codec)));
  }
  if (body_size > bf::kMaxBodyBytes) {
    return ResourceExhaustedError("batch body of " + std::to_string(body_size) + " bytes exceeds the limit of " +
                                  std::to_string(bf::kMaxBodyBytes));
  }
  return Status::Ok();
}

// Compresses `body` into dst (room for LZ4_compressBound); the stored size
// when LZ4 made it smaller, else 0 (the body is stored raw).
size_t CompressInto(std::span<const uint8_t> body, int lz4_acceleration, uint8_t* dst) {
  const int raw = static_cast<int>(body.size());
  const int n = LZ4_compress_fast(reinterpret_cast<const char*>(body.data()), reinterpret_cast<char*>(dst), raw,
                                  LZ4_compressBound(raw), lz4_acceleration < 1 ? 1 : lz4_acceleration);
  return n > 0 && n < raw ? static_cast<size_t>(n) : 0;
}

// Writes the header in front of the `stored` body bytes already at
// p + kHeaderSize, checksum last.
void WriteHeader(const BatchHeader& header, uint32_t chunk_count, bool lz4, uint32_t raw, uint32_t stored,
                 uint8_t* p) {
  const uint8_t flags = static_cast<uint8_t>((header.final ? bf::kFlagFinal : 0) | (lz4 ? bf::kFlagLz4 : 0) |
                                             (header.marked ? bf::kFlagMarked : 0));
  PutAt<uint32_t>(p, bf::kMagicOffset, bf::kMagic);
  PutAt<uint16_t>(p, bf::kVersionOffset, bf::kVersion);
  PutAt<uint8_t>(p, bf::kCodecOffset, static_cast<uint8_t>(header.codec));
  PutAt<uint8_t>(p, bf::kFlagsOffset, flags);
  PutAt<int32_t>(p, bf::kOriginOffset, header.origin);
  PutAt<uint32_t>(p, bf::kChunkCountOffset, chunk_count);
  PutAt<uint64_t>(p, bf::kSeqOffset, header.seq);
  PutAt<int64_t>(p, bf::kClockOffset, header.clock);
  PutAt<uint32_t>(p, bf::kBodySizeOffset, raw);
  PutAt<uint32_t>(p, bf::kStoredSizeOffset, stored);
  PutAt<uint32_t>(p, bf::kReservedOffset, 0);
  PutAt<uint32_t>(p, bf::kChecksumOffset, Checksum(p, stored));
}

}  // namespace

Status SealBatch(const BatchHeader& header, std::span<const uint8_t> body, bool compress,
                 int lz4_acceleration, std::vector<uint8_t>* out) {
  GEOPS_RETURN_IF_ERROR(CheckSealable(header.codec, body.size()));
  size_t stored = 0;
  if (compress && !body.empty()) {
    out->resize(bf::kHeaderSize + static_cast<size_t>(LZ4_compressBound(static_cast<int>(body.size()))));
    stored = CompressInto(body, lz4_acceleration, out->data() + bf::kHeaderSize);
  }
  const bool lz4 = stored > 0;
  if (!lz4) stored = body.size();
  out->resize(bf::kHeaderSize + stored);
  if (!lz4 && stored > 0) std::memcpy(out->data() + bf::kHeaderSize, body.data(), stored);
  WriteHeader(header, header.chunk_count, lz4, static_cast<uint32_t>(body.size()), static_cast<uint32_t>(stored),
              out->data());
  return Status::Ok();
}

Status PrepareBody(ValueCodec codec, uint32_t chunk_count, std::span<const uint8_t> body, bool compress,
                   int lz4_acceleration, PreparedBody* out) {
  GEOPS_RETURN_IF_ERROR(CheckSealable(codec, body.size()));
  out->codec = codec;
  out->chunk_count = chunk_count;
  out->raw_size = static_cast<uint32_t>(body.size());
  size_t stored = 0;
  if (compress && !body.empty()) {
    out->stored.resize(static_cast<size_t>(LZ4_compressBound(static_cast<int>(body.size()))));
    stored = CompressInto(body, lz4_acceleration, out->stored.data());
  }
  out->lz4 = stored > 0;
  if (out->lz4) {
    out->stored.resize(stored);
  } else {
    out->stored.assign(body.begin(), body.end());
  }
  return Status::Ok();
}

void SealPrepared(const BatchHeader& header, const PreparedBody& body, std::vector<uint8_t>* out) {
  const size_t stored = body.stored.size();
  out->resize(bf::kHeaderSize + stored);
  if (stored > 0) std::memcpy(out->data() + bf::kHeaderSize, body.stored.data(), stored);
  BatchHeader h = header;
  h.codec = body.codec;
  h.marked = body.marked;
  WriteHeader(h, body.chunk_count, body.lz4, body.raw_size, static_cast<uint32_t>(stored), out->data());
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
  h.marked = (flags & bf::kFlagMarked) != 0;
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
