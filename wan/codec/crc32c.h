// CRC-32C (Castagnoli), the checksum of WAN batches: the SSE4.2 crc32
// instruction where the CPU has it, else a portable table-driven version
// (slicing by 8). Both give the same values.
//
// Thread-safety: pure functions.
#ifndef GEOPS_WAN_CODEC_CRC32C_H_
#define GEOPS_WAN_CODEC_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace geops::wan {

// CRC-32C of `crc`'s data followed by data[0, n). Start with crc = 0.
uint32_t Crc32cExtend(uint32_t crc, const uint8_t* data, size_t n);
inline uint32_t Crc32c(const uint8_t* data, size_t n) { return Crc32cExtend(0, data, n); }
// The table-driven version, whatever the CPU (for tests).
uint32_t Crc32cExtendPortable(uint32_t crc, const uint8_t* data, size_t n);

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_CRC32C_H_
