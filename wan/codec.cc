#include "wan/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "wan/byte_io.h"
#include "wan/float_scan.h"
#include "wan/quantize.h"
#include "wan/sparse_index.h"

namespace geops::wan {
namespace bf = batch_format;
namespace {

std::string ChunkName(size_t pos, ChunkKey key) {
  return "chunk " + std::to_string(pos) + " (table " + std::to_string(key.table) + ", chunk " +
         std::to_string(key.chunk) + ")";
}

bool HasScale(ValueCodec codec) { return codec == ValueCodec::kInt8 || codec == ValueCodec::kSign; }

uint64_t ValueBytes(ValueCodec codec, uint64_t count) {
  switch (codec) {
    case ValueCodec::kFp32:
      return count * 4;
    case ValueCodec::kFp16:
      return count * 2;
    case ValueCodec::kInt8:
      return count;
    case ValueCodec::kSign:
      return (count + 7) / 8;
  }
  return 0;
}

}  // namespace

Status BatchEncoder::Validate(std::span<const SparseChunkUpdate> chunks) {
  order_.clear();
  bool sorted = true;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SparseChunkUpdate& u = chunks[c];
    if (u.num_elements == 0) {
      return InvalidArgumentError(ChunkName(c, u.key) + ": num_elements is 0");
    }
    if (u.indices.size() != u.values.size()) {
      return InvalidArgumentError(ChunkName(c, u.key) + ": " + std::to_string(u.indices.size()) +
                                  " indices but " + std::to_string(u.values.size()) + " values");
    }
    if (u.indices.size() > u.num_elements) {
      return InvalidArgumentError(ChunkName(c, u.key) + ": " + std::to_string(u.indices.size()) +
                                  " values exceed num_elements " + std::to_string(u.num_elements));
    }
    for (size_t i = 0; i < u.indices.size(); ++i) {
      if (u.indices[i] >= u.num_elements || (i > 0 && u.indices[i] <= u.indices[i - 1])) {
        return InvalidArgumentError(ChunkName(c, u.key) + ": index " + std::to_string(i) + " (" +
                                    std::to_string(u.indices[i]) +
                                    ") is out of order or >= num_elements " +
                                    std::to_string(u.num_elements));
      }
    }
    int64_t bad = FirstNonFinite(u.values.data(), static_cast<int64_t>(u.values.size()));
    if (bad >= 0) {
      return InvalidArgumentError(ChunkName(c, u.key) + ": value " + std::to_string(bad) +
                                  " is not finite");
    }
    if (c > 0 && !(chunks[c - 1].key < u.key)) sorted = false;
    order_.push_back(&u);
  }
  if (!sorted) {
    std::sort(
        order_.begin(), order_.end(),
        [](const SparseChunkUpdate* a, const SparseChunkUpdate* b) { return a->key < b->key; });
    for (size_t c = 1; c < order_.size(); ++c) {
      if (order_[c - 1]->key == order_[c]->key) {
        return InvalidArgumentError(ChunkName(c, order_[c]->key) + ": key appears twice");
      }
    }
  }
  return Status::Ok();
}

Result<EncodeStats> BatchEncoder::Encode(const BatchHeader& header,
                                         std::span<const SparseChunkUpdate> chunks,
                                         std::vector<uint8_t>* out,
                                         std::vector<SparseChunkUpdate>* residuals) {
  if (static_cast<uint8_t>(header.codec) >= kNumValueCodecs) {
    return InvalidArgumentError("batch header: unknown value codec " +
                                std::to_string(static_cast<int>(header.codec)));
  }
  GEOPS_RETURN_IF_ERROR(Validate(chunks));
  const ValueCodec codec = header.codec;
  EncodeStats stats;
  size_t res_used = 0;
  uint64_t estimate = 0;
  for (const SparseChunkUpdate* u : order_) {
    estimate += bf::kChunkFixedSize + bf::kScaleSize + 9 * uint64_t{u->indices.size()};
  }
  body_.clear();
  body_.reserve(std::min<uint64_t>(estimate, bf::kMaxBodyBytes));
  ByteWriter w(&body_);
  uint32_t chunks_out = 0;
  for (const SparseChunkUpdate* u : order_) {
    const uint32_t m = static_cast<uint32_t>(u->values.size());
    ++stats.chunks_in;
    stats.elements_in += m;
    stats.parameters += u->num_elements;
    if (kept_.size() < m) {
      kept_.resize(m);
      kept_idx_.resize(m);
      residual_.resize(m);
      codes_.resize(size_t{m} * 4);
    }
    QuantizeOutput q;
    const float* v = u->values.data();
    switch (codec) {
      case ValueCodec::kFp32:
        q = QuantizeFp32(v, m, kept_.data(), reinterpret_cast<float*>(codes_.data()),
                         residual_.data());
        break;
      case ValueCodec::kFp16:
        q = QuantizeFp16(v, m, kept_.data(), reinterpret_cast<uint16_t*>(codes_.data()),
                         residual_.data());
        break;
      case ValueCodec::kInt8:
        q = QuantizeInt8(v, m, kept_.data(), reinterpret_cast<int8_t*>(codes_.data()),
                         residual_.data());
        break;
      case ValueCodec::kSign:
        q = QuantizeSign(v, m, kept_.data(), codes_.data(), residual_.data());
        break;
    }
    if (residuals != nullptr) {
      uint32_t nonzero = 0;
      for (uint32_t j = 0; j < m; ++j) nonzero += residual_[j] != 0.0f;
      if (nonzero > 0) {
        if (res_used == residuals->size()) residuals->emplace_back();
        SparseChunkUpdate& r = (*residuals)[res_used++];
        r.key = u->key;
        r.num_elements = u->num_elements;
        r.indices.resize(nonzero);
        r.values.resize(nonzero);
        uint32_t k = 0;
        for (uint32_t j = 0; j < m; ++j) {
          r.indices[k] = u->indices[j];
          r.values[k] = residual_[j];
          k += residual_[j] != 0.0f;
          if (k == nonzero) break;
        }
      }
    }
    if (q.shipped == 0) continue;
    std::span<const uint32_t> idx(u->indices.data(), m);
    if (q.shipped < m) {
      for (uint32_t s = 0; s < q.shipped; ++s) kept_idx_[s] = u->indices[kept_[s]];
      idx = std::span<const uint32_t>(kept_idx_.data(), q.shipped);
    }
    size_t index_bytes = 0;
    IndexEncoding enc = ChooseIndexEncoding(idx, u->num_elements, &index_bytes);
    const uint64_t value_bytes = ValueBytes(codec, q.shipped);
    const uint64_t record =
        bf::kChunkFixedSize + (HasScale(codec) ? bf::kScaleSize : 0) + index_bytes + value_bytes;
    if (body_.size() + record > bf::kMaxBodyBytes) {
      return ResourceExhaustedError("batch body would exceed " + std::to_string(bf::kMaxBodyBytes) +
                                    " bytes at " + ChunkName(chunks_out, u->key) +
                                    "; split the batch");
    }
    w.Put<uint32_t>(u->key.table);
    w.Put<uint32_t>(u->key.chunk);
    w.Put<uint32_t>(u->num_elements);
    w.Put<uint32_t>(q.shipped);
    w.Put<uint8_t>(static_cast<uint8_t>(enc));
    w.Put<uint32_t>(static_cast<uint32_t>(index_bytes));
    if (HasScale(codec)) w.Put<float>(q.scale);
    EncodeIndex(enc, idx, u->num_elements, w.Extend(index_bytes));
    std::memcpy(w.Extend(value_bytes), codes_.data(), value_bytes);
    ++chunks_out;
    stats.elements_out += q.shipped;
    switch (enc) {
      case IndexEncoding::kDense:
        ++stats.dense_chunks;
        break;
      case IndexEncoding::kBitmap:
        ++stats.bitmap_chunks;
        break;
      case IndexEncoding::kDeltaVarint:
        ++stats.varint_chunks;
        break;
    }
  }
  BatchHeader h = header;
  h.chunk_count = chunks_out;
  GEOPS_RETURN_IF_ERROR(SealBatch(h, body_, options_.compress, options_.lz4_acceleration, out));
  stats.chunks_out = chunks_out;
  stats.body_bytes = static_cast<int64_t>(body_.size());
  stats.batch_bytes = static_cast<int64_t>(out->size());
  if (residuals != nullptr) residuals->resize(res_used);
  return stats;
}

Status BatchDecoder::Decode(std::span<const uint8_t> batch, DecodedBatch* out) {
  BatchHeader header;
  std::span<const uint8_t> body;
  GEOPS_RETURN_IF_ERROR(OpenBatch(batch, limits_, &header, &scratch_, &body));
  return ParseBody(header, body, out);
}

Status BatchDecoder::ParseBody(const BatchHeader& header, std::span<const uint8_t> body,
                               DecodedBatch* out) {
  const ValueCodec codec = header.codec;
  if (static_cast<uint8_t>(codec) >= kNumValueCodecs) {
    return InvalidArgumentError("batch header: unknown value codec " +
                                std::to_string(static_cast<int>(codec)));
  }
  if (uint64_t{header.chunk_count} * bf::kChunkFixedSize > body.size()) {
    return InvalidArgumentError("batch header: chunk count " + std::to_string(header.chunk_count) +
                                " cannot fit in a body of " + std::to_string(body.size()) +
                                " bytes");
  }
  out->header = header;
  out->body_bytes = static_cast<int64_t>(body.size());
  out->chunks.resize(header.chunk_count);
  ByteReader r(body);
  for (uint32_t c = 0; c < header.chunk_count; ++c) {
    SparseChunkUpdate& u = out->chunks[c];
    uint32_t count = 0;
    uint8_t enc = 0;
    uint32_t index_bytes = 0;
    if (!r.Get(&u.key.table) || !r.Get(&u.key.chunk) || !r.Get(&u.num_elements) || !r.Get(&count) ||
        !r.Get(&enc) || !r.Get(&index_bytes)) {
      return InvalidArgumentError("batch body: chunk " + std::to_string(c) +
                                  " record truncated in its fixed fields");
    }
    const std::string name = ChunkName(c, u.key);
    if (c > 0 && !(out->chunks[c - 1].key < u.key)) {
      return InvalidArgumentError(name +
                                  ": key not after the previous chunk's (unsorted or repeated)");
    }
    if (u.num_elements == 0 || u.num_elements > limits_.max_chunk_elements) {
      return InvalidArgumentError(name + ": num_elements " + std::to_string(u.num_elements) +
                                  " outside [1, " + std::to_string(limits_.max_chunk_elements) +
                                  "]");
    }
    if (count == 0 || count > u.num_elements) {
      return InvalidArgumentError(name + ": value count " + std::to_string(count) +
                                  " outside [1, num_elements " + std::to_string(u.num_elements) +
                                  "]");
    }
    if (enc >= kNumIndexEncodings) {
      return InvalidArgumentError(name + ": unknown index encoding " + std::to_string(enc));
    }
    float scale = 0.0f;
    if (HasScale(codec)) {
      if (!r.Get(&scale)) return InvalidArgumentError(name + ": record truncated in scale");
      if (!(scale > 0.0f) || !std::isfinite(scale)) {
        return InvalidArgumentError(name + ": scale " + std::to_string(scale) +
                                    " is not a positive finite number");
      }
    }
    std::span<const uint8_t> index_in;
    if (!r.Take(index_bytes, &index_in)) {
      return InvalidArgumentError(name + ": index_bytes " + std::to_string(index_bytes) +
                                  " runs past the body end");
    }
    const uint64_t value_bytes = ValueBytes(codec, count);
    std::span<const uint8_t> values_in;
    if (!r.Take(value_bytes, &values_in)) {
      return InvalidArgumentError(name + ": " + std::to_string(count) + " values (" +
                                  std::to_string(value_bytes) + " bytes) run past the body end");
    }
    u.indices.resize(count);
    u.values.resize(count);
    Status s = DecodeIndex(static_cast<IndexEncoding>(enc), index_in, u.num_elements, u.indices);
    if (!s.ok()) return s.WithContext(name);
    int64_t bad = -1;
    switch (codec) {
      case ValueCodec::kFp32:
        bad = DecodeFp32(values_in.data(), count, u.values.data());
        break;
      case ValueCodec::kFp16:
        bad = DecodeFp16(values_in.data(), count, u.values.data());
        break;
      case ValueCodec::kInt8:
        bad = DecodeInt8(values_in.data(), count, scale, u.values.data());
        break;
      case ValueCodec::kSign:
        if (count % 8 != 0 && (values_in.back() >> (count % 8)) != 0) {
          return InvalidArgumentError(name + ": sign bits set beyond the value count");
        }
        bad = DecodeSign(values_in.data(), count, scale, u.values.data());
        break;
    }
    if (bad >= 0) {
      return InvalidArgumentError(name + ": value " + std::to_string(bad) +
                                  " is not a finite number (or an invalid code)");
    }
  }
  if (r.remaining() != 0) {
    return InvalidArgumentError("batch body: " + std::to_string(r.remaining()) +
                                " trailing bytes after " + std::to_string(header.chunk_count) +
                                " chunks");
  }
  return Status::Ok();
}

}  // namespace geops::wan
