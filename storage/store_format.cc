#include "storage/store_format.h"

#include <zlib.h>

#include <cmath>
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

std::string DescribeChunk(ChunkKey key) {
  return "chunk (table " + std::to_string(key.table) + ", chunk " + std::to_string(key.chunk) + ")";
}

// Gives `sums` its size on the first entry. REQUIRES: the caller checked
// that a sized `sums` already has num_elements values.
void SizeLedgerSums(uint32_t num_elements, LedgerSums* sums) {
  if (sums->sized) return;
  sums->values.assign(num_elements, 0.0);
  sums->sized = true;
}

// Why pair `i` of a sparse add (index `index`, after `previous`; -1 for
// none) is refused; built only on failure, off the merge's hot loop.
Status BadSparsePair(uint32_t i, uint32_t index, int64_t previous, uint32_t num_elements) {
  const std::string where = "a sparse ledger add has index " + std::to_string(index) + " at pair " + std::to_string(i);
  if (int64_t{index} <= previous) {
    return DataLossError(where + ", not above the index before it (" + std::to_string(previous) + ")");
  }
  if (index >= num_elements) {
    return DataLossError(where + ", beyond the " + std::to_string(num_elements) + " elements of its chunk");
  }
  return DataLossError(where + " with a value that is not finite");
}

Status AddSparseLedgerEntry(std::string_view entry, uint32_t num_elements, LedgerSums* sums) {
  if (entry.size() < kLedgerAddHeaderSize) {
    return DataLossError("a sparse ledger add has " + std::to_string(entry.size()) + " bytes, shorter than its " +
                         std::to_string(kLedgerAddHeaderSize) + "-byte header");
  }
  const uint32_t count = GetFixed<uint32_t>(entry.data() + 5);
  const size_t payload = entry.size() - kLedgerAddHeaderSize;
  if (payload != size_t{count} * kLedgerAddPairSize) {
    return DataLossError("a sparse ledger add has " + std::to_string(payload) + " payload bytes for " +
                         std::to_string(count) + " (index, value) pairs");
  }
  SizeLedgerSums(num_elements, sums);
  const char* p = entry.data() + kLedgerAddHeaderSize;
  int64_t previous = -1;
  for (uint32_t i = 0; i < count; ++i, p += kLedgerAddPairSize) {
    const uint32_t index = GetFixed<uint32_t>(p);
    const float value = GetFixed<float>(p + 4);
    if (int64_t{index} <= previous || index >= num_elements || !std::isfinite(value)) {
      return BadSparsePair(i, index, previous, num_elements);
    }
    sums->values[index] += static_cast<double>(value);
    previous = index;
  }
  return Status::Ok();
}

Status AddDenseLedgerAdd(std::string_view entry, uint32_t num_elements, LedgerSums* sums) {
  const size_t payload = entry.size() - kLedgerRowHeaderSize;
  if (payload != size_t{num_elements} * sizeof(float)) {
    return DataLossError("a dense ledger add has " + std::to_string(payload) + " payload bytes for " +
                         std::to_string(num_elements) + " values");
  }
  SizeLedgerSums(num_elements, sums);
  const char* p = entry.data() + kLedgerRowHeaderSize;
  for (uint32_t i = 0; i < num_elements; ++i, p += sizeof(float)) {
    const float value = GetFixed<float>(p);
    if (!std::isfinite(value)) {
      return DataLossError("a dense ledger add has a value that is not finite at index " + std::to_string(i));
    }
    sums->values[i] += static_cast<double>(value);
  }
  return Status::Ok();
}

Status AddDenseLedgerEntry(std::string_view entry, uint32_t num_elements, LedgerSums* sums) {
  const size_t payload = entry.size() - kLedgerRowHeaderSize;
  if (payload != size_t{num_elements} * sizeof(double)) {
    return DataLossError("a dense ledger row has " + std::to_string(payload) + " payload bytes for " +
                         std::to_string(num_elements) + " sums");
  }
  const bool first = !sums->sized;
  SizeLedgerSums(num_elements, sums);
  const char* p = entry.data() + kLedgerRowHeaderSize;
  for (uint32_t i = 0; i < num_elements; ++i, p += sizeof(double)) {
    const double sum = GetFixed<double>(p);
    // Sums of finite floats stay finite in double; anything else is damage.
    if (!std::isfinite(sum)) return DataLossError("a dense ledger row has a sum that is not finite at index " +
                                                  std::to_string(i));
    // The first entry is taken as it is (0.0 + -0.0 would lose the sign).
    sums->values[i] = first ? sum : sums->values[i] + sum;
  }
  return Status::Ok();
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

ChunkHeader EncodeChunkHeader(std::span<const float> values, uint64_t commit) {
  ChunkHeader h{};
  const uint32_t fields[4] = {kChunkValueVersion, static_cast<uint32_t>(values.size()), Checksum(values), 0};
  std::memcpy(h.data(), fields, sizeof(fields));
  std::memcpy(h.data() + sizeof(fields), &commit, sizeof(commit));
  return h;
}

namespace {

// The header's size for the value's version; DataLoss for a short value or
// an unknown version.
Status ChunkHeaderSize(const std::string& what, std::string_view value, size_t* size) {
  if (value.size() < kChunkHeaderSizeV1) {
    return DataLossError(what + " value has " + std::to_string(value.size()) + " bytes, shorter than its header");
  }
  const uint32_t version = GetFixed<uint32_t>(value.data());
  if (version != 1 && version != kChunkValueVersion) {
    return DataLossError(what + " value has version " + std::to_string(version) + ", expected 1 or " +
                         std::to_string(kChunkValueVersion));
  }
  *size = version == 1 ? kChunkHeaderSizeV1 : kChunkHeaderSize;
  if (value.size() < *size) {
    return DataLossError(what + " value has " + std::to_string(value.size()) + " bytes, shorter than its header");
  }
  return Status::Ok();
}

}  // namespace

Status PeekChunkCommit(ChunkKey key, std::string_view value, uint64_t* commit) {
  size_t header = 0;
  GEOPS_RETURN_IF_ERROR(ChunkHeaderSize(DescribeChunk(key), value, &header));
  *commit = header == kChunkHeaderSizeV1 ? 0 : GetFixed<uint64_t>(value.data() + kChunkHeaderSizeV1);
  return Status::Ok();
}

Status DecodeChunkValue(ChunkKey key, std::string_view value, ChunkBatch* out) {
  const std::string what = DescribeChunk(key);
  size_t header = 0;
  GEOPS_RETURN_IF_ERROR(ChunkHeaderSize(what, value, &header));
  const uint32_t elements = GetFixed<uint32_t>(value.data() + 4);
  const uint32_t crc = GetFixed<uint32_t>(value.data() + 8);
  const size_t payload = value.size() - header;
  if (payload != size_t{elements} * sizeof(float)) {
    return DataLossError(what + " value has " + std::to_string(payload) + " payload bytes for " +
                         std::to_string(elements) + " floats");
  }
  float* dst = out->Append(key, elements);
  std::memcpy(dst, value.data() + header, payload);
  const uint32_t actual = Checksum({dst, elements});
  if (actual != crc) {
    return DataLossError(what + " fails its checksum (stored " + std::to_string(crc) + ", computed " +
                         std::to_string(actual) + ")");
  }
  return Status::Ok();
}

std::string ChunkSlotKey(ChunkKey key, int slot) {
  const ChunkKeyBytes b = EncodeChunkKey(key);
  std::string out(b.data(), b.size());
  if (slot == 1) out.push_back('\x01');
  return out;
}

bool DecodeChunkSlotKey(std::string_view bytes, ChunkKey* key, int* slot) {
  if (bytes.size() == kChunkKeySize + 1 && bytes.back() == '\x01') {
    *slot = 1;
    return DecodeChunkKey(bytes.substr(0, kChunkKeySize), key);
  }
  *slot = 0;
  return DecodeChunkKey(bytes, key);
}

std::string OutboxSlotKey(std::string_view key, int slot) {
  std::string out;
  out.reserve(key.size() + 2);
  out.push_back(kOutboxSlotPrefix);
  out.push_back(static_cast<char>(slot));
  out.append(key);
  return out;
}

bool DecodeOutboxSlotKey(std::string_view stored, int* slot, std::string_view* key) {
  if (stored.empty()) return false;
  if (stored[0] != kOutboxSlotPrefix) {
    *slot = -1;
    *key = stored;
    return true;
  }
  if (stored.size() < 3 || static_cast<unsigned char>(stored[1]) > 1) return false;
  *slot = stored[1];
  *key = stored.substr(2);
  return true;
}

std::string EncodeOutboxSlotValue(uint64_t commit, std::string_view value) {
  std::string out = EncodeFixed<uint64_t>(commit);
  out.append(value);
  return out;
}

Status DecodeOutboxSlotValue(std::string_view stored, uint64_t* commit, std::string_view* value) {
  if (stored.size() < kOutboxSlotHeaderSize) {
    return DataLossError("a slotted outbox record has " + std::to_string(stored.size()) +
                         " bytes, shorter than its header");
  }
  *commit = GetFixed<uint64_t>(stored.data());
  *value = stored.substr(kOutboxSlotHeaderSize);
  return Status::Ok();
}

std::string WorkerKey(WorkerId worker) { return IdKey(kWorkerPrefix, static_cast<uint32_t>(worker)); }
std::string OriginKey(SiteId origin) { return IdKey(kOriginPrefix, static_cast<uint32_t>(origin)); }

std::string EncodeWorker(const WorkerRecord& record) {
  std::string out = EncodeFixed<int64_t>(record.clock) + EncodeFixed<int64_t>(record.last_update_clock);
  out.push_back(record.finished ? 1 : 0);
  out += EncodeFixed<int32_t>(record.last_update_part);
  return out;
}

Status DecodeWorker(std::string_view key_suffix, std::string_view value, WorkerRecord* record) {
  if (key_suffix.size() != 4) return DataLossError("a worker record has a malformed key");
  record->worker = static_cast<WorkerId>(GetBigEndian32(key_suffix.data()));
  const std::string what = "worker record " + std::to_string(record->worker);
  if (value.size() != kWorkerValueSize && value.size() != kWorkerValueSizeWhole) {
    return DataLossError(what + " has " + std::to_string(value.size()) + " bytes, expected " +
                         std::to_string(kWorkerValueSize) + " (or " + std::to_string(kWorkerValueSizeWhole) +
                         " without the update part)");
  }
  record->clock = GetFixed<int64_t>(value.data());
  record->last_update_clock = GetFixed<int64_t>(value.data() + 8);
  const unsigned char finished = static_cast<unsigned char>(value[16]);
  if (finished > 1) return DataLossError(what + " has a finished flag of " + std::to_string(finished));
  record->finished = finished == 1;
  record->last_update_part = WorkerRecord::kWholeClock;
  if (value.size() == kWorkerValueSize) {
    record->last_update_part = GetFixed<int32_t>(value.data() + 17);
    if (record->last_update_part < -1) {
      return DataLossError(what + " has the update part " + std::to_string(record->last_update_part));
    }
  }
  return Status::Ok();
}

Status DecodeOrigin(std::string_view key_suffix, std::string_view value, OriginRecord* record) {
  if (key_suffix.size() != 4) return DataLossError("an origin record has a malformed key");
  record->origin = static_cast<SiteId>(GetBigEndian32(key_suffix.data()));
  return DecodeFixed<uint64_t>("origin/" + std::to_string(record->origin), value, &record->seq);
}

Status CheckFormatVersion(int32_t version, std::string_view where) {
  const std::string has = std::string(where) + " has format version " + std::to_string(version);
  const std::string reads = " this build reads (" + std::to_string(kOldestReadableFormat) + " to " +
                            std::to_string(kFormatVersion) + ")";
  if (version > kFormatVersion) return FailedPreconditionError(has + ", newer than" + reads);
  if (version < 1) return DataLossError(std::string(where) + " is damaged: format version " + std::to_string(version));
  if (version < kOldestReadableFormat) {
    return FailedPreconditionError(has + ", older than" + reads +
                                   ": it was written by an earlier geops, before the per-origin ledger; "
                                   "this build does not upgrade stores in place");
  }
  return Status::Ok();
}

std::string LedgerKey(SiteId origin, ChunkKey key) {
  std::string out(kLedgerKeySize, '\0');
  PutBigEndian32(static_cast<uint32_t>(origin), out.data());
  const ChunkKeyBytes chunk = EncodeChunkKey(key);
  std::memcpy(out.data() + 4, chunk.data(), chunk.size());
  return out;
}

KeyRange LedgerOriginRange(SiteId origin) {
  // origin >= 0, so origin + 1 fits in the u32 prefix.
  return KeyRange{IdKey("", static_cast<uint32_t>(origin)), IdKey("", static_cast<uint32_t>(origin) + 1)};
}

bool DecodeLedgerKey(std::string_view bytes, SiteId* origin, ChunkKey* key) {
  if (bytes.size() != kLedgerKeySize) return false;
  *origin = static_cast<SiteId>(GetBigEndian32(bytes.data()));
  return DecodeChunkKey(bytes.substr(4), key);
}

std::string DescribeLedgerRow(SiteId origin, ChunkKey key) {
  return "ledger of origin " + std::to_string(origin) + ", " + DescribeChunk(key);
}

std::string DescribeLedgerAdd(const LedgerAdd& add) {
  return "ledger add for origin " + std::to_string(add.origin) + ", " + DescribeChunk(add.key);
}

Status CheckLedgerAdd(const LedgerAdd& add) {
  if (add.origin < 0) return InvalidArgumentError(DescribeLedgerAdd(add) + ": the origin is negative");
  if (add.num_elements > kMaxLedgerElements) {
    return InvalidArgumentError(DescribeLedgerAdd(add) + ": num_elements " + std::to_string(add.num_elements) +
                                " is more than a ledger row holds (" + std::to_string(kMaxLedgerElements) + ")");
  }
  if (add.indices.size() != add.values.size()) {
    return InvalidArgumentError(DescribeLedgerAdd(add) + " has " + std::to_string(add.indices.size()) +
                                " indices but " + std::to_string(add.values.size()) + " values");
  }
  for (size_t i = 0; i < add.indices.size(); ++i) {
    const bool in_order = i == 0 || add.indices[i] > add.indices[i - 1];
    if (in_order && add.indices[i] < add.num_elements && std::isfinite(add.values[i])) continue;
    // Only a refused add pays for its message.
    const std::string at = DescribeLedgerAdd(add) + ": index " + std::to_string(add.indices[i]) + " at position " +
                           std::to_string(i);
    if (!in_order) {
      return InvalidArgumentError(at + " is not above the one before it (" + std::to_string(add.indices[i - 1]) + ")");
    }
    if (add.indices[i] >= add.num_elements) {
      return InvalidArgumentError(at + " is beyond num_elements " + std::to_string(add.num_elements));
    }
    return InvalidArgumentError(at + " has a value that is not finite");
  }
  return Status::Ok();
}

void EncodeLedgerAdd(const LedgerAdd& add, std::string* out) {
  const uint32_t count = static_cast<uint32_t>(add.indices.size());
  if (size_t{count} * 2 > size_t{add.num_elements}) {
    out->assign(kLedgerRowHeaderSize + size_t{add.num_elements} * sizeof(float), '\0');
    char* p = out->data();
    p[0] = static_cast<char>(kLedgerDenseAddTag);
    std::memcpy(p + 1, &add.num_elements, 4);
    p += kLedgerRowHeaderSize;
    for (uint32_t i = 0; i < count; ++i) std::memcpy(p + size_t{add.indices[i]} * sizeof(float), &add.values[i], 4);
    return;
  }
  out->resize(kLedgerAddHeaderSize + size_t{count} * kLedgerAddPairSize);
  char* p = out->data();
  p[0] = static_cast<char>(kLedgerAddTag);
  std::memcpy(p + 1, &add.num_elements, 4);
  std::memcpy(p + 5, &count, 4);
  p += kLedgerAddHeaderSize;
  for (uint32_t i = 0; i < count; ++i, p += kLedgerAddPairSize) {
    std::memcpy(p, &add.indices[i], 4);
    std::memcpy(p + 4, &add.values[i], 4);
  }
}

bool PeekLedgerEntry(std::string_view entry, LedgerEntryHeader* header) {
  if (entry.size() < kLedgerRowHeaderSize) return false;
  header->tag = static_cast<uint8_t>(entry[0]);
  header->num_elements = GetFixed<uint32_t>(entry.data() + 1);
  return true;
}

Status AddLedgerEntry(std::string_view entry, LedgerSums* sums) {
  LedgerEntryHeader header;
  if (!PeekLedgerEntry(entry, &header)) {
    return DataLossError("a ledger entry has " + std::to_string(entry.size()) + " bytes, shorter than its header");
  }
  if (header.num_elements > kMaxLedgerElements) {
    return DataLossError("a ledger entry claims " + std::to_string(header.num_elements) +
                         " elements, more than a ledger row holds (" + std::to_string(kMaxLedgerElements) + ")");
  }
  if (sums->sized && header.num_elements != sums->values.size()) {
    return DataLossError("a ledger entry is for " + std::to_string(header.num_elements) +
                         " elements, the entries before it for " + std::to_string(sums->values.size()));
  }
  switch (header.tag) {
    case kLedgerAddTag:
      return AddSparseLedgerEntry(entry, header.num_elements, sums);
    case kLedgerRowTag:
      return AddDenseLedgerEntry(entry, header.num_elements, sums);
    case kLedgerDenseAddTag:
      return AddDenseLedgerAdd(entry, header.num_elements, sums);
    default:
      return DataLossError("a ledger entry has the unknown tag " + std::to_string(header.tag));
  }
}

std::string EncodeLedgerRow(std::span<const double> sums) {
  const uint32_t n = static_cast<uint32_t>(sums.size());
  std::string out(kLedgerRowHeaderSize + sums.size_bytes(), '\0');
  out[0] = static_cast<char>(kLedgerRowTag);
  std::memcpy(out.data() + 1, &n, 4);
  if (!sums.empty()) std::memcpy(out.data() + kLedgerRowHeaderSize, sums.data(), sums.size_bytes());
  return out;
}

Status DecodeLedgerRow(std::string_view value, std::vector<double>* sums) {
  LedgerEntryHeader header;
  if (PeekLedgerEntry(value, &header) && (header.tag == kLedgerAddTag || header.tag == kLedgerDenseAddTag)) {
    return DataLossError("a ledger value is an add where a merged row belongs");
  }
  LedgerSums decoded;
  GEOPS_RETURN_IF_ERROR(AddLedgerEntry(value, &decoded));
  *sums = std::move(decoded.values);
  return Status::Ok();
}

std::string EncodeI32(int32_t v) { return EncodeFixed(v); }
std::string EncodeU64(uint64_t v) { return EncodeFixed(v); }
std::string EncodeI64(int64_t v) { return EncodeFixed(v); }
Status DecodeI32(std::string_view key, std::string_view value, int32_t* v) { return DecodeFixed(key, value, v); }
Status DecodeU64(std::string_view key, std::string_view value, uint64_t* v) { return DecodeFixed(key, value, v); }
Status DecodeI64(std::string_view key, std::string_view value, int64_t* v) { return DecodeFixed(key, value, v); }

}  // namespace geops::storage::format
