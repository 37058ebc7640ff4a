#include "storage/store_format.h"

#include <zlib.h>

#include <cstring>
#include <limits>

namespace geops::storage::format {
namespace {

void PutBigEndian32(uint32_t v, char* out) {
  out[0] = static_cast<char>(v >> 24);
  out[1] = static_cast<char>(v >> 16);
  out[2] = static_cast<char>(v >> 8);
  out[3] = static_cast<char>(v);
}

uint32_t GetBigEndian32(const char* in) {
  const auto* p = reinterpret_cast<const unsigned char*>(in);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Little-endian fixed-width integers; the static_assert in the header makes
// memcpy the little-endian encoding.
template <typename T>
std::string EncodeFixed(T v) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

template <typename T>
T GetFixed(const char* in) {
  T v;
  std::memcpy(&v, in, sizeof(T));
  return v;
}

template <typename T>
Status DecodeFixed(std::string_view key, std::string_view value, T* v) {
  if (value.size() != sizeof(T)) {
    return DataLossError("meta key '" + std::string(key) + "' has " + std::to_string(value.size()) +
                         " bytes, expected " + std::to_string(sizeof(T)));
  }
  *v = GetFixed<T>(value.data());
  return Status::Ok();
}

std::string IdKey(std::string_view prefix, uint32_t id) {
  std::string key(prefix);
  key.resize(prefix.size() + 4);
  PutBigEndian32(id, key.data() + prefix.size());
  return key;
}

}  // namespace

ChunkKeyBytes EncodeChunkKey(ChunkKey key) {
  ChunkKeyBytes out;
  PutBigEndian32(key.table, out.data());
  PutBigEndian32(key.chunk, out.data() + 4);
  return out;
}

bool DecodeChunkKey(std::string_view bytes, ChunkKey* key) {
  if (bytes.size() != kChunkKeySize) return false;
  key->table = GetBigEndian32(bytes.data());
  key->chunk = GetBigEndian32(bytes.data() + 4);
  return true;
}

uint32_t Checksum(std::span<const float> values) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(values.data());
  size_t left = values.size_bytes();
  while (left > 0) {  // zlib takes uInt lengths
    const uInt n = static_cast<uInt>(std::min<size_t>(left, std::numeric_limits<uInt>::max()));
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

ChunkHeader EncodeChunkHeader(std::span<const float> values) {
  ChunkHeader h{};
  const uint32_t fields[4] = {kChunkValueVersion, static_cast<uint32_t>(values.size()), Checksum(values), 0};
  std::memcpy(h.data(), fields, sizeof(fields));
  return h;
}

Status DecodeChunkValue(ChunkKey key, std::string_view value, ChunkBatch* out) {
  const std::string what = "chunk (table " + std::to_string(key.table) + ", chunk " + std::to_string(key.chunk) + ")";
  if (value.size() < kChunkHeaderSize) {
    return DataLossError(what + " value has " + std::to_string(value.size()) + " bytes, shorter than its header");
  }
  const uint32_t version = GetFixed<uint32_t>(value.data());
  const uint32_t elements = GetFixed<uint32_t>(value.data() + 4);
  const uint32_t crc = GetFixed<uint32_t>(value.data() + 8);
  if (version != kChunkValueVersion) {
    return DataLossError(what + " value has version " + std::to_string(version) + ", expected " +
                         std::to_string(kChunkValueVersion));
  }
  const size_t payload = value.size() - kChunkHeaderSize;
  if (payload != size_t{elements} * sizeof(float)) {
    return DataLossError(what + " value has " + std::to_string(payload) + " payload bytes for " +
                         std::to_string(elements) + " floats");
  }
  float* dst = out->Append(key, elements);
  std::memcpy(dst, value.data() + kChunkHeaderSize, payload);
  const uint32_t actual = Checksum({dst, elements});
  if (actual != crc) {
    return DataLossError(what + " fails its checksum (stored " + std::to_string(crc) + ", computed " +
                         std::to_string(actual) + ")");
  }
  return Status::Ok();
}

std::string WorkerKey(WorkerId worker) { return IdKey(kWorkerPrefix, static_cast<uint32_t>(worker)); }
std::string OriginKey(SiteId origin) { return IdKey(kOriginPrefix, static_cast<uint32_t>(origin)); }

std::string EncodeWorker(const WorkerRecord& record) {
  std::string out = EncodeFixed<int64_t>(record.clock) + EncodeFixed<int64_t>(record.last_update_clock);
  out.push_back(record.finished ? 1 : 0);
  return out;
}

Status DecodeWorker(std::string_view key_suffix, std::string_view value, WorkerRecord* record) {
  if (key_suffix.size() != 4) return DataLossError("a worker record has a malformed key");
  record->worker = static_cast<WorkerId>(GetBigEndian32(key_suffix.data()));
  const std::string what = "worker record " + std::to_string(record->worker);
  if (value.size() != kWorkerValueSize) {
    return DataLossError(what + " has " + std::to_string(value.size()) + " bytes, expected " +
                         std::to_string(kWorkerValueSize));
  }
  record->clock = GetFixed<int64_t>(value.data());
  record->last_update_clock = GetFixed<int64_t>(value.data() + 8);
  const unsigned char finished = static_cast<unsigned char>(value[16]);
  if (finished > 1) return DataLossError(what + " has a finished flag of " + std::to_string(finished));
  record->finished = finished == 1;
  return Status::Ok();
}

Status DecodeOrigin(std::string_view key_suffix, std::string_view value, OriginRecord* record) {
  if (key_suffix.size() != 4) return DataLossError("an origin record has a malformed key");
  record->origin = static_cast<SiteId>(GetBigEndian32(key_suffix.data()));
  return DecodeFixed<uint64_t>("origin/" + std::to_string(record->origin), value, &record->seq);
}

std::string EncodeI32(int32_t v) { return EncodeFixed(v); }
std::string EncodeU64(uint64_t v) { return EncodeFixed(v); }
std::string EncodeI64(int64_t v) { return EncodeFixed(v); }
Status DecodeI32(std::string_view key, std::string_view value, int32_t* v) { return DecodeFixed(key, value, v); }
Status DecodeU64(std::string_view key, std::string_view value, uint64_t* v) { return DecodeFixed(key, value, v); }
Status DecodeI64(std::string_view key, std::string_view value, int64_t* v) { return DecodeFixed(key, value, v); }

}  // namespace geops::storage::format
