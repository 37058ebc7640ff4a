#include "wan/codec/batch_restamp.h"

#include <cstring>
#include <string>

#include "wan/codec/batch_format.h"
#include "wan/codec/crc32c.h"

namespace geops::wan {

namespace bf = batch_format;

Status RestampBatchSeq(std::span<uint8_t> batch, uint64_t seq) {
  if (batch.size() < bf::kHeaderSize) {
    return InvalidArgumentError("restamp: batch of " + std::to_string(batch.size()) + " bytes has no header");
  }
  uint32_t magic = 0;
  uint32_t stored = 0;
  std::memcpy(&magic, batch.data() + bf::kMagicOffset, sizeof(magic));
  std::memcpy(&stored, batch.data() + bf::kStoredSizeOffset, sizeof(stored));
  if (magic != bf::kMagic) return InvalidArgumentError("restamp: not a WAN batch (bad magic)");
  if (batch.size() != bf::kHeaderSize + stored) {
    return InvalidArgumentError("restamp: batch is " + std::to_string(batch.size()) + " bytes, header says " +
                                std::to_string(bf::kHeaderSize + stored));
  }
  std::memcpy(batch.data() + bf::kSeqOffset, &seq, sizeof(seq));
  uint32_t crc = Crc32c(batch.data(), bf::kChecksumOffset);
  crc = Crc32cExtend(crc, batch.data() + bf::kHeaderSize, stored);
  std::memcpy(batch.data() + bf::kChecksumOffset, &crc, sizeof(crc));
  return Status::Ok();
}

}  // namespace geops::wan
