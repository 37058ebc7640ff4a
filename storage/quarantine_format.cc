#include "storage/quarantine_format.h"

#include <algorithm>
#include <cstring>

namespace geops::storage::format {
namespace {

void PutBigEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetBigEndian(const char* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

void PutU32(uint32_t v, std::string* out) { out->append(reinterpret_cast<const char*>(&v), sizeof(v)); }

// Reads the value front to back; every read checks the bytes left.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool U32(uint32_t* v) { return Raw(v, sizeof(*v)); }
  bool Raw(void* out, size_t n) {
    if (bytes_.size() - pos_ < n) return false;
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace

std::string QuarantineKey(const QuarantineRecord& record) {
  std::string key(kQuarantinePrefix);
  PutBigEndian(static_cast<uint32_t>(record.origin), 4, &key);
  PutBigEndian(record.seq, 8, &key);
  PutBigEndian(static_cast<uint64_t>(record.unix_micros), 8, &key);
  return key;
}

size_t QuarantineBytes(const QuarantineRecord& record) {
  size_t bytes = 12 + record.reason.size();
  for (const LedgerAdd& c : record.chunks) bytes += 16 + 8 * c.indices.size();
  return bytes;
}

std::string EncodeQuarantine(const QuarantineRecord& record) {
  std::string out;
  out.reserve(QuarantineBytes(record));
  PutU32(kQuarantineValueVersion, &out);
  PutU32(static_cast<uint32_t>(record.reason.size()), &out);
  out.append(record.reason);
  PutU32(static_cast<uint32_t>(record.chunks.size()), &out);
  for (const LedgerAdd& c : record.chunks) {
    PutU32(c.key.table, &out);
    PutU32(c.key.chunk, &out);
    PutU32(c.num_elements, &out);
    const size_t n = std::min(c.indices.size(), c.values.size());
    PutU32(static_cast<uint32_t>(n), &out);
    out.append(reinterpret_cast<const char*>(c.indices.data()), n * sizeof(uint32_t));
    out.append(reinterpret_cast<const char*>(c.values.data()), n * sizeof(float));
  }
  return out;
}

Status DecodeQuarantine(std::string_view key, std::string_view value, QuarantineRecord* record) {
  if (key.size() != kQuarantineKeySize || !key.starts_with(kQuarantinePrefix)) {
    return DataLossError("a quarantine key has " + std::to_string(key.size()) + " bytes, expected " +
                         std::to_string(kQuarantineKeySize));
  }
  const char* k = key.data() + kQuarantinePrefix.size();
  *record = QuarantineRecord{};
  record->origin = static_cast<SiteId>(GetBigEndian(k, 4));
  record->seq = GetBigEndian(k + 4, 8);
  record->unix_micros = static_cast<int64_t>(GetBigEndian(k + 12, 8));
  const std::string what = "the quarantined batch " + std::to_string(record->seq) + " from site " +
                           std::to_string(record->origin);
  Reader r(value);
  uint32_t version = 0, reason = 0, chunks = 0;
  if (!r.U32(&version) || version != kQuarantineValueVersion) {
    return DataLossError(what + " has value version " + std::to_string(version) + ", expected " +
                         std::to_string(kQuarantineValueVersion));
  }
  if (!r.U32(&reason) || r.left() < reason) return DataLossError(what + " is cut short in its reason");
  record->reason.resize(reason);
  r.Raw(record->reason.data(), reason);
  if (!r.U32(&chunks) || chunks > r.left() / 16) return DataLossError(what + " is cut short in its chunk count");
  record->chunks.resize(chunks);
  for (uint32_t i = 0; i < chunks; ++i) {
    LedgerAdd& c = record->chunks[i];
    c.origin = record->origin;
    uint32_t pairs = 0;
    if (!r.U32(&c.key.table) || !r.U32(&c.key.chunk) || !r.U32(&c.num_elements) || !r.U32(&pairs) ||
        pairs > r.left() / 8) {
      return DataLossError(what + " is cut short in chunk " + std::to_string(i));
    }
    c.indices.resize(pairs);
    c.values.resize(pairs);
    r.Raw(c.indices.data(), pairs * sizeof(uint32_t));
    r.Raw(c.values.data(), pairs * sizeof(float));
  }
  if (r.left() != 0) return DataLossError(what + " has " + std::to_string(r.left()) + " bytes after its last chunk");
  return Status::Ok();
}

}  // namespace geops::storage::format
