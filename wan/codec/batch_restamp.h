// RestampBatchSeq: gives an encoded WAN batch another sequence number
// without re-encoding it: the seq field of the header is rewritten and the
// CRC-32C recomputed. The Replicator encodes a tick's batch once and stamps
// one copy per peer stream (each peer has its own seq numbering).
//
// Thread-safety: a pure function over the caller's buffer.
#ifndef GEOPS_WAN_CODEC_BATCH_RESTAMP_H_
#define GEOPS_WAN_CODEC_BATCH_RESTAMP_H_

#include <cstdint>
#include <span>

#include "common/status.h"

namespace geops::wan {

// InvalidArgument when `batch` is not a whole batch (too short, bad magic,
// or its length disagrees with the header's stored size); `batch` is then
// unchanged.
Status RestampBatchSeq(std::span<uint8_t> batch, uint64_t seq);

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_BATCH_RESTAMP_H_
