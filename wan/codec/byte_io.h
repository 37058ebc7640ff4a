// Little-endian byte writing and bounds-checked reading for the WAN batch
// format. ByteReader never reads past its span: every Get returns false
// instead, leaving the output unchanged.
//
// geops assumes a little-endian host (x86-64, AArch64), checked at compile
// time, so fields are copied with memcpy.
//
// Thread-safety: thread-compatible values.
#ifndef GEOPS_WAN_CODEC_BYTE_IO_H_
#define GEOPS_WAN_CODEC_BYTE_IO_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace geops::wan {

static_assert(std::endian::native == std::endian::little,
              "geops wire formats assume little-endian");

// Appends to a byte vector.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>* out) : out_(out) {}

  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t at = out_->size();
    out_->resize(at + sizeof(T));
    std::memcpy(out_->data() + at, &v, sizeof(T));
  }
  void PutBytes(const void* p, size_t n) {
    size_t at = out_->size();
    out_->resize(at + n);
    if (n > 0) std::memcpy(out_->data() + at, p, n);
  }
  // Grows the vector by n bytes and returns where they start (valid until
  // the next call).
  uint8_t* Extend(size_t n) {
    size_t at = out_->size();
    out_->resize(at + n);
    return out_->data() + at;
  }
  size_t size() const { return out_->size(); }

 private:
  std::vector<uint8_t>* out_;
};

// Reads from a span, refusing to go past its end.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> in) : in_(in) {}

  template <typename T>
  [[nodiscard]] bool Get(T* v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // Points *p at the next n bytes and skips them.
  [[nodiscard]] bool Take(size_t n, std::span<const uint8_t>* p) {
    if (remaining() < n) return false;
    *p = in_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_BYTE_IO_H_
