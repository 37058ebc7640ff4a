// Big-endian ids in the keys of the WAN layer's records in a shard store's
// `outbox` column family (outbound_journal.h, outer_records.h): big-endian,
// so that keys of one kind sort by their ids.
//
// Thread-safety: pure functions.
#ifndef GEOPS_WAN_REPLICATION_RECORD_KEYS_H_
#define GEOPS_WAN_REPLICATION_RECORD_KEYS_H_

#include <cstdint>
#include <string>

namespace geops::wan {

inline void PutBe32(std::string* s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void PutBe64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline uint32_t GetBe32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline uint64_t GetBe64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// A record key for display: printable bytes as they are, others as \xNN.
inline std::string PrintableKey(const std::string& key) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_RECORD_KEYS_H_
