// SparseChunkUpdate: a sparse delta to one chunk, the unit the significance
// filter emits and the batch codec carries between sites.
//
// A plain value type; no thread-safety concerns.
#ifndef GEOPS_WAN_CODEC_SPARSE_UPDATE_H_
#define GEOPS_WAN_CODEC_SPARSE_UPDATE_H_

#include <cstdint>
#include <vector>

#include "common/ids.h"

namespace geops::wan {

struct SparseChunkUpdate {
  ChunkKey key;
  uint32_t num_elements = 0;      // floats in the whole chunk
  std::vector<uint32_t> indices;  // strictly increasing, each < num_elements
  std::vector<float> values;      // values[i] is the delta at indices[i]

  // Bytes the update occupies as uncompressed fp32 plus 32-bit indices.
  int64_t RawBytes() const { return static_cast<int64_t>(indices.size()) * 8; }
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_CODEC_SPARSE_UPDATE_H_
